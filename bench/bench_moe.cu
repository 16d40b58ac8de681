/* bench_moe.cu — meld_moe_dispatch_gemm with the ranks as threads of ONE process (as
 * bench_ring_attn: with fewer GPUs than ranks they share a GPU, each rank's kernels on its share
 * of the SMs, all in flight together; with a GPU per rank it is the one-process multi-GPU mode).
 * Rows (BENCH.md MoE shapes, first GEMM: n = 2 x the expert's intermediate size, gate and up):
 *   DeepSeek-V3: hidden 7168, n 4096, 256 experts, top-8, tokens per rank 512 / 4096 / 8192 (the
 *   BENCH suite's three; 8192 not with --quick), uniform routing and Zipf(1.0) over the experts; Mixtral-like: hidden 4096, n 28672,
 *   8 experts, top-2, 4096 tokens per rank; "dsv3-32e": the DeepSeek-V3 shape with 32 experts (one
 *   EP-8 rank's share: ~1024 rows an expert where all 256 on one GPU get ~128), and at 128 tokens
 *   (decode: ~32 rows an expert, the weights' stream).
 * Variants, timed in the same pass:
 *   fused        the op (routing kernel + the fused dispatch / grouped GEMM kernel),
 *   nocopy       MELD_MOE_DIAG=1: no rows copied (blocks still counted): the GEMM + protocol,
 *   comm         MELD_MOE_DIAG=2: no GEMM: the routing and the copies alone,
 *   cublas-loop  one cuBLAS GEMM per local expert on its rows (unpadded), this rank's stream:
 *                the compute of an unfused implementation (no dispatch),
 *   meld-loop    the same with meld_gemm (the engine at each expert's shape, no grouping),
 *   swiglu       the op with activation MELD_MOE_ACT_SWIGLU (y = silu(gate) x up, n / 2 columns:
 *                the gated epilogue; the same GEMM work),
 *   ffn          meld_moe_ffn: the whole layer (dispatch + gated GEMM, the second grouped GEMM
 *                [E, hidden, n / 2] with the combine's sends in its epilogue, the combine's
 *                sums); its TFLOP/s count both GEMMs (1.5x),
 *   ffn-apart    the same with MELD_MOE_FFN_SEND=0 (the second GEMM stores its rows, the combine
 *                kernel sends them), ffn-send with MELD_MOE_FFN_SEND=1 (ffn is the default's pick),
 *   dense        one meld_gemm over this rank's padded rows x one expert's weight: the grouped
 *                GEMM's work as a dense GEMM (what grouping costs the engine),
 *   gemm2        meld_moe_grouped_gemm alone on the dispatch's layout: the layer's second GEMM
 *                (k = n / 2, n = hidden; its TFLOP/s are for half the first GEMM's work).
 * BENCH_MOE_ROWS / BENCH_MOE_VARIANTS (comma lists): only those rows ("name Ttokens" contains an
 * item; also the --long and extra rows, e.g. dsv3-32e-even: 1024 rows an expert exactly) and
 * variants (nocopy always).
 * (The layer's peer is bench/moe_torch.py's "torch layer".)
 * BENCH_MOE_AB (a comma list of "VAR=VAL" or "VAR=VAL+VAR=VAL"): more fused variants with those
 * variables set (by rank 0, between barriers), e.g. MELD_MOE_COMM_CTAS=32.
 * Each variant: 3 warm-up calls, BENCH_SETTLE_MS of calls (the first variant also the process's
 * lead-in, BENCH_LEADIN_MS: bench_common.h), then --samples samples of --calls back-to-back calls,
 * every rank starting a sample after a host barrier; the median sample of the slowest rank
 * (BENCH_SAMPLE_LOG=1: each variant's start and each sample, with seconds since the process began,
 * on stderr). Checked first: a few rows of rank 0's y against a host fp32 dot product.
 * Useful TFLOP/s counts 2 x rows x n x hidden over every rank's received rows (not the padding).
 * Rank 0 prints a table and appends JSON lines (--json; op "moe_dispatch_gemm", "moe_ffn" for the
 * layer, "moe_grouped_gemm" for gemm2).
 *
 *   bench_moe [--ranks P] [--long | --quick] [--calls N] [--samples N] [--json FILE] */
