/* bench_coll.cu — meld's collectives vs NCCL, side by side in one run, on all GPUs present:
 * all_gather, reduce_scatter, all_reduce (auto, and two-shot forced), all_to_all, bf16,
 * sizes 4 KB .. 1 GB (powers of 4), launched plainly and as CUDA-graph replays; and meld's
 * all-gather GB/s vs the number of comm CTAs (384 and 640 threads) at 256 MB; the engines
 * forced per size (variant "ring" / "ll": where LL stops paying), a tuning grid (CTAs,
 * threads, chunk, slots) at 256 MB, and the launch floor (empty kernel plain / cooperative,
 * the entry handshake alone), plain and in graphs.
 *
 * Sizes and bus bandwidth follow nccl-tests: "size" is the total buffer (all_gather: the
 * gathered output; reduce_scatter: the input; all_reduce: the buffer; all_to_all: the input);
 * busbw = size / time x (P-1)/P (AG, RS, A2A) or x 2(P-1)/P (AR); P = 1 reports algbw.
 * Times are medians of >= 20 calls (batches of back-to-back calls, timed with events, ranks
 * aligned by a barrier before each batch) after 5 warm-up calls. rel_err compares meld's
 * output with NCCL's on the same inputs (0 for the copies; sums differ by summation order).
 *
 * Usage: bench_coll [--quick] [--s2] [--zc] [--json FILE] [--max-bytes N] [--only OP]
 *   --quick: sizes up to 256 MB, fewer samples (< 60 s).  NCCL_NVLS_ENABLE=0 is set here.
 *   --s2: the session-2 sweep instead (floor; latency 4 KB..1 MB with LL geometries; 64 MB,
 *   256 MB, 1 GB with ROUNDS/RING geometries and loop depths; GB/s vs CTAs).
 *   --zc: the ZC engine on meld_mem_alloc buffers, 4 KB .. --max-bytes (see zc_run).
 *   --zc-reg: the same on ordinary cudaMalloc buffers registered with meld_mem_register
 *   (default plan and ZC at 16 CTAs, each with and without MELD_COLL_PDL=1).
 *   --trace (with --zc / --zc-reg): 4 back-to-back default calls per op at --max-bytes (one
 *   rank: 16 calls of the ZC kernel, forced) and nothing timed; with MELD_TRACE=file each rank
 *   writes the per-CTA timeline at comm destroy (ZC: entry handshake, move, wait for the peers'
 *   done), tools/trace_png.py draws it and tools/trace_stats.py sums it up per call. */
#include <cuda_bf16.h>
#include <math.h>

#include "device/copy.cuh"
#include "../tests/gpu/gpu_test.h"
/* bench_env copies the 256-byte device name into 128 bytes: truncation is intended there. */
#pragma GCC diagnostic ignored "-Wformat-truncation"
#include "bench_common.h"
#include "coll_plan.h"
#include "comm.h"
#include "device/launch.cuh"
#include "nccl_baseline.h"
#include "proto.h"

static int g_quick = 0;
static const char *g_json = NULL;
static size_t g_max_bytes = (size_t)1 << 30;
static size_t g_min_bytes = 4096;
static int g_only = -1;   /* --only OP: one op (index into g_opname) */
static int g_point = 0;   /* --only / --bytes given: skip the floor, CTA curve and grid */

enum { OP_AG = 0, OP_RS = 1, OP_AR = 2, OP_A2A = 3 };
static const char *const g_opname[] = {"all_gather", "reduce_scatter", "all_reduce", "all_to_all"};

__global__ void bc_fill(uint16_t *p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t h = (uint32_t)i * 0x9E3779B1u ^ seed * 0x85EBCA77u;
    h ^= h >> 15, h *= 0x2C1B3C6Du, h ^= h >> 13;
    float v = ((int)(h & 0x3ff) - 512) / 256.0f;
    __nv_bfloat16 b = __float2bfloat16_rn(v == 0.0f ? 0.25f : v);
    p[i] = *(uint16_t *)&b;
  }
}

/* acc[0] += (a - b)^2, acc[1] += b^2 over n bf16 elements. */
__global__ void bc_diff(const uint16_t *a, const uint16_t *b, size_t n, double *acc) {
  double num = 0, den = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    double x = __uint_as_float((uint32_t)a[i] << 16), y = __uint_as_float((uint32_t)b[i] << 16);
    num += (x - y) * (x - y);
    den += y * y;
  }
  atomicAdd(&acc[0], num);
  atomicAdd(&acc[1], den);
}

/* The launch floor: an empty kernel, and the protocol's entry handshake + exit alone. */
__global__ void bc_empty(int x) {
  if (x == 12345) __trap();
}
__global__ void bc_handshake(const __grid_constant__ meld_proto_dev_t proto, uint32_t hash) {
  meld_ctx_t ctx;
  meld_call_begin(&ctx, &proto, MELD_OP_TEST_SIGNAL, hash, gridDim.x);
  meld_call_end(&ctx);
}

/* The raw one-way trip: each rank stores the call number into the peer's pad (a relaxed
 * store, no fence) and spins on its own copy; the count lives in this rank's pad too. */
__global__ void bc_flag_exchange(uint8_t *my_pad, uint8_t *peer_pad, int me) {
  uint64_t *cnt = (uint64_t *)(my_pad + MELD_PAD_OFF_DATA);
  const uint64_t n = *cnt + 1;
  st_relaxed_sys_u64((uint64_t *)(peer_pad + MELD_PAD_OFF_DATA + 64 + 8 * me), n);
  const uint64_t *mine = (const uint64_t *)(my_pad + MELD_PAD_OFF_DATA + 64 + 8 * (1 - me));
  for (uint64_t i = 0; i < (1ull << 30) && ld_relaxed_sys_u64(mine) < n; i++) {
  }
  *cnt = n;
}

typedef struct {
  int lib; /* 0 meld, 1 NCCL, 2 floor kernel (op: 0 empty plain, 1 empty coop, 2 handshake 1 CTA,
              3 handshake 16 CTAs, 4 raw flag exchange, P = 2 only) */
  int op;
  const void *send;
  void *recv;
  size_t count;
  const meld_coll_plan_hint_t *hint; /* meld only; NULL = the public function */
} bc_run_t;

typedef struct {
  meld_comm_t comm;
  ncclComm_t nc;
  cudaStream_t s;
  cudaEvent_t e0, e1;
  int rank, P;
} bc_ctx_t;

