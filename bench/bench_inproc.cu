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
 *   choice: LL below its size limit, else ZC; --zc: the ZC engine at every size; --ce: the CE
 *   engine (copy engines; all-gather only here: use --only all_gather)).
 * Each row is checked first (recv poisoned, random inputs, rank-order fp32 reference, relative
 * error), then timed: CUDA graphs of --calls back-to-back calls, replayed --reps times per
 * sample, every rank starting a sample after a host barrier; per-call time = sample / calls
 * (a barrier's wake-up skew, tens of us, is spread over the calls). Also plain launches.
 * Rank 0 prints one line per row and appends JSON lines (--json).
 *
 * Usage: bench_inproc [--ranks P] [--sizes 4096,65536] [--calls 200] [--reps 3] [--samples 7]
 *                     [--only all_reduce|reduce_scatter|all_gather] [--kinds ord,sym]
 *                     [--zc | --ce] [--trace N] [--quick] [--json F] [--label L] [--fp8]
 * --trace N: per row N plain calls and no timing (with MELD_TRACE=path: one timeline per rank);
 *   with --fused, N calls of each fused variant after its check (BENCH_VARIANTS picks them).
 * --fused LIST: instead of the collectives, the fused ops against meld_gemm with both ranks in
 *   flight (see fused_rows; --fused-calls N calls a sample, default 20; --fused-pairs R pairs
 *   of passes in opposite orders, default 1; BENCH_SETTLE_MS). --fp8: the same rows with the fp8
 *   forms of every op (meld_gemm_fp8 as the gemm row; K in fp8 elements).
 * --ab MELD_VAR=v1,v2: with --fused, every variant but gemm once per value (row "fused[v1]", JSON
 *   "ab"), in the same passes: an A/B of a variable the library reads per call, in one process
 *   (rank 0 sets it between barriers; afterwards it is as the bench found it).
 * Host copies use pinned memory: a copy to pageable memory is done by the calling thread,
 * which waited there for its stream while the peers could not launch (a 3-rank run stalled
 * 3 s at a row's first call that way, session 22). Only the calling thread's stream is synchronized (never the device): a device-wide wait in
 * one rank's thread would wait for the other ranks' kernels, which wait for this rank. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>

#include "../tests/gpu/gpu_test.h" /* bf2f */
#include "bench_common.h"
#include "coll_plan.h"
#include "meld.h"

#define IP_MAX_RANKS 8
static int g_P = 2, g_calls = 200, g_reps = 3, g_samples = 7, g_only = -1;
static int g_kind_ord = 1, g_kind_sym = 1, g_trace = 0;
static int g_proto = 0; /* --zc / --ce: MELD_PROTO_ZC / MELD_PROTO_CE forced on symmetric buffers */
static size_t g_sizes[32] = {4096, 65536, 1048576};
static int g_nsizes = 3;
static const char *g_json = NULL, *g_label = "";
/* --fp8: the fused rows in fp8 (meld_gemm_fp8, meld_ag_gemm_fp8, meld_gemm_rs_fp8 / _ar_fp8):
 * the same test values (multiples of 1/16 in [-1/2, 1/2], exact in e4m3), scales 1, so the
 * bf16 reference checks them unchanged; K counts fp8 elements (multiples of 16 per rank). */
static int g_fp8 = 0;

/* x (a multiple of 1/16 in [-1/2, 1/2]) as its e4m3 byte (exact there). */
static uint8_t ip_e4m3(float x) {
  if (x == 0.0f) return 0;
  int e = 0;
  const float f = frexpf(fabsf(x), &e); /* |x| = f 2^e, f in [0.5, 1): 1.m x 2^(e - 1) */
  const int mant = (int)lrintf((2.0f * f - 1.0f) * 8.0f);
  return (uint8_t)((x < 0 ? 0x80 : 0) | ((e - 1 + 7) << 3) | mant);
}
static void ip_to_e4m3(uint8_t *dst, const uint16_t *bf, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = ip_e4m3(bf2f(bf[i]));
}
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

/* kind 1 (symmetric buffers) with --zc / --ce: the ZC / CE engine (g_proto) forced by the
 * plan hint; a call the engine cannot take fails (the row would time another engine under its
 * name). */
static meld_result_t op_call(int op, int kind, meld_comm_t c, const void *s, void *r, size_t count, cudaStream_t st) {
  if (kind == 1 && g_proto) {
    meld_coll_args_t a;
    memset(&a, 0, sizeof a);
    a.op = (meld_coll_op_t)op; /* all-gather 0, reduce-scatter 1, all-reduce 2: MELD_COLL_* order */
    a.dtype = MELD_BF16;
    a.send = s;
    a.recv = r;
    a.count = count;
    meld_coll_plan_hint_t h;
    memset(&h, 0, sizeof h);
    h.proto = (meld_coll_proto_t)g_proto;
    meld_coll_plan_t plan;
    const meld_result_t res = meld_coll_run(c, "bench_inproc", &a, &h, st, &plan);
    if (res == MELD_OK && plan.proto != (meld_coll_proto_t)g_proto) {
      fprintf(stderr, "bench_inproc: %s of %zu: %s asked for, %s planned (--ce: all-gather only)\n", g_opname[op], count,
              meld_coll_proto_name((meld_coll_proto_t)g_proto), meld_coll_proto_name(plan.proto));
      return MELD_ERR_UNSUPPORTED;
    }
    return res;
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

/* Enqueues one unit of timed work (a call, or a graph of calls) on st. */
typedef void (*ip_unit_fn)(int rank, void *ctx, cudaStream_t st);

/* Median over `samples` (<= 64) of the time per call: each sample enqueues n units of `per`
 * calls back to back between two events, every rank starting it after a barrier. */
static float ip_time_samples(int rank, ip_unit_fn fn, void *ctx, int n, int per, int samples, cudaStream_t st) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  float v[64];
  for (int k = 0; k < samples; k++) {
    pthread_barrier_wait(&g_bar);
    CK(cudaEventRecord(e0, st));
    for (int i = 0; i < n; i++) fn(rank, ctx, st);
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&v[k], e0, e1));
    v[k] /= (float)n * (float)per;
  }
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  return bench_median(v, samples);
}

typedef struct {
  int op, kind;
  meld_comm_t c;
  const void *s;
  void *r;
  size_t count;
  cudaGraphExec_t ge;
} ip_op_t;
static void ip_op_unit(int rank, void *ctx, cudaStream_t st) {
  const ip_op_t *o = (const ip_op_t *)ctx;
  IP_CK(op_call(o->op, o->kind, o->c, o->s, o->r, o->count, st));
}
static void ip_graph_unit(int rank, void *ctx, cudaStream_t st) {
  (void)rank;
  CK(cudaGraphLaunch(((const ip_op_t *)ctx)->ge, st));
}

static float time_graph(int rank, int op, int kind, meld_comm_t c, const void *s, void *r, size_t count, cudaStream_t st) {
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < g_calls; i++) IP_CK(op_call(op, kind, c, s, r, count, st));
  CK(cudaStreamEndCapture(st, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  CK(cudaGraphUpload(ge, st)); /* before the peers' graphs run: an upload may wait for the device */
  CK(cudaStreamSynchronize(st));
  pthread_barrier_wait(&g_bar);
  CK(cudaGraphLaunch(ge, st)); /* warm-up */
  CK(cudaStreamSynchronize(st));
  ip_op_t o = {op, kind, c, s, r, count, ge};
  const float t = ip_time_samples(rank, ip_graph_unit, &o, g_reps, g_calls, g_samples, st);
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  return t;
}

static float time_plain(int rank, int op, int kind, meld_comm_t c, const void *s, void *r, size_t count, cudaStream_t st) {
  ip_op_t o = {op, kind, c, s, r, count, NULL};
  pthread_barrier_wait(&g_bar);
  for (int i = 0; i < 20; i++) ip_op_unit(rank, &o, st);
  CK(cudaStreamSynchronize(st));
  return ip_time_samples(rank, ip_op_unit, &o, g_calls, 1, g_samples, st);
}

/* ---- --fused: the fused ops with both ranks in flight ----------------------------------------
 * Per shape (ag:M,N_loc,K | rs:M,N,K_total | ar:M,N,K_total; K_loc = K_total / P) every rank
 * runs, in --fused-pairs pairs of passes of opposite order, each variant back to back
 * (--fused-calls calls a sample, median of --samples, after BENCH_SETTLE_MS of the same calls;
 * the summary: each variant's mean over the passes against the gemm's): gemm = meld_gemm of
 * the rank's own GEMM (AG: M x N_loc x K; RS/AR: M x N x K_loc) on its share of the SMs
 * (info.sm_count), the op fused, unfused (its own kernels in sequence) and, for AR, fused into
 * a symmetric C (zero copy). A pair's time is the slower rank's. What loopback (one rank playing
 * both) cannot show: the peers' kernels run at once, their waits and flags are real. The op
 * rows are checked first (C poisoned, 4096 sampled entries against an fp64 host reference). */
typedef struct {
  int op; /* 0 ag, 1 rs, 2 ar */
  int64_t m, n, k;
} ip_fshape_t;
static ip_fshape_t g_fs[16];
static int g_nfs = 0, g_fcalls = 20, g_fpairs = 1;
/* --ab VAR=v1,v2,..: every variant but gemm runs once per value of VAR (set by rank 0 between
 * barriers before each call; the library reads such variables per call), in the same passes */
#define IP_MAX_AB 4
static char g_ab_var[64], g_ab_val[IP_MAX_AB][32], g_ab_orig[256];
static int g_nab = 0, g_ab_had = 0;
static uint16_t *g_hA[IP_MAX_RANKS], *g_hB[IP_MAX_RANKS]; /* each rank's A and B (host) */
static int g_settle_n;                                     /* rank 0's settle call count */
static const char *const g_fopname[] = {"ag_gemm", "gemm_rs", "gemm_ar"};
static const char *const g_fvar[] = {"gemm", "fused", "unfused", "fused_symc"};
enum { FV_GEMM, FV_FUSED, FV_UNFUSED, FV_SYMC, FV_N };

/* A row's name: the variant, and with --ab the value in brackets ("fused[ileave]"). */
static void ip_vname(char *out, size_t len, int v, int ab) {
  if (g_nab && ab >= 0) snprintf(out, len, "%s[%s]", g_fvar[v], g_ab_val[ab]);
  else snprintf(out, len, "%s", g_fvar[v]);
}

typedef struct {
  const ip_fshape_t *s;
  int P, rank, sms;
  int64_t mloc, kl, r0, rows; /* AG shard rows; RS/AR K_loc; RS output rows */
  void *a, *b, *afull, *c, *csym, *cg;
} ip_fctx_t;

static meld_result_t fused_call(meld_comm_t comm, const ip_fctx_t *f, int v, cudaStream_t st) {
  const ip_fshape_t *s = f->s;
  if (g_fp8) {
    if (v == FV_GEMM) {
      meld_gemm_fp8_args_t g;
      memset(&g, 0, sizeof g);
      g.a = s->op == 0 ? f->afull : f->a, g.b = f->b, g.c = f->cg;
      g.m = s->m, g.n = s->n, g.k = s->op == 0 ? s->k : f->kl;
      g.lda = g.k, g.ldb = g.k, g.ldc = s->n, g.sm_count = f->sms;
      return meld_gemm_fp8(&g, st);
    }
    if (s->op == 0) {
      meld_ag_gemm_fp8_args_t g;
      memset(&g, 0, sizeof g);
      g.a_shard = f->a, g.lda = s->k, g.b = f->b, g.ldb = s->k, g.c = f->c, g.ldc = s->n;
      g.m_loc = f->mloc, g.n_loc = s->n, g.k = s->k;
      return meld_ag_gemm_fp8(comm, &g, st);
    }
    meld_gemm_rs_fp8_args_t g;
    memset(&g, 0, sizeof g);
    g.a = f->a, g.lda = f->kl, g.b = f->b, g.ldb = f->kl;
    g.c = v == FV_SYMC ? f->csym : f->c, g.ldc = s->n;
    g.m = s->m, g.n = s->n, g.k = f->kl;
    g.algo = v == FV_UNFUSED ? MELD_GEMM_RS_UNFUSED : MELD_GEMM_RS_FUSED;
    return s->op == 1 ? meld_gemm_rs_fp8(comm, &g, st) : meld_gemm_ar_fp8(comm, &g, st);
  }
  if (v == FV_GEMM) {
    meld_gemm_args_t g;
    memset(&g, 0, sizeof g);
    g.a = s->op == 0 ? f->afull : f->a;
    g.b = f->b;
    g.b_layout = MELD_B_NK;
    g.c = f->cg;
    g.m = s->m, g.n = s->n, g.k = s->op == 0 ? s->k : f->kl;
    g.lda = g.k, g.ldb = g.k, g.ldc = s->n;
    g.sm_count = f->sms;
    return meld_gemm(&g, st);
  }
  if (s->op == 0) { /* AG: fused / unfused by MELD_SCHEDULE, set by rank 0 between barriers */
    meld_ag_gemm_args_t g;
    memset(&g, 0, sizeof g);
    g.a_shard = f->a, g.lda = s->k;
    g.b = f->b, g.ldb = s->k, g.b_layout = MELD_B_NK;
    g.c = f->c, g.ldc = s->n;
    g.m_loc = f->mloc, g.n_loc = s->n, g.k = s->k;
    return meld_ag_gemm(comm, &g, st);
  }
  meld_gemm_rs_args_t g;
  memset(&g, 0, sizeof g);
  g.a = f->a, g.lda = f->kl;
  g.b = f->b, g.ldb = f->kl, g.b_layout = MELD_B_NK;
  g.c = v == FV_SYMC ? f->csym : f->c, g.ldc = s->n;
  g.m = s->m, g.n = s->n, g.k = f->kl;
  g.algo = v == FV_UNFUSED ? MELD_GEMM_RS_UNFUSED : MELD_GEMM_RS_FUSED;
  return s->op == 1 ? meld_gemm_rs(comm, &g, st) : meld_gemm_ar(comm, &g, st);
}

typedef struct {
  meld_comm_t comm;
  const ip_fctx_t *f;
  int v;
} ip_fused_t;
static void ip_fused_unit(int rank, void *ctx, cudaStream_t st) {
  const ip_fused_t *u = (const ip_fused_t *)ctx;
  IP_CK(fused_call(u->comm, u->f, u->v, st));
}

/* Relative error of 4096 sampled entries of this rank's C (host copy of its rows, ld n). */
static double fused_check(const ip_fctx_t *f, const uint16_t *got, int64_t rows) {
  const ip_fshape_t *s = f->s;
  uint64_t seed = 0x51ed2701u + (uint64_t)f->rank;
  double num = 0, den = 0;
  for (int t = 0; t < 4096 && rows > 0; t++) {
    const int64_t i = (int64_t)(ip_rng(&seed) % (uint64_t)rows), j = (int64_t)(ip_rng(&seed) % (uint64_t)s->n);
    double ref = 0;
    if (s->op == 0) { /* row i of AllGather(A): shard i / mloc, row i % mloc; B = this rank's */
      const uint16_t *ar = g_hA[i / f->mloc] + (i % f->mloc) * s->k, *br = g_hB[f->rank] + j * s->k;
      for (int64_t k = 0; k < s->k; k++) ref += (double)bf2f(ar[k]) * bf2f(br[k]);
    } else { /* sum over ranks of A_q[row] . B_q[j] */
      const int64_t row = (s->op == 1 ? f->r0 : 0) + i;
      for (int q = 0; q < f->P; q++) {
        const uint16_t *ar = g_hA[q] + row * f->kl, *br = g_hB[q] + j * f->kl;
        for (int64_t k = 0; k < f->kl; k++) ref += (double)bf2f(ar[k]) * bf2f(br[k]);
      }
    }
    const uint16_t h = got[i * s->n + j];
    if (h == 0xffffu) return 1e30; /* poison left */
    const double d = bf2f(h) - ref;
    num += d * d, den += ref * ref;
  }
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

static void *ip_dev_alloc(size_t bytes) {
  void *p = NULL;
  CK(cudaMalloc(&p, bytes));
  return p;
}

static void fused_rows(int rank, meld_comm_t comm, cudaStream_t st, FILE *jf, const bench_env_t *env) {
  const int P = g_P;
  meld_comm_info_t info;
  IP_CK(meld_comm_info(comm, &info));
  if (rank == 0)
    printf("%-8s %-24s %-11s %10s %10s %8s %10s\n", "op", "M x N x K", "variant", "ms", "ms_min", "pass", "rel_err");
  for (int si = 0; si < g_nfs; si++) {
    const ip_fshape_t *s = &g_fs[si];
    ip_fctx_t f;
    memset(&f, 0, sizeof f);
    f.s = s, f.P = P, f.rank = rank, f.sms = info.sm_count;
    f.mloc = s->m / P, f.kl = s->k / P;
    f.r0 = 0, f.rows = s->m;
    if (s->op == 1) IP_CK(meld_gemm_rs_rows(s->m, P, rank, &f.r0, &f.rows));
    const int64_t arows = s->op == 0 ? f.mloc : s->m, ak = s->op == 0 ? s->k : f.kl;
    const size_t na = (size_t)arows * ak, nb = (size_t)s->n * ak, nc = (size_t)(s->op == 1 ? f.rows : s->m) * s->n;
    g_hA[rank] = (uint16_t *)malloc(na * 2);
    g_hB[rank] = (uint16_t *)malloc(nb * 2);
    uint16_t *got = NULL;
    CK(cudaMallocHost((void **)&got, nc * 2));
    uint64_t seed = 0x2545f4914f6cdd1dull * (uint64_t)(rank + 1) + (uint64_t)si;
    for (size_t i = 0; i < na; i++) g_hA[rank][i] = f2bf((float)((int64_t)(ip_rng(&seed) % 17) - 8) / 16.0f);
    for (size_t i = 0; i < nb; i++) g_hB[rank][i] = f2bf((float)((int64_t)(ip_rng(&seed) % 17) - 8) / 16.0f);
    f.a = ip_dev_alloc(na * 2), f.b = ip_dev_alloc(nb * 2), f.c = ip_dev_alloc(nc * 2);
    f.cg = ip_dev_alloc((size_t)s->m * s->n * 2);
    uint8_t *h8 = NULL; /* (--fp8: the values as e4m3 bytes) */
    if (g_fp8) {
      CK(cudaMallocHost((void **)&h8, (na > nb ? na : nb) * (size_t)P));
      ip_to_e4m3(h8, g_hA[rank], na);
      CK(cudaMemcpy(f.a, h8, na, cudaMemcpyHostToDevice));
      ip_to_e4m3(h8, g_hB[rank], nb);
      CK(cudaMemcpy(f.b, h8, nb, cudaMemcpyHostToDevice));
    } else {
      CK(cudaMemcpyAsync(f.a, g_hA[rank], na * 2, cudaMemcpyHostToDevice, st));
      CK(cudaMemcpyAsync(f.b, g_hB[rank], nb * 2, cudaMemcpyHostToDevice, st));
    }
    if (s->op == 2) IP_CK(meld_mem_alloc(comm, (size_t)s->m * s->n * 2, &f.csym)); /* collective */
    CK(cudaStreamSynchronize(st));
    pthread_barrier_wait(&g_bar); /* every rank's host A is filled */
    if (s->op == 0) {
      f.afull = ip_dev_alloc((size_t)s->m * s->k * 2);
      for (int q = 0; q < P; q++)
        if (g_fp8) {
          ip_to_e4m3(h8, g_hA[q], na);
          CK(cudaMemcpy((uint8_t *)f.afull + (size_t)q * na, h8, na, cudaMemcpyHostToDevice));
        } else {
          CK(cudaMemcpyAsync((uint16_t *)f.afull + (size_t)q * na, g_hA[q], na * 2, cudaMemcpyHostToDevice, st));
        }
      CK(cudaStreamSynchronize(st));
    }
    if (h8) CK(cudaFreeHost(h8));
    char shape[64];
    snprintf(shape, sizeof shape, "%lld x %lld x %lld", (long long)s->m, (long long)s->n, (long long)s->k);
    /* rows: gemm, then each other variant once per --ab value (one row each without --ab) */
    const int NA = g_nab > 0 ? g_nab : 1, NR = 1 + (FV_N - 1) * NA;
    double sum[1 + (FV_N - 1) * IP_MAX_AB], err[1 + (FV_N - 1) * IP_MAX_AB];
    for (int x = 0; x < NR; x++) err[x] = 0, sum[x] = 0;
    const int npass = 2 * g_fpairs;
    for (int pass = 0; pass < npass; pass++)
      for (int ri = 0; ri < NR; ri++) {
        const int x = pass % 2 ? NR - 1 - ri : ri; /* the row */
        const int v = x == 0 ? FV_GEMM : 1 + (x - 1) / NA, ab = x == 0 ? -1 : (x - 1) % NA;
        if (v == FV_SYMC && s->op != 2) continue;
        if (!bench_variant_wanted(g_fvar[v])) continue;
        char vname[64];
        ip_vname(vname, sizeof vname, v, ab);
        pthread_barrier_wait(&g_bar);
        if (rank == 0 && s->op == 0) setenv("MELD_SCHEDULE", v == FV_UNFUSED ? "unfused" : "fused", 1);
        if (rank == 0 && g_nab && ab >= 0) setenv(g_ab_var, g_ab_val[ab], 1);
        pthread_barrier_wait(&g_bar);
        if (pass == 0 && v != FV_GEMM) { /* check: poison, one call, sampled reference */
          void *c = v == FV_SYMC ? f.csym : f.c;
          CK(cudaMemsetAsync(c, 0xff, nc * 2, st));
          IP_CK(fused_call(comm, &f, v, st));
          CK(cudaMemcpyAsync(got, c, nc * 2, cudaMemcpyDeviceToHost, st));
          CK(cudaStreamSynchronize(st));
          err[x] = fused_check(&f, got, s->op == 1 ? f.rows : s->m);
          g_err[rank] = err[x];
          pthread_barrier_wait(&g_bar);
          for (int r = 0; r < P; r++) err[x] = g_err[r] > err[x] ? g_err[r] : err[x];
          pthread_barrier_wait(&g_bar);
        }
        if (g_trace) { /* --trace N: N plain calls of the variant for MELD_TRACE's timeline, nothing timed */
          if (pass == 0 && v != FV_GEMM) {
            for (int i = 0; i < g_trace; i++) IP_CK(fused_call(comm, &f, v, st));
            CK(cudaStreamSynchronize(st));
            if (rank == 0) printf("trace: %d %s calls of %s (%s)\n", g_trace, g_fopname[s->op], shape, vname);
          }
          pthread_barrier_wait(&g_bar);
          continue;
        }
        /* warm-up (2 calls, timed: the settle count), then the settle, then the samples */
        ip_fused_t fu = {comm, &f, v};
        const float w = ip_time_samples(rank, ip_fused_unit, &fu, 2, 1, 1, st);
        if (rank == 0) g_settle_n = bench_settle_calls(w, bench_settle_ms()) + bench_leadin_calls(w);
        pthread_barrier_wait(&g_bar);
        for (int i = 0; i < g_settle_n; i++) ip_fused_unit(rank, &fu, st);
        g_ms[rank] = ip_time_samples(rank, ip_fused_unit, &fu, g_fcalls, 1, g_samples, st);
        pthread_barrier_wait(&g_bar);
        float tmax = 0, tmin = 1e30f;
        for (int r = 0; r < P; r++) tmax = g_ms[r] > tmax ? g_ms[r] : tmax, tmin = g_ms[r] < tmin ? g_ms[r] : tmin;
        pthread_barrier_wait(&g_bar);
        sum[x] += tmax;
        if (rank == 0) {
          const int bad = v != FV_GEMM && !(err[x] <= 1e-2);
          if (bad) g_failed = 1;
          printf("%-8s %-24s %-11s %10.4f %10.4f %8d %10.2e%s\n", g_fopname[s->op], shape, vname, tmax, tmin, pass,
                 v == FV_GEMM ? 0.0 : err[x], bad ? "  FAIL" : "");
          fflush(stdout);
          if (jf)
            fprintf(jf,
                    "{\"bench\":\"inproc_fused\",\"op\":\"%s\",\"variant\":\"%s\",\"ab\":\"%s%s%s\",\"label\":\"%s\",\"ranks\":%d,\"m\":%lld,"
                    "\"n\":%lld,\"k\":%lld,\"dtype\":\"%s\",\"pass\":%d,\"ms\":%.5f,\"ms_min_rank\":%.5f,\"rel_err\":%.3e,"
                    "\"sm_count\":%d,\"calls\":%d,\"samples\":%d,\"settle_ms\":%d,\"gpu\":\"%s\",\"driver\":\"%s\","
                    "\"cuda\":\"%s\",\"date\":\"%s\",\"commit\":\"%s\"}\n",
                    g_fopname[s->op], g_fvar[v], g_nab && ab >= 0 ? g_ab_var : "", g_nab && ab >= 0 ? "=" : "",
                    g_nab && ab >= 0 ? g_ab_val[ab] : "", g_label, P, (long long)s->m, (long long)s->n, (long long)s->k,
                    g_fp8 ? "fp8_e4m3" : "bf16", pass, tmax, tmin, v == FV_GEMM ? 0.0 : err[x], f.sms, g_fcalls, g_samples,
                    bench_settle_ms(), env->gpu, env->driver, env->cuda, env->date, env->commit);
        }
      }
    /* each variant's mean over the passes (opposite orders cancel a steady drift, e.g. the GPU
     * warming) against the gemm's */
    if (rank == 0)
      for (int x = 0; x < NR; x++)
        if (sum[x] > 0) {
          const int v = x == 0 ? FV_GEMM : 1 + (x - 1) / NA, ab = x == 0 ? -1 : (x - 1) % NA;
          char vname[64];
          ip_vname(vname, sizeof vname, v, ab);
          printf("%-8s %-24s %-11s %10.4f %10s %8.3f   (mean of %d passes vs gemm)\n", g_fopname[s->op], shape, vname,
                 sum[x] / npass, "", sum[0] > 0 ? sum[x] / sum[0] : 0.0, npass);
        }
    CK(cudaStreamSynchronize(st));
    pthread_barrier_wait(&g_bar); /* nobody reads the host arrays any more */
    if (s->op == 0 && rank == 0) unsetenv("MELD_SCHEDULE");
    if (g_nab && rank == 0) { /* the variable as the bench found it */
      if (g_ab_had) setenv(g_ab_var, g_ab_orig, 1);
      else unsetenv(g_ab_var);
    }
    if (f.csym) IP_CK(meld_mem_free(comm, f.csym));
    CK(cudaFree(f.a));
    CK(cudaFree(f.b));
    CK(cudaFree(f.c));
    CK(cudaFree(f.cg));
    if (f.afull) CK(cudaFree(f.afull));
    CK(cudaFreeHost(got));
    pthread_barrier_wait(&g_bar);
    free(g_hA[rank]), free(g_hB[rank]);
  }
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
  if (rank == 0 && !g_nfs)
    printf("%-14s %-4s %10s %10s %10s %10s %10s\n", "op", "kind", "bytes", "graph_us", "graph_max", "plain_us", "rel_err");
  FILE *jf = rank == 0 && g_json ? fopen(g_json, "a") : NULL;
  bench_env_t env;
  if (rank == 0) bench_env(&env, a->dev);
  if (g_nfs) fused_rows(rank, comm, st, jf, &env);
  for (int op = 0; op < 3 && !g_nfs; op++) {
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
        IP_CK(meld_comm_check(comm)); /* (a failed CE call's copies still run: the data alone cannot tell) */
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
        IP_CK(meld_comm_check(comm)); /* every timed call succeeded (CE's copies run even when a call fails) */
        if (rank == 0) {
          const int bad = !(emax <= 1e-2);
          if (bad) g_failed = 1;
          printf("%-14s %-4s %10zu %10.2f %10.2f %10.2f %10.2e%s\n", g_opname[op], kind ? (g_proto ? meld_coll_proto_name((meld_coll_proto_t)g_proto) : "sym") : "ord", g_sizes[si],
                 tg * 1e3, tmax * 1e3, tp * 1e3, emax, bad ? "  FAIL" : "");
          fflush(stdout);
          if (jf)
            fprintf(jf,
                    "{\"bench\":\"inproc\",\"op\":\"%s\",\"kind\":\"%s\",\"label\":\"%s\",\"ranks\":%d,\"bytes\":%zu,"
                    "\"graph_us\":%.3f,\"graph_max_us\":%.3f,\"plain_us\":%.3f,\"rel_err\":%.3e,\"calls\":%d,\"reps\":%d,"
                    "\"samples\":%d,\"gpu\":\"%s\",\"driver\":\"%s\",\"cuda\":\"%s\",\"date\":\"%s\",\"commit\":\"%s\"}\n",
                    g_opname[op], kind ? (g_proto ? meld_coll_proto_name((meld_coll_proto_t)g_proto) : "sym") : "ord", g_label, P, g_sizes[si], tg * 1e3, tmax * 1e3, tp * 1e3, emax,
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
  /* Ranks as threads of one process on one GPU run kernels that spin for each other, so no
   * host call may wait for the device meanwhile, and no two ranks' streams may share a
   * hardware queue: every module loaded at start (lazy loading waits for the device at a
   * kernel's first launch), 32 queues (default 8: at 4+ ranks the CE side streams alias;
   * session 25 saw 4-rank CE and 8-rank first-launch stalls). Before any CUDA call; a value
   * set by the user wins. */
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "--ranks") && v) g_P = atoi(v), i++;
    else if (!strcmp(argv[i], "--calls") && v) g_calls = atoi(v), i++;
    else if (!strcmp(argv[i], "--reps") && v) g_reps = atoi(v), i++;
    else if (!strcmp(argv[i], "--samples") && v) g_samples = atoi(v), i++;
    else if (!strcmp(argv[i], "--json") && v) g_json = v, i++;
    else if (!strcmp(argv[i], "--label") && v) g_label = v, i++;
    else if (!strcmp(argv[i], "--fp8")) g_fp8 = 1;
    else if (!strcmp(argv[i], "--zc")) g_proto = MELD_PROTO_ZC;
    else if (!strcmp(argv[i], "--ce")) g_proto = MELD_PROTO_CE;
    else if (!strcmp(argv[i], "--quick")) g_samples = 3, g_reps = 1; /* (meld-bench --suite --quick) */
    else if (!strcmp(argv[i], "--trace") && v) g_trace = atoi(v), i++;
    else if (!strcmp(argv[i], "--fused-calls") && v) g_fcalls = atoi(v), i++;
    else if (!strcmp(argv[i], "--fused-pairs") && v) g_fpairs = atoi(v), i++;
    else if (!strcmp(argv[i], "--ab") && v) {
      const char *eq = strchr(v, '=');
      if (!eq || eq == v || (size_t)(eq - v) >= sizeof g_ab_var || strncmp(v, "MELD_", 5)) {
        fprintf(stderr, "--ab: MELD_VAR=v1,v2,... (up to %d values of one MELD_* variable)\n", IP_MAX_AB);
        return 2;
      }
      memcpy(g_ab_var, v, (size_t)(eq - v));
      g_ab_var[eq - v] = 0;
      for (const char *p = eq + 1; *p;) {
        const char *e = strchr(p, ',');
        const size_t len = e ? (size_t)(e - p) : strlen(p);
        if (g_nab == IP_MAX_AB || len == 0 || len >= sizeof g_ab_val[0]) {
          fprintf(stderr, "--ab: 1..%d non-empty values of up to %zu characters\n", IP_MAX_AB, sizeof g_ab_val[0] - 1);
          return 2;
        }
        memcpy(g_ab_val[g_nab], p, len);
        g_ab_val[g_nab++][len] = 0;
        if (!e) break;
        p = e + 1;
      }
      if (g_nab == 0) {
        fprintf(stderr, "--ab %s: no value\n", g_ab_var);
        return 2;
      }
      const char *o = getenv(g_ab_var);
      g_ab_had = o != NULL;
      snprintf(g_ab_orig, sizeof g_ab_orig, "%s", o ? o : "");
      i++;
    }
    else if (!strcmp(argv[i], "--fused") && v) {
      for (const char *p = v; *p && g_nfs < 16;) {
        char op[8] = "";
        long long m = 0, n = 0, k = 0;
        if (sscanf(p, "%2[a-z]:%lld,%lld,%lld", op, &m, &n, &k) != 4 || m < 1 || n < 1 || k < 1 ||
            (strcmp(op, "ag") && strcmp(op, "rs") && strcmp(op, "ar"))) {
          fprintf(stderr, "--fused: a list of ag:M,N_loc,K | rs:M,N,K_total | ar:M,N,K_total separated by '/'\n");
          return 2;
        }
        g_fs[g_nfs].op = !strcmp(op, "ag") ? 0 : !strcmp(op, "rs") ? 1 : 2;
        g_fs[g_nfs].m = m, g_fs[g_nfs].n = n, g_fs[g_nfs].k = k;
        g_nfs++;
        const char *e = strchr(p, '/');
        if (!e) break;
        p = e + 1;
      }
      i++;
    }
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
                      "[--kinds ord,sym] [--zc | --ce] [--trace N] [--quick] [--json F] [--label L]\n"
                      "       [--fused ag:M,N_loc,K/rs:M,N,K_total/ar:M,N,K_total] [--fused-calls N] [--fused-pairs R]\n"
                      "       [--ab MELD_VAR=v1,v2,..]\n", argv[0]);
      return 2;
    }
  }
  if (g_P < 1 || g_P > IP_MAX_RANKS || g_calls < 1 || g_reps < 1 || g_samples < 1 || g_samples > 64) {
    fprintf(stderr, "bad --ranks (1..%d), --calls, --reps or --samples (1..64)\n", IP_MAX_RANKS);
    return 2;
  }
  for (int i = 0; i < g_nfs; i++)
    if (g_fs[i].m % g_P || (g_fs[i].op && g_fs[i].k % g_P) || g_fs[i].n % 8 || (g_fs[i].op ? g_fs[i].k / g_P : g_fs[i].k) % 8) {
      fprintf(stderr, "--fused: M (and K_total for rs/ar) a multiple of the ranks; N and K (per rank) multiples of 8\n");
      return 2;
    }
  if (g_fcalls < 1 || g_fpairs < 1 || g_fpairs > 8) {
    fprintf(stderr, "--fused-calls: at least 1; --fused-pairs: 1..8\n");
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
