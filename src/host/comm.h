/* comm.h — the communicator's internals, shared by host modules and op launch code. */
#ifndef MELD_HOST_COMM_H
#define MELD_HOST_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "bootstrap.h"
#include "config.h"
#include "meld.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MELD_MAX_RANKS 4096
#define MELD_SIGNAL_PAD_BYTES ((size_t)8 << 20) /* per rank: signal slots, credits, abort word */

#define MELD_SYMBUF_SEQ_WORKSPACE UINT64_MAX

/* One symmetric allocation: this rank's buffer and the mapped buffers of same-node peers. */
typedef struct meld_symbuf {
  void *local;             /* this rank's buffer (device memory)                        */
  void **peer;             /* [nranks]: mapped address of rank r's buffer, or NULL if r is
                              on another node; peer[rank] == local                       */
  size_t bytes;
  uint64_t seq;            /* user allocations: 1, 2, ... in allocation order (equal on
                              every rank: meld_mem_alloc is collective); the workspace:
                              MELD_SYMBUF_SEQ_WORKSPACE; 0 = other internal buffers       */
  struct meld_symbuf *next;/* list of user allocations (meld_mem_alloc, meld_mem_register) */
  int registered;          /* 1: the user's memory (meld_mem_register): local is not freed,
                              and peer[r] lies inside the shared mapping maps[r] (NULL
                              for a peer of this process: peer[r] is its address)        */
  struct meld_ipc_map **maps; /* registered only: [nranks] the mapping of rank r's allocation */
} meld_symbuf_t;

/* One peer allocation opened through CUDA IPC for registered ranges, shared by every range
 * that lies in it (opened once per comm; the driver counts opens across comms) and closed with
 * the last one. */
typedef struct meld_ipc_map {
  int rank;
  uint64_t remote_base, remote_bytes; /* the allocation in rank `rank`'s address space        */
  void *base;               /* where it is mapped here                                    */
  int refs;
  struct meld_ipc_map *next;
} meld_ipc_map_t;

/* What each rank tells the others at init (all-gathered over the bootstrap). */
typedef struct {
  uint64_t host_hash;      /* hostname + boot id: equal on one host                     */
  int32_t node_override;   /* MELD_NODE_ID or -1                                        */
  int32_t pid;
  uint64_t proc_nonce;     /* random per process: with host_hash and pid, "same process"   */
  char bus_id[32];         /* PCI bus id of the GPU ("0000:19:00.0")                    */
  unsigned char uuid[16];  /* GPU UUID                                                  */
  int32_t sm_count;
  int32_t share_gpu;       /* MELD_SHARE_GPU: may share its GPU with ranks that also set it */
  int32_t sm_cap;          /* > 0: plan with at most this many SMs (the hierarchy's comms: the
                              parent's share, where ranks are threads sharing the GPU)     */
  int32_t pad_;
} meld_rank_info_t;

struct meld_proto_state; /* device protocol: src/host/proto.c */

/* Most side streams of the CE engine (one per peer up to this many: copies from different
 * peers on different streams may run on different copy engines). */
#define MELD_CE_STREAMS 4

/* The comm's scratch buffers (meld_comm_scratch_slot). */
enum { MELD_SCRATCH_OPS = 0, MELD_SCRATCH_NET = 1, MELD_SCRATCH_SCALES = 2, MELD_SCRATCH_MOE = 3, MELD_SCRATCH_SLOTS = 4 };

