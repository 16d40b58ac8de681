/* test_proxy_ring.c — the proxy's command ring: index arithmetic (wrap, full/empty, credits),
 * the 64-byte command layout, and the real proxy thread (src/host/proxy.c) driving an
 * in-process test transport: "rank 0" enqueues, the proxy copies into "rank 1"'s memory and
 * release-stores a flag, a consumer thread acquires the flag and checks the bytes. `make
 * test-tsan` runs this file under ThreadSanitizer too: a missing happens-before edge on the
 * path producer -> head -> proxy -> flag -> consumer -> credit -> producer is reported as a
 * race on the plain data bytes. Also: a full ring (enqueue times out with a sentence), an
 * abort while the producer waits, commands a device producer could get wrong (bad seq, bad
 * opcode), and bad arguments. */
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

#include "common/proxy_ring.h"
#include "error.h"
#include "proxy.h"
#include "sock.h"
#include "transport.h"

/* ---- ring arithmetic and layout ----------------------------------------------------------- */

static void test_layout(void **state) {
  (void)state;
  assert_int_equal(sizeof(meld_cmd_t), 64);
  assert_int_equal(offsetof(meld_cmd_t, dst_rank), 8);
  assert_int_equal(offsetof(meld_cmd_t, flag_index), 12);
  assert_int_equal(offsetof(meld_cmd_t, bytes), 32);
  assert_int_equal(offsetof(meld_cmd_t, reserved), 56);
  assert_int_equal(sizeof(meld_cmdring_hdr_t), 256);
  assert_int_equal(offsetof(meld_cmdring_hdr_t, head) / 64, 0);
  assert_int_equal(offsetof(meld_cmdring_hdr_t, tail) / 64, 1);
  assert_int_equal(offsetof(meld_cmdring_hdr_t, done) / 64, 2);
  assert_int_equal(offsetof(meld_cmdring_hdr_t, status) / 64, 3);
  assert_int_equal(meld_cmdring_bytes(8), 256 + 8 * 64);
  meld_cmdring_hdr_t *r = aligned_alloc(64, meld_cmdring_bytes(4));
  assert_ptr_equal((char *)meld_cmdring_cmds(r), (char *)r + 256);
  free(r);
  assert_int_equal(MELD_REGION_NONE, MELD_TRANSPORT_NO_FLAG);
}

static void test_nslots(void **state) {
  (void)state;
  const uint32_t good[] = {2, 4, 64, 1024, 1u << 20};
  const uint32_t bad[] = {0, 1, 3, 6, 100, 1u << 21, 0x80000000u, 0xffffffffu};
  for (size_t i = 0; i < sizeof good / sizeof *good; i++) assert_true(meld_cmdring_valid_nslots(good[i]));
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) assert_false(meld_cmdring_valid_nslots(bad[i]));
}

static void test_arithmetic(void **state) {
  (void)state;
  const uint32_t n = 8;
  assert_int_equal(meld_cmdring_slot(0, n), 0);
  assert_int_equal(meld_cmdring_slot(7, n), 7);
  assert_int_equal(meld_cmdring_slot(8, n), 0);
  assert_int_equal(meld_cmdring_slot(13, n), 5);
  assert_true(meld_cmdring_empty(5, 5));
  assert_false(meld_cmdring_full(5, 5, n));
  assert_int_equal(meld_cmdring_space(5, 5, n), 8);
  assert_int_equal(meld_cmdring_used(12, 5), 7);
  assert_int_equal(meld_cmdring_space(12, 5, n), 1);
  assert_false(meld_cmdring_full(12, 5, n));
  assert_true(meld_cmdring_full(13, 5, n));
  assert_int_equal(meld_cmdring_space(13, 5, n), 0);
  assert_true(meld_cmdring_consistent(13, 5, n));
  assert_false(meld_cmdring_consistent(14, 5, n)); /* a producer that ignored its credit */
  assert_false(meld_cmdring_consistent(4, 5, n));  /* head behind tail */
  /* Free-running indices across 2^64: the differences stay right. */
  const uint64_t t = UINT64_MAX - 2; /* head wrapped to 3 */
  assert_int_equal(meld_cmdring_used(3, t), 6);
  assert_int_equal(meld_cmdring_space(3, t, n), 2);
  assert_false(meld_cmdring_full(3, t, n));
  assert_true(meld_cmdring_full(5, t, n));
  assert_true(meld_cmdring_consistent(5, t, n));
  assert_int_equal(meld_cmdring_slot(UINT64_MAX, n), 7);
  assert_int_equal(meld_cmdring_slot(UINT64_MAX + (uint64_t)1, n), 0);
  /* Simulated producer/consumer with random steps and a stale tail (credits): the producer
   * never overwrites an unconsumed slot, the consumer never reads an unwritten one. */
  uint64_t head = UINT64_MAX - 1000, tail = head, cached = tail;
  uint64_t owner[8]; /* index written into each slot */
  srand(7);
  for (int step = 0; step < 100000; step++) {
    if (rand() & 1) {
      if (rand() % 4 == 0) cached = tail; /* refresh the credit view now and then */
      if (!meld_cmdring_full(head, cached, n)) {
        uint32_t s = meld_cmdring_slot(head, n);
        assert_true(head - tail < n); /* the slot's old command was consumed */
        owner[s] = head++;
      }
    } else if (!meld_cmdring_empty(head, tail)) {
      assert_int_equal(owner[meld_cmdring_slot(tail, n)], tail);
      tail++;
    }
    assert_true(meld_cmdring_consistent(head, tail, n));
  }
}

