/* GPU tests of the collectives (meld_all_gather, meld_reduce_scatter, meld_all_reduce,
 * meld_all_to_all(v)) on every GPU present, and on 1 rank:
 *   1. each op vs the C reference (tests/common/ref_coll.c) on fresh random data, bf16 and
 *      fp32, sizes 1, 7, 1000, 1000003, outputs poisoned before each call: gathers and
 *      all-to-all exact (whole buffer, so stray writes show), sums bitwise equal to the fp32
 *      rank-order reference and within 1e-2 (bf16) / 1e-5 (fp32) of fp64; variants: default
 *      plan, a tiny ring (3 CTAs x 4 KiB chunks: hundreds of credit round trips), misaligned
 *      pointers, one-shot and two-shot all-reduce forced, in-place forms;
 *   2. 1000 back-to-back calls with no host sync, sizes/ops/plans changing every call, inputs
 *      written on the stream by a kernel before each call and every output checked by a
 *      device compare kernel (mismatch and coverage counters read once at the end);
 *   3. CUDA-graph capture of (fill, op, check) and 100 replays;
 *   4. (2+ GPUs) a rank that never joins: the others get MELD_ERR_TIMEOUT from
 *      meld_comm_check and from the next call, not a hang.
 * TEST_COLL_ONLY=bulk: only group 1 with the opt-in TMA bulk RING variants instead;
 * TEST_COLL_ONLY=ce: only its CE variants (copy engines), on symmetric and registered buffers.
 * MELD_TIMEOUT_MS defaults to 2000 here. */
#include <cuda_bf16.h>

#include "coll_plan.h"
#include "comm.h"
#include "common/ref_coll.c" /* the GPU rule links no tests/common objects */
#include "common/ref_gemm.c"
#include "gpu/gpu_test.h"

static int g_ndev = 0;

/* ---- helpers ------------------------------------------------------------------------------- */

enum {
  V_DEFAULT = 0,
  V_RING = 1,
  V_MISALIGNED = 2,
  V_ONESHOT = 3,
  V_TWOSHOT = 4,
  V_INPLACE = 5,
  V_LL = 6,
  V_ROUNDS = 7,
  V_INPLACE_RING = 8,
  V_BULK = 9,  /* RING with the TMA bulk push (opt-in engine): only with TEST_COLL_ONLY=bulk */
  V_BULK2 = 10, /* ... and the TMA drain of copies                                           */
  V_ZC = 11,    /* ZC forced (3 CTAs x 128 threads): taken on symmetric buffers, else ROUNDS   */
  V_ZC1 = 12,   /* all-reduce, symmetric send, ordinary recv: the ZC one-shot (default plan)   */
  V_CE = 13,    /* CE forced (copy engines pull): taken at 2+ ranks on symmetric sends, else ZC/ROUNDS */
  V_CE_INPLACE = 14, /* ... an in-place all-gather                                           */
  V_LAST = V_CE_INPLACE
};
/* TEST_COLL_ONLY=bulk: only the bulk variants' reference checks (the device script runs them
 * in a second process, so that a failure of the opt-in engine cannot hide the defaults'). */
static int g_only_bulk = 0;
/* TEST_COLL_ONLY=ce: only the CE variants' reference checks, on symmetric and registered
 * buffers (the CE engine with peers in other processes, quickly). */
static int g_only_ce = 0;
static const char *const g_vname[] = {"default",  "tiny-ring",     "misaligned", "one-shot",  "two-shot", "in-place",
                                      "ll-forced", "tiny-rounds", "in-place-ring", "tiny-bulk", "bulk-drain", "zc-forced", "zc-one-shot",
                                      "ce-forced", "ce-in-place"};
static const char *const g_opname[] = {"all_gather", "reduce_scatter", "all_reduce", "all_to_all", "all_to_allv"};
enum { OP_AG = 0, OP_RS = 1, OP_AR = 2, OP_A2A = 3, OP_A2AV = 4 };

/* Runs one op through the public API, or through meld_coll_run with a plan hint. */
static meld_result_t run_op(meld_comm_t comm, int op, const void *send, void *recv, size_t count,
                            meld_dtype_t dt, const meld_coll_plan_hint_t *hint, cudaStream_t s,
                            meld_coll_plan_t *plan_out = NULL) {
  if (plan_out) plan_out->proto = MELD_PROTO_AUTO;
  if (!hint) {
    switch (op) {
      case OP_AG: return meld_all_gather(comm, send, recv, count, dt, s);
      case OP_RS: return meld_reduce_scatter(comm, send, recv, count, dt, s);
      case OP_AR: return meld_all_reduce(comm, send, recv, count, dt, s);
      default: return meld_all_to_all(comm, send, recv, count, dt, s);
    }
  }
  static meld_coll_args_t a;
  memset(&a, 0, sizeof a);
  a.op = op == OP_AG ? MELD_COLL_ALL_GATHER : op == OP_RS ? MELD_COLL_REDUCE_SCATTER
         : op == OP_AR ? MELD_COLL_ALL_REDUCE : MELD_COLL_ALL_TO_ALL;
  a.dtype = dt;
  a.send = send;
  a.recv = recv;
  a.count = count;
  for (int q = 0; q < comm->nranks; q++) {
    a.send_counts[q] = a.recv_counts[q] = count;
    a.send_offsets[q] = a.recv_offsets[q] = (size_t)q * count;
  }
  meld_result_t r = meld_coll_validate("test", comm->nranks, &a);
  if (r != MELD_OK || meld_coll_is_empty(&a)) return r;
  return meld_coll_run(comm, "test", &a, hint, s, plan_out);
}

static void rand_fill(void *buf, size_t n, meld_dtype_t dt, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 12345;
  for (size_t i = 0; i < n; i++) {
    float v = gt_rand_f(&s);
    if (v == 0.0f) v = 0.5f; /* never zeros */
    ref_store(buf, dt, i, v);
  }
}

/* all-to-allv splits: elements rank r sends to rank q (some pairs 0). */
static size_t a2av_count(int r, int q, size_t scale) {
  if ((r + 2 * q) % 5 == 3) return 0;
  return (size_t)((r * 7 + q * 13 + 5) % 11 + 1) * scale / 4 + (size_t)(r + q) % 3;
}

/* ---- 1. correctness vs the C reference ------------------------------------------------------- */

