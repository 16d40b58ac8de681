/* Public API on bad input: clear errors, never a crash; and init without a GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "comm.h" /* meld_split_assign */
#include "meld.h"

static void expect(meld_result_t got, meld_result_t want, const char *needle) {
  assert_int_equal(got, want);
  if (needle && !strstr(meld_last_error(), needle))
    fail_msg("message '%s' lacks '%s'", meld_last_error(), needle);
}

static void test_init_bad_args(void **state) {
  (void)state;
  meld_unique_id id;
  memset(&id, 0, sizeof id);
  meld_comm_t comm = (meld_comm_t)0x1;
  expect(meld_comm_init(NULL, 2, id, 0, NULL), MELD_ERR_INVALID_ARG, "comm is NULL");
  expect(meld_comm_init(&comm, 0, id, 0, NULL), MELD_ERR_INVALID_ARG, "nranks 0");
  assert_null(comm);
  expect(meld_comm_init(&comm, -3, id, 0, NULL), MELD_ERR_INVALID_ARG, "nranks -3");
  expect(meld_comm_init(&comm, 4, id, 5, NULL), MELD_ERR_INVALID_ARG, "rank 5 >= nranks 4");
  expect(meld_comm_init(&comm, 4, id, -1, NULL), MELD_ERR_INVALID_ARG, "rank -1");
  expect(meld_comm_init(&comm, 2, id, 0, NULL), MELD_ERR_INVALID_ARG, "unique id");
  meld_config_t bad = MELD_CONFIG_INIT;
  bad.size = 3;
  assert_int_equal(meld_get_unique_id(&id), MELD_OK);
  expect(meld_comm_init(&comm, 1, id, 0, &bad), MELD_ERR_INVALID_ARG, "MELD_CONFIG_INIT");
  expect(meld_get_unique_id(NULL), MELD_ERR_INVALID_ARG, "NULL");
}

static void test_other_calls_bad_args(void **state) {
  (void)state;
  meld_comm_info_t info;
  void *p = NULL;
  expect(meld_comm_info(NULL, &info), MELD_ERR_INVALID_ARG, "comm is NULL");
  expect(meld_comm_check(NULL), MELD_ERR_INVALID_ARG, "NULL");
  expect(meld_comm_abort(NULL), MELD_ERR_INVALID_ARG, "NULL");
  expect(meld_mem_alloc(NULL, 16, &p), MELD_ERR_INVALID_ARG, "NULL");
  expect(meld_mem_free(NULL, p), MELD_ERR_INVALID_ARG, "NULL");
  expect(meld_mem_peer_ptr(NULL, p, 0, &p), MELD_ERR_INVALID_ARG, "NULL");
  expect(meld_mem_register(NULL, &info, 16), MELD_ERR_INVALID_ARG, "comm is NULL");
  expect(meld_mem_deregister(NULL, &info), MELD_ERR_INVALID_ARG, "comm is NULL");
  assert_int_equal(meld_comm_destroy(NULL), MELD_OK);
}

