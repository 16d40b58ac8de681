/* Collectives on the CPU: argument errors of the public functions before any CUDA call, plan
 * legality for many sizes and rank counts, and the C references themselves. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>

#include "coll_plan.h"
#include "comm.h"
#include "common/proto.h"
#include "common/ref_coll.h"
#include "meld.h"

#define WS_64M ((size_t)64 << 20)
#define FAKE_PTR ((void *)(uintptr_t)0x100000)

static void expect(meld_result_t got, meld_result_t want, const char *needle) {
  if (got != want) fail_msg("got %s, want %s (%s)", meld_strerror(got), meld_strerror(want), meld_last_error());
  if (needle && !strstr(meld_last_error(), needle))
    fail_msg("message '%s' lacks '%s'", meld_last_error(), needle);
}

/* A communicator struct that no CUDA call ever sees: the public functions must fail (or
 * return early) on their checks before using anything else of it. */
static struct meld_comm fake_comm(int nranks, int rank, int nnodes) {
  struct meld_comm c;
  memset(&c, 0, sizeof c);
  c.nranks = nranks;
  c.rank = rank;
  c.local_size = nranks;
  c.nnodes = nnodes;
  c.sm_count = 132;
  return c;
}

static void test_null_comm(void **state) {
  (void)state;
  size_t n[2] = {1, 1};
  expect(meld_all_gather(NULL, FAKE_PTR, FAKE_PTR, 8, MELD_BF16, 0), MELD_ERR_INVALID_ARG, "comm is NULL");
  expect(meld_reduce_scatter(NULL, FAKE_PTR, FAKE_PTR, 8, MELD_BF16, 0), MELD_ERR_INVALID_ARG, "comm is NULL");
  expect(meld_all_reduce(NULL, FAKE_PTR, FAKE_PTR, 8, MELD_FP32, 0), MELD_ERR_INVALID_ARG, "comm is NULL");
  expect(meld_all_to_all(NULL, FAKE_PTR, FAKE_PTR, 8, MELD_FP32, 0), MELD_ERR_INVALID_ARG, "comm is NULL");
  expect(meld_all_to_allv(NULL, FAKE_PTR, n, n, FAKE_PTR, n, n, MELD_FP32, 0), MELD_ERR_INVALID_ARG,
         "comm is NULL");
}

static void test_bad_buffers_and_dtype(void **state) {
  (void)state;
  struct meld_comm c = fake_comm(2, 0, 1);
  expect(meld_all_gather(&c, NULL, FAKE_PTR, 8, MELD_BF16, 0), MELD_ERR_INVALID_ARG, "send is NULL");
  expect(meld_all_gather(&c, FAKE_PTR, NULL, 8, MELD_BF16, 0), MELD_ERR_INVALID_ARG, "recv is NULL");
  expect(meld_reduce_scatter(&c, NULL, FAKE_PTR, 8, MELD_FP32, 0), MELD_ERR_INVALID_ARG, "send is NULL");
  expect(meld_all_reduce(&c, FAKE_PTR, NULL, 3, MELD_FP32, 0), MELD_ERR_INVALID_ARG, "recv is NULL");
  expect(meld_all_to_all(&c, NULL, FAKE_PTR, 3, MELD_FP32, 0), MELD_ERR_INVALID_ARG, "send is NULL");
  expect(meld_all_gather(&c, FAKE_PTR, FAKE_PTR, 8, (meld_dtype_t)7, 0), MELD_ERR_INVALID_ARG, "unknown dtype 7");
  expect(meld_all_reduce(&c, FAKE_PTR, FAKE_PTR, 8, (meld_dtype_t)-1, 0), MELD_ERR_INVALID_ARG, "unknown dtype");
  /* Misaligned for the element size. */
  expect(meld_all_reduce(&c, (char *)FAKE_PTR + 2, FAKE_PTR, 8, MELD_FP32, 0), MELD_ERR_INVALID_ARG, "not aligned");
  expect(meld_all_gather(&c, FAKE_PTR, (char *)FAKE_PTR + 1, 8, MELD_BF16, 0), MELD_ERR_INVALID_ARG, "not aligned");
}

static void test_overflow(void **state) {
  (void)state;
  struct meld_comm c = fake_comm(4, 1, 1);
  expect(meld_all_gather(&c, FAKE_PTR, FAKE_PTR, SIZE_MAX / 2, MELD_BF16, 0), MELD_ERR_INVALID_ARG, "overflows");
  expect(meld_reduce_scatter(&c, FAKE_PTR, FAKE_PTR, SIZE_MAX / 6, MELD_FP32, 0), MELD_ERR_INVALID_ARG, "overflows");
  expect(meld_all_reduce(&c, FAKE_PTR, FAKE_PTR, SIZE_MAX, MELD_FP32, 0), MELD_ERR_INVALID_ARG, "overflows");
  expect(meld_all_to_all(&c, FAKE_PTR, FAKE_PTR, SIZE_MAX / 3, MELD_BF16, 0), MELD_ERR_INVALID_ARG, "overflows");
  /* Over the per-buffer limit without wrapping around. */
  expect(meld_all_gather(&c, FAKE_PTR, FAKE_PTR, MELD_COLL_MAX_BYTES / 4, MELD_BF16, 0), MELD_ERR_INVALID_ARG,
         "overflows");
  size_t cnt[4] = {1, 1, 1, 1}, off[4] = {0, 1, 2, SIZE_MAX - 1};
  size_t ok_off[4] = {0, 1, 2, 3};
  expect(meld_all_to_allv(&c, FAKE_PTR, cnt, off, FAKE_PTR, cnt, ok_off, MELD_BF16, 0), MELD_ERR_INVALID_ARG,
         "overflows");
}

static void test_count_zero_is_noop(void **state) {
  (void)state;
  struct meld_comm c = fake_comm(2, 1, 1);
  /* No buffers needed, nothing launched (the fake comm has no CUDA state at all). */
  expect(meld_all_gather(&c, NULL, NULL, 0, MELD_BF16, 0), MELD_OK, NULL);
  expect(meld_reduce_scatter(&c, NULL, NULL, 0, MELD_BF16, 0), MELD_OK, NULL);
  expect(meld_all_reduce(&c, NULL, NULL, 0, MELD_FP32, 0), MELD_OK, NULL);
  expect(meld_all_to_all(&c, NULL, NULL, 0, MELD_FP32, 0), MELD_OK, NULL);
  /* ... but still a bad dtype. */
  expect(meld_all_reduce(&c, NULL, NULL, 0, (meld_dtype_t)9, 0), MELD_ERR_INVALID_ARG, "dtype");
}

