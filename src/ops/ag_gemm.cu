/* ag_gemm.cu — fused AllGather + GEMM (meld_ag_gemm): ONE persistent cooperative kernel.
 *
 * Roles (by ticket, DESIGN.md section 4). The first comm_ctas CTAs to start are comm CTAs:
 * they push this rank's shard into every peer's staging, chunk by chunk, phase t = 1 .. P-1
 * going to rank (me - t) mod P (for which we are the t-th producer in its tile order); after
 * each chunk one release of the stamp (epoch, 1) into the consumer's signal slot (me, chunk).
 * Then, if asked, they copy the gathered A out to a_gathered (own rows from the shard, peers'
 * rows from the staging after their chunk signals), and join the GEMM. Every CTA runs the
 * GEMM engine (src/device/gemm.cuh) over the staging geometry [P * m_loc_pad, k], claiming
 * tiles from a dynamic queue in the pad; the order hook rotates the m-blocks so this rank's
 * own come first, then rank+1's, ... (arrival order). This rank's own m-blocks are read IN
 * PLACE from the caller's shard through the engine's second A map (hook h: no local copy, no
 * wait: the first wave starts at once); the peers' m-blocks come from the staging, the ready
 * hook waiting for the chunk's signal (acquire.sys, then fence.proxy.async.global: the rows
 * were written by generic or bulk stores and are read by TMA) before loading them. The
 * hook's target is the running call's stamp, read from the pad's call counter (so CUDA-graph
 * replays and back-to-back calls need no host involvement).
 *
 * Buffer reuse across calls: a peer writes our staging in call e+1 only after its entry
 * handshake saw our post of e+1, i.e. after our kernel of call e ended (all our TMA reads of
 * the staging are done). So the staging needs no credits (it holds the whole gathered A).
 *
 * Memory ordering of a chunk: 16-byte stores by all threads -> bar.sync -> one thread's
 * st.release.sys (cumulative); or bulk copies by one thread -> cp.async.bulk.wait_group 0
 * (writes complete; implies the generic-async proxy fence) -> the same thread's release.
 *
 * Tails: m_loc % 128 != 0 pads each shard to m_loc_pad rows in the staging (a GEMM m-block
 * never spans two ranks); the GEMM's compact-rows epilogue drops the pad rows. */
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "ag_gemm_plan.h"
#include "coll_plan.h"
#include "comm.h"
#include "common/proto.h"
#include "device/copy.cuh"
#include "device/gemm.cuh"
#include "device/launch.cuh"
#include "device/signal.cuh"
#include "error.h"
#include "gemm_plan.h"
#include "log.h"
#include "proto.h"

/* Bulk-copy pipeline of a comm CTA (one thread): AGB_NB shared-memory buffers of AGB_PIECE
 * bytes; loads run AGB_NB - AGB_LAG pieces ahead, AGB_LAG stores may still be reading. */
#define AGB_PIECE 32768u
#define AGB_NB 6
#define AGB_LAG 2
#define AGB_BAR_OFF (AGB_NB * AGB_PIECE)
static_assert(AGB_BAR_OFF + 8 * AGB_NB + 1024 <= GEMM_SMEM_BYTES, "bulk buffers exceed the kernel's smem");

/* Everything the kernel needs, by value (__grid_constant__: the tensor maps stay in the
 * parameter space, as TMA needs). */
typedef struct {
  gemm_params_t g;
  int32_t rank, nranks, comm_ctas, copy, has_gemm, handshake_only;
  uint32_t arg_hash;
  int32_t inplace; /* 1: own rows read in place (no own copy, phase 0 skipped) */
  int32_t loop;    /* loopback (one rank, MELD_AG_GEMM_DIAG bit 1): see ag_push_chunk */
  int32_t comm_warps; /* 1: no comm CTAs; the engine's side warps push (ag_side_push)     */
  int32_t side_pieces, side_rows, side_ppr; /* comm warps: pieces per chunk, rows per piece, */
                                            /* pieces per row (plan)                          */
  int64_t m_loc, m_loc_pad, k, lda, chunk_rows, chunks_per_rank;
  const uint8_t *a_shard;
  uint8_t *a_gathered;
  int64_t ld_gathered;
  uint32_t *status; /* the ready hook's status word (pad scratch 0)                         */
  const float *row_scale; /* meld_ag_gemm_fp8 rowwise: the shard's row scales, carried by the comm
                             CTAs with each chunk into the staging's scale area (after the P
                             m_loc_pad rows; gemm_params_t.fp8_rows bit 2); NULL = none   */
  uint8_t *stage[AG_GEMM_MAX_RANKS]; /* rank r's staging as mapped here; [rank] = own      */
} ag_kargs_t;

/* ---- device side ------------------------------------------------------------------------- */

/* Waits until at most N of this thread's bulk groups are still reading their smem source. */
template <int N>
MELD_DEV void ag_bulk_wait_read(void) {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}
/* Invalidates an mbarrier so its shared memory can be reused by the GEMM engine. */
MELD_DEV void ag_mbar_inval(uint32_t bar) {
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}

/* Piece q of a copy of `rows` rows of row_bytes, rows src_ld / dst_ld bytes apart; when both
 * are dense (ld == row_bytes) the rows form one contiguous run. */
typedef struct {
  const uint8_t *src;
  uint8_t *dst;
  int64_t rows, row_bytes, src_ld, dst_ld;
  int64_t run_bytes, runs, pieces_per_run;
} ag_copy_t;

MELD_DEV ag_copy_t ag_copy_make(const uint8_t *src, int64_t src_ld, uint8_t *dst, int64_t dst_ld, int64_t rows,
                                int64_t row_bytes) {
  ag_copy_t c;
  c.src = src, c.dst = dst, c.rows = rows, c.row_bytes = row_bytes, c.src_ld = src_ld, c.dst_ld = dst_ld;
  const bool dense = src_ld == row_bytes && dst_ld == row_bytes;
  c.run_bytes = dense ? rows * row_bytes : row_bytes;
  c.runs = dense ? 1 : rows;
  c.pieces_per_run = (c.run_bytes + AGB_PIECE - 1) / AGB_PIECE;
  return c;
}

/* Every thread of the CTA copies (16-byte stores; any alignment works, copy.cuh). */
MELD_DEV void ag_copy_vec(const ag_copy_t *c) {
  for (int64_t r = 0; r < c->runs; r++)
    copy_bytes(c->dst + r * c->dst_ld, c->src + r * c->src_ld, (size_t)c->run_bytes, threadIdx.x, blockDim.x);
}

