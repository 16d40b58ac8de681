/* Bootstrap over real TCP on loopback: ranks are fork()ed children (and, once, threads).
 *
 * The listener across fork(): the parent opens the root's listening socket with
 * meld_bootstrap_root_listen(port 0) before forking, so the address exists before any rank
 * starts and joiners that come early wait in its backlog. Every child inherits the listener
 * table. Child 0 (rank 0) takes its inherited copy in meld_bootstrap_init; every other child,
 * and the parent once all are forked, calls meld_bootstrap_root_release so that only rank 0
 * keeps the port open (a copy left open elsewhere would accept connections nobody answers).
 *
 * Children report through their exit code: 0 = behaved as expected; otherwise they print
 * the failed check and meld_last_error() to stderr. They leave with exit() (after the parent
 * flushed stdio), so that under ASan LeakSanitizer checks each child as well. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "bootstrap.h"
#include "common/mp_job.h"
#include "error.h"
#include "sock.h"

#define MAX_CHILD MP_MAX_CHILD
#define CHILD_LIMIT_MS 15000 /* a child still running after this is killed: a hang */

static int64_t now_ms(void) { return meld_now_ms(); }
static void sleep_ms(int ms) { meld_sleep_ms(ms); }
static job_t new_job(int nranks) { return mp_new_job(nranks); }
static void run_children(int n, child_fn fn, const job_t *job, int *codes) {
  mp_run_children(n, fn, job, codes, CHILD_LIMIT_MS);
}
static void expect_all_zero(int n, const int *codes) { mp_expect_codes(n, codes, -1, 0); }

static unsigned char pattern(int rank, size_t i) {
  return (unsigned char)(rank * 31 + i * 7 + 1);
}

/* Allgather (small and 64 KiB per rank, so that sends and receives go partial), bcast from
 * the last rank, barriers, and a zero-byte allgather. */
static int collectives_rank(int idx, const job_t *job) {
  const int n = job->nranks, rank = idx;
  meld_bootstrap_t *b = NULL;
  CHILD_CHECK(meld_bootstrap_init(&job->addr, n, rank, 10000, &b) == MELD_OK);
  CHILD_CHECK(meld_bootstrap_rank(b) == rank && meld_bootstrap_nranks(b) == n);
  const size_t sizes[2] = {40, 64 << 10};
  for (int s = 0; s < 2; s++) {
    size_t bytes = sizes[s];
    unsigned char *buf = calloc((size_t)n, bytes);
    CHILD_CHECK(buf != NULL);
    for (size_t i = 0; i < bytes; i++) buf[(size_t)rank * bytes + i] = pattern(rank, i);
    CHILD_CHECK(meld_bootstrap_allgather(b, buf, bytes) == MELD_OK);
    for (int r = 0; r < n; r++)
      for (size_t i = 0; i < bytes; i++) CHILD_CHECK(buf[(size_t)r * bytes + i] == pattern(r, i));
    free(buf);
  }
  unsigned char msg[100] = {0};
  const int root = n - 1;
  if (rank == root)
    for (size_t i = 0; i < sizeof msg; i++) msg[i] = pattern(99, i);
  CHILD_CHECK(meld_bootstrap_bcast(b, msg, sizeof msg, root) == MELD_OK);
  for (size_t i = 0; i < sizeof msg; i++) CHILD_CHECK(msg[i] == pattern(99, i));
  CHILD_CHECK(meld_bootstrap_barrier(b) == MELD_OK);
  CHILD_CHECK(meld_bootstrap_allgather(b, NULL, 0) == MELD_OK);
  CHILD_CHECK(meld_bootstrap_barrier_timeout(b, 5000) == MELD_OK);
  meld_bootstrap_destroy(b);
  return 0;
}

static void collectives(int n) {
  mp_run_ok(n, n, collectives_rank, CHILD_LIMIT_MS);
}

static void test_collectives_2(void **state) {
  (void)state, collectives(2);
}
static void test_collectives_4(void **state) {
  (void)state, collectives(4);
}
static void test_collectives_8(void **state) {
  (void)state, collectives(8);
}

/* As under a launcher (meld_bootstrap_from_env): nobody made a listener; rank 0 binds the
 * port itself, 200 ms late, and the joiners retry "connection refused" until it is up. */
static int late_root_rank(int idx, const job_t *job) {
  if (idx == 0) sleep_ms(200);
  return collectives_rank(idx, job);
}

static void test_root_binds_port(void **state) {
  (void)state;
  job_t job = new_job(3);
  meld_bootstrap_root_release(job.addr.key); /* before fork: the port is free again */
  int codes[MAX_CHILD];
  run_children(3, late_root_rank, &job, codes);
  expect_all_zero(3, codes);
}