static int bc_enqueue(bc_ctx_t *c, const bc_run_t *r) {
  if (r->lib == 1) return c->nc && nb_run(r->op, r->send, r->recv, r->count, MELD_BF16, c->nc, c->s) == ncclSuccess;
  if (r->lib == 2) {
    int x = 0;
    uint32_t hash = 77;
    meld_proto_dev_t pd = meld_proto_dev(c->comm);
    void *eargs[] = {&x};
    void *hargs[] = {&pd, &hash};
    switch (r->op) {
      case 0: bc_empty<<<1, 32, 0, c->s>>>(0); return cudaGetLastError() == cudaSuccess;
      case 1: return meld_launch_coop((const void *)bc_empty, 1, 32, 0, eargs, c->s) == MELD_OK;
      case 2: return meld_launch_coop((const void *)bc_handshake, 1, 32, 0, hargs, c->s) == MELD_OK;
      case 4:
        bc_flag_exchange<<<1, 32, 0, c->s>>>((uint8_t *)c->comm->pad.local, (uint8_t *)c->comm->pad.peer[1 - c->rank],
                                             c->rank);
        return cudaGetLastError() == cudaSuccess;
      default: return meld_launch_coop((const void *)bc_handshake, 16, 512, 0, hargs, c->s) == MELD_OK;
    }
  }
  meld_result_t res;
  if (!r->hint) {
    switch (r->op) {
      case OP_AG: res = meld_all_gather(c->comm, r->send, r->recv, r->count, MELD_BF16, c->s); break;
      case OP_RS: res = meld_reduce_scatter(c->comm, r->send, r->recv, r->count, MELD_BF16, c->s); break;
      case OP_AR: res = meld_all_reduce(c->comm, r->send, r->recv, r->count, MELD_BF16, c->s); break;
      default: res = meld_all_to_all(c->comm, r->send, r->recv, r->count, MELD_BF16, c->s); break;
    }
  } else {
    static meld_coll_args_t a;
    memset(&a, 0, sizeof a);
    a.op = (meld_coll_op_t)r->op; /* same numbering as MELD_COLL_* */
    a.dtype = MELD_BF16;
    a.send = r->send;
    a.recv = r->recv;
    a.count = r->count;
    for (int q = 0; q < c->P; q++) {
      a.send_counts[q] = a.recv_counts[q] = r->count;
      a.send_offsets[q] = a.recv_offsets[q] = (size_t)q * r->count;
    }
    res = meld_coll_run(c->comm, "bench", &a, r->hint, c->s, NULL);
  }
  if (res != MELD_OK) fprintf(stderr, "[rank %d] meld %s: %s\n", c->rank, g_opname[r->op], meld_last_error());
  return res == MELD_OK;
}

/* The reference output of run r (a NCCL run): NCCL's, or without NCCL (e.g. ranks sharing a
 * GPU) meld's public call with its default plan, so that the rows are still checked. */
static int bc_reference(bc_ctx_t *c, const bc_run_t *r) {
  if (c->nc) return bc_enqueue(c, r);
  bc_run_t m = *r;
  m.lib = 0;
  m.hint = NULL;
  return bc_enqueue(c, &m);
}

/* Median time per call in ms; graph: replays of a graph of `batch` captured calls. */
static float bc_time(bc_ctx_t *c, const bc_run_t *r, int graph, int samples, int batch) {
  for (int i = 0; i < 5; i++)
    if (!bc_enqueue(c, r)) return NAN;
  cudaGraphExec_t ge = NULL;
  if (graph) {
    cudaGraph_t g = NULL;
    if (cudaStreamBeginCapture(c->s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) return NAN;
    int ok = 1;
    for (int i = 0; i < batch; i++) ok &= bc_enqueue(c, r);
    if (cudaStreamEndCapture(c->s, &g) != cudaSuccess || !ok) return NAN;
    if (cudaGraphInstantiate(&ge, g, 0) != cudaSuccess) return NAN;
    cudaGraphDestroy(g);
    cudaGraphLaunch(ge, c->s); /* warm-up replay */
  }
  cudaStreamSynchronize(c->s);
  float *ms = (float *)malloc(sizeof(float) * (size_t)samples);
  for (int sIdx = 0; sIdx < samples; sIdx++) {
    meld_bootstrap_barrier(c->comm->boot);
    cudaEventRecord(c->e0, c->s);
    if (graph) cudaGraphLaunch(ge, c->s);
    else
      for (int i = 0; i < batch; i++) bc_enqueue(c, r);
    cudaEventRecord(c->e1, c->s);
    cudaEventSynchronize(c->e1);
    float t = 0;
    cudaEventElapsedTime(&t, c->e0, c->e1);
    ms[sIdx] = t / (float)batch;
  }
  float med = bench_median(ms, samples);
  free(ms);
  if (ge) cudaGraphExecDestroy(ge);
  if (cudaGetLastError() != cudaSuccess || meld_comm_check(c->comm) != MELD_OK) return NAN;
  return med;
}

/* Relative Frobenius difference between meld's and NCCL's outputs (bf16, n elements). */
static double bc_rel_err(bc_ctx_t *c, const uint16_t *a, const uint16_t *b, size_t n, double *d_acc) {
  cudaMemsetAsync(d_acc, 0, 2 * sizeof(double), c->s);
  bc_diff<<<264, 512, 0, c->s>>>(a, b, n, d_acc);
  double h[2] = {0, 0};
  cudaMemcpyAsync(h, d_acc, sizeof h, cudaMemcpyDeviceToHost, c->s);
  cudaStreamSynchronize(c->s);
  if (!isfinite(h[0])) return INFINITY;
  return h[1] > 0 ? sqrt(h[0] / h[1]) : sqrt(h[0]);
}

static double busbw_factor(int op, int P) {
  if (P == 1) return 1.0;
  return op == OP_AR ? 2.0 * (P - 1) / P : (double)(P - 1) / P;
}

static void json_line(FILE *jf, const bench_env_t *env, const char *nccl_ver, const char *op, size_t bytes,
                      size_t count, const char *mode, const char *variant, int ctas, int threads, int P,
                      float meld_ms, float nccl_ms, double busbw, double nccl_busbw, double rel_err) {
  if (!jf) return;
  char nccl_ms_s[32] = "null", nbw[32] = "null", err[32] = "null";
  if (nccl_ms == nccl_ms && nccl_ms > 0) snprintf(nccl_ms_s, sizeof nccl_ms_s, "%.5f", nccl_ms);
  if (nccl_busbw == nccl_busbw && nccl_busbw > 0) snprintf(nbw, sizeof nbw, "%.2f", nccl_busbw);
  if (rel_err == rel_err && rel_err >= 0) snprintf(err, sizeof err, "%.3g", rel_err);
  fprintf(jf,
          "{\"op\":\"%s\",\"shape\":{\"bytes\":%zu,\"count\":%zu,\"mode\":\"%s\",\"variant\":\"%s\","
          "\"ctas\":%d,\"threads\":%d},\"nranks\":%d,\"nnodes\":1,\"dtype\":\"bf16\",\"meld_ms\":%.5f,"
          "\"seq_ms\":%s,\"peer_ms\":%s,\"peer\":\"nccl\",\"compute_ms\":null,\"meld_compute_ms\":null,"
          "\"comm_ms\":%s,\"bound_ms\":null,\"busbw\":%.2f,\"nccl_busbw\":%s,\"rel_err\":%s,\"gpu\":\"%s\","
          "\"driver\":\"%s\",\"cuda\":\"%s\",\"nccl\":\"%s\",\"torch\":null,\"date\":\"%s\",\"commit\":\"%s\"}\n",
          op, bytes, count, mode, variant, ctas, threads, P, meld_ms, nccl_ms_s, nccl_ms_s, nccl_ms_s, busbw, nbw,
          err, env->gpu, env->driver, env->cuda, nccl_ver, env->date, env->commit);
  fflush(jf);
}

/* ---- push micro-benchmark (--s2): what one CTA moves into the peer's memory ------------------
 * Each CTA pushes its slice of `bytes` from local memory into the peer's workspace, nothing
 * else (no signals unless asked, no drain). vec<U>: every thread, U 16-byte loads in flight.
 * bulk: thread 0 only, TMA: cp.async.bulk global->shared (PB-byte pieces, mbarrier per
 * buffer), then shared->peer global, NB buffers, loads running L pieces ahead of the stores.
 * rel_every > 0: every rel_every pieces, cp.async.bulk.wait_group W (W = 0: all stores of
 * the thread complete; W = NB-1-L... : the newest groups stay in flight) and a st.release.sys
 * of a flag in the peer's pad (nobody waits for it): what a per-chunk signal costs, and
 * whether the release fence also drains the bulk groups still in flight. */
enum { PB = 16384, NB = 8, LAG = 4 };

template <int U>
__global__ void __launch_bounds__(1024, 1) bc_push_vec(uint8_t *dst, const uint8_t *src, size_t per_cta) {
  copy_vec16<U>((int4 *)(dst + blockIdx.x * per_cta), (const int4 *)(src + blockIdx.x * per_cta), per_cta / 16,
                threadIdx.x, blockDim.x);
}

MELD_DEV void bc_wait_group(int w) {
  switch (w) {
    case 0: asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); break;
    case 1: asm volatile("cp.async.bulk.wait_group 1;" ::: "memory"); break;
    case 2: asm volatile("cp.async.bulk.wait_group 2;" ::: "memory"); break;
    default: asm volatile("cp.async.bulk.wait_group 3;" ::: "memory"); break;
  }
}