/* One thread copies through shared memory with bulk copies (16-byte aligned, sizes multiples
 * of 16: k % 8 == 0 and aligned bases, checked by validation). *gpiece counts pieces over
 * the CTA's lifetime (buffer = g % NB, mbarrier parity = (g / NB) & 1). Returns with every
 * write complete (wait_group 0). */
/* Issues the bulk load of piece q (global piece g0 + q) into its buffer. */
MELD_DEV void ag_bulk_load(const ag_copy_t *c, int64_t q, uint32_t g0, uint32_t sbase) {
  const int64_t run = q / c->pieces_per_run, off = (q % c->pieces_per_run) * AGB_PIECE;
  const uint32_t len = (uint32_t)min((int64_t)AGB_PIECE, c->run_bytes - off);
  const uint32_t b = (g0 + (uint32_t)q) % AGB_NB;
  const uint32_t bar = sbase + AGB_BAR_OFF + 8 * b;
  mbarrier_arrive_expect_tx_cta(bar, len);
  cp_async_bulk_g2s(sbase + b * AGB_PIECE, c->src + run * c->src_ld + off, len, bar);
}

MELD_DEV void ag_copy_bulk(const ag_copy_t *c, uint32_t sbase, uint32_t *gpiece) {
  const int64_t np = c->runs * c->pieces_per_run;
  const uint32_t g0 = *gpiece;
  for (int64_t q = 0; q < np && q < AGB_NB; q++) ag_bulk_load(c, q, g0, sbase);
  for (int64_t q = 0; q < np; q++) {
    const uint32_t g = g0 + (uint32_t)q, b = g % AGB_NB;
    mbar_wait(sbase + AGB_BAR_OFF + 8 * b, (g / AGB_NB) & 1u);
    const int64_t run = q / c->pieces_per_run, off = (q % c->pieces_per_run) * AGB_PIECE;
    const uint32_t len = (uint32_t)min((int64_t)AGB_PIECE, c->run_bytes - off);
    cp_async_bulk_s2g(c->dst + run * c->dst_ld + off, sbase + b * AGB_PIECE, len);
    cp_async_bulk_commit_group();
    /* Refill the buffer of piece q - LAG once its store has read it (<= LAG groups reading). */
    const int64_t r = q - AGB_LAG;
    if (r >= 0 && r + AGB_NB < np) {
      ag_bulk_wait_read<AGB_LAG>();
      ag_bulk_load(c, r + AGB_NB, g0, sbase);
    }
  }
  cp_async_bulk_wait_group0(); /* writes performed: a release by this thread publishes them */
  *gpiece = g0 + (uint32_t)np;
}

/* Rank r's staging's scale area (meld_ag_gemm_fp8 rowwise): nranks x m_loc_pad fp32 after the
 * rows, rank q's shard's at q m_loc_pad (the tile rows' own index). */
MELD_DEV float *ag_scale_stage(const ag_kargs_t *a, int r) {
  return (float *)(a->stage[r] + (int64_t)a->nranks * a->m_loc_pad * a->k * 2);
}

/* Chunk j of this rank's shard -> rank dst's staging (and its rows' scales, when carried). All
 * threads; returns after the signal is released. */
/* Loopback (a->loop; one real rank planned as rank 0 of 2): a push to the virtual peer (dst 1)
 * acts as rank 1 pushing its shard (this rank's own) to rank 0: into this rank's own staging at
 * rank 1's rows, signalled in this rank's pad where the GEMM's ready hook waits for rank 1's
 * chunk. So the 2-rank kernel's pushes, signals and waits run on one GPU without NVLink, and
 * the gathered A is [shard; shard]. */
MELD_DEV void ag_push_chunk(meld_ctx_t *ctx, const ag_kargs_t *a, int dst, int64_t j, uint32_t sbase,
                            uint32_t *gpiece) {
  const int64_t row0 = j * a->chunk_rows;
  const int64_t rows = min(a->chunk_rows, a->m_loc - row0);
  const int64_t rb = a->k * 2;
  const int lb = a->loop && dst != a->rank; /* loopback: as rank 1 into our own staging */
  const int src_rank = lb ? 1 : a->rank;
  if (rows > 0) {
    const ag_copy_t c = ag_copy_make(a->a_shard + row0 * a->lda * 2, a->lda * 2,
                                     a->stage[lb ? a->rank : dst] + ((int64_t)src_rank * a->m_loc_pad + row0) * rb,
                                     rb, rows, rb);
    if (a->copy == AG_GEMM_COPY_BULK) {
      if (threadIdx.x == 0) ag_copy_bulk(&c, sbase, gpiece);
    } else {
      ag_copy_vec(&c);
    }
    if (a->row_scale) { /* the chunk's row scales, published by the same release */
      float *ds = ag_scale_stage(a, lb ? a->rank : dst) + (int64_t)src_rank * a->m_loc_pad + row0;
      for (int64_t i = threadIdx.x; i < rows; i += blockDim.x) ds[i] = a->row_scale[row0 + i];
    }
  }
  /* bar.sync: every thread's stores (or thread 0's completed bulk writes) precede the release. */
  __syncthreads();
  if (threadIdx.x == 0) {
    const uint32_t idx = meld_signal_index(src_rank, a->nranks, 0, (uint32_t)j, (uint32_t)a->chunks_per_rank);
    if (lb) st_release_sys_u64(meld_local_signal(ctx, idx), meld_stamp(ctx->epoch, 1));
    else meld_signal_put(ctx, dst, idx, meld_stamp(ctx->epoch, 1));
  }
}