/* ---- an in-process test transport: rank 0's writes land in "rank 1"'s memory ------------- */

#define WORK_BYTES (1u << 20)
#define PAD_SLOTS 64

typedef struct {
  uint8_t *work[2];   /* region 0 of ranks 0, 1 */
  uint64_t *pad[2];   /* region 1 */
  atomic_int gate;    /* 0: writes block (until opened or aborted) */
  atomic_long writes;
  atomic_int lag;     /* 1: poll reports at most `upto` writes complete (an RDMA-like lag) */
  atomic_long upto;
} world_t;

static meld_result_t loop_write(meld_transport_t *t, const meld_write_t *w) {
  world_t *wd = t->impl;
  while (!atomic_load(&wd->gate)) {
    if (__atomic_load_n(&t->aborted, __ATOMIC_ACQUIRE))
      return meld_error(MELD_ERR_ABORTED, "loop transport: aborted while blocked");
    meld_sleep_ms(1);
  }
  uint8_t *base = w->dst_region == 0 ? wd->work[w->dst_rank] : (uint8_t *)wd->pad[w->dst_rank];
  if (w->bytes) memcpy(base + w->dst_offset, w->src, w->bytes); /* src may be NULL */
  if (w->flag_region != MELD_TRANSPORT_NO_FLAG) {
    uint8_t *fb = w->flag_region == 0 ? wd->work[w->dst_rank] : (uint8_t *)wd->pad[w->dst_rank];
    atomic_store_explicit((_Atomic uint64_t *)(fb + w->flag_offset), w->flag_value,
                          memory_order_release);
  }
  atomic_fetch_add(&wd->writes, 1);
  return MELD_OK;
}
static meld_result_t loop_poll(meld_transport_t *t, uint64_t *completed) {
  world_t *wd = t->impl;
  long n = atomic_load(&wd->writes);
  if (atomic_load(&wd->lag) && atomic_load(&wd->upto) < n) n = atomic_load(&wd->upto);
  *completed = (uint64_t)n;
  return MELD_OK;
}
static void loop_close(meld_transport_t *t, int64_t timeout_ms) {
  (void)timeout_ms;
  t->impl = NULL;
}
static const meld_transport_ops_t g_loop = {.name = "loop", .write_with_flag = loop_write,
                                            .poll = loop_poll, .close = loop_close};

