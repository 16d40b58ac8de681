/* bench_gemm_rs.cu — meld_gemm_rs / meld_gemm_ar vs the unfused baselines, per BENCH.md.
 *
 * For each suite shape (P = number of GPUs; K_total in {8192, 28672} with N = 8192, and
 * K_total = 14336 with N = 4096; M in {2048, 8192, 16384}; K_loc = K_total / P; GEMM+AR also
 * M in {16, 128, 512}), in one run on the same GPUs:
 *   meld_ms          meld_gemm_rs / meld_gemm_ar, plan's choice (also meld_fused_ms and
 *                    meld_unfused_ms, each algorithm forced)
 *   seq_ms           cuBLAS GEMM + NCCL reduce-scatter / all-reduce, one stream (from C)
 *   compute_ms       min(cuBLAS, meld_gemm) on the per-rank GEMM
 *   meld_compute_ms  meld_gemm alone
 *   comm_ms          min(NCCL, meld) reduce-scatter / all-reduce of the bf16 partial
 *   bound_ms         max(compute_ms, comm_ms)
 *   rel_err          meld's output vs an fp32 reference (cuBLAS fp32 partials + NCCL fp32 sum)
 * Every eager timing of a shape (meld, baselines, variants) runs in 3 interleaved rounds: the
 * median over rounds of the median of 16 (--quick: 8) timed calls after 2 warm-ups (events
 * around each call, calls back to back), two input sets alternating (a fixed order measured the
 * same plan 10-15% slower late than first). Decode-size AR (M <= 512) is also timed as CUDA-graph replays
 * (graph_meld_ms, graph_seq_ms, graph_meld_unfused_ms: 10 calls per graph).
 * NCCL is loaded with dlopen (libnccl.so.2), so this program links without -lnccl.
 * PyTorch async-TP (peer_ms) comes from bench/gemm_rs_torch.py and is merged into the JSON
 * afterwards (same shape keys).
 *
 * Usage: bench_gemm_rs [--quick] [--diag] [--trace [--trace-warm MS] [--trace-diags D,...]] [--symc] [--json FILE] [--op rs|ar|both] [--shape M,N,K_total] [--decode]
 *                      [--soak MS [--soak-rounds R]] [--rows L1|L2|...]
 *   (--soak-rounds R, 1..8: R pairs of passes, in order then reversed; a row's line shows the
 *   mean of its in-order passes and of its reversed ones: finer A/Bs than one pair)
 *   (--rows: only the rows whose soak label is one of these, e.g. "meld fused GEMM_RS_DIAG=1024|
 *   meld_gemm_plain", for a focused A/B; the table's other columns print -1)
 *   (--soak MS: afterwards every timed row runs back-to-back for ~MS ms, twice in opposite
 *   orders, and prints its mean time with the SM clock and power NVML saw: the sustained,
 *   power-capped speed, bench_soak.h)
 *   (--symc: every AR call writes a C in symmetric memory (the zero-copy AR), for profiling)
 *   (--trace: 3 fused calls per shape and nothing timed; with MELD_TRACE=file each rank writes
 *   the per-tile timeline at comm destroy, tools/trace_png.py draws it; --trace-warm MS: the
 *   three follow MS ms of untraced meld_gemm calls of the same plan, so they run at the power cap;
 *   --trace-diags D1,D2,...: 3 traced calls per MELD_GEMM_RS_DIAG value instead, in that order,
 *   in one trace (variants compared in the same power state))
 *   (--decode: only the decode-size GEMM+AR shapes, M 16 / 128 / 512)
 *   (--quick: M 8192 and the decode sizes only; --diag: stage-left-out timings of the fused
 *   kernel, MELD_GEMM_RS_DIAG). NCCL_NVLS_ENABLE=0 is set here. */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <dlfcn.h>
#include <math.h>

#include "../tests/gpu/gpu_test.h"
#include "bench_common.h"
#include "bench_soak.h"
#include "comm.h"
#include "gemm_plan.h"
#include "meld.h"

/* ---- NCCL through dlopen (the few calls used; ABI of nccl.h 2.x) ----------------------- */
typedef struct ncclComm *ncclComm_t;
typedef struct {
  char internal[128];
} ncclUniqueId;
enum { nb_ncclBfloat16 = 9, nb_ncclFloat32 = 7, nb_ncclSum = 0 };
typedef struct {
  int (*get_unique_id)(ncclUniqueId *);
  int (*comm_init_rank)(ncclComm_t *, int, ncclUniqueId, int);
  int (*comm_destroy)(ncclComm_t);
  int (*reduce_scatter)(const void *, void *, size_t, int, int, ncclComm_t, cudaStream_t);
  int (*all_reduce)(const void *, void *, size_t, int, int, ncclComm_t, cudaStream_t);
  int (*get_version)(int *);
} nccl_fns_t;
static nccl_fns_t g_nccl;

static int nccl_load(void) {
  void *h = dlopen("libnccl.so.2", RTLD_NOW);
  if (!h) h = dlopen("libnccl.so", RTLD_NOW);
  if (!h) return 0;
  g_nccl.get_unique_id = (int (*)(ncclUniqueId *))dlsym(h, "ncclGetUniqueId");
  g_nccl.comm_init_rank = (int (*)(ncclComm_t *, int, ncclUniqueId, int))dlsym(h, "ncclCommInitRank");
  g_nccl.comm_destroy = (int (*)(ncclComm_t))dlsym(h, "ncclCommDestroy");
  g_nccl.reduce_scatter =
      (int (*)(const void *, void *, size_t, int, int, ncclComm_t, cudaStream_t))dlsym(h, "ncclReduceScatter");
  g_nccl.all_reduce = (int (*)(const void *, void *, size_t, int, int, ncclComm_t, cudaStream_t))dlsym(h, "ncclAllReduce");
  g_nccl.get_version = (int (*)(int *))dlsym(h, "ncclGetVersion");
  return g_nccl.get_unique_id && g_nccl.comm_init_rank && g_nccl.reduce_scatter && g_nccl.all_reduce;
}

/* ---- shapes and options -------------------------------------------------------------------- */
static int g_quick = 0, g_ops = 3, g_diag = 0, g_decode = 0, g_trace = 0, g_soak = 0;
static int g_soak_rounds = 1; /* --soak-rounds R: R pairs of passes (in order, reversed); each orientation averaged */
static int g_trace_warm = 0; /* --trace-warm MS: the traced calls follow MS ms of untraced GEMMs (at the power cap) */
static const char *g_rows = NULL; /* --rows L1|L2|...: only the rows with these soak labels (focused A/B) */
static const char *g_trace_diags = NULL; /* --trace-diags D,D,...: 3 traced calls per MELD_GEMM_RS_DIAG value, in order */
#define ROUNDS 3 /* interleaved timing rounds per shape */
static long long g_pm = 0, g_pn = 0, g_pk = 0; /* --shape M,N,K_total: one point per op */
static const char *g_json = NULL;

typedef struct {
  int is_ar;
  int64_t m, n, k_total;
} shape_t;

static int suite(int P, shape_t *out) {
  const int64_t kn[3][2] = {{8192, 8192}, {28672, 8192}, {14336, 4096}};
  const int64_t ms[3] = {2048, 8192, 16384}, md[3] = {16, 128, 512};
  int n = 0;
  if (g_pm > 0) {
    for (int op = 0; op < 2; op++)
      if (g_ops & (1 << op)) out[n++] = (shape_t){op, g_pm, g_pn, g_pk};
    return n;
  }
  for (int op = 0; op < 2; op++) {
    if (!(g_ops & (1 << op))) continue;
    for (int s = 0; s < 3; s++) {
      if (op == 1)
        for (int i = 0; i < 3; i++) out[n++] = (shape_t){1, md[i], kn[s][1], kn[s][0]};
      for (int i = 0; i < 3 && !g_decode; i++) {
        if (g_quick && ms[i] != 8192) continue;
        out[n++] = (shape_t){op, ms[i], kn[s][1], kn[s][0]};
      }
    }
  }
  (void)P;
  return n;
}

/* ---- helpers ------------------------------------------------------------------------------- */
/* sum (out - ref)^2 and sum ref^2 over rows x n (out bf16 ld ldo, ref fp32 ld n). */
__global__ void err_kernel(const __nv_bfloat16 *out, int64_t ldo, const float *ref, int64_t rows, int64_t n,
                           double *acc) {
  double d2 = 0, r2 = 0;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < rows * n; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = i / n, c = i % n;
    const double o = __bfloat162float(out[r * ldo + c]), f = ref[i];
    d2 += (o - f) * (o - f);
    r2 += f * f;
  }
  atomicAdd(&acc[0], d2);
  atomicAdd(&acc[1], r2);
}

typedef struct {
  int rank, P;
  meld_comm_t comm;
  ncclComm_t nccl;
  cudaStream_t s;
  cublasHandle_t blas;
  cudaEvent_t ev[64];
  FILE *json;
  bench_env_t env;
  char nccl_ver[32];
} bctx_t;

typedef void (*op_fn)(bctx_t *, void *, int);

/* --soak: one row run back-to-back (bench_soak.h soak_row: every rank makes rank 0's number of calls). */
typedef struct {
  bctx_t *x;
  op_fn fn;
  void *arg;
  int i;
} soak_ctx_t;
static void soak_call(void *c, int set) {
  soak_ctx_t *s = (soak_ctx_t *)c;
  (void)set;
  s->fn(s->x, s->arg, s->i++);
}