/* Comm role of CTA c (of comm_ctas): pushes in arrival order (phase t = 1 .. P-1). */
/* Not inlined: its registers stay out of the engine's budget (inlined, the kernel spilled). */
__device__ __noinline__ void ag_comm(meld_ctx_t ctx_v, const ag_kargs_t *a, uint32_t c, uint8_t *smem) {
  meld_ctx_t *ctx = &ctx_v;
  const uint32_t sbase = (smem_addr(smem) + 1023u) & ~1023u;
  uint32_t gpiece = 0;
  if (a->copy == AG_GEMM_COPY_BULK && threadIdx.x == 0) {
    for (int b = 0; b < AGB_NB; b++) mbarrier_init_cta(sbase + AGB_BAR_OFF + 8 * b, 1);
    fence_proxy_async_smem_cta(); /* the async proxy (bulk loads' complete_tx) sees the inits */
  }
  __syncthreads();
  const int64_t cpr = a->chunks_per_rank;
  const int64_t items = (int64_t)a->nranks * cpr;
  const int t0 = a->inplace ? 1 : 0; /* phase 0 = the own staging (only when not in place) */
  for (int64_t i = c; i < items - t0 * cpr; i += a->comm_ctas) {
    const int t = t0 + (int)(i / cpr);
    const int64_t j = i % cpr;
    const int dst = (a->rank - t + a->nranks) % a->nranks;
    const uint64_t t0 = meld_trace_begin(ctx);
    ag_push_chunk(ctx, a, dst, j, sbase, &gpiece);
    if (threadIdx.x == 0) meld_trace_end(ctx, MELD_ROLE_COMM, (uint32_t)i, t0);
  }
  /* Gathered-A output: rows of rank r, chunk j (own rows straight from the shard, first:
   * they need no wait). */
  if (a->a_gathered && !ctx->failed) {
    const int64_t rb = a->k * 2;
    for (int64_t i = c; i < items; i += a->comm_ctas) {
      const int r = (a->rank + (int)(i / cpr)) % a->nranks;
      const int64_t j = i % cpr, row0 = j * a->chunk_rows;
      const int64_t rows = min(a->chunk_rows, a->m_loc - row0);
      if (rows <= 0) continue;
      const uint8_t *src;
      int64_t src_ld;
      if (r == a->rank) {
        src = a->a_shard + row0 * a->lda * 2, src_ld = a->lda * 2;
      } else {
        if (!meld_cta_wait_signal(ctx, meld_signal_index(r, a->nranks, 0, (uint32_t)j, (uint32_t)cpr),
                                  meld_stamp(ctx->epoch, 1), r, "ag_gemm: chunk for a_gathered"))
          break;
        src = a->stage[a->rank] + ((int64_t)r * a->m_loc_pad + row0) * rb, src_ld = rb;
      }
      const uint64_t t0 = meld_trace_begin(ctx);
      const ag_copy_t cp = ag_copy_make(src, src_ld, a->a_gathered + ((int64_t)r * a->m_loc + row0) * a->ld_gathered * 2,
                                        a->ld_gathered * 2, rows, rb);
      ag_copy_vec(&cp);
      __syncthreads();
      if (threadIdx.x == 0) meld_trace_end(ctx, MELD_ROLE_OTHER, (uint32_t)i, t0);
    }
  }
  if (a->copy == AG_GEMM_COPY_BULK && threadIdx.x == 0)
    for (int b = 0; b < AGB_NB; b++) ag_mbar_inval(sbase + AGB_BAR_OFF + 8 * b);
  __syncthreads(); /* the engine's barrier inits and TMA writes reuse this smem */
}

/* Comm warps (plan comm_warps; no comm CTAs): warps 2 and 3 of every CTA's producer warpgroup
 * (the engine's side work: 40 registers, no shared memory, no CTA barriers) push the shard
 * WHILE the CTA's consumers run tiles. Chunk (phase t, j) is cut into side_pieces pieces
 * (plan: side_rows whole rows of <= AG_GEMM_SIDE_PIECE bytes, or 1 / side_ppr of a longer row;
 * pieces past a short chunk's rows are empty and still count); global warp gw of nw takes pieces gw, gw + nw, ... in arrival order (phase,
 * chunk, piece), so all warps work on the first chunks first. After its piece a warp counts it
 * in this rank's pad (the credit slot of the chunk's (phase, chunk) index: AG+GEMM uses no
 * credits) as a stamp (epoch, pieces so far): a count of an older call, whatever it reached,
 * restarts at 1, so no reset is needed and a failed call leaves nothing behind. The warp that
 * counts the last piece releases the chunk's signal to its consumer, the same stamp a comm
 * CTA releases. Ordering: every lane's 16-byte stores -> __syncwarp -> lane 0's
 * fence.acq_rel.sys -> its CAS (acq_rel): the last counter's CAS acquires every earlier
 * piece's, so its st.release.sys (cumulative) publishes every piece's stores. Nothing here
 * waits: the side warps never hold up the GEMM, and a failed call still ends. */
/* Chunk of global piece g: *t = phase, *j = chunk, *dst = the consumer, *lb = loopback to
 * ourselves as rank 1; returns the piece's index within its chunk. */
MELD_DEV int ag_side_piece(const ag_kargs_t *a, int g, int *t, int *j, int *dst, int *lb) {
  const int npc = a->side_pieces, cpr = (int)a->chunks_per_rank, cj = g / npc; /* (t - t0) * cpr + j */
  *t = (a->inplace ? 1 : 0) + cj / cpr, *j = cj % cpr;
  *dst = (a->rank - *t + a->nranks) % a->nranks;
  *lb = a->loop && *dst != a->rank;
  return g - cj * npc;
}