static void test_init_env_missing(void **state) {
  (void)state;
  const char *vars[] = {"RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                        "SLURM_PROCID", "SLURM_NTASKS", NULL};
  for (int i = 0; vars[i]; i++) unsetenv(vars[i]);
  meld_comm_t comm = (meld_comm_t)0x1;
  assert_int_equal(meld_comm_init_env(&comm, NULL), MELD_ERR_INVALID_ARG);
  assert_null(comm);
  assert_true(strlen(meld_last_error()) > 10);
}

/* One rank alone: on a machine with no GPU the error says so; with one, init succeeds. */
static void test_single_rank_init(void **state) {
  (void)state;
  meld_unique_id id;
  assert_int_equal(meld_get_unique_id(&id), MELD_OK);
  meld_config_t cfg = MELD_CONFIG_INIT;
  cfg.bootstrap_timeout_ms = 2000;
  cfg.workspace_bytes = (size_t)1 << 20;
  meld_comm_t comm = NULL;
  meld_result_t r = meld_comm_init(&comm, 1, id, 0, &cfg);
  if (r == MELD_OK) {
    meld_comm_info_t info;
    assert_int_equal(meld_comm_info(comm, &info), MELD_OK);
    assert_int_equal(info.nranks, 1);
    assert_int_equal(info.nnodes, 1);
    /* split of one rank: a child of one rank; no color: no child; a bad color: refused */
    meld_comm_t child = (meld_comm_t)0x1;
    assert_int_equal(meld_comm_split(comm, 7, 0, NULL, &child), MELD_OK);
    assert_non_null(child);
    assert_int_equal(meld_comm_info(child, &info), MELD_OK);
    assert_int_equal(info.nranks, 1);
    assert_int_equal(info.workspace_bytes, (size_t)1 << 20); /* the parent's settings */
    assert_int_equal(meld_comm_destroy(child), MELD_OK);
    child = (meld_comm_t)0x1;
    assert_int_equal(meld_comm_split(comm, MELD_SPLIT_NOCOLOR, 0, NULL, &child), MELD_OK);
    assert_null(child);
    child = (meld_comm_t)0x1;
    expect(meld_comm_split(comm, -2, 0, NULL, &child), MELD_ERR_INVALID_ARG, "color -2");
    assert_null(child);
    expect(meld_comm_split(comm, 0, 0, NULL, NULL), MELD_ERR_INVALID_ARG, "child is NULL");
    assert_int_equal(meld_comm_destroy(comm), MELD_OK);
  } else {
    assert_int_equal(r, MELD_ERR_CUDA);
    assert_null(comm);
    if (!strstr(meld_last_error(), "no usable CUDA device"))
      fail_msg("unexpected message: %s", meld_last_error());
  }
}

/* meld_comm_split's grouping: ranks of one color ordered by key, ties by rank; the leader is
 * the group's rank 0; a negative color joins nothing. */
static void test_split_assign(void **state) {
  (void)state;
  /* 6 ranks: colors 1 0 1 -1 0 1, keys 5 2 5 0 -9 1 */
  const int32_t color[6] = {1, 0, 1, -1, 0, 1}, key[6] = {5, 2, 5, 0, -9, 1};
  const int want_n[6] = {3, 2, 3, 0, 2, 3}, want_rank[6] = {1, 1, 2, -1, 0, 0}, want_leader[6] = {5, 4, 5, -1, 4, 5};
  for (int me = 0; me < 6; me++) {
    int cr = 99, leader = 99;
    assert_int_equal(meld_split_assign(6, color, key, me, &cr, &leader), want_n[me]);
    assert_int_equal(cr, want_rank[me]);
    assert_int_equal(leader, want_leader[me]);
  }
  /* every group's ranks are 0..n-1 exactly once, at random colors and keys */
  uint64_t s = 7;
  for (int trial = 0; trial < 200; trial++) {
    int32_t c[16], k[16];
    const int n = 1 + trial % 16;
    for (int r = 0; r < n; r++) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      c[r] = (int32_t)((s >> 33) % 4) - 1, k[r] = (int32_t)((s >> 40) % 5);
    }
    for (int col = 0; col < 3; col++) {
      int seen[16] = {0}, size = 0;
      for (int r = 0; r < n; r++) size += c[r] == col;
      for (int r = 0; r < n; r++) {
        if (c[r] != col) continue;
        int cr = -1, leader = -1;
        assert_int_equal(meld_split_assign(n, c, k, r, &cr, &leader), size);
        assert_true(cr >= 0 && cr < size);
        assert_int_equal(seen[cr]++, 0);
        assert_int_equal(c[leader], col);
        if (cr == 0) assert_int_equal(leader, r);
      }
    }
  }
}

static void test_split_bad_args(void **state) {
  (void)state;
  meld_comm_t child = (meld_comm_t)0x1;
  expect(meld_comm_split(NULL, 0, 0, NULL, &child), MELD_ERR_INVALID_ARG, "comm is NULL");
  assert_null(child);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_init_bad_args),
      cmocka_unit_test(test_other_calls_bad_args),
      cmocka_unit_test(test_init_env_missing),
      cmocka_unit_test(test_single_rank_init),
      cmocka_unit_test(test_split_assign),
      cmocka_unit_test(test_split_bad_args),
  };
  return cmocka_run_group_tests_name("comm_args", tests, NULL, NULL);
}