__global__ void __launch_bounds__(32, 1) bc_push_bulk(uint8_t *dst, const uint8_t *src, size_t per_cta,
                                                      uint64_t *flag, int rel_every, int wait_n) {
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ __align__(8) uint64_t bars[NB];
  if (threadIdx.x != 0) return;
  for (int b = 0; b < NB; b++) mbarrier_init_cta(smem_addr(&bars[b]), 1);
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  const uint8_t *s = src + blockIdx.x * per_cta;
  uint8_t *d = dst + blockIdx.x * per_cta;
  const long n = (long)(per_cta / PB);
  for (long i = 0; i < n + LAG; i++) {
    if (i < n) {
      const int b = (int)(i % NB);
      /* Buffer b was last read by the store of piece i - NB; stores issued so far: pieces
       * < i - LAG, so at most NB - 1 - LAG newer groups may stay pending. */
      if (i >= NB) asm volatile("cp.async.bulk.wait_group.read 3;" ::: "memory"); /* NB-1-LAG = 3 */
      mbarrier_arrive_expect_tx_cta(smem_addr(&bars[b]), PB);
      cp_async_bulk_g2s(smem_addr(smem + b * PB), s + i * PB, PB, smem_addr(&bars[b]));
    }
    const long k = i - LAG;
    if (k >= 0) {
      const int b = (int)(k % NB);
      /* Local TMA completion; bounded like every wait (1 s), then the kernel stops. */
      if (meld_mbar_wait_raw(smem_addr(&bars[b]), (uint32_t)((k / NB) & 1), NULL, 1000000000ull) != MELD_WAIT_DONE)
        break;
      cp_async_bulk_s2g(d + k * PB, smem_addr(smem + b * PB), PB);
      cp_async_bulk_commit_group();
      if (rel_every > 0 && (k + 1) % rel_every == 0) {
        bc_wait_group(wait_n);
        st_release_sys_u64(flag + blockIdx.x, (uint64_t)k);
      }
    }
  }
  cp_async_bulk_wait_group0();
}

typedef struct {
  int kind; /* 0 vec4, 1 vec8, 2 bulk */
  int ctas, threads, rel_every, wait_n;
} bc_push_cfg_t;

/* Both ranks push at once (as in a collective); busbw-like GB/s = bytes / time. */
static void s2_push(bc_ctx_t *c, FILE *jf, const bench_env_t *env, const char *nccl_ver, const void *src, size_t bytes) {
  const int peer = 1 - c->rank;
  uint8_t *dst = (uint8_t *)c->comm->workspace.peer[peer];
  uint64_t *flag = (uint64_t *)((uint8_t *)c->comm->pad.peer[peer] + MELD_PAD_OFF_DATA + 4096);
  cudaFuncSetAttribute((const void *)bc_push_bulk, cudaFuncAttributeMaxDynamicSharedMemorySize, NB * PB);
  const bc_push_cfg_t cfgs[] = {
      {0, 16, 384, 0, 0}, {0, 16, 512, 0, 0}, {1, 16, 512, 0, 0}, {1, 16, 640, 0, 0}, {1, 8, 1024, 0, 0},
      {1, 16, 1024, 0, 0}, {1, 32, 512, 0, 0}, {2, 4, 32, 0, 0}, {2, 8, 32, 0, 0}, {2, 16, 32, 0, 0},
      {2, 32, 32, 0, 0}, {2, 16, 32, 16, 0}, {2, 16, 32, 16, 3}, {2, 16, 32, 4, 0}, {2, 16, 32, 4, 3},
  };
  const char *kn[] = {"vec4", "vec8", "bulk"};
  if (c->rank == 0) printf("\npush micro-benchmark, %zu bytes per rank into the peer (GB/s per direction)\n", bytes);
  for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
    const bc_push_cfg_t *f = &cfgs[i];
    size_t per = bytes / (size_t)f->ctas / PB * PB;
    float ms[9];
    for (int sIdx = -2; sIdx < 9; sIdx++) {
      meld_bootstrap_barrier(c->comm->boot);
      cudaEventRecord(c->e0, c->s);
      if (f->kind == 0) bc_push_vec<4><<<f->ctas, f->threads, 0, c->s>>>(dst, (const uint8_t *)src, per);
      else if (f->kind == 1) bc_push_vec<8><<<f->ctas, f->threads, 0, c->s>>>(dst, (const uint8_t *)src, per);
      else bc_push_bulk<<<f->ctas, 32, NB * PB, c->s>>>(dst, (const uint8_t *)src, per, flag, f->rel_every, f->wait_n);
      cudaEventRecord(c->e1, c->s);
      cudaEventSynchronize(c->e1);
      float t = 0;
      cudaEventElapsedTime(&t, c->e0, c->e1);
      if (sIdx >= 0) ms[sIdx] = t;
    }
    cudaError_t e = cudaGetLastError();
    float med = bench_median(ms, 9);
    double gbs = (double)per * f->ctas / (med * 1e-3) / 1e9;
    char vn[64];
    snprintf(vn, sizeof vn, "push_%s_c%d_t%d_rel%d_w%d", kn[f->kind], f->ctas, f->threads, f->rel_every, f->wait_n);
    if (c->rank == 0) {
      printf("  %-36s %9.1f GB/s %s\n", vn, gbs, e == cudaSuccess ? "" : cudaGetErrorString(e));
      fflush(stdout);
    }
    json_line(jf, env, nccl_ver, "push", per * f->ctas, 0, "plain", vn, f->ctas, f->threads, c->P, med, NAN, gbs, 0,
              -1);
  }
  meld_bootstrap_barrier(c->comm->boot);
}

/* ---- --s2: the focused sweep of session 2 (docs/perf-notes.md, Collectives, session 2) ---------- */

static int g_s2 = 0;

/* One point: correctness vs NCCL (same inputs), then meld and NCCL timed back to back
 * (plain; graph too when `graph`), one table row and one JSON line per mode. nccl_ms_io:
 * NCCL's time at this (op, bytes, mode) measured once and reused by the variants (NAN:
 * measure now). bufs: meld send, meld recv, NCCL recv, NCCL send (NULL: meld's). */
