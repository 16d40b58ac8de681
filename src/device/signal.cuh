/* signal.cuh — signals, credits and guarded waits of the device protocol (DESIGN.md section 4).
 *
 * A fused kernel gets the comm's meld_proto_dev_t as a __grid_constant__ parameter and a
 * per-thread meld_ctx_t from meld_call_begin (launch.cuh). Then:
 *
 *   Producer (data written with ordinary stores by the CTA):
 *       write data into the consumer's workspace (peer pointer) ...
 *       __syncthreads();                                   // bar.sync: CTA's writes before
 *       if (threadIdx.x == 0)                              // ONE release (cumulative)
 *         meld_signal_put(&ctx, consumer, meld_signal_index(rank, nranks, ch, k, nk),
 *                         meld_stamp(ctx.epoch, 1));
 *   Producer (data written with cp.async.bulk by one thread):
 *       cp_async_bulk_s2g(...); cp_async_bulk_commit_group();
 *       cp_async_bulk_wait_group0();                       // NOT .read: writes completed
 *       __syncthreads(); if (threadIdx.x == 0) meld_signal_put(...);
 *   Consumer:
 *       if (!meld_cta_wait_signal(&ctx, index, meld_stamp(ctx.epoch, 1), producer, "A rows"))
 *         goto drain;                                      // aborted or timed out
 *       read the data (a thread reading it with cp.async.bulk first calls
 *       fence_proxy_async_gmem()).
 *
 * Nothing waits forever: every wait polls the local abort word on each spin, and every
 * MELD_WAIT_CHECK_EVERY spins reads %globaltimer against the comm's timeout (and, once the
 * wait is slow, the host-mapped abort word and mirrors what it waits for to the host). On
 * expiry the waiter claims the error record (one CAS per rank), raises the abort word here
 * and at every same-node peer, and returns false. A false return means: stop issuing new
 * work, drain what is in flight (bulk groups, wgmma, pipeline handshakes), reach
 * meld_call_end, return. Later waits of the same thread return false at once (ctx.failed).
 *
 * Standalone guards for code without a ctx (e.g. the GEMM engine's mbarrier loops):
 * meld_mbar_wait_raw / meld_wait_ge_raw take `const uint32_t *abort_word` and a timeout and
 * return MELD_WAIT_DONE / MELD_WAIT_ABORTED / MELD_WAIT_TIMEOUT without touching any record.
 */
#ifndef MELD_DEVICE_SIGNAL_CUH
#define MELD_DEVICE_SIGNAL_CUH

#include "common/proto.h"
#include "device/ptx.cuh"

/* Per-thread view of one call (filled by meld_call_begin; identical in all threads of a CTA
 * except `failed`, which a single-thread wait sets only in its own thread). */
typedef struct {
  const meld_proto_dev_t *p; /* the kernel's __grid_constant__ parameter                     */
  uint64_t epoch;            /* this call's epoch (same in every CTA of the call)             */
  uint32_t op;               /* MELD_OP_*                                                     */
  uint32_t arg_hash;         /* this rank's argument hash for the call                         */
  uint32_t ticket;           /* role ticket of this CTA (order in which CTAs started)          */
  int32_t role;              /* MELD_ROLE_*                                                    */
  uint32_t cta;              /* blockIdx.x                                                     */
  uint32_t failed;           /* nonzero once this thread saw an abort, a timeout or a mismatch */
} meld_ctx_t;

/* What a wait is for, for the error record and the mirror. label: a string literal in
 * device code (may be NULL). */
typedef struct {
  uint32_t region; /* MELD_REGION_*                                   */
  uint32_t index;  /* slot index in that region                       */
  int32_t peer;    /* rank expected to set it; -1 if unknown          */
  const char *label;
} meld_wait_info_t;

MELD_DEV meld_wait_info_t meld_wait_info(uint32_t region, uint32_t index, int peer, const char *label) {
  meld_wait_info_t w;
  w.region = region;
  w.index = index;
  w.peer = peer;
  w.label = label;
  return w;
}

/* ---- addresses ------------------------------------------------------------------------------ */