#include <cublas_v2.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>

#include "bench_common.h"
#include "../tests/gpu/gpu_test.h"
#include "meld.h"

typedef struct {
  const char *name;
  int T, H, N, E, topk;
  double zipf; /* 0 = uniform */
} row_t;

static int P = 0, g_calls = 5, g_samples = 5, g_ndev = 1, g_nrows = 0;
static row_t g_rows[10];
static meld_unique_id g_id;
static pthread_barrier_t g_bar;
#define NVAR 16
#define NBASE 11 /* the variants before the BENCH_MOE_AB ones */
static char g_var[NVAR][128] = {"fused",  "nocopy", "comm",      "cublas-loop", "meld-loop", "swiglu",
                                "ffn",    "ffn-apart", "ffn-send",    "dense",      "gemm2"};
#define V_SWIGLU 5
#define V_FFN 6
#define V_FFN_APART 7
#define V_FFN_SEND 8
#define V_DENSE 9
#define V_GEMM2 10
#define V_IS_FFN(v) ((v) == V_FFN || (v) == V_FFN_APART || (v) == V_FFN_SEND)
static int g_run[NVAR]; /* variant v runs (BENCH_MOE_VARIANTS; all by default) */
static int g_nvar = NBASE;
static float g_ms[8][NVAR];
static int64_t g_rows_recv[8];
static int64_t g_padded[8]; /* each rank's rows padded per expert to 128 (the grouped GEMM's work) */
static int g_settle;
static const char *g_json;
static bench_env_t g_env;
static int32_t *g_ids[8];    /* every rank's routing of the current row (host) */
static int64_t g_capacity;   /* of the current row: the largest padded rows of any rank */
static double g_err;

/* Rank s's routing: topk distinct experts per token, uniform or Zipf(s) over a per-rank
 * permutation-free popularity (expert e has weight 1 / (e + 1)^s). */
static void routing(const row_t *r, int s, int32_t *ids) {
  if (r->zipf < 0) { /* balanced: pair i to expert (i + s) mod E: T x topk / E rows each, no padding */
    for (int64_t i = 0; i < (int64_t)r->T * r->topk; i++) ids[i] = (int32_t)((i + s) % r->E);
    return;
  }
  uint64_t st = 12345 + (uint64_t)s * 7777;
  double *cdf = (double *)malloc(r->E * sizeof(double)), tot = 0;
  for (int e = 0; e < r->E; e++) tot += r->zipf > 0 ? pow(e + 1.0, -r->zipf) : 1.0, cdf[e] = tot;
  for (int t = 0; t < r->T; t++)
    for (int j = 0; j < r->topk; j++) {
      int32_t e;
      for (;;) {
        const double u = (double)(gt_rand_u64(&st) >> 11) * (1.0 / 9007199254740992.0) * tot;
        int lo = 0, hi = r->E - 1;
        while (lo < hi) {
          const int mid = (lo + hi) / 2;
          if (cdf[mid] > u) hi = mid;
          else lo = mid + 1;
        }
        /* spread the popular experts over the ranks: expert index scrambled */
        e = (int32_t)(((int64_t)lo * 37 + 11) % r->E);
        int dup = 0;
        for (int q = 0; q < j; q++) dup |= ids[(size_t)t * r->topk + q] == e;
        if (!dup) break;
      }
      ids[(size_t)t * r->topk + j] = e;
    }
  free(cdf);
}

