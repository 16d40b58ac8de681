/* bench_ring_attn.cu — meld_ring_attention with the ranks as threads of ONE process (as
 * bench_inproc: with fewer GPUs than ranks they share a GPU, each rank's kernels on its share of
 * the SMs, all in flight together; with a GPU per rank it is the one-process multi-GPU mode).
 * Rows: the BENCH.md ring-attention shapes (D 128, 32 query heads, 32 or 8 KV heads, batch 1,
 * the sequence per rank 4096 (--long: also 16384), causal and not), per row three variants timed
 * in the same pass:
 *   fused     the default path (the fused kernel: K/V pushed and consumed inside it),
 *   gathered  MELD_RING_ATTN=unfused (meld_all_gather of K and V, then the kernel),
 *   compute   meld_attention of this rank's queries over the whole sequence's K/V, already here
 *             (the same attention work with no communication: the bound of the contiguous split),
 *   zigzag    the fused path with the zigzag layout (zigzag = 1: every rank the same causal work).
 * Each variant: 3 warm-up calls, BENCH_SETTLE_MS of calls (sustained), then --samples samples of
 * --calls back-to-back calls, every rank starting a sample after a host barrier; per-call time =
 * sample / calls; the median sample of the slowest rank. Checked first: rank 0's O of the fused
 * and gathered calls against each other (relative error; both are checked against the fp32
 * reference by test_ring_attn). FLOPs count every rank's visible (query, key) pairs.
 * Rank 0 prints a table and appends JSON lines (--json; op "ring_attn", variant names above).
 * BENCH_RING_AB (a comma list of "VAR=VAL" or "VAR=VAL+VAR=VAL"): more fused variants, each with
 * its variables set (by rank 0, between barriers), timed in the same pass (variant "fused[...]");
 * an entry "compute:VAR=VAL..." is a compute variant with those variables ("compute[...]", e.g.
 * MELD_ATTN_PERSIST=1: persistent CTAs on a share of the SMs, as the fused kernel's).
 *
 * Ranks: --ranks P, default one per GPU where there are 2 or more (up to 8), else 2 sharing GPU 0.
 *
 *   bench_ring_attn [--ranks P] [--long] [--quick] [--calls N] [--samples N] [--json FILE] */
#include <math.h>
#include <pthread.h>
#include <stdint.h>

#include "../tests/gpu/attn_ref.h" /* (and gpu_test.h: bf2f) */
#include "bench_common.h"
#include "meld.h"

typedef struct {
  int S, HKV, causal; /* S: a rank's part */
} row_t;

static int P = 0, g_calls = 10, g_samples = 5, g_ndev = 1, g_nrows = 0;
static row_t g_rows[16];
static meld_unique_id g_id;
static pthread_barrier_t g_bar;
#define MAX_VAR 8
static float g_ms[8][MAX_VAR]; /* [rank][variant] of the current row */
static int g_nvar = 4;
static char g_var[MAX_VAR][128]; /* names: fused, gathered, compute, fused[AB]... */
static double g_rel;
static int g_settle; /* rank 0's settle count, for every rank (the calls must pair up) */
static const char *g_json;
static bench_env_t g_env;

/* Sets variant v's variables (rank 0 only, between barriers): gathered MELD_RING_ATTN=unfused,
 * an AB variant its list; clears them for the others. */
