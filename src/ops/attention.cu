/* attention.cu — flash-attention forward on Hopper (meld_attention): the compute core of the
 * ring attention (DESIGN.md section 7): one GPU (meld_attention), and the K/V parts of the ring
 * as segments (meld_ring_attention, below).
 *
 * One CTA per (128-query tile, head, batch); 384 threads:
 *   warpgroup 0  producer (setmaxnreg 40): one thread loads the Q tile once, then the K and V
 *                blocks of 128 keys by TMA into a 3-stage ring (K and V with their own full
 *                barriers, so S = Q K^T starts before V lands);
 *   warpgroups 1, 2  consumers (setmaxnreg 232): 64 queries each. Per K/V block:
 *                S = Q K^T (8 x wgmma m64n128k16, both operands from shared memory, K-major),
 *                mask (causal diagonal, keys past seq_kv), the online softmax in the log2
 *                domain (row max over the 4 lanes that share a row, rescale of O and of the
 *                running sum), P to bf16 in registers (the accumulator layout of S is the
 *                A-register layout of P), O += P V (8 x wgmma m64n128k16 RS, V MN-major:
 *                imm-trans-b 1, LBO 8192 between the two 64-wide halves of head_dim, +2048 B per
 *                16 keys: the layout the GEMM engine's B [K,N] verified).
 *   Epilogue: O / l rounded to bf16 straight from registers; LSE = m ln 2 + ln l.
 * Shared memory: Q 32 KB + 3 x (K 32 KB + V 32 KB) = 224 KB (+ barriers, 1 KB alignment).
 * Variants (MELD_ATTN_PIPE): 2 (default) FA3's intra-warpgroup overlap (block j's softmax
 * while block j - 1's PV runs, 3 stages) with the two warpgroups taking turns to issue
 * (ping-pong); 1 the overlap alone; 0 all in series (2 stages). docs/perf-notes.md "Session 29". */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn_plan.h"
#include "comm.h"
#include "common/proto.h"
#include "device/launch.cuh"
#include "device/ptx_async.cuh"
#include "device/signal.cuh"
#include "error.h"
#include "log.h"
#include "proto.h"

#define ATTN_RING_MAX_RANKS 64

/* Kernel modes: 0 one K/V segment (meld_attention), 1 the gathered ring (P segments of one
 * 5-D map, segment = source rank), 2 the fused ring (persistent; step 0 = own K/V in place by
 * the 4-D maps, step i >= 1 = staging segment i - 1, waited for chunk by chunk). */
#define ATTN_SINGLE 0
#define ATTN_GATHERED 1
#define ATTN_FUSED 2
#define ATTN_PERSIST 3 /* one segment as ATTN_SINGLE, persistent CTAs (MELD_ATTN_PERSIST=1, opt-in) */
#define ATTN_MS(MODE) ((MODE) == ATTN_GATHERED || (MODE) == ATTN_FUSED) /* segment iterator */

/* The fused ring's kernel arguments (__grid_constant__, with the comm's meld_proto_dev_t). */
typedef struct {
  attn_params_t p;  /* the launch's heads; positions, ring order, maps (own K/V 4-D, staging 5-D) */
  int32_t rank, nranks, comm_ctas, handshake_only;
  int32_t diag;     /* MELD_RING_ATTN_DIAG bit 0 (timing only, WRONG RESULTS): no pushes, no waits */
  uint32_t arg_hash;
  int32_t nk, chunk_tokens, token_chunks, heads_kv_all; /* launch's K/V heads, chunking            */
  uint32_t chunks, items; /* chunks a rank pushes (batch x nk x token_chunks); work items          */
  const uint8_t *k, *v;   /* this rank's K and V (dense [batch, seq, heads_kv_all, 128])          */
  uint8_t *stage[ATTN_RING_MAX_RANKS]; /* rank r's staging as mapped here: K of P - 1 parts, then V */
  int64_t stage_v;        /* bytes from a staging's K to its V                                    */
} attn_ring_kargs_t;

#define ATTN_THREADS 384
#define ATTN_Q_BYTES (ATTN_BM * ATTN_D * 2)  /* 32 KB */
#define ATTN_KV_BYTES (ATTN_BN * ATTN_D * 2) /* 32 KB each of K and V */
#define ATTN_K_OFF(s) (ATTN_Q_BYTES + (s) * 2 * ATTN_KV_BYTES)
#define ATTN_V_OFF(s) (ATTN_K_OFF(s) + ATTN_KV_BYTES)
/* barriers after the last stage: q_full, then k_full[ST], v_full[ST], empty[ST] (8 B each), then
 * (the fused ring's persistent CTAs) q_empty and two work-item cells */
#define ATTN_BAR_OFF(ST) (ATTN_Q_BYTES + (ST) * 2 * ATTN_KV_BYTES)
#define ATTN_KF(ST, s) (8 + 8 * (s))
#define ATTN_VF(ST, s) (8 + 8 * (ST) + 8 * (s))
#define ATTN_EM(ST, s) (8 + 16 * (ST) + 8 * (s))
#define ATTN_QE(ST) (8 + 24 * (ST))
#define ATTN_ITEM(ST, k) (16 + 24 * (ST) + 4 * ((k) & 1))
#define ATTN_FAIL(ST) (24 + 24 * (ST)) /* u32 kind (MELD_WAIT_*), signal index, source rank */
#define ATTN_SMEM_BYTES(ST) (ATTN_BAR_OFF(ST) + 40 + 24 * (ST) + 1024)

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ATTN_DEV static __device__ __forceinline__

ATTN_DEV uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi); /* .x = lo: the lower 16 bits */
  return *reinterpret_cast<uint32_t *>(&v);
}

/* 2^x, the SFU's approximation (flush-to-zero; 2^-inf = 0). */
ATTN_DEV float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/* Keeps the 32 registers of P (the A operand of an RS wgmma in flight) alive and in place up to
 * this point: the compiler does not know the wgmma still reads them after its asm statement. */
ATTN_DEV void pin_p32(uint32_t *P) {
  asm volatile("" : "+r"(P[0]), "+r"(P[1]), "+r"(P[2]), "+r"(P[3]), "+r"(P[4]), "+r"(P[5]), "+r"(P[6]), "+r"(P[7]),
               "+r"(P[8]), "+r"(P[9]), "+r"(P[10]), "+r"(P[11]), "+r"(P[12]), "+r"(P[13]), "+r"(P[14]), "+r"(P[15]),
               "+r"(P[16]), "+r"(P[17]), "+r"(P[18]), "+r"(P[19]), "+r"(P[20]), "+r"(P[21]), "+r"(P[22]), "+r"(P[23]),
               "+r"(P[24]), "+r"(P[25]), "+r"(P[26]), "+r"(P[27]), "+r"(P[28]), "+r"(P[29]), "+r"(P[30]), "+r"(P[31])
               :
               : "memory");
}

/* The K/V block iterator, specialized: MS false (one segment: meld_attention) is the plain
 * block counter of the first version (the general iterator cost 1-5% there, session 29 call 8);
 * MS true walks the ring's segments. */
template <bool MS>
ATTN_DEV int attn_next(const attn_params_t *p, int qt, attn_iter_t *it) {
  if (!MS) return ++it->j < it->je;
  return attn_iter_next(p, qt, it);
}
template <bool MS>
ATTN_DEV int64_t attn_pos0(const attn_params_t *p, const attn_iter_t *it) {
  return MS ? attn_iter_pos0(p, it) : p->kv_pos0;
}

