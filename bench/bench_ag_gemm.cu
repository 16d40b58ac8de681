/* bench_ag_gemm.cu — meld_ag_gemm (fused AllGather + GEMM) vs the unfused baseline, per
 * BENCH.md, on all GPUs present (P ranks), at the suite's AG+GEMM shapes: K = 8192 with
 * N_total in {10240, 57344}, K = 4096 with N_total = 28672; M in {2048, 8192, 16384};
 * N_loc = N_total / P. Per shape, in one run:
 *   meld_ms          meld_ag_gemm (default plan; the plan is printed)
 *   seq_ms           ncclAllGather + cublasGemmEx on one stream
 *   compute_ms       min(cuBLAS, meld_gemm) on [M,K] x [N_loc,K] alone
 *   meld_compute_ms  meld_gemm alone (all SMs, no split-K: the fused kernel's engine)
 *   comm_ms          min(ncclAllGather, meld_all_gather) of the shards
 *   bound_ms         max(compute_ms, comm_ms)
 * and the ratios (overlap efficiency meld / max(meld_compute, comm), meld / bound,
 * seq / meld); rel_err = rel. Frobenius error of meld's C vs cuBLAS's (bf16 both). peer_ms
 * (PyTorch async-TP) comes from bench/ag_gemm_torch.py in the same job.
 * At every shape, variant "run2_plan" times run 2's default plan (own shard staged first,
 * group_m 16, run 2's comm-CTA count) in the same job: a before/after free of run-to-run
 * noise. At three shapes a sweep times plan variants (comm CTAs, copy engine, raster group,
 * chunk size, unfused).
 * Times: every timing of a shape (meld, baselines, variants) runs in 3 interleaved rounds; each
 * is the median over rounds of the median of 20 calls (CUDA events per call) after 5 warm-ups,
 * ranks aligned by a barrier before each batch (a fixed order measured the same plan 10-15%
 * slower late than first). Rank 0 prints and writes JSON lines.
 *
 * Usage: bench_ag_gemm [--quick] [--json FILE] [--trace] [--shape M,N_total,K (one point, swept)]
 *   (NCCL_NVLS_ENABLE=0 is set here)
 *   --trace: one shape, 3 calls, for MELD_TRACE (the trace is written at comm destroy);
 *   with --loopback (one GPU) the 2-rank kernel in loopback (MELD_AG_GEMM_DIAG=2, half the
 *   rows as the shard), with --sk the stream-K hint.
 *   --soak MS: afterwards every row runs back-to-back for ~MS ms, twice in opposite orders, and
 *   prints its mean time with the SM clock and power NVML saw (sustained, power-capped).
 *   --run LIST: no timing; each variant named in the comma list is called twice (for a
 *   profiler: e.g. ncu --launch-skip 1 --launch-count 1 with one variant). */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <math.h>

#include "../tests/gpu/gpu_test.h"
#pragma GCC diagnostic ignored "-Wformat-truncation"
#include "ag_gemm_plan.h"
#include "bench_common.h"
#include "bench_soak.h"
#include "comm.h"
#include "gemm_plan.h"
#include "nccl_baseline.h"

#define WARM 5
#define ROUNDS 3 /* interleaved timing rounds per shape */
#define TIMED 20

static int g_quick = 0, g_trace = 0, g_soak = 0;
static const char *g_run = NULL; /* --run LIST: call these variants twice each, time nothing (profilers) */
static int g_trace_loop = 0, g_trace_sk = -1; /* --trace: loopback (one rank), stream-K hint */
static long long g_shape_m = 0, g_shape_n = 0, g_shape_k = 0; /* --shape M,N_total,K: one point */
static const char *g_json = NULL;

__global__ void bg_err(const uint16_t *a, const uint16_t *b, size_t n, double *acc) {
  double e = 0, r = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const float x = __uint_as_float((uint32_t)a[i] << 16), y = __uint_as_float((uint32_t)b[i] << 16);
    e += (double)(x - y) * (x - y);
    r += (double)y * y;
  }
  atomicAdd(acc, e);
  atomicAdd(acc + 1, r);
}

