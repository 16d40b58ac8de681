/* tp_mlp.c — a tensor-parallel MLP block in C with meld's fused ops, checked against the same
 * block computed whole on each GPU with meld_gemm, then timed.
 *
 *   make examples && examples/run.sh 2 build/examples/tp_mlp [tokens hidden ffn]
 *
 * Sequence-parallel layout (Megatron style), nn.Linear weight layouts: rank r of P holds x_r
 * [T/P, H] (its tokens), W1_r [F/P, H] (column-parallel) and W2_r [H, F/P] (row-parallel):
 *   h_r = AllGather(x) W1_r^T                  meld_ag_gemm: ONE kernel         [T, F/P]
 *   y_r = rows r of  sum_q h_q W2_q^T          meld_gemm_rs: ONE kernel         [T/P, H]
 * (a real block applies its activation to h_r in between; left out so the check is direct). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>
#include <meld.h>

#include "check.h"

static uint16_t to_bf16(float f) { /* round to nearest even */
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
static float from_bf16(uint16_t h) {
  const uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* Element (i, j) of a named tensor: the same on every rank, so each can build the whole block. */
static uint16_t value(uint32_t tensor, int64_t i, int64_t j, float scale) {
  uint64_t s = ((uint64_t)tensor << 48) ^ ((uint64_t)i << 24) ^ (uint64_t)j;
  s = (s ^ (s >> 31)) * 0x9E3779B97F4A7C15ull;
  s ^= s >> 29;
  return to_bf16(scale * ((float)(s >> 40) / (float)(1u << 24) * 2.0f - 1.0f));
}

/* rows x cols of `tensor` from (row0, col0), into device memory (a new buffer). */
static void *upload(uint32_t tensor, int64_t row0, int64_t rows, int64_t col0, int64_t cols, float scale) {
  uint16_t *h = malloc((size_t)rows * cols * 2);
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) h[i * cols + j] = value(tensor, row0 + i, col0 + j, scale);
  void *d = NULL;
  CHECK_CUDA(cudaMalloc(&d, (size_t)rows * cols * 2));
  CHECK_CUDA(cudaMemcpy(d, h, (size_t)rows * cols * 2, cudaMemcpyHostToDevice));
  free(h);
  return d;
}

static void gemm(const void *a, const void *b, void *c, int64_t m, int64_t n, int64_t k, cudaStream_t st) {
  meld_gemm_args_t g = {a, k, b, k, MELD_B_NK, c, n, m, n, k, 0};
  CHECK_MELD(meld_gemm(&g, st));
}

