/* proxy.h — the proxy: a thread that drains a command ring (src/common/proxy_ring.h) and
 * drives a transport (transport.h). DESIGN.md section 6.
 *
 * One proxy per process (per comm), one ring per proxy, one producer per ring: today a host
 * thread through meld_proxy_enqueue (CPU tests, host-driven ops); later a GPU thread writing
 * the same 64-byte commands into the same ring placed in host-pinned, device-mapped memory
 * (config.ring), publishing head with st.release.sys.
 *
 * NOTES: the proxy thread never calls CUDA. In particular it must never call cudaMalloc,
 * cudaFree, cudaHostRegister or any synchronizing CUDA call (cudaDeviceSynchronize,
 * cudaMemcpy, cudaStreamSynchronize, ...): those can wait for a running kernel, and a
 * running kernel may be waiting for this proxy to deliver a flag: deadlock. Everything it
 * touches (the ring, staging, regions) is allocated and registered before it starts. */
#ifndef MELD_HOST_PROXY_H
#define MELD_HOST_PROXY_H

#include <stdint.h>

#include "common/proxy_ring.h"
#include "meld.h"
#include "transport.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  uint32_t nslots;            /* ring slots: a power of two in [2, 2^20]; 0 = 256              */
  int64_t timeout_ms;         /* bound of a producer's wait for a credit, of flush and waits;
                                 0 = the transport's timeout                                  */
  const uint32_t *abort_word; /* optional: nonzero (read with acquire) stops the proxy with
                                 MELD_ERR_ABORTED, e.g. the comm's host-mapped abort word     */
  void *ring;                 /* optional: memory of meld_cmdring_bytes(nslots), 64-byte
                                 aligned (e.g. pinned, device-mapped), owned by the caller;
                                 NULL = the proxy allocates host memory                       */
} meld_proxy_config_t;
#define MELD_PROXY_CONFIG_INIT {0, 0, NULL, NULL}

typedef struct meld_proxy meld_proxy_t;

/* Initializes the ring (zeroed, nslots set) and starts the proxy thread on a connected
 * transport t (which must outlive the proxy). cfg may be NULL (defaults). Fails:
 * MELD_ERR_INVALID_ARG (NULL, t not connected, bad nslots or timeout, misaligned ring),
 * MELD_ERR_OUT_OF_MEMORY, MELD_ERR_SYSTEM (thread). */
meld_result_t meld_proxy_create(meld_transport_t *t, const meld_proxy_config_t *cfg,
                                meld_proxy_t **out);

/* The ring (for a device producer: pass its mapped address to kernels). */
meld_cmdring_hdr_t *meld_proxy_ring(meld_proxy_t *p);

/* Host producer (one thread per proxy): checks cmd (opcode, regions, ranges, rank: the
 * transport's sentences), waits for a free slot (bounded by the timeout; also returns at once
 * if the proxy failed), writes the command with seq = its index, publishes head. The source
 * bytes must be written before the call and stay unchanged until meld_proxy_done() passes
 * the command's index (returned in *index; index may be NULL). Fails:
 * MELD_ERR_INVALID_ARG, MELD_ERR_TIMEOUT (no credit in time), the proxy's sticky error. */
meld_result_t meld_proxy_enqueue(meld_proxy_t *p, const meld_cmd_t *cmd, uint64_t *index);

/* Shorthand for a WRITE command (flag_region MELD_REGION_NONE: no flag). */
meld_result_t meld_proxy_write(meld_proxy_t *p, int dst_rank, uint32_t src_region,
                               uint64_t src_offset, uint32_t dst_region, uint64_t dst_offset,
                               uint64_t bytes, uint32_t flag_region, uint32_t flag_index,
                               uint64_t flag_value);

/* Commands [0, done) no longer read their source bytes (acquire). */
uint64_t meld_proxy_done(meld_proxy_t *p);

/* Waits (bounded by timeout_ms) until every enqueued command was handed to the transport
 * and is locally complete. Fails: MELD_ERR_TIMEOUT, the proxy's sticky error. */
meld_result_t meld_proxy_flush(meld_proxy_t *p, int64_t timeout_ms);

/* MELD_OK, or the proxy's sticky error (its own, the transport's, or an abort) with its
 * sentence as this thread's meld_last_error(). Any thread. */
meld_result_t meld_proxy_check(meld_proxy_t *p);

/* Host-side waiter: waits until the u64 at flag (8-byte aligned, written by the transport's
 * receiver) reaches target (stamps: observed >= target), with acquire; bounded by timeout_ms;
 * returns early with the proxy's error (e.g. a dead peer). what names the wait in the
 * timeout's sentence (may be NULL). Fails: MELD_ERR_TIMEOUT (with the observed value), the
 * proxy's sticky error, MELD_ERR_INVALID_ARG. */
meld_result_t meld_proxy_wait_flag(meld_proxy_t *p, const uint64_t *flag, uint64_t target,
                                   int64_t timeout_ms, const char *what);

/* Stops the proxy: it fails with MELD_ERR_ABORTED, producers and waiters return, and a send
 * in progress gives up. Any thread. */
void meld_proxy_abort(meld_proxy_t *p);

/* Drains what is enqueued (bounded by the timeout), stops and joins the thread, frees p.
 * Returns MELD_OK, or the proxy's error (also the commands left undrained). NULL: MELD_OK.
 * Then close the transport. */
meld_result_t meld_proxy_destroy(meld_proxy_t *p);

#ifdef __cplusplus
}
#endif

#endif
