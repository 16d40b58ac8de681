/* test_proto_threads.c — the device protocol's arithmetic (src/common/proto.h) run on CPU
 * threads with C11 atomics: simulated ranks x CTAs with random delays, 10,000 back-to-back
 * calls verified every round (ring-of-slots credits, argument handshake, work queue, the
 * last CTA advancing the epoch), a rank that stops (the others abort within the deadline,
 * each rank's error record claimed exactly once), and mismatched argument hashes.
 *
 * The CPU loops mirror src/device/signal.cuh and launch.cuh step by step, on the same
 * proto.h functions and the same pad offsets; GPU ld.relaxed.sys + fence.acq_rel.sys become
 * acquire loads (ThreadSanitizer does not model standalone fences), st.release.sys become
 * release stores. `make test-tsan` runs this file under ThreadSanitizer: a missing
 * happens-before edge in the protocol (e.g. a producer overwriting a ring slot before the
 * consumer's credit) is reported as a data race on the plain staging words. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/proto.h"

/* ---- the simulated world ------------------------------------------------------------------- */

#define NR 4          /* ranks                                */
#define NC 4          /* CTAs (threads) per rank              */
#define NCOMM 2       /* ticket 0 produces, ticket 1 consumes */
#define RING 2        /* staging ring slots per stream        */
#define MAX_CHUNKS 5  /* chunks per call: 1 + call % 5        */
#define CHUNK_WORDS 8
#define NITEMS 24     /* compute work items per call          */

typedef struct {
  uint32_t kind, op;
  int rank, cta, role, peer;
  uint32_t region, index;
  uint64_t expected, observed, epoch;
  uint32_t abort_word;
} sim_record_t;

typedef struct {
  uint8_t *pad;                                /* MELD_PAD_BYTES, accessed atomically      */
  uint64_t staging[RING][CHUNK_WORDS];         /* written by rank r-1's producer (plain)   */
  uint64_t out[MAX_CHUNKS][CHUNK_WORDS];       /* consumer's output (plain)                */
  uint64_t compute_out[NITEMS];                /* compute items (plain)                    */
  sim_record_t record;                         /* host-mapped analog: fields plain...      */
  _Atomic uint32_t record_kind;                /* ...published by a release of the kind    */
  atomic_int claims;                           /* successful claims (must be <= 1)         */
  _Atomic uint32_t host_abort;                 /* meld_comm_abort analog                   */
} sim_rank_t;

typedef struct {
  sim_rank_t rank[NR];
  int ncalls;
  uint64_t timeout_ns[NR];
  int stop_rank, stop_call;                    /* stop_rank never launches call stop_call  */
  int bad_rank, bad_call;                      /* bad_rank hashes call bad_call differently */
  atomic_long errors;                          /* verification failures                    */
  atomic_long verified;                        /* calls verified by a last CTA             */
  char first_error[256];
  atomic_int first_error_set;
  uint64_t fail_ns[NR];                        /* when each rank's failed call ended       */
  atomic_int failed_calls[NR];
} sim_world_t;

typedef struct {
  sim_world_t *w;
  int rank, cta;
  uint64_t rng;
} sim_thread_t;

typedef struct {
  sim_world_t *w;
  sim_rank_t *me;
  int rank, cta;
  uint64_t epoch;
  uint32_t ticket, hash;
  int role;
  int failed;
  uint64_t timeout_ns;
} sim_ctx_t;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static _Atomic uint64_t *a64(uint8_t *pad, uint32_t off) { return (_Atomic uint64_t *)(void *)(pad + off); }
static _Atomic uint32_t *a32(uint8_t *pad, uint32_t off) { return (_Atomic uint32_t *)(void *)(pad + off); }

static uint64_t rnd(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 0x2545F4914F6CDD1Dull;
}

/* Random delays at protocol points: mostly nothing, sometimes a yield, rarely a sleep. */
static void jitter(uint64_t *s) {
  uint64_t r = rnd(s) & 63;
  if (r < 6) sched_yield();
  else if (r == 6) usleep((useconds_t)(rnd(s) % 40));
}

static void world_error(sim_world_t *w, const char *fmt, ...) {
  atomic_fetch_add(&w->errors, 1);
  if (atomic_exchange(&w->first_error_set, 1) == 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->first_error, sizeof w->first_error, fmt, ap);
    va_end(ap);
  }
}