/* Per-rank rows per local expert from every rank's routing; the capacity (max over ranks). */
static void layout(const row_t *r, int64_t *cap) {
  const int EL = r->E / P;
  int64_t worst = 0, *hist = (int64_t *)calloc(r->E, sizeof(int64_t));
  for (int s = 0; s < P; s++)
    for (int64_t i = 0; i < (int64_t)r->T * r->topk; i++) hist[g_ids[s][i]]++;
  for (int d = 0; d < P; d++) {
    int64_t rows = 0, real = 0;
    for (int j = 0; j < EL; j++) {
      const int64_t c = hist[d * EL + j];
      rows += (c + 127) / 128 * 128, real += c;
    }
    g_rows_recv[d] = real, g_padded[d] = rows;
    if (rows > worst) worst = rows;
  }
  *cap = worst > 128 ? worst : 128;
  free(hist);
}

/* Variant v's variables (rank 0 only, between barriers): nocopy MELD_MOE_DIAG=1, comm 2, an AB
 * variant its list; for the others as the bench started (first called before any variant). */
static void set_variant(int v) {
  static const char *const vars[] = {"MELD_MOE_DIAG", "MELD_MOE_COMM_CTAS", "MELD_MOE_DEFER", "MELD_MOE_GROUP_M",
                                     "MELD_MOE_COPY", "MELD_MOE_FFN_SEND", "MELD_MOE_PAD_SKIP", "MELD_MOE_RUNS",
                                     "MELD_MOE_ROUTE", "MELD_MOE_ROUTE_CTAS", "MELD_MOE_ROUTE_IN"};
  enum { NV = sizeof vars / sizeof vars[0] };
  static char *start[NV];
  static int saved;
  if (!saved) { /* the values the bench started with: each variant begins from them */
    for (int i = 0; i < NV; i++) start[i] = getenv(vars[i]) ? strdup(getenv(vars[i])) : NULL;
    saved = 1;
  }
  for (int i = 0; i < NV; i++) start[i] ? (void)setenv(vars[i], start[i], 1) : (void)unsetenv(vars[i]);
  if (v == 1) setenv("MELD_MOE_DIAG", "1", 1);
  if (v == 2) setenv("MELD_MOE_DIAG", "2", 1);
  if (v == V_FFN_APART) setenv("MELD_MOE_FFN_SEND", "0", 1);
  if (v == V_FFN_SEND) setenv("MELD_MOE_FFN_SEND", "1", 1);
  if (v < NBASE) return;
  char buf[128];
  snprintf(buf, sizeof buf, "%s", strchr(g_var[v], '[') + 1);
  buf[strlen(buf) - 1] = 0;
  for (char *save = NULL, *kv = strtok_r(buf, "+", &save); kv; kv = strtok_r(NULL, "+", &save)) {
    char *eq = strchr(kv, '=');
    if (eq) *eq = 0, setenv(kv, eq + 1, 1);
  }
}

