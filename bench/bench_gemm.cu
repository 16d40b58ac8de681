/* bench_gemm.cu — meld's GEMM engine vs cuBLASLt on the same shapes, in the same run
 * (BENCH.md). Each shape is timed in ROUNDS interleaved rounds (cuBLASLt, then every
 * variant, again and again), WARMUP warm-ups + TIMED timed calls per round (CUDA events), 2
 * rotating input sets; a row's time is the median of all its timed calls, so slow drifts of
 * clock or power hit both sides alike. Error of meld vs cuBLASLt. Prints a table (TFLOP/s,
 * ratio, geomean) and writes JSON lines.
 *
 *   bench_gemm [--quick] [--json FILE] [--commit HASH] [--variants] [--only LIST]
 *              [--rounds N] [--shape M,N,K] [--fp8]
 *
 * --soak MS runs each timed row (and cuBLASLt) back-to-back for ~MS ms afterwards and prints its
 * time with the SM clock, power and clock-event reasons NVML saw meanwhile (bench_soak.h).
 * --soak-rounds R (1..8) soaks the rows R times, in order and then reversed, and prints each
 * row's median: a row's place in the sequence can move its clock by a few percent.
 *
 * --variants adds rows for forced plan variants (data-parallel, stream-K over the partial
 * wave / one + partial wave, split-K 2/4/8 where tiles < 2 x SMs, raster group 8 / 32, and
 * "repeat" = the default timed again, a noise gauge). A variant whose plan equals one already
 * timed for the shape is skipped. --only keeps the variants named in a comma list (e.g.
 * "default,sk3,dp"). --shape adds a custom shape (may repeat); --custom-only times only those. The default variant calls
 * meld_gemm (plan per call); variants call gemm_launch with forced options. The environment
 * overrides (MELD_GEMM_GROUP_M, _SPLIT_K, _STREAM_K) apply to both.
 *
 * --fp8 adds, after each shape's bf16 rows (the reference), meld_gemm_fp8 (e4m3 A [M,K] and
 * B [N,K], per-tensor scales 0.5 and 0.25 in device memory, bf16 C; K rounded up to a multiple
 * of 16) against cuBLASLt FP8 of the same operands and scales with CUBLASLT_MATMUL_DESC_FAST_ACCUM
 * = 1 (meld's accumulation) and = 0 (periodic promotion): one row per cuBLASLt variant, the
 * same rounds, error and soak; floor "-" (no measured fp8 peak). B [K,N] shapes are not run
 * (meld_gemm_fp8 takes B [N,K] only). A cuBLASLt variant with no algorithm is skipped, said so. */
#include <cublasLt.h>
#include "../tests/gpu/gpu_test.h"
#include <execinfo.h>
#include <signal.h>
#include <unistd.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"
#include "bench_soak.h"
#include "gemm_plan.h"
#include "meld.h"

#define WARMUP 3 /* per round: >= 5 warm-ups in all (BENCH.md) */
#define TIMED 10  /* per round: 30 timed calls in all with 3 rounds */
#define MAX_ROUNDS 8
#define NSETS 2
#define PEAK_TFLOPS 780.0 /* cuBLAS bf16 at 8192^3 on one H200 (TESTBED.md) */

#define CKL(call)                                                                              \
  do {                                                                                         \
    cublasStatus_t s_ = (call);                                                                \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
      fprintf(stderr, "%s:%d %s: cublas status %d\n", __FILE__, __LINE__, #call, (int)s_);    \
      exit(1);                                                                                 \
    }                                                                                          \
  } while (0)

typedef struct {
  const char *label;
  int64_t m, n, k;
  int b_kn;
  int sm_withheld; /* run both sides on (#SMs - this) SMs */
  int quick;       /* part of --quick */
} shape_t;

static shape_t g_shapes[64 + 8] = {
    {"square", 8192, 8192, 8192, 0, 0, 1},
    {"square B[K,N]", 8192, 8192, 8192, 1, 0, 1},
    {"half", 4096, 8192, 8192, 0, 0, 1},
    /* AG+GEMM per-rank GEMMs: N_loc = N_total / P (P = 2: 5120, 28672, 14336; P = 8: 1280,
     * 7168, 3584), K = 8192 or 4096 */
    {"ag P2 qkv", 2048, 5120, 8192, 0, 0, 0},
    {"ag P2 qkv", 8192, 5120, 8192, 0, 0, 0},
    {"ag P2 qkv", 16384, 5120, 8192, 0, 0, 0},
    {"ag P2 gate", 2048, 28672, 8192, 0, 0, 0},
    {"ag P2 gate", 8192, 28672, 8192, 0, 0, 0},
    {"ag P2 gate", 16384, 28672, 8192, 0, 0, 0},
    {"ag P8 qkv", 2048, 1280, 8192, 0, 0, 0},
    {"ag P8 qkv", 8192, 1280, 8192, 0, 0, 0},
    {"ag P8 qkv", 16384, 1280, 8192, 0, 0, 0},
    {"ag P8 gate", 2048, 7168, 8192, 0, 0, 0},
    {"ag P8 gate", 8192, 7168, 8192, 0, 0, 1},
    {"ag P8 gate", 16384, 7168, 8192, 0, 0, 0},
    {"ag P2 8b", 2048, 14336, 4096, 0, 0, 0},
    {"ag P2 8b", 8192, 14336, 4096, 0, 0, 0},
    {"ag P2 8b", 16384, 14336, 4096, 0, 0, 0},
    {"ag P8 8b", 2048, 3584, 4096, 0, 0, 0},
    {"ag P8 8b", 8192, 3584, 4096, 0, 0, 0},
    {"ag P8 8b", 16384, 3584, 4096, 0, 0, 0},
    /* GEMM+RS per-rank GEMMs: K_loc = K_total / P */
    {"rs P2 o", 2048, 8192, 4096, 0, 0, 0},
    {"rs P2 o", 8192, 8192, 4096, 0, 0, 1},
    {"rs P2 o", 16384, 8192, 4096, 0, 0, 0},
    {"rs P2 down", 2048, 8192, 14336, 0, 0, 0},
    {"rs P2 down", 8192, 8192, 14336, 0, 0, 0},
    {"rs P2 down", 16384, 8192, 14336, 0, 0, 0},
    {"rs P8 o", 2048, 8192, 1024, 0, 0, 0},
    {"rs P8 o", 8192, 8192, 1024, 0, 0, 0},
    {"rs P8 o", 16384, 8192, 1024, 0, 0, 0},
    {"rs P8 down", 2048, 8192, 3584, 0, 0, 0},
    {"rs P8 down", 8192, 8192, 3584, 0, 0, 0},
    {"rs P8 down", 16384, 8192, 3584, 0, 0, 0},
    {"rs P2 8b", 2048, 4096, 7168, 0, 0, 0},
    {"rs P2 8b", 8192, 4096, 7168, 0, 0, 0},
    {"rs P2 8b", 16384, 4096, 7168, 0, 0, 0},
    {"rs P8 8b", 2048, 4096, 1792, 0, 0, 0},
    {"rs P8 8b", 8192, 4096, 1792, 0, 0, 0},
    {"rs P8 8b", 16384, 4096, 1792, 0, 0, 0},
    /* decode and tails */
    {"decode", 16, 8192, 8192, 0, 0, 0},
    {"decode", 128, 8192, 8192, 0, 0, 1},
    {"decode", 512, 8192, 8192, 0, 0, 0},
    {"tail", 8000, 7000, 4000, 0, 0, 1},
    {"tail", 1000, 8192, 8192, 0, 0, 1},
    /* SMs withheld (room for comm CTAs), cuBLASLt given the same SM count */
    {"square -8 SMs", 8192, 8192, 8192, 0, 8, 1},
    {"square -16 SMs", 8192, 8192, 8192, 0, 16, 0},
    {"ag P2 gate -8 SMs", 8192, 28672, 8192, 0, 8, 0},
    {"rs P2 o -16 SMs", 8192, 8192, 4096, 0, 16, 0},
};
static int g_nshapes = 48;

