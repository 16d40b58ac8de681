/* collectives.cu — GPU-driven intra-node AllGather, ReduceScatter, AllReduce, All-to-all(v)
 * over NVLink: one cooperative kernel per call, every CTA a communication CTA.
 *
 * One engine serves every op. A call is a set of byte STREAMS, one per (producer, consumer)
 * pair and stage: producer p pushes stream bytes [0, len) into consumer q's staging with
 * 16-byte stores; q waits for each chunk's signal, then either copies the chunk to its place
 * in recv (COPY) or sums the chunks of all producers with its own data in fp32 (REDUCE).
 *
 *   op              stage 0: p -> q stream            consume at q           stage 1
 *   all_gather      send[0, B)                        copy to recv[p*B]      -
 *   reduce_scatter  send[q*B, (q+1)*B)                sum into recv          -
 *   all_reduce 1x   send[0, B)                        sum into recv          -
 *   all_reduce 2x   send[q*part, ...] (q's part)      sum into recv[q*part]  recv part -> all
 *   all_to_all(v)   send[soff[q], +scnt[q])           copy to recv[roff[p]]  -
 * (plus each rank's own block, copied locally in the same rounds).
 *
 * Chunking: chunk k of every stream (bytes [k*C, (k+1)*C)) belongs to CTA k % ctas, as its
 * j-th chunk, j = k / ctas. CTA c works in ROUNDS j = 0, 1, ...: for each stage, (1) wait for
 * the credits of the slots it will fill, (2) push its chunk j of every outgoing stream into
 * the consumers' ring slot j % slots, bar.sync, release the data signals, (3) wait for the
 * signals of every incoming chunk j, (4) consume them, bar.sync, return the credits.
 *
 * Staging: in each consumer's workspace, a ring of `slots` slots of C bytes per (stage,
 * producer, CTA); signals in the consumer's pad and credits in the producer's pad use the
 * protocol's ring stamps (src/common/proto.h: meld_ring_*). Within a call a slot is refilled
 * only after its consumer's credit for the previous round; across calls the entry handshake
 * (meld_call_begin: every peer posted this epoch, hence finished the previous call) makes
 * the first use of each slot safe without credits. So back-to-back calls and graph replays
 * need no host synchronization, and the workspace does not grow with the message.
 *
 * Progress: the waits of round j only depend on rounds <= j of other CTAs with the same
 * channel (ticket) on other ranks, and all CTAs are co-resident (cooperative launch), so
 * there is no deadlock; a missing peer ends in MELD_ERR_TIMEOUT, not a hang.
 *
 * Sums: fp32 registers, in rank order 0..P-1 on every rank (reduce_sum in copy.cuh), so an
 * all-reduce's result is bitwise equal on all ranks and to a CPU fp32 loop in rank order.
 *
 * Alignment: any element-aligned pointers; 16-byte alignment (and counts that keep block
 * starts 16-byte aligned) is the vector path, the rest uses narrower words (copy.cuh).
 *
 * Three engines carry these streams (plan->proto, coll_plan.h):
 *   LL (small messages): no staging ring, no handshake wait. Thread g of the grid stores
 *     data units u = g, g + G, ... (8 data bytes each) of every outgoing stream into the
 *     consumer's LL buffer (pad region MELD_PAD_OFF_LL, half epoch & 1, region of this
 *     producer) as one 16-byte store of two 8-byte lines {4 data bytes, flag = (u32)epoch};
 *     each 8-byte element of the vector store is single-copy atomic, so a line whose flag
 *     reads `epoch` holds its data (no fence, no signal). Then the same thread polls the same
 *     units of every incoming stream and copies or sums them. The argument hash is posted at
 *     entry and verified at the end (CTA 0), not awaited before the data moves. Why the
 *     buffer half of epoch e is free when call e writes it: this rank finished call e-1, in
 *     which it received data (or a handshake post) of call e-1 from every peer, so every peer
 *     had finished call e-2, the last user of that half. Every collective moves data between
 *     every pair (LL is only chosen for uniform, non-empty calls), and every other op does
 *     the full handshake, so this holds whatever ran before.
 *   RING (large): warp-specialized CTAs. Warp 0 (producer control) waits for slot credits and
 *     releases data signals, warp 1 (consumer control) waits for signals and returns credits;
 *     producer warps push chunk j while consumer warps drain chunk j' < j of the same CTA
 *     channel; the groups meet only through named barriers (bar.arrive / bar.sync: the
 *     arrive releases the data warps' memory operations to the syncing warp, as bar.sync
 *     does). The producer control looks one chunk ahead (credit of j+1 before it releases
 *     j), so the pushing warps never wait for a release fence. In-place all-reduce (send ==
 *     recv): the consumer drains chunk j only after this CTA pushed chunk j (shared-memory
 *     progress word), so the push never reads a sum.
 *     Opt-in (plan->bulk, measured, not a default): bulk 1 = one push warp whose lane 0 moves
 *     each chunk with TMA bulk copies (coll_bulk_copy), every other warp drains; bulk 2 = also
 *     the drain of copies (AG, A2A) by one thread with TMA.
 *   ROUNDS: the first engine (above; two-shot all-reduce); the default above LL.
 * Data loops: ROUNDS and RING use coll_copy / coll_reduce (plan->unroll: 8 loads in flight per
 * thread for copies, 4 per source for sums), copy.cuh's loops where pointers are misaligned.
 * LL and the plain launch: LL calls are plain launches (no co-residency needed: see meld_coll_run). */
/* The failure record out of line in these kernels (signal.cuh meld_fail_record): fewer cold
 * instructions between the hot ones of short calls (session 21 call 7: ZC -0.02..-0.14 us). */
#define MELD_FAIL_OUTLINE 1
#include <string.h>

#include <type_traits>

#include "coll_plan.h"
#include "comm.h"
#include "common/proto.h"
#include "device/copy.cuh"
#include "device/launch.cuh"
#include "device/signal.cuh"
#include "error.h"
#include "log.h"
#include "proto.h"

enum { COLL_COPY = 0, COLL_REDUCE = 1 };
/* == meld_coll_proto_t */
enum { COLL_MODE_LL = 1, COLL_MODE_RING = 2, COLL_MODE_ROUNDS = 3, COLL_MODE_ZC = 4 };
/* LL: 8-byte units per thread whose loads are in flight together (the generic kernel's and the
 * lean kernels' above COLL_LL_U2_BYTES); the lean kernels take COLL_LL_U_SMALL up to
 * COLL_LL_U2_BYTES per stream: smaller code, same loads for one-step calls (session 23 call 3,
 * 2 in-process ranks: 2 units -0.03..-0.09 us at 4-64 KB, +0.4..+0.6 us at 1 MB). */
#define COLL_LL_U 4
#define COLL_LL_U_SMALL 2
#define COLL_LL_U2_BYTES ((uint64_t)64 << 10)
/* LL sums of one unit per thread (the any-P lean kernel): peers' lines polled together */
#define COLL_LL_PB 8

static_assert(MELD_PAD_OFF_DATA <= MELD_PAD_OFF_LL && MELD_PAD_OFF_LL + MELD_PAD_LL_BYTES <= MELD_PAD_BYTES,
              "pad: LL region");
static_assert(2 * MELD_COLL_LL_HALF_BYTES == MELD_PAD_LL_BYTES, "LL halves");
static_assert((int)MELD_PROTO_ZC == 4, "coll proto numbering");

/* Everything the kernel needs, by value (__grid_constant__: arrays indexed at run time stay
 * in the parameter space, no local copy). Byte offsets and lengths. */
typedef struct {
  int32_t rank, nranks, ctas, slots, stages, action, dtype;
  int32_t mode;         /* COLL_MODE_*                                                    */
  int32_t cons_warps;   /* RING: consumer data warps per CTA                              */
  int32_t inplace;      /* RING: send == recv (all-reduce): drain j after pushing j       */
  int32_t unroll;       /* 16-byte loads in flight per thread in the data loops (4 or 8)  */
  int32_t bulk;         /* RING: one push warp whose lane 0 pushes with TMA bulk copies   */
  int32_t pdl;          /* LL: launched with programmatic stream serialization            */
  int32_t ll_flat;      /* LL, the any-P kernel: bit 0, every peer's incoming stream has the
                           same length (a copy's flat receive); bit 1, every outgoing one,
                           and not a sum in place (the flat send); read by copies (FL 2),
                           picks the sums' instantiation (FL 1 or 0)                    */
  int32_t loop;         /* LL loopback (MELD_COLL_LOOPBACK, one rank as rank 0 of 2): the
                           virtual peer's pad is this rank's own (its lines are ours, read
                           back), no argument post or check                                */
  uint64_t ll_region;   /* LL: bytes of one producer's region in a half (multiple of 16)  */
  uint32_t op_id, arg_hash;
  uint64_t chunk;       /* C: bytes per slot                                           */
  uint64_t ring_stride; /* bytes between two producers' regions: ctas * slots * C       */
  uint64_t max_len;     /* longest stream of this rank (bytes): rounds run while j*ctas*C < */
  const uint8_t *send;
  uint8_t *recv;
  uint8_t *ws;          /* this rank's workspace                                       */
  /* Stage 0, per rank: what this rank pushes to q, and where q's stream lands (COPY). */
  uint64_t push_off[MELD_COLL_MAX_RANKS], push_len[MELD_COLL_MAX_RANKS];
  uint64_t recv_off[MELD_COLL_MAX_RANKS], recv_len[MELD_COLL_MAX_RANKS];
  /* COPY: this rank's own block; REDUCE: own operand (send + own_off) and result
   * (recv + dst_off), own_len bytes (every incoming stream of stage 0 has this length). */
  uint64_t own_src, own_dst, own_len;
  /* Two-shot all-reduce, stage 1: part p is recv[p * part, + len(p)], total bytes. */
  uint64_t part, total;
  uint8_t *peer_ws[MELD_COLL_MAX_RANKS]; /* peers' workspaces mapped here ([rank] = ws)  */
} coll_kargs_t;

/* ---- device side ------------------------------------------------------------------------- */

/* Index of producer `src` among consumer `dst`'s producers (0..P-2: dst+1, dst+2, ...). */
/* (A conditional add, not a modulo: the any-P LL kernel's P is not a constant.) */
MELD_DEV int coll_src_idx(int src, int dst, int P) {
  const int t = src - dst - 1;
  return t < 0 ? t + P : t;
}
/* Peer t of this rank's rotation (0 <= t < P - 1): me + 1 + t modulo P. */
MELD_DEV int coll_rot(int me, int t, int P) {
  const int q = me + 1 + t;
  return q >= P ? q - P : q;
}

MELD_DEV uint64_t coll_part_len(const coll_kargs_t *a, int p) {
  uint64_t start = (uint64_t)p * a->part;
  if (start >= a->total) return 0;
  return a->total - start < a->part ? a->total - start : a->part;
}

/* Bytes this rank pushes to q in stage st, and their source. */
MELD_DEV uint64_t coll_push_len(const coll_kargs_t *a, int st, int q) {
  return st == 0 ? a->push_len[q] : coll_part_len(a, a->rank);
}
MELD_DEV const uint8_t *coll_push_src(const coll_kargs_t *a, int st, int q) {
  return st == 0 ? a->send + a->push_off[q] : a->recv + (uint64_t)a->rank * a->part;
}
/* Bytes p pushes to this rank in stage st. */
MELD_DEV uint64_t coll_recv_len(const coll_kargs_t *a, int st, int p) {
  if (st == 1) return coll_part_len(a, p);
  return a->action == COLL_REDUCE ? a->own_len : a->recv_len[p];
}
/* Byte offset of ring slot (st, producer index, cta, slot) in a consumer's workspace. */
MELD_DEV uint64_t coll_slot_off(const coll_kargs_t *a, int st, int src_idx, uint32_t cta, uint32_t slot) {
  return ((uint64_t)st * (uint64_t)(a->nranks - 1) + (uint64_t)src_idx) * a->ring_stride +
         ((uint64_t)cta * (uint64_t)a->slots + slot) * a->chunk;
}
MELD_DEV uint64_t coll_min(uint64_t x, uint64_t y) { return x < y ? x : y; }

/* ---- the engines' data loops: copy.cuh's, with more bytes in flight ------------------------------
 * copy.cuh keeps COPY_UNROLL 4 (16-byte loads per thread in flight) for every caller. Run 2
 * showed the collectives' push and drain latency-bound at that depth (a RING CTA moved ~13
 * GB/s where a raw push CTA moves 20-40: bytes in flight per SM = threads x 64 B), so the
 * engines use these U-deep loops on their 16-byte aligned paths (U = plan->unroll, 4 or 8)
 * and copy.cuh's loops for everything else. Same results bit for bit: copies are copies and
 * the sums keep reduce_sum's order (0.0f, then rank 0..P-1 in fp32, one rounding). Copies use
 * copy.cuh's copy_vec16<U>. */
MELD_DEV void coll_copy(const coll_kargs_t *a, void *dst, const void *src, uint64_t bytes, uint32_t w, uint32_t nw) {
  if (bytes == 0 || dst == src) return;
  if ((((uintptr_t)dst | (uintptr_t)src | bytes) & 15u) == 0) {
    if (a->unroll >= 8) copy_vec16<8>((int4 *)dst, (const int4 *)src, bytes / 16, w, nw);
    else copy_vec16<4>((int4 *)dst, (const int4 *)src, bytes / 16, w, nw);
    return;
  }
  copy_bytes(dst, src, bytes, w, nw);
}

/* Vectors i, i + s, ... < v1 of a two-source sum (P = 2): d0 (and d1 unless NULL) = s0 + s1
 * in fp32 from 0.0f (reduce_sum's order: s0 is the lower rank), U vectors per source in flight
 * (both sources' loads issued before any add), then the remainder one by one. Serves the
 * staged engines' reduce (coll_reduce) and the ZC engine's (zc_vec). */
template <int U>
MELD_DEV void coll_sum2_vec(int4 *d0, int4 *d1, const int4 *s0, const int4 *s1, int dtype, uint64_t i, uint64_t v1,
                            uint32_t s) {
  for (; i + (U - 1) * (uint64_t)s < v1; i += U * (uint64_t)s) {
    int4 x[U], y[U];
#pragma unroll
    for (int u = 0; u < U; u++) x[u] = __ldcg(s0 + i + u * s);
#pragma unroll
    for (int u = 0; u < U; u++) y[u] = __ldcg(s1 + i + u * s);
#pragma unroll
    for (int u = 0; u < U; u++) {
      float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      if (dtype == COPY_BF16) acc_bf16x8(acc, x[u]), acc_bf16x8(acc, y[u]);
      else acc_f32x4(acc, x[u]), acc_f32x4(acc, y[u]);
      const int4 r = pack_acc(acc, dtype);
      d0[i + u * s] = r;
      if (d1) d1[i + u * s] = r;
    }
  }
  for (; i < v1; i += s) {
    const int4 x = __ldcg(s0 + i), y = __ldcg(s1 + i);
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (dtype == COPY_BF16) acc_bf16x8(acc, x), acc_bf16x8(acc, y);
    else acc_f32x4(acc, x), acc_f32x4(acc, y);
    const int4 r = pack_acc(acc, dtype);
    d0[i] = r;
    if (d1) d1[i] = r;
  }
}

/* Vector body of reduce_sum (copy.cuh) with U vectors per source in flight, for nsrc >= 2
 * (P = 2 takes coll_sum2_vec). Returns the vectors done. */
template <int U>
MELD_DEV uint64_t coll_vreduce(int4 *dst, const uint8_t *own, const uint8_t *s0, uint64_t stride, int nsrc, int first,
                               uint64_t nvec, int dtype, uint32_t w, uint32_t nw) {
  const uint64_t s = nw;
  uint64_t i = w;
  for (; i + (U - 1) * s < nvec; i += U * s) {
    float acc[U][8];
#pragma unroll
    for (int u = 0; u < U; u++)
#pragma unroll
      for (int e = 0; e < 8; e++) acc[u][e] = 0.0f;
    for (int k = 0; k <= nsrc; k++) {
      const int4 *p = (const int4 *)sum_src(own, s0, stride, nsrc, first, k);
      int4 v[U];
#pragma unroll
      for (int u = 0; u < U; u++) v[u] = __ldcg(p + i + u * s);
#pragma unroll
      for (int u = 0; u < U; u++) {
        if (dtype == COPY_BF16) acc_bf16x8(acc[u], v[u]);
        else acc_f32x4(acc[u], v[u]);
      }
    }
#pragma unroll
    for (int u = 0; u < U; u++)
      dst[i + u * s] = pack_acc(acc[u], dtype);
  }
  /* This worker's vectors i, i + s, ... < nvec are left to the caller. */
  return i;
}

