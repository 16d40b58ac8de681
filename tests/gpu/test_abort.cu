/* GPU tests of the device protocol's failure paths (nothing waits forever):
 *   1. a wait on a flag nobody sets: rank 0 (timeout 2 s) times out; rank 1 (timeout 20 s)
 *      is aborted by rank 0 within the same 2 s; while rank 0 spins, the host reads the
 *      wait-for mirror; meld_comm_check returns MELD_ERR_TIMEOUT / MELD_ERR_ABORTED with the
 *      record as a sentence; later calls return at kernel entry (sticky); both ranks destroy
 *      the comm (the CUDA context survived: no trap) and exit 0;
 *   2. meld_comm_abort from another host thread while kernels spin (timeout 20 s): both
 *      ranks' kernels stop at once;
 *   3. mismatched argument hashes: the call fails on both ranks with "arguments differ";
 *   4. kill -9 of rank 1 while both wait: rank 0 fails within its deadline.
 * Parts 3 and 4 need 2 GPUs ("skipped (needs 2 GPUs)" otherwise). */
#include <pthread.h>

#include "gpu_test.h"

#include "comm.h"
#include "device/launch.cuh"
#include "proto.h"

#define WAIT_CTAS 4

static int g_ndev = 0;

static meld_config_t test_config(int64_t timeout_ms) {
  meld_config_t cfg = MELD_CONFIG_INIT;
  cfg.bootstrap_timeout_ms = 30000;
  cfg.timeout_ms = timeout_ms;
  cfg.workspace_bytes = (size_t)8 << 20;
  return cfg;
}

/* Every CTA's thread 0 waits for signal slot `slot` (from rank `from`) to reach stamp
 * (epoch, 5): a flag nobody sets. status[cta] = 2 if the wait succeeded, 1 if it failed. */
__global__ void wait_kernel(const __grid_constant__ meld_proto_dev_t proto, uint32_t slot, int from,
                            uint32_t *status) {
  meld_ctx_t ctx;
  bool ok = meld_call_begin(&ctx, &proto, MELD_OP_TEST_ABORT, 0x5eed, 1);
  if (threadIdx.x == 0) {
    if (ok) ok = meld_wait_signal(&ctx, slot, meld_stamp(ctx.epoch, 5), from, "never set");
    status[blockIdx.x] = ok ? 2u : 1u;
  }
  meld_call_end(&ctx);
}

/* The argument handshake alone. status[cta] = 2 if the call may proceed, else 1. */
__global__ void handshake_kernel(const __grid_constant__ meld_proto_dev_t proto, uint32_t arg_hash,
                                 uint32_t *status) {
  meld_ctx_t ctx;
  const bool ok = meld_call_begin(&ctx, &proto, MELD_OP_TEST_ABORT, arg_hash, 1);
  if (threadIdx.x == 0) status[blockIdx.x] = ok ? 2u : 1u;
  meld_call_end(&ctx);
}

static uint32_t *g_status = NULL;

static void launch_wait(meld_comm_t comm, uint32_t slot, int from) {
  if (!g_status) GT_CUDA(cudaMalloc(&g_status, 64 * sizeof(uint32_t)));
  GT_CUDA(cudaMemset(g_status, 0, 64 * sizeof(uint32_t)));
  meld_proto_dev_t pd = meld_proto_dev(comm);
  void *args[] = {&pd, &slot, &from, &g_status};
  GT_MELD(meld_launch_coop((const void *)wait_kernel, WAIT_CTAS, 64, 0, args, 0));
}

/* Number of CTAs whose status is `want`. */
static int count_status(int nctas, uint32_t want) {
  uint32_t h[64] = {0};
  GT_CUDA(cudaMemcpy(h, g_status, nctas * sizeof(uint32_t), cudaMemcpyDeviceToHost));
  int n = 0;
  for (int i = 0; i < nctas; i++) n += h[i] == want;
  return n;
}

