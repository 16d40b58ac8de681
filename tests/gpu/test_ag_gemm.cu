/* GPU tests of meld_ag_gemm (fused AllGather + GEMM) on every GPU present, and on 1 rank:
 *   1. shapes (tails: m_loc = n_loc = 1000, k = 4104; the suite's M = 8192, K = 8192,
 *      N_loc = 5120 split over the ranks; B [N,K] and [K,N]; vector and bulk copies; the
 *      unfused schedule): C poisoned first, then vs cuBLAS (fp32) on the gathered A, rel.
 *      Frobenius error <= 1e-2 overall AND per 128x256 tile; BITWISE equal to meld's own GEMM
 *      (no split-K) on the gathered A (each tile's k-loop is the same whatever the tile
 *      order); a_gathered bitwise equal to the concatenated shards. Every rank builds the
 *      gathered A itself (shards are seeded by rank), so the reference needs no communication.
 *   2. 1000 back-to-back calls, inputs rewritten on the stream before each, no host sync; a
 *      device kernel compares each call's C with meld_gemm on that call's gathered A and
 *      counts mismatches (read once at the end). On 1 rank the op is meld_gemm's default
 *      plan, which may split K (the last arriving split adds the others: the summation order
 *      varies from run to run), so there the check is "within 1e-2 of the same plan's C"
 *      instead of bitwise.
 *   3. CUDA-graph capture of one call, replayed with new inputs each time.
 *   4. (2+ GPUs) ranks with different k: every rank gets the mismatch error, no hang.
 *   5. (2+ GPUs) a rank that never calls: the others get MELD_ERR_TIMEOUT.
 *   6. (2+ GPUs) the last rank sleeps 2 s on the host before calling: every rank's result is
 *      still right (the others' kernels wait in the entry handshake).
 * MELD_TIMEOUT_MS defaults to 3000 here (1000 in test 5; 30000 in test 6, whose 2 s wait
 * must stay far from the deadline). */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <unistd.h>

#include "ag_gemm_plan.h"
#include "comm.h"
#include "gemm_plan.h"
#include "gpu/gpu_test.h"

#define TOL 1e-2

static int g_ndev = 0;

/* ---- data and checks on the device ---------------------------------------------------------- */

static void fill(uint16_t *p, int64_t rows, int64_t cols, int64_t ld, uint64_t seed, cudaStream_t s) {
  if (rows * cols > 0) gt_fill_bf16_2d<<<1024, 256, 0, s>>>(p, rows, cols, ld, seed);
}

/* Counts elements where a (ld lda) and b (ld ldb) differ, rows x cols: bitwise (tol < 0), or
 * by more than tol x (|b| + 1) (NaN counts). */
__global__ void diff_kernel(const uint16_t *a, int64_t lda, const uint16_t *b, int64_t ldb, int64_t rows,
                            int64_t cols, unsigned long long *count, float tol = -1.0f) {
  const int64_t n = rows * cols;
  unsigned long long local = 0;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = i / cols, c = i % cols;
    const uint16_t u = a[r * lda + c], v = b[r * ldb + c];
    if (tol < 0) {
      local += u != v;
    } else {
      const float x = __uint_as_float((uint32_t)u << 16), y = __uint_as_float((uint32_t)v << 16);
      local += !(fabsf(x - y) <= tol * (fabsf(y) + 1.0f));
    }
  }
  if (local) atomicAdd(count, local);
}

/* Per 128x256 tile: sum (c - ref)^2 and ref^2 (NaN in c poisons its tile). */
__global__ void tile_err_kernel(const uint16_t *c, int64_t ldc, const float *ref, int64_t m, int64_t n,
                                double *err2, double *ref2, int tiles_n) {
  const int64_t total = m * n;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = i / n, col = i % n;
    const uint16_t u = c[r * ldc + col];
    const float v = __uint_as_float((uint32_t)u << 16), w = ref[i];
    const int t = (int)(r / 128) * tiles_n + (int)(col / 256);
    atomicAdd(err2 + t, (double)(v - w) * (v - w));
    atomicAdd(ref2 + t, (double)w * w);
  }
}

static cublasHandle_t g_cublas;

/* fp32 C[m,n] (ld n) = A x B, cuBLAS (row-major via C^T = B^T A^T). */
static void ref_cublas(const uint16_t *a, int64_t lda, const uint16_t *b, int64_t ldb, int b_kn, float *c,
                       int64_t m, int64_t n, int64_t k, cudaStream_t s) {
  const float one = 1.0f, zero = 0.0f;
  cublasSetStream(g_cublas, s);
  cublasStatus_t st = cublasGemmEx(g_cublas, b_kn ? CUBLAS_OP_N : CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)m, (int)k,
                                   &one, b, CUDA_R_16BF, (int)ldb, a, CUDA_R_16BF, (int)lda, &zero, c, CUDA_R_32F,
                                   (int)n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  GT_CHECK(st == CUBLAS_STATUS_SUCCESS, "cublasGemmEx failed: %d", (int)st);
}

/* meld's GEMM engine alone, no split-K: the fused kernel's bitwise twin. */
static int g_ref_default = 0; /* one rank: the op is meld_gemm's default plan (may split K) */
/* How back-to-back / graph results are compared with the reference: bitwise, or (one rank:
 * split-K's summation order varies) within 1e-2. The fused kernel with stream-K (plan.stream_k)
 * is checked by the reference error alone, not bitwise. */
static float ref_tol(void) { return g_ref_default ? 1e-2f : -1.0f; }
/* The reference's tile width (the fused plan's: the 128 x 320 tile's results are compared
 * bitwise with meld_gemm's on the same tile). */