/* sums[0] += (x - y)^2, sums[1] += y^2 over bf16 arrays; NaN/Inf in x counted in sums[2]. */
__global__ void err_kernel(const uint16_t *x, const uint16_t *y, size_t n, double *sums) {
  double d = 0, r = 0, bad = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const float a = __uint_as_float((uint32_t)x[i] << 16), b = __uint_as_float((uint32_t)y[i] << 16);
    if (!isfinite(a)) bad += 1;
    else { d += (double)(a - b) * (a - b); r += (double)b * b; }
  }
  atomicAdd(&sums[0], d);
  atomicAdd(&sums[1], r);
  atomicAdd(&sums[2], bad);
}

/* ||x - y|| / ||y|| (Frobenius) over n bf16 values; infinite where x holds a NaN or Inf. */
static double rel_err_bf16(const uint16_t *x, const uint16_t *y, size_t n) {
  double *sums;
  CK(cudaMalloc(&sums, 3 * sizeof(double)));
  CK(cudaMemset(sums, 0, 3 * sizeof(double)));
  err_kernel<<<1024, 256>>>(x, y, n, sums);
  double hs[3];
  CK(cudaMemcpy(hs, sums, sizeof hs, cudaMemcpyDeviceToHost));
  cudaFree(sums);
  return hs[2] > 0 ? INFINITY : sqrt(hs[0] / (hs[1] > 0 ? hs[1] : 1));
}

static int cmp_float(const void *a, const void *b) {
  const float x = *(const float *)a, y = *(const float *)b;
  return x < y ? -1 : x > y;
}

typedef struct {
  cublasLtHandle_t lt;
  void *ws;
  size_t ws_bytes;
} lt_t;

typedef struct {
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatmulAlgo_t algo;
} lt_plan_t;

/* The heuristic's best algorithm for p within the workspace (p->algo); 0 where it has none
 * (*st: the heuristic's status). */
static int lt_pick(lt_t *lt, lt_plan_t *p, cublasStatus_t *st) {
  cublasLtMatmulPreference_t pref;
  CKL(cublasLtMatmulPreferenceCreate(&pref));
  CKL(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &lt->ws_bytes,
                                           sizeof lt->ws_bytes));
  cublasLtMatmulHeuristicResult_t res;
  int found = 0;
  *st = cublasLtMatmulAlgoGetHeuristic(lt->lt, p->desc, p->la, p->lb, p->lc, p->lc, pref, 1, &res, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (*st != CUBLAS_STATUS_SUCCESS || found < 1) return 0;
  p->algo = res.algo;
  return 1;
}