static uint64_t chunk_data(uint64_t epoch, int src, uint32_t k, int i) {
  return (epoch * 1000003u) ^ ((uint64_t)src << 48) ^ ((uint64_t)k << 32) ^ (uint64_t)(i * 7919 + 1);
}
static uint64_t item_data(uint64_t epoch, int rank, uint32_t item) {
  return epoch * 31u + (uint64_t)rank * 1000u + item;
}
static uint32_t chunks_of_call(uint64_t epoch) { return 1u + (uint32_t)(epoch % MAX_CHUNKS); }

/* ---- the CPU mirror of signal.cuh --------------------------------------------------------- */

static void sim_raise_abort(sim_world_t *w, uint32_t code) {
  for (int r = 0; r < NR; r++) {
    uint32_t zero = 0;
    atomic_compare_exchange_strong_explicit(a32(w->rank[r].pad, MELD_PAD_OFF_ABORT), &zero, code,
                                            memory_order_acq_rel, memory_order_acquire);
  }
}

static void sim_fail(sim_ctx_t *c, uint32_t kind, uint32_t region, uint32_t index, int peer, uint64_t expected,
                     uint64_t observed, uint32_t abort_seen) {
  c->failed = 1;
  uint32_t zero = 0;
  if (atomic_compare_exchange_strong_explicit(a32(c->me->pad, MELD_PAD_OFF_CLAIM), &zero, 1u,
                                              memory_order_acq_rel, memory_order_acquire)) {
    atomic_fetch_add(&c->me->claims, 1);
    sim_record_t *r = &c->me->record;
    r->op = MELD_OP_TEST_SIGNAL;
    r->rank = c->rank;
    r->cta = c->cta;
    r->role = c->role;
    r->peer = peer;
    r->region = region;
    r->index = index;
    r->expected = expected;
    r->observed = observed;
    r->epoch = c->epoch;
    r->abort_word = abort_seen;
    atomic_store_explicit(&c->me->record_kind, kind, memory_order_release);
  }
  if (kind == MELD_FAIL_TIMEOUT) sim_raise_abort(c->w, meld_abort_code(MELD_ABORT_TIMEOUT, c->rank));
  if (kind == MELD_FAIL_ARGS) sim_raise_abort(c->w, meld_abort_code(MELD_ABORT_ARGS, c->rank));
}

enum { CMP_GE = 0, CMP_ARGS = 1 };
static int cmp_reached(int cmp, uint64_t v, uint64_t target) {
  return cmp == CMP_ARGS ? meld_args_arrived(v, target) : meld_stamp_reached(v, target);
}

/* meld_wait_impl on the CPU. */
static int sim_wait(sim_ctx_t *c, _Atomic uint64_t *slot, uint64_t target, int cmp, uint32_t region,
                    uint32_t index, int peer, uint64_t *observed) {
  if (c->failed) return 0;
  _Atomic uint32_t *abort_word = a32(c->me->pad, MELD_PAD_OFF_ABORT);
  uint64_t v = atomic_load_explicit(slot, memory_order_acquire);
  if (cmp_reached(cmp, v, target)) {
    *observed = v;
    return 1;
  }
  meld_wait_state_t w;
  meld_wait_start(&w, now_ns(), c->timeout_ns);
  uint32_t ab = 0;
  int outcome = MELD_WAIT_PENDING;
  while (outcome == MELD_WAIT_PENDING) {
    v = atomic_load_explicit(slot, memory_order_acquire);
    ab = atomic_load_explicit(abort_word, memory_order_acquire);
    if (cmp_reached(cmp, v, target)) {
      outcome = MELD_WAIT_DONE;
    } else if (ab) {
      outcome = MELD_WAIT_ABORTED;
    } else {
      sched_yield(); /* 16 threads on 2 cores */
      if (meld_wait_tick(&w)) {
        uint64_t now = now_ns();
        if (meld_wait_should_mirror(&w, now)) w.mirrored = 1;
        if (w.mirrored && (ab = atomic_load_explicit(&c->me->host_abort, memory_order_acquire)) != 0) {
          sim_raise_abort(c->w, ab);
          outcome = MELD_WAIT_ABORTED;
        } else if (meld_wait_expired(&w, now)) {
          outcome = MELD_WAIT_TIMEOUT;
        }
      }
    }
  }
  if (outcome == MELD_WAIT_ABORTED) {
    v = atomic_load_explicit(slot, memory_order_acquire); /* published before the abort? */
    if (cmp_reached(cmp, v, target)) outcome = MELD_WAIT_DONE;
  }
  *observed = v;
  if (outcome == MELD_WAIT_DONE) return 1;
  sim_fail(c, outcome == MELD_WAIT_TIMEOUT ? MELD_FAIL_TIMEOUT : MELD_FAIL_ABORTED, region, index, peer, target, v,
           ab);
  return 0;
}