struct meld_comm {
  int rank, nranks;
  int local_rank, local_size;
  int node, nnodes;
  int device, sm_count;
  int gpu_share;           /* ranks of this process on this GPU (MELD_SHARE_GPU, share_sms);
                              > 1: their kernels run at once, so programmatic launches only
                              where two grids of every rank fit (collectives.cu
                              coll_pdl_env): a rank's early-launched next grid could hold
                              the SMs that a peer's current grid needs (LL timeouts, s25) */
  int *rank_node;          /* [nranks] node of each rank                                */
  int *rank_local;         /* [nranks] local rank of each rank within its node          */
  meld_rank_info_t *ranks; /* [nranks]                                                  */
  meld_resolved_config_t cfg;
  meld_bootstrap_t *boot;
  meld_symbuf_t workspace; /* cfg.workspace_bytes per rank: staging rings               */
  meld_symbuf_t pad;       /* MELD_SIGNAL_PAD_BYTES per rank: signals, credits, abort   */
  meld_symbuf_t *user_bufs;/* meld_mem_alloc and meld_mem_register list                 */
  uint64_t user_buf_seq;   /* meld_mem_alloc / _register calls so far (the last seq given) */
  /* The scratch buffers (meld_comm_scratch_slot), freed at destroy: [MELD_SCRATCH_OPS] the
   * unfused ops', [MELD_SCRATCH_NET] the inter-node hierarchy's (a collective an unfused op
   * calls on its scratch must not take the same buffer), [MELD_SCRATCH_SCALES] the gathered
   * per-row fp8 scales of meld_ag_gemm_fp8, [MELD_SCRATCH_MOE] the MoE ops' gathered tokens
   * across nodes (moe_net.cu: kept from a dispatch until its combine). graphed: handed out
   * during a stream capture: a graph may use it, so a larger one replaces it without freeing it. */
  void *unfused_scratch[MELD_SCRATCH_SLOTS];
  size_t unfused_scratch_bytes[MELD_SCRATCH_SLOTS];
  int unfused_scratch_graphed[MELD_SCRATCH_SLOTS];
  struct meld_retired *retired; /* such replaced buffers, freed at destroy                    */
  meld_ipc_map_t *ipc_maps;/* peers' allocations mapped for registered ranges            */
  int ce_nstreams;         /* the CE engine's side streams (collectives.cu; 2+ ranks): min(P-1, 4),
                              fewer where ranks share a GPU (coll_plan.c meld_coll_ce_side_streams) */
  cudaStream_t ce_stream[MELD_CE_STREAMS]; /* non-blocking; a call's copy i > 0 on (i - 1) % n  */
  cudaEvent_t ce_fork, ce_join[MELD_CE_STREAMS]; /* fork from the caller's stream, join back */
  struct meld_proto_state *proto; /* device protocol state (epochs, abort, error record) */
  struct meld_net *net;    /* nnodes > 1: staging, ring, transport, proxy (net.h); else NULL */
  /* The hierarchy across nodes (comm_init, when nnodes > 1, local_size > 1, the ranks numbered
   * node by node with equal nodes, and MELD_NET_HIER is not 0 on any rank): the comm of this
   * node's ranks, and the "rail" comm of this local rank's peers on every node (ranked by
   * node). coll_net.cu's hierarchical collectives run on them. Else NULL. */
  struct meld_comm *hier_node, *hier_rail;
  /* The MoE ops across nodes (moe_net.cu) run on a node comm and a rail comm too: the
   * hierarchy's where it made them, else these, made by the first such call
   * (meld_comm_moe_comms) and freed at destroy; moe_rail stays NULL with one rank a node (the
   * rail is the comm itself). */
  struct meld_comm *moe_node, *moe_rail;
};

/* Node assignment from every rank's info (pure function, unit-tested on the CPU):
 * fills rank_node, rank_local, and *nnodes; *local_size of `rank`'s node. Errors (sentence
 * in meld_last_error): MELD_NODE_ID set on some ranks only; one node id on two hosts; two
 * ranks of one node on the same GPU (unless both set MELD_SHARE_GPU: a test mode). */
meld_result_t meld_topo_assign_nodes(const meld_rank_info_t *ranks, int nranks, int *rank_node,
                                     int *rank_local, int *nnodes);

/* The smallest SM count among this rank's node: every rank of the node plans with the same
 * value (plans must agree: their hashes are compared at each call's handshake). */
int meld_comm_node_sm_count(const struct meld_comm *comm);

/* This process's host identity hash (hostname and kernel boot id). */
uint64_t meld_topo_host_hash(void);
/* A random number drawn once per process (tells processes with the same host and pid apart,
 * e.g. in two containers). */
uint64_t meld_topo_proc_nonce(void);
/* 1 if rank r is a thread of this process (its buffers' addresses are valid here as they are:
 * no CUDA IPC, which cannot open a handle of its own process). */
int meld_comm_same_process(const struct meld_comm *comm, int r);
/* How many of the ranks (rank r included) are threads of r's process on r's GPU, whatever
 * their nodes: they share its SMs (share_sms: each plans with sm_count / this). */
int meld_comm_gpu_share(const meld_rank_info_t *ranks, int nranks, int r);

