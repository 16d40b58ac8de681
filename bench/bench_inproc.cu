/* bench_inproc.cu — collectives with the ranks as threads of ONE process (meld_comm_init per
 * thread; peers of one process use each other's buffers by address, no CUDA IPC). With fewer
 * GPUs than ranks the ranks share GPUs (MELD_SHARE_GPU, set here): unlike ranks in different
 * processes, whose kernels take turns on a shared GPU, the threads' kernels run at the same
 * time, so on ONE GPU this times the multi-rank protocol as it runs (handshake, flags, done
 * signals between kernels in flight together), with the GPU's own memory in place of NVLink.
 * With one GPU per rank it is the one-process multi-GPU mode (like nccl-tests' -g).
 *
 * Per op (all-reduce, reduce-scatter, all-gather; bf16) and size, two kinds of buffers:
 *   ord: ordinary cudaMalloc buffers (LL / staged engines), sym: meld_mem_alloc (the plan's
 *   choice: LL below its size limit, else ZC; --zc: the ZC engine at every size).
 * Each row is checked first (recv poisoned, random inputs, rank-order fp32 reference, relative
 * error), then timed: CUDA graphs of --calls back-to-back calls, replayed --reps times per
 * sample, every rank starting a sample after a host barrier; per-call time = sample / calls
 * (a barrier's wake-up skew, tens of us, is spread over the calls). Also plain launches.
 * Rank 0 prints one line per row and appends JSON lines (--json).
 *
 * Usage: bench_inproc [--ranks P] [--sizes 4096,65536] [--calls 200] [--reps 3] [--samples 7]
 *                     [--only all_reduce|reduce_scatter|all_gather] [--kinds ord,sym]
 *                     [--zc] [--trace N] [--quick] [--json F] [--label L]
 * --trace N: per row N plain calls and no timing (with MELD_TRACE=path: one timeline per rank).
 * Host copies use pinned memory: a copy to pageable memory is done by the calling thread,
 * which waited there for its stream while the peers could not launch (a 3-rank run stalled
 * 3 s at a row's first call that way, session 22). Only the calling thread's stream is synchronized (never the device): a device-wide wait in
 * one rank's thread would wait for the other ranks' kernels, which wait for this rank. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>

#include "bench_common.h"
#include "coll_plan.h"
#include "meld.h"

#define IP_MAX_RANKS 8
static int g_P = 2, g_calls = 200, g_reps = 3, g_samples = 7, g_only = -1;
static int g_kind_ord = 1, g_kind_sym = 1, g_zc = 0, g_trace = 0;
static size_t g_sizes[32] = {4096, 65536, 1048576};
static int g_nsizes = 3;
static const char *g_json = NULL, *g_label = "";
static const char *const g_opname[] = {"all_gather", "reduce_scatter", "all_reduce"};

static meld_unique_id g_id;
static pthread_barrier_t g_bar;
static uint16_t *g_host_send[IP_MAX_RANKS]; /* each rank's send data (host copy) */
static float g_ms[IP_MAX_RANKS];             /* per-rank result of the last timing */
static double g_err[IP_MAX_RANKS];
static int g_failed;

