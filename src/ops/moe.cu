/* moe.cu — MoE token dispatch fused with the grouped GEMM (meld_moe_dispatch_gemm).
 *
 * ONE kernel a call by default (DESIGN.md section 7b): the fused kernel's first route_ctas comm
 * CTAs run the routing (1.) and publish the layout (a scratch word), then every comm CTA copies
 * (2.). With MELD_MOE_ROUTE_IN=0 or MELD_MOE_DEFER=0 the routing runs in a kernel of its own
 * (CTAs of 1024 threads) before the fused kernel (two kernels, sessions 31-34).
 *
 * 1. The routing (one CTA, or several: in its own kernel from 16384 pairs one per 4096 up to 16,
 *    in the fused kernel from 6144 pairs one per 1536 up to the comm CTAs; each counts and places
 *    its range around one barrier; CTA 0 then does the rest): counts this rank's (token, slot)
 *    pairs per global expert, sorts the pairs by expert (a deterministic counting sort: an
 *    expert's pairs in pair order), zeroes this rank's block and arrival counters, writes its
 *    count row into every rank's counts region with one release stamp a peer, waits for every
 *    peer's row (deadline), and from the full counts matrix derives the layout every rank derives
 *    alike: expert e's segment on its rank starts at the sum of the padded (to 128 rows) totals of
 *    the experts before it on that rank; within it the rows come by source rank (srcoff). It checks
 *    every rank's rows against capacity (all ranks fail alike: MELD_FAIL_INPUT), writes
 *    expert_offsets / expert_counts and the GEMM's per-m-block weight table (hook f: local expert
 *    x n, or -1 for an unused block).
 * 2. The fused kernel (persistent, cooperative, one CTA per SM): the first comm_ctas CTAs copy
 *    rows (after the layout word, when the routing is theirs): unit (m-block mb, destination d)
 *    for every block in use on d, d = me first in each round, so every destination fills its
 *    blocks in order, in parallel. A unit copies this rank's rows that fall in block mb of d
 *    (bulk copies through shared memory, or 16-byte vectors a warp a row; the row's origin beside
 *    it) and then adds 1 to d's counter of the block (red.release.sys after bar.sync: cumulative
 *    over the CTA's stores), also when it copied nothing: a block is complete when its counter
 *    reaches P. Then, if row_origin is asked, they copy the origins of complete blocks out, and
 *    join the GEMM. Every CTA runs the GEMM engine over [capacity, hidden] of staging x the
 *    experts' weights: the producer waits for the layout word (routing in the kernel), skips
 *    unused blocks and offsets B by the block's expert (hook f), and waits per block for its
 *    counter to reach P (the ready hook, acquire + proxy fence; deadline).
 *
 * Buffer reuse across calls: a peer writes this rank's staging, origins and counters in call
 * e + 1 only after it has seen this rank's counts stamp of e + 1, which this rank's routing sends
 * after zeroing its counters, in a kernel that started after this rank's fused kernel of e ended
 * (every block it used reached P and was read). The counts region is written by a peer's routing
 * of e + 1 after its kernel's entry handshake, i.e. after this rank's kernel of e (whose routing
 * alone reads the region) ended. So no credits are needed. */
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "common/proto.h"
#include "device/copy.cuh"
#include "device/gemm.cuh"
#include "device/launch.cuh"
#include "device/signal.cuh"
#include "error.h"
#include "config.h" /* meld_env_int64 */
#include "gemm_plan.h"
#include "log.h"
#include "moe_plan.h"
#include "proto.h"

/* What both kernels read (by value). */
typedef struct {
  int32_t rank, nranks, experts, e_loc, topk, blocks, comm_ctas, handshake_only;
  uint32_t arg_hash;
  uint32_t op; /* moe_kernel's protocol op: MELD_OP_MOE_DISPATCH_GEMM, or MELD_OP_MOE_FFN for
                  meld_moe_ffn's second GEMM with the combine's sends (no comm CTAs: its entry
                  handshake proves every peer's dispatch kernel ended, so their staging, which
                  its rows overwrite, is no longer read) */
  int32_t copy; /* MOE_COPY_* (MELD_MOE_COPY) */
  int32_t diag; /* MELD_MOE_DIAG (timing only, wrong results): bit 0 = no copies (the blocks are
                   still counted: the GEMM and the protocol alone), bit 1 = no GEMM (the routing
                   and the copies alone) */
  int32_t pad_skip; /* GEMM_GRP_PAD1 flags in the block table (MELD_MOE_PAD_SKIP, default 1) */
  int32_t route_ctas; /* the routing CTAs (moe_plan_t.route_ctas) */
  int32_t route_in;   /* 1: the fused kernel's first route_ctas comm CTAs route (no routing kernel;
                         moe_plan_t.route_in) */
  int32_t route;    /* the routing kernel's place walk (MELD_MOE_ROUTE): bit 0 = a pair's rank among
                       its chunk's lanes of the same expert by ballots (else __match_any_sync);
                       bit 1 = the sorted pairs staged in shared memory (set only where they fit:
                       moe_route_smem), written out coalesced */
  int64_t tokens, hidden, n, capacity, ldx;
  const uint8_t *x;
  const int32_t *ids;
  int32_t *expert_offsets, *expert_counts, *row_origin;
  uint32_t *status; /* the GEMM ready hook's status word */
  const uint8_t *y2; /* meld_moe_combine: the experts' outputs [capacity, hidden]          */
  const float *wt;   /* meld_moe_combine: topk_weights [tokens, topk]                       */
  uint8_t *out;      /* meld_moe_combine: [tokens, hidden], ld ldo                           */
  int64_t ldo;
  int32_t pieces;    /* meld_moe_combine: 0 = it sends the rows itself; > 0 = the second GEMM's
                        epilogue sent them, in this many column pieces a row (its tiles_n)  */
  moe_layout_t ws;
  uint8_t *wsp[MOE_MAX_RANKS]; /* every rank's workspace as mapped here; [rank] = own */
} moe_common_t;

typedef struct {
  moe_common_t c;
  gemm_params_t g;
} moe_kargs_t;

/* ---- device side ------------------------------------------------------------------------- */

template <class T>
MELD_DEV T *moe_at(const moe_common_t *a, int r, size_t off) {
  return (T *)(a->wsp[r] + off);
}

/* In-place exclusive prefix sum of v[0..n) in shared memory by the whole CTA (1-D, a multiple
 * of 32 threads, at most 1024); wt: 32 words of shared memory. Returns the total. Rounds of nt
 * elements, one a thread (the same trip count in every thread; every warp scans the warps'
 * totals itself, no warp-0-only branch). */
MELD_DEV int64_t moe_block_exscan(int64_t *v, int n, int64_t *wt) {
  const int tid = threadIdx.x, nt = blockDim.x, lane = tid & 31, w = tid >> 5, nw = nt >> 5;
  int64_t carry = 0;
  for (int r = 0; r < n; r += nt) {
    const int i = r + tid;
    const int64_t s = i < n ? v[i] : 0;
    int64_t x = s;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int64_t y = __shfl_up_sync(0xffffffffu, x, o);
      if (lane >= o) x += y;
    }
    if (lane == 31) wt[w] = x;
    __syncthreads();
    int64_t t = lane < nw ? wt[lane] : 0; /* every warp scans the warps' totals */
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int64_t y = __shfl_up_sync(0xffffffffu, t, o);
      if (lane >= o) t += y;
    }
    const int64_t below = __shfl_sync(0xffffffffu, t, (w + 31) & 31), round = __shfl_sync(0xffffffffu, t, nw - 1);
    if (i < n) v[i] = carry + x - s + (w ? below : 0);
    carry += round;
    __syncthreads(); /* (wt is reused by the next round) */
  }
  return carry;
}

/* The routing kernel's body (see the file comment). smem: moe_route_smem(E). The counting sort is
 * deterministic: warp w (of all C x W warps of the C CTAs) takes the pairs [w n / CW, (w + 1) n /
 * CW) in order, counts them per expert in its own row of wh (a shared atomic a pair: counts need
 * no order), a warp an expert scans the column into each warp's first slot relative to the
 * expert's start in this CTA (with several CTAs, one barrier then adds the lower CTAs' counts),
 * and a second walk places every pair at estart + its CTA's and warp's slot + its rank among the
 * chunk's lanes with the same expert (__match_any_sync, or moe_same_lanes): the pairs of an expert
 * in pair order. */
#define MOE_RW (MOE_ROUTE_THREADS / 32)
static_assert(MOE_RW <= 32, "the column scan takes a warp row a lane");
/* Pairs a lane loads ahead in the walks (a step's ids loaded before their use). 1: the routing's
 * code runs once a call, cold (the GEMM swept L2; ncu, session 35: 65% of the routing kernel's
 * warp samples at decode were no_instruction), so the loops' size is its time: with 8 (sessions
 * 31-34) the place walk took 5.2 us at decode, with 2 3.4, with 1 2.7 (the call -2.2 us); T 4096
 * and Mixtral even (session 35 call 6, bench/calls/p1_s35e.sh). -DMOE_RU=n for experiments. */
