/* test_gemm_rs.cu — meld_gemm_rs / meld_gemm_ar on all GPUs (and on 1 rank) against a
 * reference: each rank's A_q, B_q come from a seeded generator, so every rank builds the
 * fp32 reference sum over q of A_q B_q^T locally with cuBLAS. Checks: relative Frobenius
 * error <= 1e-2 overall AND per 128x256 output tile (NaN fails), outputs poisoned before
 * each call; tails and a suite shape; fused and unfused; B [N,K] and [K,N]; 200 back-to-back
 * calls without host sync, every output checked on the device; CUDA-graph replays;
 * mismatched shapes -> error on every rank; a missing rank -> MELD_ERR_TIMEOUT. */
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include "comm.h"
#include "gemm_rs_plan.h"
#include "gpu/gpu_test.h"
#include "meld.h"

static int g_ndev = 0;

/* Value of element i of matrix `which` (0 A, 1 B) of rank q, set `set`: in [-1, 1). */
__device__ __forceinline__ float gen_val(uint32_t set, uint32_t q, uint32_t which, uint64_t i) {
  uint64_t x = i * 0x9E3779B97F4A7C15ull + ((uint64_t)set << 40) + ((uint64_t)q << 20) + which * 0x1234567ull + 1;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return (float)((x >> 40) * (1.0 / (1ull << 23)) - 1.0);
}

/* A [M, K] (ld K), B as [N, K] (kn 0) or [K, N] (kn 1), all contiguous. */
__global__ void gen_a(__nv_bfloat16 *a, int64_t n, uint32_t set, uint32_t q) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    a[i] = __float2bfloat16(gen_val(set, q, 0, (uint64_t)i));
}
__global__ void gen_b(__nv_bfloat16 *b, int64_t N, int64_t K, int kn, uint32_t set, uint32_t q) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < N * K; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t nn = i / K, kk = i % K; /* logical B[n][k] */
    const __nv_bfloat16 v = __float2bfloat16(gen_val(set, q, 1, (uint64_t)i));
    if (kn) b[kk * N + nn] = v;
    else b[i] = v;
  }
}

/* One block per 128 x 256 tile of the checked rows: rel = |out - ref| / |ref| (Frobenius, in
 * double); per-call slots: [0] sum d^2, [1] sum r^2 (double, atomics), max tile rel (float
 * bits, atomicMax), NaN count. */
typedef struct {
  double d2, r2;
  unsigned int max_rel_bits, nans;
} check_slot_t;

__global__ void check_kernel(const __nv_bfloat16 *out, int64_t ldo, const float *ref, int64_t N, int64_t row0,
                             int64_t rows, check_slot_t *slot) {
  const int64_t tr = blockIdx.y * 128, tc = blockIdx.x * 256;
  double d2 = 0, r2 = 0;
  unsigned nans = 0;
  for (int i = threadIdx.x; i < 128 * 256; i += blockDim.x) {
    const int64_t r = tr + i / 256, c = tc + i % 256;
    if (r >= rows || c >= N) continue;
    const float o = __bfloat162float(out[r * ldo + c]);
    const float f = ref[(row0 + r) * N + c];
    if (!(o == o) || isinf(o)) nans++;
    const double d = (double)o - f;
    d2 += d * d;
    r2 += (double)f * f;
  }
  __shared__ double sd[256], sr[256];
  __shared__ unsigned sn[256];
  sd[threadIdx.x] = d2;
  sr[threadIdx.x] = r2;
  sn[threadIdx.x] = nans;
  __syncthreads();
  for (int s = 128; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s) {
      sd[threadIdx.x] += sd[threadIdx.x + s];
      sr[threadIdx.x] += sr[threadIdx.x + s];
      sn[threadIdx.x] += sn[threadIdx.x + s];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    atomicAdd(&slot->d2, sd[0]);
    atomicAdd(&slot->r2, sr[0]);
    if (sn[0]) atomicAdd(&slot->nans, sn[0]);
    float rel = sr[0] > 0 ? (float)sqrt(sd[0] / sr[0]) : (sd[0] > 0 ? 1e30f : 0.f);
    if (sn[0]) rel = 1e30f;
    atomicMax(&slot->max_rel_bits, __float_as_uint(rel));
  }
}

typedef struct {
  int rank, P;
  meld_comm_t comm;
  cudaStream_t s;
  cublasHandle_t blas;
} ctx_t;

typedef struct {
  int64_t m, n, k;
  int kn;
  __nv_bfloat16 *a[2], *b[2]; /* this rank's inputs, sets 0 and 1 */
  float *ref[2];              /* fp32 reference sums [M, N] */
  __nv_bfloat16 *c;
  int64_t ldc;
} prob_t;

/* Inputs of this rank and the references (sum over all ranks), for `nsets` input sets. */
static void prob_init(ctx_t *x, prob_t *p, int64_t m, int64_t n, int64_t k, int kn, int nsets, int64_t ldc) {
  memset(p, 0, sizeof *p);
  p->m = m, p->n = n, p->k = k, p->kn = kn, p->ldc = ldc;
  __nv_bfloat16 *ta = NULL, *tb = NULL;
  GT_CUDA(cudaMalloc(&ta, (size_t)m * k * 2));
  GT_CUDA(cudaMalloc(&tb, (size_t)n * k * 2));
  for (int st = 0; st < nsets; st++) {
    GT_CUDA(cudaMalloc(&p->a[st], (size_t)m * k * 2));
    GT_CUDA(cudaMalloc(&p->b[st], (size_t)n * k * 2));
    GT_CUDA(cudaMalloc(&p->ref[st], (size_t)m * n * 4));
    gen_a<<<1024, 256, 0, x->s>>>(p->a[st], m * k, st, x->rank);
    gen_b<<<1024, 256, 0, x->s>>>(p->b[st], n, k, kn, st, x->rank);
    for (int q = 0; q < x->P; q++) {
      gen_a<<<1024, 256, 0, x->s>>>(ta, m * k, st, q);
      gen_b<<<1024, 256, 0, x->s>>>(tb, n, k, 0, st, q);
      const float alpha = 1.f, beta = q ? 1.f : 0.f;
      cublasStatus_t bs = cublasGemmEx(x->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)m, (int)k, &alpha, tb,
                                       CUDA_R_16BF, (int)k, ta, CUDA_R_16BF, (int)k, &beta, p->ref[st], CUDA_R_32F,
                                       (int)n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
      GT_CHECK(bs == CUBLAS_STATUS_SUCCESS, "cublasGemmEx -> %d", (int)bs);
    }
  }
  GT_CUDA(cudaMalloc(&p->c, (size_t)m * ldc * 2 + 256));
  GT_CUDA(cudaStreamSynchronize(x->s));
  cudaFree(ta);
  cudaFree(tb);
}

static void prob_free(prob_t *p) {
  for (int st = 0; st < 2; st++) {
    cudaFree(p->a[st]);
    cudaFree(p->b[st]);
    cudaFree(p->ref[st]);
  }
  cudaFree(p->c);
}

static meld_gemm_rs_args_t prob_args(const prob_t *p, int set, meld_gemm_rs_algo_t algo) {
  meld_gemm_rs_args_t a;
  memset(&a, 0, sizeof a);
  a.a = p->a[set];
  a.lda = p->k;
  a.b = p->b[set];
  a.ldb = p->kn ? p->n : p->k;
  a.b_layout = p->kn ? MELD_B_KN : MELD_B_NK;
  a.c = p->c;
  a.ldc = p->ldc;
  a.m = p->m, a.n = p->n, a.k = p->k;
  a.algo = algo;
  return a;
}

/* Enqueues the check of the output against set `set` into slot (no sync). */
static void enqueue_check(ctx_t *x, const prob_t *p, int is_ar, int set, check_slot_t *slot) {
  int64_t first = 0, rows = p->m;
  if (!is_ar) meld_gemm_rs_rows(p->m, x->P, x->rank, &first, &rows);
  if (rows == 0) return;
  dim3 grid((unsigned)((p->n + 255) / 256), (unsigned)((rows + 127) / 128));
  check_kernel<<<grid, 256, 0, x->s>>>(p->c, p->ldc, p->ref[set], p->n, first, rows, slot);
}

static const char *algo_name(meld_gemm_rs_algo_t a) {
  return a == MELD_GEMM_RS_FUSED ? "fused" : a == MELD_GEMM_RS_UNFUSED ? "unfused" : "auto";
}

/* Checks nslots results on the host. */
static void judge(const char *what, check_slot_t *d_slots, int nslots) {
  check_slot_t *h = (check_slot_t *)calloc((size_t)nslots, sizeof *h);
  GT_CUDA(cudaMemcpy(h, d_slots, (size_t)nslots * sizeof *h, cudaMemcpyDeviceToHost));
  int bad = 0;
  double worst = 0, worst_tile = 0;
  for (int i = 0; i < nslots; i++) {
    double rel = h[i].r2 > 0 ? sqrt(h[i].d2 / h[i].r2) : 0;
    float tile;
    memcpy(&tile, &h[i].max_rel_bits, 4);
    if (rel > worst) worst = rel;
    if (tile > worst_tile) worst_tile = tile;
    if (!(rel <= 1e-2) || !(tile <= 1e-2f) || h[i].nans) {
      if (bad < 3) gt_log("%s: call %d: rel %.3g, worst tile %.3g, %u NaN/Inf", what, i, rel, tile, h[i].nans);
      bad++;
    }
  }
  GT_CHECK(bad == 0, "%s: %d of %d outputs wrong", what, bad, nslots);
  gt_log("%s: %d output(s), worst rel %.3g, worst tile %.3g%s", what, nslots, worst, worst_tile, bad ? "  FAIL" : "");
  free(h);
}

static check_slot_t *slots_alloc(int n) {
  check_slot_t *d = NULL;
  GT_CUDA(cudaMalloc(&d, (size_t)n * sizeof *d));
  GT_CUDA(cudaMemset(d, 0, (size_t)n * sizeof *d));
  GT_CUDA(cudaDeviceSynchronize()); /* (the memset is on the legacy stream; checks run on x->s) */
  return d;
}