static void s2_point(bc_ctx_t *c, FILE *jf, const bench_env_t *env, const char *nccl_ver, int op, size_t bytes,
                     const meld_coll_plan_hint_t *h, const char *vname, int graph, float nccl_ms_io[2], void *bufs[4],
                     double *d_acc, int samples) {
  const int P = c->P;
  size_t count = op == OP_AR ? bytes / 2 : bytes / 2 / (size_t)P;
  if (count == 0) return;
  bc_run_t rm = {0, op, bufs[0], bufs[1], count, h};
  bc_run_t rn = {1, op, bufs[3] ? bufs[3] : bufs[0], bufs[2], count, NULL}; /* bufs[3]: NCCL's own send */
  bc_enqueue(c, &rm);
  bc_reference(c, &rn);
  size_t out_n = op == OP_AG || op == OP_A2A ? count * P : count;
  double err = bc_rel_err(c, (const uint16_t *)bufs[1], (const uint16_t *)bufs[2], out_n, d_acc);
  int batch = bytes <= ((size_t)1 << 20) ? 20 : bytes <= ((size_t)64 << 20) ? 4 : 1;
  for (int g = 0; g <= graph; g++) {
    int gb = g ? 20 : batch;
    float tm = bc_time(c, &rm, g, samples, gb);
    if (!(nccl_ms_io[g] > 0)) nccl_ms_io[g] = bc_time(c, &rn, g, samples, gb);
    float tn = nccl_ms_io[g];
    double f = busbw_factor(op, P);
    double bm = bytes / (tm * 1e-3) / 1e9 * f, bn = bytes / (tn * 1e-3) / 1e9 * f;
    int ctas = h ? h->ctas : 0, thr = h ? h->threads : 0;
    if (c->rank == 0) {
      printf("%-15s %-24s %11zu %6s %10.2f %10.2f %9.1f %9.1f %7.2f %9.2g\n", g_opname[op], vname, bytes,
             g ? "graph" : "plain", tm * 1e3, tn * 1e3, bm, bn, tm / tn, err);
      fflush(stdout);
    }
    GT_CHECK(tm == tm, "%s %s %zu bytes: meld failed", g_opname[op], vname, bytes);
    GT_CHECK(err <= (op == OP_AG || op == OP_A2A ? 0.0 : 1e-2), "%s %s %zu bytes: meld vs %s rel err %.3g",
             g_opname[op], vname, bytes, c->nc ? "NCCL" : "meld's default", err);
    json_line(jf, env, nccl_ver, g_opname[op], bytes, count, g ? "graph" : "plain", vname, ctas, thr, P, tm, tn, bm,
              bn, err);
  }
}

/* The --s2 / --s2bulk tables' header (rank 0). */
static void s2_header(const bc_ctx_t *c) {
  if (c->rank == 0)
    printf("%-15s %-24s %11s %6s %10s %10s %9s %9s %7s %9s\n", "op", "variant", "bytes", "mode", "meld_us",
           "nccl_us", "meld_GBs", "nccl_GBs", "m/nccl", "rel_err");
}

static void s2_run(bc_ctx_t *c, FILE *jf, const bench_env_t *env, const char *nccl_ver, void *bufs[4],
                   double *d_acc) {
  const int samples = 9;
  s2_header(c);
  /* 1. Latency: the default plans, 4 KB .. 1 MB, plain and graph; at 4 and 16 KB also LL
   * geometries the run-1 grid did not cover (small CTAs, 1 vs several CTAs at 4 KB). */
  for (int op = 0; op < 4; op++)
    for (size_t bytes = 4096; bytes <= ((size_t)1 << 20); bytes *= 4) {
      float nms[2] = {NAN, NAN};
      s2_point(c, jf, env, nccl_ver, op, bytes, NULL, "auto", 1, nms, bufs, d_acc, samples);
      if (bytes >= ((size_t)256 << 10)) { /* more LL CTAs than the plan's 16 / 32 */
        meld_coll_plan_hint_t h;
        memset(&h, 0, sizeof h);
        h.proto = MELD_PROTO_LL, h.ctas = 64, h.threads = 512;
        s2_point(c, jf, env, nccl_ver, op, bytes, &h, "ll_c64_t512", 1, nms, bufs, d_acc, samples);
      }
      if (bytes > 16384) continue;
      const int lc[] = {1, 4, 16, 16, 32}, lt[] = {256, 256, 128, 256, 256};
      for (int i = 0; i < 5; i++) {
        meld_coll_plan_hint_t h;
        memset(&h, 0, sizeof h);
        h.proto = MELD_PROTO_LL, h.ctas = lc[i], h.threads = lt[i];
        char vn[48];
        snprintf(vn, sizeof vn, "ll_c%d_t%d", lc[i], lt[i]);
        s2_point(c, jf, env, nccl_ver, op, bytes, &h, vn, 1, nms, bufs, d_acc, samples);
      }
    }
  /* 2. Bandwidth: 64 MB, 256 MB, 1 GB: the default; session 1's loop depth (unroll 4) on the
   * default geometry; one-shot all-reduce (the previous P = 2 default); more CTAs; RING with
   * 12 of 18 data warps draining and 1 MB chunks. */
  for (int op = 0; op < 4; op++)
    for (size_t bytes = (size_t)64 << 20; bytes <= g_max_bytes; bytes *= 4) {
      float nms[2] = {NAN, NAN};
      s2_point(c, jf, env, nccl_ver, op, bytes, NULL, "auto", 0, nms, bufs, d_acc, samples);
      meld_coll_plan_hint_t h;
      memset(&h, 0, sizeof h);
      h.unroll = 4;
      s2_point(c, jf, env, nccl_ver, op, bytes, &h, "auto_u4", 0, nms, bufs, d_acc, samples);
      if (op == OP_AR) {
        memset(&h, 0, sizeof h);
        h.ar_algo = MELD_AR_ONE_SHOT;
        s2_point(c, jf, env, nccl_ver, op, bytes, &h, "one_shot", 0, nms, bufs, d_acc, samples);
      }
      const int rc[] = {48, 64};
      for (int i = 0; i < 2; i++) {
        memset(&h, 0, sizeof h);
        h.ctas = rc[i];
        char vn[64];
        snprintf(vn, sizeof vn, "rounds_c%d", rc[i]);
        s2_point(c, jf, env, nccl_ver, op, bytes, &h, vn, 0, nms, bufs, d_acc, samples);
      }
      if (op == OP_AR && bytes > ((size_t)128 << 20)) continue; /* RING is one-shot only */
      const int gc[] = {16, 32, 48};
      for (int i = 0; i < 3; i++) {
        memset(&h, 0, sizeof h);
        h.proto = MELD_PROTO_RING, h.ctas = gc[i], h.threads = 640, h.cons_warps = 12, h.chunk_bytes = (size_t)1 << 20;
        h.slots = 4;
        char vn[64];
        snprintf(vn, sizeof vn, "ring_w12_k1M_c%d", gc[i]);
        s2_point(c, jf, env, nccl_ver, op, bytes, &h, vn, 0, nms, bufs, d_acc, samples);
      }
    }
  /* 3. GB/s vs CTAs at 256 MB, all four ops: ROUNDS (the default engine, its default chunk)
   * and RING (640 thr, 12 drain warps, 1 MB chunks). */
  for (int op = 0; op < 4; op++) {
    float nms[2] = {NAN, NAN};
    const int cc[] = {4, 8, 16, 24, 32, 48, 64};
    for (int e = 0; e < 2; e++)
      for (int i = 0; i < 7; i++) {
        if (e && cc[i] == 64) continue;
        meld_coll_plan_hint_t h;
        memset(&h, 0, sizeof h);
        h.ctas = cc[i];
        if (op == OP_AR) h.ar_algo = MELD_AR_ONE_SHOT; /* the RING's algorithm, for a like curve */
        if (e) h.proto = MELD_PROTO_RING, h.threads = 640, h.cons_warps = 12, h.chunk_bytes = (size_t)1 << 20, h.slots = 4;
        char vn[48];
        snprintf(vn, sizeof vn, "ctas_%s_c%d", e ? "ring" : "rounds", cc[i]);
        s2_point(c, jf, env, nccl_ver, op, (size_t)256 << 20, &h, vn, 0, nms, bufs, d_acc, samples);
      }
  }
}

