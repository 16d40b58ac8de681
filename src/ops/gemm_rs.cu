/* gemm_rs.cu — GEMM + ReduceScatter and GEMM + AllReduce: the fused kernel (one cooperative
 * persistent launch per call), its launch, and the unfused fallback (meld_gemm, then meld's
 * own reduce-scatter / all-reduce).
 *
 * Fused kernel, every CTA (one per SM, 384 threads, the GEMM engine's shared memory):
 *   1. meld_call_begin: epoch, role ticket, argument handshake (which also proves every peer
 *      finished the previous call, so the staging slots are free: no credits needed).
 *   2. Rewrites the workspace header (the call's stamp and the hook pointer arrays: the same
 *      values from every CTA, so the benign overlap needs no grid barrier).
 *   3. Runs the GEMM engine on all CTAs (static schedule, worker = block index: every CTA is
 *      co-resident (cooperative launch), and the hardware's block-to-SM order keeps CTAs that
 *      share operands near each other: session 8 measured 8% fewer L2 reads and 20% less L2
 *      fabric traffic than with arrival tickets, ~1% faster sustained). Tile order
 *      (m_rotate): the rows of rank r+1 first, then r+2, ..., own rows last; at 3 or more ranks by
 *      default (and opt-in at 2: MELD_GEMM_RS_ORDER=ileave) own and peer rows interleave, own
 *      rows a raster group after the peers' same rows (gemm_rs_plan.c). A tile of another
 *      owner goes through the epilogue redirect into that owner's staging slot (bf16, 16-byte
 *      stores over NVLink) and its flag in the owner's pad is released (value: the stamp from
 *      the header, so graph replays publish fresh values). An own tile waits for the P-1
 *      partials of the same tile (computed by the peers BEFORE their own tiles, so no wait
 *      cycle exists), adds them to its own (bf16-rounded) values in fp32, and stores C
 *      (gemm.cuh hook g).
 *   4. AR only: the reduced tile is also pushed into every peer's result slot and flagged;
 *      after its GEMM work each CTA's consumer warpgroups take peers' reduced tiles from a
 *      queue, wait for their flags and copy them into C.
 *   5. A failed wait in the epilogue (abort, timeout) leaves a status word; one thread turns
 *      it into the error record; meld_call_end advances the epoch.
 * Memory-ordering arguments: next to each wait and release (gemm.cuh hooks, signal.cuh). */
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "coll_plan.h"
#include "comm.h"
#include "device/gemm.cuh"
#include "device/launch.cuh"
#include "error.h"
#include "gemm_plan.h"
#include "gemm_rs_plan.h"
#include "log.h"
#include "proto.h"

typedef struct {
  gemm_params_t g;                         /* engine params; hooks point into the header   */
  /* Hook g2 with several owners (the kernels' G2 2): map s over owner (rank + 1 + s) % P's slot
   * for this rank's partials; right after g, where gemm.cuh gemm_push_map reads them. */
  CUtensorMap map_push[GEMM_PUSH_MAPS];
  /* The AR's several copies by TMA (reduce.copy_tma 2): map s over copies[s] (peer (rank + 1 +
   * s) % P's result slot or C, as gemm_rs_header_fill points it); after map_push, where gemm.cuh
   * gemm_copy_map reads them. */
  CUtensorMap map_copy[GEMM_PUSH_MAPS];
  uint8_t *ws;                             /* this rank's workspace (header at 0)          */
  uint8_t *peer_ws[GEMM_RS_MAX_RANKS];     /* peers' mapped workspaces ([rank] = ws)        */
  uint16_t *c;                             /* user C (AR copy phase)                        */
  int64_t ldc, m, n, rpo, ldn;
  uint64_t slot_bytes;
  int32_t nranks, rank, is_ar, tiles_own, tiles_n, tiles_m;
  uint32_t arg_hash;
  int32_t diag; /* MELD_GEMM_RS_DIAG bit 0: peers' tiles go to this rank's own slots (timing only) */
  int32_t sym;  /* symmetric AR (plan): every rank reduces every tile, no copy phase */
  int32_t zc;   /* AR with C in symmetric memory (meld_mem_alloc): reduced tiles go straight
                   into every peer's C; the tail only waits for the peers' tiles (no copy) */
  uint16_t *peer_c[GEMM_RS_MAX_RANKS]; /* zc: rank q's C as mapped here                    */
  int32_t early; /* AR with result slots: warps 2-3 of the producer warpgroup copy arrived
                    reduced tiles into C during the GEMM (gemm_ar_copy_early)              */
} gemm_rs_kargs_t;
static_assert(offsetof(gemm_rs_kargs_t, map_push) == sizeof(gemm_params_t), "gemm_push_map reads the maps right after g");
static_assert(offsetof(gemm_rs_kargs_t, map_copy) == sizeof(gemm_params_t) + GEMM_PUSH_MAPS * sizeof(CUtensorMap),
              "gemm_copy_map reads the maps after the push maps");


/* Slot index of sender q at owner o. */
__device__ __forceinline__ int gemm_rs_sidx(int q, int o, int P) { return (q - o - 1 + P) % P; }

/* Step 2: the header, from threads 0..P-1 (per-owner arrays) and 32..32+P-2 (per-peer). */
__device__ void gemm_rs_header_fill(const meld_ctx_t *c, const gemm_rs_kargs_t *a) {
  const int P = a->nranks, r = a->rank, t = (int)threadIdx.x;
  uint8_t *h = a->ws;
  const uint64_t hdr = GEMM_RS_HDR_BYTES;
  if (t == 0) *(volatile uint64_t *)(h + GEMM_RS_HDR_STAMP) = meld_stamp(c->epoch, 1);
  if (t < P) {
    const int q = t;
    uint8_t *out = q == r ? a->ws + hdr
                          : (a->diag & 1 ? a->ws : a->peer_ws[q]) + hdr + (uint64_t)gemm_rs_sidx(r, q, P) * a->slot_bytes;
    /* loopback (diag bit 10): the virtual peer's flag is the one this rank's own tiles wait for */
    uint64_t *sig = a->diag & 1024 ? meld_local_signal(c, meld_signal_index(1, P, 0, 0, (uint32_t)a->tiles_own))
                                   : meld_peer_signal(c, q, meld_signal_index(r, P, 0, 0, (uint32_t)a->tiles_own));
    ((void *volatile *)(h + GEMM_RS_HDR_OUT))[q] = out;
    ((uint64_t *volatile *)(h + GEMM_RS_HDR_SIGNAL))[q] = sig;
  }
  if (t >= 32 && t < 32 + P - 1) {
    const int s = t - 32, q = (r + 1 + s) % P;
    ((const uint16_t *volatile *)(h + GEMM_RS_HDR_SRC))[s] = (const uint16_t *)(a->ws + hdr + (uint64_t)s * a->slot_bytes);
    ((const uint64_t *volatile *)(h + GEMM_RS_HDR_FLAGS))[s] =
        meld_local_signal(c, meld_signal_index(q, P, 0, 0, (uint32_t)a->tiles_own));
    /* AR: this rank's reduced tiles go to peer q's result slot, or (zc) straight into q's C at
     * this rank's rows; loopback (the virtual peer q = 1 is this rank): into its own slot, or
     * (zc) its own C at rows [R, 2R), flagged where its own tail waits, so both halves of C
     * must come out equal (gemm_rs_fused's map_cp / map_copy[s] repeat these addresses: keep in step) */
    ((void *volatile *)(h + GEMM_RS_HDR_COPIES))[s] =
        a->zc ? (void *)(a->peer_c[q] + (int64_t)(a->diag & 1024 ? q : r) * a->rpo * a->ldc)
              : (void *)(a->peer_ws[q] + hdr + (uint64_t)(P - 1 + gemm_rs_sidx(r, q, P)) * a->slot_bytes);
    ((uint64_t *volatile *)(h + GEMM_RS_HDR_COPY_SIGNAL))[s] =
        a->diag & 1024 ? meld_local_signal(c, meld_signal_index(q, P, 1, 0, (uint32_t)a->tiles_own))
                       : meld_peer_signal(c, q, meld_signal_index(r, P, 1, 0, (uint32_t)a->tiles_own));
    /* symmetric AR: this rank's partial goes where peer q's SRC reads it, flagged as above */
    ((void *volatile *)(h + GEMM_RS_HDR_PUSH))[s] = a->peer_ws[q] + hdr + (uint64_t)gemm_rs_sidx(r, q, P) * a->slot_bytes;
    if (!(a->diag & 1024))
      ((uint64_t *volatile *)(h + GEMM_RS_HDR_PUSH_SIGNAL))[s] =
          meld_peer_signal(c, q, meld_signal_index(r, P, 0, 0, (uint32_t)a->tiles_own));
  }
  /* Test mode (MELD_GEMM_RS_DIAG bit 7, one rank): one synthetic partial, from the slot area of
   * the workspace (filled by the test), with its flags right after it (the test sets them all
   * ones: every wait passes), so that the 2-rank reduction path runs on one GPU. */
  if ((a->diag & 128) && P == 1 && t == 32) {
    ((const uint16_t *volatile *)(h + GEMM_RS_HDR_SRC))[0] = (const uint16_t *)(a->ws + hdr);
    ((const uint64_t *volatile *)(h + GEMM_RS_HDR_FLAGS))[0] = (const uint64_t *)(a->ws + hdr + a->slot_bytes);
  }
}

/* AR copy-phase item -> (slot s of peer q, owner-local tile): gemm_rs_plan.h gemm_ar_item_tile. */
__device__ __forceinline__ void gemm_ar_item(const gemm_rs_kargs_t *a, uint32_t item, int *s, int *tile) {
  gemm_ar_item_tile(item, (uint32_t)a->tiles_own, (uint32_t)a->tiles_n, (uint32_t)a->g.group_m,
                    a->g.order.ileave_p ? (uint32_t)(a->nranks - 1) : 0u, s, tile);
}

