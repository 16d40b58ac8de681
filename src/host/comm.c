/* comm.c — communicator life cycle: unique id, init (bootstrap, topology, symmetric memory,
 * device protocol), info, abort/check, destroy; and the public symmetric allocations. */
#include "comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include "coll_plan.h"
#include "common/net.h"
#include "error.h"
#include "log.h"
#include "net.h"
#include "transport.h"

/* How long destroy waits for peers to unmap before freeing (a dead peer must not hold us). */
#define MELD_DESTROY_BARRIER_MS 10000

_Static_assert(sizeof(meld_boot_addr_t) <= MELD_UNIQUE_ID_BYTES, "unique id too small");

meld_result_t meld_get_unique_id(meld_unique_id *id) {
  meld_error_clear();
  if (!id) return meld_error(MELD_ERR_INVALID_ARG, "meld_get_unique_id: id is NULL");
  meld_resolved_config_t cfg;
  MELD_CHECK(meld_config_resolve(NULL, &cfg));
  meld_boot_addr_t addr;
  memset(&addr, 0, sizeof addr);
  MELD_CHECK(meld_bootstrap_root_listen(cfg.port, NULL, &addr));
  memset(id, 0, sizeof *id);
  memcpy(id->internal, &addr, sizeof addr);
  return MELD_OK;
}

static meld_result_t comm_split(struct meld_comm *comm, int color, int key, const meld_resolved_config_t *cfg,
                                meld_result_t mine, meld_comm_t *child);
static void comm_free(struct meld_comm *c, int collective);
static int same_process(const struct meld_comm *c, int q, int r);

/* MELD_NET_ARG_CHECK (0 or 1, default 1) into c->net->argcheck: read on every rank, a bad value
 * fails them all; on only where every rank has it on (a rank that checks a peer that sends no
 * argument words would fail valid calls). Collective over c. */
static meld_result_t net_argcheck_agree(struct meld_comm *c) {
  int64_t v = 1;
  MELD_CHECK(meld_comm_agree(c, meld_env_int64("MELD_NET_ARG_CHECK", 0, 1, &v), "MELD_NET_ARG_CHECK"));
  int32_t *all = calloc((size_t)c->nranks, sizeof *all);
  if (!all) return meld_error(MELD_ERR_OUT_OF_MEMORY, "meld_comm_init: out of host memory");
  all[c->rank] = (int32_t)v;
  const meld_result_t r = meld_bootstrap_allgather(c->boot, all, sizeof *all);
  int on = 1;
  for (int q = 0; r == MELD_OK && q < c->nranks; q++) on = on && all[q] != 0;
  free(all);
  MELD_CHECK(r);
  c->net->argcheck = on;
  return MELD_OK;
}

/* 1 if any two of c's ranks are threads of one process (a test mode), from every rank's info:
 * every rank decides alike. */
static int comm_thread_ranks(const struct meld_comm *c) {
  for (int r = 0; r < c->nranks; r++)
    for (int q = 0; q < r; q++)
      if (same_process(c, q, r)) return 1;
  return 0;
}

/* The configuration of c's internal children (the hierarchy's, the MoE ops' across nodes). */
static meld_resolved_config_t internal_cfg(const struct meld_comm *c) {
  meld_resolved_config_t cfg = c->cfg;
  cfg.internal = 1;
  cfg.trace_path[0] = '\0';  /* (one trace file a process: the parent's) */
  cfg.sm_cap = c->sm_count; /* (children of ranks that are threads on one GPU would plan with more) */
  cfg.side_stream = meld_proto_side_stream((struct meld_comm *)c); /* (no more streams than the flat path's) */
  return cfg;
}

/* The hierarchy's two comms (comm.h: hier_node, hier_rail), where it applies. Collective over
 * c; every rank decides alike (the layout is global; MELD_NET_HIER is all-gathered). */
static meld_result_t hier_create(struct meld_comm *c) {
  const int L = c->local_size, P = c->nranks;
  const int uniform = meld_hier_layout(c->rank_node, c->rank_local, P, L);
  int64_t v = 1;
  const meld_result_t env = meld_env_int64("MELD_NET_HIER", 0, 2, &v);
  MELD_CHECK(meld_comm_agree(c, env, "MELD_NET_HIER"));
  /* Ranks that are threads of one process (a test mode): off unless MELD_NET_HIER=2 (sessions
   * 38-39, one H200: the first hierarchical all_gather / all_reduce of 2 x 2 thread ranks timed
   * out, a child comm's kernel of one rank never starting while processes pass; not the
   * process's hardware queues: 32 fail alike; not yet understood). Agreed below. */
  const int threads = comm_thread_ranks(c);
  int32_t *want = calloc((size_t)P, sizeof *want);
  if (!want) return meld_error(MELD_ERR_OUT_OF_MEMORY, "meld_comm_init: out of host memory");
  want[c->rank] = (int32_t)(v == 2 || (v == 1 && !threads));
  meld_result_t res = meld_bootstrap_allgather(c->boot, want, sizeof *want);
  int on = uniform;
  for (int r = 0; res == MELD_OK && r < P; r++) on = on && want[r] != 0;
  free(want);
  MELD_CHECK(res);
  if (!on) {
    MELD_INFO(MELD_SUB_INIT, "inter-node collectives: flat (%s)",
              L < 2 ? "one rank a node" : !uniform ? "ranks not numbered node by node, or unequal nodes"
                                                   : "MELD_NET_HIER=0, or ranks that are threads of one process");
    return MELD_OK;
  }
  const meld_resolved_config_t cfg = internal_cfg(c);
  MELD_CHECK(comm_split(c, c->node, c->rank, &cfg, MELD_OK, &c->hier_node));
  res = comm_split(c, c->local_rank, c->rank, &cfg, MELD_OK, &c->hier_rail);
  if (res != MELD_OK) {
    comm_free(c->hier_node, 1);
    c->hier_node = NULL;
    return res;
  }
  meld_log_set_rank(c->rank);
  MELD_INFO(MELD_SUB_INIT, "inter-node collectives: hierarchical (%d nodes x %d ranks)", c->nnodes, L);
  return MELD_OK;
}

