/* Config resolution, environment parsing and bad values; error strings; log level parsing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config.h"
#include "error.h"
#include "log.h"

static void clear_env(void) {
  const char *vars[] = {"MELD_WORKSPACE_BYTES", "MELD_TIMEOUT_MS", "MELD_BOOTSTRAP_TIMEOUT_MS",
                        "MELD_PORT", "MELD_NODE_ID", "MELD_TRACE", "MELD_SHARE_GPU", NULL};
  for (int i = 0; vars[i]; i++) unsetenv(vars[i]);
}

static int setup(void **state) {
  (void)state;
  clear_env();
  return 0;
}

static void test_defaults(void **state) {
  (void)state;
  meld_resolved_config_t c;
  assert_int_equal(meld_config_resolve(NULL, &c), MELD_OK);
  assert_int_equal(c.workspace_bytes, MELD_DEFAULT_WORKSPACE_BYTES);
  assert_int_equal(c.timeout_ms, MELD_DEFAULT_TIMEOUT_MS);
  assert_int_equal(c.bootstrap_timeout_ms, MELD_DEFAULT_BOOTSTRAP_TIMEOUT_MS);
  assert_int_equal(c.port, 0);
  assert_int_equal(c.node_id, -1);
  assert_int_equal(c.share_gpu, 0);
  assert_string_equal(c.trace_path, "");
}

static void test_env_fills_unset_fields(void **state) {
  (void)state;
  setenv("MELD_WORKSPACE_BYTES", "128M", 1);
  setenv("MELD_TIMEOUT_MS", "2500", 1);
  setenv("MELD_BOOTSTRAP_TIMEOUT_MS", "700", 1);
  setenv("MELD_PORT", "31337", 1);
  setenv("MELD_NODE_ID", "3", 1);
  setenv("MELD_TRACE", "/tmp/t.json", 1);
  setenv("MELD_SHARE_GPU", "1", 1);
  meld_resolved_config_t c;
  assert_int_equal(meld_config_resolve(NULL, &c), MELD_OK);
  assert_int_equal(c.workspace_bytes, (size_t)128 << 20);
  assert_int_equal(c.timeout_ms, 2500);
  assert_int_equal(c.bootstrap_timeout_ms, 700);
  assert_int_equal(c.port, 31337);
  assert_int_equal(c.node_id, 3);
  assert_int_equal(c.share_gpu, 1);
  assert_string_equal(c.trace_path, "/tmp/t.json");
  clear_env();
}

static void test_explicit_fields_win(void **state) {
  (void)state;
  setenv("MELD_TIMEOUT_MS", "2500", 1);
  setenv("MELD_NODE_ID", "3", 1);
  meld_config_t in = MELD_CONFIG_INIT;
  in.timeout_ms = 42;
  in.node_id = 0;
  in.workspace_bytes = (size_t)2 << 20;
  meld_resolved_config_t c;
  assert_int_equal(meld_config_resolve(&in, &c), MELD_OK);
  assert_int_equal(c.timeout_ms, 42);
  assert_int_equal(c.node_id, 0);
  assert_int_equal(c.workspace_bytes, (size_t)2 << 20);
  clear_env();
}

static void expect_bad_env(const char *var, const char *value, const char *needle) {
  setenv(var, value, 1);
  meld_resolved_config_t c;
  assert_int_equal(meld_config_resolve(NULL, &c), MELD_ERR_INVALID_ARG);
  if (!strstr(meld_last_error(), needle)) fail_msg("message '%s' lacks '%s'", meld_last_error(), needle);
  unsetenv(var);
}

static void test_bad_env_values(void **state) {
  (void)state;
  expect_bad_env("MELD_TIMEOUT_MS", "abc", "MELD_TIMEOUT_MS=abc");
  expect_bad_env("MELD_TIMEOUT_MS", "-5", "MELD_TIMEOUT_MS=-5");
  expect_bad_env("MELD_TIMEOUT_MS", "12x", "not an integer");
  expect_bad_env("MELD_PORT", "70000", "MELD_PORT=70000");
  expect_bad_env("MELD_NODE_ID", "-3", "MELD_NODE_ID");
  expect_bad_env("MELD_SHARE_GPU", "2", "MELD_SHARE_GPU=2");
  expect_bad_env("MELD_WORKSPACE_BYTES", "lots", "MELD_WORKSPACE_BYTES=lots");
  expect_bad_env("MELD_WORKSPACE_BYTES", "16K", "outside");
  expect_bad_env("MELD_BOOTSTRAP_TIMEOUT_MS", "0", "MELD_BOOTSTRAP_TIMEOUT_MS=0");
}

static void test_bad_struct(void **state) {
  (void)state;
  meld_config_t in = MELD_CONFIG_INIT;
  meld_resolved_config_t c;
  in.size = 8;
  assert_int_equal(meld_config_resolve(&in, &c), MELD_ERR_INVALID_ARG);
  assert_non_null(strstr(meld_last_error(), "MELD_CONFIG_INIT"));
  in = (meld_config_t)MELD_CONFIG_INIT;
  in.version = 99;
  assert_int_equal(meld_config_resolve(&in, &c), MELD_ERR_INVALID_ARG);
  assert_non_null(strstr(meld_last_error(), "version"));
  in = (meld_config_t)MELD_CONFIG_INIT;
  in.timeout_ms = -1;
  assert_int_equal(meld_config_resolve(&in, &c), MELD_ERR_INVALID_ARG);
  in = (meld_config_t)MELD_CONFIG_INIT;
  in.port = 65536;
  assert_int_equal(meld_config_resolve(&in, &c), MELD_ERR_INVALID_ARG);
  assert_non_null(strstr(meld_last_error(), "65536"));
}

static void test_parse_size(void **state) {
  (void)state;
  size_t v = 0;
  assert_int_equal(meld_parse_size("4096", &v), 0);
  assert_int_equal(v, 4096);
  assert_int_equal(meld_parse_size("64M", &v), 0);
  assert_int_equal(v, (size_t)64 << 20);
  assert_int_equal(meld_parse_size("2G", &v), 0);
  assert_int_equal(v, (size_t)2 << 30);
  assert_int_equal(meld_parse_size("3kb", &v), 0);
  assert_int_equal(v, 3072);
  assert_int_equal(meld_parse_size("", &v), -1);
  assert_int_equal(meld_parse_size("-1", &v), -1);
  assert_int_equal(meld_parse_size("1T", &v), -1);
  assert_int_equal(meld_parse_size("99999999999999999999G", &v), -1);
}

static void test_unknown_env_warned(void **state) {
  (void)state;
  setenv("MELD_TIMEOUTMS", "5", 1); /* a typo */
  assert_int_equal(meld_config_warn_unknown_env(), 1);
  unsetenv("MELD_TIMEOUTMS");
  assert_int_equal(meld_config_warn_unknown_env(), 0);
}