/* A comm across nodes takes the inter-node path (src/ops/coll_net.cu; GPU-tested by test_net),
 * all_to_allv included; a comm without the path built (only a fake one can be) is an internal
 * error, not a crash. */
static void test_inter_node_entry(void **state) {
  (void)state;
  struct meld_comm c = fake_comm(4, 2, 2);
  size_t cnt[4] = {1, 1, 1, 1}, off[4] = {0, 1, 2, 3};
  expect(meld_all_to_allv(&c, FAKE_PTR, cnt, off, FAKE_PTR, cnt, off, MELD_BF16, 0), MELD_ERR_INTERNAL,
         "no inter-node path");
  expect(meld_all_gather(&c, FAKE_PTR, FAKE_PTR, 8, MELD_BF16, 0), MELD_ERR_INTERNAL, "no inter-node path");
  expect(meld_all_reduce(&c, FAKE_PTR, FAKE_PTR, 8, MELD_BF16, 0), MELD_ERR_INTERNAL, "no inter-node path");
  expect(meld_reduce_scatter(&c, FAKE_PTR, FAKE_PTR, 8, MELD_BF16, 0), MELD_ERR_INTERNAL, "no inter-node path");
  expect(meld_all_to_all(&c, FAKE_PTR, FAKE_PTR, 8, MELD_BF16, 0), MELD_ERR_INTERNAL, "no inter-node path");
  /* Argument errors come first (a NULL buffer is wrong wherever the peers are). */
  expect(meld_all_gather(&c, NULL, FAKE_PTR, 8, MELD_BF16, 0), MELD_ERR_INVALID_ARG, "send is NULL");
}

static void test_all_to_allv_args(void **state) {
  (void)state;
  struct meld_comm c = fake_comm(2, 0, 1);
  size_t cnt[2] = {3, 4}, off[2] = {0, 3}, rcnt[2] = {5, 4}, roff[2] = {0, 5};
  expect(meld_all_to_allv(&c, FAKE_PTR, NULL, off, FAKE_PTR, rcnt, roff, MELD_BF16, 0), MELD_ERR_INVALID_ARG, "NULL");
  expect(meld_all_to_allv(&c, FAKE_PTR, cnt, off, FAKE_PTR, rcnt, NULL, MELD_BF16, 0), MELD_ERR_INVALID_ARG, "NULL");
  /* This rank's block to itself must have one size. */
  expect(meld_all_to_allv(&c, FAKE_PTR, cnt, off, FAKE_PTR, rcnt, roff, MELD_BF16, 0), MELD_ERR_INVALID_ARG,
         "send_counts[0] = 3 differs from recv_counts[0] = 5");
  /* NULL send with data to send. */
  rcnt[0] = 3;
  expect(meld_all_to_allv(&c, NULL, cnt, off, FAKE_PTR, rcnt, roff, MELD_BF16, 0), MELD_ERR_INVALID_ARG, "send is NULL");
}

/* ---- plans ---------------------------------------------------------------------------------- */

static void check_plan_invariants(const meld_coll_plan_t *p, const meld_coll_args_t *a, size_t ws) {
  char buf[512];
  meld_coll_plan_format(p, buf, sizeof buf);
  if (p->ctas < 1 || p->ctas > 132) fail_msg("ctas: %s", buf);
  if (p->threads % 32 || p->threads < 64 || p->threads > 1024) fail_msg("threads: %s", buf);
  if (p->chunk_bytes % 16 || p->chunk_bytes < MELD_COLL_MIN_CHUNK) fail_msg("chunk: %s", buf);
  if (p->ws_bytes > ws) fail_msg("workspace: %s", buf);
  if (p->signal_words > MELD_PAD_CREDIT_SLOTS) fail_msg("signals: %s", buf);
  if (p->rounds >= MELD_COLL_MAX_ROUNDS) fail_msg("rounds: %s", buf);
  if ((size_t)p->rounds * (size_t)p->ctas * p->chunk_bytes < p->pair_bytes) fail_msg("coverage: %s", buf);
  if (p->slots < 2) fail_msg("slots: %s", buf);
  if (a->op == MELD_COLL_ALL_REDUCE && p->ar_algo == MELD_AR_TWO_SHOT) {
    if (p->stages != 2) fail_msg("two-shot stages: %s", buf);
    if (p->part_elems * (size_t)p->nranks < a->count) fail_msg("parts cover: %s", buf);
    if ((p->part_elems * p->elem_bytes) % 16) fail_msg("part alignment: %s", buf);
  } else if (p->stages != 1) {
    fail_msg("stages: %s", buf);
  }
  if (!strstr(buf, "ctas=") || !strstr(buf, meld_coll_op_name(a->op))) fail_msg("format: %s", buf);
}

static void test_plan_legal_everywhere(void **state) {
  (void)state;
  unsetenv("MELD_COMM_CTAS");
  unsetenv("MELD_CHUNK_BYTES");
  const size_t counts[] = {1, 7, 8, 1000, 4096, 65536, 1000003, (size_t)1 << 24, (size_t)1 << 29};
  const size_t wss[] = {(size_t)1 << 20, WS_64M, (size_t)1 << 30};
  const int sms[] = {1, 8, 132};
  int plans = 0;
  for (int P = 1; P <= 16; P++)
    for (int op = 0; op < MELD_COLL_NUM_OPS; op++)
      for (int d = 0; d < 2; d++)
        for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++)
          for (size_t wi = 0; wi < sizeof wss / sizeof wss[0]; wi++)
            for (size_t si = 0; si < sizeof sms / sizeof sms[0]; si++) {
              meld_coll_args_t a;
              memset(&a, 0, sizeof a);
              a.op = (meld_coll_op_t)op;
              a.dtype = d ? MELD_FP32 : MELD_BF16;
              a.send = a.recv = FAKE_PTR;
              a.count = counts[ci];
              for (int q = 0; q < P; q++) {
                a.send_counts[q] = a.recv_counts[q] = counts[ci];
                a.send_offsets[q] = a.recv_offsets[q] = (size_t)q * counts[ci];
              }
              a.vector = (ci % 2) && op == MELD_COLL_ALL_TO_ALL;
              if (meld_coll_validate("test", P, &a) != MELD_OK) fail_msg("validate: %s", meld_last_error());
              meld_coll_plan_t p;
              meld_result_t r = meld_coll_plan_make(&a, P, sms[si], wss[wi], MELD_PAD_CREDIT_SLOTS, NULL, &p);
              if (r != MELD_OK)
                fail_msg("P=%d op=%d count=%zu ws=%zu sm=%d: %s", P, op, counts[ci], wss[wi], sms[si],
                         meld_last_error());
              check_plan_invariants(&p, &a, wss[wi]);
              if (p.ctas > sms[si]) fail_msg("more CTAs than SMs");
              plans++;
            }
  assert_true(plans > 10000);
}