static meld_result_t check_msg(meld_comm_t comm, char *msg, size_t len) {
  meld_result_t r = meld_comm_check(comm);
  snprintf(msg, len, "%s", meld_last_error());
  return r;
}

/* ---- 1. timeout, peer aborted, mirror, sticky ------------------------------------------------ */

static void rank_timeout(int rank, int nranks) {
  meld_config_t cfg = test_config(rank == 0 ? 2000 : 20000);
  meld_comm_t comm = NULL;
  GT_MELD(meld_comm_init_env(&comm, &cfg));
  if (!comm) return;
  const int peer = (rank + 1) % nranks;
  double t0 = gt_now_s();
  launch_wait(comm, 17, peer);
  if (rank == 0) {
    usleep(500000);
    char waits[4096];
    int n = meld_proto_format_waits(comm, waits, sizeof waits);
    GT_CHECK(n == WAIT_CTAS && strstr(waits, "signal slot 17") != NULL,
             "while stuck, the host sees %d waiting CTAs (expected %d): %s", n, WAIT_CTAS, waits);
    gt_log("wait-for picture while stuck (host-mapped mirror):\n%s", waits);
    char msg[2048];
    GT_CHECK(check_msg(comm, msg, sizeof msg) == MELD_OK, "check while still waiting: %s", msg);
  }
  GT_CUDA(cudaDeviceSynchronize());
  double el = gt_now_s() - t0;
  char msg[2048];
  meld_result_t r = check_msg(comm, msg, sizeof msg);
  gt_log("after %.2f s: meld_comm_check -> %s: %s", el, meld_strerror(r), msg);
  GT_CHECK(count_status(WAIT_CTAS, 1) == WAIT_CTAS, "every CTA's wait must fail");
  if (rank == 0) {
    GT_CHECK(el > 1.5 && el < 6.0, "rank 0 timed out after %.2f s (timeout 2 s)", el);
    GT_CHECK(r == MELD_ERR_TIMEOUT, "expected MELD_ERR_TIMEOUT, got %s", meld_strerror(r));
    GT_CHECK(strstr(msg, "timed out") && strstr(msg, "slot 17") && strstr(msg, "abort_test"),
             "message lacks the record: %s", msg);
  } else {
    GT_CHECK(el < 6.0, "rank %d stopped after %.2f s: it should be aborted by rank 0 at about 2 s", rank, el);
    GT_CHECK(r == MELD_ERR_ABORTED, "expected MELD_ERR_ABORTED, got %s", meld_strerror(r));
    GT_CHECK(strstr(msg, "aborted by rank 0") != NULL, "message does not name rank 0: %s", msg);
  }
  /* Sticky: the next call returns at kernel entry, and check still reports the error. */
  t0 = gt_now_s();
  launch_wait(comm, 17, peer);
  GT_CUDA(cudaDeviceSynchronize());
  el = gt_now_s() - t0;
  GT_CHECK(el < 1.0 && count_status(WAIT_CTAS, 1) == WAIT_CTAS, "a call after the abort took %.2f s", el);
  GT_CHECK(meld_comm_check(comm) == r, "the error must stay: %s", meld_last_error());
  GT_MELD(meld_comm_destroy(comm)); /* succeeds: the context survived */
}

/* ---- 2. meld_comm_abort from another thread ------------------------------------------------- */

static void *abort_later(void *arg) {
  usleep(300000);
  GT_MELD(meld_comm_abort((meld_comm_t)arg));
  return NULL;
}

