/* test_gemm_fp8.cu — meld_gemm_fp8 on one GPU: C (bf16) = scale_a scale_b A x B^T with A [M,K]
 * and B [N,K] in fp8 e4m3.
 *
 * The reference is exact in its inputs: every e4m3 value is a bf16 value (3 mantissa bits,
 * exponents -9..8), so A and B are widened to bf16 on the device and multiplied by cuBLAS in
 * fp32 (the C reference for small shapes), then scaled. The tensor cores' FP8 mode accumulates
 * with fewer bits than fp32 (no periodic promotion: meld.h), so the bound is the same 1e-2 as
 * the bf16 GEMM's (bf16 output alone is ~3e-3); the measured error is printed per case.
 * Inputs are random e4m3 in +-[1/64, 2) (never zero, never NaN); outputs are poisoned with
 * 0xFFFF (NaN) first; a result passes when the relative Frobenius error is <= 1e-2 overall AND
 * in every 128x256 tile, and rows past m / columns past n stay poisoned.
 * Cases: one tile of one k-block, tails in every dimension (k a multiple of 16 but not of 128),
 * padded leading dimensions, 1 SM (the persistent loop), the small-M kernel (decode rows and
 * few-tile shapes), stream-K and the 128 x 320 tile (2048 x 5120 x 8192), large squares; NULL
 * scales (= 1); rowwise scales (MELD_FP8_ROWWISE and each operand's alone) on those paths;
 * a CUDA graph replayed after the scales changed in device memory (the kernel reads them); bad
 * arguments refused with their reasons; meld_fp8_quantize (per row and per tensor) against a host
 * reference, and its round trip through the rowwise GEMM. */
#include <float.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include "common/ref_gemm.c"
#include "gpu/gpu_test.h"
#include "gemm_plan.h" /* gemm_fp8_tile: the ping-pong tile forced */

#define TOL 1e-2
#define POISON 0xFFFFu

static cublasHandle_t g_cublas;

/* dst (bf16, rows x cols, ld) = the e4m3 src's values (exact). */
__global__ void widen_e4m3(uint16_t *dst, const uint8_t *src, int64_t rows, int64_t cols, int64_t ld) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t o = (i / cols) * ld + i % cols;
    const __half_raw hr = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)src[o], __NV_E4M3);
    const __nv_bfloat16 b = __float2bfloat16(__half2float(__half(hr)));
    dst[o] = *(const uint16_t *)&b;
  }
}

static uint8_t *dev_e4m3(int64_t rows, int64_t cols, int64_t ld, uint64_t seed) {
  uint8_t *p = NULL;
  GT_CUDA(cudaMalloc(&p, (size_t)rows * ld + 16));
  GT_CUDA(cudaMemset(p, 0x7f, (size_t)rows * ld + 16)); /* (NaN in the padding: must never be read) */
  gt_fill_e4m3<<<1024, 256>>>(p, rows, cols, ld, seed);
  return p;
}

static uint16_t *dev_widened(const uint8_t *src, int64_t rows, int64_t cols, int64_t ld) {
  uint16_t *p = NULL;
  GT_CUDA(cudaMalloc(&p, (size_t)rows * ld * 2 + 16));
  widen_e4m3<<<1024, 256>>>(p, src, rows, cols, ld);
  return p;
}

/* want[m x n] (ld n) = s * A B^T in fp32, from the widened inputs: C reference or cuBLAS. */
static void reference(const uint8_t *a, int64_t lda, const uint8_t *b, int64_t ldb, float s, int64_t m, int64_t n,
                      int64_t k, int cpu, float *want) {
  uint16_t *aw = dev_widened(a, m, k, lda), *bw = dev_widened(b, n, k, ldb);
  if (cpu) {
    uint16_t *ah = (uint16_t *)malloc((size_t)m * lda * 2), *bh = (uint16_t *)malloc((size_t)n * ldb * 2);
    GT_CUDA(cudaMemcpy(ah, aw, (size_t)m * lda * 2, cudaMemcpyDeviceToHost));
    GT_CUDA(cudaMemcpy(bh, bw, (size_t)n * ldb * 2, cudaMemcpyDeviceToHost));
    ref_gemm_bf16(ah, lda, bh, ldb, 0, want, n, m, n, k);
    free(ah), free(bh);
  } else {
    float *wd = NULL;
    GT_CUDA(cudaMalloc(&wd, (size_t)m * n * 4));
    const float one = 1.0f, zero = 0.0f;
    const cublasStatus_t st = cublasGemmEx(g_cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)m, (int)k, &one, bw,
                                           CUDA_R_16BF, (int)ldb, aw, CUDA_R_16BF, (int)lda, &zero, wd, CUDA_R_32F,
                                           (int)n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    GT_CHECK(st == CUBLAS_STATUS_SUCCESS, "cublasGemmEx failed: %d", (int)st);
    GT_CUDA(cudaMemcpy(want, wd, (size_t)m * n * 4, cudaMemcpyDeviceToHost));
    cudaFree(wd);
  }
  for (int64_t i = 0; i < m * n; i++) want[i] *= s;
  cudaFree(aw), cudaFree(bw);
}