#define IP_CK(call)                                                                            \
  do {                                                                                         \
    meld_result_t r_ = (call);                                                                 \
    if (r_ != MELD_OK) {                                                                       \
      fprintf(stderr, "rank %d: %s:%d %s: %s\n", rank, __FILE__, __LINE__, #call, meld_last_error()); \
      exit(1);                                                                                 \
    }                                                                                          \
  } while (0)

static uint64_t ip_rng(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}
static uint16_t f2bf(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even (finite inputs) */
  return (uint16_t)(u >> 16);
}
static float bf2f(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* count: elements of the op's "count" argument (NCCL convention); send / recv element counts. */
static void op_counts(int op, size_t bytes, int P, size_t *count, size_t *nsend, size_t *nrecv) {
  /* bytes = the op's total (nccl-tests' size): the gathered / reduced-from buffer */
  const size_t total = bytes / 2;
  switch (op) {
    case 0: *count = total / P, *nsend = *count, *nrecv = *count * P; break; /* all-gather */
    case 1: *count = total / P, *nsend = *count * P, *nrecv = *count; break; /* reduce-scatter */
    default: *count = total, *nsend = total, *nrecv = total; break;          /* all-reduce */
  }
}

/* kind 1 (symmetric buffers) with --zc: the ZC engine forced by the plan hint. */
static meld_result_t op_call(int op, int kind, meld_comm_t c, const void *s, void *r, size_t count, cudaStream_t st) {
  if (kind == 1 && g_zc) {
    meld_coll_args_t a;
    memset(&a, 0, sizeof a);
    a.op = (meld_coll_op_t)op; /* all-gather 0, reduce-scatter 1, all-reduce 2: MELD_COLL_* order */
    a.dtype = MELD_BF16;
    a.send = s;
    a.recv = r;
    a.count = count;
    meld_coll_plan_hint_t h;
    memset(&h, 0, sizeof h);
    h.proto = MELD_PROTO_ZC;
    return meld_coll_run(c, "bench_inproc", &a, &h, st, NULL);
  }
  switch (op) {
    case 0: return meld_all_gather(c, s, r, count, MELD_BF16, st);
    case 1: return meld_reduce_scatter(c, s, r, count, MELD_BF16, st);
    default: return meld_all_reduce(c, s, r, count, MELD_BF16, st);
  }
}

/* Relative error of rank `rank`'s recv (host copy) against the rank-order fp32 reference. */
static double op_check(int op, int rank, int P, size_t count, const uint16_t *got) {
  double num = 0, den = 0;
  const size_t n = op == 0 ? count * P : count;
  for (size_t i = 0; i < n; i++) {
    float ref;
    if (op == 0) {
      ref = bf2f(g_host_send[i / count][i % count]);
    } else {
      const size_t src = op == 1 ? (size_t)rank * count + i : i;
      float s = 0.0f;
      for (int r = 0; r < P; r++) s += bf2f(g_host_send[r][src]);
      ref = bf2f(f2bf(s));
    }
    const double d = (double)bf2f(got[i]) - ref;
    if (got[i] == 0xffffu) return 1e30; /* poison left: not written */
    num += d * d;
    den += (double)ref * ref;
  }
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

static float time_graph(int rank, int op, int kind, meld_comm_t c, const void *s, void *r, size_t count, cudaStream_t st) {
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < g_calls; i++) IP_CK(op_call(op, kind, c, s, r, count, st));
  CK(cudaStreamEndCapture(st, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  pthread_barrier_wait(&g_bar);
  CK(cudaGraphLaunch(ge, st)); /* warm-up */
  CK(cudaStreamSynchronize(st));
  float v[64];
  for (int k = 0; k < g_samples; k++) {
    pthread_barrier_wait(&g_bar);
    CK(cudaEventRecord(e0, st));
    for (int q = 0; q < g_reps; q++) CK(cudaGraphLaunch(ge, st));
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&v[k], e0, e1));
    v[k] /= (float)(g_reps * g_calls);
  }
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  return bench_median(v, g_samples);
}

static float time_plain(int rank, int op, int kind, meld_comm_t c, const void *s, void *r, size_t count, cudaStream_t st) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const int n = g_calls;
  pthread_barrier_wait(&g_bar);
  for (int i = 0; i < 20; i++) IP_CK(op_call(op, kind, c, s, r, count, st));
  CK(cudaStreamSynchronize(st));
  float v[64];
  for (int k = 0; k < g_samples; k++) {
    pthread_barrier_wait(&g_bar);
    CK(cudaEventRecord(e0, st));
    for (int i = 0; i < n; i++) IP_CK(op_call(op, kind, c, s, r, count, st));
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&v[k], e0, e1));
    v[k] /= (float)n;
  }
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  return bench_median(v, g_samples);
}

typedef struct {
  int rank, dev;
} ip_arg_t;