/* Q of (qt, h, b) into its buffer (q_full; its phase completes when the bytes land). */
ATTN_DEV void attn_load_q(const attn_params_t *p, uint32_t sb, uint32_t bar, int qt, int h, int b) {
  mbarrier_arrive_expect_tx_cta(bar, ATTN_Q_BYTES);
  for (int half = 0; half < 2; half++)
    tma_load_4d(sb + half * (ATTN_Q_BYTES / 2), &p->map_q, bar, 64 * half, p->h_base + h, qt * ATTN_BM, b);
}

/* K/V block *itr of K/V head hk, batch b, into stage g % ST (g: the CTA's block count), once the
 * consumers have released the stage. */
template <int ST, int MODE>
ATTN_DEV void attn_load_kv(const attn_params_t *p, uint32_t sb, uint32_t g, const attn_iter_t *itr, int hk, int b) {
  const uint32_t bar = sb + ATTN_BAR_OFF(ST);
  const int s = (int)(g % ST);
  if (g >= ST) mbar_wait(bar + ATTN_EM(ST, s), (g / ST - 1) & 1);
  const int kv0 = itr->j * ATTN_BN;
  const int step = attn_seg_step(p, itr->s);
  const bool own = !ATTN_MS(MODE) || (MODE == ATTN_FUSED && step == 0); /* 4-D maps */
  const CUtensorMap *mk = MODE == ATTN_FUSED && !own ? &p->map_ks : &p->map_k;
  const CUtensorMap *mv = MODE == ATTN_FUSED && !own ? &p->map_vs : &p->map_v;
  const int seg = MODE == ATTN_GATHERED ? attn_seg_src(p, step) : step - 1;
  const int hc = own ? p->hk_base + hk : hk;
  mbarrier_arrive_expect_tx_cta(bar + ATTN_KF(ST, s), ATTN_KV_BYTES);
  for (int half = 0; half < 2; half++) {
    const uint32_t dst = sb + ATTN_K_OFF(s) + half * (ATTN_KV_BYTES / 2);
    if (own) tma_load_4d(dst, mk, bar + ATTN_KF(ST, s), 64 * half, hc, kv0, b);
    else tma_load_5d(dst, mk, bar + ATTN_KF(ST, s), 64 * half, hc, kv0, b, seg);
  }
  mbarrier_arrive_expect_tx_cta(bar + ATTN_VF(ST, s), ATTN_KV_BYTES);
  for (int kb = 0; kb < 2; kb++)
    for (int db = 0; db < 2; db++) {
      const uint32_t dst = sb + ATTN_V_OFF(s) + kb * 16384 + db * 8192;
      if (own) tma_load_4d(dst, mv, bar + ATTN_VF(ST, s), 64 * db, hc, kv0 + 64 * kb, b);
      else tma_load_5d(dst, mv, bar + ATTN_VF(ST, s), 64 * db, hc, kv0 + 64 * kb, b, seg);
    }
}

/* Modes 0 and 1: one work item, Q then every K/V block. */
template <int ST, int MODE>
ATTN_DEV void attn_producer(const attn_params_t *p, uint32_t sb, int qt, int h, int b) {
  attn_load_q(p, sb, sb + ATTN_BAR_OFF(ST), qt, h, b);
  attn_iter_t itr = {0, 0, 0};
  int more = attn_iter_seek(p, qt, 0, &itr);
  for (uint32_t g = 0; more; g++, more = attn_next<ATTN_MS(MODE)>(p, qt, &itr))
    attn_load_kv<ST, MODE>(p, sb, g, &itr, h / p->group, b);
}

/* The running softmax state of a thread's two rows (row0 and row0 + 8 of its warpgroup's 64). */
typedef struct {
  float m0, m1; /* row max so far, log2 domain (scale folded in); -inf before any visible key */
  float l0, l1; /* this thread's part of the row sums (the 4 lanes of a row are summed at the end) */
} attn_rows_t;

/* S = Q K^T for stage s (8 SS wgmmas over head_dim 128, K-major both), committed, not waited. */
template <int ST>
ATTN_DEV void attn_issue_qk(float *S, uint32_t sb, int wg, int s) {
#pragma unroll
  for (int half = 0; half < 2; half++)
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
      const uint64_t da = wgmma_desc_sw128(sb + half * 16384 + wg * 8192 + kk * 32, 16, 1024);
      const uint64_t db = wgmma_desc_sw128(sb + ATTN_K_OFF(s) + half * 16384 + kk * 32, 16, 1024);
      if (half | kk) wgmma_m64n128k16_ss(S, da, db, 1);
      else wgmma_m64n128k16_ss_zero(S, da, db);
    }
  wgmma_commit();
}

/* O += P V for stage s (8 RS wgmmas over 128 keys; V MN-major), committed, not waited. */
ATTN_DEV void attn_issue_pv(float *O, uint32_t *P, uint32_t sb, int s) {
#pragma unroll
  for (int k = 0; k < 8; k++) {
    const uint64_t dv = wgmma_desc_sw128(sb + ATTN_V_OFF(s) + (k >> 2) * 16384 + (k & 3) * 2048, 8192, 1024);
    wgmma_m64n128k16_rs<1>(O, &P[4 * k], dv, 1);
  }
  wgmma_commit();
}

/* Masks block j of S (MASK: causal diagonal or keys past seq_kv), updates the rows' max and
 * sums, turns S into probabilities packed as bf16 into P (the A-register layout of the PV
 * wgmma), and returns the factors by which the rows' O must be scaled (a0 for row0, a1 for
 * row0 + 8). S itself is only read, and the mask is branch-free: S is a wgmma accumulator, and a
 * non-wgmma (or branch-merged) write to it while the PV wgmma is in flight (PIPE 1) makes ptxas
 * serialize the wgmmas (C7513). */
template <bool MASK, bool MS>
ATTN_DEV void attn_softmax(const attn_params_t *p, const float *Sacc, uint32_t *P, attn_rows_t *st, int qt,
                           const attn_iter_t *itr, int row0, float *a0, float *a1) {
  const int j = itr->j;
  const int l = threadIdx.x & 31;
  const float sl2 = p->scale_log2;
  float S[64];
  if (MASK) {
    const int64_t qp0 = attn_q_base(p, qt) + (int64_t)qt * ATTN_BM + row0;
    const int64_t kp0 = attn_pos0<MS>(p, itr) + (int64_t)j * ATTN_BN;
    const int kv_left = p->seq_kv - j * ATTN_BN;
    const bool causal = p->causal != 0;
#pragma unroll
    for (int r = 0; r < 64; r++) {
      const int col = 8 * (r >> 2) + 2 * (l & 3) + (r & 1);
      const int64_t qp = qp0 + 8 * ((r >> 1) & 1);
      const bool bad = (col >= kv_left) | (causal & (kp0 + col > qp));
      S[r] = bad ? -INFINITY : Sacc[r];
    }
  } else {
#pragma unroll
    for (int r = 0; r < 64; r++) S[r] = Sacc[r];
  }
  float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
  for (int r = 0; r < 64; r++) {
    if ((r >> 1) & 1) mx1 = fmaxf(mx1, S[r]);
    else mx0 = fmaxf(mx0, S[r]);
  }
  mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
  mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
  mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
  mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
  const float mn0 = fmaxf(st->m0, mx0 * sl2), mn1 = fmaxf(st->m1, mx1 * sl2);
  /* a row with no visible key so far keeps max -inf: subtract 0 instead (no inf - inf) */
  const float ms0 = mn0 == -INFINITY ? 0.f : mn0, ms1 = mn1 == -INFINITY ? 0.f : mn1;
  *a0 = ex2(st->m0 - ms0);
  *a1 = ex2(st->m1 - ms1);
  st->m0 = mn0;
  st->m1 = mn1;
  float rs0 = 0.f, rs1 = 0.f;
#pragma unroll
  for (int r = 0; r < 64; r++) {
    const int hi = (r >> 1) & 1;
    const float e = ex2(fmaf(S[r], sl2, hi ? -ms1 : -ms0));
    S[r] = e;
    if (hi) rs1 += e;
    else rs0 += e;
  }
  st->l0 = st->l0 * *a0 + rs0;
  st->l1 = st->l1 * *a1 + rs1;
#pragma unroll
  for (int k = 0; k < 8; k++) {
    P[4 * k + 0] = pack_bf16(S[8 * k + 0], S[8 * k + 1]);
    P[4 * k + 1] = pack_bf16(S[8 * k + 2], S[8 * k + 3]);
    P[4 * k + 2] = pack_bf16(S[8 * k + 4], S[8 * k + 5]);
    P[4 * k + 3] = pack_bf16(S[8 * k + 6], S[8 * k + 7]);
  }
}