static void test_plan_all_reduce_algo(void **state) {
  (void)state;
  meld_coll_args_t a;
  memset(&a, 0, sizeof a);
  a.op = MELD_COLL_ALL_REDUCE;
  a.dtype = MELD_BF16;
  a.count = (size_t)1 << 26;
  meld_coll_plan_t p;
  assert_int_equal(meld_coll_plan_make(&a, 2, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, NULL, &p), MELD_OK);
  assert_int_equal(p.ar_algo, MELD_AR_ONE_SHOT); /* P = 2: same bytes either way */
  assert_int_equal(meld_coll_plan_make(&a, 8, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, NULL, &p), MELD_OK);
  assert_int_equal(p.ar_algo, MELD_AR_TWO_SHOT);
  assert_int_equal(p.stages, 2);
  a.count = 1024;
  assert_int_equal(meld_coll_plan_make(&a, 8, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, NULL, &p), MELD_OK);
  assert_int_equal(p.ar_algo, MELD_AR_ONE_SHOT);
  meld_coll_plan_hint_t h;
  memset(&h, 0, sizeof h);
  h.ar_algo = MELD_AR_TWO_SHOT;
  a.count = 7; /* parts of 8 elements: rank 0 has 7, the others none */
  assert_int_equal(meld_coll_plan_make(&a, 2, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, &h, &p), MELD_OK);
  assert_int_equal(p.ar_algo, MELD_AR_TWO_SHOT);
  assert_int_equal(p.part_elems, 8);
  h.ctas = 3;
  h.chunk_bytes = 8192;
  h.threads = 384;
  assert_int_equal(meld_coll_plan_make(&a, 2, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, &h, &p), MELD_OK);
  assert_int_equal(p.ctas, 3);
  assert_int_equal(p.chunk_bytes, 8192);
  assert_int_equal(p.threads, 384);
}

static void test_plan_protocols(void **state) {
  (void)state;
  unsetenv("MELD_COMM_CTAS");
  unsetenv("MELD_CHUNK_BYTES");
  meld_coll_args_t a;
  memset(&a, 0, sizeof a);
  a.op = MELD_COLL_ALL_GATHER;
  a.dtype = MELD_BF16;
  a.count = 1024; /* 2 KB per peer: LL, one CTA */
  meld_coll_plan_t p;
  assert_int_equal(meld_coll_plan_make(&a, 2, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, NULL, &p), MELD_OK);
  assert_int_equal(p.proto, MELD_PROTO_LL);
  assert_int_equal(p.ctas, 1);
  assert_int_equal(p.ws_bytes, 0);
  assert_int_equal(p.signal_words, 0);
  a.count = (size_t)64 << 20; /* 128 MB per peer: ROUNDS by default (measured faster than RING) */
  assert_int_equal(meld_coll_plan_make(&a, 2, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, NULL, &p), MELD_OK);
  assert_int_equal(p.proto, MELD_PROTO_ROUNDS);
  /* RING when asked for: <= 16 CTAs, 2 control warps, producers and consumers. */
  meld_coll_plan_hint_t h;
  memset(&h, 0, sizeof h);
  h.proto = MELD_PROTO_RING;
  assert_int_equal(meld_coll_plan_make(&a, 2, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, &h, &p), MELD_OK);
  assert_int_equal(p.proto, MELD_PROTO_RING);
  assert_true(p.ctas <= 16 && p.cons_warps >= 1 && p.threads / 32 - 2 - p.cons_warps >= 1);
  assert_true(p.threads <= MELD_COLL_RING_MAX_THREADS);
  /* LL forced where it does not fit: ROUNDS. */
  h.proto = MELD_PROTO_LL;
  assert_int_equal(meld_coll_plan_make(&a, 2, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, &h, &p), MELD_OK);
  assert_int_equal(p.proto, MELD_PROTO_ROUNDS);
  /* Capacity: 1 MiB per peer at P = 2, shared by the producers beyond. */
  assert_int_equal(meld_coll_ll_capacity(1), 0);
  assert_int_equal(meld_coll_ll_capacity(2), (size_t)1 << 20);
  assert_true(meld_coll_ll_capacity(8) * 7 <= (size_t)1 << 20);
  a.count = (size_t)1 << 19; /* exactly 1 MiB of bf16 */
  assert_int_equal(meld_coll_plan_make(&a, 2, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, &h, &p), MELD_OK);
  assert_int_equal(p.proto, MELD_PROTO_LL);
  /* Two-shot: ROUNDS even when RING is asked for; variable all-to-all never LL. */
  a.op = MELD_COLL_ALL_REDUCE;
  a.count = 1000;
  h.proto = MELD_PROTO_RING;
  h.ar_algo = MELD_AR_TWO_SHOT;
  assert_int_equal(meld_coll_plan_make(&a, 2, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, &h, &p), MELD_OK);
  assert_int_equal(p.proto, MELD_PROTO_ROUNDS);
  a.op = MELD_COLL_ALL_TO_ALL;
  a.vector = 1;
  assert_int_equal(meld_coll_plan_make(&a, 2, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, NULL, &p), MELD_OK);
  assert_int_equal(p.proto, MELD_PROTO_ROUNDS);
  /* Threads beyond what a kernel is compiled for are refused. */
  a.vector = 0;
  a.op = MELD_COLL_ALL_GATHER;
  a.count = (size_t)64 << 20;
  memset(&h, 0, sizeof h);
  h.threads = 1024;
  expect(meld_coll_plan_make(&a, 2, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, &h, &p), MELD_ERR_INVALID_ARG,
         "the rounds kernel takes at most 512");
  h.proto = MELD_PROTO_RING;
  expect(meld_coll_plan_make(&a, 2, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, &h, &p), MELD_ERR_INVALID_ARG,
         "the ring kernel takes at most 640");
  h.threads = 640;
  h.cons_warps = 18;
  expect(meld_coll_plan_make(&a, 2, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, &h, &p), MELD_ERR_INVALID_ARG,
         "2 control warps");
}

