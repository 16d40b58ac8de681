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
#include "device/ptx_async.cuh"
#include "error.h"

#define ATTN_THREADS 384
#define ATTN_Q_BYTES (ATTN_BM * ATTN_D * 2)  /* 32 KB */
#define ATTN_KV_BYTES (ATTN_BN * ATTN_D * 2) /* 32 KB each of K and V */
#define ATTN_K_OFF(s) (ATTN_Q_BYTES + (s) * 2 * ATTN_KV_BYTES)
#define ATTN_V_OFF(s) (ATTN_K_OFF(s) + ATTN_KV_BYTES)
/* barriers after the last stage: q_full, then k_full[ST], v_full[ST], empty[ST] (8 B each) */
#define ATTN_BAR_OFF(ST) (ATTN_Q_BYTES + (ST) * 2 * ATTN_KV_BYTES)
#define ATTN_KF(ST, s) (8 + 8 * (s))
#define ATTN_VF(ST, s) (8 + 8 * (ST) + 8 * (s))
#define ATTN_EM(ST, s) (8 + 16 * (ST) + 8 * (s))
#define ATTN_SMEM_BYTES(ST) (ATTN_BAR_OFF(ST) + 8 + 24 * (ST) + 1024)

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

template <int ST, bool MS>
ATTN_DEV void attn_producer(const attn_params_t *p, uint32_t sb, int qt, int h, int b) {
  const uint32_t bar = sb + ATTN_BAR_OFF(ST);
  const int hk = h / p->group;
  mbarrier_arrive_expect_tx_cta(bar, ATTN_Q_BYTES);
  for (int half = 0; half < 2; half++)
    tma_load_4d(sb + half * (ATTN_Q_BYTES / 2), &p->map_q, bar, 64 * half, h, qt * ATTN_BM, b);
  attn_iter_t itr = {0, 0, 0};
  int more = attn_iter_seek(p, qt, 0, &itr);
  for (int it = 0; more; it++, more = attn_next<MS>(p, qt, &itr)) {
    const int s = it % ST;
    if (it >= ST) mbar_wait(bar + ATTN_EM(ST, s), (uint32_t)(it / ST - 1) & 1);
    const int kv0 = itr.j * ATTN_BN;
    mbarrier_arrive_expect_tx_cta(bar + ATTN_KF(ST, s), ATTN_KV_BYTES);
    for (int half = 0; half < 2; half++) {
      const uint32_t dst = sb + ATTN_K_OFF(s) + half * (ATTN_KV_BYTES / 2);
      if (MS) tma_load_5d(dst, &p->map_k, bar + ATTN_KF(ST, s), 64 * half, hk, kv0, b, itr.s);
      else tma_load_4d(dst, &p->map_k, bar + ATTN_KF(ST, s), 64 * half, hk, kv0, b);
    }
    mbarrier_arrive_expect_tx_cta(bar + ATTN_VF(ST, s), ATTN_KV_BYTES);
    for (int kb = 0; kb < 2; kb++)
      for (int db = 0; db < 2; db++) {
        const uint32_t dst = sb + ATTN_V_OFF(s) + kb * 16384 + db * 8192;
        if (MS) tma_load_5d(dst, &p->map_v, bar + ATTN_VF(ST, s), 64 * db, hk, kv0 + 64 * kb, b, itr.s);
        else tma_load_4d(dst, &p->map_v, bar + ATTN_VF(ST, s), 64 * db, hk, kv0 + 64 * kb, b);
      }
  }
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
    const int64_t qp0 = p->q_pos0 + (int64_t)qt * ATTN_BM + row0;
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
  __nv_bfloat16 *o = (__nv_bfloat16 *)p->o + (int64_t)h * ATTN_D;
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
      p->lse[((int64_t)b * p->heads + h) * p->seq_q + q] =
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

/* PIPE 1, the it-th block (it >= 1, at *itr): S of this block and PV of the previous one are issued
 * together; this block's softmax (into Pnext) runs while PV (reading Pcur) is in flight; then
 * the previous stage is released and O rescaled to this block's max. */
template <int ST, int PP, bool MS>
ATTN_DEV void attn_pipe_step(const attn_params_t *p, uint32_t sb, int wg, int qt, const attn_iter_t *itr, int it,
                             int row0, float *S, float *O, uint32_t *Pcur, uint32_t *Pnext, attn_rows_t *st) {
  const uint32_t bar = sb + ATTN_BAR_OFF(ST);
  const int s = it % ST, sp = (it - 1) % ST;
  mbar_wait(bar + ATTN_KF(ST, s), (uint32_t)(it / ST) & 1);
  mbar_wait(bar + ATTN_VF(ST, sp), (uint32_t)((it - 1) / ST) & 1); /* landed with K j - 1 */
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

/* PIPE 1: the PV of the last block (n - 1), from P. */
template <int ST, int PP>
ATTN_DEV void attn_last_pv(uint32_t sb, int wg, int n, float *O, uint32_t *P) {
  const uint32_t bar = sb + ATTN_BAR_OFF(ST);
  const int sp = (n - 1) % ST;
  mbar_wait(bar + ATTN_VF(ST, sp), (uint32_t)((n - 1) / ST) & 1);
  attn_turn_wait(PP, wg);
  wgmma_fence();
  attn_issue_pv(O, P, sb, sp);
  attn_turn_pass(PP, wg, 1);
  wgmma_wait0();
  wgmma_fence_acc64(O);
  pin_p32(P);
  if ((threadIdx.x & 127) == 0) mbar_arrive(bar + ATTN_EM(ST, sp));
}

/* One consumer warpgroup (wg 0 or 1: queries 64 wg .. 64 wg + 63 of the tile).
 * PIPE 0: per block S, softmax, PV, each waited for before the next.
 * PIPE 1 (FA3's intra-warpgroup overlap): S of block j and PV of block j - 1 are issued
 * together; the softmax of block j runs while PV j - 1 is in flight; O is rescaled after it.
 * PIPE 2: PIPE 1 with the two warpgroups taking turns to issue (ping-pong). */
template <int ST, int PIPE, bool MS>
ATTN_DEV void attn_consumer(const attn_params_t *p, uint32_t sb, int wg, int qt, int h, int b, int n) {
  const uint32_t bar = sb + ATTN_BAR_OFF(ST);
  const int t = threadIdx.x & 127, w = t >> 5, l = t & 31;
  const int row0 = 64 * wg + 16 * w + (l >> 2); /* this thread's rows in the tile: row0, row0 + 8 */
  float S[64], O[64];
  uint32_t P[32];
  attn_rows_t st = {-INFINITY, -INFINITY, 0.f, 0.f};
#pragma unroll
  for (int i = 0; i < 64; i++) O[i] = 0.f;
  mbar_wait(bar, 0);
  attn_iter_t itr = {0, 0, 0}; /* the block whose softmax is next */
  attn_iter_seek(p, qt, 0, &itr);
  float a0, a1;
  if (!PIPE) {
    for (int it = 0; it < n; it++, attn_next<MS>(p, qt, &itr)) {
      const int s = it % ST;
      const uint32_t ph = (uint32_t)(it / ST) & 1;
      mbar_wait(bar + ATTN_KF(ST, s), ph);
      wgmma_fence();
      attn_issue_qk<ST>(S, sb, wg, s);
      wgmma_wait0();
      wgmma_fence_acc64(S);
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
  } else if (n > 0) {
    constexpr int PP = PIPE == 2;
    if (PP && wg == 1) named_bar_arrive(ATTN_TURN_BAR, 256); /* warpgroup 0 issues first */
    mbar_wait(bar + ATTN_KF(ST, 0), 0);
    attn_turn_wait(PP, wg);
    wgmma_fence();
    attn_issue_qk<ST>(S, sb, wg, 0);
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
      attn_pipe_step<ST, PP, MS>(p, sb, wg, qt, &itr, it, row0, S, O, P, P2, &st);
      attn_next<MS>(p, qt, &itr);
      attn_pipe_step<ST, PP, MS>(p, sb, wg, qt, &itr, it + 1, row0, S, O, P2, P, &st);
    }
    if (it < n) {
      attn_next<MS>(p, qt, &itr);
      attn_pipe_step<ST, PP, MS>(p, sb, wg, qt, &itr, it, row0, S, O, P, P2, &st);
      attn_last_pv<ST, PP>(sb, wg, n, O, P2);
    } else {
      attn_last_pv<ST, PP>(sb, wg, n, O, P);
    }
  }
  attn_store(p, O, &st, qt, h, b, row0);
}
#endif

/* PIPE 0: 2 stages; PIPE 1 and 2: 3 stages (block j + 1's K must load while block j - 1's
 * stage is still read by its PV). */
template <int PIPE, bool MS>
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
  if (threadIdx.x == 0) {
    const uint32_t bar = sb + ATTN_BAR_OFF(ST);
    mbarrier_init_cta(bar, 1); /* q_full */
    for (int s = 0; s < ST; s++) {
      mbarrier_init_cta(bar + ATTN_KF(ST, s), 1);
      mbarrier_init_cta(bar + ATTN_VF(ST, s), 1);
      mbarrier_init_cta(bar + ATTN_EM(ST, s), 2); /* one arrival per consumer warpgroup */
    }
    fence_mbar_init();
    prefetch_tensormap(&p.map_q);
    prefetch_tensormap(&p.map_k);
    prefetch_tensormap(&p.map_v);
  }
  __syncthreads();
  if (wg == 0) {
    setmaxnreg_dec_40();
    if (threadIdx.x == 0) attn_producer<ST, MS>(&p, sb, qt, h, b);
  } else {
    setmaxnreg_inc_232();
    attn_consumer<ST, PIPE, MS>(&p, sb, wg - 1, qt, h, b, n);
  }
#endif
}

static int g_attn_ready[64];

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
  static const kern_t kern[2][3] = {{attn_fwd_kernel<0, false>, attn_fwd_kernel<1, false>, attn_fwd_kernel<2, false>},
                                    {attn_fwd_kernel<0, true>, attn_fwd_kernel<1, true>, attn_fwd_kernel<2, true>}};
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
  const char *pipe = getenv("MELD_ATTN_PIPE");
  const int v = pipe && pipe[0] == '0' ? 0 : pipe && pipe[0] == '1' ? 1 : 2;
  kern[p->kv_segs > 1][v]<<<(unsigned)grid, ATTN_THREADS, ATTN_SMEM_BYTES(v ? 3 : 2), stream>>>(*p);
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
  return attn_single(args, stream);
}