/* The softmax of the block at *itr, masked where it needs it. */
template <bool MS>
ATTN_DEV void attn_softmax_block(const attn_params_t *p, const float *S, uint32_t *P, attn_rows_t *st, int qt,
                                 const attn_iter_t *itr, int row0, float *a0, float *a1) {
  if (attn_block_masked(p, qt, itr->j, attn_pos0<MS>(p, itr))) attn_softmax<true, MS>(p, S, P, st, qt, itr, row0, a0, a1);
  else attn_softmax<false, MS>(p, S, P, st, qt, itr, row0, a0, a1);
}

ATTN_DEV void attn_scale_o(float *O, float a0, float a1) {
#pragma unroll
  for (int r = 0; r < 64; r++) O[r] *= ((r >> 1) & 1) ? a1 : a0;
}

/* O / l to bf16 straight from registers, and the LSE. */
ATTN_DEV void attn_store(const attn_params_t *p, const float *O, attn_rows_t *st, int qt, int h, int b, int row0) {
  const int l = threadIdx.x & 31;
  float l0 = st->l0, l1 = st->l1;
  l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
  l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
  const float inv0 = l0 > 0.f ? 1.f / l0 : 0.f, inv1 = l1 > 0.f ? 1.f / l1 : 0.f;
  const int q0 = qt * ATTN_BM + row0;
  const int hg = p->h_base + h; /* the call's head */
  __nv_bfloat16 *o = (__nv_bfloat16 *)p->o + (int64_t)hg * ATTN_D;
#pragma unroll
  for (int hi = 0; hi < 2; hi++) {
    const int q = q0 + 8 * hi;
    if (q >= p->seq_q) continue;
    const float inv = hi ? inv1 : inv0;
    uint32_t *dst = (uint32_t *)(o + ((int64_t)b * p->seq_q + q) * p->stride_o);
#pragma unroll
    for (int c = 0; c < 16; c++) {
      const int r = 4 * c + 2 * hi;
      dst[(8 * c + 2 * (l & 3)) >> 1] = pack_bf16(O[r] * inv, O[r + 1] * inv);
    }
    if (p->lse && (l & 3) == 0) {
      const float lsum = hi ? l1 : l0, m = hi ? st->m1 : st->m0;
      p->lse[((int64_t)b * p->heads_all + hg) * p->seq_q + q] =
          lsum > 0.f ? m * 0.69314718055994531f + logf(lsum) : -INFINITY;
    }
  }
}

/* PIPE 2 (FA3's ping-pong): the two consumer warpgroups take turns to issue their wgmmas, so
 * one's softmax runs while the other's wgmmas use the tensor cores. Named barrier 8 + w is
 * warpgroup w's turn: it syncs there before issuing and then arrives at the other's. Both issue
 * at the same number of points (same K/V blocks), warpgroup 1 lets 0 start and skips its last
 * arrival, so no arrival is left pending at exit. */
#define ATTN_TURN_BAR 8
ATTN_DEV void attn_turn_wait(int pp, int wg) {
  if (pp) named_bar_sync(ATTN_TURN_BAR + wg, 256);
}
ATTN_DEV void attn_turn_pass(int pp, int wg, int last) {
  if (pp && !(wg == 1 && last)) named_bar_arrive(ATTN_TURN_BAR + (wg ^ 1), 256);
}

/* PIPE 1, the block at *itr, the CTA's g-th (not its item's first): S of this block and PV of
 * the previous one are issued together; this block's softmax (into Pnext) runs while PV (reading
 * Pcur) is in flight; then the previous stage is released and O rescaled to this block's max. */
template <int ST, int PP, bool MS>
ATTN_DEV void attn_pipe_step(const attn_params_t *p, uint32_t sb, int wg, int qt, const attn_iter_t *itr, uint32_t g,
                             int row0, float *S, float *O, uint32_t *Pcur, uint32_t *Pnext, attn_rows_t *st) {
  const uint32_t bar = sb + ATTN_BAR_OFF(ST);
  const int s = (int)(g % ST), sp = (int)((g - 1) % ST);
  mbar_wait(bar + ATTN_KF(ST, s), (g / ST) & 1);
  mbar_wait(bar + ATTN_VF(ST, sp), ((g - 1) / ST) & 1); /* landed with K j - 1 */
  attn_turn_wait(PP, wg);
  wgmma_fence();
  attn_issue_qk<ST>(S, sb, wg, s);
  attn_issue_pv(O, Pcur, sb, sp);
  attn_turn_pass(PP, wg, 0);
  wgmma_wait1(); /* S is done; PV j - 1 may still run */
  wgmma_fence_acc64(S);
  float a0, a1;
  attn_softmax_block<MS>(p, S, Pnext, st, qt, itr, row0, &a0, &a1);
  wgmma_wait0();
  wgmma_fence_acc64(O);
  pin_p32(Pcur);
  if ((threadIdx.x & 127) == 0) mbar_arrive(bar + ATTN_EM(ST, sp));
  attn_scale_o(O, a0, a1);
}

/* PIPE 1: the PV of the item's last block (the CTA's g-th), from P. */
template <int ST, int PP>
ATTN_DEV void attn_last_pv(uint32_t sb, int wg, uint32_t g, float *O, uint32_t *P) {
  const uint32_t bar = sb + ATTN_BAR_OFF(ST);
  const int sp = (int)(g % ST);
  mbar_wait(bar + ATTN_VF(ST, sp), (g / ST) & 1);
  attn_turn_wait(PP, wg);
  wgmma_fence();
  attn_issue_pv(O, P, sb, sp);
  attn_turn_pass(PP, wg, 1);
  wgmma_wait0();
  wgmma_fence_acc64(O);
  pin_p32(P);
  if ((threadIdx.x & 127) == 0) mbar_arrive(bar + ATTN_EM(ST, sp));
}

/* The fused ring's persistent CTAs: this warpgroup is done reading Q (its last S has completed),
 * so the producer may load the next item's Q. Once per item and warpgroup. */
template <int ST, int MODE>
ATTN_DEV void attn_q_release(uint32_t sb) {
  if ((MODE == ATTN_FUSED || MODE == ATTN_PERSIST) && (threadIdx.x & 127) == 0)
    mbar_arrive(sb + ATTN_BAR_OFF(ST) + ATTN_QE(ST));
}

