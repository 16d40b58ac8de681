/* mp_job.c — forked-rank jobs for the multi-process CPU tests (see mp_job.h). */
#include "mp_job.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "sock.h"

job_t mp_new_job(int nranks) {
  job_t job = {.nranks = nranks};
  assert_int_equal(meld_bootstrap_root_listen(0, "127.0.0.1", &job.addr), MELD_OK);
  assert_int_not_equal(job.addr.port, 0);
  return job;
}

void mp_run_children(int n, child_fn fn, const job_t *job, int *codes, int limit_ms) {
  pid_t pids[MP_MAX_CHILD];
  assert_true(n >= 1 && n <= MP_MAX_CHILD);
  fflush(stdout);
  fflush(stderr);
  for (int i = 0; i < n; i++) {
    pids[i] = fork();
    assert_true(pids[i] >= 0);
    if (pids[i] == 0) {
      if (i != 0) meld_bootstrap_root_release(job->addr.key);
      exit(fn(i, job)); /* exit, not _exit: LeakSanitizer then checks the child too */
    }
    codes[i] = -1;
  }
  meld_bootstrap_root_release(job->addr.key);
  int64_t deadline = meld_now_ms() + limit_ms;
  for (int left = n; left > 0;) {
    for (int i = 0; i < n; i++) {
      int st;
      if (codes[i] != -1 || waitpid(pids[i], &st, WNOHANG) != pids[i]) continue;
      codes[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      left--;
    }
    if (left > 0 && meld_now_ms() > deadline) {
      for (int i = 0; i < n; i++)
        if (codes[i] == -1) {
          fprintf(stderr, "child %d hangs: killed\n", i);
          kill(pids[i], SIGKILL);
          waitpid(pids[i], NULL, 0);
          codes[i] = 255;
        }
      break;
    }
    if (left > 0) meld_sleep_ms(2);
  }
}

void mp_expect_codes(int n, const int *codes, int special, int special_code) {
  for (int i = 0; i < n; i++) {
    int want = i == special ? special_code : 0;
    if (codes[i] != want) fprintf(stderr, "child %d exited with %d, expected %d\n", i, codes[i], want);
    assert_int_equal(codes[i], want);
  }
}

void mp_run_ok(int nranks, int nchildren, child_fn fn, int limit_ms) {
  int codes[MP_MAX_CHILD];
  job_t job = mp_new_job(nranks);
  mp_run_children(nchildren, fn, &job, codes, limit_ms);
  mp_expect_codes(nchildren, codes, -1, 0);
}

uint64_t mp_mix(uint64_t x) {
  x ^= x >> 33, x *= 0xff51afd7ed558ccdull, x ^= x >> 33, x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

void mp_fill(uint8_t *p, uint64_t n, uint64_t seed) {
  uint64_t x = mp_mix(seed) | 1;
  for (uint64_t i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    p[i] = (uint8_t)x;
  }
}

int mp_same(const uint8_t *p, uint64_t n, uint64_t seed) {
  uint64_t x = mp_mix(seed) | 1;
  for (uint64_t i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    if (p[i] != (uint8_t)x) return 0;
  }
  return 1;
}
