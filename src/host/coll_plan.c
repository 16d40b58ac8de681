/* coll_plan.c — validation and planning of the collectives (pure host C, unit-tested). */
#include "coll_plan.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "error.h"

/* Heuristic constants (measured on 2 x H200, docs/perf-notes.md "Collectives").
 * LL: per-peer data up to PLAN_LL_MAX_BYTES; CTAs and threads by the bytes moved (below).
 * RING: warp-specialized CTAs of PLAN_RING_THREADS; at most PLAN_RING_MAX_CTAS (an SM pushes
 * ~40-46 GB/s to a peer: 8-16 CTAs saturate NVLink), >= PLAN_RING_CTA_BYTES per CTA, rings of
 * PLAN_RING_SLOTS slots, >= 4 chunks per CTA so that the ring pipelines.
 * ROUNDS (two-shot all-reduce): the first engine's constants. */
#define PLAN_LL_THREADS 512
#define PLAN_LL_SMALL_THREADS 256
#define PLAN_LL_SMALL_THREADS_BYTES ((size_t)32 << 10)
#define PLAN_LL_ONE_CTA_BYTES ((size_t)4 << 10)
#define PLAN_LL_BYTES_PER_CTA_SMALL ((size_t)512)
#define PLAN_LL_MID_BYTES ((size_t)512 << 10)
#define PLAN_LL_MID_CTAS 16
#define PLAN_LL_MAX_CTAS 32
#define PLAN_LL_MAX_BYTES ((size_t)1 << 20) /* run 1: LL 10.8 us vs ring 32.9 at 1 MB */
#define PLAN_RING_THREADS 640
#define PLAN_RING_MAX_CTAS 16
#define PLAN_RING_CTA_BYTES ((size_t)64 << 10)
#define PLAN_RING_SLOTS 4
#define PLAN_RING_MIN_CHUNK ((size_t)16 << 10)
#define PLAN_RING_MAX_CHUNK ((size_t)256 << 10)
#define PLAN_THREADS 512
#define PLAN_MAX_CTAS 32
/* From 32 MB moved per rank: 64 CTAs. s2 run 2 (2 x H200, busbw GB/s at 64 MB / 256 MB / 1 GB,
 * 32 -> 64 CTAs): AG 232 -> 251 / 273 -> 304 / 310 -> 336, RS 232 -> 251 / 264 -> 289 / 286 ->
 * 329, AR 269 -> 284 / 319 -> 331 / 311 -> 348, A2A 229 -> 249 / 266 -> 302 / 305 -> 332
 * (NCCL 213-329 in the same run). Each byte crosses an SM two or three times (push, drain, own
 * copy) and an SM copies ~40-45 GB/s, so the link needs more SMs than it has lanes. Smaller
 * calls keep 32 (64 not measured there). */
#define PLAN_MANY_CTAS 64
#define PLAN_MANY_CTAS_BYTES ((size_t)32 << 20)
#define PLAN_TARGET_CHUNK ((size_t)32 << 10) /* below this per CTA, use fewer CTAs         */
#define PLAN_MAX_CHUNK ((size_t)512 << 10)    /* above, more rounds (keeps slots in L2)    */
#define PLAN_SLOTS 2
/* 16-byte loads in flight per thread in the RING/ROUNDS data loops (coll_copy). */
#define PLAN_UNROLL 8
/* All-reduce: one-shot moves (P-1) x bytes per rank, two-shot 2 (P-1)/P x bytes but pays a
 * second hop. At P = 2 both move the same bytes, but two-shot reduces half of them: s2 run 1
 * (2 x H200, 32 CTAs, 1 MB chunks) measured two-shot 303 / 316 GB/s busbw at 256 MB / 1 GB vs
 * one-shot 293 / 294, equal (266) at 64 MB; so P = 2 goes two-shot above 128 MB, with 1 MB
 * chunks (256 KB chunks: 262 at 256 MB: each round pays two stages of handshakes). */
#define PLAN_ONESHOT_MAX_BYTES_P2 ((size_t)128 << 20)
#define PLAN_TWO_SHOT_MAX_CHUNK ((size_t)1 << 20)
/* ... and only where the workspace holds those chunks for 64 CTAs (2 stages x 64 x 2 slots x
 * 1 MB; MELD_WORKSPACE_BYTES >= 256 MB): with smaller chunks two-shot was measured below
 * one-shot (run 1: 262 vs 293 at 256 MB), so the default 64 MB workspace stays one-shot
 * (64 CTAs: 316 GB/s at 256 MB, run 2). */
#define PLAN_TWO_SHOT_WS_P2 ((size_t)2 * 64 * 2 * ((size_t)1 << 20))
#define PLAN_ONESHOT_MAX_BYTES_P3 ((size_t)1 << 20)
#define PLAN_ONESHOT_MAX_BYTES ((size_t)256 << 10)
/* ZC: CTAs of 512 threads, one per PLAN_ZC_CTA_BYTES moved through it, at most
 * PLAN_ZC_MAX_CTAS for copies (pushes) and PLAN_ZC_MAX_CTAS_SUM for sums (pulls). Runs 1-3
 * (2 x H200, session 4): a ZC CTA moves ~20-25 GB/s, so 1-4 MB calls want 16-32 CTAs
 * (all-reduce 4 MB: 31 us with 32, 38 with 16, 53 with 8); copies peak at 16 (all-gather
 * 1 GB: 340 GB/s with 16, 270-292 with 24-32), sums at 32 (reduce_scatter 1 GB: 330 with 32,
 * 290 with 16). All-reduce above PLAN_ZC_AR_MAX_BYTES keeps the staged engine (1 GB: 348
 * GB/s with ROUNDS' 64 CTAs, ZC 298 with 32; 64 MB: ZC 279 vs 272). */