typedef struct {
  meld_comm_t comm;
  cudaStream_t s;
  uint8_t *d_send, *d_recv; /* device, g_cap bytes each */
  size_t cap;
  int rank, P;
  int sym; /* d_send and d_recv are symmetric (meld_mem_alloc or meld_mem_register): ZC's buffers */
  uint8_t *d_plain; /* ordinary device memory, cap bytes (V_ZC1's recv) */
} ctx_t;

static void check_case(ctx_t *c, int op, meld_dtype_t dt, size_t count, int variant, int case_id) {
  const int P = c->P, me = c->rank;
  const size_t es = ref_elem_bytes(dt);
  char name[128];
  snprintf(name, sizeof name, "%s %s count=%zu %s%s", g_opname[op], dt == MELD_BF16 ? "bf16" : "fp32", count,
           g_vname[variant], c->sym ? " (symmetric buffers)" : "");
  /* Per-rank element counts of send and recv. */
  size_t scnt[64 * 64], soff[64 * 64], roff[64];
  size_t send_n = 0, recv_n = 0;
  switch (op) {
    case OP_AG: send_n = count, recv_n = count * P; break;
    case OP_RS: send_n = count * P, recv_n = count; break;
    case OP_AR: send_n = recv_n = count; break;
    case OP_A2A: send_n = recv_n = count * P; break;
    case OP_A2AV:
      for (int r = 0; r < P; r++) {
        size_t o = 0;
        for (int q = 0; q < P; q++) {
          scnt[r * P + q] = a2av_count(r, q, count);
          soff[r * P + q] = o;
          o += scnt[r * P + q] + 1; /* gaps: block starts at every alignment */
        }
        if (r == me) send_n = o;
      }
      for (int p = 0; p < P; p++) roff[p] = recv_n, recv_n += scnt[p * P + me] + 2;
      break;
  }
  /* Every rank's input (so each rank can compute its own expected output). */
  size_t max_send = send_n;
  if (op == OP_A2AV)
    for (int r = 0; r < P; r++) {
      size_t o = soff[r * P + P - 1] + scnt[r * P + P - 1] + 1;
      max_send = o > max_send ? o : max_send;
    }
  void **in = (void **)calloc((size_t)P, sizeof *in);
  for (int r = 0; r < P; r++) {
    in[r] = malloc(max_send * es + 16);
    rand_fill(in[r], max_send, dt, (uint64_t)case_id * 1000 + (uint64_t)r + 1);
  }
  /* Device buffers: misaligned by one element, or in place. */
  size_t shift = variant == V_MISALIGNED ? es : 0;
  uint8_t *d_send = c->d_send + shift, *d_recv = c->d_recv + shift * 3;
  if (send_n * es + 64 > c->cap || recv_n * es + 64 > c->cap) {
    GT_CHECK(0, "%s: buffers too small", name);
    return;
  }
  GT_CUDA(cudaMemsetAsync(c->d_recv, 0xff, c->cap, c->s)); /* poison: NaN in both dtypes */
  if (variant == V_ZC1) { /* recv in ordinary memory, poisoned */
    d_recv = c->d_plain;
    GT_CUDA(cudaMemsetAsync(c->d_plain, 0xff, c->cap, c->s));
  }
  if (variant == V_INPLACE || variant == V_INPLACE_RING || variant == V_BULK2 || variant == V_CE_INPLACE) { /* bulk-drain: in place too */
    if (op == OP_AR) d_send = d_recv;
    if (op == OP_AG) d_send = d_recv + (size_t)me * count * es;
    if (op == OP_RS) d_recv = d_send + (size_t)me * count * es;
  }
  GT_CUDA(cudaMemcpyAsync(d_send, in[me], send_n * es, cudaMemcpyHostToDevice, c->s));
  meld_coll_plan_hint_t hint;
  memset(&hint, 0, sizeof hint);
  const meld_coll_plan_hint_t *hp = NULL;
  if (variant == V_RING) hint.ctas = 3, hint.chunk_bytes = 4096, hint.threads = 384, hint.proto = MELD_PROTO_RING, hp = &hint;
  if (variant == V_ROUNDS)
    hint.ctas = 3, hint.chunk_bytes = 4096, hint.threads = 384, hint.proto = MELD_PROTO_ROUNDS, hp = &hint;
  if (variant == V_LL) hint.ctas = 3, hint.threads = 256, hint.proto = MELD_PROTO_LL, hp = &hint; /* ROUNDS where too big */
  if (variant == V_INPLACE_RING)
    hint.ctas = 2, hint.chunk_bytes = 4096, hint.slots = 2, hint.threads = 256, hint.proto = MELD_PROTO_RING, hp = &hint;
  if (variant == V_BULK)
    hint.ctas = 3, hint.chunk_bytes = 4096, hint.threads = 256, hint.proto = MELD_PROTO_RING, hint.bulk = 1, hp = &hint;
  if (variant == V_BULK2)
    hint.ctas = 2, hint.chunk_bytes = 32768, hint.threads = 128, hint.proto = MELD_PROTO_RING, hint.bulk = 2, hp = &hint;
  if (variant == V_ONESHOT) hint.ar_algo = MELD_AR_ONE_SHOT, hp = &hint;
  if (variant == V_TWOSHOT) hint.ar_algo = MELD_AR_TWO_SHOT, hint.ctas = 5, hp = &hint;
  if (variant == V_ZC1) hp = &hint; /* all fields AUTO: the default plan, reported */
  if (variant == V_ZC) /* both loop depths: unroll 4 at even counts */
    hint.ctas = 3, hint.threads = 128, hint.proto = MELD_PROTO_ZC, hint.unroll = count % 2 ? 8 : 4, hp = &hint;
  if (variant == V_CE || variant == V_CE_INPLACE) hint.proto = MELD_PROTO_CE, hp = &hint;
  meld_coll_plan_t plan;
  meld_result_t r;
  if (op == OP_A2AV) {
    size_t rc[64]; /* recv_counts[p] = what p sends me */
    for (int p = 0; p < P; p++) rc[p] = scnt[p * P + me];
    r = meld_all_to_allv(c->comm, d_send, scnt + (size_t)me * P, soff + (size_t)me * P, d_recv, rc, roff, dt, c->s);
  } else {
    r = run_op(c->comm, op, d_send, d_recv, count, dt, hp, c->s, &plan);
  }
  GT_CHECK(r == MELD_OK, "%s: %s: %s", name, meld_strerror(r), meld_last_error());
  if (variant == V_ZC1 && r == MELD_OK) { /* LL below 1 MB, the one-shot ZC above */
    const int want_zc = count * es > ((size_t)1 << 20) || P == 1; /* LL needs a peer */
    GT_CHECK((plan.proto == MELD_PROTO_ZC) == want_zc && (!want_zc || plan.ar_algo == MELD_AR_ONE_SHOT),
             "%s: engine %s (%s), want %s", name, meld_coll_proto_name(plan.proto),
             plan.ar_algo == MELD_AR_ONE_SHOT ? "one-shot" : "two-shot", want_zc ? "zc one-shot" : "ll");
  }
  if (variant == V_ZC && r == MELD_OK) {
    /* ZC runs exactly where the buffers are symmetric and the blocks 16-byte multiples (any
     * all-reduce count); ordinary memory falls back to ROUNDS. */
    const int want_zc = c->sym && (op == OP_AR || count * es % 16 == 0);
    GT_CHECK((plan.proto == MELD_PROTO_ZC) == want_zc, "%s: engine %s, want %s", name,
             meld_coll_proto_name(plan.proto), want_zc ? "zc" : "not zc");
  }
  if ((variant == V_CE || variant == V_CE_INPLACE) && r == MELD_OK) {
    /* CE runs exactly at 2+ ranks with a symmetric send and 16-byte blocks */
    const int want_ce = c->sym && P > 1 && count * es % 16 == 0;
    GT_CHECK((plan.proto == MELD_PROTO_CE) == want_ce, "%s: engine %s, want %s", name, meld_coll_proto_name(plan.proto),
             want_ce ? "ce" : "not ce");
  }
  GT_CUDA(cudaStreamSynchronize(c->s));
  GT_MELD(meld_comm_check(c->comm));
  /* Expected output. */
  uint8_t *got = (uint8_t *)malloc(recv_n * es + 16);
  GT_CUDA(cudaMemcpy(got, d_recv, recv_n * es, cudaMemcpyDeviceToHost));
  if (op == OP_AG || op == OP_A2A || op == OP_A2AV) {
    uint8_t *want = (uint8_t *)malloc(recv_n * es + 16);
    memset(want, 0xff, recv_n * es);
    if (op == OP_AG) {
      ref_all_gather(P, (const void *const *)in, want, count, dt);
    } else {
      size_t sc[64 * 64], so[64 * 64], ro[64];
      for (int a = 0; a < P; a++)
        for (int b = 0; b < P; b++) {
          sc[a * P + b] = op == OP_A2A ? count : scnt[a * P + b];
          so[a * P + b] = op == OP_A2A ? (size_t)b * count : soff[a * P + b];
        }
      for (int p = 0; p < P; p++) ro[p] = op == OP_A2A ? (size_t)p * count : roff[p];
      ref_all_to_allv(P, me, (const void *const *)in, sc, so, want, ro, dt);
    }
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < recv_n * es; i++)
      if (got[i] != want[i] && !bad++) first = i;
    GT_CHECK(bad == 0, "%s: %zu of %zu bytes differ, first at byte %zu", name, bad, recv_n * es, first);
    free(want);
  } else {
    /* Sums: reference from this rank's slice of every input. */
    const void **sl = (const void **)calloc((size_t)P, sizeof *sl);
    for (int q = 0; q < P; q++) sl[q] = (const uint8_t *)in[q] + (op == OP_RS ? (size_t)me * count * es : 0);
    double *ref = (double *)malloc(recv_n * sizeof(double) + 8);
    uint8_t *ref32 = (uint8_t *)malloc(recv_n * es + 16);
    ref_all_reduce_f64(P, sl, ref, recv_n, dt);
    ref_all_reduce_f32(P, sl, ref32, recv_n, dt);
    double err = ref_rel_err(got, dt, ref, recv_n);
    double tol = dt == MELD_BF16 ? 1e-2 : 1e-5;
    GT_CHECK(err <= tol, "%s: relative error %.3g > %.0e", name, err, tol);
    size_t diff = 0, first = 0;
    for (size_t i = 0; i < recv_n * es; i++)
      if (got[i] != ref32[i] && !diff++) first = i / es;
    GT_CHECK(diff == 0, "%s: %zu bytes differ from the fp32 rank-order sum (first element %zu: got %g want %g)",
             name, diff, first, ref_load(got, dt, first), ref_load(ref32, dt, first));
    free(ref);
    free(ref32);
    free(sl);
  }
  free(got);
  for (int q = 0; q < P; q++) free(in[q]);
  free(in);
}

