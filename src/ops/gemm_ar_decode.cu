/* gemm_ar_decode.cu — decode-size GEMM + AllReduce as ONE kernel: the swapped small-M GEMM
 * (gemm_skinny.cuh) whose clusters all-reduce their own block of C as soon as it exists.
 *
 * Before (session 4, still the default): meld_gemm writes the partial into this rank's
 * workspace, then the ZC one-shot all-reduce (a second launch, programmatic) handshakes, pulls
 * every rank's partial and signals "done": two launches, an entry round trip after the GEMM
 * and a done round trip (~10 us of the 40 us of 128 x 4096 x 7168 on 2 x H200).
 *
 * Here, per CTA s of a cluster that owns block (m-block, 128 columns) of C (rows s, s+S, ...):
 *   side warp 9     at entry: griddepcontrol.wait, then the call's entry (ticket, epoch, sticky
 *                   abort, argument handshake: meld_call_begin_one) WHILE the GEMM runs; then,
 *                   if this rank's previous call was this kernel's (the pad's record), it waits
 *                   for every peer's CONSUMED_ALL of that call (below; long arrived by now);
 *   warps 0..8      the GEMM as gemm_skinny_run (the producer loads the first stages' weights
 *                   before griddepcontrol.wait: a programmatic launch overlaps the previous
 *                   kernel), the cluster's fp32 partials summed through DSMEM, rounded once
 *                   to bf16 and stored into this rank's slot of its workspace at the block's
 *                   place (the partial [M, N], ld N rounded up to 8; P slots at the
 *                   workspace's top) — exactly what meld_gemm would write; with
 *                   MELD_GEMM_AR_DECODE_PUSH=1 also into this rank's slot of every peer's
 *                   workspace (stores over NVLink); not before the side warp is done (the first
 *                   cluster barrier), and not at all if it failed;
 *   then (all)      bar.sync; thread 0 releases READY (stamp(epoch, 1), signal index
 *                   (me, channel = blockIdx.x)) into every peer's pad; waits for every peer's
 *                   READY of the same channel; every thread reads its share of the block's
 *                   rows from every rank's slot (pull: in that rank's workspace, over NVLink;
 *                   push: in its own) (16-byte ld.global.cg, 4 items in flight per thread), sums in fp32 in rank order from 0.0f (as the ZC one-shot:
 *                   every rank gets bitwise the same C), rounds once, stores C; bar.sync;
 *                   thread 0 counts the CTA (acq_rel); the last CTA of the grid releases
 *                   CONSUMED_ALL (one slot per rank) into every peer's pad and records the
 *                   call's epoch in this rank's pad. The kernel ends without waiting for the
 *                   peers' CONSUMED_ALL: the next call of this kernel waits for it before it
 *                   overwrites the partial, and any other op waits for the peers at its entry
 *                   handshake (which proves each peer ended this call, its reads included)
 *                   before it writes the workspace; the one writer that has no handshake first,
 *                   meld_gemm in the unfused decode path, writes the workspace's bottom half
 *                   only (GEMM_AR_DECODE_MAX_PART). Session 17, one H200, loopback: the
 *                   CONSUMED round trip at the kernel's end cost ~1 us (~10% of the exchange).
 * Why no other handshake is needed: peers read our partial only after READY, which the side
 * warp's argument check precedes (READY is posted after the first cluster barrier, which waits
 * for the side warp): a peer never reads our data before both ranks know the shapes agree.
 * Push writes into the peers' workspaces after the same barrier: the handshake proved each peer
 * has started this call (its previous op is over), and the CONSUMED_ALL wait that each peer
 * has read its slots of our previous call of this kernel.
 * Stamps grow with the epoch, so the signal slots are shared with other ops without reset (a
 * stamp of call e also satisfies every wait of an earlier call on the slot, whose post happened
 * earlier anyway).
 * Co-residency: a CTA waits for the same channel's CTA of every peer, so every cluster of
 * the grid must be resident at once (host: cudaOccupancyMaxActiveClusters, else the unfused
 * path). Every wait has the comm's deadline; a failed handshake or wait skips the exchange (C is
 * then not written) and reports through the error record, like every meld op.
 * Loopback (one rank, MELD_GEMM_RS_DIAG bit 10, a test and timing mode): the kernel of rank 0
 * of 2 whose virtual peer is itself: READY / CONSUMED_ALL go into this rank's own pad under the
 * peer's index and the peer's partial is this rank's own, so C = 2 x the partial, exactly. */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "device/gemm_skinny.cuh"
