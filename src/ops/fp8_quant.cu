/* fp8_quant.cu — meld_fp8_quantize: bf16 -> OCP e4m3 with the scales meld_gemm_fp8 and the fused
 * fp8 ops take (per row, or one per tensor): scale = amax / 448, out = x / scale rounded to the
 * nearest e4m3 (saturating), so that scale x out reproduces x within e4m3's precision.
 *
 * Per row: one block a row (grid-stride over rows): the row's amax (a block reduction), its
 * scale, then its bytes; the row is read twice (from L2 the second time for rows up to a few
 * MB). Per tensor: three launches: the amax of every block into *scale (atomicMax on the bits of
 * non-negative floats, which order as integers; *scale zeroed first), the bytes with that amax,
 * then *scale = amax / 448 by one thread (no block may read the amax after it became the scale).
 * Memory-bound: per row, 16-byte loads and 8-byte stores where the sizes and bases allow (else
 * 2-byte loads and 1-byte stores); per tensor, the element-wise form (a first version). */
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <float.h>
#include <stdint.h>

#include "device/copy.cuh" /* widen_bf16x8 */
#include "error.h"
#include "meld.h"

#define Q_THREADS 256
#define Q_E4M3_MAX 448.0f

/* The quantization factor of an amax and its dequantization scale (0: 1, so an all-zero row
 * stays zeros). Below amax = 448 / FLT_MAX (~1.3e-36, still a normal bf16) 448 / amax would
 * overflow to inf (zeros would become NaN): the factor stops at FLT_MAX and the scale is its
 * inverse, 1 / FLT_MAX, so that scale x out still reproduces x. */
__device__ __forceinline__ float q_inv(float amax) { return amax > 0.f ? fminf(Q_E4M3_MAX / amax, FLT_MAX) : 1.0f; }
__device__ __forceinline__ float q_scale(float amax) {
  return !(amax > 0.f) ? 1.0f : q_inv(amax) < FLT_MAX ? amax / Q_E4M3_MAX : 1.0f / FLT_MAX;
}
__device__ __forceinline__ uint8_t q_e4m3(float v) {
  return (uint8_t)__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
}

/* The block's max of m (every thread gets it); red: Q_THREADS / 32 floats. */
__device__ __forceinline__ float q_block_max(float m, float *red) {
  for (int o = 16; o; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
  __syncthreads();
  m = red[0];
  for (int w = 1; w < Q_THREADS / 32; ++w) m = fmaxf(m, red[w]);
  __syncthreads(); /* (red is reused by the next call) */
  return m;
}

/* VEC: 8 elements a thread at a time (16-byte loads, 8-byte stores; cols, ldx and ldo multiples
 * of 8, x 16-byte and out 8-byte aligned: the launcher's choice). */
template <bool VEC>
__global__ void __launch_bounds__(Q_THREADS) q_rows_kernel(const __nv_bfloat16 *x, int64_t ldx, uint8_t *out,
                                                           int64_t ldo, float *scale, int64_t rows, int64_t cols) {
  __shared__ float red[Q_THREADS / 32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const __nv_bfloat16 *xr = x + r * ldx;
    uint8_t *o = out + r * ldo;
    float m = 0.f;
    if (VEC) {
      for (int64_t c = 8 * (int64_t)threadIdx.x; c < cols; c += 8 * Q_THREADS) {
        float f[8];
        widen_bf16x8(*(const int4 *)(xr + c), f);
#pragma unroll
        for (int i = 0; i < 8; ++i) m = fmaxf(m, fabsf(f[i]));
      }
    } else {
      for (int64_t c = threadIdx.x; c < cols; c += Q_THREADS) m = fmaxf(m, fabsf(__bfloat162float(xr[c])));
    }
    m = q_block_max(m, red);
    const float inv = q_inv(m);
    if (threadIdx.x == 0) scale[r] = q_scale(m);
    if (VEC) {
      for (int64_t c = 8 * (int64_t)threadIdx.x; c < cols; c += 8 * Q_THREADS) {
        float f[8];
        widen_bf16x8(*(const int4 *)(xr + c), f);
        uint32_t lo = 0, hi = 0;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          lo |= (uint32_t)q_e4m3(f[i] * inv) << (8 * i);
          hi |= (uint32_t)q_e4m3(f[4 + i] * inv) << (8 * i);
        }
        *(uint2 *)(o + c) = make_uint2(lo, hi);
      }
    } else {
      for (int64_t c = threadIdx.x; c < cols; c += Q_THREADS) o[c] = q_e4m3(__bfloat162float(xr[c]) * inv);
    }
  }
}

