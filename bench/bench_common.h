/* bench_common.h — what every meld benchmark shares: environment facts for the JSON lines
 * (BENCH.md keys gpu, driver, cuda, date, commit), medians, event timing, and CK. */
#ifndef MELD_BENCH_COMMON_H
#define MELD_BENCH_COMMON_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* CK(call): a CUDA runtime call a bench cannot go on without (prints where, exits 1). */
#define CK(call)                                                                              \
  do {                                                                                        \
    cudaError_t e_ = (call);                                                                  \
    if (e_ != cudaSuccess) {                                                                  \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));   \
      exit(1);                                                                                \
    }                                                                                         \
  } while (0)

typedef struct {
  char gpu[128], driver[32], cuda[32], date[32], commit[64];
} bench_env_t;

static inline void bench_env(bench_env_t *e, int device) {
  memset(e, 0, sizeof *e);
  struct cudaDeviceProp p;
  if (cudaGetDeviceProperties(&p, device) == cudaSuccess) snprintf(e->gpu, sizeof e->gpu, "%.100s", p.name);
  int v = 0;
  cudaDriverGetVersion(&v);
  snprintf(e->driver, sizeof e->driver, "%d.%d", v / 1000, (v % 1000) / 10);
  cudaRuntimeGetVersion(&v);
  snprintf(e->cuda, sizeof e->cuda, "%d.%d", v / 1000, (v % 1000) / 10);
  FILE *f = popen("nvidia-smi --query-gpu=driver_version --format=csv,noheader -i 0 2>/dev/null", "r");
  if (f) {
    char b[32] = "";
    if (fgets(b, sizeof b, f) && b[0]) {
      b[strcspn(b, "\n")] = 0;
      snprintf(e->driver, sizeof e->driver, "%.30s", b);
    }
    pclose(f);
  }
  time_t t = time(NULL);
  strftime(e->date, sizeof e->date, "%Y-%m-%d", gmtime(&t));
  const char *c = getenv("BENCH_COMMIT");
  snprintf(e->commit, sizeof e->commit, "%.60s", c ? c : "unknown");
  if (!c) {
    f = popen("git rev-parse --short HEAD 2>/dev/null", "r");
    if (f) {
      char b[64] = "";
      if (fgets(b, sizeof b, f) && b[0]) {
        b[strcspn(b, "\n")] = 0;
        snprintf(e->commit, sizeof e->commit, "%.60s", b);
      }
      pclose(f);
    }
  }
}

static inline int bench_cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

static inline float bench_median(float *v, int n) {
  qsort(v, (size_t)n, sizeof *v, bench_cmp_float);
  return n % 2 ? v[n / 2] : 0.5f * (v[n / 2 - 1] + v[n / 2]);
}

/* BENCH_SHAPE_PAUSE_MS (default 0): the GPU idles this long before each shape, so that burst
 * rows do not inherit the clock a previous heavy shape left (session 19: a decode row of
 * bench_gemm_rs --decode read 26% slower right after its 512-row rows than run alone). */
static inline void bench_shape_pause(void) {
  const char *s = getenv("BENCH_SHAPE_PAUSE_MS");
  const int ms = s ? atoi(s) : 0;
  if (ms <= 0) return;
  cudaDeviceSynchronize();
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

/* BENCH_VARIANTS (a comma list; unset = all): 1 if the variant `name` is to be timed. Benches
 * with many variants time only these (and their baselines if listed), so a device call spends
 * its minutes on the rows it is about. */
static inline int bench_variant_wanted(const char *name) {
  const char *l = getenv("BENCH_VARIANTS");
  if (!l || !*l) return 1;
  const size_t n = strlen(name);
  for (const char *p = l; *p;) {
    const char *e = strchr(p, ',');
    const size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == n && !strncmp(p, name, n)) return 1;
    if (!e) break;
    p = e + 1;
  }
  return 0;
}

/* Sustained timing (BENCH_SETTLE_MS, default 0 = off): before a row's timed calls it runs back-to-back
 * for about this long, so the GPU is timed at the clock its power cap holds under steady load
 * (an H200 under a large GEMM settles near 1450 MHz at its 700 W cap within tens of ms;
 * short bursts after idle run faster: docs/perf-notes.md, session 8). 0 keeps the burst timing. */
static inline int bench_settle_ms(void) {
  const char *e = getenv("BENCH_SETTLE_MS");
  const int v = e ? atoi(e) : 0;
  return v > 0 ? v : 0;
}

/* How many calls of ms_per_call fill settle_ms (0 when settling is off; at most 100000). */
static inline int bench_settle_calls(float ms_per_call, int settle_ms) {
  if (settle_ms <= 0) return 0;
  if (!(ms_per_call > 1e-4f)) ms_per_call = 1e-4f;
  const double n = settle_ms / ms_per_call;
  return n > 100000 ? 100000 : (int)n + 1;
}

