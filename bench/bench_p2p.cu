/* bench_p2p.cu — NVLink bandwidth between the GPUs present, through meld's communicator:
 * every rank pushes (or pulls) a buffer into (from) its right neighbour's symmetric workspace
 * with K CTAs of B threads and 16-byte accesses, all ranks at once; and the copy engine
 * (cudaMemcpyAsync to the peer address) for comparison. GB/s per direction, per CTA count,
 * for the block shapes a fused kernel would give its comm CTAs (384) and a plain one (1024).
 *
 * Usage: bench_p2p [--bytes N] [--json FILE]. Spawns one rank per GPU (2 at least). */
#include "../tests/gpu/gpu_test.h"
#include "bench_common.h"
#include "comm.h"

static size_t g_bytes = (size_t)256 << 20;
static const char *g_json = NULL;

__global__ void copy16_kernel(int4 *__restrict__ dst, const int4 *__restrict__ src, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  /* 4 independent 16-byte loads in flight per thread before the stores. */
  for (; i + 3 * stride < n; i += 4 * stride) {
    int4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
    dst[i] = a; dst[i + stride] = b; dst[i + 2 * stride] = c; dst[i + 3 * stride] = d;
  }
  for (; i < n; i += stride) dst[i] = src[i];
}

static void rank_main(int rank, int nranks) {
  meld_config_t cfg = MELD_CONFIG_INIT;
  cfg.workspace_bytes = g_bytes;
  meld_comm_t comm = NULL;
  GT_MELD(meld_comm_init_env(&comm, &cfg));
  if (!comm) return;
  bench_env_t env;
  bench_env(&env, comm->device);
  int peer = (rank + 1) % nranks;
  void *local = NULL;
  GT_CUDA(cudaMalloc(&local, g_bytes));
  GT_CUDA(cudaMemset(local, rank + 1, g_bytes));
  void *remote = comm->workspace.peer[peer];
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  FILE *jf = (rank == 0 && g_json) ? fopen(g_json, "a") : NULL;
  const int ctas[] = {1, 2, 4, 8, 16, 32, 64, comm->sm_count};
  const int threads[] = {384, 1024};
  if (rank == 0) printf("%-6s %-7s %5s %10s %10s\n", "mode", "threads", "ctas", "GB/s", "ms");
  for (int mode = 0; mode < 3; mode++) { /* 0 push, 1 pull, 2 copy engine */
    for (int ti = 0; ti < (mode == 2 ? 1 : 2); ti++) {
      for (int ci = 0; ci < (mode == 2 ? 1 : 8); ci++) {
        float ms[10];
        for (int it = 0; it < 13; it++) {
          meld_bootstrap_barrier(comm->boot);
          cudaEventRecord(e0, s);
          size_t n16 = g_bytes / 16;
          if (mode == 0) copy16_kernel<<<ctas[ci], threads[ti], 0, s>>>((int4 *)remote, (const int4 *)local, n16);
          else if (mode == 1) copy16_kernel<<<ctas[ci], threads[ti], 0, s>>>((int4 *)local, (const int4 *)remote, n16);
          else cudaMemcpyAsync(remote, local, g_bytes, cudaMemcpyDeviceToDevice, s);
          cudaEventRecord(e1, s);
          cudaEventSynchronize(e1);
          if (it >= 3) cudaEventElapsedTime(&ms[it - 3], e0, e1);
        }
        GT_CUDA(cudaGetLastError());
        float med = bench_median(ms, 10);
        double gbs = g_bytes / (med * 1e-3) / 1e9;
        const char *mname = mode == 0 ? "push" : mode == 1 ? "pull" : "ce";
        if (rank == 0) {
          printf("%-6s %-7d %5d %10.1f %10.3f\n", mname, mode == 2 ? 0 : threads[ti],
                 mode == 2 ? 0 : ctas[ci], gbs, med);
          if (jf)
            fprintf(jf,
                    "{\"op\":\"p2p_copy\",\"shape\":{\"bytes\":%zu,\"ctas\":%d,\"threads\":%d,"
                    "\"mode\":\"%s\"},\"nranks\":%d,\"nnodes\":1,\"dtype\":\"bytes\",\"meld_ms\":%.4f,"
                    "\"gbps_each_way\":%.1f,\"gpu\":\"%s\",\"driver\":\"%s\",\"cuda\":\"%s\","
                    "\"date\":\"%s\",\"commit\":\"%s\"}\n",
                    g_bytes, mode == 2 ? 0 : ctas[ci], mode == 2 ? 0 : threads[ti], mname, nranks,
                    med, gbs, env.gpu, env.driver, env.cuda, env.date, env.commit);
        }
      }
    }
  }
  if (jf) fclose(jf);
  fflush(stdout);
  meld_bootstrap_barrier(comm->boot);
  cudaFree(local);
  GT_MELD(meld_comm_destroy(comm));
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--bytes") && i + 1 < argc) g_bytes = strtoull(argv[++i], NULL, 0);
    else if (!strcmp(argv[i], "--json") && i + 1 < argc) g_json = argv[++i];
    else { fprintf(stderr, "usage: %s [--bytes N] [--json FILE]\n", argv[0]); return 2; }
  }
  g_bytes &= ~(size_t)15;
  int ndev = gt_device_count();
  if (ndev < 2) {
    printf("bench_p2p: %d GPU(s); needs 2 or more: nothing to measure\n", ndev);
    return 0;
  }
  printf("bench_p2p: %d GPUs, %zu MiB per rank, all ranks copying at once\n", ndev, g_bytes >> 20);
  int failed = gt_spawn(ndev > 8 ? 8 : ndev, rank_main);
  return failed ? 1 : 0;
}