meld_result_t meld_comm_moe_comms(struct meld_comm *c, const char *fn, cudaStream_t stream, struct meld_comm **node,
                                  struct meld_comm **rail) {
  const int L = c->local_size, P = c->nranks;
  *node = *rail = NULL;
  if (c->hier_node && c->hier_rail) {
    *node = c->hier_node, *rail = c->hier_rail;
    return MELD_OK;
  }
  if (!c->moe_node) {
    /* (the layout is global: every rank decides alike) */
    if (!meld_node_by_node(c->rank_node, c->rank_local, P, L))
      return meld_error(MELD_ERR_UNSUPPORTED,
                        "%s: across nodes the ranks must be numbered node by node with the same number on every "
                        "node (rank r on node r / L)",
                        fn);
    /* Ranks that are threads of one process (a test mode): as for the hierarchy (hier_create),
     * internal comms only with MELD_NET_HIER=2 (every thread of a process reads the same
     * environment; the threads of one process may decide otherwise than another process's ranks
     * only if MELD_NET_HIER differs between processes, which the split then waits out). */
    int64_t v = 1;
    if (comm_thread_ranks(c) && (meld_env_int64("MELD_NET_HIER", 0, 2, &v) != MELD_OK || v != 2))
      return meld_error(MELD_ERR_UNSUPPORTED,
                        "%s: across nodes with ranks that are threads of one process, the MoE ops' internal "
                        "communicators are made only with MELD_NET_HIER=2 (as the hierarchy's: not yet run there)",
                        fn);
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    MELD_CUDA_CHECK(cudaStreamIsCapturing(stream, &cs));
    if (cs != cudaStreamCaptureStatusNone)
      return meld_error(MELD_ERR_UNSUPPORTED,
                        "%s: the first MoE call across nodes makes the node's and the rail's communicators, which "
                        "cannot happen during a stream capture: make one call before capturing",
                        fn);
    const meld_resolved_config_t cfg = internal_cfg(c);
    struct meld_comm *nc = NULL, *rc = NULL;
    MELD_CHECK(comm_split(c, c->node, c->rank, &cfg, MELD_OK, &nc));
    if (L > 1) {
      const meld_result_t res = comm_split(c, c->local_rank, c->rank, &cfg, MELD_OK, &rc);
      if (res != MELD_OK) {
        comm_free(nc, 1);
        return res;
      }
    }
    meld_log_set_rank(c->rank);
    c->moe_node = nc, c->moe_rail = rc;
    MELD_INFO(MELD_SUB_INIT, "MoE across nodes: node and rail communicators made (%d nodes x %d ranks)", c->nnodes, L);
  }
  *node = c->moe_node, *rail = c->moe_rail ? c->moe_rail : c;
  return MELD_OK;
}

/* This rank's GPU: ordinal, SMs, bus id, UUID. */
static meld_result_t query_device(struct meld_comm *c, meld_rank_info_t *me) {
  int ndev = 0;
  cudaError_t e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess || ndev == 0) {
    cudaGetLastError();
    return meld_error(MELD_ERR_CUDA, "meld_comm_init: no usable CUDA device (%s)",
                      e != cudaSuccess ? cudaGetErrorString(e) : "device count is 0");
  }
  MELD_CUDA_CHECK(cudaGetDevice(&c->device));
  struct cudaDeviceProp prop;
  MELD_CUDA_CHECK(cudaGetDeviceProperties(&prop, c->device));
  c->sm_count = prop.multiProcessorCount;
  me->sm_count = prop.multiProcessorCount;
  memcpy(me->uuid, prop.uuid.bytes, sizeof me->uuid);
  MELD_CUDA_CHECK(cudaDeviceGetPCIBusId(me->bus_id, sizeof me->bus_id, c->device));
  if (prop.major != 9)
    MELD_WARN(MELD_SUB_INIT, "GPU %s is compute capability %d.%d; meld's kernels need 9.0 (Hopper)",
              me->bus_id, prop.major, prop.minor);
  return MELD_OK;
}

static int same_process(const struct meld_comm *c, int q, int r) {
  const meld_rank_info_t *a = &c->ranks[q], *b = &c->ranks[r];
  return c->rank_node[q] == c->rank_node[r] && a->host_hash == b->host_hash && a->pid == b->pid &&
         a->proc_nonce == b->proc_nonce;
}
int meld_comm_same_process(const struct meld_comm *c, int r) { return same_process(c, r, c->rank); }

int meld_comm_gpu_share(const meld_rank_info_t *ranks, int nranks, int r) {
  int n = 0;
  for (int q = 0; q < nranks; q++)
    n += ranks[q].host_hash == ranks[r].host_hash && ranks[q].pid == ranks[r].pid &&
         ranks[q].proc_nonce == ranks[r].proc_nonce && memcmp(ranks[q].uuid, ranks[r].uuid, sizeof ranks[r].uuid) == 0;
  return n;
}

/* Ranks that are threads of one process on one GPU (MELD_SHARE_GPU) run their kernels at the
 * same time: each plans with its share of the SMs, so that every rank's grid fits beside the
 * others' (a whole-GPU grid whose CTAs wait for a peer that cannot start would time out).
 * Every rank computes the same shares from the all-gathered infos. Counted whatever their
 * nodes (MELD_NODE_ID groups of threads still share the GPU's SMs: counting by node gave 2 x 2
 * thread ranks half the SMs each, so 4 x 64-CTA grids could not all be resident). */
