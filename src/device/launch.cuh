/* launch.cuh — a fused kernel's call frame: entry (sticky abort, epoch, role ticket, argument
 * handshake), the dynamic work queue, and the exit that advances the comm's call counter.
 *
 * Usage (every thread of every CTA; 1-D blocks; launched cooperatively, one CTA per SM, by
 * meld_launch_coop in src/host/proto.h):
 *
 *   __global__ void my_op_kernel(const __grid_constant__ meld_proto_dev_t proto, my_args_t a) {
 *     meld_ctx_t ctx;
 *     if (meld_call_begin(&ctx, &proto, MELD_OP_X, a.arg_hash, a.comm_ctas)) {
 *       if (ctx.role == MELD_ROLE_COMM) {
 *         ... send chunks: write, __syncthreads, meld_signal_put (signal.cuh) ...
 *       }
 *       for (uint32_t t; !ctx.failed && (t = meld_cta_queue_next(&ctx, 0)) < a.ntiles;) {
 *         if (!meld_cta_wait_signal(&ctx, ...)) break;  // aborted: stop at a tile boundary
 *         ... compute tile t ...
 *       }
 *     }
 *     meld_call_end(&ctx);  // ALWAYS (also when begin failed): the last CTA advances the epoch
 *   }
 *
 * Epochs: the comm's call counter (pad) counts completed calls; every CTA reads it at entry
 * (epoch = counter + 1). Only the last CTA of a call advances it, after every CTA of the call
 * has passed meld_call_end; the next call (stream order: a later kernel) sees the new value.
 * So all CTAs of a call agree on the epoch, CUDA-graph replays get fresh epochs, and no host
 * synchronization is needed between calls. Calls of one comm must be stream-ordered (one
 * stream at a time), like NCCL's: they share the counter and the per-call scratch.
 */
#ifndef MELD_DEVICE_LAUNCH_CUH
#define MELD_DEVICE_LAUNCH_CUH

#include "common/proto.h"
#include "device/ptx.cuh"
#include "device/signal.cuh"
#include "device/trace.cuh"

/* CTA-wide broadcast cells (one instance per kernel). */
typedef struct {
  uint64_t epoch;
  uint32_t ticket;
  uint32_t ok;
  uint32_t item;
  uint32_t last;
} meld_cta_shared_t;

MELD_DEV meld_cta_shared_t *meld_cta_shared(void) {
  __shared__ meld_cta_shared_t s;
  return &s;
}

MELD_DEV uint32_t *meld_pad_u32(uint8_t *pad, uint32_t offset) { return (uint32_t *)(pad + offset); }

/* Posts (epoch, arg hash) into every same-node peer's handshake slot for this rank. One
 * thread; the slot has one writer (this rank) per parity. A RELAXED store: the post orders
 * nothing of this kernel (it is the entry's first store, after griddepcontrol.wait where the
 * kernel is launched early), and what it announces, that this rank's earlier stream work on
 * the buffers the peers will touch is done, is ordered by the kernel boundary: those kernels'
 * stores to this GPU's memory are performed at its L2, the point every peer's access to that
 * memory goes through, and their loads have returned. The peers' ld.acquire.sys of the post
 * stays (their later accesses are ordered after seeing it). Until session 22 a st.release.sys,
 * a system-scope fence on every call's critical path: 0.5-0.6 us a ZC call with two ranks in
 * flight on one GPU (bench_inproc); session 4's 2-GPU floor rows put 1.5-3.5 us on it. */
MELD_DEV void meld_args_post(const meld_ctx_t *c) {
  const meld_proto_dev_t *p = c->p;
  const uint64_t v = meld_args_pack(c->epoch, c->arg_hash);
  for (int r = 0; r < p->nranks; r++) {
    uint8_t *peer = r == p->rank ? (uint8_t *)0 : p->peer_pads[r];
    if (peer) st_relaxed_sys_u64(meld_pad_u64(peer, meld_pad_args_offset(p->rank, c->epoch)), v);
  }
}

