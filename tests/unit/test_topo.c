/* Node assignment: by host, by MELD_NODE_ID (emulated nodes), and its errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pthread.h>

#include <cmocka.h>

#include "comm.h"
#include "pci.h"

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

/* GPU sharing (the SM shares of thread ranks): ranks that are threads of one process on one
 * GPU share it whatever their emulated nodes (MELD_NODE_ID groups); ranks of other processes,
 * or on other GPUs, do not. 2 x 2 thread ranks on one GPU: 4 each (node-by-node counting gave 2,
 * and the hierarchy's 4 grids of half the SMs could not all be resident). */
static void test_gpu_share(void **state) {
  (void)state;
  meld_rank_info_t r[7];
  const uint64_t hosts[7] = {5, 5, 5, 5, 5, 5, 6};
  const int ovr[7] = {0, 0, 1, 1, 0, 1, 0};
  make(r, 7, hosts, ovr);
  for (int i = 0; i < 7; i++) r[i].pid = 100, r[i].proc_nonce = 42, r[i].uuid[0] = 1; /* one process, one GPU */
  r[4].pid = 200;        /* another process on that GPU (time slices, not co-resident) */
  r[5].uuid[0] = 2;      /* this process, another GPU */
  /* (rank 6: another host, same pid and nonce by chance: not the same process) */
  const int want[7] = {4, 4, 4, 4, 1, 1, 1};
  for (int i = 0; i < 7; i++) assert_int_equal(meld_comm_gpu_share(r, 7, i), want[i]);
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

/* ---- PCI distances and the NIC choice (pci.h) ------------------------------------------- */

static void test_pci_distance(void **state) {
  (void)state;
  const char *sw = "/sys/devices/pci0000:16/0000:16:02.0/0000:17:00.0";
  assert_int_equal(meld_pci_distance(sw, sw), 0);
  /* siblings under one switch port */
  assert_int_equal(meld_pci_distance("/sys/devices/pci0000:16/0000:16:02.0/0000:17:00.0/0000:18:00.0",
                                     "/sys/devices/pci0000:16/0000:16:02.0/0000:17:00.0/0000:19:00.0"), 2);
  /* a bridge and a device below it */
  assert_int_equal(meld_pci_distance(sw, "/sys/devices/pci0000:16/0000:16:02.0/0000:17:00.0/0000:18:00.0"), 1);
  /* names that share a prefix are not ancestors: 0000:1 vs 0000:17 */
  assert_int_equal(meld_pci_distance("/sys/devices/pci0000:16/0000:1", sw), 1 + 2);
  /* other root complexes share only /sys/devices */
  assert_int_equal(meld_pci_distance(sw, "/sys/devices/pci0000:97/0000:97:02.0/0000:98:00.0"), 6);
  assert_true(meld_pci_distance(NULL, sw) >= 1 << 20);
  assert_true(meld_pci_distance(sw, "") >= 1 << 20);
}

static void test_pci_pick(void **state) {
  (void)state;
  /* Two sockets, two NICs each; the GPU sits under NIC 2's switch. */
  const char *nic[4] = {"/sys/devices/pci0000:16/0000:16:01.0/0000:17:00.0",
                        "/sys/devices/pci0000:16/0000:16:02.0/0000:20:00.0",
                        "/sys/devices/pci0000:97/0000:97:01.0/0000:98:00.0/0000:99:00.0",
                        "/sys/devices/pci0000:97/0000:97:02.0/0000:a0:00.0"};
  const char *gpu = "/sys/devices/pci0000:97/0000:97:01.0/0000:98:00.0/0000:9a:00.0";
  for (int li = 0; li < 4; li++) assert_int_equal(meld_pci_pick_nic(gpu, nic, 4, li), 2);
  /* A GPU on socket 0's root, under neither switch: NICs 0 and 1 are equally near; ranks
   * spread over them by local index. */
  const char *gpu0 = "/sys/devices/pci0000:16/0000:16:03.0/0000:30:00.0";
  assert_int_equal(meld_pci_pick_nic(gpu0, nic, 4, 0), 0);
  assert_int_equal(meld_pci_pick_nic(gpu0, nic, 4, 1), 1);
  assert_int_equal(meld_pci_pick_nic(gpu0, nic, 4, 2), 0);
  /* No GPU path: all equal, round robin; unknown NIC paths lose to known ones. */
  for (int li = 0; li < 8; li++) assert_int_equal(meld_pci_pick_nic(NULL, nic, 4, li), li % 4);
  const char *some[3] = {NULL, nic[3], NULL};
  assert_int_equal(meld_pci_pick_nic(gpu, some, 3, 0), 1);
  assert_int_equal(meld_pci_pick_nic(gpu, nic, 0, 0), -1);
}

/* Paths are resolved through sysfs's links: a fake tree under a temporary root. */
static void test_pci_sysfs(void **state) {
  (void)state;
  char root[] = "/tmp/meld-sysfs-XXXXXX";
  assert_non_null(mkdtemp(root));
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "set -e; cd %s; mkdir -p devices/pci0000:16/0000:16:02.0/0000:17:00.0/0000:1a:00.0 "
           "devices/pci0000:16/0000:16:02.0/0000:17:00.0/0000:19:00.0 bus/pci/devices class/infiniband/mlx5_3; "
           "ln -s ../../../devices/pci0000:16/0000:16:02.0/0000:17:00.0/0000:1a:00.0 bus/pci/devices/0000:1a:00.0; "
           "ln -s ../../../devices/pci0000:16/0000:16:02.0/0000:17:00.0/0000:19:00.0 class/infiniband/mlx5_3/device",
           root);
  assert_int_equal(system(cmd), 0);
  char gpu[512], nic[512];
  assert_int_equal(meld_pci_path_of_bus_id(root, "0000:1a:00.0", gpu, sizeof gpu), 0);
  char gpu_upper[512]; /* (CUDA spells bus ids in upper case, sysfs in lower) */
  assert_int_equal(meld_pci_path_of_bus_id(root, "0000:1A:00.0", gpu_upper, sizeof gpu_upper), 0);
  assert_string_equal(gpu, gpu_upper);
  assert_int_equal(meld_pci_path_of_ibdev(root, "mlx5_3", nic, sizeof nic), 0);
  assert_non_null(strstr(gpu, "/devices/pci0000:16/0000:16:02.0/0000:17:00.0/0000:1a:00.0"));
  assert_int_equal(meld_pci_distance(gpu, nic), 2);
  assert_int_equal(meld_pci_path_of_bus_id(root, "0000:AB:00.0", gpu, sizeof gpu), -1);
  assert_int_equal(meld_pci_path_of_ibdev(root, "mlx5_0", nic, sizeof nic), -1);
  snprintf(cmd, sizeof cmd, "rm -rf %s", root);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_by_host),        cmocka_unit_test(test_emulated_nodes), cmocka_unit_test(test_gpu_share),
      cmocka_unit_test(test_single_rank),    cmocka_unit_test(test_errors),
      cmocka_unit_test(test_host_hash_stable), cmocka_unit_test(test_proc_nonce),
      cmocka_unit_test(test_pci_distance), cmocka_unit_test(test_pci_pick), cmocka_unit_test(test_pci_sysfs),
  };
  return cmocka_run_group_tests_name("topo", tests, NULL, NULL);
}