/* ---- the CPU mirror of launch.cuh --------------------------------------------------------- */

static void sim_args_post(sim_ctx_t *c) {
  uint64_t v = meld_args_pack(c->epoch, c->hash);
  for (int r = 0; r < NR; r++)
    if (r != c->rank)
      atomic_store_explicit(a64(c->w->rank[r].pad, meld_pad_args_offset(c->rank, c->epoch)), v,
                            memory_order_release);
}

/* meld_args_check_peer: 1 arrived and equal, 0 not arrived, -1 mismatch (failed). */
static int sim_args_check_peer(sim_ctx_t *c, int r) {
  uint64_t v = atomic_load_explicit(a64(c->me->pad, meld_pad_args_offset(r, c->epoch)), memory_order_acquire);
  if (!meld_args_arrived(v, c->epoch)) return 0;
  if (meld_args_hash(v) == c->hash) return 1;
  sim_args_post(c);
  sim_fail(c, MELD_FAIL_ARGS, MELD_REGION_ARGS, (uint32_t)r, r, c->hash, meld_args_hash(v), 0);
  return -1;
}

/* meld_args_verify on the CPU. */
static int sim_args_verify(sim_ctx_t *c) {
  _Atomic uint32_t *abort_word = a32(c->me->pad, MELD_PAD_OFF_ABORT);
  int next = 0, started = 0;
  meld_wait_state_t w = {0, 0, 0, 0};
  for (;;) {
    for (; next < NR; next++) {
      if (next == c->rank) continue;
      int st = sim_args_check_peer(c, next);
      if (st < 0) return 0;
      if (st == 0) break;
    }
    if (next >= NR) return 1;
    if (!started) {
      meld_wait_start(&w, now_ns(), c->timeout_ns);
      started = 1;
    }
    sched_yield();
    uint32_t ab = atomic_load_explicit(abort_word, memory_order_acquire);
    uint32_t kind = MELD_FAIL_NONE;
    if (!ab && meld_wait_tick(&w)) {
      uint64_t now = now_ns();
      if (meld_wait_should_mirror(&w, now)) w.mirrored = 1;
      if (w.mirrored && (ab = atomic_load_explicit(&c->me->host_abort, memory_order_acquire)) != 0)
        sim_raise_abort(c->w, ab);
      else if (meld_wait_expired(&w, now))
        kind = MELD_FAIL_TIMEOUT;
    }
    if (ab) {
      for (int r = next; r < NR; r++)
        if (r != c->rank && sim_args_check_peer(c, r) < 0) return 0;
      kind = MELD_FAIL_ABORTED;
    }
    if (kind != MELD_FAIL_NONE) {
      uint64_t v = atomic_load_explicit(a64(c->me->pad, meld_pad_args_offset(next, c->epoch)), memory_order_acquire);
      sim_fail(c, kind, MELD_REGION_ARGS, (uint32_t)next, next, c->epoch, v, ab);
      return 0;
    }
  }
}

static int sim_call_begin(sim_ctx_t *c, uint32_t hash) {
  uint8_t *pad = c->me->pad;
  c->hash = hash;
  c->failed = 0;
  c->ticket = atomic_fetch_add_explicit(a32(pad, MELD_PAD_OFF_TICKET), 1u, memory_order_relaxed);
  c->epoch = meld_epoch_of_counter(atomic_load_explicit(a64(pad, MELD_PAD_OFF_COUNTER), memory_order_relaxed));
  c->role = meld_role_of_ticket(c->ticket, NCOMM);
  uint32_t ab = atomic_load_explicit(a32(pad, MELD_PAD_OFF_ABORT), memory_order_acquire);
  if (ab) {
    if (meld_abort_reason(ab) == MELD_ABORT_ARGS)
      for (int r = 0; r < NR; r++)
        if (r != c->rank && sim_args_check_peer(c, r) < 0) return 0;
    sim_fail(c, MELD_FAIL_ABORTED, MELD_REGION_NONE, 0, -1, 0, 0, ab);
    return 0;
  }
  if (c->ticket == 0) sim_args_post(c);
  return sim_args_verify(c);
}