static void rank_user_abort(int rank, int nranks) {
  meld_config_t cfg = test_config(20000);
  meld_comm_t comm = NULL;
  GT_MELD(meld_comm_init_env(&comm, &cfg));
  if (!comm) return;
  double t0 = gt_now_s();
  launch_wait(comm, 18, (rank + 1) % nranks);
  pthread_t th;
  if (rank == 0) GT_CHECK(pthread_create(&th, NULL, abort_later, comm) == 0, "pthread_create");
  GT_CUDA(cudaDeviceSynchronize());
  double el = gt_now_s() - t0;
  if (rank == 0) pthread_join(th, NULL);
  char msg[2048];
  meld_result_t r = check_msg(comm, msg, sizeof msg);
  gt_log("after %.2f s: meld_comm_check -> %s: %s", el, meld_strerror(r), msg);
  GT_CHECK(el < 5.0, "the spinning kernel stopped only after %.2f s (abort at 0.3 s, timeout 20 s)", el);
  GT_CHECK(r == MELD_ERR_ABORTED, "expected MELD_ERR_ABORTED, got %s", meld_strerror(r));
  GT_CHECK(strstr(msg, "meld_comm_abort") != NULL, "message: %s", msg);
  GT_CHECK(count_status(WAIT_CTAS, 1) == WAIT_CTAS, "every CTA's wait must fail");
  t0 = gt_now_s();
  launch_wait(comm, 18, (rank + 1) % nranks);
  GT_CUDA(cudaDeviceSynchronize());
  GT_CHECK(gt_now_s() - t0 < 1.0, "a call after meld_comm_abort must return at entry");
  GT_MELD(meld_comm_destroy(comm));
}

/* ---- 3. mismatched arguments ----------------------------------------------------------------- */

static void rank_mismatch(int rank, int nranks) {
  (void)nranks;
  meld_config_t cfg = test_config(5000);
  meld_comm_t comm = NULL;
  GT_MELD(meld_comm_init_env(&comm, &cfg));
  if (!comm) return;
  if (!g_status) GT_CUDA(cudaMalloc(&g_status, 64 * sizeof(uint32_t)));
  meld_proto_dev_t pd = meld_proto_dev(comm);
  int grid = 0;
  GT_MELD(meld_coop_grid((const void *)handshake_kernel, 64, 0, 32, comm->sm_count, &grid));
  uint32_t h = 0x1234;
  void *args[] = {&pd, &h, &g_status};
  GT_MELD(meld_launch_coop((const void *)handshake_kernel, grid, 64, 0, args, 0));
  GT_CUDA(cudaDeviceSynchronize());
  GT_MELD(meld_comm_check(comm));
  GT_CHECK(count_status(grid, 2) == grid, "matching hashes must pass");
  h = rank == 1 ? 0x4321 : 0x1234; /* rank 1 "computed other shapes" */
  double t0 = gt_now_s();
  GT_MELD(meld_launch_coop((const void *)handshake_kernel, grid, 64, 0, args, 0));
  GT_CUDA(cudaDeviceSynchronize());
  double el = gt_now_s() - t0;
  char msg[2048];
  meld_result_t r = check_msg(comm, msg, sizeof msg);
  gt_log("mismatch after %.3f s: %s: %s", el, meld_strerror(r), msg);
  GT_CHECK(el < 2.0, "the mismatch took %.2f s to fail", el);
  GT_CHECK(count_status(grid, 1) == grid, "every CTA must refuse the call");
  GT_CHECK(r == MELD_ERR_ABORTED && strstr(msg, "arguments differ") != NULL,
           "expected an argument mismatch on rank %d: %s: %s", rank, meld_strerror(r), msg);
  GT_MELD(meld_comm_destroy(comm));
}

/* ---- 4. kill -9 mid-wait ----------------------------------------------------------------------- */