/* One call of each op on one problem, poisoned output, checked. */
/* Checks the output of the call just enqueued against input set 0 (waits for it). */
static void check_one(ctx_t *x, const prob_t *p, int is_ar, const char *what) {
  check_slot_t *sl = slots_alloc(1);
  enqueue_check(x, p, is_ar, 0, sl);
  GT_CUDA(cudaStreamSynchronize(x->s));
  GT_MELD(meld_comm_check(x->comm));
  judge(what, sl, 1);
  cudaFree(sl);
}

/* One rank, MELD_GEMM_RS_DIAG=128: the fused kernel's 2-rank reduction (own tile + one partial,
 * its flag wait, the L2 prefetch, the pass over the staging) with a synthetic partial S that this
 * test writes into the workspace after the header (rows of ld ceil8(n), then all-ones flags).
 * Reference: A B^T + S. S is as large as the product, so a misplaced or missing partial fails. */
__global__ void gen_partial(__nv_bfloat16 *s, int64_t rows, int64_t n, int64_t lds, float *ref) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < rows * n; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = i / n, c = i % n;
    const __nv_bfloat16 v = __float2bfloat16(32.f * gen_val(7, 3, 2, (uint64_t)i));
    s[r * lds + c] = v;
    ref[i] += __bfloat162float(v);
  }
}

static void test_synthetic_partial(ctx_t *x, int64_t m, int64_t n, int64_t k, int is_ar, const char *store) {
  prob_t p;
  const int64_t ldn = ((n + 7) / 8) * 8, rpo = ((m + 127) / 128) * 128;
  prob_init(x, &p, m, n, k, 0, 1, ldn);
  const size_t slot_bytes = (((size_t)rpo * (size_t)ldn * 2) + 255) / 256 * 256;
  const size_t tiles_own = (size_t)(rpo / 128) * (size_t)((n + 255) / 256);
  uint8_t *ws = (uint8_t *)x->comm->workspace.local;
  GT_CHECK(x->comm->workspace.bytes >= GEMM_RS_HDR_BYTES + slot_bytes + tiles_own * 8, "workspace too small");
  gen_partial<<<1024, 256, 0, x->s>>>((__nv_bfloat16 *)(ws + GEMM_RS_HDR_BYTES), m, n, ldn, p.ref[0]);
  GT_CUDA(cudaMemsetAsync(ws + GEMM_RS_HDR_BYTES + slot_bytes, 0xff, tiles_own * 8, x->s));
  GT_CUDA(cudaMemsetAsync(p.c, 0xff, (size_t)m * p.ldc * 2, x->s));
  setenv("MELD_GEMM_RS_DIAG", "128", 1);
  if (store) setenv("MELD_GEMM_RS_STORE", store, 1);
  meld_gemm_rs_args_t a = prob_args(&p, 0, MELD_GEMM_RS_FUSED);
  meld_result_t r = is_ar ? meld_gemm_ar(x->comm, &a, x->s) : meld_gemm_rs(x->comm, &a, x->s);
  unsetenv("MELD_GEMM_RS_DIAG");
  unsetenv("MELD_GEMM_RS_STORE");
  char what[160];
  snprintf(what, sizeof what, "%s M %lld N %lld K %lld, one synthetic partial (2-rank reduction path)%s%s",
           is_ar ? "gemm_ar" : "gemm_rs", (long long)m, (long long)n, (long long)k, store ? ", store " : "",
           store ? store : "");
  GT_CHECK(r == MELD_OK, "%s -> %s: %s", what, meld_strerror(r), meld_last_error());
  check_one(x, &p, is_ar, what);
  prob_free(&p);
}

/* One rank, MELD_GEMM_RS_DIAG=1024 (loopback): the 2-rank fused GEMM+RS kernel of rank 0 with
 * rows [R, 2R) of this rank's product standing in for the peer's partial (pushed by TMA into
 * this rank's own slot and flagged where its own tiles wait). Reference: C [R rows] =
 * (A B^T)[0, R) + (A B^T)[R, 2R), R = M / 2. `calls` back-to-back calls alternate two input
 * sets (the flags live across calls in the pad: stale ones must not pass), every output
 * poisoned before and checked. */
__global__ void fold_rows(float *ref, int64_t rows, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < rows * n; i += (int64_t)gridDim.x * blockDim.x)
    ref[i] += ref[i + rows * n];
}

/* Two graphs [poison C, op] for input sets 0 and 1, AUTO algorithm (the environment at capture
 * decides the path). */
static void capture_pair(ctx_t *x, const prob_t *p, int is_ar, cudaGraphExec_t ex[2]) {
  for (int st = 0; st < 2; st++) {
    cudaGraph_t g;
    GT_CUDA(cudaStreamBeginCapture(x->s, cudaStreamCaptureModeThreadLocal));
    GT_CUDA(cudaMemsetAsync(p->c, 0xff, (size_t)p->m * p->ldc * 2, x->s));
    meld_gemm_rs_args_t a = prob_args(p, st, MELD_GEMM_RS_AUTO);
    meld_result_t r = is_ar ? meld_gemm_ar(x->comm, &a, x->s) : meld_gemm_rs(x->comm, &a, x->s);
    GT_CHECK(r == MELD_OK, "capture -> %s: %s", meld_strerror(r), meld_last_error());
    GT_CUDA(cudaStreamEndCapture(x->s, &g));
    GT_CUDA(cudaGraphInstantiate(&ex[st], g, 0));
    cudaGraphDestroy(g);
  }
}

/* Decode GEMM+AR as one kernel (MELD_GEMM_AR_DECODE_FUSED=1, gemm_ar_decode.cu), loopback at
 * one rank (MELD_GEMM_RS_DIAG=1024): the virtual peer's partial is this rank's own, so C must be
 * exactly 2 x meld_gemm's product (the kernel's partial is that product; doubling a bf16 is
 * exact) and near 2 x the fp32 reference. `calls` calls back to back (no host sync), the two
 * input sets alternating, every output poisoned first and checked on the device; graph: the
 * calls are replays of two captured graphs [poison, op]. */
__global__ void twice_check_kernel(const __nv_bfloat16 *c, int64_t ldc, const __nv_bfloat16 *g, int64_t ldg, int64_t m,
                                   int64_t n, unsigned *bad) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < m * n; i += (int64_t)gridDim.x * blockDim.x) {
    const __nv_bfloat16 want = __float2bfloat16(2.f * __bfloat162float(g[(i / n) * ldg + i % n]));
    const __nv_bfloat16 got = c[(i / n) * ldc + i % n];
    if (*(const uint16_t *)&want != *(const uint16_t *)&got) atomicAdd(bad, 1u);
  }
}
__global__ void scale_kernel(float *v, int64_t count, float f) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count; i += (int64_t)gridDim.x * blockDim.x) v[i] *= f;
}
static void test_decode_loopback(ctx_t *x, int64_t m, int64_t n, int64_t k, int64_t ldc, int calls, int graph) {
  prob_t p;
  prob_init(x, &p, m, n, k, 0, 2, ldc);
  __nv_bfloat16 *g[2] = {NULL, NULL};
  unsigned *bad = NULL;
  GT_CUDA(cudaMalloc(&bad, sizeof(unsigned) * (size_t)calls));
  GT_CUDA(cudaMemsetAsync(bad, 0, sizeof(unsigned) * (size_t)calls, x->s));
  const int64_t ldg = (n + 7) / 8 * 8;
  for (int st = 0; st < 2; st++) { /* meld_gemm's product: what the kernel's partial must be */
    GT_CUDA(cudaMalloc(&g[st], (size_t)m * ldg * 2));
    meld_gemm_rs_args_t a = prob_args(&p, st, MELD_GEMM_RS_AUTO);
    meld_gemm_args_t ga;
    memset(&ga, 0, sizeof ga);
    ga.a = a.a, ga.lda = a.lda, ga.b = a.b, ga.ldb = a.ldb, ga.b_layout = a.b_layout;
    ga.c = g[st], ga.ldc = ldg, ga.m = m, ga.n = n, ga.k = k;
    GT_MELD(meld_gemm(&ga, x->s));
    scale_kernel<<<1024, 256, 0, x->s>>>(p.ref[st], m * n, 2.f);
  }
  setenv("MELD_GEMM_AR_DECODE_FUSED", "1", 1);
  setenv("MELD_GEMM_RS_DIAG", "1024", 1);
  cudaGraphExec_t ex[2] = {NULL, NULL};
  if (graph) capture_pair(x, &p, 1, ex);
  check_slot_t *sl = slots_alloc(calls);
  for (int i = 0; i < calls; i++) {
    if (graph) {
      GT_CUDA(cudaGraphLaunch(ex[i & 1], x->s));
    } else {
      GT_CUDA(cudaMemsetAsync(p.c, 0xff, (size_t)m * ldc * 2, x->s));
      meld_gemm_rs_args_t a = prob_args(&p, i & 1, MELD_GEMM_RS_AUTO);
      const meld_result_t r = meld_gemm_ar(x->comm, &a, x->s);
      if (r != MELD_OK) {
        GT_CHECK(0, "decode loopback call %d -> %s: %s", i, meld_strerror(r), meld_last_error());
        break;
      }
    }
    twice_check_kernel<<<264, 256, 0, x->s>>>(p.c, ldc, g[i & 1], ldg, m, n, bad + i);
    enqueue_check(x, &p, 1, i & 1, sl + i);
  }
  unsetenv("MELD_GEMM_RS_DIAG");
  unsetenv("MELD_GEMM_AR_DECODE_FUSED");
  GT_CUDA(cudaStreamSynchronize(x->s));
  GT_MELD(meld_comm_check(x->comm));
  unsigned *hb = (unsigned *)calloc((size_t)calls, sizeof(unsigned));
  GT_CUDA(cudaMemcpy(hb, bad, sizeof(unsigned) * (size_t)calls, cudaMemcpyDeviceToHost));
  unsigned worst = 0;
  for (int i = 0; i < calls; i++) worst = hb[i] > worst ? hb[i] : worst;
  char what[200];
  snprintf(what, sizeof what, "gemm_ar decode kernel M %lld N %lld K %lld ldc %lld, loopback%s x%d", (long long)m,
           (long long)n, (long long)k, (long long)ldc, graph ? ", graph replays" : ", back to back", calls);
  GT_CHECK(worst == 0, "%s: %u elements differ from 2 x meld_gemm's product (bitwise) in the worst call", what, worst);
  judge(what, sl, calls);
  free(hb);
  cudaFree(sl);
  cudaFree(bad);
  for (int st = 0; st < 2; st++) {
    cudaFree(g[st]);
    if (ex[st]) cudaGraphExecDestroy(ex[st]);
  }
  prob_free(&p);
}