/* Reads the posts of ranks r0 .. r0 + 7 that are peers here (0 elsewhere) into pv, every load
 * issued before any is used: one round trip for up to 8 peers, not one each (session 25). */
MELD_DEV void meld_args_read8(const meld_ctx_t *c, int r0, uint64_t pv[8]) {
  const meld_proto_dev_t *p = c->p;
#pragma unroll
  for (int k = 0; k < 8; k++) {
    const int r = r0 + k;
    pv[k] = 0;
    if (r < p->nranks && r != p->rank && p->peer_pads[r])
      pv[k] = ld_relaxed_sys_u64(meld_pad_u64(p->pad, meld_pad_args_offset(r, c->epoch)));
  }
}

/* Checks one peer's post: 1 arrived and equal, 0 not arrived; on a different hash re-posts
 * our own (so that the peer, seeing our abort, also finds our post and reports the mismatch
 * itself; ordered before meld_fail's abort CAS: same thread, acq_rel) and fails with
 * MELD_FAIL_ARGS (claims the record, raises the abort everywhere), returning -1. */
MELD_DEV int meld_args_check_value(meld_ctx_t *c, int r, uint64_t v) {
  if (!meld_args_arrived(v, c->epoch)) return 0;
  if (meld_args_hash(v) == c->arg_hash) return 1;
  meld_args_post(c);
  meld_fail(c, MELD_FAIL_ARGS, meld_wait_info(MELD_REGION_ARGS, (uint32_t)r, r, "argument handshake"),
            c->arg_hash, meld_args_hash(v), 0, 0);
  return -1;
}
MELD_DEV int meld_args_check_peer(meld_ctx_t *c, int r) {
  return meld_args_check_value(c, r, ld_relaxed_sys_u64(meld_pad_u64(c->p->pad, meld_pad_args_offset(r, c->epoch))));
}

/* Waits for every same-node peer's post of this epoch and compares hashes. One thread.
 * Peers are checked in rank order; when the abort word is raised meanwhile, every peer's
 * post that has arrived is still compared first, so that a rank that sees the abort of a
 * mismatch reports the mismatch itself whenever it can. Success ends with an acquire fence:
 * the posts also prove that each peer finished the previous call (its reads of our shared
 * staging are done), and this rank's later writes must be ordered after seeing them.
 * Ranks of other nodes are not checked here (the proxy path carries no handshake yet). */