static void test_reference(ctx_t *c) {
  const size_t counts[] = {1, 7, 1000, 1000003};
  int id = 0, n = 0;
  double t0 = gt_now_s();
  for (int d = 0; d < 2; d++) {
    meld_dtype_t dt = d ? MELD_FP32 : MELD_BF16;
    for (int op = 0; op <= OP_A2AV; op++)
      for (size_t ci = 0; ci < 4; ci++) {
        size_t count = counts[ci];
        if (op == OP_A2AV && count == 1000003) count = 200001;
        for (int v = 0; v <= V_LAST; v++) {
          if (v == V_MISALIGNED && ci != 2) continue;
          if ((v == V_ONESHOT || v == V_TWOSHOT) && op != OP_AR) continue;
          if (v == V_INPLACE && (op == OP_A2A || op == OP_A2AV || ci != 2)) continue;
          if (v == V_INPLACE_RING && (op == OP_A2A || op == OP_A2AV || ci < 2)) continue;
          if ((v == V_RING || v == V_ROUNDS || v == V_LL || v == V_BULK || v == V_BULK2) && op == OP_A2AV) continue;
          if ((v == V_BULK || v == V_BULK2) != (g_only_bulk != 0)) continue;
          if (g_only_ce && v != V_CE && v != V_CE_INPLACE) continue;
          if (v == V_ZC && (op == OP_A2AV || (ci == 3 && d == 1 && !c->sym))) continue;
          if (v == V_ZC1 && (op != OP_AR || !c->sym)) continue;
          if (v == V_CE && op != OP_AG && op != OP_A2A) continue;
          if (v == V_CE_INPLACE && (op != OP_AG || ci != 2)) continue;
          /* Symmetric buffers: the engines that differ there (ZC by default and forced), and
           * LL / ROUNDS on symmetric memory; the RING variants are covered above. */
          if (c->sym && (v == V_RING || v == V_INPLACE_RING || v == V_BULK || v == V_BULK2 || v == V_ONESHOT))
            continue;
          check_case(c, op, dt, count, v, ++id);
          n++;
        }
      }
  }
  gt_log("reference checks%s: %d cases in %.1f s", c->sym == 2 ? " (registered buffers)" : c->sym ? " (symmetric buffers)" : "", n,
         gt_now_s() - t0);
}