#ifndef MOE_RU
#define MOE_RU 1
#endif
/* A lane's MOE_RU ids of the 32 x MOE_RU pairs from c0 (-1 past hi), loaded ahead of their use. */
MELD_DEV void moe_ids_ahead(const moe_common_t *a, int c0, int hi, int lane, int32_t *ev) {
#pragma unroll
  for (int u = 0; u < MOE_RU; u++) ev[u] = c0 + 32 * u + lane < hi ? a->ids[c0 + 32 * u + lane] : -1;
}

/* The lanes of this warp whose e equals this lane's (e in [0, 2^bits), or < 0: no expert; those
 * lanes match each other): a ballot a bit of the id and one for validity (MELD_MOE_ROUTE bit 0).
 * __match_any_sync cost ~1 us a step of 32 warps with ~32 distinct values a warp (session 34: the
 * place walk 35 us at 32768 pairs on one CTA), this about half that, but more than match where
 * a warp's lanes share few values (decode: 8.5 vs 5.7 us), so match is the default. */
MELD_DEV unsigned moe_same_lanes(int e, int bits) {
  const unsigned valid = __ballot_sync(0xffffffffu, e >= 0);
  unsigned same = e >= 0 ? valid : ~valid;
  for (int b = 0; b < bits; b++) {
    const bool on = (e >> b) & 1;
    const unsigned m = __ballot_sync(0xffffffffu, on);
    same &= on ? m : ~m;
  }
  return same;
}

/* MELD_TRACE: thread 0 records the routing kernel's phase `ph` (role "route", item = phase: 0
 * entry, 1 count, 2 scans, 3 place, 4 counts exchange, 5 layout, 6 tables, 7 exit), from *t0 to
 * now; *t0 becomes now. No-op when tracing is off (*t0 = 0). */
MELD_DEV void moe_route_mark(const meld_ctx_t *ctx, uint32_t ph, uint64_t *t0) {
  if (threadIdx.x != 0 || !*t0) return;
  meld_trace_record(&ctx->p->trace, MELD_ROLE_ROUTE, ph, ctx->epoch, *t0);
  *t0 = globaltimer_ns();
}

/* Bytes of moe_route's v, tot, wh and cbase (16-byte aligned end: the staged pairs follow). */
MELD_HD size_t moe_route_smem_base(int E) {
  return ((size_t)(E + 1) * 8 + (size_t)E * 4 + (size_t)MOE_RW * (E | 1) * 4 + (size_t)E * 4 + 15) / 16 * 16;
}

/* The routing's end in the fused kernel (route_in): scratch words MOE_LAYOUT_WORD.. (a u64, zero at
 * every call's entry) become 1 once CTA 0 has written the layout, the tables and the zeroed block
 * counters; the other comm CTAs and the GEMM's producers wait for it. */
#define MOE_LAYOUT_WORD 4

/* cta of C: this CTA's place among the routing CTAs (the routing kernel's block, or the fused
 * kernel's comm ticket). Every return is CTA-uniform. */