MELD_DEV void ag_side_push(const meld_proto_dev_t *proto, const ag_kargs_t *a, int gw, int nw, int lane) {
  /* (40 registers: 32-bit indices; all but g re-derived after the copy, sizes re-read from the
   * parameters, the epoch from shared memory) */
  const int total = (a->nranks - (a->inplace ? 1 : 0)) * (int)a->chunks_per_rank * a->side_pieces; /* (plan) */
  __shared__ uint64_t tr0[2]; /* a piece's trace start (in a register it spilled) */
  for (int g = gw; g < total; g += nw) {
    if (lane == 0) tr0[gw & 1] = meld_trace_now(&proto->trace);
    { /* piece q of chunk j: rows [row0, row0 + rows), bytes [c0, c0 + clen) of each */
      int t, j, dst, lb;
      const int q = ag_side_piece(a, g, &t, &j, &dst, &lb);
      int64_t row0, c0, clen;
      int rows;
      ag_gemm_side_piece(a->chunk_rows, a->m_loc, a->k, a->side_rows, a->side_ppr, j, q, &row0, &rows, &c0, &clen);
      const int64_t rb = a->k * 2;
      const uint8_t *src = a->a_shard + row0 * a->lda * 2 + c0;
      uint8_t *dp = a->stage[lb ? a->rank : dst] + ((int64_t)(lb ? 1 : a->rank) * a->m_loc_pad + row0) * rb + c0;
      const bool run = a->lda * 2 == rb && a->side_ppr == 1; /* dense whole rows: one run */
      /* 32-bit vector indices (a run is <= AG_GEMM_SIDE_PIECE bytes); 4 loads per lane in flight.
       * (validation: 16-byte aligned bases, k and lda multiples of 8: runs are whole vectors) */
      const int n16 = (int)((run ? rows * rb : clen) / 16), nr = run ? min(rows, 1) : rows;
      for (int r = 0; r < nr; r++, src += a->lda * 2, dp += rb)
        copy_vec16<4, int>((int4 *)dp, (const int4 *)src, n16, (uint32_t)lane, 32u);
    }
    __syncwarp();
    if (lane == 0) {
      fence_acq_rel_sys();
      int t, j, dst, lb;
      ag_side_piece(a, g, &t, &j, &dst, &lb);
      const uint64_t epoch = meld_cta_shared()->epoch;
      const uint32_t cj = (uint32_t)(g / a->side_pieces);
      uint64_t *ctr = (uint64_t *)(proto->pad + meld_pad_credit_offset(cj));
      uint64_t old = *(volatile uint64_t *)ctr, now;
      for (;;) {
        now = meld_stamp_epoch(old) == epoch ? old + 1 : meld_stamp(epoch, 1);
        const uint64_t seen = atom_cas_acq_rel_sys_u64(ctr, old, now);
        if (seen == old) break;
        old = seen;
      }
      if (meld_stamp_seq(now) == (uint32_t)a->side_pieces) {
        const uint32_t idx =
            meld_signal_index(lb ? 1 : a->rank, a->nranks, 0, (uint32_t)j, (uint32_t)a->chunks_per_rank);
        uint8_t *pad = lb ? proto->pad : proto->peer_pads[dst];
        st_release_sys_u64((uint64_t *)(pad + meld_pad_signal_offset(idx)), meld_stamp(epoch, 1));
      }
      meld_trace_record(&proto->trace, MELD_ROLE_COMM, (uint32_t)g, epoch, tr0[gw & 1]);
    }
    __syncwarp();
  }
}

/* The engine's side work in the fused kernel: the comm warps' pushes (when planned). */
struct ag_side {
  const meld_proto_dev_t *proto;
  const ag_kargs_t *a;
  __device__ __forceinline__ void operator()(int w, int lane) const {
    if (a->comm_warps) ag_side_push(proto, a, (int)blockIdx.x * 2 + w, (int)gridDim.x * 2, lane);
  }
};

/* DEFER = a.g.epi_defer: the engine's deferred epilogue (a tile's second half stored while the
 * next tile's first k-block runs; plain TMA-store path only). */
/* SKQ = (a.g.sk_tiles > 0): stream-K pieces are not taken from the queue but run by their own
 * worker (gemm.cuh gemm_producer). */
/* BN = the GEMM's tile width (GEMM_BN_WIDE: B [N,K], DEFER 0, no SKQ; plan tile_n 320). */
/* F8: meld_ag_gemm_fp8 (e4m3 A and B as bf16 of half the K; gemm.cuh gemm_params_t.fp8). */
template <bool BKN, int DEFER, bool SKQ = false, int BN = GEMM_BN, bool F8 = false>
__global__ void __launch_bounds__(GEMM_THREADS, 1)
    ag_gemm_kernel(const __grid_constant__ meld_proto_dev_t proto, const __grid_constant__ ag_kargs_t a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) uint8_t ag_smem[];
  __shared__ uint64_t gemm_t0;
  bool run_gemm = false;
  {
    meld_ctx_t ctx;
    if (meld_call_begin(&ctx, &proto, MELD_OP_AG_GEMM, a.arg_hash, a.handshake_only ? 0u : (uint32_t)a.comm_ctas) &&
        !a.handshake_only) {
      if (ctx.role == MELD_ROLE_COMM) ag_comm(ctx, &a, ctx.ticket, ag_smem);
      run_gemm = a.has_gemm != 0;
      if (threadIdx.x == 0) gemm_t0 = meld_trace_begin(&ctx);
    }
  }
  /* Every CTA whose entry succeeded runs the engine (comm CTAs join when done), so that the
   * engine's worker count is the grid. A failed call leaves the flags unset: the ready hook
   * sees the abort word (or its deadline) and the engine drains. */
  static_assert(BN == GEMM_BN || (!BKN && DEFER == 0 && !SKQ), "the wide tile: B [N,K], no deferral, no SKQ");
  if (run_gemm)
    gemm_cta_run<BKN, false, false, DEFER, false, SKQ, gemm_no_tail, ag_side, BN, -1, false, F8>(
        &a.g, ag_smem, (int)blockIdx.x, (int)gridDim.x, gemm_no_tail(), ag_side{&proto, &a});
  /* Post-engine work by thread 128 (a consumer thread: the engine left warpgroup 0 with 40
   * registers). A fresh ctx: nothing of the entry's stays live across the engine. */
  __syncthreads();
  if (threadIdx.x == 128) {
    meld_cta_shared_t *s = meld_cta_shared();
    meld_ctx_t ctx;
    ctx.p = &proto;
    ctx.epoch = s->epoch;
    ctx.op = MELD_OP_AG_GEMM;
    ctx.arg_hash = a.arg_hash;
    ctx.ticket = s->ticket;
    ctx.role = meld_role_of_ticket(s->ticket, (uint32_t)a.comm_ctas);
    ctx.cta = blockIdx.x;
    ctx.failed = 0;
    if (run_gemm) {
      meld_trace_end(&ctx, MELD_ROLE_COMPUTE, s->ticket, gemm_t0);
      const uint32_t st = *(volatile uint32_t *)a.status;
      if (st != GEMM_STATUS_OK) /* the ready hook gave up: record why (first failure wins) */
        meld_fail(&ctx, st == GEMM_STATUS_TIMEOUT ? MELD_FAIL_TIMEOUT : MELD_FAIL_ABORTED,
                  meld_wait_info(MELD_REGION_SIGNAL, 0, -1, "ag_gemm: A rows ready"), meld_stamp(ctx.epoch, 1), 0,
                  0, ld_relaxed_sys_u32(meld_abort_word(&proto)));
    }
    meld_call_end_thread(&ctx);
  }
#endif
}

/* ---- host side ------------------------------------------------------------------------------- */

#define AG_MAX_DEVICES 64
static int g_dev_ready[AG_MAX_DEVICES];

