/* trace.cuh — per-CTA timeline events (role, work item, start, end) into a device buffer.
 *
 * Compiled in always; enabled at run time by a non-NULL buffer (meld_trace_dev_t.events).
 * CTA c owns events [c * cap, (c + 1) * cap) and counts[c]; a recorder takes its event's
 * index with an atomic add on counts[c], so several threads of a CTA may record (thread 0,
 * the engine's per-tile events, AG+GEMM's comm warps). The host writes the
 * buffer as Chrome/Perfetto JSON, one track per CTA (src/host/trace.c).
 *
 *   uint64_t t0 = meld_trace_now(&p->trace);          // 0 when tracing is off
 *   ... work on tile `item` ...
 *   meld_trace_record(&p->trace, MELD_ROLE_COMPUTE, item, epoch, t0);
 */
#ifndef MELD_DEVICE_TRACE_CUH
#define MELD_DEVICE_TRACE_CUH

#include "common/proto.h"
#include "device/ptx.cuh"

/* Start time of an event: %globaltimer, or 0 when tracing is off (no clock read). */
MELD_DEV uint64_t meld_trace_now(const meld_trace_dev_t *t) {
  return t->events ? globaltimer_ns() : 0;
}

/* Records one event of this CTA that began at start_ns and ends now. No-op when off. */
MELD_DEV void meld_trace_record(const meld_trace_dev_t *t, int role, uint32_t item, uint64_t epoch,
                                uint64_t start_ns) {
  if (!t->events) return;
  const uint32_t cta = blockIdx.x;
  if (cta >= t->max_ctas) return;
  const uint64_t end = globaltimer_ns();
  const uint32_t n = atomicAdd(&t->counts[cta], 1u); /* keeps counting past cap: the host reports the dropped ones */
  if (n < t->cap_per_cta) {
    meld_trace_event_t *e = t->events + (size_t)cta * t->cap_per_cta + n;
    e->start_ns = start_ns;
    e->end_ns = end;
    e->item = item;
    e->epoch = (uint32_t)epoch;
    e->role = (uint16_t)role;
    e->cta = (uint16_t)cta;
    e->pad_ = 0;
  }
}

#endif /* MELD_DEVICE_TRACE_CUH */