MELD_DEV bool meld_args_verify(meld_ctx_t *c) {
  const meld_proto_dev_t *p = c->p;
  const uint32_t *abort_word = meld_abort_word(p);
  int next = 0; /* peers below `next` are verified */
  /* First pass: up to 8 peers' posts read together, checked in rank order (one round trip
   * for all of them where the peers have posted, not one per peer: session 25). */
  for (int r0 = 0; r0 < p->nranks && next == r0; r0 += 8) {
    uint64_t pv[8];
    meld_args_read8(c, r0, pv);
#pragma unroll
    for (int k = 0; k < 8; k++) {
      const int r = r0 + k;
      if (r >= p->nranks) break;
      if (r != p->rank && p->peer_pads[r]) {
        const int st = meld_args_check_value(c, r, pv[k]);
        if (st < 0) return false;
        if (st == 0) break;
      }
      next = r + 1;
    }
  }
  meld_wait_state_t w = {0, 0, 0, 0};
  bool started = false;
  for (;;) {
    for (; next < p->nranks; next++) {
      if (next == p->rank || !p->peer_pads[next]) continue;
      const int st = meld_args_check_peer(c, next);
      if (st < 0) return false;
      if (st == 0) break;
    }
    if (next >= p->nranks) break;
    if (!started) {
      meld_wait_start(&w, globaltimer_ns(), p->timeout_ns);
      started = true;
    }
    uint32_t ab = ld_relaxed_sys_u32(abort_word);
    uint32_t kind = MELD_FAIL_NONE;
    uint64_t now = 0;
    if (!ab && meld_wait_tick(&w)) {
      now = globaltimer_ns();
      if (meld_wait_should_mirror(&w, now)) {
        meld_mirror_set(c, meld_wait_info(MELD_REGION_ARGS, (uint32_t)next, next, 0), c->epoch, w.start_ns);
        w.mirrored = 1;
      }
      if (w.mirrored && (ab = ld_relaxed_sys_u32(p->host_abort)) != 0u) meld_raise_abort(p, ab);
      else if (meld_wait_expired(&w, now)) kind = MELD_FAIL_TIMEOUT;
    }
    if (ab) {
      /* After the acquire fence, every post published before the abort is visible. */
      fence_acq_rel_sys();
      for (int r = next; r < p->nranks; r++)
        if (r != p->rank && p->peer_pads[r] && meld_args_check_peer(c, r) < 0) {
          if (w.mirrored) meld_mirror_clear(c);
          return false;
        }
      kind = MELD_FAIL_ABORTED;
    }
    if (kind != MELD_FAIL_NONE) {
      if (w.mirrored) meld_mirror_clear(c);
      const uint64_t v = ld_relaxed_sys_u64(meld_pad_u64(p->pad, meld_pad_args_offset(next, c->epoch)));
      meld_fail(c, kind, meld_wait_info(MELD_REGION_ARGS, (uint32_t)next, next, "argument handshake"), c->epoch,
                v, globaltimer_ns() - w.start_ns, ab);
      return false;
    }
  }
  if (w.mirrored) meld_mirror_clear(c);
  /* Acquire: every peer's post was seen by a relaxed load of this thread; one fence.acquire.sys
   * makes each an acquire pattern (session 26: 8 ranks as threads on one H200, ZC 4 KB calls
   * -1.1..-1.3 us, 4 ranks -0.25..-0.5, 2 ranks -0.2). Until then one ld.acquire.sys per peer
   * (serial: each orders every later access of the thread; 7 posts 1108 ns vs 288), and until
   * session 10 a fence.acq_rel.sys (whose release half waits for this thread's writes). */
  fence_acquire_sys();
  return true;
}

/* Kernel-entry check of the sticky abort word (device word only: a host-memory read here
 * would add a PCIe round trip to every call; meld_comm_abort writes the device words too).
 * Aborted: fills the record once (kind ABORTED, region NONE) and returns false. */
MELD_DEV bool meld_entry_check(meld_ctx_t *c) {
  const meld_proto_dev_t *p = c->p;
  const uint32_t ab = ld_relaxed_sys_u32(meld_abort_word(p));
  if (!ab) return true;
  fence_acq_rel_sys();
  /* Aborted for a mismatch of this very call: report the mismatch itself if a differing
   * post has arrived (the raiser re-posted its hash before raising). */
  if (meld_abort_reason(ab) == MELD_ABORT_ARGS)
    for (int r = 0; r < p->nranks; r++)
      if (r != p->rank && p->peer_pads[r] && meld_args_check_peer(c, r) < 0) return false;
  meld_fail(c, MELD_FAIL_ABORTED, meld_wait_info(MELD_REGION_NONE, 0, -1, "kernel entry"), 0, 0, 0, ab);
  return false;
}

/* The one-thread part of meld_call_begin (ticket, epoch, entry check, handshake): fills *c
 * and the CTA's broadcast cells (meld_cta_shared) for the other threads, which read them after
 * a barrier (meld_call_begin's __syncthreads, or a kernel's own: the decode GEMM+AR runs it in
 * a side warp while the GEMM starts). Returns the same as the cell `ok`. */