#define PLAN_ZC_THREADS 512
#define PLAN_ZC_CTA_BYTES ((size_t)128 << 10)
#define PLAN_ZC_MAX_CTAS 16
#define PLAN_ZC_MAX_CTAS_SUM 32
#define PLAN_ZC_AR_MAX_BYTES ((size_t)128 << 20)
/* One-shot ZC all-reduce (send symmetric, recv not): every rank pulls (P-1) x the buffer, and
 * pulls are the slow direction, so only up to 16 MB (not measured above; a guess). */
#define PLAN_ZC_ONESHOT_MAX_BYTES ((size_t)16 << 20)

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }
static size_t ceil_div(size_t x, size_t a) { return (x + a - 1) / a; }

size_t meld_coll_dtype_bytes(meld_dtype_t dtype) {
  switch (dtype) {
    case MELD_BF16: return 2;
    case MELD_FP32: return 4;
  }
  return 0;
}

const char *meld_coll_dtype_name(meld_dtype_t dtype) {
  switch (dtype) {
    case MELD_BF16: return "bf16";
    case MELD_FP32: return "fp32";
  }
  return "?";
}

const char *meld_coll_op_name(meld_coll_op_t op) {
  switch (op) {
    case MELD_COLL_ALL_GATHER: return "all_gather";
    case MELD_COLL_REDUCE_SCATTER: return "reduce_scatter";
    case MELD_COLL_ALL_REDUCE: return "all_reduce";
    case MELD_COLL_ALL_TO_ALL: return "all_to_all";
    case MELD_COLL_NUM_OPS: break;
  }
  return "?";
}

const char *meld_coll_proto_name(meld_coll_proto_t proto) {
  switch (proto) {
    case MELD_PROTO_AUTO: return "auto";
    case MELD_PROTO_LL: return "ll";
    case MELD_PROTO_RING: return "ring";
    case MELD_PROTO_ROUNDS: return "rounds";
    case MELD_PROTO_ZC: return "zc";
    case MELD_PROTO_CE: return "ce";
  }
  return "?";
}

/* a * b, or SIZE_MAX on overflow. */
static size_t mul_sat(size_t a, size_t b) {
  if (a && b > SIZE_MAX / a) return SIZE_MAX;
  return a * b;
}

static meld_result_t check_ptr(const char *fn, const char *name, const void *p, size_t bytes,
                               size_t es) {
  if (bytes == 0) return MELD_OK;
  if (!p) return meld_error(MELD_ERR_INVALID_ARG, "%s: %s is NULL with %zu bytes to move", fn, name, bytes);
  if ((uintptr_t)p % es)
    return meld_error(MELD_ERR_INVALID_ARG,
                      "%s: %s %p is not aligned to the element size (%zu bytes)", fn, name, p, es);
  return MELD_OK;
}

meld_result_t meld_coll_validate(const char *fn, int nranks, const meld_coll_args_t *a) {
  if (!a) return meld_error(MELD_ERR_INVALID_ARG, "%s: NULL arguments", fn);
  if (nranks < 1 || nranks > MELD_COLL_MAX_RANKS)
    return meld_error(MELD_ERR_UNSUPPORTED, "%s: %d ranks; the collectives handle 1..%d ranks",
                      fn, nranks, MELD_COLL_MAX_RANKS);
  if ((unsigned)a->op >= MELD_COLL_NUM_OPS)
    return meld_error(MELD_ERR_INVALID_ARG, "%s: unknown op %d", fn, (int)a->op);
  size_t es = meld_coll_dtype_bytes(a->dtype);
  if (!es)
    return meld_error(MELD_ERR_INVALID_ARG, "%s: unknown dtype %d (MELD_BF16 or MELD_FP32)", fn,
                      (int)a->dtype);
  size_t P = (size_t)nranks;
  if (a->op != MELD_COLL_ALL_TO_ALL) {
    /* AG: send count, recv count * P. RS: send count * P, recv count. AR: count both. */
    size_t mult = a->op == MELD_COLL_ALL_REDUCE ? 1 : P;
    size_t big = mul_sat(mul_sat(a->count, mult), es);
    if (big > MELD_COLL_MAX_BYTES)
      return meld_error(MELD_ERR_INVALID_ARG,
                        "%s: count %zu x %zu ranks x %zu bytes overflows (limit %zu bytes per buffer)",
                        fn, a->count, mult, es, (size_t)MELD_COLL_MAX_BYTES);
    size_t sb = a->count * es, rb = a->count * es;
    if (a->op == MELD_COLL_ALL_GATHER) rb = big;
    if (a->op == MELD_COLL_REDUCE_SCATTER) sb = big;
    MELD_CHECK(check_ptr(fn, "send", a->send, sb, es));
    MELD_CHECK(check_ptr(fn, "recv", a->recv, rb, es));
    return MELD_OK;
  }
  size_t send_end = 0, recv_end = 0;
  for (int q = 0; q < nranks; q++) {
    const size_t c[2] = {a->send_counts[q], a->recv_counts[q]};
    const size_t o[2] = {a->send_offsets[q], a->recv_offsets[q]};
    for (int k = 0; k < 2; k++) {
      const char *what = k ? "recv" : "send";
      if (mul_sat(c[k], es) > MELD_COLL_MAX_BYTES || mul_sat(o[k], es) > MELD_COLL_MAX_BYTES)
        return meld_error(MELD_ERR_INVALID_ARG,
                          "%s: %s_counts[%d] = %zu or %s_offsets[%d] = %zu overflows (limit %zu "
                          "bytes per buffer)",
                          fn, what, q, c[k], what, q, o[k], (size_t)MELD_COLL_MAX_BYTES);
      size_t end = c[k] ? o[k] + c[k] : 0;
      if (end * es > MELD_COLL_MAX_BYTES)
        return meld_error(MELD_ERR_INVALID_ARG, "%s: %s block %d ends at element %zu: overflows",
                          fn, what, q, end);
      if (k) recv_end = end > recv_end ? end : recv_end;
      else send_end = end > send_end ? end : send_end;
    }
  }
  if (!a->vector && a->send_counts[0] && a->send_counts[0] * es * P > MELD_COLL_MAX_BYTES)
    return meld_error(MELD_ERR_INVALID_ARG, "%s: count %zu x %zu ranks overflows", fn,
                      a->send_counts[0], P);
  MELD_CHECK(check_ptr(fn, "send", a->send, send_end * es, es));
  MELD_CHECK(check_ptr(fn, "recv", a->recv, recv_end * es, es));
  return MELD_OK;
}

