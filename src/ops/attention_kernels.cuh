/* attention_kernels.cuh — the attention's device code for ONE head_dim (ATTN_D, 64 or 128, and
 * the namespace ATTN_NS defined by the including file: attention_d64.cu, attention_d128.cu), so
 * every size below is a constant of the compilation. Host side: attention.cu.
 *
 * One CTA per (128-query tile, head, batch), or persistent CTAs taking such items; 384 threads:
 *   warpgroup 0  producer (setmaxnreg 40): one thread loads the Q tile, then the K and V blocks
 *                of 128 keys by TMA into a 3-stage ring (K and V with their own full barriers, so
 *                S = Q K^T starts before V lands);
 *   warpgroups 1, 2  consumers (setmaxnreg 232): 64 queries each. Per K/V block:
 *                S = Q K^T (ATTN_D / 16 x wgmma m64n128k16, both operands from shared memory,
 *                K-major), mask (causal diagonal, keys past seq_kv), the online softmax in the
 *                log2 domain (row max over the 4 lanes that share a row, rescale of O and of the
 *                running sum), P to bf16 in registers (the accumulator layout of S is the
 *                A-register layout of P), O += P V (8 x wgmma m64n{ATTN_D}k16 RS, V MN-major:
 *                imm-trans-b 1, LBO 8192 between 64-wide halves of head_dim, +2048 B per 16 keys:
 *                the layout the GEMM engine's B [K,N] verified).
 *   Epilogue: O / l rounded to bf16 straight from registers; LSE = m ln 2 + ln l.
 * Shared memory: Q + 3 x (K + V), 32 KB each at head_dim 128 (224 KB), 16 KB at 64 (112 KB)
 * (+ barriers, 1 KB alignment). Variants (MELD_ATTN_PIPE): 2 (default) FA3's intra-warpgroup
 * overlap (block j's softmax while block j - 1's PV runs, 3 stages) with the two warpgroups
 * taking turns to issue (ping-pong); 1 the overlap alone; 0 all in series (2 stages).
 * docs/perf-notes.md "Session 29", "Session 30". */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>

#include "attention_int.h"
#include "common/proto.h"
#include "device/launch.cuh"
#include "device/ptx_async.cuh"
#include "device/signal.cuh"

#if !defined(ATTN_D) || !defined(ATTN_NS)
#error "define ATTN_D (64 or 128) and ATTN_NS before including attention_kernels.cuh"
#endif
static_assert(ATTN_D == 64 || ATTN_D == 128, "ATTN_D is 64 or 128");
#define ATTN_DH (ATTN_D / 64) /* 64-wide (128-byte) halves of head_dim: one swizzle atom each */