/* a: op with `count` elements per block, uniform all-to-all splits for P ranks. */
static void set_uniform(meld_coll_args_t *a, meld_coll_op_t op, size_t count, int P) {
  a->op = op;
  a->count = count;
  for (int q = 0; q < P; q++) {
    a->send_counts[q] = a->recv_counts[q] = count;
    a->send_offsets[q] = a->recv_offsets[q] = (size_t)q * count;
  }
}

/* The ZC engine: chosen above LL exactly when the caller marked the call eligible (a->zc,
 * set by meld_coll_run for symmetric buffers); forced without eligibility it falls back to
 * ROUNDS; its plans need no workspace, one signal per (rank, CTA), and the all-reduce is
 * two-shot in one stage with 16-byte parts. */
static void test_plan_zc(void **state) {
  (void)state;
  meld_coll_args_t a;
  memset(&a, 0, sizeof a);
  a.dtype = MELD_BF16;
  meld_coll_plan_t p;
  meld_coll_plan_hint_t h;
  memset(&h, 0, sizeof h);
  for (int op = 0; op < MELD_COLL_NUM_OPS; op++)
    for (int P = 1; P <= 8; P++)
      for (size_t count = 1; count <= ((size_t)1 << 28); count *= 37) {
        set_uniform(&a, (meld_coll_op_t)op, count, P);
        a.zc = 0;
        assert_int_equal(meld_coll_plan_make(&a, P, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, NULL, &p), MELD_OK);
        assert_int_not_equal(p.proto, MELD_PROTO_ZC);
        const meld_coll_proto_t without = p.proto;
        a.zc = 1;
        assert_int_equal(meld_coll_plan_make(&a, P, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, NULL, &p), MELD_OK);
        /* LL keeps what it takes; everything else becomes ZC, except all-reduces above 128 MB. */
        const int big_ar = op == MELD_COLL_ALL_REDUCE && count * 2 > ((size_t)128 << 20);
        assert_int_equal(p.proto, without == MELD_PROTO_LL ? MELD_PROTO_LL : big_ar ? without : MELD_PROTO_ZC);
        if (p.proto != MELD_PROTO_ZC) continue;
        assert_int_equal(p.ws_bytes, 0);
        assert_int_equal(p.stages, 1);
        const int sum = op == MELD_COLL_REDUCE_SCATTER || op == MELD_COLL_ALL_REDUCE;
        assert_true(p.ctas >= 1 && p.ctas <= (sum ? 32 : 16));
        assert_int_equal(p.threads, 512);
        assert_int_equal(p.signal_words, P > 1 ? (size_t)P * (size_t)p.ctas : 0);
        if (op == MELD_COLL_ALL_REDUCE) {
          assert_int_equal(p.ar_algo, MELD_AR_TWO_SHOT);
          assert_int_equal(p.part_elems * 2 % 16, 0);
          assert_true(p.part_elems * (size_t)P >= count && p.part_elems * (size_t)(P - 1) < count + 8 * (size_t)P);
        }
        /* The workspace does not limit ZC: a 1 MB workspace plans the same. */
        meld_coll_plan_t q;
        assert_int_equal(meld_coll_plan_make(&a, P, 132, (size_t)1 << 20, MELD_PAD_CREDIT_SLOTS, NULL, &q), MELD_OK);
        assert_int_equal(q.proto, MELD_PROTO_ZC);
        assert_int_equal(q.ctas, p.ctas);
      }
  /* Forced: taken when eligible (also at LL sizes), ROUNDS otherwise; CTAs and threads from the hint. */
  a.op = MELD_COLL_ALL_GATHER;
  a.count = 1000;
  h.proto = MELD_PROTO_ZC;
  h.ctas = 3;
  h.threads = 128;
  a.zc = 1;
  assert_int_equal(meld_coll_plan_make(&a, 2, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, &h, &p), MELD_OK);
  assert_int_equal(p.proto, MELD_PROTO_ZC);
  assert_int_equal(p.ctas, 3);
  assert_int_equal(p.threads, 128);
  a.zc = 0;
  assert_int_equal(meld_coll_plan_make(&a, 2, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, &h, &p), MELD_OK);
  assert_int_equal(p.proto, MELD_PROTO_ROUNDS);
  /* ... also a large all-reduce when forced. */
  a.zc = 1;
  a.op = MELD_COLL_ALL_REDUCE;
  a.count = (size_t)1 << 28;
  h.ctas = 0;
  assert_int_equal(meld_coll_plan_make(&a, 2, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, &h, &p), MELD_OK);
  assert_int_equal(p.proto, MELD_PROTO_ZC);
  assert_int_equal(p.ctas, 32);
  a.op = MELD_COLL_ALL_GATHER;
  a.count = 1000;
  h.ctas = 3;
  /* Send-only symmetric all-reduce (zc 2): one-shot ZC up to 16 MB, the staged engine above. */
  memset(&h, 0, sizeof h);
  a.op = MELD_COLL_ALL_REDUCE;
  a.zc = 2;
  a.count = (size_t)1 << 20; /* 2 MB */
  assert_int_equal(meld_coll_plan_make(&a, 2, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, NULL, &p), MELD_OK);
  assert_int_equal(p.proto, MELD_PROTO_ZC);
  assert_int_equal(p.ar_algo, MELD_AR_ONE_SHOT);
  assert_int_equal(p.pair_bytes, (size_t)2 << 20);
  assert_int_equal(p.part_elems, 0);
  a.count = (size_t)16 << 20; /* 32 MB */
  assert_int_equal(meld_coll_plan_make(&a, 2, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, NULL, &p), MELD_OK);
  assert_int_not_equal(p.proto, MELD_PROTO_ZC);
  a.op = MELD_COLL_ALL_GATHER;
  a.zc = 1;
  a.count = 1000;
  h.proto = MELD_PROTO_ZC;
  h.ctas = 3;
  /* The ZC kernel is compiled for 512 threads. */
  a.zc = 1;
  h.threads = 640;
  expect(meld_coll_plan_make(&a, 2, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, &h, &p), MELD_ERR_INVALID_ARG,
         "the zc kernel takes at most 512");
  /* The heuristic: more CTAs for more bytes, capped at 16. */
  h.threads = 0;
  h.ctas = 0;
  a.count = (size_t)1 << 18; /* 512 KB per rank: 1 MB stored at P = 2 */
  assert_int_equal(meld_coll_plan_make(&a, 2, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, &h, &p), MELD_OK);
  assert_int_equal(p.ctas, 8);
  a.count = (size_t)1 << 28;
  assert_int_equal(meld_coll_plan_make(&a, 2, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, &h, &p), MELD_OK);
  assert_int_equal(p.ctas, 16);
  char buf[512];
  meld_coll_plan_format(&p, buf, sizeof buf);
  assert_non_null(strstr(buf, "proto=zc"));
}