#include "device/launch.cuh"
#include "error.h"
#include "gemm_plan.h"
#include "gemm_rs_plan.h"
#include "proto.h"

#define GEMM_AR_DEC_THREADS (SKINNY_THREADS + 32) /* the skinny kernel's 9 warps + the side warp */
#define GEMM_AR_DEC_FAILED 0 /* per-call scratch word: a CTA's exchange failed (no CONSUMED_ALL) */
#define GEMM_AR_DEC_ALL_CH (MELD_PAD_SIGNAL_SLOTS / GEMM_RS_MAX_RANKS - 1) /* CONSUMED_ALL's channel */

typedef struct {
  gemm_params_t g;                          /* the skinny plan; c = this rank's workspace, ld n */
  const uint16_t *part[GEMM_RS_MAX_RANKS];  /* where rank r's partial is read from              */
  uint16_t *copy[GEMM_RS_MAX_RANKS];        /* push: where the partial is also written (peers)   */
  int32_t ncopies;                          /* push: P - 1 (0: pull)                             */
  uint16_t *c;                              /* C [M, ldc]                                       */
  int64_t ldc, ldp;                         /* ldp: the partials' row pitch, N rounded up to 8  */
  int32_t nranks, rank, loop;
  int32_t diag; /* MELD_GEMM_AR_DECODE_DIAG, timing only (WRONG protocol or results): bit 0 = no
                   CONSUMED_ALL (post and wait), bit 1 = no READY round trip, bit 2 = no sum */
  uint32_t arg_hash;
} gemm_ar_dec_args_t;

#ifdef __CUDACC__
struct gemm_ar_dec_tail {
  static constexpr int kThreads = GEMM_AR_DEC_THREADS;
  static constexpr bool kPdl = true;
  const meld_proto_dev_t *proto;
  const gemm_ar_dec_args_t *a;
  uint64_t t0; /* thread 0: the kernel's start for the trace (MELD_TRACE; 0 when off) */

  /* Signal slots, per channel and poster rank `from`: READY in the CTA's channel (blockIdx.x),
   * the call-wide CONSUMED_ALL in a channel of its own, GEMM_AR_DEC_ALL_CH (the last channel of
   * the signal region at GEMM_RS_MAX_RANKS ranks; other ops' posts there carry older epochs:
   * stamps only grow). */
  __device__ __forceinline__ uint32_t slot(int from, uint32_t ch) const {
    return meld_signal_index(from, a->nranks, ch, 0, 1);
  }
  /* Thread 0: stamp into channel ch's slot of this rank in every peer's pad (loopback: into our
   * own under the virtual peer's index, where our waits look). */
  __device__ __forceinline__ void post(meld_ctx_t *c, uint32_t ch, uint64_t stamp) const {
    const int P = a->nranks, me = a->rank;
    /* One release fence, then relaxed stamps: a release pattern for each (P - 1 st.release.sys
     * in a row cost ~650 ns each, in series: session 26). */
    fence_release_sys();
    for (int k = 1; k < P; ++k) {
      const int q = (me + k) % P;
      st_relaxed_sys_u64(a->loop ? meld_local_signal(c, slot(q, ch)) : meld_peer_signal(c, q, slot(me, ch)), stamp);
    }
  }
  __device__ __forceinline__ int wait_all(meld_ctx_t *c, uint32_t ch, uint64_t stamp, const char *label) const {
    const int P = a->nranks, me = a->rank;
    for (int k = 1; k < P; ++k) {
      const int q = (me + k) % P;
      if (!meld_wait_signal(c, slot(q, ch), stamp, q, label)) return 0;
    }
    return 1;
  }

