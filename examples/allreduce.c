/* allreduce.c — meld's quick start: a communicator from the launcher's variables, an all-reduce
 * checked against its exact value, the same call captured in a CUDA graph, replayed and checked,
 * and the time a call takes both ways (the timed calls keep summing in place).
 *
 *   make examples && examples/run.sh 2 build/examples/allreduce [elements]
 *
 * Each rank r contributes x[i] = r + 1 + (i % 7) in fp32; the sum over P ranks is exact:
 * P (P + 1) / 2 + P (i % 7). */
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime.h>
#include <meld.h>

#include "check.h"

/* Microseconds a call of fn over `iters` calls, after one warm-up. */
static float time_us(cudaStream_t st, int iters, void (*fn)(void *), void *arg) {
  cudaEvent_t e0, e1;
  float ms = 0;
  fn(arg);
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  CHECK_CUDA(cudaEventRecord(e0, st));
  for (int i = 0; i < iters; i++) fn(arg);
  CHECK_CUDA(cudaEventRecord(e1, st));
  CHECK_CUDA(cudaEventSynchronize(e1));
  CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
  cudaEventDestroy(e0), cudaEventDestroy(e1);
  return ms * 1000.0f / (float)iters;
}

typedef struct {
  meld_comm_t comm;
  float *buf;
  size_t n;
  cudaStream_t st;
  cudaGraphExec_t graph;
} job_t;
static void plain(void *p) {
  job_t *j = p;
  CHECK_MELD(meld_all_reduce(j->comm, j->buf, j->buf, j->n, MELD_FP32, j->st)); /* in place */
}
static void replay(void *p) {
  job_t *j = p;
  CHECK_CUDA(cudaGraphLaunch(j->graph, j->st));
}

int main(int argc, char **argv) {
  const char *lr = getenv("LOCAL_RANK");
  int ndev = 0;
  CHECK_CUDA(cudaGetDeviceCount(&ndev));
  CHECK_CUDA(cudaSetDevice(lr ? atoi(lr) % ndev : 0));
  job_t j = {0};
  CHECK_MELD(meld_comm_init_env(&j.comm, NULL)); /* torchrun / Open MPI / Slurm variables */
  meld_comm_info_t info;
  CHECK_MELD(meld_comm_info(j.comm, &info));
  const int P = info.nranks, r = info.rank;
  j.n = argc > 1 ? (size_t)atoll(argv[1]) : (size_t)1 << 20;
  CHECK_CUDA(cudaStreamCreateWithFlags(&j.st, cudaStreamNonBlocking));
  float *h = malloc(j.n * sizeof *h);
  for (size_t i = 0; i < j.n; i++) h[i] = (float)(r + 1 + (int)(i % 7));
  CHECK_CUDA(cudaMalloc((void **)&j.buf, j.n * sizeof *h));
  CHECK_CUDA(cudaMemcpy(j.buf, h, j.n * sizeof *h, cudaMemcpyHostToDevice));

  plain(&j);
  CHECK_CUDA(cudaMemcpyAsync(h, j.buf, j.n * sizeof *h, cudaMemcpyDeviceToHost, j.st));
  CHECK_CUDA(cudaStreamSynchronize(j.st));
  CHECK_MELD(meld_comm_check(j.comm)); /* errors found on the device (a peer's timeout, ...) */
  size_t bad = 0;
  for (size_t i = 0; i < j.n; i++) bad += h[i] != (float)(P * (P + 1) / 2 + P * (int)(i % 7));

  /* the same call in a CUDA graph (no host work per call; the values keep growing) */
  cudaGraph_t g;
  CHECK_CUDA(cudaStreamBeginCapture(j.st, cudaStreamCaptureModeThreadLocal));
  plain(&j);
  CHECK_CUDA(cudaStreamEndCapture(j.st, &g));
  CHECK_CUDA(cudaGraphInstantiate(&j.graph, g, 0));
  for (size_t i = 0; i < j.n; i++) h[i] = (float)(r + 1 + (int)(i % 7)); /* the graph, checked once */
  CHECK_CUDA(cudaMemcpy(j.buf, h, j.n * sizeof *h, cudaMemcpyHostToDevice));
  replay(&j);
  CHECK_CUDA(cudaMemcpyAsync(h, j.buf, j.n * sizeof *h, cudaMemcpyDeviceToHost, j.st));
  CHECK_CUDA(cudaStreamSynchronize(j.st));
  for (size_t i = 0; i < j.n; i++) bad += h[i] != (float)(P * (P + 1) / 2 + P * (int)(i % 7));
  const float us_plain = time_us(j.st, 50, plain, &j), us_graph = time_us(j.st, 50, replay, &j);
  CHECK_MELD(meld_comm_check(j.comm));
  printf("allreduce rank %d/%d (node %d/%d): %zu fp32 %s; %.1f us a call, %.1f us in a CUDA graph\n", r, P, info.node,
         info.nnodes, j.n, bad ? "WRONG" : "exact", us_plain, us_graph);
  cudaGraphExecDestroy(j.graph), cudaGraphDestroy(g);
  cudaFree(j.buf), free(h);
  cudaStreamDestroy(j.st);
  CHECK_MELD(meld_comm_destroy(j.comm));
  return bad ? 1 : 0;
}
