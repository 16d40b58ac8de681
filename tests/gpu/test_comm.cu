/* GPU tests of the foundation: init from torchrun-style variables, info, symmetric workspace
 * and meld_mem_alloc buffers read and written across NVLink, ordinary memory registered
 * (meld_mem_register), emulated nodes (MELD_NODE_ID),
 * a failed init leaves nothing allocated, and 100 init/destroy cycles leak nothing. */
#include "gpu_test.h"

#include "comm.h"

static int g_ndev = 0;

__global__ void fill_kernel(uint32_t *p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = (uint32_t)(i * 2654435761u) ^ seed;
}

/* Counts words of p that differ from the fill pattern of `seed`. */
__global__ void check_kernel(const uint32_t *p, size_t n, uint32_t seed, unsigned long long *bad) {
  unsigned long long local = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    local += p[i] != ((uint32_t)(i * 2654435761u) ^ seed);
  if (local) atomicAdd(bad, local);
}

static unsigned long long count_bad(const void *p, size_t bytes, uint32_t seed) {
  unsigned long long *d = NULL, h = ~0ull;
  cudaMalloc(&d, sizeof *d);
  cudaMemset(d, 0, sizeof *d);
  check_kernel<<<264, 256>>>((const uint32_t *)p, bytes / 4, seed, d);
  cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost);
  cudaFree(d);
  return h;
}

static meld_config_t test_config(void) {
  meld_config_t cfg = MELD_CONFIG_INIT;
  cfg.bootstrap_timeout_ms = 20000;
  cfg.timeout_ms = 3000;
  cfg.workspace_bytes = (size_t)32 << 20;
  return cfg;
}

/* Two ranks: each fills its workspace and a symmetric buffer; each reads the peer's
 * workspace (pull) and writes into the peer's buffer (push); everything is verified. */
static void rank_exchange(int rank, int nranks) {
  meld_config_t cfg = test_config();
  meld_comm_t comm = NULL;
  GT_MELD(meld_comm_init_env(&comm, &cfg));
  if (!comm) return;
  meld_comm_info_t info;
  GT_MELD(meld_comm_info(comm, &info));
  GT_CHECK(info.rank == rank && info.nranks == nranks, "rank %d/%d", info.rank, info.nranks);
  GT_CHECK(info.nnodes == 1 && info.local_size == nranks && info.local_rank == rank,
           "nnodes %d local %d/%d", info.nnodes, info.local_rank, info.local_size);
  GT_CHECK(info.sm_count > 0 && info.workspace_bytes == cfg.workspace_bytes, "sm %d ws %zu",
           info.sm_count, info.workspace_bytes);
  GT_CHECK(info.net_transport[0] == 0, "one node, yet net_transport \"%.8s\"", info.net_transport);

  const size_t ws = comm->workspace.bytes;
  fill_kernel<<<264, 256>>>((uint32_t *)comm->workspace.local, ws / 4, 1000 + rank);
  size_t ubytes = (size_t)48 << 20;
  void *ubuf = NULL;
  GT_MELD(meld_mem_alloc(comm, ubytes, &ubuf));
  GT_CUDA(cudaDeviceSynchronize());
  GT_MELD(meld_bootstrap_barrier(comm->boot));

  double t0 = gt_now_s();
  for (int peer = 0; peer < nranks; peer++) {
    if (peer == rank) continue;
    GT_CHECK(comm->workspace.peer[peer] != NULL, "no mapping of rank %d's workspace", peer);
    unsigned long long bad = count_bad(comm->workspace.peer[peer], ws, 1000 + peer);
    GT_CHECK(bad == 0, "pulled rank %d's workspace over NVLink: %llu wrong words", peer, bad);
    void *pp = NULL;
    GT_MELD(meld_mem_peer_ptr(comm, ubuf, peer, &pp));
    GT_CHECK(pp != NULL, "no mapping of rank %d's symmetric buffer", peer);
    /* push: write the pattern of (rank, peer) into the peer's buffer */
    if (pp) fill_kernel<<<264, 256>>>((uint32_t *)pp, ubytes / 4, 77 * rank + peer);
  }
  GT_CUDA(cudaDeviceSynchronize());
  double dt = gt_now_s() - t0;
  GT_MELD(meld_bootstrap_barrier(comm->boot));
  if (nranks == 2) {
    int peer = 1 - rank;
    unsigned long long bad = count_bad(ubuf, ubytes, 77 * peer + rank);
    GT_CHECK(bad == 0, "rank %d's push into my symmetric buffer: %llu wrong words", peer, bad);
  }
  gt_log("exchange verified (%zu MiB workspace pulled, %zu MiB pushed, %.1f ms)", ws >> 20,
         ubytes >> 20, dt * 1e3);
  void *bogus = (char *)ubuf + 256;
  GT_CHECK(meld_mem_free(comm, bogus) == MELD_ERR_INVALID_ARG, "freeing a non-symmetric pointer");
  GT_MELD(meld_mem_free(comm, ubuf));
  GT_MELD(meld_comm_check(comm));
  GT_MELD(meld_comm_destroy(comm));
}