/* The engine-rule tests' call: bf16, 2 KB blocks, send at S and recv at R (addresses only
 * compared, never touched). */
static const uintptr_t S = 0x100000, R = 0x900000;
static void rule_args(meld_coll_args_t *a) {
  memset(a, 0, sizeof *a);
  a->dtype = MELD_BF16;
  a->count = 1024;
  a->send = (const void *)S;
  a->recv = (void *)R;
}

/* The CE engine (copy engines move the data; opt-in): eligibility rules (all-gather and
 * uniform all-to-all at 2+ ranks of one node, ZC's size and overlap rules; the send range the
 * peers pull from), and the plan: taken when a hint asks and the call is eligible (a->ce >= 1),
 * by AUTO only with a->ce == 2 (MELD_COLL_CE=1) from MELD_COLL_CE_MIN_BYTES per peer; its plan
 * is one CTA of 32 threads (the handshake kernels), no workspace, one signal per rank; a
 * forced CE on an ineligible call falls back to ZC (eligible) or ROUNDS. */
static void test_plan_ce(void **state) {
  (void)state;
  meld_coll_args_t a;
  meld_coll_zc_req_t req;
  rule_args(&a);
  /* rules */
  a.op = MELD_COLL_ALL_GATHER;
  assert_int_equal(meld_coll_ce_request(&a, 4, 1, 1, &req), 1);
  assert_int_equal(req.send_bytes, 2048);
  assert_int_equal(meld_coll_ce_request(&a, 1, 0, 1, &req), 0); /* one rank: a copy, not CE */
  assert_int_equal(meld_coll_ce_request(&a, 2, 0, 2, &req), 0); /* two nodes */
  a.send = (const void *)(R + 2048);                          /* in place: allowed */
  assert_int_equal(meld_coll_ce_request(&a, 4, 1, 1, &req), 1);
  a.send = (const void *)(R + 4096); /* overlapping another block */
  assert_int_equal(meld_coll_ce_request(&a, 4, 1, 1, &req), 0);
  a.send = (const void *)S;
  a.count = 1001; /* not a 16-byte block */
  assert_int_equal(meld_coll_ce_request(&a, 2, 0, 1, &req), 0);
  a.count = 1024;
  for (int op = MELD_COLL_REDUCE_SCATTER; op <= MELD_COLL_ALL_REDUCE; op++) { /* sums: never */
    a.op = (meld_coll_op_t)op;
    assert_int_equal(meld_coll_ce_request(&a, 2, 0, 1, &req), 0);
  }
  a.op = MELD_COLL_ALL_TO_ALL;
  for (int q = 0; q < 3; q++) {
    a.send_counts[q] = a.recv_counts[q] = 1024;
    a.send_offsets[q] = a.recv_offsets[q] = (size_t)q * 1024;
  }
  assert_int_equal(meld_coll_ce_request(&a, 3, 2, 1, &req), 1);
  assert_int_equal(req.send_bytes, 3 * 2048);
  a.vector = 1;
  assert_int_equal(meld_coll_ce_request(&a, 3, 2, 1, &req), 0);
  a.vector = 0;

  /* plans */
  meld_coll_plan_t p;
  meld_coll_plan_hint_t h;
  memset(&h, 0, sizeof h);
  unsetenv("MELD_COLL_CE_MIN_BYTES");
  for (int op = 0; op < MELD_COLL_NUM_OPS; op += 3) /* all-gather, all-to-all */
    for (int P = 2; P <= 8; P++)
      for (size_t count = 8; count <= ((size_t)1 << 28); count *= 8) {
        set_uniform(&a, (meld_coll_op_t)op, count, P);
        a.zc = 0;
        a.ce = 1; /* eligible, not opted in: AUTO never takes it */
        assert_int_equal(meld_coll_plan_make(&a, P, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, NULL, &p), MELD_OK);
        assert_int_not_equal(p.proto, MELD_PROTO_CE);
        a.ce = 2; /* MELD_COLL_CE=1: from 4 MB per peer, above LL */
        assert_int_equal(meld_coll_plan_make(&a, P, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, NULL, &p), MELD_OK);
        const int big = count * 2 >= MELD_COLL_CE_MIN_BYTES_DEFAULT;
        assert_int_equal(p.proto == MELD_PROTO_CE, big);
        h.proto = MELD_PROTO_CE; /* forced: taken at any size */
        h.ctas = 7;              /* (the hint's geometry does not apply) */
        a.ce = 1;
        assert_int_equal(meld_coll_plan_make(&a, P, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, &h, &p), MELD_OK);
        assert_int_equal(p.proto, MELD_PROTO_CE);
        assert_int_equal(p.ctas, 1);
        assert_int_equal(p.threads, 32);
        assert_int_equal(p.ws_bytes, 0);
        assert_int_equal(p.stages, 1);
        assert_int_equal(p.signal_words, (size_t)P);
        /* ... and with a 1 MB workspace the same */
        assert_int_equal(meld_coll_plan_make(&a, P, 132, (size_t)1 << 20, MELD_PAD_CREDIT_SLOTS, &h, &p), MELD_OK);
        assert_int_equal(p.proto, MELD_PROTO_CE);
        a.ce = 0; /* not eligible: ZC where eligible, else ROUNDS */
        assert_int_equal(meld_coll_plan_make(&a, P, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, &h, &p), MELD_OK);
        assert_int_equal(p.proto, MELD_PROTO_ROUNDS);
        a.zc = 1;
        assert_int_equal(meld_coll_plan_make(&a, P, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, &h, &p), MELD_OK);
        assert_int_equal(p.proto, MELD_PROTO_ZC);
        memset(&h, 0, sizeof h);
      }
  /* the threshold from the environment; a bad value is refused, naming the variable */
  a.op = MELD_COLL_ALL_GATHER;
  a.count = 1 << 20; /* 2 MB per peer (above LL) */
  a.zc = 1;
  a.ce = 2;
  setenv("MELD_COLL_CE_MIN_BYTES", "1M", 1);
  assert_int_equal(meld_coll_plan_make(&a, 2, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, NULL, &p), MELD_OK);
  assert_int_equal(p.proto, MELD_PROTO_CE);
  char buf[512];
  meld_coll_plan_format(&p, buf, sizeof buf);
  assert_non_null(strstr(buf, "proto=ce"));
  unsetenv("MELD_COLL_CE_MIN_BYTES"); /* the default, 4 MB */
  assert_int_equal(meld_coll_plan_make(&a, 2, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, NULL, &p), MELD_OK);
  assert_int_equal(p.proto, MELD_PROTO_ZC);
  setenv("MELD_COLL_CE_MIN_BYTES", "lots", 1);
  expect(meld_coll_plan_make(&a, 2, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, NULL, &p), MELD_ERR_INVALID_ARG,
         "MELD_COLL_CE_MIN_BYTES=lots");
  unsetenv("MELD_COLL_CE_MIN_BYTES");
  /* the legality check: CE only for copies, one CTA of 32 threads, 2+ ranks */
  a.ce = 1;
  h.proto = MELD_PROTO_CE;
  assert_int_equal(meld_coll_plan_make(&a, 2, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, &h, &p), MELD_OK);
  meld_coll_plan_t bad = p;
  bad.op = MELD_COLL_ALL_REDUCE;
  expect(meld_coll_plan_check(&bad, 132, WS_64M, MELD_PAD_CREDIT_SLOTS), MELD_ERR_INVALID_ARG, "copies");
  bad = p;
  bad.ctas = 2;
  expect(meld_coll_plan_check(&bad, 132, WS_64M, MELD_PAD_CREDIT_SLOTS), MELD_ERR_INVALID_ARG, "one CTA of 32");
  bad = p;
  bad.nranks = 1;
  expect(meld_coll_plan_check(&bad, 132, WS_64M, MELD_PAD_CREDIT_SLOTS), MELD_ERR_INVALID_ARG, "2+ ranks");
}

