/* attn_ref.h — what the attention tests and bench share: the fp32 reference kernel (one warp
 * per query row: dot products, exact softmax with the row's max, the weighted sum of V), a case
 * (shape, positions, packed QKV, padded O), its buffers (random bf16 inputs, never zero; outputs
 * poisoned with NaN), and the comparison (relative error of O per (batch, head) and overall, LSE
 * by absolute error, rows with no visible key exactly 0 / -inf, padding between strided tokens
 * untouched). Included by test_attn.cu, test_ring_attn.cu and bench/bench_attn.cu. */
#ifndef MELD_TESTS_GPU_ATTN_REF_H
#define MELD_TESTS_GPU_ATTN_REF_H

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_test.h"
#include "meld.h"

/* O_ref [b, i, h, :] fp32 and LSE_ref [b, h, i]; one warp per (i, h, b), lane holds D / 32 dims
 * (head_dim D: 64 or 128). */
__global__ void ref_attn(const __nv_bfloat16 *q, const __nv_bfloat16 *k, const __nv_bfloat16 *v, float *o,
                         float *lse, int B, int Sq, int Skv, int H, int Hkv, int64_t sq, int64_t sk, int64_t sv,
                         int causal, float scale, int64_t qp0, int64_t kp0, int64_t zz_h = 0,
                         int64_t qp1 = 0, int D = 128) {
  /* (query i sits at qp0 + i; with zz_h > 0, a zigzag ring's part: queries i >= zz_h at qp1 + i) */
  const int64_t warp = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31, E = D / 32;
  if (warp >= (int64_t)B * H * Sq) return;
  const int i = (int)(warp % Sq), h = (int)((warp / Sq) % H), b = (int)(warp / ((int64_t)Sq * H));
  const int hk = h / (H / Hkv);
  const int64_t qpos = (zz_h > 0 && i >= zz_h ? qp1 : qp0) + i;
  float qv[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int e = 0; e < 4; e++) if (e < E) qv[e] = __bfloat162float(q[((int64_t)b * Sq + i) * sq + h * D + lane * E + e]);
  /* pass 1: the max; pass 2: sum and weighted V */
  float mx = -INFINITY;
  for (int j = 0; j < Skv; j++) {
    if (causal && kp0 + j > qpos) continue;
    const __nv_bfloat16 *kr = k + ((int64_t)b * Skv + j) * sk + hk * D + lane * E;
    float d = 0.f;
#pragma unroll
    for (int e = 0; e < 4; e++) if (e < E) d += qv[e] * __bfloat162float(kr[e]);
    for (int off = 16; off; off >>= 1) d += __shfl_xor_sync(0xffffffffu, d, off);
    mx = fmaxf(mx, d * scale);
  }
  float sum = 0.f, acc[4] = {0.f, 0.f, 0.f, 0.f};
  for (int j = 0; j < Skv; j++) {
    if (causal && kp0 + j > qpos) continue;
    const __nv_bfloat16 *kr = k + ((int64_t)b * Skv + j) * sk + hk * D + lane * E;
    const __nv_bfloat16 *vr = v + ((int64_t)b * Skv + j) * sv + hk * D + lane * E;
    float d = 0.f;
#pragma unroll
    for (int e = 0; e < 4; e++) if (e < E) d += qv[e] * __bfloat162float(kr[e]);
    for (int off = 16; off; off >>= 1) d += __shfl_xor_sync(0xffffffffu, d, off);
    const float p = expf(d * scale - mx);
    sum += p;
#pragma unroll
    for (int e = 0; e < 4; e++) if (e < E) acc[e] += p * __bfloat162float(vr[e]);
  }
  float *orow = o + (((int64_t)b * Sq + i) * H + h) * D + lane * E;
#pragma unroll
  for (int e = 0; e < 4; e++) if (e < E) orow[e] = sum > 0.f ? acc[e] / sum : 0.f;
  if (lane == 0) lse[((int64_t)b * H + h) * Sq + i] = sum > 0.f ? mx + logf(sum) : -INFINITY;
}