static void *rank_main(void *argp) {
  const ip_arg_t *a = (const ip_arg_t *)argp;
  const int rank = a->rank, P = g_P;
  CK(cudaSetDevice(a->dev));
  meld_comm_t comm = NULL;
  IP_CK(meld_comm_init(&comm, P, g_id, rank, NULL));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  size_t maxb = 0;
  for (int i = 0; i < g_nsizes; i++) maxb = g_sizes[i] > maxb ? g_sizes[i] : maxb;
  maxb = (maxb + 255) / 256 * 256;
  /* buffers: [0] ordinary send / recv, [1] symmetric (collective allocations: every rank in
   * the same order, before any collective runs) */
  void *send[2], *recv[2];
  CK(cudaMalloc(&send[0], maxb));
  CK(cudaMalloc(&recv[0], maxb));
  IP_CK(meld_mem_alloc(comm, maxb, &send[1]));
  IP_CK(meld_mem_alloc(comm, maxb, &recv[1]));
  uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(rank + 1);
  const size_t maxe = maxb / 2;
  uint16_t *got = NULL;
  CK(cudaMallocHost((void **)&g_host_send[rank], maxb));
  CK(cudaMallocHost((void **)&got, maxb));
  for (size_t i = 0; i < maxe; i++)
    g_host_send[rank][i] = f2bf((float)((int64_t)(ip_rng(&seed) % 2001) - 1000) / 250.0f);
  for (int k = 0; k < 2; k++) CK(cudaMemcpyAsync(send[k], g_host_send[rank], maxb, cudaMemcpyHostToDevice, st));
  CK(cudaStreamSynchronize(st));
  pthread_barrier_wait(&g_bar);
  if (rank == 0) printf("%-14s %-4s %10s %10s %10s %10s %10s\n", "op", "kind", "bytes", "graph_us", "graph_max", "plain_us", "rel_err");
  FILE *jf = rank == 0 && g_json ? fopen(g_json, "a") : NULL;
  bench_env_t env;
  if (rank == 0) bench_env(&env, a->dev);
  for (int op = 0; op < 3; op++) {
    if (g_only >= 0 && op != g_only) continue;
    for (int kind = 0; kind < 2; kind++) {
      if ((kind == 0 && !g_kind_ord) || (kind == 1 && !g_kind_sym)) continue;
      for (int si = 0; si < g_nsizes; si++) {
        size_t count, ns, nr;
        op_counts(op, g_sizes[si], P, &count, &ns, &nr);
        if (count == 0) continue;
        /* check: poison, one call, compare */
        CK(cudaMemsetAsync(recv[kind], 0xff, nr * 2, st));
        IP_CK(op_call(op, kind, comm, send[kind], recv[kind], count, st));
        CK(cudaMemcpyAsync(got, recv[kind], nr * 2, cudaMemcpyDeviceToHost, st));
        CK(cudaStreamSynchronize(st));
        g_err[rank] = op_check(op, rank, P, count, got);
        if (g_trace) { /* --trace N: N plain calls for MELD_TRACE's timeline, nothing timed */
          pthread_barrier_wait(&g_bar);
          for (int i = 0; i < g_trace; i++) IP_CK(op_call(op, kind, comm, send[kind], recv[kind], count, st));
          CK(cudaStreamSynchronize(st));
          if (rank == 0) printf("trace: %d %s calls of %zu bytes (%s)\n", g_trace, g_opname[op], g_sizes[si], kind ? "sym" : "ord");
          continue;
        }
        const float tg = time_graph(rank, op, kind, comm, send[kind], recv[kind], count, st);
        g_ms[rank] = tg;
        pthread_barrier_wait(&g_bar);
        float tmax = 0;
        double emax = 0;
        for (int r = 0; r < P; r++) {
          tmax = g_ms[r] > tmax ? g_ms[r] : tmax;
          emax = g_err[r] > emax ? g_err[r] : emax;
        }
        pthread_barrier_wait(&g_bar); /* everyone read g_ms before it changes */
        const float tp = time_plain(rank, op, kind, comm, send[kind], recv[kind], count, st);
        if (rank == 0) {
          const int bad = !(emax <= 1e-2);
          if (bad) g_failed = 1;
          printf("%-14s %-4s %10zu %10.2f %10.2f %10.2f %10.2e%s\n", g_opname[op], kind ? (g_zc ? "zc" : "sym") : "ord", g_sizes[si],
                 tg * 1e3, tmax * 1e3, tp * 1e3, emax, bad ? "  FAIL" : "");
          fflush(stdout);
          if (jf)
            fprintf(jf,
                    "{\"bench\":\"inproc\",\"op\":\"%s\",\"kind\":\"%s\",\"label\":\"%s\",\"ranks\":%d,\"bytes\":%zu,"
                    "\"graph_us\":%.3f,\"graph_max_us\":%.3f,\"plain_us\":%.3f,\"rel_err\":%.3e,\"calls\":%d,\"reps\":%d,"
                    "\"samples\":%d,\"gpu\":\"%s\",\"driver\":\"%s\",\"cuda\":\"%s\",\"date\":\"%s\",\"commit\":\"%s\"}\n",
                    g_opname[op], kind ? (g_zc ? "zc" : "sym") : "ord", g_label, P, g_sizes[si], tg * 1e3, tmax * 1e3, tp * 1e3, emax,
                    g_calls, g_reps, g_samples, env.gpu, env.driver, env.cuda, env.date, env.commit);
        }
      }
    }
  }
  if (jf) fclose(jf);
  CK(cudaStreamSynchronize(st));
  pthread_barrier_wait(&g_bar);
  IP_CK(meld_mem_free(comm, send[1]));
  IP_CK(meld_mem_free(comm, recv[1]));
  CK(cudaFree(send[0]));
  CK(cudaFree(recv[0]));
  IP_CK(meld_comm_check(comm));
  IP_CK(meld_comm_destroy(comm));
  CK(cudaStreamDestroy(st));
  CK(cudaFreeHost(got));
  return NULL;
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "--ranks") && v) g_P = atoi(v), i++;
    else if (!strcmp(argv[i], "--calls") && v) g_calls = atoi(v), i++;
    else if (!strcmp(argv[i], "--reps") && v) g_reps = atoi(v), i++;
    else if (!strcmp(argv[i], "--samples") && v) g_samples = atoi(v), i++;
    else if (!strcmp(argv[i], "--json") && v) g_json = v, i++;
    else if (!strcmp(argv[i], "--label") && v) g_label = v, i++;
    else if (!strcmp(argv[i], "--zc")) g_zc = 1;
    else if (!strcmp(argv[i], "--quick")) g_samples = 3, g_reps = 1; /* (meld-bench --suite --quick) */
    else if (!strcmp(argv[i], "--trace") && v) g_trace = atoi(v), i++;
    else if (!strcmp(argv[i], "--kinds") && v) {
      g_kind_ord = strstr(v, "ord") != NULL;
      g_kind_sym = strstr(v, "sym") != NULL;
      i++;
    } else if (!strcmp(argv[i], "--only") && v) {
      g_only = -1;
      for (int k = 0; k < 3; k++)
        if (!strcmp(v, g_opname[k])) g_only = k;
      if (g_only < 0) {
        fprintf(stderr, "--only: all_gather, reduce_scatter or all_reduce\n");
        return 2;
      }
      i++;
    } else if (!strcmp(argv[i], "--sizes") && v) {
      g_nsizes = 0;
      for (const char *p = v; *p && g_nsizes < 32;) {
        g_sizes[g_nsizes++] = strtoull(p, NULL, 10);
        const char *e = strchr(p, ',');
        if (!e) break;
        p = e + 1;
      }
      i++;
    } else {
      fprintf(stderr, "usage: %s [--ranks P] [--sizes a,b] [--calls N] [--reps R] [--samples S] [--only OP] "
                      "[--kinds ord,sym] [--zc] [--trace N] [--quick] [--json F] [--label L]\n", argv[0]);
      return 2;
    }
  }
  if (g_P < 1 || g_P > IP_MAX_RANKS || g_calls < 1 || g_reps < 1 || g_samples < 1 || g_samples > 64) {
    fprintf(stderr, "bad --ranks (1..%d), --calls, --reps or --samples (1..64)\n", IP_MAX_RANKS);
    return 2;
  }
  for (int i = 0; i < g_nsizes; i++)
    if (g_sizes[i] < 2 * (size_t)g_P || g_sizes[i] % (2 * (size_t)g_P)) {
      fprintf(stderr, "--sizes: each a multiple of 2 x ranks bytes\n");
      return 2;
    }
  int ndev = 0;
  CK(cudaGetDeviceCount(&ndev));
  if (ndev < g_P) setenv("MELD_SHARE_GPU", "1", 1);
  printf("bench_inproc: %d ranks as threads on %d GPU(s)%s; %d calls per graph x %d replays, median of %d\n", g_P,
         ndev < g_P ? ndev : g_P, ndev < g_P ? " (shared)" : "", g_calls, g_reps, g_samples);
  if (meld_get_unique_id(&g_id) != MELD_OK) {
    fprintf(stderr, "meld_get_unique_id: %s\n", meld_last_error());
    return 1;
  }
  pthread_barrier_init(&g_bar, NULL, (unsigned)g_P);
  pthread_t th[IP_MAX_RANKS];
  ip_arg_t args[IP_MAX_RANKS];
  for (int r = 0; r < g_P; r++) {
    args[r].rank = r;
    args[r].dev = r % ndev;
    if (pthread_create(&th[r], NULL, rank_main, &args[r])) {
      fprintf(stderr, "pthread_create failed\n");
      return 1;
    }
  }
  for (int r = 0; r < g_P; r++) pthread_join(th[r], NULL);
  for (int r = 0; r < g_P; r++) cudaFreeHost(g_host_send[r]);
  printf("bench_inproc: %s\n", g_failed ? "FAILED (a row's error above 1e-2)" : "all rows checked");
  return g_failed;
}