/* Overall, per 128 x 256 tile, and the poison past m and n. Returns the overall error. */
static double check_c(const char *name, const uint16_t *c, int64_t ldc, int64_t extra, const float *want, int64_t m,
                      int64_t n) {
  const double err = ref_rel_err_bf16(c, ldc, want, n, m, n);
  GT_CHECK(err <= TOL, "%s: relative error %.3e > %.0e", name, err, TOL);
  int bad = 0;
  for (int64_t i0 = 0; i0 < m; i0 += 128)
    for (int64_t j0 = 0; j0 < n; j0 += 256) {
      const int64_t tm = m - i0 < 128 ? m - i0 : 128, tn = n - j0 < 256 ? n - j0 : 256;
      const double e = ref_rel_err_bf16(c + i0 * ldc + j0, ldc, want + i0 * n + j0, n, tm, tn);
      if (!(e <= TOL) && bad++ < 4) gt_log("%s: tile (%lld, %lld) error %.3e", name, (long long)i0 / 128, (long long)j0 / 256, e);
    }
  GT_CHECK(bad == 0, "%s: %d tiles of 128x256 exceed %.0e", name, bad, TOL);
  int64_t clobbered = 0;
  for (int64_t i = 0; i < m + extra; i++)
    for (int64_t j = (i < m ? n : 0); j < ldc; j++) clobbered += c[i * ldc + j] != POISON;
  GT_CHECK(clobbered == 0, "%s: %lld elements outside C were written", name, (long long)clobbered);
  return err;
}

typedef struct {
  int64_t m, n, k;
  int pad;      /* extra elements on every leading dimension (a multiple of 16) */
  int sm_count; /* 0 = all */
  int cpu_ref;
  int scales;   /* 0: NULL scales; 1: device scales 0.37 and 1.9; rowwise (random per row, both
                   signs): 2 MELD_FP8_ROWWISE, 3 MELD_FP8_ROWWISE_A (scale_b 1.9), 4 MELD_FP8_ROWWISE_B
                   (scale_a 0.37), 5 MELD_FP8_ROWWISE with scale_b 4 but not 8-byte aligned (the
                   column scales' one-at-a-time loads) */
  int tile_n;   /* 0: meld_gemm_fp8's plan; 128: the ping-pong tile forced (gemm_fp8_tile) */
} fp8_case_t;

/* n random scales in +-[1/8, 4), about a third negative (fixed seed). */
static float *host_scales(int64_t n, uint64_t seed) {
  float *s = (float *)malloc((size_t)n * 4);
  for (int64_t i = 0; i < n; i++) {
    const float u = 0.5f * (gt_rand_f(&seed) + 1.0f); /* [0, 1) */
    s[i] = (0.125f + 3.875f * u) * (i % 3 == 0 ? -1.f : 1.f);
  }
  return s;
}

/* A device copy of n floats at float offset off of its allocation (*base: to free) */
static float *dev_copy(const float *h, int64_t n, int off, float **base) {
  float *d = NULL;
  GT_CUDA(cudaMalloc(&d, (size_t)(n + off) * 4));
  GT_CUDA(cudaMemcpy(d + off, h, (size_t)n * 4, cudaMemcpyHostToDevice));
  *base = d;
  return d + off;
}