typedef struct {
  const char *name;
  int B, Sq, Skv, H, Hkv, causal;
  int64_t qp0, kp0;
  float scale;
  int packed;   /* 1: q, k, v are views of one [B, S, 3, H, D] buffer (needs Sq == Skv, H == Hkv) */
  int pad_o;    /* extra elements between output tokens (poison must survive) */
  int D;        /* head_dim: 64 or 128 (0 = 128) */
} attn_case_t;

static inline int case_d(const attn_case_t *c) { return c->D ? c->D : 128; }

typedef struct {
  uint16_t *q, *k, *v, *o, *qkv;
  float *lse, *oref, *lref;
  meld_attention_args_t a;
  size_t o_elems;
} attn_bufs_t;

static inline void fill(uint16_t *p, size_t n, uint64_t seed) { gt_fill_bf16<<<1024, 256>>>(p, n, seed); }

/* Allocates and fills a case's buffers and args (seed varies the inputs). */
static inline int setup(const attn_case_t *c, attn_bufs_t *x, uint64_t seed) {
  memset(x, 0, sizeof *x);
  const int64_t D = case_d(c);
  meld_attention_args_t *a = &x->a;
  a->batch = c->B, a->seq_q = c->Sq, a->seq_kv = c->Skv, a->heads = c->H, a->heads_kv = c->Hkv, a->head_dim = D;
  a->causal = c->causal, a->scale = c->scale, a->q_pos0 = c->qp0, a->kv_pos0 = c->kp0;
  if (c->packed) {
    const size_t n = (size_t)c->B * c->Sq * 3 * c->H * D;
    GT_CUDA(cudaMalloc(&x->qkv, n * 2));
    fill(x->qkv, n, seed);
    a->q = x->qkv, a->k = x->qkv + c->H * D, a->v = x->qkv + 2 * c->H * D;
    a->stride_q = a->stride_k = a->stride_v = 3 * c->H * D;
  } else {
    const size_t nq = (size_t)c->B * c->Sq * c->H * D, nkv = (size_t)c->B * c->Skv * c->Hkv * D;
    GT_CUDA(cudaMalloc(&x->q, nq * 2));
    GT_CUDA(cudaMalloc(&x->k, nkv * 2));
    GT_CUDA(cudaMalloc(&x->v, nkv * 2));
    fill(x->q, nq, seed), fill(x->k, nkv, seed + 1), fill(x->v, nkv, seed + 2);
    a->q = x->q, a->k = x->k, a->v = x->v;
  }
  a->stride_o = c->pad_o ? c->H * D + c->pad_o : 0;
  x->o_elems = (size_t)c->B * c->Sq * (c->H * D + c->pad_o);
  GT_CUDA(cudaMalloc(&x->o, x->o_elems * 2));
  GT_CUDA(cudaMalloc(&x->lse, (size_t)c->B * c->H * c->Sq * 4));
  GT_CUDA(cudaMalloc(&x->oref, (size_t)c->B * c->Sq * c->H * D * 4));
  GT_CUDA(cudaMalloc(&x->lref, (size_t)c->B * c->H * c->Sq * 4));
  a->o = x->o, a->lse = x->lse;
  return cudaDeviceSynchronize() == cudaSuccess ? 0 : 1;
}

static inline void poison(attn_bufs_t *x, const attn_case_t *c) {
  GT_CUDA(cudaMemset(x->o, 0xff, x->o_elems * 2)); /* bf16 NaN */
  GT_CUDA(cudaMemset(x->lse, 0xff, (size_t)c->B * c->H * c->Sq * 4));
}

static inline void teardown(attn_bufs_t *x) {
  cudaFree(x->q), cudaFree(x->k), cudaFree(x->v), cudaFree(x->qkv), cudaFree(x->o);
  cudaFree(x->lse), cudaFree(x->oref), cudaFree(x->lref);
}