/* ---- --zc: the ZC engine on symmetric buffers (meld_mem_alloc) --------------------------------
 * meld's send and recv from meld_mem_alloc (NCCL: ordinary cudaMalloc buffers with the same
 * input, not registered with NCCL). Per op and size: the default ("auto": LL up to 1 MB per
 * peer, ZC above), ZC forced at 4..32 CTAs, and the staged ROUNDS engine on the same buffers;
 * all-gather also in place (send = own block of recv); from 1 MB all-gather and all-to-all also
 * by the CE engine (copy engines pull every peer's block: rows "ce", "ce_inplace"). */
static int g_zc = 0;
static int g_trace = 0; /* --trace: 4 back-to-back default calls per op, nothing timed */
static void zc_run(bc_ctx_t *c, FILE *jf, const bench_env_t *env, const char *nccl_ver, void *sym_send,
                   void *sym_recv, void *d_send, void *d_n, double *d_acc) {
  const int samples = 9;
  s2_header(c);
  void *bufs[4] = {sym_send, sym_recv, d_n, d_send};
  if (g_trace) { /* --trace: calls for MELD_TRACE's timeline (written at comm destroy) */
    for (int op = 0; op < 4; op++) {
      if (g_only >= 0 && g_only < 4 && op != g_only) continue;
      const size_t count = op == OP_AR ? g_max_bytes / 2 : g_max_bytes / 2 / (size_t)c->P;
      /* One rank: the ZC kernel forced (the default there is a copy, no kernel), 16 calls:
       * its fixed path (entry / move / exit) in the trace, warm. */
      meld_coll_plan_hint_t hz;
      memset(&hz, 0, sizeof hz);
      hz.proto = MELD_PROTO_ZC;
      bc_run_t rm = {0, op, sym_send, sym_recv, count, c->P == 1 ? &hz : NULL};
      const int calls = c->P == 1 ? 16 : 4;
      meld_bootstrap_barrier(c->comm->boot);
      int ok = 1;
      for (int i = 0; i < calls; i++) ok &= bc_enqueue(c, &rm);
      GT_CUDA(cudaStreamSynchronize(c->s));
      GT_CHECK(ok, "trace: %s %zu bytes failed", g_opname[op], g_max_bytes);
      if (c->rank == 0) printf("trace: %d %s calls of %zu bytes\n", calls, g_opname[op], g_max_bytes);
    }
    return;
  }
  for (int op = 0; op < 4; op++)
    for (size_t bytes = g_min_bytes; bytes <= g_max_bytes; bytes *= 4) {
      if (g_only >= 0 && g_only < 4 && op != g_only) continue;
      float nms[2] = {NAN, NAN};
      const int graph = bytes <= ((size_t)16 << 20);
      if (g_zc == 2) { /* --zc-reg: the buffers are ordinary memory registered (meld_mem_register) */
        meld_coll_plan_hint_t h;
        memset(&h, 0, sizeof h);
        h.proto = MELD_PROTO_ZC, h.ctas = 16;
        /* each without and with programmatic dependent launch (MELD_COLL_PDL=0 / 1: back-to-back
         * calls overlap their launches; session 10 asks whether it pays at every size) */
        for (int pdl = 0; pdl < 2; pdl++) {
          setenv("MELD_COLL_PDL", pdl ? "1" : "0", 1);
          s2_point(c, jf, env, nccl_ver, op, bytes, NULL, pdl ? "reg_auto_pdl" : "reg_auto", graph, nms, bufs, d_acc,
                   samples);
          if (bytes >= ((size_t)1 << 20))
            s2_point(c, jf, env, nccl_ver, op, bytes, &h, pdl ? "reg_zc_c16_pdl" : "reg_zc_c16", 0, nms, bufs, d_acc,
                     samples);
          unsetenv("MELD_COLL_PDL");
        }
        continue;
      }
      s2_point(c, jf, env, nccl_ver, op, bytes, NULL, "auto", graph, nms, bufs, d_acc, samples);
      if (bytes <= ((size_t)4 << 20)) { /* the default until session 20: no programmatic dependent
                                           launch, the generic LL instantiation (rows "auto" of
                                           sessions <= 20; their "auto_pdl" = MELD_COLL_PDL=1) */
        setenv("MELD_COLL_PDL", "0", 1);
        setenv("MELD_COLL_LL_LEAN", "0", 1);
        s2_point(c, jf, env, nccl_ver, op, bytes, NULL, "auto_s20", graph, nms, bufs, d_acc, samples);
        unsetenv("MELD_COLL_PDL");
        unsetenv("MELD_COLL_LL_LEAN");
      }
      if (c->P == 1) { /* one rank: the default plan's launch / entry / exit path, with and without PDL */
        meld_coll_plan_hint_t hl;
        memset(&hl, 0, sizeof hl);
        hl.proto = MELD_PROTO_LL; /* (LL cannot run at one rank: the plan falls back to ROUNDS, coll_kernel) */
        s2_point(c, jf, env, nccl_ver, op, bytes, &hl, "rounds_p1", graph, nms, bufs, d_acc, samples);
        hl.proto = MELD_PROTO_ZC; /* the ZC kernel (one CTA here): its fixed path */
        s2_point(c, jf, env, nccl_ver, op, bytes, &hl, "zc", graph, nms, bufs, d_acc, samples);
        /* The LL kernel in loopback (MELD_COLL_LOOPBACK: rank 0 of 2, its virtual peer's lines
         * its own): the whole LL path but NVLink. Timed only (results are 2-rank ones with equal
         * inputs: test_coll checks them); the per-rank blocks are those of 2 ranks, so the buffers fit. */
        if (op != OP_A2A) {
          setenv("MELD_COLL_LOOPBACK", "1", 1);
          for (int pdl = 0; pdl < 4; pdl++) { /* 0 neither PDL nor the lean LL instantiation
                                                 (MELD_COLL_LL_LEAN), 1 PDL, 2 lean, 3 both (the default) */
            setenv("MELD_COLL_PDL", pdl & 1 ? "1" : "0", 1);
            setenv("MELD_COLL_LL_LEAN", pdl & 2 ? "1" : "0", 1);
            const char *vn = pdl == 0 ? "ll_loop" : pdl == 1 ? "ll_loop_pdl" : pdl == 2 ? "ll_loop_lean" : "ll_loop_lean_pdl";
            const size_t count = op == OP_AR ? bytes / 2 : bytes / 2 / 2; /* (2 ranks: per-rank blocks) */
            bc_run_t rl = {0, op, bufs[0], bufs[1], count, NULL};
            for (int g = 0; g < 2; g++) {
              const float t = bc_time(c, &rl, g, samples, 20);
              printf("%-15s %-24s %11zu %6s %10.2f\n", g_opname[op], vn, bytes, g ? "graph" : "plain", t * 1e3);
              json_line(jf, env, nccl_ver, g_opname[op], bytes, count, g ? "graph" : "plain", vn, 0, 0, 2, t, NAN, 0, 0, -1);
            }
            unsetenv("MELD_COLL_PDL");
            unsetenv("MELD_COLL_LL_LEAN");
          }
          unsetenv("MELD_COLL_LOOPBACK");
        }
        if (op == 0 && bytes == g_min_bytes) /* the floor: an empty kernel, plain and cooperative launch */
          for (int f = 0; f < 2; f++)
            for (int g = 0; g < 2; g++) {
              bc_run_t re = {2, f, NULL, NULL, 0, NULL};
              const float t = bc_time(c, &re, g, samples, 20);
              printf("%-15s %-24s %11s %6s %10.2f\n", "floor", f ? "empty_coop" : "empty", "-", g ? "graph" : "plain", t * 1e3);
            }
        continue;
      }
      meld_coll_plan_hint_t h;
      const int cc[] = {0, 8, 16, 24, 32};
      for (int i = 0; i < 5; i++) {
        if (bytes < ((size_t)1 << 20) && i > 0) continue; /* small: the default CTA count only */
        if (bytes > ((size_t)1 << 20) && bytes < ((size_t)64 << 20) && (i == 3)) continue;
        memset(&h, 0, sizeof h);
        h.proto = MELD_PROTO_ZC, h.ctas = cc[i];
        char vn[48];
        snprintf(vn, sizeof vn, cc[i] ? "zc_c%d" : "zc", cc[i]);
        s2_point(c, jf, env, nccl_ver, op, bytes, &h, vn, graph && i == 0, nms, bufs, d_acc, samples);
      }
      if (bytes >= ((size_t)1 << 20)) { /* shallower loads (unroll 4) at the default's CTA cap */
        memset(&h, 0, sizeof h);
        h.proto = MELD_PROTO_ZC, h.ctas = op == OP_RS || op == OP_AR ? 32 : 16, h.unroll = 4;
        s2_point(c, jf, env, nccl_ver, op, bytes, &h, "zc_u4", 0, nms, bufs, d_acc, samples);
      }
      if ((op == OP_AG || op == OP_A2A) && bytes >= ((size_t)1 << 20)) { /* the CE engine: copy engines pull */
        memset(&h, 0, sizeof h);
        h.proto = MELD_PROTO_CE;
        s2_point(c, jf, env, nccl_ver, op, bytes, &h, "ce", graph, nms, bufs, d_acc, samples);
      }
      if (bytes >= ((size_t)64 << 20)) { /* the staged engine on the same buffers */
        memset(&h, 0, sizeof h);
        h.proto = MELD_PROTO_ROUNDS;
        s2_point(c, jf, env, nccl_ver, op, bytes, &h, "staged_rounds", 0, nms, bufs, d_acc, samples);
      }
      if (op == OP_AG && bytes >= ((size_t)1 << 20)) { /* in place: send = own block of recv */
        const size_t count = bytes / 2 / (size_t)c->P;
        void *ib[4] = {(uint8_t *)sym_recv + (size_t)c->rank * count * 2, sym_recv, d_n, d_send};
        GT_CUDA(cudaMemcpy(ib[0], d_send, count * 2, cudaMemcpyDeviceToDevice));
        s2_point(c, jf, env, nccl_ver, op, bytes, NULL, "auto_inplace", 0, nms, ib, d_acc, samples);
        memset(&h, 0, sizeof h);
        h.proto = MELD_PROTO_ZC, h.ctas = 8;
        s2_point(c, jf, env, nccl_ver, op, bytes, &h, "zc_c8_inplace", 0, nms, ib, d_acc, samples);
        memset(&h, 0, sizeof h);
        h.proto = MELD_PROTO_CE;
        s2_point(c, jf, env, nccl_ver, op, bytes, &h, "ce_inplace", 0, nms, ib, d_acc, samples);
      }
    }
}