static void run_case(const fp8_case_t *tc) {
  const int64_t m = tc->m, n = tc->n, k = tc->k;
  const int64_t lda = k + tc->pad, ldb = k + tc->pad, ldc = n + (tc->pad / 2) + (8 - n % 8) % 8, extra = 8;
  char name[128];
  static const char *scale_names[] = {"", " scaled", " rowwise", " rowwise-a", " rowwise-b", " rowwise-odd-b"};
  snprintf(name, sizeof name, "fp8 %lldx%lldx%lld pad %d sms %d%s%s", (long long)m, (long long)n, (long long)k, tc->pad,
           tc->sm_count, scale_names[tc->scales], tc->tile_n == GEMM_BN_PP ? " pingpong128" : "");
  uint8_t *a = dev_e4m3(m, k, lda, 11 + m * 3 + k), *b = dev_e4m3(n, k, ldb, 12 + n * 5 + k);
  float *sc = NULL;
  const float hs[2] = {0.37f, 1.9f};
  GT_CUDA(cudaMalloc(&sc, 8));
  GT_CUDA(cudaMemcpy(sc, hs, 8, cudaMemcpyHostToDevice));
  uint16_t *c = NULL;
  GT_CUDA(cudaMalloc(&c, (size_t)(m + extra) * ldc * 2));
  GT_CUDA(cudaMemset(c, 0xFF, (size_t)(m + extra) * ldc * 2));
  meld_gemm_fp8_args_t g;
  memset(&g, 0, sizeof g);
  g.a = a, g.lda = lda, g.b = b, g.ldb = ldb, g.c = c, g.ldc = ldc, g.m = m, g.n = n, g.k = k;
  g.sm_count = tc->sm_count;
  if (tc->scales) g.scale_a = sc, g.scale_b = sc + 1;
  const int rw = tc->scales == 2 || tc->scales == 5 ? MELD_FP8_ROWWISE : tc->scales == 3 ? MELD_FP8_ROWWISE_A
                 : tc->scales == 4                   ? MELD_FP8_ROWWISE_B
                                                     : MELD_FP8_PER_TENSOR;
  float *ha = (rw & MELD_FP8_ROWWISE_A) ? host_scales(m, 31 + m) : NULL;
  float *hb = (rw & MELD_FP8_ROWWISE_B) ? host_scales(n, 37 + n) : NULL;
  float *da_base = NULL, *db_base = NULL;
  float *da = ha ? dev_copy(ha, m, 0, &da_base) : NULL, *db = hb ? dev_copy(hb, n, tc->scales == 5, &db_base) : NULL;
  if (da) g.scale_a = da;
  if (db) g.scale_b = db;
  g.scaling = (meld_fp8_scaling_t)rw;
  if (tc->tile_n) GT_MELD(gemm_fp8_tile(&g, tc->tile_n, 0));
  else GT_MELD(meld_gemm_fp8(&g, 0));
  GT_CUDA(cudaDeviceSynchronize());
  uint16_t *ch = (uint16_t *)malloc((size_t)(m + extra) * ldc * 2);
  float *want = (float *)malloc((size_t)m * n * 4);
  GT_CUDA(cudaMemcpy(ch, c, (size_t)(m + extra) * ldc * 2, cudaMemcpyDeviceToHost));
  reference(a, lda, b, ldb, rw ? 1.0f : tc->scales ? hs[0] * hs[1] : 1.0f, m, n, k, tc->cpu_ref, want);
  if (rw)
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) want[i * n + j] *= (ha ? ha[i] : hs[0]) * (hb ? hb[j] : hs[1]);
  const double err = check_c(name, ch, ldc, extra, want, m, n);
  gt_log("%-44s %s ref  rel err %.2e", name, tc->cpu_ref ? "C     " : "cuBLAS", err);
  free(ch), free(want), free(ha), free(hb);
  cudaFree(a), cudaFree(b), cudaFree(c), cudaFree(sc), cudaFree(da_base), cudaFree(db_base);
}