static void share_sms(struct meld_comm *c) {
  int *n = calloc((size_t)c->nranks, sizeof *n);
  if (!n) return; /* (only a plan input: the whole GPU then, as for processes) */
  for (int r = 0; r < c->nranks; r++) n[r] = meld_comm_gpu_share(c->ranks, c->nranks, r);
  for (int r = 0; r < c->nranks; r++) {
    if (n[r] > 1) c->ranks[r].sm_count /= n[r];
    if (c->ranks[r].sm_cap > 0 && c->ranks[r].sm_count > c->ranks[r].sm_cap) c->ranks[r].sm_count = c->ranks[r].sm_cap;
  }
  if (n[c->rank] > 1)
    MELD_INFO(MELD_SUB_INIT, "rank %d: %d ranks of this process share GPU %s: %d of its %d SMs each", c->rank,
              n[c->rank], c->ranks[c->rank].bus_id, c->ranks[c->rank].sm_count, c->sm_count);
  c->sm_count = c->ranks[c->rank].sm_count;
  c->gpu_share = n[c->rank];
  free(n);
}

/* A scratch buffer replaced while a captured graph may still use it (freed at destroy). */
struct meld_retired {
  void *ptr;
  struct meld_retired *next;
};

meld_result_t meld_comm_scratch_slot(struct meld_comm *comm, int slot, const char *fn, const char *instead,
                                     size_t bytes, cudaStream_t stream, void **out) {
  enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  MELD_CUDA_CHECK(cudaStreamIsCapturing(stream, &cs));
  void **buf = &comm->unfused_scratch[slot];
  size_t *have = &comm->unfused_scratch_bytes[slot];
  int *graphed = &comm->unfused_scratch_graphed[slot];
  if (*have < bytes) {
    if (cs != cudaStreamCaptureStatusNone)
      return meld_error(MELD_ERR_UNSUPPORTED,
                        "%s: the unfused path needs %zu bytes of scratch, which cannot be allocated during stream "
                        "capture: %s",
                        fn, bytes, instead);
    if (*buf && *graphed) {
      /* a graph captured with it may be replayed later: keep it until destroy */
      struct meld_retired *r = malloc(sizeof *r);
      if (!r) return meld_error(MELD_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
      r->ptr = *buf, r->next = comm->retired, comm->retired = r;
    } else if (*buf) {
      MELD_CUDA_CHECK(cudaFreeAsync(*buf, stream));
    }
    *graphed = 0;
    *buf = NULL;
    *have = 0;
    if (cudaMallocAsync(buf, bytes, stream) != cudaSuccess) {
      (void)cudaGetLastError();
      *buf = NULL;
      return meld_error(MELD_ERR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes of scratch", fn, bytes);
    }
    *have = bytes;
  }
  if (cs != cudaStreamCaptureStatusNone) *graphed = 1;
  *out = *buf;
  return MELD_OK;
}

meld_result_t meld_comm_scratch(struct meld_comm *comm, const char *fn, const char *instead, size_t bytes,
                                cudaStream_t stream, void **out) {
  return meld_comm_scratch_slot(comm, MELD_SCRATCH_OPS, fn, instead, bytes, stream, out);
}

/* Peers of this node whose GPU is visible here must be reachable by peer access. (Peers not
 * visible, e.g. under per-rank CUDA_VISIBLE_DEVICES, are checked when their memory is mapped.) */
static meld_result_t check_peer_access(struct meld_comm *c) {
  for (int r = 0; r < c->nranks; r++) {
    if (r == c->rank || c->rank_node[r] != c->node) continue;
    int dev = -1, can = 0;
    if (cudaDeviceGetByPCIBusId(&dev, c->ranks[r].bus_id) != cudaSuccess) {
      cudaGetLastError();
      continue;
    }
    if (dev == c->device) continue; /* a shared GPU (MELD_SHARE_GPU; topo checked) */
    MELD_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, c->device, dev));
    if (!can)
      return meld_error(MELD_ERR_CUDA,
                        "GPU %s (rank %d) cannot access GPU %s (rank %d) of the same node: no "
                        "peer access (check nvidia-smi topo -m); set MELD_NODE_ID to treat them as "
                        "different nodes",
                        c->ranks[c->rank].bus_id, c->rank, c->ranks[r].bus_id, r);
  }
  return MELD_OK;
}

meld_result_t meld_comm_agree(struct meld_comm *c, meld_result_t mine, const char *what) {
  int32_t *ok = calloc((size_t)c->nranks, sizeof *ok);
  if (!ok) return meld_error(MELD_ERR_OUT_OF_MEMORY, "meld_comm_init: out of host memory");
  ok[c->rank] = (int32_t)mine;
  char saved[1024];
  snprintf(saved, sizeof saved, "%s", meld_last_error());
  meld_result_t res = meld_bootstrap_allgather(c->boot, ok, sizeof *ok);
  if (res == MELD_OK && mine != MELD_OK) {
    meld_error(mine, "%s", saved);
    res = mine;
  }
  for (int r = 0; res == MELD_OK && r < c->nranks; r++)
    if (ok[r] != MELD_OK)
      res = meld_error((meld_result_t)ok[r], "rank %d failed during %s (%s); see its log",
                       r, what, meld_strerror((meld_result_t)ok[r]));
  free(ok);
  return res;
}