/* --s2bulk: the RING engine with the TMA bulk push (a separate process in the device
 * script: a failure of the new path must not abort the comm of the main sweep). */
static int g_s2bulk = 0;
static void s2_bulk_run(bc_ctx_t *c, FILE *jf, const bench_env_t *env, const char *nccl_ver, void *bufs[4],
                        double *d_acc) {
  const int samples = 9;
  s2_header(c);
  /* bulk 1 (TMA push) and 2 (+ TMA drain of copies: AG, A2A), 1 MB chunks, 4 slots. */
  for (int op = 0; op < 4; op++)
    for (size_t bytes = (size_t)256 << 20; bytes <= g_max_bytes; bytes *= 4) {
      float nms[2] = {NAN, NAN};
      const int bc[] = {8, 16, 32};
      for (int b = 1; b <= 2; b++)
        for (int i = 0; i < 3; i++)
          for (int t = 0; t < 2; t++) {
            if (b == 2 && (op == OP_RS || op == OP_AR)) continue; /* the drain of sums is by threads */
            if (b == 1 && t == 0) continue;
            meld_coll_plan_hint_t h;
            memset(&h, 0, sizeof h);
            h.proto = MELD_PROTO_RING, h.bulk = b, h.ctas = bc[i], h.threads = t ? 640 : 128;
            h.chunk_bytes = (size_t)1 << 20, h.slots = 4;
            if (op == OP_AR) h.ar_algo = MELD_AR_ONE_SHOT;
            char vn[64];
            snprintf(vn, sizeof vn, "bulk%d_c%d_t%d", b, bc[i], h.threads);
            s2_point(c, jf, env, nccl_ver, op, bytes, &h, vn, 0, nms, bufs, d_acc, samples);
          }
    }
  for (int op = 0; op < 4; op += 3) { /* AG, A2A: GB/s vs CTAs with the TMA drain */
    float nms[2] = {NAN, NAN};
    const int cc[] = {4, 8, 12, 16, 24, 32, 48};
    for (int i = 0; i < 7; i++) {
      meld_coll_plan_hint_t h;
      memset(&h, 0, sizeof h);
      h.proto = MELD_PROTO_RING, h.bulk = 2, h.ctas = cc[i], h.threads = 128, h.slots = 4, h.chunk_bytes = (size_t)1 << 20;
      char vn[48];
      snprintf(vn, sizeof vn, "ctas_bulk2_c%d", cc[i]);
      s2_point(c, jf, env, nccl_ver, op, (size_t)256 << 20, &h, vn, 0, nms, bufs, d_acc, samples);
    }
  }
}

