/* gpu_test.h — a small harness for GPU test programs (cmocka is not on the GPU machines).
 *
 * Each check prints one line; the program ends with the same summary lines as cmocka
 * ("[  PASSED  ] N test(s)." / "[  FAILED  ] N test(s)") so tests/run.sh can sum them.
 *
 * Multi-rank tests: gt_spawn(nranks, fn) forks nranks processes BEFORE any CUDA call, each
 * with torchrun-style variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
 * MASTER_PORT = a free port); the child selects GPU LOCAL_RANK % device count, runs fn(rank,
 * nranks) and exits with the number of failed checks. The parent waits (GT_SPAWN_TIMEOUT_S,
 * default 120 s; then kills) and returns the number of failed ranks.
 *
 * Shared GPUs: with MELD_SHARE_GPU=1 every GPU hosts GT_RANKS_PER_GPU ranks (2..8, default 2;
 * gt_device_count() reports that many times the GPUs present, gt_device_for(rank) picks
 * rank % GPUs): on one GPU the tests then run their multi-rank cases with processes whose
 * kernels take turns in time slices (~2.2 ms each on an H200). That checks the multi-rank
 * protocol (signals, epochs, credits, slots, deadlines; P > 2 where only 2 GPUs exist) with one
 * GPU; not NVLink, not concurrency, not speed. Give waits a longer MELD_TIMEOUT_MS. gt_reps(n)
 * shortens long back-to-back loops when more than two ranks share a GPU. */
#ifndef MELD_GPU_TEST_H
#define MELD_GPU_TEST_H

#include <arpa/inet.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "meld.h"

/* Counters shared by a process's threads (test_inproc runs ranks as threads); the rank is
 * per thread. */
static int gt_passed = 0, gt_failed = 0;
static __thread int gt_rank = -1;

#define GT_CHECK(cond, ...)                                                         \
  do {                                                                              \
    if (cond) {                                                                     \
      __atomic_fetch_add(&gt_passed, 1, __ATOMIC_RELAXED);                          \
    } else {                                                                        \
      __atomic_fetch_add(&gt_failed, 1, __ATOMIC_RELAXED);                          \
      fprintf(stdout, "[rank %d] FAIL %s:%d: ", gt_rank, __FILE__, __LINE__);       \
      fprintf(stdout, __VA_ARGS__);                                                 \
      fprintf(stdout, "\n");                                                        \
      fflush(stdout);                                                               \
    }                                                                               \
  } while (0)

/* A meld call that must succeed; prints meld_last_error() otherwise. */
#define GT_MELD(call)                                                                    \
  do {                                                                                   \
    meld_result_t gt_r_ = (call);                                                        \
    GT_CHECK(gt_r_ == MELD_OK, "%s -> %s: %s", #call, meld_strerror(gt_r_), meld_last_error()); \
  } while (0)

#define GT_CUDA(call)                                                                    \
  do {                                                                                   \
    cudaError_t gt_e_ = (call);                                                          \
    GT_CHECK(gt_e_ == cudaSuccess, "%s -> %s", #call, cudaGetErrorString(gt_e_));        \
  } while (0)

static inline void gt_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void gt_log(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("[rank %d] ", gt_rank);
  vprintf(fmt, ap);
  printf("\n");
  fflush(stdout);
  va_end(ap);
}

static inline double gt_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Prints the summary lines; returns the process exit status. */
static inline int gt_summary(const char *name) {
  printf("%s: %d checks passed, %d failed\n", name, gt_passed, gt_failed);
  if (gt_failed == 0) printf("[  PASSED  ] 1 test(s).\n");
  else printf("[  FAILED  ] 1 test(s), listed below:\n[  FAILED  ] %s\n", name);
  fflush(stdout);
  return gt_failed ? 1 : 0;
}

static int gt_gpus = -1; /* GPUs present (the probe's answer) */

static inline int gt_share_gpu(void) {
  const char *s = getenv("MELD_SHARE_GPU");
  return s && strcmp(s, "1") == 0;
}

/* Ranks per GPU: 1, or GT_RANKS_PER_GPU (default 2) with MELD_SHARE_GPU=1. */
static inline int gt_ranks_per_gpu(void) {
  if (!gt_share_gpu()) return 1;
  const char *s = getenv("GT_RANKS_PER_GPU");
  const int n = s ? atoi(s) : 2;
  return n < 2 ? 2 : n > 8 ? 8 : n;
}

/* The GPU of a rank: ranks take the GPUs present in turn. */
static inline int gt_device_for(int rank) { return gt_gpus > 0 ? rank % gt_gpus : 0; }

/* n calls of a back-to-back loop; a tenth (at least 20) when more than two ranks share a GPU. */
static inline int gt_reps(int n) { return gt_ranks_per_gpu() > 2 ? (n / 10 > 20 ? n / 10 : 20) : n; }

/* How many ranks the tests may spawn: the GPUs present (times gt_ranks_per_gpu()). */
static inline int gt_device_count(void) {
  if (gt_gpus >= 0) return gt_ranks_per_gpu() * gt_gpus;
  /* Fork a probe so the parent never initializes CUDA (children need a clean fork). */
  int fds[2];
  if (pipe(fds) != 0) return 0;
  pid_t pid = fork();
  if (pid == 0) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
    if (write(fds[1], &n, sizeof n) != (ssize_t)sizeof n) _exit(1);
    _exit(0);
  }
  int n = 0;
  close(fds[1]);
  if (read(fds[0], &n, sizeof n) != (ssize_t)sizeof n) n = 0;
  close(fds[0]);
  waitpid(pid, NULL, 0);
  gt_gpus = n;
  return gt_ranks_per_gpu() * n;
}

static inline int gt_free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 29500 + (getpid() % 1000) * 2;
  if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0) close(fd);
  /* meld uses MASTER_PORT + 1: keep both in range. */
  return port < 65000 ? port : 29500;
}

