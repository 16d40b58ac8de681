/* GPU tests of ranks as threads of ONE process (one meld_comm_init per thread; peers of one
 * process share buffers by address, no CUDA IPC). For each rank count P of a list (argument 1
 * or TEST_INPROC_RANKS, default 2,3,4; each 1..8), one world of P threads, one per GPU when
 * there are enough, else sharing the GPUs
 * (MELD_SHARE_GPU), where unlike rank processes their kernels run at the same time, each with
 * its share of the SMs in its plans (the any-P protocol with every rank truly in flight):
 *   - every collective (all-gather, reduce-scatter, all-reduce, all-to-all), bf16 and fp32, on
 *     ordinary, meld_mem_alloc and meld_mem_register'ed buffers, an odd count (generic LL),
 *     two counts of 8-byte blocks (lean LL) and one large enough for the staged / ZC engines,
 *     against a host reference (recv poisoned first); an all-to-all-v with equal outgoing and
 *     unequal incoming blocks;
 *   - 200 back-to-back all-reduces with a different input each (no host sync), every output
 *     checked; the same as a CUDA graph replayed (odd count and lean count);
 *   - the CE engine (copy engines, forced by the plan hint): all-gather and all-to-all on
 *     symmetric sends, in place, 50 back-to-back all-gathers and a graph of them, the comm
 *     checked after each (a failed CE call's copies still run);
 *   - GEMM+RS, GEMM+AR (fused and unfused) and AG+GEMM against a host reference; the fused ones
 *     again with the opt-in interleaved order and several-owner TMA push (opt_cases); AG+GEMM
 *     in fp8 (meld_ag_gemm_fp8: fused, padded, unfused; gathered rows bitwise), GEMM+RS / GEMM+AR
 *     in fp8 (fused and unfused, per-rank scales; rowwise scales, and a CUDA graph of the rowwise
 *     AG+GEMM replayed after the scales changed);
 *   - (4+ ranks) meld_comm_split into two children by parity: each plans with at most its
 *     parent's SMs, and both run a 32 MiB all-reduce at once;
 *   - a peer that never calls: MELD_ERR_TIMEOUT, not a hang;
 *   - (a fresh comm) mismatched counts in an LL all-reduce: the late argument check fails the
 *     call with "arguments differ" and aborts the peers' waits: errors on every rank, no hang;
 *   - (another fresh comm) mismatched counts in a CE all-gather: errors on every rank.
 * Each thread synchronizes only its own stream (a device-wide wait would wait for the peer's
 * kernels, which wait for this thread's next call). */
#include <pthread.h>

#include <initializer_list>

#include "coll_plan.h"
#include "gemm_rs_plan.h"
#include "gpu_test.h"

#define IP_MAX 8
static int P = 2; /* ranks (threads) */
static meld_unique_id g_id, g_id2, g_id3; /* g_id2, g_id3: the mismatch cases' fresh comms */
static pthread_barrier_t g_bar;
static int g_ndev;
/* host copies of every rank's inputs, for the references */
static uint16_t *g_in16[IP_MAX];
static float *g_in32[IP_MAX];
static uint16_t *g_a[IP_MAX], *g_b[IP_MAX]; /* fused cases: A and B of each rank */