/* The CE engine's side streams and events (collectives.cu), for comms of 2+ ranks. Then one
 * 16-byte copy from every same-node peer's pad into this rank's workspace on the stream its
 * copies will use, waited for here: whatever the driver sets up on a first copy between two
 * GPUs' memories happens now, while no kernel of this comm waits for a peer; and the CE
 * kernels are loaded (ranks as threads sharing a GPU saw a first CE call's entry, and a CE
 * graph's first launch, stall past the timeout before these and the tests' graph uploads;
 * session 24 calls 3-4). */
static meld_result_t ce_stream_create(struct meld_comm *c) {
  if (c->nranks < 2 || c->cfg.internal) return MELD_OK;
  /* Ranks as threads on one GPU (a test mode): their kernels spin for each other, so no two
   * of their streams may share a hardware queue (one's waiting kernel would hold up the
   * other's); the process has CUDA_DEVICE_MAX_CONNECTIONS of them (default 8). */
  const char *e = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  const int queues = e && atoi(e) > 0 ? atoi(e) : 8;
  const int n = meld_coll_ce_side_streams(c->nranks, c->gpu_share, queues, MELD_CE_STREAMS);
  if (c->gpu_share > 1 && c->gpu_share * (2 + n) > queues) /* (a rank's own stream, the side stream, n) */
    MELD_WARN(MELD_SUB_INIT, "%d ranks of this process share GPU %s with %d streams or more but the process has %d "
              "hardware queues (CUDA_DEVICE_MAX_CONNECTIONS): a rank's kernel may wait in a queue behind "
              "another's that waits for it (a timeout); set CUDA_DEVICE_MAX_CONNECTIONS=32 before CUDA starts",
              c->gpu_share, c->ranks[c->rank].bus_id, c->gpu_share * (2 + n), queues);
  MELD_CUDA_CHECK(cudaEventCreateWithFlags(&c->ce_fork, cudaEventDisableTiming));
  for (int i = 0; i < n; i++) {
    MELD_CUDA_CHECK(cudaStreamCreateWithFlags(&c->ce_stream[i], cudaStreamNonBlocking));
    MELD_CUDA_CHECK(cudaEventCreateWithFlags(&c->ce_join[i], cudaEventDisableTiming));
    c->ce_nstreams = i + 1;
  }
  for (int j = 1; j < c->nranks; j++) { /* peer j of the rotation (collectives.cu coll_ce_call) */
    const int q = (c->rank + j) % c->nranks;
    if (c->rank_node[q] == c->node && c->pad.peer && c->pad.peer[q] && c->workspace.local && c->workspace.bytes >= 16)
      MELD_CUDA_CHECK(cudaMemcpyAsync(c->workspace.local, c->pad.peer[q], 16, cudaMemcpyDefault,
                                      c->ce_stream[(j - 1) % n]));
  }
  for (int i = 0; i < n; i++) MELD_CUDA_CHECK(cudaStreamSynchronize(c->ce_stream[i]));
  return meld_coll_ce_preload();
}

static void comm_free(struct meld_comm *c, int collective) {
  if (!c) return;
  comm_free(c->moe_rail, collective);
  comm_free(c->moe_node, collective);
  comm_free(c->hier_rail, collective);
  comm_free(c->hier_node, collective);
  for (int i = 0; i < MELD_CE_STREAMS; i++) {
    if (c->ce_join[i]) cudaEventDestroy(c->ce_join[i]);
    if (c->ce_stream[i]) cudaStreamDestroy(c->ce_stream[i]);
  }
  if (c->ce_fork) cudaEventDestroy(c->ce_fork);
  meld_net_destroy(c); /* (before the protocol: the proxy polls its host abort word) */
  if (c->proto) meld_proto_destroy(c);
  /* Close our mappings of the peers' buffers, then wait (briefly: a dead peer must not hold
   * us) until every peer closed its mappings of ours, then free ours. */
  for (meld_symbuf_t *b = c->user_bufs; b; b = b->next) meld_symbuf_unmap(c, b);
  meld_symbuf_unmap(c, &c->pad);
  meld_symbuf_unmap(c, &c->workspace);
  if (collective && c->boot) meld_bootstrap_barrier_timeout(c->boot, MELD_DESTROY_BARRIER_MS);
  while (c->user_bufs) {
    meld_symbuf_t *b = c->user_bufs;
    c->user_bufs = b->next;
    meld_symbuf_destroy(c, b);
    free(b);
  }
  meld_symbuf_destroy(c, &c->pad);
  meld_symbuf_destroy(c, &c->workspace);
  for (int i = 0; i < MELD_SCRATCH_SLOTS; i++)
    if (c->unfused_scratch[i]) cudaFree(c->unfused_scratch[i]);
  while (c->retired) {
    struct meld_retired *r = c->retired;
    c->retired = r->next;
    cudaFree(r->ptr);
    free(r);
  }
  while (c->ipc_maps) { /* (empty unless a refcount went wrong: close what is left) */
    meld_ipc_map_t *m = c->ipc_maps;
    c->ipc_maps = m->next;
    MELD_WARN(MELD_SUB_MEM, "a registered range's mapping of rank %d was still open at destroy", m->rank);
    cudaIpcCloseMemHandle(m->base);
    free(m);
  }
  meld_bootstrap_destroy(c->boot);
  free(c->rank_node);
  free(c->rank_local);
  free(c->ranks);
  free(c);
}