/* A graph of one call, replayed with new scales written between replays: C follows them. */
static void test_graph_scales(void) {
  const int64_t m = 512, n = 1024, k = 2048;
  uint8_t *a = dev_e4m3(m, k, k, 21), *b = dev_e4m3(n, k, k, 22);
  float *sc = NULL;
  uint16_t *c = NULL;
  GT_CUDA(cudaMalloc(&sc, 8));
  GT_CUDA(cudaMalloc(&c, (size_t)(m + 8) * n * 2));
  const float s0[2] = {1.0f, 1.0f};
  GT_CUDA(cudaMemcpy(sc, s0, 8, cudaMemcpyHostToDevice));
  cudaStream_t st;
  GT_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  meld_gemm_fp8_args_t g;
  memset(&g, 0, sizeof g);
  g.a = a, g.lda = k, g.b = b, g.ldb = k, g.c = c, g.ldc = n, g.m = m, g.n = n, g.k = k;
  g.scale_a = sc, g.scale_b = sc + 1;
  GT_MELD(meld_gemm_fp8(&g, st)); /* (outside capture first: any workspace is allocated now) */
  GT_CUDA(cudaStreamSynchronize(st));
  cudaGraph_t graph = NULL;
  cudaGraphExec_t exec = NULL;
  GT_CUDA(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  GT_MELD(meld_gemm_fp8(&g, st));
  GT_CUDA(cudaStreamEndCapture(st, &graph));
  GT_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  float *want = (float *)malloc((size_t)m * n * 4);
  uint16_t *ch = (uint16_t *)malloc((size_t)(m + 8) * n * 2);
  const float scales[3][2] = {{0.5f, 3.0f}, {-1.25f, 0.125f}, {7.0f, 0.01f}};
  reference(a, k, b, k, 1.0f, m, n, k, 0, want);
  for (int r = 0; r < 3; r++) {
    GT_CUDA(cudaMemcpyAsync(sc, scales[r], 8, cudaMemcpyHostToDevice, st));
    GT_CUDA(cudaMemsetAsync(c, 0xFF, (size_t)(m + 8) * n * 2, st));
    GT_CUDA(cudaGraphLaunch(exec, st));
    GT_CUDA(cudaStreamSynchronize(st));
    GT_CUDA(cudaMemcpy(ch, c, (size_t)(m + 8) * n * 2, cudaMemcpyDeviceToHost));
    const float s = scales[r][0] * scales[r][1];
    float *w = (float *)malloc((size_t)m * n * 4);
    for (int64_t i = 0; i < m * n; i++) w[i] = want[i] * s;
    char name[64];
    snprintf(name, sizeof name, "fp8 graph replay %d (scale %g)", r, s);
    gt_log("%-44s rel err %.2e", name, check_c(name, ch, n, 8, w, m, n));
    free(w);
  }
  cudaGraphExecDestroy(exec), cudaGraphDestroy(graph), cudaStreamDestroy(st);
  free(want), free(ch);
  cudaFree(a), cudaFree(b), cudaFree(c), cudaFree(sc);
}

/* Row r of a bf16 matrix times 2^(r % 9 - 4) (rows of different magnitudes), row `zero` zeroed. */
__global__ void q_shape_rows(uint16_t *p, int64_t rows, int64_t cols, int64_t ld, int64_t zero) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = i / cols, o = r * ld + i % cols;
    const float f = r == zero ? 0.f : __bfloat162float(*(const __nv_bfloat16 *)&p[o]) * ldexpf(1.f, (int)(r % 9) - 4);
    const __nv_bfloat16 b = __float2bfloat16(f);
    p[o] = *(const uint16_t *)&b;
  }
}

/* meld_fp8_quantize against a host reference: each scale exactly amax / 448 (1 for the zero
 * row), each byte within half an e4m3 step of x / scale (the nearest e4m3 value), the amax
 * element at +-448; per row and per tensor. Then the round trip: bf16 A and B quantized per row,
 * meld_gemm_fp8 rowwise, against cuBLAS on the bf16 values (within e4m3's precision, ~5%). */
