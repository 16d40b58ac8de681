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
 * starts 16-byte aligned) is the vector path, the rest uses narrower words (copy.cuh). */
#include <string.h>

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

/* Everything the kernel needs, by value (__grid_constant__: arrays indexed at run time stay
 * in the parameter space, no local copy). Byte offsets and lengths. */
typedef struct {
  int32_t rank, nranks, ctas, slots, stages, action, dtype;
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
MELD_DEV int coll_src_idx(int src, int dst, int P) { return (src - dst - 1 + P) % P; }

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
    copy_bytes(dst, coll_push_src(a, st, q) + off, coll_min(C, len - off), tid, nt);
  }
  /* bar.sync orders every thread's stores before the releases below (cumulativity). */
  __syncthreads();
  if ((int)tid < npeer) {
    const int q = (me + 1 + (int)tid) % P;
    if (coll_push_len(a, st, q) > off) meld_signal_put(ctx, q, meld_signal_index(me, P, ch, slot, S), stamp);
  }

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
      reduce_sum(a->recv + a->own_dst + off, a->send + a->own_src + off, slots0, a->ring_stride,
                 npeer, npeer - me, n / es, a->dtype, tid, nt);
    }
  } else {
    for (int t = 0; t < npeer; t++) {
      const int p = (me + 1 + t) % P;
      const uint64_t len = coll_recv_len(a, st, p);
      if (len <= off) continue;
      uint8_t *dst = st == 0 ? a->recv + a->recv_off[p] : a->recv + (uint64_t)p * a->part;
      copy_bytes(dst + off, slots0 + (uint64_t)t * a->ring_stride, coll_min(C, len - off), tid, nt);
    }
    if (st == 0 && a->own_len > off)
      copy_bytes(a->recv + a->own_dst + off, a->send + a->own_src + off, coll_min(C, a->own_len - off), tid, nt);
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

__global__ void coll_kernel(const __grid_constant__ meld_proto_dev_t proto,
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

/* The node's smallest SM count: every rank plans with the same value. */
static int coll_node_sm_count(const struct meld_comm *comm) {
  int sm = comm->sm_count;
  for (int r = 0; comm->ranks && r < comm->nranks; r++)
    if (comm->rank_node && comm->rank_node[r] == comm->node && comm->ranks[r].sm_count > 0 &&
        comm->ranks[r].sm_count < sm)
      sm = comm->ranks[r].sm_count;
  return sm;
}

static uint64_t u64_max(uint64_t x, uint64_t y) { return x > y ? x : y; }

/* Fills the kernel's arguments from a validated call and its plan. */
static void coll_kargs_fill(const struct meld_comm *comm, const meld_coll_args_t *a,
                            const meld_coll_plan_t *p, coll_kargs_t *k) {
  memset(k, 0, sizeof *k);
  const int P = comm->nranks, me = comm->rank;
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
  for (int r = 0; r < P; r++) k->peer_ws[r] = (uint8_t *)comm->workspace.peer[r];
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
  k->arg_hash = meld_hash_fold(h);
}

extern "C" meld_result_t meld_coll_run(struct meld_comm *comm, const char *fn, const meld_coll_args_t *args,
                                       const meld_coll_plan_hint_t *hint, cudaStream_t stream,
                                       meld_coll_plan_t *plan_out) {
  meld_coll_plan_t plan;
  MELD_CHECK(meld_coll_plan_make(args, comm->nranks, coll_node_sm_count(comm), comm->workspace.bytes,
                                 MELD_PAD_CREDIT_SLOTS, hint, &plan));
  if (plan_out) *plan_out = plan;
  coll_kargs_t k; /* ~3 KB of kernel parameters */
  coll_kargs_fill(comm, args, &plan, &k);
  /* The rounds of the longest stream must fit the stamps' sequence bits. */
  uint64_t per_round = (uint64_t)plan.ctas * plan.chunk_bytes;
  if ((k.max_len + per_round - 1) / per_round / (uint64_t)plan.slots >= MELD_STAMP_SEQ_MAX)
    return meld_error(MELD_ERR_INVALID_ARG,
                      "%s: %llu bytes per peer need more than %u rounds of %d CTAs x %zu-byte "
                      "chunks: raise MELD_CHUNK_BYTES",
                      fn, (unsigned long long)k.max_len, MELD_STAMP_SEQ_MAX, plan.ctas, plan.chunk_bytes);
  if (meld_log_level() >= MELD_LOG_TRACE) {
    char buf[512];
    meld_coll_plan_format(&plan, buf, sizeof buf);
    MELD_TRACE(MELD_SUB_OPS, "%s: %s", fn, buf);
  }
  meld_proto_dev_t proto = meld_proto_dev(comm);
  void *kargs[] = {&proto, &k};
  meld_result_t r = meld_launch_coop((const void *)coll_kernel, plan.ctas, plan.threads, 0, kargs, stream);
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
  /* Decided identically on every rank (nnodes is global): no rank launches, none waits. */
  if (comm->nnodes > 1)
    return meld_error(MELD_ERR_UNSUPPORTED,
                      "%s: inter-node collectives are not supported yet (%d nodes)", fn, comm->nnodes);
  if (meld_coll_is_empty(a)) return MELD_OK;
  /* A comm whose device protocol failed (timeout, abort: sticky) reports it here instead of
   * launching: a read of the host-mapped error record (meld_comm_check does the full probe). */
  meld_error_record_t rec;
  meld_proto_read_record(comm, &rec);
  if (rec.kind != MELD_FAIL_NONE) {
    char msg[1024];
    meld_proto_format_record(&rec, (int)comm->cfg.timeout_ms, msg, sizeof msg);
    return meld_error(rec.kind == MELD_FAIL_TIMEOUT ? MELD_ERR_TIMEOUT : MELD_ERR_ABORTED, "%s: %s", fn, msg);
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