static meld_result_t comm_init(meld_comm_t *out, int nranks, const meld_boot_addr_t *addr, int rank,
                               const meld_resolved_config_t *cfg) {
  meld_result_t res = MELD_OK;
  struct meld_comm *c = calloc(1, sizeof *c);
  if (!c) return meld_error(MELD_ERR_OUT_OF_MEMORY, "meld_comm_init: out of host memory");
  c->rank = rank;
  c->nranks = nranks;
  c->cfg = *cfg;
  c->device = -1;
  c->ranks = calloc((size_t)nranks, sizeof *c->ranks);
  c->rank_node = calloc((size_t)nranks, sizeof *c->rank_node);
  c->rank_local = calloc((size_t)nranks, sizeof *c->rank_local);
  if (!c->ranks || !c->rank_node || !c->rank_local) {
    res = meld_error(MELD_ERR_OUT_OF_MEMORY, "meld_comm_init: out of host memory");
    goto fail;
  }
  meld_log_set_rank(rank);

  /* Device first (a local failure is still reported to the others after the rendezvous). */
  meld_rank_info_t *me = &c->ranks[rank];
  me->host_hash = meld_topo_host_hash();
  me->node_override = cfg->node_id;
  me->pid = (int32_t)getpid();
  me->proc_nonce = meld_topo_proc_nonce();
  me->share_gpu = cfg->share_gpu;
  me->sm_cap = cfg->sm_cap;
  meld_result_t dev_res = query_device(c, me);
  char dev_err[1024];
  snprintf(dev_err, sizeof dev_err, "%s", meld_last_error());

  MELD_CHECK_GOTO(meld_bootstrap_init(addr, nranks, rank, cfg->bootstrap_timeout_ms, &c->boot), res,
                  fail);
  if (dev_res != MELD_OK) meld_error(dev_res, "%s", dev_err);
  MELD_CHECK_GOTO(meld_comm_agree(c, dev_res, "GPU discovery"), res, fail);
  MELD_CHECK_GOTO(meld_bootstrap_allgather(c->boot, c->ranks, sizeof *c->ranks), res, fail);
  MELD_CHECK_GOTO(meld_topo_assign_nodes(c->ranks, nranks, c->rank_node, c->rank_local, &c->nnodes),
                  res, fail);
  c->node = c->rank_node[rank];
  c->local_rank = c->rank_local[rank];
  share_sms(c);
  for (int r = 0; r < nranks; r++) c->local_size += c->rank_node[r] == c->node;
  MELD_CHECK_GOTO(meld_comm_agree(c, check_peer_access(c), "the peer-access check"), res, fail);
  for (int r = 0; r < nranks; r++)
    if (r != rank && c->rank_node[r] == c->node && !meld_comm_same_process(c, r) &&
        memcmp(c->ranks[r].uuid, me->uuid, sizeof me->uuid) == 0) {
      MELD_WARN(MELD_SUB_INIT,
                "MELD_SHARE_GPU: rank %d shares GPU %s with rank %d; the kernels of different "
                "processes take turns on it (time slices), so this tests the multi-rank protocol, "
                "not its speed",
                rank, me->bus_id, r);
      break;
    }

  MELD_CHECK_GOTO(meld_symbuf_create(c, cfg->workspace_bytes, &c->workspace), res, fail);
  c->workspace.seq = MELD_SYMBUF_SEQ_WORKSPACE;
  MELD_CHECK_GOTO(meld_symbuf_create(c, MELD_SIGNAL_PAD_BYTES, &c->pad), res, fail);
  MELD_CHECK_GOTO(meld_comm_agree(c, meld_proto_create(c), "device protocol setup"), res, fail);
  MELD_CHECK_GOTO(meld_comm_agree(c, ce_stream_create(c), "the copy engine's stream"), res, fail);
  if (c->nnodes > 1) {
    uint64_t block = 0;
    MELD_CHECK_GOTO(meld_comm_agree(c, meld_net_block_env(&block), "MELD_NET_CHUNK_BYTES"), res, fail);
    MELD_CHECK_GOTO(meld_comm_agree(c, meld_net_create(c, block), "the inter-node path"), res, fail);
    MELD_CHECK_GOTO(net_argcheck_agree(c), res, fail);
    MELD_CHECK_GOTO(hier_create(c), res, fail);
  }

  MELD_INFO(MELD_SUB_INIT,
            "rank %d/%d: GPU %s (%d SMs), node %d/%d, local rank %d/%d, workspace %zu bytes",
            rank, nranks, me->bus_id, c->sm_count, c->node, c->nnodes, c->local_rank, c->local_size,
            cfg->workspace_bytes);
  *out = c;
  return MELD_OK;
fail:
  comm_free(c, 0);
  return res;
}

meld_result_t meld_comm_init(meld_comm_t *comm, int nranks, meld_unique_id id, int rank,
                             const meld_config_t *config) {
  meld_error_clear();
  if (!comm) return meld_error(MELD_ERR_INVALID_ARG, "meld_comm_init: comm is NULL");
  *comm = NULL;
  if (nranks <= 0 || nranks > MELD_MAX_RANKS)
    return meld_error(MELD_ERR_INVALID_ARG, "meld_comm_init: nranks %d is outside [1, %d]", nranks,
                      MELD_MAX_RANKS);
  if (rank < 0 || rank >= nranks)
    return meld_error(MELD_ERR_INVALID_ARG, "meld_comm_init: rank %d %s nranks %d", rank,
                      rank < 0 ? "< 0 with" : ">=", nranks);
  meld_boot_addr_t addr;
  memcpy(&addr, id.internal, sizeof addr);
  if (addr.magic != MELD_BOOT_MAGIC)
    return meld_error(MELD_ERR_INVALID_ARG,
                      "meld_comm_init: the unique id is not one made by meld_get_unique_id");
  meld_resolved_config_t cfg;
  MELD_CHECK(meld_config_resolve(config, &cfg));
  meld_result_t res = comm_init(comm, nranks, &addr, rank, &cfg);
  if (res != MELD_OK) meld_error_prefix("meld_comm_init (rank %d of %d)", rank, nranks);
  return res;
}