  /* The side warp: the call's entry while the GEMM runs; then, if this rank's previous call
   * was this kernel's (the pad's record says epoch - 1), wait until every peer has read that
   * call's partials (their CONSUMED_ALL) before our rows may overwrite them (store_ok). */
  __device__ __forceinline__ void side(int warp) const {
    if (warp == 9 && (threadIdx.x & 31) == 0) {
      asm volatile("griddepcontrol.wait;" ::: "memory"); /* the previous call's epoch advance */
      meld_ctx_t c;
      if (meld_call_begin_one(&c, proto, MELD_OP_GEMM_AR, a->arg_hash, 0) && !(a->diag & 1)) {
        const uint64_t last = ld_relaxed_gpu_u64(meld_pad_u64(proto->pad, MELD_PAD_OFF_DECODE_LAST));
        if (last != 0 && last + 1 == c.epoch &&
            !wait_all(&c, GEMM_AR_DEC_ALL_CH, meld_stamp(last, 1),
                      "decode GEMM+AR: a peer still reading our previous partial"))
          meld_cta_shared()->ok = 0u;
      }
    }
    __syncwarp();
  }
  __device__ __forceinline__ bool store_ok() const { return meld_cta_shared()->ok != 0u; }
  __device__ __forceinline__ int ncopies() const { return a->ncopies; }
  __device__ __forceinline__ void *copy(int i) const { return a->copy[i]; }

  /* The block's rows s, s + S, ... (< rows) of columns [col0, col0 + 128) ∩ [0, n): every
   * rank's partial summed into C. Items of 8 columns; a thread takes U items per round and
   * has every load of the round in flight at once (a peer's are NVLink round trips), then
   * sums each item in rank order from 0.0f. */
  static constexpr int U = 4;
  __device__ __forceinline__ void store_item(int r, int col, const float *f) const {
    const int n = a->g.n;
    const uint4 v = gemm_pack_bf16x8(f);
    uint16_t *o = a->c + (int64_t)r * a->ldc + col;
    if (col + 8 <= n) {
      *(uint4 *)o = v;
    } else { /* N's last 8: the columns past N are C's padding (not ours) */
      const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int e = 0; e < 8; ++e)
        if (e < n - col) o[e] = (uint16_t)(w[e >> 1] >> (16 * (e & 1)));
    }
  }
  __device__ __forceinline__ void sum_rows(int s, int S, int row0, int rows, int col0) const {
    const int P = a->nranks, n = a->g.n;
    const int nr = rows > s ? (rows - s + S - 1) / S : 0, items = nr * 16;
    for (int base = (int)threadIdx.x; base < items; base += U * kThreads) {
      int64_t off[U];
      int ok[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int it = base + u * kThreads, r = row0 + s + S * (it >> 4), col = col0 + 8 * (it & 15);
        ok[u] = it < items && col < n;
        off[u] = (int64_t)r * a->ldp + col;
      }
      float f[U][8];
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int e = 0; e < 8; ++e) f[u][e] = 0.f;
      if (P == 2) { /* both sources of every item in flight */
        uint4 v0[U], v1[U];
#pragma unroll
        for (int u = 0; u < U; ++u)
          if (ok[u]) v0[u] = __ldcg((const uint4 *)(a->part[0] + off[u])), v1[u] = __ldcg((const uint4 *)(a->part[1] + off[u]));
#pragma unroll
        for (int u = 0; u < U; ++u)
          if (ok[u]) gemm_add_bf16x8(f[u], v0[u]), gemm_add_bf16x8(f[u], v1[u]);
      } else {
        for (int rr = 0; rr < P; ++rr) {
          uint4 v[U];
#pragma unroll
          for (int u = 0; u < U; ++u)
            if (ok[u]) v[u] = __ldcg((const uint4 *)(a->part[rr] + off[u]));
#pragma unroll
          for (int u = 0; u < U; ++u)
            if (ok[u]) gemm_add_bf16x8(f[u], v[u]);
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (ok[u]) {
          const int it = base + u * kThreads;
          store_item(row0 + s + S * (it >> 4), col0 + 8 * (it & 15), f[u]);
        }
    }
  }

  __device__ __forceinline__ void finish(int s, int S, int row0, int rows) const {
    meld_ctx_t c;
    meld_call_join(&c, proto, MELD_OP_GEMM_AR, a->arg_hash, 0); /* (the side warp's cells: first cluster barrier) */
    const uint64_t stamp = meld_stamp(c.epoch, 1);
    const int nblk = (a->g.n + SKINNY_BN - 1) / SKINNY_BN;
    const int col0 = (int)((blockIdx.x / (unsigned)S) % (unsigned)nblk) * SKINNY_BN;
    /* bar.sync: every thread's stores of this CTA's rows precede thread 0's release (cumulative) */
    __syncthreads();
    /* Trace (thread 0, MELD_TRACE): compute = entry to the block's rows stored, wait = READY's
     * post and wait, comm = this thread's share of the pull and sum. */
    uint64_t t1 = 0;
    if (threadIdx.x == 0) {
      t1 = meld_trace_now(&proto->trace);
      meld_trace_record(&proto->trace, MELD_ROLE_COMPUTE, blockIdx.x, c.epoch, t0);
    }
    int ok = !c.failed;
    if (threadIdx.x == 0 && ok && !(a->diag & 2)) {
      post(&c, blockIdx.x, stamp);
      ok = wait_all(&c, blockIdx.x, stamp, "decode GEMM+AR: a peer's partial block");
    }
    ok = __syncthreads_and(ok); /* thread 0's acquire, then the barrier: the partials are visible */
    if (threadIdx.x == 0) {
      meld_trace_record(&proto->trace, MELD_ROLE_WAIT, blockIdx.x, c.epoch, t1);
      t1 = meld_trace_now(&proto->trace);
    }
    if (ok && !(a->diag & 4)) sum_rows(s, S, row0, rows, col0);
    if (threadIdx.x == 0) meld_trace_record(&proto->trace, MELD_ROLE_COMM, blockIdx.x, c.epoch, t1);
    /* (CONSUMED_ALL is posted by the call's last CTA at the end: gemm_ar_dec_end) */
    if (threadIdx.x == 0 && !ok) (void)atom_add_relaxed_gpu_u32(meld_scratch(&c, GEMM_AR_DEC_FAILED), 1u);
  }
};