MELD_DEV void moe_route(meld_ctx_t *ctx, const moe_common_t *a, uint8_t *smem, uint64_t *tm, int cta, int C) {
  __shared__ int64_t wt[32];
  __shared__ int32_t s_bad, s_fail, s_over;
  const int E = a->experts, P = a->nranks, me = a->rank, EL = a->e_loc;
  const int tid = threadIdx.x, nt = blockDim.x, lane = tid & 31, w = tid >> 5, nw = nt >> 5; /* nw <= MOE_RW */
  const int WS = E | 1;                   /* wh's row stride: odd, so a column is conflict-free */
  const int bits = E > 1 ? 32 - __clz(E - 1) : 0;
  int64_t *v = (int64_t *)smem;           /* [E + 1] */
  int32_t *tot = (int32_t *)(v + E + 1);  /* [E]: every rank's rows per expert (layout) */
  int32_t *wh = tot + E;                  /* [W][WS]: warp w's pairs per expert, then its first slot */
  int32_t *cbase = wh + MOE_RW * WS;      /* [E]: (several CTAs) the expert's pairs in lower CTAs */
  int32_t *estart = moe_at<int32_t>(a, me, a->ws.estart), *sorted = moe_at<int32_t>(a, me, a->ws.sorted);
  int32_t *inv = moe_at<int32_t>(a, me, a->ws.inv);
  const int pairs = (int)(a->tokens * a->topk);
  /* CTA c of C takes pairs [c n / C, (c + 1) n / C), its warp w the w-th of that range's nw parts */
  const int gw = cta * nw + w, GW = C * nw;
  const int lo = (int)((int64_t)pairs * gw / GW), hi = (int)((int64_t)pairs * (gw + 1) / GW);
  if (tid == 0) s_bad = -1, s_fail = 0, s_over = -1;
  for (int i = tid; i < nw * WS; i += nt) wh[i] = 0;
  __syncthreads();
  int32_t *mine = wh + w * WS;
  for (int c0 = lo; c0 < hi; c0 += 32 * MOE_RU) {
    int32_t ev[MOE_RU];
    moe_ids_ahead(a, c0, hi, lane, ev);
#pragma unroll
    for (int u = 0; u < MOE_RU; u++) {
      const int e = ev[u];
      if (e != -1 && (unsigned)e >= (unsigned)E) s_bad = c0 + 32 * u + lane; /* (any one of them) */
      if ((unsigned)e < (unsigned)E) atomicAdd(&mine[e], 1);
    }
  }
  __syncthreads();
  moe_route_mark(ctx, 1, tm);
  if (s_bad >= 0) {
    if (tid == 0)
      meld_fail(ctx, MELD_FAIL_INPUT, meld_wait_info(MELD_REGION_NONE, (uint32_t)s_bad, me, "moe: topk id out of range"),
                (uint64_t)E, (uint64_t)(uint32_t)a->ids[s_bad], 0, 0);
    if (C == 1) return; /* (several CTAs: still at the barrier below, where the others see the abort) */
  }
  /* Per expert (a warp each, a lane a warp row): this rank's count (v), and each warp's first
   * slot relative to the expert's. */
  for (int e = w; e < E; e += nw) {
    const int32_t c = lane < nw ? wh[lane * WS + e] : 0;
    int32_t x = c;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int32_t y = __shfl_up_sync(0xffffffffu, x, o);
      if (lane >= o) x += y;
    }
    if (lane < nw) wh[lane * WS + e] = x - c;
    if (lane == 31) v[e] = x;
  }
  __syncthreads();
  if (C > 1) { /* every CTA's counts, one barrier, then the sums: each CTA's base and the totals */
    int32_t *cc = moe_at<int32_t>(a, me, a->ws.ccount);
    for (int e = tid; e < E; e += nt) cc[(size_t)cta * E + e] = (int32_t)v[e];
    __syncthreads(); /* every thread's stores precede thread 0's cumulative release */
    if (tid == 0) {
      uint64_t *bar = (uint64_t *)meld_scratch(ctx, 2); /* (words 2-3: zero at every call's entry) */
      red_release_sys_add_u64(bar, 1ull);
      if (!meld_wait_ge(ctx, bar, (uint64_t)C, meld_wait_info(MELD_REGION_OTHER, 0, -1, "moe: routing CTAs' counts")) ||
          ld_relaxed_sys_u32(meld_abort_word(ctx->p)) != 0u)
        s_fail = 1;
    }
    __syncthreads();
    if (s_fail || s_bad >= 0) return;
    for (int e = tid; e < E; e += nt) {
      int64_t below = 0, all = 0;
      for (int x = 0; x < C; x++) {
        const int32_t n = __ldcg(cc + (size_t)x * E + e); /* (other CTAs' stores: past L1) */
        all += n;
        if (x < cta) below += n;
      }
      cbase[e] = (int32_t)below;
      v[e] = all;
    }
    __syncthreads();
  }
  int32_t *cnt_row = moe_at<int32_t>(a, me, a->ws.counts) + (size_t)me * E; /* (own row first: read below) */
  if (cta == 0)
    for (int e = tid; e < E; e += nt) cnt_row[e] = (int32_t)v[e];
  __syncthreads();
  const int64_t valid = moe_block_exscan(v, E, wt); /* v[e] = the expert's first slot */
  if (cta == 0) {
    for (int e = tid; e < E; e += nt) estart[e] = (int32_t)v[e];
    if (tid == 0) estart[E] = (int32_t)valid;
  }
  if (C > 1) { /* this CTA's first slot of each expert */
    for (int e = tid; e < E; e += nt) v[e] += cbase[e];
    __syncthreads();
  }
  moe_route_mark(ctx, 2, tm);
  const bool ballots = a->route & 1, staged = a->route & 2;
  int32_t *place = staged ? (int32_t *)(smem + moe_route_smem_base(E)) : sorted;
  for (int c0 = lo; c0 < hi; c0 += 32 * MOE_RU) {
    int32_t ev[MOE_RU];
    moe_ids_ahead(a, c0, hi, lane, ev);
#pragma unroll
    for (int u = 0; u < MOE_RU; u++) {
      const int e = ev[u]; /* (all in range: the count walk checked them) */
      const unsigned same = ballots ? moe_same_lanes(e, bits) : __match_any_sync(0xffffffffu, e);
      const int slot = e >= 0 ? mine[e] : 0;
      __syncwarp();
      if (e >= 0) {
        const int32_t at = (int32_t)v[e] + slot + __popc(same & ((1u << lane) - 1u));
        place[at] = c0 + 32 * u + lane;
        inv[c0 + 32 * u + lane] = at;
        if (lane == __ffs(same) - 1) mine[e] = slot + __popc(same);
      }
      __syncwarp();
    }
  }
  if (staged) { /* the sorted pairs out in 16-byte vectors (pairs fill [0, valid)) */
    __syncthreads();
    const int nv = (int)(valid / 4);
    for (int i = tid; i < nv; i += nt) ((int4 *)sorted)[i] = ((const int4 *)place)[i];
    for (int i = nv * 4 + tid; i < (int)valid; i += nt) sorted[i] = place[i];
  }
  if (cta != 0) return; /* (several CTAs: the rest is CTA 0's) */
  /* This rank's block counters and the combine's arrival counters to zero BEFORE the stamps
   * below: a peer adds to them only after it has seen this rank's stamp (with route_in the
   * peers' comm CTAs copy in the same kernel generation as this routing). */
  uint64_t *flags = moe_at<uint64_t>(a, me, a->ws.flags);
  for (int mb = tid; mb < a->blocks; mb += nt) flags[mb] = 0;
  if (tid < P) moe_at<uint64_t>(a, me, a->ws.arrivals)[tid] = 0;
  /* The count row into every peer's counts region, then one stamp a peer. */
  for (int d = 0; d < P; d++) {
    if (d == me) continue;
    int32_t *dst = moe_at<int32_t>(a, d, a->ws.counts) + (size_t)me * E;
    for (int e = tid; e < E; e += nt) dst[e] = cnt_row[e];
  }
  __syncthreads();
  moe_route_mark(ctx, 3, tm);
  if (tid == 0) {
    const uint64_t stamp = meld_stamp(ctx->epoch, 1);
    for (int t = 1; t < P; t++) meld_signal_put(ctx, (me + t) % P, meld_signal_index(me, P, 0, 0, 1), stamp);
    for (int t = 1; t < P && !s_fail; t++) {
      const int s = (me + P - t) % P;
      if (!meld_wait_signal(ctx, meld_signal_index(s, P, 0, 0, 1), stamp, s, "moe: expert counts")) s_fail = 1;
    }
  }
  __syncthreads();
  if (s_fail) return;
  moe_route_mark(ctx, 4, tm);
  /* The layout (every rank computes the same): totals, padded segment starts, this rank's offsets. */
  const int32_t *cnt = moe_at<const int32_t>(a, me, a->ws.counts);
  int32_t *seg = moe_at<int32_t>(a, me, a->ws.seg), *srcoff = moe_at<int32_t>(a, me, a->ws.srcoff);
  int32_t *used = moe_at<int32_t>(a, me, a->ws.used);
  for (int e = tid; e < E; e += nt) {
    int64_t m = 0, before = 0;
    for (int s = 0; s < P; s++) {
      const int64_t c = __ldcg(cnt + (size_t)s * E + e); /* (peers' stores: past L1) */
      m += c;
      if (s < me) before += c;
    }
    tot[e] = (int32_t)min(m, (int64_t)INT32_MAX);
    srcoff[e] = (int32_t)before;
    v[e] = (m + MOE_BM - 1) / MOE_BM * MOE_BM;
  }
  __syncthreads();
  const int64_t all = moe_block_exscan(v, E, wt);
  if (tid == 0) v[E] = all;
  __syncthreads();
  for (int e = tid; e < E; e += nt) seg[e] = (int32_t)min(v[e] - v[e / EL * EL], (int64_t)INT32_MAX);
  for (int d = tid; d < P; d += nt) {
    const int64_t end = v[(d + 1) * EL] - v[d * EL];
    if (end > a->capacity) atomicMax(&s_over, d);
    used[d] = (int32_t)(min(end, a->capacity) / MOE_BM);
  }
  __syncthreads();
  if (s_over >= 0) {
    if (tid == 0)
      meld_fail(ctx, MELD_FAIL_INPUT,
                meld_wait_info(MELD_REGION_NONE, 0, s_over, "moe: rows for a rank > capacity"), (uint64_t)a->capacity,
                (uint64_t)(v[(s_over + 1) * EL] - v[s_over * EL]), 0, 0);
    return;
  }
  moe_route_mark(ctx, 5, tm);
  /* This rank's outputs and the GEMM's tables. */
  const int64_t base = v[me * EL];
  for (int j = tid; j < EL; j += nt) {
    a->expert_offsets[j] = (int32_t)(v[me * EL + j] - base);
    a->expert_counts[j] = tot[me * EL + j];
  }
  if (tid == 0) a->expert_offsets[EL] = used[me] * MOE_BM;
  int32_t *brow = moe_at<int32_t>(a, me, a->ws.brow);
  int32_t *span = moe_at<int32_t>(a, me, a->ws.span);
  for (int mb = tid; mb < a->blocks; mb += nt) brow[mb] = -1, span[2 * mb] = mb, span[2 * mb + 1] = 1;
  __syncthreads();
  for (int j = tid; j < EL; j += nt) {
    const int e = me * EL + j;
    const int64_t mb0 = (v[e] - base) / MOE_BM, mb1 = (v[e + 1] - base) / MOE_BM;
    for (int64_t mb = mb0; mb < mb1; mb++) brow[mb] = j, span[2 * mb] = (int32_t)mb0, span[2 * mb + 1] = (int32_t)(mb1 - mb0);
    /* the expert's last block with <= 64 rows: its second half is padding (GEMM_GRP_PAD1: the
     * engine's warpgroup 1 skips its MMAs there; half the MMA work of that block) */
    if (a->pad_skip && mb1 > mb0 && tot[e] - (mb1 - 1 - mb0) * MOE_BM <= MOE_BM / 2) brow[mb1 - 1] = j | GEMM_GRP_PAD1;
  }
  __syncthreads(); /* (MELD_TRACE: the phase's end is the last thread's; route_in: every thread's
                      table stores precede thread 0's release) */
  if (a->route_in && tid == 0) st_release_sys_u64((uint64_t *)meld_scratch(ctx, MOE_LAYOUT_WORD), 1ull);
  moe_route_mark(ctx, 6, tm);
}

__global__ void __launch_bounds__(MOE_ROUTE_THREADS, 1)
    moe_route_kernel(const __grid_constant__ meld_proto_dev_t proto, const __grid_constant__ moe_common_t a) {
  extern __shared__ __align__(16) uint8_t moe_rsmem[];
  meld_ctx_t ctx;
  uint64_t tm = threadIdx.x == 0 ? meld_trace_now(&proto.trace) : 0;
  const bool go = meld_call_begin(&ctx, &proto, MELD_OP_MOE_DISPATCH_GEMM, a.arg_hash, 0) && !a.handshake_only;
  moe_route_mark(&ctx, 0, &tm);
  if (go) moe_route(&ctx, &a, moe_rsmem, &tm, (int)blockIdx.x, (int)gridDim.x);
  meld_call_end(&ctx);
  moe_route_mark(&ctx, 7, &tm);
}

/* Local expert j of rank d whose segment holds row `row` (< the rank's rows in use): the last
 * j with seg[d EL + j] <= row (empty segments share their start with the next one). */