static meld_result_t ag_device_setup(int dev, int sm_count) {
  if (dev < AG_MAX_DEVICES && g_dev_ready[dev]) return MELD_OK;
  int major = 0;
  MELD_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  if (major != 9)
    return meld_error(MELD_ERR_UNSUPPORTED,
                      "meld_ag_gemm: device %d has compute capability %d.x; the fused kernel needs Hopper (sm_90a)",
                      dev, major);
  int grid = 0;
  MELD_CHECK(meld_coop_grid((const void *)ag_gemm_kernel<false, 0>, GEMM_THREADS, GEMM_SMEM_BYTES, 0, sm_count, &grid));
  MELD_CHECK(meld_coop_grid((const void *)ag_gemm_kernel<true, 0>, GEMM_THREADS, GEMM_SMEM_BYTES, 0, sm_count, &grid));
  MELD_CHECK(meld_coop_grid((const void *)ag_gemm_kernel<false, 1>, GEMM_THREADS, GEMM_SMEM_BYTES, 0, sm_count, &grid));
  MELD_CHECK(meld_coop_grid((const void *)ag_gemm_kernel<true, 1>, GEMM_THREADS, GEMM_SMEM_BYTES, 0, sm_count, &grid));
  MELD_CHECK(meld_coop_grid((const void *)ag_gemm_kernel<false, 0, true>, GEMM_THREADS, GEMM_SMEM_BYTES, 0, sm_count, &grid));
  MELD_CHECK(meld_coop_grid((const void *)ag_gemm_kernel<false, 1, true>, GEMM_THREADS, GEMM_SMEM_BYTES, 0, sm_count, &grid));
  MELD_CHECK(meld_coop_grid((const void *)ag_gemm_kernel<false, 0, false, GEMM_BN_WIDE>, GEMM_THREADS, GEMM_SMEM_BYTES, 0,
                            sm_count, &grid));
  const void *f8[] = {(const void *)ag_gemm_kernel<false, 0, false, GEMM_BN, true>,
                      (const void *)ag_gemm_kernel<false, 1, false, GEMM_BN, true>,
                      (const void *)ag_gemm_kernel<false, 0, true, GEMM_BN, true>,
                      (const void *)ag_gemm_kernel<false, 1, true, GEMM_BN, true>,
                      (const void *)ag_gemm_kernel<false, 0, false, GEMM_BN_WIDE, true>};
  for (int i = 0; i < 5; i++) MELD_CHECK(meld_coop_grid(f8[i], GEMM_THREADS, GEMM_SMEM_BYTES, 0, sm_count, &grid));
  if (dev < AG_MAX_DEVICES) g_dev_ready[dev] = 1;
  return MELD_OK;
}

static void ag_gemm_args_of(const meld_ag_gemm_args_t *a, const void *A, int64_t lda, int64_t m, meld_gemm_args_t *g) {
  memset(g, 0, sizeof *g);
  g->a = A;
  g->lda = lda;
  g->b = a->b;
  g->ldb = a->ldb;
  g->b_layout = a->b_layout;
  g->c = a->c;
  g->ldc = a->ldc;
  g->m = m;
  g->n = a->n_loc;
  g->k = a->k;
}

/* meld_gemm's defaults on g, in fp8 where f8 is given (g is then the bf16 view). */
static meld_result_t ag_gemm_plain(const meld_gemm_args_t *g, const gemm_fp8_t *f8, cudaStream_t stream) {
  return f8 ? gemm_launch_fp8(g, f8, stream) : gemm_launch(g, NULL, stream);
}

/* One rank: C = A_shard x B, and the shard copied to a_gathered. */
static meld_result_t ag_run_direct(const meld_ag_gemm_args_t *a, const gemm_fp8_t *f8, cudaStream_t stream) {
  if (a->n_loc > 0) {
    meld_gemm_args_t g;
    ag_gemm_args_of(a, a->a_shard, a->lda, a->m_loc, &g);
    MELD_CHECK(ag_gemm_plain(&g, f8, stream));
  }
  if (a->a_gathered)
    MELD_CUDA_CHECK(cudaMemcpy2DAsync(a->a_gathered, (size_t)a->ld_gathered * 2, a->a_shard, (size_t)a->lda * 2,
                                      (size_t)a->k * 2, (size_t)a->m_loc, cudaMemcpyDeviceToDevice, stream));
  return MELD_OK;
}

/* meld_all_gather into a contiguous [M, k] buffer (a_gathered when it is dense), then
 * meld_gemm on it. A strided shard is first copied into its place (in-place all-gather). */
static meld_result_t ag_run_unfused(struct meld_comm *comm, const meld_ag_gemm_args_t *a, const gemm_fp8_t *f8,
                                    cudaStream_t stream) {
  const int P = comm->nranks;
  const int64_t M = a->m_loc * P;
  const size_t bytes = (size_t)M * (size_t)a->k * 2;
  uint8_t *buf = NULL;
  if (a->a_gathered && a->ld_gathered == a->k) buf = (uint8_t *)a->a_gathered;
  else /* (the comm's scratch, shared with GEMM+RS/AR's unfused path) */
    MELD_CHECK(meld_comm_scratch(comm, "meld_ag_gemm", "run the call once before capturing, or pass a_gathered with ld_gathered = k",
                                 bytes, stream, (void **)&buf));
  const size_t count = (size_t)a->m_loc * (size_t)a->k;
  const void *send = a->a_shard;
  if (a->lda != a->k) {
    uint8_t *mine = buf + (size_t)comm->rank * count * 2;
    MELD_CUDA_CHECK(cudaMemcpy2DAsync(mine, (size_t)a->k * 2, a->a_shard, (size_t)a->lda * 2, (size_t)a->k * 2,
                                      (size_t)a->m_loc, cudaMemcpyDeviceToDevice, stream));
    send = mine;
  }
  MELD_CHECK(meld_all_gather(comm, send, buf, count, MELD_BF16, stream));
  if (a->n_loc > 0) {
    meld_gemm_args_t g;
    ag_gemm_args_of(a, buf, a->k, M, &g);
    MELD_CHECK(ag_gemm_plain(&g, f8, stream));
  }
  if (a->a_gathered && (uint8_t *)a->a_gathered != buf)
    MELD_CUDA_CHECK(cudaMemcpy2DAsync(a->a_gathered, (size_t)a->ld_gathered * 2, buf, (size_t)a->k * 2,
                                      (size_t)a->k * 2, (size_t)M, cudaMemcpyDeviceToDevice, stream));
  return MELD_OK;
}