typedef struct {
  meld_comm_t comm;
  ncclComm_t nccl;
  cublasHandle_t cublas;
  cudaStream_t s;
  int rank, P;
  int64_t m_loc, n_loc, k, M;
  uint16_t *a, *full, *b, *c, *c2;
  ag_gemm_hint_t hint;
  ag_gemm_plan_t plan;
  meld_result_t err;
} bctx_t;

typedef void (*call_fn)(bctx_t *);

static void f_meld(bctx_t *x) {
  meld_ag_gemm_args_t a;
  memset(&a, 0, sizeof a);
  a.a_shard = x->a, a.lda = x->k, a.b = x->b, a.ldb = x->k, a.b_layout = MELD_B_NK;
  a.c = x->c, a.ldc = x->n_loc, a.m_loc = x->m_loc, a.n_loc = x->n_loc, a.k = x->k;
  meld_result_t r = ag_gemm_run(x->comm, &a, &x->hint, NULL, x->s, &x->plan);
  if (r != MELD_OK && x->err == MELD_OK) {
    x->err = r;
    printf("[rank %d] meld_ag_gemm: %s\n", x->rank, meld_last_error());
  }
}
/* f_meld with MELD_AG_GEMM_DIAG = bits for the call. */
static void f_meld_diag(bctx_t *x, const char *bits) {
  setenv("MELD_AG_GEMM_DIAG", bits, 1);
  f_meld(x);
  unsetenv("MELD_AG_GEMM_DIAG");
}
/* One rank only: the fused kernel with the engine's static schedule (MELD_AG_GEMM_DIAG=1). */
static void f_meld_static(bctx_t *x) { f_meld_diag(x, "1"); }
/* One rank only: loopback (MELD_AG_GEMM_DIAG=2): the 2-rank fused kernel of rank 0 with half
 * the shape's rows as the shard and the other half as the virtual peer's (pushed and signalled
 * on this GPU): the GEMM of the full M x N_loc x K with the 2-rank comm path, without NVLink. */
static void f_meld_loop(bctx_t *x) {
  const int64_t m_loc = x->m_loc;
  x->m_loc = m_loc / 2;
  f_meld_diag(x, "2");
  x->m_loc = m_loc;
}
/* Two or more ranks, timing diagnostics (MELD_AG_GEMM_DIAG bits 2 / 3, wrong results): the
 * GEMM without its row waits, the pushes without NVLink data, and both. */
static void f_meld_nowait(bctx_t *x) { f_meld_diag(x, "4"); }
static void f_meld_nolink(bctx_t *x) { f_meld_diag(x, "8"); }
static void f_meld_nowait_nolink(bctx_t *x) { f_meld_diag(x, "12"); }
static void cublas_gemm(bctx_t *x, uint16_t *out) {
  const float one = 1.0f, zero = 0.0f;
  cublasGemmEx(x->cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)x->n_loc, (int)x->M, (int)x->k, &one, x->b, CUDA_R_16BF,
               (int)x->k, x->full, CUDA_R_16BF, (int)x->k, &zero, out, CUDA_R_16BF, (int)x->n_loc, CUBLAS_COMPUTE_32F,
               CUBLAS_GEMM_DEFAULT);
}
static void f_cublas(bctx_t *x) { cublas_gemm(x, x->c2); }
static void f_nccl_ag(bctx_t *x) { /* (no NCCL: nothing; its rows then read NaN) */
  if (x->nccl) ncclAllGather(x->a, x->full, (size_t)x->m_loc * x->k, ncclBfloat16, x->nccl, x->s);
}
static void f_meld_ag(bctx_t *x) { meld_all_gather(x->comm, x->a, x->full, (size_t)x->m_loc * x->k, MELD_BF16, x->s); }
static void f_seq(bctx_t *x) {
  f_nccl_ag(x);
  cublas_gemm(x, x->c2);
}
static void f_meld_gemm(bctx_t *x) {
  meld_gemm_args_t g;
  memset(&g, 0, sizeof g);
  g.a = x->full, g.lda = x->k, g.b = x->b, g.ldb = x->k, g.b_layout = MELD_B_NK;
  g.c = x->c2, g.ldc = x->n_loc, g.m = x->M, g.n = x->n_loc, g.k = x->k;
  gemm_plan_opts_t o = GEMM_PLAN_OPTS_INIT;
  o.split_k = 1;
  gemm_launch(&g, &o, x->s);
}