MELD_DEV int moe_expert_of_row(const int32_t *seg, int d, int EL, int64_t row) {
  int lo = 0, hi = EL - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (seg[d * EL + mid] <= row) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/* Bulk copies of a comm CTA (MELD_MOE_COPY=bulk, the default): one thread moves rows through
 * MOE_NB shared-memory buffers of MOE_PIECE bytes (the engine's shared memory, before this CTA
 * joins the GEMM): piece g is loaded into buffer g % NB (cp.async.bulk, complete_tx on the
 * buffer's mbarrier, parity (g / NB) & 1) and stored MOE_LAG pieces later (one bulk group each),
 * so LAG loads stay in flight (~128 KB a CTA, where 12 warps of 16-byte vectors keep ~24 KB).
 * A buffer is reloaded once its previous store has read it: then at most NB - LAG - 1 newer
 * stores may still be reading. */
#define MOE_PIECE 16384u
#define MOE_NB 12
#define MOE_LAG 8
#define MOE_BAR_OFF (MOE_NB * MOE_PIECE)
#define MOE_PEND_OFF (MOE_BAR_OFF + 8 * MOE_NB) /* per buffer: destination (8 B), bytes (8 B) */
static_assert(MOE_PEND_OFF + 16 * MOE_NB + 1024 <= GEMM_SMEM_BYTES, "bulk buffers exceed the kernel's smem");

MELD_DEV void moe_bulk_store(uint32_t sbase, uint32_t q) {
  const uint32_t b = q % MOE_NB;
  mbar_wait(sbase + MOE_BAR_OFF + 8 * b, (q / MOE_NB) & 1u);
  void *dst = (void *)ld_shared_u64(sbase + MOE_PEND_OFF + 16 * b);
  cp_async_bulk_s2g(dst, sbase + b * MOE_PIECE, ld_shared_u32(sbase + MOE_PEND_OFF + 16 * b + 8));
  cp_async_bulk_commit_group();
}

/* Queues one piece (16-byte aligned, a multiple of 16 bytes, <= MOE_PIECE); *g pieces loaded, *s
 * stored so far. */
MELD_DEV void moe_bulk_put(uint32_t sbase, uint32_t *g, uint32_t *s, void *dst, const void *src, uint32_t len) {
  const uint32_t b = *g % MOE_NB;
  if (*g >= MOE_NB) asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(MOE_NB - MOE_LAG - 1) : "memory");
  st_shared_u64(sbase + MOE_PEND_OFF + 16 * b, (uint64_t)dst);
  st_shared_u32(sbase + MOE_PEND_OFF + 16 * b + 8, len);
  mbarrier_arrive_expect_tx_cta(sbase + MOE_BAR_OFF + 8 * b, len);
  cp_async_bulk_g2s(sbase + b * MOE_PIECE, src, len, sbase + MOE_BAR_OFF + 8 * b);
  if (++*g - *s > MOE_LAG) moe_bulk_store(sbase, (*s)++);
}

/* Stores what is queued and waits until every write is performed (a release by this thread then
 * publishes them). */
MELD_DEV void moe_bulk_flush(uint32_t sbase, uint32_t *g, uint32_t *s) {
  while (*s < *g) moe_bulk_store(sbase, (*s)++);
  cp_async_bulk_wait_group0();
}

/* Comm role of CTA c (of comm_ctas). Not inlined: its registers stay out of the engine's. */
__device__ __noinline__ void moe_comm(meld_ctx_t ctx_v, const moe_common_t *a, uint32_t c, uint8_t *smem) {
  meld_ctx_t *ctx = &ctx_v;
  const int P = a->nranks, me = a->rank, E = a->experts, EL = a->e_loc;
  if (a->route_in) { /* the routing CTAs route; all wait for the layout (routing CTA 0's) */
    __shared__ int32_t s_lay;
    if (threadIdx.x == 0)
      s_lay = meld_wait_ge(ctx, (const uint64_t *)meld_scratch(ctx, MOE_LAYOUT_WORD), 1ull,
                           meld_wait_info(MELD_REGION_OTHER, 0, -1, "moe: the routing's layout"));
    __syncthreads();
    if (!s_lay) return;
  }
  const int32_t *estart = moe_at<const int32_t>(a, me, a->ws.estart), *sorted = moe_at<const int32_t>(a, me, a->ws.sorted);
  const int32_t *seg = moe_at<const int32_t>(a, me, a->ws.seg), *srcoff = moe_at<const int32_t>(a, me, a->ws.srcoff);
  const int32_t *used = moe_at<const int32_t>(a, me, a->ws.used);
  const int32_t *mine = moe_at<const int32_t>(a, me, a->ws.counts) + (size_t)me * E;
  int maxu = 0;
  for (int d = 0; d < P; d++) maxu = max(maxu, used[d]);
  const int rb16 = (int)(a->hidden / 8); /* 16-byte vectors a row */
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
  const uint32_t sbase = (smem_addr(smem) + 1023u) & ~1023u;
  const bool bulk = a->copy == MOE_COPY_BULK;
  __shared__ int32_t s_pair[MOE_BM]; /* (bulk) the unit's pairs, loaded by all threads */
  uint32_t g = 0, sg = 0;            /* (bulk, thread 0) pieces loaded / stored */
  if (bulk && threadIdx.x == 0) {
    for (int i = 0; i < MOE_NB; i++) mbarrier_init_cta(sbase + MOE_BAR_OFF + 8 * i, 1);
    fence_proxy_async_smem_cta(); /* the async proxy (the loads' complete_tx) sees the inits */
  }
  __syncthreads();
  for (int u = (int)c; u < maxu * P; u += a->comm_ctas) {
    const int mb = u / P, d = (me + u % P) % P;
    if (mb >= used[d]) continue;
    const uint64_t tu = threadIdx.x == 0 ? meld_trace_now(&ctx->p->trace) : 0;
    const int64_t r0 = (int64_t)mb * MOE_BM;
    const int e = d * EL + moe_expert_of_row(seg, d, EL, r0);
    const int64_t first = (int64_t)seg[e] + srcoff[e]; /* this rank's first row of e on d */
    const int j0 = (int)max((int64_t)0, r0 - first), j1 = (int)min((int64_t)mine[e], r0 + MOE_BM - first);
    if (!(a->diag & 1)) {
      uint8_t *stage = a->wsp[d] + a->ws.stage;
      int2 *orig = (int2 *)(a->wsp[d] + a->ws.origin);
      if (!bulk) {
        for (int j = j0 + warp; j < j1; j += nw) {
          const int pair = sorted[estart[e] + j];
          const int64_t t = pair / a->topk, row = first + j;
          copy_vec16<4, int>((int4 *)(stage + row * a->hidden * 2), (const int4 *)(a->x + t * a->ldx * 2), rb16, lane,
                             32u);
          if (lane == 0) orig[row] = make_int2(me, pair);
        }
      } else {
        for (int j = j0 + (int)threadIdx.x; j < j1; j += (int)blockDim.x) s_pair[j - j0] = sorted[estart[e] + j];
        __syncthreads();
        if (threadIdx.x == 0) {
          const uint32_t rb = (uint32_t)(a->hidden * 2);
          for (int j = j0; j < j1; j++) {
            const int pair = s_pair[j - j0];
            const int64_t row = first + j;
            const uint8_t *src = a->x + (int64_t)(pair / a->topk) * a->ldx * 2;
            uint8_t *dst = stage + row * (int64_t)rb;
            for (uint32_t off = 0; off < rb; off += MOE_PIECE)
              moe_bulk_put(sbase, &g, &sg, dst + off, src + off, min(MOE_PIECE, rb - off));
            orig[row] = make_int2(me, pair);
          }
          moe_bulk_flush(sbase, &g, &sg); /* the writes performed before this thread's release */
        }
      }
    }
    __syncthreads(); /* every thread's stores precede thread 0's cumulative release */
    if (threadIdx.x == 0) red_release_sys_add_u64(moe_at<uint64_t>(a, d, a->ws.flags) + mb, 1ull);
    if (tu) meld_trace_record(&ctx->p->trace, MELD_ROLE_COMM, (uint32_t)u, ctx->epoch, tu);
  }
  if (bulk && threadIdx.x == 0)
    for (int i = 0; i < MOE_NB; i++) asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(sbase + MOE_BAR_OFF + 8 * i) : "memory");
  __syncthreads(); /* (the engine's barrier inits and TMA writes reuse this smem) */
  /* The origins of this rank's rows once their blocks are complete; (-1, -1) on padding. The CTA's
   * blocks are c, c + comm_ctas, ...: each thread waits for one of them (the waits overlap: one
   * serial wait a block cost a comm CTA ~3 us a block before it joined the GEMM), then the CTA
   * copies all their rows. */
  if (!a->row_origin) return;
  __shared__ int32_t s_ok;
  const uint64_t *flags = moe_at<const uint64_t>(a, me, a->ws.flags);
  const int2 *orig = (const int2 *)(a->wsp[me] + a->ws.origin);
  int2 *out = (int2 *)a->row_origin;
  const int ctas = a->comm_ctas, inuse = used[me];
  if (threadIdx.x == 0) s_ok = 1;
  __syncthreads();
  for (int mb = (int)c + (int)threadIdx.x * ctas; mb < inuse; mb += (int)blockDim.x * ctas)
    if (!meld_wait_ge(ctx, flags + mb, (uint64_t)P,
                      meld_wait_info(MELD_REGION_OTHER, (uint32_t)mb, -1, "moe: block rows for row_origin")))
      s_ok = 0;
  __syncthreads(); /* (the waits' acquires, then every thread reads any of the blocks) */
  if (!s_ok) return;
  const int mine_blocks = a->blocks > (int)c ? (a->blocks - (int)c + ctas - 1) / ctas : 0;
  for (int64_t i = threadIdx.x; i < (int64_t)mine_blocks * MOE_BM; i += blockDim.x) {
    const int mb = (int)c + (int)(i / MOE_BM) * ctas;
    const int64_t row = (int64_t)mb * MOE_BM + i % MOE_BM;
    int2 o = make_int2(-1, -1);
    if (mb < inuse) {
      const int e = me * EL + moe_expert_of_row(seg, me, EL, row);
      if (row - seg[e] < a->expert_counts[e - me * EL]) o = __ldcg(orig + row);
    }
    out[row] = o;
  }
}

