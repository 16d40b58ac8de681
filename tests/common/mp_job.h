/* mp_job.h — forked-rank jobs for the multi-process CPU tests (tests/mp/).
 *
 * The parent opens the bootstrap root's listening socket (port 0) before forking, so the
 * address exists before any rank starts and early joiners wait in its backlog. Every child
 * inherits the listener table: child 0 (rank 0) takes its copy in meld_bootstrap_init; every
 * other child, and the parent once all are forked, release theirs, so only rank 0 keeps the
 * port open. Children report through their exit code (0 = behaved as expected; otherwise
 * they print the failed check and meld_last_error() to stderr) and leave with exit() after
 * the parent flushed stdio, so that under ASan LeakSanitizer checks each child too. */
#ifndef MELD_TESTS_MP_JOB_H
#define MELD_TESTS_MP_JOB_H

#include <stdint.h>
#include <stdio.h>

#include "bootstrap.h"
#include "error.h"

#define MP_MAX_CHILD 16

typedef struct {
  meld_boot_addr_t addr;
  int nranks;
} job_t;

typedef int (*child_fn)(int idx, const job_t *job);

/* A check inside a child: on failure prints where and meld_last_error(), returns 1. */
#define CHILD_CHECK(cond)                                                                     \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      fprintf(stderr, "child %d: %s:%d: check failed: %s\n  last error: %s\n", idx, __FILE__, \
              __LINE__, #cond, meld_last_error());                                            \
      return 1;                                                                               \
    }                                                                                         \
  } while (0)

/* A job of nranks with a fresh root listener on 127.0.0.1 (cmocka-asserts success). */
job_t mp_new_job(int nranks);

/* Forks n (<= MP_MAX_CHILD) children running fn(i, job); waits for all; a child still running
 * after limit_ms is killed (codes[i] = 255, "hangs" on stderr). codes[i] = exit status, or
 * 128 + signal. */
void mp_run_children(int n, child_fn fn, const job_t *job, int *codes, int limit_ms);

/* cmocka-asserts codes[i] == 0 for every child except `special` (-1: none), which must exit
 * with special_code. */
void mp_expect_codes(int n, const int *codes, int special, int special_code);

/* Test data both ends compute from a seed: a 64-bit mixer, n bytes of a xorshift stream, and
 * whether p holds exactly them. */
uint64_t mp_mix(uint64_t x);
void mp_fill(uint8_t *p, uint64_t n, uint64_t seed);
int mp_same(const uint8_t *p, uint64_t n, uint64_t seed);

/* The common case: a fresh job of nranks, nchildren children running fn, all must exit 0. */
void mp_run_ok(int nranks, int nchildren, child_fn fn, int limit_ms);

#endif