meld_result_t meld_comm_init_env(meld_comm_t *comm, const meld_config_t *config) {
  meld_error_clear();
  if (!comm) return meld_error(MELD_ERR_INVALID_ARG, "meld_comm_init_env: comm is NULL");
  *comm = NULL;
  meld_resolved_config_t cfg;
  MELD_CHECK(meld_config_resolve(config, &cfg));
  meld_boot_addr_t addr;
  int rank = -1, nranks = 0;
  MELD_CHECK(meld_bootstrap_from_env(cfg.port, &addr, &rank, &nranks));
  if (nranks <= 0 || nranks > MELD_MAX_RANKS || rank < 0 || rank >= nranks)
    return meld_error(MELD_ERR_INVALID_ARG, "meld_comm_init_env: rank %d of %d is out of range",
                      rank, nranks);
  meld_result_t res = comm_init(comm, nranks, &addr, rank, &cfg);
  if (res != MELD_OK) meld_error_prefix("meld_comm_init_env (rank %d of %d)", rank, nranks);
  return res;
}

/* ---- split ------------------------------------------------------------------------------- */

int meld_split_assign(int n, const int32_t *color, const int32_t *key, int me, int *child_rank, int *leader) {
  *child_rank = -1, *leader = -1;
  if (color[me] < 0) return 0;
  int size = 0, below = 0;
  for (int r = 0; r < n; r++) {
    if (color[r] != color[me]) continue;
    size++;
    /* order by (key, parent rank); the leader is the first */
    const int before_me = key[r] < key[me] || (key[r] == key[me] && r < me);
    below += before_me;
    if (*leader < 0 || key[r] < key[*leader] || (key[r] == key[*leader] && r < *leader)) *leader = r;
  }
  *child_rank = below;
  return size;
}

/* What each rank of the parent contributes to a split. */
typedef struct {
  int32_t color, key, status, pad;
} split_entry_t;

/* The split itself (meld_comm_split, and the hierarchy's comms at init): every rank of comm
 * calls it; `mine` is this rank's argument check (MELD_OK or its error). */
static meld_result_t comm_split(struct meld_comm *comm, int color, int key, const meld_resolved_config_t *cfg,
                                meld_result_t mine, meld_comm_t *child) {
  const int P = comm->nranks, me = comm->rank;
  meld_result_t res = MELD_OK;
  split_entry_t *all = calloc((size_t)P, sizeof *all);
  meld_boot_addr_t *addrs = calloc((size_t)P, sizeof *addrs);
  int32_t *colors = calloc((size_t)P, sizeof *colors), *keys = calloc((size_t)P, sizeof *keys);
  int leader = -1;
  if (!all || !addrs || !colors || !keys) {
    free(all), free(addrs), free(colors), free(keys);
    return meld_error(MELD_ERR_OUT_OF_MEMORY, "meld_comm_split: out of host memory");
  }
  all[me].color = color, all[me].key = key;
  MELD_CHECK_GOTO(meld_comm_agree(comm, mine, "meld_comm_split's argument check"), res, done);
  MELD_CHECK_GOTO(meld_bootstrap_allgather(comm->boot, all, sizeof *all), res, done);
  for (int r = 0; r < P; r++) colors[r] = all[r].color, keys[r] = all[r].key;
  int crank = -1;
  const int n = meld_split_assign(P, colors, keys, me, &crank, &leader);

  /* Each group's first rank opens its rendezvous (any free port: groups run at once) and every
   * rank learns its leader's address over the parent. */
  if (leader == me) mine = meld_bootstrap_root_listen(0, NULL, &addrs[me]);
  MELD_CHECK_GOTO(meld_comm_agree(comm, mine, "meld_comm_split's rendezvous"), res, done);
  MELD_CHECK_GOTO(meld_bootstrap_allgather(comm->boot, addrs, sizeof *addrs), res, done);

  meld_comm_t c = NULL;
  mine = n > 0 ? comm_init(&c, n, &addrs[leader], crank, cfg) : MELD_OK;
  if (mine != MELD_OK) meld_error_prefix("meld_comm_split (color %d: rank %d of %d)", color, crank, n);
  meld_log_set_rank(me); /* (comm_init labelled this thread's log with the child's rank) */
  /* Every group succeeded, or every rank fails (no rank keeps a child its peers lack). */
  res = meld_comm_agree(comm, mine, "meld_comm_split's new communicators");
  if (res != MELD_OK) {
    if (c) comm_free(c, 1);
  } else {
    *child = c;
    MELD_INFO(MELD_SUB_INIT, "meld_comm_split: rank %d -> color %d, rank %d of %d", me, color, crank, n);
  }
done:
  if (leader == me && res != MELD_OK && addrs[me].magic) meld_bootstrap_root_release(addrs[me].key);
  free(all), free(addrs), free(colors), free(keys);
  return res;
}

meld_result_t meld_comm_split(meld_comm_t comm, int color, int key, const meld_config_t *config,
                              meld_comm_t *child) {
  meld_error_clear();
  if (child) *child = NULL;
  if (!comm) return meld_error(MELD_ERR_INVALID_ARG, "meld_comm_split: comm is NULL (every rank of comm must call it)");
  /* A bad argument on one rank fails every rank (none is left waiting in the exchanges). */
  meld_resolved_config_t cfg = comm->cfg;
  meld_result_t mine = MELD_OK;
  meld_comm_t unused = NULL;
  if (!child)
    mine = meld_error(MELD_ERR_INVALID_ARG, "meld_comm_split: child is NULL");
  else if (color < MELD_SPLIT_NOCOLOR)
    mine = meld_error(MELD_ERR_INVALID_ARG, "meld_comm_split: color %d: give a color >= 0, or MELD_SPLIT_NOCOLOR",
                      color);
  else if (config)
    mine = meld_config_resolve(config, &cfg);
  /* The child plans with at most its parent's SMs: where the parent's ranks are threads sharing
   * a GPU, a child of fewer of them would otherwise count fewer sharers and take more SMs each,
   * and the children's grids (e.g. two tensor-parallel groups on one GPU) could not all be
   * resident (the hierarchy's comms had that timeout, session 40). */
  cfg.sm_cap = comm->sm_count;
  meld_result_t res = comm_split(comm, color, key, &cfg, mine, child ? child : &unused);
  if (res != MELD_OK && strncmp(meld_last_error(), "meld_comm_split", 15) != 0)
    meld_error_prefix("meld_comm_split (rank %d of %d)", comm->rank, comm->nranks);
  return res;
}