MELD_DEV uint32_t *meld_abort_word(const meld_proto_dev_t *p) {
  return (uint32_t *)(p->pad + MELD_PAD_OFF_ABORT);
}
MELD_DEV uint64_t *meld_pad_u64(uint8_t *pad, uint32_t offset) { return (uint64_t *)(pad + offset); }
/* Signal slot `index` in this rank's pad (where producers signal us). */
MELD_DEV uint64_t *meld_local_signal(const meld_ctx_t *c, uint32_t index) {
  return meld_pad_u64(c->p->pad, meld_pad_signal_offset(index));
}
/* Signal slot `index` in rank r's pad (same node only). */
MELD_DEV uint64_t *meld_peer_signal(const meld_ctx_t *c, int r, uint32_t index) {
  return meld_pad_u64(c->p->peer_pads[r], meld_pad_signal_offset(index));
}
MELD_DEV uint64_t *meld_local_credit(const meld_ctx_t *c, uint32_t index) {
  return meld_pad_u64(c->p->pad, meld_pad_credit_offset(index));
}
MELD_DEV uint64_t *meld_peer_credit(const meld_ctx_t *c, int r, uint32_t index) {
  return meld_pad_u64(c->p->peer_pads[r], meld_pad_credit_offset(index));
}

/* ---- abort and the error record -------------------------------------------------------------- */

/* Raises the abort word (first raiser wins: CAS from 0) here and at every same-node peer.
 * acq_rel: everything this thread wrote before (e.g. a re-posted argument hash) is visible
 * to a peer that observes the abort word and then fences. A failure path, inlined in every
 * wait: out of line in all of collectives.cu's waits the lean LL kernels were a quarter smaller
 * and 0.06-0.11 us faster a call, the ZC kernels 0.05-0.12 us slower (session 23 calls 9-10;
 * the LL wait's copy alone out of line gave half the LL gain); so the LL kernels' waits call
 * meld_raise_abort_outline and the others inline it. */
MELD_DEV void meld_raise_abort(const meld_proto_dev_t *p, uint32_t code) {
  atom_cas_acq_rel_sys_u32(meld_abort_word(p), 0u, code);
  for (int r = 0; r < p->nranks; r++) {
    uint8_t *peer = r == p->rank ? (uint8_t *)0 : p->peer_pads[r];
    if (peer) atom_cas_acq_rel_sys_u32((uint32_t *)(peer + MELD_PAD_OFF_ABORT), 0u, code);
  }
}
/* The same, never inlined: for the waits of the LL kernels (meld_wait_impl<true>, coll_ll_wait).
 * A template only for its linkage (one definition however many translation units include it). */
template <int = 0>
__device__ __noinline__ void meld_raise_abort_outline(const meld_proto_dev_t *p, uint32_t code) { meld_raise_abort(p, code); }

/* The error record and the abort of a failure (meld_fail's body). A translation unit that
 * defines MELD_FAIL_OUTLINE before including this header gets it out of line: it runs at most
 * once per failing thread, and inlined at every failure site it puts hundreds of cold
 * instructions between the hot ones, so a short call's path spans more instruction-cache lines
 * (collectives.cu, session 21). The GEMM kernels keep it inline: a call there fails register
 * allocation (setmaxnreg warpgroups, wgmma). Scalars by value: no caller's ctx in memory. */