static void test_quantize(void) {
  const int64_t rows = 300, ldx = 1008, ldo = 1024;
  int64_t cols = 1000; /* (then 997: the per-row kernel's element-wise form; 1000 takes its vectors) */
  uint16_t *x = NULL;
  uint8_t *q = NULL;
  float *sc = NULL;
  GT_CUDA(cudaMalloc(&x, (size_t)rows * ldx * 2));
  GT_CUDA(cudaMalloc(&q, (size_t)rows * ldo));
  GT_CUDA(cudaMalloc(&sc, (size_t)rows * 4));
  gt_fill_bf16_2d<<<264, 256>>>(x, rows, cols, ldx, 77);
  q_shape_rows<<<264, 256>>>(x, rows, cols, ldx, 5);
  uint16_t *xh = (uint16_t *)malloc((size_t)rows * ldx * 2);
  uint8_t *qh = (uint8_t *)malloc((size_t)rows * ldo);
  float *sh = (float *)malloc((size_t)rows * 4);
  GT_CUDA(cudaMemcpy(xh, x, (size_t)rows * ldx * 2, cudaMemcpyDeviceToHost));
  for (int pass = 0; pass < 4; pass++) {
    const int rw = pass % 2 == 0;
    cols = pass < 2 ? 1000 : 997;
    GT_CUDA(cudaMemset(q, 0x7f, (size_t)rows * ldo));
    GT_CUDA(cudaMemset(sc, 0xff, (size_t)rows * 4));
    meld_fp8_quantize_args_t a;
    memset(&a, 0, sizeof a);
    a.x = x, a.ldx = ldx, a.out = q, a.ldo = ldo, a.scale = sc, a.rows = rows, a.cols = cols, a.rowwise = rw;
    GT_MELD(meld_fp8_quantize(&a, 0));
    GT_CUDA(cudaDeviceSynchronize());
    GT_CUDA(cudaMemcpy(qh, q, (size_t)rows * ldo, cudaMemcpyDeviceToHost));
    GT_CUDA(cudaMemcpy(sh, sc, (size_t)(rw ? rows : 1) * 4, cudaMemcpyDeviceToHost));
    float tmax = 0.f;
    for (int64_t i = 0; i < rows * cols; i++) tmax = fmaxf(tmax, fabsf(bf2f(xh[(i / cols) * ldx + i % cols])));
    int64_t bad_scale = 0, bad = 0, at_max = 0, clobbered = 0;
    for (int64_t r = 0; r < rows; r++) {
      float amax = tmax;
      if (rw) {
        amax = 0.f;
        for (int64_t c = 0; c < cols; c++) amax = fmaxf(amax, fabsf(bf2f(xh[r * ldx + c])));
      }
      const float s = amax > 0.f ? amax / 448.0f : 1.0f, inv = amax > 0.f ? 448.0f / amax : 1.0f;
      if (rw ? sh[r] != s : (r == 0 && sh[0] != s)) bad_scale++;
      for (int64_t c = 0; c < cols; c++) {
        const float y = bf2f(xh[r * ldx + c]) * inv, v = gt_e4m3_value(qh[r * ldo + c]);
        const float ay = fabsf(y);
        const float half = ay < 0.015625f ? 0.0009765625f : ldexpf(1.f, (int)floorf(log2f(ay)) - 4);
        if (!(fabsf(v - y) <= half * 1.000001f)) {
          if (bad++ < 3) gt_log("quantize %s (%lld, %lld): x / scale %g -> %g", rw ? "rowwise" : "tensor", (long long)r, (long long)c, y, v);
        }
        at_max += amax > 0.f && fabsf(bf2f(xh[r * ldx + c])) == amax && fabsf(v) == 448.f;
      }
      for (int64_t c = cols; c < ldo; c++) clobbered += qh[r * ldo + c] != 0x7f;
    }
    GT_CHECK(bad_scale == 0, "quantize %s: %lld scales differ from amax / 448", rw ? "rowwise" : "tensor", (long long)bad_scale);
    GT_CHECK(bad == 0, "quantize %s: %lld of %lld bytes are not the nearest e4m3", rw ? "rowwise" : "tensor", (long long)bad,
             (long long)(rows * cols));
    GT_CHECK(at_max >= (rw ? rows - 1 : 1), "quantize %s: the amax elements map to +-448 in %lld places", rw ? "rowwise" : "tensor",
             (long long)at_max);
    GT_CHECK(clobbered == 0, "quantize %s: %lld bytes past cols written", rw ? "rowwise" : "tensor", (long long)clobbered);
    gt_log("meld_fp8_quantize %s %lldx%lld: scales exact, bytes nearest e4m3", rw ? "rowwise" : "per tensor",
           (long long)rows, (long long)cols);
  }
  { /* a row below amax = 448 / FLT_MAX (448 / amax overflows): finite bytes, zeros stay zero,
       scale 1 / FLT_MAX, scale x out ~ x; the next row ordinary */
    uint16_t th[2 * 16];
    for (int i = 0; i < 32; i++) {
      const float f = (i % 3 == 0 ? 0.f : 1e-37f * (1.f + (float)(i % 16) / 8.f)) * (i % 2 ? -1.f : 1.f) * (i < 16 ? 1.f : 1e30f);
      uint32_t u;
      memcpy(&u, &f, 4);
      th[i] = (uint16_t)(u >> 16); /* (truncated: the reference reads the same bf16) */
    }
    GT_CUDA(cudaMemcpy(x, th, sizeof th, cudaMemcpyHostToDevice));
    meld_fp8_quantize_args_t a;
    memset(&a, 0, sizeof a);
    a.x = x, a.ldx = 16, a.out = q, a.ldo = 16, a.scale = sc, a.rows = 2, a.cols = 16, a.rowwise = 1;
    GT_MELD(meld_fp8_quantize(&a, 0));
    GT_CUDA(cudaDeviceSynchronize());
    uint8_t qt[32];
    float st[2];
    GT_CUDA(cudaMemcpy(qt, q, 32, cudaMemcpyDeviceToHost));
    GT_CUDA(cudaMemcpy(st, sc, 8, cudaMemcpyDeviceToHost));
    int tbad = 0;
    for (int i = 0; i < 32; i++) {
      const float xv = bf2f(th[i]), v = gt_e4m3_value(qt[i]) * st[i / 16];
      tbad += !isfinite(gt_e4m3_value(qt[i])) || (xv == 0.f ? v != 0.f : fabsf(v - xv) > 0.07f * fabsf(xv));
    }
    GT_CHECK(st[0] == 1.0f / FLT_MAX && tbad == 0, "quantize of a row below amax 448 / FLT_MAX: scale %g (want %g), %d bad bytes",
             st[0], 1.0f / FLT_MAX, tbad);
  }
  /* round trip: C = A B^T from per-row quantized A [m,k] and B [n,k] */
  const int64_t m = 256, n = 512, k = 1024;
  uint16_t *ab = NULL, *bb = NULL, *c = NULL;
  uint8_t *a8 = NULL, *b8 = NULL;
  float *sa = NULL, *sb = NULL, *want = NULL;
  GT_CUDA(cudaMalloc(&ab, (size_t)m * k * 2));
  GT_CUDA(cudaMalloc(&bb, (size_t)n * k * 2));
  GT_CUDA(cudaMalloc(&a8, (size_t)m * k));
  GT_CUDA(cudaMalloc(&b8, (size_t)n * k));
  GT_CUDA(cudaMalloc(&sa, (size_t)m * 4));
  GT_CUDA(cudaMalloc(&sb, (size_t)n * 4));
  GT_CUDA(cudaMalloc(&c, (size_t)m * n * 2));
  GT_CUDA(cudaMalloc(&want, (size_t)m * n * 4));
  gt_fill_bf16_2d<<<264, 256>>>(ab, m, k, k, 91);
  gt_fill_bf16_2d<<<264, 256>>>(bb, n, k, k, 92);
  q_shape_rows<<<264, 256>>>(ab, m, k, k, -1);
  meld_fp8_quantize_args_t qa;
  memset(&qa, 0, sizeof qa);
  qa.x = ab, qa.ldx = k, qa.out = a8, qa.ldo = k, qa.scale = sa, qa.rows = m, qa.cols = k, qa.rowwise = 1;
  GT_MELD(meld_fp8_quantize(&qa, 0));
  qa.x = bb, qa.out = b8, qa.scale = sb, qa.rows = n;
  GT_MELD(meld_fp8_quantize(&qa, 0));
  meld_gemm_fp8_args_t g;
  memset(&g, 0, sizeof g);
  g.a = a8, g.lda = k, g.b = b8, g.ldb = k, g.scale_a = sa, g.scale_b = sb, g.scaling = MELD_FP8_ROWWISE;
  g.c = c, g.ldc = n, g.m = m, g.n = n, g.k = k;
  GT_MELD(meld_gemm_fp8(&g, 0));
  const float one = 1.0f, zero = 0.0f;
  const cublasStatus_t st = cublasGemmEx(g_cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)m, (int)k, &one, bb, CUDA_R_16BF,
                                         (int)k, ab, CUDA_R_16BF, (int)k, &zero, want, CUDA_R_32F, (int)n,
                                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  GT_CHECK(st == CUBLAS_STATUS_SUCCESS, "cublasGemmEx failed: %d", (int)st);
  GT_CUDA(cudaDeviceSynchronize());
  uint16_t *ch = (uint16_t *)malloc((size_t)m * n * 2);
  float *wh = (float *)malloc((size_t)m * n * 4);
  GT_CUDA(cudaMemcpy(ch, c, (size_t)m * n * 2, cudaMemcpyDeviceToHost));
  GT_CUDA(cudaMemcpy(wh, want, (size_t)m * n * 4, cudaMemcpyDeviceToHost));
  const double err = ref_rel_err_bf16(ch, n, wh, n, m, n);
  GT_CHECK(err <= 0.08, "quantize + gemm_fp8 rowwise round trip %lldx%lldx%lld: rel err %.3e vs bf16 > 0.08", (long long)m,
           (long long)n, (long long)k, err);
  gt_log("meld_fp8_quantize rowwise + meld_gemm_fp8 rowwise %lldx%lldx%lld: rel err %.3e vs the bf16 GEMM", (long long)m,
         (long long)n, (long long)k, err);
  free(xh), free(qh), free(sh), free(ch), free(wh);
  cudaFree(x), cudaFree(q), cudaFree(sc), cudaFree(ab), cudaFree(bb), cudaFree(a8), cudaFree(b8);
  cudaFree(sa), cudaFree(sb), cudaFree(c), cudaFree(want);
}