/* One consumer warpgroup (wg 0 or 1: queries 64 wg .. 64 wg + 63 of the tile), one work item of
 * n blocks whose Q has landed; g0 = the CTA's blocks before this item (stages and phases).
 * PIPE 0: per block S, softmax, PV, each waited for before the next.
 * PIPE 1 (FA3's intra-warpgroup overlap): S of block j and PV of block j - 1 are issued
 * together; the softmax of block j runs while PV j - 1 is in flight; O is rescaled after it.
 * PIPE 2: PIPE 1 with the two warpgroups taking turns to issue (ping-pong). */
template <int ST, int PIPE, int MODE>
ATTN_DEV void attn_consumer(const attn_params_t *p, uint32_t sb, int wg, int qt, int h, int b, int n, uint32_t g0) {
  constexpr bool MS = ATTN_MS(MODE);
  const uint32_t bar = sb + ATTN_BAR_OFF(ST);
  const int t = threadIdx.x & 127, w = t >> 5, l = t & 31;
  const int row0 = 64 * wg + 16 * w + (l >> 2); /* this thread's rows in the tile: row0, row0 + 8 */
  float S[64], O[64];
  uint32_t P[32];
  attn_rows_t st = {-INFINITY, -INFINITY, 0.f, 0.f};
#pragma unroll
  for (int i = 0; i < 64; i++) O[i] = 0.f;
  attn_iter_t itr = {0, 0, 0}; /* the block whose softmax is next */
  attn_iter_seek(p, qt, 0, &itr);
  float a0, a1;
  if (!PIPE) {
    for (int it = 0; it < n; it++, attn_next<MS>(p, qt, &itr)) {
      const uint32_t g = g0 + (uint32_t)it;
      const int s = (int)(g % ST);
      const uint32_t ph = (g / ST) & 1;
      mbar_wait(bar + ATTN_KF(ST, s), ph);
      wgmma_fence();
      attn_issue_qk<ST>(S, sb, wg, s);
      wgmma_wait0();
      wgmma_fence_acc64(S);
      if (it == n - 1) attn_q_release<ST, MODE>(sb);
      attn_softmax_block<MS>(p, S, P, &st, qt, &itr, row0, &a0, &a1);
      attn_scale_o(O, a0, a1);
      mbar_wait(bar + ATTN_VF(ST, s), ph);
      wgmma_fence();
      attn_issue_pv(O, P, sb, s);
      wgmma_wait0();
      wgmma_fence_acc64(O);
      pin_p32(P);
      if (t == 0) mbar_arrive(bar + ATTN_EM(ST, s));
    }
    if (n <= 0) attn_q_release<ST, MODE>(sb);
  } else if (n > 0) {
    constexpr int PP = PIPE == 2;
    if (PP && wg == 1) named_bar_arrive(ATTN_TURN_BAR, 256); /* warpgroup 0 issues first */
    mbar_wait(bar + ATTN_KF(ST, g0 % ST), (g0 / ST) & 1);
    attn_turn_wait(PP, wg);
    wgmma_fence();
    attn_issue_qk<ST>(S, sb, wg, (int)(g0 % ST));
    attn_turn_pass(PP, wg, 0);
    wgmma_wait0();
    wgmma_fence_acc64(S);
    attn_softmax_block<MS>(p, S, P, &st, qt, &itr, row0, &a0, &a1); /* O is 0: no scaling */
    /* two P buffers that swap roles each step (no copy: a copied P would share registers with
     * the one the PV wgmma in flight still reads) */
    uint32_t P2[32];
    int it = 1;
    for (; it + 1 < n; it += 2) {
      attn_next<MS>(p, qt, &itr);
      attn_pipe_step<ST, PP, MS>(p, sb, wg, qt, &itr, g0 + it, row0, S, O, P, P2, &st);
      attn_next<MS>(p, qt, &itr);
      attn_pipe_step<ST, PP, MS>(p, sb, wg, qt, &itr, g0 + it + 1, row0, S, O, P2, P, &st);
    }
    if (it < n) {
      attn_next<MS>(p, qt, &itr);
      attn_pipe_step<ST, PP, MS>(p, sb, wg, qt, &itr, g0 + it, row0, S, O, P, P2, &st);
      attn_q_release<ST, MODE>(sb);
      attn_last_pv<ST, PP>(sb, wg, g0 + n - 1, O, P2);
    } else {
      attn_q_release<ST, MODE>(sb);
      attn_last_pv<ST, PP>(sb, wg, g0 + n - 1, O, P);
    }
  } else {
    attn_q_release<ST, MODE>(sb);
  }
  attn_store(p, O, &st, qt, h, b, row0);
}

/* Barrier inits of the CTA (one thread). */
template <int ST>
ATTN_DEV void attn_init_bars(const attn_params_t *p, uint32_t sb) {
  const uint32_t bar = sb + ATTN_BAR_OFF(ST);
  mbarrier_init_cta(bar, 1); /* q_full */
  for (int s = 0; s < ST; s++) {
    mbarrier_init_cta(bar + ATTN_KF(ST, s), 1);
    mbarrier_init_cta(bar + ATTN_VF(ST, s), 1);
    mbarrier_init_cta(bar + ATTN_EM(ST, s), 2); /* one arrival per consumer warpgroup */
  }
  mbarrier_init_cta(bar + ATTN_QE(ST), 2); /* q_empty: likewise */
  st_shared_u32(bar + ATTN_FAIL(ST), 0u);
  fence_mbar_init();
  prefetch_tensormap(&p->map_q);
  prefetch_tensormap(&p->map_k);
  prefetch_tensormap(&p->map_v);
}
#endif

/* PIPE 0: 2 stages; PIPE 1 and 2: 3 stages (block j + 1's K must load while block j - 1's
 * stage is still read by its PV). MODE: ATTN_SINGLE or ATTN_GATHERED (one CTA per work item). */
