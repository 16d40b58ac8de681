/* trace.h — device timeline buffers and their Chrome/Perfetto trace JSON (MELD_TRACE).
 *
 * A meld_trace_t owns a device buffer of events (src/common/proto.h meld_trace_event_t),
 * cap_per_cta per CTA, filled by src/device/trace.cuh; the host copies it back and writes
 * JSON with one process per rank and one track (thread) per CTA, named by role. Open the
 * file in https://ui.perfetto.dev or chrome://tracing, or draw it with tools/trace_png.py. */
#ifndef MELD_HOST_TRACE_H
#define MELD_HOST_TRACE_H

#include <stdint.h>
#include <stdio.h>

#include "common/proto.h"
#include "meld.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct meld_trace meld_trace_t;

/* Allocates a zeroed device trace buffer for max_ctas CTAs x cap_per_cta events.
 * Fails: MELD_ERR_INVALID_ARG (zero sizes), MELD_ERR_OUT_OF_MEMORY, MELD_ERR_CUDA. */
meld_result_t meld_trace_create(uint32_t max_ctas, uint32_t cap_per_cta, meld_trace_t **out);

/* The view kernels get (meld_proto_dev_t.trace). NULL t: tracing off (events == NULL). */
meld_trace_dev_t meld_trace_dev(const meld_trace_t *t);

/* Forgets recorded events (zeroes the counts on `stream`). */
meld_result_t meld_trace_reset(meld_trace_t *t, cudaStream_t stream);

/* Copies the events back (synchronizes the device) and writes them as trace JSON to `path`,
 * as rank `rank`. Fails: MELD_ERR_SYSTEM (file), MELD_ERR_CUDA. */
meld_result_t meld_trace_write(meld_trace_t *t, const char *path, int rank);

/* Frees the buffers. NULL is a no-op. */
void meld_trace_destroy(meld_trace_t *t);

/* The JSON writer alone (pure, CPU-testable): events of CTA c are ev[c * cap .. c * cap +
 * min(counts[c], cap)). Timestamps are microseconds after the earliest start; that base
 * (ns of %globaltimer) is written as otherData.meld_base_ns, so several ranks' files can be
 * aligned. Returns the number of events written, or -1 on a write error. */
long meld_trace_write_json(FILE *f, const meld_trace_event_t *ev, const uint32_t *counts,
                           uint32_t max_ctas, uint32_t cap, int rank);

/* "comm", "compute", "wait", "other". */
const char *meld_role_name(int role);

#ifdef __cplusplus
}
#endif

#endif /* MELD_HOST_TRACE_H */