/* The dispatch's fused kernel (op MELD_OP_MOE_DISPATCH_GEMM: comm CTAs copy, then every CTA runs
 * the grouped GEMM), and meld_moe_ffn's second GEMM with the combine's sends (op MELD_OP_MOE_FFN:
 * no comm CTAs, the engine's row scatter; moe_gemm_send). DEFER = k.g.epi_defer: the engine's
 * deferred epilogue (each tile's second half stored during the next tile's first k-block; the
 * plain TMA-store path, which the dispatch's grouped GEMM's is). */
template <int DEFER, bool ROUTE = false>
__global__ void __launch_bounds__(GEMM_THREADS, 1)
    moe_kernel(const __grid_constant__ meld_proto_dev_t proto, const __grid_constant__ moe_kargs_t k) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) uint8_t moe_smem[];
  bool run_gemm = false;
  {
    meld_ctx_t ctx;
    if (meld_call_begin(&ctx, &proto, k.c.op, k.c.arg_hash,
                        k.c.handshake_only ? 0u : (uint32_t)k.c.comm_ctas) &&
        !k.c.handshake_only) {
      if (ctx.role == MELD_ROLE_COMM) {
        /* (ROUTE: the routing CTAs route before their copies; inlined: as a call, ptxas spilled a
         * word of the engine's predicates in every kernel, and inlined in the DEFER 0 kernel too,
         * session 35, so only the default DEFER 1 kernel has it) */
        if constexpr (ROUTE) {
          if (ctx.ticket < (uint32_t)k.c.route_ctas) {
            uint64_t tm = threadIdx.x == 0 ? meld_trace_now(&proto.trace) : 0;
            meld_ctx_t rc = ctx; /* (its failure flag stays the routing's) */
            moe_route(&rc, &k.c, moe_smem, &tm, (int)ctx.ticket, k.c.route_ctas);
            __syncthreads(); /* (the copies reuse the shared memory) */
          }
        }
        moe_comm(ctx, &k.c, ctx.ticket, moe_smem);
      }
      run_gemm = !(k.c.diag & 2);
    }
  }
  if (run_gemm) gemm_cta_run<false, false, 0, DEFER, false, false, gemm_no_tail, gemm_no_tail, GEMM_BN, -1, true>(&k.g, moe_smem, (int)blockIdx.x, (int)gridDim.x);
  __syncthreads();
  if (threadIdx.x == 128) { /* (a consumer thread: the engine left warpgroup 0 with 40 registers) */
    meld_cta_shared_t *s = meld_cta_shared();
    meld_ctx_t ctx;
    ctx.p = &proto;
    ctx.epoch = s->epoch;
    ctx.op = k.c.op;
    ctx.arg_hash = k.c.arg_hash;
    ctx.ticket = s->ticket;
    ctx.role = meld_role_of_ticket(s->ticket, (uint32_t)k.c.comm_ctas);
    ctx.cta = blockIdx.x;
    ctx.failed = 0;
    if (run_gemm) {
      const uint32_t st = *(volatile uint32_t *)k.c.status;
      if (st != GEMM_STATUS_OK) /* the ready hook gave up: record why (first failure wins) */
        meld_fail(&ctx, st == GEMM_STATUS_TIMEOUT ? MELD_FAIL_TIMEOUT : MELD_FAIL_ABORTED,
                  meld_wait_info(MELD_REGION_OTHER, 0, -1, "moe: block rows ready"), (uint64_t)k.c.nranks, 0, 0,
                  ld_relaxed_sys_u32(meld_abort_word(&proto)));
    }
    meld_call_end_thread(&ctx);
  }
#endif
}

/* ---- the second GEMM ---------------------------------------------------------------------------- */

/* meld_moe_grouped_gemm: the engine alone over the dispatch's blocks (hook f from the workspace's
 * table; no waits, no communication; tiles from a queue: moe_second_plan). */
template <int DEFER>
__global__ void __launch_bounds__(GEMM_THREADS, 1) moe_gemm_kernel(const __grid_constant__ gemm_params_t g) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) uint8_t moe_gsmem[];
  gemm_cta_run<false, false, 0, DEFER, false, false, gemm_no_tail, gemm_no_tail, GEMM_BN, -1, true>(&g, moe_gsmem, (int)blockIdx.x, (int)gridDim.x);
#endif
}

/* ---- the combine ------------------------------------------------------------------------------ */

#define MOE_CB_THREADS 512
#define MOE_CB_CHUNK 64 /* rows a CTA sends back between its counts */

/* meld_moe_combine (see meld.h): ONE kernel. (1) Every CTA sends chunks of this rank's rows in use
 * back to their tokens' ranks (a warp a row, 16-byte vectors, into the staging at the slot's
 * index t x topk + j), then adds the chunk's rows per destination to that rank's arrival counter
 * (red.release.sys after bar.sync); rows of this rank's own tokens stay where they are. (2) Thread
 * 0 of every CTA waits until every other rank's rows for this rank's slots have arrived (its
 * counts row of the dispatch: the rows it sent to each rank's experts), then (3) a warp a token
 * sums its slots' rows times their weights in fp32: a slot of one of this rank's experts from y2
 * at the row the dispatch gave it (the routing kernel's inv table: its place among the expert's
 * pairs), the others from the staging. (With pieces, the second GEMM sent every row, its own
 * too: all from the staging.) Nothing waits before its own sends, so no rank waits for one that
 * waits for it. */