MELD_DEV bool meld_call_begin_one(meld_ctx_t *c, const meld_proto_dev_t *p, uint32_t op, uint32_t arg_hash,
                                  uint32_t ncomm) {
  meld_cta_shared_t *s = meld_cta_shared();
  c->p = p;
  c->op = op;
  c->arg_hash = arg_hash;
  c->cta = blockIdx.x;
  c->failed = 0;
  /* Tickets and the counter are this GPU's words: relaxed GPU scope. The counter was last
   * written by the previous call's last CTA, which finished before this kernel started. */
  c->ticket = atom_add_relaxed_gpu_u32(meld_pad_u32(p->pad, MELD_PAD_OFF_TICKET), 1u);
  c->epoch = meld_epoch_of_counter(ld_relaxed_gpu_u64(meld_pad_u64(p->pad, MELD_PAD_OFF_COUNTER)));
  c->role = meld_role_of_ticket(c->ticket, ncomm);
  bool ok = meld_entry_check(c);
  if (ok && c->ticket == 0) meld_args_post(c);
  if (ok) ok = meld_args_verify(c);
  s->epoch = c->epoch;
  s->ticket = c->ticket;
  s->ok = ok ? 1u : 0u;
  return ok;
}

/* Another thread's view of the call after the barrier that follows meld_call_begin_one. */
MELD_DEV void meld_call_join(meld_ctx_t *c, const meld_proto_dev_t *p, uint32_t op, uint32_t arg_hash,
                             uint32_t ncomm) {
  const meld_cta_shared_t *s = meld_cta_shared();
  c->p = p;
  c->op = op;
  c->arg_hash = arg_hash;
  c->cta = blockIdx.x;
  c->epoch = s->epoch;
  c->ticket = s->ticket;
  c->role = meld_role_of_ticket(c->ticket, ncomm);
  c->failed = s->ok ? 0u : 1u;
}

/* Entry of a call. Every thread of the CTA calls it (it contains __syncthreads). Takes the
 * role ticket (the first ncomm CTAs to START are communication CTAs), reads the epoch,
 * checks the sticky abort word, posts this rank's argument hash (first CTA only) and
 * verifies every peer's (every CTA: none uses peer data before it knows shapes agree).
 * Returns false (same in all threads) if the call must not proceed; then go straight to
 * meld_call_end. */
MELD_DEV bool meld_call_begin(meld_ctx_t *c, const meld_proto_dev_t *p, uint32_t op, uint32_t arg_hash,
                              uint32_t ncomm) {
  if (threadIdx.x == 0) (void)meld_call_begin_one(c, p, op, arg_hash, ncomm);
  __syncthreads();
  meld_call_join(c, p, op, arg_hash, ncomm);
  return !c->failed;
}

/* Next work item of queue q (< MELD_NUM_QUEUES), for one thread. Items are claimed in
 * order by whichever CTA asks first; callers stop at the first item >= their count. */
MELD_DEV uint32_t meld_queue_next(const meld_ctx_t *c, uint32_t q) {
  return atom_add_relaxed_gpu_u32(meld_pad_u32(c->p->pad, MELD_PAD_OFF_QUEUES + 4u * q), 1u);
}
/* Same, for the whole CTA (contains __syncthreads; same value in all threads). */
MELD_DEV uint32_t meld_cta_queue_next(const meld_ctx_t *c, uint32_t q) {
  meld_cta_shared_t *s = meld_cta_shared();
  __syncthreads(); /* everyone has read the previous item */
  if (threadIdx.x == 0) s->item = meld_queue_next(c, q);
  __syncthreads();
  return s->item;
}
/* Per-call scratch word i (< MELD_SCRATCH_WORDS) of this rank, zero at call entry: for
 * counts among this rank's CTAs (use GPU-scope atomics). Not for peers. */
MELD_DEV uint32_t *meld_scratch(const meld_ctx_t *c, uint32_t i) {
  return meld_pad_u32(c->p->pad, MELD_PAD_OFF_SCRATCH + 4u * i);
}

/* The last CTA's duty, by one thread, after every CTA has counted itself done: reset the
 * per-call scratch (ticket, queues, scratch words, the done count) and advance the call
 * counter. Plain stores: nobody of this call reads them any more, and the next call is a
 * later kernel (kernel boundaries order them). The new counter is the call's epoch (epoch =
 * counter + 1, read at entry; nobody else writes the counter during a call): no reload, whose
 * L2 round trip sat on every call's exit path (~0.3 us; session 21). */