static void rank_kill(int rank, int nranks) {
  meld_config_t cfg = test_config(rank == 0 ? 2000 : 60000);
  meld_comm_t comm = NULL;
  GT_MELD(meld_comm_init_env(&comm, &cfg));
  if (!comm) return;
  double t0 = gt_now_s();
  launch_wait(comm, 19, (rank + 1) % nranks);
  if (rank == 1) {
    usleep(300000);
    gt_log("killing myself (SIGKILL) while my kernel waits");
    kill(getpid(), SIGKILL);
  }
  GT_CUDA(cudaDeviceSynchronize());
  double el = gt_now_s() - t0;
  char msg[2048];
  meld_result_t r = check_msg(comm, msg, sizeof msg);
  gt_log("peer killed: after %.2f s: %s: %s", el, meld_strerror(r), msg);
  GT_CHECK(el < 6.0, "rank 0 noticed after %.2f s (timeout 2 s)", el);
  GT_CHECK(r == MELD_ERR_TIMEOUT, "expected MELD_ERR_TIMEOUT, got %s", meld_strerror(r));
  t0 = gt_now_s();
  meld_result_t d = meld_comm_destroy(comm);
  gt_log("destroy with a dead peer: %s after %.2f s (%s)", meld_strerror(d), gt_now_s() - t0,
         d == MELD_OK ? "" : meld_last_error());
  GT_CHECK(gt_now_s() - t0 < 30.0, "destroy with a dead peer took too long");
}

/* Like gt_spawn, but rank 1 is expected to die by SIGKILL. Returns failed ranks. */
static int spawn_kill_test(void) {
  int port = gt_free_port();
  pid_t pids[2];
  for (int r = 0; r < 2; r++) {
    pid_t pid = fork();
    if (pid == 0) {
      char buf[32];
      snprintf(buf, sizeof buf, "%d", r);
      setenv("RANK", buf, 1);
      setenv("LOCAL_RANK", buf, 1);
      setenv("WORLD_SIZE", "2", 1);
      setenv("LOCAL_WORLD_SIZE", "2", 1);
      snprintf(buf, sizeof buf, "%d", port);
      setenv("MASTER_PORT", buf, 1);
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      gt_rank = r;
      cudaSetDevice(gt_device_for(r));
      rank_kill(r, 2);
      fflush(stdout);
      _exit(gt_failed > 0 ? 1 : 0);
    }
    pids[r] = pid;
  }
  int failed = 0;
  for (int r = 0; r < 2; r++) {
    int status = 0;
    double deadline = gt_now_s() + 120;
    for (;;) {
      if (waitpid(pids[r], &status, WNOHANG) == pids[r]) break;
      if (gt_now_s() > deadline) {
        kill(pids[r], SIGKILL);
        waitpid(pids[r], &status, 0);
        printf("[spawn] rank %d hung: killed\n", r);
        status = 1 << 8;
        break;
      }
      usleep(10000);
    }
    int ok = r == 0 ? (WIFEXITED(status) && WEXITSTATUS(status) == 0)
                    : (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    if (!ok) {
      failed++;
      printf("[spawn] rank %d: unexpected end (%s %d)\n", r, WIFEXITED(status) ? "exit" : "signal",
             WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    }
  }
  return failed;
}

static void run(const char *name, int nranks, gt_rank_fn fn) {
  printf("--- %s (%d ranks)\n", name, nranks);
  fflush(stdout);
  int failed = gt_spawn(nranks, fn);
  GT_CHECK(failed == 0, "%s: %d rank(s) failed", name, failed);
}

int main(void) {
  g_ndev = gt_device_count();
  printf("test_abort: %d GPU(s)\n", g_ndev);
  if (g_ndev < 1) {
    printf("skipped: no GPU\n");
    return gt_summary("test_abort");
  }
  const int n = g_ndev >= 2 ? 2 : 1;
  run("timeout on a flag nobody sets; the peer is aborted", n, rank_timeout);
  run("meld_comm_abort reaches spinning kernels", n, rank_user_abort);
  if (n == 2) {
    run("mismatched arguments fail on both ranks", 2, rank_mismatch);
    printf("--- kill -9 of rank 1 mid-wait (2 ranks)\n");
    fflush(stdout);
    int failed = spawn_kill_test();
    GT_CHECK(failed == 0, "kill test: %d rank(s) ended unexpectedly", failed);
  } else {
    printf("mismatched arguments: skipped (needs 2 GPUs)\nkill -9 mid-wait: skipped (needs 2 GPUs)\n");
  }
  return gt_summary("test_abort");
}
