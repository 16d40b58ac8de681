/* bench_gemm.cu — meld's GEMM engine vs cuBLASLt on the same shapes, in the same run
 * (BENCH.md): median of 20 timed calls after 5 warm-ups (CUDA events), 2 rotating input sets,
 * error of meld vs cuBLASLt. Prints a table (TFLOP/s, ratio, geomean) and writes JSON lines.
 *
 *   bench_gemm [--quick] [--json FILE] [--commit HASH] [--variants]
 *
 * --variants adds rows for forced plan variants (cluster 1/2, generic-store epilogue). */
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gemm_plan.h"
#include "meld.h"

#define WARMUP 5
#define TIMED 20
#define NSETS 2
#define PEAK_TFLOPS 780.0 /* cuBLAS bf16 at 8192^3 on one H200 (TESTBED.md) */

#define CK(call)                                                                              \
  do {                                                                                        \
    cudaError_t e_ = (call);                                                                  \
    if (e_ != cudaSuccess) {                                                                  \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));   \
      exit(1);                                                                                \
    }                                                                                         \
  } while (0)
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

static const shape_t g_shapes[] = {
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

__global__ void fill_kernel(uint16_t *p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    float f = (float)((h >> 40) * (1.0 / (1 << 23))) - 1.0f;
    if (fabsf(f) < 1.0f / 64) f = 0.5f; /* never zero */
    uint32_t u = __float_as_uint(f);
    p[i] = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
}

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
  cublasLtMatmulPreference_t pref;
  CKL(cublasLtMatmulPreferenceCreate(&pref));
  CKL(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &lt->ws_bytes,
                                           sizeof lt->ws_bytes));
  cublasLtMatmulHeuristicResult_t res;
  int found = 0;
  CKL(cublasLtMatmulAlgoGetHeuristic(lt->lt, p->desc, p->la, p->lb, p->lc, p->lc, pref, 1, &res, &found));
  if (!found) { fprintf(stderr, "cuBLASLt: no algorithm\n"); exit(1); }
  p->algo = res.algo;
  cublasLtMatmulPreferenceDestroy(pref);
}

static void lt_run(lt_t *lt, lt_plan_t *p, const void *a, const void *b, void *c) {
  const float one = 1.0f, zero = 0.0f;
  CKL(cublasLtMatmul(lt->lt, p->desc, &one, b, p->la, a, p->lb, &zero, c, p->lc, c, p->lc, &p->algo,
                     lt->ws, lt->ws_bytes, 0));
}

static void lt_free(lt_plan_t *p) {
  cublasLtMatrixLayoutDestroy(p->la);
  cublasLtMatrixLayoutDestroy(p->lb);
  cublasLtMatrixLayoutDestroy(p->lc);
  cublasLtMatmulDescDestroy(p->desc);
}

typedef struct {
  uint16_t *a[NSETS], *b[NSETS], *c;
} bufs_t;

