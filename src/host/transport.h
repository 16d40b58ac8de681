/* transport.h — how the proxy moves bytes to ranks of other nodes (DESIGN.md section 6).
 *
 * A transport is a struct of function pointers (meld_transport_ops_t) plus state: the generic
 * part below (ranks, nodes, registered regions: transport.c, which also validates every
 * argument so that each implementation sees only legal calls) and the implementation's own
 * (impl). Implementations: tcp (transport_tcp.c); later ibverbs RC, EFA.
 *
 * Regions. Each rank registers its memory regions (the workspace, the signal pad, ...) in the
 * same order, BEFORE connect; region ids are the registration order, so id i names "the same"
 * region on every rank and a write addresses remote memory as (rank, region id, offset).
 * connect exchanges the regions' sizes (and, for RDMA, their keys), so bad offsets are caught
 * at the sender with a sentence.
 *
 * The guarantee of write_with_flag (the ordering argument). A write carries data bytes and
 * an optional 64-bit flag {region, offset, value}. The DESTINATION stores the flag with a
 * release store (C11 atomic_store_explicit(memory_order_release) on the host) only after all
 * of the write's data bytes are in its memory, so an observer that reads the flag value with
 * acquire (or relaxed + an acquire fence: the GPU's ld.relaxed.sys + fence.acq_rel.sys) sees
 * the data. For tcp this holds because (1) one TCP connection per peer pair delivers a
 * sender's frames in order and every frame's payload precedes nothing but later frames,
 * (2) the destination's receiver thread recv()s the whole payload into the region (the
 * kernel's copy into our memory is complete when recv returns, in program order before what
 * follows in that thread), then (3) release-stores the flag. A reader in another thread or
 * process of the host (or a GPU reading host-mapped memory over PCIe, which observes a
 * CPU's stores in order on x86) thus sees data before flag. Writes from one sender to one
 * destination are applied in the order they were issued; writes from different senders are
 * not ordered with each other. For ibverbs RC (transport_ibv.c): the data as RDMA WRITEs,
 * then the flag as a SEND on the same QP; the destination's receiver thread release-stores
 * the flag after it polls the SEND's receive completion, which the HCA writes only after the
 * earlier WRITEs are placed. (Not a second RDMA WRITE polled in memory: WRITE data may be
 * placed out of order, e.g. under adaptive routing.) GPUDirect RDMA into GPU memory would
 * add a flush before the flag (DESIGN section 6).
 *
 * Threads: register, connect and close are called by one thread while nothing else uses the
 * transport; write_with_flag and poll are called by ONE thread at a time (the proxy). abort
 * may be called from any thread. */
#ifndef MELD_HOST_TRANSPORT_H
#define MELD_HOST_TRANSPORT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "bootstrap.h"
#include "meld.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MELD_TRANSPORT_MAX_REGIONS 16
#define MELD_TRANSPORT_NO_FLAG 0xffffu /* = MELD_REGION_NONE (common/proxy_ring.h) */

typedef struct meld_transport meld_transport_t;

/* One write: `bytes` from local `src` to (dst_rank, dst_region, dst_offset), then, unless
 * flag_region is MELD_TRANSPORT_NO_FLAG, flag_value stored with release at (dst_rank,
 * flag_region, flag_offset), which must be 8-byte aligned. */
typedef struct {
  int dst_rank;
  uint32_t dst_region;
  uint64_t dst_offset;
  const void *src;
  uint64_t bytes;
  uint32_t flag_region;
  uint64_t flag_offset;
  uint64_t flag_value;
} meld_write_t;

typedef struct {
  void *base;
  uint64_t bytes;
} meld_region_t;

/* What an implementation provides. The generic functions below validate arguments and the
 * call order, then call these. */