MELD_DEV void meld_call_advance(const meld_proto_dev_t *p, uint64_t epoch, uint32_t first, uint32_t stride) {
  for (uint32_t off = MELD_PAD_OFF_QUEUES + 4u * first; off < MELD_PAD_OFF_SCRATCH + 4u * MELD_SCRATCH_WORDS;
       off += 4u * stride)
    *meld_pad_u32(p->pad, off) = 0u;
  if (first == 0) {
    *meld_pad_u32(p->pad, MELD_PAD_OFF_TICKET) = 0u;
    *meld_pad_u32(p->pad, MELD_PAD_OFF_DONE) = 0u;
    *meld_pad_u64(p->pad, MELD_PAD_OFF_COUNTER) = epoch; /* = meld_epoch_of_counter(counter) */
  }
}

/* Exit of a call, every thread of the CTA (contains __syncthreads). Always reached, also
 * after a failed begin or an abort: the done count must reach gridDim for the counter to
 * advance. The CTA must not touch the call's scratch after this. RELEASE (meld_call_end):
 * the count is acq_rel, releasing this CTA's scratch updates to the last CTA, which acquires
 * all of them before resetting (otherwise a late atomic could land after the reset); a kernel
 * whose CTAs write no scratch may count relaxed (coll_ll_end, the ZC kernel). */
template <bool RELEASE>
MELD_DEV void meld_call_end_count(meld_ctx_t *c) {
  meld_cta_shared_t *s = meld_cta_shared();
  /* bar.sync: every thread's use of the scratch is ordered before thread 0's count. */
  __syncthreads();
  const uint32_t nctas = gridDim.x * gridDim.y * gridDim.z;
  /* One CTA is the last: no count (its L2 round trip and GPU-scope release sat on the exit
   * path; the barrier above already orders this CTA's scratch updates before the reset). */
  if (nctas > 1) {
    if (threadIdx.x == 0) {
      uint32_t *done = meld_pad_u32(c->p->pad, MELD_PAD_OFF_DONE);
      const uint32_t before = RELEASE ? atom_add_acq_rel_gpu_u32(done, 1u) : atom_add_relaxed_gpu_u32(done, 1u);
      s->last = meld_is_last_cta(before, nctas) ? 1u : 0u;
    }
    __syncthreads();
    if (!s->last) return;
  }
  meld_call_advance(c->p, c->epoch, threadIdx.x, blockDim.x);
}
MELD_DEV void meld_call_end(meld_ctx_t *c) { meld_call_end_count<true>(c); }

/* The count of meld_call_end_thread alone: ONE thread, after the CTA's own barrier, counts the
 * CTA done (acq_rel) and returns 1 in the last CTA of the call, which has then acquired every
 * CTA's work, may act on it (e.g. read what the others left in the scratch words, publish
 * something for the whole call) and must then call meld_call_advance(c->p, c->epoch, 0, 1). */
MELD_DEV int meld_call_done_thread(meld_ctx_t *c) {
  const uint32_t nctas = gridDim.x * gridDim.y * gridDim.z;
  const uint32_t before = atom_add_acq_rel_gpu_u32(meld_pad_u32(c->p->pad, MELD_PAD_OFF_DONE), 1u);
  return meld_is_last_cta(before, nctas);
}

/* Exit for warp-specialized kernels: ONE thread calls it after the CTA's own barrier has
 * ordered every thread's work before it. Same effect as meld_call_end. */
MELD_DEV void meld_call_end_thread(meld_ctx_t *c) {
  if (meld_call_done_thread(c)) meld_call_advance(c->p, c->epoch, 0, 1);
}

/* Trace helpers bound to a ctx (one thread records). */
MELD_DEV uint64_t meld_trace_begin(const meld_ctx_t *c) { return meld_trace_now(&c->p->trace); }
MELD_DEV void meld_trace_end(const meld_ctx_t *c, int role, uint32_t item, uint64_t start_ns) {
  meld_trace_record(&c->p->trace, role, item, c->epoch, start_ns);
}

#endif /* MELD_DEVICE_LAUNCH_CUH */