/* 1 (and a check) when r is MELD_ERR_INVALID_ARG with `why` in the sentence. */
static int refused(meld_result_t r, const char *what, const char *why) {
  GT_CHECK(r == MELD_ERR_INVALID_ARG && strstr(meld_last_error(), why), "%s: got %s: %s (want \"%s\")", what,
           meld_strerror(r), meld_last_error(), why);
  return 1;
}

/* meld_mem_register: two ranges of one cudaMalloc allocation registered (one shared mapping
 * per peer), pushed into across NVLink and verified; every bad argument refused on every rank
 * with its sentence; deregistration closes every mapping; the range registers again. */
static void rank_register(int rank, int nranks) {
  meld_config_t cfg = test_config();
  meld_comm_t comm = NULL;
  GT_MELD(meld_comm_init_env(&comm, &cfg));
  if (!comm) return;
  const size_t rb = (size_t)3 << 20, total = (size_t)8 << 20;
  uint8_t *blk = NULL;
  GT_CUDA(cudaMalloc(&blk, total));
  uint8_t *r1 = blk + 256, *r2 = blk + ((size_t)4 << 20);
  GT_MELD(meld_mem_register(comm, r1, rb));
  GT_MELD(meld_mem_register(comm, r2, rb));
  int maps = 0;
  for (const meld_ipc_map_t *m = comm->ipc_maps; m; m = m->next) maps++;
  GT_CHECK(maps == nranks - 1, "%d peer mappings for two ranges of one allocation, want %d (one per peer)", maps,
           nranks - 1);
  char *host = (char *)malloc(4096);
  int nb = 0;
  nb += refused(meld_mem_register(comm, NULL, 64), "NULL ptr", "NULL");
  nb += refused(meld_mem_register(comm, r1 + rb + 4096, 0), "0 bytes", "bytes is 0");
  nb += refused(meld_mem_register(comm, host, 4096), "host memory", "not device memory");
  nb += refused(meld_mem_register(comm, r1 + 4096, 64), "inside a registered range", "overlaps");
  nb += refused(meld_mem_register(comm, r1 - 128, 256), "across a range's start", "overlaps");
  nb += refused(meld_mem_register(comm, blk + total - 4096, 8192), "past the allocation", "runs past");
  nb += refused(meld_mem_free(comm, r1), "meld_mem_free of a registered range", "meld_mem_deregister");
  nb += refused(meld_mem_deregister(comm, r1 + 256), "deregister inside a range", "not the start");
  free(host);
  if (nranks > 1) { /* sizes that differ: refused on every rank */
    const meld_result_t r = meld_mem_register(comm, blk + ((size_t)7 << 20), 4096 + 256 * (size_t)rank);
    GT_CHECK(r == MELD_ERR_INVALID_ARG && strstr(meld_last_error(), "same size"), "sizes differ: %s: %s",
             meld_strerror(r), meld_last_error());
  }
  /* push (rank, peer) patterns into each peer's two ranges; verify ours */
  fill_kernel<<<264, 256>>>((uint32_t *)r1, rb / 4, 5000 + rank);
  GT_CUDA(cudaDeviceSynchronize());
  GT_MELD(meld_bootstrap_barrier(comm->boot));
  for (int peer = 0; peer < nranks; peer++) {
    void *p1 = NULL, *p2 = NULL;
    GT_MELD(meld_mem_peer_ptr(comm, r1, peer, &p1));
    GT_MELD(meld_mem_peer_ptr(comm, r2, peer, &p2));
    GT_CHECK(p1 && p2, "no mapping of rank %d's registered ranges", peer);
    if (peer == rank) {
      GT_CHECK(p1 == r1 && p2 == r2, "own peer pointers %p %p, want %p %p", p1, p2, (void *)r1, (void *)r2);
      continue;
    }
    if (!p1 || !p2) continue;
    GT_CHECK((uint8_t *)p2 - (uint8_t *)p1 == r2 - r1, "the two ranges of one allocation are %td apart on rank %d, want %td",
             (uint8_t *)p2 - (uint8_t *)p1, peer, r2 - r1);
    const unsigned long long badp = count_bad(p1, rb, 5000 + peer);
    GT_CHECK(badp == 0, "pulled rank %d's registered range: %llu wrong words", peer, badp);
    fill_kernel<<<264, 256>>>((uint32_t *)p2, rb / 4, 77 * rank + peer);
  }
  GT_CUDA(cudaDeviceSynchronize());
  GT_MELD(meld_bootstrap_barrier(comm->boot));
  if (nranks == 2) {
    const unsigned long long badp = count_bad(r2, rb, 77 * (1 - rank) + rank);
    GT_CHECK(badp == 0, "rank %d's push into my registered range: %llu wrong words", 1 - rank, badp);
  }
  GT_MELD(meld_mem_deregister(comm, r1));
  GT_CHECK(comm->ipc_maps != NULL || nranks == 1, "the shared mapping closed while a range still uses it");
  GT_MELD(meld_mem_deregister(comm, r2));
  GT_CHECK(comm->ipc_maps == NULL, "mappings left open after every range was deregistered");
  GT_MELD(meld_mem_register(comm, r1, rb)); /* again, then left for destroy to end */
  gt_log("register: 2 ranges of one allocation, %d refused arguments, NVLink pull and push verified", nb);
  GT_MELD(meld_comm_check(comm));
  GT_MELD(meld_comm_destroy(comm));
  cudaFree(blk);
}