static int g_ref_tile_n = 256;
static meld_result_t meld_ref_gemm(const uint16_t *a, int64_t lda, const uint16_t *b, int64_t ldb, int b_kn,
                                   uint16_t *c, int64_t ldc, int64_t m, int64_t n, int64_t k, cudaStream_t s) {
  meld_gemm_args_t g;
  memset(&g, 0, sizeof g);
  g.a = a, g.lda = lda, g.b = b, g.ldb = ldb, g.b_layout = b_kn ? MELD_B_KN : MELD_B_NK;
  g.c = c, g.ldc = ldc, g.m = m, g.n = n, g.k = k;
  gemm_plan_opts_t o = GEMM_PLAN_OPTS_INIT;
  o.split_k = 1;
  o.tile_n = g_ref_tile_n == GEMM_BN_WIDE && !b_kn ? GEMM_BN_WIDE : GEMM_BN;
  return gemm_launch(&g, g_ref_default ? NULL : &o, s);
}

/* ---- per-rank context ------------------------------------------------------------------------ */

typedef struct {
  meld_comm_t comm;
  int rank, P;
  cudaStream_t s;
} ctx_t;

static meld_comm_t comm_open(int64_t ws_bytes, int64_t timeout_ms) {
  meld_config_t cfg = MELD_CONFIG_INIT;
  cfg.bootstrap_timeout_ms = 30000;
  cfg.workspace_bytes = (size_t)ws_bytes;
  cfg.timeout_ms = timeout_ms;
  meld_comm_t comm = NULL;
  GT_MELD(meld_comm_init_env(&comm, &cfg));
  return comm;
}

static uint64_t shard_seed(uint64_t call, int r) { return call * 1000003ull + (uint64_t)r * 7919ull + 17; }

/* ---- 1. shapes -------------------------------------------------------------------------------- */

typedef struct {
  int64_t m_loc, n_loc, k;
  int b_kn, copy, schedule, with_gathered, comm_ctas;
  int64_t lda_extra;
  const char *name;
} shape_t;

/* One rank: run the fused kernel (hint FUSED: nothing to gather) instead of the plain GEMM;
 * g_defer: the hint's epi_defer (-1 = the plan's choice). */
static int g_force_fused = 0, g_defer = -1;
/* One rank, loopback (MELD_AG_GEMM_DIAG=2, ag_gemm.cu): the fused kernel of rank 0 of 2 whose
 * virtual peer's shard is this rank's own, pushed and signalled on this GPU: the reference is
 * the 2-rank one with both shards equal. */
static int g_loop = 0;
static int g_sk = -1, g_sk_pieces = -1; /* stream-K hint (run_sk) */
static int g_tile_n = 0;                /* the hint's tile width (run_wide) */
static int g_want_tile_n = 0;           /* the plan's width the default rule must choose (0: unchecked) */
static int g_comm_warps = -1;           /* the hint's comm_warps (run_comm_warps); the plan must take 1 */
static int g_inplace = -1;              /* the hint's inplace (0: the own shard copied into the staging) */