/* The last CTA verifies the whole call of its rank, then resets the scratch and advances
 * the counter (release: the next call's threads acquire it at their "launch"). */
/* Scratch word 1: a CTA of this call failed (aborted mid-call: its share of the data is
 * missing, so the last CTA must not verify the call even if it did not fail itself). */
#define SIM_SCRATCH_FAILED (MELD_PAD_OFF_SCRATCH + 4u)
static void sim_call_end(sim_ctx_t *c, int call_ok_expected) {
  uint8_t *pad = c->me->pad;
  if (c->failed) atomic_fetch_or_explicit(a32(pad, SIM_SCRATCH_FAILED), 1u, memory_order_relaxed);
  uint32_t before = atomic_fetch_add_explicit(a32(pad, MELD_PAD_OFF_DONE), 1u, memory_order_acq_rel);
  if (!meld_is_last_cta(before, NC)) return;
  sim_world_t *w = c->w;
  if (call_ok_expected && !atomic_load_explicit(a32(pad, SIM_SCRATCH_FAILED), memory_order_relaxed)) {
    uint64_t e = c->epoch;
    int src = (c->rank + NR - 1) % NR;
    for (uint32_t k = 0; k < chunks_of_call(e); k++)
      for (int i = 0; i < CHUNK_WORDS; i++)
        if (c->me->out[k][i] != chunk_data(e, src, k, i))
          world_error(w, "rank %d call %llu: chunk %u word %d is %llx, expected %llx", c->rank,
                      (unsigned long long)e, k, i, (unsigned long long)c->me->out[k][i],
                      (unsigned long long)chunk_data(e, src, k, i));
    for (uint32_t t = 0; t < NITEMS; t++)
      if (c->me->compute_out[t] != item_data(e, c->rank, t))
        world_error(w, "rank %d call %llu: item %u stale", c->rank, (unsigned long long)e, t);
    uint32_t cnt = atomic_load_explicit(a32(pad, MELD_PAD_OFF_SCRATCH), memory_order_relaxed);
    if (cnt != NITEMS) world_error(w, "rank %d call %llu: %u items counted", c->rank, (unsigned long long)e, cnt);
    atomic_fetch_add(&w->verified, 1);
  }
  for (uint32_t off = MELD_PAD_OFF_QUEUES; off < MELD_PAD_OFF_SCRATCH + 4u * MELD_SCRATCH_WORDS; off += 4)
    atomic_store_explicit(a32(pad, off), 0u, memory_order_relaxed);
  atomic_store_explicit(a32(pad, MELD_PAD_OFF_TICKET), 0u, memory_order_relaxed);
  atomic_store_explicit(a32(pad, MELD_PAD_OFF_DONE), 0u, memory_order_relaxed);
  uint64_t counter = atomic_load_explicit(a64(pad, MELD_PAD_OFF_COUNTER), memory_order_relaxed);
  atomic_store_explicit(a64(pad, MELD_PAD_OFF_COUNTER), counter + 1u, memory_order_release);
}

/* ---- one call of the simulated op --------------------------------------------------------- */

static void sim_produce(sim_ctx_t *c, uint64_t *rng) {
  int dst = (c->rank + 1) % NR;
  sim_rank_t *to = &c->w->rank[dst];
  for (uint32_t k = 0; k < chunks_of_call(c->epoch) && !c->failed; k++) {
    uint32_t slot = meld_ring_slot(k, RING);
    uint32_t cidx = meld_credit_index(dst, NR, 0, slot, RING);
    uint64_t need = meld_ring_credit_needed(c->epoch, k, RING);
    uint64_t v;
    if (need && !sim_wait(c, a64(c->me->pad, meld_pad_credit_offset(cidx)), need, CMP_GE, MELD_REGION_CREDIT,
                          cidx, dst, &v))
      return;
    for (int i = 0; i < CHUNK_WORDS; i++) {
      to->staging[slot][i] = chunk_data(c->epoch, c->rank, k, i); /* plain: TSan checks it */
      if (i == CHUNK_WORDS / 2) jitter(rng);
    }
    uint32_t sidx = meld_signal_index(c->rank, NR, 0, slot, RING);
    atomic_store_explicit(a64(to->pad, meld_pad_signal_offset(sidx)), meld_ring_data_stamp(c->epoch, k, RING),
                          memory_order_release);
    jitter(rng);
  }
}