/* The decode kernel's partials of consecutive calls overlap in the workspace when their sizes
 * differ (both end at its top), and a call ends without waiting for the peers' reads: the next
 * call waits for them (CONSUMED_ALL) before it overwrites. Two shapes alternate back to back in
 * loopback (one rank) or at 2 ranks with every third call on the unfused path (the zero-copy
 * all-reduce from the workspace's bottom half, no wait at its start), every output checked. */
static void test_decode_mixed(ctx_t *x, int calls) {
  prob_t p[2];
  prob_init(x, &p[0], 128, 4096, 7168, 0, 2, 4096);
  prob_init(x, &p[1], 16, 8192, 4096, 0, 2, 8192);
  if (x->P == 1) setenv("MELD_GEMM_RS_DIAG", "1024", 1);
  for (int h = 0; h < 2; h++) /* loopback: C = 2 x the product */
    if (x->P == 1)
      for (int st = 0; st < 2; st++) scale_kernel<<<1024, 256, 0, x->s>>>(p[h].ref[st], p[h].m * p[h].n, 2.f);
  check_slot_t *sl = slots_alloc(2 * calls);
  for (int i = 0; i < calls; i++)
    for (int h = 0; h < 2; h++) {
      setenv("MELD_GEMM_AR_DECODE_FUSED", x->P > 1 && i % 3 == 2 && h == 0 ? "0" : "1", 1);
      GT_CUDA(cudaMemsetAsync(p[h].c, 0xff, (size_t)p[h].m * p[h].ldc * 2, x->s));
      meld_gemm_rs_args_t a = prob_args(&p[h], i & 1, MELD_GEMM_RS_AUTO);
      const meld_result_t r = meld_gemm_ar(x->comm, &a, x->s);
      GT_CHECK(r == MELD_OK, "decode mixed call %d.%d -> %s: %s", i, h, meld_strerror(r), meld_last_error());
      enqueue_check(x, &p[h], 1, i & 1, sl + 2 * i + h);
    }
  unsetenv("MELD_GEMM_AR_DECODE_FUSED");
  unsetenv("MELD_GEMM_RS_DIAG");
  GT_CUDA(cudaStreamSynchronize(x->s));
  GT_MELD(meld_comm_check(x->comm));
  char what[160];
  snprintf(what, sizeof what, "gemm_ar decode kernel, 128 x 4096 x 7168 and 16 x 8192 x 4096 alternating%s x%d",
           x->P == 1 ? " (loopback)" : ", every third of the first on the unfused path", calls);
  judge(what, sl, 2 * calls);
  cudaFree(sl);
  prob_free(&p[0]);
  prob_free(&p[1]);
}

/* AR (is_ar): the reduced tiles also go where the virtual peer's would come from: this rank's
 * result slot, copied into C's rows [R, 2R) by the tail; or, with C in symmetric memory
 * (sym_c: meld_mem_alloc, the zero-copy AR), straight into those rows. Reference: both halves
 * of C [2R rows] hold the sum. */
/* sym_c 1: a symmetric C, zero copy by default (MELD_GEMM_AR_ZC unset); 2: a symmetric C with
 * MELD_GEMM_AR_ZC=0 (the slot path); 3: C in ordinary memory registered with meld_mem_register,
 * zero copy by default */
static void test_loopback_op(ctx_t *x, int64_t m, int64_t n, int64_t k, int calls, const char *preload, int is_ar,
                             int sym_c) {
  prob_t p;
  const int64_t R = m / 2;
  prob_init(x, &p, m, n, k, 0, 2, ((n + 7) / 8) * 8);
  __nv_bfloat16 *c_plain = p.c;
  uint8_t *c_block = NULL; /* sym_c 3: ordinary memory registered (meld_mem_register) */
  if (sym_c == 3) {
    GT_CUDA(cudaMalloc(&c_block, (size_t)m * p.ldc * 2 + 4096));
    p.c = (__nv_bfloat16 *)(c_block + 1024);
    const meld_result_t rr = meld_mem_register(x->comm, p.c, (size_t)m * p.ldc * 2);
    if (rr != MELD_OK) { /* (every rank fails alike: all leave here) */
      GT_CHECK(0, "meld_mem_register: %s", meld_last_error());
      cudaFree(c_block);
      p.c = c_plain;
      prob_free(&p);
      return;
    }
  } else if (sym_c) {
    void *cs = NULL;
    GT_MELD(meld_mem_alloc(x->comm, (size_t)m * p.ldc * 2 + 256, &cs));
    p.c = (__nv_bfloat16 *)cs;
  }
  for (int st = 0; st < 2; st++) fold_rows<<<1024, 256, 0, x->s>>>(p.ref[st], R, n);
  if (preload) setenv("MELD_GEMM_RS_PRELOAD", preload, 1);
  unsetenv("MELD_GEMM_AR_ZC");
  if (sym_c == 2) setenv("MELD_GEMM_AR_ZC", "0", 1);
  setenv("MELD_GEMM_RS_DIAG", "1024", 1);
  const int per = is_ar ? 2 : 1; /* AR: both halves checked */
  check_slot_t *sl = slots_alloc(calls * per);
  for (int i = 0; i < calls; i++) {
    GT_CUDA(cudaMemsetAsync(p.c, 0xff, (size_t)(is_ar ? m : R) * p.ldc * 2, x->s));
    meld_gemm_rs_args_t a = prob_args(&p, i & 1, MELD_GEMM_RS_FUSED);
    const meld_result_t r = is_ar ? meld_gemm_ar(x->comm, &a, x->s) : meld_gemm_rs(x->comm, &a, x->s);
    if (r != MELD_OK) {
      GT_CHECK(0, "loopback call %d -> %s: %s", i, meld_strerror(r), meld_last_error());
      break;
    }
    dim3 grid((unsigned)((n + 255) / 256), (unsigned)((R + 127) / 128));
    for (int h = 0; h < per; h++) /* half h of C against the sum's R rows */
      check_kernel<<<grid, 256, 0, x->s>>>(p.c + h * R * p.ldc, p.ldc, p.ref[i & 1], n, 0, R, sl + per * i + h);
  }
  unsetenv("MELD_GEMM_RS_DIAG");
  unsetenv("MELD_GEMM_RS_PRELOAD");
  GT_CUDA(cudaStreamSynchronize(x->s));
  GT_MELD(meld_comm_check(x->comm));
  char what[200];
  snprintf(what, sizeof what, "%s M %lld N %lld K %lld, loopback (2-rank kernel of rank 0 on one GPU)%s%s%s x%d",
           is_ar ? "gemm_ar" : "gemm_rs", (long long)m, (long long)n, (long long)k,
           preload ? ", MELD_GEMM_RS_PRELOAD=" : "", preload ? preload : "",
           sym_c == 1 ? ", C symmetric (zero copy)" : sym_c == 3 ? ", C registered (zero copy)"
                                                    : sym_c ? ", C symmetric, zero copy off" : "",
           calls);
  judge(what, sl, calls * per);
  cudaFree(sl);
  if (is_ar) { /* which way the reduced tiles went: the result slot (slot 1) written or not */
    const int64_t ldn = ((n + 7) / 8) * 8, rpo = (R + 127) / 128 * 128;
    const size_t slot_bytes = ((size_t)rpo * (size_t)ldn * 2 + 255) / 256 * 256;
    uint8_t *slot1 = (uint8_t *)x->comm->workspace.local + GEMM_RS_HDR_BYTES + slot_bytes;
    unsigned char h[256];
    GT_CUDA(cudaMemset(slot1, 0xff, sizeof h));
    setenv("MELD_GEMM_RS_DIAG", "1024", 1);
    meld_gemm_rs_args_t a = prob_args(&p, 0, MELD_GEMM_RS_FUSED);
    GT_MELD(meld_gemm_ar(x->comm, &a, x->s));
    unsetenv("MELD_GEMM_RS_DIAG");
    GT_CUDA(cudaStreamSynchronize(x->s));
    GT_CUDA(cudaMemcpy(h, slot1, sizeof h, cudaMemcpyDeviceToHost));
    int untouched = 1;
    for (size_t i = 0; i < sizeof h; i++) untouched &= h[i] == 0xff;
    const int zc = (sym_c == 1 || sym_c == 3) && n % 8 == 0;
    GT_CHECK(untouched == zc, "%s: the result slot was %s, expected the %s path", what,
             untouched ? "not written" : "written", zc ? "zero-copy" : "slot");
  }
  unsetenv("MELD_GEMM_AR_ZC");
  if (sym_c == 3) {
    GT_MELD(meld_mem_deregister(x->comm, p.c));
    cudaFree(c_block);
    p.c = c_plain;
  } else if (sym_c) {
    GT_MELD(meld_mem_free(x->comm, p.c));
    p.c = c_plain;
  }
  prob_free(&p);
}
static void test_loopback(ctx_t *x, int64_t m, int64_t n, int64_t k, int calls, const char *preload) {
  test_loopback_op(x, m, n, k, calls, preload, 0, 0);
}

/* MELD_GEMM_RS_ORDER=ileave must be in effect for this RS shape at 2 ranks (the plan's wave
 * rule can keep the rotation): a case meant to run the interleaved order checks that it does. */
