/* GPU tests of the device protocol's happy path (src/device/signal.cuh, launch.cuh):
 *   1. ping-pong latency between 2 ranks over NVLink (median of 10,000 round trips);
 *   2. 10,000 back-to-back signalled calls with no host sync: ring-of-slots credits, the
 *      argument handshake (shapes change every call), the work queue, epochs from device
 *      memory; every chunk and item verified on the device, every call;
 *   3. the same kernel captured in a CUDA graph and replayed 1,000 times (fixed kernel
 *      arguments: data depends on the device-side epoch only);
 *   4. a litmus stress test of the async-proxy chain: cp.async.bulk global<-shared into the
 *      peer's workspace -> wait_group 0 -> bar.sync -> st.release.sys; the consumer acquires,
 *      fence.proxy.async.global, reads with cp.async.bulk shared<-global + mbarrier: never
 *      stale over 5,120 chunks per direction;
 *   5. a trace of the signalling kernel written to JSON (and PNG by tools/trace_png.py when
 *      matplotlib is there).
 * With one GPU everything but the ping-pong runs on one rank (it signals itself).
 * Trace files go to $MELD_TEST_OUT (default build/tests/gpu). */
#include "gpu_test.h"

#include "comm.h"
#include "device/launch.cuh"
#include "proto.h"
#include "trace.h"

static int g_ndev = 0;

static meld_config_t test_config(void) {
  meld_config_t cfg = MELD_CONFIG_INIT;
  cfg.bootstrap_timeout_ms = 30000;
  cfg.timeout_ms = 3000;
  cfg.workspace_bytes = (size_t)32 << 20;
  return cfg;
}

static const char *out_dir(void) {
  const char *d = getenv("MELD_TEST_OUT");
  return d && *d ? d : "build/tests/gpu";
}

/* ---- 1. ping-pong --------------------------------------------------------------------------- */