static void test_shape(ctx_t *c, const shape_t *sh, int index) {
  const int P = g_loop ? 2 : c->P, me = c->rank;
  const int64_t m_loc = sh->m_loc, n = sh->n_loc + 8 * me, k = sh->k, M = m_loc * P; /* n_loc differs per rank */
  const int64_t lda = k + sh->lda_extra, ldc = (n + 15) / 8 * 8, ldg = k;
  const int64_t ldb = sh->b_kn ? n : k;
  uint16_t *a = NULL, *full = NULL, *b = NULL, *cm = NULL, *cr = NULL, *ag = NULL;
  float *ref = NULL;
  double *e2 = NULL;
  unsigned long long *cnt = NULL;
  const int tiles_n = (int)((n + 255) / 256), tiles = (int)((M + 127) / 128) * tiles_n;
  GT_CUDA(cudaMalloc(&a, (size_t)m_loc * lda * 2 + 16));
  GT_CUDA(cudaMalloc(&full, (size_t)M * k * 2 + 16));
  GT_CUDA(cudaMalloc(&b, (size_t)n * k * 2 + 16));
  GT_CUDA(cudaMalloc(&cm, (size_t)M * ldc * 2 + 16));
  GT_CUDA(cudaMalloc(&cr, (size_t)M * ldc * 2 + 16));
  GT_CUDA(cudaMalloc(&ag, (size_t)M * ldg * 2 + 16));
  GT_CUDA(cudaMalloc(&ref, (size_t)M * n * 4));
  GT_CUDA(cudaMalloc(&e2, (size_t)tiles * 2 * sizeof(double)));
  GT_CUDA(cudaMalloc(&cnt, 4 * sizeof *cnt));
  const uint64_t call = 1000 + (uint64_t)index;
  fill(a, m_loc, k, lda, shard_seed(call, me), c->s);
  for (int r = 0; r < P; r++) fill(full + (size_t)r * m_loc * k, m_loc, k, k, shard_seed(call, g_loop ? me : r), c->s);
  fill(b, sh->b_kn ? k : n, sh->b_kn ? n : k, ldb, 99 + me, c->s);
  GT_CUDA(cudaMemsetAsync(cm, 0xff, (size_t)M * ldc * 2, c->s)); /* poison: NaN */
  GT_CUDA(cudaMemsetAsync(ag, 0xff, (size_t)M * ldg * 2, c->s));
  GT_CUDA(cudaMemsetAsync(cnt, 0, 4 * sizeof *cnt, c->s));
  GT_CUDA(cudaMemsetAsync(e2, 0, (size_t)tiles * 2 * sizeof(double), c->s));

  meld_ag_gemm_args_t args;
  memset(&args, 0, sizeof args);
  args.a_shard = a, args.lda = lda, args.b = b, args.ldb = ldb, args.b_layout = sh->b_kn ? MELD_B_KN : MELD_B_NK;
  args.c = cm, args.ldc = ldc, args.m_loc = m_loc, args.n_loc = n, args.k = k;
  if (sh->with_gathered) args.a_gathered = ag, args.ld_gathered = ldg;
  ag_gemm_hint_t hint = AG_GEMM_HINT_INIT;
  hint.copy = sh->copy;
  hint.schedule = g_loop ? AG_GEMM_FUSED : P == 1 ? (g_force_fused ? AG_GEMM_FUSED : -1) : sh->schedule;
  hint.epi_defer = g_defer;
  hint.comm_ctas = sh->comm_ctas;
  hint.stream_k = g_sk, hint.sk_pieces = g_sk_pieces;
  hint.tile_n = g_tile_n;
  hint.comm_warps = g_comm_warps;
  hint.inplace = g_inplace;
  ag_gemm_plan_t plan;
  memset(&plan, 0, sizeof plan);
  const double t0 = gt_now_s();
  meld_result_t r = ag_gemm_run(c->comm, &args, &hint, NULL, c->s, &plan);
  GT_CHECK(r == MELD_OK, "%s: ag_gemm_run -> %s: %s", sh->name, meld_strerror(r), meld_last_error());
  GT_CUDA(cudaStreamSynchronize(c->s));
  const double dt = gt_now_s() - t0;
  GT_MELD(meld_comm_check(c->comm));
  if (g_comm_warps == 1 && plan.schedule == AG_GEMM_FUSED)
    GT_CHECK(plan.comm_warps == 1 && plan.comm_ctas == 0, "%s: the plan did not take the comm_warps hint", sh->name);
  if (g_want_tile_n)
    GT_CHECK(plan.tile_n == g_want_tile_n, "%s: the default plan's tile width is %d, want %d", sh->name, plan.tile_n,
             g_want_tile_n);
  if (g_tile_n == GEMM_BN_WIDE && plan.schedule == AG_GEMM_FUSED && !sh->b_kn && !plan.compact)
    GT_CHECK(plan.tile_n == GEMM_BN_WIDE && !plan.stream_k, "%s: the plan did not take the tile_n 320 hint (%d)", sh->name,
             plan.tile_n);
  /* References. */
  GT_CUDA(cudaMemsetAsync(cr, 0xff, (size_t)M * ldc * 2, c->s));
  g_ref_tile_n = plan.schedule == AG_GEMM_FUSED ? plan.tile_n : 256;
  GT_MELD(meld_ref_gemm(full, k, b, ldb, sh->b_kn, cr, ldc, M, n, k, c->s));
  g_ref_tile_n = 256;
  ref_cublas(full, k, b, ldb, sh->b_kn, ref, M, n, k, c->s);
  diff_kernel<<<1024, 256, 0, c->s>>>(cm, ldc, cr, ldc, M, n, cnt);
  if (sh->with_gathered) diff_kernel<<<1024, 256, 0, c->s>>>(ag, ldg, full, k, M, k, cnt + 1);
  tile_err_kernel<<<1024, 256, 0, c->s>>>(cm, ldc, ref, M, n, e2, e2 + tiles, tiles_n);
  GT_CUDA(cudaStreamSynchronize(c->s));
  unsigned long long h[4];
  GT_CUDA(cudaMemcpy(h, cnt, sizeof h, cudaMemcpyDeviceToHost));
  double *he = (double *)malloc((size_t)tiles * 2 * sizeof(double));
  GT_CUDA(cudaMemcpy(he, e2, (size_t)tiles * 2 * sizeof(double), cudaMemcpyDeviceToHost));
  double se = 0, sr = 0, worst = 0;
  int bad_tiles = 0;
  for (int t = 0; t < tiles; t++) {
    se += he[t], sr += he[tiles + t];
    const double rel = sqrt(he[t] / (he[tiles + t] > 0 ? he[tiles + t] : 1e-30));
    if (!(rel <= TOL)) bad_tiles++;
    if (!(rel <= worst)) worst = rel;
  }
  const double rel = sqrt(se / (sr > 0 ? sr : 1e-30));
  free(he);
  /* The unfused and one-rank paths run meld_gemm's default plan, which may split K (split- or
   * stream-K): bitwise equality is required of the fused kernel only. */
  /* (stream-K: pieces summed in arrival order; one rank: the reference is meld_gemm's default
   * plan, which may split K) */
  const int bitwise = plan.schedule == AG_GEMM_FUSED && !plan.stream_k && P > 1;
  if (g_sk > 0 && plan.schedule == AG_GEMM_FUSED && tiles >= plan.sm_count && tiles % plan.sm_count)
    GT_CHECK(plan.stream_k == g_sk && (g_sk_pieces < 0 ? plan.sk_pieces > 0 : plan.sk_pieces == g_sk_pieces),
             "%s: the plan did not take the stream-K hint (stream_k %d, sk_pieces %d)", sh->name, plan.stream_k,
             plan.sk_pieces);
  GT_CHECK(rel <= TOL && bad_tiles == 0, "%s: rel err %.3g, %d of %d tiles over %.0e (worst %.3g)", sh->name, rel,
           bad_tiles, tiles, TOL, worst);
  if (bitwise) GT_CHECK(h[0] == 0, "%s: %llu elements differ from meld_gemm on the gathered A", sh->name, h[0]);
  if (sh->with_gathered) GT_CHECK(h[1] == 0, "%s: a_gathered: %llu elements wrong", sh->name, h[1]);
  char pb[512];
  ag_gemm_plan_format(&plan, pb, sizeof pb);
  gt_log("%s%s: rel %.2e worst tile %.2e, %llu bitwise diffs%s, %.1f ms (first call) | %s", g_loop ? "[loopback] " : "", sh->name, rel, worst,
         h[0], bitwise ? "" : " (not required)", dt * 1e3, pb);
  cudaFree(a), cudaFree(full), cudaFree(b), cudaFree(cm), cudaFree(cr), cudaFree(ag), cudaFree(ref), cudaFree(e2);
  cudaFree(cnt);
}