static void expect_ileave(ctx_t *x, int64_t m, int64_t n, int64_t k) {
  meld_gemm_rs_args_t a;
  memset(&a, 0, sizeof a);
  a.a = a.b = a.c = (void *)256;
  a.lda = a.ldb = k, a.ldc = ((n + 7) / 8) * 8, a.m = m, a.n = n, a.k = k;
  a.algo = MELD_GEMM_RS_FUSED;
  gemm_rs_plan_t pl;
  const meld_result_t r = gemm_rs_plan_make_sm(&a, 0, 2, 0, 1, (size_t)1 << 40, meld_comm_node_sm_count(x->comm), &pl);
  GT_CHECK(r == MELD_OK && pl.ileave == 1, "M %lld N %lld K %lld: the interleaved order %s", (long long)m,
           (long long)n, (long long)k, r == MELD_OK ? "is not taken (pick a shape with >= 2 waves per group)" : meld_last_error());
}

/* m rounded up to a multiple of 128 x P: a forced FUSED reduce-scatter needs ceil(M/P) % 128 == 0
 * (8192 at 3 ranks: 8448). */
static int64_t m_fused(const ctx_t *x, int64_t m) {
  const int64_t q = 128 * (int64_t)x->P;
  return (m + q - 1) / q * q;
}

static void test_shape(ctx_t *x, int64_t m, int64_t n, int64_t k, int kn, meld_gemm_rs_algo_t algo, int ops) {
  prob_t p;
  prob_init(x, &p, m, n, k, kn, 1, ((n + 7) / 8) * 8 + (kn ? 8 : 0));
  for (int is_ar = 0; is_ar < 2; is_ar++) {
    if (!(ops & (1 << is_ar))) continue;
    char what[160];
    snprintf(what, sizeof what, "%s M %lld N %lld K %lld B %s %s", is_ar ? "gemm_ar" : "gemm_rs", (long long)m,
             (long long)n, (long long)k, kn ? "KN" : "NK", algo_name(algo));
    GT_CUDA(cudaMemsetAsync(p.c, 0xff, (size_t)m * p.ldc * 2, x->s)); /* bf16 NaN */
    meld_gemm_rs_args_t a = prob_args(&p, 0, algo);
    meld_result_t r = is_ar ? meld_gemm_ar(x->comm, &a, x->s) : meld_gemm_rs(x->comm, &a, x->s);
    GT_CHECK(r == MELD_OK, "%s -> %s: %s", what, meld_strerror(r), meld_last_error());
    check_one(x, &p, is_ar, what);
  }
  prob_free(&p);
}

/* n calls back to back (no host sync), alternating two input sets, every output poisoned
 * before and checked on the device after. */
/* rows: 0 = 512 per rank (N 1024, K 1024); else a decode-size M (N 8192, K 4096). */
static void test_back_to_back_m(ctx_t *x, int is_ar, meld_gemm_rs_algo_t algo, int n, int64_t rows) {
  prob_t p;
  const int64_t m = rows ? rows : 512 * x->P, N = rows ? 8192 : 1024, K = rows ? 4096 : 1024;
  prob_init(x, &p, m, N, K, 0, 2, N);
  check_slot_t *sl = slots_alloc(n);
  double t0 = gt_now_s();
  for (int i = 0; i < n; i++) {
    GT_CUDA(cudaMemsetAsync(p.c, 0xff, (size_t)m * p.ldc * 2, x->s));
    meld_gemm_rs_args_t a = prob_args(&p, i & 1, algo);
    meld_result_t r = is_ar ? meld_gemm_ar(x->comm, &a, x->s) : meld_gemm_rs(x->comm, &a, x->s);
    if (r != MELD_OK) {
      GT_CHECK(0, "back-to-back call %d -> %s: %s", i, meld_strerror(r), meld_last_error());
      break;
    }
    enqueue_check(x, &p, is_ar, i & 1, sl + i);
  }
  GT_CUDA(cudaStreamSynchronize(x->s));
  GT_MELD(meld_comm_check(x->comm));
  char what[96];
  snprintf(what, sizeof what, "%s %s back-to-back x%d, M %lld (%.2f s)", is_ar ? "gemm_ar" : "gemm_rs",
           algo_name(algo), n, (long long)m, gt_now_s() - t0);
  judge(what, sl, n);
  cudaFree(sl);
  prob_free(&p);
}
static void test_back_to_back(ctx_t *x, int is_ar, meld_gemm_rs_algo_t algo, int n) {
  test_back_to_back_m(x, is_ar, algo, n, 0);
}

/* Two graphs (input sets 0 and 1), each [poison, op], replayed alternately. rows: 0 = 1024
 * per rank (N 2048, K 1024); else a decode-size M (N 8192, K 4096). */
static void test_graph_m(ctx_t *x, int is_ar, int replays, int64_t rows) {
  prob_t p;
  const int64_t m = rows ? rows : 1024 * x->P, N = rows ? 8192 : 2048, K = rows ? 4096 : 1024;
  prob_init(x, &p, m, N, K, 0, 2, N);
  cudaGraphExec_t ex[2] = {NULL, NULL};
  capture_pair(x, &p, is_ar, ex);
  check_slot_t *sl = slots_alloc(replays);
  for (int i = 0; i < replays; i++) {
    GT_CUDA(cudaGraphLaunch(ex[i & 1], x->s));
    enqueue_check(x, &p, is_ar, i & 1, sl + i);
  }
  GT_CUDA(cudaStreamSynchronize(x->s));
  GT_MELD(meld_comm_check(x->comm));
  char what[80];
  snprintf(what, sizeof what, "%s graph replays x%d, M %lld", is_ar ? "gemm_ar" : "gemm_rs", replays, (long long)m);
  judge(what, sl, replays);
  cudaFree(sl);
  for (int st = 0; st < 2; st++) cudaGraphExecDestroy(ex[st]);
  prob_free(&p);
}
static void test_graph(ctx_t *x, int is_ar, int replays) { test_graph_m(x, is_ar, replays, 0); }

static int ctx_init(ctx_t *x, int rank, int nranks, size_t ws) {
  memset(x, 0, sizeof *x);
  x->rank = rank;
  x->P = nranks;
  meld_config_t cfg = MELD_CONFIG_INIT;
  cfg.bootstrap_timeout_ms = 30000;
  cfg.workspace_bytes = ws;
  GT_MELD(meld_comm_init_env(&x->comm, &cfg));
  if (!x->comm) return 0;
  GT_CUDA(cudaStreamCreateWithFlags(&x->s, cudaStreamNonBlocking));
  GT_CHECK(cublasCreate(&x->blas) == CUBLAS_STATUS_SUCCESS, "cublasCreate");
  cublasSetStream(x->blas, x->s);
  return 1;
}

static void ctx_free(ctx_t *x) {
  cublasDestroy(x->blas);
  cudaStreamDestroy(x->s);
  GT_MELD(meld_comm_destroy(x->comm));
}