/* The node comm (this node's L ranks) and the rail comm (local rank l of every node, ranked by
 * node; the comm itself where L = 1) that the MoE ops across nodes run on: the hierarchy's, or
 * made here on the first call (collective over comm: every rank's first MoE call across nodes;
 * not during a stream capture: MELD_ERR_UNSUPPORTED naming fn). MELD_ERR_UNSUPPORTED where the
 * ranks are not numbered node by node with equal nodes. */
meld_result_t meld_comm_moe_comms(struct meld_comm *comm, const char *fn, cudaStream_t stream, struct meld_comm **node,
                                  struct meld_comm **rail);

/* Collective over c's bootstrap: everyone learns whether everyone succeeded (`mine`), so that
 * no rank goes on alone and hangs; a failure elsewhere names the rank and `what`. */
meld_result_t meld_comm_agree(struct meld_comm *c, meld_result_t mine, const char *what);

/* meld_comm_split's grouping: rank `me` of n with color[] and key[] (colors < 0 join no group).
 * Returns its group's size (0 for a negative color) and sets *child_rank (its rank in the
 * group: order by key, then by rank) and *leader (the parent rank of the group's rank 0); -1
 * for both without a group. */
int meld_split_assign(int n, const int32_t *color, const int32_t *key, int me, int *child_rank, int *leader);
/* The comm's scratch buffer of at least `bytes` for one call of an unfused path (AG+GEMM's
 * gathered A, GEMM+RS/AR's partials): one per comm, used only inside a call, so the ops share
 * it (a comm's calls are stream-ordered). Grown in stream order on `stream` (cudaFreeAsync /
 * cudaMallocAsync: a cudaMalloc synchronizes streams, and a device-wide wait would also wait
 * for kernels of peers in this process that wait for this rank), never while `stream` is
 * capturing: MELD_ERR_UNSUPPORTED, the sentence naming fn and `instead` (what else to do). */
meld_result_t meld_comm_scratch(struct meld_comm *comm, const char *fn, const char *instead, size_t bytes,
                                cudaStream_t stream, void **out);
/* The same for one of the comm's scratch buffers (meld_comm_scratch: MELD_SCRATCH_OPS). */
meld_result_t meld_comm_scratch_slot(struct meld_comm *comm, int slot, const char *fn, const char *instead,
                                     size_t bytes, cudaStream_t stream, void **out);

/* Symmetric memory (symmem.c). Collective over comm->boot. On failure nothing stays
 * allocated or mapped. */
meld_result_t meld_symbuf_create(struct meld_comm *comm, size_t bytes, meld_symbuf_t *buf);
/* The same over the caller's [ptr, ptr + bytes) (ordinary device memory that CUDA IPC can
 * share: cudaMalloc); peers map the allocation that holds it, once per process. */
meld_result_t meld_symbuf_register(struct meld_comm *comm, void *ptr, size_t bytes, meld_symbuf_t *buf);
/* Closes this rank's mappings of the peers' parts of buf (its own part stays). */
void meld_symbuf_unmap(struct meld_comm *comm, meld_symbuf_t *buf);
/* Unmaps, then frees this rank's part unless it is the user's (registered). */
void meld_symbuf_destroy(struct meld_comm *comm, meld_symbuf_t *buf);

/* The symmetric buffer (a meld_mem_alloc buffer, a registered range, or the comm's workspace,
 * which ops may use as a zero-copy source) that holds all of [ptr, ptr + bytes) (bytes may be 0: ptr itself),
 * or NULL; *offset = ptr - buffer start. Host only, no CUDA call. */
const meld_symbuf_t *meld_symbuf_find(const struct meld_comm *comm, const void *ptr, size_t bytes,
                                      size_t *offset);

/* Device protocol hooks (proto.c): created after the signal pad exists; destroyed first. */
meld_result_t meld_proto_create(struct meld_comm *comm);
/* The comm's protocol side stream (a cudaStream_t; NULL before meld_proto_create), which the
 * hierarchy's comms share (config.h side_stream). */
void *meld_proto_side_stream(struct meld_comm *comm);
void meld_proto_destroy(struct meld_comm *comm);
meld_result_t meld_proto_abort(struct meld_comm *comm);
meld_result_t meld_proto_check(struct meld_comm *comm);

#ifdef __cplusplus
}
#endif

#endif