int meld_coll_is_empty(const meld_coll_args_t *a) {
  if (a->op == MELD_COLL_ALL_TO_ALL) return !a->vector && a->send_counts[0] == 0;
  return a->count == 0;
}

size_t meld_coll_ll_capacity(int nranks) {
  if (nranks < 2) return 0;
  return MELD_COLL_LL_HALF_BYTES / (size_t)(nranks - 1) / 16 * 8;
}

int meld_coll_ce_side_streams(int nranks, int gpu_share, int queues, int max_streams) {
  if (nranks < 2) return 0;
  int n = nranks - 1 < max_streams ? nranks - 1 : max_streams;
  if (gpu_share > 1) {
    /* session 25: 8 ranks x 5 streams on 32 queues stalled a CE call; session 26: the
     * protocol's side stream counted too (8 ranks had still been 40 streams on 32 queues) */
    const int fit = queues / gpu_share - 2;
    n = fit < 1 ? 1 : fit < n ? fit : n;
  }
  return n;
}

void meld_coll_plan_derive(meld_coll_plan_t *p) {
  size_t per_round = mul_sat((size_t)(p->ctas > 0 ? p->ctas : 1), p->chunk_bytes ? p->chunk_bytes : 1);
  p->rounds = (int64_t)ceil_div(p->pair_bytes, per_round);
  size_t peers = p->nranks > 1 ? (size_t)(p->nranks - 1) : 0;
  size_t rings = (size_t)p->stages * (size_t)p->ctas * (size_t)p->slots;
  p->signal_words = p->nranks > 1 ? (size_t)p->nranks * rings : 0;
  p->ws_bytes = mul_sat(peers * rings, p->chunk_bytes);
  if (p->proto == MELD_PROTO_LL) p->signal_words = 0, p->ws_bytes = 0; /* pad's LL region */
  if (p->proto == MELD_PROTO_ZC || p->proto == MELD_PROTO_CE) { /* no staging: one "done" per (peer, CTA) */
    p->rounds = 0;
    p->ws_bytes = 0;
    p->signal_words = p->nranks > 1 ? (size_t)p->nranks * (size_t)p->ctas : 0;
  }
}

/* Consumer warps of a RING CTA of `threads` threads: half of the data warps (run 2 of
 * 2026-11-30: with a third, the drain bounded the ring; a copy is latency bound, local or
 * not), at least 1. */
static int ring_cons_warps(int threads) {
  int w = threads / 32 - 2;
  int c = w / 2;
  return c < 1 ? 1 : c;
}

/* Chunk of a plan for its CTA count. */
static size_t plan_chunk(const meld_coll_plan_t *p) {
  size_t ctas = (size_t)(p->ctas > 0 ? p->ctas : 1);
  size_t c;
  switch (p->proto) {
    case MELD_PROTO_LL:
      c = round_up(ceil_div(p->pair_bytes, ctas), 16);
      return c < MELD_COLL_MIN_CHUNK ? MELD_COLL_MIN_CHUNK : c > MELD_COLL_MAX_CHUNK ? MELD_COLL_MAX_CHUNK : c;
    case MELD_PROTO_RING:
      c = round_up(ceil_div(p->pair_bytes, ctas * PLAN_RING_SLOTS), 4096);
      return c < PLAN_RING_MIN_CHUNK ? PLAN_RING_MIN_CHUNK : c > PLAN_RING_MAX_CHUNK ? PLAN_RING_MAX_CHUNK : c;
    default: {
      const size_t cmax = p->stages == 2 ? PLAN_TWO_SHOT_MAX_CHUNK : PLAN_MAX_CHUNK;
      c = round_up(ceil_div(p->pair_bytes, ctas), 4096);
      return c < MELD_COLL_MIN_CHUNK ? MELD_COLL_MIN_CHUNK : c > cmax ? cmax : c;
    }
  }
}