/* Median ms of TIMED calls of fn (after WARMUP), rotating the input sets. */
typedef void (*call_fn)(void *ctx, int set);
static float time_median(call_fn fn, void *ctx) {
  cudaEvent_t ev[2 * TIMED];
  for (int i = 0; i < 2 * TIMED; i++) CK(cudaEventCreate(&ev[i]));
  for (int i = 0; i < WARMUP; i++) fn(ctx, i % NSETS);
  for (int i = 0; i < TIMED; i++) {
    CK(cudaEventRecord(ev[2 * i], 0));
    fn(ctx, i % NSETS);
    CK(cudaEventRecord(ev[2 * i + 1], 0));
  }
  CK(cudaDeviceSynchronize());
  float ms[TIMED];
  for (int i = 0; i < TIMED; i++) CK(cudaEventElapsedTime(&ms[i], ev[2 * i], ev[2 * i + 1]));
  for (int i = 0; i < 2 * TIMED; i++) cudaEventDestroy(ev[i]);
  qsort(ms, TIMED, sizeof ms[0], cmp_float);
  return 0.5f * (ms[TIMED / 2 - 1] + ms[TIMED / 2]);
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

int main(int argc, char **argv) {
  int quick = 0, variants = 0;
  const char *json = NULL, *commit = "unknown";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) quick = 1;
    else if (!strcmp(argv[i], "--variants")) variants = 1;
    else if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
    else if (!strcmp(argv[i], "--commit") && i + 1 < argc) commit = argv[++i];
    else { fprintf(stderr, "usage: %s [--quick] [--variants] [--json FILE] [--commit HASH]\n", argv[0]); return 2; }
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
  if (json && !jf) { fprintf(stderr, "cannot open %s\n", json); return 1; }
  printf("# %s, %d SMs, driver %d, runtime %d; median of %d calls after %d warm-ups, %d input sets\n",
         prop.name, sms, drv, rt, TIMED, WARMUP, NSETS);
  printf("# floor = FLOPs / %.0f TFLOP/s; ratio = cuBLASLt ms / meld ms (> 1: meld faster)\n", PEAK_TFLOPS);
  printf("%-20s %6s %6s %6s %-30s %9s %7s %9s %7s %6s %8s %9s\n", "shape", "m", "n", "k", "variant",
         "meld ms", "TFLOP/s", "cuBLAS ms", "TFLOP/s", "ratio", "floor ms", "rel err");
  lt_t lt;
  CKL(cublasLtCreate(&lt.lt));
  lt.ws_bytes = 64u << 20;
  CK(cudaMalloc(&lt.ws, lt.ws_bytes));
  double log_sum = 0;
  int nratio = 0;
  for (size_t si = 0; si < sizeof g_shapes / sizeof g_shapes[0]; si++) {
    const shape_t *s = &g_shapes[si];
    if (quick && !s->quick) continue;
    bufs_t bf;
    for (int i = 0; i < NSETS; i++) {
      CK(cudaMalloc(&bf.a[i], s->m * s->k * 2));
      CK(cudaMalloc(&bf.b[i], s->n * s->k * 2));
      fill_kernel<<<1024, 256>>>(bf.a[i], s->m * s->k, 100 + i);
      fill_kernel<<<1024, 256>>>(bf.b[i], s->n * s->k, 200 + i);
    }
    uint16_t *c_meld, *c_lt;
    CK(cudaMalloc(&c_meld, s->m * s->n * 2));
    CK(cudaMalloc(&c_lt, s->m * s->n * 2));
    const int sm_use = s->sm_withheld ? sms - s->sm_withheld : 0;
    lt_plan_t lp;
    lt_plan(&lt, &lp, s, sm_use);
    lt_ctx_t lx = {&lt, &lp, &bf, c_lt};
    const float lt_ms = time_median(lt_call, &lx);
    /* Variants: the plan's default, then forced ones. */
    const char *vnames[5] = {"default", "split 2", "no split", "group 8", "group 32"};
    const int nv = variants ? 5 : 1;
    int default_split = 1;
    for (int v = 0; v < nv; v++) {
      meld_ctx_t mx;
      memset(&mx, 0, sizeof mx);
      mx.s = s; mx.bf = &bf; mx.out = c_meld; mx.sm_count = sm_use;
      gemm_plan_opts_t o = GEMM_PLAN_OPTS_INIT;
      if (v == 1) { o.split_k = 2; if (default_split != 1) continue; if ((s->m + 127) / 128 * ((s->n + 255) / 256) > 400) continue; }
      if (v == 2) { o.split_k = 1; if (default_split == 1) continue; }
      if (v == 3) o.group_m = 8;
      if (v == 4) o.group_m = 32;
      mx.opts = o;
      mx.use_opts = v != 0;
      CK(cudaMemset(c_meld, 0xFF, s->m * s->n * 2));
      /* The plan this variant runs (printed in the row). */
      gemm_params_t plan;
      int plan_workers = 0;
      {
        meld_gemm_args_t a;
        memset(&a, 0, sizeof a);
        a.a = bf.a[0]; a.lda = s->k; a.b = bf.b[0]; a.ldb = s->b_kn ? s->n : s->k;
        a.b_layout = s->b_kn ? MELD_B_KN : MELD_B_NK; a.c = c_meld; a.ldc = s->n;
        a.m = s->m; a.n = s->n; a.k = s->k; a.sm_count = sm_use;
        if (gemm_plan_for(&a, mx.use_opts ? &o : NULL, 0, &plan, &plan_workers) != MELD_OK) {
          printf("%-20s %6lld %6lld %6lld %-30s skipped: %s\n", s->label, (long long)s->m, (long long)s->n,
                 (long long)s->k, vnames[v], meld_last_error());
          continue;
        }
        if (v == 0) default_split = plan.split_k;
      }
      meld_call(&mx, 0); /* a variant the plan refuses is skipped, with the reason */
      if (mx.failed) {
        printf("%-20s %6lld %6lld %6lld %-30s skipped: %s\n", s->label, (long long)s->m, (long long)s->n,
               (long long)s->k, vnames[v], meld_last_error());
        continue;
      }
      const float meld_ms = time_median(meld_call, &mx);
      /* Error of the last call (set (TIMED-1) % NSETS) vs cuBLASLt on the same set. */
      const int set = (TIMED - 1) % NSETS;
      lt_run(&lt, &lp, bf.a[set], bf.b[set], c_lt);
      double *sums;
      CK(cudaMalloc(&sums, 3 * sizeof(double)));
      CK(cudaMemset(sums, 0, 3 * sizeof(double)));
      err_kernel<<<1024, 256>>>(c_meld, c_lt, s->m * s->n, sums);
      double hs[3];
      CK(cudaMemcpy(hs, sums, sizeof hs, cudaMemcpyDeviceToHost));
      cudaFree(sums);
      const double rel_err = hs[2] > 0 ? INFINITY : sqrt(hs[0] / (hs[1] > 0 ? hs[1] : 1));
      const double flop = 2.0 * s->m * s->n * s->k;
      const double ratio = lt_ms / meld_ms;
      if (v == 0) { log_sum += log(ratio); nratio++; }
      char vname[64];
      snprintf(vname, sizeof vname, "%s%s w%d c%d s%d g%d", vnames[v], s->b_kn ? " kn" : "", plan_workers,
               plan.cluster_m, plan.split_k, plan.group_m);
      printf("%-20s %6lld %6lld %6lld %-30s %9.4f %7.1f %9.4f %7.1f %6.3f %8.4f %9.2e%s\n", s->label,
             (long long)s->m, (long long)s->n, (long long)s->k, vname, meld_ms, flop / meld_ms * 1e-9,
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
                "\"gpu\": \"%s\", \"driver\": %d, \"cuda\": %d, \"nccl\": null, \"torch\": null, "
                "\"date\": \"%s\", \"commit\": \"%s\"}\n",
                (long long)s->m, (long long)s->n, (long long)s->k, s->label, s->b_kn ? "kn" : "nk",
                vnames[v], vname, sm_use ? sm_use : sms, meld_ms, lt_ms, meld_ms, lt_ms, flop / meld_ms * 1e-9,
                flop / lt_ms * 1e-9, flop / (PEAK_TFLOPS * 1e9), rel_err, prop.name, drv, rt, date, commit);
        fflush(jf);
      }
    }
    lt_free(&lp);
    for (int i = 0; i < NSETS; i++) { cudaFree(bf.a[i]); cudaFree(bf.b[i]); }
    cudaFree(c_meld);
    cudaFree(c_lt);
  }
  printf("# geomean ratio (cuBLASLt ms / meld ms, default variant) over %d shapes: %.3f\n", nratio,
         nratio ? exp(log_sum / nratio) : 0.0);
  if (jf) fclose(jf);
  cudaFree(lt.ws);
  cublasLtDestroy(lt.lt);
  return 0;
}