/* Row-major C[m,n] = A B^T (or A B) as column-major C^T = op(B) A^T. */
static void lt_plan(lt_t *lt, lt_plan_t *p, const shape_t *s, int sm_target) {
  cublasOperation_t ta = s->b_kn ? CUBLAS_OP_N : CUBLAS_OP_T, tb = CUBLAS_OP_N;
  CKL(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  CKL(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  CKL(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  if (sm_target > 0)
    CKL(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sm_target, sizeof sm_target));
  if (s->b_kn) CKL(cublasLtMatrixLayoutCreate(&p->la, CUDA_R_16BF, s->n, s->k, s->n));
  else CKL(cublasLtMatrixLayoutCreate(&p->la, CUDA_R_16BF, s->k, s->n, s->k));
  CKL(cublasLtMatrixLayoutCreate(&p->lb, CUDA_R_16BF, s->k, s->m, s->k));
  CKL(cublasLtMatrixLayoutCreate(&p->lc, CUDA_R_16BF, s->n, s->m, s->n));
  cublasStatus_t st;
  if (!lt_pick(lt, p, &st)) { fprintf(stderr, "cuBLASLt: no algorithm (status %d)\n", (int)st); exit(1); }
}

static cublasStatus_t lt_matmul(lt_t *lt, lt_plan_t *p, const void *a, const void *b, void *c) {
  const float one = 1.0f, zero = 0.0f;
  return cublasLtMatmul(lt->lt, p->desc, &one, b, p->la, a, p->lb, &zero, c, p->lc, c, p->lc, &p->algo, lt->ws,
                        lt->ws_bytes, 0);
}

static void lt_run(lt_t *lt, lt_plan_t *p, const void *a, const void *b, void *c) { CKL(lt_matmul(lt, p, a, b, c)); }

static void lt_free(lt_plan_t *p) {
  cublasLtMatrixLayoutDestroy(p->la);
  cublasLtMatrixLayoutDestroy(p->lb);
  cublasLtMatrixLayoutDestroy(p->lc);
  cublasLtMatmulDescDestroy(p->desc);
}

/* cuBLASLt FP8 (torch._scaled_mm's call) in lt_plan's view, D^T [n,m] = op(B) A^T column-major:
 * cuBLASLt's A is our B [N,K] read as a K x N matrix (ld K) and transposed, its B our A [M,K]
 * read as K x M (ld K), not transposed: the "TN" form Hopper's FP8 kernels require (both
 * operands K-major). So cuBLASLt's A scale is our scale_b, its B scale our scale_a. C and D
 * bf16 (beta = 0). Returns 0 where the heuristic has no algorithm (*st: its status), with
 * nothing left allocated. */
static int lt_plan_fp8(lt_t *lt, lt_plan_t *p, const shape_t *s, int sm_target, int8_t fast_accum,
                       const float *scale_a, const float *scale_b, cublasStatus_t *st) {
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  const void *sa = scale_b, *sb = scale_a;
  CKL(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  CKL(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  CKL(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  CKL(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast_accum, sizeof fast_accum));
  CKL(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa));
  CKL(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb));
  if (sm_target > 0)
    CKL(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sm_target, sizeof sm_target));
  CKL(cublasLtMatrixLayoutCreate(&p->la, CUDA_R_8F_E4M3, s->k, s->n, s->k));
  CKL(cublasLtMatrixLayoutCreate(&p->lb, CUDA_R_8F_E4M3, s->k, s->m, s->k));
  CKL(cublasLtMatrixLayoutCreate(&p->lc, CUDA_R_16BF, s->n, s->m, s->n));
  if (lt_pick(lt, p, st)) return 1;
  lt_free(p);
  return 0;
}

typedef struct {
  uint16_t *a[NSETS], *b[NSETS], *c;
} bufs_t;

/* Appends TIMED samples (ms) of fn (after WARMUP calls) to out[*n], rotating the input sets. */
typedef void (*call_fn)(void *ctx, int set);
static void time_round(call_fn fn, void *ctx, float *out, int *n) {
  cudaEvent_t ev[2 * TIMED];
  for (int i = 0; i < 2 * TIMED; i++) CK(cudaEventCreate(&ev[i]));
  CK(cudaEventRecord(ev[0], 0));
  for (int i = 0; i < WARMUP; i++) fn(ctx, i % NSETS);
  CK(cudaEventRecord(ev[1], 0));
  const int settle = bench_settle_ms();
  if (settle) { /* sustained timing: back-to-back until the power cap holds the clock */
    float w = 0;
    CK(cudaEventSynchronize(ev[1]));
    CK(cudaEventElapsedTime(&w, ev[0], ev[1]));
    soak_result_t r;
    soak_row(NULL, fn, ctx, w / WARMUP, settle, 0, &r); /* (bench_soak.h) */
  }
  for (int i = 0; i < TIMED; i++) {
    CK(cudaEventRecord(ev[2 * i], 0));
    fn(ctx, i % NSETS);
    CK(cudaEventRecord(ev[2 * i + 1], 0));
  }
  CK(cudaDeviceSynchronize());
  for (int i = 0; i < TIMED; i++) CK(cudaEventElapsedTime(&out[(*n)++], ev[2 * i], ev[2 * i + 1]));
  for (int i = 0; i < 2 * TIMED; i++) cudaEventDestroy(ev[i]);
}

static float median(float *v, int n) {
  qsort(v, n, sizeof v[0], cmp_float);
  return n % 2 ? v[n / 2] : 0.5f * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct {
  const shape_t *s;
  bufs_t *bf;
  gemm_plan_opts_t opts;
  int use_opts;
  int sm_count;
  uint16_t *out;
  int failed;
} meld_ctx_t;

static void meld_call(void *vctx, int set) {
  meld_ctx_t *x = (meld_ctx_t *)vctx;
  meld_gemm_args_t a;
  memset(&a, 0, sizeof a);
  a.a = x->bf->a[set]; a.lda = x->s->k;
  a.b = x->bf->b[set]; a.ldb = x->s->b_kn ? x->s->n : x->s->k;
  a.b_layout = x->s->b_kn ? MELD_B_KN : MELD_B_NK;
  a.c = x->out; a.ldc = x->s->n;
  a.m = x->s->m; a.n = x->s->n; a.k = x->s->k;
  a.sm_count = x->sm_count;
  meld_result_t r = x->use_opts ? gemm_launch(&a, &x->opts, 0) : meld_gemm(&a, 0);
  if (r != MELD_OK) x->failed = 1;
}

typedef struct {
  lt_t *lt;
  lt_plan_t *p;
  bufs_t *bf;
  uint16_t *out;
} lt_ctx_t;

static void lt_call(void *vctx, int set) {
  lt_ctx_t *x = (lt_ctx_t *)vctx;
  lt_run(x->lt, x->p, x->bf->a[set], x->bf->b[set], x->out);
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Plan variants (--variants). */
typedef struct {
  const char *name;
  int split_k, stream_k, group_m;
  int small_only; /* only where tiles < 2 x SMs */
  int fixup_red;  /* 1: stored partials, 2: added in L2, 3: added in L2, early ticket */
  int epi_defer;  /* 1: the last epilogue part not deferred (the pre-session-5 epilogue); 2: deferred */
  int split_ileave; /* 2: split-K k-blocks interleaved across the splits */
  int skinny;       /* 2: the swapped small-M kernel (only where m <= 128, B [N,K]); 0: engine */
  int skinny_hint;  /* 0 = default; else 1 + hint bits (1: B evict_first, 2: A evict_last) */
  int skinny_mt;    /* 0 = the plan's; else the swapped kernel's padded m-block height */
  int cluster_m;    /* 0 = the plan's; 2 = the experimental B-multicast pair
                       (needs MELD_GEMM_CLUSTER_EXPERIMENTAL=1, else skipped with the reason) */
  int tile_n;       /* 0 = 256 (forced variants); 320 = the wide tile, 128 the ping-pong tile (B [N,K] only) */
  int store_hint;   /* 0 = the plan's; 2: C's TMA stores with L2::evict_first (session 15) */
} variant_t;
static const variant_t g_variants[] = {
    {"default", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {"repeat", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {"dp", 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"sk2", 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},     {"sk3", 1, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},    {"skmodel", 1, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"split2", 2, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"split4", 4, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0},  {"split8", 8, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {"g8", 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"g32", 0, 0, 32, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},    {"red", 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0},    {"split2red", 2, 1, 0, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0},
    {"split8red", 8, 1, 0, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0}, {"sk2red", 1, 2, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0}, {"sk3red", 1, 3, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0},
    {"nodefer", 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0}, {"loads", 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}, {"ileave", 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0},
    {"split2il", 2, 1, 0, 1, 0, 0, 2, 0, 0, 0, 0, 0, 0}, {"split8il", 8, 1, 0, 1, 2, 0, 2, 0, 0, 0, 0, 0, 0}, {"early", 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0},
    {"split2early", 2, 1, 0, 1, 3, 0, 0, 0, 0, 0, 0, 0, 0},
    /* the engine where meld_gemm's default is the small-M kernel, and the small-M kernel's
     * cluster sizes and L2 hints */
    {"engine", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"skinny", 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0},       {"skinny_s1", 1, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0},
    {"skinny_s2", 2, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0},    {"skinny_s4", 4, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0},
    {"skinny_s3", 3, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0},    {"skinny_s8", 8, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0},
    {"skinny_nohint", 0, 0, 0, 0, 0, 0, 0, 2, 1, 0, 0, 0, 0},
    {"skinny_bfirst", 0, 0, 0, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0},
    {"sw128", 0, 0, 0, 0, 0, 0, 0, 2, 0, 128, 0, 0, 0},   {"sw160", 0, 0, 0, 0, 0, 0, 0, 2, 0, 160, 0, 0, 0},
    {"sw192", 0, 0, 0, 0, 0, 0, 0, 2, 0, 192, 0, 0, 0},   {"sw256", 0, 0, 0, 0, 0, 0, 0, 2, 0, 256, 0, 0, 0},
    {"cl2", 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0}, /* 2x1 cluster, B multicast, no split/stream-K */
    {"cl2g16", 1, 1, 16, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0},
    /* the 128 x 320 tile (meld_gemm's default where gemm_plan_default_tile_n says), and the
     * 128 x 256 default with its stream-K rule ("n256": meld_gemm's default before where the engine runs; m <= 128 takes the engine here, not the small-M kernel) */
    {"w320", 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 320, 0}, {"n256", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 256, 0},
    {"w320nd", 1, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 320, 0}, /* the wide tile, deferral off (its default since s11) */
    {"w320d", 1, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 320, 0},  /* the wide tile with its 64-column third deferred */
    {"w320cl2", 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 2, 320, 0}, /* the wide tile in B-multicast pairs (experimental) */
    /* C's TMA stores with L2::evict_first (session 15): the 128 x 256 default and the wide tile */
    {"evict", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2}, {"w320ev", 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 320, 2},
    /* the ping-pong tile (session 42): a whole 128 x 128 tile per consumer warpgroup (B [N,K]) */
    {"pp", 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 128, 0},
    {"ppcl2", 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 2, 128, 0}, /* in B-multicast pairs (experimental) */
};
#define NVAR ((int)(sizeof g_variants / sizeof g_variants[0]))

static int in_list(const char *list, const char *name) {
  if (!list) return 1;
  const size_t n = strlen(name);
  for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
    if ((p == list || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) return 1;
  return 0;
}

/* The plan fields that change the schedule (equal signatures = the same kernel work). */
static void plan_sig(const gemm_params_t *p, int workers, char *buf, size_t len) {
  if (p->skinny_mt) {
    snprintf(buf, len, "w%d swapped mt%d s%d h%d", workers, p->skinny_mt, p->skinny_split, p->skinny_hint);
    return;
  }
  const int units_m = (p->tiles_m + p->cluster_m - 1) / p->cluster_m;
  char tile[16] = "";
  if (p->bn) snprintf(tile, sizeof tile, " n%d", p->bn);
  snprintf(buf, len, "w%d c%d%s%s%s s%d/%d/%d%s sk%d/%d g%d e%d%s%s", workers, p->cluster_m, tile,
           p->early_release ? " er" : "", p->store_hint ? " ev" : "", p->split_k,
           p->kb_per_split, p->split_from, p->split_ileave ? "i" : "", p->sk_tiles, p->sk_workers,
           p->group_m < units_m ? p->group_m : units_m, p->epi_tma,
           p->fixup_red == 2 ? " early" : p->fixup_red ? " red" : "",
           p->epi_defer ? " d" : "");
}

typedef struct { /* the run's facts that rows, their JSON lines and soaks share */
  FILE *jf;
  const char *gpu, *commit, *date;
  int drv, rt, rounds, sms, soak_ms, soak_rounds;
} run_t;

typedef struct { /* one row to soak */
  call_fn fn;
  void *ctx;
  const char *name;  /* its variant column */
  float ms;          /* its timed median (sets the calls) */
  const int *failed; /* a meld row's flag: skipped once set; NULL = never */
} soak_item_t;

/* --soak: each row back-to-back for ~soak_ms, after a lead-in of its own load (bench_soak.h
 * soak_lead_ms, unrecorded), NVML sampled: clock and power per row. --soak-rounds R: the rows
 * soaked R times, in order then reversed (a row's place in the sequence moves its clock:
 * session 11 saw the later of two rows win in both orders), then each row's median. */
static void soak_items(const soak_item_t *it, int nit, const shape_t *s, const run_t *run) {
  double sk_ms[NVAR + 1][8], sk_mhz[NVAR + 1][8];
  const double flop = 2.0 * s->m * s->n * s->k;
  const int rounds = run->soak_rounds;
  for (int rr = 0; rr < rounds; rr++)
    for (int jj = 0; jj < nit; jj++) {
      const int j = rr % 2 ? nit - 1 - jj : jj;
      if (it[j].failed && *it[j].failed) continue;
      const float t = it[j].ms;
      const int calls = t > 0 ? (int)(run->soak_ms / t) + 1 : 1;
      const int lead = t > 0 && soak_lead_ms() > 0 ? (int)(soak_lead_ms() / t) + 1 : 0;
      soak_result_t r;
      for (int pass = lead > 0 ? 0 : 1; pass < 2; pass++)
        soak_run(soak_nvml(), it[j].fn, it[j].ctx, NSETS, pass ? calls : lead, &r);
      sk_ms[j][rr] = r.ms_per_call;
      sk_mhz[j][rr] = r.sm_mhz;
      printf("soak%s%.0d %6lld %6lld %6lld %-40s %9.4f ms %7.1f TFLOP/s  SM %6.0f MHz (%u-%u)  %5.0f W  "
             "reasons 0x%llx  (%d calls, %d samples)\n", rounds > 1 ? " r" : "", rounds > 1 ? rr + 1 : 0,
             (long long)s->m, (long long)s->n, (long long)s->k, it[j].name, r.ms_per_call,
             flop / r.ms_per_call * 1e-9, r.sm_mhz, r.min_mhz, r.max_mhz, r.power_w, r.reasons, r.calls,
             r.samples);
      soak_json(run->jf, "gemm", (long long)s->m, (long long)s->n, (long long)s->k, it[j].name, 1, 0, &r, NULL, t,
                run->gpu, run->commit, run->date);
    }
  for (int j = 0; rounds > 1 && j < nit; j++) { /* per row: the median over the rounds */
    if (it[j].failed && *it[j].failed) continue;
    double ms[8], mhz = 0;
    for (int rr = 0; rr < rounds; rr++) ms[rr] = sk_ms[j][rr], mhz += sk_mhz[j][rr] / rounds;
    qsort(ms, (size_t)rounds, sizeof ms[0], cmp_double);
    const double med = rounds % 2 ? ms[rounds / 2] : 0.5 * (ms[rounds / 2 - 1] + ms[rounds / 2]);
    printf("soak median %6lld %6lld %6lld %-40s %9.4f ms (%.4f .. %.4f over %d rounds)  SM %6.0f MHz\n",
           (long long)s->m, (long long)s->n, (long long)s->k, it[j].name, med, ms[0], ms[rounds - 1], rounds, mhz);
  }
}

/* ---- --fp8 ---- */

typedef struct {
  const shape_t *s; /* K a multiple of 16 */
  uint8_t *a[NSETS], *b[NSETS];
  const float *scales; /* device: scale_a, scale_b */
  uint16_t *out;
  int sm_count;
  lt_t *lt;      /* cuBLASLt rows */
  lt_plan_t *p;
  int failed;    /* meld's row */
} fp8_ctx_t;

static void fp8_meld_call(void *vctx, int set) {
  fp8_ctx_t *x = (fp8_ctx_t *)vctx;
  meld_gemm_fp8_args_t a;
  memset(&a, 0, sizeof a);
  a.a = x->a[set]; a.lda = x->s->k;
  a.b = x->b[set]; a.ldb = x->s->k;
  a.scale_a = x->scales; a.scale_b = x->scales + 1;
  a.c = x->out; a.ldc = x->s->n;
  a.m = x->s->m; a.n = x->s->n; a.k = x->s->k;
  a.sm_count = x->sm_count;
  if (meld_gemm_fp8(&a, 0) != MELD_OK) x->failed = 1;
}

static void fp8_lt_call(void *vctx, int set) {
  fp8_ctx_t *x = (fp8_ctx_t *)vctx;
  lt_run(x->lt, x->p, x->a[set], x->b[set], x->out);
}

/* [0]: FAST_ACCUM = 1 (meld's accumulation: the like-for-like baseline); [1]: = 0 */
static const char *const g_fp8_lt[2] = {"cuBLASLt fp8 fast-accum", "cuBLASLt fp8 accum"};
static const char *const g_fp8_var[2] = {"fp8 vs cuBLASLt fast-accum", "fp8 vs cuBLASLt accum"};

/* One shape's fp8 rows: meld_gemm_fp8 and each cuBLASLt FP8 variant in interleaved rounds (as
 * the bf16 rows), then meld's error against each (input set 0, meld's C poisoned first).
 * log_sum / nratio: per cuBLASLt variant, for the geomeans. */
static void fp8_shape(const shape_t *s0, lt_t *lt, const run_t *run, double log_sum[2], int nratio[2]) {
  if (s0->b_kn) return; /* (meld_gemm_fp8 takes B [N,K] only) */
  shape_t sh = *s0;
  sh.k = (sh.k + 15) / 16 * 16; /* fp8 rows are read in 16-byte units (meld.h) */
  const shape_t *s = &sh;
  const int sm_use = s->sm_withheld ? run->sms - s->sm_withheld : 0;
  /* powers of two: both libraries' scaled products are exact, whichever operand takes which */
  const float hs[2] = {0.5f, 0.25f};
  fp8_ctx_t mx;
  memset(&mx, 0, sizeof mx);
  mx.s = s; mx.sm_count = sm_use;
  float *scales;
  CK(cudaMalloc(&scales, sizeof hs));
  CK(cudaMemcpy(scales, hs, sizeof hs, cudaMemcpyHostToDevice));
  mx.scales = scales;
  for (int i = 0; i < NSETS; i++) {
    CK(cudaMalloc(&mx.a[i], s->m * s->k));
    CK(cudaMalloc(&mx.b[i], s->n * s->k));
    gt_fill_e4m3<<<1024, 256>>>(mx.a[i], s->m, s->k, s->k, 300 + i);
    gt_fill_e4m3<<<1024, 256>>>(mx.b[i], s->n, s->k, s->k, 400 + i);
  }
  uint16_t *c_meld, *c_lt;
  CK(cudaMalloc(&c_meld, s->m * s->n * 2));
  CK(cudaMalloc(&c_lt, s->m * s->n * 2));
  mx.out = c_meld;
  fp8_ctx_t lx[2];
  lt_plan_t lp[2];
  int have[2];
  for (int f = 0; f < 2; f++) { /* a variant cuBLASLt has no algorithm for, or refuses, is skipped */
    lx[f] = mx;
    lx[f].lt = lt; lx[f].p = &lp[f]; lx[f].out = c_lt;
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    const char *why = "the heuristic returned no algorithm";
    have[f] = lt_plan_fp8(lt, &lp[f], s, sm_use, f == 0, scales, scales + 1, &st);
    if (have[f] && (st = lt_matmul(lt, &lp[f], mx.a[0], mx.b[0], c_lt)) != CUBLAS_STATUS_SUCCESS) {
      why = "cublasLtMatmul failed";
      lt_free(&lp[f]);
      have[f] = 0;
    }
    if (!have[f])
      printf("%-20s %6lld %6lld %6lld %-40s skipped: %s unsupported here: %s (cublas status %d)\n", s->label,
             (long long)s->m, (long long)s->n, (long long)s->k, g_fp8_var[f], g_fp8_lt[f], why, (int)st);
  }
  fp8_meld_call(&mx, 0);
  if (mx.failed) {
    printf("%-20s %6lld %6lld %6lld %-40s skipped: %s\n", s->label, (long long)s->m, (long long)s->n,
           (long long)s->k, "fp8", meld_last_error());
  } else {
    static float smp[3][MAX_ROUNDS * TIMED]; /* [2]: meld's */
    int ns[3] = {0, 0, 0};
    for (int r = 0; r < run->rounds; r++) { /* interleaved: cuBLASLt's, then meld */
      for (int f = 0; f < 2; f++)
        if (have[f]) time_round(fp8_lt_call, &lx[f], smp[f], &ns[f]);
      time_round(fp8_meld_call, &mx, smp[2], &ns[2]);
    }
    const float meld_ms = mx.failed ? 0 : median(smp[2], ns[2]);
    float lt_ms[2] = {0, 0};
    if (mx.failed)
      printf("%-20s %6lld %6lld %6lld %-40s failed during timing: %s\n", s->label, (long long)s->m,
             (long long)s->n, (long long)s->k, "fp8", meld_last_error());
    else {
      CK(cudaMemset(c_meld, 0xFF, s->m * s->n * 2));
      fp8_meld_call(&mx, 0);
    }
    const double flop = 2.0 * s->m * s->n * s->k;
    for (int f = 0; f < 3 && !mx.failed; f++) {
      if (f < 2 && !have[f]) continue;
      if (f == 2 && (have[0] || have[1])) break; /* (a meld-only row where cuBLASLt had none) */
      /* cuBLASLt's columns (numbers or "-" in the table, null in JSON where it had none) */
      double rel_err = 0;
      char c_ms[16] = "-", c_tf[16] = "-", c_ratio[16] = "-", c_err[16] = "-";
      char j_base[48] = "null", j_fast[8] = "null", j_ms[16] = "null", j_tf[16] = "null", j_err[16] = "null";
      if (f < 2) {
        lt_ms[f] = median(smp[f], ns[f]);
        lt_run(lt, &lp[f], mx.a[0], mx.b[0], c_lt);
        rel_err = rel_err_bf16(c_meld, c_lt, s->m * s->n);
        const double ratio = lt_ms[f] / meld_ms;
        log_sum[f] += log(ratio);
        nratio[f]++;
        snprintf(c_ms, sizeof c_ms, "%.4f", lt_ms[f]);
        snprintf(c_tf, sizeof c_tf, "%.1f", flop / lt_ms[f] * 1e-9);
        snprintf(c_ratio, sizeof c_ratio, "%.3f", ratio);
        snprintf(c_err, sizeof c_err, "%.2e", rel_err);
        snprintf(j_base, sizeof j_base, "\"%s\"", g_fp8_lt[f]);
        snprintf(j_fast, sizeof j_fast, "%d", f == 0);
        snprintf(j_ms, sizeof j_ms, "%.5f", lt_ms[f]);
        snprintf(j_tf, sizeof j_tf, "%.1f", flop / lt_ms[f] * 1e-9);
        snprintf(j_err, sizeof j_err, "%.3e", rel_err);
      }
      /* floor "-": no measured fp8 peak (PEAK_TFLOPS is bf16's). Both libraries accumulate the
       * same e4m3 products in fp32 (in another order) and round C to bf16, so they agree well
       * within 1e-2; above 2e-2 a WARN, not a failure (a benchmark: the tests judge results). */
      printf("%-20s %6lld %6lld %6lld %-40s %9.4f %7.1f %9s %7s %6s %8s %9s%s\n", s->label, (long long)s->m,
             (long long)s->n, (long long)s->k, f < 2 ? g_fp8_var[f] : "fp8 (no cuBLASLt)", meld_ms,
             flop / meld_ms * 1e-9, c_ms, c_tf, c_ratio, "-", c_err, rel_err > 2e-2 ? "  WARN" : "");
      fflush(stdout);
      if (!run->jf) continue;
      fprintf(run->jf,
              "{\"op\": \"gemm\", \"shape\": {\"m\": %lld, \"n\": %lld, \"k\": %lld}, \"label\": \"%s\", "
              "\"b_layout\": \"nk\", \"variant\": \"%s\", \"plan\": \"meld_gemm_fp8\", \"sm_count\": %d, \"nranks\": 1, "
              "\"nnodes\": 1, \"dtype\": \"fp8_e4m3\", \"out_dtype\": \"bf16\", \"baseline\": %s, \"fast_accum\": %s, "
              "\"scale_a\": %g, \"scale_b\": %g, \"meld_ms\": %.5f, \"seq_ms\": null, \"peer_ms\": null, \"peer\": null, "
              "\"compute_ms\": %s, \"meld_compute_ms\": %.5f, \"comm_ms\": null, \"bound_ms\": %s, "
              "\"meld_tflops\": %.1f, \"cublas_tflops\": %s, \"floor_ms\": null, \"rel_err\": %s, "
              "\"rounds\": %d, \"samples\": %d, "
              "\"gpu\": \"%s\", \"driver\": %d, \"cuda\": %d, \"nccl\": null, \"torch\": null, "
              "\"settle_ms\": %d, \"date\": \"%s\", \"commit\": \"%s\"}\n",
              (long long)s->m, (long long)s->n, (long long)s->k, s->label, f < 2 ? g_fp8_var[f] : "fp8 (no cuBLASLt)",
              sm_use ? sm_use : run->sms, j_base, j_fast, hs[0], hs[1], meld_ms, j_ms, meld_ms, j_ms,
              flop / meld_ms * 1e-9, j_tf, j_err, run->rounds, ns[2], run->gpu, run->drv, run->rt,
              bench_settle_ms(), run->date, run->commit);
      fflush(run->jf);
    }
    if (run->soak_ms > 0 && !mx.failed) { /* (after the bf16 rows': the preheat is done) */
      soak_item_t it[3];
      int nit = 0;
      for (int f = 0; f < 2; f++)
        if (have[f]) { const soak_item_t t = {fp8_lt_call, &lx[f], g_fp8_lt[f], lt_ms[f], NULL}; it[nit++] = t; }
      const soak_item_t t = {fp8_meld_call, &mx, "meld fp8", meld_ms, &mx.failed};
      it[nit++] = t;
      soak_items(it, nit, s, run);
    }
  }
  for (int f = 0; f < 2; f++)
    if (have[f]) lt_free(&lp[f]);
  for (int i = 0; i < NSETS; i++) { cudaFree(mx.a[i]); cudaFree(mx.b[i]); }
  cudaFree(c_meld);
  cudaFree(c_lt);
  cudaFree(scales);
}

static void on_fatal(int sig) {
  void *bt[64];
  const int n = backtrace(bt, 64);
  fprintf(stderr, "bench_gemm: signal %d; backtrace:\n", sig);
  backtrace_symbols_fd(bt, n, 2);
  _exit(128 + sig);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* rows survive a crash */
  signal(SIGSEGV, on_fatal);
  signal(SIGABRT, on_fatal);
  int quick = 0, variants = 0, rounds = 3, custom_only = 0, soak_ms = 0, soak_rounds = 1, fp8 = 0;
  const char *json = NULL, *commit = "unknown", *only = NULL;
  for (int i = 1; i < argc; i++) {
    long long m, n, k;
    if (!strcmp(argv[i], "--quick")) quick = 1;
    else if (!strcmp(argv[i], "--custom-only")) custom_only = 1;
    else if (!strcmp(argv[i], "--variants")) variants = 1;
    else if (!strcmp(argv[i], "--fp8")) fp8 = 1;
    else if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
    else if (!strcmp(argv[i], "--commit") && i + 1 < argc) commit = argv[++i];
    else if (!strcmp(argv[i], "--only") && i + 1 < argc) { only = argv[++i]; variants = 1; }
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--soak") && i + 1 < argc) soak_ms = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--soak-rounds") && i + 1 < argc) {
      soak_rounds = atoi(argv[++i]);
      if (soak_rounds < 1 || soak_rounds > 8) { fprintf(stderr, "--soak-rounds: 1..8\n"); return 2; }
    }
    else if (!strcmp(argv[i], "--shape") && i + 1 < argc && sscanf(argv[i + 1], "%lld,%lld,%lld", &m, &n, &k) == 3 &&
             g_nshapes < (int)(sizeof g_shapes / sizeof g_shapes[0])) {
      shape_t c = {"custom", m, n, k, 0, 0, 1};
      g_shapes[g_nshapes++] = c;
      i++;
    } else {
      fprintf(stderr, "usage: %s [--quick] [--variants] [--only LIST] [--rounds N] [--shape M,N,K] [--custom-only] [--soak MS] [--soak-rounds R (1..8)] [--fp8] [--json FILE] [--commit HASH]\n"
              "  --fp8: also meld_gemm_fp8 vs cuBLASLt FP8 (fast-accum and not) per shape (B [N,K] ones)\n",
              argv[0]);
      return 2;
    }
  }
  if (rounds < 1) rounds = 1;
  if (rounds > MAX_ROUNDS) rounds = MAX_ROUNDS;
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
    (void)cudaGetLastError();
    printf("bench_gemm: no GPU: nothing to measure\n");
    return 0;
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  int drv = 0, rt = 0;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  const int sms = prop.multiProcessorCount;
  char date[32];
  time_t now = time(NULL);
  strftime(date, sizeof date, "%Y-%m-%d", gmtime(&now));
  FILE *jf = json ? fopen(json, "a") : NULL;
  printf("# small-M kernel: co-resident clusters of S = 1..8 CTAs:");
  for (int S = 1; S <= 8; S++) printf(" %d", gemm_skinny_clusters(S));
  printf("\n");
  if (json && !jf) { fprintf(stderr, "cannot open %s\n", json); return 1; }
  printf("# %s, %d SMs, driver %d, runtime %d; %d interleaved rounds of %d warm-ups + %d timed calls "
         "(median of %d), %d input sets\n",
         prop.name, sms, drv, rt, rounds, WARMUP, TIMED, rounds * TIMED, NSETS);
  printf("# floor = FLOPs / %.0f TFLOP/s; ratio = cuBLASLt ms / meld ms (> 1: meld faster)\n", PEAK_TFLOPS);
  if (fp8)
    printf("# --fp8: rows \"fp8 vs cuBLASLt ...\" = meld_gemm_fp8 vs cuBLASLt FP8 (e4m3 in, bf16 out, scales 0.5 "
           "and 0.25; k rounded up to 16), floor -, rel err vs that cuBLASLt's C (WARN > 2e-2)\n");
  printf("%-20s %6s %6s %6s %-40s %9s %7s %9s %7s %6s %8s %9s\n", "shape", "m", "n", "k", "variant",
         "meld ms", "TFLOP/s", "cuBLAS ms", "TFLOP/s", "ratio", "floor ms", "rel err");
  lt_t lt;
  CKL(cublasLtCreate(&lt.lt));
  lt.ws_bytes = 64u << 20;
  CK(cudaMalloc(&lt.ws, lt.ws_bytes));
  double log_sum = 0, fp8_log_sum[2] = {0, 0};
  int nratio = 0, fp8_nratio[2] = {0, 0};
  const run_t run = {jf, prop.name, commit, date, drv, rt, rounds, sms, soak_ms, soak_rounds};
  static float samples[NVAR + 1][MAX_ROUNDS * TIMED];
  for (int si = 0; si < g_nshapes; si++) {
    const shape_t *s = &g_shapes[si];
    if (quick && !s->quick) continue;
    if (custom_only && strcmp(s->label, "custom")) continue;
    bufs_t bf;
    for (int i = 0; i < NSETS; i++) {
      CK(cudaMalloc(&bf.a[i], s->m * s->k * 2));
      CK(cudaMalloc(&bf.b[i], s->n * s->k * 2));
      gt_fill_bf16<<<1024, 256>>>(bf.a[i], s->m * s->k, 100 + i);
      gt_fill_bf16<<<1024, 256>>>(bf.b[i], s->n * s->k, 200 + i);
    }
    uint16_t *c_meld, *c_lt;
    CK(cudaMalloc(&c_meld, s->m * s->n * 2));
    CK(cudaMalloc(&c_lt, s->m * s->n * 2));
    const int sm_use = s->sm_withheld ? sms - s->sm_withheld : 0;
    lt_plan_t lp;
    lt_plan(&lt, &lp, s, sm_use);
    lt_ctx_t lx = {&lt, &lp, &bf, c_lt};
    /* The variants to time for this shape: planned once, duplicates of an earlier plan dropped. */
    meld_ctx_t mx[NVAR];
    int vidx[NVAR], nv = 0, ns[NVAR + 1];
    char sigs[NVAR][96], plans[NVAR][96];
    const int64_t tiles = (s->m + 127) / 128 * ((s->n + 255) / 256);
    for (int v = 0; v < (variants ? NVAR : 1); v++) {
      const variant_t *vr = &g_variants[v];
      if (v > 0 && !in_list(only, vr->name)) continue;
      if (vr->small_only && tiles >= 2 * (sm_use ? sm_use : sms)) continue;
      if (vr->skinny == 2 && (s->b_kn || (s->m > 128 && !vr->skinny_mt) || (vr->skinny_mt && s->m <= 128))) continue;
      meld_ctx_t *x = &mx[nv];
      memset(x, 0, sizeof *x);
      x->s = s; x->bf = &bf; x->out = c_meld; x->sm_count = sm_use;
      gemm_plan_opts_t o = GEMM_PLAN_OPTS_INIT;
      o.split_k = vr->split_k; o.stream_k = vr->stream_k; o.group_m = vr->group_m;
      o.fixup_red = vr->fixup_red;
      o.epi_defer = vr->epi_defer;
      o.split_ileave = vr->split_ileave;
      o.skinny = vr->skinny;
      o.skinny_hint = vr->skinny_hint;
      o.skinny_mt = vr->skinny_mt;
      o.cluster_m = vr->cluster_m;
      o.tile_n = vr->tile_n;
      o.store_hint = vr->store_hint;
      x->opts = o;
      x->use_opts = v >= 2;
      gemm_params_t plan;
      int plan_workers = 0;
      meld_gemm_args_t a;
      memset(&a, 0, sizeof a);
      a.a = bf.a[0]; a.lda = s->k; a.b = bf.b[0]; a.ldb = s->b_kn ? s->n : s->k;
      a.b_layout = s->b_kn ? MELD_B_KN : MELD_B_NK; a.c = c_meld; a.ldc = s->n;
      a.m = s->m; a.n = s->n; a.k = s->k; a.sm_count = sm_use;
      if (gemm_plan_for(&a, x->use_opts ? &o : NULL, 0, &plan, &plan_workers) != MELD_OK) {
        printf("%-20s %6lld %6lld %6lld %-40s skipped: %s\n", s->label, (long long)s->m, (long long)s->n,
               (long long)s->k, vr->name, meld_last_error());
        continue;
      }
      plan_sig(&plan, plan_workers, sigs[nv], sizeof sigs[nv]);
      int dup = 0;
      for (int u = 0; u < nv && v != 1; u++) dup |= !strcmp(sigs[u], sigs[nv]);
      if (dup) continue;
      snprintf(plans[nv], sizeof plans[nv], "%s%s %s", vr->name, s->b_kn ? " kn" : "", sigs[nv]);
      fprintf(stderr, "shape %d %s variant %s plan %s\n", si, s->label, vr->name, sigs[nv]);
      meld_call(x, 0); /* a variant the launcher refuses is skipped, with the reason */
      if (x->failed) {
        printf("%-20s %6lld %6lld %6lld %-40s skipped: %s\n", s->label, (long long)s->m, (long long)s->n,
               (long long)s->k, vr->name, meld_last_error());
        continue;
      }
      vidx[nv++] = v;
    }
    for (int i = 0; i <= NVAR; i++) ns[i] = 0; /* ns[NVAR] is cuBLASLt's (run 4 crashed here) */
    for (int r = 0; r < rounds; r++) { /* interleaved: cuBLASLt, then each variant */
      time_round(lt_call, &lx, samples[NVAR], &ns[NVAR]);
      for (int i = 0; i < nv; i++) time_round(meld_call, &mx[i], samples[i], &ns[i]);
    }
    const float lt_ms = median(samples[NVAR], ns[NVAR]);
    for (int i = 0; i < nv; i++) {
      const int v = vidx[i];
      if (mx[i].failed) {
        printf("%-20s %6lld %6lld %6lld %-40s failed during timing: %s\n", s->label, (long long)s->m,
               (long long)s->n, (long long)s->k, plans[i], meld_last_error());
        continue;
      }
      const float meld_ms = median(samples[i], ns[i]);
      /* Error vs cuBLASLt on input set 0, output poisoned first. */
      CK(cudaMemset(c_meld, 0xFF, s->m * s->n * 2));
      meld_call(&mx[i], 0);
      lt_run(&lt, &lp, bf.a[0], bf.b[0], c_lt);
      const double rel_err = rel_err_bf16(c_meld, c_lt, s->m * s->n);
      const double flop = 2.0 * s->m * s->n * s->k;
      const double ratio = lt_ms / meld_ms;
      if (v == 0) { log_sum += log(ratio); nratio++; }
      printf("%-20s %6lld %6lld %6lld %-40s %9.4f %7.1f %9.4f %7.1f %6.3f %8.4f %9.2e%s\n", s->label,
             (long long)s->m, (long long)s->n, (long long)s->k, plans[i], meld_ms, flop / meld_ms * 1e-9,
             lt_ms, flop / lt_ms * 1e-9, ratio, flop / (PEAK_TFLOPS * 1e9), rel_err,
             rel_err > 1e-2 ? "  ERROR" : "");
      fflush(stdout);
      if (jf) {
        fprintf(jf,
                "{\"op\": \"gemm\", \"shape\": {\"m\": %lld, \"n\": %lld, \"k\": %lld}, \"label\": \"%s\", "
                "\"b_layout\": \"%s\", \"variant\": \"%s\", \"plan\": \"%s\", \"sm_count\": %d, \"nranks\": 1, \"nnodes\": 1, "
                "\"dtype\": \"bf16\", \"meld_ms\": %.5f, \"seq_ms\": null, \"peer_ms\": null, \"peer\": null, "
                "\"compute_ms\": %.5f, \"meld_compute_ms\": %.5f, \"comm_ms\": null, \"bound_ms\": %.5f, "
                "\"meld_tflops\": %.1f, \"cublas_tflops\": %.1f, \"floor_ms\": %.5f, \"rel_err\": %.3e, "
                "\"rounds\": %d, \"samples\": %d, "
                "\"gpu\": \"%s\", \"driver\": %d, \"cuda\": %d, \"nccl\": null, \"torch\": null, "
                "\"settle_ms\": %d, \"date\": \"%s\", \"commit\": \"%s\"}\n",
                (long long)s->m, (long long)s->n, (long long)s->k, s->label, s->b_kn ? "kn" : "nk",
                g_variants[v].name, plans[i], sm_use ? sm_use : sms, meld_ms, lt_ms, meld_ms, lt_ms,
                flop / meld_ms * 1e-9, flop / lt_ms * 1e-9, flop / (PEAK_TFLOPS * 1e9), rel_err, rounds,
                ns[i], prop.name, drv, rt, bench_settle_ms(), date, commit);
        fflush(jf);
      }
    }
    if (soak_ms > 0) { /* back-to-back for ~soak_ms each, NVML sampled: clock and power per row */
      if (!soak_nvml()->lib) printf("# soak: NVML not available, times only\n");
      /* The run's first soaked row followed an idle or bursty GPU: NVML's power (an average
       * over ~1 s) read ~450 W for it at the cap, and with one round it was up to ~2% faster
       * than when it ran last (session 12). So before the first shape's rows the cuBLASLt row
       * soaks once unrecorded (a preheat; --soak-rounds 2 still takes both orders). */
      static int preheated = 0;
      if (!preheated) {
        const int calls = lt_ms > 0 ? (int)(soak_ms / lt_ms) + 1 : 1;
        soak_result_t r;
        soak_run(soak_nvml(), lt_call, &lx, NSETS, calls, &r);
        printf("# soak: preheat (cuBLASLt row, not recorded) %.4f ms  SM %.0f MHz  %.0f W\n", r.ms_per_call, r.sm_mhz,
               r.power_w);
        preheated = 1;
      }
      soak_item_t it[NVAR + 1] = {{lt_call, &lx, "cuBLASLt", lt_ms, NULL}};
      for (int i = 0; i < nv; i++) {
        const soak_item_t m = {meld_call, &mx[i], plans[i], median(samples[i], ns[i]), &mx[i].failed};
        it[i + 1] = m;
      }
      soak_items(it, nv + 1, s, &run);
    }
    lt_free(&lp);
    for (int i = 0; i < NSETS; i++) { cudaFree(bf.a[i]); cudaFree(bf.b[i]); }
    cudaFree(c_meld);
    cudaFree(c_lt);
    if (fp8) fp8_shape(s, &lt, &run, fp8_log_sum, fp8_nratio);
  }
  printf("# geomean ratio (cuBLASLt ms / meld ms, default variant) over %d shapes: %.3f\n", nratio,
         nratio ? exp(log_sum / nratio) : 0.0);
  for (int f = 0; fp8 && f < 2; f++)
    printf("# geomean ratio (%s ms / meld fp8 ms) over %d shapes: %.3f\n", g_fp8_lt[f], fp8_nratio[f],
           fp8_nratio[f] ? exp(fp8_log_sum[f] / fp8_nratio[f]) : 0.0);
  if (jf) fclose(jf);
  cudaFree(lt.ws);
  cublasLtDestroy(lt.lt);
  return 0;
}
