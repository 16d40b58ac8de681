/* trace.c — device timeline buffers and Chrome/Perfetto trace JSON. */
#include "trace.h"

#include <cuda_runtime_api.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "log.h"

struct meld_trace {
  meld_trace_event_t *events; /* device */
  uint32_t *counts;           /* device */
  uint32_t max_ctas, cap;
};

const char *meld_role_name(int role) {
  switch (role) {
  case MELD_ROLE_COMM: return "comm";
  case MELD_ROLE_COMPUTE: return "compute";
  case MELD_ROLE_WAIT: return "wait";
  case MELD_ROLE_REDUCE: return "reduce";
  case MELD_ROLE_ROUTE: return "route";
  default: return "other";
  }
}

meld_result_t meld_trace_create(uint32_t max_ctas, uint32_t cap_per_cta, meld_trace_t **out) {
  if (!out || !max_ctas || !cap_per_cta)
    return meld_error(MELD_ERR_INVALID_ARG, "meld_trace_create: %s", !out ? "out is NULL" : "zero size");
  *out = NULL;
  meld_trace_t *t = calloc(1, sizeof *t);
  if (!t) return meld_error(MELD_ERR_OUT_OF_MEMORY, "meld_trace_create: out of host memory");
  t->max_ctas = max_ctas;
  t->cap = cap_per_cta;
  size_t ev_bytes = (size_t)max_ctas * cap_per_cta * sizeof(meld_trace_event_t);
  meld_result_t res = MELD_OK;
  MELD_CUDA_CHECK_GOTO(cudaMalloc((void **)&t->events, ev_bytes), res, fail);
  MELD_CUDA_CHECK_GOTO(cudaMalloc((void **)&t->counts, max_ctas * sizeof(uint32_t)), res, fail);
  MELD_CUDA_CHECK_GOTO(cudaMemset(t->counts, 0, max_ctas * sizeof(uint32_t)), res, fail);
  *out = t;
  return MELD_OK;
fail:
  meld_trace_destroy(t);
  return res;
}

meld_trace_dev_t meld_trace_dev(const meld_trace_t *t) {
  meld_trace_dev_t d;
  memset(&d, 0, sizeof d);
  if (t) {
    d.events = t->events;
    d.counts = t->counts;
    d.cap_per_cta = t->cap;
    d.max_ctas = t->max_ctas;
  }
  return d;
}

meld_result_t meld_trace_reset(meld_trace_t *t, cudaStream_t stream) {
  if (!t) return MELD_OK;
  MELD_CUDA_CHECK(cudaMemsetAsync(t->counts, 0, t->max_ctas * sizeof(uint32_t), stream));
  return MELD_OK;
}

void meld_trace_destroy(meld_trace_t *t) {
  if (!t) return;
  cudaFree(t->events);
  cudaFree(t->counts);
  free(t);
}

long meld_trace_write_json(FILE *f, const meld_trace_event_t *ev, const uint32_t *counts,
                           uint32_t max_ctas, uint32_t cap, int rank) {
  uint64_t base = UINT64_MAX;
  for (uint32_t c = 0; c < max_ctas; c++) {
    uint32_t n = counts[c] < cap ? counts[c] : cap;
    for (uint32_t i = 0; i < n; i++)
      if (ev[(size_t)c * cap + i].start_ns < base) base = ev[(size_t)c * cap + i].start_ns;
  }
  if (base == UINT64_MAX) base = 0;
  long written = 0;
  fprintf(f, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"meld_rank\":%d,\"meld_base_ns\":%llu},\n"
             "\"traceEvents\":[\n",
          rank, (unsigned long long)base);
  fprintf(f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"rank %d\"}}",
          rank, rank);
  for (uint32_t c = 0; c < max_ctas; c++) {
    uint32_t n = counts[c] < cap ? counts[c] : cap;
    if (!n) continue;
    const meld_trace_event_t *e0 = &ev[(size_t)c * cap];
    fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%u,\"args\":{\"name\":\"CTA %u\"}}",
            rank, c, c);
    fprintf(f, ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%u,\"args\":{\"sort_index\":%u}}",
            rank, c, c);
    for (uint32_t i = 0; i < n; i++) {
      const meld_trace_event_t *e = &e0[i];
      uint64_t s = e->start_ns - base, d = e->end_ns >= e->start_ns ? e->end_ns - e->start_ns : 0;
      /* Microseconds with exact nanosecond digits (no double rounding of large values). */
      fprintf(f,
              ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%u,"
              "\"ts\":%llu.%03llu,\"dur\":%llu.%03llu,\"args\":{\"item\":%u,\"epoch\":%u}}",
              meld_role_name(e->role), meld_role_name(e->role), rank, c,
              (unsigned long long)(s / 1000), (unsigned long long)(s % 1000),
              (unsigned long long)(d / 1000), (unsigned long long)(d % 1000), e->item, e->epoch);
      written++;
    }
    if (counts[c] > cap)
      MELD_WARN(MELD_SUB_TRACE, "trace: CTA %u recorded %u events, buffer holds %u: %u dropped", c,
                counts[c], cap, counts[c] - cap);
  }
  fprintf(f, "\n]}\n");
  return ferror(f) ? -1 : written;
}

meld_result_t meld_trace_write(meld_trace_t *t, const char *path, int rank) {
  if (!t || !path) return meld_error(MELD_ERR_INVALID_ARG, "meld_trace_write: NULL argument");
  size_t nev = (size_t)t->max_ctas * t->cap;
  meld_trace_event_t *ev = malloc(nev * sizeof *ev);
  uint32_t *counts = malloc(t->max_ctas * sizeof *counts);
  meld_result_t res = MELD_OK;
  FILE *f = NULL;
  if (!ev || !counts) {
    res = meld_error(MELD_ERR_OUT_OF_MEMORY, "meld_trace_write: out of host memory");
    goto done;
  }
  MELD_CUDA_CHECK_GOTO(cudaDeviceSynchronize(), res, done);
  MELD_CUDA_CHECK_GOTO(cudaMemcpy(ev, t->events, nev * sizeof *ev, cudaMemcpyDeviceToHost), res, done);
  MELD_CUDA_CHECK_GOTO(cudaMemcpy(counts, t->counts, t->max_ctas * sizeof *counts, cudaMemcpyDeviceToHost),
                       res, done);
  f = fopen(path, "w");
  if (!f) {
    res = meld_error(MELD_ERR_SYSTEM, "meld_trace_write: cannot open %s: %s", path, strerror(errno));
    goto done;
  }
  long n = meld_trace_write_json(f, ev, counts, t->max_ctas, t->cap, rank);
  if (fclose(f) != 0 || n < 0) {
    f = NULL;
    res = meld_error(MELD_ERR_SYSTEM, "meld_trace_write: writing %s failed", path);
    goto done;
  }
  f = NULL;
  MELD_INFO(MELD_SUB_TRACE, "trace: %ld events written to %s", n, path);
done:
  if (f) fclose(f);
  free(ev);
  free(counts);
  return res;
}