template <int PIPE, int MODE>
__global__ void __launch_bounds__(ATTN_THREADS, 1) attn_fwd_kernel(const __grid_constant__ attn_params_t p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int ST = PIPE ? 3 : 2;
  extern __shared__ __align__(1024) uint8_t attn_smem[];
  const uint32_t raw = smem_addr(attn_smem);
  const uint32_t sb = (raw + 1023u) & ~1023u;
  int qt, h, b;
  attn_work_of(&p, blockIdx.x, &qt, &h, &b);
  const int n = attn_iter_count(&p, qt);
  const int wg = threadIdx.x >> 7;
  if (threadIdx.x == 0) attn_init_bars<ST>(&p, sb);
  __syncthreads();
  if (wg == 0) {
    setmaxnreg_dec_40();
    if (threadIdx.x == 0) attn_producer<ST, MODE>(&p, sb, qt, h, b);
  } else {
    setmaxnreg_inc_232();
    mbar_wait(sb + ATTN_BAR_OFF(ST), 0); /* Q */
    attn_consumer<ST, PIPE, MODE>(&p, sb, wg - 1, qt, h, b, n, 0);
  }
#endif
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* ---- the fused ring (ATTN_FUSED) ------------------------------------------------------------ */

/* Comm role (the first comm_ctas CTAs to start; all threads): pushes this rank's K and V, chunk
 * by chunk, into every peer's staging: chunk ch = (batch, K/V head of the launch, token range)
 * goes to ranks me + 1, me + 2, ... (the order in which their ring steps need it), at the
 * segment of ring step t = dst - me (mod P): segment t - 1. Then one release of the stamp
 * (epoch, 1) into the peer's signal slot (me, ch). 16-byte copies (a token's 256 bytes of one
 * head are a row: 16 vectors), 4 loads in flight a thread; bar.sync orders every thread's
 * stores before thread 0's release (cumulative). Not inlined: its registers stay out of the
 * attention's budget. */
__device__ __noinline__ void attn_ring_push(meld_ctx_t ctx_v, const attn_ring_kargs_t *a) {
  meld_ctx_t *ctx = &ctx_v;
  const int P = a->nranks, me = a->rank, nk = a->nk, tcs = a->token_chunks, ct = a->chunk_tokens;
  const int64_t seq = a->p.seq_kv, B = a->p.batch;
  const int64_t src_ld = (int64_t)a->heads_kv_all * 256, dst_ld = (int64_t)nk * 256; /* bytes between tokens */
  const int64_t items = (int64_t)a->chunks * (P - 1);
  for (int64_t i = ctx->ticket; i < items; i += a->comm_ctas) {
    const uint32_t ch = (uint32_t)(i / (P - 1));
    const int t = 1 + (int)(i % (P - 1));
    const int dst = (me + t) % P;
    const int tc = (int)(ch % tcs), hk = (int)((ch / tcs) % nk), b = (int)(ch / tcs / nk);
    const int64_t t0 = (int64_t)tc * ct;
    const int rows = (int)min((int64_t)ct, seq - t0);
    const int64_t tok = (int64_t)b * seq + t0; /* the chunk's first token among the batches */
    const uint8_t *ks = a->k + tok * src_ld + (int64_t)(a->p.hk_base + hk) * 256;
    const uint8_t *vs = a->v + tok * src_ld + (int64_t)(a->p.hk_base + hk) * 256;
    uint8_t *kd = a->stage[dst] + (((int64_t)(t - 1) * B * seq + tok) * nk + hk) * 256;
    uint8_t *vd = kd + a->stage_v;
    const int nv = rows * 16; /* vectors of K (and of V) */
    constexpr int U = 4;
    for (int v0 = threadIdx.x; v0 < 2 * nv; v0 += U * (int)blockDim.x) {
      int4 x[U];
#pragma unroll
      for (int u = 0; u < U; u++) {
        const int v = v0 + u * (int)blockDim.x;
        if (v < 2 * nv) {
          const int w = v < nv ? v : v - nv, r = w >> 4, c = w & 15;
          x[u] = *(const int4 *)((v < nv ? ks : vs) + r * src_ld + c * 16);
        }
      }
#pragma unroll
      for (int u = 0; u < U; u++) {
        const int v = v0 + u * (int)blockDim.x;
        if (v < 2 * nv) {
          const int w = v < nv ? v : v - nv, r = w >> 4, c = w & 15;
          *(int4 *)((v < nv ? kd : vd) + r * dst_ld + c * 16) = x[u];
        }
      }
    }
    __syncthreads();
    if (threadIdx.x == 0)
      meld_signal_put(ctx, dst, meld_signal_index(me, P, 0, ch, a->chunks), meld_stamp(ctx->epoch, 1));
  }
}

/* The producer of a persistent CTA (thread 0). MODE ATTN_FUSED (the fused ring): takes work items
 * from queue 0 until none is left; per item its K/V blocks (before a peer's block, the wait for its chunk's signal,
 * then the proxy fence: the rows were written by generic stores, TMA reads them), and its Q
 * once the consumers have released the previous item's (q_empty). The item goes to the
 * consumers through a cell of shared memory published by the q_full arrival (release); -1 ends.
 * The waits are the raw guards (40 registers here; no ctx): a failed one (timeout, abort) leaves
 * its outcome in the CTA's fail cells for the exit to record; the producer goes on loading
 * (whatever the staging holds) so that the consumers drain, and waits no more.
 * MODE ATTN_PERSIST (one GPU): items blockIdx.x, + gridDim.x, ... of `items`, no waits (proto and
 * a unused). */
template <int ST, int MODE>
ATTN_DEV void attn_persist_producer(const attn_params_t *p, uint32_t items, const meld_proto_dev_t *proto,
                                    const attn_ring_kargs_t *a, uint64_t epoch, uint32_t sb) {
  const uint32_t bar = sb + ATTN_BAR_OFF(ST);
  uint32_t g = 0;
  for (uint32_t k = 0;; k++) {
    const uint32_t item = MODE == ATTN_FUSED ? atom_add_relaxed_gpu_u32((uint32_t *)(proto->pad + MELD_PAD_OFF_QUEUES), 1u)
                                             : blockIdx.x + k * gridDim.x;
    const bool end = item >= items;
    st_shared_u32(bar + ATTN_ITEM(ST, k), end ? 0xffffffffu : item);
    if (end) {
      if (k) mbar_wait(bar + ATTN_QE(ST), (k - 1) & 1);
      mbar_arrive(bar);
      return;
    }
    int qt, h, b;
    attn_work_of(p, item, &qt, &h, &b);
    const int hk = h / p->group;
    attn_iter_t itr = {0, 0, 0};
    int more = attn_iter_seek(p, qt, 0, &itr);
    bool q_done = false;
    /* the (step, chunk) last waited for, as step << 20 | chunk (chunks of a launch < 2^18: the
     * signal slots); one register, as is the failure flag kept in shared memory (the producer
     * has 40) */
    uint32_t wkey = 0xffffffffu;
    for (; more; g++, more = attn_next<ATTN_MS(MODE)>(p, qt, &itr)) {
      const int step = attn_seg_step(p, itr.s);
      if (MODE == ATTN_FUSED && step > 0 && !(a->diag & 1)) {
        const int chunk = (b * a->nk + hk) * a->token_chunks + itr.j * ATTN_BN / a->chunk_tokens;
        const uint32_t key = (uint32_t)step << 20 | (uint32_t)chunk;
        if (key != wkey && ld_shared_u32(bar + ATTN_FAIL(ST)) == 0u) {
          const int src = attn_seg_src(p, step);
          const uint32_t idx = meld_signal_index(src, a->nranks, 0, (uint32_t)chunk, a->chunks);
          uint64_t seen;
          const int w = meld_wait_ge_raw((const uint64_t *)(proto->pad + meld_pad_signal_offset(idx)),
                                         meld_stamp(epoch, 1), meld_abort_word(proto), proto->timeout_ns, &seen);
          if (w == MELD_WAIT_DONE) {
            fence_proxy_async_gmem();
          } else {
            st_shared_u32(bar + ATTN_FAIL(ST) + 4, idx);
            st_shared_u32(bar + ATTN_FAIL(ST) + 8, (uint32_t)src);
            st_shared_u32(bar + ATTN_FAIL(ST), (uint32_t)w);
          }
          wkey = key;
        }
      }
      attn_load_kv<ST, MODE>(p, sb, g, &itr, hk, b);
      if (!q_done) {
        if (k) mbar_wait(bar + ATTN_QE(ST), (k - 1) & 1);
        attn_load_q(p, sb, bar, qt, h, b);
        q_done = true;
      }
    }
    if (!q_done) {
      if (k) mbar_wait(bar + ATTN_QE(ST), (k - 1) & 1);
      attn_load_q(p, sb, bar, qt, h, b);
    }
  }
}

/* The consumer warpgroups of a persistent CTA: the producer's items, in turn, until the end mark. */
template <int ST, int PIPE, int MODE>
ATTN_DEV void attn_persist_consumer(const attn_params_t *p, uint32_t sb, int wg) {
  const uint32_t bar = sb + ATTN_BAR_OFF(ST);
  uint32_t g0 = 0;
  for (uint32_t k = 0;; k++) {
    mbar_wait(bar, k & 1);
    const uint32_t item = ld_shared_u32(bar + ATTN_ITEM(ST, k));
    if (item == 0xffffffffu) return;
    int qt, h, b;
    attn_work_of(p, item, &qt, &h, &b);
    const int n = attn_iter_count(p, qt);
    attn_consumer<ST, PIPE, MODE>(p, sb, wg, qt, h, b, n, g0);
    g0 += (uint32_t)n;
  }
}
#endif

/* The fused ring attention: ONE persistent cooperative kernel a launch (host: attn_ring_fused).
 * Entry (launch.cuh: epoch, role ticket, argument handshake); the first comm_ctas CTAs push this
 * rank's K/V chunks to the peers, then join; every CTA runs work items from the queue: own part
 * in place first, then the peers' as they land. Exit: the last CTA advances the call counter.
 * Staging reuse: a peer writes our staging in call e + 1 only after its entry saw our post of
 * e + 1, i.e. after our kernel of call e ended (as AG+GEMM's). */
template <int PIPE>
__global__ void __launch_bounds__(ATTN_THREADS, 1)
    attn_ring_kernel(const __grid_constant__ meld_proto_dev_t proto, const __grid_constant__ attn_ring_kargs_t a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int ST = PIPE ? 3 : 2;
  extern __shared__ __align__(1024) uint8_t attn_smem[];
  const uint32_t sb = (smem_addr(attn_smem) + 1023u) & ~1023u;
  const int wg = threadIdx.x >> 7;
  meld_ctx_t ctx;
  const uint32_t ncomm = a.handshake_only ? 0u : (uint32_t)a.comm_ctas;
  if (meld_call_begin(&ctx, &proto, MELD_OP_RING_ATTENTION, a.arg_hash, ncomm) && !a.handshake_only) {
    if (ctx.role == MELD_ROLE_COMM && !(a.diag & 1)) attn_ring_push(ctx, &a);
    if (threadIdx.x == 0) attn_init_bars<ST>(&a.p, sb);
    __syncthreads();
    if (wg == 0) {
      setmaxnreg_dec_40();
      if (threadIdx.x == 0) attn_persist_producer<ST, ATTN_FUSED>(&a.p, a.items, &proto, &a, ctx.epoch, sb);
    } else {
      setmaxnreg_inc_232();
      attn_persist_consumer<ST, PIPE, ATTN_FUSED>(&a.p, sb, wg - 1);
    }
  }
  __syncthreads();
  if (threadIdx.x == 128) { /* a consumer thread (the producer's warpgroup has 40 registers) */
    meld_ctx_t c;
    meld_call_join(&c, &proto, MELD_OP_RING_ATTENTION, a.arg_hash, ncomm);
    const uint32_t bar = sb + ATTN_BAR_OFF(ST);
    const uint32_t w = c.failed ? 0u : ld_shared_u32(bar + ATTN_FAIL(ST));
    if (w == MELD_WAIT_TIMEOUT || w == MELD_WAIT_ABORTED) /* the producer gave up on a chunk */
      meld_fail(&c, w == MELD_WAIT_TIMEOUT ? MELD_FAIL_TIMEOUT : MELD_FAIL_ABORTED,
                meld_wait_info(MELD_REGION_SIGNAL, ld_shared_u32(bar + ATTN_FAIL(ST) + 4),
                               (int)ld_shared_u32(bar + ATTN_FAIL(ST) + 8), "ring attention: K/V chunk"),
                meld_stamp(c.epoch, 1), 0, 0, ld_relaxed_sys_u32(meld_abort_word(&proto)));
    meld_call_end_thread(&c);
  }
#endif
}

/* meld_attention with persistent CTAs (MELD_ATTN_PERSIST=1, opt-in until measured): grid = the
 * SMs, items strided by CTA; Q reloaded per item after the consumers' release, the K/V ring
 * running on across items (the fused ring's CTA loop without its communication). */
template <int PIPE>
__global__ void __launch_bounds__(ATTN_THREADS, 1)
    attn_persist_kernel(const __grid_constant__ attn_params_t p, uint32_t items) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int ST = PIPE ? 3 : 2;
  extern __shared__ __align__(1024) uint8_t attn_smem[];
  const uint32_t sb = (smem_addr(attn_smem) + 1023u) & ~1023u;
  const int wg = threadIdx.x >> 7;
  if (threadIdx.x == 0) attn_init_bars<ST>(&p, sb);
  __syncthreads();
  if (wg == 0) {
    setmaxnreg_dec_40();
    if (threadIdx.x == 0) attn_persist_producer<ST, ATTN_PERSIST>(&p, items, nullptr, nullptr, 0, sb);
  } else {
    setmaxnreg_inc_232();
    attn_persist_consumer<ST, PIPE, ATTN_PERSIST>(&p, sb, wg - 1);
  }
#endif
}