/* Every shape (the last with stream-K on: MELD_AG_GEMM_STREAM_K=2, off by default; with
 * g_force_fused, the forced-unfused ones are skipped), then the suite shape (index 6) without
 * the deferred epilogue (the default since session 5). */
static void run_shapes(ctx_t *c, const shape_t *shapes, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (g_force_fused && shapes[i].schedule == AG_GEMM_UNFUSED) continue;
    const int sk = i + 1 == n;
    if (sk) setenv("MELD_AG_GEMM_STREAM_K", "2", 1);
    test_shape(c, &shapes[i], (int)i);
    if (sk) unsetenv("MELD_AG_GEMM_STREAM_K");
  }
  g_defer = 0;
  test_shape(c, &shapes[6], 6);
  g_defer = -1;
}

/* Stream-K forced by the hint: n pieces per tile from the queue (the default 4, and 8 over one
 * full + the partial wave), and one range per worker (SKQ, pieces 0). The plan must take it. */
static void run_sk(ctx_t *c, const shape_t *sh, int index) {
  const int sks[] = {1, 1, 2}, pieces[] = {-1, 0, 8};
  for (int v = 0; v < 3; v++) {
    g_sk = sks[v], g_sk_pieces = pieces[v];
    shape_t s2 = *sh;
    char name[160];
    snprintf(name, sizeof name, "%s, stream-K hint %d, pieces %d", sh->name, sks[v], pieces[v]);
    s2.name = name;
    test_shape(c, &s2, index + v);
  }
  g_sk = -1, g_sk_pieces = -1;
}

/* The 128 x 320 tile (hint tile_n 320) at the given shapes (B [N,K], no compact epilogue). */
static void run_wide(ctx_t *c, const shape_t *shapes, const int *idx, int n, int base) {
  g_tile_n = GEMM_BN_WIDE;
  for (int i = 0; i < n; i++) {
    shape_t s2 = shapes[idx[i]];
    char name[160];
    snprintf(name, sizeof name, "%s, tile 128 x 320", s2.name);
    s2.name = name;
    test_shape(c, &s2, base + idx[i]);
  }
  g_tile_n = 0;
}

/* Comm warps (hint comm_warps 1: no comm CTAs, the producer warpgroups' warps 2-3 push) at
 * the given shapes, without a_gathered (which keeps comm CTAs). */
static void run_comm_warps(ctx_t *c, const shape_t *shapes, const int *idx, int n, int base) {
  g_comm_warps = 1;
  for (int i = 0; i < n; i++) {
    shape_t s2 = shapes[idx[i]];
    char name[160];
    snprintf(name, sizeof name, "%s, comm warps%s", s2.name, g_inplace == 0 ? ", own shard staged first" : "");
    s2.name = name;
    s2.with_gathered = 0;
    test_shape(c, &s2, base + i);
  }
  g_comm_warps = -1;
}

