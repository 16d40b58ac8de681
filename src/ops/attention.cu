/* attention.cu — flash-attention forward on Hopper (meld_attention): the compute core of the
 * ring attention (DESIGN.md section 7b), here on one GPU.
 *
 * One CTA per (128-query tile, head, batch); 384 threads:
 *   warpgroup 0  producer (setmaxnreg 40): one thread loads the Q tile once, then the K and V
 *                blocks of 128 keys by TMA into a 2-stage ring (K and V with their own full
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
 * Shared memory: Q 32 KB + 2 x (K 32 KB + V 32 KB) = 160 KB (+ barriers, 1 KB alignment).
 * First version: no overlap of one block's softmax with another block's wgmmas (FA3's
 * ping-pong and intra-warpgroup pipelining are the next steps; docs/perf-notes.md). */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <string.h>

#include "attn_plan.h"
#include "device/ptx_async.cuh"
#include "error.h"

#define ATTN_THREADS 384
#define ATTN_STAGES 2
#define ATTN_Q_BYTES (ATTN_BM * ATTN_D * 2)  /* 32 KB */
#define ATTN_KV_BYTES (ATTN_BN * ATTN_D * 2) /* 32 KB each of K and V */
#define ATTN_K_OFF(s) (ATTN_Q_BYTES + (s) * 2 * ATTN_KV_BYTES)
#define ATTN_V_OFF(s) (ATTN_K_OFF(s) + ATTN_KV_BYTES)
#define ATTN_BAR_OFF (ATTN_Q_BYTES + ATTN_STAGES * 2 * ATTN_KV_BYTES)
#define ATTN_SMEM_BYTES (ATTN_BAR_OFF + 128 + 1024)

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
static __device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi); /* .x = lo: the lower 16 bits */
  return *reinterpret_cast<uint32_t *>(&v);
}

static __device__ __forceinline__ void attn_producer(const attn_params_t *p, uint32_t sb, int qt, int h, int b,
                                                     int jb, int je) {
  const uint32_t bar = sb + ATTN_BAR_OFF;
  const uint32_t q_full = bar, k_full = bar + 8, v_full = bar + 24, empty = bar + 40;
  const int hk = h / p->group;
  mbarrier_arrive_expect_tx_cta(q_full, ATTN_Q_BYTES);
  for (int half = 0; half < 2; half++)
    tma_load_4d(sb + half * (ATTN_Q_BYTES / 2), &p->map_q, q_full, 64 * half, h, qt * ATTN_BM, b);
  for (int it = 0; it < je - jb; it++) {
    const int s = it & 1;
    if (it >= 2) mbar_wait(empty + 8 * s, ((it >> 1) - 1) & 1);
    const int kv0 = (jb + it) * ATTN_BN;
    mbarrier_arrive_expect_tx_cta(k_full + 8 * s, ATTN_KV_BYTES);
    for (int half = 0; half < 2; half++)
      tma_load_4d(sb + ATTN_K_OFF(s) + half * (ATTN_KV_BYTES / 2), &p->map_k, k_full + 8 * s, 64 * half, hk, kv0, b);
    mbarrier_arrive_expect_tx_cta(v_full + 8 * s, ATTN_KV_BYTES);
    for (int kb = 0; kb < 2; kb++)
      for (int db = 0; db < 2; db++)
        tma_load_4d(sb + ATTN_V_OFF(s) + kb * 16384 + db * 8192, &p->map_v, v_full + 8 * s, 64 * db, hk,
                    kv0 + 64 * kb, b);
  }
}