meld_result_t meld_comm_destroy(meld_comm_t comm) {
  meld_error_clear();
  if (!comm) return MELD_OK;
  meld_result_t res = MELD_OK;
  if (comm->device >= 0) {
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess)
      res = meld_error(MELD_ERR_CUDA, "meld_comm_destroy: pending work failed: %s",
                       cudaGetErrorString(e));
  }
  comm_free(comm, 1);
  return res;
}

meld_result_t meld_comm_abort(meld_comm_t comm) {
  meld_error_clear();
  if (!comm) return meld_error(MELD_ERR_INVALID_ARG, "meld_comm_abort: comm is NULL");
  /* (the hierarchy's comms first: a collective of comm may be waiting in one of them) */
  struct meld_comm *kids[] = {comm->hier_node, comm->hier_rail, comm->moe_node, comm->moe_rail};
  for (int i = 0; i < 4; i++)
    if (kids[i]) (void)meld_proto_abort(kids[i]);
  return meld_proto_abort(comm);
}

meld_result_t meld_comm_check(meld_comm_t comm) {
  meld_error_clear();
  if (!comm) return meld_error(MELD_ERR_INVALID_ARG, "meld_comm_check: comm is NULL");
  meld_result_t r = meld_proto_check(comm);
  if (r == MELD_OK) r = meld_net_check(comm);
  /* the internal comms carry this comm's collectives (the hierarchy's) and MoE ops across nodes:
   * their errors are its */
  struct meld_comm *kids[] = {comm->hier_node, comm->hier_rail, comm->moe_node, comm->moe_rail};
  for (int i = 0; i < 4 && r == MELD_OK; i++) {
    struct meld_comm *h = kids[i];
    if (h && (r = meld_proto_check(h)) == MELD_OK) r = meld_net_check(h);
    if (r != MELD_OK)
      meld_error_prefix("meld_comm_check (the %s comm of the %s)", i % 2 == 0 ? "node" : "rail",
                        i < 2 ? "hierarchy" : "MoE ops across nodes");
  }
  return r;
}

int meld_comm_node_sm_count(const struct meld_comm *comm) {
  int sm = comm->sm_count;
  for (int r = 0; comm->ranks && comm->rank_node && r < comm->nranks; r++)
    if (comm->rank_node[r] == comm->node && comm->ranks[r].sm_count > 0 && comm->ranks[r].sm_count < sm)
      sm = comm->ranks[r].sm_count;
  return sm;
}

meld_result_t meld_comm_info(meld_comm_t comm, meld_comm_info_t *info) {
  meld_error_clear();
  if (!comm || !info)
    return meld_error(MELD_ERR_INVALID_ARG, "meld_comm_info: %s is NULL", comm ? "info" : "comm");
  info->rank = comm->rank;
  info->nranks = comm->nranks;
  info->local_rank = comm->local_rank;
  info->local_size = comm->local_size;
  info->node = comm->node;
  info->nnodes = comm->nnodes;
  info->device = comm->device;
  info->sm_count = comm->sm_count;
  info->workspace_bytes = comm->workspace.bytes;
  memset(info->net_transport, 0, sizeof info->net_transport);
  if (comm->net && comm->net->tp)
    snprintf(info->net_transport, sizeof info->net_transport, "%s", comm->net->tp->ops->name);
  return MELD_OK;
}

static meld_symbuf_t *find_buf(meld_comm_t comm, const void *ptr, meld_symbuf_t ***link) {
  meld_symbuf_t **l = &comm->user_bufs;
  for (; *l; l = &(*l)->next)
    if ((*l)->local == ptr) {
      if (link) *link = l;
      return *l;
    }
  return NULL;
}

/* 1 if b holds all of [p, p + bytes); *offset = p - its start. */
static int symbuf_holds(const meld_symbuf_t *b, uintptr_t p, size_t bytes, size_t *offset) {
  const uintptr_t base = (uintptr_t)b->local;
  if (!b->local || p < base || p - base > b->bytes || bytes > b->bytes - (p - base)) return 0;
  if (offset) *offset = (size_t)(p - base);
  return 1;
}

const meld_symbuf_t *meld_symbuf_find(const struct meld_comm *comm, const void *ptr, size_t bytes,
                                      size_t *offset) {
  if (!comm || !ptr) return NULL;
  const uintptr_t p = (uintptr_t)ptr;
  if (symbuf_holds(&comm->workspace, p, bytes, offset)) return &comm->workspace; /* ops' own use */
  for (const meld_symbuf_t *b = comm->user_bufs; b; b = b->next)
    if (symbuf_holds(b, p, bytes, offset)) return b;
  return NULL;
}