/* Median of `iters` timed calls of fn (after `warm`), each between two events. */
static float time_op(bctx_t *x, op_fn fn, void *arg, int warm, int iters) {
  cudaEventRecord(x->ev[0], x->s);
  for (int i = 0; i < warm; i++) fn(x, arg, i);
  cudaEventRecord(x->ev[1], x->s);
  const int settle = bench_settle_ms();
  if (settle && warm > 0) { /* sustained timing; every rank makes rank 0's number of calls */
    float w = 0;
    cudaEventSynchronize(x->ev[1]);
    cudaEventElapsedTime(&w, x->ev[0], x->ev[1]);
    soak_ctx_t c = {x, fn, arg, warm};
    soak_result_t r;
    soak_row(x->comm->boot, soak_call, &c, w / warm, settle, x->s, &r);
  }
  /* Ranks start the timed calls together: a rank whose host fell behind (capture, printing)
   * would otherwise be waited for inside the other rank's timed calls. */
  cudaStreamSynchronize(x->s);
  meld_bootstrap_barrier(x->comm->boot);
  for (int i = 0; i < iters; i++) {
    cudaEventRecord(x->ev[2 * i], x->s);
    fn(x, arg, i);
    cudaEventRecord(x->ev[2 * i + 1], x->s);
  }
  cudaStreamSynchronize(x->s);
  float t[32];
  for (int i = 0; i < iters; i++) cudaEventElapsedTime(&t[i], x->ev[2 * i], x->ev[2 * i + 1]);
  return bench_median(t, iters);
}

/* Host time per call to enqueue `n` calls back to back (us; the GPU runs behind). */
static double host_enqueue_us(bctx_t *x, op_fn fn, void *arg, int n) {
  cudaStreamSynchronize(x->s);
  const double t0 = gt_now_s();
  for (int i = 0; i < n; i++) fn(x, arg, i);
  const double t1 = gt_now_s();
  cudaStreamSynchronize(x->s);
  return (t1 - t0) * 1e6 / n;
}

/* Median per-call time of a CUDA graph of `calls` calls, replayed `reps` times. */
static float time_graph(bctx_t *x, op_fn fn, void *arg, int calls, int reps) {
  cudaGraph_t g;
  cudaGraphExec_t ex;
  if (cudaStreamBeginCapture(x->s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) return -1;
  for (int i = 0; i < calls; i++) fn(x, arg, i);
  if (cudaStreamEndCapture(x->s, &g) != cudaSuccess) return -1;
  if (cudaGraphInstantiate(&ex, g, 0) != cudaSuccess) return -1;
  for (int i = 0; i < 3; i++) cudaGraphLaunch(ex, x->s);
  cudaStreamSynchronize(x->s);
  meld_bootstrap_barrier(x->comm->boot); /* as in time_op: the timed replays start together */
  float t[32];
  for (int i = 0; i < reps; i++) {
    cudaEventRecord(x->ev[2 * i], x->s);
    cudaGraphLaunch(ex, x->s);
    cudaEventRecord(x->ev[2 * i + 1], x->s);
  }
  cudaStreamSynchronize(x->s);
  for (int i = 0; i < reps; i++) {
    cudaEventElapsedTime(&t[i], x->ev[2 * i], x->ev[2 * i + 1]);
    t[i] /= (float)calls;
  }
  cudaGraphExecDestroy(ex);
  cudaGraphDestroy(g);
  return bench_median(t, reps);
}

typedef struct {
  shape_t sh;
  int64_t k, rows, first;
  __nv_bfloat16 *a[2], *b, *c, *part; /* part: full [M, N] bf16 partial (baselines)  */
  __nv_bfloat16 *recv;               /* baseline RS / AR output                       */
  __nv_bfloat16 *c_sym;              /* AR: C in symmetric memory (the zero-copy AR)  */
  meld_gemm_rs_algo_t algo;
  int failed;
} run_t;

static int g_symc = 0; /* --symc: every AR call writes the symmetric C (Nsight Compute runs;
                         * with MELD_GEMM_AR_ZC=1 the zero-copy AR) */
static void op_meld(bctx_t *x, void *v, int i) {
  run_t *r = (run_t *)v;
  meld_gemm_rs_args_t a;
  memset(&a, 0, sizeof a);
  a.a = r->a[i & 1], a.lda = r->k, a.b = r->b, a.ldb = r->k, a.b_layout = MELD_B_NK;
  a.c = r->c, a.ldc = r->sh.n, a.m = r->sh.m, a.n = r->sh.n, a.k = r->k, a.algo = r->algo;
  if (g_symc && r->c_sym) a.c = r->c_sym;
  meld_result_t res = r->sh.is_ar ? meld_gemm_ar(x->comm, &a, x->s) : meld_gemm_rs(x->comm, &a, x->s);
  if (res != MELD_OK && !r->failed) {
    r->failed = 1;
    fprintf(stderr, "[rank %d] meld op failed: %s\n", x->rank, meld_last_error());
  }
}

/* AR into the symmetric C (meld_mem_alloc): the fused AR stores the reduced tiles straight into
 * the peers' C (no result slots, no copy phase) */
static void op_meld_symc(bctx_t *x, void *v, int i) {
  run_t *r = (run_t *)v;
  __nv_bfloat16 *c = r->c;
  r->c = r->c_sym;
  op_meld(x, v, i);
  r->c = c;
}

static void cublas_gemm(bctx_t *x, run_t *r, int i, void *c, cudaDataType ct) {
  const float alpha = 1.f, beta = 0.f;
  cublasGemmEx(x->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)r->sh.n, (int)r->sh.m, (int)r->k, &alpha, r->b, CUDA_R_16BF,
               (int)r->k, r->a[i & 1], CUDA_R_16BF, (int)r->k, &beta, c, ct, (int)r->sh.n, CUBLAS_COMPUTE_32F,
               CUBLAS_GEMM_DEFAULT);
}
static void op_cublas(bctx_t *x, void *v, int i) { cublas_gemm(x, (run_t *)v, i, ((run_t *)v)->part, CUDA_R_16BF); }
/* The per-rank GEMM of input set i & 1 into `part`. */
static meld_gemm_args_t part_gemm_args(const run_t *r, int i) {
  meld_gemm_args_t g;
  memset(&g, 0, sizeof g);
  g.a = r->a[i & 1], g.lda = r->k, g.b = r->b, g.ldb = r->k, g.b_layout = MELD_B_NK;
  g.c = r->part, g.ldc = r->sh.n, g.m = r->sh.m, g.n = r->sh.n, g.k = r->k;
  return g;
}
static void op_meld_gemm(bctx_t *x, void *v, int i) {
  const meld_gemm_args_t g = part_gemm_args((run_t *)v, i);
  meld_gemm(&g, x->s);
}
/* meld_gemm's engine with the fused kernels' GEMM options: no stream-K, no deferred epilogue */
static void op_meld_gemm_plain(bctx_t *x, void *v, int i) {
  const meld_gemm_args_t g = part_gemm_args((run_t *)v, i);
  gemm_plan_opts_t o = GEMM_PLAN_OPTS_INIT;
  o.stream_k = 1;
  o.epi_defer = 1;
  gemm_launch(&g, &o, x->s);
}
static void op_nccl(bctx_t *x, void *v, int i) {
  (void)i;
  run_t *r = (run_t *)v;
  const size_t cnt = (size_t)r->sh.m * r->sh.n;
  if (r->sh.is_ar) g_nccl.all_reduce(r->part, r->recv, cnt, nb_ncclBfloat16, nb_ncclSum, x->nccl, x->s);
  else g_nccl.reduce_scatter(r->part, r->recv, cnt / x->P, nb_ncclBfloat16, nb_ncclSum, x->nccl, x->s);
}
static void op_meld_coll(bctx_t *x, void *v, int i) {
  (void)i;
  run_t *r = (run_t *)v;
  const size_t cnt = (size_t)r->sh.m * r->sh.n;
  if (r->sh.is_ar) meld_all_reduce(x->comm, r->part, r->recv, cnt, MELD_BF16, x->s);
  else meld_reduce_scatter(x->comm, r->part, r->recv, cnt / x->P, MELD_BF16, x->s);
}
/* Decode diagnostics: the unfused AR's two steps issued here (meld_gemm, then meld_all_reduce),
 * in place on C as the library's unfused path does, and out of place (GEMM into `part`). */
static void op_diag_inplace(bctx_t *x, void *v, int i) {
  run_t *r = (run_t *)v;
  meld_gemm_args_t g;
  memset(&g, 0, sizeof g);
  g.a = r->a[i & 1], g.lda = r->k, g.b = r->b, g.ldb = r->k, g.b_layout = MELD_B_NK;
  g.c = r->c, g.ldc = r->sh.n, g.m = r->sh.m, g.n = r->sh.n, g.k = r->k;
  meld_gemm(&g, x->s);
  meld_all_reduce(x->comm, r->c, r->c, (size_t)r->sh.m * r->sh.n, MELD_BF16, x->s);
}
static void op_diag_oop(bctx_t *x, void *v, int i) {
  run_t *r = (run_t *)v;
  op_meld_gemm(x, v, i);
  meld_all_reduce(x->comm, r->part, r->c, (size_t)r->sh.m * r->sh.n, MELD_BF16, x->s);
}
static void op_coll_inplace(bctx_t *x, void *v, int i) {
  (void)i;
  run_t *r = (run_t *)v;
  meld_all_reduce(x->comm, r->c, r->c, (size_t)r->sh.m * r->sh.n, MELD_BF16, x->s);
}

static void op_seq(bctx_t *x, void *v, int i) {
  op_cublas(x, v, i);
  op_nccl(x, v, i);
}

/* rel_err of meld's output (one call, set 0) against cuBLAS fp32 partials summed by NCCL fp32. */
static double measure_err(bctx_t *x, run_t *r) {
  float *ref = NULL, *red = NULL;
  double *acc = NULL, h[2] = {0, 0};
  const size_t mn = (size_t)r->sh.m * r->sh.n;
  if (cudaMalloc(&ref, mn * 4) != cudaSuccess || cudaMalloc(&red, mn * 4) != cudaSuccess ||
      cudaMalloc(&acc, 16) != cudaSuccess) {
    cudaFree(ref);
    cudaFree(red);
    return -1;
  }
  cudaMemsetAsync(acc, 0, 16, x->s);
  cudaMemsetAsync(r->c, 0xff, (size_t)r->rows * r->sh.n * 2 + 2, x->s);
  op_meld(x, r, 0);
  cublas_gemm(x, r, 0, ref, CUDA_R_32F);
  const float *rows_ref = red;
  if (r->sh.is_ar) g_nccl.all_reduce(ref, red, mn, nb_ncclFloat32, nb_ncclSum, x->nccl, x->s);
  else g_nccl.reduce_scatter(ref, red, mn / x->P, nb_ncclFloat32, nb_ncclSum, x->nccl, x->s);
  if (r->rows > 0) err_kernel<<<264, 256, 0, x->s>>>(r->c, r->sh.n, rows_ref, r->rows, r->sh.n, acc);
  cudaMemcpyAsync(h, acc, 16, cudaMemcpyDeviceToHost, x->s);
  cudaStreamSynchronize(x->s);
  cudaFree(ref);
  cudaFree(red);
  cudaFree(acc);
  return h[1] > 0 ? sqrt(h[0] / h[1]) : (h[0] > 0 ? 1e30 : 0);
}