/* Fills the fused kernel's arguments (GEMM plan and hooks included). */
static meld_result_t ag_kargs_fill(struct meld_comm *comm, const meld_ag_gemm_args_t *a, const ag_gemm_plan_t *p,
                                   const gemm_fp8_t *f8, int loop, cudaStream_t stream, ag_kargs_t *k) {
  memset(k, 0, sizeof *k);
  const int P = loop ? 2 : comm->nranks, me = loop ? 0 : comm->rank;
  uint8_t *pad = (uint8_t *)comm->pad.local;
  k->rank = me;
  k->nranks = P;
  k->loop = loop;
  k->comm_ctas = p->comm_ctas;
  k->comm_warps = p->comm_warps;
  k->side_pieces = (int32_t)p->side_pieces;
  k->side_rows = p->side_rows;
  k->side_ppr = p->side_ppr;
  k->copy = p->copy;
  k->has_gemm = a->n_loc > 0;
  k->arg_hash = ag_gemm_arg_hash(p);
  k->inplace = p->inplace;
  k->m_loc = p->m_loc;
  k->m_loc_pad = p->m_loc_pad;
  k->k = p->k;
  k->lda = a->lda;
  k->chunk_rows = p->chunk_rows;
  k->chunks_per_rank = p->chunks_per_rank;
  k->a_shard = (const uint8_t *)a->a_shard;
  k->a_gathered = (uint8_t *)a->a_gathered;
  k->ld_gathered = a->ld_gathered;
  k->status = (uint32_t *)(pad + MELD_PAD_OFF_SCRATCH);
  for (int r = 0; r < P; r++) k->stage[r] = loop ? (uint8_t *)comm->workspace.local : (uint8_t *)comm->workspace.peer[r];
  k->stage[me] = (uint8_t *)comm->workspace.local;
  /* (the comm CTAs carry the rows' scales also where this rank computes nothing: n_loc 0) */
  if (f8 && f8->shard_rows) k->row_scale = f8->scale_a;
  if (!k->has_gemm) return MELD_OK;
  meld_gemm_args_t g;
  ag_gemm_args_of(a, comm->workspace.local, p->k, (int64_t)P * p->m_loc_pad, &g);
  gemm_plan_opts_t o = GEMM_PLAN_OPTS_INIT;
  o.sm_count = p->grid;
  o.cluster_m = 1;
  o.split_k = 1;
  o.group_m = p->group_m;
  o.epi_tma = p->compact ? 0 : -1;
  o.epi_defer = p->epi_defer ? 2 : 1; /* the engine keeps it off where it stores without TMA */
  o.tile_n = p->tile_n == GEMM_BN_WIDE ? GEMM_BN_WIDE : GEMM_BN; /* (the wide tile: early release, the plan's) */
  /* Stream-K (plan->stream_k): with sk_pieces n >= 1 each stream-K tile is cut into n pieces
   * that are queue tickets like tiles (any CTA, comm CTAs included once they join, takes the
   * next); with 0, one range per worker, run by that worker after the queue (SKQ). Each piece
   * waits for its rows like a tile; pieces combine through the op's private workspace (no CTA
   * waits for another). */
  gemm_plan_opts_t o_map = o; /* for the second A map only */
  o_map.tile_n = GEMM_BN;
  if (p->stream_k) o.stream_k = p->stream_k == 2 ? 3 : 2;
  o.sk_pieces = p->sk_pieces;
  o.sk_extra = p->sk_extra;
  int workers = 0;
  MELD_CHECK(gemm_plan_make(&g, &o, &k->g, &workers));
  if (k->g.sk_tiles > 0) {
    float *ws = NULL;
    uint32_t *ctr = NULL;
    if (gemm_stream_workspace(GEMM_WS_AG_GEMM, stream, gemm_plan_workspace_bytes(&k->g), gemm_plan_counter_words(&k->g), &ws,
                     &ctr)) {
      o.stream_k = 1; /* no workspace (capturing, out of memory): whole tiles */
      MELD_CHECK(gemm_plan_make(&g, &o, &k->g, &workers));
    } else {
      k->g.workspace = ws;
      k->g.counters = ctr;
    }
  }
  gemm_params_t *gp = &k->g;
  if (f8) gp->fp8 = 1, gp->fp8_rows = f8->rows, gp->scale_a = f8->scale_a, gp->scale_b = f8->scale_b;
  if (f8 && f8->shard_rows) { /* rowwise scale_a carried with the chunks by the comm CTAs (ag_push_chunk) */
    gp->fp8_rows = f8->rows | 4;
    gp->scale_a = (const float *)((const uint8_t *)comm->workspace.local + p->ws_bytes);
    gp->scale_a2 = p->inplace ? f8->scale_a : NULL;
  }
  /* Hook h: this rank's m-blocks read the shard in place. The map is the one the engine's
   * planner encodes for A = the shard alone ([m_loc, k], ld lda); rows past m_loc of the last
   * block read as zeros (the compact epilogue drops them). */
  if (p->inplace) {
    meld_gemm_args_t g2;
    ag_gemm_args_of(a, a->a_shard, a->lda, p->m_loc, &g2);
    gemm_params_t own;
    int w2 = 0;
    MELD_CHECK(gemm_plan_make(&g2, &o_map, &own, &w2));
    gp->map_a2 = own.map_a;
    gp->a2_row_begin = (int32_t)((int64_t)me * p->m_loc_pad);
    gp->a2_rows = (int32_t)p->m_loc_pad;
  }
  gp->workers = p->grid;
  gp->ready.flags = (const uint64_t *)(pad + meld_pad_signal_offset(0));
  gp->ready.rows_per_flag = (int32_t)p->chunk_rows;
  gp->ready.epoch = 1; /* the stamp's sequence number */
  gp->ready.epoch_counter = (const uint64_t *)(pad + MELD_PAD_OFF_COUNTER);
  gp->ready.epoch_shift = MELD_STAMP_SEQ_BITS;
  gp->ready.abort_word = (const uint32_t *)(pad + MELD_PAD_OFF_ABORT);
  gp->ready.timeout_ns = (uint64_t)comm->cfg.timeout_ms * 1000000ull;
  gp->ready.status = k->status;
  gp->order.m_rotate = (int32_t)((int64_t)me * p->m_loc_pad / AG_GEMM_BM);
  gp->order.queue = (uint32_t *)(pad + MELD_PAD_OFF_QUEUES); /* queues 0, 1: per-call scratch */
  gp->trace = meld_proto_dev(comm).trace; /* per-tile timeline with MELD_TRACE (gemm.cuh) */
  /* MELD_AG_GEMM_DIAG bit 0 (timing diagnostic, one rank only: with peers, comm CTAs would run
   * their static share of tiles late): the engine's static schedule instead of the queue. */
  {
    const char *dg = getenv("MELD_AG_GEMM_DIAG");
    if (dg && (atoi(dg) & 1) && P == 1) gp->order.queue = NULL;
    /* Bits 2 and 3 (timing diagnostics at P > 1, WRONG RESULTS: what the 2-GPU kernel pays
     * beyond the loopback's): bit 2 = the GEMM never waits for rows (ready hook off: peers'
     * rows are read as they are); bit 3 = the pushes land in this rank's own staging instead
     * of the peer's (no NVLink data; the flags still go to the peer, so its waits keep their
     * timing). */
    if (dg && (atoi(dg) & 4) && P > 1) gp->ready.flags = NULL;
    if (dg && (atoi(dg) & 8) && P > 1)
      for (int r = 0; r < P; r++) k->stage[r] = (uint8_t *)comm->workspace.local;
  }
  if (p->compact) {
    gp->epi.rows_per_owner = (int32_t)p->m_loc_pad;
    gp->epi.rows_valid = (int32_t)p->m_loc;
  }
  char why[256];
  if (gemm_params_check(gp, p->grid, why, sizeof why))
    return meld_error(MELD_ERR_INTERNAL, "meld_ag_gemm: GEMM plan rejected: %s", why);
  return MELD_OK;
}