/* The AR copies' next item, for one warp (the early copy below and the tail's copy phase share
 * queue 1, so every item is taken once): lane 0 claims it and waits for the tile's flag
 * (`polite`: first a sleeping poll of the flag alone, bounded to ~5-20 ms, for waits that may
 * last half the GEMM: many spinning waiters slow the GEMM beside them, HOPPER-GEMM-FACTS 8d;
 * diag bit 11 leaves it out). Then __syncwarp orders that acquire before the other lanes'
 * reads of the tile. Returns the item in every lane, or the item count when the queue is
 * drained or the wait gave up. */
__device__ __forceinline__ uint32_t gemm_ar_next(meld_ctx_t *c, const gemm_rs_kargs_t *a, int lane, bool polite) {
  const uint32_t total = (uint32_t)(a->nranks - 1) * (uint32_t)a->tiles_own;
  uint32_t item = 0;
  int ok = 1;
  if (lane == 0) {
    item = meld_queue_next(c, 1);
    if (item < total) {
      int s, tile;
      gemm_ar_item(a, item, &s, &tile);
      const int q = (a->rank + 1 + s) % a->nranks;
      if (q * (int)(a->rpo / GEMM_BM) + tile / a->tiles_n < a->tiles_m) { /* (a short last owner) */
        const uint32_t idx = meld_signal_index(q, a->nranks, 1, (uint32_t)tile, (uint32_t)a->tiles_own);
        if (polite) {
          const uint64_t *slot = meld_local_signal(c, idx);
          const uint32_t *abort_word = meld_abort_word(c->p);
#pragma unroll 1
          for (uint32_t i = (a->diag & 2048) ? (1u << 14) : 0u;
               i < (1u << 14) && ld_relaxed_sys_u64(slot) < meld_stamp(c->epoch, 1) && !ld_relaxed_sys_u32(abort_word);
               ++i)
            nanosleep_ns(256);
        }
        ok = meld_wait_signal(c, idx, meld_stamp(c->epoch, 1), q, "AR reduced tile") ? 1 : 0;
      }
    }
  }
  item = __shfl_sync(0xffffffffu, item, 0);
  ok = __shfl_sync(0xffffffffu, ok, 0);
  __syncwarp();
  return ok ? item : total;
}

/* Where item `item`'s reduced tile is: its origin in the result slot (row pitch ldn) and in C
 * (row pitch ldc), and its rows and columns (rows <= 0: the tile does not exist). */
typedef struct {
  const uint16_t *src;
  uint16_t *dst;
  int rows, cols;
} gemm_ar_tile_t;

__device__ __forceinline__ gemm_ar_tile_t gemm_ar_tile(const gemm_rs_kargs_t *a, uint32_t item) {
  int s, tile;
  gemm_ar_item(a, item, &s, &tile);
  const int64_t lrow0 = (int64_t)(tile / a->tiles_n) * GEMM_BM;
  const int col0 = (tile % a->tiles_n) * GEMM_BN;
  const int64_t grow0 = (int64_t)((a->rank + 1 + s) % a->nranks) * a->rpo + lrow0;
  gemm_ar_tile_t t;
  t.rows = (int)(a->m - grow0 < GEMM_BM ? a->m - grow0 : GEMM_BM);
  t.cols = a->n - col0 < GEMM_BN ? (int)(a->n - col0) : GEMM_BN;
  t.src = (const uint16_t *)(a->ws + GEMM_RS_HDR_BYTES + (uint64_t)(a->nranks - 1 + s) * a->slot_bytes) +
          lrow0 * a->ldn + col0;
  t.dst = a->c + grow0 * a->ldc + col0;
  return t;
}

/* A tile copied element by element by the warp (rows not a multiple of 16 bytes). ld.global.cg:
 * the slot was written by a peer, so no L1 line of an earlier call may answer. */
__device__ __forceinline__ void gemm_ar_copy_elems(const gemm_rs_kargs_t *a, gemm_ar_tile_t t, int lane) {
#pragma unroll 1
  for (int v = lane; v < t.rows * GEMM_BN; v += 32) {
    const int row = v / GEMM_BN, col = v % GEMM_BN;
    if (col < t.cols) t.dst[(int64_t)row * a->ldc + col] = __ldcg(t.src + (int64_t)row * a->ldn + col);
  }
}

/* The AR's early copy (a->early; the engine's side work, gemm_cta_run): warps 2 and 3 of the
 * producer warpgroup (40 registers, no shared memory) take peers' reduced tiles from the
 * copy-phase queue WHILE the GEMM runs and copy each from the result slot into C with 16-byte
 * loads (ld.global.cg) and stores, 2 rows in flight per lane; the consumers' tail (below)
 * takes what is left after the GEMM. */
__device__ __forceinline__ void gemm_ar_copy_early(meld_ctx_t *c, const gemm_rs_kargs_t *a, int lane) {
  /* (40 registers: little stays live across the wait; the rest is re-read from the parameters) */
  for (;;) {
    const uint32_t item = gemm_ar_next(c, a, lane, true);
    if (item >= (uint32_t)(a->nranks - 1) * (uint32_t)a->tiles_own) break;
    const gemm_ar_tile_t t = gemm_ar_tile(a, item);
    if (t.rows <= 0) continue;
    if (t.cols % 8 == 0 && a->ldc % 8 == 0 && ((uintptr_t)a->c & 15) == 0) {
      /* lane = one 16-byte column vector of the tile (256 columns = 32 vectors) */
      if (8 * lane < t.cols) {
        const uint4 *sp = (const uint4 *)(t.src + 8 * lane);
        uint4 *dp = (uint4 *)(t.dst + 8 * lane);
#pragma unroll 1
        for (int row = 0; row < t.rows; row += 2) {
          const uint4 t0 = __ldcg(sp);
          uint4 t1 = t0;
          if (row + 1 < t.rows) t1 = __ldcg(sp + a->ldn / 8);
          *dp = t0;
          if (row + 1 < t.rows) dp[a->ldc / 8] = t1;
          sp += a->ldn / 4;
          dp += a->ldc / 4;
        }
      }
    } else {
      gemm_ar_copy_elems(a, t, lane);
    }
  }
}

/* Step 4 (AR), warp 0 of the first consumer warpgroup (run as the engine's consumer tail:
 * after the role join ptxas allows 40 registers, gemm.cuh gemm_cta_run): copy the peers'
 * reduced tiles from the result slots into C, in queue order, with bulk copies: each row of a
 * tile (up to 512 bytes) goes slot -> shared memory (the engine's pipeline stages, free after
 * the GEMM; two 64 KB buffers) -> C, so up to two tiles' bytes are in flight per CTA without
 * holding registers (the thread loop this replaces had one 16-byte load per thread in flight:
 * 16 dependent HBM round trips per tile). A tile whose row is not a multiple of 16 bytes
 * (n % 8 != 0, last column block) is copied by the warp's threads instead.
 * Ordering: lane 0's acquire of the tile's flag, then every lane's fence.proxy.async.global
 * (after __syncwarp: causality) before its bulk reads of the slot; the writes to C are waited
 * for (wait_group 0) before the warp leaves. */
__device__ __forceinline__ void gemm_ar_copy_phase(meld_ctx_t *c, const gemm_rs_kargs_t *a, uint8_t *smem_raw, int lane) {
  __shared__ __align__(8) uint64_t s_bar;
  const uint32_t total = (uint32_t)(a->nranks - 1) * (uint32_t)a->tiles_own;
  const uint32_t raw = smem_addr(smem_raw);
  const uint32_t buf0 = raw + ((128u - (raw & 127u)) & 127u);
  const uint32_t bar = smem_addr(&s_bar);
  if (lane == 0) {
    mbarrier_init_cta(bar, 1);
    fence_mbar_init();
    fence_proxy_async_smem_cta(); /* the bulk copies see the initialized barrier */
  }
  __syncwarp();
  uint32_t phase = 0;
  for (uint32_t it = 0;; ++it) {
    const uint32_t item = gemm_ar_next(c, a, lane, false);
    if (item >= total) break;
    if (a->zc) continue; /* the tile is already in C (the peer stored it there) */
    fence_proxy_async_gmem(); /* generic (acquired) -> async proxy: the bulk reads see the tile */
    const uint64_t t0 = lane == 0 ? meld_trace_begin(c) : 0;
    const gemm_ar_tile_t t = gemm_ar_tile(a, item);
    if (t.rows > 0 && t.cols % 8 == 0) {
      const uint32_t buf = buf0 + (it & 1u) * (GEMM_BM * GEMM_BN * 2);
      const uint32_t bytes = (uint32_t)t.cols * 2u;
      /* This buffer's stores of two tiles ago have read it (the last tile's may still run). */
      asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
      __syncwarp();
      if (lane == 0) mbarrier_arrive_expect_tx_cta(bar, bytes * (uint32_t)t.rows);
      __syncwarp();
      for (int i = lane; i < t.rows; i += 32)
        cp_async_bulk_g2s(buf + (uint32_t)i * (GEMM_BN * 2), t.src + (int64_t)i * a->ldn, bytes, bar);
      while (!mbarrier_try_wait_parity_cta(bar, phase)) {
      }
      phase ^= 1u;
      for (int i = lane; i < t.rows; i += 32)
        cp_async_bulk_s2g(t.dst + (int64_t)i * a->ldc, buf + (uint32_t)i * (GEMM_BN * 2), bytes);
      cp_async_bulk_commit_group();
    } else if (t.rows > 0) {
      gemm_ar_copy_elems(a, t, lane);
    }
    if (lane == 0) meld_trace_end(c, MELD_ROLE_COMM, item, t0);
  }
  cp_async_bulk_wait_group0(); /* C is written before the kernel ends */
}