#ifdef MELD_FAIL_OUTLINE
#define MELD_FAIL_RECORD_FN __device__ __noinline__
#else
#define MELD_FAIL_RECORD_FN MELD_DEV
#endif
MELD_FAIL_RECORD_FN void meld_fail_record(const meld_proto_dev_t *p, uint32_t op, uint32_t cta, int32_t role,
                                              uint64_t epoch, uint32_t kind, uint32_t region, uint32_t index,
                                              int32_t peer, const char *label, uint64_t expected, uint64_t observed,
                                              uint64_t waited_ns, uint32_t abort_seen) {
  if (atom_cas_acq_rel_sys_u32((uint32_t *)(p->pad + MELD_PAD_OFF_CLAIM), 0u, 1u) == 0u) {
    volatile meld_error_record_t *r = p->record;
    r->op = op;
    r->rank = p->rank;
    r->cta = (int32_t)cta;
    r->role = role;
    r->peer = peer;
    r->region = region;
    r->index = index;
    r->expected = expected;
    r->observed = observed;
    r->epoch = epoch;
    r->waited_ns = waited_ns;
    r->abort_word = abort_seen;
    int i = 0;
    if (label)
      for (; i < MELD_RECORD_LABEL_BYTES - 1 && label[i]; i++) r->label[i] = label[i];
    r->label[i] = 0;
    /* The fields above are host-mapped stores; the host reads them after it sees kind != 0.
     * fence.sc.sys orders them before the release of kind (the release alone would do; the
     * fence also drains them toward the host promptly). */
    fence_sc_sys();
    st_release_sys_u32((uint32_t *)&p->record->kind, kind);
  }
  if (kind == MELD_FAIL_TIMEOUT) meld_raise_abort(p, meld_abort_code(MELD_ABORT_TIMEOUT, p->rank));
  if (kind == MELD_FAIL_ARGS) meld_raise_abort(p, meld_abort_code(MELD_ABORT_ARGS, p->rank));
  if (kind == MELD_FAIL_INPUT) meld_raise_abort(p, meld_abort_code(MELD_ABORT_INPUT, p->rank));
}

/* Marks this thread failed; the first failing thread of the rank claims the error record
 * (CAS on the pad's claim word) and fills it; a timeout or a mismatch raises the abort word
 * here and at every same-node peer. */
MELD_DEV void meld_fail(meld_ctx_t *c, uint32_t kind, meld_wait_info_t w, uint64_t expected,
                        uint64_t observed, uint64_t waited_ns, uint32_t abort_seen) {
  c->failed = 1;
  meld_fail_record(c->p, c->op, c->cta, c->role, c->epoch, kind, w.region, w.index, w.peer, w.label, expected,
                   observed, waited_ns, abort_seen);
}

/* ---- the wait loop ---------------------------------------------------------------------------- */

enum { MELD_CMP_GE = 0, MELD_CMP_ARGS = 1 };

MELD_DEV int meld_cmp_reached(int cmp, uint64_t v, uint64_t target) {
  return cmp == MELD_CMP_ARGS ? meld_args_arrived(v, target) : meld_stamp_reached(v, target);
}

MELD_DEV void meld_mirror_set(const meld_ctx_t *c, meld_wait_info_t w, uint64_t target, uint64_t since) {
  if (c->cta >= MELD_MIRROR_CTAS) return;
  meld_wait_mirror_t *m = c->p->mirror + c->cta;
  st_relaxed_sys_u32(&m->op, c->op);
  st_relaxed_sys_u32((uint32_t *)&m->role, (uint32_t)c->role);
  st_relaxed_sys_u32((uint32_t *)&m->peer, (uint32_t)w.peer);
  st_relaxed_sys_u32(&m->region, w.region);
  st_relaxed_sys_u32(&m->index, w.index);
  st_relaxed_sys_u64(&m->target, target);
  st_relaxed_sys_u64(&m->epoch, c->epoch);
  st_relaxed_sys_u64(&m->since_ns, since);
  st_release_sys_u32(&m->state, 1u); /* the fields above before the state the host tests */
}
MELD_DEV void meld_mirror_clear(const meld_ctx_t *c) {
  if (c->cta < MELD_MIRROR_CTAS) st_relaxed_sys_u32(&c->p->mirror[c->cta].state, 0u);
}

/* The acquire that ends a successful wait: the thread's relaxed load saw the producer's
 * st.release.sys, and one fence.acquire.sys after it makes that an acquire pattern (session 26;
 * bench/bench_fence.cu: 133 ns, no memory access; an ld.acquire.sys re-read of the slot, the
 * form of sessions 10-25, costs a round trip to the slot, 287 ns on a local word; the
 * fence.acq_rel.sys before that, 640 ns and more after stores, since its release half waits
 * for the thread's earlier writes). */
MELD_DEV void meld_acquire_seen(void) { fence_acquire_sys(); }

/* One thread waits until *slot reaches target (cmp: stamp >=, or argument post of epoch
 * `target`). On success returns true with acquire ordering (meld_acquire_seen after the
 * relaxed load that saw the value) and *observed = the value. On abort or timeout fills the
 * record (see meld_fail) and returns false. `slot` must be in this GPU's memory (spin only on
 * local memory; peers write into it). */