/* ZC eligibility rules (pure): which calls could take ZC, which ranges must be symmetric, and
 * the mode from where the buffers are. Pointers are fake addresses (never dereferenced). */
static void test_zc_rules(void **state) {
  (void)state;
  meld_coll_args_t a;
  meld_coll_zc_req_t req;
  rule_args(&a);
  /* all-gather: recv (P blocks) must be symmetric; send may be anything */
  a.op = MELD_COLL_ALL_GATHER;
  assert_int_equal(meld_coll_zc_request(&a, 4, 1, 1, &req), 1);
  assert_int_equal(req.recv_bytes, 4 * 2048);
  assert_int_equal(req.send_bytes, 2048);
  assert_true(req.need_recv && !req.need_send && !req.inplace);
  assert_int_equal(meld_coll_zc_mode(&a, &req, 0, 1), 1);
  assert_int_equal(meld_coll_zc_mode(&a, &req, 1, 0), 0);
  /* ... in place (send = own block of recv) allowed; another overlap refused */
  a.send = (const void *)(R + 2048);
  assert_int_equal(meld_coll_zc_request(&a, 4, 1, 1, &req), 1);
  assert_true(req.inplace);
  a.send = (const void *)(R + 4096);
  assert_int_equal(meld_coll_zc_request(&a, 4, 1, 1, &req), 0);
  a.send = (const void *)S;
  /* blocks that are not 16-byte multiples, count 0, more than one node, unknown dtype */
  a.count = 1001;
  assert_int_equal(meld_coll_zc_request(&a, 2, 0, 1, &req), 0);
  a.count = 0;
  assert_int_equal(meld_coll_zc_request(&a, 2, 0, 1, &req), 0);
  a.count = 1024;
  assert_int_equal(meld_coll_zc_request(&a, 2, 0, 2, &req), 0);
  a.dtype = (meld_dtype_t)7;
  assert_int_equal(meld_coll_zc_request(&a, 2, 0, 1, &req), 0);
  a.dtype = MELD_BF16;
  /* reduce-scatter: send (P blocks) must be symmetric, recv may be anything; in place allowed */
  a.op = MELD_COLL_REDUCE_SCATTER;
  assert_int_equal(meld_coll_zc_request(&a, 2, 1, 1, &req), 1);
  assert_true(req.need_send && !req.need_recv);
  assert_int_equal(req.send_bytes, 2 * 2048);
  assert_int_equal(meld_coll_zc_mode(&a, &req, 1, 0), 1);
  assert_int_equal(meld_coll_zc_mode(&a, &req, 0, 1), 0);
  a.recv = (void *)(S + 2048); /* rank 1's own block */
  assert_int_equal(meld_coll_zc_request(&a, 2, 1, 1, &req), 1);
  a.recv = (void *)(S + 1024); /* overlapping, not the in-place form */
  assert_int_equal(meld_coll_zc_request(&a, 2, 1, 1, &req), 0);
  a.recv = (void *)R;
  /* all-reduce: any count; both symmetric -> ZC, send only -> one-shot, recv only -> no;
   * in place needs both (the peers read the send that becomes the result) */
  a.op = MELD_COLL_ALL_REDUCE;
  a.count = 1001;
  assert_int_equal(meld_coll_zc_request(&a, 2, 0, 1, &req), 1);
  assert_true(req.need_send && req.need_recv);
  assert_int_equal(meld_coll_zc_mode(&a, &req, 1, 1), 1);
  assert_int_equal(meld_coll_zc_mode(&a, &req, 1, 0), 2);
  assert_int_equal(meld_coll_zc_mode(&a, &req, 0, 1), 0);
  a.recv = (void *)S;
  assert_int_equal(meld_coll_zc_request(&a, 2, 0, 1, &req), 1);
  assert_int_equal(meld_coll_zc_mode(&a, &req, 1, 0), 0);
  a.recv = (void *)(S + 64); /* partial overlap */
  assert_int_equal(meld_coll_zc_request(&a, 2, 0, 1, &req), 0);
  a.recv = (void *)R;
  /* all-to-all: uniform splits only, recv symmetric, no in-place form */
  a.op = MELD_COLL_ALL_TO_ALL;
  for (int q = 0; q < 3; q++) {
    a.send_counts[q] = a.recv_counts[q] = 1024;
    a.send_offsets[q] = a.recv_offsets[q] = (size_t)q * 1024;
  }
  assert_int_equal(meld_coll_zc_request(&a, 3, 2, 1, &req), 1);
  assert_int_equal(req.send_bytes, 3 * 2048);
  assert_int_equal(req.recv_bytes, 3 * 2048);
  assert_true(req.need_recv && !req.need_send);
  a.recv_offsets[2] = 2049;
  assert_int_equal(meld_coll_zc_request(&a, 3, 2, 1, &req), 0);
  a.recv_offsets[2] = 2048;
  a.vector = 1;
  assert_int_equal(meld_coll_zc_request(&a, 3, 2, 1, &req), 0);
  a.vector = 0;
  a.recv = (void *)S;
  assert_int_equal(meld_coll_zc_request(&a, 3, 2, 1, &req), 0);
}