static void sim_consume(sim_ctx_t *c, uint64_t *rng) {
  int src = (c->rank + NR - 1) % NR;
  for (uint32_t k = 0; k < chunks_of_call(c->epoch) && !c->failed; k++) {
    uint32_t slot = meld_ring_slot(k, RING);
    uint32_t sidx = meld_signal_index(src, NR, 0, slot, RING);
    uint64_t v;
    if (!sim_wait(c, a64(c->me->pad, meld_pad_signal_offset(sidx)), meld_ring_data_stamp(c->epoch, k, RING),
                  CMP_GE, MELD_REGION_SIGNAL, sidx, src, &v))
      return;
    for (int i = 0; i < CHUNK_WORDS; i++) {
      uint64_t x = c->me->staging[slot][i];
      if (x != chunk_data(c->epoch, src, k, i))
        world_error(c->w, "rank %d call %llu chunk %u word %d: read %llx (stale or torn)", c->rank,
                    (unsigned long long)c->epoch, k, i, (unsigned long long)x);
      c->me->out[k][i] = x;
      if (i == 1) jitter(rng);
    }
    uint32_t cidx = meld_credit_index(c->rank, NR, 0, slot, RING);
    atomic_store_explicit(a64(c->w->rank[src].pad, meld_pad_credit_offset(cidx)),
                          meld_ring_credit_stamp(c->epoch, k, RING), memory_order_release);
  }
}

static void sim_compute(sim_ctx_t *c, uint64_t *rng) {
  uint8_t *pad = c->me->pad;
  for (;;) {
    uint32_t t = atomic_fetch_add_explicit(a32(pad, MELD_PAD_OFF_QUEUES), 1u, memory_order_relaxed);
    if (t >= NITEMS) break;
    c->me->compute_out[t] = item_data(c->epoch, c->rank, t);
    atomic_fetch_add_explicit(a32(pad, MELD_PAD_OFF_SCRATCH), 1u, memory_order_relaxed);
    if ((t & 7) == 0) jitter(rng);
  }
}

static void *sim_thread(void *arg) {
  sim_thread_t *t = arg;
  sim_world_t *w = t->w;
  sim_ctx_t c;
  memset(&c, 0, sizeof c);
  c.w = w;
  c.me = &w->rank[t->rank];
  c.rank = t->rank;
  c.cta = t->cta;
  c.timeout_ns = w->timeout_ns[t->rank];
  for (int call = 0; call < w->ncalls; call++) {
    if (t->rank == w->stop_rank && call == w->stop_call) break; /* this rank never arrives */
    /* "Launch": the previous call of this rank finished (stream order on the GPU). */
    uint64_t t0 = now_ns();
    while (atomic_load_explicit(a64(c.me->pad, MELD_PAD_OFF_COUNTER), memory_order_acquire) < (uint64_t)call) {
      sched_yield();
      if (now_ns() - t0 > 60ull * 1000000000ull) {
        world_error(w, "rank %d CTA %d: call %d never launched (protocol deadlock)", t->rank, t->cta, call);
        return NULL;
      }
    }
    jitter(&t->rng);
    uint64_t e = (uint64_t)call + 1u;
    uint64_t h = meld_hash_u64(meld_hash_u64(meld_hash_init(), MELD_OP_TEST_SIGNAL), chunks_of_call(e));
    if (t->rank == w->bad_rank && call == w->bad_call) h = meld_hash_u64(h, 12345);
    int ok = sim_call_begin(&c, meld_hash_fold(h));
    if (ok && c.epoch != e) world_error(w, "rank %d CTA %d: epoch %llu in call %d", t->rank, t->cta,
                                        (unsigned long long)c.epoch, call);
    if (ok) {
      if (c.role == MELD_ROLE_COMM && c.ticket == 0) sim_produce(&c, &t->rng);
      if (c.role == MELD_ROLE_COMM && c.ticket == 1) sim_consume(&c, &t->rng);
      if (!c.failed) sim_compute(&c, &t->rng); /* comm CTAs join the queue when done */
    }
    int failed = c.failed;
    sim_call_end(&c, !failed && call != w->bad_call && call != w->stop_call);
    if (failed) {
      if (atomic_fetch_add(&w->failed_calls[t->rank], 1) == 0) w->fail_ns[t->rank] = now_ns();
      break; /* sticky: the comm must be destroyed */
    }
  }
  return NULL;
}