static void rank_main(int rank, int P) {
  bc_ctx_t c;
  memset(&c, 0, sizeof c);
  c.rank = rank;
  c.P = P;
  meld_config_t cfg = MELD_CONFIG_INIT;
  cfg.workspace_bytes = (size_t)256 << 20; /* room for the tuning grid's largest rings */
  GT_MELD(meld_comm_init_env(&c.comm, &cfg));
  if (!c.comm) return;
  if (nb_init(c.comm, &c.nc) != ncclSuccess) { /* e.g. ranks sharing a GPU (MELD_SHARE_GPU) */
    c.nc = NULL;
    if (rank == 0) printf("NCCL not available: its columns read NaN; meld's rows are measured and checked against meld's default plan\n");
  }
  bench_env_t env;
  bench_env(&env, c.comm->device);
  char nccl_ver[32];
  nb_version(nccl_ver, sizeof nccl_ver);
  GT_CUDA(cudaStreamCreateWithFlags(&c.s, cudaStreamNonBlocking));
  cudaEventCreate(&c.e0);
  cudaEventCreate(&c.e1);
  const size_t maxb = g_max_bytes;
  uint16_t *d_send = NULL, *d_m = NULL, *d_n = NULL;
  double *d_acc = NULL;
  GT_CUDA(cudaMalloc(&d_send, maxb));
  GT_CUDA(cudaMalloc(&d_m, maxb));
  GT_CUDA(cudaMalloc(&d_n, maxb));
  GT_CUDA(cudaMalloc(&d_acc, 2 * sizeof(double)));
  bc_fill<<<264, 512, 0, c.s>>>(d_send, maxb / 2, (uint32_t)rank + 1);
  GT_CUDA(cudaStreamSynchronize(c.s));
  FILE *jf = (rank == 0 && g_json) ? fopen(g_json, "a") : NULL;
  if (rank == 0 && g_json && !jf) printf("cannot open %s\n", g_json);
  const int samples = g_quick ? 7 : 20;
  if (g_zc) {
    void *ss = NULL, *sr = NULL;
    if (g_zc == 2) { /* ordinary cudaMalloc buffers, registered */
      GT_CUDA(cudaMalloc(&ss, maxb));
      GT_CUDA(cudaMalloc(&sr, maxb));
      int oks[64] = {0}, all_ok = 1; /* every rank registers, or none (a collective) */
      oks[rank] = ss && sr;
      if (P > 64 || meld_bootstrap_allgather(c.comm->boot, oks, sizeof oks[0]) != MELD_OK) all_ok = 0;
      for (int q = 0; q < P && q < 64; q++) all_ok &= oks[q];
      const meld_result_t r1 = all_ok ? meld_mem_register(c.comm, ss, maxb) : MELD_ERR_OUT_OF_MEMORY;
      const meld_result_t r2 = r1 == MELD_OK ? meld_mem_register(c.comm, sr, maxb) : r1;
      if (r2 != MELD_OK) {
        printf("[rank %d] meld_mem_register: %s\n", rank, meld_last_error());
        gt_failed++;
        if (r1 == MELD_OK) meld_mem_deregister(c.comm, ss);
        cudaFree(ss), cudaFree(sr);
        ss = sr = NULL;
      }
    } else {
      GT_MELD(meld_mem_alloc(c.comm, maxb, &ss));
      GT_MELD(meld_mem_alloc(c.comm, maxb, &sr));
    }
    if (ss && sr) { /* (one rank: only the default plan, with and without PDL) */
      GT_CUDA(cudaMemcpy(ss, d_send, maxb, cudaMemcpyDeviceToDevice)); /* the same input as NCCL's */
      zc_run(&c, jf, &env, nccl_ver, ss, sr, d_send, d_n, d_acc);
    }
    meld_bootstrap_barrier(c.comm->boot);
    if (g_zc == 2 && ss) {
      GT_MELD(meld_mem_deregister(c.comm, ss));
      GT_MELD(meld_mem_deregister(c.comm, sr));
      cudaFree(ss), cudaFree(sr);
    } else if (g_zc == 1) {
      GT_MELD(meld_mem_free(c.comm, ss));
      GT_MELD(meld_mem_free(c.comm, sr));
    }
    g_point = 1, g_only = 99;
  } else if (g_s2bulk) {
    void *bufs[4] = {d_send, d_m, d_n, NULL};
    if (P > 1) s2_bulk_run(&c, jf, &env, nccl_ver, bufs, d_acc);
    g_point = 1, g_only = 99;
  } else if (g_s2) {
    void *bufs[4] = {d_send, d_m, d_n, NULL};
    if (P > 1) {
      if (rank == 0) printf("launch floor (us per call)          plain      graph\n");
      const char *fname[5] = {"empty_plain", "empty_coop", "handshake_1cta", "handshake_16cta", "flag_exchange_raw"};
      for (int k = 0; k < (P == 2 ? 5 : 4); k++) {
        bc_run_t rf = {2, k, NULL, NULL, 0, NULL};
        float tp = bc_time(&c, &rf, 0, 9, 20), tg = bc_time(&c, &rf, 1, 9, 20);
        if (rank == 0) printf("  %-30s %8.2f   %8.2f\n", fname[k], tp * 1e3, tg * 1e3);
        json_line(jf, &env, nccl_ver, "launch_floor", 0, 0, "plain", fname[k], k >= 3 ? 16 : 1, 32, P, tp, NAN, 0, 0, -1);
        json_line(jf, &env, nccl_ver, "launch_floor", 0, 0, "graph", fname[k], k >= 3 ? 16 : 1, 32, P, tg, NAN, 0, 0, -1);
      }
      s2_run(&c, jf, &env, nccl_ver, bufs, d_acc);
      if (P == 2 && getenv("BENCH_PUSH")) s2_push(&c, jf, &env, nccl_ver, d_send, (size_t)128 << 20);
    }
    g_point = 1, g_only = 99; /* nothing else */
  }
  if (rank == 0)
    printf("%-15s %-9s %11s %6s %10s %10s %9s %9s %7s %9s\n", "op", "variant", "bytes", "mode", "meld_us",
           "nccl_us", "meld_GBs", "nccl_GBs", "ratio", "rel_err");
  /* The launch floor (us per call; "bytes" 0). */
  if (P > 1 && !g_point) {
    const char *fname[5] = {"empty_plain", "empty_coop", "handshake_1cta", "handshake_16cta", "flag_exchange_raw"};
    if (rank == 0) printf("launch floor (us per call)          plain      graph\n");
    for (int k = 0; k < (P == 2 ? 5 : 4); k++) {
      bc_run_t rf = {2, k, NULL, NULL, 0, NULL};
      float tp = bc_time(&c, &rf, 0, samples, 20), tg = bc_time(&c, &rf, 1, samples, 20);
      if (rank == 0) printf("  %-30s %8.2f   %8.2f\n", fname[k], tp * 1e3, tg * 1e3);
      json_line(jf, &env, nccl_ver, "launch_floor", 0, 0, "plain", fname[k], k >= 3 ? 16 : 1, 32, P, tp, NAN, 0, 0, -1);
      json_line(jf, &env, nccl_ver, "launch_floor", 0, 0, "graph", fname[k], k >= 3 ? 16 : 1, 32, P, tg, NAN, 0, 0, -1);
    }
  }
  meld_coll_plan_hint_t hints[4];
  memset(hints, 0, sizeof hints);
  hints[1].ar_algo = MELD_AR_TWO_SHOT;
  hints[2].proto = MELD_PROTO_RING;
  hints[3].proto = MELD_PROTO_LL;
  const char *vnames[4] = {"auto", "two_shot", "ring", "ll"};
  for (int op = 0; op < 4; op++) {
    if (g_only >= 0 && op != g_only) continue;
    for (int variant = 0; variant < 4; variant++) {
      if (g_point && variant != 0) continue;
      if (variant == 1 && (op != OP_AR || P < 2)) continue;
      if (variant >= 2 && P < 2) continue;
      for (size_t bytes = g_min_bytes; bytes <= maxb; bytes *= 4) {
        size_t count = op == OP_AR ? bytes / 2 : bytes / 2 / (size_t)P;
        if (count == 0) continue;
        /* Forced engines only where they say something: ring up to 4 MB, LL from 1 MB up
         * to what its buffers hold, two-shot up to 64 MB. */
        if (variant == 1 && bytes > ((size_t)64 << 20)) continue;
        if (variant == 2 && bytes > ((size_t)4 << 20)) continue;
        if (variant == 3 && (bytes < ((size_t)1 << 20) || count * 2 > meld_coll_ll_capacity(P))) continue;
        bc_run_t rm = {0, op, d_send, d_m, count, variant ? &hints[variant] : NULL};
        bc_run_t rn = {1, op, d_send, d_n, count, NULL};
        /* Correctness in the same run: meld vs NCCL on the same inputs. */
        bc_enqueue(&c, &rm);
        bc_reference(&c, &rn);
        size_t out_n = op == OP_AG || op == OP_A2A ? count * P : count;
        double err = bc_rel_err(&c, d_m, d_n, out_n, d_acc);
        int batch = bytes <= ((size_t)1 << 20) ? 20 : bytes <= ((size_t)64 << 20) ? 4 : 1;
        for (int graph = 0; graph < 2; graph++) {
          if (graph && bytes > ((size_t)16 << 20)) break;
          int gbatch = graph ? 20 : batch;
          float tm = bc_time(&c, &rm, graph, samples, gbatch);
          float tn = bc_time(&c, &rn, graph, samples, gbatch);
          double f = busbw_factor(op, P);
          double bm = bytes / (tm * 1e-3) / 1e9 * f, bn = bytes / (tn * 1e-3) / 1e9 * f;
          const char *vname = vnames[variant];
          if (rank == 0) {
            printf("%-15s %-9s %11zu %6s %10.2f %10.2f %9.1f %9.1f %7.2f %9.2g\n", g_opname[op], vname, bytes,
                   graph ? "graph" : "plain", tm * 1e3, tn * 1e3, bm, bn, tn / tm, err);
            fflush(stdout);
          }
          GT_CHECK(tm == tm, "%s %zu bytes: meld failed", g_opname[op], bytes);
          GT_CHECK(err <= (op == OP_AG || op == OP_A2A ? 0.0 : 1e-2), "%s %zu bytes: meld vs %s rel err %.3g",
                   g_opname[op], bytes, c.nc ? "NCCL" : "meld's default", err);
          json_line(jf, &env, nccl_ver, g_opname[op], bytes, count, graph ? "graph" : "plain", vname, 0, 0, P,
                    tm, tn, bm, bn, err);
        }
      }
    }
  }
  if (!g_point) { /* the CTA curve and tuning grid: only for the full run */
  /* GB/s vs comm CTAs (384 and 640 threads: RING engine), all-gather 256 MB. */
  size_t ag_bytes = (size_t)256 << 20;
  if (ag_bytes > maxb) ag_bytes = maxb;
  size_t count = ag_bytes / 2 / (size_t)P;
  const int ctas[] = {1, 2, 4, 8, 12, 16, 24, 32, c.comm->sm_count};
  const int nct = (int)(sizeof ctas / sizeof ctas[0]);
  bc_run_t rn = {1, OP_AG, d_send, d_n, count, NULL};
  float tn = bc_time(&c, &rn, 0, samples, 1);
  for (int ti = 0; ti < 2; ti++) {
    const int thr = ti ? 640 : 384;
    if (rank == 0)
      printf("\nall_gather %zu bytes: GB/s (busbw) vs comm CTAs of %d threads\n%6s %10s %9s\n", ag_bytes, thr, "ctas",
             "meld_us", "busbw");
    for (int i = 0; i < nct; i++) {
      meld_coll_plan_hint_t h;
      memset(&h, 0, sizeof h);
      h.ctas = ctas[i];
      h.threads = thr;
      bc_run_t rm = {0, OP_AG, d_send, d_m, count, &h};
      float tm = bc_time(&c, &rm, 0, samples, 1);
      double f = busbw_factor(OP_AG, P);
      double bm = ag_bytes / (tm * 1e-3) / 1e9 * f, bn = ag_bytes / (tn * 1e-3) / 1e9 * f;
      if (rank == 0) {
        printf("%6d %10.1f %9.1f   (NCCL %.1f)\n", ctas[i], tm * 1e3, bm, bn);
        fflush(stdout);
      }
      json_line(jf, &env, nccl_ver, "all_gather_ctas", ag_bytes, count, "plain", "ctas", ctas[i], thr, P, tm, tn, bm,
                bn, -1);
    }
  }
  /* Tuning grid at 256 MB (RING engine): every op x CTAs x threads x chunk x slots. */
  if (P > 1) {
    if (rank == 0) printf("\ntuning grid, %zu bytes (busbw GB/s)\n", ag_bytes);
    const int tc[] = {8, 16}, tt[] = {384, 640}, ts[] = {2, 4};
    const size_t tk[] = {(size_t)64 << 10, (size_t)256 << 10, (size_t)1 << 20};
    for (int op = 0; op < 4; op++) {
      size_t cnt = op == OP_AR ? ag_bytes / 2 : ag_bytes / 2 / (size_t)P;
      for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++)
          for (int k = 0; k < 3; k++)
            for (int sl = 0; sl < 2; sl++) {
              meld_coll_plan_hint_t h;
              memset(&h, 0, sizeof h);
              h.ctas = tc[a], h.threads = tt[b], h.chunk_bytes = tk[k], h.slots = ts[sl];
              h.proto = MELD_PROTO_RING;
              bc_run_t rm = {0, op, d_send, d_m, cnt, &h};
              float tm = bc_time(&c, &rm, 0, samples, 1);
              double bm = ag_bytes / (tm * 1e-3) / 1e9 * busbw_factor(op, P);
              char vn[64];
              snprintf(vn, sizeof vn, "c%d_t%d_k%zuK_s%d", tc[a], tt[b], tk[k] >> 10, ts[sl]);
              if (rank == 0) {
                printf("  %-15s %-22s %9.1f\n", g_opname[op], vn, bm);
                fflush(stdout);
              }
              json_line(jf, &env, nccl_ver, g_opname[op], ag_bytes, cnt, "plain", vn, tc[a], tt[b], P, tm, NAN, bm, 0,
                        -1);
            }
    }
  }
  } /* !g_point */
  if (jf) fclose(jf);
  meld_bootstrap_barrier(c.comm->boot);
  if (c.nc) ncclCommDestroy(c.nc);
  cudaFree(d_send);
  cudaFree(d_m);
  cudaFree(d_n);
  cudaFree(d_acc);
  GT_MELD(meld_comm_destroy(c.comm));
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) g_quick = 1;
    else if (!strcmp(argv[i], "--s2")) g_s2 = 1;
    else if (!strcmp(argv[i], "--s2bulk")) g_s2bulk = 1;
    else if (!strcmp(argv[i], "--zc")) g_zc = 1;
    else if (!strcmp(argv[i], "--zc-reg")) g_zc = 2;
    else if (!strcmp(argv[i], "--trace")) g_trace = 1;
    else if (!strcmp(argv[i], "--json") && i + 1 < argc) g_json = argv[++i];
    else if (!strcmp(argv[i], "--max-bytes") && i + 1 < argc) g_max_bytes = strtoull(argv[++i], NULL, 0);
    else if (!strcmp(argv[i], "--bytes") && i + 1 < argc) {
      g_min_bytes = g_max_bytes = strtoull(argv[++i], NULL, 0);
      g_point = 1;
    } else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
      const char *o = argv[++i];
      for (int k = 0; k < 4; k++)
        if (!strcmp(o, g_opname[k])) g_only = k;
      if (g_only < 0) {
        fprintf(stderr, "unknown op %s (all_gather, reduce_scatter, all_reduce, all_to_all)\n", o);
        return 2;
      }
      g_point = 1;
    }
    else {
      fprintf(stderr, "usage: %s [--quick] [--s2] [--s2bulk] [--zc | --zc-reg [--trace]] [--json FILE] [--max-bytes N] [--bytes N] [--only OP]\n", argv[0]);
      return 2;
    }
  }
  if (g_quick && g_max_bytes > ((size_t)256 << 20)) g_max_bytes = (size_t)256 << 20;
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  int ndev = gt_device_count();
  if (ndev < 1) {
    printf("bench_coll: no GPU: nothing to measure\n");
    return 0;
  }
  int n = ndev > 8 ? 8 : ndev;
  printf("bench_coll: %d rank(s), bf16, sizes 4 KB .. %zu MB (nccl-tests size and busbw)%s\n", n, g_max_bytes >> 20,
         g_quick ? ", quick" : "");
  double t0 = gt_now_s();
  int failed = gt_spawn(n, rank_main);
  printf("bench_coll: %.1f s\n", gt_now_s() - t0);
  return failed ? 1 : 0;
}