/* reduce_sum with the deeper vector body; same arguments and result. */
MELD_DEV void coll_reduce(const coll_kargs_t *a, void *dst, const void *own, const void *src0, uint64_t stride,
                          int nsrc, int first, uint64_t elems, uint32_t w, uint32_t nw) {
  const int dtype = a->dtype;
  const uint64_t es = dtype == COPY_BF16 ? 2 : 4;
  const bool aligned = (((uintptr_t)dst | (uintptr_t)own | (uintptr_t)src0 | stride) & 15u) == 0;
  if (!aligned || a->unroll < 8) {
    reduce_sum(dst, own, src0, stride, nsrc, first, elems, dtype, w, nw);
    return;
  }
  const uint64_t nvec = elems * es / 16;
  const uint8_t *o = (const uint8_t *)own, *s0 = (const uint8_t *)src0;
  /* fp32 accumulators: 8 per vector; 4 vectors per source in flight (8 x 4 + loads stay
   * within the 1024-thread register budget). Then this worker's remaining vectors one by
   * one, then the element tail (as reduce_sum: worker w takes elements nvec*8 + w, ...). */
  uint64_t i = nvec; /* P = 2: the two-source body does every vector of this worker */
  if (nsrc == 1)
    coll_sum2_vec<4>((int4 *)dst, nullptr, (const int4 *)sum_src(o, s0, stride, 1, first, 0),
                     (const int4 *)sum_src(o, s0, stride, 1, first, 1), dtype, w, nvec, nw);
  else
    i = coll_vreduce<4>((int4 *)dst, o, s0, stride, nsrc, first, nvec, dtype, w, nw);
  for (; i < nvec; i += nw) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int k = 0; k <= nsrc; k++) {
      const int4 v = __ldcg((const int4 *)sum_src(o, s0, stride, nsrc, first, k) + i);
      if (dtype == COPY_BF16) acc_bf16x8(acc, v);
      else acc_f32x4(acc, v);
    }
    ((int4 *)dst)[i] = pack_acc(acc, dtype);
  }
  for (uint64_t e = nvec * 16 / es + w; e < elems; e += nw) {
    float v = 0.0f;
    for (int k = 0; k <= nsrc; k++) v += load_elem(sum_src(o, s0, stride, nsrc, first, k), e, dtype);
    store_elem(dst, e, v, dtype);
  }
}

/* One stage of round j of CTA c: chunk j of each of its streams, at byte offset `off`.
 * Every thread calls it; returns false (in all threads) once the call failed. */
MELD_DEV bool coll_stage_round(meld_ctx_t *ctx, const coll_kargs_t *a, int st, uint32_t c,
                               uint32_t j, uint64_t off) {
  const int P = a->nranks, me = a->rank, npeer = P - 1;
  const uint32_t S = (uint32_t)a->slots, slot = meld_ring_slot(j, S);
  const uint32_t ch = (uint32_t)st * (uint32_t)a->ctas + c;
  const uint32_t tid = threadIdx.x, nt = blockDim.x;
  const uint64_t C = a->chunk;
  const uint64_t stamp = meld_ring_data_stamp(ctx->epoch, j, S);

  /* (1) Credits: thread t waits for the slot at peer me+1+t (only from round S on; the first
   * use of a slot in a call is covered by the entry handshake). */
  int ok = 1;
  if ((int)tid < npeer && j >= S) {
    const int q = (me + 1 + (int)tid) % P;
    if (coll_push_len(a, st, q) > off)
      ok = meld_wait_credit(ctx, meld_credit_index(q, P, ch, slot, S),
                            meld_ring_credit_needed(ctx->epoch, j, S), q, "coll: slot credit");
  }
  if (!__syncthreads_and(ok)) return ctx->failed = 1, false;

  /* (2) Push chunk j of every outgoing stream (peers in rotated order, so that ranks do not
   * all write to the same peer at once), then one release per consumer. */
  for (int t = 0; t < npeer; t++) {
    const int q = (me + 1 + t) % P;
    const uint64_t len = coll_push_len(a, st, q);
    if (len <= off) continue;
    uint8_t *dst = a->peer_ws[q] + coll_slot_off(a, st, coll_src_idx(me, q, P), c, slot);
    coll_copy(a, dst, coll_push_src(a, st, q) + off, coll_min(C, len - off), tid, nt);
  }
  /* bar.sync orders every thread's stores before the releases below (cumulativity). */
  __syncthreads();
  if ((int)tid < npeer) {
    const int q = (me + 1 + (int)tid) % P;
    if (coll_push_len(a, st, q) > off) meld_signal_put(ctx, q, meld_signal_index(me, P, ch, slot, S), stamp);
  }

  /* Own block of a copy (COPY), while the peers' chunks are in flight: it needs no signal. */
  const bool own_early = st == 0 && a->action == COLL_COPY && a->own_len > off;
  if (own_early)
    coll_copy(a, a->recv + a->own_dst + off, a->send + a->own_src + off, coll_min(C, a->own_len - off), tid, nt);

  /* (3) Wait for chunk j of every incoming stream: thread t waits for producer me+1+t. */
  ok = 1;
  if ((int)tid < npeer) {
    const int p = (me + 1 + (int)tid) % P;
    if (coll_recv_len(a, st, p) > off)
      ok = meld_wait_signal(ctx, meld_signal_index(p, P, ch, slot, S), stamp, p, "coll: chunk arrival");
  }
  /* Each waiter fenced (acquire) after seeing its flag; bar.sync extends that to all. */
  if (!__syncthreads_and(ok)) return ctx->failed = 1, false;

  /* (4) Consume. Producer index of p at this rank is coll_src_idx(p, me) = t for p = me+1+t. */
  const uint8_t *slots0 = a->ws + coll_slot_off(a, st, 0, c, slot);
  if (st == 0 && a->action == COLL_REDUCE) {
    if (a->own_len > off) {
      const uint64_t n = coll_min(C, a->own_len - off);
      const size_t es = a->dtype == COPY_BF16 ? 2 : 4;
      coll_reduce(a, a->recv + a->own_dst + off, a->send + a->own_src + off, slots0, a->ring_stride, npeer,
                  npeer - me, n / es, tid, nt);
    }
  } else {
    for (int t = 0; t < npeer; t++) {
      const int p = (me + 1 + t) % P;
      const uint64_t len = coll_recv_len(a, st, p);
      if (len <= off) continue;
      uint8_t *dst = st == 0 ? a->recv + a->recv_off[p] : a->recv + (uint64_t)p * a->part;
      coll_copy(a, dst + off, slots0 + (uint64_t)t * a->ring_stride, coll_min(C, len - off), tid, nt);
    }
  }
  /* bar.sync: every thread's reads of the slots happen before the credit releases. */
  __syncthreads();
  if ((int)tid < npeer) {
    const int p = (me + 1 + (int)tid) % P;
    if (coll_recv_len(a, st, p) > off)
      meld_credit_put(ctx, p, meld_credit_index(me, P, ch, slot, S), meld_ring_credit_stamp(ctx->epoch, j, S));
  }
  return true;
}

/* ---- RING bulk push (plan->bulk) ----------------------------------------------------------------
 * One thread moves the CTA's outgoing chunk with TMA: global -> shared (cp.async.bulk, PIECE
 * bytes, completion on the buffer's mbarrier) -> the peer's slot (cp.async.bulk shared ->
 * global, one bulk group per piece), NBUF shared buffers, loads running LAG pieces ahead of
 * the stores: ~NBUF pieces in flight without any thread's registers, so every other warp of
 * the CTA can drain. Ordering: the pushing thread waits for its bulk groups to COMPLETE
 * (wait_group 0: the writes are performed) and then arrives at the producer barrier; the
 * control warp's release after its bar.sync is cumulative over them (signal.cuh's bulk
 * pattern). Slot reuse: the control warp acquired the consumer's credit before the "go"
 * barrier; fence.proxy.async after the barrier orders that acquire before the async-proxy
 * writes into the slot. */
#define COLL_BULK_PIECE 16384u
#define COLL_BULK_NBUF 8u /* push: 8 buffers, loads 4 pieces ahead of the stores              */
#define COLL_BULK_LAG 4u
#define COLL_BULK_DNBUF 4u /* drain (bulk 2): 4 buffers, loads 2 pieces ahead               */
#define COLL_BULK_DLAG 2u
#define COLL_BULK_SMEM (COLL_BULK_PIECE * COLL_BULK_NBUF)
#define COLL_BULK_DSMEM (COLL_BULK_PIECE * COLL_BULK_DNBUF)

MELD_DEV uint64_t *coll_bulk_bars(void) {
  __shared__ __align__(8) uint64_t bars[COLL_BULK_NBUF + COLL_BULK_DNBUF];
  return bars;
}

/* cp.async.bulk.wait_group.read N (N an immediate). */
template <uint32_t N>
MELD_DEV void coll_bulk_wait_read(void) {
  static_assert(N <= 3, "wait_group.read depth");
  if (N == 0) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
  else if (N == 1) asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
  else if (N == 2) asm volatile("cp.async.bulk.wait_group.read 2;" ::: "memory");
  else asm volatile("cp.async.bulk.wait_group.read 3;" ::: "memory");
}

/* One thread: `bytes` (multiple of 16; src, dst 16-byte aligned) from src (this GPU's memory)
 * to dst (a peer's slot, or this GPU's memory) through NBUF shared buffers at `smem` with
 * mbarriers `bars`. *n counts the pieces this thread issued through these buffers in the
 * kernel (the mbarriers' phases). On return every write is complete. False: a local TMA load
 * did not complete within the comm's timeout (the call then fails). */
template <uint32_t NBUF, uint32_t LAG>
MELD_DEV bool coll_bulk_copy(meld_ctx_t *ctx, uint8_t *dst, const uint8_t *src, uint64_t bytes, uint8_t *smem,
                             uint64_t *bars, uint64_t *n) {
  static_assert(LAG >= 1 && LAG < NBUF, "bulk pipeline shape");
  const uint64_t np = (bytes + COLL_BULK_PIECE - 1) / COLL_BULK_PIECE, base = *n;
  bool ok = true;
  for (uint64_t i = 0; ok && i < np + LAG; i++) {
    if (i < np) {
      const uint64_t g = base + i;
      const uint32_t b = (uint32_t)(g % NBUF);
      /* Buffer b was last read by the store of piece i - NBUF; stores issued so far are
       * pieces < i - LAG, so NBUF - LAG - 1 newer groups may still be reading. (Pieces of
       * an earlier call of this function: all complete, wait_group 0 at its end.) */
      if (i >= NBUF) coll_bulk_wait_read<NBUF - LAG - 1>();
      const uint32_t len = (uint32_t)coll_min(COLL_BULK_PIECE, bytes - i * COLL_BULK_PIECE);
      mbarrier_arrive_expect_tx_cta(smem_addr(&bars[b]), len);
      cp_async_bulk_g2s(smem_addr(smem + b * COLL_BULK_PIECE), src + i * COLL_BULK_PIECE, len, smem_addr(&bars[b]));
    }
    if (i >= LAG) {
      const uint64_t k = i - LAG, g = base + k;
      const uint32_t b = (uint32_t)(g % NBUF);
      const uint32_t len = (uint32_t)coll_min(COLL_BULK_PIECE, bytes - k * COLL_BULK_PIECE);
      if (!meld_mbar_wait(ctx, smem_addr(&bars[b]), (uint32_t)((g / NBUF) & 1u), "coll: bulk load")) {
        ok = false;
        break;
      }
      cp_async_bulk_s2g(dst + k * COLL_BULK_PIECE, smem_addr(smem + b * COLL_BULK_PIECE), len);
      cp_async_bulk_commit_group();
    }
  }
  cp_async_bulk_wait_group0();
  *n = base + np;
  return ok;
}

/* ---- RING engine ------------------------------------------------------------------------------ */

enum { COLL_BAR_PGO = 1, COLL_BAR_PDONE = 2, COLL_BAR_CGO = 3, COLL_BAR_CDONE = 4 };

MELD_DEV void coll_bar_sync(uint32_t id, uint32_t n) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory"); }
MELD_DEV void coll_bar_arrive(uint32_t id, uint32_t n) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(n) : "memory");
}

/* Shared words of the RING groups: set by a control warp before it arrives at a "go"
 * barrier, read by the data warps after they synced on it. */
typedef struct {
  volatile uint32_t pfail;  /* producer control failed: push warps stop                       */
  volatile uint32_t cstop;  /* consumer control failed at this chunk: drain warps stop there
                               (an index, not a flag: with lookahead the control warp may fail
                               on chunk j+1 while drain warps still check chunk j)             */
  volatile uint32_t pushed; /* chunks of this CTA pushed (in-place all-reduce ordering)       */
} coll_ring_shared_t;

MELD_DEV coll_ring_shared_t *coll_ring_shared(void) {
  __shared__ coll_ring_shared_t s;
  return &s;
}

/* Chunks of CTA c: j with (j * ctas + c) * C < max_len. */
MELD_DEV uint32_t coll_ring_chunks(const coll_kargs_t *a, uint32_t c) {
  const uint64_t first = (uint64_t)c * a->chunk;
  if (first >= a->max_len) return 0;
  return (uint32_t)((a->max_len - first - 1) / ((uint64_t)a->ctas * a->chunk) + 1);
}

/* Drain of chunk j (offset off) by w of nw consumer threads: copy every arrived stream to
 * its place in recv (and this rank's own block), or sum them with the own operand. */
MELD_DEV void coll_drain(const coll_kargs_t *a, uint32_t c, uint32_t slot, uint64_t off, uint32_t w, uint32_t nw) {
  const int P = a->nranks, me = a->rank, npeer = P - 1;
  const uint64_t C = a->chunk;
  const uint8_t *slots0 = a->ws + coll_slot_off(a, 0, 0, c, slot);
  if (a->action == COLL_REDUCE) {
    if (a->own_len > off) {
      const uint64_t n = coll_min(C, a->own_len - off);
      const size_t es = a->dtype == COPY_BF16 ? 2 : 4;
      coll_reduce(a, a->recv + a->own_dst + off, a->send + a->own_src + off, slots0, a->ring_stride, npeer,
                  npeer - me, n / es, w, nw);
    }
    return;
  }
  for (int t = 0; t < npeer; t++) {
    const int p = (me + 1 + t) % P;
    const uint64_t len = a->recv_len[p];
    if (len <= off) continue;
    coll_copy(a, a->recv + a->recv_off[p] + off, slots0 + (uint64_t)t * a->ring_stride, coll_min(C, len - off), w, nw);
  }
  if (a->own_len > off)
    coll_copy(a, a->recv + a->own_dst + off, a->send + a->own_src + off, coll_min(C, a->own_len - off), w, nw);
}

/* Drain of chunk j of a COPY op with bulk >= 2: thread w == 0 moves every aligned stream
 * (staging slot -> recv, and the own block send -> recv) with TMA through the drain's own
 * buffers; the other drain threads only take misaligned streams. The slot's reads are done
 * when coll_bulk_copy returns (every load completed before its store was issued), so the
 * caller's CDONE arrival (after __syncwarp) lets the control warp return the credit. The
 * consumer control acquired the signal before the "go" barrier; fence.proxy.async orders that
 * acquire before the async-proxy reads of the slot. */
MELD_DEV void coll_drain_bulk(meld_ctx_t *ctx, const coll_kargs_t *a, uint32_t c, uint32_t slot, uint64_t off,
                              uint32_t w, uint32_t nw, uint64_t *n) {
  extern __shared__ __align__(128) uint8_t coll_dsmem[];
  const int P = a->nranks, me = a->rank, npeer = P - 1;
  const uint64_t C = a->chunk;
  const uint8_t *slots0 = a->ws + coll_slot_off(a, 0, 0, c, slot);
  uint8_t *smem = coll_dsmem + COLL_BULK_SMEM;
  uint64_t *bars = coll_bulk_bars() + COLL_BULK_NBUF;
  if (w == 0) fence_proxy_async_gmem();
  for (int t = 0; t <= npeer; t++) {
    uint8_t *dst;
    const uint8_t *src;
    uint64_t len;
    if (t < npeer) {
      const int p = (me + 1 + t) % P;
      len = a->recv_len[p], dst = a->recv + a->recv_off[p], src = slots0 + (uint64_t)t * a->ring_stride;
    } else {
      len = a->own_len, dst = a->recv + a->own_dst, src = a->send + a->own_src;
      if (dst == src) continue; /* in place */
      src += off;
    }
    if (len <= off) continue;
    dst += off;
    const uint64_t bytes = coll_min(C, len - off);
    if ((((uintptr_t)dst | (uintptr_t)src | bytes) & 15u) == 0) {
      if (w == 0 && !ctx->failed)
        coll_bulk_copy<COLL_BULK_DNBUF, COLL_BULK_DLAG>(ctx, dst, src, bytes, smem, bars, n);
    } else {
      coll_copy(a, dst, src, bytes, w, nw);
    }
  }
}