static void rank_main(int rank, int nranks) {
  ctx_t x;
  if (!ctx_init(&x, rank, nranks, (size_t)320 << 20)) return;
  /* tails: M = 1000 (R = 500: RS unfused by AUTO; AR fused), N = 1000, K = 4104 */
  test_shape(&x, 1000, 1000, 4104, 0, MELD_GEMM_RS_AUTO, 3);
  { /* (one rank: the forced fused kernel runs with every tile its own, nothing exchanged) */
    test_shape(&x, 1000, 1000, 4104, 0, MELD_GEMM_RS_FUSED, 2);        /* AR fused, tails   */
    test_shape(&x, 256 * nranks, 1000, 4104, 0, MELD_GEMM_RS_FUSED, 3); /* RS fused, N/K tails */
    test_shape(&x, 256 * nranks, 1000, 4104, 1, MELD_GEMM_RS_FUSED, 3); /* B [K,N]            */
    test_shape(&x, 16, 8192, 4096, 0, MELD_GEMM_RS_FUSED, 2);          /* decode AR         */
    test_shape(&x, 1000, 1003, 4104, 0, MELD_GEMM_RS_FUSED, 2); /* AR, N % 8: copy phase's thread path */
    test_shape(&x, 1000, 1000, 4104, 0, MELD_GEMM_RS_UNFUSED, 3);
  }
  /* the suite shape */
  test_shape(&x, 8192, 8192, 4096, 0, MELD_GEMM_RS_AUTO, 3);
  if (nranks > 1) test_shape(&x, 8192, 8192, 4096, 0, MELD_GEMM_RS_UNFUSED, 1);
  else test_shape(&x, 8192, 8192, 4096, 0, MELD_GEMM_RS_FUSED, 3); /* AUTO is meld_gemm at one rank */
  if (nranks == 2) { /* the interleaved owner order (MELD_GEMM_RS_ORDER=ileave, session 13): RS only */
    gt_log("MELD_GEMM_RS_ORDER=ileave:");
    setenv("MELD_GEMM_RS_ORDER", "ileave", 1);
    expect_ileave(&x, 8192, 8192, 4096);
    expect_ileave(&x, 8448, 11100, 4104);
    expect_ileave(&x, 4096, 8192, 4096);
    test_shape(&x, 8192, 8192, 4096, 0, MELD_GEMM_RS_FUSED, 1);
    test_shape(&x, 8448, 11100, 4104, 0, MELD_GEMM_RS_FUSED, 1); /* 33 blocks per owner: group_m 6; N, K tails */
    test_back_to_back_m(&x, 0, MELD_GEMM_RS_FUSED, 200, 4096);
    unsetenv("MELD_GEMM_RS_ORDER");
    /* the pushed tiles' second half deferred into the next mainloop (session 15; opt-in: after
     * k-block 0 and 16) and the AR's copies by the threads' 16-byte stores (before session 15) */
    for (int v = 0; v < 2; v++) {
      gt_log(v ? "MELD_GEMM_RS_PUSH_DEFER=16:" : "MELD_GEMM_RS_PUSH_DEFER=0:");
      setenv("MELD_GEMM_RS_PUSH_DEFER", v ? "16" : "0", 1);
      test_shape(&x, 8192, 8192, 4096, 0, MELD_GEMM_RS_FUSED, 3);
      test_shape(&x, 8448, 11100, 4104, 0, MELD_GEMM_RS_FUSED, 3); /* N, K tails */
      test_back_to_back(&x, 0, MELD_GEMM_RS_FUSED, 50);
    }
    unsetenv("MELD_GEMM_RS_PUSH_DEFER");
    /* the AR's copy flags released at an own tile's start (before session 16; default: kept) */
    gt_log("MELD_GEMM_AR_COPY_HOLD=0:");
    setenv("MELD_GEMM_AR_COPY_HOLD", "0", 1);
    test_shape(&x, 8448, 11100, 4104, 0, MELD_GEMM_RS_FUSED, 2); /* N, K tails */
    test_back_to_back_m(&x, 1, MELD_GEMM_RS_FUSED, 50, 4096); /* AR 4096 x 8192 x 4096, back to back */
    unsetenv("MELD_GEMM_AR_COPY_HOLD");
    gt_log("MELD_GEMM_AR_COPY=st:");
    setenv("MELD_GEMM_AR_COPY", "st", 1);
    test_shape(&x, 8448, 11100, 4104, 0, MELD_GEMM_RS_FUSED, 2);
    unsetenv("MELD_GEMM_AR_COPY");
    gt_log("MELD_GEMM_RS_LEAN=0:"); /* the general hook g kernel in the default add mode */
    setenv("MELD_GEMM_RS_LEAN", "0", 1);
    test_shape(&x, 8448, 11100, 4104, 0, MELD_GEMM_RS_FUSED, 3);
    test_back_to_back(&x, 0, MELD_GEMM_RS_FUSED, 50);
    unsetenv("MELD_GEMM_RS_LEAN");
  }
  test_back_to_back(&x, 0, MELD_GEMM_RS_AUTO, 200);
  test_back_to_back(&x, 1, MELD_GEMM_RS_AUTO, 200); /* 32 tiles: the decode rule's unfused path */
  test_back_to_back(&x, 1, MELD_GEMM_RS_FUSED, 200);
  if (nranks == 1) {
    test_back_to_back(&x, 0, MELD_GEMM_RS_FUSED, 200);
    test_synthetic_partial(&x, 1000, 1000, 4104, 1, NULL);  /* AR, tails, TMA store of C */
    test_synthetic_partial(&x, 1000, 1000, 4104, 1, "st");  /* 16-byte stores            */
    test_synthetic_partial(&x, 1000, 1003, 4104, 1, NULL);  /* N % 8: 16-byte stores, tail */
    test_synthetic_partial(&x, 2048, 2048, 1024, 0, NULL);  /* RS, several tiles per CTA */
    test_synthetic_partial(&x, 4096, 4096, 1024, 0, NULL);  /* 512 whole tiles */
    test_synthetic_partial(&x, 2000, 4000, 1024, 1, NULL);  /* AR, M and N tails */
    setenv("MELD_GEMM_RS_PRELOAD", "5", 1);                 /* the producer's partial stages */
    test_synthetic_partial(&x, 4096, 4096, 1024, 0, NULL);
    test_synthetic_partial(&x, 2000, 4000, 1024, 1, NULL);
    unsetenv("MELD_GEMM_RS_PRELOAD");
    setenv("MELD_GEMM_RS_STREAM_K", "2", 1); /* stream-K pieces, combined before the add */
    test_synthetic_partial(&x, 4096, 2560, 4096, 0, NULL); /* 320 tiles, 64 k-blocks: stream-K */
    unsetenv("MELD_GEMM_RS_STREAM_K");
    setenv("MELD_GEMM_RS_PRELOAD", "2", 1);                 /* loads in rounds of 16 */
    test_synthetic_partial(&x, 1000, 1000, 4104, 1, NULL);
    setenv("MELD_GEMM_RS_PRELOAD", "1", 1);                 /* 64 loads in flight */
    test_synthetic_partial(&x, 2048, 2048, 1024, 0, NULL);
    test_synthetic_partial(&x, 1000, 1000, 4104, 1, NULL);
    setenv("MELD_GEMM_RS_PRELOAD", "0", 1);                 /* the pass over the staging (s5) */
    test_synthetic_partial(&x, 1000, 1000, 4104, 1, NULL);
    test_synthetic_partial(&x, 2048, 2048, 1024, 0, NULL);
    unsetenv("MELD_GEMM_RS_PRELOAD");
    /* the workspace now holds a partial: a real one-rank call must not add it (s6: the TMA
     * add mode once did, with no source to add) */
    test_shape(&x, 2048, 2048, 1024, 0, MELD_GEMM_RS_FUSED, 3);
    /* loopback: the 2-rank kernel (push, flags, waits, add) on one GPU */
    test_loopback(&x, 4096, 4096, 1024, 1, NULL);
    test_loopback(&x, 4096, 1000, 4104, 1, NULL);   /* N, K tails */
    test_loopback(&x, 4096, 1003, 4104, 1, NULL);   /* N % 8: no TMA store of C, the pass */
    test_loopback(&x, 8192, 8192, 4096, 1, NULL);   /* suite shape */
    test_loopback(&x, 4096, 2048, 1024, 100, NULL); /* back to back, stale flags */
    /* 132 own tiles = the CTAs (H200): every CTA pushes one tile, then its own tile needs the
     * push of the same index, i.e. its own (pending) flag: waiting at the tile's start while
     * holding it deadlocked (s6, caught by reasoning; this case now guards it) */
    test_loopback(&x, 8448, 1024, 1024, 3, NULL);
    test_loopback(&x, 8448, 1024, 1024, 3, "5");
    /* the same with the add modes that wait after the mainloop (0: in the epilogue; 2: loads
     * into registers) and with the flag helper (mode 0): each CTA waited for its own pending
     * flag until session 14 released it at every own tile's start (found by reading) */
    test_loopback(&x, 8448, 1024, 1024, 3, "0");
    test_loopback(&x, 8448, 1024, 1024, 3, "2");
    setenv("MELD_GEMM_RS_FLAG_HELPER", "1", 1);
    test_loopback(&x, 8448, 1024, 1024, 3, NULL);
    unsetenv("MELD_GEMM_RS_FLAG_HELPER");
    test_loopback(&x, 4096, 2048, 1024, 20, "0");
    test_loopback(&x, 4096, 2048, 1024, 20, "5");
    /* the general hook g kernel in the default add mode (the cases above with mode 4 run the
     * kernel with that mode compiled in, session 14) */
    /* the pushed tiles' second half deferred into the next mainloop (session 15; opt-in): after
     * k-block 0, and after 16 (past the last k-block at K 1024: after the mainloop), RS and AR */
    for (int v = 0; v < 2; v++) {
      gt_log(v ? "MELD_GEMM_RS_PUSH_DEFER=16:" : "MELD_GEMM_RS_PUSH_DEFER=0:");
      setenv("MELD_GEMM_RS_PUSH_DEFER", v ? "16" : "0", 1);
      test_loopback(&x, 8192, 8192, 4096, 1, NULL);
      test_loopback(&x, 8448, 1024, 1024, 3, NULL); /* 132 own tiles: each CTA's pushed tile before its own */
      test_loopback(&x, 8448, 11100, 4104, 2, NULL); /* N, K tails */
      test_loopback(&x, 4096, 2048, 1024, 20, NULL); /* back to back */
      test_loopback_op(&x, 8192, 1000, 4104, 1, NULL, 1, 0); /* AR: slots */
      test_loopback_op(&x, 4096, 2048, 1024, 20, NULL, 1, 1); /* AR: zero copy */
    }
    unsetenv("MELD_GEMM_RS_PUSH_DEFER");
    /* C's stores with the evict-first hint (MELD_GEMM_STORE_HINT=1, opt-in; session 16) */
    gt_log("MELD_GEMM_STORE_HINT=1:");
    setenv("MELD_GEMM_STORE_HINT", "1", 1);
    test_loopback(&x, 8448, 11100, 4104, 2, NULL); /* N, K tails */
    test_synthetic_partial(&x, 2000, 4000, 1024, 1, NULL);
    test_loopback_op(&x, 4096, 2048, 1024, 20, NULL, 1, 1); /* AR: zero copy, back to back */
    unsetenv("MELD_GEMM_STORE_HINT");
    /* the AR's copy flags released at an own tile's start (MELD_GEMM_AR_COPY_HOLD=0, before
     * session 16; default: kept for the next epilogue's start), alone and with the push deferral */
    for (int v = 0; v < 2; v++) {
      gt_log(v ? "MELD_GEMM_AR_COPY_HOLD=0 MELD_GEMM_RS_PUSH_DEFER=0:" : "MELD_GEMM_AR_COPY_HOLD=0:");
      setenv("MELD_GEMM_AR_COPY_HOLD", "0", 1);
      if (v) setenv("MELD_GEMM_RS_PUSH_DEFER", "0", 1);
      test_loopback_op(&x, 8192, 1000, 4104, 1, NULL, 1, 0); /* AR: slots */
      test_loopback_op(&x, 8448, 1024, 1024, 3, NULL, 1, 1); /* AR: zero copy, 132 own tiles */
      test_loopback_op(&x, 4096, 2048, 1024, 20, NULL, 1, 1); /* AR: zero copy, back to back */
      unsetenv("MELD_GEMM_AR_COPY_HOLD");
      unsetenv("MELD_GEMM_RS_PUSH_DEFER");
    }
    gt_log("MELD_GEMM_RS_LEAN=0:");
    setenv("MELD_GEMM_RS_LEAN", "0", 1);
    test_loopback(&x, 4096, 1000, 4104, 1, NULL);
    test_loopback(&x, 8448, 1024, 1024, 3, NULL);
    test_loopback(&x, 4096, 2048, 1024, 20, NULL);
    test_synthetic_partial(&x, 2000, 4000, 1024, 1, NULL);
    test_loopback_op(&x, 8192, 1000, 4104, 1, NULL, 1, 0);
    setenv("MELD_GEMM_RS_LEAN", "2", 1); /* RS in the lean AR kernel (diagnosis) */
    test_loopback(&x, 4096, 1000, 4104, 3, NULL);
    unsetenv("MELD_GEMM_RS_LEAN");
    /* the interleaved owner order (MELD_GEMM_RS_ORDER=ileave, session 13): own tiles wait for
     * pushes of earlier tickets only; shapes with >= 2 waves of tickets per raster group (the
     * plan's rule), 33 blocks per owner (group_m 6) with tails, back to back */
    gt_log("MELD_GEMM_RS_ORDER=ileave:");
    setenv("MELD_GEMM_RS_ORDER", "ileave", 1);
    expect_ileave(&x, 8192, 8192, 4096);
    expect_ileave(&x, 8448, 11100, 4104);
    expect_ileave(&x, 4096, 4352, 1024);
    test_loopback(&x, 8192, 8192, 4096, 1, NULL);
    test_loopback(&x, 8448, 11100, 4104, 2, NULL); /* 33 blocks per owner: group_m 6; N, K tails */
    test_loopback(&x, 4096, 4352, 1024, 100, NULL); /* 16 x 17 tickets per group, back to back */
    unsetenv("MELD_GEMM_RS_ORDER");
    /* AR in loopback: the result slot and the copy phase; zero copy into a symmetric C */
    test_loopback_op(&x, 4096, 4096, 1024, 1, NULL, 1, 0);
    test_loopback_op(&x, 8192, 1000, 4104, 1, NULL, 1, 0); /* N, K tails (256 tiles: owner mode) */
    test_loopback_op(&x, 8192, 8192, 4096, 1, NULL, 1, 0); /* suite shape */
    test_loopback_op(&x, 4096, 2048, 1024, 50, NULL, 1, 0); /* back to back */
    test_loopback_op(&x, 4096, 4096, 1024, 1, NULL, 1, 1);
    test_loopback_op(&x, 8192, 1000, 4104, 1, NULL, 1, 1); /* N % 8 == 0, ldc = n: zero copy */
    test_loopback_op(&x, 8192, 1003, 4104, 1, NULL, 1, 1); /* N % 8 != 0: slots (and the pass) */
    test_loopback_op(&x, 8192, 8192, 4096, 1, NULL, 1, 1);
    test_loopback_op(&x, 4096, 2048, 1024, 50, NULL, 1, 1);
    test_loopback_op(&x, 4096, 2048, 1024, 20, "0", 1, 1); /* the pass's copies */
    test_loopback_op(&x, 8192, 1000, 4104, 1, NULL, 1, 3); /* C registered: zero copy */
    test_loopback_op(&x, 4096, 2048, 1024, 20, NULL, 1, 3);
    test_loopback_op(&x, 4096, 2048, 1024, 3, NULL, 1, 2); /* symmetric C, MELD_GEMM_AR_ZC=0 */
    gt_log("MELD_GEMM_AR_COPY_FLAG=now:"); /* the copy flags at the end of the epilogue (before s14) */
    setenv("MELD_GEMM_AR_COPY_FLAG", "now", 1);
    test_loopback_op(&x, 8192, 1000, 4104, 1, NULL, 1, 0);
    test_loopback_op(&x, 4096, 2048, 1024, 20, NULL, 1, 1);
    unsetenv("MELD_GEMM_AR_COPY_FLAG");
    gt_log("MELD_GEMM_AR_COPY=st:"); /* the copies by the threads' stores (before s15; default: TMA) */
    setenv("MELD_GEMM_AR_COPY", "st", 1);
    test_loopback_op(&x, 8192, 1000, 4104, 1, NULL, 1, 0);
    test_loopback_op(&x, 4096, 2048, 1024, 20, NULL, 1, 1);
    setenv("MELD_GEMM_AR_COPY_FLAG", "now", 1); /* TMA copies with the flags at the epilogue's end */
    unsetenv("MELD_GEMM_AR_COPY");
    test_loopback_op(&x, 8192, 1000, 4104, 1, NULL, 1, 0);
    test_loopback_op(&x, 4096, 2048, 1024, 20, NULL, 1, 1);
    unsetenv("MELD_GEMM_AR_COPY_FLAG");
    setenv("MELD_GEMM_AR_EARLY_COPY", "1", 1); /* the opt-in early copy during the GEMM */
    test_loopback_op(&x, 8192, 1000, 4104, 1, NULL, 1, 0);
    test_loopback_op(&x, 8192, 1003, 4104, 1, NULL, 1, 0); /* N % 8: element copies */
    test_loopback_op(&x, 8192, 8192, 4096, 1, NULL, 1, 0);
    test_loopback_op(&x, 4096, 2048, 1024, 20, NULL, 1, 0);
    unsetenv("MELD_GEMM_AR_EARLY_COPY");
  }
  if (nranks == 1) { /* the decode GEMM+AR kernel (opt-in) in loopback: C = 2 x the product */
    test_decode_loopback(&x, 16, 8192, 4096, 8192, 1, 0);
    test_decode_loopback(&x, 128, 4096, 7168, 4096, 200, 0); /* issue 7's parity shape, back to back */
    test_decode_loopback(&x, 100, 1000, 4104, 1008, 3, 0);   /* M, N, K tails; ldc > N */
    test_decode_loopback(&x, 100, 1003, 4104, 1008, 3, 0);   /* N % 8: C's last columns one by one */
    test_decode_loopback(&x, 512, 4096, 7168, 4096, 3, 0);   /* two m-blocks of 256 */
    test_decode_loopback(&x, 128, 8192, 4096, 8192, 20, 1);  /* graph replays */
    test_decode_mixed(&x, 100);
    setenv("MELD_GEMM_AR_DECODE_PDL", "0", 1);               /* an ordinary launch */
    test_decode_loopback(&x, 128, 4096, 7168, 4096, 20, 0);
    unsetenv("MELD_GEMM_AR_DECODE_PDL");
    setenv("MELD_GEMM_AR_DECODE_PUSH", "1", 1); /* the partial pushed into the (virtual) peer's slot */
    test_decode_loopback(&x, 128, 4096, 7168, 4096, 50, 0);
    test_decode_loopback(&x, 100, 1003, 4104, 1008, 3, 0);
    test_decode_loopback(&x, 128, 8192, 4096, 8192, 10, 1);
    test_decode_mixed(&x, 50);
    unsetenv("MELD_GEMM_AR_DECODE_PUSH");
  }
  /* decode-size AR by default (AUTO: meld_gemm's small-M kernel + the LL all-reduce, or the
   * zero-copy all-reduce from the workspace for partials >= 512 KB: 128 x 4096 = 1 MB) */
  test_shape(&x, 16, 8192, 4096, 0, MELD_GEMM_RS_AUTO, 2);
  test_shape(&x, 128, 4096, 7168, 0, MELD_GEMM_RS_AUTO, 2);
  test_back_to_back_m(&x, 1, MELD_GEMM_RS_AUTO, 200, 16);
  /* M 128 x N 8192: a 2 MB partial, the zero-copy all-reduce from the workspace (>= 512 KB),
   * back to back (the workspace reused by every call) and in graphs */
  test_back_to_back_m(&x, 1, MELD_GEMM_RS_AUTO, 200, 128);
  test_graph(&x, 0, 20);
  test_graph(&x, 1, 20);
  test_graph_m(&x, 1, 20, 128);
  if (nranks > 1) { /* each rank process sets the same value: it must agree across ranks */
    setenv("MELD_GEMM_AR_DECODE_ZC", "2", 1); /* zero copy at M 16 too */
    test_shape(&x, 16, 8192, 4096, 0, MELD_GEMM_RS_AUTO, 2);
    test_back_to_back_m(&x, 1, MELD_GEMM_RS_AUTO, 50, 16);
    setenv("MELD_GEMM_AR_DECODE_ZC", "0", 1); /* the public all-reduce at M 128 */
    test_shape(&x, 128, 4096, 7168, 0, MELD_GEMM_RS_AUTO, 2);
    unsetenv("MELD_GEMM_AR_DECODE_ZC");
    gt_log("MELD_GEMM_AR_DECODE_FUSED=1:"); /* the decode GEMM+AR as one kernel (opt-in) */
    setenv("MELD_GEMM_AR_DECODE_FUSED", "1", 1);
    test_shape(&x, 16, 8192, 4096, 0, MELD_GEMM_RS_AUTO, 2);
    test_shape(&x, 128, 4096, 7168, 0, MELD_GEMM_RS_AUTO, 2);
    test_shape(&x, 100, 1000, 4104, 0, MELD_GEMM_RS_AUTO, 2); /* M, N, K tails */
    test_shape(&x, 100, 1003, 4104, 0, MELD_GEMM_RS_AUTO, 2); /* N % 8 */
    test_shape(&x, 512, 4096, 7168, 0, MELD_GEMM_RS_AUTO, 2); /* two m-blocks of 256 */
    test_shape(&x, 512, 8192, 4096, 0, MELD_GEMM_RS_AUTO, 2); /* not a small-M plan: the unfused path */
    test_back_to_back_m(&x, 1, MELD_GEMM_RS_AUTO, 200, 128);
    test_back_to_back_m(&x, 1, MELD_GEMM_RS_AUTO, 200, 16);
    test_graph_m(&x, 1, 20, 128);
    test_decode_mixed(&x, 100);
    setenv("MELD_GEMM_AR_DECODE_PDL", "0", 1);
    test_back_to_back_m(&x, 1, MELD_GEMM_RS_AUTO, 50, 128);
    unsetenv("MELD_GEMM_AR_DECODE_PDL");
    gt_log("MELD_GEMM_AR_DECODE_FUSED=1 MELD_GEMM_AR_DECODE_PUSH=1:");
    setenv("MELD_GEMM_AR_DECODE_PUSH", "1", 1); /* the partials pushed over NVLink */
    test_shape(&x, 128, 4096, 7168, 0, MELD_GEMM_RS_AUTO, 2);
    test_shape(&x, 100, 1003, 4104, 0, MELD_GEMM_RS_AUTO, 2);
    test_back_to_back_m(&x, 1, MELD_GEMM_RS_AUTO, 200, 128);
    test_graph_m(&x, 1, 20, 128);
    test_decode_mixed(&x, 50);
    unsetenv("MELD_GEMM_AR_DECODE_PUSH");
    unsetenv("MELD_GEMM_AR_DECODE_FUSED");
  }
  meld_bootstrap_barrier(x.comm->boot);
  ctx_free(&x);
}