__global__ void __launch_bounds__(MOE_CB_THREADS, 1)
    moe_combine_kernel(const __grid_constant__ meld_proto_dev_t proto, const __grid_constant__ moe_common_t a) {
  __shared__ int32_t s_cnt[MOE_MAX_RANKS];
  __shared__ int32_t s_ok;
  meld_ctx_t ctx;
  if (meld_call_begin(&ctx, &proto, MELD_OP_MOE_COMBINE, a.arg_hash, 0) && !a.handshake_only) {
    const int P = a.nranks, me = a.rank, E = a.experts, EL = a.e_loc;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
    const int64_t rb = a.hidden * 2;
    const int rb16 = (int)(a.hidden / 8);
    const int32_t *seg = moe_at<const int32_t>(&a, me, a.ws.seg), *used = moe_at<const int32_t>(&a, me, a.ws.used);
    const int2 *orig = (const int2 *)(a.wsp[me] + a.ws.origin);
    const int64_t rows = a.pieces ? 0 : (int64_t)used[me] * MOE_BM; /* (pieces: sent by the GEMM) */
    for (int64_t r0 = (int64_t)blockIdx.x * MOE_CB_CHUNK; r0 < rows; r0 += (int64_t)gridDim.x * MOE_CB_CHUNK) {
      if (threadIdx.x < P) s_cnt[threadIdx.x] = 0;
      __syncthreads();
      for (int64_t r = r0 + warp; r < min(r0 + MOE_CB_CHUNK, rows); r += nw) {
        const int j = moe_expert_of_row(seg, me, EL, r);
        if (r - seg[me * EL + j] >= a.expert_counts[j]) continue; /* padding: no slot */
        const int2 o = __ldcg(orig + r); /* (written by its source in the dispatch) */
        if (o.x == me) continue; /* (this rank's own tokens: the sums read y2 in place) */
        copy_vec16<4, int>((int4 *)(a.wsp[o.x] + a.ws.stage + (int64_t)o.y * rb), (const int4 *)(a.y2 + r * rb), rb16,
                           lane, 32u);
        if (lane == 0) atomicAdd(&s_cnt[o.x], 1);
      }
      __syncthreads(); /* every warp's stores precede the releases below */
      if (threadIdx.x < P && s_cnt[threadIdx.x])
        red_release_sys_add_u64(moe_at<uint64_t>(&a, threadIdx.x, a.ws.arrivals) + me, (uint64_t)s_cnt[threadIdx.x]);
    }
    if (threadIdx.x == 0) {
      const int32_t *mine = moe_at<const int32_t>(&a, me, a.ws.counts) + (size_t)me * E;
      const uint64_t *arr = moe_at<const uint64_t>(&a, me, a.ws.arrivals);
      int ok = 1;
      for (int d = 0; d < P && ok; d++) {
        if (d == me && !a.pieces) continue; /* (own rows: not sent) */
        uint64_t want = 0;
        for (int j = 0; j < EL; j++) want += (uint64_t)mine[d * EL + j];
        if (a.pieces) want *= (uint64_t)a.pieces;
        if (want)
          ok = meld_wait_ge(&ctx, arr + d, want, meld_wait_info(MELD_REGION_OTHER, (uint32_t)d, d, "moe: combine rows"));
      }
      s_ok = ok;
    }
    __syncthreads();
    if (s_ok) {
      const uint8_t *back = a.wsp[me] + a.ws.stage;
      const int32_t *estart = moe_at<const int32_t>(&a, me, a.ws.estart), *inv = moe_at<const int32_t>(&a, me, a.ws.inv);
      const int32_t *srcoff = moe_at<const int32_t>(&a, me, a.ws.srcoff);
      __shared__ const uint8_t *s_src[MOE_CB_THREADS / 32][MOE_MAX_TOPK]; /* a warp's token: its slots' rows */
      __shared__ float s_w[MOE_CB_THREADS / 32][MOE_MAX_TOPK];
      /* Work items (token, part): a token's row in `parts` interleaved column parts, so that few
       * tokens (decode) still spread over the grid's warps; each lane has up to 8 slots' loads in
       * flight (session 33: a warp a token with one load at a time took 114 us at 128 tokens). */
      const int64_t nwarps = (int64_t)gridDim.x * nw;
      const int parts = (int)max((int64_t)1, min((int64_t)((rb16 + 31) / 32), nwarps / max(a.tokens, (int64_t)1)));
      for (int64_t it = (int64_t)blockIdx.x * nw + warp; it < a.tokens * parts; it += nwarps) {
        const int64_t t = it / parts;
        const int part = (int)(it - t * parts);
        for (int j = lane; j < a.topk; j += 32) {
          /* slot (t, j): its row came back into the staging at the slot's index, or (an expert of
           * this rank, the rows not sent) it is in y2 at the row the dispatch gave it */
          const int64_t q = t * a.topk + j;
          const int e = a.ids[q];
          const uint8_t *src = nullptr;
          if (e >= 0)
            src = e / EL == me && !a.pieces ? a.y2 + ((int64_t)seg[e] + srcoff[e] + inv[q] - estart[e]) * rb
                                            : back + q * rb;
          s_src[warp][j] = src;
          s_w[warp][j] = e >= 0 ? a.wt[q] : 0.f;
        }
        __syncwarp();
        for (int h = part * 32 + lane; h < rb16; h += parts * 32) {
          float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
          for (int j0 = 0; j0 < a.topk; j0 += 8) {
            uint4 v[8];
#pragma unroll
            for (int u = 0; u < 8; u++) { /* (the loads first: eight in flight) */
              const uint8_t *src = j0 + u < a.topk ? s_src[warp][j0 + u] : nullptr;
              v[u] = src ? __ldcg((const uint4 *)src + h) : make_uint4(0u, 0u, 0u, 0u);
            }
#pragma unroll
            for (int u = 0; u < 8; u++) {
              const float wq = j0 + u < a.topk ? s_w[warp][j0 + u] : 0.f;
              const uint32_t w4[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
              for (int i = 0; i < 4; i++) {
                acc[2 * i] += wq * __uint_as_float(w4[i] << 16);
                acc[2 * i + 1] += wq * __uint_as_float(w4[i] & 0xffff0000u);
              }
            }
          }
          uint4 o;
          uint32_t *op = &o.x;
#pragma unroll
          for (int i = 0; i < 4; i++) {
            const __nv_bfloat162 b2 = __floats2bfloat162_rn(acc[2 * i], acc[2 * i + 1]);
            op[i] = *(const uint32_t *)&b2;
          }
          *((uint4 *)(a.out + t * a.ldo * 2) + h) = o;
        }
        __syncwarp(); /* (every lane has read the token's slots before the next item's) */
      }
    }
  }
  meld_call_end(&ctx);
}

/* ---- host side ------------------------------------------------------------------------------- */

#define MOE_MAX_DEVICES 64
static int g_moe_grid[MOE_MAX_DEVICES];

/* The routing kernel's dynamic shared memory: v, tot, wh (moe_route), then with MELD_MOE_ROUTE
 * bit 1 the staged sorted pairs (pairs x 4 bytes) where they fit under MOE_ROUTE_SMEM_MAX. */
#define MOE_ROUTE_SMEM_MAX (200u * 1024u)
static size_t moe_route_smem(int experts, int64_t pairs, int staged) {
  const size_t base = moe_route_smem_base(experts);
  return staged ? base + (size_t)pairs * 4 : base;
}
static int moe_route_stages(int experts, int64_t pairs) {
  return moe_route_smem_base(experts) + (size_t)pairs * 4 <= MOE_ROUTE_SMEM_MAX;
}

/* The fused kernel's grid on this device (co-resident CTAs, at most sm_count). */
static meld_result_t moe_device_setup(int dev, int sm_count, int *grid) {
  if (dev < MOE_MAX_DEVICES && g_moe_grid[dev] && g_moe_grid[dev] <= sm_count) {
    *grid = g_moe_grid[dev] < sm_count ? g_moe_grid[dev] : sm_count;
    return MELD_OK;
  }
  int major = 0;
  MELD_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  if (major != 9)
    return meld_error(MELD_ERR_UNSUPPORTED,
                      "meld_moe_dispatch_gemm: device %d has compute capability %d.x; the fused kernel needs Hopper "
                      "(sm_90a)",
                      dev, major);
  int g1 = 0;
  MELD_CHECK(meld_coop_grid((const void *)moe_route_kernel, MOE_ROUTE_THREADS, MOE_ROUTE_SMEM_MAX, 1, 1,
                            &g1));
  MELD_CHECK(meld_coop_grid((const void *)moe_kernel<0>, GEMM_THREADS, GEMM_SMEM_BYTES, 0, sm_count, grid));
  MELD_CHECK(meld_coop_grid((const void *)moe_kernel<1>, GEMM_THREADS, GEMM_SMEM_BYTES, 0, sm_count, grid));
  MELD_CHECK(meld_coop_grid((const void *)moe_kernel<1, true>, GEMM_THREADS, GEMM_SMEM_BYTES, 0, sm_count, grid));
  int gg = 0; /* (meld_moe_grouped_gemm's kernel: its shared-memory limit set once, here) */
  MELD_CHECK(meld_coop_grid((const void *)moe_gemm_kernel<0>, GEMM_THREADS, GEMM_SMEM_BYTES, 0, sm_count, &gg));
  MELD_CHECK(meld_coop_grid((const void *)moe_gemm_kernel<1>, GEMM_THREADS, GEMM_SMEM_BYTES, 0, sm_count, &gg));
  if (dev < MOE_MAX_DEVICES) g_moe_grid[dev] = *grid;
  return MELD_OK;
}

static void moe_common_fill(struct meld_comm *comm, const meld_moe_args_t *a, const moe_plan_t *p, moe_common_t *c) {
  memset(c, 0, sizeof *c);
  const int P = comm->nranks, me = comm->rank;
  uint8_t *pad = (uint8_t *)comm->pad.local;
  c->rank = me;
  c->nranks = P;
  c->experts = p->experts;
  c->e_loc = p->e_loc;
  c->topk = p->topk;
  c->blocks = p->blocks;
  c->comm_ctas = p->comm_ctas;
  c->arg_hash = p->arg_hash;
  c->op = MELD_OP_MOE_DISPATCH_GEMM;
  c->tokens = p->tokens;
  c->hidden = p->hidden;
  c->n = p->n;
  c->capacity = p->capacity;
  c->ldx = p->ldx;
  c->x = (const uint8_t *)a->x;
  c->ids = a->topk_ids;
  c->expert_offsets = a->expert_offsets;
  c->expert_counts = a->expert_counts;
  c->row_origin = a->row_origin;
  c->status = (uint32_t *)(pad + MELD_PAD_OFF_SCRATCH);
  c->ws = p->ws;
  for (int r = 0; r < P; r++) c->wsp[r] = (uint8_t *)comm->workspace.peer[r];
  c->wsp[me] = (uint8_t *)comm->workspace.local;
  c->copy = p->copy;
  const char *dg = getenv("MELD_MOE_DIAG");
  c->diag = dg ? atoi(dg) : 0;
  const char *ps = getenv("MELD_MOE_PAD_SKIP");
  c->pad_skip = !(ps && !strcmp(ps, "0"));
  c->route = p->route;
  c->route_ctas = p->route_ctas;
  c->route_in = p->route_in;
  if (!moe_route_stages(c->experts, c->tokens * c->topk) ||
      (c->route_in && moe_route_smem(c->experts, c->tokens * c->topk, 1) > GEMM_SMEM_BYTES - 1024))
    c->route &= ~2;
}

/* The grouped GEMM's plan over the layout of plan p: A = [capacity, k] rows (lda k), B = every local
 * expert's weight stacked [E_loc n, k] (hook f picks the block's, from the workspace's table),
 * C = [capacity, n]; grid engine CTAs. Its tiles come from the pad's work queue `queue` (2 words,
 * reset by the kernel's last worker), not a static schedule: static workers drift apart over short
 * tiles (k = ffn, 32 k-blocks at DeepSeek-V3) and an expert's second block's tiles, next in the
 * order, missed the weight in L2 (session 33, one H200, the second GEMM at dsv3 T 4096: 10.6 GB
 * read from DRAM for 7.7 GB of weights and rows). Hooks other than f and the queue are the
 * caller's. */
static meld_result_t moe_grouped_plan(struct meld_comm *comm, const moe_plan_t *p, int grid, const void *A, int64_t k,
                                      const void *W, int64_t n, void *C, int queue, gemm_params_t *gp) {
  meld_gemm_args_t g;
  memset(&g, 0, sizeof g);
  g.a = A, g.lda = k, g.b = W, g.ldb = k, g.b_layout = MELD_B_NK, g.c = C, g.ldc = n;
  g.m = p->capacity, g.n = n, g.k = k;
  gemm_plan_opts_t o = GEMM_PLAN_OPTS_INIT;
  o.sm_count = grid;
  o.cluster_m = 1;
  o.split_k = 1;
  o.stream_k = 1;
  o.epi_defer = p->defer < 0 ? 0 : p->defer + 1; /* (0: the engine's choice, on) */
  o.group_m = p->group_m;
  o.tile_n = GEMM_BN;
  int workers = 0;
  MELD_CHECK(gemm_plan_make(&g, &o, gp, &workers));
  meld_gemm_args_t gb = g;
  gb.n = (int64_t)p->e_loc * n;
  gb.ldc = gb.n; /* (only this plan's map_b is kept) */
  gemm_params_t all;
  MELD_CHECK(gemm_plan_make(&gb, &o, &all, &workers));
  gp->map_b = all.map_b;
  gp->grp_brow = (const int32_t *)((uint8_t *)comm->workspace.local + p->ws.brow);
  if (p->runs) gp->grp_span = (const int32_t *)((uint8_t *)comm->workspace.local + p->ws.span);
  gp->order.queue = (uint32_t *)((uint8_t *)comm->pad.local + MELD_PAD_OFF_QUEUES) + queue;
  gp->grp_rows = (int32_t)n;
  gp->workers = grid;
  return MELD_OK;
}

/* The dispatch's GEMM: over the staging, the ready hook on the blocks' counters, the queue. */
static meld_result_t moe_gemm_fill(struct meld_comm *comm, const meld_moe_args_t *a, const moe_plan_t *p, int grid,
                                   moe_kargs_t *k) {
  uint8_t *pad = (uint8_t *)comm->pad.local;
  uint8_t *ws = (uint8_t *)comm->workspace.local;
  gemm_params_t *gp = &k->g;
  MELD_CHECK(moe_grouped_plan(comm, p, grid, ws + p->ws.stage, p->hidden, a->w, p->n, a->y, 0, gp));
  if (p->act == MELD_MOE_ACT_SWIGLU) /* gated tiles: y = silu(gate) x up, [capacity, n / 2] */
    MELD_CHECK(gemm_plan_glu(gp, a->w, (int64_t)p->e_loc * p->n, p->hidden, a->y, p->n / 2, (int32_t)(p->n / 2)));
  gp->ready.flags = (const uint64_t *)(ws + p->ws.flags);
  gp->ready.rows_per_flag = MOE_BM;
  gp->ready.epoch = (uint64_t)p->nranks; /* a block is complete when every rank's piece is counted */
  gp->ready.epoch_counter = NULL;
  gp->ready.abort_word = (const uint32_t *)(pad + MELD_PAD_OFF_ABORT);
  gp->ready.timeout_ns = (uint64_t)comm->cfg.timeout_ms * 1000000ull;
  gp->ready.status = k->c.status;
  if (p->route_in) { /* hook f's tables come from this kernel's routing CTAs */
    if (!gp->epi_defer) /* (moe_plan_make sets route_in only with the deferred epilogue) */
      return meld_error(MELD_ERR_INTERNAL, "meld_moe_dispatch_gemm: routing in the fused kernel needs its deferred epilogue");
    gp->grp_ready = (const uint64_t *)(pad + MELD_PAD_OFF_SCRATCH + 4 * MOE_LAYOUT_WORD);
  }
  gp->trace = meld_proto_dev(comm).trace;
  char why[256];
  if (gemm_params_check(gp, grid, why, sizeof why))
    return meld_error(MELD_ERR_INTERNAL, "meld_moe_dispatch_gemm: GEMM plan rejected: %s", why);
  return MELD_OK;
}

static meld_result_t moe_launch(struct meld_comm *comm, const moe_kargs_t *k, int grid, cudaStream_t stream) {
  meld_proto_dev_t proto = meld_proto_dev(comm);
  void *rargs[] = {&proto, (void *)&k->c};
  const size_t rsmem = moe_route_smem(k->c.experts, k->c.tokens * k->c.topk, k->c.route & 2);
  if (!k->c.route_in)
    MELD_CHECK(meld_launch_coop((const void *)moe_route_kernel, k->c.route_ctas > 1 ? k->c.route_ctas : 1,
                                MOE_ROUTE_THREADS, rsmem, rargs, stream));
  void *args[] = {&proto, (void *)k};
  const void *fn = k->c.route_in ? (const void *)moe_kernel<1, true>
                   : k->g.epi_defer ? (const void *)moe_kernel<1>
                                    : (const void *)moe_kernel<0>;
  return meld_launch_coop(fn, grid, GEMM_THREADS, GEMM_SMEM_BYTES, args, stream);
}

/* The common start of the MoE ops: a comm whose ranks share one node (the entry points hand a
 * comm across nodes to moe_net.cu first), with no earlier failure. */
static meld_result_t moe_begin(struct meld_comm *comm, const char *fn) {
  meld_error_clear();
  if (!comm) return meld_error(MELD_ERR_INVALID_ARG, "%s: comm is NULL", fn);
  if (comm->nnodes > 1)
    return meld_error(MELD_ERR_INTERNAL, "%s: ranks on %d nodes reached the one-node path", fn, comm->nnodes);
  return meld_proto_sticky_error(comm, fn);
}

/* A call this rank cannot make (error vr, already raised) must not leave its peers waiting: `refuse`
 * launches the op's kernels as entry handshakes alone, with a hash no valid call has (the peers
 * fail with "arguments differ"); vr is returned with its message kept. */
static meld_result_t moe_refuse(struct meld_comm *comm, meld_result_t vr, void (*refuse)(struct meld_comm *, cudaStream_t),
                                cudaStream_t stream) {
  if (comm->nranks > 1 && comm->proto && comm->nranks <= MOE_MAX_RANKS) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", meld_last_error());
    refuse(comm, stream);
    meld_error(vr, "%s", msg);
  }
  return vr;
}