meld_result_t meld_coll_plan_check(const meld_coll_plan_t *p, int sm_count, size_t ws_bytes,
                                   size_t signal_words_max) {
  const char *op = meld_coll_op_name(p->op);
  int max_ctas = sm_count < MELD_COLL_MAX_CTAS ? sm_count : MELD_COLL_MAX_CTAS;
  if (p->nranks < 1 || p->nranks > MELD_COLL_MAX_RANKS)
    return meld_error(MELD_ERR_INVALID_ARG, "%s plan: nranks %d outside [1, %d]", op, p->nranks,
                      MELD_COLL_MAX_RANKS);
  if (p->ctas < 1 || p->ctas > max_ctas)
    return meld_error(MELD_ERR_INVALID_ARG,
                      "%s plan: %d CTAs outside [1, %d] (the GPU has %d SMs; MELD_COMM_CTAS?)", op,
                      p->ctas, max_ctas, sm_count);
  if (p->proto == MELD_PROTO_CE && (p->ctas != 1 || p->threads != 32 || p->nranks < 2))
    return meld_error(MELD_ERR_INVALID_ARG,
                      "%s plan: the CE engine's handshake kernels are one CTA of 32 threads at 2+ ranks (%d x %d, "
                      "%d ranks)",
                      op, p->ctas, p->threads, p->nranks);
  if (p->proto != MELD_PROTO_CE && (p->threads < 64 || p->threads > 1024 || p->threads % 32))
    return meld_error(MELD_ERR_INVALID_ARG,
                      "%s plan: %d threads per CTA: needs a multiple of 32 in [64, 1024]", op,
                      p->threads);
  if (p->chunk_bytes < MELD_COLL_MIN_CHUNK || p->chunk_bytes > MELD_COLL_MAX_CHUNK ||
      p->chunk_bytes % 16)
    return meld_error(MELD_ERR_INVALID_ARG,
                      "%s plan: chunk of %zu bytes: needs a multiple of 16 in [%d, %zu] "
                      "(MELD_CHUNK_BYTES?)",
                      op, p->chunk_bytes, MELD_COLL_MIN_CHUNK, (size_t)MELD_COLL_MAX_CHUNK);
  if (p->proto != MELD_PROTO_LL && p->proto != MELD_PROTO_RING && p->proto != MELD_PROTO_ROUNDS &&
      p->proto != MELD_PROTO_ZC && p->proto != MELD_PROTO_CE)
    return meld_error(MELD_ERR_INVALID_ARG, "%s plan: unknown protocol %d", op, (int)p->proto);
  const int max_threads = p->proto == MELD_PROTO_LL     ? MELD_COLL_LL_MAX_THREADS
                          : p->proto == MELD_PROTO_RING ? MELD_COLL_RING_MAX_THREADS
                          : p->proto == MELD_PROTO_ZC   ? MELD_COLL_ZC_MAX_THREADS
                          : p->proto == MELD_PROTO_CE   ? 32
                                                        : MELD_COLL_ROUNDS_MAX_THREADS;
  if (p->threads > max_threads)
    return meld_error(MELD_ERR_INVALID_ARG, "%s plan: %d threads per CTA: the %s kernel takes at most %d", op,
                      p->threads, meld_coll_proto_name(p->proto), max_threads);
  if (p->proto == MELD_PROTO_RING && (p->cons_warps < 1 || p->threads / 32 - 2 - p->cons_warps < 1))
    return meld_error(MELD_ERR_INVALID_ARG,
                      "%s plan: %d threads with %d consumer warps: a ring CTA needs 2 control warps, "
                      ">= 1 producer and >= 1 consumer warp",
                      op, p->threads, p->cons_warps);
  if (p->proto != MELD_PROTO_LL && p->unroll != 4 && p->unroll != 8)
    return meld_error(MELD_ERR_INVALID_ARG, "%s plan: unroll %d: the data loops take 4 or 8", op, p->unroll);
  if (p->bulk && (p->proto != MELD_PROTO_RING || p->threads < 96 || p->cons_warps != p->threads / 32 - 3))
    return meld_error(MELD_ERR_INVALID_ARG,
                      "%s plan: the bulk push needs the RING engine, >= 96 threads and threads/32 - 3 consumer "
                      "warps (%d threads, %d consumer warps)",
                      op, p->threads, p->cons_warps);
  if (p->proto != MELD_PROTO_ROUNDS && p->stages != 1)
    return meld_error(MELD_ERR_INVALID_ARG, "%s plan: %d stages need the ROUNDS engine", op, p->stages);
  if (p->proto == MELD_PROTO_CE && p->op != MELD_COLL_ALL_GATHER && p->op != MELD_COLL_ALL_TO_ALL)
    return meld_error(MELD_ERR_INVALID_ARG, "%s plan: the CE engine copies (all-gather, all-to-all) only", op);
  if (p->proto == MELD_PROTO_LL && (p->nranks < 2 || p->pair_bytes > meld_coll_ll_capacity(p->nranks)))
    return meld_error(MELD_ERR_INVALID_ARG, "%s plan: %zu bytes per peer do not fit the LL buffers (%zu)",
                      op, p->pair_bytes, meld_coll_ll_capacity(p->nranks));
  if (p->slots < 2 || p->slots > MELD_COLL_MAX_SLOTS)
    return meld_error(MELD_ERR_INVALID_ARG, "%s plan: %d slots per ring outside [2, %d]", op,
                      p->slots, MELD_COLL_MAX_SLOTS);
  /* ZC's all-reduce is two-shot in one stage (pull-reduce, then push of the sum). */
  if (p->stages != (p->op == MELD_COLL_ALL_REDUCE && p->ar_algo == MELD_AR_TWO_SHOT && p->proto != MELD_PROTO_ZC ? 2 : 1))
    return meld_error(MELD_ERR_INVALID_ARG, "%s plan: %d stages does not match the algorithm",
                      op, p->stages);
  if (p->elem_bytes != 2 && p->elem_bytes != 4)
    return meld_error(MELD_ERR_INVALID_ARG, "%s plan: element size %zu", op, p->elem_bytes);
  if (p->rounds >= MELD_COLL_MAX_ROUNDS)
    return meld_error(MELD_ERR_INVALID_ARG,
                      "%s plan: %lld rounds per CTA (limit %lld): raise the chunk or CTA count",
                      op, (long long)p->rounds, (long long)MELD_COLL_MAX_ROUNDS);
  if (p->signal_words > signal_words_max)
    return meld_error(MELD_ERR_INVALID_ARG,
                      "%s plan: %zu signal slots per rank exceed the %zu of the signal pad: "
                      "lower MELD_COMM_CTAS",
                      op, p->signal_words, signal_words_max);
  if (p->ws_bytes > ws_bytes)
    return meld_error(MELD_ERR_OUT_OF_MEMORY,
                      "%s plan (%d ranks, %d CTAs x %d slots x %zu-byte chunks x %d stage(s)) "
                      "needs %zu bytes of workspace, the comm has %zu: set workspace_bytes / "
                      "MELD_WORKSPACE_BYTES >= %zu, or lower MELD_COMM_CTAS / MELD_CHUNK_BYTES",
                      op, p->nranks, p->ctas, p->slots, p->chunk_bytes, p->stages, p->ws_bytes,
                      ws_bytes, p->ws_bytes);
  return MELD_OK;
}