/* skq: stream-K with one range per worker (plan sk_pieces 0) */
static meld_result_t ag_launch(struct meld_comm *comm, ag_kargs_t *k, int grid, int b_kn, int skq,
                               cudaStream_t stream) {
  meld_proto_dev_t proto = meld_proto_dev(comm);
  void *args[] = {&proto, k};
  const int d = k->g.epi_defer ? 1 : 0;
  const void *fn;
  if (k->g.fp8) { /* (B [N,K] only) */
    if (k->g.bn == GEMM_BN_WIDE) fn = (const void *)ag_gemm_kernel<false, 0, false, GEMM_BN_WIDE, true>;
    else if (k->g.sk_tiles > 0 && skq)
      fn = d ? (const void *)ag_gemm_kernel<false, 1, true, GEMM_BN, true>
             : (const void *)ag_gemm_kernel<false, 0, true, GEMM_BN, true>;
    else
      fn = d ? (const void *)ag_gemm_kernel<false, 1, false, GEMM_BN, true>
             : (const void *)ag_gemm_kernel<false, 0, false, GEMM_BN, true>;
    return meld_launch_coop(fn, grid, GEMM_THREADS, GEMM_SMEM_BYTES, args, stream);
  }
  /* stream-K with one range per worker (sk_pieces 0): each worker runs its own range after the
   * queue (B [N,K] only: with B [K,N] the producer's 40 registers spilled 4 bytes, so there the
   * ranges still come from the queue); with n pieces per tile they come from the queue */
  if (k->g.bn == GEMM_BN_WIDE) /* (the plan: B [N,K], no deferral, no stream-K) */
    fn = (const void *)ag_gemm_kernel<false, 0, false, GEMM_BN_WIDE>;
  else if (k->g.sk_tiles > 0 && skq && !b_kn)
    fn = d ? (const void *)ag_gemm_kernel<false, 1, true> : (const void *)ag_gemm_kernel<false, 0, true>;
  else
    fn = b_kn ? (d ? (const void *)ag_gemm_kernel<true, 1> : (const void *)ag_gemm_kernel<true, 0>)
              : (d ? (const void *)ag_gemm_kernel<false, 1> : (const void *)ag_gemm_kernel<false, 0>);
  return meld_launch_coop(fn, grid, GEMM_THREADS, GEMM_SMEM_BYTES, args, stream);
}

/* meld_ag_gemm_fp8 with per-row scale_a: every rank's m_loc scales gathered into the comm's
 * scratch (meld_all_gather, fp32: rank r's at r m_loc, C's row order; the fused GEMM maps its
 * padded rows onto them, gemm.cuh gemm_fp8_scale). Loopback: this rank's twice. One more
 * kernel a call (a few us; the fused kernel could carry them with the rows: not yet). */
static meld_result_t ag_gather_row_scales(struct meld_comm *comm, const float *shard, int64_t m_loc, int loop,
                                          cudaStream_t stream, const float **out) {
  const int P = loop ? 2 : comm->nranks;
  float *buf = NULL;
  MELD_CHECK(meld_comm_scratch_slot(comm, MELD_SCRATCH_SCALES, "meld_ag_gemm_fp8",
                                    "run a call of this m_loc once before capturing", (size_t)P * (size_t)m_loc * 4,
                                    stream, (void **)&buf));
  if (loop) {
    for (int r = 0; r < 2; r++)
      MELD_CUDA_CHECK(cudaMemcpyAsync(buf + (size_t)r * m_loc, shard, (size_t)m_loc * 4, cudaMemcpyDeviceToDevice,
                                      stream));
  } else {
    MELD_CHECK(meld_all_gather(comm, shard, buf, (size_t)m_loc, MELD_FP32, stream));
  }
  *out = buf;
  return MELD_OK;
}