typedef struct {
  const char *name;
  /* Connects to every rank r with nodes[r] != node (t->nodes is filled). Collective. */
  meld_result_t (*connect)(meld_transport_t *t, meld_bootstrap_t *b);
  /* Writes (asynchronous: the source may be reused once poll counts it complete). */
  meld_result_t (*write_with_flag)(meld_transport_t *t, const meld_write_t *w);
  /* Progress; *completed = writes locally complete so far (source bytes reusable). Returns
   * the transport's sticky error if it failed (a dead peer, a bad frame). */
  meld_result_t (*poll)(meld_transport_t *t, uint64_t *completed);
  /* Tells connected peers we are done, waits (bounded) until they said so too, frees impl. */
  void (*close)(meld_transport_t *t, int64_t timeout_ms);
  /* Optional, after every rank's connect succeeded: proves each connection carries a message
   * both ways (bounded by timeout_ms), so a fabric that cannot route between two ranks fails
   * meld_transport_connect with a sentence instead of the first collective. Collective. */
  meld_result_t (*ready)(meld_transport_t *t);
} meld_transport_ops_t;

struct meld_transport {
  const meld_transport_ops_t *ops;
  void *impl;
  int rank, nranks, node;
  int64_t timeout_ms;        /* the bound of every blocking step */
  int connected;
  int aborted;               /* meld_transport_abort (__atomic): blocking steps give up */
  int nregions;
  meld_region_t regions[MELD_TRANSPORT_MAX_REGIONS]; /* local */
  int *nodes;                /* [nranks], after connect */
  uint64_t *peer_bytes;      /* [nranks][MELD_TRANSPORT_MAX_REGIONS] region sizes, after connect */
  /* The sticky error (meld_transport_fail): the first failure, which every later call
   * reports; implementations' threads record it, the proxy thread reads it. */
  int failed;                /* __atomic */
  pthread_mutex_t err_mu;    /* guards err_code and err_msg */
  meld_result_t err_code;
  char err_msg[512];
};

/* For implementations (and in-process test transports): allocates a transport with the
 * generic state set and `ops`/`impl` attached. Fails: MELD_ERR_INVALID_ARG (nranks < 1, rank
 * out of range, node < 0, timeout_ms < 1), MELD_ERR_OUT_OF_MEMORY. */
meld_result_t meld_transport_new(const meld_transport_ops_t *ops, void *impl, int rank,
                                 int nranks, int node, int64_t timeout_ms,
                                 meld_transport_t **out);

/* A tcp transport for `rank` of `nranks` on node `node`, advertising `host` (NULL:
 * MELD_SOCKET_ADDR, else this host's first non-loopback IPv4 address). Every blocking step
 * (connect, each frame's send or receive, close) is bounded by timeout_ms. Fails as
 * meld_transport_new. (transport_tcp.c) */
meld_result_t meld_transport_tcp_create(int rank, int nranks, int node, const char *host,
                                        int64_t timeout_ms, meld_transport_t **out);

/* A tcp or ibverbs transport as `kind` says: "tcp", "ibv" (fails if ibverbs is unusable here:
 * MELD_ERR_UNSUPPORTED with the reason). local_index (this rank's index among the ranks of its
 * node) and gpu_bus_id (its GPU's PCI bus id, or NULL) pick the NIC for ibv. tcp advertises
 * MELD_SOCKET_ADDR or this host's first non-loopback IPv4 address. (transport.c) */
meld_result_t meld_transport_create(const char *kind, int rank, int nranks, int node,
                                   int local_index, const char *gpu_bus_id, int64_t timeout_ms,
                                   meld_transport_t **out);

/* An ibverbs RC transport (transport_ibv.c: loads libibverbs at run time, MELD_IB_LIB names
 * another library; MELD_IB_HCA "name[:port]" picks the NIC, else among the active ports those
 * of the NICs nearest the GPU at gpu_bus_id on the PCI tree (pci.h), the local_index-th of
 * them modulo their number; MELD_IB_GID_INDEX the GID, else the port's IB LID or, on Ethernet
 * (RoCE), its RoCE v2 IPv4 GID (by the GID's type in sysfs); MELD_IB_TIMEOUT the QP's local
 * ACK timeout exponent 1..31 (default 18: 1.07 s a try), MELD_IB_TC the traffic class (RoCE:
 * DSCP << 2), MELD_IB_SL the service level; MELD_IB_FORK_INIT=0 skips ibv_fork_init, which
 * is otherwise called when the library loads: with it, on kernels before 5.13, a region's
 * pages are not inherited by fork()ed children, so give regions whole pages of their own).
 * Fails: MELD_ERR_UNSUPPORTED (no library, no device with an active port, built without
 * rdma-core headers: the sentence says which), MELD_ERR_INVALID_ARG (a bad MELD_IB_*
 * setting), MELD_ERR_SYSTEM (the device could not be opened, a GID cannot be read), as
 * meld_transport_new. */