namespace ATTN_NS {

#define ATTN_Q_BYTES (ATTN_BM * ATTN_D * 2)  /* 32 KB (head_dim 128), 16 KB (64) */
#define ATTN_KV_BYTES (ATTN_BN * ATTN_D * 2) /* the same, each of K and V */
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
  for (int half = 0; half < ATTN_DH; half++)
    tma_load_4d(sb + half * 16384, &p->map_q, bar, 64 * half, p->h_base + h, qt * ATTN_BM, b);
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
  for (int half = 0; half < ATTN_DH; half++) {
    const uint32_t dst = sb + ATTN_K_OFF(s) + half * 16384;
    if (own) tma_load_4d(dst, mk, bar + ATTN_KF(ST, s), 64 * half, hc, kv0, b);
    else tma_load_5d(dst, mk, bar + ATTN_KF(ST, s), 64 * half, hc, kv0, b, seg);
  }
  mbarrier_arrive_expect_tx_cta(bar + ATTN_VF(ST, s), ATTN_KV_BYTES);
  for (int kb = 0; kb < 2; kb++)
    for (int db = 0; db < ATTN_DH; db++) {
      const uint32_t dst = sb + ATTN_V_OFF(s) + kb * (ATTN_DH * 8192) + db * 8192;
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
  for (int half = 0; half < ATTN_DH; half++)
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
    const uint64_t dv =
        wgmma_desc_sw128(sb + ATTN_V_OFF(s) + (k >> 2) * (ATTN_DH * 8192) + (k & 3) * 2048, 8192, 1024);
    if constexpr (ATTN_D == 128) wgmma_m64n128k16_rs<1>(O, &P[4 * k], dv, 1);
    else wgmma_m64n64k16_rs<1>(O, &P[4 * k], dv, 1);
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
  for (int r = 0; r < ATTN_D / 2; r++) O[r] *= ((r >> 1) & 1) ? a1 : a0;
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
    for (int c = 0; c < ATTN_D / 8; c++) {
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
  wgmma_fence_accN<ATTN_D>(O);
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
  wgmma_fence_accN<ATTN_D>(O);
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
  float S[64], O[ATTN_D / 2];
  uint32_t P[32];
  attn_rows_t st = {-INFINITY, -INFINITY, 0.f, 0.f};
#pragma unroll
  for (int i = 0; i < ATTN_D / 2; i++) O[i] = 0.f;
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
      wgmma_fence_accN<ATTN_D>(O);
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

/* The register split after the role split: producer 40 / math 232 at head_dim 128; 56 / 224 at
 * 64 (its producer spilled in 40; its math, with half the O registers, fits 224). */
ATTN_DEV void attn_regs_producer(void) {
  if constexpr (ATTN_D == 64) setmaxnreg_dec_56();
  else setmaxnreg_dec_40();
}
ATTN_DEV void attn_regs_math(void) {
  if constexpr (ATTN_D == 64) setmaxnreg_inc_224();
  else setmaxnreg_inc_232();
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
    attn_regs_producer();
    if (threadIdx.x == 0) attn_producer<ST, MODE>(&p, sb, qt, h, b);
  } else {
    attn_regs_math();
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
 * (epoch, 1) into the peer's signal slot (me, ch). 16-byte copies (a token's 2 x ATTN_D bytes of
 * one head are a row: ATTN_D / 8 vectors), 4 loads in flight a thread; bar.sync orders every thread's
 * stores before thread 0's release (cumulative). Not inlined: its registers stay out of the
 * attention's budget. */
__device__ __noinline__ void attn_ring_push(meld_ctx_t ctx_v, const attn_ring_kargs_t *a) {
  meld_ctx_t *ctx = &ctx_v;
  const int P = a->nranks, me = a->rank, nk = a->nk, tcs = a->token_chunks, ct = a->chunk_tokens;
  const int64_t seq = a->p.seq_kv, B = a->p.batch;
  constexpr int RB = 2 * ATTN_D, RV = ATTN_D / 8; /* a row's bytes and 16-byte vectors */
  const int64_t dst_ld = (int64_t)nk * RB; /* bytes between the staging's tokens */
  const int64_t items = (int64_t)a->chunks * (P - 1);
  for (int64_t i = ctx->ticket; i < items; i += a->comm_ctas) {
    const uint32_t ch = (uint32_t)(i / (P - 1));
    const int t = 1 + (int)(i % (P - 1));
    const int dst = (me + t) % P;
    const int tc = (int)(ch % tcs), hk = (int)((ch / tcs) % nk), b = (int)(ch / tcs / nk);
    const int64_t t0 = (int64_t)tc * ct;
    const int rows = (int)min((int64_t)ct, seq - t0);
    const int64_t tok = (int64_t)b * seq + t0; /* the chunk's first token among the batches */
    const uint8_t *ks = a->k + tok * a->k_ld + (int64_t)(a->p.hk_base + hk) * RB;
    const uint8_t *vs = a->v + tok * a->v_ld + (int64_t)(a->p.hk_base + hk) * RB;
    uint8_t *kd = a->stage[dst] + (((int64_t)(t - 1) * B * seq + tok) * nk + hk) * RB;
    uint8_t *vd = kd + a->stage_v;
    const int nv = rows * RV; /* vectors of K (and of V) */
    constexpr int U = 4;
    for (int v0 = threadIdx.x; v0 < 2 * nv; v0 += U * (int)blockDim.x) {
      int4 x[U];
#pragma unroll
      for (int u = 0; u < U; u++) {
        const int v = v0 + u * (int)blockDim.x;
        if (v < 2 * nv) {
          const int w = v < nv ? v : v - nv, r = w / RV, c = w % RV;
          x[u] = *(const int4 *)(v < nv ? ks + r * a->k_ld + c * 16 : vs + r * a->v_ld + c * 16);
        }
      }
#pragma unroll
      for (int u = 0; u < U; u++) {
        const int v = v0 + u * (int)blockDim.x;
        if (v < 2 * nv) {
          const int w = v < nv ? v : v - nv, r = w / RV, c = w % RV;
          *(int4 *)((v < nv ? kd : vd) + r * dst_ld + c * 16) = x[u];
        }
      }
    }
    __syncthreads();
    if (threadIdx.x == 0)
      meld_signal_put(ctx, dst, meld_signal_index(me, P, 0, ch, a->chunks), meld_stamp(ctx->epoch, 1));
  }
}

/* The producer of a persistent CTA, before its k-th item's Q (or end mark): waits until both
 * consumer warpgroups have released the previous item's Q (q_empty). */
template <int ST>
ATTN_DEV void attn_q_free(uint32_t bar, uint32_t k) {
  if (k) mbar_wait(bar + ATTN_QE(ST), (k - 1) & 1);
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
      attn_q_free<ST>(bar, k);
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
        attn_q_free<ST>(bar, k);
        attn_load_q(p, sb, bar, qt, h, b);
        q_done = true;
      }
    }
    if (!q_done) {
      attn_q_free<ST>(bar, k);
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
      attn_regs_producer();
      if (threadIdx.x == 0) attn_persist_producer<ST, ATTN_FUSED>(&a.p, a.items, &proto, &a, ctx.epoch, sb);
    } else {
      attn_regs_math();
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
    attn_regs_producer();
    if (threadIdx.x == 0) attn_persist_producer<ST, ATTN_PERSIST>(&p, items, nullptr, nullptr, 0, sb);
  } else {
    attn_regs_math();
    attn_persist_consumer<ST, PIPE, ATTN_PERSIST>(&p, sb, wg - 1);
  }
#endif
}

/* This head_dim's kernels. */
static attn_kernel_set_t kernel_set(void) {
  attn_kernel_set_t s;
  s.fwd[0][0] = (const void *)attn_fwd_kernel<0, ATTN_SINGLE>;
  s.fwd[0][1] = (const void *)attn_fwd_kernel<1, ATTN_SINGLE>;
  s.fwd[0][2] = (const void *)attn_fwd_kernel<2, ATTN_SINGLE>;
  s.fwd[1][0] = (const void *)attn_fwd_kernel<0, ATTN_GATHERED>;
  s.fwd[1][1] = (const void *)attn_fwd_kernel<1, ATTN_GATHERED>;
  s.fwd[1][2] = (const void *)attn_fwd_kernel<2, ATTN_GATHERED>;
  s.persist[0] = (const void *)attn_persist_kernel<0>;
  s.persist[1] = (const void *)attn_persist_kernel<1>;
  s.persist[2] = (const void *)attn_persist_kernel<2>;
  s.ring[0] = (const void *)attn_ring_kernel<0>;
  s.ring[1] = (const void *)attn_ring_kernel<1>;
  s.ring[2] = (const void *)attn_ring_kernel<2>;
  s.smem[0] = ATTN_SMEM_BYTES(2);
  s.smem[1] = s.smem[2] = ATTN_SMEM_BYTES(3);
  return s;
}

} /* namespace ATTN_NS */