extern "C" meld_result_t ag_gemm_run(struct meld_comm *comm, const meld_ag_gemm_args_t *args,
                                     const ag_gemm_hint_t *hint, const gemm_fp8_t *f8, cudaStream_t stream,
                                     ag_gemm_plan_t *plan_out) {
  const char *fn = f8 ? "meld_ag_gemm_fp8" : "meld_ag_gemm";
  if (!comm) return meld_error(MELD_ERR_INVALID_ARG, "%s: comm is NULL", fn);
  MELD_CHECK(meld_proto_sticky_error(comm, fn));
  const int sms = meld_comm_node_sm_count(comm);
  /* Loopback (MELD_AG_GEMM_DIAG bit 1, one rank; a test and timing mode): the fused kernel of
   * rank 0 of 2, the virtual peer's shard being this rank's own (ag_push_chunk): C = [shard;
   * shard] x B^T through the 2-rank pushes, signals and ready waits, without NVLink. */
  const char *dg = getenv("MELD_AG_GEMM_DIAG");
  const int loop = comm->nranks == 1 && dg && (atoi(dg) & 2);
  const int Pp = loop ? 2 : comm->nranks;
  ag_gemm_plan_t plan;
  meld_result_t vr = ag_gemm_validate(args, Pp);
  if (vr == MELD_OK) vr = ag_gemm_plan_make_nodes(args, Pp, comm->nnodes, sms, comm->workspace.bytes, hint, &plan);
  plan.fp8 = f8 != NULL; /* (in the argument hash: ranks that disagree on the dtype fail the handshake) */
  if (vr == MELD_OK && loop && plan.schedule != AG_GEMM_FUSED)
    return meld_error(MELD_ERR_UNSUPPORTED, "%s: MELD_AG_GEMM_DIAG=2 (loopback) needs the fused schedule", fn);
  if (vr != MELD_OK) {
    /* A call this rank cannot make must not leave its peers waiting: launch the entry
     * handshake alone with a hash no valid call has. Peers whose call was valid see the
     * mismatch and every rank's comm reports it; if every rank's call was invalid, the
     * hashes agree and nothing happens on the device. */
    if (comm->nranks > 1 && comm->proto) {
      char msg[1024];
      snprintf(msg, sizeof msg, "%s", meld_last_error());
      if (ag_device_setup(comm->device, sms) == MELD_OK) {
        ag_kargs_t k;
        memset(&k, 0, sizeof k);
        k.handshake_only = 1;
        k.arg_hash = meld_hash_fold(meld_hash_u64(meld_hash_init(), 0xbad0a66e33ull));
        (void)ag_launch(comm, &k, sms, 0, 0, stream);
      }
      meld_error(vr, "%s", msg);
    }
    return vr;
  }
  if (plan_out) *plan_out = plan;
  if (ag_gemm_is_empty(args)) return MELD_OK;
  if (meld_log_level() >= MELD_LOG_TRACE) {
    char buf[512];
    ag_gemm_plan_format(&plan, buf, sizeof buf);
    MELD_TRACE(MELD_SUB_OPS, "%s: %s", fn, buf);
  }
  /* Per-row scale_a: the fused kernel carries each chunk's scales with its rows (ONE kernel)
   * where the workspace holds them after the staged rows; else (other schedules, the comm
   * warps' pushes (their 40 registers spilled with the copy), a full workspace, or
   * MELD_AG_FP8_SCALES=gather) a small all-gather first. */
  gemm_fp8_t f8g;
  const char *sg = getenv("MELD_AG_FP8_SCALES");
  const int carry = f8 && f8->shard_rows && plan.schedule == AG_GEMM_FUSED && !plan.comm_warps &&
                    !(sg && !strcmp(sg, "gather")) &&
                    plan.ws_bytes + (size_t)Pp * (size_t)plan.m_loc_pad * 4 <= comm->workspace.bytes;
  if (f8 && f8->shard_rows && !carry && plan.schedule != AG_GEMM_DIRECT) { /* every rank's row scales, in C's row order */
    MELD_CHECK(ag_gather_row_scales(comm, f8->scale_a, args->m_loc, loop, stream, &f8g.scale_a));
    f8g.scale_b = f8->scale_b, f8g.rows = f8->rows, f8g.shard_rows = 0;
    f8 = &f8g;
  }
  if (plan.schedule == AG_GEMM_DIRECT) return ag_run_direct(args, f8, stream);
  if (plan.schedule == AG_GEMM_UNFUSED) return ag_run_unfused(comm, args, f8, stream);
  MELD_CHECK(ag_device_setup(comm->device, sms));
  ag_kargs_t k; /* ~1.3 KB of kernel parameters */
  MELD_CHECK(ag_kargs_fill(comm, args, &plan, f8, loop, stream, &k));
  meld_result_t r = ag_launch(comm, &k, plan.grid, args->b_layout == MELD_B_KN, plan.sk_pieces == 0, stream);
  if (r != MELD_OK) meld_error_prefix("%s", fn);
  return r;
}

extern "C" meld_result_t meld_ag_gemm(meld_comm_t comm, const meld_ag_gemm_args_t *args, cudaStream_t stream) {
  meld_error_clear();
  return ag_gemm_run(comm, args, NULL, NULL, stream, NULL);
}

extern "C" meld_result_t meld_ag_gemm_fp8(meld_comm_t comm, const meld_ag_gemm_fp8_args_t *a, cudaStream_t stream) {
  meld_error_clear();
  const char *fn = "meld_ag_gemm_fp8";
  if (!a) return meld_error(MELD_ERR_INVALID_ARG, "%s: args is NULL", fn);
  MELD_CHECK(gemm_fp8_check_k(fn, a->k)); /* (always: the view's k is half of it) */
  if (a->m_loc > 0) {
    if (!a->a_shard) return meld_error(MELD_ERR_INVALID_ARG, "%s: a_shard is NULL", fn);
    if (a->n_loc > 0 && (!a->b || !a->c))
      return meld_error(MELD_ERR_INVALID_ARG, "%s: %s is NULL", fn, !a->b ? "b" : "c");
    MELD_CHECK(gemm_fp8_validate(fn, a->a_shard, a->lda, a->n_loc > 0 ? a->b : a->a_shard,
                                 a->n_loc > 0 ? a->ldb : a->lda, a->k, a->scale_a, a->scale_b, (int)a->scaling));
    if (a->a_gathered && (a->ld_gathered < a->k || a->ld_gathered % 16))
      return meld_error(MELD_ERR_INVALID_ARG, "%s: ld_gathered %lld must be >= k %lld and a multiple of 16", fn,
                        (long long)a->ld_gathered, (long long)a->k);
  }
  /* The bf16 view: the e4m3 rows as bf16 of half the K (same bytes; gemm.cuh gemm_params_t.fp8). */
  meld_ag_gemm_args_t v;
  memset(&v, 0, sizeof v);
  v.a_shard = a->a_shard, v.lda = a->lda / 2, v.b = a->b, v.ldb = a->ldb / 2, v.b_layout = MELD_B_NK;
  v.c = a->c, v.ldc = a->ldc, v.a_gathered = a->a_gathered, v.ld_gathered = a->ld_gathered / 2;
  v.m_loc = a->m_loc, v.n_loc = a->n_loc, v.k = a->k / 2;
  if (!comm) return meld_error(MELD_ERR_INVALID_ARG, "%s: comm is NULL", fn); /* (before any CUDA call) */
  gemm_fp8_t f8;
  MELD_CHECK(gemm_fp8_scales(a->scale_a, a->scale_b, (int)a->scaling, &f8));
  f8.shard_rows = f8.rows & MELD_FP8_ROWWISE_A; /* (the shard's rows: gathered by ag_gemm_run) */
  return ag_gemm_run(comm, &v, NULL, &f8, stream, NULL);
}