template <bool OUTLINE_RAISE = false>
MELD_DEV bool meld_wait_impl(meld_ctx_t *c, const uint64_t *slot, uint64_t target, int cmp,
                             meld_wait_info_t info, uint64_t *observed) {
  if (c->failed) return false;
  const meld_proto_dev_t *p = c->p;
  const uint32_t *abort_word = meld_abort_word(p);
  uint64_t v = ld_relaxed_sys_u64(slot);
  if (meld_cmp_reached(cmp, v, target)) {
    meld_acquire_seen(); /* pairs with the producer's st.release.sys: its data is visible now */
    *observed = v;
    return true;
  }
  meld_wait_state_t w;
  meld_wait_start(&w, globaltimer_ns(), p->timeout_ns);
  uint32_t ab = 0;
  int outcome = MELD_WAIT_PENDING;
  uint64_t now = w.start_ns;
  while (outcome == MELD_WAIT_PENDING) {
    /* The slot every spin; the abort word (one line that EVERY waiter of this GPU reads) only
     * every MELD_WAIT_CHECK_EVERY spins, and a short sleep once the wait is not short: on one
     * H200, 264 waiters spinning on it made a GEMM running beside them 100x slower (session 7;
     * the line's L2 slice saturates). */
    v = ld_relaxed_sys_u64(slot);
    if (meld_cmp_reached(cmp, v, target)) {
      outcome = MELD_WAIT_DONE;
    } else if (meld_wait_tick(&w)) {
      if ((ab = ld_relaxed_sys_u32(abort_word)) != 0u) {
        outcome = MELD_WAIT_ABORTED;
        break;
      }
      now = globaltimer_ns();
      if (meld_wait_should_mirror(&w, now)) {
        meld_mirror_set(c, info, target, w.start_ns);
        w.mirrored = 1;
      }
      if (w.mirrored && (w.spins / MELD_WAIT_CHECK_EVERY) % MELD_WAIT_HOST_EVERY == 0) {
        /* A slow wait: also poll the host's abort word (a PCIe read, so only here, and only
         * every MELD_WAIT_HOST_EVERY clock checks: hundreds of waiters may be slow at once).
         * The host cannot reliably write device memory while this kernel spins; this is how
         * meld_comm_abort reaches a stuck kernel. Propagate it to the pad words. */
        ab = ld_relaxed_sys_u32(p->host_abort);
        if (ab) {
          if (OUTLINE_RAISE) meld_raise_abort_outline<>(p, ab);
          else meld_raise_abort(p, ab);
          outcome = MELD_WAIT_ABORTED;
        }
      }
      if (outcome == MELD_WAIT_PENDING && meld_wait_expired(&w, now)) outcome = MELD_WAIT_TIMEOUT;
    }
    nanosleep_ns(w.spins > MELD_WAIT_CHECK_EVERY ? MELD_WAIT_SLEEP_NS : 0u);
  }
  if (w.mirrored) meld_mirror_clear(c);
  if (outcome == MELD_WAIT_DONE) {
    meld_acquire_seen();
    *observed = v;
    return true;
  }
  /* Acquire side of fence-based synchronization: the relaxed load that saw the abort word
   * (raised with acq_rel) happened before this fence, so the raiser's earlier writes are
   * visible after it. */
  fence_acq_rel_sys();
  if (outcome == MELD_WAIT_ABORTED) {
    /* The value may have been published before the abort (a peer posts its argument hash,
     * then raises the abort on a mismatch): re-read once, after the fence. */
    v = ld_relaxed_sys_u64(slot);
    if (meld_cmp_reached(cmp, v, target)) {
      fence_acq_rel_sys();
      outcome = MELD_WAIT_DONE;
    }
  }
  *observed = v;
  if (outcome == MELD_WAIT_DONE) return true;
  now = globaltimer_ns();
  if (outcome == MELD_WAIT_TIMEOUT)
    meld_fail(c, MELD_FAIL_TIMEOUT, info, target, v, now - w.start_ns, 0u);
  else
    meld_fail(c, MELD_FAIL_ABORTED, info, target, v, now - w.start_ns, ab);
  return false;
}