static void moe_refuse_dispatch(struct meld_comm *comm, cudaStream_t stream) {
  int g = 0;
  if (moe_device_setup(comm->device, meld_comm_node_sm_count(comm), &g) != MELD_OK) return;
  moe_kargs_t k;
  memset(&k, 0, sizeof k);
  k.c.handshake_only = 1;
  k.c.experts = 1;
  k.c.route_in = moe_route_in_env(); /* (as many kernels as a valid call launches) */
  k.c.arg_hash = meld_hash_fold(meld_hash_u64(meld_hash_init(), 0xbad0e0e5ull));
  (void)moe_launch(comm, &k, g, stream);
}

extern "C" meld_result_t meld_moe_dispatch_gemm(meld_comm_t comm, const meld_moe_args_t *args, cudaStream_t stream) {
  const char *fn = "meld_moe_dispatch_gemm";
  if (comm && comm->nnodes > 1) return moe_net_dispatch(comm, args, stream);
  MELD_CHECK(moe_begin(comm, fn));
  const int sms = meld_comm_node_sm_count(comm);
  moe_plan_t plan;
  meld_result_t vr = moe_args_validate(args, comm->nranks);
  if (vr == MELD_OK) vr = moe_plan_make(args, comm->nranks, comm->rank, sms, comm->workspace.bytes, &plan);
  int grid = 0;
  if (vr == MELD_OK) vr = moe_device_setup(comm->device, sms, &grid);
  if (vr != MELD_OK) return moe_refuse(comm, vr, moe_refuse_dispatch, stream);
  moe_kargs_t k; /* ~1.5 KB of kernel parameters */
  moe_common_fill(comm, args, &plan, &k.c);
  MELD_CHECK(moe_gemm_fill(comm, args, &plan, grid, &k));
  meld_result_t r = moe_launch(comm, &k, grid, stream);
  if (r != MELD_OK) meld_error_prefix("%s", fn);
  return r;
}

static void moe_refuse_combine(struct meld_comm *comm, cudaStream_t stream) {
  int g = 0;
  if (meld_coop_grid((const void *)moe_combine_kernel, MOE_CB_THREADS, 0, 0, meld_comm_node_sm_count(comm), &g) != MELD_OK)
    return;
  moe_common_t c;
  memset(&c, 0, sizeof c);
  c.handshake_only = 1;
  c.arg_hash = meld_hash_fold(meld_hash_u64(meld_hash_init(), 0xbad0c0b1ull));
  meld_proto_dev_t proto = meld_proto_dev(comm);
  void *ka[] = {&proto, &c};
  (void)meld_launch_coop((const void *)moe_combine_kernel, g, MOE_CB_THREADS, 0, ka, stream);
}

