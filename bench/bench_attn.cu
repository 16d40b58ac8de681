/* bench_attn.cu — meld_attention (flash-attention forward, one GPU) on the ring-attention suite
 * shapes of BENCH.md as one rank sees them (D 128, 32 query heads, 32 or 8 KV heads, batch 1,
 * sequence 4096 and 16384, causal and not), plus any --shape B,S,H,HKV,CAUSAL. Per row: 5 warm-up
 * calls, BENCH_SETTLE_MS of back-to-back calls (sustained timing; 0 = burst), then >= 20 timed
 * calls (CUDA events, 2 rotating input sets), the median; error vs the fp32 reference kernel of
 * tests/gpu/attn_ref.h for rows with S <= 4096 (--check-all: every row). FLOPs count the
 * visible (query, key) pairs: 4 x pairs x D (causal: about half of the square). Prints a table
 * and writes JSON lines (--json FILE; op "attn"). BENCH_ATTN_AB (a comma list of variants, each
 * "VAR=VAL" or "VAR=VAL+VAR=VAL", set in the environment for its row; default: none, the
 * library's defaults) times each variant per shape in the same pass ("variant" in the JSON).
 *
 *   bench_attn [--json FILE] [--quick] [--shape B,S,H,HKV,CAUSAL[,D] ...] [--custom-only] [--check-all] */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tests/gpu/gpu_test.h"
#include "bench_common.h"
#include "meld.h"

/* The reference kernel (fp32; one warp per query row), cases and comparison. */
#include "../tests/gpu/attn_ref.h"

typedef struct {
  int B, S, H, HKV, causal, D;
} shape_t;

static double visible_pairs(int S, int causal) { return causal ? (double)S * (S + 1) / 2 : (double)S * S; }