static void test_errors_and_version(void **state) {
  (void)state;
  assert_non_null(strstr(meld_strerror(MELD_ERR_TIMEOUT), "MELD_ERR_TIMEOUT"));
  assert_non_null(strstr(meld_strerror((meld_result_t)1234), "unknown"));
  assert_int_equal(meld_error(MELD_ERR_INVALID_ARG, "x %d", 7), MELD_ERR_INVALID_ARG);
  assert_string_equal(meld_last_error(), "x 7");
  meld_error_prefix("ctx");
  assert_string_equal(meld_last_error(), "ctx: x 7");
  meld_error_clear();
  assert_string_equal(meld_last_error(), "");
  assert_int_equal(meld_version(), MELD_VERSION_CODE);
}

static void test_log_parsing(void **state) {
  (void)state;
  meld_log_level_t l;
  assert_int_equal(meld_log_parse_level("info", &l), 0);
  assert_int_equal(l, MELD_LOG_INFO);
  assert_int_equal(meld_log_parse_level("TRACE", &l), 0);
  assert_int_equal(l, MELD_LOG_TRACE);
  assert_int_equal(meld_log_parse_level("loud", &l), -1);
  unsigned m = 0;
  assert_int_equal(meld_log_parse_subsys("INIT,mem", &m), 0);
  assert_int_equal(m, MELD_SUB_INIT | MELD_SUB_MEM);
  assert_int_equal(meld_log_parse_subsys("INIT,nope", &m), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_defaults, setup),
      cmocka_unit_test_setup(test_env_fills_unset_fields, setup),
      cmocka_unit_test_setup(test_explicit_fields_win, setup),
      cmocka_unit_test_setup(test_bad_env_values, setup),
      cmocka_unit_test_setup(test_bad_struct, setup),
      cmocka_unit_test(test_parse_size),
      cmocka_unit_test(test_unknown_env_warned),
      cmocka_unit_test(test_errors_and_version),
      cmocka_unit_test(test_log_parsing),
  };
  return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