static void test_shapes(ctx_t *c) {
  const int P = c->P;
  const int64_t suite_m_loc = 8192 / P, suite_n = 5120; /* M = 8192, K = 8192, N_loc = 5120 */
  const shape_t shapes[] = {
      {1000, 1000, 4104, 0, -1, -1, 1, 0, 0, "tail 1000x1000x4104 B[N,K]"},
      {1000, 1000, 4104, 1, -1, -1, 1, 0, 0, "tail 1000x1000x4104 B[K,N]"},
      {1000, 1000, 4104, 0, AG_GEMM_COPY_BULK, -1, 1, 3, 0, "tail, bulk copies, 3 comm CTAs"},
      {384, 520, 1024, 0, -1, -1, 0, 0, 64, "strided shard (lda = k + 64), no a_gathered"},
      {100, 300, 512, 0, -1, -1, 1, 0, 0, "tiny shard (unfused by the plan)"},
      {1000, 1000, 4104, 0, -1, AG_GEMM_UNFUSED, 1, 0, 0, "tail, unfused forced"},
      {suite_m_loc, suite_n, 8192, 0, -1, -1, 1, 0, 0, "suite M=8192 K=8192 N_loc=5120"},
      {suite_m_loc, suite_n, 8192, 0, AG_GEMM_COPY_BULK, -1, 0, 0, 0, "suite shape, bulk copies"},
      {2048 / P, suite_n, 8192, 0, -1, -1, 1, 0, 0, "suite M=2048, MELD_AG_GEMM_STREAM_K=2 (stream-K at P = 2)"},
  };
  /* stream-K shapes (>= 132 tiles, a partial wave): 2048 x 5120 x 8192 in all (320 tiles);
   * a tail with k-blocks (65) that the pieces do not divide, a_gathered on, 192 tiles at P = 2 */
  const shape_t sk_shapes[] = {
      {2048 / P, suite_n, 8192, 0, -1, -1, 0, 0, 0, "M=2048 N_loc=5120 K=8192"},
      {1000, 3000, 4104, 0, -1, -1, 1, 0, 0, "tail 1000x3000x4104"},
  };
  run_shapes(c, shapes, sizeof shapes / sizeof shapes[0]);
  /* the wide tile: the strided shard (3 m-blocks, ragged N), the suite shape, its bulk-copy
   * form (no a_gathered), M = 2048 (the shape it is for: 256 tiles, 1.94 waves), a tail
   * with a ragged last k-block */
  const int wide_idx[] = {3, 6, 7, 8}, zero_idx[] = {0};
  const shape_t wide_tail = {1024, 3000, 4104, 0, -1, -1, 1, 0, 0, "tail 1024x3000x4104"};
  /* comm warps: tails (both B layouts), the strided shard (rows of 2 KB: 16 per piece, one
   * run each), the suite shape (16 KB rows, 2 per piece, one run), rows of 40000 bytes (two
   * pieces each), M = 2048 (the wide tile, 1.94 waves), a 129-row shard (pieces past a short
   * chunk's rows), and with the own shard copied into the staging first (phase 0) */
  const shape_t cw_extra[] = {{1000, 520, 20000, 0, -1, -1, 0, 0, 0, "long rows 1000x520x20000"},
                              {2048 / P, suite_n, 8192, 0, -1, -1, 0, 0, 0, "M=2048 N_loc=5120 K=8192"},
                              {129, 700, 4096, 0, -1, AG_GEMM_FUSED, 0, 0, 0, "tail 129x700x4096"}};
  const int cw_idx[] = {0, 1, 3, 6}, cw_extra_idx[] = {0, 1, 2};
  if (P > 1) {
    run_comm_warps(c, shapes, cw_idx, 4, 500);
    run_comm_warps(c, cw_extra, cw_extra_idx, 3, 510);
    g_inplace = 0;
    run_comm_warps(c, shapes, cw_idx, 1, 520);
    g_inplace = -1;
    run_wide(c, shapes, wide_idx, 4, 400);
    run_wide(c, &wide_tail, zero_idx, 1, 420);
    for (int i = 0; i < 2; i++) run_sk(c, &sk_shapes[i], 200 + 10 * i);
  }
  if (P == 1) { /* the fused kernel at one rank, every shape the plan would not send unfused */
    g_force_fused = 1;
    run_shapes(c, shapes, sizeof shapes / sizeof shapes[0]);
    g_force_fused = 0;
    /* loopback: the 2-rank kernel (pushes, signals, ready waits) on one GPU */
    setenv("MELD_AG_GEMM_DIAG", "2", 1);
    g_loop = 1;
    const int idx[] = {0, 1, 2, 3, 6, 7};
    for (size_t i = 0; i < sizeof idx / sizeof idx[0]; i++) test_shape(c, &shapes[idx[i]], 100 + idx[i]);
    setenv("MELD_AG_GEMM_STREAM_K", "2", 1);
    test_shape(c, &shapes[8], 108);
    unsetenv("MELD_AG_GEMM_STREAM_K");
    /* stream-K in the 2-rank kernel (M = 2048 in all: half pushed) */
    shape_t s0 = sk_shapes[0];
    s0.m_loc = 1024;
    run_sk(c, &s0, 300);
    run_sk(c, &sk_shapes[1], 310);
    /* the wide tile in the 2-rank kernel (M = 2048: 1024 rows pushed) by default (meld_gemm's
     * rule), forced, and at a tail */
    g_want_tile_n = GEMM_BN_WIDE;
    shape_t s0d = s0;
    s0d.name = "M=2048 N_loc=5120 K=8192, the default plan (128 x 320)";
    test_shape(c, &s0d, 425);
    g_want_tile_n = 0;
    run_wide(c, &s0, zero_idx, 1, 430);
    run_wide(c, shapes, wide_idx, 2, 440); /* (idx 3, 6) */
    run_wide(c, &wide_tail, zero_idx, 1, 450);
    /* comm warps in the 2-rank kernel (the virtual peer's half pushed by them) */
    shape_t cw1 = cw_extra[1];
    cw1.m_loc = 1024;
    run_comm_warps(c, shapes, cw_idx, 4, 500);
    run_comm_warps(c, cw_extra, cw_extra_idx, 1, 510);
    run_comm_warps(c, &cw1, zero_idx, 1, 511);
    run_comm_warps(c, cw_extra, cw_extra_idx + 2, 1, 512);
    g_inplace = 0;
    run_comm_warps(c, shapes, cw_idx, 1, 520);
    g_inplace = -1;
    g_loop = 0;
    unsetenv("MELD_AG_GEMM_DIAG");
    /* and in the fused kernel at one rank */
    g_force_fused = 1;
    run_sk(c, &sk_shapes[0], 320);
    run_wide(c, shapes, wide_idx, 4, 460);
    g_force_fused = 0;
  }
}

/* ---- 2 and 3. back-to-back and graphs -------------------------------------------------------- */

/* g_b2b_warps: comm warps (MELD_AG_GEMM_COMM_WARPS=1) except every 4th call (comm CTAs):
 * the piece counters of a call must restart whatever the last call left in them. With
 * g_loop: the loopback kernel (one rank as rank 0 of 2, both shards its own). */
static int g_b2b_warps = 0;