int main(int argc, char **argv) {
  const char *lr = getenv("LOCAL_RANK");
  int ndev = 0;
  CHECK_CUDA(cudaGetDeviceCount(&ndev));
  CHECK_CUDA(cudaSetDevice(lr ? atoi(lr) % ndev : 0));
  meld_comm_t comm;
  CHECK_MELD(meld_comm_init_env(&comm, NULL)); /* torchrun / Open MPI / Slurm variables */
  meld_comm_info_t info;
  CHECK_MELD(meld_comm_info(comm, &info));
  const int P = info.nranks, r = info.rank;
  const int64_t T = argc > 1 ? atoll(argv[1]) : 1024 * P, H = argc > 2 ? atoll(argv[2]) : 2048,
                F = argc > 3 ? atoll(argv[3]) : 4096;
  if (T % P || F % P || H % 8 || (F / P) % 8) {
    if (r == 0) fprintf(stderr, "tp_mlp: tokens and ffn must be multiples of %d ranks, hidden and ffn / ranks of 8\n", P);
    meld_comm_destroy(comm);
    return 2;
  }
  const int64_t Tl = T / P, Fl = F / P;
  cudaStream_t st;
  CHECK_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));

  /* this rank's parts, and the whole block for the reference */
  void *x = upload(1, r * Tl, Tl, 0, H, 1.0f), *w1 = upload(2, r * Fl, Fl, 0, H, 0.03f);
  void *w2 = upload(3, 0, H, r * Fl, Fl, 0.03f);
  void *x_all = upload(1, 0, T, 0, H, 1.0f), *w1_all = upload(2, 0, F, 0, H, 0.03f), *w2_all = upload(3, 0, H, 0, F, 0.03f);
  void *h = NULL, *y = NULL, *h_ref = NULL, *y_ref = NULL;
  CHECK_CUDA(cudaMalloc(&h, (size_t)T * Fl * 2));
  CHECK_CUDA(cudaMalloc(&y, (size_t)Tl * H * 2));
  CHECK_CUDA(cudaMalloc(&h_ref, (size_t)T * F * 2));
  CHECK_CUDA(cudaMalloc(&y_ref, (size_t)T * H * 2));

  meld_ag_gemm_args_t ag;
  memset(&ag, 0, sizeof ag);
  ag.a_shard = x, ag.lda = H, ag.b = w1, ag.ldb = H, ag.b_layout = MELD_B_NK, ag.c = h, ag.ldc = Fl;
  ag.m_loc = Tl, ag.n_loc = Fl, ag.k = H;
  meld_gemm_rs_args_t rs;
  memset(&rs, 0, sizeof rs);
  rs.a = h, rs.lda = Fl, rs.b = w2, rs.ldb = Fl, rs.b_layout = MELD_B_NK, rs.c = y, rs.ldc = H;
  rs.m = T, rs.n = H, rs.k = Fl;
  CHECK_MELD(meld_ag_gemm(comm, &ag, st));
  CHECK_MELD(meld_gemm_rs(comm, &rs, st));
  gemm(x_all, w1_all, h_ref, T, F, H, st); /* the whole block on this GPU */
  gemm(h_ref, w2_all, y_ref, T, H, F, st);
  CHECK_CUDA(cudaStreamSynchronize(st));
  CHECK_MELD(meld_comm_check(comm)); /* errors found on the device (a peer's timeout, ...) */

  int64_t first = 0, rows = 0;
  CHECK_MELD(meld_gemm_rs_rows(T, P, r, &first, &rows));
  uint16_t *got = malloc((size_t)rows * H * 2), *want = malloc((size_t)rows * H * 2);
  CHECK_CUDA(cudaMemcpy(got, y, (size_t)rows * H * 2, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(want, (uint16_t *)y_ref + first * H, (size_t)rows * H * 2, cudaMemcpyDeviceToHost));
  double num = 0, den = 0;
  for (int64_t i = 0; i < rows * H; i++) {
    const double d = (double)from_bf16(got[i]) - from_bf16(want[i]);
    num += d * d, den += (double)from_bf16(want[i]) * from_bf16(want[i]);
  }
  const double err = den > 0 ? sqrt(num / den) : INFINITY;

  /* timing: the block, back to back (no host synchronization between calls) */
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  const int iters = 20;
  CHECK_CUDA(cudaEventRecord(e0, st));
  for (int i = 0; i < iters; i++) {
    CHECK_MELD(meld_ag_gemm(comm, &ag, st));
    CHECK_MELD(meld_gemm_rs(comm, &rs, st));
  }
  CHECK_CUDA(cudaEventRecord(e1, st));
  CHECK_CUDA(cudaEventSynchronize(e1));
  CHECK_MELD(meld_comm_check(comm));
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
  ms /= iters;
  const double tflops = 2.0 * 2.0 * (double)T * H * Fl / (ms * 1e-3) / 1e12; /* this rank's share */
  printf("tp_mlp rank %d/%d: T %lld H %lld F %lld: rel. error %.2e vs the whole block, %.3f ms a block "
         "(%.0f TFLOP/s a GPU)%s\n",
         r, P, (long long)T, (long long)H, (long long)F, err, ms, tflops, err < 1e-2 ? "" : "  FAILED");
  free(got), free(want);
  cudaFree(x), cudaFree(w1), cudaFree(w2), cudaFree(x_all), cudaFree(w1_all), cudaFree(w2_all);
  cudaFree(h), cudaFree(y), cudaFree(h_ref), cudaFree(y_ref);
  cudaEventDestroy(e0), cudaEventDestroy(e1);
  cudaStreamDestroy(st);
  CHECK_MELD(meld_comm_destroy(comm));
  return err < 1e-2 ? 0 : 1;
}
