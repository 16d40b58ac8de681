/* net.h (host) — a multi-node comm's inter-node path: the staging in host-pinned, device-mapped
 * memory, the proxy's command ring there, the transport (tcp) and the proxy thread. Layout and
 * the reuse argument: src/common/net.h; DESIGN.md section 6.
 *
 * Created by meld_comm_init when the comm spans several nodes (collective over the bootstrap:
 * the transport exchanges region sizes and connects every pair of ranks on different nodes);
 * destroyed by meld_comm_destroy after the device is idle. */
#ifndef MELD_HOST_NET_H
#define MELD_HOST_NET_H

#include <stdint.h>

#include "coll_plan.h"
#include "common/proxy_ring.h"
#include "meld.h"

#ifdef __cplusplus
extern "C" {
#endif

struct meld_comm;
struct meld_transport;
struct meld_proxy;

typedef struct meld_net {
  struct meld_transport *tp;
  struct meld_proxy *proxy;
  uint64_t block;                 /* bytes of one staging slot (MELD_NET_CHUNK_BYTES)       */
  void *host;                     /* one cudaHostAlloc: ring, flags, send and recv staging   */
  size_t host_bytes;
  /* host pointers (the proxy's view) */
  meld_cmdring_hdr_t *ring;
  uint64_t *flags;                /* [2][nranks][MELD_NET_SLOTS]: data stamps, then credits  */
  uint8_t *send, *recv;           /* [2][nranks][MELD_NET_SLOTS][block] each                 */
  /* the same memory as the GPU addresses it */
  meld_cmdring_hdr_t *ring_dev;
  uint64_t *flags_dev;
  uint8_t *send_dev, *recv_dev;
  uint32_t region_send, region_recv, region_flags; /* the transport's region ids             */
  int argcheck;                   /* the argument check across nodes (MELD_NET_ARG_CHECK, 1 by
                                     default; on only where every rank has it on: comm.c)      */
} meld_net_t;

/* Builds comm->net (comm->nnodes > 1) with staging slots of `block` bytes (meld_net_block_env,
 * agreed on by every rank first). Collective. On failure nothing stays allocated and comm->net
 * is NULL. Fails: MELD_ERR_CUDA, MELD_ERR_OUT_OF_MEMORY, and the transport's errors
 * (MELD_ERR_TIMEOUT, MELD_ERR_SYSTEM). */
meld_result_t meld_net_create(struct meld_comm *comm, uint64_t block);

/* Stops the proxy (draining what was enqueued, bounded by the timeout), closes the transport,
 * frees the staging. The device must be idle. NULL net: nothing. */
void meld_net_destroy(struct meld_comm *comm);

/* MELD_OK, or the proxy's sticky error (a dead peer, a bad command) with its sentence. */
meld_result_t meld_net_check(struct meld_comm *comm);

/* One call's per-peer sizes for rank `me` (bytes; offsets from send / recv): phase 1 sends
 * tx_bytes[q] from send + tx_off[q] to q (all-gather: the own block from send) and receives
 * rx_bytes[q] at recv + rx_off[q] (reduce-scatter / all-reduce: the own part's bytes, summed);
 * an all-reduce's phase 2 sends the own part and receives q's part at recv + tx_off[q]
 * (tx_bytes[q]). The own block / part: own_bytes from send + own_src, to recv + own_dst (copy
 * kinds) or summed into recv + sum_out (sum kinds). part: an all-reduce's part bytes. */
typedef struct {
  int kind; /* MELD_NET_* (common/net.h) */
  uint64_t tx_off[MELD_COLL_MAX_RANKS], tx_bytes[MELD_COLL_MAX_RANKS];
  uint64_t rx_off[MELD_COLL_MAX_RANKS], rx_bytes[MELD_COLL_MAX_RANKS];
  uint64_t own_bytes, own_src, own_dst, sum_out, part;
} meld_net_sizes_t;

/* Fills *s for rank me of P (P <= MELD_COLL_MAX_RANKS) from the call's arguments. Pure: the
 * cross-rank invariants (a pair's two ends agree on its stream) are unit-tested on the CPU.
 * Returns 0, or -1 for an op it does not know. */
int meld_net_sizes(const meld_coll_args_t *a, int P, int me, meld_net_sizes_t *s);

/* MELD_NET_CHUNK_BYTES (default MELD_NET_BLOCK_DEFAULT), validated. */
meld_result_t meld_net_block_env(uint64_t *block);

/* MELD_NET_TRANSPORT's value `env`: 0 tcp, 1 ibv, 2 auto (also NULL or empty), -1 unknown. */
int meld_net_transport_want(const char *env);

/* The inter-node transport from every rank's {want (as above), can use ibverbs} pairs,
 * all[2 * P]: *kind "ibv" where every rank wants ibv or auto and every rank can, else "tcp";
 * *cannot = the first rank that cannot use ibverbs (-1: none). Fails: MELD_ERR_INVALID_ARG
 * (the ranks' wants differ), MELD_ERR_UNSUPPORTED (ibv wanted, rank *cannot cannot). */
meld_result_t meld_net_transport_pick(const int32_t *all, int P, const char **kind, int *cannot);

#ifdef __cplusplus
}
#endif

#endif