/* ---- 2 and 3. back-to-back calls and graphs, checked on the device ------------------------------ */

__host__ __device__ static inline float tc_val(uint32_t it, uint32_t r, uint64_t j) {
  uint32_t h = it * 0x9E3779B1u ^ r * 0x85EBCA77u ^ (uint32_t)j * 0xC2B2AE3Du ^ (uint32_t)(j >> 32);
  h ^= h >> 15, h *= 0x2C1B3C6Du, h ^= h >> 12, h *= 0x297A2D39u, h ^= h >> 15;
  int v = (int)(h & 0xffu) - 128;
  return (float)(v == 0 ? 1 : v) / 64.0f; /* exact in bf16; never zero */
}

/* Iteration number: *itp (graphs) + add. */
__device__ static inline uint32_t tc_iter(const uint32_t *itp, uint32_t add) { return (itp ? *itp : 0u) + add; }

__global__ void tc_fill(void *buf, size_t n, int dt, uint32_t rank, const uint32_t *itp, uint32_t add) {
  uint32_t it = tc_iter(itp, add);
  for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < n; j += (size_t)gridDim.x * blockDim.x) {
    float v = tc_val(it, rank, j);
    if (dt == MELD_BF16) ((__nv_bfloat16 *)buf)[j] = __float2bfloat16_rn(v);
    else ((float *)buf)[j] = v;
  }
}

/* Compares every output element with what the op must produce (sums: fp32 in rank order,
 * rounded once: bitwise). counters[0] += mismatches, counters[1] += elements checked. */
__global__ void tc_check(const void *recv, int op, size_t count, int dt, int P, int me, const uint32_t *itp,
                         uint32_t add, unsigned long long *counters) {
  uint32_t it = tc_iter(itp, add);
  size_t n = op == OP_AG ? count * (size_t)P : count;
  unsigned long long bad = 0, seen = 0;
  for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < n; j += (size_t)gridDim.x * blockDim.x) {
    float want;
    if (op == OP_AG) {
      want = tc_val(it, (uint32_t)(j / count), j % count);
    } else {
      size_t src = op == OP_RS ? (size_t)me * count + j : j;
      want = 0.0f;
      for (int r = 0; r < P; r++) {
        float v = tc_val(it, (uint32_t)r, src);
        if (dt == MELD_BF16) v = __bfloat162float(__float2bfloat16_rn(v));
        want += v;
      }
    }
    uint32_t gb, wb;
    if (dt == MELD_BF16) {
      __nv_bfloat16 w = __float2bfloat16_rn(want);
      gb = ((const uint16_t *)recv)[j];
      wb = *(const uint16_t *)&w;
    } else {
      gb = ((const uint32_t *)recv)[j];
      wb = __float_as_uint(want);
    }
    bad += gb != wb;
    seen++;
  }
  if (bad) atomicAdd(&counters[0], bad);
  if (seen) atomicAdd(&counters[1], seen);
}

__global__ void tc_bump(uint32_t *itp) { (*itp)++; }

/* The label of a run with MELD_COLL_PDL=0 (programmatic dependent launch is the default). */
static const char *coll_pdl_label(const char *off) {
  const char *v = getenv("MELD_COLL_PDL");
  return v && strcmp(v, "0") == 0 ? off : "";
}

static void test_back_to_back(ctx_t *c, int iters) {
  const int P = c->P, me = c->rank;
  const size_t sizes[] = {1, 777, 65539, 250000, 8, 4096};
  unsigned long long *d_cnt = NULL;
  GT_CUDA(cudaMalloc(&d_cnt, 2 * sizeof *d_cnt));
  GT_CUDA(cudaMemset(d_cnt, 0, 2 * sizeof *d_cnt));
  meld_coll_plan_hint_t ring, two, ll, rounds;
  memset(&ring, 0, sizeof ring);
  memset(&two, 0, sizeof two);
  memset(&ll, 0, sizeof ll);
  memset(&rounds, 0, sizeof rounds);
  ring.ctas = 2, ring.chunk_bytes = 4096, ring.threads = 384, ring.proto = MELD_PROTO_RING;
  if (c->sym) { /* symmetric buffers: ZC (3 CTAs) in the RING's turn */
    memset(&ring, 0, sizeof ring);
    ring.ctas = 3, ring.threads = 256, ring.proto = MELD_PROTO_ZC;
  }
  two.ar_algo = MELD_AR_TWO_SHOT;
  ll.ctas = 3, ll.threads = 128, ll.proto = MELD_PROTO_LL;
  rounds.ctas = 2, rounds.chunk_bytes = 4096, rounds.threads = 256, rounds.proto = MELD_PROTO_ROUNDS;
  unsigned long long expect_seen = 0;
  double t0 = gt_now_s();
  int fails = 0;
  for (int i = 0; i < iters; i++) {
    int op = i % 3; /* AG, RS, AR */
    meld_dtype_t dt = (i / 3) % 2 ? MELD_FP32 : MELD_BF16;
    size_t count = sizes[(i / 6) % 6];
    /* Engines interleaved: default (LL or RING by size), tiny RING, forced LL, two-shot
     * (all-reduce) or tiny ROUNDS: every switch between engines happens with no host sync. */
    const meld_coll_plan_hint_t *hp = i % 4 == 1                   ? &ring
                                      : i % 8 == 2                 ? &ll
                                      : (op == OP_AR && i % 4 == 3) ? &two
                                      : i % 8 == 7                 ? &rounds
                                                                   : NULL;
    size_t send_n = op == OP_RS ? count * P : count;
    tc_fill<<<64, 256, 0, c->s>>>(c->d_send, send_n, dt, (uint32_t)me, NULL, (uint32_t)i);
    meld_result_t r = run_op(c->comm, op, c->d_send, c->d_recv, count, dt, hp, c->s);
    if (r != MELD_OK && ++fails <= 3) gt_log("call %d: %s: %s", i, meld_strerror(r), meld_last_error());
    tc_check<<<64, 256, 0, c->s>>>(c->d_recv, op, count, dt, P, me, NULL, (uint32_t)i, d_cnt);
    expect_seen += op == OP_AG ? count * P : count;
  }
  GT_CUDA(cudaStreamSynchronize(c->s));
  GT_CUDA(cudaGetLastError());
  GT_CHECK(fails == 0, "%d of %d back-to-back calls failed to enqueue", fails, iters);
  GT_MELD(meld_comm_check(c->comm));
  unsigned long long h[2] = {0, 0};
  GT_CUDA(cudaMemcpy(h, d_cnt, sizeof h, cudaMemcpyDeviceToHost));
  GT_CHECK(h[0] == 0 && h[1] == expect_seen, "%d back-to-back calls: %llu mismatches, %llu of %llu elements checked",
           iters, h[0], h[1], expect_seen);
  gt_log("%d back-to-back calls (no host sync%s%s): %llu mismatches in %llu elements, %.2f s", iters,
         c->sym == 2 ? ", registered buffers, ZC in turn" : c->sym ? ", symmetric buffers, ZC in turn" : "", coll_pdl_label(", no PDL"), h[0], h[1],
         gt_now_s() - t0);
  cudaFree(d_cnt);
}