static void test_plan_env_and_errors(void **state) {
  (void)state;
  meld_coll_args_t a;
  memset(&a, 0, sizeof a);
  a.op = MELD_COLL_ALL_GATHER;
  a.dtype = MELD_BF16;
  a.count = (size_t)1 << 27;
  meld_coll_plan_t p;
  setenv("MELD_COMM_CTAS", "4", 1);
  assert_int_equal(meld_coll_plan_make(&a, 8, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, NULL, &p), MELD_OK);
  assert_int_equal(p.ctas, 4);
  setenv("MELD_COMM_CTAS", "64", 1);
  setenv("MELD_CHUNK_BYTES", "16M", 1);
  expect(meld_coll_plan_make(&a, 8, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, NULL, &p), MELD_ERR_OUT_OF_MEMORY,
         "MELD_WORKSPACE_BYTES >= 15032385536");
  setenv("MELD_CHUNK_BYTES", "abc", 1);
  expect(meld_coll_plan_make(&a, 8, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, NULL, &p), MELD_ERR_INVALID_ARG,
         "MELD_CHUNK_BYTES=abc");
  setenv("MELD_CHUNK_BYTES", "1000", 1); /* not a multiple of 16 and below the minimum */
  expect(meld_coll_plan_make(&a, 2, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, NULL, &p), MELD_ERR_INVALID_ARG,
         "chunk of 1000 bytes");
  unsetenv("MELD_CHUNK_BYTES");
  setenv("MELD_COMM_CTAS", "0", 1);
  expect(meld_coll_plan_make(&a, 2, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, NULL, &p), MELD_ERR_INVALID_ARG,
         "MELD_COMM_CTAS=0");
  setenv("MELD_COMM_CTAS", "64", 1);
  expect(meld_coll_plan_make(&a, 2, 16, WS_64M, MELD_PAD_CREDIT_SLOTS, NULL, &p), MELD_ERR_INVALID_ARG,
         "64 CTAs outside [1, 16]");
  unsetenv("MELD_COMM_CTAS");
  /* Legality check on hand-made plans. */
  assert_int_equal(meld_coll_plan_make(&a, 2, 132, WS_64M, MELD_PAD_CREDIT_SLOTS, NULL, &p), MELD_OK);
  meld_coll_plan_t bad = p;
  bad.threads = 100;
  expect(meld_coll_plan_check(&bad, 132, WS_64M, MELD_PAD_CREDIT_SLOTS), MELD_ERR_INVALID_ARG, "multiple of 32");
  bad = p;
  bad.slots = 1;
  expect(meld_coll_plan_check(&bad, 132, WS_64M, MELD_PAD_CREDIT_SLOTS), MELD_ERR_INVALID_ARG, "slots");
  bad = p;
  bad.stages = 2;
  expect(meld_coll_plan_check(&bad, 132, WS_64M, MELD_PAD_CREDIT_SLOTS), MELD_ERR_INVALID_ARG, "stages");
  bad = p;
  bad.chunk_bytes = 4096;
  bad.ctas = 1;
  bad.pair_bytes = (size_t)1 << 40;
  meld_coll_plan_derive(&bad);
  expect(meld_coll_plan_check(&bad, 132, WS_64M, MELD_PAD_CREDIT_SLOTS), MELD_ERR_INVALID_ARG, "rounds");
  bad = p;
  bad.signal_words = MELD_PAD_CREDIT_SLOTS + 1;
  expect(meld_coll_plan_check(&bad, 132, WS_64M, MELD_PAD_CREDIT_SLOTS), MELD_ERR_INVALID_ARG, "signal");
}

static void test_validate_direct(void **state) {
  (void)state;
  meld_coll_args_t a;
  memset(&a, 0, sizeof a);
  a.op = (meld_coll_op_t)17;
  a.send = a.recv = FAKE_PTR;
  a.count = 4;
  expect(meld_coll_validate("f", 2, &a), MELD_ERR_INVALID_ARG, "unknown op 17");
  a.op = MELD_COLL_ALL_GATHER;
  expect(meld_coll_validate("f", 0, &a), MELD_ERR_UNSUPPORTED, "0 ranks");
  expect(meld_coll_validate("f", MELD_COLL_MAX_RANKS + 1, &a), MELD_ERR_UNSUPPORTED, "ranks");
  assert_int_equal(meld_coll_validate("f", MELD_COLL_MAX_RANKS, &a), MELD_OK);
  assert_int_equal(meld_coll_dtype_bytes(MELD_BF16), 2);
  assert_int_equal(meld_coll_dtype_bytes(MELD_FP32), 4);
  assert_int_equal(meld_coll_dtype_bytes((meld_dtype_t)5), 0);
  assert_string_equal(meld_coll_dtype_name(MELD_FP32), "fp32");
  assert_string_equal(meld_coll_op_name(MELD_COLL_REDUCE_SCATTER), "reduce_scatter");
  a.count = 0;
  assert_true(meld_coll_is_empty(&a));
  a.op = MELD_COLL_ALL_TO_ALL;
  a.vector = 1;
  assert_false(meld_coll_is_empty(&a));
}

/* ---- references ------------------------------------------------------------------------------- */