static inline void reference(const attn_case_t *c, attn_bufs_t *x) {
  const meld_attention_args_t *a = &x->a;
  const int D = case_d(c);
  const int64_t sq = a->stride_q ? a->stride_q : c->H * D, sk = a->stride_k ? a->stride_k : c->Hkv * D;
  const int64_t sv = a->stride_v ? a->stride_v : c->Hkv * D;
  const float scale = c->scale > 0 ? c->scale : 1.0f / sqrtf((float)D);
  const int64_t warps = (int64_t)c->B * c->H * c->Sq;
  ref_attn<<<(unsigned)((warps + 7) / 8), 256>>>((const __nv_bfloat16 *)a->q, (const __nv_bfloat16 *)a->k,
                                                 (const __nv_bfloat16 *)a->v, x->oref, x->lref, c->B, c->Sq, c->Skv,
                                                 c->H, c->Hkv, sq, sk, sv, c->causal, scale, c->qp0, c->kp0, 0, 0, D);
  GT_CUDA(cudaGetLastError());
}

/* Compares O and LSE with the reference; returns the worst per-(b, h) relative error. */
static inline double compare(const attn_case_t *c, attn_bufs_t *x, const char *what) {
  const int64_t D = case_d(c), so = x->a.stride_o ? x->a.stride_o : c->H * D;
  const size_t nref = (size_t)c->B * c->Sq * c->H * D, nl = (size_t)c->B * c->H * c->Sq;
  uint16_t *o = (uint16_t *)malloc(x->o_elems * 2);
  float *oref = (float *)malloc(nref * 4), *lse = (float *)malloc(nl * 4), *lref = (float *)malloc(nl * 4);
  GT_CUDA(cudaMemcpy(o, x->o, x->o_elems * 2, cudaMemcpyDeviceToHost));
  GT_CUDA(cudaMemcpy(oref, x->oref, nref * 4, cudaMemcpyDeviceToHost));
  GT_CUDA(cudaMemcpy(lse, x->lse, nl * 4, cudaMemcpyDeviceToHost));
  GT_CUDA(cudaMemcpy(lref, x->lref, nl * 4, cudaMemcpyDeviceToHost));
  double worst = 0, num_all = 0, den_all = 0, lse_err = 0;
  long bad_pad = 0, bad_empty = 0, nonfinite = 0;
  for (int b = 0; b < c->B; b++)
    for (int h = 0; h < c->H; h++) {
      double num = 0, den = 0;
      for (int i = 0; i < c->Sq; i++) {
        const float lr = lref[((size_t)b * c->H + h) * c->Sq + i], lg = lse[((size_t)b * c->H + h) * c->Sq + i];
        if (isinf(lr)) {
          if (!(isinf(lg) && lg < 0)) bad_empty++;
        } else if (!isfinite(lg)) nonfinite++;
        else lse_err = fmax(lse_err, fabs((double)lg - lr));
        for (int d = 0; d < D; d++) {
          const float r = oref[(((size_t)b * c->Sq + i) * c->H + h) * D + d];
          const float g = bf2f(o[((size_t)b * c->Sq + i) * so + h * D + d]);
          if (!isfinite(g)) nonfinite++;
          if (isinf(lr) && g != 0.f) bad_empty++;
          num += (g - (double)r) * (g - (double)r), den += (double)r * r;
        }
      }
      num_all += num, den_all += den;
      if (den > 0) worst = fmax(worst, sqrt(num / den));
    }
  if (c->pad_o)
    for (size_t t = 0; t < (size_t)c->B * c->Sq; t++)
      for (int e = 0; e < c->pad_o; e++)
        if (o[t * so + c->H * D + e] != 0xffff) bad_pad++;
  const double rel = den_all > 0 ? sqrt(num_all / den_all) : 0;
  GT_CHECK(nonfinite == 0, "%s %s: %ld non-finite outputs", c->name, what, nonfinite);
  GT_CHECK(bad_empty == 0, "%s %s: %ld values of rows without a visible key are not 0 / -inf", c->name, what, bad_empty);
  GT_CHECK(bad_pad == 0, "%s %s: %ld padding elements written", c->name, what, bad_pad);
  GT_CHECK(rel <= 1e-2 && worst <= 1e-2, "%s %s: rel err %.3g (worst head %.3g) > 1e-2", c->name, what, rel, worst);
  GT_CHECK(lse_err <= 2e-3, "%s %s: LSE abs err %.3g > 2e-3", c->name, what, lse_err);
  gt_log("%s %s: rel err %.2e (worst head %.2e), LSE err %.2e", c->name, what, rel, worst, lse_err);
  free(o), free(oref), free(lse), free(lref);
  return worst;
}

#endif