static void test_graph(ctx_t *c, int replays) {
  const int P = c->P, me = c->rank;
  uint32_t *d_it = NULL;
  unsigned long long *d_cnt = NULL;
  GT_CUDA(cudaMalloc(&d_it, sizeof *d_it));
  GT_CUDA(cudaMemset(d_it, 0, sizeof *d_it));
  GT_CUDA(cudaMalloc(&d_cnt, 2 * sizeof *d_cnt));
  GT_CUDA(cudaMemset(d_cnt, 0, 2 * sizeof *d_cnt));
  GT_CUDA(cudaStreamSynchronize(c->s));
  GT_CUDA(cudaDeviceSynchronize());
  /* One graph: AR bf16 (4099 elements, one-shot), AG fp32 (100001), RS bf16 (3333), each
   * with its fill and check; then the iteration counter. */
  const int ops[3] = {OP_AR, OP_AG, OP_RS};
  const size_t cnts[3] = {4099, 100001, 3333};
  const meld_dtype_t dts[3] = {MELD_BF16, MELD_FP32, MELD_BF16};
  cudaGraph_t g = NULL;
  cudaGraphExec_t ge = NULL;
  GT_CUDA(cudaStreamBeginCapture(c->s, cudaStreamCaptureModeThreadLocal));
  for (int k = 0; k < 3; k++) {
    size_t send_n = ops[k] == OP_RS ? cnts[k] * P : cnts[k];
    tc_fill<<<64, 256, 0, c->s>>>(c->d_send, send_n, dts[k], (uint32_t)me, d_it, (uint32_t)k * 7919u);
    meld_coll_plan_hint_t zc;
    memset(&zc, 0, sizeof zc);
    zc.proto = MELD_PROTO_ZC, zc.ctas = 4; /* symmetric buffers: ZC; else the default */
    meld_result_t r = run_op(c->comm, ops[k], c->d_send, c->d_recv, cnts[k], dts[k], c->sym ? &zc : NULL, c->s);
    GT_CHECK(r == MELD_OK, "capture %s: %s: %s", g_opname[ops[k]], meld_strerror(r), meld_last_error());
    tc_check<<<64, 256, 0, c->s>>>(c->d_recv, ops[k], cnts[k], dts[k], P, me, d_it, (uint32_t)k * 7919u, d_cnt);
  }
  tc_bump<<<1, 1, 0, c->s>>>(d_it);
  GT_CUDA(cudaStreamEndCapture(c->s, &g));
  GT_CUDA(cudaGraphInstantiate(&ge, g, 0));
  double t0 = gt_now_s();
  for (int i = 0; i < replays; i++) GT_CUDA(cudaGraphLaunch(ge, c->s));
  GT_CUDA(cudaStreamSynchronize(c->s));
  GT_MELD(meld_comm_check(c->comm));
  unsigned long long h[2] = {0, 0};
  uint32_t it = 0;
  GT_CUDA(cudaMemcpy(h, d_cnt, sizeof h, cudaMemcpyDeviceToHost));
  GT_CUDA(cudaMemcpy(&it, d_it, sizeof it, cudaMemcpyDeviceToHost));
  unsigned long long want = (unsigned long long)replays * (cnts[0] + cnts[1] * P + cnts[2]);
  GT_CHECK(h[0] == 0 && h[1] == want && it == (uint32_t)replays,
           "graph: %llu mismatches, %llu of %llu elements checked, %u of %d replays", h[0], h[1], want, it, replays);
  gt_log("graph%s%s: %d replays x 3 collectives, %llu mismatches, %.3f s", c->sym ? " (symmetric, ZC)" : "",
         coll_pdl_label(" (no PDL)"), replays, h[0], gt_now_s() - t0);
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  cudaFree(d_it);
  cudaFree(d_cnt);
}

/* ---- main per rank --------------------------------------------------------------------------------- */

/* One rank: the LL kernel in loopback (MELD_COLL_LOOPBACK=1: rank 0 of 2 whose virtual peer
 * is itself) through the public API, plain, with PDL and lean (MELD_COLL_LL_LEAN 1 and 2), every op it takes, bf16 and fp32,
 * sizes not multiples of anything: all-gather gives [send; send], all-reduce 2 x send,
 * reduce-scatter send[i] + send[n + i] (what it pushed to its virtual peer), checked bitwise; then 200 back-to-back all-reduces with changing inputs
 * (the lines' flags alternate halves by epoch) and graph replays. And without the variable,
 * one rank is a plain copy. */