static void bench_shape(bctx_t *x, const shape_t *sh) {
  run_t r;
  memset(&r, 0, sizeof r);
  r.sh = *sh;
  const int P = x->P;
  r.k = sh->k_total / P;
  r.first = 0;
  r.rows = sh->m;
  if (!sh->is_ar) meld_gemm_rs_rows(sh->m, P, x->rank, &r.first, &r.rows);
  const size_t mk = (size_t)sh->m * r.k, nk = (size_t)sh->n * r.k, mn = (size_t)sh->m * sh->n;
  int ok = 1;
  for (int s = 0; s < 2; s++) ok &= cudaMalloc(&r.a[s], mk * 2) == cudaSuccess;
  ok &= cudaMalloc(&r.b, nk * 2) == cudaSuccess;
  ok &= cudaMalloc(&r.c, (size_t)(r.rows ? r.rows : 1) * sh->n * 2 + 256) == cudaSuccess;
  ok &= cudaMalloc(&r.part, mn * 2) == cudaSuccess;
  ok &= cudaMalloc(&r.recv, mn * 2) == cudaSuccess;
  if (ok && sh->is_ar && sh->m >= 2048) /* (collective: every rank, same size) */
    ok &= meld_mem_alloc(x->comm, mn * 2 + 256, (void **)&r.c_sym) == MELD_OK;
  if (!ok) {
    fprintf(stderr, "[rank %d] out of memory for shape m %lld\n", x->rank, (long long)sh->m);
    goto out;
  }
  for (int s = 0; s < 2; s++) gt_fill_bf16<<<1024, 256, 0, x->s>>>((uint16_t *)r.a[s], mk, 1000 * x->rank + s + 1);
  gt_fill_bf16<<<1024, 256, 0, x->s>>>((uint16_t *)r.b, nk, 77 + x->rank);
  cudaStreamSynchronize(x->s);
  if (g_trace) { /* --trace: 3 fused calls for MELD_TRACE (the trace is written at comm destroy) */
    r.algo = MELD_GEMM_RS_FUSED;
    if (g_trace_warm > 0) { /* the same GEMM plan, untraced, back to back: the GPU at its cap */
      const double until = gt_now_s() + g_trace_warm / 1000.0;
      for (int i = 0; gt_now_s() < until; i++) {
        op_meld_gemm_plain(x, &r, i);
        if (i % 16 == 15) cudaStreamSynchronize(x->s);
      }
    }
    if (g_trace_diags) { /* 3 calls per MELD_GEMM_RS_DIAG value (read per call), one trace */
      char list[256];
      snprintf(list, sizeof list, "%s", g_trace_diags);
      int i = 0;
      for (char *d = strtok(list, ","); d; d = strtok(NULL, ",")) {
        setenv("MELD_GEMM_RS_DIAG", d, 1);
        for (int j = 0; j < 3; j++, i++) op_meld(x, &r, i);
        cudaStreamSynchronize(x->s);
        if (x->rank == 0) printf("trace: calls %d-%d with MELD_GEMM_RS_DIAG=%s\n", i - 2, i, d);
      }
    } else {
      for (int i = 0; i < 3; i++) op_meld(x, &r, i);
    }
    cudaStreamSynchronize(x->s);
    if (x->rank == 0)
      printf("trace: 3 fused %s calls, M %lld N %lld K_loc %lld%s\n", sh->is_ar ? "gemm_ar" : "gemm_rs", (long long)sh->m,
             (long long)sh->n, (long long)r.k, r.failed ? " (FAILED)" : "");
    goto out;
  }
  {
    const int W = 2, I = g_quick ? 8 : 16;
    /* Every eager timing of this shape in one table, timed in ROUNDS interleaved rounds (the
     * median of the rounds' medians): s2 run 2 showed the same plan 10-15% slower when timed
     * last than first (clocks under sustained load), so a fixed order biases every ratio. */
    enum { V_MELD, V_FUSED, V_UNFUSED, V_SEQ, V_CUBLAS, V_MGEMM, V_NCCL, V_MCOLL, V_ST, V_D1, V_D2, V_D4, V_D3,
           V_NOSPLIT, V_OWNER, V_DIN, V_DOOP, V_DCOLL, V_D8, V_NOSK, V_NOZC, V_NOPDL, V_D16, V_MG_PLAIN, V_STORE_ST, V_D32, V_D34, V_SK, V_NOFENCE, V_HELPER, V_NOPRE, V_D130, V_D130P, V_D130R16, V_D130R64, V_PRE1, V_D642, V_NOPF, V_D130SK, V_D130M4, V_PRE4, V_LOOP, V_LOOPP, V_LOOPNF, V_SYMC, V_LOOPZ, V_EARLY, V_LOOPE, V_D16W, V_D8W, V_LOOPW, V_ILEAVE, V_LOOPI, V_LEAN0, V_LOOPL0, V_D130L0, V_LOOPL2, V_D130L2, V_COPYNOW, V_LOOPCN, V_LOOPZCN, V_COPYST, V_LOOPCS, V_LOOPZCS, V_PD16, V_LOOPPD0, V_LOOPPD16, V_LOOPEV, V_D130EV, V_HOLD0, V_LOOPCH0, V_LOOPZCH0, V_LOOPZEV, V_DLY0, V_DLY2K, V_DLY4K, V_DLY6K, V_DLY9K, V_DECF, V_DECLOOP, V_DECLD1, V_DECLD3, V_DECLD7, V_DECFP, V_DECLOOPP, V_N };
    typedef struct {
      op_fn fn;
      int algo, on;
      const char *env[3][2];
    } tv_t;
    /* big1: one GPU, the fused kernel forced (every tile its own, nothing exchanged): its GEMM
     * and epilogue against meld_gemm without a second GPU's pace or skew */
    const int big2 = P == 2 && sh->m >= 2048, dec = P > 1 && sh->is_ar && sh->m <= 512;
    /* the decode kernel's loopback rows only where it runs (the small-M kernel's plan) */
    const int decloop = P == 1 && sh->is_ar && sh->m <= 512 &&
                        gemm_plan_default_skinny(sh->m, sh->n, sh->k_total / P, 0, x->comm->sm_count);
    const int big1 = P == 1 && sh->m >= 2048;
    /* (designators in enum order: older g++ rejects out-of-order ones) */
    const tv_t tv[V_N] = {
        [V_MELD] = {op_meld, MELD_GEMM_RS_AUTO, 1, {{0}}},
        [V_FUSED] = {op_meld, MELD_GEMM_RS_FUSED, P > 1 || big1, {{0}}},
        [V_UNFUSED] = {op_meld, MELD_GEMM_RS_UNFUSED, 1, {{0}}},
        [V_SEQ] = {op_seq, MELD_GEMM_RS_AUTO, x->nccl != NULL, {{0}}},
        [V_CUBLAS] = {op_cublas, MELD_GEMM_RS_AUTO, 1, {{0}}},
        [V_MGEMM] = {op_meld_gemm, MELD_GEMM_RS_AUTO, 1, {{0}}},
        [V_NCCL] = {op_nccl, MELD_GEMM_RS_AUTO, x->nccl != NULL, {{0}}},
        [V_MCOLL] = {op_meld_coll, MELD_GEMM_RS_AUTO, 1, {{0}}},
        /* the other push (the default is the TMA push since s2 run 3) */
        [V_ST] = {op_meld, MELD_GEMM_RS_FUSED, big2, {{"MELD_GEMM_RS_PUSH", "st"}}},
        /* stage-left-out timings (results wrong, not checked): where the fused kernel's time
         * over meld_gemm goes. D1: no NVLink push; D2: own tiles skip the flag wait; D2ST:
         * own tiles skip the partial loads/adds (own values stored); D3: no push, no wait, no
         * add (the GEMM with the fused kernel's epilogues) */
        [V_D1] = {op_meld, MELD_GEMM_RS_FUSED, big2 && g_diag, {{"MELD_GEMM_RS_DIAG", "1"}}},
        [V_D2] = {op_meld, MELD_GEMM_RS_FUSED, (big2 || big1) && g_diag, {{"MELD_GEMM_RS_DIAG", "2"}}},
        [V_D4] = {op_meld, MELD_GEMM_RS_FUSED, big2 && g_diag, {{"MELD_GEMM_RS_DIAG", "4"}}},
        [V_D3] = {op_meld, MELD_GEMM_RS_FUSED, big2 && g_diag, {{"MELD_GEMM_RS_DIAG", "7"}}},
        [V_NOSPLIT] = {op_meld, MELD_GEMM_RS_FUSED, dec, {{"MELD_GEMM_RS_SPLIT_K", "1"}}},
        [V_OWNER] = {op_meld, MELD_GEMM_RS_FUSED, dec, {{"MELD_GEMM_AR_SYM", "0"}}},
        [V_DIN] = {op_diag_inplace, MELD_GEMM_RS_AUTO, dec, {{0}}},
        [V_DOOP] = {op_diag_oop, MELD_GEMM_RS_AUTO, dec, {{0}}},
        [V_DCOLL] = {op_coll_inplace, MELD_GEMM_RS_AUTO, dec, {{0}}},
        [V_D8] = {op_meld, MELD_GEMM_RS_FUSED, (big2 || big1) && g_diag, {{"MELD_GEMM_RS_DIAG", "8"}}},
        [V_NOSK] = {op_meld, MELD_GEMM_RS_FUSED, big2 || big1, {{"MELD_GEMM_RS_STREAM_K", "1"}}},
        /* decode AUTO without the zero-copy all-reduce (session 3's path: LL / staged on C) */
        [V_NOZC] = {op_meld, MELD_GEMM_RS_AUTO, dec, {{"MELD_GEMM_AR_DECODE_ZC", "0"}}},
        /* ... and with it but without the programmatic dependent launch */
        [V_NOPDL] = {op_meld, MELD_GEMM_RS_AUTO, dec, {{"MELD_GEMM_AR_DECODE_PDL", "0"}}},
        /* the bare GEMM of D8 in a kernel without hook g, with the deferred epilogue */
        [V_D16] = {op_meld, MELD_GEMM_RS_FUSED, (big2 || big1) && g_diag, {{"MELD_GEMM_RS_DIAG", "16"}}},
        /* meld_gemm with the fused kernel's GEMM options: no stream-K, no deferred epilogue */
        [V_MG_PLAIN] = {op_meld_gemm_plain, MELD_GEMM_RS_AUTO, (big2 || big1) && g_diag, {{0}}},
        /* own (reduced) tiles stored by the threads' 16-byte stores (the default before s5) */
        [V_STORE_ST] = {op_meld, MELD_GEMM_RS_FUSED, big2 || big1, {{"MELD_GEMM_RS_STORE", "st"}}},
        [V_D32] = {op_meld, MELD_GEMM_RS_FUSED, (big2 || big1) && g_diag, {{"MELD_GEMM_RS_DIAG", "32"}}},
        [V_D34] = {op_meld, MELD_GEMM_RS_FUSED, (big2 || big1) && g_diag, {{"MELD_GEMM_RS_DIAG", "38"}}},
        /* fused with stream-K over the last partial wave (meld_gemm's rule; off by default since s5) */
        [V_SK] = {op_meld, MELD_GEMM_RS_FUSED, big2 || big1, {{"MELD_GEMM_RS_STREAM_K", "2"}}},
        /* the TMA push's flags without their system fence (wrong ordering, timing only) */
        [V_NOFENCE] = {op_meld, MELD_GEMM_RS_FUSED, big2 && g_diag, {{"MELD_GEMM_RS_DIAG", "256"}}},
        /* the opt-in flag helper (the push flags' fence off the consumers' path) */
        [V_HELPER] = {op_meld, MELD_GEMM_RS_FUSED, big2, {{"MELD_GEMM_RS_FLAG_HELPER", "1"}}},
        /* own tiles add the partials in the pass over the staging (s5's default; s6: by TMA, mode 4) */
        [V_NOPRE] = {op_meld, MELD_GEMM_RS_FUSED, big2 || big1, {{"MELD_GEMM_RS_PRELOAD", "0"}}},
        /* one rank: one synthetic partial (diag 128) without its flag wait (2): the 2-rank own-tile
         * work (loads, adds) without a peer, in registers (default) and by the pass */
        [V_D130] = {op_meld, MELD_GEMM_RS_FUSED, big1 && g_diag, {{"MELD_GEMM_RS_DIAG", "130"}}},
        [V_D130P] = {op_meld, MELD_GEMM_RS_FUSED, big1 && g_diag, {{"MELD_GEMM_RS_DIAG", "130"}, {"MELD_GEMM_RS_PRELOAD", "0"}}},
        [V_D130R16] = {op_meld, MELD_GEMM_RS_FUSED, big1 && g_diag, {{"MELD_GEMM_RS_DIAG", "130"}, {"MELD_GEMM_RS_PRELOAD", "2"}}},
        [V_D130R64] = {op_meld, MELD_GEMM_RS_FUSED, big1 && g_diag, {{"MELD_GEMM_RS_DIAG", "130"}, {"MELD_GEMM_RS_PRELOAD", "1"}}},
        /* own tiles' partials loaded into registers (64 in flight) instead of by TMA */
        [V_PRE1] = {op_meld, MELD_GEMM_RS_FUSED, big2, {{"MELD_GEMM_RS_PRELOAD", "1"}}},
        /* without the L2 prefetch of own tiles' partials at the tile's start (diag 512) */
        [V_D642] = {op_meld, MELD_GEMM_RS_FUSED, big1 && g_diag, {{"MELD_GEMM_RS_DIAG", "642"}}},
        [V_NOPF] = {op_meld, MELD_GEMM_RS_FUSED, big2 && g_diag, {{"MELD_GEMM_RS_DIAG", "512"}}},
        [V_D130SK] = {op_meld, MELD_GEMM_RS_FUSED, big1 && g_diag, {{"MELD_GEMM_RS_DIAG", "130"}, {"MELD_GEMM_RS_STREAM_K", "2"}}},
        /* the partial in the producer's pipeline stages (mode 5; the default is mode 4, by TMA into the staging) */
        [V_D130M4] = {op_meld, MELD_GEMM_RS_FUSED, big1 && g_diag, {{"MELD_GEMM_RS_DIAG", "130"}, {"MELD_GEMM_RS_PRELOAD", "5"}}},
        [V_PRE4] = {op_meld, MELD_GEMM_RS_FUSED, big2, {{"MELD_GEMM_RS_PRELOAD", "5"}}},
        /* one rank, loopback (diag 1024): the 2-rank kernel of rank 0, rows [M/2, M) pushed into
         * this rank's own slot and added to rows [0, M/2): push, flags and the add without NVLink;
         * with the staging pass; and without the push flags' fence (diag 256, unordered) */
        [V_LOOP] = {op_meld, MELD_GEMM_RS_FUSED, big1 && g_diag, {{"MELD_GEMM_RS_DIAG", "1024"}}},
        [V_LOOPP] = {op_meld, MELD_GEMM_RS_FUSED, big1 && g_diag, {{"MELD_GEMM_RS_DIAG", "1024"}, {"MELD_GEMM_RS_PRELOAD", "0"}}},
        [V_LOOPNF] = {op_meld, MELD_GEMM_RS_FUSED, big1 && g_diag, {{"MELD_GEMM_RS_DIAG", "1280"}}},
        /* AR with C in symmetric memory: the reduced tiles go straight into the peers' C (zero
         * copy; 2 ranks); and the same in loopback (AR's loopback above: result slot + copy) */
        [V_SYMC] = {op_meld_symc, MELD_GEMM_RS_FUSED, big2 && r.c_sym != NULL, {{"MELD_GEMM_AR_ZC", "1"}}},
        [V_LOOPZ] = {op_meld_symc, MELD_GEMM_RS_FUSED, big1 && g_diag && r.c_sym != NULL,
                     {{"MELD_GEMM_RS_DIAG", "1024"}, {"MELD_GEMM_AR_ZC", "1"}}},
        /* AR: the peers' reduced tiles also copied into C during the GEMM by the producer
         * warpgroup's spare warps (opt-in early copy), at 2 ranks and in loopback */
        [V_EARLY] = {op_meld, MELD_GEMM_RS_FUSED, big2 && sh->is_ar, {{"MELD_GEMM_AR_EARLY_COPY", "1"}}},
        [V_LOOPE] = {op_meld, MELD_GEMM_RS_FUSED, big1 && g_diag && sh->is_ar,
                     {{"MELD_GEMM_RS_DIAG", "1024"}, {"MELD_GEMM_AR_EARLY_COPY", "1"}}},
        /* diag bit 12: the GEMM's worker index = arrival ticket (sessions 1-7), not the block
         * index (the default since session 8: 8% fewer L2 reads, ~1% faster sustained) */
        [V_D16W] = {op_meld, MELD_GEMM_RS_FUSED, big1 && g_diag, {{"MELD_GEMM_RS_DIAG", "4112"}}},
        [V_D8W] = {op_meld, MELD_GEMM_RS_FUSED, big1 && g_diag, {{"MELD_GEMM_RS_DIAG", "4104"}}},
        [V_LOOPW] = {op_meld, MELD_GEMM_RS_FUSED, big1 && g_diag, {{"MELD_GEMM_RS_DIAG", "5120"}}},
        /* the interleaved owner order (RS at 2 ranks, session 13): pushes spread over the call;
         * at 2 ranks and in loopback */
        [V_ILEAVE] = {op_meld, MELD_GEMM_RS_FUSED, big2 && !sh->is_ar, {{"MELD_GEMM_RS_ORDER", "ileave"}}},
        [V_LOOPI] = {op_meld, MELD_GEMM_RS_FUSED, big1 && g_diag && !sh->is_ar,
                     {{"MELD_GEMM_RS_DIAG", "1024"}, {"MELD_GEMM_RS_ORDER", "ileave"}}},
        /* the general hook g kernel (every add mode compiled in) where the default plan takes
         * the one with its mode fixed at compile time (MELD_GEMM_RS_LEAN=0; session 14): at 2
         * ranks, in loopback, and with one synthetic partial (diag 130) */
        [V_LEAN0] = {op_meld, MELD_GEMM_RS_FUSED, big2, {{"MELD_GEMM_RS_LEAN", "0"}}},
        [V_LOOPL0] = {op_meld, MELD_GEMM_RS_FUSED, big1 && g_diag, {{"MELD_GEMM_RS_DIAG", "1024"}, {"MELD_GEMM_RS_LEAN", "0"}}},
        [V_D130L0] = {op_meld, MELD_GEMM_RS_FUSED, big1 && g_diag, {{"MELD_GEMM_RS_DIAG", "130"}, {"MELD_GEMM_RS_LEAN", "0"}}},
        /* RS in the lean AR kernel (the AR's copy code compiled in; LEAN=2) */
        [V_LOOPL2] = {op_meld, MELD_GEMM_RS_FUSED, big1 && g_diag && !sh->is_ar,
                      {{"MELD_GEMM_RS_DIAG", "1024"}, {"MELD_GEMM_RS_LEAN", "2"}}},
        [V_D130L2] = {op_meld, MELD_GEMM_RS_FUSED, big1 && g_diag && !sh->is_ar,
                      {{"MELD_GEMM_RS_DIAG", "130"}, {"MELD_GEMM_RS_LEAN", "2"}}},
        /* AR: the reduced tiles' copy flags at the end of their epilogue (before session 14;
         * default now: one epilogue later, like the pushes'), at 2 ranks (zero copy if C is
         * symmetric: the default rows' C) and in loopback, slots and zero copy */
        [V_COPYNOW] = {op_meld, MELD_GEMM_RS_FUSED, big2 && sh->is_ar, {{"MELD_GEMM_AR_COPY_FLAG", "now"}}},
        [V_LOOPCN] = {op_meld, MELD_GEMM_RS_FUSED, big1 && g_diag && sh->is_ar,
                      {{"MELD_GEMM_RS_DIAG", "1024"}, {"MELD_GEMM_AR_COPY_FLAG", "now"}}},
        [V_LOOPZCN] = {op_meld_symc, MELD_GEMM_RS_FUSED, big1 && g_diag && sh->is_ar && r.c_sym != NULL,
                       {{"MELD_GEMM_RS_DIAG", "1024"}, {"MELD_GEMM_AR_ZC", "1"}, {"MELD_GEMM_AR_COPY_FLAG", "now"}}},
        /* AR: the reduced tiles' copies by the threads' 16-byte stores (before session 15;
         * default now: TMA stores from the staging), at 2 ranks and in loopback */
        [V_COPYST] = {op_meld, MELD_GEMM_RS_FUSED, big2 && sh->is_ar, {{"MELD_GEMM_AR_COPY", "st"}}},
        [V_LOOPCS] = {op_meld, MELD_GEMM_RS_FUSED, big1 && g_diag && sh->is_ar,
                      {{"MELD_GEMM_RS_DIAG", "1024"}, {"MELD_GEMM_AR_COPY", "st"}}},
        [V_LOOPZCS] = {op_meld_symc, MELD_GEMM_RS_FUSED, big1 && g_diag && sh->is_ar && r.c_sym != NULL,
                       {{"MELD_GEMM_RS_DIAG", "1024"}, {"MELD_GEMM_AR_ZC", "1"}, {"MELD_GEMM_AR_COPY", "st"}}},
        /* the pushed tiles' second half staged and pushed during the next mainloop
         * (MELD_GEMM_RS_PUSH_DEFER, session 15, opt-in): after k-block 16 (2 ranks, loopback) and
         * 0 (loopback) */
        [V_PD16] = {op_meld, MELD_GEMM_RS_FUSED, big2, {{"MELD_GEMM_RS_PUSH_DEFER", "16"}}},
        [V_LOOPPD0] = {op_meld, MELD_GEMM_RS_FUSED, big1 && g_diag, {{"MELD_GEMM_RS_DIAG", "1024"}, {"MELD_GEMM_RS_PUSH_DEFER", "0"}}},
        [V_LOOPPD16] = {op_meld, MELD_GEMM_RS_FUSED, big1 && g_diag, {{"MELD_GEMM_RS_DIAG", "1024"}, {"MELD_GEMM_RS_PUSH_DEFER", "16"}}},
        /* C's TMA stores (own tiles, AR copies) with L2::evict_first (MELD_GEMM_STORE_HINT=1,
         * session 15, opt-in): loopback and one synthetic partial */
        [V_LOOPEV] = {op_meld, MELD_GEMM_RS_FUSED, big1 && g_diag, {{"MELD_GEMM_RS_DIAG", "1024"}, {"MELD_GEMM_STORE_HINT", "1"}}},
        [V_D130EV] = {op_meld, MELD_GEMM_RS_FUSED, big1 && g_diag, {{"MELD_GEMM_RS_DIAG", "130"}, {"MELD_GEMM_STORE_HINT", "1"}}},
        /* the AR's pending copy flag released at an own tile's start (MELD_GEMM_AR_COPY_HOLD=0: before
         * session 16; default: kept for the next epilogue's start) */
        [V_HOLD0] = {op_meld, MELD_GEMM_RS_FUSED, big2 && sh->is_ar, {{"MELD_GEMM_AR_COPY_HOLD", "0"}}},
        [V_LOOPCH0] = {op_meld, MELD_GEMM_RS_FUSED, big1 && g_diag && sh->is_ar,
                       {{"MELD_GEMM_RS_DIAG", "1024"}, {"MELD_GEMM_AR_COPY_HOLD", "0"}}},
        [V_LOOPZCH0] = {op_meld_symc, MELD_GEMM_RS_FUSED, big1 && g_diag && sh->is_ar && r.c_sym != NULL,
                        {{"MELD_GEMM_RS_DIAG", "1024"}, {"MELD_GEMM_AR_ZC", "1"}, {"MELD_GEMM_AR_COPY_HOLD", "0"}}},
        /* the zero-copy AR loopback with the evict-first hint (MELD_GEMM_STORE_HINT=1, session 16) */
        [V_LOOPZEV] = {op_meld_symc, MELD_GEMM_RS_FUSED, big1 && g_diag && sh->is_ar && r.c_sym != NULL,
                       {{"MELD_GEMM_RS_DIAG", "1024"}, {"MELD_GEMM_AR_ZC", "1"}, {"MELD_GEMM_STORE_HINT", "1"}}},
        /* the bare kernel's epilogues started 0 / 2000 / 4000 / 6000 / 9000 SM clocks late (diag bits 4 + 13,
         * session 16): how much epilogue time the full pipeline stages absorb */
        [V_DLY0] = {op_meld, MELD_GEMM_RS_FUSED, big1 && g_diag, {{"MELD_GEMM_RS_DIAG", "8208"}, {"MELD_GEMM_RS_DELAY_CYCLES", "0"}}},
        [V_DLY2K] = {op_meld, MELD_GEMM_RS_FUSED, big1 && g_diag, {{"MELD_GEMM_RS_DIAG", "8208"}, {"MELD_GEMM_RS_DELAY_CYCLES", "2000"}}},
        [V_DLY4K] = {op_meld, MELD_GEMM_RS_FUSED, big1 && g_diag, {{"MELD_GEMM_RS_DIAG", "8208"}, {"MELD_GEMM_RS_DELAY_CYCLES", "4000"}}},
        [V_DLY6K] = {op_meld, MELD_GEMM_RS_FUSED, big1 && g_diag, {{"MELD_GEMM_RS_DIAG", "8208"}, {"MELD_GEMM_RS_DELAY_CYCLES", "6000"}}},
        [V_DLY9K] = {op_meld, MELD_GEMM_RS_FUSED, big1 && g_diag, {{"MELD_GEMM_RS_DIAG", "8208"}, {"MELD_GEMM_RS_DELAY_CYCLES", "9000"}}},
        /* decode AUTO as one kernel (MELD_GEMM_AR_DECODE_FUSED=1, session 17), and at one rank its
         * loopback (the virtual peer is this rank: C = 2 x the product; no NVLink) */
        [V_DECF] = {op_meld, MELD_GEMM_RS_AUTO, dec, {{"MELD_GEMM_AR_DECODE_FUSED", "1"}}},
        [V_DECLOOP] = {op_meld, MELD_GEMM_RS_AUTO, decloop,
                       {{"MELD_GEMM_AR_DECODE_FUSED", "1"}, {"MELD_GEMM_RS_DIAG", "1024"}}},
        /* ... its timing diagnostics in loopback (MELD_GEMM_AR_DECODE_DIAG): without the CONSUMED
         * round trip, without READY too, and without the exchange and the sum */
        [V_DECLD1] = {op_meld, MELD_GEMM_RS_AUTO, decloop && g_diag,
                      {{"MELD_GEMM_AR_DECODE_FUSED", "1"}, {"MELD_GEMM_RS_DIAG", "1024"}, {"MELD_GEMM_AR_DECODE_DIAG", "1"}}},
        [V_DECLD3] = {op_meld, MELD_GEMM_RS_AUTO, decloop && g_diag,
                      {{"MELD_GEMM_AR_DECODE_FUSED", "1"}, {"MELD_GEMM_RS_DIAG", "1024"}, {"MELD_GEMM_AR_DECODE_DIAG", "3"}}},
        [V_DECLD7] = {op_meld, MELD_GEMM_RS_AUTO, decloop && g_diag,
                      {{"MELD_GEMM_AR_DECODE_FUSED", "1"}, {"MELD_GEMM_RS_DIAG", "1024"}, {"MELD_GEMM_AR_DECODE_DIAG", "7"}}},
        /* ... with the partials pushed into the peers' workspaces (MELD_GEMM_AR_DECODE_PUSH=1) */
        [V_DECFP] = {op_meld, MELD_GEMM_RS_AUTO, dec, {{"MELD_GEMM_AR_DECODE_FUSED", "1"}, {"MELD_GEMM_AR_DECODE_PUSH", "1"}}},
        [V_DECLOOPP] = {op_meld, MELD_GEMM_RS_AUTO, decloop,
                        {{"MELD_GEMM_AR_DECODE_FUSED", "1"}, {"MELD_GEMM_RS_DIAG", "1024"}, {"MELD_GEMM_AR_DECODE_PUSH", "1"}}},
    };
    static const struct { op_fn fn; const char *name; } names[] = {
        {op_meld, "meld"}, {op_meld_symc, "meld_symc"}, {op_cublas, "cublas"}, {op_meld_gemm, "meld_gemm"},
        {op_meld_gemm_plain, "meld_gemm_plain"}, {op_nccl, "nccl"}, {op_meld_coll, "meld_coll"}, {op_seq, "seq"}};
    char labels[V_N][160]; /* a row's name: its op, algorithm and environment (soak lines, JSON, --rows) */
    int on[V_N];
    for (int v = 0; v < V_N; v++) {
      char *label = labels[v];
      const char *fn = "diag_op";
      for (size_t q = 0; q < sizeof names / sizeof names[0]; q++)
        if (names[q].fn == tv[v].fn) fn = names[q].name;
      int o = snprintf(label, sizeof labels[v], "%s%s", fn,
                       tv[v].fn != op_meld && tv[v].fn != op_meld_symc ? ""
                       : tv[v].algo == MELD_GEMM_RS_FUSED ? " fused" : tv[v].algo == MELD_GEMM_RS_UNFUSED ? " unfused" : "");
      for (int e = 0; e < 3 && tv[v].env[e][0] && o < (int)sizeof labels[v]; e++)
        o += snprintf(label + o, sizeof labels[v] - o, " %s=%s", tv[v].env[e][0] + 5, tv[v].env[e][1]);
      on[v] = tv[v].on;
      if (on[v] && g_rows) { /* exact labels, '|'-separated */
        const size_t n = strlen(label);
        int hit = 0;
        for (const char *q = g_rows; *q && !hit; q = strchr(q, '|') ? strchr(q, '|') + 1 : q + strlen(q)) {
          const char *end = strchr(q, '|');
          hit = (size_t)(end ? end - q : (ptrdiff_t)strlen(q)) == n && !strncmp(q, label, n);
        }
        on[v] = hit;
      }
    }
    float tr[V_N][ROUNDS], tm[V_N];
    double wall[V_N] = {0};
    int fused_failed = 0;
    /* Each round starts at another third of the list (s5 on 2 x H200: one plan timed early in
     * the list ran ~5% faster than the same plan timed late, in every round), so that every
     * variant is timed early, midway and late once. */
    for (int rd = 0; rd < ROUNDS; rd++)
      for (int j = 0; j < V_N; j++) {
        const int v = (j + rd * (V_N / ROUNDS)) % V_N;
        if (!on[v]) continue;
        for (int e = 0; e < 3 && tv[v].env[e][0]; e++) setenv(tv[v].env[e][0], tv[v].env[e][1], 1);
        r.algo = (meld_gemm_rs_algo_t)tv[v].algo;
        r.failed = 0;
        const double w0 = gt_now_s();
        tr[v][rd] = time_op(x, tv[v].fn, &r, W, I);
        if (r.failed) tr[v][rd] = -1; /* (a failed call's time means nothing: the row reads -1) */
        wall[v] += gt_now_s() - w0;
        if (v == V_FUSED) fused_failed |= r.failed;
        for (int e = 0; e < 3 && tv[v].env[e][0]; e++) unsetenv(tv[v].env[e][0]);
      }
    r.algo = MELD_GEMM_RS_AUTO;
    r.failed = 0;
    for (int v = 0; v < V_N; v++) tm[v] = on[v] ? bench_median(tr[v], ROUNDS) : -1;
    if (g_soak) { /* sustained: each row back-to-back for ~g_soak ms, passes in alternating orders */
      static soak_result_t sp[V_N][2][8]; /* [row][orientation][round] */
      soak_result_t sr[V_N][2];
      memset(sp, 0, sizeof sp);
      for (int rr = 0; rr < g_soak_rounds; rr++)
        for (int pass = 0; pass < 2; pass++)
          for (int j = 0; j < V_N; j++) {
            const int v = pass ? V_N - 1 - j : j;
            if (!on[v]) continue; /* (the same on every rank; a row rank 0 did not time is skipped in soak_op) */
            for (int e = 0; e < 3 && tv[v].env[e][0]; e++) setenv(tv[v].env[e][0], tv[v].env[e][1], 1);
            r.algo = (meld_gemm_rs_algo_t)tv[v].algo;
            soak_ctx_t c = {x, tv[v].fn, &r, 0};
            soak_row_led(x->comm->boot, soak_call, &c, tm[v], g_soak, x->s, &sp[v][pass][rr]);
            for (int e = 0; e < 3 && tv[v].env[e][0]; e++) unsetenv(tv[v].env[e][0]);
          }
      r.algo = MELD_GEMM_RS_AUTO;
      for (int v = 0; v < V_N; v++)
        for (int pass = 0; pass < 2; pass++) soak_mean(sp[v][pass], g_soak_rounds, &sr[v][pass]);
      for (int v = 0; v < V_N; v++) {
        if (!(sr[v][0].calls && sr[v][1].calls)) continue;
        const char *label = labels[v];
        soak_print(x->rank, sh->is_ar ? "gemm_ar" : "gemm_rs", (long long)sh->m, (long long)sh->n, (long long)r.k, label,
                   56, &sr[v][0], &sr[v][1], tm[v]);
        if (x->json)
          soak_json(x->json, sh->is_ar ? "gemm_ar" : "gemm_rs", (long long)sh->m, (long long)sh->n, (long long)sh->k_total,
                    label, P, x->rank, &sr[v][0], &sr[v][1], tm[v], x->env.gpu, x->env.commit, x->env.date);
      }
    }
    /* Every rank's own timings of the GEMM alone, the fused op and its bare GEMM: at 2 ranks the
     * fused kernel's bare GEMM was 8% slower than meld_gemm (s5), which a slower GPU would
     * explain (every fused call waits for the slower rank at its entry handshake). */
    enum { NPR = 3 };
    float per_rank[16 * NPR];
    memset(per_rank, 0, sizeof per_rank);
    if (P > 1 && P <= 16) {
      const float mine[NPR] = {tm[V_MGEMM], tm[V_FUSED], tm[V_D8]};
      memcpy(per_rank + NPR * x->rank, mine, sizeof mine);
      if (meld_bootstrap_allgather(x->comm->boot, per_rank, sizeof mine) != MELD_OK) memset(per_rank, 0, sizeof per_rank);
    }
    if (x->rank == 0)
      for (int v = 0; v < V_N; v++)
        if (wall[v] > 2.0) printf("        (note: timing %d took %.1f s of wall time)\n", v, wall[v]);
    const float meld_ms = tm[V_MELD], fused_ms = tm[V_FUSED], unfused_ms = tm[V_UNFUSED], seq_ms = tm[V_SEQ];
    const float cublas_ms = tm[V_CUBLAS], mgemm_ms = tm[V_MGEMM], nccl_ms = tm[V_NCCL], mcoll_ms = tm[V_MCOLL];
    const float st_ms = tm[V_ST], nosplit_ms = tm[V_NOSPLIT], owner_ms = tm[V_OWNER];
    const float d_in = tm[V_DIN], d_oop = tm[V_DOOP], d_coll_in = tm[V_DCOLL];
    float g_fused_nosplit = -1, g_owner = -1, g_nozc = -1, g_nopdl = -1, g_decf = -1;
    double h_decf = -1, h_meld = -1, h_mgemm = -1; /* host enqueue us per call */
    if (tm[V_DECF] > 0 || tm[V_DECLOOP] > 0) { /* the decode kernel's row (2 ranks) or its loopback (1) */
      setenv("MELD_GEMM_AR_DECODE_FUSED", "1", 1);
      if (P == 1) setenv("MELD_GEMM_RS_DIAG", "1024", 1);
      g_decf = time_graph(x, op_meld, &r, 10, 10);
      h_decf = host_enqueue_us(x, op_meld, &r, 20);
      unsetenv("MELD_GEMM_RS_DIAG");
      unsetenv("MELD_GEMM_AR_DECODE_FUSED");
      h_meld = host_enqueue_us(x, op_meld, &r, 20);
      h_mgemm = host_enqueue_us(x, op_meld_gemm, &r, 20);
    }
    if (dec) {
      setenv("MELD_GEMM_AR_DECODE_ZC", "0", 1);
      g_nozc = time_graph(x, op_meld, &r, 10, 10);
      unsetenv("MELD_GEMM_AR_DECODE_ZC");
      setenv("MELD_GEMM_AR_DECODE_PDL", "0", 1);
      g_nopdl = time_graph(x, op_meld, &r, 10, 10);
      unsetenv("MELD_GEMM_AR_DECODE_PDL");
      setenv("MELD_GEMM_RS_SPLIT_K", "1", 1);
      r.algo = MELD_GEMM_RS_FUSED;
      g_fused_nosplit = time_graph(x, op_meld, &r, 10, 10);
      unsetenv("MELD_GEMM_RS_SPLIT_K");
      setenv("MELD_GEMM_AR_SYM", "0", 1);
      g_owner = time_graph(x, op_meld, &r, 10, 10);
      unsetenv("MELD_GEMM_AR_SYM");
      r.algo = MELD_GEMM_RS_AUTO;
    }
    float g_meld = -1, g_seq = -1, g_unf = -1, g_fused = -1;
    if (sh->is_ar && sh->m <= 512) {
      g_meld = time_graph(x, op_meld, &r, 10, 10);
      if (x->nccl) g_seq = time_graph(x, op_seq, &r, 10, 10);
      r.algo = MELD_GEMM_RS_UNFUSED;
      g_unf = time_graph(x, op_meld, &r, 10, 10);
      r.algo = MELD_GEMM_RS_FUSED;
      g_fused = time_graph(x, op_meld, &r, 10, 10);
      r.algo = MELD_GEMM_RS_AUTO;
    }
    const double err = x->nccl ? measure_err(x, &r) : -1;
    const float compute_ms = fminf(cublas_ms, mgemm_ms);
    const float comm_ms = nccl_ms > 0 ? fminf(nccl_ms, mcoll_ms) : mcoll_ms;
    const float bound_ms = fmaxf(compute_ms, comm_ms);
    const double flops = 2.0 * sh->m * sh->n * r.k;
    const double bytes = (double)mn * 2; /* per rank: the partial it holds */
    if (x->rank == 0) {
      const char *op = sh->is_ar ? "gemm_ar" : "gemm_rs";
      printf("%-7s m %5lld n %5lld k_loc %5lld | meld %7.3f (fused %7.3f unfused %7.3f) seq %7.3f | cublas %7.3f "
             "meld_gemm %7.3f (%4.0f TF) | nccl %7.3f meld_coll %7.3f (%4.0f GB/s) | bound %7.3f | "
             "ovl %.3f m/b %.3f seq/m %.3f | err %.1e%s\n",
             op, (long long)sh->m, (long long)sh->n, (long long)r.k, meld_ms, fused_ms, unfused_ms, seq_ms, cublas_ms,
             mgemm_ms, flops / mgemm_ms / 1e9, nccl_ms, mcoll_ms, bytes / comm_ms / 1e6, bound_ms,
             meld_ms / fmaxf(mgemm_ms, comm_ms), meld_ms / bound_ms, seq_ms / meld_ms, err,
             (r.failed || fused_failed) ? " FAILED-CALLS" : "");
      if (P > 1 && P <= 16 && per_rank[0] != 0.f) {
        printf("        per rank (meld_gemm / fused / bare GEMM in the fused kernel):");
        for (int q = 0; q < P; q++)
          printf(" r%d %.3f / %.3f / %.3f", q, per_rank[NPR * q], per_rank[NPR * q + 1], per_rank[NPR * q + 2]);
        printf("\n");
      }
      if (st_ms > 0) printf("        variant: fused st push (16-byte stores) %7.3f | fused without stream-K %7.3f\n", st_ms, tm[V_NOSK]);
      if (tm[V_D32] > 0)
        printf("        diag: fused, own tiles stored as staged (no reduce pass) %7.3f, and no wait/loads %7.3f\n",
               tm[V_D32], tm[V_D34]);
      if (tm[V_HELPER] > 0) printf("        variant: fused with the flag helper (MELD_GEMM_RS_FLAG_HELPER=1) %7.3f\n", tm[V_HELPER]);
      if (tm[V_NOPRE] > 0) printf("        variant: fused, own tiles add the partials in the staging pass (MELD_GEMM_RS_PRELOAD=0) %7.3f\n", tm[V_NOPRE]);
      if (tm[V_D130] > 0)
        printf("        diag: one synthetic partial, no wait (diag 130): by TMA into the staging %7.3f, by the producer's stages %7.3f, "
               "by loads into registers %7.3f (rounds of 16: %7.3f), by the staging pass %7.3f\n", tm[V_D130], tm[V_D130M4],
               tm[V_D130R64], tm[V_D130R16], tm[V_D130P]);
      if (tm[V_D642] > 0) printf("        diag: the same without the partials' L2 prefetch (diag 642) %7.3f, with stream-K %7.3f\n", tm[V_D642], tm[V_D130SK]);
      if (tm[V_NOPF] > 0) printf("        diag: fused without the partials' L2 prefetch (diag 512) %7.3f\n", tm[V_NOPF]);
      if (tm[V_LOOP] > 0)
        printf("        diag: loopback (the 2-rank kernel on one GPU, diag 1024) %7.3f, with the staging pass %7.3f, push flags "
               "without their fence %7.3f%s\n", tm[V_LOOP], tm[V_LOOPP], tm[V_LOOPNF],
               sh->is_ar ? " (AR: result slot + copy phase)" : "");
      if (tm[V_D16W] > 0)
        printf("        diag: worker = arrival ticket (bit 12): bare GEMM %7.3f, bare without hook g %7.3f, loopback %7.3f\n",
               tm[V_D8W], tm[V_D16W], tm[V_LOOPW]);
      if (tm[V_LOOPZ] > 0) printf("        diag: loopback AR with C in symmetric memory (zero copy) %7.3f\n", tm[V_LOOPZ]);
      if (tm[V_ILEAVE] > 0) printf("        variant: fused, interleaved owner order (MELD_GEMM_RS_ORDER=ileave) %7.3f\n", tm[V_ILEAVE]);
      if (tm[V_LEAN0] > 0) printf("        variant: fused, general kernel (MELD_GEMM_RS_LEAN=0) %7.3f\n", tm[V_LEAN0]);
      if (tm[V_LOOPL0] > 0)
        printf("        diag: general kernel (MELD_GEMM_RS_LEAN=0): loopback %7.3f, one synthetic partial (diag 130) %7.3f\n",
               tm[V_LOOPL0], tm[V_D130L0]);
      if (tm[V_COPYNOW] > 0) printf("        variant: fused AR, copy flags at the end of the epilogue (MELD_GEMM_AR_COPY_FLAG=now) %7.3f\n", tm[V_COPYNOW]);
      if (tm[V_LOOPCN] > 0)
        printf("        diag: loopback AR, copy flags at the end of the epilogue (MELD_GEMM_AR_COPY_FLAG=now): slots %7.3f, zero copy %7.3f\n",
               tm[V_LOOPCN], tm[V_LOOPZCN]);
      if (tm[V_COPYST] > 0) printf("        variant: fused AR, copies by 16-byte stores (MELD_GEMM_AR_COPY=st) %7.3f\n", tm[V_COPYST]);
      if (tm[V_LOOPCS] > 0)
        printf("        diag: loopback AR, copies by 16-byte stores (MELD_GEMM_AR_COPY=st): slots %7.3f, zero copy %7.3f\n",
               tm[V_LOOPCS], tm[V_LOOPZCS]);
      if (tm[V_LOOPEV] > 0)
        printf("        diag: C's TMA stores with L2::evict_first (MELD_GEMM_STORE_HINT=1): loopback %7.3f, diag 130 %7.3f, "
               "zero copy %7.3f\n", tm[V_LOOPEV], tm[V_D130EV], tm[V_LOOPZEV]);
      if (tm[V_PD16] > 0) printf("        variant: fused, pushed tiles' second half after k-block 16 of the next tile (MELD_GEMM_RS_PUSH_DEFER=16) %7.3f\n", tm[V_PD16]);
      if (tm[V_LOOPPD0] > 0)
        printf("        diag: loopback, pushed tiles' second half in the next mainloop (MELD_GEMM_RS_PUSH_DEFER): after k-block 0 %7.3f, 16 %7.3f\n",
               tm[V_LOOPPD0], tm[V_LOOPPD16]);
      if (tm[V_HOLD0] > 0) printf("        variant: fused AR, copy flags released at own tiles' start (MELD_GEMM_AR_COPY_HOLD=0) %7.3f\n", tm[V_HOLD0]);
      if (tm[V_LOOPCH0] > 0)
        printf("        diag: loopback AR, copy flags released at own tiles' start (MELD_GEMM_AR_COPY_HOLD=0): slots %7.3f, zero copy %7.3f\n",
               tm[V_LOOPCH0], tm[V_LOOPZCH0]);
      if (tm[V_DLY0] > 0)
        printf("        diag: the bare kernel's epilogues 0 / 2000 / 4000 / 6000 / 9000 clocks late (MELD_GEMM_RS_DIAG=8208, "
               "MELD_GEMM_RS_DELAY_CYCLES): %7.3f / %7.3f / %7.3f / %7.3f / %7.3f\n", tm[V_DLY0], tm[V_DLY2K], tm[V_DLY4K],
               tm[V_DLY6K], tm[V_DLY9K]);
      if (tm[V_LOOPL2] > 0)
        printf("        diag: RS in the lean AR kernel (MELD_GEMM_RS_LEAN=2): loopback %7.3f, diag 130 %7.3f\n", tm[V_LOOPL2],
               tm[V_D130L2]);
      if (tm[V_LOOPI] > 0) printf("        diag: loopback, interleaved owner order (MELD_GEMM_RS_ORDER=ileave) %7.3f\n", tm[V_LOOPI]);
      if (tm[V_LOOPE] > 0) printf("        diag: loopback AR with the early copy (MELD_GEMM_AR_EARLY_COPY=1) %7.3f\n", tm[V_LOOPE]);
      if (tm[V_EARLY] > 0) printf("        variant: fused AR with the early copy (MELD_GEMM_AR_EARLY_COPY=1) %7.3f\n", tm[V_EARLY]);
      if (tm[V_SYMC] > 0) printf("        variant: fused AR with C in symmetric memory (zero copy, meld_mem_alloc) %7.3f\n", tm[V_SYMC]);
      if (tm[V_PRE4] > 0) printf("        variant: fused, own tiles' partial in the producer's stages (MELD_GEMM_RS_PRELOAD=5) %7.3f\n", tm[V_PRE4]);
      if (tm[V_PRE1] > 0) printf("        variant: fused, own tiles' partials by loads into registers (MELD_GEMM_RS_PRELOAD=1) %7.3f\n", tm[V_PRE1]);
      if (tm[V_NOFENCE] > 0) printf("        diag: push flags relaxed, unordered (timing only) %7.3f\n", tm[V_NOFENCE]);
      if (tm[V_SK] > 0) printf("        variant: fused with stream-K (MELD_GEMM_RS_STREAM_K=2) %7.3f\n", tm[V_SK]);
      if (tm[V_STORE_ST] > 0) printf("        variant: fused, own tiles by 16-byte stores (MELD_GEMM_RS_STORE=st) %7.3f\n", tm[V_STORE_ST]);
      if (tm[V_D8] > 0)
        printf("        diag: bare GEMM in the fused kernel %7.3f, same without hook g + deferred epilogue %7.3f | "
               "meld_gemm without stream-K and deferred epilogue %7.3f | fused without stream-K %7.3f\n",
               tm[V_D8], tm[V_D16], tm[V_MG_PLAIN], tm[V_NOSK]);
      if (tm[V_D2] > 0 && tm[V_D1] < 0) printf("        diag: fused, own tiles do not wait (diag 2) %7.3f\n", tm[V_D2]);
      if (tm[V_D1] > 0)
        printf("        diag (wrong results): no NVLink push %7.3f | no own wait %7.3f | no own loads/adds %7.3f | none of the three %7.3f | bare GEMM in the fused kernel %7.3f\n",
               tm[V_D1], tm[V_D2], tm[V_D4], tm[V_D3], tm[V_D8]);
      if (nosplit_ms > 0)
        printf("        variant: fused no split-K %7.3f (graph %7.4f) | diag: meld_gemm(C)+meld_all_reduce(C,C) %7.3f, "
               "meld_gemm(part)+meld_all_reduce(part,C) %7.3f, meld_all_reduce(C,C) %7.3f\n",
               nosplit_ms, g_fused_nosplit, d_in, d_oop, d_coll_in);
      if (owner_ms > 0) printf("        variant: fused owner mode (MELD_GEMM_AR_SYM=0) %7.3f (graph %7.4f)\n", owner_ms, g_owner);
      if (tm[V_NOZC] > 0)
        printf("        variant: AUTO without the zero-copy all-reduce (MELD_GEMM_AR_DECODE_ZC=0) %7.4f (graph %7.4f) | "
               "zero copy without PDL %7.4f (graph %7.4f)\n",
               tm[V_NOZC], g_nozc, tm[V_NOPDL], g_nopdl);
      if (g_meld > 0)
        printf("        graph: meld %7.4f fused %7.4f unfused %7.4f seq(cublas+nccl) %7.4f ms\n", g_meld, g_fused, g_unf,
               g_seq);
      if (tm[V_DECF] > 0 || tm[V_DECLOOP] > 0)
        printf("        variant: decode GEMM+AR as one kernel (MELD_GEMM_AR_DECODE_FUSED=1%s) %7.4f (graph %7.4f) | "
               "meld_gemm %7.4f\n",
               P == 1 ? ", loopback: C = 2 x the product" : "", P == 1 ? tm[V_DECLOOP] : tm[V_DECF], g_decf, mgemm_ms);
      if (tm[V_DECFP] > 0 || tm[V_DECLOOPP] > 0)
        printf("        variant: the decode kernel pushing its partial (MELD_GEMM_AR_DECODE_PUSH=1%s) %7.4f\n",
               P == 1 ? ", loopback" : "", P == 1 ? tm[V_DECLOOPP] : tm[V_DECFP]);
      if (h_decf > 0)
        printf("        host enqueue per call (us): decode kernel %.1f | meld AUTO %.1f | meld_gemm %.1f\n", h_decf, h_meld,
               h_mgemm);
      if (tm[V_DECLD1] > 0)
        printf("        diag: the decode kernel's loopback without CONSUMED %7.4f, without READY too %7.4f, without the "
               "exchange and the sum %7.4f\n", tm[V_DECLD1], tm[V_DECLD3], tm[V_DECLD7]);
      fflush(stdout);
      if (x->json) {
        fprintf(x->json,
                "{\"op\": \"%s\", \"shape\": {\"m\": %lld, \"n\": %lld, \"k\": %lld, \"k_total\": %lld}, \"nranks\": %d, "
                "\"nnodes\": 1, \"dtype\": \"bf16\", \"meld_ms\": %.5f, \"meld_fused_ms\": %.5f, \"meld_unfused_ms\": %.5f, "
                "\"seq_ms\": %.5f, \"peer_ms\": null, \"peer\": \"torch_async_tp\", \"compute_ms\": %.5f, "
                "\"cublas_ms\": %.5f, \"meld_compute_ms\": %.5f, \"comm_ms\": %.5f, \"nccl_ms\": %.5f, "
                "\"meld_comm_ms\": %.5f, \"bound_ms\": %.5f, \"overlap_eff\": %.4f, \"meld_over_bound\": %.4f, "
                "\"seq_over_meld\": %.4f, \"graph_meld_ms\": %.5f, \"graph_meld_unfused_ms\": %.5f, "
                "\"graph_seq_ms\": %.5f, \"graph_meld_fused_ms\": %.5f, \"meld_fused_st_ms\": %.5f, "
                "\"meld_fused_nosplit_ms\": %.5f, \"graph_meld_fused_nosplit_ms\": %.5f, \"diag_gemm_ar_inplace_ms\": %.5f, "
                "\"diag_gemm_ar_oop_ms\": %.5f, \"diag_ar_inplace_ms\": %.5f, \"diag_nopush_ms\": %.5f, \"diag_nowait_ms\": %.5f, "
                "\"diag_noadd_ms\": %.5f, \"diag_none_ms\": %.5f, \"diag_bare_gemm_ms\": %.5f, \"meld_fused_owner_ms\": %.5f, "
                "\"graph_meld_fused_owner_ms\": %.5f, \"meld_nozc_ms\": %.5f, \"graph_meld_nozc_ms\": %.5f, \"meld_nopdl_ms\": %.5f, \"graph_meld_nopdl_ms\": %.5f, \"meld_decode_kernel_ms\": %.5f, \"graph_meld_decode_kernel_ms\": %.5f, \"meld_fused_store_st_ms\": %.5f, \"diag_bare_defer_ms\": %.5f, \"meld_gemm_plain_ms\": %.5f, \"meld_fused_nopreload_ms\": %.5f, \"diag_synth_ms\": %.5f, \"diag_synth_pass_ms\": %.5f, \"run\": \"%s\", \"rel_err\": %.3e, \"gpu\": \"%s\", \"driver\": \"%s\", \"cuda\": \"%s\", "
                "\"nccl\": \"%s\", \"torch\": null, \"settle_ms\": %d, \"date\": \"%s\", \"commit\": \"%s\"}\n",
                op, (long long)sh->m, (long long)sh->n, (long long)r.k, (long long)sh->k_total, P, meld_ms, fused_ms,
                unfused_ms, seq_ms, compute_ms, cublas_ms, mgemm_ms, comm_ms, nccl_ms, mcoll_ms, bound_ms,
                meld_ms / fmaxf(mgemm_ms, comm_ms), meld_ms / bound_ms, seq_ms / meld_ms, g_meld, g_unf, g_seq, g_fused,
                st_ms, nosplit_ms, g_fused_nosplit, d_in, d_oop, d_coll_in, tm[V_D1], tm[V_D2], tm[V_D4], tm[V_D3],
                tm[V_D8], owner_ms, g_owner, tm[V_NOZC], g_nozc, tm[V_NOPDL], g_nopdl, P == 1 ? tm[V_DECLOOP] : tm[V_DECF], g_decf, tm[V_STORE_ST], tm[V_D16], tm[V_MG_PLAIN], tm[V_NOPRE], tm[V_D130], tm[V_D130P], getenv("BENCH_RUN") ? getenv("BENCH_RUN") : "", err,
                x->env.gpu, x->env.driver, x->env.cuda, x->nccl_ver, bench_settle_ms(), x->env.date, x->env.commit);
        fflush(x->json);
      }
    }
    meld_result_t cr = meld_comm_check(x->comm);
    if (cr != MELD_OK) fprintf(stderr, "[rank %d] comm error: %s\n", x->rank, meld_last_error());
  }
out:
  cudaDeviceSynchronize();
  for (int s = 0; s < 2; s++) cudaFree(r.a[s]);
  cudaFree(r.b);
  cudaFree(r.c);
  cudaFree(r.part);
  cudaFree(r.recv);
  if (r.c_sym) meld_mem_free(x->comm, r.c_sym);
}