meld_result_t meld_mem_alloc(meld_comm_t comm, size_t bytes, void **ptr) {
  meld_error_clear();
  if (!comm || !ptr)
    return meld_error(MELD_ERR_INVALID_ARG, "meld_mem_alloc: %s is NULL", comm ? "ptr" : "comm");
  *ptr = NULL;
  if (bytes == 0) return meld_error(MELD_ERR_INVALID_ARG, "meld_mem_alloc: bytes is 0");
  meld_symbuf_t *b = calloc(1, sizeof *b);
  if (!b) return meld_error(MELD_ERR_OUT_OF_MEMORY, "meld_mem_alloc: out of host memory");
  meld_result_t res = meld_symbuf_create(comm, bytes, b);
  if (res != MELD_OK) {
    free(b);
    meld_error_prefix("meld_mem_alloc(%zu bytes)", bytes);
    return res;
  }
  b->seq = ++comm->user_buf_seq;
  b->next = comm->user_bufs;
  comm->user_bufs = b;
  *ptr = b->local;
  return MELD_OK;
}

/* Ends a symmetric buffer on every rank alike (meld_mem_free, meld_mem_deregister): the ranks
 * first agree that each names a buffer of the right kind, and the same one (its sequence
 * number), so a rank with a bad argument fails every rank instead of leaving them in a
 * barrier, and no rank unmaps another buffer than its peers. Then each unmaps the peers'
 * parts, waits until the peers unmapped its own, and frees its part (unless registered). */
static meld_result_t mem_end(meld_comm_t comm, void *ptr, int registered, const char *fn) {
  meld_symbuf_t **link = NULL;
  meld_symbuf_t *b = find_buf(comm, ptr, &link);
  const int ok = b && b->registered == registered;
  char why[256] = "";
  if (!ok)
    snprintf(why, sizeof why, "%p %s", ptr,
             b ? (registered ? "was allocated by meld_mem_alloc: use meld_mem_free"
                             : "was registered (meld_mem_register), not allocated: use meld_mem_deregister")
               : (registered ? "is not the start of a range registered on this comm"
                             : "was not returned by meld_mem_alloc on this comm"));
  uint64_t *all = calloc((size_t)comm->nranks * 2, sizeof *all);
  if (!all) return meld_error(MELD_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  all[2 * comm->rank] = (uint64_t)ok;
  all[2 * comm->rank + 1] = ok ? b->seq : 0;
  meld_result_t res = meld_bootstrap_allgather(comm->boot, all, 2 * sizeof *all);
  if (res == MELD_OK && !ok) res = meld_error(MELD_ERR_INVALID_ARG, "%s: %s", fn, why);
  for (int r = 0; res == MELD_OK && r < comm->nranks; r++)
    if (!all[2 * r])
      res = meld_error(MELD_ERR_INVALID_ARG, "%s: rank %d passed a bad pointer; see its log (nothing was ended)", fn, r);
    else if (all[2 * r + 1] != b->seq)
      res = meld_error(MELD_ERR_INVALID_ARG,
                       "%s: rank %d ends buffer #%llu, this rank #%llu: every rank must end the same one "
                       "(nothing was ended)",
                       fn, r, (unsigned long long)all[2 * r + 1], (unsigned long long)b->seq);
  free(all);
  if (res != MELD_OK) return res;
  *link = b->next;
  meld_symbuf_unmap(comm, b);
  res = meld_bootstrap_barrier(comm->boot);
  meld_symbuf_destroy(comm, b);
  free(b);
  return res;
}

meld_result_t meld_mem_free(meld_comm_t comm, void *ptr) {
  meld_error_clear();
  if (!comm) return meld_error(MELD_ERR_INVALID_ARG, "meld_mem_free: comm is NULL");
  if (!ptr) return MELD_OK;
  return mem_end(comm, ptr, 0, "meld_mem_free");
}

meld_result_t meld_mem_register(meld_comm_t comm, void *ptr, size_t bytes) {
  meld_error_clear();
  if (!comm || !ptr)
    return meld_error(MELD_ERR_INVALID_ARG, "meld_mem_register: %s is NULL", comm ? "ptr" : "comm");
  if (bytes == 0) return meld_error(MELD_ERR_INVALID_ARG, "meld_mem_register: bytes is 0");
  meld_symbuf_t *b = calloc(1, sizeof *b);
  if (!b) return meld_error(MELD_ERR_OUT_OF_MEMORY, "meld_mem_register: out of host memory");
  meld_result_t res = meld_symbuf_register(comm, ptr, bytes, b);
  if (res != MELD_OK) {
    free(b);
    meld_error_prefix("meld_mem_register(%p, %zu bytes)", ptr, bytes);
    return res;
  }
  b->seq = ++comm->user_buf_seq;
  b->next = comm->user_bufs;
  comm->user_bufs = b;
  return MELD_OK;
}

meld_result_t meld_mem_deregister(meld_comm_t comm, void *ptr) {
  meld_error_clear();
  if (!comm) return meld_error(MELD_ERR_INVALID_ARG, "meld_mem_deregister: comm is NULL");
  if (!ptr) return MELD_OK;
  return mem_end(comm, ptr, 1, "meld_mem_deregister");
}

meld_result_t meld_mem_peer_ptr(meld_comm_t comm, const void *ptr, int peer, void **peer_ptr) {
  meld_error_clear();
  if (!comm || !ptr || !peer_ptr)
    return meld_error(MELD_ERR_INVALID_ARG, "meld_mem_peer_ptr: NULL argument");
  if (peer < 0 || peer >= comm->nranks)
    return meld_error(MELD_ERR_INVALID_ARG, "meld_mem_peer_ptr: peer %d is outside [0, %d)", peer,
                      comm->nranks);
  meld_symbuf_t *b = find_buf(comm, ptr, NULL);
  if (!b)
    return meld_error(MELD_ERR_INVALID_ARG,
                      "meld_mem_peer_ptr: %p was not returned by meld_mem_alloc (or registered) on this comm", ptr);
  *peer_ptr = b->peer[peer];
  return MELD_OK;
}