/* Producer control (warp 0): credits ahead, signals behind. */
MELD_DEV void coll_ring_pctrl(meld_ctx_t *ctx, const coll_kargs_t *a, uint32_t c, uint32_t J, uint32_t nbar) {
  coll_ring_shared_t *s = coll_ring_shared();
  const int P = a->nranks, me = a->rank, npeer = P - 1;
  const uint32_t S = (uint32_t)a->slots, lane = threadIdx.x & 31u;
  const uint64_t epoch = ctx->epoch, step = (uint64_t)a->ctas * a->chunk;
  /* Chunks 0 .. S-1 are first uses of their slots in this call: no credit (the entry
   * handshake proved every consumer finished the previous call). */
  coll_bar_arrive(COLL_BAR_PGO, nbar);
  for (uint32_t j = 0; j < J; j++) {
    int nfail = 0;
    if (j + 1 < J && j + 1 >= S) {
      const uint64_t off1 = (uint64_t)(j + 1) * step + (uint64_t)c * a->chunk;
      const uint32_t slot1 = meld_ring_slot(j + 1, S);
      int ok = 1;
      for (int t = (int)lane; t < npeer; t += 32) {
        const int q = (me + 1 + t) % P;
        if (a->push_len[q] > off1)
          ok &= meld_wait_credit(ctx, meld_credit_index(q, P, c, slot1, S), meld_ring_credit_needed(epoch, j + 1, S),
                                 q, "coll: slot credit")
                    ? 1
                    : 0;
      }
      nfail = !__all_sync(0xffffffffu, ok);
    }
    coll_bar_sync(COLL_BAR_PDONE, nbar); /* the push warps stored chunk j */
    if (lane == 0) {
      s->pushed = j + 1;
      if (nfail) s->pfail = 1;
    }
    __syncwarp();
    if (j + 1 < J) coll_bar_arrive(COLL_BAR_PGO, nbar);
    /* Release chunk j: the push warps' stores are ordered before this by the barrier, and
     * the release is cumulative. */
    const uint64_t off = (uint64_t)j * step + (uint64_t)c * a->chunk;
    const uint64_t stamp = meld_ring_data_stamp(epoch, j, S);
    const uint32_t slot = meld_ring_slot(j, S);
    for (int t = (int)lane; t < npeer; t += 32) {
      const int q = (me + 1 + t) % P;
      if (a->push_len[q] > off) meld_signal_put(ctx, q, meld_signal_index(me, P, c, slot, S), stamp);
    }
    if (nfail) break;
  }
}

/* The piece of outgoing stream t (to peer (me + 1 + t) % P) that CTA channel c pushes in
 * round j: its destination slot, source and length; false when the stream has ended. */
MELD_DEV bool coll_ring_piece(const coll_kargs_t *a, uint32_t c, uint32_t j, int t, uint8_t **dst,
                              const uint8_t **src, uint64_t *bytes) {
  const int P = a->nranks, me = a->rank;
  const int q = (me + 1 + t) % P;
  const uint64_t off = (uint64_t)j * ((uint64_t)a->ctas * a->chunk) + (uint64_t)c * a->chunk;
  const uint64_t len = a->push_len[q];
  if (len <= off) return false;
  *dst = a->peer_ws[q] + coll_slot_off(a, 0, coll_src_idx(me, q, P), c, meld_ring_slot(j, (uint32_t)a->slots));
  *src = a->send + a->push_off[q] + off;
  *bytes = coll_min(a->chunk, len - off);
  return true;
}

/* Push warps: chunk j of every outgoing stream into the consumers' slots. */
MELD_DEV void coll_ring_push(const coll_kargs_t *a, uint32_t c, uint32_t J, uint32_t nbar, uint32_t w, uint32_t nw) {
  coll_ring_shared_t *s = coll_ring_shared();
  for (uint32_t j = 0; j < J; j++) {
    coll_bar_sync(COLL_BAR_PGO, nbar);
    if (s->pfail) break;
    for (int t = 0; t < a->nranks - 1; t++) {
      uint8_t *dst;
      const uint8_t *src;
      uint64_t bytes;
      if (coll_ring_piece(a, c, j, t, &dst, &src, &bytes)) coll_copy(a, dst, src, bytes, w, nw);
    }
    coll_bar_arrive(COLL_BAR_PDONE, nbar);
  }
}

/* Consumer control (warp 1): signals, then credits once drained. With 3+ slots it looks one
 * chunk ahead (waits for the signal of j+1 and starts its drain before it returns the credit
 * of j, so the drain warps do not wait for a release fence). Not with 2 slots: the producer
 * releases chunk j only after the credit of j+1, i.e. after the drain of j-1, so holding
 * credit j-1 until signal j would be a cycle. */
MELD_DEV int coll_ring_cwait(meld_ctx_t *ctx, const coll_kargs_t *a, uint32_t c, uint32_t j) {
  coll_ring_shared_t *s = coll_ring_shared();
  const int P = a->nranks, me = a->rank, npeer = P - 1;
  const uint32_t S = (uint32_t)a->slots, lane = threadIdx.x & 31u;
  const uint64_t off = (uint64_t)j * ((uint64_t)a->ctas * a->chunk) + (uint64_t)c * a->chunk;
  const uint32_t slot = meld_ring_slot(j, S);
  const uint64_t stamp = meld_ring_data_stamp(ctx->epoch, j, S);
  int ok = 1;
  for (int t = (int)lane; t < npeer; t += 32) {
    const int p = (me + 1 + t) % P;
    if (coll_recv_len(a, 0, p) > off)
      ok &= meld_wait_signal(ctx, meld_signal_index(p, P, c, slot, S), stamp, p, "coll: chunk arrival") ? 1 : 0;
  }
  ok = __all_sync(0xffffffffu, ok);
  if (ok && a->inplace) {
    /* The drain overwrites the send buffer: wait until this CTA pushed chunk j (or failed). */
    while (s->pushed <= j && !s->pfail) {
    }
    __threadfence_block();
    if (s->pushed <= j) ok = 0;
  }
  if (!ok && lane == 0) s->cstop = j;
  __syncwarp();
  return ok;
}
MELD_DEV void coll_ring_credit(meld_ctx_t *ctx, const coll_kargs_t *a, uint32_t c, uint32_t j) {
  const int P = a->nranks, me = a->rank, npeer = P - 1;
  const uint32_t S = (uint32_t)a->slots, lane = threadIdx.x & 31u;
  const uint64_t off = (uint64_t)j * ((uint64_t)a->ctas * a->chunk) + (uint64_t)c * a->chunk;
  const uint64_t cstamp = meld_ring_credit_stamp(ctx->epoch, j, S);
  for (int t = (int)lane; t < npeer; t += 32) {
    const int p = (me + 1 + t) % P;
    if (coll_recv_len(a, 0, p) > off) meld_credit_put(ctx, p, meld_credit_index(me, P, c, meld_ring_slot(j, S), S), cstamp);
  }
}
MELD_DEV void coll_ring_cctrl(meld_ctx_t *ctx, const coll_kargs_t *a, uint32_t c, uint32_t J, uint32_t nbar) {
  if (a->slots >= 3) {
    if (!coll_ring_cwait(ctx, a, c, 0)) {
      coll_bar_arrive(COLL_BAR_CGO, nbar);
      return;
    }
    coll_bar_arrive(COLL_BAR_CGO, nbar);
    for (uint32_t j = 0; j < J; j++) {
      const int ok = j + 1 < J ? coll_ring_cwait(ctx, a, c, j + 1) : 1;
      coll_bar_sync(COLL_BAR_CDONE, nbar); /* the drain warps' reads of chunk j are done */
      if (j + 1 < J) coll_bar_arrive(COLL_BAR_CGO, nbar); /* go (or stop: cstop) for j+1 */
      coll_ring_credit(ctx, a, c, j);
      if (!ok) break;
    }
    return;
  }
  for (uint32_t j = 0; j < J; j++) {
    const int ok = coll_ring_cwait(ctx, a, c, j);
    coll_bar_arrive(COLL_BAR_CGO, nbar);
    if (!ok) break;
    coll_bar_sync(COLL_BAR_CDONE, nbar); /* the drain warps' reads of the slots are done */
    coll_ring_credit(ctx, a, c, j);
  }
}

MELD_DEV void coll_ring_drain(meld_ctx_t *ctx, const coll_kargs_t *a, uint32_t c, uint32_t J, uint32_t nbar,
                               uint32_t w, uint32_t nw) {
  coll_ring_shared_t *s = coll_ring_shared();
  const uint32_t S = (uint32_t)a->slots;
  const uint64_t step = (uint64_t)a->ctas * a->chunk;
  const bool bulk = a->bulk >= 2 && a->action == COLL_COPY;
  uint64_t n = 0;
  for (uint32_t j = 0; j < J; j++) {
    coll_bar_sync(COLL_BAR_CGO, nbar);
    if (j >= s->cstop) break;
    const uint64_t off = (uint64_t)j * step + (uint64_t)c * a->chunk;
    if (bulk) coll_drain_bulk(ctx, a, c, meld_ring_slot(j, S), off, w, nw, &n);
    else coll_drain(a, c, meld_ring_slot(j, S), off, w, nw);
    __syncwarp(); /* bar.arrive is .aligned: the warp reconverges after thread 0's copies */
    coll_bar_arrive(COLL_BAR_CDONE, nbar);
  }
}

/* The bulk push warp: lane 0 pushes aligned streams with coll_bulk_copy; a stream whose
 * pointers or length are not 16-byte multiples goes by the whole warp's loops. */
MELD_DEV void coll_ring_push_bulk(meld_ctx_t *ctx, const coll_kargs_t *a, uint32_t c, uint32_t J, uint32_t nbar) {
  extern __shared__ __align__(128) uint8_t coll_dsmem[];
  coll_ring_shared_t *s = coll_ring_shared();
  const uint32_t lane = threadIdx.x & 31u;
  uint64_t n = 0; /* the mbarriers were initialized before the entry's bar.sync */
  for (uint32_t j = 0; j < J; j++) {
    coll_bar_sync(COLL_BAR_PGO, nbar);
    if (s->pfail) break;
    for (int t = 0; t < a->nranks - 1; t++) {
      uint8_t *dst;
      const uint8_t *src;
      uint64_t bytes;
      if (!coll_ring_piece(a, c, j, t, &dst, &src, &bytes)) continue;
      if ((((uintptr_t)dst | (uintptr_t)src | bytes) & 15u) == 0) {
        if (lane == 0 && !ctx->failed) {
          fence_proxy_async_gmem(); /* the credit acquired before "go", then async writes */
          coll_bulk_copy<COLL_BULK_NBUF, COLL_BULK_LAG>(ctx, dst, src, bytes, coll_dsmem, coll_bulk_bars(), &n);
        }
      } else {
        coll_copy(a, dst, src, bytes, lane, 32);
      }
    }
    __syncwarp();
    coll_bar_arrive(COLL_BAR_PDONE, nbar);
  }
}

MELD_DEV void coll_ring(meld_ctx_t *ctx, const coll_kargs_t *a, uint32_t c) {
  const uint32_t J = coll_ring_chunks(a, c);
  if (J == 0) return;
  const uint32_t warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  const uint32_t cw = (uint32_t)a->cons_warps, pw = nwarps - 2u - cw;
  const uint32_t pbar = (pw + 1u) * 32u, cbar = (cw + 1u) * 32u;
  if (warp == 0) coll_ring_pctrl(ctx, a, c, J, pbar);
  else if (warp == 1) coll_ring_cctrl(ctx, a, c, J, cbar);
  else if (a->bulk && warp == 2) coll_ring_push_bulk(ctx, a, c, J, pbar); /* plan: pw == 1 */
  else if (warp < 2u + pw) coll_ring_push(a, c, J, pbar, threadIdx.x - 64u, pw * 32u);
  else coll_ring_drain(ctx, a, c, J, cbar, threadIdx.x - 64u - pw * 32u, cw * 32u);
}

/* ---- LL engine --------------------------------------------------------------------------------- */

MELD_DEV void coll_st_v2(void *p, uint64_t x, uint64_t y) {
  asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(x), "l"(y) : "memory");
}
MELD_DEV void coll_ld_v2(const void *p, uint64_t *x, uint64_t *y) {
  asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(*x), "=l"(*y) : "l"(p) : "memory");
}

/* n (<= 8, a multiple of es) bytes at p (aligned to es) as a little-endian u64. */
MELD_DEV uint64_t coll_ld8(const uint8_t *p, uint32_t n, uint32_t es) {
  if (n == 8 && ((uintptr_t)p & 7u) == 0) return *(const uint64_t *)p;
  uint64_t v = 0;
  if (es == 4)
    for (uint32_t i = 0; i < n / 4; i++) v |= (uint64_t)((const uint32_t *)p)[i] << (32 * i);
  else
    for (uint32_t i = 0; i < n / 2; i++) v |= (uint64_t)((const uint16_t *)p)[i] << (16 * i);
  return v;
}
MELD_DEV void coll_st8(uint8_t *p, uint64_t v, uint32_t n, uint32_t es) {
  if (n == 8 && ((uintptr_t)p & 7u) == 0) {
    *(uint64_t *)p = v;
    return;
  }
  if (es == 4)
    for (uint32_t i = 0; i < n / 4; i++) ((uint32_t *)p)[i] = (uint32_t)(v >> (32 * i));
  else
    for (uint32_t i = 0; i < n / 2; i++) ((uint16_t *)p)[i] = (uint16_t)(v >> (16 * i));
}

/* One thread waits until both lines of the 16-byte unit at `line` (this GPU's pad) carry
 * `flag`; returns the 8 data bytes in *data. Guarded like every wait: the abort word and
 * the deadline every MELD_WAIT_CHECK_EVERY spins (and, once slow, the host abort word). */
MELD_DEV bool coll_ll_wait(meld_ctx_t *c, const uint8_t *line, uint32_t flag, int from, uint64_t *data) {
  if (c->failed) return false;
  uint64_t x, y;
  coll_ld_v2(line, &x, &y);
  if ((uint32_t)(x >> 32) == flag && (uint32_t)(y >> 32) == flag) {
    *data = (x & 0xffffffffull) | (y << 32);
    return true;
  }
  const meld_proto_dev_t *p = c->p;
  meld_wait_state_t w;
  meld_wait_start(&w, globaltimer_ns(), p->timeout_ns);
  for (;;) {
    coll_ld_v2(line, &x, &y);
    if ((uint32_t)(x >> 32) == flag && (uint32_t)(y >> 32) == flag) break;
    if (!meld_wait_tick(&w)) continue;
    const uint64_t now = globaltimer_ns();
    uint32_t ab = ld_relaxed_sys_u32(meld_abort_word(p));
    /* The host's abort word (host-mapped: a PCIe read) from one thread per CTA only: every
     * LL thread polls its own lines, and thousands of threads reading host memory every 64
     * spins once a peer is > 20 us late would queue up on PCIe and delay the data they wait
     * for (suspected cause of the rare 0.19-0.27 ms LL all-reduce timings, sessions 3-4).
     * That thread raises the device word, which every thread reads. */
    if (!ab && threadIdx.x == 0 && now - w.start_ns >= MELD_WAIT_MIRROR_AFTER_NS &&
        (ab = ld_relaxed_sys_u32(p->host_abort)) != 0u)
      meld_raise_abort_outline<>(p, ab);
    const meld_wait_info_t info =
        meld_wait_info(MELD_REGION_OTHER, (uint32_t)((uintptr_t)line & 0xffffffffu), from, "coll: LL data");
    if (ab) {
      fence_acq_rel_sys();
      meld_fail(c, MELD_FAIL_ABORTED, info, flag, x, now - w.start_ns, ab);
      return false;
    }
    if (meld_wait_expired(&w, now)) {
      meld_fail(c, MELD_FAIL_TIMEOUT, info, flag, x, now - w.start_ns, 0u);
      return false;
    }
  }
  *data = (x & 0xffffffffull) | (y << 32);
  return true;
}

/* A line polled earlier as (x, y): its data if both halves carry `flag`, else the guarded
 * wait on the line. */
MELD_DEV bool coll_ll_take(meld_ctx_t *c, const uint8_t *line, uint32_t flag, int from, uint64_t x, uint64_t y,
                           uint64_t *data) {
  if (!c->failed && (uint32_t)(x >> 32) == flag && (uint32_t)(y >> 32) == flag) {
    *data = (x & 0xffffffffull) | (y << 32);
    return true;
  }
  return coll_ll_wait(c, line, flag, from, data);
}

/* Exit of an LL call: meld_call_end without its release. An LL CTA writes nothing of the
 * call's scratch (no queues, no scratch words; its ticket atomic returned before it counts
 * itself done), so the "CTAs done" count needs atomicity only: a relaxed add instead of
 * acq_rel, whose GPU-scope release would wait for this CTA's NVLink stores to be acked
 * (microseconds on the critical path). One CTA needs no count at all. The last CTA resets the
 * words and advances the counter with plain stores (meld_call_advance); the next call is a
 * later kernel, ordered after them by the kernel boundary. */
MELD_DEV void coll_ll_end(meld_ctx_t *ctx) { meld_call_end_count<false>(ctx); }