static void env_node_id(int rank) {
  char b[16];
  snprintf(b, sizeof b, "%d", rank);
  setenv("MELD_NODE_ID", b, 1);
}

static void rank_emulated_nodes(int rank, int nranks) {
  meld_config_t cfg = test_config();
  meld_comm_t comm = NULL;
  GT_MELD(meld_comm_init_env(&comm, &cfg));
  if (!comm) return;
  meld_comm_info_t info;
  GT_MELD(meld_comm_info(comm, &info));
  GT_CHECK(info.nnodes == nranks && info.node == rank && info.local_size == 1 && info.local_rank == 0,
           "emulated nodes: nnodes %d node %d local %d/%d", info.nnodes, info.node, info.local_rank,
           info.local_size);
  void *ubuf = NULL, *pp = (void *)1;
  GT_MELD(meld_mem_alloc(comm, 1 << 20, &ubuf));
  GT_MELD(meld_mem_peer_ptr(comm, ubuf, 1 - rank, &pp));
  GT_CHECK(pp == NULL, "a peer on another (emulated) node must not be mapped");
  GT_MELD(meld_mem_free(comm, ubuf));
  GT_MELD(meld_comm_destroy(comm));
  unsetenv("MELD_NODE_ID");
}

/* Rank 1 asks for a different workspace size: init fails on both ranks after the local
 * allocation, and must leave no device memory behind. */