/* AR into a C in symmetric memory, the zero-copy path taken by default (MELD_GEMM_AR_ZC unset):
 * the reduced tiles go straight into the peers' C. `calls` calls alternate two input sets,
 * every output poisoned before and all M rows checked. */
/* reg: C is ordinary memory registered with meld_mem_register (else meld_mem_alloc). */
static void test_ar_symc(ctx_t *x, int64_t m, int64_t n, int64_t k, int calls, int reg = 0) {
  prob_t p;
  prob_init(x, &p, m, n, k, 0, 2, ((n + 7) / 8) * 8);
  __nv_bfloat16 *c_plain = p.c;
  void *cs = NULL;
  uint8_t *c_block = NULL;
  if (reg) {
    GT_CUDA(cudaMalloc(&c_block, (size_t)m * p.ldc * 2 + 4096));
    cs = c_block + 2048;
    const meld_result_t rr = meld_mem_register(x->comm, cs, (size_t)m * p.ldc * 2);
    if (rr != MELD_OK) { /* (every rank fails alike: all leave here) */
      GT_CHECK(0, "meld_mem_register: %s", meld_last_error());
      cudaFree(c_block);
      prob_free(&p);
      return;
    }
  } else {
    GT_MELD(meld_mem_alloc(x->comm, (size_t)m * p.ldc * 2 + 256, &cs));
  }
  p.c = (__nv_bfloat16 *)cs;
  unsetenv("MELD_GEMM_AR_ZC");
  check_slot_t *sl = slots_alloc(calls);
  for (int i = 0; i < calls; i++) {
    GT_CUDA(cudaMemsetAsync(p.c, 0xff, (size_t)m * p.ldc * 2, x->s));
    meld_gemm_rs_args_t a = prob_args(&p, i & 1, MELD_GEMM_RS_FUSED);
    const meld_result_t r = meld_gemm_ar(x->comm, &a, x->s);
    if (r != MELD_OK) {
      GT_CHECK(0, "zero-copy AR call %d -> %s: %s", i, meld_strerror(r), meld_last_error());
      break;
    }
    enqueue_check(x, &p, 1, i & 1, sl + i);
  }
  GT_CUDA(cudaStreamSynchronize(x->s));
  GT_MELD(meld_comm_check(x->comm));
  char what[160];
  snprintf(what, sizeof what, "gemm_ar M %lld N %lld K %lld, C %s, zero copy (default) x%d", (long long)m,
           (long long)n, (long long)k, reg ? "registered" : "symmetric", calls);
  judge(what, sl, calls);
  cudaFree(sl);
  if (reg) {
    GT_MELD(meld_mem_deregister(x->comm, p.c));
    cudaFree(c_block);
  } else {
    GT_MELD(meld_mem_free(x->comm, p.c));
  }
  p.c = c_plain;
  prob_free(&p);
}