static void test_back_to_back(ctx_t *c, int calls) {
  const int P = g_loop ? 2 : c->P, me = c->rank;
  const int64_t m_loc = 256, k = 1024, M = m_loc * P;
  const int64_t ns[2] = {512, 776};
  uint16_t *a = NULL, *full = NULL, *b = NULL, *cm[2] = {NULL, NULL}, *cr = NULL;
  unsigned long long *cnt = NULL;
  GT_CUDA(cudaMalloc(&a, (size_t)m_loc * k * 2));
  GT_CUDA(cudaMalloc(&full, (size_t)M * k * 2));
  GT_CUDA(cudaMalloc(&b, (size_t)1024 * k * 2));
  for (int i = 0; i < 2; i++) GT_CUDA(cudaMalloc(&cm[i], (size_t)M * 1024 * 2));
  GT_CUDA(cudaMalloc(&cr, (size_t)M * 1024 * 2));
  GT_CUDA(cudaMalloc(&cnt, (size_t)calls * sizeof *cnt));
  GT_CUDA(cudaMemsetAsync(cnt, 0, (size_t)calls * sizeof *cnt, c->s));
  fill(b, 1024, k, k, 5 + me, c->s);
  const double t0 = gt_now_s();
  for (int i = 0; i < calls; i++) {
    const int64_t n = ns[i & 1];
    uint16_t *out = cm[(i >> 1) & 1];
    fill(a, m_loc, k, k, shard_seed(i, me), c->s);
    cudaMemsetAsync(out, 0xff, (size_t)M * n * 2, c->s);
    meld_ag_gemm_args_t args;
    memset(&args, 0, sizeof args);
    args.a_shard = a, args.lda = k, args.b = b, args.ldb = k, args.b_layout = MELD_B_NK;
    args.c = out, args.ldc = n, args.m_loc = m_loc, args.n_loc = n, args.k = k;
    if (g_b2b_warps) setenv("MELD_AG_GEMM_COMM_WARPS", i % 4 == 3 ? "0" : "1", 1);
    meld_result_t r = meld_ag_gemm(c->comm, &args, c->s);
    if (r != MELD_OK) {
      GT_CHECK(0, "back-to-back call %d -> %s: %s", i, meld_strerror(r), meld_last_error());
      break;
    }
    for (int q = 0; q < P; q++) fill(full + (size_t)q * m_loc * k, m_loc, k, k, shard_seed(i, g_loop ? me : q), c->s);
    meld_ref_gemm(full, k, b, k, 0, cr, n, M, n, k, c->s);
    diff_kernel<<<264, 256, 0, c->s>>>(out, n, cr, n, M, n, cnt + i, ref_tol());
  }
  GT_CUDA(cudaStreamSynchronize(c->s));
  const double dt = gt_now_s() - t0;
  GT_MELD(meld_comm_check(c->comm));
  unsigned long long *h = (unsigned long long *)calloc((size_t)calls, sizeof *h);
  GT_CUDA(cudaMemcpy(h, cnt, (size_t)calls * sizeof *h, cudaMemcpyDeviceToHost));
  int bad = 0, first = -1;
  for (int i = 0; i < calls; i++)
    if (h[i]) bad++, first = first < 0 ? i : first;
  GT_CHECK(bad == 0, "back-to-back: %d of %d calls wrong (first %d: %llu elements)", bad, calls, first,
           first >= 0 ? h[first] : 0ull);
  if (g_b2b_warps) unsetenv("MELD_AG_GEMM_COMM_WARPS");
  gt_log("%sback-to-back%s: %d calls checked on the device (%s), %d wrong, %.2f s", g_loop ? "[loopback] " : "",
         g_b2b_warps ? " (comm warps, every 4th call comm CTAs)" : "", calls, g_ref_default ? "within 1e-2 of the same plan" : "bitwise", bad, dt);
  free(h);
  cudaFree(a), cudaFree(full), cudaFree(b), cudaFree(cm[0]), cudaFree(cm[1]), cudaFree(cr), cudaFree(cnt);
}