/* The call's end, after the cluster barrier that ended gemm_skinny_run (every thread's reads
 * of the peers' partials and stores of C precede it): thread 0 counts the CTA done (acq_rel);
 * the last CTA, having acquired every CTA's count, releases CONSUMED_ALL into every peer's pad
 * (unless a CTA failed), records the call's epoch for this rank's next call of the kernel,
 * and advances the epoch. Nobody waits for CONSUMED_ALL here. */
__device__ __forceinline__ void gemm_ar_dec_end(const meld_proto_dev_t *proto, const gemm_ar_dec_args_t *a) {
  if (threadIdx.x != 0) return;
  meld_ctx_t c;
  meld_call_join(&c, proto, MELD_OP_GEMM_AR, a->arg_hash, 0);
  if (!meld_call_done_thread(&c)) return;
  /* (diag bit 0: nothing posted, so nothing recorded to wait for next) */
  const int post = !c.failed && !*meld_scratch(&c, GEMM_AR_DEC_FAILED) && !(a->diag & 1);
  const gemm_ar_dec_tail t{proto, a, 0};
  if (post) t.post(&c, GEMM_AR_DEC_ALL_CH, meld_stamp(c.epoch, 1));
  *meld_pad_u64(proto->pad, MELD_PAD_OFF_DECODE_LAST) = post ? c.epoch : 0; /* (read by the next kernel) */
  meld_call_advance(proto, c.epoch, 0, 1);
}

template <int MT>
__global__ void __launch_bounds__(GEMM_AR_DEC_THREADS, 1)
    gemm_ar_dec_kernel(const __grid_constant__ meld_proto_dev_t proto, const __grid_constant__ gemm_ar_dec_args_t a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  extern __shared__ __align__(1024) uint8_t gemm_smem[];
  const uint64_t t0 = threadIdx.x == 0 ? meld_trace_now(&proto.trace) : 0;
  gemm_skinny_run<MT>(&a.g, gemm_smem, gemm_ar_dec_tail{&proto, &a, t0});
  gemm_ar_dec_end(&proto, &a);
#endif
}
#endif /* __CUDACC__ */

typedef void (*gemm_ar_dec_fn)(meld_proto_dev_t, gemm_ar_dec_args_t);
static gemm_ar_dec_fn gemm_ar_dec_kernel_for(int mt) {
  return skinny_for_height(mt, [](auto h) -> gemm_ar_dec_fn { return gemm_ar_dec_kernel<h.value>; });
}

/* Per device and (height, cluster size): co-resident clusters of this kernel (0 = not yet
 * asked, -1 = the query failed). */
