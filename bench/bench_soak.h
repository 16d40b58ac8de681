/* bench_soak.h — a kernel run back-to-back for a while, with the GPU's SM clock, power and
 * clock-event reasons sampled meanwhile through NVML (loaded at run time: nothing to link,
 * and a machine without the driver just reports no samples). Answers "is this shape slower
 * per FLOP because the GPU runs it at a lower clock?" — Nsight Compute locks the clocks, so
 * its cycles cannot. Read-only queries: nothing here changes a clock or a limit. */
#ifndef MELD_BENCH_SOAK_H
#define MELD_BENCH_SOAK_H

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.h" /* bench_settle_calls */
#include "bootstrap.h"

typedef struct {
  double ms_per_call; /* wall time of the soak / calls, from two events */
  int calls;
  int samples;           /* NVML samples taken in the second half of the soak */
  double sm_mhz, power_w; /* their means */
  unsigned min_mhz, max_mhz;
  unsigned long long reasons; /* clock-event reasons seen (OR): 0x4 power cap, 0x8 HW slowdown,
                                 0x20 / 0x40 SW / HW thermal, 0x80 power brake */
} soak_result_t;

typedef struct {
  void *lib, *dev;
  int (*clock)(void *dev, int type, unsigned *mhz);
  int (*power)(void *dev, unsigned *mw);
  int (*reasons)(void *dev, unsigned long long *r);
} soak_nvml_t;

/* NVML for CUDA device `device`, or lib == NULL when unavailable. */
static inline void soak_nvml_open(soak_nvml_t *n, int device) {
  memset(n, 0, sizeof *n);
  void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return;
  int (*init)(void) = (int (*)(void))dlsym(lib, "nvmlInit_v2");
  int (*by_bus)(const char *, void **) = (int (*)(const char *, void **))dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
  n->clock = (int (*)(void *, int, unsigned *))dlsym(lib, "nvmlDeviceGetClockInfo");
  n->power = (int (*)(void *, unsigned *))dlsym(lib, "nvmlDeviceGetPowerUsage");
  n->reasons = (int (*)(void *, unsigned long long *))dlsym(lib, "nvmlDeviceGetCurrentClocksEventReasons");
  if (!n->reasons)
    n->reasons = (int (*)(void *, unsigned long long *))dlsym(lib, "nvmlDeviceGetCurrentClocksThrottleReasons");
  char bus[32];
  if (!init || !by_bus || !n->clock || !n->power || init() != 0 ||
      cudaDeviceGetPCIBusId(bus, sizeof bus, device) != cudaSuccess || by_bus(bus, &n->dev) != 0) {
    dlclose(lib);
    memset(n, 0, sizeof *n);
    return;
  }
  n->lib = lib;
}

/* The process's NVML handle for its current CUDA device, opened on first use. */
static inline const soak_nvml_t *soak_nvml(void) {
  static soak_nvml_t n;
  static int opened = 0;
  if (!opened) {
    int dev = 0;
    cudaGetDevice(&dev);
    soak_nvml_open(&n, dev);
    opened = 1;
  }
  return &n;
}

/* The samples of one soak: taken every ~2 ms from the first call's enqueue to the end. */
enum { SOAK_MAXS = 4096 };
typedef struct {
  unsigned mhz[SOAK_MAXS], mw[SOAK_MAXS];
  unsigned long long rs[SOAK_MAXS];
  double ts[SOAK_MAXS]; /* ms since the soak began */
  int n;
  struct timespec t0;
  double next_ms;
} soak_samples_t;

static inline double soak_now_ms(const soak_samples_t *q) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (t.tv_sec - q->t0.tv_sec) * 1e3 + (t.tv_nsec - q->t0.tv_nsec) * 1e-6;
}

/* One sample if ~2 ms passed since the last (the launch loop calls this between enqueues, so
 * samples span the whole soak even while the launch queue is full). */
static inline void soak_sample(const soak_nvml_t *n, soak_samples_t *q) {
  if (!n->lib || q->n >= SOAK_MAXS) return;
  const double now = soak_now_ms(q);
  if (now < q->next_ms) return;
  q->next_ms = now + 2.0;
  const int i = q->n++;
  q->mhz[i] = 0; q->mw[i] = 0; q->rs[i] = 0;
  n->clock(n->dev, 1 /* NVML_CLOCK_SM */, &q->mhz[i]);
  n->power(n->dev, &q->mw[i]);
  if (n->reasons) n->reasons(n->dev, &q->rs[i]);
  q->ts[i] = now;
}