/* Bad arguments: MELD_ERR_INVALID_ARG with the reason; nothing launched. */
static void test_bad_args(void) {
  uint8_t *x = NULL;
  GT_CUDA(cudaMalloc(&x, 1 << 20));
  meld_gemm_fp8_args_t ok;
  memset(&ok, 0, sizeof ok);
  ok.a = x, ok.lda = 256, ok.b = x, ok.ldb = 256, ok.c = x, ok.ldc = 256, ok.m = 64, ok.n = 64, ok.k = 256;
  struct {
    const char *what, *says;
    meld_gemm_fp8_args_t g;
  } bad[9];
  for (int i = 0; i < 9; i++) bad[i].g = ok;
  bad[0].what = "k 200", bad[0].says = "multiple of 16", bad[0].g.k = 200;
  bad[1].what = "lda 264", bad[1].says = "lda", bad[1].g.lda = 264;
  bad[2].what = "ldb < k", bad[2].says = "ldb", bad[2].g.ldb = 128;
  bad[3].what = "ldc 60", bad[3].says = "ldc", bad[3].g.ldc = 60;
  bad[4].what = "a NULL", bad[4].says = "a is NULL", bad[4].g.a = NULL;
  bad[5].what = "c misaligned", bad[5].says = "16-byte aligned", bad[5].g.c = x + 8;
  bad[6].what = "m < 0", bad[6].says = "m -1", bad[6].g.m = -1;
  bad[7].what = "scale misaligned", bad[7].says = "scale", bad[7].g.scale_a = (const float *)(x + 2);
  bad[8].what = "scaling 4", bad[8].says = "scaling 4", bad[8].g.scaling = (meld_fp8_scaling_t)4;
  for (int i = 0; i < 9; i++) {
    const meld_result_t r = meld_gemm_fp8(&bad[i].g, 0);
    GT_CHECK(r == MELD_ERR_INVALID_ARG && strstr(meld_last_error(), bad[i].says), "fp8 %s: %d (%s)", bad[i].what,
             (int)r, meld_last_error());
  }
  GT_CHECK(meld_gemm_fp8(NULL, 0) == MELD_ERR_INVALID_ARG, "fp8 NULL args accepted");
  ok.m = 0; /* empty: nothing to do */
  GT_CHECK(meld_gemm_fp8(&ok, 0) == MELD_OK, "fp8 m = 0: %s", meld_last_error());
  GT_CUDA(cudaDeviceSynchronize());
  cudaFree(x);
}