/* One thread waits until the 64-bit slot (this GPU's memory) holds a stamp >= target. */
MELD_DEV bool meld_wait_ge(meld_ctx_t *c, const uint64_t *slot, uint64_t target, meld_wait_info_t info) {
  uint64_t v;
  return meld_wait_impl(c, slot, target, MELD_CMP_GE, info, &v);
}

/* One thread waits for signal slot `index` of this rank's pad (set by rank `from`). */
MELD_DEV bool meld_wait_signal(meld_ctx_t *c, uint32_t index, uint64_t stamp, int from, const char *label) {
  return meld_wait_ge(c, meld_local_signal(c, index), stamp,
                      meld_wait_info(MELD_REGION_SIGNAL, index, from, label));
}
/* One thread waits for credit slot `index` of this rank's pad (set by consumer `from`). */
MELD_DEV bool meld_wait_credit(meld_ctx_t *c, uint32_t index, uint64_t stamp, int from, const char *label) {
  return meld_wait_ge(c, meld_local_credit(c, index), stamp,
                      meld_wait_info(MELD_REGION_CREDIT, index, from, label));
}

/* The whole CTA waits: thread 0 spins, then bar.sync (bar.red) hands the acquired view and
 * the outcome to every thread. Returns the same value in all threads. 1-D blocks. */
MELD_DEV bool meld_cta_wait_signal(meld_ctx_t *c, uint32_t index, uint64_t stamp, int from, const char *label) {
  int ok = 1;
  if (threadIdx.x == 0) ok = meld_wait_signal(c, index, stamp, from, label);
  /* Causality: producer release -> thread 0's acquire fence -> barrier -> other threads. */
  ok = __syncthreads_and(ok);
  if (!ok) c->failed = 1;
  return ok != 0;
}
MELD_DEV bool meld_cta_wait_credit(meld_ctx_t *c, uint32_t index, uint64_t stamp, int from, const char *label) {
  int ok = 1;
  if (threadIdx.x == 0) ok = meld_wait_credit(c, index, stamp, from, label);
  ok = __syncthreads_and(ok);
  if (!ok) c->failed = 1;
  return ok != 0;
}

/* ---- publishing --------------------------------------------------------------------------- */

/* ONE thread publishes `stamp` in signal slot `index` of rank `to` (same node; `to` may be
 * this rank). Before it: the data is written (ordinary stores by other threads: bar.sync
 * first; bulk stores: the issuing thread's cp_async_bulk_wait_group0, then bar.sync). The
 * release is cumulative, so it covers every write this thread observed. */
MELD_DEV void meld_signal_put(const meld_ctx_t *c, int to, uint32_t index, uint64_t stamp) {
  st_release_sys_u64(meld_peer_signal(c, to, index), stamp);
}
/* ONE thread returns a credit to producer `to` after the last read of the slot (for data
 * read with ordinary loads by other threads: bar.sync first, so the reads happen before the
 * release; for a bulk read into shared memory: after its mbarrier completed). */
MELD_DEV void meld_credit_put(const meld_ctx_t *c, int to, uint32_t index, uint64_t stamp) {
  st_release_sys_u64(meld_peer_credit(c, to, index), stamp);
}

/* ---- mbarrier waits with the same guard ------------------------------------------------------ */

/* Standalone guard: waits for phase `parity` of the mbarrier at shared address `bar`,
 * polling *abort_word (may be NULL) each probe and %globaltimer every MELD_WAIT_CHECK_EVERY
 * probes. Returns MELD_WAIT_DONE, MELD_WAIT_ABORTED or MELD_WAIT_TIMEOUT; it records nothing
 * (the caller, on TIMEOUT, should reach a ctx and call meld_fail, or raise the abort). */