/* Rebuilds the call's ctx from the CTA's shared cells (meld_call_begin left them there), so
 * that nothing of it stays live in registers across the GEMM (the consumers need all 168). */
__device__ __forceinline__ void gemm_rs_ctx_reload(meld_ctx_t *c, const meld_proto_dev_t *p, const gemm_rs_kargs_t *a) {
  const meld_cta_shared_t *s = meld_cta_shared();
  c->p = p;
  c->op = a->is_ar ? MELD_OP_GEMM_AR : MELD_OP_GEMM_RS;
  c->arg_hash = a->arg_hash;
  c->cta = blockIdx.x;
  c->epoch = s->epoch;
  c->ticket = s->ticket;
  c->role = meld_role_of_ticket(c->ticket, 0);
  c->failed = s->ok ? 0u : 1u;
}

/* The engine's consumer tail (after every tile of this CTA; the code after the engine has
 * only 40 registers), warp 0 of consumer warpgroup 0: step 5 (an epilogue wait that gave up,
 * hook g, left its reason in the status word: turn it into the error record), then for AR
 * the copy phase (step 4). */
template <bool AR = true> /* false: RS only (the AR copy phase left out) */
struct gemm_rs_tail {
  const meld_proto_dev_t *proto;
  const gemm_rs_kargs_t *a;
  uint8_t *smem;
  __device__ __forceinline__ void operator()(int g, int tid) const {
    if (g != 0 || tid >= 32) return;
    meld_ctx_t ctx;
    gemm_rs_ctx_reload(&ctx, proto, a);
    if (tid == 0) {
      const uint32_t st = *(volatile uint32_t *)a->g.epi.reduce.status;
      if (st != GEMM_STATUS_OK && !ctx.failed)
        meld_fail(&ctx, st == GEMM_STATUS_TIMEOUT ? MELD_FAIL_TIMEOUT : MELD_FAIL_ABORTED,
                  meld_wait_info(MELD_REGION_SIGNAL, 0, -1, "partial tile (epilogue)"), meld_stamp(ctx.epoch, 1), 0,
                  0, ld_relaxed_sys_u32(meld_abort_word(proto)));
    }
    if (AR && a->is_ar && !a->sym) gemm_ar_copy_phase(&ctx, a, smem, tid);
  }
};

/* The engine's side work (warps 2-3 of the producer warpgroup, during the GEMM): the AR's
 * early copy. */
template <bool AR = true> /* false: RS only (no early copy) */
struct gemm_rs_side {
  const meld_proto_dev_t *proto;
  const gemm_rs_kargs_t *a;
  __device__ __forceinline__ void operator()(int, int lane) const {
    if (!AR || !a->early) return;
    meld_ctx_t ctx;
    gemm_rs_ctx_reload(&ctx, proto, a);
    if (!ctx.failed) gemm_ar_copy_early(&ctx, a, lane);
  }
};

/* G2: the variant with gemm.cuh hook g2 (TMA push of the peer's tiles, deferred flags; 2 ranks):
 * a separate instantiation, so the default kernel's code and registers are unchanged. */
/* BARE (diagnostic MELD_GEMM_RS_DIAG bit 4 only): the engine without hook g and with the
 * stand-alone kernel's deferred epilogue, inside this kernel's launch and entry. */
/* HELPER (with G2; opt-in MELD_GEMM_RS_FLAG_HELPER=1): the pushed tiles' flags are released by
 * a producer-warpgroup warp (gemm.cuh gemm_flag_helper) instead of consumer thread 0. */
/* PRE 4 (not with BARE or HELPER): the add mode of the default plan fixed at compile time
 * (gemm.cuh gemm_preload_of: preload 4, own tiles stored by TMA, no symmetric push), so the
 * other modes' code is left out; -1: every mode (the general kernel). AR false: RS only, without
 * the AR's copy phase and early copy (gemm_rs_tail, gemm_rs_side). */
/* F8: meld_gemm_rs_fp8 / meld_gemm_ar_fp8 (e4m3 A and B as bf16 of half the K; gemm.cuh
 * gemm_params_t.fp8); B [N,K] only, not with BARE or HELPER. */
template <bool BKN, int G2, bool BARE = false, bool HELPER = false, int PRE = -1, bool AR = true, int DEF = 0,
          bool F8 = false>
__global__ void __launch_bounds__(GEMM_THREADS, 1)
    gemm_rs_kernel(const __grid_constant__ meld_proto_dev_t proto, const __grid_constant__ gemm_rs_kargs_t a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) uint8_t gemm_rs_smem[];
  __shared__ uint64_t s_t0;
  {
    meld_ctx_t ctx;
    if (meld_call_begin(&ctx, &proto, a.is_ar ? MELD_OP_GEMM_AR : MELD_OP_GEMM_RS, a.arg_hash, 0)) {
      gemm_rs_header_fill(&ctx, &a);
      if (threadIdx.x == 0) s_t0 = meld_trace_begin(&ctx);
    }
  }
  __syncthreads(); /* this CTA's header stores before its epilogues read them (CTA scope) */
  if (meld_cta_shared()->ok) {
    /* The GEMM worker index: the block index (see 3. above); diag bit 12: the arrival ticket
     * (sessions 1-7; for comparison) */
    const int w = a.diag & 4096 ? (int)meld_cta_shared()->ticket : (int)blockIdx.x;
    if constexpr (BARE)
      gemm_cta_run<BKN, false, false, DEF == 2 ? 2 : 1>(&a.g, gemm_rs_smem, w, (int)gridDim.x); /* (DEF 2: diag bit 13) */
    else
      gemm_cta_run<BKN, true, G2, DEF, HELPER, false, gemm_rs_tail<AR>, gemm_rs_side<AR>, GEMM_BN, PRE, false, F8>(
          &a.g, gemm_rs_smem, w, (int)gridDim.x, gemm_rs_tail<AR>{&proto, &a, gemm_rs_smem}, gemm_rs_side<AR>{&proto, &a});
  }
  __syncthreads();
  meld_ctx_t ctx;
  gemm_rs_ctx_reload(&ctx, &proto, &a);
  if (!ctx.failed) {
    if (threadIdx.x == 0) meld_trace_end(&ctx, MELD_ROLE_COMPUTE, ctx.ticket, s_t0); /* (AR: incl. the copy phase) */
  }
  meld_call_end(&ctx);
#endif
}

/* ---- host ------------------------------------------------------------------------------------ */

/* The fused kernel for B's layout (`kn`) and the push (`g2`: 0 the threads' stores, 1 TMA to one
 * owner, 2 TMA to several), with add mode PRE (-1: any) and,
 * for AR false, RS only; DEF 1: the pushed tiles' deferred second half (PRE 4, g2 only). */
template <int PRE, bool AR, int DEF = 0, bool F8 = false>
static const void *gemm_rs_kernel_for(int kn, int g2) {
  static_assert(DEF == 0 || PRE >= 0, "the deferred push half: lean kernels only");
  if constexpr (F8) { /* (B [N,K] only: kn is 0) */
    if constexpr (PRE >= 0) {
      if (g2 == 2) return (const void *)gemm_rs_kernel<false, 2, false, false, PRE, AR, 0, true>;
    } else {
      if (g2 == 2) g2 = 0;
    }
    if (DEF && g2) return (const void *)gemm_rs_kernel<false, true, false, false, PRE, AR, DEF, true>;
    return g2 ? (const void *)gemm_rs_kernel<false, true, false, false, PRE, AR, 0, true>
              : (const void *)gemm_rs_kernel<false, false, false, false, PRE, AR, 0, true>;
  }
  if constexpr (PRE >= 0) { /* pushes to several owners (gemm_rs_push_mode): lean kernels, no deferred half */
    if (g2 == 2)
      return kn ? (const void *)gemm_rs_kernel<true, 2, false, false, PRE, AR>
                : (const void *)gemm_rs_kernel<false, 2, false, false, PRE, AR>;
  } else {
    if (g2 == 2) g2 = 0; /* (the general kernel with it spilled 24 bytes: the host then plans the stores) */
  }
  if (DEF && g2)
    return kn ? (const void *)gemm_rs_kernel<true, true, false, false, PRE, AR, DEF>
              : (const void *)gemm_rs_kernel<false, true, false, false, PRE, AR, DEF>;
  return kn ? (g2 ? (const void *)gemm_rs_kernel<true, true, false, false, PRE, AR>
                  : (const void *)gemm_rs_kernel<true, false, false, false, PRE, AR>)
            : (g2 ? (const void *)gemm_rs_kernel<false, true, false, false, PRE, AR>
                  : (const void *)gemm_rs_kernel<false, false, false, false, PRE, AR>);
}