static uint16_t to_bf(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

typedef enum { K_ORD = 0, K_SYM = 1, K_REG = 2 } kind_t;
static const char *const g_kind[] = {"ordinary", "meld_mem_alloc", "registered"};
static const char *const g_op[] = {"all_gather", "reduce_scatter", "all_reduce", "all_to_all"};

/* t_ce: this thread's all-gathers and all-to-alls take the CE engine (plan hint), and each
 * call's plan must say so (a fallback would test another engine silently). */
static __thread int t_ce;

static meld_result_t coll(int op, meld_comm_t c, const void *s, void *r, size_t count, meld_dtype_t dt, cudaStream_t st) {
  if (t_ce && (op == 0 || op == 3)) {
    meld_coll_args_t a;
    memset(&a, 0, sizeof a);
    a.op = op == 0 ? MELD_COLL_ALL_GATHER : MELD_COLL_ALL_TO_ALL;
    a.dtype = dt;
    a.send = s;
    a.recv = r;
    a.count = count;
    for (int q = 0; q < P; q++) {
      a.send_counts[q] = a.recv_counts[q] = count;
      a.send_offsets[q] = a.recv_offsets[q] = (size_t)q * count;
    }
    meld_coll_plan_hint_t h;
    memset(&h, 0, sizeof h);
    h.proto = MELD_PROTO_CE;
    meld_coll_plan_t plan;
    memset(&plan, 0, sizeof plan);
    const meld_result_t r2 = meld_coll_run(c, "test_inproc", &a, &h, st, &plan);
    if (r2 == MELD_OK && plan.proto != MELD_PROTO_CE) {
      GT_CHECK(0, "%s of %zu: the CE engine was asked for, %s planned", g_op[op], count, meld_coll_proto_name(plan.proto));
      return MELD_ERR_INTERNAL;
    }
    return r2;
  }
  switch (op) {
    case 0: return meld_all_gather(c, s, r, count, dt, st);
    case 1: return meld_reduce_scatter(c, s, r, count, dt, st);
    case 2: return meld_all_reduce(c, s, r, count, dt, st);
    default: return meld_all_to_all(c, s, r, count, dt, st);
  }
}

/* Elements of send and recv for op with `count` (meld.h conventions). */
static void sizes(int op, size_t count, size_t *ns, size_t *nr) {
  *ns = op == 1 || op == 3 ? count * P : count;
  *nr = op == 0 || op == 3 ? count * P : count;
}

/* Expected recv[i] of `rank` (fp32 value before rounding to the dtype). */
static float expect(int op, int rank, size_t count, size_t i, int fp32) {
#define IN(r, j) (fp32 ? g_in32[r][j] : bf2f(g_in16[r][j]))
  switch (op) {
    case 0: return IN(i / count, i % count);
    case 3: return IN(i / count, (size_t)rank * count + i % count); /* block `rank` of sender i / count */
    default: {
      const size_t j = op == 1 ? (size_t)rank * count + i : i;
      float s = 0.0f;
      for (int r = 0; r < P; r++) s += IN(r, j);
      return s;
    }
  }
#undef IN
}

/* One collective case: fresh inputs, poisoned recv, one call, compared with the reference. */
static void coll_case(int rank, meld_comm_t comm, cudaStream_t st, int op, kind_t kind, int fp32, size_t count,
                      void *dsend, void *drecv, void *host) {
  const size_t es = fp32 ? 4 : 2;
  size_t ns, nr;
  sizes(op, count, &ns, &nr);
  uint64_t seed = 1469598103934665603ull ^ (uint64_t)(rank * 7919 + op * 131 + kind * 17 + fp32 + count);
  for (size_t i = 0; i < ns; i++) {
    float v = gt_rand_f(&seed);
    if (fabsf(v) < 1.0f / 64) v = 0.5f;
    if (fp32) g_in32[rank][i] = v;
    else g_in16[rank][i] = to_bf(v);
  }
  GT_CUDA(cudaMemcpyAsync(dsend, fp32 ? (void *)g_in32[rank] : (void *)g_in16[rank], ns * es, cudaMemcpyHostToDevice, st));
  GT_CUDA(cudaMemsetAsync(drecv, 0xff, nr * es, st));
  GT_CUDA(cudaStreamSynchronize(st));
  pthread_barrier_wait(&g_bar); /* every rank's inputs are in place (host references) */
  GT_MELD(coll(op, comm, dsend, drecv, count, fp32 ? MELD_FP32 : MELD_BF16, st));
  GT_CUDA(cudaMemcpyAsync(host, drecv, nr * es, cudaMemcpyDeviceToHost, st));
  GT_CUDA(cudaStreamSynchronize(st));
  if (t_ce) GT_MELD(meld_comm_check(comm)); /* a failed CE call's copies still ran */
  double num = 0, den = 0;
  size_t bad = 0;
  for (size_t i = 0; i < nr; i++) {
    const float ref = expect(op, rank, count, i, fp32);
    const float want = fp32 ? ref : bf2f(to_bf(ref));
    const float got = fp32 ? ((const float *)host)[i] : bf2f(((const uint16_t *)host)[i]);
    if (!(got == want)) bad++; /* rank-order fp32 sums, rounded once: bitwise */
    num += ((double)got - want) * ((double)got - want);
    den += (double)want * want;
  }
  const double rel = den > 0 ? sqrt(num / den) : 0;
  GT_CHECK(bad == 0 && rel == rel, "%s %s %s count %zu: %zu of %zu elements differ (rel %.3g)", g_op[op], g_kind[kind],
           fp32 ? "fp32" : "bf16", count, bad, nr, rel);
  pthread_barrier_wait(&g_bar); /* the host inputs are reused by the next case */
}

/* All-to-all-v where every sender's outgoing blocks are equal but the incoming ones differ by
 * sender (rank r sends 256 + 4 r bf16 to every rank: 8-byte multiples, the lean LL kernel):
 * the any-P kernel's flat send applies and its flat receive must not (session 25). Values
 * are a function of (sender, destination, index), checked exactly; recv poisoned first. */
static uint16_t a2av_val(int r, int q, size_t i) {
  uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(r * 64 + q + 1) + i;
  float v = gt_rand_f(&seed);
  return to_bf(fabsf(v) < 1.0f / 64 ? 0.5f : v);
}
static void a2av_case(int rank, meld_comm_t comm, cudaStream_t st, void *dsend, void *drecv, uint16_t *host) {
  size_t sc[IP_MAX], so[IP_MAX], rc[IP_MAX], ro[IP_MAX], nr = 0;
  const size_t mine = 256 + 4 * (size_t)rank;
  for (int q = 0; q < P; q++) {
    sc[q] = mine, so[q] = (size_t)q * mine;
    rc[q] = 256 + 4 * (size_t)q, ro[q] = nr;
    nr += rc[q];
  }
  for (int q = 0; q < P; q++)
    for (size_t i = 0; i < mine; i++) host[so[q] + i] = a2av_val(rank, q, i);
  GT_CUDA(cudaMemcpyAsync(dsend, host, (size_t)P * mine * 2, cudaMemcpyHostToDevice, st));
  GT_CUDA(cudaMemsetAsync(drecv, 0xff, nr * 2, st));
  GT_CUDA(cudaStreamSynchronize(st));
  pthread_barrier_wait(&g_bar);
  GT_MELD(meld_all_to_allv(comm, dsend, sc, so, drecv, rc, ro, MELD_BF16, st));
  GT_CUDA(cudaMemcpyAsync(host, drecv, nr * 2, cudaMemcpyDeviceToHost, st));
  GT_CUDA(cudaStreamSynchronize(st));
  size_t bad = 0;
  for (int r = 0; r < P; r++)
    for (size_t i = 0; i < rc[r]; i++) bad += host[ro[r] + i] != a2av_val(r, rank, i);
  GT_CHECK(bad == 0, "all_to_allv (equal outgoing, unequal incoming blocks): %zu of %zu elements wrong", bad, nr);
  pthread_barrier_wait(&g_bar);
}

/* n back-to-back all-reduces (op 2) or all-gathers (op 0: through coll(), so the CE engine
 * when t_ce), a different input each (one device fill before), no host sync between calls;
 * then the same n as a CUDA graph (uploaded before the peers' graphs can run: an upload may
 * wait for the device, where the peers' kernels spin), replayed 3 times. Every output checked,
 * and the comm (a failed CE call's copies still run). */
static void b2b_case(int rank, meld_comm_t comm, cudaStream_t st, int op, kind_t kind, void *in, void *out, size_t count,
                     int n, uint16_t *host) {
  const size_t per_out = op == 0 ? count * P : count; /* elements of one call's recv */
  const char *what = op == 0 ? "all-gathers" : "all-reduces";
  for (int pass = 0; pass < 2; pass++) {
    gt_fill_bf16<<<132, 256, 0, st>>>((uint16_t *)in, count * n, 1000 + 10 * rank + pass + 100 * op);
    GT_CUDA(cudaMemsetAsync(out, 0xff, per_out * n * 2, st));
    GT_CUDA(cudaMemcpyAsync(g_in16[rank], in, count * n * 2, cudaMemcpyDeviceToHost, st));
    GT_CUDA(cudaStreamSynchronize(st));
    pthread_barrier_wait(&g_bar);
    const double t0 = gt_now_s();
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    if (pass == 1) GT_CUDA(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < n; i++)
      GT_MELD(coll(op, comm, (uint16_t *)in + (size_t)i * count, (uint16_t *)out + (size_t)i * per_out, count, MELD_BF16,
                   st));
    if (pass == 1) {
      GT_CUDA(cudaStreamEndCapture(st, &g));
      GT_CUDA(cudaGraphInstantiate(&ge, g, 0));
      GT_CUDA(cudaGraphUpload(ge, st));
      GT_CUDA(cudaStreamSynchronize(st));
      pthread_barrier_wait(&g_bar);
      for (int k = 0; k < 3; k++) GT_CUDA(cudaGraphLaunch(ge, st));
    }
    GT_CUDA(cudaMemcpyAsync(host, out, per_out * n * 2, cudaMemcpyDeviceToHost, st));
    GT_CUDA(cudaStreamSynchronize(st));
    const double dt = gt_now_s() - t0;
    if (ge) GT_CUDA(cudaGraphExecDestroy(ge));
    if (g) GT_CUDA(cudaGraphDestroy(g));
    GT_MELD(meld_comm_check(comm));
    pthread_barrier_wait(&g_bar);
    size_t bad = 0;
    for (int i = 0; i < n; i++)
      for (size_t j = 0; j < per_out; j++) {
        uint16_t want;
        if (op == 0) {
          want = g_in16[j / count][(size_t)i * count + j % count];
        } else {
          float s = 0.0f;
          for (int r = 0; r < P; r++) s += bf2f(g_in16[r][(size_t)i * count + j]);
          want = to_bf(s);
        }
        bad += host[(size_t)i * per_out + j] != want;
      }
    GT_CHECK(bad == 0, "%s%s x%d %s of %zu bf16 (%s): %zu elements differ", t_ce ? "CE " : "", pass ? "graph of" : "back-to-back",
             n, what, count, g_kind[kind], bad);
    gt_log("%s%s %d %s of %zu bf16, %s buffers: %.3f s", t_ce ? "CE " : "", pass ? "graph (3 replays) of" : "back-to-back", n,
           what, count, g_kind[kind], dt);
    pthread_barrier_wait(&g_bar);
  }
}

/* Host reference of GEMM+RS / GEMM+AR rows [r0, r0 + rows): sum over ranks of A_r x B_r^T
 * (A [M, K], B [N, K]), fp32; then the relative error of got (bf16, ld n), over every entry, or
 * over `samples` random ones (seeded by `seed`) when samples > 0. */
static double gemm_rs_err(int64_t n, int64_t k, int64_t r0, int64_t rows, const uint16_t *got, int samples = 0,
                          uint64_t seed = 0) {
  double num = 0, den = 0;
  const int64_t total = samples > 0 ? samples : rows * n;
  for (int64_t t = 0; t < total; t++) {
    int64_t i = t / n, j = t % n; /* (local row) */
    if (samples > 0) {
      seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
      i = (int64_t)(seed % (uint64_t)rows), j = (int64_t)((seed >> 20) % (uint64_t)n);
    }
    float s = 0.0f;
    for (int r = 0; r < P; r++) {
      float d = 0.0f;
      for (int64_t q = 0; q < k; q++) d += bf2f(g_a[r][(r0 + i) * k + q]) * bf2f(g_b[r][j * k + q]);
      s += d;
    }
    const double e = (double)bf2f(got[i * n + j]) - s;
    num += e * e;
    den += (double)s * s;
  }
  return den > 0 ? sqrt(num / den) : 1.0;
}

/* One fused-op call of rank `rank` with C poisoned first; its rows of C ([r0, r0 + rows): this
 * rank's for RS, all for AR) copied to host. */
static void gemm_rs_call(int rank, meld_comm_t comm, cudaStream_t st, const meld_gemm_rs_args_t *a, int is_ar,
                         size_t nc, uint16_t *host, int64_t *r0, int64_t *rows) {
  *r0 = 0, *rows = a->m;
  if (!is_ar) GT_MELD(meld_gemm_rs_rows(a->m, P, rank, r0, rows));
  GT_CUDA(cudaMemsetAsync(a->c, 0xff, nc * 2, st));
  GT_MELD(is_ar ? meld_gemm_ar(comm, a, st) : meld_gemm_rs(comm, a, st));
  GT_CUDA(cudaMemcpyAsync(host, a->c, (size_t)*rows * a->n * 2, cudaMemcpyDeviceToHost, st));
  GT_CUDA(cudaStreamSynchronize(st));
}

/* The fused cases' inputs: A [na], B [nb] random bf16 on the device (seeds `seed` + rank and
 * seed + 100 + rank) and in g_a / g_b for the host references, C [nc] allocated; every rank's
 * host copies are there when it returns. */
static void fused_inputs(int rank, cudaStream_t st, size_t na, size_t nb, size_t nc, int seed, uint16_t **A,
                         uint16_t **B, uint16_t **C) {
  GT_CUDA(cudaMalloc(A, na * 2));
  GT_CUDA(cudaMalloc(B, nb * 2));
  GT_CUDA(cudaMalloc(C, nc * 2));
  free(g_a[rank]), free(g_b[rank]);
  g_a[rank] = (uint16_t *)malloc(na * 2);
  g_b[rank] = (uint16_t *)malloc(nb * 2);
  gt_fill_bf16<<<132, 256, 0, st>>>(*A, na, seed + rank);
  gt_fill_bf16<<<132, 256, 0, st>>>(*B, nb, seed + 100 + rank);
  GT_CUDA(cudaMemcpyAsync(g_a[rank], *A, na * 2, cudaMemcpyDeviceToHost, st));
  GT_CUDA(cudaMemcpyAsync(g_b[rank], *B, nb * 2, cudaMemcpyDeviceToHost, st));
  GT_CUDA(cudaStreamSynchronize(st));
  pthread_barrier_wait(&g_bar);
}

static void fused_cases(int rank, meld_comm_t comm, cudaStream_t st) {
  /* M: 128 rows per rank at P > 2 (the fused GEMM+RS needs a multiple of 128 per rank and
   * refuses other M with MELD_ERR_UNSUPPORTED; M = 256 at P = 2); ml: AG+GEMM rows per rank */
  const int64_t M = P > 2 ? 128 * P : 256, N = 384, K = 512, ml = 128;
  const int64_t mc = M > P * ml ? M : P * ml;        /* rows of C */
  const size_t na = (size_t)M * K, nb = (size_t)N * K, nc = (size_t)mc * N;
  uint16_t *A, *B, *C;
  fused_inputs(rank, st, na, nb, nc, 500, &A, &B, &C);
  uint16_t *host = (uint16_t *)malloc(nc * 2);
  for (int is_ar = 0; is_ar < 2; is_ar++)
    for (int algo = 1; algo <= 2; algo++) {
      meld_gemm_rs_args_t a;
      memset(&a, 0, sizeof a);
      a.a = A, a.lda = K, a.b = B, a.ldb = K, a.b_layout = MELD_B_NK, a.c = C, a.ldc = N;
      a.m = M, a.n = N, a.k = K, a.algo = (meld_gemm_rs_algo_t)algo;
      int64_t r0 = 0, rows = M;
      gemm_rs_call(rank, comm, st, &a, is_ar, nc, host, &r0, &rows);
      const double e = gemm_rs_err(N, K, r0, rows, host);
      GT_CHECK(e <= 1e-2, "%s %s %lld x %lld x %lld: rel err %.3g", is_ar ? "gemm_ar" : "gemm_rs",
               algo == 1 ? "fused" : "unfused", (long long)M, (long long)N, (long long)K, e);
      gt_log("%s %s %lld x %lld x %lld: rel err %.3g", is_ar ? "gemm_ar" : "gemm_rs", algo == 1 ? "fused" : "unfused",
             (long long)M, (long long)N, (long long)K, e);
    }
  /* AG+GEMM: C [P * m_loc, N] = concat of the ranks' A shards (their first m_loc rows) x B^T */
  {
    meld_ag_gemm_args_t g;
    memset(&g, 0, sizeof g);
    g.a_shard = A, g.lda = K, g.b = B, g.ldb = K, g.b_layout = MELD_B_NK, g.c = C, g.ldc = N;
    g.m_loc = ml, g.n_loc = N, g.k = K;
    GT_CUDA(cudaMemsetAsync(C, 0xff, nc * 2, st));
    GT_MELD(meld_ag_gemm(comm, &g, st));
    GT_CUDA(cudaMemcpyAsync(host, C, (size_t)P * ml * N * 2, cudaMemcpyDeviceToHost, st));
    GT_CUDA(cudaStreamSynchronize(st));
    double num = 0, den = 0;
    for (int64_t i = 0; i < P * ml; i++)
      for (int64_t j = 0; j < N; j++) {
        const uint16_t *ar = g_a[i / ml] + (i % ml) * K, *br = g_b[rank] + j * K;
        float d = 0.0f;
        for (int64_t q = 0; q < K; q++) d += bf2f(ar[q]) * bf2f(br[q]);
        const double e = (double)bf2f(host[i * N + j]) - d;
        num += e * e;
        den += (double)d * d;
      }
    const double e = den > 0 ? sqrt(num / den) : 1.0;
    GT_CHECK(e <= 1e-2, "ag_gemm m_loc %lld x %lld x %lld: rel err %.3g", (long long)ml, (long long)N, (long long)K, e);
    gt_log("ag_gemm m_loc %lld x %lld x %lld: rel err %.3g", (long long)ml, (long long)N, (long long)K, e);
  }
  pthread_barrier_wait(&g_bar); /* the peers' references read g_a / g_b */
  free(host);
  GT_CUDA(cudaFree(A));
  GT_CUDA(cudaFree(B));
  GT_CUDA(cudaFree(C));
}

/* meld_ag_gemm_fp8: e4m3 shards [ml, K] and B [N, K] (random, per rank), per-tensor scales 0.5
 * and 0.75; C against a host reference of the same e4m3 values over 4096 sampled entries, and
 * the gathered e4m3 rows bitwise; ml 128 (the fused schedule), ml 100 (the plan's choice for a
 * shard under 128 rows) and MELD_SCHEDULE=unfused (set by rank 0 between barriers); then rowwise
 * scales on those paths and the fused kernel's compact rows. */
static uint8_t *g_a8[IP_MAX], *g_b8[IP_MAX];
/* Rowwise scales (MELD_FP8_ROWWISE): rank q's scale of A's row i and of B's row j, both signs. */
static float rw_sa(int q, int64_t i) { return (0.5f + 0.25f * q + 0.125f * (float)(i % 5)) * (i % 3 == 1 ? -1.f : 1.f); }
static float rw_sb(int q, int64_t j) { return (0.75f + 0.0625f * q + 0.25f * (float)(j % 7)) * (j % 4 == 3 ? -1.f : 1.f); }
static float *dev_rw(int q, int64_t n, int of_b) {
  float *h = (float *)malloc((size_t)n * 4), *d = NULL;
  for (int64_t i = 0; i < n; i++) h[i] = of_b ? rw_sb(q, i) : rw_sa(q, i);
  GT_CUDA(cudaMalloc(&d, (size_t)n * 4));
  GT_CUDA(cudaMemcpy(d, h, (size_t)n * 4, cudaMemcpyHostToDevice));
  free(h);
  return d;
}
/* meld_ag_gemm_fp8's C on this rank (host, [P ml, N]) against the e4m3 inputs in g_a8 / g_b8 over
 * 4096 sampled entries: the relative error. Scales: ts (per tensor: scale_a x scale_b) or, rowwise,
 * fa x rw_sa of the row's rank and rw_sb of this rank's column. */
static double ag_fp8_err(int rank, const uint16_t *host, int64_t ml, int64_t N, int64_t K, int rw, double ts, double fa) {
  double num = 0, den = 0;
  uint64_t seed = 0x9e3779b97f4a7c15ull + (uint64_t)rank;
  for (int t = 0; t < 4096; t++) {
    seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
    const int64_t i = (int64_t)(seed % (uint64_t)(P * ml)), j = (int64_t)((seed >> 24) % (uint64_t)N);
    const uint8_t *ar = g_a8[i / ml] + (i % ml) * K, *br = g_b8[rank] + j * K;
    double d = 0;
    for (int64_t q = 0; q < K; q++) d += (double)gt_e4m3_value(ar[q]) * gt_e4m3_value(br[q]);
    d *= rw ? fa * rw_sa((int)(i / ml), i % ml) * rw_sb(rank, j) : ts;
    const double e = (double)bf2f(host[i * N + j]) - d;
    num += e * e, den += d * d;
  }
  return den > 0 ? sqrt(num / den) : 1.0;
}

static void fp8_cases(int rank, meld_comm_t comm, cudaStream_t st) {
  const int64_t N = 384, K = 1040; /* (K a multiple of 16, not of 128: the last k-block partial) */
  float *sc = NULL;
  const float hs[2] = {0.5f, 0.75f};
  GT_CUDA(cudaMalloc(&sc, 8));
  GT_CUDA(cudaMemcpy(sc, hs, 8, cudaMemcpyHostToDevice));
  /* variants 3-8: rowwise (each rank's shard rows' rw_sa; its columns' rw_sb): fused (the comm
   * CTAs carry each chunk's scales with its rows; own rows' read in place), fused at m_loc 200
   * (compact rows: padded; MELD_SCHEDULE=fused, as the plan picks unfused there), unfused and
   * m_loc 100 (the plan's unfused: the scales all-gathered first), fused with
   * MELD_AG_FP8_SCALES=gather (gathered first), and both at m_loc 200 (the fused kernel maps its
   * padded rows onto the gathered scales: gemm_compact_row) */
  static const char *const vname[9] = {"fused",           "default (m_loc 100)", "unfused",
                                       "fused rowwise",   "fused rowwise m_loc 200",   "unfused rowwise",
                                       "rowwise m_loc 100", "fused rowwise, scales gathered first",
                                       "fused rowwise m_loc 200, scales gathered first"};
  for (int v = 0; v < 9; v++) {
    const int64_t ml = v == 1 || v == 6 ? 100 : v == 4 || v == 8 ? 200 : 128;
    const int rw = v >= 3, unf = v == 2 || v == 5, gath = v == 7 || v == 8, fus = v == 4 || v == 8;
    const size_t na = (size_t)ml * K, nb = (size_t)N * K, nc = (size_t)P * ml * N;
    uint8_t *A, *B, *G;
    uint16_t *C;
    GT_CUDA(cudaMalloc(&A, na));
    GT_CUDA(cudaMalloc(&B, nb));
    GT_CUDA(cudaMalloc(&G, (size_t)P * na));
    GT_CUDA(cudaMalloc(&C, nc * 2));
    gt_fill_e4m3<<<132, 256, 0, st>>>(A, ml, K, K, 800 + 10 * v + rank);
    gt_fill_e4m3<<<132, 256, 0, st>>>(B, N, K, K, 900 + 10 * v + rank);
    free(g_a8[rank]), free(g_b8[rank]);
    g_a8[rank] = (uint8_t *)malloc(na), g_b8[rank] = (uint8_t *)malloc(nb);
    GT_CUDA(cudaMemcpyAsync(g_a8[rank], A, na, cudaMemcpyDeviceToHost, st));
    GT_CUDA(cudaMemcpyAsync(g_b8[rank], B, nb, cudaMemcpyDeviceToHost, st));
    GT_CUDA(cudaMemsetAsync(C, 0xff, nc * 2, st));
    GT_CUDA(cudaMemsetAsync(G, 0x7f, (size_t)P * na, st));
    float *sar = rw ? dev_rw(rank, ml, 0) : NULL, *sbr = rw ? dev_rw(rank, N, 1) : NULL; /* (before the barrier) */
    GT_CUDA(cudaStreamSynchronize(st));
    pthread_barrier_wait(&g_bar);
    if (rank == 0 && unf) setenv("MELD_SCHEDULE", "unfused", 1);
    if (rank == 0 && fus) setenv("MELD_SCHEDULE", "fused", 1);
    if (rank == 0 && gath) setenv("MELD_AG_FP8_SCALES", "gather", 1);
    pthread_barrier_wait(&g_bar);
    meld_ag_gemm_fp8_args_t g;
    memset(&g, 0, sizeof g);
    g.a_shard = A, g.lda = K, g.b = B, g.ldb = K, g.scale_a = sc, g.scale_b = sc + 1, g.c = C, g.ldc = N;
    g.a_gathered = G, g.ld_gathered = K, g.m_loc = ml, g.n_loc = N, g.k = K;
    if (rw) g.scale_a = sar, g.scale_b = sbr, g.scaling = MELD_FP8_ROWWISE;
    GT_MELD(meld_ag_gemm_fp8(comm, &g, st));
    uint16_t *host = (uint16_t *)malloc(nc * 2);
    uint8_t *gh = (uint8_t *)malloc((size_t)P * na);
    GT_CUDA(cudaMemcpyAsync(host, C, nc * 2, cudaMemcpyDeviceToHost, st));
    GT_CUDA(cudaMemcpyAsync(gh, G, (size_t)P * na, cudaMemcpyDeviceToHost, st));
    GT_CUDA(cudaStreamSynchronize(st));
    pthread_barrier_wait(&g_bar);
    if (rank == 0 && (unf || fus)) unsetenv("MELD_SCHEDULE");
    if (rank == 0 && gath) unsetenv("MELD_AG_FP8_SCALES");
    int64_t gbad = 0;
    for (int q = 0; q < P; q++) gbad += memcmp(gh + (size_t)q * na, g_a8[q], na) != 0;
    GT_CHECK(gbad == 0, "ag_gemm_fp8 %s m_loc %lld: %lld ranks' gathered rows differ", vname[v],
             (long long)ml, (long long)gbad);
    const double e = ag_fp8_err(rank, host, ml, N, K, rw, (double)hs[0] * hs[1], 1.0);
    GT_CHECK(e <= 1e-2, "ag_gemm_fp8 %s m_loc %lld x %lld x %lld: rel err %.3g", vname[v],
             (long long)ml, (long long)N, (long long)K, e);
    gt_log("ag_gemm_fp8 %s m_loc %lld x %lld x %lld: rel err %.3g, gathered rows exact", vname[v],
           (long long)ml, (long long)N, (long long)K, e);
    if (v == 3) { /* the rowwise call as a CUDA graph (the scales' scratch exists since the eager
                     call), replayed after every rank doubled its scale_a in device memory */
      pthread_barrier_wait(&g_bar);
      cudaGraph_t gr = NULL;
      cudaGraphExec_t ex = NULL;
      GT_CUDA(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
      GT_MELD(meld_ag_gemm_fp8(comm, &g, st));
      GT_CUDA(cudaStreamEndCapture(st, &gr));
      GT_CUDA(cudaGraphInstantiate(&ex, gr, 0));
      float *h2 = (float *)malloc((size_t)ml * 4);
      for (int64_t r = 0; r < ml; r++) h2[r] = 2.0f * rw_sa(rank, r);
      GT_CUDA(cudaMemcpyAsync(sar, h2, (size_t)ml * 4, cudaMemcpyHostToDevice, st));
      GT_CUDA(cudaMemsetAsync(C, 0xff, nc * 2, st));
      GT_CUDA(cudaStreamSynchronize(st));
      free(h2);
      pthread_barrier_wait(&g_bar);
      GT_CUDA(cudaGraphLaunch(ex, st));
      GT_CUDA(cudaMemcpyAsync(host, C, nc * 2, cudaMemcpyDeviceToHost, st));
      GT_CUDA(cudaStreamSynchronize(st));
      const double e2 = ag_fp8_err(rank, host, ml, N, K, 1, 0.0, 2.0);
      GT_CHECK(e2 <= 1e-2, "ag_gemm_fp8 rowwise graph replay (scale_a doubled): rel err %.3g", e2);
      gt_log("ag_gemm_fp8 rowwise graph replay (scale_a doubled): rel err %.3g", e2);
      GT_CUDA(cudaGraphExecDestroy(ex));
      GT_CUDA(cudaGraphDestroy(gr));
    }
    pthread_barrier_wait(&g_bar); /* the peers' references read g_a8 / g_b8 */
    free(host), free(gh);
    GT_CUDA(cudaFree(sar));
    GT_CUDA(cudaFree(sbr));
    GT_CUDA(cudaFree(A));
    GT_CUDA(cudaFree(B));
    GT_CUDA(cudaFree(G));
    GT_CUDA(cudaFree(C));
  }
  /* meld_gemm_rs_fp8 / meld_gemm_ar_fp8, fused and unfused: A_r [M, K], B_r [N, K] e4m3, rank r's
   * scale_a 0.5 + 0.25 r (scales may differ per rank), scale_b 0.75; then rowwise (rw_sa, rw_sb:
   * each rank's rows scaled before the sum) */
  {
    const int64_t M = P > 2 ? 128 * P : 256;
    const size_t na = (size_t)M * K, nb = (size_t)N * K, nc = (size_t)M * N;
    const float my[2] = {0.5f + 0.25f * rank, 0.75f};
    GT_CUDA(cudaMemcpy(sc, my, 8, cudaMemcpyHostToDevice));
    uint8_t *A, *B;
    uint16_t *C;
    GT_CUDA(cudaMalloc(&A, na));
    GT_CUDA(cudaMalloc(&B, nb));
    GT_CUDA(cudaMalloc(&C, nc * 2));
    float *sar = dev_rw(rank, M, 0), *sbr = dev_rw(rank, N, 1); /* (before the barrier) */
    gt_fill_e4m3<<<132, 256, 0, st>>>(A, M, K, K, 850 + rank);
    gt_fill_e4m3<<<132, 256, 0, st>>>(B, N, K, K, 950 + rank);
    free(g_a8[rank]), free(g_b8[rank]);
    g_a8[rank] = (uint8_t *)malloc(na), g_b8[rank] = (uint8_t *)malloc(nb);
    GT_CUDA(cudaMemcpyAsync(g_a8[rank], A, na, cudaMemcpyDeviceToHost, st));
    GT_CUDA(cudaMemcpyAsync(g_b8[rank], B, nb, cudaMemcpyDeviceToHost, st));
    GT_CUDA(cudaStreamSynchronize(st));
    pthread_barrier_wait(&g_bar);
    uint16_t *host = (uint16_t *)malloc(nc * 2);
    for (int c3 = 0; c3 < 8; c3++) { /* (rowwise, AR, algo) */
      const int rw = c3 / 4, is_ar = c3 / 2 % 2, algo = 1 + c3 % 2;
        meld_gemm_rs_fp8_args_t a;
        memset(&a, 0, sizeof a);
        a.a = A, a.lda = K, a.b = B, a.ldb = K, a.scale_a = sc, a.scale_b = sc + 1, a.c = C, a.ldc = N;
        a.m = M, a.n = N, a.k = K, a.algo = (meld_gemm_rs_algo_t)algo;
        if (rw) a.scale_a = sar, a.scale_b = sbr, a.scaling = MELD_FP8_ROWWISE;
        int64_t r0 = 0, rows = M;
        if (!is_ar) GT_MELD(meld_gemm_rs_rows(M, P, rank, &r0, &rows));
        GT_CUDA(cudaMemsetAsync(C, 0xff, nc * 2, st));
        GT_MELD(is_ar ? meld_gemm_ar_fp8(comm, &a, st) : meld_gemm_rs_fp8(comm, &a, st));
        GT_CUDA(cudaMemcpyAsync(host, C, (size_t)rows * N * 2, cudaMemcpyDeviceToHost, st));
        GT_CUDA(cudaStreamSynchronize(st));
        double num = 0, den = 0;
        uint64_t seed = 0x2545f4914f6cdd1dull + (uint64_t)(rank * 4 + is_ar * 2 + algo);
        for (int t = 0; t < 2048 && rows > 0; t++) {
          seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
          const int64_t i = (int64_t)(seed % (uint64_t)rows), j = (int64_t)((seed >> 24) % (uint64_t)N);
          double sum = 0;
          for (int q = 0; q < P; q++) {
            const uint8_t *ar = g_a8[q] + (r0 + i) * K, *br = g_b8[q] + j * K;
            double d = 0;
            for (int64_t x = 0; x < K; x++) d += (double)gt_e4m3_value(ar[x]) * gt_e4m3_value(br[x]);
            sum += d * (rw ? (double)rw_sa(q, r0 + i) * rw_sb(q, j) : (0.5 + 0.25 * q) * 0.75);
          }
          const double e = (double)bf2f(host[i * N + j]) - sum;
          num += e * e, den += sum * sum;
        }
        const double e = den > 0 ? sqrt(num / den) : (rows > 0 ? 1.0 : 0.0);
        GT_CHECK(e <= 1e-2, "%s_fp8 %s%s %lld x %lld x %lld: rel err %.3g", is_ar ? "gemm_ar" : "gemm_rs",
                 algo == 1 ? "fused" : "unfused", rw ? " rowwise" : "", (long long)M, (long long)N, (long long)K, e);
        gt_log("%s_fp8 %s%s %lld x %lld x %lld: rel err %.3g", is_ar ? "gemm_ar" : "gemm_rs",
               algo == 1 ? "fused" : "unfused", rw ? " rowwise" : "", (long long)M, (long long)N, (long long)K, e);
      }
    pthread_barrier_wait(&g_bar); /* the peers' references read g_a8 / g_b8 */
    free(host);
    GT_CUDA(cudaFree(sar));
    GT_CUDA(cudaFree(sbr));
    GT_CUDA(cudaFree(A));
    GT_CUDA(cudaFree(B));
    GT_CUDA(cudaFree(C));
  }
  GT_CUDA(cudaFree(sc));
}

/* GEMM+RS / GEMM+AR (fused) at a shape where the optional schedules apply, each of: the
 * defaults (at 3+ ranks the interleaved owner order, session 28), the rotation
 * (MELD_GEMM_RS_ORDER=rotate), the interleaved order (MELD_GEMM_RS_ORDER=ileave: at 2 ranks RS
 * only), the TMA push to several owners (MELD_GEMM_RS_PUSH=tma, 3+ ranks; with it the AR's
 * copy flags wait for the next epilogue, session 28), the last two together (session 27); which
 * order the plan takes is asserted; and the AR's copy flags deferred to the next epilogue without
 * the TMA push (MELD_GEMM_AR_COPY_FLAG=next, 3+ ranks, session 28). (The AR's copies leave by
 * TMA in every case but at one rank.) Rank 0 sets the variables
 * between barriers (the library reads them per call); 4 blocks of 128 rows per owner, 4 k-blocks
 * per tile (so the partial prefetch runs too), N wide enough for one wave of tickets per raster
 * group of the rank's SMs (the order's rule; asserted through the plan). Sampled reference
 * (4096 entries). */
static void opt_cases(int rank, meld_comm_t comm, cudaStream_t st) {
  meld_comm_info_t info;
  GT_MELD(meld_comm_info(comm, &info));
  /* G * tiles_n >= SMs (3+ ranks, G 2) or >= 2 x SMs (2 ranks, G 4): tiles_n >= SMs / 2 */
  const int64_t M = 512 * P, N = 256 * (int64_t)((info.sm_count + 1) / 2 > 16 ? (info.sm_count + 1) / 2 : 16), K = 256;
  const size_t na = (size_t)M * K, nb = (size_t)N * K, nc = (size_t)M * N;
  if (P < 2 || 2 * (size_t)(P - 1) * 512 * (size_t)N * 2 + ((size_t)1 << 20) > info.workspace_bytes) {
    if (rank == 0) gt_log("opt_cases: skipped (%d rank(s), or the AR's slots of %lld columns exceed the %zu-byte workspace)", P,
                          (long long)N, info.workspace_bytes);
    return;
  }
  uint16_t *A, *B, *C;
  fused_inputs(rank, st, na, nb, nc, 700, &A, &B, &C);
  uint16_t *host = NULL;
  GT_CUDA(cudaMallocHost((void **)&host, nc * 2));
  static const char *const cfg[][3] = {{NULL, NULL, NULL},  {"rotate", NULL, NULL}, {"ileave", NULL, NULL},
                                       {NULL, "tma", NULL}, {"ileave", "tma", NULL}, {NULL, NULL, "next"}};
  for (int c = 0; c < 6; c++)
    for (int is_ar = 0; is_ar < 2; is_ar++) {
      pthread_barrier_wait(&g_bar);
      if (rank == 0) {
        if (cfg[c][0]) setenv("MELD_GEMM_RS_ORDER", cfg[c][0], 1);
        else unsetenv("MELD_GEMM_RS_ORDER");
        if (cfg[c][1]) setenv("MELD_GEMM_RS_PUSH", cfg[c][1], 1);
        else unsetenv("MELD_GEMM_RS_PUSH");
        if (cfg[c][2]) setenv("MELD_GEMM_AR_COPY_FLAG", cfg[c][2], 1);
        else unsetenv("MELD_GEMM_AR_COPY_FLAG");
      }
      pthread_barrier_wait(&g_bar);
      meld_gemm_rs_args_t a;
      memset(&a, 0, sizeof a);
      a.a = A, a.lda = K, a.b = B, a.ldb = K, a.b_layout = MELD_B_NK, a.c = C, a.ldc = N;
      a.m = M, a.n = N, a.k = K, a.algo = MELD_GEMM_RS_FUSED;
      const char *what = is_ar ? "gemm_ar" : "gemm_rs";
      { /* the order the case names must be the one taken, or it tests nothing new */
        const int want = cfg[c][0] && !strcmp(cfg[c][0], "rotate") ? 0 : cfg[c][0] ? P > 2 || !is_ar : P > 2;
        gemm_rs_plan_t pl;
        GT_MELD(gemm_rs_plan_make_sm(&a, is_ar, P, rank, 1, (size_t)1 << 40, info.sm_count, &pl));
        GT_CHECK(pl.ileave == want, "%s %lld x %lld x %lld at %d ranks (%d SMs), order %s: ileave %d, expected %d", what,
                 (long long)M, (long long)N, (long long)K, P, info.sm_count, cfg[c][0] ? cfg[c][0] : "default", pl.ileave,
                 want);
      }
      int64_t r0 = 0, rows = M;
      gemm_rs_call(rank, comm, st, &a, is_ar, nc, host, &r0, &rows);
      const double e = gemm_rs_err(N, K, r0, rows, host, 4096, 0x9e3779b97f4a7c15ull + (uint64_t)(97 * rank + 13 * c + is_ar));
      GT_CHECK(e <= 1e-2, "%s fused %lld x %lld x %lld, order %s, push %s, copy flags %s: rel err %.3g", what,
               (long long)M, (long long)N, (long long)K, cfg[c][0] ? cfg[c][0] : "default",
               cfg[c][1] ? cfg[c][1] : "default", cfg[c][2] ? cfg[c][2] : "default", e);
      gt_log("%s fused %lld x %lld x %lld, order %s, push %s, copy flags %s: rel err %.3g", what, (long long)M,
             (long long)N, (long long)K, cfg[c][0] ? cfg[c][0] : "default", cfg[c][1] ? cfg[c][1] : "default",
             cfg[c][2] ? cfg[c][2] : "default", e);
    }
  pthread_barrier_wait(&g_bar); /* the peers' references read g_a / g_b */
  if (rank == 0) {
    unsetenv("MELD_GEMM_RS_ORDER");
    unsetenv("MELD_GEMM_RS_PUSH");
    unsetenv("MELD_GEMM_AR_COPY_FLAG");
  }
  free(g_a[rank]), free(g_b[rank]);
  g_a[rank] = g_b[rank] = NULL;
  GT_CUDA(cudaFreeHost(host));
  GT_CUDA(cudaFree(A));
  GT_CUDA(cudaFree(B));
  GT_CUDA(cudaFree(C));
  pthread_barrier_wait(&g_bar);
}

/* CE in place: every rank's block already in its slot of recv (send = recv + rank * B); the
 * other slots poisoned. */
static void ce_inplace_case(int rank, meld_comm_t comm, cudaStream_t st, void *drecv, uint16_t *host) {
  const size_t count = 65536 + 8;
  uint64_t seed = 77 + (uint64_t)rank;
  for (size_t i = 0; i < count; i++) g_in16[rank][i] = to_bf(gt_rand_f(&seed) + 0.25f);
  GT_CUDA(cudaMemsetAsync(drecv, 0xff, count * P * 2, st));
  uint16_t *mine = (uint16_t *)drecv + (size_t)rank * count;
  GT_CUDA(cudaMemcpyAsync(mine, g_in16[rank], count * 2, cudaMemcpyHostToDevice, st));
  GT_CUDA(cudaStreamSynchronize(st));
  pthread_barrier_wait(&g_bar);
  GT_MELD(coll(0, comm, mine, drecv, count, MELD_BF16, st));
  GT_CUDA(cudaMemcpyAsync(host, drecv, count * P * 2, cudaMemcpyDeviceToHost, st));
  GT_CUDA(cudaStreamSynchronize(st));
  GT_MELD(meld_comm_check(comm));
  size_t bad = 0;
  for (size_t i = 0; i < count * P; i++) bad += host[i] != g_in16[i / count][i % count];
  GT_CHECK(bad == 0, "CE all-gather in place of %zu bf16: %zu of %zu elements differ", count, bad, count * P);
  pthread_barrier_wait(&g_bar);
}

/* meld_comm_split of thread ranks sharing one GPU (4+ ranks, even): two children of P / 2 ranks
 * (by parity) plan with at most the parent's share of the SMs (a child of fewer sharers would
 * otherwise take sm_count / (P / 2) each), and both run a 32 MiB all-reduce at once (the
 * collectives' many-CTA plan: 64 CTAs where the share allows; with the old shares the four
 * grids could not all be resident). Values are small integers: the bf16 sums are exact. */
__global__ void split_fill(uint16_t *p, size_t n, int rank) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const __nv_bfloat16 b = __float2bfloat16((float)((int)((i * 31 + (size_t)rank * 7) % 13) - 6));
    p[i] = *(const uint16_t *)&b;
  }
}
static void split_cases(int rank, meld_comm_t comm, cudaStream_t st) {
  if (P < 4 || P % 2) return;
  meld_comm_info_t pinfo, cinfo;
  GT_MELD(meld_comm_info(comm, &pinfo));
  meld_comm_t child = NULL;
  GT_MELD(meld_comm_split(comm, rank % 2, rank, NULL, &child));
  GT_MELD(meld_comm_info(child, &cinfo));
  GT_CHECK(cinfo.nranks == P / 2 && cinfo.sm_count <= pinfo.sm_count,
           "split: child of %d ranks plans with %d SMs, its parent with %d", cinfo.nranks, cinfo.sm_count,
           pinfo.sm_count);
  const size_t n = (size_t)16 << 20; /* 32 MiB of bf16 */
  uint16_t *buf = NULL, *host = NULL;
  GT_CUDA(cudaMalloc((void **)&buf, n * 2));
  GT_CUDA(cudaMallocHost((void **)&host, n * 2));
  split_fill<<<264, 256, 0, st>>>(buf, n, rank);
  GT_CUDA(cudaStreamSynchronize(st));
  pthread_barrier_wait(&g_bar);
  GT_MELD(meld_all_reduce(child, buf, buf, n, MELD_BF16, st));
  GT_CUDA(cudaMemcpyAsync(host, buf, n * 2, cudaMemcpyDeviceToHost, st));
  GT_CUDA(cudaStreamSynchronize(st));
  GT_MELD(meld_comm_check(child));
  size_t bad = 0;
  for (size_t i = 0; i < n; i += 4093) {
    int want = 0;
    for (int q = rank % 2; q < P; q += 2) want += (int)((i * 31 + (size_t)q * 7) % 13) - 6;
    bad += bf2f(host[i]) != (float)want;
  }
  GT_CHECK(bad == 0, "split: two children's concurrent all-reduce: %zu sampled sums wrong", bad);
  gt_log("split: 2 children of %d thread ranks, %d SMs each (parent %d), concurrent 32 MiB all-reduce exact",
         cinfo.nranks, cinfo.sm_count, pinfo.sm_count);
  pthread_barrier_wait(&g_bar); /* (destroy syncs the device: no rank launches meanwhile) */
  GT_MELD(meld_comm_destroy(child));
  GT_CUDA(cudaFree(buf));
  GT_CUDA(cudaFreeHost(host));
  pthread_barrier_wait(&g_bar);
}