/* The combine; pieces > 0: the rows were sent by moe_gemm_send in that many pieces a row (only
 * the waits and the sums run). */
static meld_result_t moe_combine_run(struct meld_comm *comm, const meld_moe_combine_args_t *args, int pieces,
                                     cudaStream_t stream) {
  const char *fn = "meld_moe_combine";
  MELD_CHECK(moe_begin(comm, fn));
  const int sms = meld_comm_node_sm_count(comm);
  moe_plan_t plan;
  meld_result_t vr = moe_combine_validate(args, comm->nranks);
  if (vr == MELD_OK) vr = moe_plan_make(args->dispatch, comm->nranks, comm->rank, sms, comm->workspace.bytes, &plan);
  int grid = 0;
  if (vr == MELD_OK)
    vr = meld_coop_grid((const void *)moe_combine_kernel, MOE_CB_THREADS, 0, 0, sms, &grid);
  if (vr != MELD_OK) return moe_refuse(comm, vr, moe_refuse_combine, stream);
  moe_common_t c;
  moe_common_fill(comm, args->dispatch, &plan, &c);
  c.arg_hash = meld_hash_fold(meld_hash_u64(meld_hash_u64(meld_hash_init(), plan.arg_hash), MELD_OP_MOE_COMBINE));
  c.y2 = (const uint8_t *)args->y2;
  c.wt = args->topk_weights;
  c.out = (uint8_t *)args->out;
  c.ldo = args->ldo ? args->ldo : plan.hidden;
  c.pieces = pieces;
  meld_proto_dev_t proto = meld_proto_dev(comm);
  void *ka[] = {&proto, &c};
  meld_result_t r = meld_launch_coop((const void *)moe_combine_kernel, grid, MOE_CB_THREADS, 0, ka, stream);
  if (r != MELD_OK) meld_error_prefix("%s", fn);
  return r;
}

extern "C" meld_result_t meld_moe_combine(meld_comm_t comm, const meld_moe_combine_args_t *args, cudaStream_t stream) {
  if (comm && comm->nnodes > 1) return moe_net_combine(comm, args, stream);
  return moe_combine_run(comm, args, 0, stream);
}

/* The plan, grid and engine parameters of a second GEMM (g's a, k, w, n, c) on the layout of g's
 * dispatch (hook f from the workspace's table). */
static meld_result_t moe_second_plan(struct meld_comm *comm, const meld_moe_gemm_args_t *g, moe_plan_t *plan, int *grid,
                                     gemm_params_t *p) {
  const int sms = meld_comm_node_sm_count(comm);
  MELD_CHECK(moe_plan_make(g->dispatch, comm->nranks, comm->rank, sms, comm->workspace.bytes, plan));
  MELD_CHECK(moe_device_setup(comm->device, sms, grid));
  return moe_grouped_plan(comm, plan, *grid, g->a, g->k, g->w, g->n, g->c, 2, p); /* (queue 2: past the dispatch's) */
}

/* meld_moe_ffn's second GEMM with the combine's sends in its epilogue (the engine's row scatter
 * from the dispatch's row_origin: every tile's rows straight into their tokens' ranks' staging at
 * the slot's index, counted per half-tile at that rank's arrival counter), run by moe_kernel as
 * op MELD_OP_MOE_FFN; *pieces = the GEMM's n-blocks (each row arrives in that many pieces).
 * Arguments checked by the caller. */
static meld_result_t moe_gemm_send(struct meld_comm *comm, const meld_moe_gemm_args_t *g, int *pieces,
                                   cudaStream_t stream) {
  moe_plan_t plan;
  int grid = 0;
  moe_kargs_t k;
  gemm_params_t *gp = &k.g;
  MELD_CHECK(moe_second_plan(comm, g, &plan, &grid, gp));
  moe_common_fill(comm, g->dispatch, &plan, &k.c);
  k.c.op = MELD_OP_MOE_FFN, k.c.comm_ctas = 0, k.c.diag = 0, k.c.route_in = 0; /* (moe_kernel: the engine alone) */
  k.c.arg_hash = meld_hash_fold(meld_hash_u64(
      meld_hash_u64(meld_hash_u64(meld_hash_u64(meld_hash_init(), plan.arg_hash), MELD_OP_MOE_FFN), (uint64_t)g->k),
      (uint64_t)g->n));
  gp->epi_tma = 0, gp->epi_defer = 0;
  gp->scat_origin = g->dispatch->row_origin;
  gp->scat_n = plan.nranks;
  gp->scat_sys = !(plan.nranks == 1 || comm->gpu_share >= plan.nranks); /* (GPU scope: every rank here) */
  for (int r = 0; r < plan.nranks; r++) {
    gp->scat_dst[r] = k.c.wsp[r] + plan.ws.stage;
    gp->scat_count[r] = (uint64_t *)(k.c.wsp[r] + plan.ws.arrivals) + plan.rank;
  }
  char why[256];
  if (!gp->scat_origin || gemm_params_check(gp, grid, why, sizeof why))
    return meld_error(MELD_ERR_INTERNAL, "meld_moe_ffn: the second GEMM's plan rejected: %s",
                      gp->scat_origin ? why : "no row_origin");
  *pieces = gp->tiles_n;
  meld_proto_dev_t proto = meld_proto_dev(comm);
  void *ka[] = {&proto, &k};
  return meld_launch_coop((const void *)moe_kernel<0>, grid, GEMM_THREADS, GEMM_SMEM_BYTES, ka, stream);
}

extern "C" meld_result_t meld_moe_grouped_gemm(meld_comm_t comm, const meld_moe_gemm_args_t *args, cudaStream_t stream) {
  const char *fn = "meld_moe_grouped_gemm";
  if (comm && comm->nnodes > 1) return moe_net_grouped_gemm(comm, args, stream);
  MELD_CHECK(moe_begin(comm, fn));
  MELD_CHECK(moe_gemm_validate(args, comm->nranks));
  moe_plan_t plan;
  int grid = 0;
  gemm_params_t p;
  MELD_CHECK(moe_second_plan(comm, args, &plan, &grid, &p));
  char why[256];
  if (gemm_params_check(&p, grid, why, sizeof why))
    return meld_error(MELD_ERR_INTERNAL, "%s: GEMM plan rejected: %s", fn, why);
  const void *kfn = p.epi_defer ? (const void *)moe_gemm_kernel<1> : (const void *)moe_gemm_kernel<0>;
  void *ka[] = {&p};
  MELD_CUDA_CHECK(cudaLaunchKernel(kfn, dim3((unsigned)grid), dim3(GEMM_THREADS), ka, GEMM_SMEM_BYTES, stream));
  return MELD_OK;
}

static void moe_refuse_ffn(struct meld_comm *comm, cudaStream_t stream) {
  moe_refuse_dispatch(comm, stream);
  moe_refuse_combine(comm, stream);
}

extern "C" meld_result_t meld_moe_ffn(meld_comm_t comm, const meld_moe_ffn_args_t *args, cudaStream_t stream) {
  const char *fn = "meld_moe_ffn";
  if (comm && comm->nnodes > 1) return moe_net_ffn(comm, args, stream);
  MELD_CHECK(moe_begin(comm, fn));
  meld_moe_args_t d;
  meld_moe_gemm_args_t g;
  meld_moe_combine_args_t c;
  meld_result_t r = moe_ffn_split(args, comm->nranks, &d, &g, &c);
  if (r != MELD_OK) return moe_refuse(comm, r, moe_refuse_ffn, stream);
  /* The combine's sends in the second GEMM's epilogue or apart (moe_ffn_send_default;
   * MELD_MOE_FFN_SEND=0/1 forces), read before anything is launched. */
  int64_t send = moe_ffn_send_default(comm->nranks, args->tokens, args->topk, args->experts);
  r = meld_env_int64("MELD_MOE_FFN_SEND", 0, 1, &send);
  if (r != MELD_OK) {
    meld_error_prefix("%s", fn);
    return moe_refuse(comm, r, moe_refuse_ffn, stream);
  }
  /* (the arguments are checked: what fails below is the workspace's size, the device or a launch;
   * after the dispatch, only a launch: the peers then time out) */
  r = meld_moe_dispatch_gemm(comm, &d, stream);
  if (r != MELD_OK) { /* (the dispatch refused itself to the peers; their combines need a partner too) */
    meld_error_prefix("%s", fn);
    return moe_refuse(comm, r, moe_refuse_combine, stream);
  }
  int pieces = 0;
  r = send ? moe_gemm_send(comm, &g, &pieces, stream) : meld_moe_grouped_gemm(comm, &g, stream);
  if (r == MELD_OK) r = moe_combine_run(comm, &c, pieces, stream);
  if (r != MELD_OK) meld_error_prefix("%s", fn);
  return r;
}