/* Run-time variants (gemm_rs.cu): 16-byte-store push of the peer's partial tiles
 * (MELD_GEMM_RS_PUSH=st, 2 ranks; the default is the TMA push with deferred flags), and the decode-size fused AR with split-K (default) and
 * without (MELD_GEMM_RS_SPLIT_K=1). */
static void rank_variants(int rank, int nranks) {
  ctx_t x;
  if (!ctx_init(&x, rank, nranks, (size_t)320 << 20)) return;
  setenv("MELD_GEMM_RS_SPLIT_K", "0", 1);
  test_shape(&x, 16, 8192, 4096, 0, MELD_GEMM_RS_FUSED, 2);   /* decode AR, split-K 4 */
  test_shape(&x, 128, 8192, 4096, 0, MELD_GEMM_RS_FUSED, 2);
  test_shape(&x, 512, 4096, 7168, 1, MELD_GEMM_RS_FUSED, 2);  /* 64 tiles: split-K 2, B [K,N] */
  test_shape(&x, 1000, 1000, 4104, 0, MELD_GEMM_RS_FUSED, 2); /* AR tails, split-K */
  setenv("MELD_GEMM_RS_SPLIT_K", "1", 1);
  test_shape(&x, 16, 8192, 4096, 0, MELD_GEMM_RS_FUSED, 2);   /* decode AR, no split */
  setenv("MELD_GEMM_RS_SPLIT_K", "0", 1);
  if (nranks == 2) { /* the owner-mode AR where the plan would pick the symmetric one */
    setenv("MELD_GEMM_AR_SYM", "0", 1);
    gt_log("MELD_GEMM_AR_SYM=0");
    test_shape(&x, 16, 8192, 4096, 0, MELD_GEMM_RS_FUSED, 2);
    test_shape(&x, 1000, 1000, 4104, 0, MELD_GEMM_RS_FUSED, 2);
    test_shape(&x, 1000, 1003, 4104, 0, MELD_GEMM_RS_FUSED, 2);
    test_back_to_back(&x, 1, MELD_GEMM_RS_FUSED, 200);
    unsetenv("MELD_GEMM_AR_SYM");
  }
  if (nranks == 2) { /* the opt-in flag helper (pushed tiles' flags released by a producer warp) */
    setenv("MELD_GEMM_RS_FLAG_HELPER", "1", 1);
    gt_log("MELD_GEMM_RS_FLAG_HELPER=1");
    test_shape(&x, 256 * nranks, 1000, 4104, 0, MELD_GEMM_RS_FUSED, 3);
    test_shape(&x, 8192, 8192, 4096, 0, MELD_GEMM_RS_AUTO, 3);
    test_back_to_back(&x, 0, MELD_GEMM_RS_FUSED, 200);
    test_graph(&x, 0, 20);
    unsetenv("MELD_GEMM_RS_FLAG_HELPER");
  }
  /* the opt-in zero-copy AR into a symmetric C: the suite shape, N/K tails, back to back, and
   * an M tail in owner mode */
  test_ar_symc(&x, 8192, 8192, 4096, 1);
  test_ar_symc(&x, 8192, 1000, 4104, 1);
  test_ar_symc(&x, 8192, 1024, 1024, 50);
  test_ar_symc(&x, 8192, 1000, 4104, 1, 1); /* C registered ordinary memory */
  test_ar_symc(&x, 8192, 1024, 1024, 20, 1);
  setenv("MELD_GEMM_AR_EARLY_COPY", "1", 1); /* the opt-in early copy of the AR during the GEMM */
  gt_log("MELD_GEMM_AR_EARLY_COPY=1");
  test_shape(&x, 8192, 1000, 4104, 0, MELD_GEMM_RS_FUSED, 2);
  test_back_to_back(&x, 1, MELD_GEMM_RS_FUSED, 50);
  unsetenv("MELD_GEMM_AR_EARLY_COPY");
  if (nranks == 2) {
    setenv("MELD_GEMM_AR_SYM", "0", 1);
    test_ar_symc(&x, 1000, 1000, 4104, 3);
    unsetenv("MELD_GEMM_AR_SYM");
  }
  /* 2 ranks: 132 own tiles per rank (one wave of pushes on an H200): each CTA's own tile waits
   * for a peer CTA that may hold its own pending push flag (see gemm.cuh, add mode 4) */
  if (nranks == 2) {
    test_shape(&x, 8448, 1024, 1024, 0, MELD_GEMM_RS_FUSED, 3);
    test_back_to_back(&x, 0, MELD_GEMM_RS_FUSED, 50);
  }
  setenv("MELD_GEMM_RS_STREAM_K", "2", 1); /* stream-K over the last wave (own tiles' pieces) */
  gt_log("MELD_GEMM_RS_STREAM_K=2");
  test_shape(&x, m_fused(&x, 8192), 8192, 4096, 0, MELD_GEMM_RS_FUSED, 3);
  test_shape(&x, m_fused(&x, 4096), 4096, 2048, 0, MELD_GEMM_RS_FUSED, 3);
  unsetenv("MELD_GEMM_RS_STREAM_K");
  setenv("MELD_GEMM_RS_PRELOAD", "5", 1); /* own tiles: the partial in the producer's stages */
  gt_log("MELD_GEMM_RS_PRELOAD=5");
  test_shape(&x, 256 * nranks, 1000, 4104, 0, MELD_GEMM_RS_FUSED, 3);
  test_shape(&x, m_fused(&x, 8192), 8192, 4096, 0, MELD_GEMM_RS_FUSED, 3);
  test_back_to_back(&x, 0, MELD_GEMM_RS_FUSED, 100);
  setenv("MELD_GEMM_RS_PRELOAD", "1", 1); /* own tiles: partials by loads into registers */
  gt_log("MELD_GEMM_RS_PRELOAD=1");
  test_shape(&x, 256 * nranks, 1000, 4104, 0, MELD_GEMM_RS_FUSED, 3);
  test_shape(&x, m_fused(&x, 8192), 8192, 4096, 0, MELD_GEMM_RS_FUSED, 3);
  setenv("MELD_GEMM_RS_PRELOAD", "0", 1); /* own tiles: the pass over the staging (s5's default) */
  gt_log("MELD_GEMM_RS_PRELOAD=0");
  test_shape(&x, 256 * nranks, 1000, 4104, 0, MELD_GEMM_RS_FUSED, 3);
  test_shape(&x, 8192, 8192, 4096, 0, MELD_GEMM_RS_AUTO, 3);
  test_back_to_back(&x, 1, MELD_GEMM_RS_FUSED, 100);
  unsetenv("MELD_GEMM_RS_PRELOAD");
  setenv("MELD_GEMM_RS_STORE", "st", 1); /* own tiles by the threads' 16-byte stores (TMA: the default) */
  gt_log("MELD_GEMM_RS_STORE=st");
  test_shape(&x, 256 * nranks, 1024, 4104, 0, MELD_GEMM_RS_FUSED, 3);
  test_shape(&x, 1000, 1000, 4104, 0, MELD_GEMM_RS_FUSED, 2);
  unsetenv("MELD_GEMM_RS_STORE");
  setenv("MELD_GEMM_RS_PUSH", "st", 1); /* the non-default push (16-byte stores; TMA is the default) */
  gt_log("MELD_GEMM_RS_PUSH=st");
  test_shape(&x, 1000, 1000, 4104, 0, MELD_GEMM_RS_FUSED, 2);        /* AR tails          */
  test_shape(&x, 256 * nranks, 1000, 4104, 0, MELD_GEMM_RS_FUSED, 3); /* RS/AR N, K tails  */
  test_shape(&x, 256 * nranks, 1000, 4104, 1, MELD_GEMM_RS_FUSED, 3); /* B [K,N]           */
  test_shape(&x, 8192, 8192, 4096, 0, MELD_GEMM_RS_AUTO, 3);          /* suite shape       */
  test_back_to_back(&x, 0, MELD_GEMM_RS_AUTO, 200);
  test_back_to_back(&x, 1, MELD_GEMM_RS_AUTO, 200);
  test_graph(&x, 0, 20);
  test_graph(&x, 1, 20);
  unsetenv("MELD_GEMM_RS_PUSH");
  meld_bootstrap_barrier(x.comm->boot);
  ctx_free(&x);
}