static int ranges_overlap(uintptr_t a, size_t an, uintptr_t b, size_t bn) {
  return an && bn && a < b + bn && b < a + an;
}

int meld_coll_zc_request(const meld_coll_args_t *a, int nranks, int rank, int nnodes, meld_coll_zc_req_t *req) {
  memset(req, 0, sizeof *req);
  const size_t P = (size_t)nranks, es = meld_coll_dtype_bytes(a->dtype);
  if (nnodes > 1 || a->vector || es == 0 || nranks < 1) return 0;
  const size_t B = a->op == MELD_COLL_ALL_TO_ALL ? a->send_counts[0] * es : a->count * es;
  for (size_t q = 0; a->op == MELD_COLL_ALL_TO_ALL && q < P; q++) /* uniform splits only */
    if (a->send_counts[q] * es != B || a->recv_counts[q] * es != B || a->send_offsets[q] * es != q * B ||
        a->recv_offsets[q] * es != q * B)
      return 0;
  if (B == 0 || (a->op != MELD_COLL_ALL_REDUCE && B % 16)) return 0;
  const uintptr_t s = (uintptr_t)a->send, r = (uintptr_t)a->recv, own = (uintptr_t)rank * B;
  size_t sb = B, rb = B;
  switch (a->op) {
    case MELD_COLL_ALL_GATHER:
      rb = P * B;
      req->inplace = s == r + own;
      if (!req->inplace && ranges_overlap(s, sb, r, rb)) return 0;
      break;
    case MELD_COLL_REDUCE_SCATTER:
      sb = P * B;
      if (r != s + own && ranges_overlap(s, sb, r, rb)) return 0;
      break;
    case MELD_COLL_ALL_REDUCE:
      if (s != r && ranges_overlap(s, sb, r, rb)) return 0;
      break;
    default:
      sb = rb = P * B;
      if (ranges_overlap(s, sb, r, rb)) return 0;
      break;
  }
  req->send_bytes = sb;
  req->recv_bytes = rb;
  req->need_send = a->op == MELD_COLL_REDUCE_SCATTER || a->op == MELD_COLL_ALL_REDUCE;
  req->need_recv = a->op != MELD_COLL_REDUCE_SCATTER;
  return 1;
}

int meld_coll_ce_request(const meld_coll_args_t *a, int nranks, int rank, int nnodes, meld_coll_zc_req_t *req) {
  memset(req, 0, sizeof *req);
  if (nranks < 2 || (a->op != MELD_COLL_ALL_GATHER && a->op != MELD_COLL_ALL_TO_ALL)) return 0;
  return meld_coll_zc_request(a, nranks, rank, nnodes, req);
}