/* Run-time variants (read per call, so a benchmark can compare them in one process; each only
 * changes this rank's local schedule, never the protocol, so ranks may even differ; except
 * MELD_GEMM_AR_DECODE_UNFUSED, which changes the algorithm):
 *   MELD_GEMM_RS_SPLIT_K  fused path's split-K: 0 / unset = the engine's choice when the GEMM
 *                         has fewer tiles than CTAs (decode sizes), 1 = off, 2..8 = forced
 *   MELD_GEMM_AR_DECODE_UNFUSED  1: AUTO takes the unfused path for decode-size AR (plan rule;
 *                         must be set alike on every rank: it changes the algorithm)
 *   MELD_GEMM_AR_DECODE_ZC  the unfused AR's all-reduce: 1 (default) = zero copy from the
 *                         workspace for partials >= 512 KB, 2 = always, 0 = the public
 *                         all-reduce on C (LL / staged); alike on every rank
 *   MELD_GEMM_AR_DECODE_FUSED 1: decode-size AR (the plan's unfused path) as ONE kernel, the
 *                         small-M GEMM whose clusters all-reduce their block of C as it is made
 *                         (gemm_ar_decode.cu), where its conditions hold (one wave of clusters,
 *                         P x M x N x 2 bytes within half the workspace); 0 (default) = off. With
 *                         MELD_GEMM_RS_DIAG=1024 at one rank: its loopback (C = 2 x A B^T).
 *   MELD_GEMM_AR_DECODE_PUSH  1: the decode kernel pushes its partial into every peer's workspace
 *                         (stores over NVLink while it is made) instead of each rank pulling the
 *                         peers' after READY; alike on every rank (opt-in, for the 2-GPU A/B)
 *   MELD_GEMM_AR_DECODE_DIAG  the decode kernel's timing diagnostics (WRONG protocol or results):
 *                         bit 0 no CONSUMED_ALL, bit 1 no READY round trip, bit 2 no sum
 *   MELD_GEMM_AR_DECODE_PDL 0: the zero-copy all-reduce without programmatic dependent launch
 *   MELD_GEMM_RS_STREAM_K fused path's stream-K over the last partial wave (meld_gemm's rule): 2 = on
 *                         (off by default since session 5: slower in every same-job pair measured,
 *                         s2 on 2 x H200 0.965 vs 0.933 / 3.049 vs 3.024 / 0.836 vs 0.824 ms, s5 on
 *                         one H200 with the fused kernel at one rank 0.918 vs 0.884, 0.758 vs 0.740)
 *   MELD_GEMM_RS_PUSH     fused path's partial push at 2 ranks: "tma" (default since s2 run 3) =
 *                         (at 3..8 ranks "tma" opts in to the same push with one map per
 *                         owner, gemm_rs_push_mode; session 27, CPU-built only; default there:
 *                         the threads' stores)
 *                         TMA store into the peer's staging, flag released at the start of the
 *                         next epilogue (gemm.cuh hook g2); "st" = 16-byte stores from the
 *                         consumer warpgroups, flag released in the epilogue after a fence that
 *                         waits for them (s2 run 2 diag: 0.1-0.17 ms of 0.87 at 8192x4096x7168)
 *   MELD_GEMM_AR_COPY_FLAG  "now": AR with the TMA push (2 ranks; 3+ with MELD_GEMM_RS_PUSH=tma,
 *                         session 28) releases a reduced tile's copy flags at the end of its
 *                         epilogue (after both warpgroups' barrier and a system fence), as
 *                         before session 14; default: at the start of the CTA's next epilogue,
 *                         like the pushes' flags (gemm.cuh reduce.copy_defer). Without the TMA
 *                         push (3+ ranks by default): at the end of the epilogue, or with
 *                         "next" (opt-in, session 28: built and CPU-tested only; lean kernels
 *                         with the TMA copies) at the next epilogue's start
 *   MELD_GEMM_AR_COPY     "st": AR copies a reduced tile to the peers (result slots or, zero
 *                         copy, their C) with the consumer threads' 16-byte stores, as before
 *                         session 15 (2 ranks) / 28 (3 to 8 ranks); default "tma": TMA stores
 *                         from the staging, issued with the own tile's store (gemm.cuh
 *                         reduce.copy_tma; from 3 ranks one map per peer, gemm_copy_map)
 *   MELD_GEMM_RS_PUSH_DEFER  KB (>= 0): at 2 ranks (TMA push, lean kernel) a pushed tile's second
 *                         half per warpgroup waits in registers and is staged and pushed during the
 *                         CTA's next mainloop after k-block KB (gemm.cuh out_defer_kb); "off": in
 *                         the tile's own epilogue, once its first half's store has read the staging
 *                         out; unset: gemm_rs_push_defer_kb's default (off until 2 GPUs measure
 *                         it; 16 is the candidate)
 *   MELD_GEMM_STORE_HINT  1: the fused kernels' C stores (own tiles, AR copies; lean kernels)
 *                         with L2::evict_first; default off (gemm_rs_store_hint)
 *   MELD_GEMM_AR_COPY_HOLD  0: an own tile's start releases a pending copy flag (AR, deferred
 *                         copy flags, lean kernels; before session 16); default 1: it stays for
 *                         the next epilogue's start (gemm_rs_copy_hold)
 *   MELD_GEMM_RS_LEAN     0: the general hook g kernel (every add mode compiled in) also where the
 *                         plan is the default add mode (reduce.preload 4, TMA store, whole
 *                         tiles); default 1 = the kernel with that mode fixed at compile time,
 *                         for RS also without the AR's copy code (session 14); 2 = RS in the
 *                         AR's kernel of 1 (diagnosis: what the AR code costs RS)
 *   MELD_GEMM_RS_FLAG_HELPER  1: at 2 ranks the pushed tiles' flags are released by a producer-
 *                         warpgroup warp, so that their system fence is off the consumers' path
 *                         (opt-in, session 5: built and tested on the CPU only; to be measured
 *                         with diag bit 8, which drops the release, as the bound)
 *   MELD_GEMM_RS_ORDER    the tile order where owner blocks are whole: "ileave" = own and peer
 *                         tiles share the raster groups (gemm.cuh gemm_ileave_mblk), so the own
 *                         tiles' epilogues (and the AR's copies) spread over the call: RS at 2
 *                         ranks (opt-in, session 13; not yet run on 2 GPUs) and RS / AR in owner
 *                         mode at 3 or more ranks (rounds of P raster groups, own group last in
 *                         each; the default there since session 28: -1..-9% in-process at 3-4
 *                         ranks); "rotate" = peers' rows first, own rows last (the default at 2
 *                         ranks). In the argument hash: set it alike on every rank
 *   MELD_GEMM_RS_ILEAVE_G  (tuning, 3 or more ranks) the interleaved order's raster group in
 *                         m-blocks: a divisor of the blocks per owner leaving >= 2 rounds, taken
 *                         without the plan's wave rule (in the argument hash)
 *   MELD_GEMM_RS_STORE    fused path's own (reduced) tiles: "tma" (default since session 5) = TMA
 *                         store into C from the staging; "st" = the threads' 16-byte stores
 *   MELD_GEMM_AR_EARLY_COPY  1: the AR's copy of the peers' reduced tiles into C also by warps
 *                         2-3 of the producer warpgroup while the GEMM runs, as the tiles arrive;
 *                         0 = only after the GEMM (the consumers' tail); unset: from
 *                         GEMM_RS_EARLY_COPY_MIN_RANKS ranks on (gemm_rs_early_copy)
 *   MELD_GEMM_AR_ZC       1 (default): AR with C in symmetric memory (meld_mem_alloc or
 *                         registered; dense, n % 8 == 0) stores the reduced tiles straight into
 *                         the peers' C, no result slots and no copy phase; 0 = the result slots
 *                         (alike on every rank: in the argument hash)
 *   MELD_GEMM_RS_PF       own tiles' partials asked into L2 at the tile's start by one tensor
 *                         prefetch per warpgroup (add mode 4; gemm_rs_pf_first): 1 = the further
 *                         sources src[1..] (more than 2 ranks), 2 = every source (src[0]'s half 1
 *                         too), 0 = none; unset: the further sources where a tile has at most
 *                         GEMM_RS_PF_KB k-blocks (session 27)
 *   MELD_GEMM_RS_PRELOAD  own tiles' partials (with "tma"): 4 (default) = the first partial by
 *                         TMA into the staging, added to the fp32 accumulators while staging
 *                         the sums; 5 (whole tiles of >= 4 k-blocks, else 4) = the producer
 *                         loads it into two pipeline stages after the tile's k-blocks; 0 = a
 *                         pass over the staging after the mainloop (session 5); 1, 2, 3 = loads
 *                         into registers after the mainloop, 64 / 16 / 32 in flight
 *   MELD_GEMM_RS_DIAG     timing diagnostics, WRONG RESULTS (benchmarks only): bit 0 = the peers'
 *                         partial tiles are written into this rank's own slots (no NVLink stores,
 *                         st or TMA; flags still go to the peers), bit 1 = own tiles do not wait
 *                         for the partials' flags, bit 2 = own tiles do not load/add the partials
 *                         (their own values are stored), bit 3 = every hook off and the engine's
 *                         TMA-store epilogue into the workspace (the fused kernel's bare GEMM; needs
 *                         a workspace of M x N x 2 bytes), bit 4 = as bit 3 in a kernel built
 *                         without hook g and with the stand-alone engine's deferred epilogue,
 *                         bit 5 = own tiles stored by TMA as staged (no pass over the staging),
 *                         bit 9 = own tiles' partials not asked into L2 at the tile's start,
 *                         bit 11 = the AR early copy's waits without their sleeping pre-poll
 *                         (only meld_wait_signal's own polling; results right),
 *                         bit 13 (with bit 4) = every epilogue of the bare kernel starts
 *                         MELD_GEMM_RS_DELAY_CYCLES SM clocks late (session 16: how much epilogue
 *                         time the full pipeline stages absorb),
 *                         bit 12 = the GEMM's worker index is the CTA's arrival ticket instead
 *                         of its block index (sessions 1-7; which SM runs which tiles; results
 *                         right at any rank count),
 *                         bit 8 = the TMA push's flags as relaxed stores (unordered: the
 *                         release's cost on the epilogue's path; since session 10 the flag is
 *                         one st.release.sys, without the fence.acq_rel.sys that preceded it),
 *                         bit 10 = (a test, one rank, results right) loopback: the
 *                         2-rank fused kernel of rank 0 with rows [R, 2R) as the peer's (pushed
 *                         into this rank's own slot, flagged where own tiles wait): C [R rows] =
 *                         (A B^T)[0, R) + (A B^T)[R, 2R); AR (owner mode): the reduced tiles
 *                         also go where the virtual peer's come from, so C [2R rows] holds that
 *                         sum twice (tests/gpu/test_gemm_rs.cu),
 *                         bit 7 = (a test, one rank only, results right) own tiles add one
 *                         synthetic partial from the workspace after the header, with its flags
 *                         after it, both written by the test (tests/gpu/test_gemm_rs.cu).
 *                         Time a variant with a stage left out and take differences
 *                         (docs/perf-notes.md). */
