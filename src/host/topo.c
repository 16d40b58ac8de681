/* topo.c — which ranks form a node: by host identity, or by MELD_NODE_ID (emulated nodes). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm.h"
#include "error.h"

static uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = (const unsigned char *)data;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

uint64_t meld_topo_host_hash(void) {
  char host[256] = {0}, boot[64] = {0};
  gethostname(host, sizeof host - 1);
  /* The boot id tells apart containers that share a host name but not a kernel (and so
   * cannot map each other's GPU memory); two processes of one kernel always agree. */
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f) {
    if (!fgets(boot, sizeof boot, f)) boot[0] = '\0';
    fclose(f);
  }
  uint64_t h = fnv1a(0xcbf29ce484222325ull, host, strlen(host));
  return fnv1a(h, boot, strlen(boot));
}

static pthread_once_t g_nonce_once = PTHREAD_ONCE_INIT;
static uint64_t g_nonce;

static void nonce_draw(void) {
  FILE *f = fopen("/dev/urandom", "rb");
  if (f) {
    if (fread(&g_nonce, sizeof g_nonce, 1, f) != 1) g_nonce = 0;
    fclose(f);
  }
  /* (no /dev/urandom: the clock and this process's address layout) */
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const uint64_t mix[3] = {(uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec, (uint64_t)(uintptr_t)&g_nonce,
                           (uint64_t)getpid()};
  g_nonce = fnv1a(g_nonce ^ 0xcbf29ce484222325ull, mix, sizeof mix);
}

uint64_t meld_topo_proc_nonce(void) {
  pthread_once(&g_nonce_once, nonce_draw);
  return g_nonce;
}

meld_result_t meld_topo_assign_nodes(const meld_rank_info_t *ranks, int nranks, int *rank_node,
                                     int *rank_local, int *nnodes) {
  if (!ranks || nranks <= 0 || !rank_node || !rank_local || !nnodes)
    return meld_error(MELD_ERR_INVALID_ARG, "meld_topo_assign_nodes: bad arguments");
  int overrides = 0;
  for (int r = 0; r < nranks; r++) overrides += ranks[r].node_override >= 0;
  if (overrides != 0 && overrides != nranks)
    return meld_error(MELD_ERR_INVALID_ARG,
                      "MELD_NODE_ID is set on %d of %d ranks: set it on every rank or on none",
                      overrides, nranks);
  /* Nodes are numbered in order of their lowest rank. */
  int n = 0;
  for (int r = 0; r < nranks; r++) {
    rank_node[r] = -1;
    for (int q = 0; q < r; q++) {
      int same = overrides ? ranks[q].node_override == ranks[r].node_override
                           : ranks[q].host_hash == ranks[r].host_hash;
      if (same) {
        rank_node[r] = rank_node[q];
        break;
      }
    }
    if (rank_node[r] < 0) rank_node[r] = n++;
  }
  for (int r = 0; r < nranks; r++) {
    int local = 0;
    for (int q = 0; q < r; q++) {
      if (rank_node[q] != rank_node[r]) continue;
      local++;
      if (ranks[q].host_hash != ranks[r].host_hash)
        return meld_error(MELD_ERR_INVALID_ARG,
                          "ranks %d and %d have MELD_NODE_ID %d but run on different hosts: one "
                          "node must be one host",
                          q, r, ranks[r].node_override);
      if (memcmp(ranks[q].uuid, ranks[r].uuid, sizeof ranks[r].uuid) == 0 &&
          !(ranks[q].share_gpu && ranks[r].share_gpu))
        return meld_error(MELD_ERR_INVALID_ARG,
                          "ranks %d and %d of one node both use GPU %s: give each rank its own "
                          "GPU (cudaSetDevice before meld_comm_init; MELD_SHARE_GPU=1 on every "
                          "rank allows it for testing only)",
                          q, r, ranks[r].bus_id);
    }
    rank_local[r] = local;
  }
  *nnodes = n;
  return MELD_OK;
}