MELD_DEV void coll_acc8(float acc[4], uint64_t v, int dtype) {
  if (dtype == COPY_BF16) {
#pragma unroll
    for (int k = 0; k < 4; k++) acc[k] += __uint_as_float((uint32_t)((v >> (16 * k)) & 0xffffu) << 16);
  } else {
    acc[0] += __uint_as_float((uint32_t)v);
    acc[1] += __uint_as_float((uint32_t)(v >> 32));
  }
}
MELD_DEV uint64_t coll_pack8(const float acc[4], int dtype) {
  if (dtype == COPY_BF16) {
    uint64_t v = 0;
#pragma unroll
    for (int k = 0; k < 4; k++) {
      __nv_bfloat16 h = __float2bfloat16_rn(acc[k]);
      v |= (uint64_t)(*(const uint16_t *)&h) << (16 * k);
    }
    return v;
  }
  return (uint64_t)__float_as_uint(acc[0]) | ((uint64_t)__float_as_uint(acc[1]) << 32);
}

/* Polls the lines of units u0, u0 + G, ... (U of them, those below len bytes) of one
 * producer's region: every load issues before any is checked. */
template <int U, typename I>
MELD_DEV void coll_ll_poll(const uint8_t *lines, I u0, I G, uint64_t len, uint64_t x[U], uint64_t y[U]) {
#pragma unroll
  for (int k = 0; k < U; k++) {
    const I u = u0 + (I)k * G;
    x[k] = y[k] = 0;
    if (u * 8 < len) coll_ld_v2(lines + u * 16, &x[k], &y[k]);
  }
}

/* The LL call: entry without waiting for peers, data, lazy argument check, exit.
 * SP (the lean instantiations, the default where they apply; MELD_COLL_LL_LEAN=0 = never):
 * every stream's offsets and lengths, send and recv multiples of 8 bytes and streams < 2 GiB
 * (the host checks): units are plain 8-byte loads and stores (no width cases) and unit
 * indices 32-bit; SP = 2 also makes P the constant 2, SP = -1 takes P at run time (any P,
 * session 25); 0 = any call (generic). Same results bit for bit (same loads, stores, sum order). Session 20:
 * the generic path runs ~590 instructions a warp (Nsight, LL loopback). Tried and reverted
 * (session 23 call 2): a one-CTA call loading its first units of the send before the entry, to
 * overlap that latency with the entry's round trips: +0.13..+0.40 us a call in graphs, at 4 KB
 * and at 64 KB (16 CTAs, where the prefetch never ran): the added code cost more than it hid. */
template <int SP = 0, int ACT = -1, int U = COLL_LL_U, int FL = 0>
MELD_DEV void coll_ll(meld_ctx_t *ctx, const meld_proto_dev_t *p, const coll_kargs_t *a) {
  constexpr bool LEAN = SP != 0;
  using I = typename std::conditional<LEAN, uint32_t, uint64_t>::type;
  meld_cta_shared_t *sh = meld_cta_shared();
  ctx->p = p;
  ctx->op = a->op_id;
  ctx->arg_hash = a->arg_hash;
  ctx->cta = blockIdx.x;
  ctx->failed = 0;
  if (threadIdx.x == 0) {
    ctx->ticket = atom_add_relaxed_gpu_u32(meld_pad_u32(p->pad, MELD_PAD_OFF_TICKET), 1u);
    ctx->epoch = meld_epoch_of_counter(ld_relaxed_gpu_u64(meld_pad_u64(p->pad, MELD_PAD_OFF_COUNTER)));
    ctx->role = MELD_ROLE_COMM;
    bool ok = meld_entry_check(ctx);
    sh->epoch = ctx->epoch;
    sh->ticket = ctx->ticket;
    sh->ok = ok ? 1u : 0u;
  }
  __syncthreads();
  ctx->epoch = sh->epoch;
  ctx->ticket = sh->ticket;
  ctx->role = MELD_ROLE_COMM;
  ctx->failed = sh->ok ? 0u : 1u;
  if (sh->ok) {
    const int P = SP > 0 ? SP : a->nranks, me = a->rank, npeer = P - 1;
    const uint32_t es = a->dtype == COPY_BF16 ? 2u : 4u;
    const uint32_t flag = (uint32_t)ctx->epoch;
    const uint64_t half = (uint64_t)(ctx->epoch & 1u) * MELD_COLL_LL_HALF_BYTES;
    const I g = (I)ctx->ticket * blockDim.x + threadIdx.x, G = (I)gridDim.x * blockDim.x;
    const uint64_t hi = (uint64_t)flag << 32;
    /* Send: units g, g+G, ... of every outgoing stream (peers in rotated order). */
    static_assert(!FL || SP < 0, "flat loops: the any-P kernel only");
    if (FL == 1 || (FL == 2 && (a->ll_flat & 2))) {
      /* Every outgoing stream has nu units: one index space over them (as the flat receive
       * below), so a thread's U loads in flight span streams when they are short. Stream t
       * goes to peer q = me + 1 + t (mod P), where this rank is producer P - 2 - t. */
      const I nu = (I)(a->push_len[(me + 1) % P] / 8), total = nu * (I)npeer;
      for (I i0 = g; i0 < total; i0 += U * G) {
        uint64_t v[U];
        I tk[U], uk[U];
#pragma unroll
        for (int k = 0; k < U; k++) {
          const I i = i0 + (I)k * G;
          tk[k] = i / nu;
          uk[k] = i - tk[k] * nu;
          const int q = coll_rot(me, (int)tk[k], P);
          v[k] = 0;
          if (i < total) v[k] = *(const uint64_t *)(a->send + a->push_off[q] + (uint64_t)uk[k] * 8);
        }
#pragma unroll
        for (int k = 0; k < U; k++) {
          const int q = coll_rot(me, (int)tk[k], P);
          if (i0 + (I)k * G < total)
            coll_st_v2((a->loop ? p->pad : p->peer_pads[q]) + MELD_PAD_OFF_LL + half + (uint64_t)(npeer - 1 - (int)tk[k]) * a->ll_region + (uint64_t)uk[k] * 16,
                       hi | (v[k] & 0xffffffffull), hi | (v[k] >> 32));
        }
      }
    } else
    for (int t = 0; t < npeer; t++) {
      const int q = (me + 1 + t) % P;
      const uint64_t len = a->push_len[q];
      uint8_t *dst = (a->loop ? p->pad : p->peer_pads[q]) + MELD_PAD_OFF_LL + half + (uint64_t)coll_src_idx(me, q, P) * a->ll_region;
      const uint8_t *src = a->send + a->push_off[q];
      /* U units per thread per step: all loads issue before the first store (a
       * store's "memory" clobber would otherwise keep the next load behind it: one HBM
       * latency per 8 bytes per thread). */
      for (I u0 = g; u0 * 8 < len; u0 += U * G) {
        uint64_t v[U];
#pragma unroll
        for (int k = 0; k < U; k++) {
          const I u = u0 + (I)k * G;
          v[k] = 0;
          if ((uint64_t)u * 8 < len) v[k] = LEAN ? *(const uint64_t *)(src + (uint64_t)u * 8) : coll_ld8(src + (uint64_t)u * 8, (uint32_t)coll_min(8, len - (uint64_t)u * 8), es);
        }
#pragma unroll
        for (int k = 0; k < U; k++) {
          const I u = u0 + (I)k * G;
          if (u * 8 < len) coll_st_v2(dst + u * 16, hi | (v[k] & 0xffffffffull), hi | (v[k] >> 32));
        }
      }
    }
    /* The argument post, after this thread's sends and without a release: it is only
     * compared (at the peers' end of this call), it orders nothing. (A release here is a
     * system-scope fence, microseconds on the critical path.) */
    if (ctx->ticket == 0 && threadIdx.x == 0 && !a->loop) {
      const uint64_t v = meld_args_pack(ctx->epoch, ctx->arg_hash);
      for (int r = 0; r < P; r++)
        if (r != me && p->peer_pads[r]) st_relaxed_sys_u64(meld_pad_u64(p->peer_pads[r], meld_pad_args_offset(me, ctx->epoch)), v);
    }
    const uint8_t *mine = p->pad + MELD_PAD_OFF_LL + half;
    if (ACT >= 0 ? ACT == COLL_COPY : a->action == COLL_COPY) {
      /* Own block first (overlaps the flight of the lines), then every incoming stream. */
      if (a->own_len) copy_bytes(a->recv + a->own_dst, a->send + a->own_src, a->own_len, (uint32_t)g, (uint32_t)G);
      if (FL == 1 || (FL == 2 && (a->ll_flat & 1))) {
        /* Every incoming stream has nu units (all-gather, uniform all-to-all): one index
         * space over all of them, so a thread's U polls in flight span streams when they are
         * short (P = 8, 4 KB: one round of polls, not 7). */
        const I nu = (I)(a->recv_len[(me + 1) % P] / 8), total = nu * (I)npeer;
        for (I i0 = g; i0 < total && !ctx->failed; i0 += U * G) {
          uint64_t x[U], y[U];
          I tk[U], uk[U];
#pragma unroll
          for (int k = 0; k < U; k++) {
            const I i = i0 + (I)k * G;
            x[k] = y[k] = 0;
            tk[k] = i / nu;
            uk[k] = i - tk[k] * nu;
            if (i < total) coll_ld_v2(mine + (uint64_t)tk[k] * a->ll_region + uk[k] * 16, &x[k], &y[k]);
          }
#pragma unroll
          for (int k = 0; k < U; k++) {
            const int pr = coll_rot(me, (int)tk[k], P);
            uint64_t v;
            if (i0 + (I)k * G >= total ||
                !coll_ll_take(ctx, mine + (uint64_t)tk[k] * a->ll_region + uk[k] * 16, flag, pr, x[k], y[k], &v))
              break;
            *(uint64_t *)(a->recv + a->recv_off[pr] + (uint64_t)uk[k] * 8) = v;
          }
        }
      } else
      for (int t = 0; t < npeer; t++) {
        const int pr = (me + 1 + t) % P;
        const uint64_t len = a->recv_len[pr];
        const uint8_t *src = mine + (uint64_t)t * a->ll_region;
        uint8_t *dst = a->recv + a->recv_off[pr];
        /* U lines per thread per step: every poll issues before the first check. */
        for (I u0 = g; u0 * 8 < len && !ctx->failed; u0 += U * G) {
          uint64_t x[U], y[U];
          coll_ll_poll<U>(src, u0, G, len, x, y);
#pragma unroll
          for (int k = 0; k < U; k++) {
            const I u = u0 + (I)k * G;
            uint64_t v;
            if (u * 8 >= len || !coll_ll_take(ctx, src + u * 16, flag, pr, x[k], y[k], &v)) break;
            if (LEAN) *(uint64_t *)(dst + (uint64_t)u * 8) = v;
            else coll_st8(dst + (uint64_t)u * 8, v, (uint32_t)coll_min(8, len - (uint64_t)u * 8), es);
          }
        }
      }
    } else {
      /* Sum in rank order 0..P-1 from 0.0f (as reduce_sum), rounded once. */
      const uint64_t len = a->own_len;
      const uint8_t *own = a->send + a->own_src;
      uint8_t *dst = a->recv + a->own_dst;
      if (SP < 0 && len <= (uint64_t)8 * G) {
        /* One unit per thread at most: its peers' lines polled COLL_LL_PB at a time (P <= 9:
         * one round of polls for all of them, not P - 1), summed in rank order. */
        if ((uint64_t)g * 8 < len) {
          const uint64_t ov = *(const uint64_t *)(own + (uint64_t)g * 8);
          float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
          for (int r0 = 0; r0 < P && !ctx->failed; r0 += COLL_LL_PB) {
            uint64_t x[COLL_LL_PB], y[COLL_LL_PB];
#pragma unroll
            for (int k = 0; k < COLL_LL_PB; k++) {
              const int r = r0 + k;
              x[k] = y[k] = 0;
              if (r < P && r != me) coll_ld_v2(mine + (uint64_t)coll_src_idx(r, me, P) * a->ll_region + (uint64_t)g * 16, &x[k], &y[k]);
            }
#pragma unroll
            for (int k = 0; k < COLL_LL_PB; k++) {
              const int r = r0 + k;
              uint64_t v = ov;
              if (r >= P || (r != me && !coll_ll_take(ctx, mine + (uint64_t)coll_src_idx(r, me, P) * a->ll_region + (uint64_t)g * 16, flag, r, x[k], y[k], &v)))
                break;
              coll_acc8(acc, v, a->dtype);
            }
          }
          if (!ctx->failed) *(uint64_t *)(dst + (uint64_t)g * 8) = coll_pack8(acc, a->dtype);
        }
      } else if (P == 2) {
        /* Two ranks: U units per thread per step, the own values and the peer's lines all
         * requested before the first add (the loop below costs +0.15..0.24 us a call here:
         * session 25 call 1, 4 KB reduce-scatter 2.52 vs 2.28 us). */
        for (I u0 = g; u0 * 8 < len && !ctx->failed; u0 += U * G) {
          uint64_t ov[U], x[U], y[U];
#pragma unroll
          for (int k = 0; k < U; k++) {
            const I u = u0 + (I)k * G;
            ov[k] = x[k] = y[k] = 0;
            if (u * 8 < len) {
              ov[k] = LEAN ? *(const uint64_t *)(own + (uint64_t)u * 8) : coll_ld8(own + (uint64_t)u * 8, (uint32_t)coll_min(8, len - (uint64_t)u * 8), es);
              coll_ld_v2(mine + u * 16, &x[k], &y[k]);
            }
          }
#pragma unroll
          for (int k = 0; k < U; k++) {
            const I u = u0 + (I)k * G;
            if (u * 8 >= len || ctx->failed) break;
            float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            for (int r = 0; r < 2; r++) {
              uint64_t v = ov[k];
              if (r != me && !coll_ll_take(ctx, mine + u * 16, flag, r, x[k], y[k], &v)) break;
              coll_acc8(acc, v, a->dtype);
            }
            if (!ctx->failed) {
              if (LEAN) *(uint64_t *)(dst + (uint64_t)u * 8) = coll_pack8(acc, a->dtype);
              else coll_st8(dst + (uint64_t)u * 8, coll_pack8(acc, a->dtype), (uint32_t)coll_min(8, len - (uint64_t)u * 8), es);
            }
          }
        }
      } else
      /* P > 2: U units per thread per step, the peers in rank order: the own values are
       * requested first, then each peer's U lines are all polled before the first add (one
       * line at a time before session 25), and the own values are added at their place in
       * rank order after the next peer's polls issued. Units past len add zeros and are not
       * stored. */
      for (I u0 = g; u0 * 8 < len && !ctx->failed; u0 += U * G) {
        uint64_t ov[U];
        float acc[U][4];
#pragma unroll
        for (int k = 0; k < U; k++) {
          const I u = u0 + (I)k * G;
          ov[k] = 0;
          acc[k][0] = acc[k][1] = acc[k][2] = acc[k][3] = 0.0f;
          if (u * 8 < len)
            ov[k] = LEAN ? *(const uint64_t *)(own + (uint64_t)u * 8) : coll_ld8(own + (uint64_t)u * 8, (uint32_t)coll_min(8, len - (uint64_t)u * 8), es);
        }
        bool own_added = false;
        for (int r = 0; r < P && !ctx->failed; r++) {
          if (r == me) continue;
          const uint8_t *lines = mine + (uint64_t)coll_src_idx(r, me, P) * a->ll_region;
          uint64_t x[U], y[U];
          coll_ll_poll<U>(lines, u0, G, len, x, y);
          if (!own_added && me < r) { /* the own operand at its place in rank order */
#pragma unroll
            for (int k = 0; k < U; k++) coll_acc8(acc[k], ov[k], a->dtype);
            own_added = true;
          }
#pragma unroll
          for (int k = 0; k < U; k++) {
            const I u = u0 + (I)k * G;
            uint64_t v;
            if (u * 8 >= len || !coll_ll_take(ctx, lines + u * 16, flag, r, x[k], y[k], &v)) break;
            coll_acc8(acc[k], v, a->dtype);
          }
        }
        if (!own_added)
#pragma unroll
          for (int k = 0; k < U; k++) coll_acc8(acc[k], ov[k], a->dtype);
        if (ctx->failed) break;
#pragma unroll
        for (int k = 0; k < U; k++) {
          const I u = u0 + (I)k * G;
          if (u * 8 >= len) break;
          if (LEAN) *(uint64_t *)(dst + (uint64_t)u * 8) = coll_pack8(acc[k], a->dtype);
          else coll_st8(dst + (uint64_t)u * 8, coll_pack8(acc[k], a->dtype), (uint32_t)coll_min(8, len - (uint64_t)u * 8), es);
        }
      }
    }
    /* The argument check, after the fact: every peer posted (epoch, hash) at its entry. A
     * mismatch fails the call (MELD_FAIL_ARGS) on this rank and aborts the peers. */
    if (ctx->ticket == 0 && threadIdx.x == 0 && !ctx->failed && !a->loop) {
      /* Fast path: relaxed reads that find the posts need no fence (the post orders nothing:
       * run 2 measured ~3.5 us per system-scope fence); up to 8 peers' posts are read together
       * (meld_args_read8). Else the guarded wait. (Tried in session 23 call 8: reading the
       * post right after the sends, its latency behind the receive: all-gather +0.1..+0.17
       * us, the others -0.05..+0.07.) */
      bool stop = false;
      for (int r0 = 0; r0 < P && !stop; r0 += 8) {
        uint64_t pv[8];
        meld_args_read8(ctx, r0, pv);
#pragma unroll
        for (int k = 0; k < 8; k++) {
          const int r = r0 + k;
          if (r >= P) break;
          if (r == me || !p->peer_pads[r]) continue;
          const uint64_t *slot = meld_pad_u64(p->pad, meld_pad_args_offset(r, ctx->epoch));
          uint64_t v = pv[k];
          if (!meld_args_arrived(v, ctx->epoch) &&
              !meld_wait_impl<true>(ctx, slot, ctx->epoch, MELD_CMP_ARGS,
                                    meld_wait_info(MELD_REGION_ARGS, (uint32_t)r, r, "argument handshake"), &v)) {
            stop = true;
            break;
          }
          if (meld_args_hash(v) != ctx->arg_hash) {
            meld_args_post(ctx);
            meld_fail(ctx, MELD_FAIL_ARGS, meld_wait_info(MELD_REGION_ARGS, (uint32_t)r, r, "argument handshake"),
                      ctx->arg_hash, meld_args_hash(v), 0, 0);
            stop = true;
            break;
          }
        }
      }
    }
  }
  coll_ll_end(ctx);
}