static sim_world_t *world_new(int ncalls) {
  sim_world_t *w = calloc(1, sizeof *w);
  assert_non_null(w);
  for (int r = 0; r < NR; r++) {
    w->rank[r].pad = aligned_alloc(64, MELD_PAD_BYTES);
    assert_non_null(w->rank[r].pad);
    memset(w->rank[r].pad, 0, MELD_PAD_BYTES);
    w->timeout_ns[r] = 20ull * 1000000000ull;
  }
  w->ncalls = ncalls;
  w->stop_rank = w->bad_rank = -1;
  w->stop_call = w->bad_call = -1;
  return w;
}

static void world_free(sim_world_t *w) {
  for (int r = 0; r < NR; r++) free(w->rank[r].pad);
  free(w);
}

static double world_run(sim_world_t *w) {
  pthread_t th[NR * NC];
  sim_thread_t ts[NR * NC];
  uint64_t t0 = now_ns();
  for (int i = 0; i < NR * NC; i++) {
    ts[i].w = w;
    ts[i].rank = i / NC;
    ts[i].cta = i % NC;
    ts[i].rng = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1);
    assert_int_equal(pthread_create(&th[i], NULL, sim_thread, &ts[i]), 0);
  }
  for (int i = 0; i < NR * NC; i++) pthread_join(th[i], NULL);
  return (double)(now_ns() - t0) * 1e-9;
}

/* ---- tests: arithmetic ------------------------------------------------------------------ */

