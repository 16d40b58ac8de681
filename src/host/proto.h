/* proto.h (host) — the host side of the device protocol, for op launch code and tests.
 *
 * The comm's protocol state (created by meld_proto_create, declared in comm.h) holds:
 *   - in the signal pad (device memory, comm->pad): the abort word, the call counter, the
 *     per-call scratch, handshake/signal/credit slots (layout: src/common/proto.h);
 *   - in host-mapped pinned memory: the host abort word (polled by slow waits), the error
 *     record (claimed on the device, readable while a kernel is stuck) and the wait-for
 *     mirror (one entry per CTA);
 *   - a watchdog thread (period MELD_WATCHDOG_MS, default 1000) that logs the record once;
 *   - a non-blocking side stream for the abort writes and abort-word probes;
 *   - the trace buffer when MELD_TRACE / config.trace_path is set.
 *
 * How meld_comm_abort reaches a kernel that spins forever: a host write to device memory
 * needs a copy on some stream, and that copy may queue behind the stuck kernel (streams
 * share hardware queues). So the host first sets a word in host-mapped memory; every wait
 * that has spun for more than MELD_WAIT_MIRROR_AFTER_NS reads it (one PCIe read every
 * MELD_WAIT_CHECK_EVERY spins) and then raises the pad abort words, locally and at every
 * same-node peer, over NVLink. Then, best effort, the host also copies the abort code into
 * the local pad and every peer's pad on the side stream (no sync; bounded poll), which
 * reaches peers and later kernels when no kernel of ours is running. */
#ifndef MELD_HOST_PROTO_H
#define MELD_HOST_PROTO_H

#include <stdint.h>

#include "comm.h"
#include "common/proto.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The parameter every fused kernel gets (pass it by value as a __grid_constant__). Valid
 * from meld_comm_init until meld_comm_destroy. */
meld_proto_dev_t meld_proto_dev(struct meld_comm *comm);

/* The host address of the comm's host abort word (nonzero after meld_comm_abort), for the
 * proxy thread to poll. */
const uint32_t *meld_proto_host_abort(struct meld_comm *comm);

/* The name of op id `op` (MELD_OP_*), e.g. "ag_gemm", "signal_test". Never NULL. */
const char *meld_op_name(uint32_t op);

/* Formats a claimed error record as one sentence into buf (see meld_proto_check). */
void meld_proto_format_record(const meld_error_record_t *r, int timeout_ms, char *buf, size_t len);

/* Copies the host-mapped error record (zeroed kind = none) into *out. Safe while kernels run. */
void meld_proto_read_record(struct meld_comm *comm, meld_error_record_t *out);

/* For an op's entry: MELD_OK, or the comm's sticky device-protocol failure (timeout, abort,
 * argument mismatch) as MELD_ERR_TIMEOUT / MELD_ERR_ABORTED with "fn: <the record>", read
 * from the host-mapped record without touching the device (meld_comm_check does the full
 * probe). Ops call it instead of launching on a failed comm. */
meld_result_t meld_proto_sticky_error(struct meld_comm *comm, const char *fn);

/* Writes the wait-for picture (every CTA whose mirror says "waiting") into buf, one line per
 * CTA; returns the number of waiting CTAs. Safe while kernels run (a racy snapshot). */
int meld_proto_format_waits(struct meld_comm *comm, char *buf, size_t len);

/* The grid of a fused kernel: min(sm_count, occupancy(kernel, threads, smem) * sm_count),
 * further capped by max_ctas when > 0. Sets the kernel's dynamic shared-memory limit when
 * smem > 48 KiB. Fails with MELD_ERR_INVALID_ARG if not even one CTA fits on an SM (with a
 * sentence naming threads and shared memory), MELD_ERR_CUDA on a CUDA error. */
meld_result_t meld_coop_grid(const void *kernel, int threads, size_t smem, int max_ctas,
                             int sm_count, int *grid);

/* Launches `kernel` cooperatively (all CTAs co-resident or the launch fails: never a silent
 * hang) with `grid` CTAs (from meld_coop_grid), on `stream`; works under stream capture.
 * Fails with MELD_ERR_CUDA and a sentence (co-residency impossible: "cooperative launch of
 * 132 CTAs does not fit ..."). */
meld_result_t meld_launch_coop(const void *kernel, int grid, int threads, size_t smem, void **args,
                               cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* MELD_HOST_PROTO_H */