/* The advertised address: the argument, else MELD_SOCKET_ADDR, else this host's. */
static void test_advertised_host(void **state) {
  (void)state;
  meld_boot_addr_t a;
  assert_int_equal(meld_bootstrap_root_listen(0, "node-a", &a), MELD_OK);
  assert_string_equal(a.host, "node-a");
  meld_bootstrap_root_release(a.key);
  setenv("MELD_SOCKET_ADDR", "10.9.8.7", 1);
  assert_int_equal(meld_bootstrap_root_listen(0, NULL, &a), MELD_OK);
  assert_string_equal(a.host, "10.9.8.7");
  meld_bootstrap_root_release(a.key);
  unsetenv("MELD_SOCKET_ADDR");
  assert_int_equal(meld_bootstrap_root_listen(0, NULL, &a), MELD_OK);
  assert_true(a.host[0] != '\0' && a.magic == MELD_BOOT_MAGIC && a.port != 0);
  meld_bootstrap_root_release(a.key);
}

/* Rank 3 of 4 never starts: the others fail with MELD_ERR_TIMEOUT within timeout + 1 s, and
 * the root names rank 3 (as do the others, through the root's abort message). */
static int missing_rank_rank(int idx, const job_t *job) {
  if (idx == 3) return 0;
  meld_bootstrap_t *b = NULL;
  int64_t t0 = now_ms();
  meld_result_t rc = meld_bootstrap_init(&job->addr, job->nranks, idx, 1500, &b);
  int64_t dt = now_ms() - t0;
  CHILD_CHECK(rc == MELD_ERR_TIMEOUT && b == NULL);
  CHILD_CHECK(dt >= 1400 && dt <= 2500);
  /* The root names rank 3; the others normally get the root's sentence too, but a rank
   * that started well before the root (a loaded machine) times out first with its own. */
  CHILD_CHECK(strstr(meld_last_error(), "waiting for rank 3 (1 of 4 missing)") != NULL ||
              (idx != 0 && strstr(meld_last_error(), "timed out after 1500 ms") != NULL));
  return 0;
}

static void test_missing_rank_times_out(void **state) {
  (void)state;
  mp_run_ok(4, 4, missing_rank_rank, CHILD_LIMIT_MS);
}

/* Rank 0 never starts (and nobody listens): joiners retry, then time out with a sentence. */
static int missing_root_rank(int idx, const job_t *job) {
  if (idx == 0) return 0;
  meld_bootstrap_t *b = NULL;
  int64_t t0 = now_ms();
  meld_result_t rc = meld_bootstrap_init(&job->addr, job->nranks, idx, 1500, &b);
  int64_t dt = now_ms() - t0;
  CHILD_CHECK(rc == MELD_ERR_TIMEOUT && b == NULL);
  CHILD_CHECK(dt >= 1400 && dt <= 2500);
  CHILD_CHECK(strstr(meld_last_error(), "could not reach the root") != NULL);
  return 0;
}

static void test_missing_root_times_out(void **state) {
  (void)state;
  job_t job = new_job(3);
  meld_bootstrap_root_release(job.addr.key); /* before fork: nobody ever listens */
  int codes[MAX_CHILD];
  run_children(3, missing_root_rank, &job, codes);
  expect_all_zero(3, codes);
}

/* Rank 0 holds the listener (joiners wait in its backlog) but dies before init: the joiners
 * fail at once, not at their timeout. */
static int root_dies_rank(int idx, const job_t *job) {
  if (idx == 0) {
    sleep_ms(300);
    return 0; /* exit closes the listener: the kernel resets the queued connections */
  }
  meld_bootstrap_t *b = NULL;
  int64_t t0 = now_ms();
  meld_result_t rc = meld_bootstrap_init(&job->addr, job->nranks, idx, 5000, &b);
  CHILD_CHECK(rc == MELD_ERR_SYSTEM && b == NULL);
  CHILD_CHECK(now_ms() - t0 < 2000);
  CHILD_CHECK(strstr(meld_last_error(), "lost its connection to the root") != NULL);
  return 0;
}

static void test_root_dies(void **state) {
  (void)state;
  mp_run_ok(3, 3, root_dies_rank, CHILD_LIMIT_MS);
}

/* Children 3 and 4 are strays (another job's key; a wrong nranks) that knock first; the root
 * refuses them with a sentence and the job's ranks 0..2, which start 300 ms later, complete. */