static void test_loopback(ctx_t *c) {
  const size_t counts[] = {1, 7, 1000, 4096, 4097, 30011};
  const int ops[] = {OP_AG, OP_RS, OP_AR};
  const meld_dtype_t dts[] = {MELD_BF16, MELD_FP32};
  int cases = 0, bad = 0;
  const double t0 = gt_now_s();
  for (int mode = 0; mode < 4; mode++) { /* 1: with PDL; 2: the lean LL instantiation (MELD_COLL_LL_LEAN:
                                          * where every length is a multiple of 8 bytes); 3: the
                                          * any-P lean one (MELD_COLL_LL_LEAN=2) */
    const int pdl = mode == 1;
    setenv("MELD_COLL_LOOPBACK", "1", 1);
    setenv("MELD_COLL_PDL", pdl ? "1" : "0", 1);
    setenv("MELD_COLL_LL_LEAN", mode == 2 ? "1" : mode == 3 ? "2" : "0", 1);
    for (int oi = 0; oi < 3; oi++)
      for (int di = 0; di < 2; di++)
        for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
          const int op = ops[oi];
          const meld_dtype_t dt = dts[di];
          const size_t n = counts[ci], es = ref_elem_bytes(dt);
          const size_t send_n = op == OP_RS ? 2 * n : n, recv_n = op == OP_AG ? 2 * n : n;
          uint8_t *h_send = (uint8_t *)malloc(send_n * es), *h_recv = (uint8_t *)malloc(recv_n * es);
          rand_fill(h_send, send_n, dt, 7000 + (uint64_t)cases);
          GT_CUDA(cudaMemcpy(c->d_send, h_send, send_n * es, cudaMemcpyHostToDevice));
          GT_CUDA(cudaMemset(c->d_recv, 0xff, recv_n * es + 64));
          meld_result_t r = op == OP_AG   ? meld_all_gather(c->comm, c->d_send, c->d_recv, n, dt, c->s)
                            : op == OP_RS ? meld_reduce_scatter(c->comm, c->d_send, c->d_recv, n, dt, c->s)
                                          : meld_all_reduce(c->comm, c->d_send, c->d_recv, n, dt, c->s);
          GT_CHECK(r == MELD_OK, "loopback %s count %zu: %s: %s", g_opname[op], n, meld_strerror(r), meld_last_error());
          GT_CUDA(cudaStreamSynchronize(c->s));
          GT_CUDA(cudaMemcpy(h_recv, c->d_recv, recv_n * es, cudaMemcpyDeviceToHost));
          /* The reference (tests/common/ref_coll.c) for 2 ranks whose second is this one: its
           * contribution is what this rank pushed to it (reduce-scatter: block 1; else all of
           * send); sums in fp32 from 0.0f in rank order, as the kernel: compared bitwise. */
          uint8_t *h_ref = (uint8_t *)malloc(recv_n * es);
          const void *srcs[2] = {h_send, op == OP_RS ? h_send + n * es : h_send};
          if (op == OP_AG) ref_all_gather(2, srcs, h_ref, n, dt);
          else ref_all_reduce_f32(2, srcs, h_ref, n, dt);
          size_t wrong = 0;
          for (size_t i = 0; i < recv_n; i++) wrong += memcmp(h_recv + i * es, h_ref + i * es, es) != 0;
          free(h_ref);
          GT_CHECK(wrong == 0, "loopback%s %s %s count %zu: %zu of %zu elements wrong", pdl ? " (PDL)" : mode ? " (lean)" : "", g_opname[op],
                   dt == MELD_BF16 ? "bf16" : "fp32", n, wrong, recv_n);
          bad += wrong != 0;
          cases++;
          free(h_send), free(h_recv);
        }
    /* back-to-back and graphs: all-reduce of 1000 fp32 with a fresh input each time */
    const size_t n = 1000;
    float *h = (float *)malloc(n * 4 * 201), *out = (float *)malloc(n * 4);
    for (size_t i = 0; i < n * 201; i++) h[i] = (float)((i * 2654435761u) % 1000) - 500.0f;
    size_t wrong = 0;
    for (int it = 0; it < 200; it++) {
      GT_CUDA(cudaMemcpyAsync(c->d_send, h + (size_t)it * n, n * 4, cudaMemcpyHostToDevice, c->s));
      GT_MELD(meld_all_reduce(c->comm, c->d_send, c->d_recv + (size_t)(it % 2) * n * 4, n, MELD_FP32, c->s));
      GT_CUDA(cudaMemcpyAsync(out, c->d_recv + (size_t)(it % 2) * n * 4, n * 4, cudaMemcpyDeviceToHost, c->s));
      GT_CUDA(cudaStreamSynchronize(c->s));
      for (size_t i = 0; i < n; i++) wrong += out[i] != 2.0f * h[(size_t)it * n + i];
    }
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    GT_CUDA(cudaStreamBeginCapture(c->s, cudaStreamCaptureModeThreadLocal));
    meld_result_t r = meld_all_reduce(c->comm, c->d_send, c->d_recv, n, MELD_FP32, c->s);
    GT_CUDA(cudaStreamEndCapture(c->s, &g));
    GT_CHECK(r == MELD_OK, "loopback graph capture: %s", meld_last_error());
    GT_CUDA(cudaGraphInstantiate(&ge, g, 0));
    for (int it = 0; it < 10 && ge; it++) {
      GT_CUDA(cudaMemcpyAsync(c->d_send, h + (size_t)(it + 100) * n, n * 4, cudaMemcpyHostToDevice, c->s));
      GT_CUDA(cudaGraphLaunch(ge, c->s));
      GT_CUDA(cudaMemcpyAsync(out, c->d_recv, n * 4, cudaMemcpyDeviceToHost, c->s));
      GT_CUDA(cudaStreamSynchronize(c->s));
      for (size_t i = 0; i < n; i++) wrong += out[i] != 2.0f * h[(size_t)(it + 100) * n + i];
    }
    if (ge) cudaGraphExecDestroy(ge);
    if (g) cudaGraphDestroy(g);
    GT_CHECK(wrong == 0, "loopback%s: back-to-back / graph all-reduces: %zu elements wrong", pdl ? " (PDL)" : mode ? " (lean)" : "",
             wrong);
    GT_MELD(meld_comm_check(c->comm));
    free(h), free(out);
    unsetenv("MELD_COLL_LOOPBACK");
    unsetenv("MELD_COLL_PDL");
    unsetenv("MELD_COLL_LL_LEAN");
  }
  /* all-to-all is not a loopback op: a clear error */
  setenv("MELD_COLL_LOOPBACK", "1", 1);
  meld_result_t r = meld_all_to_all(c->comm, c->d_send, c->d_recv, 16, MELD_BF16, c->s);
  GT_CHECK(r == MELD_ERR_UNSUPPORTED && strstr(meld_last_error(), "MELD_COLL_LOOPBACK"),
           "loopback all-to-all -> %s (%s), want MELD_ERR_UNSUPPORTED", meld_strerror(r), meld_last_error());
  /* The on-by-default switches take 0 or 1 only (MELD_COLL_LL_LEAN also 2): anything else is refused before any launch,
   * naming the variable, and the comm stays usable. */
  const char *const flags[] = {"MELD_COLL_PDL", "MELD_COLL_LL_LEAN"};
  for (int f = 0; f < 2; f++) {
    setenv(flags[f], f ? "3" : "yes", 1); /* LL_LEAN takes 0, 1, 2 */
    r = meld_all_reduce(c->comm, c->d_send, c->d_recv, 1024, MELD_BF16, c->s);
    GT_CHECK(r == MELD_ERR_INVALID_ARG && strstr(meld_last_error(), flags[f]),
             "%s=%s -> %s (%s), want MELD_ERR_INVALID_ARG naming it", flags[f], getenv(flags[f]), meld_strerror(r),
             meld_last_error());
    unsetenv(flags[f]);
  }
  GT_MELD(meld_all_reduce(c->comm, c->d_send, c->d_recv, 1024, MELD_BF16, c->s));
  GT_CUDA(cudaStreamSynchronize(c->s));
  GT_MELD(meld_comm_check(c->comm));
  unsetenv("MELD_COLL_LOOPBACK");
  gt_log("loopback (LL kernel as rank 0 of 2; plain, PDL, lean): %d cases, %d wrong; 3 x 200 back-to-back + 10 graph replays; %.2f s",
         cases, bad, gt_now_s() - t0);
}