static void set_variant(int v) {
  static const char *const vars[] = {"MELD_RING_ATTN", "MELD_RING_ATTN_COMM_CTAS", "MELD_RING_ATTN_HEADS",
                                     "MELD_ATTN_PIPE", "MELD_ATTN_ORDER", "MELD_RING_ATTN_DIAG", "MELD_ATTN_PERSIST"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
  if (v == 1) setenv("MELD_RING_ATTN", "unfused", 1);
  if (v < 4) return;
  char buf[128];
  snprintf(buf, sizeof buf, "%s", strchr(g_var[v], '[') + 1); /* "fused[" / "compute[" ... "]" */
  buf[strlen(buf) - 1] = 0;
  for (char *save = NULL, *kv = strtok_r(buf, "+", &save); kv; kv = strtok_r(NULL, "+", &save)) {
    char *eq = strchr(kv, '=');
    if (eq) *eq = 0, setenv(kv, eq + 1, 1);
  }
}

/* Visible (query, key) pairs of all ranks: the causal square over the whole sequence. */
static double pairs(const row_t *r) {
  const double n = (double)r->S * P;
  return r->causal ? n * (n + 1) / 2 : n * n;
}

static void *rank_main(void *arg) {
  const int rank = (int)(intptr_t)arg;
  meld_config_t cfg;
  meld_comm_t comm;
  cudaStream_t st;
  if (gt_thread_comm(rank, P, g_ndev, g_id, 20000, &cfg, &comm, &st)) return NULL;
  int smax = 0;
  for (int i = 0; i < g_nrows; i++) smax = g_rows[i].S > smax ? g_rows[i].S : smax;
  const size_t full = (size_t)smax * P * 32 * 128, part = (size_t)smax * 32 * 128;
  uint16_t *q, *kf, *vf, *o, *o2;
  float *lse;
  GT_CUDA(cudaMalloc(&q, part * 2));
  GT_CUDA(cudaMalloc(&kf, full * 2));
  GT_CUDA(cudaMalloc(&vf, full * 2));
  GT_CUDA(cudaMalloc(&o, part * 2));
  GT_CUDA(cudaMalloc(&o2, part * 2));
  GT_CUDA(cudaMalloc(&lse, (size_t)smax * 32 * 4));
  cudaEvent_t e0, e1;
  GT_CUDA(cudaEventCreate(&e0));
  GT_CUDA(cudaEventCreate(&e1));
  const int settle_ms = bench_settle_ms();
  for (int ri = 0; ri < g_nrows; ri++) {
    const row_t *r = &g_rows[ri];
    const size_t nkp = (size_t)r->S * r->HKV * 128; /* a part's K elements */
    gt_fill_bf16<<<256, 256, 0, st>>>(q, (size_t)r->S * 32 * 128, 100 + rank);
    gt_fill_bf16<<<256, 256, 0, st>>>(kf, nkp * P, 200); /* the whole sequence, alike everywhere */
    gt_fill_bf16<<<256, 256, 0, st>>>(vf, nkp * P, 300);
    meld_attention_args_t a; /* the ring: this rank's part of K and V, in place in kf / vf */
    memset(&a, 0, sizeof a);
    a.q = q, a.k = kf + rank * nkp, a.v = vf + rank * nkp, a.o = o, a.lse = lse;
    a.batch = 1, a.seq_q = a.seq_kv = r->S, a.heads = 32, a.heads_kv = r->HKV, a.head_dim = 128, a.causal = r->causal;
    meld_attention_args_t c = a; /* compute: the whole K/V, this rank's query positions */
    c.k = kf, c.v = vf, c.seq_kv = (int64_t)r->S * P, c.q_pos0 = (int64_t)rank * r->S, c.o = o2;
    GT_CUDA(cudaStreamSynchronize(st));
    pthread_barrier_wait(&g_bar);
    /* check: fused and gathered agree (rank 0) */
    if (rank == 0) unsetenv("MELD_RING_ATTN"); /* (the environment: rank 0, between barriers) */
    pthread_barrier_wait(&g_bar);
    GT_MELD(meld_ring_attention(comm, &a, st));
    GT_CUDA(cudaMemcpyAsync(o2, o, (size_t)r->S * 32 * 128 * 2, cudaMemcpyDeviceToDevice, st));
    GT_CUDA(cudaStreamSynchronize(st));
    pthread_barrier_wait(&g_bar);
    if (rank == 0) setenv("MELD_RING_ATTN", "unfused", 1);
    pthread_barrier_wait(&g_bar);
    GT_MELD(meld_ring_attention(comm, &a, st));
    GT_CUDA(cudaStreamSynchronize(st));
    if (rank == 0) {
      const size_t n = (size_t)r->S * 32 * 128;
      uint16_t *h1 = (uint16_t *)malloc(n * 2), *h2 = (uint16_t *)malloc(n * 2);
      GT_CUDA(cudaMemcpy(h1, o, n * 2, cudaMemcpyDeviceToHost));
      GT_CUDA(cudaMemcpy(h2, o2, n * 2, cudaMemcpyDeviceToHost));
      double num = 0, den = 0;
      for (size_t i = 0; i < n; i++) {
        const double f1 = bf2f(h1[i]), f2 = bf2f(h2[i]);
        num += (f1 - f2) * (f1 - f2), den += f2 * f2;
      }
      g_rel = den > 0 ? sqrt(num / den) : (num > 0 ? 1 : 0);
      free(h1), free(h2);
    }
    for (int v = 0; v < g_nvar; v++) {
      pthread_barrier_wait(&g_bar);
      if (rank == 0) set_variant(v);
      pthread_barrier_wait(&g_bar);
      meld_attention_args_t az = a;
      az.zigzag = 1;
      const bool comp = v == 2 || !strncmp(g_var[v], "compute[", 8);
      const meld_attention_args_t *x = comp ? &c : v == 3 ? &az : &a;
      g_ms[rank][v] = bench_rank_time([&] { GT_MELD(comp ? meld_attention(x, st) : meld_ring_attention(comm, x, st)); },
                                      st, e0, e1, &g_bar, rank, &g_settle, g_calls, g_samples);
    }
    GT_MELD(meld_comm_check(comm));
    pthread_barrier_wait(&g_bar);
    if (rank == 0) {
      set_variant(0);
      float worst[MAX_VAR] = {0};
      for (int rr = 0; rr < P; rr++)
        for (int v = 0; v < g_nvar; v++) worst[v] = g_ms[rr][v] > worst[v] ? g_ms[rr][v] : worst[v];
      for (int v = 0; v < g_nvar; v++) {
        const double tf = 4.0 * 32 * pairs(r) * 128 / (worst[v] * 1e-3) / 1e12;
        char name[192];
        snprintf(name, sizeof name, "P%d S%d HKV%d causal%d %s", P, r->S, r->HKV, r->causal, g_var[v]);
        printf("%-40s %10.4f %10.1f %9.3f %10.2e\n", name, worst[v], tf, worst[v] / worst[2], v ? 0.0 : g_rel);
        if (g_json) {
          FILE *jf = fopen(g_json, "a");
          if (jf) {
            fprintf(jf,
                    "{\"op\": \"ring_attn\", \"shape\": {\"batch\": 1, \"seq\": %d, \"heads\": 32, \"heads_kv\": %d, "
                    "\"head_dim\": 128, \"causal\": %d}, \"variant\": \"%s\", \"nranks\": %d, \"nnodes\": 1, \"gpus\": %d, "
                    "\"dtype\": \"bf16\", \"meld_ms\": %.5f, \"compute_ms\": %.5f, \"tflops_all_ranks\": %.1f, "
                    "\"settle_ms\": %d, \"rel_err_fused_vs_gathered\": %.3e, \"gpu\": \"%s\", \"driver\": \"%s\", "
                    "\"cuda\": \"%s\", \"date\": \"%s\", \"commit\": \"%s\"}\n",
                    r->S, r->HKV, r->causal, g_var[v], P, g_ndev < P ? g_ndev : P, worst[v], worst[2], tf, settle_ms,
                    g_rel, g_env.gpu, g_env.driver, g_env.cuda, g_env.date, g_env.commit);
            fclose(jf);
          }
        }
      }
      fflush(stdout);
    }
  }
  GT_CUDA(cudaStreamSynchronize(st));
  cudaFree(q), cudaFree(kf), cudaFree(vf), cudaFree(o), cudaFree(o2), cudaFree(lse);
  cudaEventDestroy(e0), cudaEventDestroy(e1);
  GT_CUDA(cudaStreamDestroy(st));
  (void)meld_comm_destroy(comm);
  return NULL;
}

int main(int argc, char **argv) {
  gt_inproc_env();
  int lng = 0;
  if (bench_inproc_args(argc, argv, &P, &lng, &g_calls, &g_samples, &g_json)) return 2;
  if (!gt_hopper(&g_ndev)) {
    printf("bench_ring_attn: no Hopper GPU: skipped\n");
    return 0;
  }
  if (P == 0) P = g_ndev >= 2 ? (g_ndev < 8 ? g_ndev : 8) : 2;
  if (P < 2 || P > 8 || g_calls < 1 || g_samples < 1 || g_samples > 16) {
    fprintf(stderr, "bench_ring_attn: --ranks 2..8, --calls >= 1, --samples 1..16\n");
    return 2;
  }
  if (g_ndev < P) setenv("MELD_SHARE_GPU", "1", 1);
  snprintf(g_var[0], sizeof g_var[0], "fused");
  snprintf(g_var[1], sizeof g_var[1], "gathered");
  snprintf(g_var[2], sizeof g_var[2], "compute");
  snprintf(g_var[3], sizeof g_var[3], "zigzag");
  if (getenv("BENCH_RING_AB") && *getenv("BENCH_RING_AB")) {
    char ab[512];
    snprintf(ab, sizeof ab, "%s", getenv("BENCH_RING_AB"));
    for (char *save = NULL, *pv = strtok_r(ab, ",", &save); pv && g_nvar < MAX_VAR; pv = strtok_r(NULL, ",", &save))
      if (!strncmp(pv, "compute:", 8)) snprintf(g_var[g_nvar++], sizeof g_var[0], "compute[%.110s]", pv + 8);
      else snprintf(g_var[g_nvar++], sizeof g_var[0], "fused[%.110s]", pv);
  }
  const int seqs[2] = {4096, 16384};
  for (int si = 0; si < (lng ? 2 : 1); si++)
    for (int hk = 0; hk < 2; hk++)
      for (int c = 0; c < 2; c++) g_rows[g_nrows++] = (row_t){seqs[si], hk ? 8 : 32, c};
  bench_env(&g_env, 0);
  printf("bench_ring_attn: %d ranks as threads on %d GPU(s)\n", P, g_ndev < P ? g_ndev : P);
  printf("%-40s %10s %10s %9s %10s\n", "row variant", "ms", "TFLOP/s", "/compute", "rel(f,g)");
  if (meld_get_unique_id(&g_id) != MELD_OK) {
    printf("meld_get_unique_id: %s\n", meld_last_error());
    return 1;
  }
  pthread_barrier_init(&g_bar, NULL, (unsigned)P);
  pthread_t th[8];
  for (int r = 0; r < P; r++) pthread_create(&th[r], NULL, rank_main, (void *)(intptr_t)r);
  for (int r = 0; r < P; r++) pthread_join(th[r], NULL);
  return gt_summary("bench_ring_attn") ? 1 : 0;
}