#ifdef __cplusplus
#include <pthread.h>
/* The arguments of a bench whose ranks are threads of one process (bench_ring_attn, bench_moe):
 * --ranks P, --long / --quick (*lng 1 / 0), --calls N, --samples N, --json FILE. 0, or 2 after a
 * usage line. */
static inline int bench_inproc_args(int argc, char **argv, int *P, int *lng, int *calls, int *samples, const char **json) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--ranks") && i + 1 < argc) *P = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--long")) *lng = 1;
    else if (!strcmp(argv[i], "--quick")) *lng = 0; /* (the default rows) */
    else if (!strcmp(argv[i], "--calls") && i + 1 < argc) *calls = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--samples") && i + 1 < argc) *samples = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--json") && i + 1 < argc) *json = argv[++i];
    else {
      fprintf(stderr, "usage: %s [--ranks P] [--long | --quick] [--calls N] [--samples N] [--json FILE]\n", argv[0]);
      return 2;
    }
  }
  return 0;
}

/* Seconds since the first call (a monotonic clock: the sample log's time axis). */
static inline double bench_wall_s(void) {
  static struct timespec t0;
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  if (!t0.tv_sec && !t0.tv_nsec) t0 = t;
  return (double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec);
}

/* The process's lead-in before its first timed variant (BENCH_LEADIN_MS; default 2000 when
 * BENCH_SETTLE_MS is on, else 0; _or: with another default, e.g. the soak benches' 2000). Session 35 (one H200, nvidia-smi every 50 ms): ~1 s after a
 * process's load begins the power-cap controller overshoots, the SM clock dips to ~765 MHz for
 * ~0.5 s, then it holds 1150-1450 MHz; a variant timed in the dip read 1.4-1.6x slow (the "first
 * A/B variant" of sessions 34-35). Per-variant settling (200 ms) cannot absorb it. */
static inline int bench_leadin_ms_or(int dflt) {
  const char *e = getenv("BENCH_LEADIN_MS");
  if (e && *e) return atoi(e) > 0 ? atoi(e) : 0;
  return dflt;
}
static inline int bench_leadin_ms(void) { return bench_leadin_ms_or(bench_settle_ms() > 0 ? 2000 : 0); }

/* Unrecorded calls of ms_per_call that fill bench_leadin_ms(), the first time a process asks (0
 * after, and 0 when the lead-in is off): added to that row's settle calls by the benches that
 * settle (every rank makes rank 0's number: they pair up). */
static inline int bench_leadin_calls(float ms_per_call) {
  static int asked; /* (one per bench: this header is included once) */
  if (asked) return 0;
  asked = 1;
  const int ms = bench_leadin_ms();
  if (ms <= 0) return 0;
  if (!(ms_per_call > 1e-4f)) ms_per_call = 1e-4f;
  const double n = ms / ms_per_call;
  return n > 1000000 ? 1000000 : (int)n + 1;
}

/* One variant of a bench whose ranks are threads of one process (bench_ring_attn, bench_moe), on
 * every rank: 3 warm-up calls of run(), one timed call (rank 0's time sets *settle, the calls that
 * fill BENCH_SETTLE_MS, plus the process's lead-in the first time, for every rank: the ranks'
 * calls must pair up), those settle calls, then `samples` (<= 16) samples of `calls` back-to-back
 * calls, each started after a barrier. Returns this rank's median ms a call (events e0, e1 on
 * stream st). */
template <class Run>
static inline float bench_rank_time(Run run, cudaStream_t st, cudaEvent_t e0, cudaEvent_t e1, pthread_barrier_t *bar,
                                    int rank, int *settle, int calls, int samples) {
  for (int i = 0; i < 3; i++) run();
  cudaEventRecord(e0, st);
  run();
  cudaEventRecord(e1, st);
  cudaEventSynchronize(e1);
  float est = 0;
  cudaEventElapsedTime(&est, e0, e1);
  if (rank == 0) *settle = bench_settle_calls(est, bench_settle_ms()) + bench_leadin_calls(est);
  pthread_barrier_wait(bar);
  const int n = *settle;
  for (int i = 0; i < n; i++) run();
  cudaStreamSynchronize(st);
  float t[16];
  for (int smp = 0; smp < samples; smp++) {
    pthread_barrier_wait(bar);
    cudaEventRecord(e0, st);
    for (int i = 0; i < calls; i++) run();
    cudaEventRecord(e1, st);
    cudaEventSynchronize(e1);
    cudaEventElapsedTime(&t[smp], e0, e1);
    t[smp] /= (float)calls;
    if (rank == 0 && getenv("BENCH_SAMPLE_LOG")) /* each sample with its time since the process began */
      fprintf(stderr, "sample %d t=%.3f s %.4f ms a call\n", smp, bench_wall_s(), t[smp]);
  }
  return bench_median(t, samples);
}
#endif

#endif