static void rank_main(int rank, int nranks) {
  meld_config_t cfg = MELD_CONFIG_INIT;
  cfg.bootstrap_timeout_ms = 30000;
  ctx_t c;
  memset(&c, 0, sizeof c);
  c.rank = rank;
  c.P = nranks;
  GT_MELD(meld_comm_init_env(&c.comm, &cfg));
  if (!c.comm) return;
  c.cap = (size_t)1000003 * nranks * 4 + 4096;
  GT_CUDA(cudaMalloc(&c.d_send, c.cap));
  GT_CUDA(cudaMalloc(&c.d_recv, c.cap));
  GT_CUDA(cudaMalloc(&c.d_plain, c.cap));
  GT_CUDA(cudaStreamCreateWithFlags(&c.s, cudaStreamNonBlocking));
  if (!g_only_ce) test_reference(&c);
  if (!g_only_bulk && !g_only_ce) {
    test_back_to_back(&c, gt_reps(1000));
    test_graph(&c, 100);
    /* Again without programmatic dependent launches and with the generic LL instantiation
     * only (MELD_COLL_PDL=0, MELD_COLL_LL_LEAN=0; both on by default since session 21). */
    setenv("MELD_COLL_PDL", "0", 1);
    setenv("MELD_COLL_LL_LEAN", "0", 1);
    test_reference(&c);
    test_back_to_back(&c, gt_reps(500));
    test_graph(&c, 50);
    unsetenv("MELD_COLL_PDL");
    unsetenv("MELD_COLL_LL_LEAN");
    if (nranks == 1) test_loopback(&c);
  }
  meld_bootstrap_barrier(c.comm->boot);
  cudaFree(c.d_send);
  cudaFree(c.d_recv);
  if (!g_only_bulk) { /* again on symmetric buffers: the ZC engine */
    c.d_send = c.d_recv = NULL;
    GT_MELD(meld_mem_alloc(c.comm, c.cap, (void **)&c.d_send));
    GT_MELD(meld_mem_alloc(c.comm, c.cap, (void **)&c.d_recv));
    if (c.d_send && c.d_recv) {
      c.sym = 1;
      test_reference(&c);
      if (!g_only_ce) {
        test_back_to_back(&c, gt_reps(1000));
        test_graph(&c, 100);
        /* Again with ordinary launches of the LL and ZC kernels (MELD_COLL_PDL=0; by default
         * each call's launch overlaps the previous kernel, which it waits for on the device). */
        setenv("MELD_COLL_PDL", "0", 1);
        test_back_to_back(&c, gt_reps(1000));
        test_graph(&c, 100);
        unsetenv("MELD_COLL_PDL");
      }
    }
    meld_bootstrap_barrier(c.comm->boot);
    GT_MELD(meld_mem_free(c.comm, c.d_send));
    GT_MELD(meld_mem_free(c.comm, c.d_recv));
  }
  if (!g_only_bulk) { /* again on ordinary memory registered with meld_mem_register: ZC too.
                         send and recv lie in one cudaMalloc allocation (two ranges sharing
                         one mapping of it on each peer) */
    uint8_t *blk = NULL;
    const size_t recv_off = (256 + c.cap + 4095) & ~(size_t)4095;
    GT_CUDA(cudaMalloc(&blk, recv_off + c.cap + 256));
    c.d_send = blk + 256;
    c.d_recv = blk + recv_off;
    const meld_result_t r1 = meld_mem_register(c.comm, c.d_send, c.cap);
    const meld_result_t r2 = meld_mem_register(c.comm, c.d_recv, c.cap);
    GT_CHECK(r1 == MELD_OK && r2 == MELD_OK, "meld_mem_register: %s", meld_last_error());
    if (r1 == MELD_OK && r2 == MELD_OK) {
      c.sym = 2;
      test_reference(&c);
      if (!g_only_ce) {
        test_back_to_back(&c, gt_reps(200));
        test_graph(&c, 20);
      }
    }
    meld_bootstrap_barrier(c.comm->boot);
    if (r1 == MELD_OK) GT_MELD(meld_mem_deregister(c.comm, c.d_send));
    if (r2 == MELD_OK) GT_MELD(meld_mem_deregister(c.comm, c.d_recv));
    GT_CHECK(c.comm->ipc_maps == NULL, "registered ranges' mappings left open after deregistration");
    cudaFree(blk);
    c.sym = 0;
  }
  cudaStreamDestroy(c.s);
  cudaFree(c.d_plain);
  GT_MELD(meld_comm_destroy(c.comm));
}