/* --soak: a row run back-to-back (bench_soak.h). */
typedef struct {
  bctx_t *x;
  call_fn fn;
} soak_ctx_t;
static void soak_call(void *c, int set) {
  (void)set;
  ((soak_ctx_t *)c)->fn(((soak_ctx_t *)c)->x);
}

/* Median ms of TIMED calls after WARM; every rank runs it (collective calls inside). */
static float time_fn(bctx_t *x, call_fn fn, int timed) {
  cudaEvent_t w0, w1;
  cudaEventCreate(&w0);
  cudaEventCreate(&w1);
  cudaEventRecord(w0, x->s);
  for (int i = 0; i < WARM; i++) fn(x);
  cudaEventRecord(w1, x->s);
  cudaStreamSynchronize(x->s);
  const int settle = bench_settle_ms();
  if (settle) { /* sustained timing; every rank makes rank 0's number of calls (collective) */
    float w = 0;
    cudaEventElapsedTime(&w, w0, w1);
    soak_ctx_t c = {x, fn};
    soak_result_t r;
    soak_row(x->comm->boot, soak_call, &c, w / WARM, settle, x->s, &r);
  }
  cudaEventDestroy(w0);
  cudaEventDestroy(w1);
  meld_bootstrap_barrier(x->comm->boot);
  cudaEvent_t ev[2 * TIMED];
  for (int i = 0; i < 2 * timed; i++) cudaEventCreate(&ev[i]);
  for (int i = 0; i < timed; i++) {
    cudaEventRecord(ev[2 * i], x->s);
    fn(x);
    cudaEventRecord(ev[2 * i + 1], x->s);
  }
  cudaStreamSynchronize(x->s);
  float t[TIMED];
  for (int i = 0; i < timed; i++) cudaEventElapsedTime(&t[i], ev[2 * i], ev[2 * i + 1]);
  for (int i = 0; i < 2 * timed; i++) cudaEventDestroy(ev[i]);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) printf("[rank %d] CUDA error: %s\n", x->rank, cudaGetErrorString(e));
  return bench_median(t, timed);
}

static double rel_err(bctx_t *x) {
  double *acc = NULL, h[2] = {0, 0};
  cudaMalloc(&acc, 2 * sizeof(double));
  cudaMemset(acc, 0, 2 * sizeof(double));
  cublas_gemm(x, x->c2);
  bg_err<<<1024, 256, 0, x->s>>>(x->c, x->c2, (size_t)x->M * x->n_loc, acc);
  cudaStreamSynchronize(x->s);
  cudaMemcpy(h, acc, sizeof h, cudaMemcpyDeviceToHost);
  cudaFree(acc);
  return sqrt(h[0] / (h[1] > 0 ? h[1] : 1e-30));
}

static void json_row(FILE *jf, const bench_env_t *env, const char *nccl, const bctx_t *x, int64_t n_total,
                     const char *variant, float meld, float seq, float compute, float mcomp, float comm, double err) {
  if (!jf) return;
  char plan[400];
  ag_gemm_plan_format(&x->plan, plan, sizeof plan);
  const float bound = fmaxf(compute, comm);
  char errs[32]; /* JSON has no NaN: variants without an error check write null */
  if (isnan(err)) snprintf(errs, sizeof errs, "null");
  else snprintf(errs, sizeof errs, "%.3g", err);
  fprintf(jf,
          "{\"op\":\"ag_gemm\",\"shape\":{\"m\":%lld,\"n\":%lld,\"n_loc\":%lld,\"k\":%lld,\"variant\":\"%s\"},"
          "\"nranks\":%d,\"nnodes\":1,\"dtype\":\"bf16\",\"meld_ms\":%.5f,\"seq_ms\":%.5f,\"peer_ms\":null,"
          "\"peer\":\"torch async-TP fused_all_gather_matmul (bench/ag_gemm_torch.py)\",\"compute_ms\":%.5f,"
          "\"meld_compute_ms\":%.5f,\"comm_ms\":%.5f,\"bound_ms\":%.5f,\"overlap_eff\":%.4f,\"meld_over_bound\":%.4f,"
          "\"rel_err\":%s,\"plan\":\"%s\",\"gpu\":\"%s\",\"driver\":\"%s\",\"cuda\":\"%s\",\"nccl\":\"%s\","
          "\"torch\":null,\"settle_ms\":%d,\"date\":\"%s\",\"commit\":\"%s\"}\n",
          (long long)x->M, (long long)n_total, (long long)x->n_loc, (long long)x->k, variant, x->P, meld, seq, compute,
          mcomp, comm, bound, meld / fmaxf(mcomp, comm), meld / bound, errs, plan, env->gpu, env->driver, env->cuda,
          nccl, bench_settle_ms(), env->date, env->commit);
  fflush(jf);
}