static int strays_rank(int idx, const job_t *job) {
  meld_bootstrap_t *b = NULL;
  if (idx >= 3) {
    meld_boot_addr_t a = job->addr;
    if (idx == 3) a.key ^= 0x5a5a;
    meld_result_t rc = meld_bootstrap_init(&a, idx == 3 ? 3 : 5, idx == 3 ? 1 : 2, 5000, &b);
    CHILD_CHECK(rc == MELD_ERR_INVALID_ARG && b == NULL);
    CHILD_CHECK(strstr(meld_last_error(), idx == 3 ? "another job key tried to join: refused"
                                                   : "says nranks is 5 but the job has 3") != NULL);
    return 0;
  }
  if (idx > 0) sleep_ms(300);
  CHILD_CHECK(meld_bootstrap_init(&job->addr, 3, idx, 5000, &b) == MELD_OK);
  int v[3] = {0};
  v[idx] = 100 + idx;
  CHILD_CHECK(meld_bootstrap_allgather(b, v, sizeof v[0]) == MELD_OK);
  CHILD_CHECK(v[0] == 100 && v[1] == 101 && v[2] == 102);
  CHILD_CHECK(meld_bootstrap_barrier(b) == MELD_OK);
  meld_bootstrap_destroy(b);
  return 0;
}

static void test_strays_refused(void **state) {
  (void)state;
  mp_run_ok(3, 5, strays_rank, CHILD_LIMIT_MS);
}

/* Rank 2 passes 64 bytes to an allgather where the others pass 32: every rank fails with the
 * root's sentence, and the bootstrap stays failed. */
static int mismatch_size_rank(int idx, const job_t *job) {
  meld_bootstrap_t *b = NULL;
  CHILD_CHECK(meld_bootstrap_init(&job->addr, job->nranks, idx, 5000, &b) == MELD_OK);
  char buf[3 * 64] = {0};
  meld_result_t rc = meld_bootstrap_allgather(b, buf, idx == 2 ? 64 : 32);
  CHILD_CHECK(rc == MELD_ERR_INVALID_ARG);
  CHILD_CHECK(strstr(meld_last_error(),
                     "rank 2 sent 64 bytes, expected 32: ranks called "
                     "different collectives") != NULL);
  CHILD_CHECK(meld_bootstrap_barrier(b) == MELD_ERR_INVALID_ARG);
  CHILD_CHECK(strstr(meld_last_error(), "unusable after an earlier failure") != NULL);
  meld_bootstrap_destroy(b);
  return 0;
}

/* Rank 1 calls barrier while the others call bcast. */
static int mismatch_kind_rank(int idx, const job_t *job) {
  meld_bootstrap_t *b = NULL;
  CHILD_CHECK(meld_bootstrap_init(&job->addr, job->nranks, idx, 5000, &b) == MELD_OK);
  char buf[16] = {0};
  meld_result_t rc = idx == 1 ? meld_bootstrap_barrier(b) : meld_bootstrap_bcast(b, buf, 16, 0);
  CHILD_CHECK(rc == MELD_ERR_INVALID_ARG);
  CHILD_CHECK(strstr(meld_last_error(), "rank 1 called barrier while rank 0 called bcast") != NULL);
  meld_bootstrap_destroy(b);
  return 0;
}

static void test_mismatched_collectives(void **state) {
  (void)state;
  mp_run_ok(3, 3, mismatch_size_rank, CHILD_LIMIT_MS);
  mp_run_ok(3, 3, mismatch_kind_rank, CHILD_LIMIT_MS);
}

/* Rank 2 exits right after init: the others' barrier fails at once, naming rank 2. */
static int peer_dies_rank(int idx, const job_t *job) {
  meld_bootstrap_t *b = NULL;
  CHILD_CHECK(meld_bootstrap_init(&job->addr, job->nranks, idx, 5000, &b) == MELD_OK);
  if (idx == 2) {
    meld_bootstrap_destroy(b); /* and exits: its socket is closed */
    return 0;
  }
  int64_t t0 = now_ms();
  CHILD_CHECK(meld_bootstrap_barrier(b) == MELD_ERR_SYSTEM);
  CHILD_CHECK(now_ms() - t0 < 2000);
  CHILD_CHECK(strstr(meld_last_error(), "rank 2 closed its connection") != NULL);
  meld_bootstrap_destroy(b);
  return 0;
}

static void test_peer_dies(void **state) {
  (void)state;
  mp_run_ok(3, 3, peer_dies_rank, CHILD_LIMIT_MS);
}