/* The last rank never calls the op: the others must time out (MELD_TIMEOUT_MS), not hang.
 * g_missing_zc: on a symmetric buffer and 2 MB blocks (the ZC engine) instead of LL. */
static int g_missing_zc = 0;
static void rank_missing_peer(int rank, int nranks) {
  meld_config_t cfg = MELD_CONFIG_INIT;
  cfg.bootstrap_timeout_ms = 30000;
  meld_comm_t comm = NULL;
  GT_MELD(meld_comm_init_env(&comm, &cfg));
  if (!comm) return;
  void *buf = NULL;
  const size_t cnt = g_missing_zc ? (size_t)1 << 20 : 1024;
  if (g_missing_zc) GT_MELD(meld_mem_alloc(comm, cnt * 2 * (size_t)(nranks + 1), &buf));
  else GT_CUDA(cudaMalloc(&buf, (size_t)4096 * nranks * 2));
  if (!buf) return;
  cudaStream_t s;
  GT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  if (rank != nranks - 1) {
    double t0 = gt_now_s();
    GT_MELD(meld_all_gather(comm, buf, (char *)buf + cnt * 2, cnt, MELD_BF16, s));
    GT_CUDA(cudaStreamSynchronize(s));
    double dt = gt_now_s() - t0;
    meld_result_t r = meld_comm_check(comm);
    GT_CHECK(r == MELD_ERR_TIMEOUT || (nranks > 2 && r == MELD_ERR_ABORTED),
             "missing peer: meld_comm_check -> %s (%s), want MELD_ERR_TIMEOUT", meld_strerror(r), meld_last_error());
    gt_log("missing peer: kernel returned after %.2f s; check: %s", dt, meld_last_error());
    r = meld_all_reduce(comm, buf, buf, 1024, MELD_BF16, s);
    GT_CHECK(r == MELD_ERR_TIMEOUT || r == MELD_ERR_ABORTED, "the next call -> %s, want the sticky error",
             meld_strerror(r));
    GT_CUDA(cudaStreamSynchronize(s));
  }
  meld_bootstrap_barrier(comm->boot); /* the absent rank keeps its memory mapped until then */
  if (rank == nranks - 1) {
    meld_result_t r = meld_comm_check(comm);
    gt_log("absent rank: meld_comm_check -> %s", meld_strerror(r));
  }
  cudaStreamDestroy(s);
  if (g_missing_zc) GT_MELD(meld_mem_free(comm, buf));
  else cudaFree(buf);
  GT_MELD(meld_comm_destroy(comm));
}

/* Rank 0 passes a symmetric recv, the others ordinary memory, for an all-gather big enough
 * for ZC: rank 0 would push into peers' ordinary buffers it cannot address, so the entry
 * handshake must refuse the call on every rank (argument mismatch), not race or hang. */
static void rank_zc_mismatch(int rank, int nranks) {
  meld_config_t cfg = MELD_CONFIG_INIT;
  cfg.bootstrap_timeout_ms = 30000;
  meld_comm_t comm = NULL;
  GT_MELD(meld_comm_init_env(&comm, &cfg));
  if (!comm) return;
  const size_t cnt = (size_t)1 << 20;
  void *sym = NULL, *send = NULL, *plain = NULL;
  GT_MELD(meld_mem_alloc(comm, cnt * 2 * (size_t)nranks, &sym));
  GT_CUDA(cudaMalloc(&send, cnt * 2));
  GT_CUDA(cudaMalloc(&plain, cnt * 2 * (size_t)nranks));
  cudaStream_t s;
  GT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  GT_MELD(meld_all_gather(comm, send, rank == 0 ? sym : plain, cnt, MELD_BF16, s));
  GT_CUDA(cudaStreamSynchronize(s));
  meld_result_t r = meld_comm_check(comm);
  GT_CHECK(r == MELD_ERR_INVALID_ARG || r == MELD_ERR_ABORTED,
           "symmetric on rank 0 only: meld_comm_check -> %s (%s), want the argument mismatch", meld_strerror(r),
           meld_last_error());
  gt_log("symmetric recv on rank 0 only: %s", meld_last_error());
  meld_bootstrap_barrier(comm->boot);
  cudaStreamDestroy(s);
  cudaFree(send);
  cudaFree(plain);
  GT_MELD(meld_mem_free(comm, sym));
  GT_MELD(meld_comm_destroy(comm));
}

static int run(const char *name, int nranks, gt_rank_fn fn) {
  printf("--- %s (%d ranks)\n", name, nranks);
  fflush(stdout);
  int failed = gt_spawn(nranks, fn);
  GT_CHECK(failed == 0, "%s: %d rank(s) failed", name, failed);
  return failed;
}

int main(void) {
  setenv("MELD_TIMEOUT_MS", "2000", 0);
  g_ndev = gt_device_count();
  printf("test_coll: %d GPU(s)\n", g_ndev);
  if (g_ndev < 1) {
    printf("skipped: no GPU\n");
    return gt_summary("test_coll");
  }
  double t0 = gt_now_s();
  int n = g_ndev > 8 ? 8 : g_ndev;
  const char *only = getenv("TEST_COLL_ONLY");
  g_only_bulk = only && !strcmp(only, "bulk");
  g_only_ce = only && !strcmp(only, "ce");
  if (g_only_ce) {
    run("CE variants vs reference", n, rank_main);
    printf("test_coll: %.1f s\n", gt_now_s() - t0);
    return gt_summary("test_coll");
  }
  if (g_only_bulk) {
    run("bulk RING variants vs reference", n, rank_main);
    printf("test_coll: %.1f s\n", gt_now_s() - t0);
    return gt_summary("test_coll");
  }
  run("collectives vs reference, back-to-back, graphs", n, rank_main);
  if (n > 1) {
    run("collectives, 1 rank", 1, rank_main);
    run("a peer that never joins", n, rank_missing_peer);
    g_missing_zc = 1;
    run("a peer that never joins (ZC)", n, rank_missing_peer);
    run("symmetric buffers on one rank only", n, rank_zc_mismatch);
  }
  printf("test_coll: %.1f s\n", gt_now_s() - t0);
  return gt_summary("test_coll");
}