static int gemm_rs_env_int(const char *name, int dflt) {
  const char *v = getenv(name);
  if (!v || !*v) return dflt;
  char *end = NULL;
  const long x = strtol(v, &end, 10);
  return end && *end == 0 ? (int)x : dflt;
}
/* 1 when the variable is set to `value`. */
static int gemm_rs_env_is(const char *name, const char *value) {
  const char *v = getenv(name);
  return v && !strcmp(v, value);
}

/* The TMA-store map of C = `c` [m rows, ld ldc] for this GEMM, encoded through a second plan
 * (the engine's planner owns the tensor-map encoding). */
static meld_result_t gemm_rs_map_c(const meld_gemm_args_t *g, const gemm_plan_opts_t *o, void *c, int64_t ldc,
                                   int64_t m, CUtensorMap *out) {
  meld_gemm_args_t g2 = *g;
  g2.c = c;
  g2.ldc = ldc;
  g2.m = m;
  gemm_plan_opts_t o2 = *o;
  o2.split_k = 1;
  o2.stream_k = 1;
  static thread_local gemm_params_t t2; /* large: not on the stack; per thread (ranks may be threads) */
  int w2 = 0;
  MELD_CHECK(gemm_plan_make(&g2, &o2, &t2, &w2));
  *out = t2.map_c;
  return MELD_OK;
}