meld_result_t meld_transport_ibv_create(int rank, int nranks, int node, int local_index,
                                        const char *gpu_bus_id, int64_t timeout_ms,
                                        meld_transport_t **out);

/* MELD_OK if an ibverbs transport can be made here (library, a device with an active port);
 * else MELD_ERR_UNSUPPORTED with the reason as meld_last_error(). Opens nothing it keeps. */
meld_result_t meld_transport_ibv_probe(void);

/* For implementations: records the transport's first failure (code and sentence, logged),
 * later ones are consequences and only returned. Any thread. Returns meld_error(code, ...). */
meld_result_t meld_transport_fail(meld_transport_t *t, meld_result_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* 1 once a failure is recorded. Any thread. */
int meld_transport_failed(meld_transport_t *t);

/* The recorded failure as this thread's last error; returns its code. */
meld_result_t meld_transport_sticky(meld_transport_t *t);

/* Registers [base, base + bytes) (base 8-byte aligned, bytes > 0) as the next region id,
 * returned in *region. Before connect only; every rank registers the same list. Fails:
 * MELD_ERR_INVALID_ARG with a sentence (NULL, bytes 0, misaligned, too many, after connect). */
meld_result_t meld_transport_register(meld_transport_t *t, void *base, uint64_t bytes,
                                      uint32_t *region);

/* Collective over the bootstrap (every rank, same order): exchanges nodes and region sizes,
 * then connects to every rank of another node. All ranks fail together (each with a sentence
 * naming the failing rank): MELD_ERR_INVALID_ARG (ranks registered different numbers of
 * regions, connect called twice), MELD_ERR_TIMEOUT (a peer did not connect in time),
 * MELD_ERR_SYSTEM (sockets). */
meld_result_t meld_transport_connect(meld_transport_t *t, meld_bootstrap_t *b);

/* Fills nodes and peer region sizes without a bootstrap (what connect does after its
 * all-gather); for in-process test transports. nodes: [nranks]; peer_bytes:
 * [nranks][MELD_TRANSPORT_MAX_REGIONS]. Marks t connected. */
meld_result_t meld_transport_set_peers(meld_transport_t *t, const int *nodes,
                                       const uint64_t *peer_bytes);

/* 0 if w is legal for t, else MELD_ERR_INVALID_ARG with a sentence (not connected; dst_rank
 * out of range, this rank, or on this node; unknown region; range past the region's end at
 * dst; misaligned or out-of-range flag; NULL src with bytes > 0). */
meld_result_t meld_transport_check_write(const meld_transport_t *t, const meld_write_t *w);

/* Checks w, then starts it (see the guarantee at the top). Proxy thread only. Fails: as
 * check_write; the transport's sticky error; MELD_ERR_ABORTED after meld_transport_abort. */
meld_result_t meld_transport_write(meld_transport_t *t, const meld_write_t *w);

/* Progress and completions (see ops->poll). Proxy thread only. */
meld_result_t meld_transport_poll(meld_transport_t *t, uint64_t *completed);

/* Local pointer to [offset, offset + bytes) of local region `region`, or NULL if that range
 * is not inside it. */
void *meld_transport_local(const meld_transport_t *t, uint32_t region, uint64_t offset,
                           uint64_t bytes);

/* 1 if rank is another node's (the transport's business), else 0. */
int meld_transport_is_remote(const meld_transport_t *t, int rank);

/* Makes blocking steps in progress give up with MELD_ERR_ABORTED. Any thread. */
void meld_transport_abort(meld_transport_t *t);

/* Closes connections (bounded by timeout_ms) and frees t. Call after the proxy using it is
 * destroyed. NULL is a no-op. */
void meld_transport_close(meld_transport_t *t, int64_t timeout_ms);

#ifdef __cplusplus
}
#endif

#endif