/* Rank 2 is late to a barrier with a 300 ms deadline: the others time out naming it. */
static int barrier_timeout_rank(int idx, const job_t *job) {
  meld_bootstrap_t *b = NULL;
  CHILD_CHECK(meld_bootstrap_init(&job->addr, job->nranks, idx, 5000, &b) == MELD_OK);
  if (idx == 2) {
    sleep_ms(800);
    CHILD_CHECK(meld_bootstrap_barrier(b) != MELD_OK);
  } else {
    int64_t t0 = now_ms();
    CHILD_CHECK(meld_bootstrap_barrier_timeout(b, 300) == MELD_ERR_TIMEOUT);
    int64_t dt = now_ms() - t0;
    CHILD_CHECK(dt >= 250 && dt <= 1300);
    CHILD_CHECK(strstr(meld_last_error(), "waiting for rank 2 (1 of 3 missing)") != NULL ||
                (idx != 0 && strstr(meld_last_error(), "timed out after 300 ms") != NULL));
  }
  meld_bootstrap_destroy(b);
  return 0;
}

static void test_barrier_timeout(void **state) {
  (void)state;
  mp_run_ok(3, 3, barrier_timeout_rank, CHILD_LIMIT_MS);
}

static void test_port_in_use(void **state) {
  (void)state;
  meld_boot_addr_t a, c;
  assert_int_equal(meld_bootstrap_root_listen(0, NULL, &a), MELD_OK);
  assert_int_equal(meld_bootstrap_root_listen(a.port, NULL, &c), MELD_ERR_SYSTEM);
  assert_non_null(strstr(meld_last_error(), "is already in use"));
  /* A rank 0 that does not hold the listener binds the port itself: in use, too. */
  meld_boot_addr_t other = a;
  other.key ^= 1;
  meld_bootstrap_t *b = (meld_bootstrap_t *)&b;
  assert_int_equal(meld_bootstrap_init(&other, 2, 0, 1000, &b), MELD_ERR_SYSTEM);
  assert_null(b);
  assert_non_null(strstr(meld_last_error(), "is already in use"));
  meld_bootstrap_root_release(a.key);
  meld_bootstrap_root_release(a.key); /* twice: a no-op */
  assert_int_equal(meld_bootstrap_root_listen(a.port, NULL, &c), MELD_OK);
  meld_bootstrap_root_release(c.key);
}

static void expect_invalid(meld_result_t rc, const char *sentence) {
  assert_int_equal(rc, MELD_ERR_INVALID_ARG);
  if (!strstr(meld_last_error(), sentence))
    fail_msg("expected \"%s\" in \"%s\"", sentence, meld_last_error());
}

static void test_bad_args(void **state) {
  (void)state;
  meld_boot_addr_t a;
  meld_bootstrap_t *b = NULL;
  assert_int_equal(meld_bootstrap_root_listen(0, NULL, &a), MELD_OK);
  expect_invalid(meld_bootstrap_init(&a, 0, 0, 1000, &b), "nranks 0 is outside [1, 4096]");
  expect_invalid(meld_bootstrap_init(&a, -2, 0, 1000, &b), "nranks -2 is outside");
  expect_invalid(meld_bootstrap_init(&a, 5000, 0, 1000, &b), "nranks 5000 is outside");
  expect_invalid(meld_bootstrap_init(&a, 4, 5, 1000, &b), "meld_comm_init: rank 5 >= nranks 4");
  expect_invalid(meld_bootstrap_init(&a, 4, 4, 1000, &b), "rank 4 >= nranks 4");
  expect_invalid(meld_bootstrap_init(&a, 4, -1, 1000, &b), "rank -1 < 0");
  expect_invalid(meld_bootstrap_init(&a, 4, 0, 1000, NULL), "NULL output");
  expect_invalid(meld_bootstrap_init(NULL, 4, 0, 1000, &b), "NULL unique id");
  expect_invalid(meld_bootstrap_init(&a, 4, 0, 0, &b), "timeout 0 ms must be >= 1");
  meld_boot_addr_t zero;
  memset(&zero, 0, sizeof zero);
  expect_invalid(meld_bootstrap_init(&zero, 4, 1, 1000, &b), "not made by meld_get_unique_id");
  assert_null(b);
  expect_invalid(meld_bootstrap_root_listen(0, NULL, NULL), "NULL id");
  expect_invalid(meld_bootstrap_root_listen(70000, NULL, &zero), "port 70000 is outside");
  expect_invalid(meld_bootstrap_allgather(NULL, NULL, 0), "NULL b");
  expect_invalid(meld_bootstrap_bcast(NULL, NULL, 0, 0), "NULL b");
  expect_invalid(meld_bootstrap_barrier(NULL), "NULL b");
  assert_int_equal(meld_bootstrap_rank(NULL), -1);
  meld_bootstrap_destroy(NULL);
  /* On a one-rank bootstrap: */
  assert_int_equal(meld_bootstrap_init(&a, 1, 0, 1000, &b), MELD_OK);
  expect_invalid(meld_bootstrap_bcast(b, &a, 8, 1), "root 1 is outside [0, 1)");
  expect_invalid(meld_bootstrap_allgather(b, NULL, 8), "NULL buf");
  expect_invalid(meld_bootstrap_barrier_timeout(b, 0), "timeout 0 ms must be >= 1");
  meld_bootstrap_destroy(b);
}