static void *rank_main(void *arg) {
  const int rank = (int)(intptr_t)arg;
  meld_config_t cfg;
  meld_comm_t comm;
  cudaStream_t st;
  if (gt_thread_comm(rank, P, g_ndev, g_id, 20000, &cfg, &comm, &st)) return NULL;
  cublasHandle_t cb;
  cublasCreate(&cb);
  cublasSetStream(cb, st);
  size_t mx = 0, my = 0, mw = 0, mi = 0, mc = 0;
  for (int i = 0; i < g_nrows; i++) {
    const row_t *r = &g_rows[i];
    const size_t cap = (size_t)r->T * r->topk * P + (size_t)128 * (r->E / P); /* upper bound */
    mx = mx > (size_t)r->T * r->H ? mx : (size_t)r->T * r->H;
    my = my > cap * r->N ? my : cap * r->N;
    mw = mw > (size_t)(r->E / P) * r->N * r->H ? mw : (size_t)(r->E / P) * r->N * r->H;
    mi = mi > (size_t)r->T * r->topk ? mi : (size_t)r->T * r->topk;
    mc = mc > cap ? mc : cap;
  }
  uint16_t *x, *w, *y, *xa, *w2, *out;
  int32_t *ids, *off, *cnt, *orig;
  float *wts;
  void *scratch;
  size_t mscr = 0;
  for (int i = 0; i < g_nrows; i++) {
    const row_t *r = &g_rows[i];
    const size_t cap = (size_t)r->T * r->topk * P + (size_t)128 * (r->E / P);
    const size_t b = meld_moe_ffn_scratch_bytes(P, r->E, r->H, r->N / 2, (int64_t)(cap + 127) / 128 * 128);
    mscr = b > mscr ? b : mscr;
  }
  GT_CUDA(cudaMalloc(&w2, mw)); /* [E_loc, hidden, n / 2]: half of w's elements */
  uint16_t *c2; /* gemm2's output [capacity, hidden] */
  size_t m2 = 0; /* gemm2's A [cap, n / 2] (in xa) and C [cap, hidden]: the larger */
  for (int i = 0; i < g_nrows; i++) {
    const row_t *r = &g_rows[i];
    const size_t cap = (size_t)r->T * r->topk * P + (size_t)128 * (r->E / P);
    m2 = m2 > cap * r->H ? m2 : cap * r->H;
    m2 = m2 > cap * (r->N / 2) ? m2 : cap * (r->N / 2);
  }
  GT_CUDA(cudaMalloc(&c2, m2 * 2));
  GT_CUDA(cudaMalloc(&out, mx * 2));
  GT_CUDA(cudaMalloc(&wts, mi * 4));
  GT_CUDA(cudaMalloc(&scratch, mscr));
  GT_CUDA(cudaMalloc(&x, mx * 2));
  GT_CUDA(cudaMalloc(&w, mw * 2));
  GT_CUDA(cudaMalloc(&y, my * 2));
  size_t mxa = mc * 7168 * 2 > mx * 2 ? (size_t)mc * 7168 * 2 : mx * 2; /* cublas-loop's A, gemm2's A */
  GT_CUDA(cudaMalloc(&xa, mxa > m2 * 2 ? mxa : m2 * 2));
  GT_CUDA(cudaMalloc(&ids, mi * 4));
  GT_CUDA(cudaMalloc(&off, 1025 * 4));
  GT_CUDA(cudaMalloc(&cnt, 1024 * 4));
  GT_CUDA(cudaMalloc(&orig, mc * 8));
  cudaEvent_t e0, e1;
  GT_CUDA(cudaEventCreate(&e0));
  GT_CUDA(cudaEventCreate(&e1));
  const int settle_ms = bench_settle_ms();
  for (int ri = 0; ri < g_nrows; ri++) {
    const row_t *r = &g_rows[ri];
    const int EL = r->E / P;
    pthread_barrier_wait(&g_bar);
    if (rank == 0) {
      for (int s = 0; s < P; s++) routing(r, s, g_ids[s]);
      layout(r, &g_capacity);
    }
    pthread_barrier_wait(&g_bar);
    gt_fill_bf16<<<256, 256, 0, st>>>(x, (size_t)r->T * r->H, 100 + rank);
    gt_fill_bf16<<<256, 256, 0, st>>>(w, (size_t)EL * r->N * r->H, 200 + rank);
    gt_fill_bf16<<<256, 256, 0, st>>>(xa, (size_t)g_capacity * r->H, 300 + rank);
    GT_CUDA(cudaMemcpyAsync(ids, g_ids[rank], (size_t)r->T * r->topk * 4, cudaMemcpyHostToDevice, st));
    gt_fill_bf16<<<256, 256, 0, st>>>(w2, (size_t)EL * r->H * (r->N / 2), 400 + rank);
    {
      float *hw = (float *)malloc((size_t)r->T * r->topk * 4);
      for (int64_t i = 0; i < (int64_t)r->T * r->topk; i++) hw[i] = 1.f / r->topk;
      GT_CUDA(cudaMemcpy(wts, hw, (size_t)r->T * r->topk * 4, cudaMemcpyHostToDevice));
      free(hw);
    }
    meld_moe_args_t a;
    memset(&a, 0, sizeof a);
    a.x = x, a.topk_ids = ids, a.tokens = r->T, a.topk = r->topk, a.experts = r->E, a.hidden = r->H, a.w = w;
    a.n = r->N, a.y = y, a.capacity = g_capacity, a.expert_offsets = off, a.expert_counts = cnt, a.row_origin = orig;
    meld_moe_args_t ag = a; /* the gated variant */
    ag.activation = MELD_MOE_ACT_SWIGLU;
    meld_moe_ffn_args_t fa;
    memset(&fa, 0, sizeof fa);
    fa.x = x, fa.topk_ids = ids, fa.topk_weights = wts, fa.tokens = r->T, fa.topk = r->topk, fa.experts = r->E;
    fa.hidden = r->H, fa.w1 = w, fa.w2 = w2, fa.ffn = r->N / 2, fa.out = out, fa.scratch = scratch;
    fa.capacity = g_capacity > (int64_t)r->T * r->topk ? g_capacity : ((int64_t)r->T * r->topk + 127) / 128 * 128;
    GT_CUDA(cudaStreamSynchronize(st));
    pthread_barrier_wait(&g_bar);
    if (rank == 0) unsetenv("MELD_MOE_DIAG");
    pthread_barrier_wait(&g_bar);
    GT_MELD(meld_moe_dispatch_gemm(comm, &a, st));
    GT_CUDA(cudaStreamSynchronize(st));
    GT_MELD(meld_comm_check(comm));
    /* the expert layout (for cublas-loop) and a check of rank 0's first rows of each expert */
    int32_t hoff[1025], hcnt[1024];
    GT_CUDA(cudaMemcpy(hoff, off, (EL + 1) * 4, cudaMemcpyDeviceToHost));
    GT_CUDA(cudaMemcpy(hcnt, cnt, EL * 4, cudaMemcpyDeviceToHost));
    if (rank == 0) {
      double num = 0, den = 0;
      uint16_t *hw = (uint16_t *)malloc((size_t)r->H * 2 * 2), *hx = hw + r->H, hy[2];
      for (int j = 0; j < EL; j += (EL + 7) / 8) {
        if (!hcnt[j]) continue;
        int32_t o[2];
        GT_CUDA(cudaMemcpy(o, orig + 2 * (size_t)hoff[j], 8, cudaMemcpyDeviceToHost));
        if (o[0] != 0) continue; /* (rank 0's own tokens only: their x is here) */
        for (int col = 0; col < r->N; col += r->N / 2 - 1) {
          GT_CUDA(cudaMemcpy(hx, x + (size_t)(o[1] / r->topk) * r->H, r->H * 2, cudaMemcpyDeviceToHost));
          GT_CUDA(cudaMemcpy(hw, w + ((size_t)j * r->N + col) * r->H, r->H * 2, cudaMemcpyDeviceToHost));
          GT_CUDA(cudaMemcpy(hy, y + (size_t)hoff[j] * r->N + col, 2, cudaMemcpyDeviceToHost));
          double ref = 0;
          for (int h = 0; h < r->H; h++) ref += (double)bf2f(hx[h]) * bf2f(hw[h]);
          num += (bf2f(hy[0]) - ref) * (bf2f(hy[0]) - ref), den += ref * ref;
        }
      }
      g_err = den > 0 ? sqrt(num / den) : -1;
      free(hw);
    }
    for (int v = 0; v < g_nvar; v++) {
      if (!g_run[v]) continue;
      pthread_barrier_wait(&g_bar);
      if (rank == 0) set_variant(v);
      if (rank == 0 && getenv("BENCH_SAMPLE_LOG")) fprintf(stderr, "variant %s %s t=%.3f s\n", r->name, g_var[v], bench_wall_s());
      pthread_barrier_wait(&g_bar);
      const float one = 1.f, zero = 0.f;
      auto run = [&] {
        if (v == 4) {
          for (int j = 0; j < EL; j++)
            if (hcnt[j]) {
              meld_gemm_args_t ga;
              memset(&ga, 0, sizeof ga);
              ga.a = xa + (size_t)hoff[j] * r->H, ga.lda = r->H, ga.b = w + (size_t)j * r->N * r->H, ga.ldb = r->H;
              ga.b_layout = MELD_B_NK, ga.c = y + (size_t)hoff[j] * r->N, ga.ldc = r->N;
              ga.m = hcnt[j], ga.n = r->N, ga.k = r->H;
              GT_MELD(meld_gemm(&ga, st));
            }
        } else if (v == V_DENSE) { /* one meld_gemm of the padded rows x expert 0's weight: the same work, dense */
          meld_gemm_args_t ga;
          memset(&ga, 0, sizeof ga);
          ga.a = xa, ga.lda = r->H, ga.b = w, ga.ldb = r->H, ga.b_layout = MELD_B_NK, ga.c = y, ga.ldc = r->N;
          ga.m = g_padded[rank], ga.n = r->N, ga.k = r->H;
          GT_MELD(meld_gemm(&ga, st));
        } else if (v == V_GEMM2) {
          meld_moe_gemm_args_t g2;
          memset(&g2, 0, sizeof g2);
          g2.dispatch = &a, g2.a = xa, g2.k = r->N / 2, g2.w = w2, g2.n = r->H, g2.c = c2;
          GT_MELD(meld_moe_grouped_gemm(comm, &g2, st));
        } else if (v == V_SWIGLU) {
          GT_MELD(meld_moe_dispatch_gemm(comm, &ag, st));
        } else if (V_IS_FFN(v)) {
          GT_MELD(meld_moe_ffn(comm, &fa, st));
        } else if (v != 3) {
          GT_MELD(meld_moe_dispatch_gemm(comm, &a, st));
        } else {
          for (int j = 0; j < EL; j++)
            if (hcnt[j])
              cublasGemmEx(cb, CUBLAS_OP_T, CUBLAS_OP_N, r->N, hcnt[j], r->H, &one, w + (size_t)j * r->N * r->H,
                           CUDA_R_16BF, r->H, xa + (size_t)hoff[j] * r->H, CUDA_R_16BF, r->H, &zero,
                           y + (size_t)hoff[j] * r->N, CUDA_R_16BF, r->N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        }
      };
      /* (every variant sustained alike: burst timings flatter short work) */
      g_ms[rank][v] = bench_rank_time(run, st, e0, e1, &g_bar, rank, &g_settle, g_calls, g_samples);
    }
    GT_MELD(meld_comm_check(comm));
    pthread_barrier_wait(&g_bar);
    if (rank == 0) {
      set_variant(0);
      float worst[NVAR] = {0};
      for (int rr = 0; rr < P; rr++)
        for (int v = 0; v < g_nvar; v++) worst[v] = g_ms[rr][v] > worst[v] ? g_ms[rr][v] : worst[v];
      int64_t rows = 0;
      for (int d = 0; d < P; d++) rows += g_rows_recv[d];
      for (int v = 0; v < g_nvar; v++) {
        if (!g_run[v]) continue;
        const double tf = (V_IS_FFN(v) ? 3.0 : v == V_GEMM2 ? 1.0 : 2.0) * rows * r->N * r->H / (worst[v] * 1e-3) / 1e12;
        char name[160];
        snprintf(name, sizeof name, "P%d %s T%d %s", P, r->name, r->T, g_var[v]);
        printf("%-44s %10.4f %9.1f %9.3f %9.2e\n", name, worst[v], tf, worst[v] / worst[1], v ? 0.0 : g_err);
        if (g_json) {
          FILE *jf = fopen(g_json, "a");
          if (jf) {
            fprintf(jf,
                    "{\"op\": \"%s\", \"shape\": {\"model\": \"%s\", \"tokens\": %d, \"hidden\": %d, "
                    "\"n\": %d, \"experts\": %d, \"topk\": %d, \"zipf\": %.2f, \"capacity\": %lld, \"rows_all_ranks\": "
                    "%lld}, \"variant\": \"%s\", \"nranks\": %d, \"nnodes\": 1, \"gpus\": %d, \"dtype\": \"bf16\", "
                    "\"meld_ms\": %.5f, \"nocopy_ms\": %.5f, \"comm_ms\": %.5f, \"cublas_loop_ms\": %.5f, "
                    "\"tflops_useful\": %.1f, \"settle_ms\": %d, \"rel_err_sample\": %.3e, \"gpu\": \"%s\", "
                    "\"driver\": \"%s\", \"cuda\": \"%s\", \"date\": \"%s\", \"commit\": \"%s\"}\n",
                    V_IS_FFN(v) ? "moe_ffn" : v == V_GEMM2 ? "moe_grouped_gemm" : "moe_dispatch_gemm", r->name, r->T, r->H, r->N, r->E, r->topk, r->zipf, (long long)g_capacity, (long long)rows,
                    g_var[v], P, g_ndev < P ? g_ndev : P, worst[v], worst[1], worst[2], worst[3], tf, settle_ms,
                    g_err, g_env.gpu, g_env.driver, g_env.cuda, g_env.date, g_env.commit);
            fclose(jf);
          }
        }
      }
      fflush(stdout);
    }
  }
  GT_CUDA(cudaStreamSynchronize(st));
  cudaFree(w2), cudaFree(c2), cudaFree(out), cudaFree(wts), cudaFree(scratch);
  cudaFree(x), cudaFree(w), cudaFree(y), cudaFree(xa), cudaFree(ids), cudaFree(off), cudaFree(cnt), cudaFree(orig);
  cudaEventDestroy(e0), cudaEventDestroy(e1);
  cublasDestroy(cb);
  GT_CUDA(cudaStreamDestroy(st));
  (void)meld_comm_destroy(comm);
  return NULL;
}

int main(int argc, char **argv) {
  (void)bench_wall_s(); /* (the sample log's time 0) */
  gt_inproc_env();
  int lng = 0, quick = 0;
  if (bench_inproc_args(argc, argv, &P, &lng, &g_calls, &g_samples, &g_json)) return 2;
  for (int i = 1; i < argc; i++) quick |= !strcmp(argv[i], "--quick");
  if (!gt_hopper(&g_ndev)) {
    printf("bench_moe: no Hopper GPU: skipped\n");
    return 0;
  }
  if (P == 0) P = g_ndev >= 2 ? (g_ndev < 8 ? g_ndev : 8) : 2;
  if (P < 1 || P > 8 || 256 % P || g_calls < 1 || g_samples < 1 || g_samples > 16) {
    fprintf(stderr, "bench_moe: --ranks 1, 2, 4 or 8, --calls >= 1, --samples 1..16\n");
    return 2;
  }
  if (g_ndev < P) setenv("MELD_SHARE_GPU", "1", 1);
  set_variant(0); /* (saves the variables' starting values) */
  if (getenv("BENCH_MOE_AB") && *getenv("BENCH_MOE_AB")) {
    char ab[512];
    snprintf(ab, sizeof ab, "%s", getenv("BENCH_MOE_AB"));
    for (char *save = NULL, *pv = strtok_r(ab, ",", &save); pv && g_nvar < NVAR; pv = strtok_r(NULL, ",", &save))
      snprintf(g_var[g_nvar++], sizeof g_var[0], "fused[%.110s]", pv);
  }
  /* BENCH_MOE_ROWS (a comma list): only the rows whose "name Ttokens" (or "name_Ttokens") label
   * contains one of its items, from these and the --long / extra ones (e.g.
   * "dsv3-32e_T4096,dsv3-32e-even") */
  const char *rows_env = getenv("BENCH_MOE_ROWS");
  const int pick = rows_env && *rows_env;
  const row_t all[] = {
      {"dsv3", 512, 7168, 4096, 256, 8, 0.0},
      {"dsv3", 4096, 7168, 4096, 256, 8, 0.0},
      {"dsv3-zipf", 4096, 7168, 4096, 256, 8, 1.0},
      {"dsv3", 8192, 7168, 4096, 256, 8, 0.0}, /* (not with --quick) */
      /* one EP-8 rank's share of DeepSeek-V3 (32 experts; its 32768 rows at ~1024 an expert: the
       * weights are read once per ~1024 rows, not ~128 as with all 256 experts on one GPU) */
      {"dsv3-32e", 4096, 7168, 4096, 32, 8, 0.0},
      /* (extra) the same with exactly 1024 rows an expert: no padding, no imbalance */
      {"dsv3-32e-even", 4096, 7168, 4096, 32, 8, -1.0},
      {"mixtral", 4096, 4096, 28672, 8, 2, 0.0},
      /* decode: one EP-8 rank's 32 experts at 128 tokens (32 rows an expert; the weights' stream) */
      {"dsv3-32e", 128, 7168, 4096, 32, 8, 0.0},
  };
  for (size_t i = 0; i < sizeof all / sizeof all[0] && g_nrows < 10; i++) {
    const row_t *r = &all[i];
    int keep;
    if (pick) {
      char label[64], label_[64], list[512];
      snprintf(label, sizeof label, "%s T%d", r->name, r->T);
      snprintf(label_, sizeof label_, "%s_T%d", r->name, r->T);
      snprintf(list, sizeof list, "%s", rows_env);
      keep = 0;
      for (char *save = NULL, *it = strtok_r(list, ",", &save); it; it = strtok_r(NULL, ",", &save))
        keep |= strstr(label, it) || strstr(label_, it);
    } else {
      keep = r->zipf >= 0 && (r->T != 8192 || lng || !quick); /* (the suite's 8192 tokens: not in --quick) */
    }
    if (keep && r->E % P == 0) g_rows[g_nrows++] = *r;
  }
  /* BENCH_MOE_VARIANTS (a comma list of the names above): only those (nocopy always: the ratios') */
  const char *var_env = getenv("BENCH_MOE_VARIANTS");
  for (int v = 0; v < NVAR; v++) g_run[v] = !(var_env && *var_env) || v == 1 || v >= NBASE;
  if (var_env && *var_env) {
    char list[512];
    snprintf(list, sizeof list, "%s", var_env);
    for (char *save = NULL, *it = strtok_r(list, ",", &save); it; it = strtok_r(NULL, ",", &save))
      for (int v = 0; v < NBASE; v++) g_run[v] |= !strcmp(it, g_var[v]);
  }
  /* the workspace: the largest row's staging and tables (set before any comm exists) */
  size_t ws = 0;
  for (int i = 0; i < g_nrows; i++) {
    const row_t *r = &g_rows[i];
    const int64_t cap = (int64_t)r->T * r->topk * P + (int64_t)128 * (r->E / P);
    const size_t b = meld_moe_workspace_bytes(P, r->T, r->topk, r->E, r->H, (cap + 127) / 128 * 128);
    ws = b > ws ? b : ws;
  }
  char wsb[32];
  snprintf(wsb, sizeof wsb, "%zu", ws);
  setenv("MELD_WORKSPACE_BYTES", wsb, 1);
  for (int s = 0; s < P; s++) g_ids[s] = (int32_t *)malloc((size_t)8192 * 8 * 4);
  bench_env(&g_env, 0);
  printf("bench_moe: %d ranks as threads on %d GPU(s), workspace %.0f MB a rank\n", P, g_ndev < P ? g_ndev : P, ws / 1e6);
  printf("%-44s %10s %9s %9s %9s\n", "row variant", "ms", "TFLOP/s", "/nocopy", "rel err");
  if (meld_get_unique_id(&g_id) != MELD_OK) {
    printf("meld_get_unique_id: %s\n", meld_last_error());
    return 1;
  }
  pthread_barrier_init(&g_bar, NULL, (unsigned)P);
  pthread_t th[8];
  for (int r = 0; r < P; r++) pthread_create(&th[r], NULL, rank_main, (void *)(intptr_t)r);
  for (int r = 0; r < P; r++) pthread_join(th[r], NULL);
  return gt_summary("bench_moe") ? 1 : 0;
}