/* The ring attention, first version (unfused): every rank's K and V are all-gathered into a
 * stream-ordered scratch buffer [rank][batch][seq][heads_kv][head_dim], then ONE attention kernel
 * reads them as P segments, segment r at position r * seq (rank r's part of the sequence). The
 * fused version (K/V blocks arriving around the ring while the kernel runs, a wait per block in
 * its producer) replaces the gathers; the kernel already takes segments. */
extern "C" meld_result_t meld_ring_attention(meld_comm_t comm, const meld_attention_args_t *args,
                                             cudaStream_t stream) {
  meld_error_clear();
  if (!comm) return meld_error(MELD_ERR_INVALID_ARG, "meld_ring_attention: comm is NULL");
  MELD_CHECK(attn_args_validate(args));
  meld_comm_info_t info;
  MELD_CHECK(meld_comm_info(comm, &info));
  if (args->q_pos0 != 0 || args->kv_pos0 != 0)
    return meld_error(MELD_ERR_INVALID_ARG,
                      "meld_ring_attention: q_pos0 %lld / kv_pos0 %lld must be 0 (the ring sets positions: rank r's "
                      "part starts at r * seq_q)",
                      (long long)args->q_pos0, (long long)args->kv_pos0);
  if (args->seq_q != args->seq_kv)
    return meld_error(MELD_ERR_INVALID_ARG, "meld_ring_attention: seq_q %lld != seq_kv %lld (each rank holds its part of "
                      "one sequence for Q, K and V)", (long long)args->seq_q, (long long)args->seq_kv);
  const int64_t dense = args->heads_kv * args->head_dim;
  if ((args->stride_k && args->stride_k != dense) || (args->stride_v && args->stride_v != dense))
    return meld_error(MELD_ERR_UNSUPPORTED,
                      "meld_ring_attention: K and V must be dense [batch, seq, heads_kv, head_dim] (stride_k / "
                      "stride_v 0) today");
  const int P = info.nranks;
  if (P == 1) return attn_single(args, stream);
  if (args->batch == 0 || args->seq_q == 0) return MELD_OK; /* the same on every rank (collective) */
  const size_t elems = (size_t)args->batch * (size_t)args->seq_kv * (size_t)dense;
  const size_t bytes = elems * 2;
  if ((uint64_t)bytes >= ((uint64_t)1 << 40) / 2 || (uint64_t)P * bytes * 2 >= ((uint64_t)1 << 46))
    return meld_error(MELD_ERR_INVALID_ARG, "meld_ring_attention: K of %zu bytes a rank is too large", bytes);
  attn_params_t p;
  int64_t grid = 0;
  MELD_CHECK(attn_plan_geometry(args, &p, &grid));
  p.q_pos0 = (int64_t)info.rank * args->seq_q;
  p.kv_segs = P;
  p.kv_seg_pos = args->seq_kv;
  attn_plan_order(args, &p);
  char *kv = NULL;
  MELD_CUDA_CHECK(cudaMallocAsync((void **)&kv, 2 * (size_t)P * bytes, stream));
  meld_result_t res = meld_all_gather(comm, args->k, kv, elems, MELD_BF16, stream);
  if (res == MELD_OK) res = meld_all_gather(comm, args->v, kv + (size_t)P * bytes, elems, MELD_BF16, stream);
  if (res == MELD_OK) res = attn_plan_q_map(args, &p);
  if (res == MELD_OK) res = attn_plan_kv_maps(args, &p, kv, kv + (size_t)P * bytes, dense, dense, P);
  if (res == MELD_OK) res = attn_launch(&p, grid, stream);
  const cudaError_t fe = cudaFreeAsync(kv, stream); /* stream-ordered: after the kernel */
  if (res == MELD_OK && fe != cudaSuccess)
    res = meld_error(MELD_ERR_CUDA, "meld_ring_attention: cudaFreeAsync: %s", cudaGetErrorString(fe));
  return res;
}