static void test_graph(ctx_t *c, int replays) {
  const int P = g_loop ? 2 : c->P, me = c->rank;
  const int64_t m_loc = 512, n = 640, k = 2048, M = m_loc * P;
  uint16_t *a = NULL, *full = NULL, *b = NULL, *cm = NULL, *cr = NULL;
  unsigned long long *cnt = NULL;
  GT_CUDA(cudaMalloc(&a, (size_t)m_loc * k * 2));
  GT_CUDA(cudaMalloc(&full, (size_t)M * k * 2));
  GT_CUDA(cudaMalloc(&b, (size_t)n * k * 2));
  GT_CUDA(cudaMalloc(&cm, (size_t)M * n * 2));
  GT_CUDA(cudaMalloc(&cr, (size_t)M * n * 2));
  GT_CUDA(cudaMalloc(&cnt, (size_t)replays * sizeof *cnt));
  GT_CUDA(cudaMemsetAsync(cnt, 0, (size_t)replays * sizeof *cnt, c->s));
  fill(b, n, k, k, 77 + me, c->s);
  meld_ag_gemm_args_t args;
  memset(&args, 0, sizeof args);
  args.a_shard = a, args.lda = k, args.b = b, args.ldb = k, args.b_layout = MELD_B_NK;
  args.c = cm, args.ldc = n, args.m_loc = m_loc, args.n_loc = n, args.k = k;
  cudaGraph_t g = NULL;
  cudaGraphExec_t ge = NULL;
  GT_CUDA(cudaStreamSynchronize(c->s));
  GT_CUDA(cudaStreamBeginCapture(c->s, cudaStreamCaptureModeThreadLocal));
  meld_result_t r = meld_ag_gemm(c->comm, &args, c->s);
  GT_CUDA(cudaStreamEndCapture(c->s, &g));
  GT_CHECK(r == MELD_OK, "graph capture: %s: %s", meld_strerror(r), meld_last_error());
  GT_CUDA(cudaGraphInstantiate(&ge, g, 0));
  for (int i = 0; i < replays && ge; i++) {
    fill(a, m_loc, k, k, shard_seed(5000 + i, me), c->s);
    cudaMemsetAsync(cm, 0xff, (size_t)M * n * 2, c->s);
    GT_CUDA(cudaGraphLaunch(ge, c->s));
    for (int q = 0; q < P; q++) fill(full + (size_t)q * m_loc * k, m_loc, k, k, shard_seed(5000 + i, g_loop ? me : q), c->s);
    meld_ref_gemm(full, k, b, k, 0, cr, n, M, n, k, c->s);
    diff_kernel<<<264, 256, 0, c->s>>>(cm, n, cr, n, M, n, cnt + i, ref_tol());
  }
  GT_CUDA(cudaStreamSynchronize(c->s));
  GT_MELD(meld_comm_check(c->comm));
  unsigned long long *h = (unsigned long long *)calloc((size_t)replays, sizeof *h);
  GT_CUDA(cudaMemcpy(h, cnt, (size_t)replays * sizeof *h, cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int i = 0; i < replays; i++) bad += h[i] != 0;
  GT_CHECK(bad == 0, "graph: %d of %d replays wrong", bad, replays);
  gt_log("%sgraph%s: %d replays with new inputs, %d wrong", g_loop ? "[loopback] " : "", g_b2b_warps ? " (comm warps)" : "",
         replays, bad);
  free(h);
  if (ge) cudaGraphExecDestroy(ge);
  if (g) cudaGraphDestroy(g);
  cudaFree(a), cudaFree(full), cudaFree(b), cudaFree(cm), cudaFree(cr), cudaFree(cnt);
}

/* ---- main per rank ---------------------------------------------------------------------------- */

static void rank_main(int rank, int nranks) {
  ctx_t c;
  memset(&c, 0, sizeof c);
  c.rank = rank;
  c.P = nranks;
  c.comm = comm_open((int64_t)512 << 20, 0);
  if (!c.comm) return;
  cublasCreate(&g_cublas);
  GT_CUDA(cudaStreamCreateWithFlags(&c.s, cudaStreamNonBlocking));
  test_shapes(&c);
  g_ref_default = nranks == 1; /* back-to-back and graphs compare bitwise with the same GEMM plan */
  test_back_to_back(&c, 1000);
  test_graph(&c, 20);
  /* comm warps: back-to-back (every 4th call with comm CTAs) and graphs; at one rank in the
   * loopback kernel */
  if (nranks == 1) setenv("MELD_AG_GEMM_DIAG", "2", 1), g_loop = 1;
  g_b2b_warps = 1;
  test_back_to_back(&c, 400);
  setenv("MELD_AG_GEMM_COMM_WARPS", "1", 1);
  test_graph(&c, 10);
  unsetenv("MELD_AG_GEMM_COMM_WARPS");
  g_b2b_warps = 0;
  if (nranks == 1) unsetenv("MELD_AG_GEMM_DIAG"), g_loop = 0;
  if (nranks > 1) { /* the same with the fused kernel's other tile width (MELD_AG_GEMM_TILE_N: each rank is a process) */
    setenv("MELD_AG_GEMM_TILE_N", "320", 1);
    g_ref_tile_n = GEMM_BN_WIDE;
    test_back_to_back(&c, 300);
    test_graph(&c, 10);
    g_ref_tile_n = 256;
    unsetenv("MELD_AG_GEMM_TILE_N");
  }
  meld_bootstrap_barrier(c.comm->boot);
  cudaStreamDestroy(c.s);
  cublasDestroy(g_cublas);
  GT_MELD(meld_comm_destroy(c.comm));
}

/* Rank 1 passes a different k: every rank's call must fail with the mismatch sentence. */
static void rank_mismatch(int rank, int nranks) {
  meld_comm_t comm = comm_open((int64_t)64 << 20, 0);
  if (!comm) return;
  const int64_t m_loc = 256, n = 256, k = rank == 1 ? 1032 : 1024;
  uint16_t *a = NULL, *b = NULL, *cm = NULL;
  GT_CUDA(cudaMalloc(&a, (size_t)m_loc * k * 2));
  GT_CUDA(cudaMalloc(&b, (size_t)n * k * 2));
  GT_CUDA(cudaMalloc(&cm, (size_t)m_loc * nranks * n * 2));
  cudaStream_t s;
  GT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  meld_ag_gemm_args_t args;
  memset(&args, 0, sizeof args);
  args.a_shard = a, args.lda = k, args.b = b, args.ldb = k, args.b_layout = MELD_B_NK;
  args.c = cm, args.ldc = n, args.m_loc = m_loc, args.n_loc = n, args.k = k;
  const double t0 = gt_now_s();
  GT_MELD(meld_ag_gemm(comm, &args, s));
  GT_CUDA(cudaStreamSynchronize(s));
  meld_result_t r = meld_comm_check(comm);
  GT_CHECK(r == MELD_ERR_ABORTED && strstr(meld_last_error(), "differ"),
           "mismatch: meld_comm_check -> %s (%s), want MELD_ERR_ABORTED naming the mismatch", meld_strerror(r),
           meld_last_error());
  gt_log("mismatch: %.2f s; %s", gt_now_s() - t0, meld_last_error());
  r = meld_ag_gemm(comm, &args, s);
  GT_CHECK(r == MELD_ERR_ABORTED, "the next call -> %s, want the sticky error", meld_strerror(r));
  meld_bootstrap_barrier(comm->boot);
  cudaStreamDestroy(s);
  cudaFree(a), cudaFree(b), cudaFree(cm);
  GT_MELD(meld_comm_destroy(comm));
}

/* The last rank never calls: the others must time out (1 s), not hang. */
static void rank_missing_peer(int rank, int nranks) {
  meld_comm_t comm = comm_open((int64_t)64 << 20, 1000);
  if (!comm) return;
  const int64_t m_loc = 256, n = 256, k = 1024;
  uint16_t *a = NULL, *b = NULL, *cm = NULL;
  GT_CUDA(cudaMalloc(&a, (size_t)m_loc * k * 2));
  GT_CUDA(cudaMalloc(&b, (size_t)n * k * 2));
  GT_CUDA(cudaMalloc(&cm, (size_t)m_loc * nranks * n * 2));
  cudaStream_t s;
  GT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  if (rank != nranks - 1) {
    meld_ag_gemm_args_t args;
    memset(&args, 0, sizeof args);
    args.a_shard = a, args.lda = k, args.b = b, args.ldb = k, args.b_layout = MELD_B_NK;
    args.c = cm, args.ldc = n, args.m_loc = m_loc, args.n_loc = n, args.k = k;
    const double t0 = gt_now_s();
    GT_MELD(meld_ag_gemm(comm, &args, s));
    GT_CUDA(cudaStreamSynchronize(s));
    const double dt = gt_now_s() - t0;
    meld_result_t r = meld_comm_check(comm);
    GT_CHECK(r == MELD_ERR_TIMEOUT || (nranks > 2 && r == MELD_ERR_ABORTED),
             "missing peer: meld_comm_check -> %s (%s), want MELD_ERR_TIMEOUT", meld_strerror(r), meld_last_error());
    GT_CHECK(dt < 10.0, "missing peer: the kernel took %.1f s (timeout 1 s)", dt);
    gt_log("missing peer: kernel returned after %.2f s; %s", dt, meld_last_error());
  }
  meld_bootstrap_barrier(comm->boot);
  cudaStreamDestroy(s);
  cudaFree(a), cudaFree(b), cudaFree(cm);
  GT_MELD(meld_comm_destroy(comm));
}

/* The last rank sleeps 2 s on the host before its call; the others call at once and their
 * kernels wait in the entry handshake. Every rank's C must equal meld_gemm on the gathered A
 * (bitwise) and a_gathered the concatenated shards. MELD_TIMEOUT_MS = 30000 for this test
 * only (set in this forked rank process). */
static void rank_delayed(int rank, int nranks) {
  setenv("MELD_TIMEOUT_MS", "30000", 1);
  meld_comm_t comm = comm_open((int64_t)64 << 20, 0);
  if (!comm) return;
  const int64_t m_loc = 1024, n = 1024, k = 2048, M = m_loc * nranks;
  uint16_t *a = NULL, *full = NULL, *b = NULL, *cm = NULL, *cr = NULL, *ag = NULL;
  unsigned long long *cnt = NULL;
  GT_CUDA(cudaMalloc(&a, (size_t)m_loc * k * 2));
  GT_CUDA(cudaMalloc(&full, (size_t)M * k * 2));
  GT_CUDA(cudaMalloc(&ag, (size_t)M * k * 2));
  GT_CUDA(cudaMalloc(&b, (size_t)n * k * 2));
  GT_CUDA(cudaMalloc(&cm, (size_t)M * n * 2));
  GT_CUDA(cudaMalloc(&cr, (size_t)M * n * 2));
  GT_CUDA(cudaMalloc(&cnt, 2 * sizeof *cnt));
  cudaStream_t s;
  GT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  fill(a, m_loc, k, k, shard_seed(777, rank), s);
  fill(b, n, k, k, 31 + rank, s);
  for (int q = 0; q < nranks; q++) fill(full + (size_t)q * m_loc * k, m_loc, k, k, shard_seed(777, q), s);
  GT_CUDA(cudaMemsetAsync(cm, 0xff, (size_t)M * n * 2, s));
  GT_CUDA(cudaMemsetAsync(ag, 0xff, (size_t)M * k * 2, s));
  GT_CUDA(cudaMemsetAsync(cnt, 0, 2 * sizeof *cnt, s));
  GT_CUDA(cudaStreamSynchronize(s));
  meld_bootstrap_barrier(comm->boot);
  const int delayed = rank == nranks - 1;
  if (delayed) usleep(2000000);
  meld_ag_gemm_args_t args;
  memset(&args, 0, sizeof args);
  args.a_shard = a, args.lda = k, args.b = b, args.ldb = k, args.b_layout = MELD_B_NK;
  args.c = cm, args.ldc = n, args.m_loc = m_loc, args.n_loc = n, args.k = k;
  args.a_gathered = ag, args.ld_gathered = k;
  const double t0 = gt_now_s();
  GT_MELD(meld_ag_gemm(comm, &args, s));
  GT_CUDA(cudaStreamSynchronize(s));
  const double dt = gt_now_s() - t0;
  GT_MELD(meld_comm_check(comm));
  GT_MELD(meld_ref_gemm(full, k, b, k, 0, cr, n, M, n, k, s));
  diff_kernel<<<264, 256, 0, s>>>(cm, n, cr, n, M, n, cnt);
  diff_kernel<<<264, 256, 0, s>>>(ag, k, full, k, M, k, cnt + 1);
  GT_CUDA(cudaStreamSynchronize(s));
  unsigned long long h[2];
  GT_CUDA(cudaMemcpy(h, cnt, sizeof h, cudaMemcpyDeviceToHost));
  GT_CHECK(h[0] == 0 && h[1] == 0, "delayed rank: %llu elements of C, %llu of a_gathered wrong", h[0], h[1]);
  if (!delayed) GT_CHECK(dt > 1.5, "delayed rank: this rank's call returned after %.2f s, before its peer called", dt);
  gt_log("delayed rank (%s): call took %.2f s, C and a_gathered exact", delayed ? "the sleeper" : "waiting", dt);
  meld_bootstrap_barrier(comm->boot);
  cudaStreamDestroy(s);
  cudaFree(a), cudaFree(full), cudaFree(ag), cudaFree(b), cudaFree(cm), cudaFree(cr), cudaFree(cnt);
  GT_MELD(meld_comm_destroy(comm));
}

static int run(const char *name, int nranks, gt_rank_fn fn) {
  printf("--- %s (%d ranks)\n", name, nranks);
  fflush(stdout);
  const double t0 = gt_now_s();
  int failed = gt_spawn(nranks, fn);
  GT_CHECK(failed == 0, "%s: %d rank(s) failed", name, failed);
  printf("--- %s: %.1f s\n", name, gt_now_s() - t0);
  return failed;
}

int main(void) {
  setenv("MELD_TIMEOUT_MS", "3000", 0);
  g_ndev = gt_device_count();
  printf("test_ag_gemm: %d GPU(s)\n", g_ndev);
  if (g_ndev < 1) {
    printf("skipped: no GPU\n");
    return gt_summary("test_ag_gemm");
  }
  const double t0 = gt_now_s();
  const int n = g_ndev > 8 ? 8 : g_ndev;
  run("ag_gemm vs references, back-to-back, graphs", n, rank_main);
  if (n > 1) {
    run("ag_gemm, 1 rank", 1, rank_main);
    run("ranks with different k", n, rank_mismatch);
    run("a rank that never calls", n, rank_missing_peer);
    run("one rank delayed by 2 s", n, rank_delayed);
  }
  printf("test_ag_gemm: %.1f s\n", gt_now_s() - t0);
  return gt_summary("test_ag_gemm");
}