/* loop: the one-rank loopback (MELD_GEMM_RS_DIAG bit 10; pl planned for 2 ranks, rank 0). */
static meld_result_t gemm_rs_fused(meld_comm_t comm, const meld_gemm_rs_args_t *a, const gemm_rs_plan_t *pl, int loop,
                                   const gemm_fp8_t *f8, cudaStream_t stream) {
  const int P = loop ? 2 : comm->nranks, r = loop ? 0 : comm->rank;
  int diag = gemm_rs_env_int("MELD_GEMM_RS_DIAG", 0);
  if (loop) diag = (diag | 1024 | 1) & ~(128 | 8 | 16); /* the virtual peer's slot is this rank's own */
  else diag &= ~1024;
  if (diag & 16) diag |= 8;
  int g2 = gemm_rs_push_mode(P, pl->sym, diag & 8, gemm_rs_env_is("MELD_GEMM_RS_PUSH", "st"),
                             gemm_rs_env_is("MELD_GEMM_RS_PUSH", "tma"));
  const int helper = !f8 && g2 == 1 && gemm_rs_env_int("MELD_GEMM_RS_FLAG_HELPER", 0) == 1;
  const int kn = a->b_layout == MELD_B_KN;
  if (f8) diag &= ~16; /* (the bare diagnostic kernel has no fp8 instance) */
  const void *kern = diag & 16 ? (diag & 8192 ? (kn ? (const void *)gemm_rs_kernel<true, false, true, false, -1, true, 2>
                                                    : (const void *)gemm_rs_kernel<false, false, true, false, -1, true, 2>)
                                 : kn ? (const void *)gemm_rs_kernel<true, false, true> : (const void *)gemm_rs_kernel<false, false, true>)
                     : helper  ? (kn ? (const void *)gemm_rs_kernel<true, true, false, true>
                                     : (const void *)gemm_rs_kernel<false, true, false, true>)
                     : f8      ? gemm_rs_kernel_for<-1, true, 0, true>(kn, g2)
                               : gemm_rs_kernel_for<-1, true>(kn, g2);
  int grid = 0;
  MELD_CHECK(meld_coop_grid(kern, GEMM_THREADS, GEMM_SMEM_BYTES, 0, comm->sm_count, &grid));
  /* Large: not on the stack; copied by the launch. Per thread: ranks may be threads of one
   * process (a process-wide static let two ranks' calls write each other's arguments: wrong
   * results, found by test_inproc in session 22). */
  static thread_local gemm_rs_kargs_t k;
  memset(&k, 0, sizeof k);
  uint8_t *ws = (uint8_t *)comm->workspace.local;
  meld_gemm_args_t g = gemm_rs_gemm_args(a);
  g.c = ws; /* the TMA-store map is encoded but unused (every tile goes through hooks) */
  g.ldc = pl->ldn;
  gemm_plan_opts_t o = GEMM_PLAN_OPTS_INIT;
  o.sm_count = grid;
  o.store_hint = gemm_rs_store_hint(gemm_rs_env_int("MELD_GEMM_STORE_HINT", -1)) ? 2 : 1; /* (read per call: bench rows) */
  /* Split-K only where the GEMM has fewer tiles than CTAs (decode sizes): the engine's choice,
   * or the variant; with it, own tiles still come last (a tile's splits are consecutive
   * tickets, the tile order is unchanged), and the last split to arrive runs the epilogue. */
  const int sk_env = gemm_rs_env_int("MELD_GEMM_RS_SPLIT_K", 0);
  o.split_k = (int64_t)pl->tiles_m * pl->tiles_n < grid ? (sk_env >= 0 && sk_env <= 8 ? sk_env : 0) : 1;
  o.group_m = pl->group_m;
  o.epi_tma = 0;
  /* Stream-K over the last partial wave where meld_gemm's measured rule takes it, only with
   * MELD_GEMM_RS_STREAM_K=2 (the last tiles in schedule order are own tiles: their pieces
   * combine like split-K and the last arriver runs the reduce epilogue; no CTA waits for
   * another's piece). Off by default: see the variable's note above. */
  const int64_t tiles = (int64_t)pl->tiles_m * pl->tiles_n;
  if (o.split_k == 1 && gemm_rs_env_int("MELD_GEMM_RS_STREAM_K", 1) == 2 && !(diag & 8) && !pl->ileave)
    o.stream_k = gemm_plan_default_sk(tiles, grid, (int)((a->k + GEMM_BK - 1) / GEMM_BK)) == 2 ? 2 : 1;
  int workers = 0;
  MELD_CHECK(gemm_plan_make(&g, &o, &k.g, &workers));
  if (k.g.split_k > 1 || k.g.sk_tiles > 0) {
    float *skw = NULL;
    uint32_t *skc = NULL;
    if (gemm_stream_workspace(GEMM_WS_GEMM_RS, stream, gemm_plan_workspace_bytes(&k.g), gemm_plan_counter_words(&k.g), &skw, &skc)) {
      o.split_k = 1;
      o.stream_k = 1;
      MELD_CHECK(gemm_plan_make(&g, &o, &k.g, &workers));
    } else {
      k.g.workspace = skw;
      k.g.counters = skc;
    }
  }
  if (f8) k.g.fp8 = 1, k.g.fp8_rows = f8->rows, k.g.scale_a = f8->scale_a, k.g.scale_b = f8->scale_b;
  gemm_epilogue_hook_t *e = &k.g.epi;
  k.g.order.m_rotate = pl->m_rotate;
  if (pl->ileave && !(diag & 8)) { /* (the interleaved owner order, MELD_GEMM_RS_ORDER=ileave) */
    k.g.order.ileave_b = (int32_t)(pl->rpo / 128);
    if (P >= 3) {
      k.g.order.ileave_p = P;
      k.g.order.ileave_rank = r;
    } else {
      k.g.order.ileave_own = r * k.g.order.ileave_b;
      k.g.order.ileave_peer = (1 - r) * k.g.order.ileave_b;
    }
  }
  e->out = (void *const *)(ws + GEMM_RS_HDR_OUT);
  e->out_ld = pl->ldn;
  e->rows_per_owner = (int32_t)pl->rpo;
  e->signal = (uint64_t *const *)(ws + GEMM_RS_HDR_SIGNAL);
  e->epoch_src = (const uint64_t *)(ws + GEMM_RS_HDR_STAMP);
  e->reduce.on = 1;
  e->reduce.diag = (diag & 6) | (diag & 32 ? 8 : 0) | (diag & 256 ? 32 : 0) | (diag & 512 ? 64 : 0);
  e->reduce.owner = pl->sym ? 0 : r; /* symmetric: one owner block (0) of all rows on every rank */
  e->reduce.nsrc = P - 1;
  if ((diag & 128) && P == 1) { /* test mode: one synthetic partial (gemm_rs_header_fill) */
    if (comm->workspace.bytes < GEMM_RS_HDR_BYTES + pl->slot_bytes + (size_t)pl->tiles_own * 8)
      return meld_error(MELD_ERR_INVALID_ARG, "MELD_GEMM_RS_DIAG=128: the workspace cannot hold the synthetic partial");
    e->reduce.nsrc = 1;
  }
  e->reduce.src = (const uint16_t *const *)(ws + GEMM_RS_HDR_SRC);
  e->reduce.flags = (const uint64_t *const *)(ws + GEMM_RS_HDR_FLAGS);
  e->reduce.dst = pl->is_ar && !pl->sym ? (uint16_t *)a->c + (int64_t)r * pl->rpo * a->ldc : a->c;
  e->reduce.dst_ld = a->ldc;
  e->reduce.ncopies = pl->is_ar && !pl->sym ? P - 1 : 0;
  e->reduce.npush = pl->sym ? P - 1 : 0;
  e->reduce.push = (void *const *)(ws + GEMM_RS_HDR_PUSH);
  e->reduce.push_signal = (uint64_t *const *)(ws + GEMM_RS_HDR_PUSH_SIGNAL);
  e->reduce.copies = (void *const *)(ws + GEMM_RS_HDR_COPIES);
  e->reduce.copy_signal = (uint64_t *const *)(ws + GEMM_RS_HDR_COPY_SIGNAL);
  e->reduce.abort_word = (const uint32_t *)((uint8_t *)comm->pad.local + MELD_PAD_OFF_ABORT);
  e->reduce.status = (uint32_t *)((uint8_t *)comm->pad.local + MELD_PAD_OFF_SCRATCH); /* scratch word 0 */
  meld_proto_dev_t proto = meld_proto_dev(comm);
  e->reduce.timeout_ns = proto.timeout_ns;
  k.g.trace = proto.trace; /* per-tile timeline with MELD_TRACE (gemm.cuh) */
  /* Own (reduced) tiles reach C by TMA store (hook g, reduce.tma) where C allows it: n and ldc
   * multiples of 8, C 16-byte aligned; not in symmetric mode. MELD_GEMM_RS_STORE=st: the
   * threads' 16-byte stores (session 5 on 2 x H200: TMA equal or faster at 4 of 5 shapes, e.g.
   * 0.971 vs 1.082 ms at RS 8192 x 8192 x 4096; gemm.cuh has the numbers). */
  const int64_t own_rows = pl->is_ar ? (a->m - (int64_t)r * pl->rpo < pl->rpo ? a->m - (int64_t)r * pl->rpo : pl->rpo)
                                     : pl->rows_count;
  if (!pl->sym && a->n % 8 == 0 && a->ldc % 8 == 0 && ((uintptr_t)e->reduce.dst & 15) == 0 && own_rows > 0 &&
      !gemm_rs_env_is("MELD_GEMM_RS_STORE", "st")) {
    MELD_CHECK(gemm_rs_map_c(&g, &o, e->reduce.dst, a->ldc, own_rows, &k.g.map_c2));
    e->reduce.tma = 1;
    /* Own tiles add the partials to their fp32 accumulators (gemm.cuh reduce.preload; the rule:
     * gemm_rs_preload_mode). One H200, every tile own with a synthetic partial: 1,300,063
     * cycles for 4 (the default), 1,313,004 for 5, floor 1,203,638, the pass ~1,366,800. */
    e->reduce.preload = gemm_rs_preload_mode(gemm_rs_env_int("MELD_GEMM_RS_PRELOAD", 4), helper, diag, e->reduce.nsrc,
                                             k.g.split_k > 1 || k.g.sk_tiles > 0, k.g.k_blocks, GEMM_STAGES,
                                             k.g.cluster_m);
    if (e->reduce.preload >= 4)
      MELD_CHECK(gemm_rs_map_c(&g, &o, (uint8_t *)ws + GEMM_RS_HDR_BYTES, pl->ldn, pl->rpo, &k.g.map_p));
    /* The partial slots asked into L2 at an own tile's start (gemm_rs_pf_first, reduce.pf). */
    const int pf0 = gemm_rs_pf_first(gemm_rs_env_int("MELD_GEMM_RS_PF", -1), e->reduce.preload, e->reduce.nsrc,
                                     (int)k.g.k_blocks);
    if (pf0 >= 0) {
      MELD_CHECK(gemm_plan_map_slots(&k.g.map_pf, (uint8_t *)ws + GEMM_RS_HDR_BYTES, a->n, pl->rpo, pl->ldn,
                                     pl->slot_bytes, e->reduce.nsrc, e->reduce.nsrc - pf0));
      e->reduce.pf = pf0 + 1;
    }
  }
  if (g2) {
    /* Hook g2: the map of owner q = (r + 1 + s) % P's slot for this rank's partials (R rows x N,
     * ld ldn; where gemm_rs_header_fill points out[q]; diag 1: this rank's own slots, no NVLink):
     * every tile of q goes there by TMA. 2 ranks: map_c (the one peer, slot index 0); more:
     * k.map_push[s]. */
    for (int sx = 0; sx < P - 1; sx++) {
      const int q = (r + 1 + sx) % P;
      uint8_t *slot = (uint8_t *)(diag & 1 ? comm->workspace.local : comm->workspace.peer[q]) + GEMM_RS_HDR_BYTES +
                      (uint64_t)((r - q - 1 + P) % P) * pl->slot_bytes;
      MELD_CHECK(gemm_rs_map_c(&g, &o, slot, pl->ldn, pl->rpo, g2 == 2 ? &k.map_push[sx] : &k.g.map_c));
    }
    e->out_tma = 1;
  }
  if (diag & 8) {
    /* diag 8: the fused kernel's GEMM with every hook off and the stand-alone engine's TMA-store
     * epilogue into the workspace (no push, no flags, no reduction): the kernel's own cost. */
    k.g.c = ws + GEMM_RS_HDR_BYTES;
    MELD_CHECK(gemm_rs_map_c(&g, &o, k.g.c, pl->ldn, g.m, &k.g.map_c));
    k.g.epi_tma = 1;
    k.g.epi_defer = diag & 16 ? 1 : 0;
    if ((diag & (16 | 8192)) == (16 | 8192)) /* the bare kernel's epilogues started late (diagnostic) */
      k.g.diag_delay_cycles = gemm_rs_env_int("MELD_GEMM_RS_DELAY_CYCLES", 0);
    e->out = NULL;
    e->signal = NULL;
    e->reduce.on = 0;
    e->reduce.tma = 0;
    e->reduce.preload = 0;
    e->reduce.pf = 0; /* (copy_defer is decided below, after reduce.on) */
    e->out_tma = 0;
  }
  k.ws = ws;
  for (int q = 0; q < P; q++) k.peer_ws[q] = loop ? ws : (uint8_t *)comm->workspace.peer[q];
  k.peer_ws[r] = ws;
  k.c = (uint16_t *)a->c;
  k.ldc = a->ldc;
  k.m = a->m;
  k.n = a->n;
  k.rpo = pl->rpo;
  k.ldn = pl->ldn;
  k.slot_bytes = pl->slot_bytes;
  k.nranks = P;
  k.rank = r;
  k.is_ar = pl->is_ar;
  k.tiles_own = pl->tiles_own;
  k.tiles_n = pl->tiles_n;
  k.tiles_m = pl->tiles_m;
  k.arg_hash = pl->arg_hash;
  k.diag = diag;
  k.sym = pl->sym;
  /* Zero-copy AR (the default where it applies; MELD_GEMM_AR_ZC=0 turns it off): C [M, N] dense
   * (ldc = n, n % 8 == 0: the reduced tiles' 16-byte stores use the slots' row pitch) in
   * symmetric memory (meld_mem_alloc or meld_mem_register) mapped from every rank. The choice
   * rests on the arguments and the variable (which must be alike on every rank): the
   * allocation, offset and ldc join the argument hash, so ranks that disagree fail the entry
   * handshake instead of writing where the peer does not read. Default since session 9: on 2 x
   * H200 it took 1.028 vs 1.082 ms sustained at 8192 x 8192 x 8192 (burst 0.977 vs 1.035) and
   * 0.828 vs 0.847 burst at 8192 x 4096 x 14336; one H200 in loopback, sustained, 0.915 vs
   * 0.965 and 0.761 vs 0.788 (session 8). (Session 7's Nsight Compute cycles, clocks locked,
   * had it 6% slower at 8192 x 4096 x 7168: a locked clock hides that it moves fewer bytes.) */
  if (pl->is_ar && !pl->sym && P > 1 && a->n % 8 == 0 && a->ldc == pl->ldn && gemm_rs_env_int("MELD_GEMM_AR_ZC", 1) == 1) {
    size_t off = 0;
    const meld_symbuf_t *sb = meld_symbuf_find(comm, a->c, (size_t)a->m * (size_t)a->ldc * 2, &off);
    int mapped = sb && sb->seq != MELD_SYMBUF_SEQ_WORKSPACE;
    for (int q = 0; mapped && q < comm->nranks; q++) mapped = sb->peer[q] != NULL;
    if (mapped) {
      k.zc = 1;
      for (int q = 0; q < P; q++) k.peer_c[q] = (uint16_t *)((uint8_t *)sb->peer[loop ? 0 : q] + off);
      uint64_t h = meld_hash_u64(meld_hash_init(), pl->arg_hash);
      h = meld_hash_u64(h, 0x7a63u); /* "zc" */
      h = meld_hash_u64(h, sb->seq);
      h = meld_hash_u64(h, (uint64_t)off);
      h = meld_hash_u64(h, (uint64_t)a->ldc);
      k.arg_hash = meld_hash_fold(h);
    }
  }
  /* The early copy (gemm_rs_early_copy: from 2 ranks on). Session 7, one H200 in 2-rank loopback
   * (Nsight Compute cycles): the GEMM slowed by more than the copy phase it hides: 1,670,594 vs
   * 1,443,477 at 8192 x 8192 x 4096, 1,139,523 vs 1,124,918 at 8192 x 4096 x 7168 (with a
   * spinning wait it was 100x slower: 264 long waiters polling the host abort word over PCIe
   * once past the mirror threshold). */
  k.early = pl->is_ar && gemm_rs_early_copy(gemm_rs_env_int("MELD_GEMM_AR_EARLY_COPY", -1), !pl->sym && !k.zc, P);
  if (meld_log_level() >= MELD_LOG_TRACE) {
    char buf[1024];
    gemm_rs_plan_format(pl, buf, sizeof buf);
    MELD_TRACE(MELD_SUB_OPS, "%s", buf);
  }
  /* The kernel with the default plan's add mode compiled in (PRE 4: same shared memory, threads
   * and so grid) where the plan is that mode with whole tiles; MELD_GEMM_RS_LEAN=0 keeps the general kernel. */
  const int variant = gemm_rs_kernel_variant(gemm_rs_env_int("MELD_GEMM_RS_LEAN", 1), pl->is_ar, diag & 16, helper,
                                             e->reduce.on, e->reduce.preload, e->reduce.tma, e->reduce.npush,
                                             k.g.split_k, k.g.sk_tiles);
  if (g2 == 2 && !variant) { /* several owners' TMA push: lean kernels only (gemm_rs_kernel_for) */
    g2 = 0;
    e->out_tma = 0;
  }
  /* The reduced tiles' copies by TMA store in the lean kernels (gemm_rs_copy_tma;
   * MELD_GEMM_AR_COPY=st: the threads' stores): a map over where gemm_rs_header_fill points
   * copies[s] (the same address, computed on the host: keep in step; peer q = (r + 1 + s) % P),
   * rows of this owner, row pitch ldn (= ldc for zc); one copy (2 ranks): map_cp, more:
   * k.map_copy[s]. */
  e->reduce.copy_tma = gemm_rs_copy_tma(variant != 0, e->reduce.tma, e->reduce.ncopies, gemm_rs_env_is("MELD_GEMM_AR_COPY", "st"));
  for (int s = 0; e->reduce.copy_tma && s < e->reduce.ncopies; s++) {
    const int q = (r + 1 + s) % P;
    void *cp = k.zc ? (void *)(k.peer_c[q] + (int64_t)(diag & 1024 ? q : r) * pl->rpo * a->ldc)
                    : (void *)(k.peer_ws[q] + GEMM_RS_HDR_BYTES + (uint64_t)(P - 1 + (r - q - 1 + P) % P) * pl->slot_bytes);
    MELD_CHECK(gemm_rs_map_c(&g, &o, cp, pl->ldn, own_rows, e->reduce.copy_tma == 1 ? &k.g.map_cp : &k.map_copy[s]));
  }
  /* The pushed tiles' second half deferred into the next mainloop (gemm_rs_push_defer_kb;
   * MELD_GEMM_RS_PUSH_DEFER=KB | off). */
  const int defer_kb = gemm_rs_push_defer_kb(variant, g2 == 1, gemm_rs_env_is("MELD_GEMM_RS_PUSH_DEFER", "off") ? -1
                                                         : gemm_rs_env_int("MELD_GEMM_RS_PUSH_DEFER", -2));
  e->out_defer_kb = defer_kb < 0 ? 0 : defer_kb;
  /* The AR's reduced tiles' copy flags released one epilogue later, like the pushes' (gemm.cuh
   * reduce.copy_defer; gemm_rs_copy_defer): by default in the TMA-push kernels without the flag
   * helper (MELD_GEMM_AR_COPY_FLAG=now: at the end of the tile's epilogue, as before session
   * 14); opt-in in the lean kernels with the TMA copies otherwise (3+ ranks: =next). */
  const int copy_flag = gemm_rs_env_is("MELD_GEMM_AR_COPY_FLAG", "now") ? 1 : gemm_rs_env_is("MELD_GEMM_AR_COPY_FLAG", "next") ? 2 : 0;
  e->reduce.copy_defer = e->reduce.on && gemm_rs_copy_defer(g2 != 0, variant != 0, e->reduce.copy_tma, helper,
                                                            e->reduce.ncopies, pl->tiles_own, copy_flag);
  /* The AR's pending copy flag kept over an own tile's start (session 16; MELD_GEMM_AR_COPY_HOLD). */
  e->reduce.copy_hold = gemm_rs_copy_hold(variant, e->reduce.copy_defer, gemm_rs_env_int("MELD_GEMM_AR_COPY_HOLD", -1));
  if (variant) {
    if (f8)
      kern = defer_kb >= 0 ? (variant == 1 ? gemm_rs_kernel_for<4, true, 1, true>(kn, g2)
                                           : gemm_rs_kernel_for<4, false, 1, true>(kn, g2))
                           : (variant == 1 ? gemm_rs_kernel_for<4, true, 0, true>(kn, g2)
                                           : gemm_rs_kernel_for<4, false, 0, true>(kn, g2));
    else if (defer_kb >= 0)
      kern = variant == 1 ? gemm_rs_kernel_for<4, true, 1>(kn, g2) : gemm_rs_kernel_for<4, false, 1>(kn, g2);
    else
      kern = variant == 1 ? gemm_rs_kernel_for<4, true>(kn, g2) : gemm_rs_kernel_for<4, false>(kn, g2);
    int grid_lean = 0; /* (sets its shared-memory attribute) */
    MELD_CHECK(meld_coop_grid(kern, GEMM_THREADS, GEMM_SMEM_BYTES, 0, comm->sm_count, &grid_lean));
    if (grid_lean != grid)
      return meld_error(MELD_ERR_INTERNAL, "%s: the lean kernel's grid %d differs from the plan's %d",
                        pl->is_ar ? "meld_gemm_ar" : "meld_gemm_rs", grid_lean, grid);
  }
  char why[256]; /* (after every hook field is set) */
  if (gemm_params_check(&k.g, grid, why, sizeof why))
    return meld_error(MELD_ERR_INTERNAL, "%s: engine plan rejected: %s", pl->is_ar ? "meld_gemm_ar" : "meld_gemm_rs", why);
  void *kargs[] = {&proto, &k};
  return meld_launch_coop(kern, grid, GEMM_THREADS, GEMM_SMEM_BYTES, kargs, stream);
}