/* ---- ZC engine: zero copy between symmetric buffers --------------------------------------------
 * Every rank works on its own share of the data and touches the peers' buffers directly
 * (peer_send / peer_recv: each rank's buffer mapped here; [rank] = own):
 *   all_gather      send (own, any memory)            -> recv_q[me * B] for every q   (push)
 *   all_to_all      send[q * B] (own, any memory)     -> recv_q[me * B] for every q   (push)
 *   reduce_scatter  sum over r of send_r[me * B]      -> recv (own, any memory)       (pull)
 *   all_reduce      sum over r of send_r[me * part]   -> recv_q[me * part] for every q
 *   all_reduce 1x   sum over r of send_r (all of it)  -> recv (own, any memory)       (pull)
 * (one-shot: when only the send is symmetric, e.g. an op's partial in the workspace).
 * One load per source and one store per destination: a copy is read once and stored P times
 * (no staging, no drain). A job's bytes are cut into one contiguous slice per CTA (by
 * ticket); the element tail (bytes past the last 16-byte vector) goes to the last CTA; a job
 * whose pointers are not all 16-byte aligned runs element by element (only the unshared
 * buffer can be: the symmetric ones share their offsets, hashed).
 * Sync: meld_call_begin's handshake (every peer entered this call: its stream's earlier work
 * on these buffers is done, and it will not return before our "done"), then per CTA c one
 * "done" stamp (epoch, 1) into every peer's signal slot (me, channel c), after a bar.sync
 * that orders the CTA's loads and stores before the release (a relaxed store where the CTA
 * only pulled: nothing of it is for the peers); then CTA c waits for every
 * peer's done on channel c. A rank's kernel therefore ends only after every peer finished
 * every read of its send and every write into its recv. Sums: fp32, rank order 0..P-1 from
 * 0.0f, as reduce_sum (bitwise the same on every rank). No CTA waits for anything but the
 * peers' same-ticket CTAs (and the entry posts), so a plain launch cannot deadlock (the LL
 * argument in meld_coll_run). */
/* Vectors in flight per thread (plan->unroll 8, the default; 4 for comparison): copies 8,
 * two-source sums 8 per source (4 and 4 with unroll 4); longer sums 4 per source.
 * Pulls (the sums' loads of the peers' blocks) are the engine's weak side: ~19 GB/s per CTA
 * with these register loads (run 1, 2 x H200), and deeper pipelines were slower, not faster:
 * TMA bulk loads of the peer's memory into shared memory (6 x 32 KB in flight per CTA) gave
 * reduce_scatter 175-180 GB/s at 16 CTAs, cp.async (LDGSTS) staging 126-136 (runs 2, 3), against
 * 251-290 with registers. With the two-source loop in coll_sum2_vec (pointers computed once),
 * a pull CTA moves ~30 GB/s (run 10: reduce_scatter 287/316/330 GB/s at 64 MB / 256 MB / 1 GB
 * with 16 CTAs); sums still run on up to 32 CTAs (plan), which helps below 16 MB. */

typedef struct {
  int32_t rank, nranks, ctas, op, dtype;
  int32_t inplace;     /* AG: send == recv + me * B (own block not stored)        */
  int32_t oneshot;     /* AR: every send summed whole into this rank's recv only  */
  int32_t unroll;      /* 16-byte loads in flight per thread and source: 8 or 4   */
  int32_t pdl;         /* MELD_COLL_PDL: trigger the next programmatic launch     */
  uint32_t op_id, arg_hash;
  uint64_t B;          /* AG / RS / A2A: bytes per block; AR: total bytes          */
  uint64_t part;       /* AR: bytes of each rank's part (multiple of 16)           */
  const uint8_t *send;
  uint8_t *recv;
  const uint8_t *peer_send[MELD_COLL_MAX_RANKS];
  uint8_t *peer_recv[MELD_COLL_MAX_RANKS];
} coll_zc_args_t;

/* Jobs: all_to_all one per destination rank; all_gather the push to the peers and the own
 * copy as two jobs (one loop storing each vector to both measured 271-302 GB/s with 16 CTAs,
 * against 301-342 for all-to-all's separate jobs, run 1); sums one job. */
template <int OP>
MELD_DEV int zc_njobs(const coll_zc_args_t *a) {
  if (OP == MELD_COLL_ALL_TO_ALL) return a->nranks;
  if (OP == MELD_COLL_ALL_GATHER) return (a->nranks > 1 ? 1 : 0) + (a->inplace ? 0 : 1);
  return 1;
}
/* All-gather job j is the own copy (else the push to the peers). */
MELD_DEV bool zc_ag_own(const coll_zc_args_t *a, int j) { return a->nranks == 1 || j == 1; }
/* Sources of job j (summed when > 1); destinations; destination k of a push is rank me+1+k. */
template <int OP>
MELD_DEV int zc_nsrc(const coll_zc_args_t *a) {
  return OP == MELD_COLL_REDUCE_SCATTER || OP == MELD_COLL_ALL_REDUCE ? a->nranks : 1;
}
template <int OP>
MELD_DEV int zc_ndst(const coll_zc_args_t *a, int j) {
  switch (OP) {
    case MELD_COLL_ALL_GATHER: return zc_ag_own(a, j) ? 1 : a->nranks - 1;
    case MELD_COLL_ALL_REDUCE: return a->oneshot ? 1 : a->nranks;
    default: return 1;
  }
}
MELD_DEV int zc_rot(const coll_zc_args_t *a, int k) { return (a->rank + 1 + k) % a->nranks; }
template <int OP>
MELD_DEV uint64_t zc_len(const coll_zc_args_t *a) {
  if (OP != MELD_COLL_ALL_REDUCE || a->oneshot) return a->B;
  const uint64_t start = (uint64_t)a->rank * a->part;
  return start >= a->B ? 0 : coll_min(a->part, a->B - start);
}
template <int OP>
MELD_DEV const uint8_t *zc_src(const coll_zc_args_t *a, int j, int k) {
  const uint64_t me = (uint64_t)a->rank;
  switch (OP) {
    case MELD_COLL_ALL_GATHER: return a->send;
    case MELD_COLL_ALL_TO_ALL: return a->send + (uint64_t)zc_rot(a, j) * a->B;
    case MELD_COLL_REDUCE_SCATTER: return a->peer_send[k] + me * a->B;
    default: return a->peer_send[k] + (a->oneshot ? 0 : me * a->part);
  }
}
template <int OP>
MELD_DEV uint8_t *zc_dst(const coll_zc_args_t *a, int j, int k) {
  const uint64_t me = (uint64_t)a->rank;
  switch (OP) {
    case MELD_COLL_ALL_GATHER: return zc_ag_own(a, j) ? a->recv + me * a->B : a->peer_recv[zc_rot(a, k)] + me * a->B;
    case MELD_COLL_ALL_TO_ALL: return a->peer_recv[zc_rot(a, j)] + me * a->B;
    case MELD_COLL_REDUCE_SCATTER: return a->recv;
    default: return a->oneshot ? a->recv : a->peer_recv[zc_rot(a, k)] + me * a->part;
  }
}

/* Vectors [v0, v1) of job j: U loads per source in flight per thread. Copies store each
 * loaded vector to every destination; P = 2 sums load both sources before adding (no
 * accumulator arrays); longer sums accumulate 8 floats per vector. */
template <int OP, int U, int U2>
MELD_DEV void zc_vec(const coll_zc_args_t *a, int j, uint64_t v0, uint64_t v1, uint32_t t, uint32_t nt) {
  const int nsrc = zc_nsrc<OP>(a), ndst = zc_ndst<OP>(a, j), bf16 = a->dtype == COPY_BF16;
  uint64_t i = v0 + t;
  if (nsrc == 1) {
    const int4 *src = (const int4 *)zc_src<OP>(a, j, 0);
    for (; i + (U - 1) * (uint64_t)nt < v1; i += U * (uint64_t)nt) {
      int4 v[U];
#pragma unroll
      for (int u = 0; u < U; u++) v[u] = __ldcg(src + i + u * nt);
      for (int k = 0; k < ndst; k++) {
        int4 *d = (int4 *)zc_dst<OP>(a, j, k);
#pragma unroll
        for (int u = 0; u < U; u++) d[i + u * nt] = v[u];
      }
    }
    for (; i < v1; i += nt) {
      const int4 v = __ldcg(src + i);
      for (int k = 0; k < ndst; k++) ((int4 *)zc_dst<OP>(a, j, k))[i] = v;
    }
    return;
  }
  if (nsrc == 2) { /* P = 2: at most two destinations */
    coll_sum2_vec<U2>((int4 *)zc_dst<OP>(a, j, 0), ndst > 1 ? (int4 *)zc_dst<OP>(a, j, 1) : nullptr,
                      (const int4 *)zc_src<OP>(a, j, 0), (const int4 *)zc_src<OP>(a, j, 1), a->dtype, i, v1, nt);
    return;
  }
  for (; i < v1; i += 4 * (uint64_t)nt) {
    float acc[4][8];
#pragma unroll
    for (int u = 0; u < 4; u++)
#pragma unroll
      for (int e = 0; e < 8; e++) acc[u][e] = 0.0f;
    for (int k = 0; k < nsrc; k++) {
      const int4 *s = (const int4 *)zc_src<OP>(a, j, k);
      int4 v[4];
#pragma unroll
      for (int u = 0; u < 4; u++)
        if (i + u * nt < v1) v[u] = __ldcg(s + i + u * nt);
#pragma unroll
      for (int u = 0; u < 4; u++) {
        if (i + u * nt >= v1) continue;
        if (bf16) acc_bf16x8(acc[u], v[u]);
        else acc_f32x4(acc[u], v[u]);
      }
    }
#pragma unroll
    for (int u = 0; u < 4; u++) {
      if (i + u * nt >= v1) continue;
      const int4 r = pack_acc(acc[u], a->dtype);
      for (int k = 0; k < ndst; k++) ((int4 *)zc_dst<OP>(a, j, k))[i + u * nt] = r;
    }
  }
}

/* Elements [e0, e1) of job j, one at a time (tails, misaligned jobs). Copies move the raw
 * 2- or 4-byte words. */
template <int OP>
MELD_DEV void zc_elems(const coll_zc_args_t *a, int j, uint64_t e0, uint64_t e1, uint32_t t, uint32_t nt) {
  const int nsrc = zc_nsrc<OP>(a), ndst = zc_ndst<OP>(a, j), dt = a->dtype;
  for (uint64_t e = e0 + t; e < e1; e += nt) {
    if (nsrc == 1) {
      if (dt == COPY_BF16) {
        const uint16_t v = __ldcg((const unsigned short *)zc_src<OP>(a, j, 0) + e);
        for (int k = 0; k < ndst; k++) ((uint16_t *)zc_dst<OP>(a, j, k))[e] = v;
      } else {
        const uint32_t v = __ldcg((const unsigned int *)zc_src<OP>(a, j, 0) + e);
        for (int k = 0; k < ndst; k++) ((uint32_t *)zc_dst<OP>(a, j, k))[e] = v;
      }
      continue;
    }
    float s = 0.0f;
    for (int k = 0; k < nsrc; k++) s += load_elem(zc_src<OP>(a, j, k), e, dt);
    for (int k = 0; k < ndst; k++) store_elem(zc_dst<OP>(a, j, k), e, s, dt);
  }
}

/* CTA c's slice of every job. UNR: the vectors in flight (the plan's unroll, 8 or 4), a
 * constant of the kernel, so each kernel holds one copy loop. */
template <int OP, int UNR>
MELD_DEV void zc_move(const coll_zc_args_t *a, uint32_t c) {
  const uint32_t t = threadIdx.x, nt = blockDim.x, C = (uint32_t)a->ctas;
  const uint64_t es = a->dtype == COPY_BF16 ? 2 : 4, len = zc_len<OP>(a);
  for (int jj = 0; jj < zc_njobs<OP>(a); jj++) {
    /* Jobs in a rotated order per CTA, so that the CTAs spread over the peers' links. */
    const int j = (int)((jj + c) % (uint32_t)zc_njobs<OP>(a));
    uintptr_t align = 0;
    for (int k = 0; k < zc_nsrc<OP>(a); k++) align |= (uintptr_t)zc_src<OP>(a, j, k);
    for (int k = 0; k < zc_ndst<OP>(a, j); k++) align |= (uintptr_t)zc_dst<OP>(a, j, k);
    if ((align & 15u) == 0) {
      const uint64_t nvec = len / 16, per = (nvec + C - 1) / C;
      const uint64_t v0 = coll_min((uint64_t)c * per, nvec), v1 = coll_min(v0 + per, nvec);
      if (v0 < v1) {
        zc_vec<OP, UNR, UNR>(a, j, v0, v1, t, nt);
      }
      if (c == C - 1) zc_elems<OP>(a, j, nvec * 16 / es, len / es, t, nt);
    } else {
      const uint64_t n = len / es, per = (n + C - 1) / C;
      const uint64_t e0 = coll_min((uint64_t)c * per, n), e1 = coll_min(e0 + per, n);
      zc_elems<OP>(a, j, e0, e1, t, nt);
    }
  }
}

/* Thread 0's trace of a ZC call (MELD_TRACE): role < 0 starts the clock, else records the
 * event since the last call and restarts it. The start time lives in shared memory and the
 * calls are not inlined: the move uses all 128 registers, and a 64-bit start time kept across
 * it spilled. Called only when tracing (the kernel tests proto.trace.events once, a parameter
 * load: inside this function the same test is a generic load through a pointer into the
 * parameter space, which every call paid four times even with tracing off). */
__device__ __noinline__ void zc_trace(const meld_trace_dev_t *t, int role, uint32_t item, uint64_t epoch) {
  __shared__ uint64_t start;
  if (role >= 0) meld_trace_record(t, role, item, epoch, start);
  start = globaltimer_ns();
}

template <int OP, int UNR>
__global__ void __launch_bounds__(MELD_COLL_ZC_MAX_THREADS, 1) coll_zc_kernel(const __grid_constant__ meld_proto_dev_t proto,
                                                        const __grid_constant__ coll_zc_args_t a) {
  meld_ctx_t ctx;
  /* Launched early (programmatic serialization, hint pdl): wait for the previous kernel's
   * grid and memory before the handshake tells the peers our buffers are ready. A no-op on
   * an ordinary launch. */
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (a.pdl) asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); /* MELD_COLL_PDL */
  /* Trace (MELD_TRACE): four events per CTA and call: thread 0's entry (other: ticket, epoch,
   * abort word, argument post and the peers' posts), the entry barrier (wait), the move (comm)
   * and the wait for the peers' done (wait), to tell a call's fixed cost apart. (meld_call_begin
   * spelled out: its one-thread part, the barrier, the join.) */
  const bool tr = proto.trace.events != nullptr; /* MELD_TRACE */
  if (threadIdx.x == 0) {
    if (tr) zc_trace(&proto.trace, -1, 0, 0);
    (void)meld_call_begin_one(&ctx, &proto, a.op_id, a.arg_hash, gridDim.x);
    if (tr) zc_trace(&proto.trace, MELD_ROLE_OTHER, ctx.ticket, ctx.epoch);
  }
  __syncthreads();
  meld_call_join(&ctx, &proto, a.op_id, a.arg_hash, gridDim.x);
  if (!ctx.failed) {
    const uint32_t c = ctx.ticket; /* slice and channel: the order in which CTAs started */
    if (tr && threadIdx.x == 0) zc_trace(&proto.trace, MELD_ROLE_WAIT, c, ctx.epoch);
    zc_move<OP, UNR>(&a, c);
    const int P = a.nranks, me = a.rank, tid = (int)threadIdx.x;
    const uint64_t stamp = meld_stamp(ctx.epoch, 1);
    /* bar.sync: this CTA's loads and stores happen before the releases (cumulativity). */
    __syncthreads();
    if (tr && threadIdx.x == 0) zc_trace(&proto.trace, MELD_ROLE_COMM, c, ctx.epoch);
    if (tid < P - 1) {
      const int q = (me + 1 + tid) % P;
      /* A pull-only call (reduce-scatter, one-shot all-reduce: this CTA read the peers' sends
       * and wrote only this rank's recv) announces "done reading" with a relaxed store: its
       * loads have returned (their values were stored before the bar.sync) and nothing it wrote
       * is for the peers, so the system-scope release (a fence waiting for every store of the
       * CTA to be acknowledged) orders nothing. -0.4..-0.54 us a reduce-scatter call at 2
       * in-process ranks (session 23 call 1: 4 KB 4.28 -> 3.74, 1 MB 6.77 -> 6.38). */
      const bool pull_only = OP == MELD_COLL_REDUCE_SCATTER || (OP == MELD_COLL_ALL_REDUCE && a.oneshot);
      if (pull_only) st_relaxed_sys_u64(meld_peer_signal(&ctx, q, meld_signal_index(me, P, c, 0, 1)), stamp);
      else meld_signal_put(&ctx, q, meld_signal_index(me, P, c, 0, 1), stamp);
    }
    /* The peers' done: a failed wait has recorded the error and raised the abort; nothing of
     * this call follows but the exit, whose barrier orders the waits before the count. */
    if (tid < P - 1) {
      const int p = (me + 1 + tid) % P;
      (void)meld_wait_signal(&ctx, meld_signal_index(p, P, c, 0, 1), stamp, p, "coll zc: peer done");
    }
    if (tr && threadIdx.x == 0) zc_trace(&proto.trace, MELD_ROLE_WAIT, c, ctx.epoch);
  }
  /* A relaxed count (coll_ll_end's argument): a ZC CTA writes none of the call's scratch, so
   * the count needs atomicity only; the acq_rel one's GPU-scope release waited for this CTA's
   * stores. */
  meld_call_end_count<false>(&ctx);
}

