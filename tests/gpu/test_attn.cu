/* test_attn.cu — meld_attention (flash-attention forward, one GPU) against a reference.
 *
 * The reference is a plain fp32 kernel (one warp per query row: dot products, exact softmax
 * with the row's max, the weighted sum of V), itself checked against a double-precision CPU
 * computation of a few rows. Inputs are random bf16 (never zero), outputs poisoned (NaN) first;
 * O is compared by relative error per (batch, head) and overall, LSE by absolute error, rows with
 * no visible key must be exactly 0 / -inf, and padding between strided tokens must keep its
 * poison. Cases: dense and causal, tails of both sequences, grouped-query heads, positions
 * (ring-step masks, incl. rows that see nothing), packed QKV strides, an explicit scale, back-to-
 * back calls with changing inputs, a CUDA-graph replay, and every refused argument. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_ref.h"
#include "gpu_test.h"
#include "meld.h"

/* The GPU reference against double precision on the CPU for a few rows of a small case. */
static void check_reference(void) {
  const attn_case_t c = {"ref", 1, 70, 150, 2, 1, 1, 30, 0, 0.f, 0, 0, 0};
  attn_bufs_t x;
  if (setup(&c, &x, 777)) return;
  reference(&c, &x);
  const size_t nq = 70 * 2 * 128, nkv = 150 * 128;
  uint16_t *q = (uint16_t *)malloc(nq * 2), *k = (uint16_t *)malloc(nkv * 2), *v = (uint16_t *)malloc(nkv * 2);
  float *oref = (float *)malloc(nq * 4), *lref = (float *)malloc(2 * 70 * 4);
  GT_CUDA(cudaMemcpy(q, x.q, nq * 2, cudaMemcpyDeviceToHost));
  GT_CUDA(cudaMemcpy(k, x.k, nkv * 2, cudaMemcpyDeviceToHost));
  GT_CUDA(cudaMemcpy(v, x.v, nkv * 2, cudaMemcpyDeviceToHost));
  GT_CUDA(cudaMemcpy(oref, x.oref, nq * 4, cudaMemcpyDeviceToHost));
  GT_CUDA(cudaMemcpy(lref, x.lref, 2 * 70 * 4, cudaMemcpyDeviceToHost));
  double err = 0, lerr = 0;
  const double scale = 1.0 / sqrt(128.0);
  const int rows[] = {0, 1, 37, 69};
  for (int h = 0; h < 2; h++)
    for (int ri = 0; ri < 4; ri++) {
      const int i = rows[ri];
      double s[150], mx = -INFINITY, sum = 0;
      for (int j = 0; j < 150; j++) {
        s[j] = -INFINITY;
        if (j > 30 + i) continue; /* causal, q_pos0 30 */
        double d = 0;
        for (int e = 0; e < 128; e++) d += (double)bf2f(q[(i * 2 + h) * 128 + e]) * bf2f(k[j * 128 + e]);
        s[j] = d * scale;
        mx = fmax(mx, s[j]);
      }
      for (int j = 0; j < 150; j++) sum += isinf(s[j]) ? 0 : exp(s[j] - mx);
      for (int e = 0; e < 128; e++) {
        double acc = 0;
        for (int j = 0; j < 150; j++) acc += isinf(s[j]) ? 0 : exp(s[j] - mx) / sum * bf2f(v[j * 128 + e]);
        err = fmax(err, fabs(acc - oref[(i * 2 + h) * 128 + e]));
      }
      lerr = fmax(lerr, fabs(mx + log(sum) - lref[h * 70 + i]));
    }
  GT_CHECK(err < 1e-4 && lerr < 1e-4, "GPU reference vs CPU double: O err %.3g, LSE err %.3g", err, lerr);
  free(q), free(k), free(v), free(oref), free(lref);
  teardown(&x);
}

static void run_case(const attn_case_t *c) {
  attn_bufs_t x;
  if (setup(c, &x, 1000 + (uint64_t)c->Sq * 7 + c->H)) return;
  poison(&x, c);
  GT_MELD(meld_attention(&x.a, 0));
  reference(c, &x);
  GT_CUDA(cudaDeviceSynchronize());
  compare(c, &x, "first call");
  teardown(&x);
}