int meld_coll_zc_mode(const meld_coll_args_t *a, const meld_coll_zc_req_t *req, int send_sym, int recv_sym) {
  if (req->need_send && !send_sym) return 0;
  if (req->need_recv && !recv_sym) /* an all-reduce with its send only symmetric: one-shot */
    return a->op == MELD_COLL_ALL_REDUCE && a->send != a->recv ? 2 : 0;
  return 1;
}

meld_result_t meld_coll_plan_make(const meld_coll_args_t *a, int nranks, int sm_count,
                                  size_t ws_bytes, size_t signal_words_max,
                                  const meld_coll_plan_hint_t *hint, meld_coll_plan_t *p) {
  memset(p, 0, sizeof *p);
  p->op = a->op;
  p->nranks = nranks;
  p->elem_bytes = meld_coll_dtype_bytes(a->dtype);
  p->stages = 1;
  p->ar_algo = MELD_AR_AUTO;
  size_t es = p->elem_bytes;
  size_t P = (size_t)nranks;
  size_t peers = P > 1 ? P - 1 : 0;

  /* Bytes each rank pushes to one peer (per stage). */
  switch (a->op) {
    case MELD_COLL_ALL_GATHER:
    case MELD_COLL_REDUCE_SCATTER: p->pair_bytes = a->count * es; break;
    case MELD_COLL_ALL_REDUCE: {
      p->oneshot_max_bytes = hint && hint->oneshot_max_bytes ? hint->oneshot_max_bytes
                             : P == 1                        ? SIZE_MAX
                             : P == 2 ? (ws_bytes >= PLAN_TWO_SHOT_WS_P2 ? PLAN_ONESHOT_MAX_BYTES_P2 : SIZE_MAX)
                             : P == 3                        ? PLAN_ONESHOT_MAX_BYTES_P3
                                                             : PLAN_ONESHOT_MAX_BYTES;
      size_t bytes = a->count * es;
      p->ar_algo = hint && hint->ar_algo != MELD_AR_AUTO ? hint->ar_algo
                   : (bytes <= p->oneshot_max_bytes || P == 1) ? MELD_AR_ONE_SHOT
                                                               : MELD_AR_TWO_SHOT;
      if (P == 1) p->ar_algo = MELD_AR_ONE_SHOT; /* a copy */
      if (p->ar_algo == MELD_AR_TWO_SHOT) {
        size_t per = ceil_div(a->count, P);
        p->part_elems = round_up(per ? per : 1, 16 / es);
        p->pair_bytes = p->part_elems * es;
        p->stages = 2;
      } else {
        p->pair_bytes = bytes;
      }
      break;
    }
    case MELD_COLL_ALL_TO_ALL:
      if (a->vector) {
        /* The plan must be equal on every rank, but the splits differ between ranks: plan
         * for large blocks (the geometry does not depend on this rank's counts). */
        p->pair_bytes = (size_t)256 << 20;
      } else {
        p->pair_bytes = a->send_counts[0] * es;
      }
      break;
    case MELD_COLL_NUM_OPS: break;
  }

  /* Protocol. */
  p->ll_max_bytes = hint && hint->ll_max_bytes ? hint->ll_max_bytes : PLAN_LL_MAX_BYTES;
  const int ll_ok = P > 1 && p->stages == 1 && !(a->op == MELD_COLL_ALL_TO_ALL && a->vector) &&
                    p->pair_bytes <= meld_coll_ll_capacity(nranks);
  meld_coll_proto_t want = hint ? hint->proto : MELD_PROTO_AUTO;
  /* Above LL: ROUNDS by default. The RING engine (warp-specialized) measured SLOWER on 2 x
   * H200 (run 2, 2026-11-30: AG 207 vs 237, RS 111 vs 203, AR 114 vs 242 GB/s at 256 MB), so
   * it is only taken when asked for (hint), until its per-chunk stalls are fixed
   * (docs/perf-notes.md "Collectives"). */
  /* Symmetric buffers (a->zc): the ZC engine wherever LL does not take the call (all-reduce:
   * up to PLAN_ZC_AR_MAX_BYTES). */
  const size_t ar_zc_max = a->zc == 2 ? PLAN_ZC_ONESHOT_MAX_BYTES : PLAN_ZC_AR_MAX_BYTES;
  const int zc_auto = a->zc && !(a->op == MELD_COLL_ALL_REDUCE && a->count * es > ar_zc_max);
  /* CE (a->ce == 2: MELD_COLL_CE=1): blocks of at least MELD_COLL_CE_MIN_BYTES per peer. */
  size_t ce_min = MELD_COLL_CE_MIN_BYTES_DEFAULT;
  const char *cm = a->ce == 2 ? getenv("MELD_COLL_CE_MIN_BYTES") : NULL;
  if (cm && *cm && meld_parse_size(cm, &ce_min) != 0)
    return meld_error(MELD_ERR_INVALID_ARG, "MELD_COLL_CE_MIN_BYTES=%s: not a size (e.g. 4194304, 4M)", cm);
  const int ce_auto = a->ce == 2 && p->pair_bytes >= ce_min;
  if (want == MELD_PROTO_AUTO)
    want = ll_ok && p->pair_bytes <= p->ll_max_bytes ? MELD_PROTO_LL
           : ce_auto                                 ? MELD_PROTO_CE
           : zc_auto                                 ? MELD_PROTO_ZC
                                                     : MELD_PROTO_ROUNDS;
  if (want == MELD_PROTO_CE && !a->ce) want = zc_auto ? MELD_PROTO_ZC : MELD_PROTO_ROUNDS;
  if (want == MELD_PROTO_LL && !ll_ok) want = MELD_PROTO_ROUNDS;
  if (want == MELD_PROTO_ZC && !a->zc) want = MELD_PROTO_ROUNDS;
  if (want == MELD_PROTO_RING && p->stages == 2) want = MELD_PROTO_ROUNDS;
  p->proto = want;
  if (p->proto == MELD_PROTO_ZC && a->op == MELD_COLL_ALL_REDUCE && a->zc == 2) {
    /* One-shot: every rank pulls all of every send (its recv is not symmetric). */
    p->ar_algo = MELD_AR_ONE_SHOT;
    p->part_elems = 0;
    p->pair_bytes = a->count * es;
    p->stages = 1;
  } else if (p->proto == MELD_PROTO_ZC && a->op == MELD_COLL_ALL_REDUCE) {
    /* Two-shot in one stage: rank r reduces part r (a 16-byte multiple of elements). */
    size_t per = ceil_div(a->count, P);
    p->ar_algo = MELD_AR_TWO_SHOT;
    p->part_elems = round_up(per ? per : 1, 16 / es);
    p->pair_bytes = p->part_elems * es;
    p->stages = 1;
  }

  /* Heuristic geometry. */
  int max_ctas = sm_count < PLAN_MANY_CTAS ? sm_count : PLAN_MANY_CTAS; /* each engine caps below */
  if (max_ctas < 1) max_ctas = 1;
  size_t moved = P > 1 ? p->pair_bytes * peers * (size_t)p->stages : p->pair_bytes;
  size_t want_ctas;
  int cap_ctas;
  switch (p->proto) {
    case MELD_PROTO_LL:
      /* s2 runs 1-2 (2 x H200, graph replays): spreading even 8-16 KB over 16 CTAs beats 1
       * CTA by ~0.5 us (AG 16 KB: 4.69 vs 5.20 us), 256-thread CTAs beat 512 up to 32 KB
       * moved; 16 x 512 up to 512 KB moved (AG 1 MB: 8.91 us vs 9.37 with 32); 32 above (AR
       * 1 MB: 16.5 vs 19.7). Up to 4 KB moved one CTA of 512 (4.3-4.6 us; run 2: 4, 16 or 32
       * CTAs of 128-256 are 0.3-0.7 us slower there, except all-reduce; 1 x 256 measured
       * 0.9 us slower than 1 x 512 for the 4 KB all-reduce, across runs). */
      want_ctas = moved <= PLAN_LL_ONE_CTA_BYTES ? 1
                  : moved <= PLAN_LL_MID_BYTES   ? ceil_div(moved, PLAN_LL_BYTES_PER_CTA_SMALL)
                                                 : PLAN_LL_MAX_CTAS;
      cap_ctas = moved <= PLAN_LL_MID_BYTES ? PLAN_LL_MID_CTAS : PLAN_LL_MAX_CTAS;
      p->threads = moved > PLAN_LL_ONE_CTA_BYTES && moved <= PLAN_LL_SMALL_THREADS_BYTES ? PLAN_LL_SMALL_THREADS
                                                                                       : PLAN_LL_THREADS;
      p->slots = 2;
      break;
    case MELD_PROTO_RING:
      want_ctas = ceil_div(moved, PLAN_RING_CTA_BYTES);
      cap_ctas = PLAN_RING_MAX_CTAS;
      p->threads = PLAN_RING_THREADS;
      p->slots = PLAN_RING_SLOTS;
      break;
    case MELD_PROTO_CE: /* the handshake kernels: one thread works */
      want_ctas = 1;
      cap_ctas = 1;
      p->threads = 32;
      p->slots = 2; /* unused */
      break;
    case MELD_PROTO_ZC: {
      /* Bytes stored by this rank: AG / A2A / RS P blocks; AR its part to P ranks. */
      size_t stored = p->pair_bytes * (P > 1 ? P : 1);
      want_ctas = ceil_div(stored, PLAN_ZC_CTA_BYTES);
      cap_ctas = PLAN_ZC_MAX_CTAS;
      /* Copies push (stores) at 16 CTAs; sums pull (loads) and need 32 (run 1). */
      if (a->op == MELD_COLL_REDUCE_SCATTER || a->op == MELD_COLL_ALL_REDUCE) cap_ctas = PLAN_ZC_MAX_CTAS_SUM;
      p->threads = PLAN_ZC_THREADS;
      p->slots = 2; /* unused */
      break;
    }
    default:
      want_ctas = ceil_div(moved, PLAN_TARGET_CHUNK);
      cap_ctas = moved >= PLAN_MANY_CTAS_BYTES ? PLAN_MANY_CTAS : PLAN_MAX_CTAS;
      p->threads = PLAN_THREADS;
      p->slots = PLAN_SLOTS;
      break;
  }
  p->unroll = p->proto == MELD_PROTO_LL ? 0 : PLAN_UNROLL;
  if (cap_ctas > max_ctas) cap_ctas = max_ctas;
  p->ctas = want_ctas < 1 ? 1 : want_ctas > (size_t)cap_ctas ? cap_ctas : (int)want_ctas;
  p->chunk_bytes = p->proto == MELD_PROTO_ZC || p->proto == MELD_PROTO_CE ? MELD_COLL_MIN_CHUNK /* unused */ : plan_chunk(p);

  /* Environment, then the caller's hint. */
  int set_ctas = 0, set_chunk = 0, set_slots = 0;
  int64_t v = 0;
  MELD_CHECK(meld_env_int64("MELD_COMM_CTAS", 1, MELD_COLL_MAX_CTAS, &v));
  if (v) p->ctas = (int)v, set_ctas = 1;
  const char *s = getenv("MELD_CHUNK_BYTES");
  if (s && *s) {
    size_t c = 0;
    if (meld_parse_size(s, &c) != 0)
      return meld_error(MELD_ERR_INVALID_ARG, "MELD_CHUNK_BYTES=%s: not a size (e.g. 262144, 256K)", s);
    if (p->proto != MELD_PROTO_LL) p->chunk_bytes = c, set_chunk = 1;
  }
  if (hint) {
    if (hint->ctas) p->ctas = hint->ctas, set_ctas = 1;
    if (hint->chunk_bytes && p->proto != MELD_PROTO_LL) p->chunk_bytes = hint->chunk_bytes, set_chunk = 1;
    if (hint->threads) p->threads = hint->threads;
    if (hint->slots) p->slots = hint->slots, set_slots = 1;
    if (hint->unroll) p->unroll = hint->unroll;
    if (hint->bulk && p->proto == MELD_PROTO_RING) p->bulk = hint->bulk >= 2 ? 2 : 1;
  }
  if (p->proto == MELD_PROTO_CE) { /* nothing to tune: the copies are the copy engines' */
    p->ctas = 1, p->threads = 32, p->chunk_bytes = MELD_COLL_MIN_CHUNK, p->slots = 2, set_ctas = set_chunk = 0;
    if (p->unroll != 4 && p->unroll != 8) p->unroll = PLAN_UNROLL;
  }
  if (set_ctas && !set_chunk && p->proto != MELD_PROTO_ZC) p->chunk_bytes = plan_chunk(p); /* re-derive for the chosen CTAs */
  p->cons_warps = p->proto != MELD_PROTO_RING ? 0
                  : p->bulk                  ? p->threads / 32 - 3 /* one push warp */
                  : hint && hint->cons_warps ? hint->cons_warps
                                             : ring_cons_warps(p->threads);

  /* Fit the workspace and the signal pad: halve what was not set explicitly. */
  meld_coll_plan_derive(p);
  while (p->ws_bytes > ws_bytes || p->signal_words > signal_words_max) {
    if (!set_chunk && p->chunk_bytes / 2 >= MELD_COLL_MIN_CHUNK && p->ws_bytes > ws_bytes) {
      p->chunk_bytes = round_up(p->chunk_bytes / 2, 16);
    } else if (!set_ctas && p->ctas > 1) {
      p->ctas = (p->ctas + 1) / 2;
    } else if (!set_slots && p->slots > 2 && p->ws_bytes > ws_bytes) {
      p->slots = 2;
    } else {
      break;
    }
    meld_coll_plan_derive(p);
  }
  /* Rounds within the signal encoding: grow the chunk if it was not set. */
  while (!set_chunk && p->rounds >= MELD_COLL_MAX_ROUNDS && p->chunk_bytes * 2 <= MELD_COLL_MAX_CHUNK) {
    p->chunk_bytes *= 2;
    meld_coll_plan_derive(p);
  }
  return meld_coll_plan_check(p, sm_count, ws_bytes, signal_words_max);
}