typedef struct {
  int64_t m, k, n_total;
  int sweep;
  int run2_cc; /* run 2's heuristic comm CTAs at this shape (P = 2) */
} bshape_t;

static void rank_main(int rank, int P) {
  meld_config_t cfg = MELD_CONFIG_INIT;
  cfg.bootstrap_timeout_ms = 60000;
  cfg.workspace_bytes = (size_t)1 << 30;
  bctx_t x;
  memset(&x, 0, sizeof x);
  x.rank = rank, x.P = P;
  if (meld_comm_init_env(&x.comm, &cfg) != MELD_OK) {
    printf("[rank %d] meld_comm_init_env: %s\n", rank, meld_last_error());
    gt_failed++;
    return;
  }
  if (nb_init(x.comm, &x.nccl) != ncclSuccess) { /* e.g. ranks sharing a GPU (MELD_SHARE_GPU) */
    x.nccl = NULL;
    if (rank == 0)
      printf("NCCL not available: the seq and nccl_ag rows read NaN, the references gather with "
             "meld_all_gather\n");
  }
  cublasCreate(&x.cublas);
  cudaStreamCreateWithFlags(&x.s, cudaStreamNonBlocking);
  cublasSetStream(x.cublas, x.s);
  bench_env_t env;
  bench_env(&env, x.comm->device);
  char nccl[32];
  nb_version(nccl, sizeof nccl);
  FILE *jf = rank == 0 && g_json ? fopen(g_json, "a") : NULL;
  const bshape_t all[] = {{2048, 8192, 10240, 1, 9},  {8192, 8192, 10240, 1, 9},  {16384, 8192, 10240, 0, 9},
                          {2048, 8192, 57344, 0, 2},  {8192, 8192, 57344, 1, 2},  {16384, 8192, 57344, 0, 2},
                          {2048, 4096, 28672, 0, 4},  {8192, 4096, 28672, 0, 4},  {16384, 4096, 28672, 0, 4}};
  const bshape_t quick[] = {{2048, 8192, 10240, 1, 9}, {8192, 8192, 10240, 1, 9}, {8192, 4096, 28672, 0, 4}};
  const bshape_t trace[] = {{8192, 8192, 10240, 0, 9}};
  const bshape_t point[] = {{g_shape_m, g_shape_k, g_shape_n, 1, 0}}; /* one point: with the sweep */
  const bshape_t *shapes = g_shape_m ? point : g_trace ? trace : g_quick ? quick : all;
  const int nshapes = g_shape_m ? 1 : g_trace ? 1 : g_quick ? 3 : 9;
  if (rank == 0)
    printf("%-24s %8s %8s %8s %8s %8s %8s %7s %7s %7s %8s  plan\n", "shape (M x N_loc x K)", "meld", "seq",
           "compute", "m_comp", "comm", "bound", "ovl_eff", "m/bnd", "seq/m", "rel_err");
  for (int si = 0; si < nshapes; si++) {
    const bshape_t *sh = &shapes[si];
    x.M = sh->m, x.k = sh->k, x.m_loc = sh->m / P, x.n_loc = sh->n_total / P;
    const size_t na = (size_t)x.m_loc * x.k, nf = (size_t)x.M * x.k, nb = (size_t)x.n_loc * x.k,
                 nc = (size_t)x.M * x.n_loc;
    cudaMalloc(&x.a, na * 2), cudaMalloc(&x.full, nf * 2), cudaMalloc(&x.b, nb * 2);
    cudaMalloc(&x.c, nc * 2), cudaMalloc(&x.c2, nc * 2);
    gt_fill_bf16<<<1024, 256, 0, x.s>>>(x.a, na, 11 + rank);
    gt_fill_bf16<<<1024, 256, 0, x.s>>>(x.b, nb, 101 + rank);
    x.hint = (ag_gemm_hint_t)AG_GEMM_HINT_INIT;
    x.err = MELD_OK;
    if (g_trace) {
      /* --loopback (one rank): the 2-rank kernel with half the rows as the shard (C holds M rows) */
      const int loop = g_trace_loop && P == 1;
      if (loop) x.hint.schedule = AG_GEMM_FUSED;
      x.hint.stream_k = g_trace_sk;
      for (int i = 0; i < 3; i++) loop ? f_meld_loop(&x) : f_meld(&x);
      cudaStreamSynchronize(x.s);
      if (rank == 0)
        printf("trace: 3 calls at M=%lld K=%lld N_loc=%lld%s%s: %s\n", (long long)x.M, (long long)x.k,
               (long long)x.n_loc, loop ? " (loopback)" : "", g_trace_sk == 1 ? " (stream-K)" : "",
               x.err == MELD_OK ? "ok" : "FAILED");
      if (x.err != MELD_OK) gt_failed++;
    } else {
      /* Every timing of this shape in one list, timed in ROUNDS interleaved rounds (median of
       * the rounds' medians): s2 run 2 measured the same plan 10-15% slower when timed late
       * than first (clocks under sustained load), so a fixed order biased every ratio. */
      enum { MAXV = 32 };
      const char *vn[MAXV];
      call_fn vf[MAXV];
      ag_gemm_hint_t vh[MAXV];
      int nv = 0;
      /* (the first six rows are the table's columns, always timed; BENCH_VARIANTS picks among the rest) */
#define ADDV(name, fn, h) \
  (nv < MAXV && (nv < 6 || bench_variant_wanted(name)) ? (vn[nv] = (name), vf[nv] = (fn), vh[nv] = (h), nv++) : 0)
      const ag_gemm_hint_t h0 = AG_GEMM_HINT_INIT;
      ADDV("default", f_meld, h0);
      ADDV("seq", f_seq, h0);
      ADDV("cublas", f_cublas, h0);
      ADDV("meld_gemm", f_meld_gemm, h0);
      ADDV("nccl_ag", f_nccl_ag, h0);
      ADDV("meld_ag", f_meld_ag, h0);
      const int nbase = nv;
      if (P == 2) { /* run 2's default plan, same job */
        ag_gemm_hint_t h = h0;
        h.inplace = 0, h.group_m = 16, h.comm_ctas = sh->run2_cc;
        ADDV("run2_plan", f_meld, h);
      }
      {
        ag_gemm_hint_t h = h0;
        h.stream_k = 1; /* the fused GEMM with stream-K over the partial wave (default: off) */
        ADDV("stream_k", f_meld, h);
        if (P > 1) {
          h.stream_k = 0, h.tile_n = 256; /* 128 x 256 without stream-K (which it takes at < 4 waves, session 7) */
          ADDV("no_sk", f_meld, h);
          h.tile_n = 0, h.stream_k = 1, h.sk_pieces = 0; /* one range per worker (SKQ), not pieces from the queue */
          ADDV("stream_k_p0", f_meld, h);
          h.stream_k = 2, h.sk_pieces = -1; /* over one full + the partial wave */
          ADDV("stream_k2", f_meld, h);
          h = h0;
          h.tile_n = 320; /* the GEMM's 128 x 320 tile (no stream-K) */
          ADDV("w320", f_meld, h);
          h = h0;
          h.comm_warps = 1; /* no comm CTAs: the producer warpgroups' warps 2-3 push */
          ADDV("comm_warps", f_meld, h);
          ADDV("diag_nowait", f_meld_nowait, h0);
          ADDV("diag_nolink", f_meld_nolink, h0);
          ADDV("diag_nowait_nolink", f_meld_nowait_nolink, h0);
        }
        h = h0;
        h.epi_defer = 0; /* without the deferred epilogue (the default before session 5) */
        ADDV("nodefer", f_meld, h);
        if (P == 1) { /* the fused kernel on one GPU (nothing to gather): its GEMM vs meld_gemm */
          h = h0;
          h.schedule = AG_GEMM_FUSED;
          ADDV("fused_p1", f_meld, h);
          h.epi_defer = 0;
          ADDV("fused_p1_nodefer", f_meld, h);
          h.epi_defer = -1;
          h.stream_k = 1;
          ADDV("fused_p1_sk", f_meld, h);
          h.sk_pieces = 0;
          ADDV("fused_p1_sk_p0", f_meld, h);
          h.stream_k = -1, h.sk_pieces = -1;
          ADDV("fused_p1_static", f_meld_static, h);
          h.tile_n = 320;
          ADDV("fused_p1_w320", f_meld, h);
          h.tile_n = 0;
          if (x.m_loc % 256 == 0) { /* the 2-rank kernel on one GPU, and its stream-K variants:
                                       * hint 1 / 2 (partial wave / + one full wave), pieces per
                                       * tile from the queue (default 4, 8) or 0 (one range per
                                       * worker, SKQ) */
            ADDV("loopback_p1", f_meld_loop, h);
            const int sks[] = {1, 1, 1, 1, 1, 2}, pcs[] = {-1, -1, 2, 8, 0, -1}, xs[] = {-1, 0, -1, -1, -1, -1};
            const char *names[] = {"loopback_p1_sk",    "loopback_p1_sk_x0", "loopback_p1_sk_p2",
                                   "loopback_p1_sk_p8", "loopback_p1_sk_p0", "loopback_p1_sk2"};
            for (int i = 0; i < 6; i++) {
              h.stream_k = sks[i], h.sk_pieces = pcs[i], h.sk_extra = xs[i];
              ADDV(names[i], f_meld_loop, h);
            }
            h.stream_k = -1, h.sk_pieces = -1, h.sk_extra = -1;
            h.tile_n = 320; /* the 128 x 320 tile (no stream-K) */
            ADDV("loopback_p1_w320", f_meld_loop, h);
            h.tile_n = 0;
            h.copy = AG_GEMM_COPY_BULK; /* the comm CTAs' bulk copies (one thread, TMA) */
            ADDV("loopback_p1_bulk", f_meld_loop, h);
            h.copy = -1;
            h.comm_warps = 1; /* no comm CTAs: the producer warpgroups' warps 2-3 push */
            ADDV("loopback_p1_cw", f_meld_loop, h);
            h.comm_warps = -1;
          }
        }
      }
      static char vnames[MAXV][32];
      if (sh->sweep && P > 1) {
        const int ccs[] = {4, 8, 16};
        for (int ci = 0; ci < 3; ci++) {
          ag_gemm_hint_t h = h0;
          h.comm_ctas = ccs[ci];
          snprintf(vnames[nv], sizeof vnames[nv], "vec_cc%d", ccs[ci]);
          ADDV(vnames[nv], f_meld, h);
        }
        ag_gemm_hint_t h = h0;
        h.copy = AG_GEMM_COPY_BULK;
        ADDV("bulk", f_meld, h);
        const int gms[] = {8, 16, 32};
        for (int gi = 0; gi < 3; gi++) {
          h = h0;
          h.group_m = gms[gi];
          snprintf(vnames[nv], sizeof vnames[nv], "group_m%d", gms[gi]);
          ADDV(vnames[nv], f_meld, h);
        }
        h = h0;
        h.chunk_rows = 256;
        ADDV("chunk256", f_meld, h);
        h = h0;
        h.inplace = 0;
        ADDV("staged_own", f_meld, h);
        h = h0;
        h.schedule = AG_GEMM_UNFUSED;
        ADDV("unfused", f_meld, h);
      }
#undef ADDV
      if (nv == MAXV && rank == 0) printf("# variant list full (MAXV %d): any later variant was left out\n", MAXV);
      if (g_run) { /* --run: each named variant twice, in the list's order; no timing */
        char list[256];
        snprintf(list, sizeof list, "%s", g_run);
        for (char *save = NULL, *name = strtok_r(list, ",", &save); name; name = strtok_r(NULL, ",", &save))
          for (int v = 0; v < nv; v++)
            if (!strcmp(vn[v], name)) {
              x.hint = vh[v];
              vf[v](&x), vf[v](&x);
              cudaStreamSynchronize(x.s);
              if (rank == 0) printf("run %s: %s\n", name, x.err == MELD_OK ? "ok" : "FAILED");
            }
        x.hint = h0;
        cudaFree(x.a), cudaFree(x.full), cudaFree(x.b), cudaFree(x.c), cudaFree(x.c2);
        continue;
      }
      float tr[MAXV][ROUNDS], tv[MAXV];
      /* each round starts at another third of the list (every variant timed early, midway and
       * late once: the same plan measured ~5% faster early than late in session 5) */
      for (int rd = 0; rd < ROUNDS; rd++)
        for (int j = 0; j < nv; j++) {
          const int v = (j + rd * (nv / ROUNDS)) % nv;
          x.hint = vh[v];
          tr[v][rd] = time_fn(&x, vf[v], TIMED);
        }
      x.hint = h0;
      for (int v = 0; v < nv; v++) tv[v] = bench_median(tr[v], ROUNDS);
      if (!x.nccl) tv[1] = tv[4] = NAN; /* seq, nccl_ag: not measured */
      if (g_soak) { /* sustained: each row back-to-back for ~g_soak ms, two passes in opposite orders */
        soak_result_t sr[MAXV][2];
        memset(sr, 0, sizeof sr);
        for (int pass = 0; pass < 2; pass++)
          for (int j = 0; j < nv; j++) {
            const int v = pass ? nv - 1 - j : j;
            x.hint = vh[v];
            soak_ctx_t c = {&x, vf[v]};
            soak_row_led(x.comm->boot, soak_call, &c, tv[v], g_soak, x.s, &sr[v][pass]);
          }
        x.hint = h0;
        for (int v = 0; v < nv; v++)
          soak_print(rank, "ag_gemm", (long long)x.M, (long long)x.n_loc, (long long)x.k, vn[v], 20, &sr[v][0],
                     &sr[v][1], tv[v]);
        for (int v = 0; v < nv && rank == 0; v++)
          soak_json(jf, "ag_gemm", (long long)x.M, (long long)sh->n_total, (long long)x.k, vn[v], P, rank, &sr[v][0],
                    &sr[v][1], tv[v], env.gpu, env.commit, env.date);
      }
      const float t_meld = tv[0], t_seq = tv[1], t_cublas = tv[2], t_mgemm = tv[3], t_nag = tv[4], t_mag = tv[5];
      f_meld(&x); /* C for the error check (after the timed calls: same inputs) */
      if (x.nccl) f_nccl_ag(&x); /* the gathered A for the references */
      else f_meld_ag(&x);
      cudaStreamSynchronize(x.s);
      const double err = rel_err(&x);
      const float compute = fminf(t_cublas, t_mgemm), comm = fminf(t_nag, t_mag), bound = fmaxf(compute, comm);
      if (x.err != MELD_OK) gt_failed++;
      if (!(err <= 1e-2)) {
        printf("[rank %d] rel_err %.3g > 1e-2 at M=%lld\n", rank, err, (long long)x.M);
        gt_failed++;
      }
      char plan[400];
      ag_gemm_plan_format(&x.plan, plan, sizeof plan);
      /* every rank's own meld_gemm and meld times (a slower GPU paces every fused call) */
      float per_rank[16 * 2];
      memset(per_rank, 0, sizeof per_rank);
      if (P > 1 && P <= 16) {
        per_rank[2 * rank] = t_mgemm, per_rank[2 * rank + 1] = t_meld;
        if (meld_bootstrap_allgather(x.comm->boot, per_rank, 2 * sizeof(float)) != MELD_OK)
          memset(per_rank, 0, sizeof per_rank);
      }
      if (rank == 0 && P > 1 && P <= 16 && per_rank[0] != 0.f) {
        printf("%-24s   per rank (meld_gemm / meld):", "");
        for (int q = 0; q < P; q++) printf(" r%d %.3f / %.3f", q, per_rank[2 * q], per_rank[2 * q + 1]);
        printf("\n");
      }
      if (rank == 0) {
        char name[64];
        snprintf(name, sizeof name, "%lldx%lldx%lld", (long long)x.M, (long long)x.n_loc, (long long)x.k);
        printf("%-24s %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %7.3f %7.3f %7.3f %8.1e  %s\n", name, t_meld, t_seq,
               compute, t_mgemm, comm, bound, t_meld / fmaxf(t_mgemm, comm), t_meld / bound, t_seq / t_meld, err,
               plan);
        printf("%-24s   (cublas %.3f, meld_gemm %.3f, nccl AG %.3f, meld AG %.3f; %d interleaved rounds)\n", "", t_cublas,
               t_mgemm, t_nag, t_mag, ROUNDS);
        fflush(stdout);
      }
      json_row(jf, &env, nccl, &x, sh->n_total, "default", t_meld, t_seq, compute, t_mgemm, comm, err);
      for (int v = nbase; v < nv; v++) {
        if (rank == 0) printf("   %-16s %8.3f ms  meld/bound %.3f\n", vn[v], tv[v], tv[v] / bound);
        json_row(jf, &env, nccl, &x, sh->n_total, vn[v], tv[v], t_seq, compute, t_mgemm, comm, NAN);
      }
    }
    if (meld_comm_check(x.comm) != MELD_OK) {
      printf("[rank %d] meld_comm_check: %s\n", rank, meld_last_error());
      gt_failed++;
    }
    cudaFree(x.a), cudaFree(x.full), cudaFree(x.b), cudaFree(x.c), cudaFree(x.c2);
    if (gt_failed) break;
  }
  if (jf) fclose(jf);
  meld_bootstrap_barrier(x.comm->boot);
  if (x.nccl) ncclCommDestroy(x.nccl);
  cublasDestroy(x.cublas);
  cudaStreamDestroy(x.s);
  meld_comm_destroy(x.comm);
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) g_quick = 1;
    else if (!strcmp(argv[i], "--trace")) g_trace = 1;
    else if (!strcmp(argv[i], "--loopback")) g_trace_loop = 1;
    else if (!strcmp(argv[i], "--sk")) g_trace_sk = 1;
    else if (!strcmp(argv[i], "--soak") && i + 1 < argc) g_soak = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--json") && i + 1 < argc) g_json = argv[++i];
    else if (!strcmp(argv[i], "--run") && i + 1 < argc) g_run = argv[++i];
    else if (!strcmp(argv[i], "--shape") && i + 1 < argc &&
             sscanf(argv[i + 1], "%lld,%lld,%lld", &g_shape_m, &g_shape_n, &g_shape_k) == 3 && g_shape_m > 0 &&
             g_shape_n > 0 && g_shape_k > 0)
      i++;
    else {
      fprintf(stderr, "usage: %s [--quick] [--json FILE] [--trace [--loopback] [--sk]] [--shape M,N_total,K] [--soak MS] [--run VARIANTS]\n", argv[0]);
      return 2;
    }
  }
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  const int n = gt_device_count();
  if (n < 1) {
    printf("no GPU\n");
    return 0;
  }
  const int P = n > 8 ? 8 : n;
  printf("bench_ag_gemm: %d rank(s)\n", P);
  fflush(stdout);
  setenv("GT_SPAWN_TIMEOUT_S", "900", 0);
  const int failed = gt_spawn(P, rank_main);
  printf("bench_ag_gemm: %s\n", failed ? "FAILED" : "ok");
  return failed ? 1 : 0;
}