static meld_transport_t *new_world(world_t *wd) {
  memset(wd, 0, sizeof *wd);
  for (int r = 0; r < 2; r++) {
    wd->work[r] = aligned_alloc(64, WORK_BYTES);
    wd->pad[r] = aligned_alloc(64, PAD_SLOTS * 8);
    assert_non_null(wd->work[r]);
    assert_non_null(wd->pad[r]);
    memset(wd->work[r], 0, WORK_BYTES);
    memset(wd->pad[r], 0, PAD_SLOTS * 8);
  }
  atomic_store(&wd->gate, 1);
  meld_transport_t *t = NULL;
  assert_int_equal(meld_transport_new(&g_loop, wd, 0, 2, 0, 2000, &t), MELD_OK);
  uint32_t id;
  assert_int_equal(meld_transport_register(t, wd->work[0], WORK_BYTES, &id), MELD_OK);
  assert_int_equal(id, 0);
  assert_int_equal(meld_transport_register(t, wd->pad[0], PAD_SLOTS * 8, &id), MELD_OK);
  assert_int_equal(id, 1);
  int nodes[2] = {0, 1};
  uint64_t bytes[2][MELD_TRANSPORT_MAX_REGIONS] = {{WORK_BYTES, PAD_SLOTS * 8},
                                                   {WORK_BYTES, PAD_SLOTS * 8}};
  assert_int_equal(meld_transport_set_peers(t, nodes, &bytes[0][0]), MELD_OK);
  return t;
}

static void free_world(world_t *wd, meld_transport_t *t) {
  meld_transport_close(t, 0);
  for (int r = 0; r < 2; r++) free(wd->work[r]), free(wd->pad[r]);
}

/* ---- stress: producer -> ring -> proxy -> transport -> flag -> consumer -> credit ---------- */

#define NCHUNK 20000
#define KSLOTS 4       /* staging slots (source and destination), reused with credits */
#define SLOT_BYTES 4096
#define EPOCH 3

typedef struct {
  world_t *wd;
  atomic_long verified; /* chunks the consumer checked: the producer's credit */
  long bad;
} stress_t;

static uint32_t chunk_len(long k) { return 1u + (uint32_t)((k * 2654435761u) % SLOT_BYTES); }
static uint8_t chunk_byte(long k, uint32_t i) { return (uint8_t)(k * 131 + i * 7 + 1); }

static void *consumer(void *arg) {
  stress_t *s = arg;
  const uint64_t *flag = &s->wd->pad[1][5];
  for (long k = 0; k < NCHUNK; k++) {
    const uint64_t target = meld_stamp(EPOCH, (uint32_t)k + 1);
    while (atomic_load_explicit((_Atomic uint64_t *)flag, memory_order_acquire) < target)
      sched_yield(); /* 2 cores, 3 busy threads */
    const uint8_t *d = s->wd->work[1] + (size_t)(k % KSLOTS) * SLOT_BYTES;
    for (uint32_t i = 0, n = chunk_len(k); i < n; i++) s->bad += d[i] != chunk_byte(k, i);
    atomic_store_explicit(&s->verified, k + 1, memory_order_release);
  }
  return NULL;
}

static void test_proxy_stress(void **state) {
  (void)state;
  world_t wd;
  meld_transport_t *t = new_world(&wd);
  meld_proxy_config_t cfg = MELD_PROXY_CONFIG_INIT;
  cfg.nslots = 8; /* wraps 2500 times */
  meld_proxy_t *p = NULL;
  assert_int_equal(meld_proxy_create(t, &cfg, &p), MELD_OK);
  stress_t s = {.wd = &wd};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, consumer, &s), 0);
  for (long k = 0; k < NCHUNK; k++) {
    /* Credit: staging slot k % KSLOTS was verified for chunk k - KSLOTS (which also means the
     * proxy read its source and the consumer read its destination). */
    while (atomic_load_explicit(&s.verified, memory_order_acquire) < k - KSLOTS + 1)
      sched_yield();
    uint8_t *src = wd.work[0] + (size_t)(k % KSLOTS) * SLOT_BYTES;
    const uint32_t n = chunk_len(k);
    for (uint32_t i = 0; i < n; i++) src[i] = chunk_byte(k, i);
    const uint64_t off = (uint64_t)(k % KSLOTS) * SLOT_BYTES;
    assert_int_equal(meld_proxy_write(p, 1, 0, off, 0, off, n, 1, 5, meld_stamp(EPOCH, (uint32_t)k + 1)),
                     MELD_OK);
  }
  assert_int_equal(meld_proxy_flush(p, 5000), MELD_OK);
  assert_int_equal(meld_proxy_done(p), NCHUNK);
  pthread_join(th, NULL);
  assert_int_equal(s.bad, 0);
  assert_int_equal(atomic_load(&wd.writes), NCHUNK);
  /* A flag-only write (0 bytes) and the host waiter. */
  assert_int_equal(meld_proxy_write(p, 1, 0, 0, 0, 0, 0, 1, 9, meld_stamp(EPOCH + 1, 1)), MELD_OK);
  assert_int_equal(meld_proxy_wait_flag(p, &wd.pad[1][9], meld_stamp(EPOCH + 1, 1), 2000, NULL), MELD_OK);
  assert_int_equal(meld_proxy_destroy(p), MELD_OK);
  free_world(&wd, t);
}