int main(void) {
  gt_rank = 0;
  int dev = 0;
  cudaDeviceProp prop;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess || prop.major != 9) {
    printf("test_gemm_fp8: no Hopper GPU: skipped\n[  PASSED  ] 0 test(s).\n");
    return 0;
  }
  gt_log("%s, %d SMs", prop.name, prop.multiProcessorCount);
  GT_CHECK(cublasCreate(&g_cublas) == CUBLAS_STATUS_SUCCESS, "cublasCreate");
  test_bad_args();
  const fp8_case_t cases[] = {
      /* m, n, k, pad, sms, cpu, scales */
      {128, 256, 128, 0, 1, 1, 0, 0},      /* one tile, one k-block: the layout itself */
      {128, 256, 128, 0, 1, 1, 1, 0},
      {256, 512, 640, 0, 0, 1, 1, 0},
      {1, 8, 16, 0, 0, 1, 1, 0},           /* tiny tails */
      {300, 200, 144, 16, 0, 1, 1, 0},     /* every dimension a tail, k not a multiple of 128 */
      {520, 1000, 1008, 32, 1, 1, 1, 0},   /* 1 SM: the persistent loop over 16 tiles */
      {1000, 1000, 4112, 0, 0, 0, 1, 0},   /* the issue's tails, vs cuBLAS */
      {1000, 1000, 4112, 16, 16, 0, 0, 0},
      /* the small-M kernel (m <= 128 and few-tile shapes, B [N,K]: meld_gemm's rule): decode
       * rows, tails in m, n (not a multiple of 8 or 128) and k, padding, several m-blocks */
      {128, 8192, 8192, 0, 0, 0, 1, 0},
      {16, 8192, 8192, 0, 0, 0, 1, 0},
      {7, 1000, 4112, 16, 0, 1, 1, 0},
      {33, 1100, 528, 0, 0, 1, 1, 0},
      {1, 256, 128, 0, 0, 1, 0, 0},
      {128, 264, 8192, 0, 0, 0, 1, 0},
      {64, 4096, 4096, 0, 0, 0, 1, 0},
      {2048, 1280, 8192, 0, 0, 0, 1, 0},
      {512, 4096, 7168, 0, 0, 0, 1, 0},
      {2048, 5120, 8192, 0, 0, 0, 1, 0},   /* the 128 x 320 tile / stream-K shape */
      {4096, 4096, 4096, 0, 0, 0, 1, 0},
      {8192, 8192, 8192, 0, 0, 0, 1, 0},
      {8000, 7000, 4000, 0, 0, 0, 1, 0},
      /* rowwise scales on every kernel path: one tile, tails (rows and columns past C's edge),
       * the persistent loop, the small-M kernel (decode rows, tails), split pieces, the wide
       * tile, large; each operand's rows alone */
      {128, 256, 128, 0, 1, 1, 2, 0},
      {300, 200, 144, 16, 0, 1, 2, 0},
      {520, 1000, 1008, 32, 1, 1, 2, 0},
      {16, 8192, 8192, 0, 0, 0, 2, 0},
      {7, 1000, 4112, 16, 0, 1, 2, 0},
      {33, 1100, 528, 0, 0, 1, 3, 0},
      {128, 264, 8192, 0, 0, 0, 2, 0},
      {512, 4096, 7168, 0, 0, 0, 2, 0},
      {2048, 5120, 8192, 0, 0, 0, 2, 0},
      {1000, 1000, 4112, 0, 0, 0, 3, 0},
      {1000, 1000, 4112, 0, 0, 0, 4, 0},
      {64, 4096, 4096, 0, 0, 0, 4, 0},
      {8000, 7000, 4000, 0, 0, 0, 2, 0},
      /* session 43 (the column scales spread over the warp, read by shuffle): n odd (a last
       * pair of one column), scale_b not 8-byte aligned, on the 128 x 256 (scales loaded before
       * the mainloop's last wait), wide (after it), small-M and ping-pong kernels */
      {300, 203, 144, 16, 0, 1, 2, 0},
      {520, 1000, 1008, 32, 1, 1, 5, 0},
      {1000, 1001, 4112, 0, 0, 0, 5, 0},
      {2048, 5120, 8192, 0, 0, 0, 5, 0},
      {2048, 5117, 8192, 0, 0, 0, 2, 0},
      {16, 8191, 8192, 0, 0, 0, 5, 0},
      {300, 200, 144, 16, 0, 1, 5, 128},
      /* the ping-pong tile (session 42): one tile, tails, padding, few SMs (the warpgroups
       * alternate over many tiles), one k-block a tile, large; per tensor, NULL and rowwise */
      {128, 128, 128, 0, 1, 1, 1, 128},
      {300, 200, 144, 16, 0, 1, 2, 128},
      {129, 1000, 128, 0, 0, 1, 0, 128},
      {520, 1000, 1008, 32, 1, 1, 2, 128},
      {1000, 1000, 4112, 16, 3, 0, 1, 128},
      {1000, 1000, 4112, 0, 7, 0, 3, 128},
      {640, 1280, 128, 0, 5, 0, 4, 128},
      {16, 8192, 8192, 0, 0, 0, 2, 128},
      {2048, 5120, 8192, 0, 0, 0, 2, 128},
      {8192, 8192, 8192, 0, 0, 0, 1, 128},
      {8000, 7000, 4000, 0, 0, 0, 2, 128},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    run_case(&cases[i]);
    if (cudaGetLastError() != cudaSuccess) break;
  }
  test_graph_scales();
  test_quantize();
  cublasDestroy(g_cublas);
  return gt_summary("test_gemm_fp8");
}