/* Runs fn(ctx, i % sets) `calls` times back-to-back on stream st and samples NVML every ~2 ms
 * while they are enqueued and run; samples of the first half of the time are dropped (the
 * clock still settling). */
typedef void (*soak_fn)(void *ctx, int set);
static inline void soak_run_on(const soak_nvml_t *n, soak_fn fn, void *ctx, int sets, int calls, cudaStream_t st,
                               soak_result_t *r) {
  memset(r, 0, sizeof *r);
  r->calls = calls;
  r->min_mhz = ~0u;
  static soak_samples_t q; /* large: not on the stack */
  memset(&q, 0, sizeof q);
  clock_gettime(CLOCK_MONOTONIC, &q.t0);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaEventRecord(e0, st);
  for (int i = 0; i < calls; i++) {
    fn(ctx, i % sets);
    if ((i & 7) == 7) soak_sample(n, &q);
  }
  cudaEventRecord(e1, st);
  const struct timespec nap = {0, 1000000};
  while (cudaEventQuery(e1) == cudaErrorNotReady) {
    soak_sample(n, &q);
    nanosleep(&nap, NULL);
  }
  const double end_ms = soak_now_ms(&q);
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  r->ms_per_call = calls ? ms / calls : 0;
  const char *tr = getenv("BENCH_SOAK_TRACE"); /* the series, one line per ~20 ms: how fast the clock settles */
  if (tr && *tr == '1')
    for (int i = 0, next = 0; i < q.n; i++)
      if (q.ts[i] >= next) {
        printf("  soak trace %7.1f ms  SM %5u MHz  %5.0f W  reasons 0x%llx\n", q.ts[i], q.mhz[i], q.mw[i] * 1e-3,
               q.rs[i]);
        next += 20;
      }
  double sm = 0, pw = 0;
  for (int i = 0; i < q.n; i++) {
    if (q.ts[i] < 0.5 * end_ms) continue;
    sm += q.mhz[i]; pw += q.mw[i] * 1e-3;
    r->reasons |= q.rs[i];
    if (q.mhz[i] < r->min_mhz) r->min_mhz = q.mhz[i];
    if (q.mhz[i] > r->max_mhz) r->max_mhz = q.mhz[i];
    r->samples++;
  }
  if (r->samples) { r->sm_mhz = sm / r->samples; r->power_w = pw / r->samples; }
  else r->min_mhz = 0;
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
}

/* One soaked row in a multi-rank bench: rank 0 decides from its burst median how many calls
 * fill soak_ms (0 = skip the row: not timed), every rank follows (fn may be collective), the
 * ranks start together. boot NULL: one process. */
static inline void soak_row(meld_bootstrap_t *boot, soak_fn fn, void *ctx, float burst_ms, int soak_ms,
                            cudaStream_t st, soak_result_t *res) {
  int n = burst_ms > 0 ? bench_settle_calls(burst_ms, soak_ms) : 0;
  if (boot && meld_bootstrap_bcast(boot, &n, sizeof n, 0) != MELD_OK) n = 0;
  memset(res, 0, sizeof *res);
  if (n <= 0) return;
  cudaStreamSynchronize(st);
  if (boot) meld_bootstrap_barrier(boot);
  soak_run_on(soak_nvml(), fn, ctx, 1, n, st, res);
}

/* Unrecorded lead-in before each recorded soak (BENCH_SOAK_LEAD_MS, default 250; 0 = none):
 * the row's own load for a while first, so that its clock does not start from the previous
 * row's. Session 13 found a row soaked right after light rows (the comm-alone rows) read up
 * to 4.7% faster in that pass (bench_ag_gemm's meld_gemm row: 1.0225 vs 0.9752 ms). */
static inline int soak_lead_ms(void) {
  const char *e = getenv("BENCH_SOAK_LEAD_MS");
  const int v = e && *e ? atoi(e) : 250;
  return v > 0 ? v : 0;
}
/* soak_row after its lead-in (same calls on every rank: both follow rank 0's numbers). The
 * process's first soaked row leads in for at least BENCH_LEADIN_MS (default 2000; 0 = only the
 * row's own): ~1 s into a process's load the power cap's controller dips the clock to ~765 MHz
 * for ~0.5 s (session 35, bench_common.h bench_leadin_ms). */
