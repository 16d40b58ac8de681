/* meld_bootstrap_from_env: torchrun / Open MPI / Slurm layouts, precedence, meld's port,
 * missing and bad variables, and the job key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bootstrap.h"
#include "error.h"

static const char *const g_vars[] = {
    "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS",
    "MELD_MASTER_ADDR", "MELD_PORT", "MELD_JOB_KEY", "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_RESTART_COUNT", "SLURM_JOB_ID", "SLURM_STEP_ID", "OMPI_MCA_ess_base_jobid",
    NULL};

static int setup(void **state) {
  (void)state;
  for (int i = 0; g_vars[i]; i++) unsetenv(g_vars[i]);
  return 0;
}

static void set(const char *name, const char *value) {
  assert_int_equal(setenv(name, value, 1), 0);
}

static void torchrun(const char *rank, const char *world) {
  set("RANK", rank);
  set("WORLD_SIZE", world);
  set("MASTER_ADDR", "node7");
  set("MASTER_PORT", "29500");
}

typedef struct {
  meld_boot_addr_t addr;
  int rank, nranks;
} layout_t;

static layout_t ok(int port) {
  layout_t l;
  memset(&l, 0, sizeof l);
  meld_result_t rc = meld_bootstrap_from_env(port, &l.addr, &l.rank, &l.nranks);
  if (rc != MELD_OK) fail_msg("meld_bootstrap_from_env: %s", meld_last_error());
  assert_true(l.addr.magic == MELD_BOOT_MAGIC);
  return l;
}

static void bad(int port, const char *sentence) {
  meld_boot_addr_t a;
  int r, n;
  assert_int_equal(meld_bootstrap_from_env(port, &a, &r, &n), MELD_ERR_INVALID_ARG);
  if (!strstr(meld_last_error(), sentence))
    fail_msg("expected \"%s\" in \"%s\"", sentence, meld_last_error());
}

static void test_torchrun(void **state) {
  (void)state;
  torchrun("3", "8");
  layout_t l = ok(0);
  assert_int_equal(l.rank, 3);
  assert_int_equal(l.nranks, 8);
  assert_string_equal(l.addr.host, "node7");
  assert_int_equal(l.addr.port, 29501); /* MASTER_PORT + 1: torch's store holds MASTER_PORT */
  l = ok(40000);                        /* the configured port wins */
  assert_int_equal(l.addr.port, 40000);
  set("MELD_MASTER_ADDR", "10.1.2.3"); /* meld's own address variable wins */
  assert_string_equal(ok(0).addr.host, "10.1.2.3");
}

static void test_open_mpi(void **state) {
  (void)state;
  set("OMPI_COMM_WORLD_RANK", "5");
  set("OMPI_COMM_WORLD_SIZE", "6");
  bad(0,
      "meld_comm_init_env: Open MPI layout found but the root's address is unknown: set "
      "MASTER_ADDR");
  set("MASTER_ADDR", "head");
  bad(0, "no port for meld's rendezvous: set MELD_PORT (or config.port), or MASTER_PORT");
  layout_t l = ok(12345);
  assert_int_equal(l.rank, 5);
  assert_int_equal(l.nranks, 6);
  assert_string_equal(l.addr.host, "head");
  assert_int_equal(l.addr.port, 12345);
  set("MELD_MASTER_ADDR", "10.0.0.5");
  assert_string_equal(ok(12345).addr.host, "10.0.0.5");
}

static void test_slurm(void **state) {
  (void)state;
  set("SLURM_PROCID", "1");
  set("SLURM_NTASKS", "2");
  set("MASTER_ADDR", "h");
  set("MASTER_PORT", "1000");
  layout_t l = ok(0);
  assert_int_equal(l.rank, 1);
  assert_int_equal(l.nranks, 2);
  assert_int_equal(l.addr.port, 1001);
}

static void test_precedence(void **state) {
  (void)state;
  set("SLURM_PROCID", "1");
  set("SLURM_NTASKS", "4");
  set("OMPI_COMM_WORLD_RANK", "2");
  set("OMPI_COMM_WORLD_SIZE", "5");
  set("MASTER_ADDR", "h");
  assert_int_equal(ok(9000).rank, 2); /* Open MPI before Slurm */
  set("RANK", "3");                   /* RANK alone is not a torchrun layout */
  assert_int_equal(ok(9000).rank, 2);
  set("WORLD_SIZE", "6");
  layout_t l = ok(9000); /* torchrun before both */
  assert_int_equal(l.rank, 3);
  assert_int_equal(l.nranks, 6);
  set("RANK", ""); /* empty counts as unset */
  assert_int_equal(ok(9000).nranks, 5);
}

static void test_missing(void **state) {
  (void)state;
  bad(0,
      "no launcher variables found: set RANK and WORLD_SIZE (as torchrun does), or run under "
      "Open MPI");
  set("RANK", "1");
  set("WORLD_SIZE", "2");
  bad(0, "torchrun layout found but the root's address is unknown: set MASTER_ADDR");
  set("MASTER_ADDR", "h");
  bad(0, "set MELD_PORT (or config.port), or MASTER_PORT");
  /* One rank alone needs neither address nor port. */
  setup(NULL);
  set("RANK", "0");
  set("WORLD_SIZE", "1");
  layout_t l = ok(0);
  assert_int_equal(l.nranks, 1);
  assert_string_equal(l.addr.host, "127.0.0.1");
}