static void rank_failed_init(int rank, int nranks) {
  (void)nranks;
  size_t free0 = 0, free1 = 0, total = 0;
  cudaFree(0);
  GT_CUDA(cudaMemGetInfo(&free0, &total));
  meld_config_t cfg = test_config();
  cfg.workspace_bytes = rank == 0 ? ((size_t)256 << 20) : ((size_t)128 << 20);
  meld_comm_t comm = (meld_comm_t)0x1;
  meld_result_t r = meld_comm_init_env(&comm, &cfg);
  GT_CHECK(r != MELD_OK && comm == NULL, "mismatched workspace sizes must fail init (got %s)",
           meld_strerror(r));
  GT_CHECK(strstr(meld_last_error(), "same size") || strstr(meld_last_error(), "rank"),
           "message: %s", meld_last_error());
  gt_log("failed init says: %s", meld_last_error());
  GT_CUDA(cudaMemGetInfo(&free1, &total));
  if (gt_share_gpu()) { /* the GPU's free memory moves with the other rank's process too */
    gt_log("leak check skipped: the GPU is shared (MELD_SHARE_GPU)");
    return;
  }
  GT_CHECK(free1 + (2u << 20) >= free0, "failed init leaked %zd bytes of device memory",
           (ssize_t)(free0 - free1));
}

static long rss_kb(void) {
  long pages = 0, rss = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f) {
    if (fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = 0;
    fclose(f);
  }
  return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

static void rank_cycles(int rank, int nranks) {
  (void)rank; (void)nranks;
  const int cycles = 100;
  size_t free_start = 0, free_end = 0, total = 0;
  long rss_start = 0;
  double t0 = gt_now_s();
  for (int i = 0; i < cycles; i++) {
    meld_config_t cfg = test_config();
    cfg.workspace_bytes = (size_t)8 << 20;
    meld_comm_t comm = NULL;
    meld_result_t r = meld_comm_init_env(&comm, &cfg);
    if (r != MELD_OK) {
      GT_CHECK(0, "cycle %d: init failed: %s", i, meld_last_error());
      return;
    }
    void *b = NULL;
    meld_mem_alloc(comm, 1 << 20, &b); /* left for destroy to free */
    GT_MELD(meld_comm_destroy(comm));
    if (i == 4) { /* after the CUDA context and allocator have warmed up */
      cudaMemGetInfo(&free_start, &total);
      rss_start = rss_kb();
    }
  }
  cudaMemGetInfo(&free_end, &total);
  long rss_end = rss_kb();
  gt_log("%d init/destroy cycles in %.2f s: device free %+.1f MiB, host RSS %+ld KiB", cycles,
         gt_now_s() - t0, ((double)free_end - (double)free_start) / 1048576.0, rss_end - rss_start);
  GT_CHECK(free_end + (4u << 20) >= free_start, "device memory leaked: %.1f MiB",
           ((double)free_start - (double)free_end) / 1048576.0);
  GT_CHECK(rss_end - rss_start < 8 * 1024, "host memory grew by %ld KiB over %d cycles",
           rss_end - rss_start, cycles - 5);
}

static int run(const char *name, int nranks, gt_rank_fn fn, void (*env)(int)) {
  printf("--- %s (%d ranks)\n", name, nranks);
  fflush(stdout);
  int failed = gt_spawn_env(nranks, fn, env);
  GT_CHECK(failed == 0, "%s: %d rank(s) failed", name, failed);
  return failed;
}

int main(void) {
  g_ndev = gt_device_count();
  printf("test_comm: %d GPU(s)\n", g_ndev);
  if (g_ndev < 1) {
    printf("skipped: no GPU\n");
    return gt_summary("test_comm");
  }
  run("exchange, 1 rank", 1, rank_exchange, NULL);
  run("init/destroy cycles, 1 rank", 1, rank_cycles, NULL);
  run("register ordinary memory, 1 rank", 1, rank_register, NULL);
  if (g_ndev >= 2) {
    int n = g_ndev > 8 ? 8 : g_ndev;
    run("exchange", n, rank_exchange, NULL);
    run("register ordinary memory", n, rank_register, NULL);
    run("emulated nodes", 2, rank_emulated_nodes, env_node_id);
    run("failed init frees everything", 2, rank_failed_init, NULL);
    run("init/destroy cycles", 2, rank_cycles, NULL);
  } else {
    printf("skipped multi-rank parts: needs 2 GPUs\n");
  }
  return gt_summary("test_comm");
}
