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

/* MELD_NET_CHUNK_BYTES (default MELD_NET_BLOCK_DEFAULT), validated. */
meld_result_t meld_net_block_env(uint64_t *block);

#ifdef __cplusplus
}
#endif

#endif
