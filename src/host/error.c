/* error.c — per-thread last-error message and result names. */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "log.h"

#define MELD_ERROR_MAX 4096

static _Thread_local char g_last_error[MELD_ERROR_MAX];

static const char *const g_result_names[MELD_NUM_RESULTS] = {
    [MELD_OK] = "MELD_OK: success",
    [MELD_ERR_INVALID_ARG] = "MELD_ERR_INVALID_ARG: invalid argument",
    [MELD_ERR_CUDA] = "MELD_ERR_CUDA: CUDA error",
    [MELD_ERR_SYSTEM] = "MELD_ERR_SYSTEM: system error",
    [MELD_ERR_TIMEOUT] = "MELD_ERR_TIMEOUT: timed out",
    [MELD_ERR_ABORTED] = "MELD_ERR_ABORTED: communicator aborted",
    [MELD_ERR_UNSUPPORTED] = "MELD_ERR_UNSUPPORTED: not supported",
    [MELD_ERR_OUT_OF_MEMORY] = "MELD_ERR_OUT_OF_MEMORY: out of memory",
    [MELD_ERR_INTERNAL] = "MELD_ERR_INTERNAL: internal error",
};

const char *meld_strerror(meld_result_t result) {
  if ((int)result < 0 || result >= MELD_NUM_RESULTS) return "MELD_ERR_?: unknown result code";
  return g_result_names[result];
}

const char *meld_last_error(void) { return g_last_error; }

int meld_version(void) { return MELD_VERSION_CODE; }

meld_result_t meld_error(meld_result_t result, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_last_error, sizeof g_last_error, fmt, ap);
  va_end(ap);
  MELD_LOG(MELD_LOG_INFO, MELD_SUB_ALL, "%s [%s]", g_last_error, meld_strerror(result));
  return result;
}

void meld_error_prefix(const char *fmt, ...) {
  char prefix[512], old[MELD_ERROR_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  memcpy(old, g_last_error, sizeof old);
  size_t n = strlen(prefix);
  if (n > sizeof g_last_error - 3) n = sizeof g_last_error - 3;
  memcpy(g_last_error, prefix, n);
  memcpy(g_last_error + n, ": ", 2);
  size_t room = sizeof g_last_error - n - 3;
  size_t m = strnlen(old, room);
  memcpy(g_last_error + n + 2, old, m);
  g_last_error[n + 2 + m] = '\0';
}

void meld_error_clear(void) { g_last_error[0] = '\0'; }