static int g_attn_ready[64];

/* MELD_ATTN_PIPE: 0, 1 or 2 (default). */
static int attn_pipe_variant(void) {
  const char *pipe = getenv("MELD_ATTN_PIPE");
  return pipe && pipe[0] == '0' ? 0 : pipe && pipe[0] == '1' ? 1 : 2;
}

/* Launches the kernel variant MELD_ATTN_PIPE names for a plan with its maps. */
static meld_result_t attn_launch(const attn_params_t *p, int64_t grid, cudaStream_t stream) {
  int dev = 0, major = 0;
  MELD_CUDA_CHECK(cudaGetDevice(&dev));
  MELD_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  if (major != 9)
    return meld_error(MELD_ERR_UNSUPPORTED,
                      "meld_attention: device %d has compute capability %d.x; the kernel needs Hopper (sm_90a)", dev,
                      major);
  typedef void (*kern_t)(attn_params_t);
  /* [multi-segment][pipe] */
  static const kern_t kern[2][3] = {
      {attn_fwd_kernel<0, ATTN_SINGLE>, attn_fwd_kernel<1, ATTN_SINGLE>, attn_fwd_kernel<2, ATTN_SINGLE>},
      {attn_fwd_kernel<0, ATTN_GATHERED>, attn_fwd_kernel<1, ATTN_GATHERED>, attn_fwd_kernel<2, ATTN_GATHERED>}};
  if (dev >= 64 || !g_attn_ready[dev]) {
    for (int ms = 0; ms < 2; ms++)
      for (int v = 0; v < 3; v++)
        MELD_CUDA_CHECK(cudaFuncSetAttribute(kern[ms][v], cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             ATTN_SMEM_BYTES(v ? 3 : 2)));
    if (dev < 64) g_attn_ready[dev] = 1;
  }
  /* MELD_ATTN_PIPE: 2 (default) overlaps each block's softmax with the previous block's PV
   * wgmmas and lets the two warpgroups take turns to issue (ping-pong); 1 without the turns; 0
   * in series (the first version). Session 29, one H200, sustained: 2 vs 1 -0.5..-2.3% at S
   * 4096, -7.3..+2.5% at S 16384 (two calls; geomean ~-1%); 1 vs 0 -2..-17%. */
  const int v = attn_pipe_variant();
  const char *ps = getenv("MELD_ATTN_PERSIST");
  if (p->kv_segs == 1 && ps && ps[0] == '1') {
    static int persist_ready[64];
    static void (*const pk[3])(attn_params_t, uint32_t) = {attn_persist_kernel<0>, attn_persist_kernel<1>,
                                                            attn_persist_kernel<2>};
    if (dev >= 64 || !persist_ready[dev]) {
      for (int i = 0; i < 3; i++)
        MELD_CUDA_CHECK(
            cudaFuncSetAttribute(pk[i], cudaFuncAttributeMaxDynamicSharedMemorySize, ATTN_SMEM_BYTES(i ? 3 : 2)));
      if (dev < 64) persist_ready[dev] = 1;
    }
    int sms = 0;
    MELD_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    const int64_t pg = grid < sms ? grid : sms;
    pk[v]<<<(unsigned)pg, ATTN_THREADS, ATTN_SMEM_BYTES(v ? 3 : 2), stream>>>(*p, (uint32_t)grid);
  } else {
    kern[p->kv_segs > 1][v]<<<(unsigned)grid, ATTN_THREADS, ATTN_SMEM_BYTES(v ? 3 : 2), stream>>>(*p);
  }
  MELD_CUDA_CHECK(cudaGetLastError());
  return MELD_OK;
}