/* One ZC kernel per op (the op a compile-time constant): each holds only its own path, ~1/4
 * of the one kernel that took every op by a run-time switch (24.6K SASS instructions: a 4 KB
 * call's thread 0 ran 30 separate stretches of it, most of its ~2.5 us entry and ~2.2 us move
 * at one rank being instruction fetch; session 21 call 5, Nsight call 2). And one per unroll
 * (row 0: 8 vectors in flight, the plan's default; row 1: 4, for comparisons), so that each
 * holds one copy loop. */
static const void *const coll_zc_kernels[2][MELD_COLL_NUM_OPS] = {
    {(const void *)coll_zc_kernel<MELD_COLL_ALL_GATHER, 8>, (const void *)coll_zc_kernel<MELD_COLL_REDUCE_SCATTER, 8>,
     (const void *)coll_zc_kernel<MELD_COLL_ALL_REDUCE, 8>, (const void *)coll_zc_kernel<MELD_COLL_ALL_TO_ALL, 8>},
    {(const void *)coll_zc_kernel<MELD_COLL_ALL_GATHER, 4>, (const void *)coll_zc_kernel<MELD_COLL_REDUCE_SCATTER, 4>,
     (const void *)coll_zc_kernel<MELD_COLL_ALL_REDUCE, 4>, (const void *)coll_zc_kernel<MELD_COLL_ALL_TO_ALL, 4>}};

/* ---- CE engine: the copy engines move the data, one thread makes the handshakes ---------------
 * One call = coll_ce_enter_kernel, the copies (cudaMemcpyAsync: every peer's block pulled from
 * its send into this rank's recv, and the own block: the first copy on the caller's stream,
 * the others on the comm's side streams, up to 4, forked and joined by events; coll_ce_call),
 * coll_ce_exit_kernel. The two kernels are one
 * call of the protocol: enter takes the ticket and epoch and makes the argument handshake
 * (every peer entered this call: its earlier stream work on its send is done, and it will not
 * return before our "done") but does not end the call; it leaves its verdict in scratch word 0
 * (zero at every call's entry). exit (after the join: every copy of this rank has completed,
 * its reads of the peers' sends have returned) posts "done reading" to every peer (relaxed, as
 * the ZC engine's pull-only calls: nothing this rank wrote is for the peers), waits for every
 * peer's (deadline), and ends the call (one CTA: the counter advance). A failed handshake
 * cannot stop the copies (a copy engine takes no condition), but they only read the peers'
 * sends, inside ranges symmetric on every rank (same size everywhere), and write this rank's
 * recv, whose contents are undefined after a failed call; exit then skips the done trip. */
typedef struct {
  int32_t rank, nranks;
  uint32_t op_id, arg_hash;
} coll_ce_args_t;

/* The verdict cell: scratch word 0 (launch.cuh meld_scratch; reset by every call's end). */
#define COLL_CE_OK_WORD 0u

__global__ void __launch_bounds__(32, 1) coll_ce_enter_kernel(const __grid_constant__ meld_proto_dev_t proto,
                                                              const __grid_constant__ coll_ce_args_t a) {
  if (threadIdx.x != 0) return;
  meld_ctx_t ctx;
  if (meld_call_begin_one(&ctx, &proto, a.op_id, a.arg_hash, 1))
    *meld_scratch(&ctx, COLL_CE_OK_WORD) = 1u; /* read by exit, a later kernel of the stream */
}

__global__ void __launch_bounds__(32, 1) coll_ce_exit_kernel(const __grid_constant__ meld_proto_dev_t proto,
                                                             const __grid_constant__ coll_ce_args_t a) {
  if (threadIdx.x != 0) return;
  meld_ctx_t ctx;
  ctx.p = &proto;
  ctx.op = a.op_id;
  ctx.arg_hash = a.arg_hash;
  ctx.ticket = 0;
  ctx.role = MELD_ROLE_COMM;
  ctx.cta = 0;
  /* enter did not end the call: the counter still reads the previous call's epoch */
  ctx.epoch = meld_epoch_of_counter(ld_relaxed_gpu_u64(meld_pad_u64(proto.pad, MELD_PAD_OFF_COUNTER)));
  ctx.failed = *meld_scratch(&ctx, COLL_CE_OK_WORD) == 1u ? 0u : 1u;
  if (!ctx.failed) {
    const int P = a.nranks, me = a.rank;
    const uint64_t stamp = meld_stamp(ctx.epoch, 1);
    for (int k = 1; k < P; k++) {
      const int q = (me + k) % P;
      st_relaxed_sys_u64(meld_peer_signal(&ctx, q, meld_signal_index(me, P, 0, 0, 1)), stamp);
    }
    for (int k = 1; k < P && !ctx.failed; k++) {
      const int q = (me + k) % P;
      (void)meld_wait_signal(&ctx, meld_signal_index(q, P, 0, 0, 1), stamp, q, "coll ce: peer done");
    }
  }
  meld_call_advance(&proto, ctx.epoch, 0, 1);
}

/* One kernel per engine: each gets its own register budget (no spills at the plan limits).
 * SP: coll_ll's lean instantiations (2: two ranks; -1: any P) or the generic one (0). ACT (lean only): the action as a
 * constant, COLL_COPY (all-gather, all-to-all) or COLL_REDUCE (reduce-scatter, all-reduce), so
 * each lean kernel holds one path (the ZC kernels' split by op, session 21, cut their
 * instruction fetch); -1 = read at run time. U: units per thread and step (COLL_LL_U). */
template <int SP, int ACT = -1, int U = COLL_LL_U, int FL = 0>
__global__ void __launch_bounds__(MELD_COLL_LL_MAX_THREADS, 1) coll_ll_kernel(const __grid_constant__ meld_proto_dev_t proto,
                                                          const __grid_constant__ coll_kargs_t a) {
  meld_ctx_t ctx;
  /* Programmatic dependent launch (a.pdl: meld_coll_run, MELD_COLL_PDL): wait for the
   * previous kernel's grid and memory, then let the next such launch be scheduled now, so
   * that its launch overlaps this kernel. */
  if (a.pdl) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  }
  coll_ll<SP, ACT, U, FL>(&ctx, &proto, &a);
}

__global__ void __launch_bounds__(MELD_COLL_RING_MAX_THREADS, 1) coll_ring_kernel(const __grid_constant__ meld_proto_dev_t proto,
                                                            const __grid_constant__ coll_kargs_t a) {
  meld_ctx_t ctx;
  if (threadIdx.x == 0) {
    coll_ring_shared_t *s = coll_ring_shared();
    s->pfail = 0, s->cstop = 0xffffffffu, s->pushed = 0; /* before the entry's bar.sync */
    if (a.bulk) { /* the bulk push's (and drain's) mbarriers, also before it */
      uint64_t *bars = coll_bulk_bars();
      for (uint32_t b = 0; b < COLL_BULK_NBUF + COLL_BULK_DNBUF; b++) mbarrier_init_cta(smem_addr(&bars[b]), 1);
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
      fence_proxy_async_smem_cta();
    }
  }
  if (meld_call_begin(&ctx, &proto, a.op_id, a.arg_hash, gridDim.x)) {
    const uint64_t t0 = meld_trace_begin(&ctx);
    coll_ring(&ctx, &a, ctx.ticket); /* channel: the order in which CTAs started */
    if (threadIdx.x == 0) meld_trace_end(&ctx, MELD_ROLE_COMM, ctx.ticket, t0);
  }
  meld_call_end(&ctx);
}

__global__ void __launch_bounds__(MELD_COLL_ROUNDS_MAX_THREADS, 1) coll_kernel(const __grid_constant__ meld_proto_dev_t proto,
                                                       const __grid_constant__ coll_kargs_t a) {
  meld_ctx_t ctx;
  if (meld_call_begin(&ctx, &proto, a.op_id, a.arg_hash, gridDim.x)) {
    const uint32_t c = ctx.ticket; /* channel: the order in which CTAs started */
    const uint64_t t0 = meld_trace_begin(&ctx);
    for (uint32_t j = 0;; j++) {
      const uint64_t off = ((uint64_t)j * (uint64_t)a.ctas + c) * a.chunk;
      if (off >= a.max_len) break;
      bool ok = true;
      for (int st = 0; ok && st < a.stages; st++) ok = coll_stage_round(&ctx, &a, st, c, j, off);
      if (!ok) break;
    }
    if (threadIdx.x == 0) meld_trace_end(&ctx, MELD_ROLE_COMM, c, t0);
  }
  meld_call_end(&ctx);
}

/* ---- host side ------------------------------------------------------------------------------ */

static const uint32_t g_op_ids[MELD_COLL_NUM_OPS] = {MELD_OP_ALL_GATHER, MELD_OP_REDUCE_SCATTER,
                                                     MELD_OP_ALL_REDUCE, MELD_OP_ALL_TO_ALL};

static uint64_t u64_max(uint64_t x, uint64_t y) { return x > y ? x : y; }

/* Fills the kernel's arguments from a validated call and its plan. */
/* loop: the LL loopback (rank 0 of 2 on one rank). */
static void coll_kargs_fill(const struct meld_comm *comm, const meld_coll_args_t *a,
                            const meld_coll_plan_t *p, int loop, coll_kargs_t *k) {
  memset(k, 0, sizeof *k);
  const int P = loop ? 2 : comm->nranks, me = loop ? 0 : comm->rank;
  k->loop = loop;
  const uint64_t es = p->elem_bytes;
  k->rank = me;
  k->nranks = P;
  k->ctas = p->ctas;
  k->slots = p->slots;
  k->stages = p->stages;
  k->dtype = (int32_t)a->dtype;
  k->op_id = g_op_ids[a->op];
  k->chunk = p->chunk_bytes;
  k->ring_stride = (uint64_t)p->ctas * (uint64_t)p->slots * p->chunk_bytes;
  k->send = (const uint8_t *)a->send;
  k->recv = (uint8_t *)a->recv;
  k->ws = (uint8_t *)comm->workspace.local;
  k->mode = (int32_t)p->proto;
  k->cons_warps = p->cons_warps;
  k->unroll = p->unroll;
  k->bulk = p->bulk;
  k->inplace = p->proto == MELD_PROTO_RING && a->op == MELD_COLL_ALL_REDUCE && a->send == a->recv;
  k->ll_region = P > 1 ? MELD_COLL_LL_HALF_BYTES / (uint64_t)(P - 1) / 16 * 16 : 0;
  for (int r = 0; r < P; r++) k->peer_ws[r] = loop ? k->ws : (uint8_t *)comm->workspace.peer[r];
  k->peer_ws[me] = k->ws;
  const uint64_t B = (uint64_t)a->count * es;
  switch (a->op) {
    case MELD_COLL_ALL_GATHER:
      k->action = COLL_COPY;
      for (int r = 0; r < P; r++) {
        k->push_off[r] = 0, k->push_len[r] = B;
        k->recv_off[r] = (uint64_t)r * B, k->recv_len[r] = B;
      }
      k->own_src = 0, k->own_dst = (uint64_t)me * B, k->own_len = B;
      k->max_len = B;
      break;
    case MELD_COLL_REDUCE_SCATTER:
      k->action = COLL_REDUCE;
      for (int r = 0; r < P; r++) k->push_off[r] = (uint64_t)r * B, k->push_len[r] = B;
      k->own_src = (uint64_t)me * B, k->own_dst = 0, k->own_len = B;
      k->max_len = B;
      break;
    case MELD_COLL_ALL_REDUCE:
      k->action = COLL_REDUCE;
      if (p->ar_algo == MELD_AR_TWO_SHOT) {
        k->part = (uint64_t)p->part_elems * es;
        k->total = B;
        for (int r = 0; r < P; r++) {
          uint64_t start = (uint64_t)r * k->part;
          k->push_off[r] = start;
          k->push_len[r] = start >= B ? 0 : (B - start < k->part ? B - start : k->part);
        }
        k->own_src = k->own_dst = k->push_off[me];
        k->own_len = k->push_len[me];
        k->max_len = k->part;
      } else {
        for (int r = 0; r < P; r++) k->push_off[r] = 0, k->push_len[r] = B;
        k->own_src = k->own_dst = 0, k->own_len = B;
        k->max_len = B;
      }
      break;
    case MELD_COLL_ALL_TO_ALL:
    default:
      k->action = COLL_COPY;
      for (int r = 0; r < P; r++) {
        k->push_off[r] = a->send_offsets[r] * es, k->push_len[r] = a->send_counts[r] * es;
        k->recv_off[r] = a->recv_offsets[r] * es, k->recv_len[r] = a->recv_counts[r] * es;
        k->max_len = u64_max(k->max_len, u64_max(k->push_len[r], k->recv_len[r]));
      }
      k->own_src = k->push_off[me], k->own_dst = k->recv_off[me], k->own_len = k->push_len[me];
      break;
  }
  if (P == 1) k->max_len = u64_max(k->max_len, k->own_len);
  if (P > 1) { /* bit 0: equal incoming streams (copies), bit 1: equal outgoing ones */
    const int n = (me + 1) % P;
    int in = k->action == COLL_COPY && k->recv_len[n] > 0, out = k->push_len[n] > 0;
    uint64_t send_end = k->own_src + k->own_len, recv_end = k->own_dst + k->own_len;
    for (int r = 0; r < P; r++) {
      if (r != me) in &= k->recv_len[r] == k->recv_len[n], out &= k->push_len[r] == k->push_len[n];
      send_end = u64_max(send_end, k->push_off[r] + k->push_len[r]);
      recv_end = u64_max(recv_end, k->recv_off[r] + k->recv_len[r]);
    }
    /* A sum in place (send and recv overlap: all-reduce with send == recv, or the ops' own
     * calls on the workspace) must send unit u before its own thread stores the sum of unit
     * u: the per-stream send, where thread g sends units g, g+G, ... of every stream and sums
     * the same units. (The flat send's thread-to-unit map differs; test_inproc's unfused
     * GEMM+AR at 3 ranks caught it.) */
    if (k->action == COLL_REDUCE && (uintptr_t)k->send < (uintptr_t)k->recv + recv_end &&
        (uintptr_t)k->recv < (uintptr_t)k->send + send_end)
      out = 0;
    k->ll_flat = in | out << 1;
  }
  /* The argument hash: what every rank must agree on (op, dtype, geometry; not this rank's
   * all-to-allv splits, which legitimately differ). */
  uint64_t h = meld_hash_init();
  h = meld_hash_u64(h, k->op_id);
  h = meld_hash_u64(h, (uint64_t)a->dtype);
  h = meld_hash_u64(h, a->op == MELD_COLL_ALL_TO_ALL ? (a->vector ? ~0ull : a->send_counts[0]) : a->count);
  h = meld_hash_u64(h, (uint64_t)p->ctas);
  h = meld_hash_u64(h, (uint64_t)p->threads);
  h = meld_hash_u64(h, p->chunk_bytes);
  h = meld_hash_u64(h, (uint64_t)p->slots);
  h = meld_hash_u64(h, (uint64_t)p->stages);
  h = meld_hash_u64(h, p->part_elems);
  h = meld_hash_u64(h, (uint64_t)p->proto);
  h = meld_hash_u64(h, (uint64_t)p->cons_warps);
  h = meld_hash_u64(h, (uint64_t)p->unroll);
  h = meld_hash_u64(h, (uint64_t)p->bulk);
  k->arg_hash = meld_hash_fold(h);
}