/* ---- a full ring: credits, then timeout; an abort while waiting --------------------------- */

typedef struct {
  meld_proxy_t *p;
  int delay_ms;
} aborter_t;

static void *aborter(void *arg) {
  aborter_t *a = arg;
  meld_sleep_ms(a->delay_ms);
  meld_proxy_abort(a->p);
  return NULL;
}

static void test_full_ring(void **state) {
  (void)state;
  world_t wd;
  meld_transport_t *t = new_world(&wd);
  atomic_store(&wd.gate, 0); /* the transport blocks: the proxy holds one command */
  meld_proxy_config_t cfg = MELD_PROXY_CONFIG_INIT;
  cfg.nslots = 4;
  cfg.timeout_ms = 200;
  meld_proxy_t *p = NULL;
  assert_int_equal(meld_proxy_create(t, &cfg, &p), MELD_OK);
  /* 4 slots + the one the proxy took out (it released the slot only after the write): the
   * fifth or sixth enqueue must wait, and time out. */
  int ok = 0;
  meld_result_t rc = MELD_OK;
  for (int i = 0; i < 6 && rc == MELD_OK; i++) {
    rc = meld_proxy_write(p, 1, 0, 0, 0, 64, 8, 1, 0, meld_stamp(1, (uint32_t)i + 1));
    ok += rc == MELD_OK;
  }
  assert_int_equal(rc, MELD_ERR_TIMEOUT);
  assert_true(ok == 4 || ok == 5);
  assert_non_null(strstr(meld_last_error(), "no free command slot for 200 ms"));
  atomic_store(&wd.gate, 1); /* credits come back */
  assert_int_equal(meld_proxy_write(p, 1, 0, 0, 0, 64, 8, 1, 0, meld_stamp(1, 7)), MELD_OK);
  assert_int_equal(meld_proxy_flush(p, 2000), MELD_OK);
  assert_int_equal(wd.pad[1][0], meld_stamp(1, 7));
  /* Block again, fill the ring, and abort from another thread while the producer waits. */
  atomic_store(&wd.gate, 0);
  cfg.timeout_ms = 5000;
  assert_int_equal(meld_proxy_destroy(p), MELD_OK);
  assert_int_equal(meld_proxy_create(t, &cfg, &p), MELD_OK);
  aborter_t a = {p, 100};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, aborter, &a), 0);
  const int64_t t0 = meld_now_ms();
  do {
    rc = meld_proxy_write(p, 1, 0, 0, 0, 64, 8, 1, 0, 1);
  } while (rc == MELD_OK);
  assert_int_equal(rc, MELD_ERR_ABORTED);
  assert_true(meld_now_ms() - t0 < 2000);
  pthread_join(th, NULL);
  assert_int_equal(meld_proxy_check(p), MELD_ERR_ABORTED);
  assert_int_equal(meld_proxy_ring(p)->status, MELD_ERR_ABORTED);
  assert_int_equal(meld_proxy_destroy(p), MELD_ERR_ABORTED);
  free_world(&wd, t);
}

/* The comm's abort word stops the proxy. */
static void test_abort_word(void **state) {
  (void)state;
  world_t wd;
  meld_transport_t *t = new_world(&wd);
  uint32_t word = 0;
  meld_proxy_config_t cfg = MELD_PROXY_CONFIG_INIT;
  cfg.abort_word = &word;
  meld_proxy_t *p = NULL;
  assert_int_equal(meld_proxy_create(t, &cfg, &p), MELD_OK);
  assert_int_equal(meld_proxy_wait_flag(p, &wd.pad[1][3], 1, 50, "chunk 3"), MELD_ERR_TIMEOUT);
  assert_non_null(strstr(meld_last_error(), "chunk 3: flag is 0"));
  __atomic_store_n(&word, 7u, __ATOMIC_RELEASE);
  assert_int_equal(meld_proxy_wait_flag(p, &wd.pad[1][3], 1, 2000, NULL), MELD_ERR_ABORTED);
  assert_int_equal(meld_proxy_write(p, 1, 0, 0, 0, 0, 8, 1, 0, 1), MELD_ERR_ABORTED);
  assert_int_equal(meld_proxy_destroy(p), MELD_ERR_ABORTED);
  free_world(&wd, t);
}