/* One GPU, one K/V segment: plan (validated) and launch; nothing to do for an empty batch. */
static meld_result_t attn_single(const meld_attention_args_t *args, cudaStream_t stream) {
  attn_params_t p;
  int64_t grid = 0;
  MELD_CHECK(attn_args_validate(args));
  if (args->batch == 0 || args->seq_q == 0) return MELD_OK;
  MELD_CHECK(attn_plan_make(args, &p, &grid));
  return attn_launch(&p, grid, stream);
}

extern "C" meld_result_t meld_attention(const meld_attention_args_t *args, cudaStream_t stream) {
  meld_error_clear();
  if (args && args->zigzag)
    return meld_error(MELD_ERR_INVALID_ARG, "meld_attention: zigzag %d (a ring layout: meld_ring_attention only; "
                      "give positions by q_pos0 / kv_pos0)", args->zigzag);
  return attn_single(args, stream);
}

/* MELD_RING_ATTN_DIAG (timing diagnostics, WRONG RESULTS): bit 0 the fused kernel without its
 * pushes and waits (what the kernel costs beside the communication), bit 1 the gathered path
 * without its all-gathers (the gathered kernel alone). */
static int attn_ring_diag(void) {
  const char *d = getenv("MELD_RING_ATTN_DIAG");
  return d ? atoi(d) : 0;
}

/* Rank `me`'s positions in a ring of P (the parts as segments, own part first). */
static void attn_ring_positions(const meld_attention_args_t *args, int P, int me, attn_params_t *p) {
  p->kv_segs = P;
  p->seg_rot = me;
  if (args->zigzag) { /* pieces me and 2P - 1 - me of 2P, each of h tokens */
    const int64_t h = args->seq_q / 2;
    p->zz_half = (int)h;
    p->q_pos0 = (int64_t)me * h;
    p->q_pos1 = (int64_t)(2 * P - 1 - me) * h - h;
  } else {
    p->q_pos0 = (int64_t)me * args->seq_q;
    p->kv_seg_pos = args->seq_kv;
  }
}

/* The gathered ring (unfused; the fallback where one K/V head's staging exceeds the workspace,
 * and MELD_RING_ATTN=unfused for A/B): every rank's K and V are all-gathered into a
 * stream-ordered scratch buffer [rank][batch][seq][heads_kv][head_dim], then ONE attention kernel
 * reads them as P segments, own part first. */
static meld_result_t attn_ring_gathered(meld_comm_t comm, const meld_attention_args_t *args, cudaStream_t stream) {
  const int P = comm->nranks;
  const int64_t dense = args->heads_kv * args->head_dim;
  const size_t elems = (size_t)args->batch * (size_t)args->seq_kv * (size_t)dense;
  const size_t bytes = elems * 2;
  attn_params_t p;
  int64_t grid = 0;
  MELD_CHECK(attn_plan_geometry(args, &p, &grid));
  attn_ring_positions(args, P, comm->rank, &p);
  attn_plan_order(args, &p);
  char *kv = NULL;
  MELD_CUDA_CHECK(cudaMallocAsync((void **)&kv, 2 * (size_t)P * bytes, stream));
  meld_result_t res = MELD_OK;
  if (!(attn_ring_diag() & 2)) { /* (bit 1, timing only, WRONG RESULTS: the kernel alone) */
    res = meld_all_gather(comm, args->k, kv, elems, MELD_BF16, stream);
    if (res == MELD_OK) res = meld_all_gather(comm, args->v, kv + (size_t)P * bytes, elems, MELD_BF16, stream);
  }
  if (res == MELD_OK) res = attn_plan_q_map(args, &p);
  if (res == MELD_OK) res = attn_plan_kv_maps(args, &p, kv, kv + (size_t)P * bytes, dense, dense, P);
  if (res == MELD_OK) res = attn_launch(&p, grid, stream);
  const cudaError_t fe = cudaFreeAsync(kv, stream); /* stream-ordered: after the kernel */
  if (res == MELD_OK && fe != cudaSuccess)
    res = meld_error(MELD_ERR_CUDA, "meld_ring_attention: cudaFreeAsync: %s", cudaGetErrorString(fe));
  return res;
}

static int g_ring_ready[64];

/* The fused ring kernel for the MELD_ATTN_PIPE variant, its attributes set once per device. */
static meld_result_t attn_ring_kernel_of(int dev, const void **fn, size_t *smem) {
  static const void *const kern[3] = {(const void *)attn_ring_kernel<0>, (const void *)attn_ring_kernel<1>,
                                      (const void *)attn_ring_kernel<2>};
  if (dev >= 64 || !g_ring_ready[dev]) {
    for (int v = 0; v < 3; v++)
      MELD_CUDA_CHECK(cudaFuncSetAttribute(kern[v], cudaFuncAttributeMaxDynamicSharedMemorySize, ATTN_SMEM_BYTES(v ? 3 : 2)));
    if (dev < 64) g_ring_ready[dev] = 1;
  }
  const int v = attn_pipe_variant();
  *fn = kern[v];
  *smem = ATTN_SMEM_BYTES(v ? 3 : 2);
  return MELD_OK;
}

/* Launches the fused kernel (grid = every SM of the rank's share: cooperative, all CTAs
 * resident, so CTAs waiting for peers never keep the comm CTAs from running). */
static meld_result_t attn_ring_launch(struct meld_comm *comm, attn_ring_kargs_t *k, cudaStream_t stream) {
  const void *fn = NULL;
  size_t smem = 0;
  MELD_CHECK(attn_ring_kernel_of(comm->device, &fn, &smem));
  int grid = 0;
  MELD_CHECK(meld_coop_grid(fn, ATTN_THREADS, smem, 0, meld_comm_node_sm_count(comm), &grid));
  meld_proto_dev_t proto = meld_proto_dev(comm);
  void *kargs[] = {&proto, k};
  return meld_launch_coop(fn, grid, ATTN_THREADS, smem, kargs, stream);
}