/* One consumer warpgroup (wg 0 or 1: queries 64 wg .. 64 wg + 63 of the tile). */
static __device__ __forceinline__ void attn_consumer(const attn_params_t *p, uint32_t sb, int wg, int qt, int h,
                                                     int b, int jb, int je) {
  const uint32_t bar = sb + ATTN_BAR_OFF;
  const uint32_t q_full = bar, k_full = bar + 8, v_full = bar + 24, empty = bar + 40;
  const int t = threadIdx.x & 127, w = t >> 5, l = t & 31;
  const int row0 = 64 * wg + 16 * w + (l >> 2); /* this thread's rows in the tile: row0, row0 + 8 */
  const float sl2 = p->scale_log2;
  float S[64], O[64];
  uint32_t P[32];
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;
#pragma unroll
  for (int i = 0; i < 64; i++) O[i] = 0.f;
  mbar_wait(q_full, 0);
  for (int it = 0; it < je - jb; it++) {
    const int j = jb + it, s = it & 1;
    const uint32_t ph = (uint32_t)(it >> 1) & 1;
    mbar_wait(k_full + 8 * s, ph);
    wgmma_fence();
#pragma unroll
    for (int half = 0; half < 2; half++)
#pragma unroll
      for (int kk = 0; kk < 4; kk++) {
        const uint64_t da = wgmma_desc_sw128(sb + half * 16384 + wg * 8192 + kk * 32, 16, 1024);
        const uint64_t db = wgmma_desc_sw128(sb + ATTN_K_OFF(s) + half * 16384 + kk * 32, 16, 1024);
        wgmma_m64n128k16_ss(S, da, db, (half | kk) != 0);
      }
    wgmma_commit();
    wgmma_wait0();
    wgmma_fence_acc64(S);
    if (attn_block_masked(p, qt, j)) {
      const int64_t qp0 = p->q_pos0 + (int64_t)qt * ATTN_BM + row0;
      const int64_t kp0 = p->kv_pos0 + (int64_t)j * ATTN_BN;
      const int kv_left = p->seq_kv - j * ATTN_BN;
#pragma unroll
      for (int r = 0; r < 64; r++) {
        const int col = 8 * (r >> 2) + 2 * (l & 3) + (r & 1);
        const int64_t qp = qp0 + 8 * ((r >> 1) & 1);
        if (col >= kv_left || (p->causal && kp0 + col > qp)) S[r] = -INFINITY;
      }
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
    const float mn0 = fmaxf(m0, mx0 * sl2), mn1 = fmaxf(m1, mx1 * sl2);
    /* a row with no visible key so far keeps max -inf: subtract 0 instead (no inf - inf) */
    const float ms0 = mn0 == -INFINITY ? 0.f : mn0, ms1 = mn1 == -INFINITY ? 0.f : mn1;
    const float a0 = exp2f(m0 - ms0), a1 = exp2f(m1 - ms1);
    m0 = mn0;
    m1 = mn1;
    float rs0 = 0.f, rs1 = 0.f;
#pragma unroll
    for (int r = 0; r < 64; r++) {
      const int hi = (r >> 1) & 1;
      const float e = exp2f(fmaf(S[r], sl2, hi ? -ms1 : -ms0));
      S[r] = e;
      if (hi) rs1 += e;
      else rs0 += e;
    }
    l0 = l0 * a0 + rs0;
    l1 = l1 * a1 + rs1;
#pragma unroll
    for (int r = 0; r < 64; r++) O[r] *= ((r >> 1) & 1) ? a1 : a0;
#pragma unroll
    for (int k = 0; k < 8; k++) {
      P[4 * k + 0] = pack_bf16(S[8 * k + 0], S[8 * k + 1]);
      P[4 * k + 1] = pack_bf16(S[8 * k + 2], S[8 * k + 3]);
      P[4 * k + 2] = pack_bf16(S[8 * k + 4], S[8 * k + 5]);
      P[4 * k + 3] = pack_bf16(S[8 * k + 6], S[8 * k + 7]);
    }
    mbar_wait(v_full + 8 * s, ph);
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < 8; k++) {
      const uint64_t dv = wgmma_desc_sw128(sb + ATTN_V_OFF(s) + (k >> 2) * 16384 + (k & 3) * 2048, 8192, 1024);
      wgmma_m64n128k16_rs<1>(O, &P[4 * k], dv, 1);
    }
    wgmma_commit();
    wgmma_wait0();
    wgmma_fence_acc64(O);
    if (t == 0) mbar_arrive(empty + 8 * s);
  }
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
      const float lsum = hi ? l1 : l0, m = hi ? m1 : m0;
      p->lse[((int64_t)b * p->heads + h) * p->seq_q + q] =
          lsum > 0.f ? m * 0.69314718055994531f + logf(lsum) : -INFINITY;
    }
  }
}
#endif

__global__ void __launch_bounds__(ATTN_THREADS, 1) attn_fwd_kernel(const __grid_constant__ attn_params_t p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) uint8_t attn_smem[];
  const uint32_t raw = smem_addr(attn_smem);
  const uint32_t sb = (raw + 1023u) & ~1023u;
  int qt, h, b, jb, je;
  attn_work_of(&p, blockIdx.x, &qt, &h, &b);
  attn_kv_range(&p, qt, &jb, &je);
  if (je < jb) je = jb;
  const int wg = threadIdx.x >> 7;
  if (threadIdx.x == 0) {
    const uint32_t bar = sb + ATTN_BAR_OFF;
    mbarrier_init_cta(bar, 1); /* q_full */
    for (int s = 0; s < ATTN_STAGES; s++) {
      mbarrier_init_cta(bar + 8 + 8 * s, 1);  /* k_full */
      mbarrier_init_cta(bar + 24 + 8 * s, 1); /* v_full */
      mbarrier_init_cta(bar + 40 + 8 * s, 2); /* empty: one arrival per consumer warpgroup */
    }
    fence_mbar_init();
    prefetch_tensormap(&p.map_q);
    prefetch_tensormap(&p.map_k);
    prefetch_tensormap(&p.map_v);
  }
  __syncthreads();
  if (wg == 0) {
    setmaxnreg_dec_40();
    if (threadIdx.x == 0) attn_producer(&p, sb, qt, h, b, jb, je);
  } else {
    setmaxnreg_inc_232();
    attn_consumer(&p, sb, wg - 1, qt, h, b, jb, je);
  }
#endif
}

static int g_attn_ready[64];

extern "C" meld_result_t meld_attention(const meld_attention_args_t *args, cudaStream_t stream) {
  meld_error_clear();
  attn_params_t p;
  int64_t grid = 0;
  MELD_CHECK(attn_args_validate(args));
  if (args->batch == 0 || args->seq_q == 0) return MELD_OK;
  int dev = 0, major = 0;
  MELD_CUDA_CHECK(cudaGetDevice(&dev));
  MELD_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  if (major != 9)
    return meld_error(MELD_ERR_UNSUPPORTED,
                      "meld_attention: device %d has compute capability %d.x; the kernel needs Hopper (sm_90a)", dev,
                      major);
  if (dev >= 64 || !g_attn_ready[dev]) {
    MELD_CUDA_CHECK(cudaFuncSetAttribute(attn_fwd_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, ATTN_SMEM_BYTES));
    if (dev < 64) g_attn_ready[dev] = 1;
  }
  MELD_CHECK(attn_plan_make(args, &p, &grid));
  attn_fwd_kernel<<<(unsigned)grid, ATTN_THREADS, ATTN_SMEM_BYTES, stream>>>(p);
  MELD_CUDA_CHECK(cudaGetLastError());
  return MELD_OK;
}