/* A NOP behind a write that has not completed must not count as done before it: `done` is a
 * prefix (sources before it may be reused). Writes complete late here (lag), one at a time. */
static void test_nop_behind_incomplete_write(void **state) {
  (void)state;
  world_t wd;
  meld_transport_t *t = new_world(&wd);
  atomic_store(&wd.lag, 1);
  atomic_store(&wd.upto, 0);
  meld_proxy_t *p = NULL;
  assert_int_equal(meld_proxy_create(t, NULL, &p), MELD_OK);
  assert_int_equal(meld_proxy_write(p, 1, 0, 0, 0, 0, 64, 1, 0, 1), MELD_OK);
  meld_cmd_t nop = {.opcode = MELD_CMD_NOP, .seq = 1};
  assert_int_equal(meld_proxy_enqueue(p, &nop, NULL), MELD_OK);
  assert_int_equal(meld_proxy_write(p, 1, 0, 64, 0, 64, 64, 1, 1, 1), MELD_OK);
  meld_sleep_ms(50); /* the proxy has had time to consume what it may */
  assert_int_equal(meld_proxy_done(p), 0);
  atomic_store(&wd.upto, 1); /* the first write completes: the NOP and the second go on */
  int64_t t0 = meld_now_ms();
  while (meld_proxy_done(p) < 2 && meld_now_ms() - t0 < 2000) meld_sleep_ms(1);
  assert_int_equal(meld_proxy_done(p), 2);
  meld_sleep_ms(20);
  assert_int_equal(meld_proxy_done(p), 2); /* not the third before its write completes */
  atomic_store(&wd.upto, 2);
  assert_int_equal(meld_proxy_flush(p, 2000), MELD_OK);
  assert_int_equal(meld_proxy_done(p), 3);
  assert_int_equal(meld_proxy_destroy(p), MELD_OK);
  free_world(&wd, t);
}

/* What a device producer could get wrong: the proxy fails with a sentence, never obeys. */
static void raw_push(meld_proxy_t *p, const meld_cmd_t *c) {
  meld_cmdring_hdr_t *r = meld_proxy_ring(p);
  uint64_t h = __atomic_load_n(&r->head, __ATOMIC_RELAXED);
  meld_cmdring_cmds(r)[meld_cmdring_slot(h, r->nslots)] = *c;
  __atomic_store_n(&r->head, h + 1, __ATOMIC_RELEASE);
}

static void expect_proxy_fails(meld_transport_t *t, const meld_cmd_t *c, meld_result_t code,
                               const char *sentence) {
  meld_proxy_t *p = NULL;
  assert_int_equal(meld_proxy_create(t, NULL, &p), MELD_OK);
  raw_push(p, c);
  const int64_t t0 = meld_now_ms();
  while (meld_proxy_check(p) == MELD_OK && meld_now_ms() - t0 < 2000) meld_sleep_ms(1);
  assert_int_equal(meld_proxy_check(p), code);
  if (!strstr(meld_last_error(), sentence)) fail_msg("got: %s", meld_last_error());
  assert_int_equal(meld_proxy_ring(p)->status, code);
  assert_int_equal(meld_proxy_destroy(p), code);
}