int main(int argc, char **argv) {
  const char *json = NULL;
  int quick = 0, custom_only = 0, check_all = 0, ns = 0;
  shape_t shapes[64];
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
    else if (!strcmp(argv[i], "--quick")) quick = 1;
    else if (!strcmp(argv[i], "--custom-only")) custom_only = 1;
    else if (!strcmp(argv[i], "--check-all")) check_all = 1;
    else if (!strcmp(argv[i], "--shape") && i + 1 < argc && ns < 32) {
      shape_t s;
      s.D = 128;
      const int got = sscanf(argv[++i], "%d,%d,%d,%d,%d,%d", &s.B, &s.S, &s.H, &s.HKV, &s.causal, &s.D);
      if (got != 5 && got != 6) {
        fprintf(stderr, "bad --shape %s (B,S,H,HKV,CAUSAL[,D])\n", argv[i]);
        return 2;
      }
      shapes[ns++] = s;
    } else {
      fprintf(stderr, "usage: %s [--json FILE] [--quick] [--shape B,S,H,HKV,CAUSAL[,D]] [--custom-only] [--check-all]\n",
              argv[0]);
      return 2;
    }
  }
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess || prop.major != 9) {
    printf("bench_attn: no Hopper GPU: skipped\n");
    return 0;
  }
  if (!custom_only) {
    const int seqs[2] = {4096, 16384};
    for (int si = 0; si < (quick ? 1 : 2); si++)
      for (int hk = 0; hk < 2; hk++)
        for (int c = 0; c < 2; c++) shapes[ns++] = (shape_t){1, seqs[si], 32, hk ? 8 : 32, c, 128};
  }
  bench_env_t env;
  bench_env(&env, 0);
  FILE *jf = json ? fopen(json, "a") : NULL;
  const int settle_ms = bench_settle_ms();
  printf("%-44s %10s %10s %10s\n", "shape (B,S,H,HKV,causal) variant", "ms", "TFLOP/s", "rel_err");
  for (int si = 0; si < ns; si++) {
    const shape_t sh = shapes[si];
    bench_shape_pause();
    attn_case_t c = {"bench", sh.B, sh.S, sh.S, sh.H, sh.HKV, sh.causal, 0, 0, 0.f, 0, 0, sh.D};
    attn_bufs_t x[2];
    if (setup(&c, &x[0], 11) || setup(&c, &x[1], 23)) return 1;
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    char vars[256];
    snprintf(vars, sizeof vars, "%s", getenv("BENCH_ATTN_AB") && *getenv("BENCH_ATTN_AB") ? getenv("BENCH_ATTN_AB") : "default");
    for (char *save = NULL, *pv = strtok_r(vars, ",", &save); pv; pv = strtok_r(NULL, ",", &save)) {
      char setv[128];
      snprintf(setv, sizeof setv, "%s", pv);
      for (char *s2 = NULL, *kv = strtok_r(setv, "+", &s2); kv; kv = strtok_r(NULL, "+", &s2)) {
        char *eq = strchr(kv, '=');
        if (eq) *eq = 0, setenv(kv, eq + 1, 1);
      }
      for (int i = 0; i < 5; i++) GT_MELD(meld_attention(&x[i & 1].a, st)); /* warm-up */
      cudaEvent_t e0, e1;
      CK(cudaEventCreate(&e0));
      CK(cudaEventCreate(&e1));
      CK(cudaEventRecord(e0, st));
      for (int i = 0; i < 4; i++) GT_MELD(meld_attention(&x[i & 1].a, st));
      CK(cudaEventRecord(e1, st));
      CK(cudaEventSynchronize(e1));
      float est = 0;
      CK(cudaEventElapsedTime(&est, e0, e1));
      const int settle = bench_settle_calls(est / 4, settle_ms) + bench_leadin_calls(est / 4);
      for (int i = 0; i < settle; i++) GT_MELD(meld_attention(&x[i & 1].a, st));
      enum { TIMED = 30 };
      float t[TIMED];
      for (int i = 0; i < TIMED; i++) {
        CK(cudaEventRecord(e0, st));
        GT_MELD(meld_attention(&x[i & 1].a, st));
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&t[i], e0, e1));
      }
      const float ms = bench_median(t, TIMED);
      const double tflops = 4.0 * sh.B * sh.H * visible_pairs(sh.S, sh.causal) * sh.D / (ms * 1e-3) / 1e12;
      double rel = -1;
      if (check_all || sh.S <= 4096) {
        CK(cudaStreamSynchronize(st));
        poison(&x[0], &c);
        CK(cudaDeviceSynchronize()); /* the poison (legacy stream) before the call on st */
        GT_MELD(meld_attention(&x[0].a, st));
        CK(cudaStreamSynchronize(st));
        reference(&c, &x[0]);
        CK(cudaDeviceSynchronize());
        rel = compare(&c, &x[0], "bench row");
      }
      char name[320];
      snprintf(name, sizeof name, "%d,%d,%d,%d,%d%s %s", sh.B, sh.S, sh.H, sh.HKV, sh.causal, sh.D == 64 ? ",64" : "", pv);
      printf("%-44s %10.4f %10.1f %10.2e\n", name, ms, tflops, rel);
      if (jf) {
        char relj[32];
        if (rel < 0) snprintf(relj, sizeof relj, "null");
        else snprintf(relj, sizeof relj, "%.3e", rel);
        fprintf(jf,
                "{\"op\": \"attn\", \"shape\": {\"batch\": %d, \"seq\": %d, \"heads\": %d, \"heads_kv\": %d, \"head_dim\": "
                "%d, \"causal\": %d}, \"variant\": \"%s\", \"nranks\": 1, \"nnodes\": 1, \"dtype\": \"bf16\", \"meld_ms\": %.5f, \"tflops\": "
                "%.1f, \"settle_ms\": %d, \"rel_err\": %s, \"gpu\": \"%s\", \"driver\": \"%s\", \"cuda\": \"%s\", "
                "\"date\": \"%s\", \"commit\": \"%s\"}\n",
                sh.B, sh.S, sh.H, sh.HKV, sh.D, sh.causal, pv, ms, tflops, settle_ms, relj, env.gpu,
                env.driver, env.cuda, env.date, env.commit);
        fflush(jf);
      }
      cudaEventDestroy(e0), cudaEventDestroy(e1);
      unsetenv("MELD_ATTN_PIPE");
      unsetenv("MELD_ATTN_ORDER");
      unsetenv("MELD_ATTN_PERSIST");
    }
    cudaStreamDestroy(st);
    teardown(&x[0]), teardown(&x[1]);
  }
  if (jf) fclose(jf);
  return gt_summary("bench_attn") ? 1 : 0;
}