static uint64_t fnv1a_bytes(const void *p, size_t n) {
  const unsigned char *b = p;
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) {
    h ^= b[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

static void test_hash(void **state) {
  (void)state;
  assert_true(fnv1a_bytes("a", 1) == 0xaf63dc4c8601ec8cull); /* published FNV-1a 64 vector */
  uint64_t vals[3] = {0, 4096, 0x0123456789abcdefull};
  uint64_t h = meld_hash_init();
  for (int i = 0; i < 3; i++) h = meld_hash_u64(h, vals[i]);
  assert_true(h == fnv1a_bytes(vals, sizeof vals)); /* little-endian host */
  uint64_t h2 = meld_hash_u64(meld_hash_u64(meld_hash_u64(meld_hash_init(), 0), 4097), vals[2]);
  assert_true(meld_hash_fold(h) != meld_hash_fold(h2));
}

static void test_stamps_and_ring(void **state) {
  (void)state;
  for (uint64_t e = 1; e < 50; e++) {
    assert_true(meld_stamp(e, MELD_STAMP_SEQ_MAX) < meld_stamp(e + 1, 0));
    assert_true(meld_stamp_epoch(meld_stamp(e, 77)) == e && meld_stamp_seq(meld_stamp(e, 77)) == 77);
    for (uint32_t S = 1; S <= 4; S++)
      for (uint32_t k = 0; k < 20; k++) {
        uint64_t need = meld_ring_credit_needed(e, k, S);
        if (k < S) assert_true(need == 0);
        else assert_true(need == meld_ring_credit_stamp(e, k - S, S)); /* previous user of the slot */
        /* a credit or signal of the previous call never satisfies this call */
        assert_true(meld_ring_data_stamp(e - 1, 1000, S) < meld_ring_data_stamp(e, k, S));
        if (k >= 2 * S) assert_false(meld_stamp_reached(meld_ring_credit_stamp(e, k - 2 * S, S), need));
        if (need) assert_false(meld_stamp_reached(meld_ring_credit_stamp(e - 1, 1000, S), need));
        assert_int_equal(meld_ring_slot(k, S), k % S);
      }
  }
}

static void test_args_and_layout(void **state) {
  (void)state;
  /* arrival is exact per parity slot, and wrap-safe at 2^32 */
  uint64_t es[] = {1, 2, 3, 0xfffffffeull, 0xffffffffull, 0x100000000ull, 0x100000001ull};
  for (size_t i = 0; i < sizeof es / sizeof es[0]; i++) {
    uint64_t e = es[i];
    assert_true(meld_args_arrived(meld_args_pack(e, 0xabcd), e));
    assert_false(meld_args_arrived(meld_args_pack(e - 2, 0xabcd), e));
    assert_int_equal(meld_args_hash(meld_args_pack(e, 0xdeadbeef)), 0xdeadbeef);
    assert_true(meld_pad_args_offset(3, e) != meld_pad_args_offset(3, e + 1));
  }
  assert_false(meld_args_arrived(0, 1)); /* a zeroed pad is not a post of call 1 */
  assert_true(meld_pad_args_offset(MELD_PROTO_MAX_RANKS - 1, 1) + 8 <= MELD_PAD_OFF_SIGNALS);
  assert_true(MELD_PAD_OFF_SCRATCH + 4 * MELD_SCRATCH_WORDS <= MELD_PAD_OFF_ARGS);
  assert_true(MELD_PAD_OFF_DATA <= MELD_PAD_BYTES && MELD_PAD_OFF_CREDITS > MELD_PAD_OFF_SIGNALS);
  assert_true(meld_signal_layout_fits(8, 32, 1024));
  assert_false(meld_signal_layout_fits(8, 64, 1024));
  assert_true(meld_signal_index(7, 8, 31, 1023, 1024) < MELD_PAD_SIGNAL_SLOTS);
  /* abort codes */
  for (int r = 0; r < MELD_PROTO_MAX_RANKS; r += 4095) {
    uint32_t w = meld_abort_code(MELD_ABORT_ARGS, r);
    assert_true(w != 0 && meld_abort_reason(w) == MELD_ABORT_ARGS && meld_abort_origin(w) == r);
  }
  /* roles */
  assert_int_equal(meld_role_of_ticket(0, 2), MELD_ROLE_COMM);
  assert_int_equal(meld_role_of_ticket(2, 2), MELD_ROLE_COMPUTE);
  assert_int_equal(meld_role_index(5, 2), 3);
  assert_true(meld_is_last_cta(131, 132) && !meld_is_last_cta(130, 132));
  /* deadline */
  meld_wait_state_t w;
  meld_wait_start(&w, 100, ~0ull);
  assert_true(w.deadline_ns == ~0ull && !meld_wait_expired(&w, ~0ull - 1));
  meld_wait_start(&w, 100, 50);
  assert_false(meld_wait_expired(&w, 149));
  assert_true(meld_wait_expired(&w, 150));
}

/* ---- tests: threads ---------------------------------------------------------------------- */

static int env_int(const char *name, int def) {
  const char *s = getenv(name);
  return s && *s ? atoi(s) : def;
}

static void test_back_to_back(void **state) {
  (void)state;
  sim_world_t *w = world_new(env_int("PROTO_TEST_CALLS", 10000));
  double s = world_run(w);
  printf("    %d calls x %d ranks x %d CTAs in %.2f s, %ld rank-calls verified\n", w->ncalls, NR, NC, s,
         atomic_load(&w->verified));
  if (atomic_load(&w->errors)) printf("    first error: %s\n", w->first_error);
  assert_int_equal(atomic_load(&w->errors), 0);
  assert_int_equal(atomic_load(&w->verified), (long)w->ncalls * NR);
  for (int r = 0; r < NR; r++) {
    assert_int_equal(atomic_load(&w->rank[r].claims), 0);
    assert_int_equal(atomic_load_explicit(a64(w->rank[r].pad, MELD_PAD_OFF_COUNTER), memory_order_relaxed),
                     (uint64_t)w->ncalls);
  }
  world_free(w);
}

/* Rank 3 never launches call 40. Rank 0 has a short deadline (200 ms), ranks 1-2 a long one
 * (20 s): rank 0 times out, raises the abort everywhere, and ranks 1-2 must stop at once. */
static void test_rank_stops(void **state) {
  (void)state;
  sim_world_t *w = world_new(100);
  w->stop_rank = 3;
  w->stop_call = 40;
  w->timeout_ns[0] = 200ull * 1000000ull;
  uint64_t t0 = now_ns();
  double s = world_run(w);
  printf("    stopped rank: done in %.2f s\n", s);
  if (atomic_load(&w->errors)) printf("    first error: %s\n", w->first_error);
  assert_int_equal(atomic_load(&w->errors), 0);
  assert_true(s < 5.0); /* not 20 s: ranks 1 and 2 were aborted, not timed out */
  for (int r = 0; r < 3; r++) {
    sim_rank_t *k = &w->rank[r];
    assert_int_equal(atomic_load(&k->claims), 1); /* exactly one claim per rank */
    uint32_t kind = atomic_load_explicit(&k->record_kind, memory_order_acquire);
    assert_true(kind == (r == 0 ? MELD_FAIL_TIMEOUT : MELD_FAIL_ABORTED));
    assert_true(k->record.epoch == 41);
    if (r > 0) {
      assert_int_equal(meld_abort_reason(k->record.abort_word), MELD_ABORT_TIMEOUT);
      assert_int_equal(meld_abort_origin(k->record.abort_word), 0);
    } else {
      assert_int_equal(k->record.region, MELD_REGION_ARGS);
      assert_int_equal(k->record.peer, 3);
    }
    assert_true(w->fail_ns[r] - t0 < 3000000000ull);
    assert_true(atomic_load_explicit(a32(k->pad, MELD_PAD_OFF_ABORT), memory_order_relaxed) ==
                meld_abort_code(MELD_ABORT_TIMEOUT, 0));
  }
  assert_int_equal(atomic_load(&w->rank[3].claims), 0);
  assert_true(atomic_load_explicit(a32(w->rank[3].pad, MELD_PAD_OFF_ABORT), memory_order_relaxed) != 0);
  world_free(w);
}

/* Rank 2 hashes call 30 differently: every rank fails (kind ARGS when it saw a differing
 * post itself, else ABORTED naming an argument mismatch; a rank still in call 29 is stopped
 * there), claims once, no hang. Rank 2 always sees a differing post. */
static void test_mismatched_args(void **state) {
  (void)state;
  sim_world_t *w = world_new(100);
  w->bad_rank = 2;
  w->bad_call = 30;
  double s = world_run(w);
  printf("    mismatch: done in %.2f s\n", s);
  if (atomic_load(&w->errors)) printf("    first error: %s\n", w->first_error);
  assert_int_equal(atomic_load(&w->errors), 0);
  assert_true(s < 5.0);
  for (int r = 0; r < NR; r++) {
    sim_rank_t *k = &w->rank[r];
    assert_int_equal(atomic_load(&k->claims), 1);
    uint32_t kind = atomic_load_explicit(&k->record_kind, memory_order_acquire);
    assert_true(k->record.epoch == 31 || (r != 2 && k->record.epoch == 30));
    if (kind == MELD_FAIL_ARGS) {
      assert_true(r == 2 || k->record.peer == 2); /* others blame rank 2; rank 2 blames anyone */
      assert_true(k->record.expected != k->record.observed);
      assert_true(k->record.epoch == 31);
    } else {
      assert_int_equal(kind, MELD_FAIL_ABORTED);
      assert_int_equal(meld_abort_reason(k->record.abort_word), MELD_ABORT_ARGS);
    }
    assert_int_equal(atomic_load(&w->failed_calls[r]), NC); /* every CTA of every rank failed */
  }
  assert_int_equal(atomic_load(&w->rank[2].record_kind), MELD_FAIL_ARGS);
  world_free(w);
}

/* meld_comm_abort analog: the host word set while every rank spins on a call that cannot
 * finish (rank 1 stopped); rank 0 (the "host" aborted one) and then everyone stop. */
static void test_host_abort(void **state) {
  (void)state;
  sim_world_t *w = world_new(20);
  w->stop_rank = 1;
  w->stop_call = 10;
  for (int r = 0; r < NR; r++) w->timeout_ns[r] = 30ull * 1000000000ull;
  pthread_t th[NR * NC];
  sim_thread_t ts[NR * NC];
  uint64_t t0 = now_ns();
  for (int i = 0; i < NR * NC; i++) {
    ts[i] = (sim_thread_t){w, i / NC, i % NC, 77u + (uint64_t)i};
    assert_int_equal(pthread_create(&th[i], NULL, sim_thread, &ts[i]), 0);
  }
  usleep(300000);
  atomic_store_explicit(&w->rank[0].host_abort, meld_abort_code(MELD_ABORT_USER, 0), memory_order_release);
  for (int i = 0; i < NR * NC; i++) pthread_join(th[i], NULL);
  double s = (double)(now_ns() - t0) * 1e-9;
  printf("    host abort: done in %.2f s\n", s);
  assert_int_equal(atomic_load(&w->errors), 0);
  assert_true(s < 5.0);
  for (int r = 0; r < NR; r++) {
    if (r == 1) continue;
    assert_int_equal(atomic_load(&w->rank[r].claims), 1);
    assert_int_equal(atomic_load(&w->rank[r].record_kind), MELD_FAIL_ABORTED);
    assert_int_equal(meld_abort_reason(w->rank[r].record.abort_word), MELD_ABORT_USER);
  }
  world_free(w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hash),          cmocka_unit_test(test_stamps_and_ring),
      cmocka_unit_test(test_args_and_layout), cmocka_unit_test(test_back_to_back),
      cmocka_unit_test(test_rank_stops),    cmocka_unit_test(test_mismatched_args),
      cmocka_unit_test(test_host_abort),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