/* Launch l of the fused ring: K/V heads [l * hpl, ...) and their query heads. */
static meld_result_t attn_ring_fill(struct meld_comm *comm, const meld_attention_args_t *args,
                                    const attn_ring_plan_t *rp, int l, attn_ring_kargs_t *k) {
  const int P = comm->nranks, me = comm->rank;
  const int64_t G = args->heads / args->heads_kv, k0 = (int64_t)l * rp->heads_per_launch;
  const int64_t nk = args->heads_kv - k0 < rp->heads_per_launch ? args->heads_kv - k0 : rp->heads_per_launch;
  memset(k, 0, sizeof *k);
  /* the launch's geometry: its heads as if they were all (maps, O and LSE then placed by the
   * head offsets) */
  meld_attention_args_t sub = *args;
  sub.heads = nk * G;
  sub.heads_kv = nk;
  sub.stride_q = args->stride_q ? args->stride_q : args->heads * args->head_dim;
  sub.stride_o = args->stride_o ? args->stride_o : args->heads * args->head_dim;
  sub.stride_k = sub.stride_v = nk * args->head_dim; /* the staging's tokens */
  attn_params_t *p = &k->p;
  int64_t grid = 0;
  MELD_CHECK(attn_plan_geometry(&sub, p, &grid));
  attn_ring_positions(args, P, me, p);
  p->h_base = (int)(k0 * G);
  p->hk_base = (int)k0;
  p->heads_all = (int)args->heads;
  attn_plan_order(&sub, p);
  const int64_t dense = args->heads_kv * args->head_dim;
  MELD_CHECK(attn_plan_q_map(args, p));
  MELD_CHECK(attn_plan_kv_maps_at(args, &p->map_k, &p->map_v, args->k, args->v, dense, dense, args->heads_kv, 1, 4));
  uint8_t *st = (uint8_t *)comm->workspace.local;
  const int64_t seg_bytes = args->batch * args->seq_kv * nk * args->head_dim * 2;
  k->stage_v = (int64_t)(P - 1) * seg_bytes;
  MELD_CHECK(attn_plan_kv_maps_at(&sub, &p->map_ks, &p->map_vs, st, st + k->stage_v, nk * args->head_dim,
                                  nk * args->head_dim, nk, P - 1, 5));
  k->rank = me;
  k->nranks = P;
  k->comm_ctas = rp->comm_ctas;
  k->diag = attn_ring_diag();
  k->nk = (int32_t)nk;
  k->chunk_tokens = rp->chunk_tokens;
  k->token_chunks = rp->token_chunks;
  k->heads_kv_all = (int32_t)args->heads_kv;
  k->chunks = (uint32_t)(args->batch * nk * rp->token_chunks);
  k->items = (uint32_t)grid;
  k->k = (const uint8_t *)args->k;
  k->v = (const uint8_t *)args->v;
  for (int r = 0; r < P; r++) k->stage[r] = (uint8_t *)comm->workspace.peer[r];
  k->stage[me] = st;
  /* what every rank must agree on (the shapes, the launch, the plan) */
  uint64_t h = meld_hash_init();
  const int64_t vals[] = {MELD_OP_RING_ATTENTION, args->batch, args->seq_q, args->seq_kv, args->heads, args->heads_kv,
                          args->causal, args->zigzag, l, nk, rp->chunk_tokens, rp->comm_ctas,
                          attn_pipe_variant()};
  for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) h = meld_hash_u64(h, (uint64_t)vals[i]);
  k->arg_hash = meld_hash_fold(h);
  return MELD_OK;
}

/* A call this rank cannot make must not leave its peers waiting: the entry handshake alone with
 * a hash no valid call has (the peers report the mismatch; as AG+GEMM's). */
static void attn_ring_refuse(struct meld_comm *comm, cudaStream_t stream) {
  if (comm->nranks < 2 || !comm->proto) return;
  attn_ring_kargs_t k;
  memset(&k, 0, sizeof k);
  k.handshake_only = 1;
  k.arg_hash = meld_hash_fold(meld_hash_u64(meld_hash_init(), 0xbad0a77e6ull));
  (void)attn_ring_launch(comm, &k, stream);
}

/* The ring attention: the fused kernel (attn_ring_kernel) in as many launches as the staging
 * needs, or the gathered fallback (plan). */
extern "C" meld_result_t meld_ring_attention(meld_comm_t comm, const meld_attention_args_t *args,
                                             cudaStream_t stream) {
  meld_error_clear();
  const char *fn = "meld_ring_attention";
  if (!comm) return meld_error(MELD_ERR_INVALID_ARG, "%s: comm is NULL", fn);
  if (comm->nnodes > 1)
    return meld_error(MELD_ERR_UNSUPPORTED, "%s: ranks on %d nodes; inter-node ring attention is not supported yet", fn,
                      comm->nnodes);
  MELD_CHECK(meld_proto_sticky_error(comm, fn));
  meld_result_t vr = attn_args_validate(args);
  if (vr == MELD_OK && (args->q_pos0 != 0 || args->kv_pos0 != 0))
    vr = meld_error(MELD_ERR_INVALID_ARG,
                    "%s: q_pos0 %lld / kv_pos0 %lld must be 0 (the ring sets positions: rank r's part starts at r * "
                    "seq_q)", fn, (long long)args->q_pos0, (long long)args->kv_pos0);
  if (vr == MELD_OK && (args->zigzag < 0 || args->zigzag > 1))
    vr = meld_error(MELD_ERR_INVALID_ARG, "%s: zigzag %d is neither 0 nor 1", fn, args->zigzag);
  if (vr == MELD_OK && args->zigzag && args->seq_q % (2 * ATTN_BM))
    vr = meld_error(MELD_ERR_INVALID_ARG, "%s: zigzag needs a part of a multiple of %d tokens (two halves of whole "
                    "%d-query tiles); seq_q is %lld", fn, 2 * ATTN_BM, ATTN_BM, (long long)args->seq_q);
  if (vr == MELD_OK && args->seq_q != args->seq_kv)
    vr = meld_error(MELD_ERR_INVALID_ARG, "%s: seq_q %lld != seq_kv %lld (each rank holds its part of one sequence for "
                    "Q, K and V)", fn, (long long)args->seq_q, (long long)args->seq_kv);
  const int64_t dense = vr == MELD_OK ? args->heads_kv * args->head_dim : 0;
  if (vr == MELD_OK && ((args->stride_k && args->stride_k != dense) || (args->stride_v && args->stride_v != dense)))
    vr = meld_error(MELD_ERR_UNSUPPORTED,
                    "%s: K and V must be dense [batch, seq, heads_kv, head_dim] (stride_k / stride_v 0) today", fn);
  const int P = comm->nranks;
  if (vr == MELD_OK && P > ATTN_RING_MAX_RANKS)
    vr = meld_error(MELD_ERR_UNSUPPORTED, "%s: %d ranks (at most %d)", fn, P, ATTN_RING_MAX_RANKS);
  if (vr == MELD_OK && (uint64_t)args->batch * (uint64_t)args->seq_kv * (uint64_t)dense * 2u * (uint64_t)P >=
                           ((uint64_t)1 << 45))
    vr = meld_error(MELD_ERR_INVALID_ARG, "%s: K of %lld x %lld tokens is too large", fn, (long long)args->batch,
                    (long long)args->seq_kv);
  attn_ring_plan_t rp;
  if (vr == MELD_OK) vr = attn_ring_plan_make(args, P, comm->workspace.bytes, meld_comm_node_sm_count(comm), &rp);
  if (vr != MELD_OK) {
    /* (only the fused path's kernel takes part in a handshake; a rank whose peers run the
     * gathered path's all-gather sees its own mismatch there) */
    if (vr == MELD_ERR_INVALID_ARG || vr == MELD_ERR_UNSUPPORTED) {
      const meld_result_t keep = vr;
      char msg[1024];
      snprintf(msg, sizeof msg, "%s", meld_last_error());
      attn_ring_refuse(comm, stream);
      return meld_error(keep, "%s", msg);
    }
    return vr;
  }
  if (P == 1) return attn_single(args, stream);
  if (args->batch == 0 || args->seq_q == 0) return MELD_OK; /* the same on every rank (collective) */
  if (!rp.fused) {
    MELD_INFO(MELD_SUB_OPS, "%s: gathered path (%s)", fn, rp.why);
    return attn_ring_gathered(comm, args, stream);
  }
  for (int l = 0; l < rp.launches; l++) {
    attn_ring_kargs_t k; /* ~1.5 KB of kernel parameters */
    MELD_CHECK(attn_ring_fill(comm, args, &rp, l, &k));
    meld_result_t r = attn_ring_launch(comm, &k, stream);
    if (r != MELD_OK) {
      meld_error_prefix("%s", fn);
      return r;
    }
  }
  return MELD_OK;
}