MELD_DEV int meld_mbar_wait_raw(uint32_t bar, uint32_t parity, const uint32_t *abort_word,
                                uint64_t timeout_ns) {
  if (mbarrier_try_wait_parity_cta(bar, parity)) return MELD_WAIT_DONE;
  meld_wait_state_t w;
  meld_wait_start(&w, globaltimer_ns(), timeout_ns);
  for (;;) {
    if (mbarrier_try_wait_parity_cta(bar, parity)) return MELD_WAIT_DONE;
    if (meld_wait_tick(&w)) { /* (the shared abort word only now and then: see meld_wait_impl) */
      if (abort_word && ld_relaxed_sys_u32(abort_word)) return MELD_WAIT_ABORTED;
      if (meld_wait_expired(&w, globaltimer_ns())) return MELD_WAIT_TIMEOUT;
    }
  }
}

/* Standalone guard for a 64-bit flag in this GPU's memory: waits until *slot >= target with
 * the same polling; *observed gets the last value. Acquire ordering on MELD_WAIT_DONE. */
MELD_DEV int meld_wait_ge_raw(const uint64_t *slot, uint64_t target, const uint32_t *abort_word,
                              uint64_t timeout_ns, uint64_t *observed) {
  uint64_t v = ld_relaxed_sys_u64(slot);
  meld_wait_state_t w;
  meld_wait_start(&w, globaltimer_ns(), timeout_ns);
  int outcome = MELD_WAIT_PENDING;
  while (outcome == MELD_WAIT_PENDING) {
    if (meld_stamp_reached(v, target)) outcome = MELD_WAIT_DONE;
    else if (meld_wait_tick(&w) && abort_word && ld_relaxed_sys_u32(abort_word)) outcome = MELD_WAIT_ABORTED;
    else if ((w.spins % MELD_WAIT_CHECK_EVERY) == 0 && meld_wait_expired(&w, globaltimer_ns())) outcome = MELD_WAIT_TIMEOUT;
    else {
      if (w.spins > MELD_WAIT_CHECK_EVERY) nanosleep_ns(MELD_WAIT_SLEEP_NS);
      v = ld_relaxed_sys_u64(slot);
    }
  }
  if (outcome == MELD_WAIT_DONE) meld_acquire_seen(); /* pairs with the setter's release */
  else fence_acq_rel_sys();
  *observed = v;
  return outcome;
}

/* mbarrier wait with a ctx: also polls the host abort word once slow, and on failure fills
 * the record (region MBARRIER, index = the barrier's shared address) like a flag wait. Any
 * number of threads may call it. */
MELD_DEV bool meld_mbar_wait(meld_ctx_t *c, uint32_t bar, uint32_t parity, const char *label) {
  if (c->failed) return false;
  if (mbarrier_try_wait_parity_cta(bar, parity)) return true;
  const meld_proto_dev_t *p = c->p;
  meld_wait_state_t w;
  meld_wait_start(&w, globaltimer_ns(), p->timeout_ns);
  uint32_t ab = 0;
  int outcome = MELD_WAIT_PENDING;
  while (outcome == MELD_WAIT_PENDING) {
    if (mbarrier_try_wait_parity_cta(bar, parity)) {
      outcome = MELD_WAIT_DONE;
    } else if (meld_wait_tick(&w)) { /* (the shared abort word only now and then) */
      const uint64_t now = globaltimer_ns();
      if ((ab = ld_relaxed_sys_u32(meld_abort_word(p))) != 0u) {
        outcome = MELD_WAIT_ABORTED;
      } else if (now - w.start_ns >= MELD_WAIT_MIRROR_AFTER_NS && (ab = ld_relaxed_sys_u32(p->host_abort)) != 0u) {
        meld_raise_abort(p, ab);
        outcome = MELD_WAIT_ABORTED;
      } else if (meld_wait_expired(&w, now)) {
        outcome = MELD_WAIT_TIMEOUT;
      }
    }
  }
  if (outcome == MELD_WAIT_DONE) return true;
  const meld_wait_info_t info = meld_wait_info(MELD_REGION_MBARRIER, bar, -1, label);
  const uint64_t waited = globaltimer_ns() - w.start_ns;
  meld_fail(c, outcome == MELD_WAIT_TIMEOUT ? MELD_FAIL_TIMEOUT : MELD_FAIL_ABORTED, info, parity, 0,
            waited, ab);
  return false;
}

#endif /* MELD_DEVICE_SIGNAL_CUH */