__global__ void pingpong_kernel(const __grid_constant__ meld_proto_dev_t proto, uint32_t iters, uint64_t *lat,
                                uint32_t *status) {
  meld_ctx_t ctx;
  if (meld_call_begin(&ctx, &proto, MELD_OP_TEST_PINGPONG, iters, 1) && threadIdx.x == 0) {
    const int peer = 1 - proto.rank;
    const uint32_t in = meld_signal_index(peer, proto.nranks, 0, 0, 1);      /* peer -> me */
    const uint32_t out = meld_signal_index(proto.rank, proto.nranks, 0, 0, 1); /* me -> peer */
    for (uint32_t i = 0; i < iters; i++) {
      const uint64_t s = meld_stamp(ctx.epoch, i + 1);
      if (proto.rank == 0) {
        const uint64_t t0 = globaltimer_ns();
        meld_signal_put(&ctx, peer, out, s);
        if (!meld_wait_signal(&ctx, in, s, peer, "pong")) break;
        lat[i] = globaltimer_ns() - t0;
      } else {
        if (!meld_wait_signal(&ctx, in, s, peer, "ping")) break;
        meld_signal_put(&ctx, peer, out, s);
      }
    }
    *status = ctx.failed ? 1u : 2u;
  }
  meld_call_end(&ctx);
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static void pingpong(meld_comm_t comm) {
  /* On a shared GPU (MELD_SHARE_GPU) a turn is a time slice (~2.2 ms): fewer round trips. */
  const uint32_t iters = gt_share_gpu() ? 200 : 10000;
  const uint64_t plausible_ns = gt_share_gpu() ? 50000000ull : 100000ull;
  uint64_t *lat = NULL;
  uint32_t *status = NULL;
  GT_CUDA(cudaMalloc(&lat, iters * sizeof *lat));
  GT_CUDA(cudaMalloc(&status, sizeof *status));
  GT_CUDA(cudaMemset(status, 0, sizeof *status));
  meld_proto_dev_t pd = meld_proto_dev(comm);
  void *args[] = {&pd, (void *)&iters, &lat, &status};
  double t0 = gt_now_s();
  GT_MELD(meld_launch_coop((const void *)pingpong_kernel, 1, 32, 0, args, 0));
  GT_CUDA(cudaDeviceSynchronize());
  double wall = gt_now_s() - t0;
  uint32_t st = 0;
  GT_CUDA(cudaMemcpy(&st, status, sizeof st, cudaMemcpyDeviceToHost));
  GT_CHECK(st == 2, "ping-pong status %u (1: a wait failed)", st);
  GT_MELD(meld_comm_check(comm));
  if (comm->rank == 0 && st == 2) {
    uint64_t *h = (uint64_t *)malloc(iters * sizeof *h);
    GT_CUDA(cudaMemcpy(h, lat, iters * sizeof *h, cudaMemcpyDeviceToHost));
    double sum = 0;
    for (uint32_t i = 0; i < iters; i++) sum += (double)h[i];
    qsort(h, iters, sizeof *h, cmp_u64);
    gt_log("ping-pong%s: median %.2f us, mean %.2f us, p99 %.2f us per round trip "
           "(%u round trips, %%globaltimer; kernel wall %.1f ms)",
           gt_share_gpu() ? " on a shared GPU (time slices)" : " over NVLink", h[iters / 2] * 1e-3,
           sum / iters * 1e-3, h[iters * 99 / 100] * 1e-3, iters, wall * 1e3);
    GT_CHECK(h[iters / 2] > 0 && h[iters / 2] < plausible_ns, "median round trip %llu ns is implausible",
             (unsigned long long)h[iters / 2]);
    free(h);
  }
  cudaFree(lat);
  cudaFree(status);
}

/* ---- 2, 3, 5. the signalling exchange kernel ----------------------------------------------- */

typedef struct {
  uint32_t *peer_ws;        /* staging in the receiver's (next rank's) workspace, mapped   */
  const uint32_t *my_ws;    /* my staging (the previous rank writes here)                  */
  uint32_t seed;            /* changes the data per call (0 in the graph: epoch only)      */
  uint32_t nchunks, chunk_words, ring, nitems, ncomm;
  uint32_t arg_hash;
  uint32_t nepochs;         /* epochs[e - e0] = e for the first nepochs calls of a series  */
  uint64_t e0;
  uint64_t *epochs;
  uint64_t *items;          /* epoch of the last call that processed each item             */
  unsigned long long *errors, *verified;
} xargs_t;

__host__ __device__ static inline uint32_t xval(uint64_t e, uint32_t seed, int src, uint32_t k, uint32_t i) {
  uint64_t x = e * 0x9E3779B97F4A7C15ull ^ ((uint64_t)seed << 32) ^ ((uint64_t)src << 56) ^ ((uint64_t)k << 20) ^ i;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return (uint32_t)x;
}

__device__ static void xchg_send(meld_ctx_t *ctx, const xargs_t *a, int me, int dst) {
  const uint64_t e = ctx->epoch;
  for (uint32_t k = 0; k < a->nchunks; k++) {
    const uint64_t t0 = meld_trace_begin(ctx);
    const uint32_t slot = meld_ring_slot(k, a->ring);
    const uint64_t need = meld_ring_credit_needed(e, k, a->ring);
    /* Credit: the receiver has finished reading this slot's previous chunk. */
    if (need && !meld_cta_wait_credit(ctx, meld_credit_index(dst, ctx->p->nranks, 0, slot, a->ring), need, dst,
                                      "ring credit"))
      return;
    uint32_t *dstp = a->peer_ws + (size_t)slot * a->chunk_words;
    for (uint32_t i = threadIdx.x; i < a->chunk_words; i += blockDim.x) dstp[i] = xval(e, a->seed, me, k, i);
    __syncthreads(); /* every thread's stores before thread 0's (cumulative) release */
    if (threadIdx.x == 0) {
      meld_signal_put(ctx, dst, meld_signal_index(me, ctx->p->nranks, 0, slot, a->ring),
                      meld_ring_data_stamp(e, k, a->ring));
      meld_trace_end(ctx, MELD_ROLE_COMM, k, t0);
    }
  }
}

__device__ static void xchg_recv(meld_ctx_t *ctx, const xargs_t *a, int me, int src) {
  const uint64_t e = ctx->epoch;
  for (uint32_t k = 0; k < a->nchunks; k++) {
    const uint64_t t0 = meld_trace_begin(ctx);
    const uint32_t slot = meld_ring_slot(k, a->ring);
    if (!meld_cta_wait_signal(ctx, meld_signal_index(src, ctx->p->nranks, 0, slot, a->ring),
                              meld_ring_data_stamp(e, k, a->ring), src, "ring data"))
      return;
    const uint32_t *p = a->my_ws + (size_t)slot * a->chunk_words;
    unsigned long long bad = 0;
    for (uint32_t i = threadIdx.x; i < a->chunk_words; i += blockDim.x) bad += p[i] != xval(e, a->seed, src, k, i);
    if (bad) atomicAdd(a->errors, bad);
    __syncthreads(); /* every read of the slot before the credit's release */
    if (threadIdx.x == 0) {
      meld_credit_put(ctx, src, meld_credit_index(me, ctx->p->nranks, 0, slot, a->ring),
                      meld_ring_credit_stamp(e, k, a->ring));
      atomicAdd(a->verified, 1ull);
      meld_trace_end(ctx, MELD_ROLE_WAIT, k, t0);
    }
  }
}

__global__ void __launch_bounds__(256) xchg_kernel(const __grid_constant__ meld_proto_dev_t proto, const xargs_t a) {
  meld_ctx_t ctx;
  if (meld_call_begin(&ctx, &proto, MELD_OP_TEST_SIGNAL, a.arg_hash, a.ncomm)) {
    const int n = proto.nranks, me = proto.rank;
    const uint64_t e = ctx.epoch;
    if (threadIdx.x == 0 && ctx.ticket == 0 && e >= a.e0 && e - a.e0 < a.nepochs) a.epochs[e - a.e0] = e;
    if (ctx.role == MELD_ROLE_COMM && ctx.ticket == 0) xchg_send(&ctx, &a, me, (me + 1) % n);
    if (ctx.role == MELD_ROLE_COMM && ctx.ticket == 1) xchg_recv(&ctx, &a, me, (me + n - 1) % n);
    /* Compute items from the queue (comm CTAs join when done): each item exactly once per call. */
    for (;;) {
      const uint32_t t = meld_cta_queue_next(&ctx, 0);
      if (t >= a.nitems || ctx.failed) break;
      if (threadIdx.x == 0) {
        const uint64_t t0 = meld_trace_begin(&ctx);
        if (a.items[t] != e - 1) atomicAdd(a.errors, 1ull); /* missed or doubled in a call */
        a.items[t] = e;
        meld_trace_end(&ctx, MELD_ROLE_COMPUTE, t, t0);
      }
    }
  }
  meld_call_end(&ctx);
}

typedef struct {
  xargs_t a;
  uint64_t *h_epochs;
  int grid;
} xchg_t;

static uint64_t pad_counter(meld_comm_t comm) {
  uint64_t c = 0;
  GT_CUDA(cudaMemcpy(&c, (uint8_t *)comm->pad.local + MELD_PAD_OFF_COUNTER, sizeof c, cudaMemcpyDeviceToHost));
  return c;
}

static uint32_t xchg_hash(const xargs_t *a) {
  uint64_t h = meld_hash_init();
  h = meld_hash_u64(h, MELD_OP_TEST_SIGNAL);
  h = meld_hash_u64(h, a->nchunks);
  h = meld_hash_u64(h, a->chunk_words);
  h = meld_hash_u64(h, a->ring);
  h = meld_hash_u64(h, a->nitems);
  return meld_hash_fold(h);
}

/* Prepares a series of calls starting at the comm's next epoch. */
static void xchg_setup(meld_comm_t comm, xchg_t *x, uint32_t nepochs) {
  memset(x, 0, sizeof *x);
  xargs_t *a = &x->a;
  const int peer = (comm->rank + 1) % comm->nranks;
  a->peer_ws = (uint32_t *)comm->workspace.peer[peer];
  a->my_ws = (const uint32_t *)comm->workspace.local;
  a->chunk_words = 4096;
  a->ring = 3;
  a->nchunks = 7;
  a->nitems = 300;
  a->ncomm = 2;
  a->nepochs = nepochs;
  a->e0 = pad_counter(comm) + 1;
  GT_CUDA(cudaMalloc(&a->epochs, nepochs * sizeof(uint64_t)));
  GT_CUDA(cudaMemset(a->epochs, 0, nepochs * sizeof(uint64_t)));
  GT_CUDA(cudaMalloc(&a->items, a->nitems * sizeof(uint64_t)));
  uint64_t *init = (uint64_t *)malloc(a->nitems * sizeof(uint64_t));
  for (uint32_t i = 0; i < a->nitems; i++) init[i] = a->e0 - 1;
  GT_CUDA(cudaMemcpy(a->items, init, a->nitems * sizeof(uint64_t), cudaMemcpyHostToDevice));
  free(init);
  GT_CUDA(cudaMalloc(&a->errors, sizeof(unsigned long long)));
  GT_CUDA(cudaMalloc(&a->verified, sizeof(unsigned long long)));
  GT_CUDA(cudaMemset(a->errors, 0, sizeof(unsigned long long)));
  GT_CUDA(cudaMemset(a->verified, 0, sizeof(unsigned long long)));
  a->arg_hash = xchg_hash(a);
  GT_MELD(meld_coop_grid((const void *)xchg_kernel, 256, 0, 0, comm->sm_count, &x->grid));
}

/* Checks a finished series of ncalls calls with `chunks` chunks received in total. */
static void xchg_verify(meld_comm_t comm, xchg_t *x, const char *what, uint32_t ncalls, unsigned long long chunks) {
  xargs_t *a = &x->a;
  GT_CUDA(cudaDeviceSynchronize());
  GT_MELD(meld_comm_check(comm));
  unsigned long long errors = 1, verified = 0;
  GT_CUDA(cudaMemcpy(&errors, a->errors, sizeof errors, cudaMemcpyDeviceToHost));
  GT_CUDA(cudaMemcpy(&verified, a->verified, sizeof verified, cudaMemcpyDeviceToHost));
  GT_CHECK(errors == 0, "%s: %llu wrong words/items", what, errors);
  GT_CHECK(verified == chunks, "%s: %llu chunks verified, expected %llu", what, verified, chunks);
  uint32_t n = ncalls < a->nepochs ? ncalls : a->nepochs;
  uint64_t *h = (uint64_t *)malloc(n * sizeof *h);
  GT_CUDA(cudaMemcpy(h, a->epochs, n * sizeof *h, cudaMemcpyDeviceToHost));
  uint32_t bad = 0;
  for (uint32_t i = 0; i < n; i++) bad += h[i] != a->e0 + i;
  GT_CHECK(bad == 0, "%s: %u calls saw a wrong epoch (first: %llu, expected %llu)", what, bad,
           (unsigned long long)h[0], (unsigned long long)a->e0);
  free(h);
  uint64_t c = pad_counter(comm);
  GT_CHECK(c == a->e0 - 1 + ncalls, "%s: call counter %llu, expected %llu", what, (unsigned long long)c,
           (unsigned long long)(a->e0 - 1 + ncalls));
  gt_log("%s: %u calls, %llu chunks of %u bytes verified, %llu errors, epochs %llu..%llu", what, ncalls,
         verified, a->chunk_words * 4, errors, (unsigned long long)a->e0, (unsigned long long)(a->e0 + ncalls - 1));
}

static void xchg_free(xchg_t *x) {
  cudaFree(x->a.epochs);
  cudaFree(x->a.items);
  cudaFree(x->a.errors);
  cudaFree(x->a.verified);
}

static void back_to_back(meld_comm_t comm) {
  const uint32_t ncalls = gt_share_gpu() ? 500 : 10000; /* (shared GPU: a time slice a turn) */
  xchg_t x;
  xchg_setup(comm, &x, ncalls);
  meld_proto_dev_t pd = meld_proto_dev(comm);
  unsigned long long chunks = 0;
  double t0 = gt_now_s();
  for (uint32_t i = 0; i < ncalls; i++) {
    xargs_t a = x.a;
    a.seed = i * 7919u + 1u;
    a.nchunks = 1 + i % 9; /* shapes change every call: the handshake hash changes too */
    a.arg_hash = xchg_hash(&a);
    chunks += a.nchunks;
    void *args[] = {&pd, &a};
    meld_result_t r = meld_launch_coop((const void *)xchg_kernel, x.grid, 256, 0, args, 0);
    if (r != MELD_OK) {
      GT_MELD(r);
      break;
    }
  }
  GT_CUDA(cudaDeviceSynchronize());
  double s = gt_now_s() - t0;
  gt_log("back-to-back: %u calls on %d CTAs in %.1f ms (%.1f us per call, no host sync)", ncalls, x.grid, s * 1e3,
         s * 1e6 / ncalls);
  xchg_verify(comm, &x, "back-to-back", ncalls, chunks);
  xchg_free(&x);
}

static void graph_replay(meld_comm_t comm) {
  const uint32_t replays = gt_share_gpu() ? 100 : 1000;
  xchg_t x;
  xchg_setup(comm, &x, replays);
  meld_proto_dev_t pd = meld_proto_dev(comm);
  cudaStream_t s;
  GT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t g = NULL;
  cudaGraphExec_t ge = NULL;
  void *args[] = {&pd, &x.a};
  GT_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  meld_result_t r = meld_launch_coop((const void *)xchg_kernel, x.grid, 256, 0, args, s);
  cudaError_t ce = cudaStreamEndCapture(s, &g);
  if (r != MELD_OK || ce != cudaSuccess) {
    gt_log("graph: the cooperative launch was not captured (%s / %s): capturing a plain launch instead",
           r != MELD_OK ? meld_last_error() : "", cudaGetErrorString(ce));
    cudaGetLastError();
    if (g) cudaGraphDestroy(g);
    g = NULL;
    GT_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    xchg_kernel<<<x.grid, 256, 0, s>>>(pd, x.a);
    GT_CUDA(cudaStreamEndCapture(s, &g));
  }
  GT_CUDA(cudaGraphInstantiate(&ge, g, 0));
  double t0 = gt_now_s();
  for (uint32_t i = 0; i < replays; i++) GT_CUDA(cudaGraphLaunch(ge, s));
  GT_CUDA(cudaStreamSynchronize(s));
  double el = gt_now_s() - t0;
  gt_log("graph: %u replays in %.1f ms (%.1f us per replay)", replays, el * 1e3, el * 1e6 / replays);
  xchg_verify(comm, &x, "graph replay", replays, (unsigned long long)replays * x.a.nchunks);
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  cudaStreamDestroy(s);
  xchg_free(&x);
}

static void trace_run(meld_comm_t comm) {
  xchg_t x;
  xchg_setup(comm, &x, 16);
  meld_trace_t *tr = NULL;
  GT_MELD(meld_trace_create((uint32_t)x.grid, 256, &tr));
  if (!tr) return;
  meld_proto_dev_t pd = meld_proto_dev(comm);
  pd.trace = meld_trace_dev(tr);
  x.a.nchunks = 24;
  x.a.arg_hash = xchg_hash(&x.a);
  const uint32_t ncalls = 5;
  for (uint32_t i = 0; i < ncalls; i++) {
    void *args[] = {&pd, &x.a};
    GT_MELD(meld_launch_coop((const void *)xchg_kernel, x.grid, 256, 0, args, 0));
  }
  xchg_verify(comm, &x, "traced calls", ncalls, (unsigned long long)ncalls * x.a.nchunks);
  char path[512];
  snprintf(path, sizeof path, "%s/trace_signal.rank%d.json", out_dir(), comm->rank);
  GT_MELD(meld_trace_write(tr, path, comm->rank));
  FILE *f = fopen(path, "r");
  GT_CHECK(f != NULL, "trace %s was not written", path);
  if (f) {
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    GT_CHECK(strstr(buf, "\"ph\":\"X\"") != NULL, "trace %s has no events", path);
    gt_log("trace written to %s", path);
  }
  meld_trace_destroy(tr);
  xchg_free(&x);
}

/* ---- 4. litmus: bulk copies into the peer, flags, bulk reads ------------------------------------ */

#define LITMUS_WORDS 2048 /* 8 KiB chunks */

typedef struct {
  uint8_t *peer_stage;      /* in the receiver's workspace (mapped)                        */
  const uint8_t *my_stage;  /* in mine                                                     */
  uint32_t iters, ring;
  uint32_t arg_hash;
  unsigned long long *errors, *verified;
} largs_t;

__host__ __device__ static inline uint32_t lval(uint64_t e, int src, uint32_t k, uint32_t i) {
  return xval(e, 0xb01dfaceu, src, k, i);
}

__global__ void __launch_bounds__(128) litmus_kernel(const __grid_constant__ meld_proto_dev_t proto, const largs_t a) {
  __shared__ __align__(128) uint32_t buf[LITMUS_WORDS];
  __shared__ __align__(8) uint64_t mbar;
  const uint32_t bytes = LITMUS_WORDS * 4;
  meld_ctx_t ctx;
  if (meld_call_begin(&ctx, &proto, MELD_OP_TEST_LITMUS, a.arg_hash, 2)) {
    const int n = proto.nranks, me = proto.rank, dst = (me + 1) % n, src = (me + n - 1) % n;
    const uint64_t e = ctx.epoch;
    if (ctx.ticket == 0) { /* producer */
      for (uint32_t k = 0; k < a.iters; k++) {
        const uint32_t slot = meld_ring_slot(k, a.ring);
        const uint64_t need = meld_ring_credit_needed(e, k, a.ring);
        if (need && !meld_cta_wait_credit(&ctx, meld_credit_index(dst, n, 1, slot, a.ring), need, dst, "litmus credit"))
          break;
        for (uint32_t i = threadIdx.x; i < LITMUS_WORDS; i += blockDim.x) buf[i] = lval(e, me, k, i);
        /* Ordinary st.shared, read next by the bulk copy (async proxy): proxy fence by every
         * writing thread, then bar.sync before the issuing thread. */
        fence_proxy_async_smem_cta();
        __syncthreads();
        if (threadIdx.x == 0) {
          /* The credit was acquired through the generic proxy; the bulk store writes through
           * the async proxy: order it after the acquire (WAR on the peer's slot). */
          fence_proxy_async_gmem();
          cp_async_bulk_s2g(a.peer_stage + (size_t)slot * bytes, smem_addr(buf), bytes);
          cp_async_bulk_commit_group();
          cp_async_bulk_wait_group0(); /* NOT .read: the peer's copy of the data is complete */
        }
        __syncthreads(); /* the DESIGN chain: wait_group 0 -> bar.sync -> one release; also frees buf */
        if (threadIdx.x == 0)
          meld_signal_put(&ctx, dst, meld_signal_index(me, n, 1, slot, a.ring), meld_ring_data_stamp(e, k, a.ring));
      }
    } else if (ctx.ticket == 1) { /* consumer */
      const uint32_t bar = smem_addr(&mbar);
      if (threadIdx.x == 0) {
        mbarrier_init_cta(bar, 1);
        fence_proxy_async_smem_cta(); /* the init is visible to the async proxy (complete_tx) */
      }
      __syncthreads();
      uint32_t phase = 0;
      for (uint32_t k = 0; k < a.iters; k++) {
        const uint32_t slot = meld_ring_slot(k, a.ring);
        if (!meld_cta_wait_signal(&ctx, meld_signal_index(src, n, 1, slot, a.ring), meld_ring_data_stamp(e, k, a.ring),
                                  src, "litmus data"))
          break;
        if (threadIdx.x == 0) {
          /* Thread 0 acquired the flag (generic proxy); its bulk read goes through the async
           * proxy: fence.proxy.async.global orders the read after the acquire. Also orders
           * the previous iteration's generic reads of buf (bar.sync'd) before the overwrite. */
          fence_proxy_async_gmem();
          fence_proxy_async_smem_cta();
          mbarrier_arrive_expect_tx_cta(bar, bytes);
          cp_async_bulk_g2s(smem_addr(buf), a.my_stage + (size_t)slot * bytes, bytes, bar);
        }
        /* Every thread waits for the bytes; a failure in any thread stops all of them. */
        if (!__syncthreads_and(meld_mbar_wait(&ctx, bar, phase, "litmus bulk read"))) {
          ctx.failed = 1;
          break;
        }
        phase ^= 1u;
        unsigned long long bad = 0;
        for (uint32_t i = threadIdx.x; i < LITMUS_WORDS; i += blockDim.x) bad += buf[i] != lval(e, src, k, i);
        if (bad) atomicAdd(a.errors, bad);
        __syncthreads(); /* all reads of buf (and the bulk read of the slot) before the credit */
        if (threadIdx.x == 0) {
          meld_credit_put(&ctx, src, meld_credit_index(me, n, 1, slot, a.ring), meld_ring_credit_stamp(e, k, a.ring));
          atomicAdd(a.verified, 1ull);
        }
      }
    }
  }
  meld_call_end(&ctx);
}

static void litmus(meld_comm_t comm) {
  const uint32_t ncalls = 20;
  largs_t a;
  memset(&a, 0, sizeof a);
  const int peer = (comm->rank + 1) % comm->nranks;
  const size_t off = (size_t)4 << 20; /* apart from the exchange's staging */
  a.peer_stage = (uint8_t *)comm->workspace.peer[peer] + off;
  a.my_stage = (const uint8_t *)comm->workspace.local + off;
  a.iters = 256;
  a.ring = 4;
  a.arg_hash = meld_hash_fold(meld_hash_u64(meld_hash_u64(meld_hash_init(), MELD_OP_TEST_LITMUS), a.iters));
  GT_CUDA(cudaMalloc(&a.errors, sizeof(unsigned long long)));
  GT_CUDA(cudaMalloc(&a.verified, sizeof(unsigned long long)));
  GT_CUDA(cudaMemset(a.errors, 0, sizeof(unsigned long long)));
  GT_CUDA(cudaMemset(a.verified, 0, sizeof(unsigned long long)));
  meld_proto_dev_t pd = meld_proto_dev(comm);
  double t0 = gt_now_s();
  for (uint32_t i = 0; i < ncalls; i++) {
    void *args[] = {&pd, &a};
    GT_MELD(meld_launch_coop((const void *)litmus_kernel, 2, 128, 0, args, 0));
  }
  GT_CUDA(cudaDeviceSynchronize());
  double s = gt_now_s() - t0;
  GT_MELD(meld_comm_check(comm));
  unsigned long long errors = 1, verified = 0;
  GT_CUDA(cudaMemcpy(&errors, a.errors, sizeof errors, cudaMemcpyDeviceToHost));
  GT_CUDA(cudaMemcpy(&verified, a.verified, sizeof verified, cudaMemcpyDeviceToHost));
  GT_CHECK(errors == 0, "litmus: %llu stale or torn words", errors);
  GT_CHECK(verified == (unsigned long long)ncalls * a.iters, "litmus: %llu chunks verified, expected %u", verified,
           ncalls * a.iters);
  gt_log("litmus (bulk store -> wait_group 0 -> bar.sync -> release; acquire -> proxy fence -> bulk load): "
         "%llu chunks of %u bytes, %llu bad words, %.1f GB/s one way",
         verified, LITMUS_WORDS * 4, errors, (double)verified * LITMUS_WORDS * 4 / s * 1e-9);
  cudaFree(a.errors);
  cudaFree(a.verified);
}

/* ---- driver -------------------------------------------------------------------------------- */

static void rank_main(int rank, int nranks) {
  (void)rank;
  meld_config_t cfg = test_config();
  meld_comm_t comm = NULL;
  GT_MELD(meld_comm_init_env(&comm, &cfg));
  if (!comm) return;
  if (nranks == 2) pingpong(comm);
  back_to_back(comm);
  graph_replay(comm);
  litmus(comm);
  trace_run(comm);
  GT_MELD(meld_comm_destroy(comm));
}

int main(void) {
  g_ndev = gt_device_count();
  printf("test_signal: %d GPU(s)\n", g_ndev);
  if (g_ndev < 1) {
    printf("skipped: no GPU\n");
    return gt_summary("test_signal");
  }
  int nranks = g_ndev >= 2 ? 2 : 1;
  if (nranks < 2) printf("ping-pong: skipped (needs 2 GPUs); the rest runs on 1 rank\n");
  printf("--- signalling (%d ranks)\n", nranks);
  fflush(stdout);
  int failed = gt_spawn(nranks, rank_main);
  GT_CHECK(failed == 0, "%d rank(s) failed", failed);
  if (failed == 0 && system("command -v python3 >/dev/null 2>&1") == 0) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "python3 tools/trace_png.py -o %s/trace_signal.png %s/trace_signal.rank*.json",
             out_dir(), out_dir());
    int rc = system(cmd);
    if (rc == 0) printf("trace PNG: %s/trace_signal.png\n", out_dir());
    else printf("trace PNG: skipped (tools/trace_png.py exit %d: matplotlib missing?)\n", rc);
  }
  return gt_summary("test_signal");
}