/* Decode GEMM+AR partials from this size on take the zero-copy all-reduce (below, the LL
 * all-reduce's single trip wins: session 4 run 4, ZC 10-19 us vs LL 4.5-17.5 up to 1 MB). */
#define GEMM_AR_ZC_MIN_BYTES ((size_t)512 << 10)

/* meld_gemm's defaults on g, in fp8 where f8 is given (g is then the bf16 view). */
static meld_result_t rs_gemm(const meld_gemm_args_t *g, const gemm_fp8_t *f8, cudaStream_t stream) {
  return f8 ? gemm_launch_fp8(g, f8, stream) : meld_gemm(g, stream);
}

static meld_result_t gemm_rs_unfused(meld_comm_t comm, const meld_gemm_rs_args_t *a, const gemm_rs_plan_t *pl,
                                     const gemm_fp8_t *f8, cudaStream_t stream) {
  const char *fn = pl->is_ar ? "meld_gemm_ar" : "meld_gemm_rs";
  const int P = comm->nranks;
  meld_gemm_args_t g = gemm_rs_gemm_args(a);
  if (P == 1) { /* rows [0, M) of the one rank */
    g.c = a->c;
    g.ldc = a->ldc;
    return rs_gemm(&g, f8, stream);
  }
  if (pl->is_ar) {
    /* One kernel for the GEMM and the all-reduce (opt-in, MELD_GEMM_AR_DECODE_FUSED=1, set
     * alike on every rank; gemm_ar_decode.cu): where its conditions hold. */
    if (!f8 && gemm_rs_env_int("MELD_GEMM_AR_DECODE_FUSED", 0) == 1) { /* (no fp8 decode kernel) */
      int taken = 0;
      MELD_CHECK(gemm_ar_decode_fused(comm, &g, a->c, a->ldc, 0, pl->arg_hash, stream, &taken));
      if (taken) return MELD_OK;
    }
    const int direct = a->ldc == a->n;
    const size_t part_bytes = (size_t)a->m * (size_t)a->n * 2;
    /* Zero copy (MELD_GEMM_AR_DECODE_ZC: 1 = from GEMM_AR_ZC_MIN_BYTES on (the default),
     * 2 = always, 0 = never): the GEMM writes its partial into this rank's symmetric
     * workspace, and the ZC one-shot all-reduce pulls every rank's partial from there and sums
     * into C: no staging, one pass. The workspace's bottom half is free here: every meld op
     * on this comm before this call has finished on this rank, and each one's peers finished
     * with this rank's workspace before its kernel ended (the ZC "done" signals, the staged
     * engines' consumed slots), except the decode kernel's partial, which a peer may still
     * read and which lives in the top half (gemm_ar_decode.cu). Decided alike on every rank
     * (sizes, comm and env agree). */
    const int zc_mode = gemm_rs_env_int("MELD_GEMM_AR_DECODE_ZC", 1);
    if (direct && zc_mode && meld_coll_zc_enabled() && comm->nnodes == 1 &&
        part_bytes <= comm->workspace.bytes - GEMM_AR_DECODE_MAX_PART(comm->workspace.bytes) && /* (the bottom half) */
        (zc_mode == 2 || part_bytes >= GEMM_AR_ZC_MIN_BYTES)) {
      g.c = comm->workspace.local;
      g.ldc = a->n;
      MELD_CHECK(rs_gemm(&g, f8, stream));
      meld_coll_args_t *ca = (meld_coll_args_t *)calloc(1, sizeof *ca); /* 2.3 KB */
      if (!ca) return meld_error(MELD_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
      ca->op = MELD_COLL_ALL_REDUCE;
      ca->dtype = MELD_BF16;
      ca->send = comm->workspace.local;
      ca->recv = a->c;
      ca->count = (size_t)a->m * (size_t)a->n;
      meld_coll_plan_hint_t h;
      memset(&h, 0, sizeof h);
      h.proto = MELD_PROTO_ZC;
      /* Programmatic dependent launch after meld_gemm (MELD_GEMM_AR_DECODE_PDL=0: off): the
       * all-reduce's launch overlaps the GEMM; it waits for the GEMM's grid before its
       * handshake. */
      h.pdl = gemm_rs_env_int("MELD_GEMM_AR_DECODE_PDL", 1) != 0;
      meld_result_t r = meld_coll_run(comm, fn, ca, &h, stream, NULL);
      free(ca);
      return r;
    }
    void *buf = a->c;
    if (!direct) MELD_CHECK(meld_comm_scratch(comm, fn, "run the call once before capturing", (size_t)a->m * (size_t)pl->ldn * 2, stream, &buf));
    g.c = buf;
    g.ldc = direct ? a->ldc : pl->ldn;
    MELD_CHECK(rs_gemm(&g, f8, stream));
    MELD_CHECK(meld_all_reduce(comm, buf, buf, (size_t)a->m * (size_t)g.ldc, MELD_BF16, stream));
    if (!direct)
      MELD_CUDA_CHECK(cudaMemcpy2DAsync(a->c, (size_t)a->ldc * 2, buf, (size_t)pl->ldn * 2, (size_t)a->n * 2,
                                        (size_t)a->m, cudaMemcpyDeviceToDevice, stream));
    return MELD_OK;
  }
  void *buf = NULL;
  MELD_CHECK(meld_comm_scratch(comm, fn, "run the call once before capturing", pl->scratch_bytes, stream, &buf));
  const size_t R = (size_t)pl->split_rows, ldn = (size_t)pl->ldn;
  g.c = buf; /* rows [M, P*R) of the buffer are never written: summed, then dropped */
  g.ldc = pl->ldn;
  MELD_CHECK(rs_gemm(&g, f8, stream));
  const int direct = pl->rows_count == (int64_t)R && a->ldc == pl->ldn;
  uint16_t *recv = direct ? (uint16_t *)a->c : (uint16_t *)buf + (size_t)P * R * ldn;
  MELD_CHECK(meld_reduce_scatter(comm, buf, recv, R * ldn, MELD_BF16, stream));
  if (!direct && pl->rows_count > 0)
    MELD_CUDA_CHECK(cudaMemcpy2DAsync(a->c, (size_t)a->ldc * 2, recv, ldn * 2, (size_t)a->n * 2,
                                      (size_t)pl->rows_count, cudaMemcpyDeviceToDevice, stream));
  return MELD_OK;
}

/* f8: the fp8 forms (a is then their bf16 view; meld_error_clear done by the caller). */
static meld_result_t gemm_rs_entry(meld_comm_t comm, const meld_gemm_rs_args_t *a, int is_ar, const gemm_fp8_t *f8,
                                   cudaStream_t stream) {
  const char *fn = f8 ? (is_ar ? "meld_gemm_ar_fp8" : "meld_gemm_rs_fp8") : is_ar ? "meld_gemm_ar" : "meld_gemm_rs";
  if (!f8) meld_error_clear();
  if (!comm) return meld_error(MELD_ERR_INVALID_ARG, "%s: comm is NULL", fn);
  gemm_rs_plan_t pl;
  /* The decode rule of the plan (AR with <= SMs / 2 tiles -> unfused: meld_gemm, whose small-M
   * kernel reads B at ~cuBLAS speed, + the LL all-reduce) is on unless
   * MELD_GEMM_AR_DECODE_UNFUSED=0 (set alike on every rank). Session 3 run 2 (docs/perf-notes.md):
   * unfused beat the fused kernel at all 6 shapes with M <= 128, eager and in graphs, by 20-50%.
   * (The 2-8x "spikes" of earlier runs were the bench's: ranks entered timed graph replays up to
   * milliseconds apart; with a host barrier first they are gone.) The node's smallest SM count
   * makes every rank plan the same algorithm. */
  const int sm = gemm_rs_env_int("MELD_GEMM_AR_DECODE_UNFUSED", 1) == 1 ? meld_comm_node_sm_count(comm) : 0;
  /* Loopback (MELD_GEMM_RS_DIAG bit 10, one rank; a test and timing mode): the fused 2-rank
   * kernel of rank 0 with the peer's rows [R, 2R) standing in for the peer: their tiles are
   * pushed by TMA into this rank's own partial slot and flagged where its own tiles wait, and
   * own tile i adds the pushed tile i. So C [R rows] = (A B^T)[0, R) + (A B^T)[R, 2R): push,
   * flags, waits and the add of 2 ranks on one GPU, without NVLink. AR (owner mode): the
   * reduced tiles also go where the virtual peer's would come from (this rank's result slot,
   * or with a symmetric C its rows [R, 2R)) and the tail copies / waits for them, so C [2R
   * rows] holds the sum twice. */
  const int loop = comm->nranks == 1 && (gemm_rs_env_int("MELD_GEMM_RS_DIAG", 0) & 1024);
  MELD_CHECK(gemm_rs_plan_make_sm(a, is_ar, loop ? 2 : comm->nranks, loop ? 0 : comm->rank, comm->nnodes,
                                  comm->workspace.bytes, sm, &pl));
  if (f8) /* (ranks that disagree on the dtype fail the handshake: the view of K 2k is bf16's K k) */
    pl.arg_hash = meld_hash_fold(meld_hash_u64(meld_hash_u64(meld_hash_init(), pl.arg_hash), 0xf8));
  /* (M = 2 x rows per owner: the virtual peer's rows are exactly the second half, or its
   * partials / reduced rows would be missing or fall past C) */
  /* (the decode kernel's loopback, with MELD_GEMM_AR_DECODE_FUSED=1, is below) */
  const int dec_loop = !f8 && loop && is_ar && pl.algo != MELD_GEMM_RS_FUSED && gemm_rs_env_int("MELD_GEMM_AR_DECODE_FUSED", 0) == 1;
  if (loop && !dec_loop && (pl.algo != MELD_GEMM_RS_FUSED || pl.sym || a->m != 2 * (int64_t)pl.rpo))
    return meld_error(MELD_ERR_UNSUPPORTED, "%s: MELD_GEMM_RS_DIAG=1024 (loopback) needs the fused plan at 2 ranks "
                      "in owner mode with M = 2 x a multiple of 128 (enough tiles)", fn);
  /* (across nodes the plan is unfused: meld_gemm, then the collective's inter-node path) */
  /* A comm whose device protocol failed (sticky) reports it instead of launching. */
  MELD_CHECK(meld_proto_sticky_error(comm, fn));
  /* The decode kernel's loopback: C = 2 x A B^T exactly. */
  if (dec_loop) {
    int taken = 0;
    const meld_gemm_args_t g = gemm_rs_gemm_args(a);
    meld_result_t r = gemm_ar_decode_fused(comm, &g, a->c, a->ldc, 1, pl.arg_hash, stream, &taken);
    if (r == MELD_OK && !taken)
      r = meld_error(MELD_ERR_UNSUPPORTED, "%s: MELD_GEMM_RS_DIAG=1024 with MELD_GEMM_AR_DECODE_FUSED=1 (the decode "
                     "kernel's loopback) needs a small-M plan in one wave and 2 x M x N x 2 bytes within half the workspace", fn);
    if (r != MELD_OK) meld_error_prefix("%s", fn);
    return r;
  }
  char why[256];
  if (gemm_rs_plan_check(&pl, comm->workspace.bytes, why, sizeof why))
    return meld_error(MELD_ERR_INTERNAL, "%s: %s", fn, why);
  meld_result_t r = pl.algo == MELD_GEMM_RS_FUSED ? gemm_rs_fused(comm, a, &pl, loop, f8, stream)
                                                  : gemm_rs_unfused(comm, a, &pl, f8, stream);
  if (r != MELD_OK) meld_error_prefix("%s", fn);
  return r;
}

extern "C" meld_result_t meld_gemm_rs(meld_comm_t comm, const meld_gemm_rs_args_t *args, cudaStream_t stream) {
  return gemm_rs_entry(comm, args, 0, NULL, stream);
}

extern "C" meld_result_t meld_gemm_ar(meld_comm_t comm, const meld_gemm_rs_args_t *args, cudaStream_t stream) {
  return gemm_rs_entry(comm, args, 1, NULL, stream);
}

/* The fp8 forms: validated in fp8 terms, then their bf16 view (half the K) through the same
 * plan, fused kernel (F8 instances) or unfused path. */
static meld_result_t gemm_rs_fp8_entry(meld_comm_t comm, const meld_gemm_rs_fp8_args_t *a, int is_ar,
                                       cudaStream_t stream) {
  meld_error_clear();
  const char *fn = is_ar ? "meld_gemm_ar_fp8" : "meld_gemm_rs_fp8";
  if (!a) return meld_error(MELD_ERR_INVALID_ARG, "%s: args is NULL", fn);
  MELD_CHECK(gemm_fp8_check_k(fn, a->k)); /* (always: the view's k is half of it) */
  if (a->m > 0 && a->n > 0) {
    if (!a->a || !a->b || !a->c)
      return meld_error(MELD_ERR_INVALID_ARG, "%s: %s is NULL", fn, !a->a ? "a" : !a->b ? "b" : "c");
    MELD_CHECK(gemm_fp8_validate(fn, a->a, a->lda, a->b, a->ldb, a->k, a->scale_a, a->scale_b, (int)a->scaling));
  }
  meld_gemm_rs_args_t v;
  memset(&v, 0, sizeof v);
  v.a = a->a, v.lda = a->lda / 2, v.b = a->b, v.ldb = a->ldb / 2, v.b_layout = MELD_B_NK;
  v.c = a->c, v.ldc = a->ldc, v.m = a->m, v.n = a->n, v.k = a->k / 2, v.algo = a->algo;
  gemm_fp8_t f8;
  MELD_CHECK(gemm_fp8_scales(a->scale_a, a->scale_b, (int)a->scaling, &f8));
  return gemm_rs_entry(comm, &v, is_ar, &f8, stream);
}

extern "C" meld_result_t meld_gemm_rs_fp8(meld_comm_t comm, const meld_gemm_rs_fp8_args_t *args, cudaStream_t stream) {
  return gemm_rs_fp8_entry(comm, args, 0, stream);
}

extern "C" meld_result_t meld_gemm_ar_fp8(meld_comm_t comm, const meld_gemm_rs_fp8_args_t *args, cudaStream_t stream) {
  return gemm_rs_fp8_entry(comm, args, 1, stream);
}