#define GEMM_AR_DEC_MAX_DEVICES 64
static int g_dec_clusters[GEMM_AR_DEC_MAX_DEVICES][SKINNY_NHEIGHTS][SKINNY_MAX_SPLIT + 1];
static int g_dec_ready[GEMM_AR_DEC_MAX_DEVICES];
static pthread_mutex_t g_dec_lock = PTHREAD_MUTEX_INITIALIZER;

static meld_result_t gemm_ar_dec_clusters(int dev, int mt, int S, int *out) {
  int hi = 0;
  while (hi < SKINNY_NHEIGHTS && skinny_heights[hi] != mt) hi++;
  if (hi == SKINNY_NHEIGHTS || S < 1 || S > SKINNY_MAX_SPLIT || dev >= GEMM_AR_DEC_MAX_DEVICES) {
    *out = -1;
    return MELD_OK;
  }
  meld_result_t res = MELD_OK;
  pthread_mutex_lock(&g_dec_lock);
  if (!g_dec_ready[dev]) {
    for (int i = 0; i < SKINNY_NHEIGHTS && res == MELD_OK; i++)
      if (cudaFuncSetAttribute(gemm_ar_dec_kernel_for(skinny_heights[i]), cudaFuncAttributeMaxDynamicSharedMemorySize,
                               SKINNY_SMEM_BYTES(skinny_heights[i])) != cudaSuccess)
        res = meld_error(MELD_ERR_CUDA, "meld_gemm_ar: cannot set the decode kernel's shared memory (%s)",
                         cudaGetErrorString(cudaGetLastError()));
    if (res == MELD_OK) g_dec_ready[dev] = 1;
  }
  if (res == MELD_OK && g_dec_clusters[dev][hi][S] == 0) {
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = (unsigned)S;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.gridDim = dim3((unsigned)S, 1, 1);
    cfg.blockDim = dim3(GEMM_AR_DEC_THREADS, 1, 1);
    cfg.dynamicSmemBytes = SKINNY_SMEM_BYTES(mt);
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    int n = 0;
    if (cudaOccupancyMaxActiveClusters(&n, gemm_ar_dec_kernel_for(mt), &cfg) != cudaSuccess || n <= 0) {
      (void)cudaGetLastError();
      n = -1;
    }
    g_dec_clusters[dev][hi][S] = n;
  }
  *out = g_dec_clusters[dev][hi][S];
  pthread_mutex_unlock(&g_dec_lock);
  return res;
}

/* Runs C = sum over ranks of A_r B_r^T with the one-kernel decode path when it applies (sets
 * *taken); otherwise returns MELD_OK with *taken = 0 and the caller takes the unfused path.
 * The conditions depend only on values every rank shares (shape, workspace size, plan, GPU
 * model), so every rank decides alike. g: the rank's GEMM (g->c, g->ldc ignored). */