typedef void (*gt_rank_fn)(int rank, int nranks);

/* Runs fn on nranks forked processes. extra_env(rank) may set more variables (or NULL).
 * Returns the number of ranks that failed (non-zero exit, signal, or timeout). */
static inline int gt_spawn_env(int nranks, gt_rank_fn fn, void (*extra_env)(int rank)) {
  int port = gt_free_port();
  pid_t pids[64];
  int ndev = gt_device_count();
  for (int r = 0; r < nranks; r++) {
    pid_t pid = fork();
    if (pid == 0) {
      char buf[32];
      snprintf(buf, sizeof buf, "%d", r); setenv("RANK", buf, 1); setenv("LOCAL_RANK", buf, 1);
      snprintf(buf, sizeof buf, "%d", nranks); setenv("WORLD_SIZE", buf, 1); setenv("LOCAL_WORLD_SIZE", buf, 1);
      snprintf(buf, sizeof buf, "%d", port); setenv("MASTER_PORT", buf, 1);
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      if (extra_env) extra_env(r);
      gt_rank = r;
      gt_passed = gt_failed = 0;
      if (ndev > 0) cudaSetDevice(gt_device_for(r));
      fn(r, nranks);
      fflush(stdout);
      _exit(gt_failed > 0 ? 1 : 0);
    }
    pids[r] = pid;
  }
  int failed = 0;
  double deadline = gt_now_s() + (getenv("GT_SPAWN_TIMEOUT_S") ? atof(getenv("GT_SPAWN_TIMEOUT_S")) : 120.0);
  for (int r = 0; r < nranks; r++) {
    int status = 0;
    for (;;) {
      pid_t w = waitpid(pids[r], &status, WNOHANG);
      if (w == pids[r]) break;
      if (gt_now_s() > deadline) {
        printf("[spawn] rank %d still running at the deadline: killing it\n", r);
        kill(pids[r], SIGKILL);
        waitpid(pids[r], &status, 0);
        status = 1 << 8;
        break;
      }
      usleep(10000);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      failed++;
      printf("[spawn] rank %d failed (%s %d)\n", r, WIFEXITED(status) ? "exit" : "signal",
             WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    }
  }
  return failed;
}

static inline int gt_spawn(int nranks, gt_rank_fn fn) { return gt_spawn_env(nranks, fn, NULL); }

/* A rank thread's start when ranks are threads of one process (test_inproc, test_ring_attn):
 * this thread's rank for the log, GPU rank % ndev, a communicator with bootstrap deadline 20 s
 * and device deadline timeout_ms (*cfg keeps that config for more comms), and a non-blocking
 * stream. 0 on success (failures are counted and logged). */
/* Ranks as threads of one process: their kernels wait for each other's, so no host call may wait
 * for the device meanwhile, and no two ranks' streams may share a hardware queue: every module
 * loaded at start (lazy loading waits for the device at a kernel's first launch), 32 queues
 * (default 8: at 4+ ranks the CE side streams alias; session 25 saw 4-rank CE and 8-rank
 * first-launch stalls). Call before any CUDA call; a value set by the user wins. */
static inline void gt_inproc_env(void) {
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
}

static inline int gt_thread_comm(int rank, int nranks, int ndev, meld_unique_id id, int64_t timeout_ms,
                                 meld_config_t *cfg, meld_comm_t *comm, cudaStream_t *st) {
  gt_rank = rank;
  GT_CUDA(cudaSetDevice(rank % ndev));
  meld_config_t c = MELD_CONFIG_INIT;
  c.bootstrap_timeout_ms = 20000;
  c.timeout_ms = timeout_ms;
  *cfg = c;
  *comm = NULL;
  GT_MELD(meld_comm_init(comm, nranks, id, rank, cfg));
  if (!*comm) return 1;
  GT_CUDA(cudaStreamCreateWithFlags(st, cudaStreamNonBlocking));
  return 0;
}

/* The next rank count of a comma list ("1,2,4") at *s, which advances past it: the count, 0 at the
 * list's end, or -1 (a message naming prog and the list) when it is not a number in 1..max. */
static inline int gt_next_count(const char **s, int max, const char *prog, const char *list) {
  if (!**s) return 0;
  char *end = NULL;
  const long n = strtol(*s, &end, 10);
  if (end == *s || n < 1 || n > max) {
    fprintf(stderr, "%s: rank counts '%s': a list of 1..%d\n", prog, list, max);
    return -1;
  }
  *s = *end ? end + 1 : end;
  return (int)n;
}

/* GPUs present into *ndev; 1 if GPU 0 is a Hopper (sm_90), else 0: the ranks-as-threads programs'
 * probe (they skip without one). */
static inline int gt_hopper(int *ndev) {
  cudaDeviceProp prop;
  return cudaGetDeviceCount(ndev) == cudaSuccess && *ndev >= 1 && cudaGetDeviceProperties(&prop, 0) == cudaSuccess &&
         prop.major == 9;
}

/* Ranks as threads (tests of one process): fn((void *)rank) on P threads, with *bar a barrier of
 * the P threads while they run; returns when all have ended. */
static inline void gt_run_ranks(int P, void *(*fn)(void *), pthread_barrier_t *bar) {
  pthread_t th[64];
  pthread_barrier_init(bar, NULL, (unsigned)P);
  for (int r = 0; r < P && r < 64; r++) pthread_create(&th[r], NULL, fn, (void *)(intptr_t)r);
  for (int r = 0; r < P && r < 64; r++) pthread_join(th[r], NULL);
  pthread_barrier_destroy(bar);
}

/* A bf16's value (bit pattern) as a float, on the host. */
static inline float bf2f(uint16_t x) {
  uint32_t u = (uint32_t)x << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* Deterministic pseudo-random generator for test data (xorshift64*). */
static inline uint64_t gt_rand_u64(uint64_t *s) {
  *s ^= *s >> 12; *s ^= *s << 25; *s ^= *s >> 27;
  return *s * 0x2545F4914F6CDD1Dull;
}
static inline float gt_rand_f(uint64_t *s) { /* uniform in [-1, 1) */
  return (float)((gt_rand_u64(s) >> 40) * (1.0 / (1ull << 23)) - 1.0);
}

/* Test data on the device: a pseudo-random bf16 in [-1, 1) for element i, never zero
 * (|x| >= 1/64: a zero would hide a missing product term). One generator for every GPU test
 * and benchmark. */
__device__ __forceinline__ uint16_t gt_rand_bf16(uint64_t i, uint64_t seed) {
  uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed * 0xD1B54A32D192ED03ull;
  h ^= h >> 31;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 29;
  float f = (float)((h >> 40) * (1.0 / (1 << 23))) - 1.0f;
  if (fabsf(f) < 1.0f / 64) f = 0.5f;
  __nv_bfloat16 b = __float2bfloat16(f);
  return *(uint16_t *)&b;
}

/* p[0..n) = gt_rand_bf16(i, seed). */
__global__ void gt_fill_bf16(uint16_t *p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = gt_rand_bf16(i, seed);
}

/* A rows x cols e4m3 matrix with leading dimension ld: element (r, c) = 2 x gt_rand_bf16(r * cols
 * + c) rounded to e4m3 (never zero: |x| >= 1/32; never NaN). */
__global__ void gt_fill_e4m3(uint8_t *p, int64_t rows, int64_t cols, int64_t ld, uint64_t seed) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const uint16_t h = gt_rand_bf16((uint64_t)i, seed);
    const float f = 2.0f * __bfloat162float(*(const __nv_bfloat16 *)&h);
    p[(i / cols) * ld + i % cols] = (uint8_t)__nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3);
  }
}

/* The value of an e4m3 byte on the host (OCP E4M3: bias 7, subnormals, 0x7f / 0xff NaN). */
static inline float gt_e4m3_value(uint8_t b) {
  const int e = (b >> 3) & 15, m = b & 7;
  if (e == 15 && m == 7) return NAN;
  const float v = e ? ldexpf(1.0f + m / 8.0f, e - 7) : ldexpf(m / 8.0f, -6);
  return (b & 0x80) ? -v : v;
}

/* A rows x cols matrix with leading dimension ld: element (r, c) = gt_rand_bf16(r * cols + c). */
__global__ void gt_fill_bf16_2d(uint16_t *p, int64_t rows, int64_t cols, int64_t ld, uint64_t seed) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    p[(i / cols) * ld + i % cols] = gt_rand_bf16((uint64_t)i, seed);
}

#endif