__global__ void __launch_bounds__(Q_THREADS) q_amax_kernel(const __nv_bfloat16 *x, int64_t ldx, float *amax,
                                                           int64_t rows, int64_t cols) {
  __shared__ float red[Q_THREADS / 32];
  float m = 0.f;
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * (int64_t)Q_THREADS + threadIdx.x; i < n; i += (int64_t)gridDim.x * Q_THREADS)
    m = fmaxf(m, fabsf(__bfloat162float(x[(i / cols) * ldx + i % cols])));
  m = q_block_max(m, red);
  if (threadIdx.x == 0) atomicMax((unsigned int *)amax, __float_as_uint(m));
}

__global__ void __launch_bounds__(Q_THREADS) q_tensor_kernel(const __nv_bfloat16 *x, int64_t ldx, uint8_t *out,
                                                             int64_t ldo, const float *amax, int64_t rows,
                                                             int64_t cols) {
  const float inv = q_inv(*amax);
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * (int64_t)Q_THREADS + threadIdx.x; i < n; i += (int64_t)gridDim.x * Q_THREADS) {
    const int64_t r = i / cols, c = i % cols;
    out[r * ldo + c] = q_e4m3(__bfloat162float(x[r * ldx + c]) * inv);
  }
}

__global__ void q_finish_kernel(float *scale) { *scale = q_scale(*scale); }

extern "C" meld_result_t meld_fp8_quantize(const meld_fp8_quantize_args_t *a, cudaStream_t stream) {
  meld_error_clear();
  const char *fn = "meld_fp8_quantize";
  if (!a) return meld_error(MELD_ERR_INVALID_ARG, "%s: args is NULL", fn);
  if (a->rows < 0 || a->cols < 0 || a->rows > INT32_MAX || a->cols > INT32_MAX)
    return meld_error(MELD_ERR_INVALID_ARG, "%s: rows %lld, cols %lld: need 0 <= each < 2^31", fn,
                      (long long)a->rows, (long long)a->cols);
  if (a->rowwise != 0 && a->rowwise != 1)
    return meld_error(MELD_ERR_INVALID_ARG, "%s: rowwise %d: 1 (a scale per row) or 0 (one per tensor)", fn,
                      a->rowwise);
  if (a->rowwise && a->rows == 0) return MELD_OK; /* no rows, no scales */
  if (!a->scale) return meld_error(MELD_ERR_INVALID_ARG, "%s: scale is NULL", fn);
  if ((uintptr_t)a->scale & 3) return meld_error(MELD_ERR_INVALID_ARG, "%s: scale must be 4-byte aligned", fn);
  if (a->rows > 0 && a->cols > 0) { /* (empty: the scales alone, 1) */
    if (!a->x || !a->out) return meld_error(MELD_ERR_INVALID_ARG, "%s: %s is NULL", fn, !a->x ? "x" : "out");
    if (a->ldx < a->cols || a->ldo < a->cols)
      return meld_error(MELD_ERR_INVALID_ARG, "%s: ldx %lld and ldo %lld must be >= cols %lld", fn,
                        (long long)a->ldx, (long long)a->ldo, (long long)a->cols);
    if ((uintptr_t)a->x & 1) return meld_error(MELD_ERR_INVALID_ARG, "%s: x must be 2-byte aligned", fn);
  }
  int dev = 0, sms = 0;
  MELD_CUDA_CHECK(cudaGetDevice(&dev));
  MELD_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const __nv_bfloat16 *x = (const __nv_bfloat16 *)a->x;
  uint8_t *out = (uint8_t *)a->out;
  const int64_t n = a->rows * a->cols;
  const int64_t want = (n + Q_THREADS * 4 - 1) / (Q_THREADS * 4);
  const int grid = (int)(want < 8 * (int64_t)sms ? (want > 0 ? want : 1) : 8 * (int64_t)sms);
  if (a->rowwise) {
    const int rgrid = (int)(a->rows < 8 * (int64_t)sms ? a->rows : 8 * (int64_t)sms);
    const bool vec = a->cols % 8 == 0 && a->ldx % 8 == 0 && a->ldo % 8 == 0 && ((uintptr_t)a->x & 15) == 0 &&
                     ((uintptr_t)a->out & 7) == 0;
    if (vec) q_rows_kernel<true><<<rgrid, Q_THREADS, 0, stream>>>(x, a->ldx, out, a->ldo, a->scale, a->rows, a->cols);
    else q_rows_kernel<false><<<rgrid, Q_THREADS, 0, stream>>>(x, a->ldx, out, a->ldo, a->scale, a->rows, a->cols);
  } else {
    MELD_CUDA_CHECK(cudaMemsetAsync(a->scale, 0, sizeof(float), stream));
    if (n > 0) {
      q_amax_kernel<<<grid, Q_THREADS, 0, stream>>>(x, a->ldx, a->scale, a->rows, a->cols);
      q_tensor_kernel<<<grid, Q_THREADS, 0, stream>>>(x, a->ldx, out, a->ldo, a->scale, a->rows, a->cols);
    }
    q_finish_kernel<<<1, 1, 0, stream>>>(a->scale);
  }
  MELD_CUDA_CHECK(cudaGetLastError());
  return MELD_OK;
}