/* One rank: no sockets; collectives leave the data as it is; a listener made for the id is
 * closed (the port is free again). */
static void test_single_rank(void **state) {
  (void)state;
  meld_boot_addr_t a, c;
  assert_int_equal(meld_bootstrap_root_listen(0, NULL, &a), MELD_OK);
  meld_bootstrap_t *b = NULL;
  assert_int_equal(meld_bootstrap_init(&a, 1, 0, 1000, &b), MELD_OK);
  assert_int_equal(meld_bootstrap_root_listen(a.port, NULL, &c), MELD_OK);
  meld_bootstrap_root_release(c.key);
  int v = 42;
  assert_int_equal(meld_bootstrap_allgather(b, &v, sizeof v), MELD_OK);
  assert_int_equal(meld_bootstrap_bcast(b, &v, sizeof v, 0), MELD_OK);
  assert_int_equal(meld_bootstrap_barrier(b), MELD_OK);
  assert_int_equal(meld_bootstrap_barrier_timeout(b, 10), MELD_OK);
  assert_int_equal(v, 42);
  assert_int_equal(meld_bootstrap_nranks(b), 1);
  meld_bootstrap_destroy(b);
  a.port = 0; /* no listener and no port: still fine for one rank */
  assert_int_equal(meld_bootstrap_init(&a, 1, 0, 1000, &b), MELD_OK);
  meld_bootstrap_destroy(b);
}

/* Ranks as threads of one process: rank 0's thread takes the listener from the table. */
typedef struct {
  const meld_boot_addr_t *addr;
  int rank, ok;
} thread_arg_t;

static void *thread_rank(void *p) {
  thread_arg_t *t = p;
  meld_bootstrap_t *b = NULL;
  uint64_t v[4] = {0};
  v[t->rank] = 1000 + (uint64_t)t->rank;
  uint64_t w = t->rank == 2 ? 77 : 0;
  t->ok = meld_bootstrap_init(t->addr, 4, t->rank, 10000, &b) == MELD_OK &&
          meld_bootstrap_allgather(b, v, sizeof v[0]) == MELD_OK &&
          meld_bootstrap_bcast(b, &w, sizeof w, 2) == MELD_OK &&
          meld_bootstrap_barrier(b) == MELD_OK && v[0] == 1000 && v[1] == 1001 && v[2] == 1002 &&
          v[3] == 1003 && w == 77;
  meld_bootstrap_destroy(b);
  return NULL;
}

static void test_threads(void **state) {
  (void)state;
  meld_boot_addr_t a;
  assert_int_equal(meld_bootstrap_root_listen(0, "127.0.0.1", &a), MELD_OK);
  pthread_t th[4];
  thread_arg_t args[4];
  for (int r = 3; r >= 0; r--) { /* rank 0 last: the others wait in its backlog */
    args[r] = (thread_arg_t){&a, r, 0};
    assert_int_equal(pthread_create(&th[r], NULL, thread_rank, &args[r]), 0);
  }
  for (int r = 0; r < 4; r++) {
    pthread_join(th[r], NULL);
    assert_true(args[r].ok);
  }
}

int main(void) {
  setenv("MELD_DEBUG", "NONE", 0); /* expected failures would print warnings */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_collectives_2),
      cmocka_unit_test(test_collectives_4),
      cmocka_unit_test(test_collectives_8),
      cmocka_unit_test(test_root_binds_port),
      cmocka_unit_test(test_advertised_host),
      cmocka_unit_test(test_missing_rank_times_out),
      cmocka_unit_test(test_missing_root_times_out),
      cmocka_unit_test(test_root_dies),
      cmocka_unit_test(test_strays_refused),
      cmocka_unit_test(test_mismatched_collectives),
      cmocka_unit_test(test_peer_dies),
      cmocka_unit_test(test_barrier_timeout),
      cmocka_unit_test(test_port_in_use),
      cmocka_unit_test(test_bad_args),
      cmocka_unit_test(test_single_rank),
      cmocka_unit_test(test_threads),
  };
  return cmocka_run_group_tests_name("bootstrap", tests, NULL, NULL);
}