/* Back-to-back calls with new inputs each time (no host sync between calls), then a graph. */
static void back_to_back_and_graph(void) {
  const attn_case_t c = {"b2b", 2, 640, 640, 4, 2, 1, 0, 0, 0.f, 0, 0, 0};
  attn_bufs_t x;
  if (setup(&c, &x, 5)) return;
  cudaStream_t st;
  GT_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  const size_t nq = (size_t)2 * 640 * 4 * 128, nkv = (size_t)2 * 640 * 2 * 128;
  for (int r = 0; r < 20; r++) {
    gt_fill_bf16<<<256, 256, 0, st>>>(x.q, nq, 100 + r);
    gt_fill_bf16<<<256, 256, 0, st>>>(x.k, nkv, 200 + r);
    gt_fill_bf16<<<256, 256, 0, st>>>(x.v, nkv, 300 + r);
    GT_MELD(meld_attention(&x.a, st));
  }
  GT_CUDA(cudaStreamSynchronize(st));
  reference(&c, &x); /* the last inputs */
  GT_CUDA(cudaDeviceSynchronize());
  compare(&c, &x, "after 20 back-to-back calls");
  cudaGraph_t g;
  cudaGraphExec_t ge;
  poison(&x, &c);
  GT_CUDA(cudaDeviceSynchronize());
  GT_CUDA(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  GT_MELD(meld_attention(&x.a, st));
  GT_CUDA(cudaStreamEndCapture(st, &g));
  GT_CUDA(cudaGraphInstantiate(&ge, g, 0));
  fill(x.q, nq, 999), fill(x.k, nkv, 998), fill(x.v, nkv, 997);
  GT_CUDA(cudaDeviceSynchronize());
  GT_CUDA(cudaGraphLaunch(ge, st));
  GT_CUDA(cudaStreamSynchronize(st));
  reference(&c, &x);
  GT_CUDA(cudaDeviceSynchronize());
  compare(&c, &x, "graph replay");
  cudaGraphExecDestroy(ge), cudaGraphDestroy(g), cudaStreamDestroy(st);
  teardown(&x);
}

static void expect_fail(const meld_attention_args_t *a, meld_result_t want, const char *needle) {
  meld_result_t r = meld_attention(a, 0);
  GT_CHECK(r == want && strstr(meld_last_error(), needle), "expected %s with \"%s\", got %s: \"%s\"",
           meld_strerror(want), needle, meld_strerror(r), meld_last_error());
}

static void bad_args(void) {
  attn_case_t c = {"bad", 1, 128, 128, 4, 2, 0, 0, 0, 0.f, 0, 0, 0};
  attn_bufs_t x;
  if (setup(&c, &x, 9)) return;
  meld_attention_args_t a = x.a;
  expect_fail(NULL, MELD_ERR_INVALID_ARG, "args is NULL");
  a.head_dim = 96;
  expect_fail(&a, MELD_ERR_UNSUPPORTED, "head_dim 96");
  a = x.a, a.heads = 3;
  expect_fail(&a, MELD_ERR_INVALID_ARG, "not a multiple of heads_kv");
  a = x.a, a.k = NULL;
  expect_fail(&a, MELD_ERR_INVALID_ARG, "k is NULL");
  a = x.a, a.o = (char *)x.o + 2;
  expect_fail(&a, MELD_ERR_INVALID_ARG, "not 16-byte aligned");
  a = x.a, a.stride_q = 4 * 128 + 4;
  expect_fail(&a, MELD_ERR_INVALID_ARG, "stride_q 516 is not a multiple of 8");
  a = x.a, a.causal = 2;
  expect_fail(&a, MELD_ERR_INVALID_ARG, "causal 2");
  a = x.a, a.scale = -1.f;
  expect_fail(&a, MELD_ERR_INVALID_ARG, "scale");
  a = x.a, a.seq_q = 0; /* nothing to do */
  GT_MELD(meld_attention(&a, 0));
  teardown(&x);
}

int main(void) {
  gt_rank = 0;
  cudaDeviceProp prop;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess || prop.major != 9) {
    printf("test_attn: no Hopper GPU: skipped\n[  PASSED  ] 0 test(s).\n");
    return 0;
  }
  gt_log("%s", prop.name);
  check_reference();
  const attn_case_t cases[] = {
      /* name, B, Sq, Skv, H, Hkv, causal, q_pos0, kv_pos0, scale, packed, pad_o[, head_dim] */
      {"one tile", 1, 128, 128, 1, 1, 0, 0, 0, 0.f, 0, 0, 0},
      {"one tile causal", 1, 128, 128, 1, 1, 1, 0, 0, 0.f, 0, 0, 0},
      {"dense", 2, 1024, 1024, 8, 8, 0, 0, 0, 0.f, 0, 0, 0},
      {"causal", 2, 1024, 1024, 8, 8, 1, 0, 0, 0.f, 0, 0, 0},
      {"gqa tails causal", 1, 1000, 1000, 16, 2, 1, 0, 0, 0.f, 0, 0, 0},
      {"tails", 3, 300, 777, 4, 1, 0, 0, 0, 0.f, 0, 0, 0},
      {"short kv", 1, 513, 5, 2, 2, 0, 0, 0, 0.f, 0, 0, 0},
      {"ring step, earlier kv", 1, 256, 768, 4, 4, 1, 512, 0, 0.f, 0, 0, 0},
      {"ring step, rows see nothing", 1, 384, 384, 4, 2, 1, 0, 200, 0.f, 0, 0, 0},
      {"ring step, later kv", 1, 256, 256, 2, 2, 1, 0, 256, 0.f, 0, 0, 0},
      {"packed qkv, padded o", 2, 700, 700, 4, 4, 1, 0, 0, 0.f, 1, 64, 0},
      {"scale 0.05", 1, 512, 640, 4, 4, 0, 0, 0, 0.05f, 0, 0, 0},
      {"long causal", 1, 4096, 4096, 8, 2, 1, 0, 0, 0.f, 0, 0, 0},
      /* head_dim 64 */
      {"d64 one tile", 1, 128, 128, 1, 1, 0, 0, 0, 0.f, 0, 0, 64},
      {"d64 dense", 2, 1024, 1024, 8, 8, 0, 0, 0, 0.f, 0, 0, 64},
      {"d64 gqa tails causal", 1, 1000, 1000, 16, 2, 1, 0, 0, 0.f, 0, 0, 64},
      {"d64 tails", 3, 300, 777, 4, 1, 0, 0, 0, 0.f, 0, 0, 64},
      {"d64 ring step, rows see nothing", 1, 384, 384, 4, 2, 1, 0, 200, 0.f, 0, 0, 64},
      {"d64 packed qkv, padded o", 2, 700, 700, 4, 4, 1, 0, 0, 0.f, 1, 64, 64},
      {"d64 scale 0.05", 1, 512, 640, 4, 4, 0, 0, 0, 0.05f, 0, 0, 64},
      {"d64 long causal", 1, 4096, 4096, 8, 2, 1, 0, 0, 0.f, 0, 0, 64},
  };
  /* every kernel: MELD_ATTN_PIPE 2 (the default: softmax overlapped with the previous block's
   * PV, warpgroups' ping-pong), 1 (without the ping-pong), 0 (in series) */
  const char *pipes[3] = {"2", "1", "0"};
  for (int v = 0; v < 3; v++) {
    setenv("MELD_ATTN_PIPE", pipes[v], 1);
    gt_log("MELD_ATTN_PIPE=%s", pipes[v]);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
    back_to_back_and_graph();
  }
  unsetenv("MELD_ATTN_PIPE");
  /* the other work orders (the default takes as many heads together as fit K/V in L2: all of
   * them at these sizes) */
  const char *orders[2] = {"tiles", "heads"};
  for (int v = 0; v < 2; v++) {
    setenv("MELD_ATTN_ORDER", orders[v], 1);
    gt_log("MELD_ATTN_ORDER=%s", orders[v]);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
      if (cases[i].H > 2 && cases[i].Sq > 128) run_case(&cases[i]);
  }
  unsetenv("MELD_ATTN_ORDER");
  /* persistent CTAs (opt-in): every case, each pipeline, back-to-back calls and a graph */
  setenv("MELD_ATTN_PERSIST", "1", 1);
  for (int v = 0; v < 3; v++) {
    setenv("MELD_ATTN_PIPE", pipes[v], 1);
    gt_log("MELD_ATTN_PERSIST=1 MELD_ATTN_PIPE=%s", pipes[v]);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
    back_to_back_and_graph();
  }
  unsetenv("MELD_ATTN_PIPE");
  unsetenv("MELD_ATTN_PERSIST");
  bad_args();
  return gt_summary("test_attn");
}