/* ---- ZC: which calls may take it, and its kernel arguments ----------------------------------- */

/* Where this rank's buffers of a ZC call are, when the call may take ZC (also a CE call's
 * send: coll_ce_view). */
typedef struct {
  const meld_symbuf_t *send_buf, *recv_buf; /* the symmetric buffers peers touch, or NULL */
  size_t send_off, recv_off;
  int inplace; /* all_gather: send == recv + me * B */
  int oneshot; /* all_reduce: send symmetric, recv not */
} coll_zc_view_t;

/* 1 if the opt-in variable `name` is exactly "1" (the collectives' on/off switches below). */
static int coll_env_on(const char *name) {
  const char *v = getenv(name);
  return v && v[0] == '1' && v[1] == 0;
}

/* An on/off variable that defaults to on: unset = `def`, 0 or 1 as set; anything else is an
 * error (meld_env_int64's message names the variable). */
static meld_result_t coll_env_flag(const char *name, int def, int *on) {
  int64_t v = def;
  MELD_CHECK(meld_env_int64(name, 0, 1, &v));
  *on = (int)v;
  return MELD_OK;
}

/* MELD_COLL_PDL: unset or 1 = LL and ZC kernels are launched with programmatic stream
 * serialization (each starts with griddepcontrol.wait, then triggers its own dependents, so
 * back-to-back calls overlap their launches); 0 = ordinary launches. Default since session 21:
 * -0.3 us a call in CUDA graphs (LL loopback, one H200, sessions 20-21; tests pass with and
 * without it at one rank and at 2 ranks sharing the GPU). Correctness does not depend on it:
 * the kernel waits for the previous grid on the device before touching any buffer. */
/* Ranks as threads sharing a GPU (struct meld_comm's gpu_share): PDL only where every rank's
 * current and next grid fit on the GPU together, a CTA an SM at most (2 x ctas <= this rank's
 * share of the SMs), so an early-launched next grid cannot hold an SM a peer's current grid
 * needs (session 25: LL timeouts at 4 ranks x 32 CTAs and 8 x 16 with PDL; at 2 ranks PDL is
 * 0.65 us a call, which the in-process figures of sessions 20-24 include). */
static int coll_pdl_fits(const struct meld_comm *comm, int ctas) {
  return comm->gpu_share <= 1 || 2 * ctas <= comm->sm_count;
}
static meld_result_t coll_pdl_env(const struct meld_comm *comm, int ctas, int *on) {
  MELD_CHECK(coll_env_flag("MELD_COLL_PDL", 1, on));
  *on = *on && coll_pdl_fits(comm, ctas);
  return MELD_OK;
}

/* MELD_COLL_LOOPBACK=1 (one rank only; a timing and test mode): all-gather, reduce-scatter and
 * all-reduce run the LL kernel as rank 0 of 2 whose virtual peer is this rank itself: its lines
 * go to its own pad and are polled back, so the LL kernel's whole path but NVLink runs on one
 * GPU. Buffers must be sized for 2 ranks (all-gather recv and reduce-scatter send: 2 blocks);
 * the results are those of 2 ranks with equal inputs (all-gather [send; send], all-reduce
 * 2 x send, reduce-scatter block 0 + block 1: what it pushed to its virtual peer). */
static int coll_loop_env(void) { return coll_env_on("MELD_COLL_LOOPBACK"); }

/* MELD_COLL_LL_LEAN (unset or 1 = on, 0 = off, 2 = the any-P instantiation at P = 2 too, for
 * comparison): the LL kernel's lean instantiations where they apply (every offset, length and
 * buffer a multiple of 8 bytes, streams < 2^31 bytes): coll_ll<2> at two ranks, coll_ll<-1>
 * at any other P (session 25); else the generic one. Returns the SP to launch (0 = generic).
 * Lean at P = 2 is the default since session 21: 0.5-0.7 us a call less in CUDA graphs (LL
 * loopback, one H200: all-reduce 4 KB 2.92 vs 3.60 us), the same results bit for bit (test_coll
 * at one rank and at 2 ranks sharing the GPU). */
static int coll_ll_lean(const coll_kargs_t *k, int on) {
  if (!on || k->nranks < 2) return 0;
  uint64_t bits = (uint64_t)(uintptr_t)k->send | (uint64_t)(uintptr_t)k->recv | k->own_src | k->own_dst | k->own_len;
  for (int r = 0; r < k->nranks; r++) bits |= k->push_off[r] | k->push_len[r] | k->recv_off[r] | k->recv_len[r];
  if ((bits & 7u) != 0 || k->max_len >= ((uint64_t)1 << 31) || k->own_len >= ((uint64_t)1 << 31)) return 0;
  return k->nranks == 2 && on == 1 ? 2 : -1;
}

/* MELD_COLL_ZC: unset or 1 = the ZC engine on symmetric buffers, 0 = never. */
static meld_result_t coll_zc_env(int *on) {
  int64_t v = 1;
  MELD_CHECK(meld_env_int64("MELD_COLL_ZC", 0, 1, &v));
  *on = (int)v;
  return MELD_OK;
}
extern "C" int meld_coll_zc_enabled(void) {
  int on = 0;
  return coll_zc_env(&on) == MELD_OK && on;
}

/* The call's ZC mode (meld_coll_zc_mode: 0 no, 1 ZC, 2 one-shot all-reduce) and where its
 * buffers are: the rules are coll_plan.c's (unit-tested), the lookups of the ranges in the
 * comm's symmetric buffers (meld_mem_alloc's, or the workspace for ops) happen here, and every
 * rank must have mapped them. The result agrees on every rank for any correct use: it depends
 * on sizes (equal everywhere) and on where the shared buffers are (their allocation and offset
 * go into the argument hash, so ranks that disagree fail the entry handshake rather than
 * race). */
static int coll_zc_view(const struct meld_comm *comm, const meld_coll_args_t *a, coll_zc_view_t *v) {
  memset(v, 0, sizeof *v);
  meld_coll_zc_req_t req;
  if (!meld_coll_zc_request(a, comm->nranks, comm->rank, comm->nnodes, &req)) return 0;
  v->inplace = req.inplace;
  if (req.need_send) v->send_buf = meld_symbuf_find(comm, a->send, req.send_bytes, &v->send_off);
  if (req.need_recv) v->recv_buf = meld_symbuf_find(comm, a->recv, req.recv_bytes, &v->recv_off);
  const int mode = meld_coll_zc_mode(a, &req, v->send_buf != NULL, v->recv_buf != NULL);
  v->oneshot = mode == 2;
  for (int q = 0; q < comm->nranks; q++)
    if ((v->send_buf && !v->send_buf->peer[q]) || (v->recv_buf && !v->recv_buf->peer[q])) return 0;
  return mode;
}

static void coll_zc_fill(const struct meld_comm *comm, const meld_coll_args_t *a, const meld_coll_plan_t *p,
                         const coll_zc_view_t *v, coll_zc_args_t *k) {
  memset(k, 0, sizeof *k);
  const int P = comm->nranks;
  const uint64_t es = p->elem_bytes;
  k->rank = comm->rank;
  k->nranks = P;
  k->ctas = p->ctas;
  k->op = (int32_t)a->op;
  k->dtype = (int32_t)a->dtype;
  k->inplace = v->inplace;
  k->oneshot = v->oneshot;
  k->unroll = p->unroll;
  k->op_id = g_op_ids[a->op];
  k->B = a->op == MELD_COLL_ALL_TO_ALL ? a->send_counts[0] * es : a->count * es;
  k->part = (uint64_t)p->part_elems * es;
  k->send = (const uint8_t *)a->send;
  k->recv = (uint8_t *)a->recv;
  for (int q = 0; q < P; q++) {
    k->peer_send[q] = v->send_buf ? (const uint8_t *)v->send_buf->peer[q] + v->send_off : NULL;
    k->peer_recv[q] = v->recv_buf ? (uint8_t *)v->recv_buf->peer[q] + v->recv_off : NULL;
  }
  uint64_t h = meld_hash_init();
  h = meld_hash_u64(h, k->op_id);
  h = meld_hash_u64(h, (uint64_t)a->dtype);
  h = meld_hash_u64(h, k->B);
  h = meld_hash_u64(h, (uint64_t)p->ctas);
  h = meld_hash_u64(h, (uint64_t)p->threads);
  h = meld_hash_u64(h, (uint64_t)p->proto);
  h = meld_hash_u64(h, (uint64_t)p->unroll);
  h = meld_hash_u64(h, v->send_buf ? v->send_buf->seq : 0);
  h = meld_hash_u64(h, v->send_off);
  h = meld_hash_u64(h, v->recv_buf ? v->recv_buf->seq : 0);
  h = meld_hash_u64(h, v->recv_off);
  k->arg_hash = meld_hash_fold(h);
}

/* The plan, at MELD_DEBUG=TRACE. */
static void coll_trace_plan(const char *fn, const meld_coll_plan_t *plan) {
  if (meld_log_level() < MELD_LOG_TRACE) return;
  char buf[512];
  meld_coll_plan_format(plan, buf, sizeof buf);
  MELD_TRACE(MELD_SUB_OPS, "%s: %s", fn, buf);
}

/* A plain (non-cooperative) launch of plan.ctas x plan.threads; pdl: with programmatic stream
 * serialization (the kernel must start with griddepcontrol.wait). */
static meld_result_t coll_launch_plain(const void *kern, const meld_coll_plan_t *plan, void **kargs,
                                       cudaStream_t stream, int pdl) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)plan->ctas, 1, 1);
  cfg.blockDim = dim3((unsigned)plan->threads, 1, 1);
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  if (pdl) {
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
  }
  const cudaError_t e = cudaLaunchKernelExC(&cfg, kern, kargs);
  if (e == cudaSuccess) return MELD_OK;
  return meld_error(MELD_ERR_CUDA, "launch of %d CTAs x %d threads failed: %s", plan->ctas, plan->threads,
                    cudaGetErrorString(e));
}

/* Loads the CE kernels now (comm init): with lazy module loading (CUDA's default) a kernel's
 * first launch loads it, which may wait for the device; a call must not do that while a peer's
 * kernel on the same GPU spins waiting for this rank's entry (ranks as threads). */
extern "C" meld_result_t meld_coll_ce_preload(void) {
  cudaFuncAttributes fa;
  cudaError_t e = cudaFuncGetAttributes(&fa, (const void *)coll_ce_enter_kernel);
  if (e == cudaSuccess) e = cudaFuncGetAttributes(&fa, (const void *)coll_ce_exit_kernel);
  if (e != cudaSuccess) return meld_error(MELD_ERR_CUDA, "loading the CE engine's kernels: %s", cudaGetErrorString(e));
  return MELD_OK;
}

/* ---- CE: which calls may take it, and the call ------------------------------------------------ */

/* MELD_COLL_CE: unset or 0 = the CE engine only where a plan hint asks for it; 1 = also chosen
 * by size (MELD_COLL_CE_MIN_BYTES per peer and up; coll_plan.h). */
static meld_result_t coll_ce_env(int *on) { return coll_env_flag("MELD_COLL_CE", 0, on); }

/* The call's CE eligibility (0 no, 1 yes) and where its send lies: the rules are coll_plan.c's
 * (meld_coll_ce_request), the lookup of the send in the comm's symmetric buffers is here. Agrees
 * on every rank for any correct use, as coll_zc_view (the send's allocation and offset go into
 * the argument hash). */
static int coll_ce_view(const struct meld_comm *comm, const meld_coll_args_t *a, coll_zc_view_t *v) {
  memset(v, 0, sizeof *v);
  meld_coll_zc_req_t req;
  if (comm->ce_nstreams < 1 || !meld_coll_ce_request(a, comm->nranks, comm->rank, comm->nnodes, &req)) return 0;
  size_t off = 0;
  const meld_symbuf_t *b = meld_symbuf_find(comm, a->send, req.send_bytes, &off);
  if (!b) return 0;
  /* An in-place all-gather's send is this rank's block of recv: at offset rank * B of the
   * recv, whose offset is the one every rank shares (rank q's block is at q * B of it). */
  const uint64_t own = (uint64_t)comm->rank * req.send_bytes;
  if (req.inplace) {
    if (off < own) return 0;
    off -= own; /* the recv's offset; coll_ce_call adds q * B for rank q's block */
  }
  for (int q = 0; q < comm->nranks; q++)
    if (!b->peer[q]) return 0;
  v->send_buf = b;
  v->send_off = off;
  v->inplace = req.inplace;
  return 1;
}

/* One CE call (see the kernels): enter, the fork, every peer's block pulled on the side
 * stream and the own block copied on `stream`, the join, exit. Once enter is launched, exit is
 * launched whatever fails in between (it ends the call: the epoch counter advances). */
static meld_result_t coll_ce_call(struct meld_comm *comm, const char *fn, const meld_coll_args_t *a,
                                  const meld_coll_plan_t *p, const coll_zc_view_t *v, cudaStream_t stream) {
  const meld_symbuf_t *sbuf = v->send_buf;
  const size_t soff = v->send_off;
  const int inplace = v->inplace;
  const int P = comm->nranks, me = comm->rank;
  const int a2a = a->op == MELD_COLL_ALL_TO_ALL;
  const uint64_t B = (uint64_t)(a2a ? a->send_counts[0] : a->count) * p->elem_bytes;
  /* Where rank q's block lies in its copy of the buffer: all-to-all q's send + me * B; an
   * all-gather's send at the offset every rank shares, or in place at q * B of the recv (soff is
   * then the recv's offset: coll_ce_view). */
  coll_ce_args_t k;
  k.rank = me;
  k.nranks = P;
  k.op_id = g_op_ids[a->op];
  uint64_t h = meld_hash_init();
  h = meld_hash_u64(h, k.op_id);
  h = meld_hash_u64(h, (uint64_t)a->dtype);
  h = meld_hash_u64(h, B);
  h = meld_hash_u64(h, (uint64_t)p->proto);
  h = meld_hash_u64(h, sbuf->seq);
  h = meld_hash_u64(h, soff);
  h = meld_hash_u64(h, (uint64_t)inplace);
  k.arg_hash = meld_hash_fold(h);
  meld_proto_dev_t proto = meld_proto_dev(comm);
  void *kargs[] = {&proto, &k};
  meld_result_t r = coll_launch_plain((const void *)coll_ce_enter_kernel, p, kargs, stream, 0);
  if (r != MELD_OK) {
    meld_error_prefix("%s (CE engine, entry)", fn);
    return r;
  }
  /* The copies: job 0 = peer 1 of the rotation (rank me + 1), ..., job P - 2 = peer P - 1,
   * job P - 1 = the own block (none for an in-place all-gather). Job 0 runs on the caller's
   * stream; job i > 0 on side stream (i - 1) % n, forked from the caller's stream after the
   * entry kernel and joined back before the exit kernel: copies from different peers may run on
   * different copy engines at once, and a call with one job (2 ranks, in place) enqueues three
   * operations, no fork. */
  const uint8_t *own_src = (const uint8_t *)a->send + (a2a ? (uint64_t)me * B : 0);
  uint8_t *own_dst = (uint8_t *)a->recv + (uint64_t)me * B;
  const int jobs = P - 1 + (own_src != own_dst ? 1 : 0);
  const int n = jobs - 1 < comm->ce_nstreams ? jobs - 1 : comm->ce_nstreams; /* side streams used */
  const char *step = "fork";
  cudaError_t e = cudaSuccess;
  if (n > 0) e = cudaEventRecord(comm->ce_fork, stream);
  for (int i = 0; i < n && e == cudaSuccess; i++) e = cudaStreamWaitEvent(comm->ce_stream[i], comm->ce_fork, 0);
  for (int i = 0; i < jobs && e == cudaSuccess; i++) {
    cudaStream_t s = i == 0 ? stream : comm->ce_stream[(i - 1) % n];
    if (i < P - 1) {
      const int q = (me + 1 + i) % P; /* rotated: the ranks start on different peers */
      const uint8_t *src = (const uint8_t *)sbuf->peer[q] + soff + (a2a ? (uint64_t)me * B : inplace ? (uint64_t)q * B : 0);
      step = "copy of a peer's block";
      e = cudaMemcpyAsync((uint8_t *)a->recv + (uint64_t)q * B, src, B, cudaMemcpyDefault, s);
    } else {
      step = "copy of the own block";
      e = cudaMemcpyAsync(own_dst, own_src, B, cudaMemcpyDefault, s);
    }
  }
  if (e == cudaSuccess) step = "join";
  for (int i = 0; i < n && e == cudaSuccess; i++) {
    e = cudaEventRecord(comm->ce_join[i], comm->ce_stream[i]);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(stream, comm->ce_join[i], 0);
  }
  r = coll_launch_plain((const void *)coll_ce_exit_kernel, p, kargs, stream, 0);
  if (e != cudaSuccess)
    return meld_error(MELD_ERR_CUDA, "%s (CE engine): the %s failed: %s", fn, step, cudaGetErrorString(e));
  if (r != MELD_OK) meld_error_prefix("%s (CE engine, exit)", fn);
  return r;
}