int meld_coll_plan_format(const meld_coll_plan_t *p, char *buf, size_t len) {
  return snprintf(buf, len,
                  "%s P=%d elem=%zuB proto=%s pair_bytes=%zu ctas=%d threads=%d cons_warps=%d "
                  "chunk=%zu slots=%d stages=%d ar_algo=%s oneshot_max=%zu part_elems=%zu "
                  "rounds=%lld ws=%zu signals=%zu unroll=%d bulk=%d",
                  meld_coll_op_name(p->op), p->nranks, p->elem_bytes, meld_coll_proto_name(p->proto),
                  p->pair_bytes, p->ctas, p->threads, p->cons_warps,
                  p->chunk_bytes, p->slots, p->stages,
                  p->ar_algo == MELD_AR_ONE_SHOT   ? "one-shot"
                  : p->ar_algo == MELD_AR_TWO_SHOT ? "two-shot"
                                                   : "-",
                  p->oneshot_max_bytes, p->part_elems, (long long)p->rounds, p->ws_bytes,
                  p->signal_words, p->unroll, p->bulk);
}

void meld_coll_plan_print(const meld_coll_plan_t *p, FILE *f) {
  char buf[512];
  meld_coll_plan_format(p, buf, sizeof buf);
  fprintf(f, "%s\n", buf);
}