static inline void soak_row_led(meld_bootstrap_t *boot, soak_fn fn, void *ctx, float burst_ms, int soak_ms,
                                cudaStream_t st, soak_result_t *res) {
  static int led;
  int lead = soak_lead_ms();
  if (!led && bench_leadin_ms_or(2000) > lead) lead = bench_leadin_ms_or(2000);
  led = 1;
  if (lead > 0) soak_row(boot, fn, ctx, burst_ms, lead, st, res);
  soak_row(boot, fn, ctx, burst_ms, soak_ms, st, res);
}

/* The mean of n soaks of one row (e.g. its passes of one orientation over several rounds):
 * times, clocks and power averaged, calls and samples summed, reasons OR-ed; passes that did
 * not run (calls 0) are left out. */
static inline void soak_mean(const soak_result_t *r, int n, soak_result_t *out) {
  memset(out, 0, sizeof *out);
  int k = 0;
  for (int i = 0; i < n; i++) {
    if (!r[i].calls) continue;
    out->ms_per_call += r[i].ms_per_call;
    out->sm_mhz += r[i].sm_mhz;
    out->power_w += r[i].power_w;
    out->calls += r[i].calls;
    out->samples += r[i].samples;
    out->reasons |= r[i].reasons;
    out->min_mhz = k == 0 || r[i].min_mhz < out->min_mhz ? r[i].min_mhz : out->min_mhz;
    out->max_mhz = r[i].max_mhz > out->max_mhz ? r[i].max_mhz : out->max_mhz;
    k++;
  }
  if (k) {
    out->ms_per_call /= k;
    out->sm_mhz /= k;
    out->power_w /= k;
  }
}

/* The line a soaked row prints: the mean of its two passes, each pass, the burst median. */
static inline void soak_print(int rank, const char *op, long long m, long long n, long long k, const char *label,
                              int width, const soak_result_t *a, const soak_result_t *b, double burst_ms) {
  printf("[rank %d] soak %-7s %5lld %5lld %5lld  %-*s %8.4f ms (passes %.4f %.4f; median %.4f)  SM %4.0f MHz  %3.0f W  "
         "reasons 0x%llx\n",
         rank, op, m, n, k, width, label, 0.5 * (a->ms_per_call + b->ms_per_call), a->ms_per_call, b->ms_per_call,
         burst_ms, 0.5 * (a->sm_mhz + b->sm_mhz), 0.5 * (a->power_w + b->power_w), a->reasons | b->reasons);
}

/* One JSON line (BENCH.md keys where they apply) for a soaked row: its two passes (either may
 * be NULL for one pass), their mean, the burst median it was planned from, clock and power. */
static inline void soak_json(FILE *f, const char *op, long long m, long long n, long long k, const char *variant,
                             int nranks, int rank, const soak_result_t *a, const soak_result_t *b, double burst_ms,
                             const char *gpu, const char *commit, const char *date) {
  if (!f || !a || !a->calls) return; /* (a row that was not soaked) */
  const soak_result_t *r[2] = {a, b && b->calls ? b : a};
  const double ms = 0.5 * (r[0]->ms_per_call + r[1]->ms_per_call);
  fprintf(f,
          "{\"op\": \"%s\", \"shape\": {\"m\": %lld, \"n\": %lld, \"k\": %lld}, \"variant\": \"%s\", \"nranks\": %d, "
          "\"nnodes\": 1, \"rank\": %d, \"dtype\": \"bf16\", \"timing\": \"soak\", \"meld_ms\": %.5f, "
          "\"soak_pass_ms\": [%.5f, %.5f], \"soak_calls\": %d, \"burst_median_ms\": %.5f, \"sm_mhz\": %.0f, "
          "\"power_w\": %.1f, \"clock_reasons\": %llu, \"gpu\": \"%s\", \"date\": \"%s\", \"commit\": \"%s\"}\n",
          op, m, n, k, variant, nranks, rank, ms, r[0]->ms_per_call, r[1]->ms_per_call, r[0]->calls, burst_ms,
          0.5 * (r[0]->sm_mhz + r[1]->sm_mhz), 0.5 * (r[0]->power_w + r[1]->power_w), r[0]->reasons | r[1]->reasons,
          gpu, date, commit);
  fflush(f);
}

static inline void soak_run(const soak_nvml_t *n, soak_fn fn, void *ctx, int sets, int calls, soak_result_t *r) {
  soak_run_on(n, fn, ctx, sets, calls, 0, r);
}

#endif