static void test_bad_commands(void **state) {
  (void)state;
  world_t wd;
  meld_transport_t *t = new_world(&wd);
  meld_cmd_t c = {MELD_CMD_WRITE, 0, 0, 1, 1, 0, 0, 0, 8, 1, 5 /* seq != 0 */, 0};
  expect_proxy_fails(t, &c, MELD_ERR_INTERNAL, "slot 0 holds command 5, expected 0");
  c.seq = 0;
  c.opcode = 9;
  expect_proxy_fails(t, &c, MELD_ERR_INVALID_ARG, "command 0: unknown opcode 9");
  c.opcode = MELD_CMD_WRITE;
  c.dst_offset = WORK_BYTES - 4;
  expect_proxy_fails(t, &c, MELD_ERR_INVALID_ARG, "pass the end of region 0");
  /* The host producer is told at once. */
  meld_proxy_t *p = NULL;
  assert_int_equal(meld_proxy_create(t, NULL, &p), MELD_OK);
  assert_int_equal(meld_proxy_enqueue(p, &c, NULL), MELD_ERR_INVALID_ARG);
  assert_non_null(strstr(meld_last_error(), "8 bytes at offset 1048572 pass the end of region 0 (1048576 bytes) at rank 1"));
  assert_int_equal(meld_proxy_write(p, 0, 0, 0, 0, 0, 8, 1, 0, 1), MELD_ERR_INVALID_ARG);
  assert_non_null(strstr(meld_last_error(), "dst rank 0 is on this node"));
  assert_int_equal(meld_proxy_write(p, 1, 0, WORK_BYTES, 0, 0, 8, 1, 0, 1), MELD_ERR_INVALID_ARG);
  assert_non_null(strstr(meld_last_error(), "are not inside local region 0"));
  assert_int_equal(meld_proxy_write(p, 1, 0, 0, 0, 0, 8, 1, PAD_SLOTS, 1), MELD_ERR_INVALID_ARG);
  assert_non_null(strstr(meld_last_error(), "flag offset 512 is not an 8-byte aligned slot"));
  assert_int_equal(meld_proxy_write(p, 1, 0, 0, 0, 0, 8, 7, 0, 1), MELD_ERR_INVALID_ARG);
  assert_non_null(strstr(meld_last_error(), "flag region 7 is not registered"));
  assert_int_equal(meld_proxy_write(p, 1, 0, 0, 0, 0, 8, 70000, 0, 1), MELD_ERR_INVALID_ARG);
  assert_int_equal(meld_proxy_check(p), MELD_OK); /* refused at enqueue: the proxy is fine */
  assert_int_equal(meld_proxy_destroy(p), MELD_OK);
  /* Bad configurations. */
  meld_proxy_config_t cfg = MELD_PROXY_CONFIG_INIT;
  cfg.nslots = 6;
  assert_int_equal(meld_proxy_create(t, &cfg, &p), MELD_ERR_INVALID_ARG);
  assert_non_null(strstr(meld_last_error(), "nslots 6 is not a power of two"));
  cfg.nslots = 4;
  cfg.ring = (char *)wd.work[0] + 8;
  assert_int_equal(meld_proxy_create(t, &cfg, &p), MELD_ERR_INVALID_ARG);
  assert_non_null(strstr(meld_last_error(), "is not 64-byte aligned"));
  assert_int_equal(meld_proxy_create(NULL, NULL, &p), MELD_ERR_INVALID_ARG);
  meld_transport_t *u = NULL;
  assert_int_equal(meld_transport_new(&g_loop, &wd, 0, 2, 0, 1000, &u), MELD_OK);
  assert_int_equal(meld_proxy_create(u, NULL, &p), MELD_ERR_INVALID_ARG);
  assert_non_null(strstr(meld_last_error(), "not connected"));
  meld_transport_close(u, 0);
  /* A caller-provided ring (as a pinned, device-mapped one will be). */
  cfg.ring = wd.work[0] + 4096;
  assert_int_equal(meld_proxy_create(t, &cfg, &p), MELD_OK);
  assert_int_equal(meld_proxy_ring(p)->nslots, 4);
  assert_ptr_equal(meld_proxy_ring(p), wd.work[0] + 4096);
  assert_int_equal(meld_proxy_write(p, 1, 0, 0, 0, 0, 8, 1, 2, 42), MELD_OK);
  assert_int_equal(meld_proxy_wait_flag(p, &wd.pad[1][2], 42, 2000, NULL), MELD_OK);
  assert_int_equal(meld_proxy_destroy(p), MELD_OK);
  free_world(&wd, t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layout),      cmocka_unit_test(test_nslots),
      cmocka_unit_test(test_arithmetic),  cmocka_unit_test(test_proxy_stress),
      cmocka_unit_test(test_full_ring),   cmocka_unit_test(test_abort_word),
      cmocka_unit_test(test_bad_commands), cmocka_unit_test(test_nop_behind_incomplete_write),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