static void rank_main(int rank, int P) {
  bctx_t x;
  memset(&x, 0, sizeof x);
  x.rank = rank;
  x.P = P;
  meld_config_t cfg = MELD_CONFIG_INIT;
  cfg.bootstrap_timeout_ms = 60000;
  if (!getenv("MELD_WORKSPACE_BYTES")) cfg.workspace_bytes = (size_t)600 << 20; /* fused at M 16384 */
  if (meld_comm_init_env(&x.comm, &cfg) != MELD_OK) {
    fprintf(stderr, "[rank %d] init: %s\n", rank, meld_last_error());
    gt_failed++;
    return;
  }
  cudaStreamCreateWithFlags(&x.s, cudaStreamNonBlocking);
  cublasCreate(&x.blas);
  cublasSetStream(x.blas, x.s);
  for (int i = 0; i < 64; i++) cudaEventCreate(&x.ev[i]);
  bench_env(&x.env, 0);
  if (nccl_load()) {
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (rank == 0) g_nccl.get_unique_id(&id);
    meld_bootstrap_bcast(x.comm->boot, &id, sizeof id, 0);
    if (g_nccl.comm_init_rank(&x.nccl, P, id, rank) != 0) x.nccl = NULL;
    int v = 0;
    if (g_nccl.get_version) g_nccl.get_version(&v);
    snprintf(x.nccl_ver, sizeof x.nccl_ver, "%d.%d.%d", v / 10000, (v / 100) % 100, v % 100);
  }
  if (!x.nccl && rank == 0) printf("NCCL not available: seq/comm baselines use meld only\n");
  if (rank == 0 && g_json) x.json = fopen(g_json, "a");
  if (rank == 0)
    printf("bench_gemm_rs: %d ranks, %s, NCCL %s; times in ms (median); ovl = meld / max(meld_gemm, comm), "
           "m/b = meld / bound\n",
           P, x.env.gpu, x.nccl_ver);
  shape_t sh[64];
  const int n = suite(P, sh);
  for (int i = 0; i < n; i++) {
    bench_shape_pause(); /* (BENCH_SHAPE_PAUSE_MS) */
    bench_shape(&x, &sh[i]);
  }
  if (x.json) fclose(x.json);
  meld_bootstrap_barrier(x.comm->boot);
  if (x.nccl && g_nccl.comm_destroy) g_nccl.comm_destroy(x.nccl);
  meld_comm_destroy(x.comm);
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) g_quick = 1;
    else if (!strcmp(argv[i], "--decode")) g_decode = 1;
    else if (!strcmp(argv[i], "--diag")) g_diag = 1;
    else if (!strcmp(argv[i], "--trace")) g_trace = 1;
    else if (!strcmp(argv[i], "--trace-warm") && i + 1 < argc) g_trace_warm = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--trace-diags") && i + 1 < argc) g_trace_diags = argv[++i];
    else if (!strcmp(argv[i], "--rows") && i + 1 < argc) g_rows = argv[++i];
    else if (!strcmp(argv[i], "--symc")) g_symc = 1;
    else if (!strcmp(argv[i], "--soak") && i + 1 < argc) g_soak = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--soak-rounds") && i + 1 < argc) {
      g_soak_rounds = atoi(argv[++i]);
      if (g_soak_rounds < 1 || g_soak_rounds > 8) {
        fprintf(stderr, "bench_gemm_rs: --soak-rounds takes 1..8\n");
        return 2;
      }
    }
    else if (!strcmp(argv[i], "--json") && i + 1 < argc) g_json = argv[++i];
    else if (!strcmp(argv[i], "--shape") && i + 1 < argc &&
             sscanf(argv[i + 1], "%lld,%lld,%lld", &g_pm, &g_pn, &g_pk) == 3 && g_pm > 0 && g_pn > 0 && g_pk > 0)
      i++;
    else if (!strcmp(argv[i], "--op") && i + 1 < argc) {
      ++i;
      g_ops = !strcmp(argv[i], "rs") ? 1 : !strcmp(argv[i], "ar") ? 2 : 3;
    } else {
      fprintf(stderr, "usage: %s [--quick] [--diag] [--trace] [--symc] [--json FILE] [--op rs|ar|both] [--shape M,N,K_total] [--decode] [--soak MS [--soak-rounds R]] [--rows L1|L2|...]\n", argv[0]);
      return 2;
    }
  }
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  setenv("GT_SPAWN_TIMEOUT_S", "900", 0);
  const int n = gt_device_count();
  if (n < 1) {
    printf("no GPU\n");
    return 0;
  }
  return gt_spawn(n, rank_main) ? 1 : 0;
}
