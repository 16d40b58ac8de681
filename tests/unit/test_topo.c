/* Node assignment: by host, by MELD_NODE_ID (emulated nodes), and its errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pthread.h>

#include <cmocka.h>

#include "comm.h"

static void make(meld_rank_info_t *r, int n, const uint64_t *hosts, const int *ovr) {
  memset(r, 0, sizeof *r * (size_t)n);
  for (int i = 0; i < n; i++) {
    r[i].host_hash = hosts[i];
    r[i].node_override = ovr ? ovr[i] : -1;
    r[i].uuid[0] = (unsigned char)(i + 1); /* distinct GPUs */
    snprintf(r[i].bus_id, sizeof r[i].bus_id, "0000:%02x:00.0", i);
  }
}

static void test_by_host(void **state) {
  (void)state;
  meld_rank_info_t r[8];
  const uint64_t hosts[8] = {7, 7, 9, 9, 7, 9, 11, 7};
  make(r, 8, hosts, NULL);
  int node[8], local[8], nnodes = 0;
  assert_int_equal(meld_topo_assign_nodes(r, 8, node, local, &nnodes), MELD_OK);
  assert_int_equal(nnodes, 3);
  const int want_node[8] = {0, 0, 1, 1, 0, 1, 2, 0};
  const int want_local[8] = {0, 1, 0, 1, 2, 2, 0, 3};
  for (int i = 0; i < 8; i++) {
    assert_int_equal(node[i], want_node[i]);
    assert_int_equal(local[i], want_local[i]);
  }
}

static void test_emulated_nodes(void **state) {
  (void)state;
  meld_rank_info_t r[4];
  const uint64_t hosts[4] = {5, 5, 5, 5};
  const int ovr[4] = {1, 1, 0, 0};
  make(r, 4, hosts, ovr);
  int node[4], local[4], nnodes = 0;
  assert_int_equal(meld_topo_assign_nodes(r, 4, node, local, &nnodes), MELD_OK);
  assert_int_equal(nnodes, 2);
  assert_int_equal(node[0], 0);
  assert_int_equal(node[2], 1);
  assert_int_equal(local[1], 1);
  assert_int_equal(local[3], 1);
}

static void test_single_rank(void **state) {
  (void)state;
  meld_rank_info_t r[1];
  const uint64_t hosts[1] = {3};
  make(r, 1, hosts, NULL);
  int node[1], local[1], nnodes = 0;
  assert_int_equal(meld_topo_assign_nodes(r, 1, node, local, &nnodes), MELD_OK);
  assert_int_equal(nnodes, 1);
  assert_int_equal(local[0], 0);
}

static void test_errors(void **state) {
  (void)state;
  meld_rank_info_t r[3];
  int node[3], local[3], nnodes = 0;
  const uint64_t same[3] = {1, 1, 1};
  const int partial[3] = {0, -1, 0};
  make(r, 3, same, partial);
  assert_int_equal(meld_topo_assign_nodes(r, 3, node, local, &nnodes), MELD_ERR_INVALID_ARG);
  assert_non_null(strstr(meld_last_error(), "MELD_NODE_ID is set on 2 of 3 ranks"));

  const uint64_t two_hosts[3] = {1, 2, 1};
  const int one_id[3] = {4, 4, 4};
  make(r, 3, two_hosts, one_id);
  assert_int_equal(meld_topo_assign_nodes(r, 3, node, local, &nnodes), MELD_ERR_INVALID_ARG);
  assert_non_null(strstr(meld_last_error(), "different hosts"));

  make(r, 3, same, NULL);
  r[2].uuid[0] = r[0].uuid[0];
  assert_int_equal(meld_topo_assign_nodes(r, 3, node, local, &nnodes), MELD_ERR_INVALID_ARG);
  assert_non_null(strstr(meld_last_error(), "both use GPU"));
  r[0].share_gpu = 1; /* MELD_SHARE_GPU on one of the two only: still refused */
  assert_int_equal(meld_topo_assign_nodes(r, 3, node, local, &nnodes), MELD_ERR_INVALID_ARG);
  r[2].share_gpu = 1; /* on both: allowed (test mode), one node of three local ranks */
  assert_int_equal(meld_topo_assign_nodes(r, 3, node, local, &nnodes), MELD_OK);
  assert_int_equal(nnodes, 1);
  assert_int_equal(local[2], 2);

  assert_int_equal(meld_topo_assign_nodes(NULL, 3, node, local, &nnodes), MELD_ERR_INVALID_ARG);
}

static void test_host_hash_stable(void **state) {
  (void)state;
  assert_true(meld_topo_host_hash() == meld_topo_host_hash());
  assert_true(meld_topo_host_hash() != 0);
}

/* The per-process nonce (with host and pid: "same process", symmem.c): drawn independently by
 * two processes, the same for every call and thread of one. */
static void *nonce_thread(void *out) {
  *(uint64_t *)out = meld_topo_proc_nonce();
  return NULL;
}
static void test_proc_nonce(void **state) {
  (void)state;
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  const pid_t pid = fork(); /* before this process draws its own */
  assert_true(pid >= 0);
  if (pid == 0) {
    const uint64_t v = meld_topo_proc_nonce();
    _exit(write(fds[1], &v, sizeof v) == (ssize_t)sizeof v ? 0 : 1);
  }
  uint64_t child = 0, mine = meld_topo_proc_nonce(), other = 0;
  assert_int_equal(read(fds[0], &child, sizeof child), (ssize_t)sizeof child);
  waitpid(pid, NULL, 0);
  close(fds[0]);
  close(fds[1]);
  assert_true(child != mine);
  assert_true(meld_topo_proc_nonce() == mine);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, nonce_thread, &other), 0);
  pthread_join(t, NULL);
  assert_true(other == mine);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_by_host),        cmocka_unit_test(test_emulated_nodes),
      cmocka_unit_test(test_single_rank),    cmocka_unit_test(test_errors),
      cmocka_unit_test(test_host_hash_stable), cmocka_unit_test(test_proc_nonce),
  };
  return cmocka_run_group_tests_name("topo", tests, NULL, NULL);
}