static void *rank_main(void *arg) {
  const int rank = (int)(intptr_t)arg;
  meld_config_t cfg;
  meld_comm_t comm;
  cudaStream_t st;
  if (gt_thread_comm(rank, P, g_ndev, g_id, 3000, &cfg, &comm, &st)) return NULL;
  const size_t big = 300007, maxe = big * P, bytes = maxe * 4;
  void *send[3], *recv[3], *host;
  GT_CUDA(cudaMalloc(&send[K_ORD], bytes));
  GT_CUDA(cudaMalloc(&recv[K_ORD], bytes));
  GT_MELD(meld_mem_alloc(comm, bytes, &send[K_SYM]));
  GT_MELD(meld_mem_alloc(comm, bytes, &recv[K_SYM]));
  GT_CUDA(cudaMalloc(&send[K_REG], bytes));
  GT_CUDA(cudaMalloc(&recv[K_REG], bytes));
  GT_MELD(meld_mem_register(comm, send[K_REG], bytes));
  GT_MELD(meld_mem_register(comm, recv[K_REG], bytes));
  GT_CUDA(cudaMallocHost(&host, bytes));
  GT_CUDA(cudaMallocHost((void **)&g_in16[rank], (maxe > (size_t)200 * 4104 ? maxe : (size_t)200 * 4104) * 2));
  GT_CUDA(cudaMallocHost((void **)&g_in32[rank], bytes));
  pthread_barrier_wait(&g_bar);

  /* (1) every collective, kind and dtype; an odd count (the generic LL kernel), two counts
   * whose blocks are multiples of 8 bytes (the lean LL kernels: coll_ll<2> at P = 2,
   * coll_ll<-1> above; 1024: one unit per thread, 49152: several, at P <= 4), and one past
   * the LL engine's sizes */
  int cases = 0;
  for (int kind = 0; kind < 3; kind++)
    for (int fp32 = 0; fp32 < 2; fp32++)
      for (int op = 0; op < 4; op++)
        for (size_t count : {(size_t)1003, (size_t)1024, (size_t)49152, big}) {
          coll_case(rank, comm, st, op, (kind_t)kind, fp32, count, send[kind], recv[kind], host);
          cases++;
        }
  gt_log("%d collective cases (4 ops x bf16/fp32 x ordinary/meld_mem_alloc/registered x 4 sizes)", cases);
  a2av_case(rank, comm, st, send[K_ORD], recv[K_ORD], (uint16_t *)host);

  /* (1b) the CE engine (copy engines; forced, the plan checked): all-gather and all-to-all with
   * symmetric sends (meld_mem_alloc, registered), bf16 / fp32, 2 sizes (16-byte blocks); an
   * in-place all-gather; back-to-back calls and a graph of them */
  if (P > 1) {
    t_ce = 1;
    cases = 0;
    for (int kind = K_SYM; kind <= K_REG; kind++)
      for (int fp32 = 0; fp32 < 2; fp32++)
        for (int op = 0; op < 4; op += 3)
          for (size_t count : {(size_t)1000, (size_t)300000}) {
            coll_case(rank, comm, st, op, (kind_t)kind, fp32, count, send[kind], recv[kind], host);
            cases++;
          }
    ce_inplace_case(rank, comm, st, recv[K_SYM], (uint16_t *)host);
    b2b_case(rank, comm, st, 0, K_SYM, send[K_SYM], recv[K_SYM], 4104, 50, (uint16_t *)host);
    t_ce = 0;
    gt_log("CE engine: %d cases (all-gather, all-to-all x bf16/fp32 x meld_mem_alloc/registered x 2 sizes), in place, "
           "back-to-back and graph",
           cases);
  }

  /* (2) back-to-back and graphs: ordinary and symmetric buffers (200 x 4099 bf16 each side;
   * 4104 on ordinary buffers: the lean LL kernel) */
  b2b_case(rank, comm, st, 2, K_ORD, send[K_ORD], recv[K_ORD], 4099, 200, (uint16_t *)host);
  b2b_case(rank, comm, st, 2, K_ORD, send[K_ORD], recv[K_ORD], 4104, 200, (uint16_t *)host);
  b2b_case(rank, comm, st, 2, K_SYM, send[K_SYM], recv[K_SYM], 4099, 200, (uint16_t *)host);

  /* (3) the fused ops (each rank planned with its share of the SMs when the GPU is shared) */
  fused_cases(rank, comm, st);
  fp8_cases(rank, comm, st);
  opt_cases(rank, comm, st);
  split_cases(rank, comm, st);

  GT_MELD(meld_comm_check(comm));
  GT_CUDA(cudaStreamSynchronize(st));
  pthread_barrier_wait(&g_bar);
  GT_MELD(meld_mem_deregister(comm, send[K_REG]));
  GT_MELD(meld_mem_deregister(comm, recv[K_REG]));
  GT_MELD(meld_mem_free(comm, send[K_SYM]));
  GT_MELD(meld_mem_free(comm, recv[K_SYM]));

  /* (4) a peer that never calls: rank 0's all-reduce times out (3 s), the others stay away */
  if (rank == 0 && P > 1) {
    const double t0 = gt_now_s();
    GT_MELD(meld_all_reduce(comm, send[K_ORD], recv[K_ORD], 1003, MELD_BF16, st));
    GT_CUDA(cudaStreamSynchronize(st));
    const meld_result_t r = meld_comm_check(comm);
    const double dt = gt_now_s() - t0;
    GT_CHECK(r == MELD_ERR_TIMEOUT && dt < 20, "missing peer: %s after %.1f s (%s)", meld_strerror(r), dt,
             meld_last_error());
    gt_log("missing peer: %s after %.1f s", meld_strerror(r), dt);
  }
  pthread_barrier_wait(&g_bar);
  for (int k = 0; k < 3; k += 2) {
    GT_CUDA(cudaFree(send[k]));
    GT_CUDA(cudaFree(recv[k]));
  }
  GT_CUDA(cudaFreeHost(host));
  GT_CUDA(cudaStreamDestroy(st));
  (void)meld_comm_destroy(comm);
  if (P == 1) return NULL; /* (5) needs a peer */

  /* (5) mismatched counts, LL (one CTA): rank 0 all-reduces 1000 bf16, the others 1008. Rank 0
   * gets every line it expects, then its late argument check finds the peers' hash different,
   * fails the call and aborts the peers, whose waits for its last line (never sent) end there. */
  meld_comm_t c2 = NULL;
  GT_MELD(meld_comm_init(&c2, P, g_id2, rank, &cfg));
  if (!c2) return NULL;
  cudaStream_t s2;
  GT_CUDA(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  void *in = NULL, *out = NULL;
  GT_CUDA(cudaMalloc(&in, 4096));
  GT_CUDA(cudaMalloc(&out, 4096));
  GT_CUDA(cudaMemsetAsync(in, 0x3c, 4096, s2));
  const double t0 = gt_now_s();
  GT_MELD(meld_all_reduce(c2, in, out, rank == 0 ? 1000 : 1008, MELD_BF16, s2));
  GT_CUDA(cudaStreamSynchronize(s2));
  const meld_result_t r = meld_comm_check(c2);
  const double dt = gt_now_s() - t0;
  GT_CHECK((r == MELD_ERR_ABORTED || r == MELD_ERR_INVALID_ARG) && dt < 20, "mismatched counts: rank %d: %s after %.1f s (%s)",
           rank, meld_strerror(r), dt, meld_last_error());
  if (rank == 0)
    GT_CHECK(strstr(meld_last_error(), "arguments differ") != NULL, "mismatched counts: rank 0 should report the mismatch: %s",
             meld_last_error());
  gt_log("mismatched counts: %s after %.1f s: %s", meld_strerror(r), dt, meld_last_error());
  pthread_barrier_wait(&g_bar);
  GT_CUDA(cudaFree(in));
  GT_CUDA(cudaFree(out));
  GT_CUDA(cudaStreamDestroy(s2));
  (void)meld_comm_destroy(c2);

  /* (6) mismatched counts through the CE engine (a fresh comm): rank 0 all-gathers 1000 bf16
   * per rank, the others 1008. The copies run whatever the handshake says (they only read the
   * peers' sends, inside the symmetric range); every rank's call must fail (the handshake),
   * none hang or fault, and rank 0 names the mismatch. */
  meld_comm_t c3 = NULL;
  GT_MELD(meld_comm_init(&c3, P, g_id3, rank, &cfg));
  if (!c3) return NULL;
  cudaStream_t s3;
  GT_CUDA(cudaStreamCreateWithFlags(&s3, cudaStreamNonBlocking));
  void *sin = NULL, *sout = NULL;
  GT_MELD(meld_mem_alloc(c3, 4096, &sin));
  GT_CUDA(cudaMalloc(&sout, 4096 * P));
  GT_CUDA(cudaMemsetAsync(sin, 0x3c, 4096, s3));
  t_ce = 1;
  const double t3 = gt_now_s();
  GT_MELD(coll(0, c3, sin, sout, rank == 0 ? 1000 : 1008, MELD_BF16, s3));
  t_ce = 0;
  GT_CUDA(cudaStreamSynchronize(s3));
  const meld_result_t r3 = meld_comm_check(c3);
  const double dt3 = gt_now_s() - t3;
  GT_CHECK((r3 == MELD_ERR_ABORTED || r3 == MELD_ERR_INVALID_ARG) && dt3 < 20,
           "CE mismatched counts: rank %d: %s after %.1f s (%s)", rank, meld_strerror(r3), dt3, meld_last_error());
  if (rank == 0)
    GT_CHECK(strstr(meld_last_error(), "arguments differ") != NULL,
             "CE mismatched counts: rank 0 should report the mismatch: %s", meld_last_error());
  gt_log("CE mismatched counts: %s after %.1f s: %s", meld_strerror(r3), dt3, meld_last_error());
  pthread_barrier_wait(&g_bar);
  (void)meld_mem_free(c3, sin);
  GT_CUDA(cudaFree(sout));
  GT_CUDA(cudaStreamDestroy(s3));
  (void)meld_comm_destroy(c3);
  return NULL;
}

/* One world of P rank threads: every case above. */
static int run_world(int nranks) {
  P = nranks;
  const char *share = getenv("MELD_SHARE_GPU");
  if (g_ndev < P && !(share && !strcmp(share, "1"))) setenv("MELD_SHARE_GPU", "1", 1);
  printf("test_inproc: %d ranks as threads on %d GPU(s)\n", P, g_ndev < P ? g_ndev : P);
  fflush(stdout);
  if (meld_get_unique_id(&g_id) != MELD_OK || meld_get_unique_id(&g_id2) != MELD_OK ||
      meld_get_unique_id(&g_id3) != MELD_OK) {
    printf("meld_get_unique_id: %s\n", meld_last_error());
    return 1;
  }
  pthread_barrier_init(&g_bar, NULL, P);
  pthread_t th[IP_MAX];
  for (int r = 0; r < P; r++) pthread_create(&th[r], NULL, rank_main, (void *)(intptr_t)r);
  for (int r = 0; r < P; r++) pthread_join(th[r], NULL);
  pthread_barrier_destroy(&g_bar);
  for (int r = 0; r < P; r++) {
    cudaFreeHost(g_in16[r]);
    cudaFreeHost(g_in32[r]);
    free(g_a[r]);
    free(g_b[r]);
    g_in16[r] = NULL, g_in32[r] = NULL, g_a[r] = NULL, g_b[r] = NULL;
  }
  return 0;
}

/* Rank counts: argument 1 or TEST_INPROC_RANKS, a comma list (default 2,3,4: two ranks, an odd
 * count whose splits have tails, and four). */
int main(int argc, char **argv) {
  gt_inproc_env(); /* before any CUDA call (gpu_test.h says why) */
  const char *list = argc > 1 ? argv[1] : getenv("TEST_INPROC_RANKS");
  if (!list || !*list) list = "2,3,4";
  int ps[16], n = 0;
  for (const char *q = list; *q && n < 16;) {
    char *end = NULL;
    const long v = strtol(q, &end, 10);
    if (end == q || v < 1 || v > IP_MAX || (*end && *end != ',')) {
      fprintf(stderr, "test_inproc: rank counts '%s' (argument 1 or TEST_INPROC_RANKS): want a list of 1..%d, e.g. 2,3,4\n",
              list, IP_MAX);
      return 2;
    }
    ps[n++] = (int)v;
    q = *end ? end + 1 : end;
  }
  if (cudaGetDeviceCount(&g_ndev) != cudaSuccess || g_ndev < 1) {
    printf("test_inproc: no GPU, skipped\n[  PASSED  ] 1 test(s).\n");
    return 0;
  }
  for (int i = 0; i < n; i++)
    if (run_world(ps[i])) return 1;
  return gt_summary("test_inproc");
}