/* MELD_TRACE on: the fused kernel's per-tile timeline (gemm.cuh) is recorded, the results stay
 * right, and each rank's trace file holds mainloop ("compute") and own-tile ("reduce") events
 * (and at 2 ranks pushed-tile "comm" events). */
#define TRACE_FILE "build/tests/gpu/trace_gemm_rs.json"
static void rank_traced(int rank, int nranks) {
  setenv("MELD_TRACE", TRACE_FILE, 1);
  ctx_t x;
  const int ok = ctx_init(&x, rank, nranks, (size_t)64 << 20);
  unsetenv("MELD_TRACE");
  if (!ok) return;
  test_shape(&x, 256 * nranks, 1024, 1024, 0, MELD_GEMM_RS_FUSED, 3);
  if (nranks == 1) test_decode_loopback(&x, 128, 4096, 7168, 4096, 2, 0); /* its compute / wait / comm events */
  meld_bootstrap_barrier(x.comm->boot);
  ctx_free(&x); /* writes the trace */
  char path[256];
  if (nranks > 1) snprintf(path, sizeof path, "build/tests/gpu/trace_gemm_rs.rank%d.json", rank);
  else snprintf(path, sizeof path, "%s", TRACE_FILE);
  FILE *f = fopen(path, "r");
  GT_CHECK(f != NULL, "trace file %s was not written", path);
  if (!f) return;
  static char buf[1 << 22];
  const size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  GT_CHECK(strstr(buf, "\"name\":\"reduce\"") != NULL, "%s: no own-tile (reduce) event", path);
  GT_CHECK(strstr(buf, "\"name\":\"compute\"") != NULL, "%s: no mainloop (compute) event", path);
  /* (comm: the pushed tiles at 2 ranks; at one rank only the decode kernel's pull and sum) */
  GT_CHECK(strstr(buf, "\"name\":\"comm\"") != NULL, "%s: no comm event", path);
  gt_log("trace %s: %zu bytes with reduce / compute / comm events", path, n);
}

/* Rank 0 passes a different M: every rank must see an error, none may hang. */
static void rank_mismatch(int rank, int nranks) {
  ctx_t x;
  if (!ctx_init(&x, rank, nranks, (size_t)64 << 20)) return;
  prob_t p;
  prob_init(&x, &p, 512 * nranks, 1024, 1024, 0, 1, 1024);
  meld_gemm_rs_args_t a = prob_args(&p, 0, MELD_GEMM_RS_FUSED);
  if (rank == 0) a.m -= 128 * nranks;
  meld_result_t r = meld_gemm_rs(x.comm, &a, x.s);
  GT_CHECK(r == MELD_OK, "mismatch call -> %s: %s", meld_strerror(r), meld_last_error());
  GT_CUDA(cudaStreamSynchronize(x.s));
  r = meld_comm_check(x.comm);
  GT_CHECK(r != MELD_OK && strstr(meld_last_error(), "argument"), "mismatch: meld_comm_check -> %s (%s)",
           meld_strerror(r), meld_last_error());
  gt_log("mismatch: %s", meld_last_error());
  meld_bootstrap_barrier(x.comm->boot);
  prob_free(&p);
  ctx_free(&x);
}

/* Zero-copy AR (symmetric C) on rank 0 only (MELD_GEMM_AR_ZC=0 on the others): the
 * ranks would write and read in different places, so the argument hash must differ and every
 * rank report the mismatch instead of returning a wrong C. */
static void rank_zc_mismatch(int rank, int nranks) {
  ctx_t x;
  if (!ctx_init(&x, rank, nranks, (size_t)320 << 20)) return;
  prob_t p;
  prob_init(&x, &p, 8192, 1024, 1024, 0, 1, 1024);
  __nv_bfloat16 *c_plain = p.c;
  void *cs = NULL;
  GT_MELD(meld_mem_alloc(x.comm, (size_t)8192 * 1024 * 2 + 256, &cs));
  p.c = (__nv_bfloat16 *)cs;
  if (rank != 0) setenv("MELD_GEMM_AR_ZC", "0", 1);
  meld_gemm_rs_args_t a = prob_args(&p, 0, MELD_GEMM_RS_FUSED);
  meld_result_t r = meld_gemm_ar(x.comm, &a, x.s);
  unsetenv("MELD_GEMM_AR_ZC");
  GT_CHECK(r == MELD_OK, "zc mismatch call -> %s: %s", meld_strerror(r), meld_last_error());
  GT_CUDA(cudaStreamSynchronize(x.s));
  r = meld_comm_check(x.comm);
  GT_CHECK(r != MELD_OK && strstr(meld_last_error(), "argument"), "zc mismatch: meld_comm_check -> %s (%s)",
           meld_strerror(r), meld_last_error());
  gt_log("zero-copy AR on one rank only: %s", meld_last_error());
  meld_bootstrap_barrier(x.comm->boot);
  p.c = c_plain;
  prob_free(&p);
  ctx_free(&x); /* (frees the symmetric buffer with the comm) */
}

/* The last rank never calls: the others time out (MELD_TIMEOUT_MS = 2000), not hang, and the
 * comm then refuses further calls (the sticky error). decode: the decode GEMM+AR kernel
 * (MELD_GEMM_AR_DECODE_FUSED=1), whose side warp's handshake times out while the GEMM runs;
 * else the fused GEMM+RS kernel. */
static void missing_rank(int rank, int nranks, int decode) {
  ctx_t x;
  if (!ctx_init(&x, rank, nranks, (size_t)64 << 20)) return;
  prob_t p;
  if (decode) prob_init(&x, &p, 128, 4096, 7168, 0, 1, 4096);
  else prob_init(&x, &p, 512 * nranks, 1024, 1024, 0, 1, 1024);
  if (decode) setenv("MELD_GEMM_AR_DECODE_FUSED", "1", 1);
  const char *what = decode ? "missing rank (decode kernel)" : "missing rank";
  if (rank != nranks - 1) {
    meld_gemm_rs_args_t a = prob_args(&p, 0, decode ? MELD_GEMM_RS_AUTO : MELD_GEMM_RS_FUSED);
    double t0 = gt_now_s();
    GT_MELD(decode ? meld_gemm_ar(x.comm, &a, x.s) : meld_gemm_rs(x.comm, &a, x.s));
    GT_CUDA(cudaStreamSynchronize(x.s));
    meld_result_t r = meld_comm_check(x.comm);
    GT_CHECK(r == MELD_ERR_TIMEOUT || (nranks > 2 && r == MELD_ERR_ABORTED),
             "%s: meld_comm_check -> %s (%s), want MELD_ERR_TIMEOUT", what, meld_strerror(r), meld_last_error());
    gt_log("%s: returned after %.2f s: %s", what, gt_now_s() - t0, meld_last_error());
    r = meld_gemm_ar(x.comm, &a, x.s); /* failed for good: refused, not launched */
    GT_CHECK(r == MELD_ERR_TIMEOUT || r == MELD_ERR_ABORTED, "%s: next call -> %s, want the sticky error", what,
             meld_strerror(r));
  }
  unsetenv("MELD_GEMM_AR_DECODE_FUSED");
  meld_bootstrap_barrier(x.comm->boot);
  prob_free(&p);
  ctx_free(&x);
}
static void rank_missing(int rank, int nranks) { missing_rank(rank, nranks, 0); }
static void rank_missing_decode(int rank, int nranks) { missing_rank(rank, nranks, 1); }

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
  printf("test_gemm_rs: %d GPU(s)\n", g_ndev);
  if (g_ndev < 1) {
    printf("no GPU: skipped\n");
    return gt_summary("test_gemm_rs");
  }
  double t0 = gt_now_s();
  run("reference, back-to-back, graphs", g_ndev, rank_main);
  run("variants: decode split-K, TMA push, 16-byte own-tile stores", g_ndev, rank_variants);
  run("per-tile trace (MELD_TRACE)", g_ndev, rank_traced);
  if (g_ndev > 1) run("one rank", 1, rank_main);
  if (g_ndev > 1) {
    run("mismatched shapes", g_ndev, rank_mismatch);
    run("zero-copy AR on one rank only", g_ndev, rank_zc_mismatch);
    run("missing rank", g_ndev, rank_missing);
    run("missing rank, decode kernel", g_ndev, rank_missing_decode);
  }
  printf("test_gemm_rs: %.1f s\n", gt_now_s() - t0);
  return gt_summary("test_gemm_rs");
}