static void test_bad_values(void **state) {
  (void)state;
  torchrun("abc", "4");
  bad(0, "meld_comm_init_env: RANK=abc: not a non-negative integer");
  set("RANK", "-1");
  bad(0, "RANK=-1: not a non-negative integer");
  set("RANK", "4");
  bad(0, "meld_comm_init_env: RANK=4 is not below WORLD_SIZE=4");
  set("RANK", "0");
  set("WORLD_SIZE", "0");
  bad(0, "WORLD_SIZE=0: not an integer in [1, 4096]");
  set("WORLD_SIZE", "4097");
  bad(0, "WORLD_SIZE=4097: not an integer in [1, 4096]");
  set("WORLD_SIZE", "4");
  set("MASTER_PORT", "70000");
  bad(0, "MASTER_PORT=70000: not an integer in [1, 65534] (meld listens on MASTER_PORT + 1");
  set("MASTER_PORT", "65535");
  bad(0, "MASTER_PORT=65535");
  set("MASTER_PORT", "29x");
  bad(0, "MASTER_PORT=29x");
  bad(70000, "port 70000 is outside [1, 65535]");
  bad(-1, "port -1 is outside");
  set("MASTER_PORT", "29500");
  char long_host[80];
  memset(long_host, 'a', sizeof long_host - 1);
  long_host[sizeof long_host - 1] = '\0';
  set("MASTER_ADDR", long_host);
  bad(0, "is longer than 63 characters");
  setup(NULL);
  set("OMPI_COMM_WORLD_RANK", "x1");
  set("OMPI_COMM_WORLD_SIZE", "2");
  bad(0, "OMPI_COMM_WORLD_RANK=x1: not a non-negative integer");
  set("OMPI_COMM_WORLD_RANK", "1");
  set("SLURM_NTASKS", "2");
  meld_boot_addr_t a;
  int r, n;
  assert_int_equal(meld_bootstrap_from_env(0, NULL, &r, &n), MELD_ERR_INVALID_ARG);
  assert_int_equal(meld_bootstrap_from_env(0, &a, NULL, &n), MELD_ERR_INVALID_ARG);
  assert_int_equal(meld_bootstrap_from_env(0, &a, &r, NULL), MELD_ERR_INVALID_ARG);
}

/* Every rank of one job derives the same key; another job, or another restart, another. */
static void test_keys(void **state) {
  (void)state;
  torchrun("0", "8");
  set("TORCHELASTIC_RUN_ID", "run-a");
  set("TORCHELASTIC_RESTART_COUNT", "0");
  uint64_t k0 = ok(0).addr.key;
  set("RANK", "7");
  set("LOCAL_RANK", "3");
  assert_true(ok(0).addr.key == k0); /* the rank is not part of the key */
  set("TORCHELASTIC_RUN_ID", "run-b");
  uint64_t kb = ok(0).addr.key;
  assert_true(kb != k0);
  set("TORCHELASTIC_RUN_ID", "run-a");
  assert_true(ok(0).addr.key == k0);
  set("TORCHELASTIC_RESTART_COUNT", "1");
  assert_true(ok(0).addr.key != k0);
  set("TORCHELASTIC_RESTART_COUNT", "0");
  assert_true(ok(40000).addr.key != k0); /* another port */
  set("WORLD_SIZE", "9");
  assert_true(ok(0).addr.key != k0);
  set("WORLD_SIZE", "8");
  set("MASTER_ADDR", "node8");
  assert_true(ok(0).addr.key != k0);
  set("MASTER_ADDR", "node7");
  set("SLURM_JOB_ID", "123");
  uint64_t ks = ok(0).addr.key;
  assert_true(ks != k0);
  set("SLURM_JOB_ID", "124");
  assert_true(ok(0).addr.key != ks);
  unsetenv("SLURM_JOB_ID");
  set("MELD_JOB_KEY", "mine");
  assert_true(ok(0).addr.key != k0);
  unsetenv("MELD_JOB_KEY");
  assert_true(ok(0).addr.key == k0);
  /* Values cannot be shifted between variables into an equal key. */
  set("TORCHELASTIC_RUN_ID", "");
  set("SLURM_JOB_ID", "run-a");
  assert_true(ok(0).addr.key != k0);
}

int main(void) {
  setenv("MELD_DEBUG", "NONE", 0);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_torchrun, setup), cmocka_unit_test_setup(test_open_mpi, setup),
      cmocka_unit_test_setup(test_slurm, setup),    cmocka_unit_test_setup(test_precedence, setup),
      cmocka_unit_test_setup(test_missing, setup),  cmocka_unit_test_setup(test_bad_values, setup),
      cmocka_unit_test_setup(test_keys, setup),
  };
  return cmocka_run_group_tests_name("bootstrap_env", tests, NULL, NULL);
}