static void test_ref_bf16(void **state) {
  (void)state;
  assert_int_equal(ref_f32_to_bf16(1.0f), 0x3f80);
  assert_int_equal(ref_f32_to_bf16(-2.0f), 0xc000);
  /* 1 + 2^-8 is halfway between bf16 1.0 and 1.0078125: ties to even (1.0). */
  assert_int_equal(ref_f32_to_bf16(1.0f + 1.0f / 256), 0x3f80);
  /* 1 + 3 * 2^-8 is halfway between 1.0078125 (odd) and 1.015625 (even): up. */
  assert_int_equal(ref_f32_to_bf16(1.0f + 3.0f / 256), 0x3f82);
  assert_true(isnan(ref_bf16_to_f32(ref_f32_to_bf16(NAN))));
  for (int i = -100; i <= 100; i++) {
    float f = (float)i * 0.25f;
    assert_true(ref_bf16_to_f32(ref_f32_to_bf16(f)) == f);
  }
}

static void test_ref_collectives(void **state) {
  (void)state;
  enum { P = 3, N = 5 };
  float in[P][N * P];
  const void *send[P];
  for (int r = 0; r < P; r++) {
    for (int i = 0; i < N * P; i++) in[r][i] = (float)(r * 100 + i);
    send[r] = in[r];
  }
  float ag[N * P];
  ref_all_gather(P, send, ag, N, MELD_FP32);
  for (int r = 0; r < P; r++)
    for (int i = 0; i < N; i++) assert_true(ag[r * N + i] == in[r][i]);
  double rs[N];
  ref_reduce_scatter_f64(P, 1, send, rs, N, MELD_FP32);
  for (int i = 0; i < N; i++) assert_true(rs[i] == 300.0 + 3.0 * (N + i));
  double ar[N * P];
  ref_all_reduce_f64(P, send, ar, N * P, MELD_FP32);
  float ar32[N * P];
  ref_all_reduce_f32(P, send, ar32, N * P, MELD_FP32);
  for (int i = 0; i < N * P; i++) assert_true(ar[i] == 300.0 + 3.0 * i && ar32[i] == (float)ar[i]);
  assert_true(ref_rel_err(ar32, MELD_FP32, ar, N * P) == 0.0);
  ar32[2] = NAN;
  assert_true(isinf(ref_rel_err(ar32, MELD_FP32, ar, N * P)));
  ar32[2] = (float)ar[2] * 1.01f;
  assert_true(ref_max_rel_err(ar32, MELD_FP32, ar, N * P, 1e-6) > 0.009);
  /* all-to-allv: rank r sends (q + 1) elements to rank q from offset 4 q; rank 2 receives
   * 3 elements from each rank, packed. */
  size_t sc[P * P], so[P * P], ro[P];
  for (int r = 0; r < P; r++)
    for (int q = 0; q < P; q++) sc[r * P + q] = (size_t)q + 1, so[r * P + q] = (size_t)q * 4;
  for (int r = 0; r < P; r++) ro[r] = (size_t)r * 3;
  float a2a[9];
  ref_all_to_allv(P, 2, send, sc, so, a2a, ro, MELD_FP32);
  for (int r = 0; r < P; r++)
    for (int i = 0; i < 3; i++) assert_true(a2a[r * 3 + i] == in[r][8 + i]);
  /* bf16: sums of bf16 inputs in fp32, rounded once. */
  uint16_t b[2][4];
  for (int i = 0; i < 4; i++) b[0][i] = ref_f32_to_bf16(1.0f), b[1][i] = ref_f32_to_bf16(1.0f / 256);
  const void *bs[2] = {b[0], b[1]};
  uint16_t out[4];
  ref_all_reduce_f32(2, bs, out, 4, MELD_BF16);
  assert_int_equal(out[0], 0x3f80); /* 1 + 2^-8 ties to even */
  double ref[4];
  ref_all_reduce_f64(2, bs, ref, 4, MELD_BF16);
  assert_true(ref_rel_err(out, MELD_BF16, ref, 4) < 1e-2);
}

/* The CE engine's side streams (comm.c ce_stream_create): one per peer up to 4 with a GPU per
 * rank; ranks as threads sharing a GPU take only what leaves every rank's streams a hardware
 * queue of their own (session 26: 8 ranks had 40 streams on 32 queues and one rank's launch
 * waited behind another rank's work past the timeout). */
static void test_ce_side_streams(void **state) {
  (void)state;
  assert_int_equal(meld_coll_ce_side_streams(1, 1, 8, MELD_CE_STREAMS), 0);
  assert_int_equal(meld_coll_ce_side_streams(2, 1, 8, MELD_CE_STREAMS), 1);
  assert_int_equal(meld_coll_ce_side_streams(4, 1, 8, MELD_CE_STREAMS), 3);
  assert_int_equal(meld_coll_ce_side_streams(8, 1, 8, MELD_CE_STREAMS), 4);
  assert_int_equal(meld_coll_ce_side_streams(8, 8, 32, MELD_CE_STREAMS), 2);
  assert_int_equal(meld_coll_ce_side_streams(4, 4, 32, MELD_CE_STREAMS), 3);
  assert_int_equal(meld_coll_ce_side_streams(8, 8, 8, MELD_CE_STREAMS), 1); /* never none */
  /* Every rank's caller's stream, protocol side stream and side streams fit the queues
   * wherever that is possible (3 queues a rank or more). */
  for (int share = 2; share <= 8; share++)
    for (int queues = 8; queues <= 32; queues += 8)
      for (int P = share; P <= 16; P++) {
        const int n = meld_coll_ce_side_streams(P, share, queues, MELD_CE_STREAMS);
        assert_true(n >= 1 && n <= MELD_CE_STREAMS && n <= P - 1);
        if (queues / share >= 3) assert_true(share * (2 + n) <= queues);
      }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_null_comm),
      cmocka_unit_test(test_bad_buffers_and_dtype),
      cmocka_unit_test(test_overflow),
      cmocka_unit_test(test_count_zero_is_noop),
      cmocka_unit_test(test_inter_node_entry),
      cmocka_unit_test(test_all_to_allv_args),
      cmocka_unit_test(test_plan_legal_everywhere),
      cmocka_unit_test(test_plan_all_reduce_algo),
      cmocka_unit_test(test_plan_protocols),
      cmocka_unit_test(test_plan_zc),
      cmocka_unit_test(test_plan_ce),
      cmocka_unit_test(test_zc_rules),
      cmocka_unit_test(test_plan_env_and_errors),
      cmocka_unit_test(test_validate_direct),
      cmocka_unit_test(test_ref_bf16),
      cmocka_unit_test(test_ref_collectives),
      cmocka_unit_test(test_ce_side_streams),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