extern "C" meld_result_t meld_coll_run(struct meld_comm *comm, const char *fn, const meld_coll_args_t *args,
                                       const meld_coll_plan_hint_t *hint, cudaStream_t stream,
                                       meld_coll_plan_t *plan_out) {
  meld_coll_plan_t plan;
  /* The ZC engine's view of the buffers; the plan sees only "eligible" (args->zc). */
  int zc_on = 0;
  MELD_CHECK(coll_zc_env(&zc_on));
  coll_zc_view_t zv;
  const int zc = zc_on ? coll_zc_view(comm, args, &zv) : 0;
  /* The CE engine's view: eligible (1), and chosen by size too with MELD_COLL_CE=1 (2). */
  int ce_on = 0;
  MELD_CHECK(coll_ce_env(&ce_on));
  coll_zc_view_t cv; /* send_buf, send_off, inplace */
  const int ce = coll_ce_view(comm, args, &cv) ? (ce_on ? 2 : 1) : 0;
  const meld_coll_args_t *pa = args;
  meld_coll_args_t *za = NULL;
  if (zc != args->zc || ce != args->ce) { /* the plan reads args->zc / ce: a copy with them set (2.3 KB) */
    za = (meld_coll_args_t *)malloc(sizeof *za);
    if (!za) return meld_error(MELD_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    *za = *args;
    za->zc = zc;
    za->ce = ce;
    pa = za;
  }
  const int loop = comm->nranks == 1 && coll_loop_env();
  meld_coll_plan_hint_t lh;
  if (loop) { /* the LL kernel as rank 0 of 2 (coll_loop_env) */
    if (args->op == MELD_COLL_ALL_TO_ALL) {
      free(za);
      return meld_error(MELD_ERR_UNSUPPORTED, "%s: MELD_COLL_LOOPBACK runs all-gather, reduce-scatter and all-reduce only", fn);
    }
    if (hint) lh = *hint;
    else memset(&lh, 0, sizeof lh);
    lh.proto = MELD_PROTO_LL;
    hint = &lh;
  }
  meld_result_t pr = meld_coll_plan_make(pa, loop ? 2 : comm->nranks, meld_comm_node_sm_count(comm),
                                         comm->workspace.bytes, MELD_PAD_CREDIT_SLOTS, hint, &plan);
  free(za);
  MELD_CHECK(pr);
  if (loop && plan.proto != MELD_PROTO_LL)
    return meld_error(MELD_ERR_UNSUPPORTED, "%s: MELD_COLL_LOOPBACK: the LL kernel cannot take this call (%s planned)", fn,
                      meld_coll_proto_name(plan.proto));
  if (plan_out) *plan_out = plan;
  /* A buffer inside the comm's workspace (an op's own, e.g. the decode GEMM+AR's partial)
   * must not travel by the staged engines: their slots would overwrite it. */
  if ((plan.proto == MELD_PROTO_ROUNDS || plan.proto == MELD_PROTO_RING) &&
      ((zc && (zv.send_buf == &comm->workspace || zv.recv_buf == &comm->workspace)) ||
       (!zc && (meld_symbuf_find(comm, args->send, 0, NULL) == &comm->workspace ||
                meld_symbuf_find(comm, args->recv, 0, NULL) == &comm->workspace))))
    return meld_error(MELD_ERR_INTERNAL, "%s: a buffer inside the comm's workspace cannot take the staged engines (%s planned%s)",
                      fn, meld_coll_proto_name(plan.proto), zc_on ? "" : "; MELD_COLL_ZC=0");
  if (plan.proto == MELD_PROTO_CE && !loop) {
    coll_trace_plan(fn, &plan);
    return coll_ce_call(comm, fn, args, &plan, &cv, stream);
  }
  if (plan.proto == MELD_PROTO_ZC && !loop) {
    coll_zc_args_t zk; /* ~1.2 KB of kernel parameters */
    coll_zc_fill(comm, args, &plan, &zv, &zk);
    int pdl_on = 0;
    MELD_CHECK(coll_pdl_env(comm, plan.ctas, &pdl_on));
    zk.pdl = pdl_on;
    coll_trace_plan(fn, &plan);
    meld_proto_dev_t proto = meld_proto_dev(comm);
    void *kargs[] = {&proto, &zk};
    /* Plain launch: a ZC CTA waits only for the peers' CTAs of its own ticket (see the kernel). */
    meld_result_t r =
        coll_launch_plain(coll_zc_kernels[zk.unroll < 8][args->op], &plan, kargs, stream,
                          zk.pdl || (hint && hint->pdl && coll_pdl_fits(comm, plan.ctas)));
    if (r != MELD_OK) meld_error_prefix("%s", fn);
    return r;
  }
  coll_kargs_t k; /* ~3 KB of kernel parameters */
  coll_kargs_fill(comm, args, &plan, loop, &k);
  int pdl_on = 0, lean_on = 0;
  MELD_CHECK(coll_pdl_env(comm, plan.ctas, &pdl_on));
  {
    int64_t v = 1;
    MELD_CHECK(meld_env_int64("MELD_COLL_LL_LEAN", 0, 2, &v));
    lean_on = (int)v;
  }
  k.pdl = plan.proto == MELD_PROTO_LL && pdl_on;
  { /* MELD_COLL_LL_FLAT (unset or 1; 0 = per-stream loops in the any-P kernel: comparisons) */
    int flat_on = 1;
    MELD_CHECK(coll_env_flag("MELD_COLL_LL_FLAT", 1, &flat_on));
    if (!flat_on) k.ll_flat = 0;
  }
  /* The rounds of the longest stream must fit the stamps' sequence bits. */
  uint64_t per_round = (uint64_t)plan.ctas * plan.chunk_bytes;
  if ((k.max_len + per_round - 1) / per_round / (uint64_t)plan.slots >= MELD_STAMP_SEQ_MAX)
    return meld_error(MELD_ERR_INVALID_ARG,
                      "%s: %llu bytes per peer need more than %u rounds of %d CTAs x %zu-byte "
                      "chunks: raise MELD_CHUNK_BYTES",
                      fn, (unsigned long long)k.max_len, MELD_STAMP_SEQ_MAX, plan.ctas, plan.chunk_bytes);
  coll_trace_plan(fn, &plan);
  meld_proto_dev_t proto = meld_proto_dev(comm);
  void *kargs[] = {&proto, &k};
  const bool ll_small = k.max_len <= COLL_LL_U2_BYTES && k.own_len <= COLL_LL_U2_BYTES;
  /* The lean LL kernels (coll_ll_lean): two ranks [action][small]; any P, copies [small]
   * with the flat loops chosen at run time (FL 2), sums [flat][small] holding only the loops
   * a call needs (FL 1: the flat send, ll_flat bit 1; FL 0: per-stream). Measured (session 25
   * call 5, 4 / 8 ranks as threads): sums with FL 1 -0.1..-0.6 us a call against the run-time
   * choice; copies with FL 1 +0.2..+0.4 us at 64 KB, even at 4 KB: so copies keep FL 2. */
  static const void *const ll_two[2][2] = {
      {(const void *)coll_ll_kernel<2, COLL_COPY>, (const void *)coll_ll_kernel<2, COLL_COPY, COLL_LL_U_SMALL>},
      {(const void *)coll_ll_kernel<2, COLL_REDUCE>, (const void *)coll_ll_kernel<2, COLL_REDUCE, COLL_LL_U_SMALL>}};
  static const void *const ll_any_copy[2] = {(const void *)coll_ll_kernel<-1, COLL_COPY, COLL_LL_U, 2>,
                                             (const void *)coll_ll_kernel<-1, COLL_COPY, COLL_LL_U_SMALL, 2>};
  static const void *const ll_any_sum[2][2] = {
      {(const void *)coll_ll_kernel<-1, COLL_REDUCE>, (const void *)coll_ll_kernel<-1, COLL_REDUCE, COLL_LL_U_SMALL>},
      {(const void *)coll_ll_kernel<-1, COLL_REDUCE, COLL_LL_U, 1>,
       (const void *)coll_ll_kernel<-1, COLL_REDUCE, COLL_LL_U_SMALL, 1>}};
  const int lean_sp = plan.proto == MELD_PROTO_LL ? coll_ll_lean(&k, lean_on) : 0;
  const int act = k.action != COLL_COPY;
  const void *kern = plan.proto == MELD_PROTO_LL ? (lean_sp == 0  ? (const void *)coll_ll_kernel<0>
                                                   : lean_sp > 0 ? ll_two[act][ll_small]
                                                   : act         ? ll_any_sum[(k.ll_flat & 2) != 0][ll_small]
                                                                 : ll_any_copy[ll_small])
                     : plan.proto == MELD_PROTO_RING ? (const void *)coll_ring_kernel
                                                     : (const void *)coll_kernel;
  meld_result_t r;
  if (plan.proto == MELD_PROTO_LL) {
    /* LL needs no co-residency, so a plain launch (cooperative costs ~0.4 us per call in
     * graphs, measured): the CTA with ticket t (start order) only waits for the lines of the
     * peers' CTAs with ticket t; those CTAs start once their GPU has room, because every
     * CTA started before them there (tickets < t) waits only for peers' tickets < t, which
     * have started (this rank's ticket t started after them), so they finish and free their
     * SMs. No cycle, whatever the grid size or other kernels that do not wait for this one. */
    r = coll_launch_plain(kern, &plan, kargs, stream, k.pdl);
  } else {
    size_t smem = 0;
    if (plan.proto == MELD_PROTO_RING && plan.bulk) {
      /* > 48 KB: the kernel must opt in (per device, cheap to repeat) */
      smem = COLL_BULK_SMEM + (plan.bulk >= 2 ? COLL_BULK_DSMEM : 0);
      cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
      if (e != cudaSuccess)
        return meld_error(MELD_ERR_CUDA, "%s: %zu bytes of shared memory for the bulk ring: %s", fn, smem,
                          cudaGetErrorString(e));
    }
    r = meld_launch_coop(kern, plan.ctas, plan.threads, smem, kargs, stream);
  }
  if (r != MELD_OK) meld_error_prefix("%s", fn);
  return r;
}

/* The common entry: checks, then plans and launches (or nothing, for an empty call). */
static meld_result_t coll_entry(meld_comm_t comm, const char *fn, meld_coll_args_t *a, cudaStream_t stream) {
  if (!comm) return meld_error(MELD_ERR_INVALID_ARG, "%s: comm is NULL", fn);
  MELD_CHECK(meld_coll_validate(fn, comm->nranks, a));
  if (a->op == MELD_COLL_ALL_TO_ALL && a->send_counts[comm->rank] != a->recv_counts[comm->rank])
    return meld_error(MELD_ERR_INVALID_ARG,
                      "%s: send_counts[%d] = %zu differs from recv_counts[%d] = %zu (this rank's "
                      "block to itself)",
                      fn, comm->rank, a->send_counts[comm->rank], comm->rank, a->recv_counts[comm->rank]);
  if (meld_coll_is_empty(a)) return MELD_OK;
  /* Several nodes (decided identically on every rank: nnodes is global): the inter-node path. */
  if (comm->nnodes > 1) return meld_coll_net_run(comm, fn, a, stream);
  /* A comm whose device protocol failed (timeout, abort: sticky) reports it here instead of
   * launching: a read of the host-mapped error record (meld_comm_check does the full probe). */
  MELD_CHECK(meld_proto_sticky_error(comm, fn));
  if (comm->nranks == 1 && !coll_loop_env()) { /* every op is a copy of the one block: one stream-ordered copy, no kernel */
    const size_t es = meld_coll_dtype_bytes(a->dtype);
    const bool a2a = a->op == MELD_COLL_ALL_TO_ALL;
    const uint8_t *src = (const uint8_t *)a->send + (a2a ? a->send_offsets[0] * es : 0);
    uint8_t *dst = (uint8_t *)a->recv + (a2a ? a->recv_offsets[0] * es : 0);
    const size_t bytes = (a2a ? a->send_counts[0] : a->count) * es;
    /* (session 20, one H200: the kernels' fixed path cost 6.2-8.7 us a call in CUDA graphs at
     * one rank, NCCL's copy ~1 us; a partial overlap, if validation let one through, keeps the
     * kernel, which copies in its own order) */
    if (src == dst || bytes == 0) return MELD_OK;
    if (src + bytes <= dst || dst + bytes <= src) {
      MELD_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
      return MELD_OK;
    }
  }
  return meld_coll_run(comm, fn, a, NULL, stream, NULL);
}

static void coll_args_init(meld_coll_args_t *a, meld_coll_op_t op, const void *send, void *recv,
                           size_t count, meld_dtype_t dtype) {
  /* Only the header: the per-rank arrays (2.3 KB) are filled where used. */
  a->op = op;
  a->dtype = dtype;
  a->send = send;
  a->recv = recv;
  a->count = count;
  a->vector = 0;
  a->zc = 0;
  a->ce = 0;
}

extern "C" meld_result_t meld_all_gather(meld_comm_t comm, const void *send, void *recv, size_t count,
                                         meld_dtype_t dtype, cudaStream_t stream) {
  meld_error_clear();
  meld_coll_args_t a;
  coll_args_init(&a, MELD_COLL_ALL_GATHER, send, recv, count, dtype);
  return coll_entry(comm, "meld_all_gather", &a, stream);
}

extern "C" meld_result_t meld_reduce_scatter(meld_comm_t comm, const void *send, void *recv, size_t count,
                                             meld_dtype_t dtype, cudaStream_t stream) {
  meld_error_clear();
  meld_coll_args_t a;
  coll_args_init(&a, MELD_COLL_REDUCE_SCATTER, send, recv, count, dtype);
  return coll_entry(comm, "meld_reduce_scatter", &a, stream);
}

extern "C" meld_result_t meld_all_reduce(meld_comm_t comm, const void *send, void *recv, size_t count,
                                         meld_dtype_t dtype, cudaStream_t stream) {
  meld_error_clear();
  meld_coll_args_t a;
  coll_args_init(&a, MELD_COLL_ALL_REDUCE, send, recv, count, dtype);
  return coll_entry(comm, "meld_all_reduce", &a, stream);
}

extern "C" meld_result_t meld_all_to_all(meld_comm_t comm, const void *send, void *recv,
                                         size_t count_per_peer, meld_dtype_t dtype, cudaStream_t stream) {
  meld_error_clear();
  const char *fn = "meld_all_to_all";
  if (!comm) return meld_error(MELD_ERR_INVALID_ARG, "%s: comm is NULL", fn);
  if (comm->nranks < 1 || comm->nranks > MELD_COLL_MAX_RANKS)
    return meld_error(MELD_ERR_UNSUPPORTED, "%s: %d ranks; the collectives handle 1..%d ranks", fn,
                      comm->nranks, MELD_COLL_MAX_RANKS);
  meld_coll_args_t a;
  coll_args_init(&a, MELD_COLL_ALL_TO_ALL, send, recv, 0, dtype);
  /* Offsets q * count in elements; an overflowing product is caught by validation. */
  size_t off_max = comm->nranks > 1 && count_per_peer > SIZE_MAX / (size_t)comm->nranks ? SIZE_MAX : 0;
  for (int q = 0; q < comm->nranks; q++) {
    a.send_counts[q] = a.recv_counts[q] = count_per_peer;
    a.send_offsets[q] = a.recv_offsets[q] = off_max ? off_max : (size_t)q * count_per_peer;
  }
  return coll_entry(comm, fn, &a, stream);
}

extern "C" meld_result_t meld_all_to_allv(meld_comm_t comm, const void *send, const size_t *send_counts,
                                          const size_t *send_offsets, void *recv, const size_t *recv_counts,
                                          const size_t *recv_offsets, meld_dtype_t dtype,
                                          cudaStream_t stream) {
  meld_error_clear();
  const char *fn = "meld_all_to_allv";
  if (!comm) return meld_error(MELD_ERR_INVALID_ARG, "%s: comm is NULL", fn);
  if (!send_counts || !send_offsets || !recv_counts || !recv_offsets)
    return meld_error(MELD_ERR_INVALID_ARG, "%s: a counts or offsets array is NULL", fn);
  if (comm->nranks < 1 || comm->nranks > MELD_COLL_MAX_RANKS)
    return meld_error(MELD_ERR_UNSUPPORTED, "%s: %d ranks; the collectives handle 1..%d ranks", fn,
                      comm->nranks, MELD_COLL_MAX_RANKS);
  meld_coll_args_t a;
  coll_args_init(&a, MELD_COLL_ALL_TO_ALL, send, recv, 0, dtype);
  a.vector = 1;
  for (int q = 0; q < comm->nranks; q++) {
    a.send_counts[q] = send_counts[q], a.send_offsets[q] = send_offsets[q];
    a.recv_counts[q] = recv_counts[q], a.recv_offsets[q] = recv_offsets[q];
  }
  return coll_entry(comm, fn, &a, stream);
}
