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

/* Runs fn(ctx, i % sets) `calls` times back-to-back on stream st and samples NVML
 * every ~2 ms until they are done; samples of the first half are dropped (warming up). */
typedef void (*soak_fn)(void *ctx, int set);
static inline void soak_run_on(const soak_nvml_t *n, soak_fn fn, void *ctx, int sets, int calls, cudaStream_t st,
                               soak_result_t *r) {
  memset(r, 0, sizeof *r);
  r->calls = calls;
  r->min_mhz = ~0u;
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaEventRecord(e0, st);
  for (int i = 0; i < calls; i++) fn(ctx, i % sets);
  cudaEventRecord(e1, st);
  enum { MAXS = 4096 };
  static unsigned mhz[MAXS], mw[MAXS];
  static unsigned long long rs[MAXS];
  static double ts[MAXS];
  int ns = 0;
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  const struct timespec nap = {0, 2000000};
  while (cudaEventQuery(e1) == cudaErrorNotReady) {
    if (n->lib && ns < MAXS) {
      mhz[ns] = 0; mw[ns] = 0; rs[ns] = 0;
      n->clock(n->dev, 1 /* NVML_CLOCK_SM */, &mhz[ns]);
      n->power(n->dev, &mw[ns]);
      if (n->reasons) n->reasons(n->dev, &rs[ns]);
      struct timespec t;
      clock_gettime(CLOCK_MONOTONIC, &t);
      ts[ns] = (t.tv_sec - t0.tv_sec) * 1e3 + (t.tv_nsec - t0.tv_nsec) * 1e-6;
      ns++;
    }
    nanosleep(&nap, NULL);
  }
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  r->ms_per_call = calls ? ms / calls : 0;
  const char *tr = getenv("BENCH_SOAK_TRACE"); /* the series, one line per ~20 ms: how fast the clock settles */
  if (tr && *tr == '1')
    for (int i = 0, next = 0; i < ns; i++)
      if (ts[i] >= next) {
        printf("  soak trace %7.1f ms  SM %5u MHz  %5.0f W  reasons 0x%llx\n", ts[i], mhz[i], mw[i] * 1e-3, rs[i]);
        next += 20;
      }
  double sm = 0, pw = 0;
  for (int i = ns / 2; i < ns; i++) {
    sm += mhz[i]; pw += mw[i] * 1e-3;
    r->reasons |= rs[i];
    if (mhz[i] < r->min_mhz) r->min_mhz = mhz[i];
    if (mhz[i] > r->max_mhz) r->max_mhz = mhz[i];
    r->samples++;
  }
  if (r->samples) { r->sm_mhz = sm / r->samples; r->power_w = pw / r->samples; }
  else r->min_mhz = 0;
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
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