extern "C" meld_result_t gemm_ar_decode_fused(struct meld_comm *comm, const meld_gemm_args_t *g0, void *c, int64_t ldc,
                                              int loop, uint32_t plan_hash, cudaStream_t stream, int *taken) {
  *taken = 0;
  const int P = loop ? 2 : comm->nranks, me = loop ? 0 : comm->rank;
  /* (C's rows on 16-byte boundaries: meld_gemm_ar's argument check requires it of every call) */
  const int64_t ldp = (g0->n + 7) / 8 * 8;
  /* The partials live at the top of the workspace, in its upper half (GEMM_AR_DECODE_MAX_PART),
   * where no op writes before its entry handshake (see the file's comment): P slots of `part`
   * bytes, slot r for rank r's partial. Pull (default): rank r writes its slot r of its own
   * workspace and every rank reads slot r of rank r's. Push (MELD_GEMM_AR_DECODE_PUSH=1): rank r
   * writes its slot r of every rank's workspace (peers' over NVLink, during the DSMEM reduce)
   * and every rank reads all slots of its own. Loopback: the virtual peer's slot holds this
   * rank's partial (push: written there; pull: read from slot 0). */
  const size_t part = ((size_t)g0->m * (size_t)ldp * 2 + 255) / 256 * 256;
  const char *push_env = getenv("MELD_GEMM_AR_DECODE_PUSH");
  const int push = push_env && !strcmp(push_env, "1");
  if (P < 2 || P > GEMM_RS_MAX_RANKS || comm->nnodes != 1 || ldc % 8 != 0 || (uintptr_t)c % 16 != 0 ||
      (size_t)P * part > GEMM_AR_DECODE_MAX_PART(comm->workspace.bytes))
    return MELD_OK;
  const size_t base = (comm->workspace.bytes - (size_t)P * part) / 256 * 256;
  uint8_t *const local = (uint8_t *)comm->workspace.local;
  meld_gemm_args_t g = *g0;
  /* Ranks as threads sharing a GPU (a test mode): every CTA waits for its peers' CTAs, so each
   * rank's grid must fit in its share of the SMs beside theirs (session 26: 8 ranks planned the
   * whole GPU each and timed out waiting for a rank whose grid could not start). */
  if (comm->gpu_share > 1 && (g.sm_count <= 0 || g.sm_count > meld_comm_node_sm_count(comm)))
    g.sm_count = meld_comm_node_sm_count(comm);
  g.c = local + base + (size_t)me * part;
  g.ldc = ldp;
  gemm_ar_dec_args_t k;
  memset(&k, 0, sizeof k);
  int workers = 0;
  MELD_CHECK(gemm_plan_for(&g, NULL, stream, &k.g, &workers));
  if (!k.g.skinny_mt) return MELD_OK; /* (not a decode shape for the small-M kernel) */
  const int S = k.g.skinny_split > 0 ? k.g.skinny_split : 1;
  int dev = 0, fit = 0;
  MELD_CUDA_CHECK(cudaGetDevice(&dev));
  MELD_CHECK(gemm_ar_dec_clusters(dev, k.g.skinny_mt, S, &fit));
  if (comm->gpu_share > 1) fit /= comm->gpu_share; /* (this rank's share of the co-resident clusters) */
  if (fit <= 0 || workers / S > fit) return MELD_OK; /* not one wave: a wait could never end */
  for (int r = 0; r < P; r++) {
    const uint8_t *ws_r = push || loop ? local : (const uint8_t *)comm->workspace.peer[r];
    k.part[r] = (const uint16_t *)(ws_r + base + (size_t)(loop && !push ? me : r) * part);
  }
  for (int q = 0; push && q < P; q++)
    if (q != me)
      k.copy[k.ncopies++] = (uint16_t *)((loop ? local + base + (size_t)q * part : (uint8_t *)comm->workspace.peer[q] + base +
                                                                                     (size_t)me * part));
  k.c = (uint16_t *)c;
  k.ldc = ldc;
  k.ldp = ldp;
  k.nranks = P;
  k.rank = me;
  k.loop = loop;
  const char *dg = getenv("MELD_GEMM_AR_DECODE_DIAG");
  k.diag = dg ? atoi(dg) & 7 : 0;
  uint64_t h = meld_hash_u64(meld_hash_init(), plan_hash);
  h = meld_hash_u64(h, 0x646563u); /* "dec": a rank on another path mismatches */
  h = meld_hash_u64(h, (uint64_t)k.g.skinny_mt);
  h = meld_hash_u64(h, (uint64_t)S);
  h = meld_hash_u64(h, (uint64_t)workers);
  h = meld_hash_u64(h, (uint64_t)push);
  k.arg_hash = meld_hash_fold(h);
  meld_proto_dev_t proto = meld_proto_dev(comm);
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[2];
  int na = 0;
  if (S > 1) {
    attr[na].id = cudaLaunchAttributeClusterDimension;
    attr[na].val.clusterDim.x = (unsigned)S;
    attr[na].val.clusterDim.y = 1;
    attr[na].val.clusterDim.z = 1;
    na++;
  }
  const char *pdl = getenv("MELD_GEMM_AR_DECODE_PDL"); /* (the unfused path's variable: 0 = off) */
  if (!(pdl && !strcmp(pdl, "0")) && comm->gpu_share <= 1) { /* (not beside in-process peers: comm.h) */
    attr[na].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[na].val.programmaticStreamSerializationAllowed = 1;
    na++;
  }
  cfg.gridDim = dim3((unsigned)workers, 1, 1);
  cfg.blockDim = dim3(GEMM_AR_DEC_THREADS, 1, 1);
  cfg.dynamicSmemBytes = SKINNY_SMEM_BYTES(k.g.skinny_mt);
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = (unsigned)na;
  MELD_CUDA_CHECK(cudaLaunchKernelEx(&cfg, gemm_ar_dec_kernel_for(k.g.skinny_mt), proto, k));
  *taken = 1;
  return MELD_OK;
}
