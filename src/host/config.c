/* config.c — config struct + MELD_* environment resolution and validation. */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "log.h"

extern char **environ;

/* Every MELD_* variable meld reads. Anything else starting with MELD_ is warned about. */
static const char *const g_known_env[] = {
    "MELD_WORKSPACE_BYTES", "MELD_TIMEOUT_MS",   "MELD_BOOTSTRAP_TIMEOUT_MS", "MELD_PORT",
    "MELD_NODE_ID",         "MELD_TRACE",        "MELD_DEBUG",                "MELD_DEBUG_SUBSYS",
    "MELD_SHARE_GPU",       "MELD_LIBRARY", /* (read by the Python binding, python/meld) */ "MELD_NET_CHUNK_BYTES", "MELD_NET_HIER", "MELD_NET_ARG_CHECK", "MELD_NET_TRANSPORT", "MELD_IB_HCA", "MELD_IB_GID_INDEX", "MELD_IB_LIB", "MELD_IB_TIMEOUT", "MELD_IB_TC", "MELD_IB_SL", "MELD_IB_FORK_INIT",
    "MELD_SOCKET_ADDR",     "MELD_MASTER_ADDR",  "MELD_JOB_KEY",              "MELD_WATCHDOG_MS",
    "MELD_COMM_CTAS",       "MELD_CHUNK_BYTES",  "MELD_SCHEDULE",     "MELD_COLL_ZC", "MELD_COLL_CE", "MELD_COLL_CE_MIN_BYTES", "MELD_COLL_PDL", "MELD_COLL_LOOPBACK", "MELD_COLL_LL_LEAN", "MELD_COLL_LL_FLAT",
    /* plan overrides of the GEMM engine and the fused ops (tuning and experiments) */
    "MELD_GEMM_SPLIT_K", "MELD_GEMM_STREAM_K", "MELD_GEMM_DETERMINISTIC", "MELD_GEMM_SKINNY", "MELD_GEMM_GROUP_M", "MELD_GEMM_CLUSTER_EXPERIMENTAL", "MELD_GEMM_RS_SPLIT_K",
    "MELD_GEMM_RS_PUSH", "MELD_GEMM_RS_STORE", "MELD_GEMM_RS_PRELOAD", "MELD_GEMM_RS_PF", "MELD_GEMM_RS_FLAG_HELPER", "MELD_GEMM_AR_DECODE_UNFUSED", "MELD_GEMM_AR_DECODE_ZC", "MELD_GEMM_AR_DECODE_PDL", "MELD_GEMM_AR_DECODE_FUSED", "MELD_GEMM_AR_DECODE_DIAG", "MELD_GEMM_AR_DECODE_PUSH", "MELD_GEMM_RS_DIAG", "MELD_GEMM_AR_SYM", "MELD_GEMM_AR_ZC", "MELD_GEMM_AR_EARLY_COPY", "MELD_GEMM_RS_STREAM_K", "MELD_AG_GEMM_STREAM_K", "MELD_AG_GEMM_SK_PIECES", "MELD_AG_GEMM_SK_EXTRA", "MELD_AG_GEMM_DIAG", "MELD_GEMM_TILE_N", "MELD_GEMM_EARLY_RELEASE", "MELD_GEMM_FP8_LATE", "MELD_AG_GEMM_TILE_N", "MELD_AG_GEMM_COMM_WARPS", "MELD_AG_FP8_SCALES", "MELD_GEMM_RS_ORDER", "MELD_GEMM_RS_ILEAVE_G", "MELD_GEMM_RS_LEAN", "MELD_GEMM_AR_COPY_FLAG", "MELD_GEMM_AR_COPY", "MELD_GEMM_RS_PUSH_DEFER", "MELD_GEMM_STORE_HINT", "MELD_GEMM_AR_COPY_HOLD", "MELD_GEMM_RS_DELAY_CYCLES", "MELD_ATTN_PIPE", "MELD_ATTN_ORDER", "MELD_RING_ATTN", "MELD_RING_ATTN_HEADS", "MELD_RING_ATTN_COMM_CTAS", "MELD_RING_ATTN_DIAG", "MELD_ATTN_PERSIST", "MELD_MOE_COMM_CTAS", "MELD_MOE_DIAG", "MELD_MOE_DEFER", "MELD_MOE_GROUP_M", "MELD_MOE_COPY", "MELD_MOE_FFN_SEND", "MELD_MOE_PAD_SKIP", "MELD_MOE_RUNS", "MELD_MOE_ROUTE", "MELD_MOE_ROUTE_IN", "MELD_MOE_ROUTE_CTAS", NULL};

int meld_parse_int64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
  if (!s || !*s) return -1;
  char *end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0') return -1;
  if (v < lo || v > hi) return -1;
  *out = (int64_t)v;
  return 0;
}

int meld_parse_size(const char *s, size_t *out) {
  if (!s || !*s || *s == '-') return -1;
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || end == s) return -1;
  unsigned shift = 0;
  if (*end == 'K' || *end == 'k') shift = 10, end++;
  else if (*end == 'M' || *end == 'm') shift = 20, end++;
  else if (*end == 'G' || *end == 'g') shift = 30, end++;
  if (*end == 'B' || *end == 'b') end++;
  if (*end != '\0') return -1;
  if (shift && v > (ULLONG_MAX >> shift)) return -1;
  *out = (size_t)(v << shift);
  return 0;
}

meld_result_t meld_env_int64(const char *name, int64_t lo, int64_t hi, int64_t *out) {
  const char *s = getenv(name);
  if (!s || !*s) return MELD_OK;
  if (meld_parse_int64(s, lo, hi, out) != 0)
    return meld_error(MELD_ERR_INVALID_ARG, "%s=%s: not an integer in [%lld, %lld]", name, s,
                      (long long)lo, (long long)hi);
  return MELD_OK;
}

int meld_config_warn_unknown_env(void) {
  int unknown = 0;
  for (char **e = environ; e && *e; e++) {
    if (strncmp(*e, "MELD_", 5) != 0) continue;
    size_t len = strcspn(*e, "=");
    int known = 0;
    for (int i = 0; g_known_env[i]; i++)
      if (strlen(g_known_env[i]) == len && strncmp(*e, g_known_env[i], len) == 0) known = 1;
    if (!known) {
      unknown++;
      MELD_WARN(MELD_SUB_INIT, "unknown environment variable %.*s ignored (a typo?)", (int)len, *e);
    }
  }
  return unknown;
}

meld_result_t meld_config_resolve(const meld_config_t *in, meld_resolved_config_t *out) {
  static const meld_config_t unset = MELD_CONFIG_INIT;
  if (!out) return meld_error(MELD_ERR_INVALID_ARG, "meld_config_resolve: NULL output");
  if (!in) in = &unset;
  if (in->size != sizeof(meld_config_t))
    return meld_error(MELD_ERR_INVALID_ARG,
                      "meld_config_t.size is %zu, expected %zu: initialize it with MELD_CONFIG_INIT",
                      in->size, sizeof(meld_config_t));
  if (in->version != MELD_CONFIG_VERSION)
    return meld_error(MELD_ERR_INVALID_ARG,
                      "meld_config_t.version is %u, this library knows %u: initialize it with "
                      "MELD_CONFIG_INIT",
                      in->version, MELD_CONFIG_VERSION);
  memset(out, 0, sizeof *out);

  /* workspace_bytes */
  out->workspace_bytes = MELD_DEFAULT_WORKSPACE_BYTES;
  if (in->workspace_bytes) {
    out->workspace_bytes = in->workspace_bytes;
  } else {
    const char *s = getenv("MELD_WORKSPACE_BYTES");
    if (s && *s && meld_parse_size(s, &out->workspace_bytes) != 0)
      return meld_error(MELD_ERR_INVALID_ARG,
                        "MELD_WORKSPACE_BYTES=%s: not a size (e.g. 67108864, 64M, 1G)", s);
  }
  if (out->workspace_bytes < ((size_t)1 << 20) || out->workspace_bytes > ((size_t)64 << 30))
    return meld_error(MELD_ERR_INVALID_ARG, "workspace_bytes %zu is outside [1 MiB, 64 GiB]",
                      out->workspace_bytes);

  /* timeouts */
  out->timeout_ms = MELD_DEFAULT_TIMEOUT_MS;
  if (in->timeout_ms) out->timeout_ms = in->timeout_ms;
  else MELD_CHECK(meld_env_int64("MELD_TIMEOUT_MS", 1, INT64_C(1) << 40, &out->timeout_ms));
  if (out->timeout_ms < 1)
    return meld_error(MELD_ERR_INVALID_ARG, "timeout_ms %lld must be >= 1", (long long)out->timeout_ms);

  out->bootstrap_timeout_ms = MELD_DEFAULT_BOOTSTRAP_TIMEOUT_MS;
  if (in->bootstrap_timeout_ms) out->bootstrap_timeout_ms = in->bootstrap_timeout_ms;
  else
    MELD_CHECK(meld_env_int64("MELD_BOOTSTRAP_TIMEOUT_MS", 1, INT64_C(1) << 40,
                              &out->bootstrap_timeout_ms));
  if (out->bootstrap_timeout_ms < 1)
    return meld_error(MELD_ERR_INVALID_ARG, "bootstrap_timeout_ms %lld must be >= 1",
                      (long long)out->bootstrap_timeout_ms);

  /* port */
  int64_t v = 0;
  if (in->port) v = in->port;
  else MELD_CHECK(meld_env_int64("MELD_PORT", 1, 65535, &v));
  if (v < 0 || v > 65535)
    return meld_error(MELD_ERR_INVALID_ARG, "port %lld is outside [1, 65535]", (long long)v);
  out->port = (int)v;

  /* node id */
  v = -1;
  if (in->node_id != -1) v = in->node_id;
  else MELD_CHECK(meld_env_int64("MELD_NODE_ID", 0, INT32_MAX, &v));
  if (v < -1) return meld_error(MELD_ERR_INVALID_ARG, "node_id %lld must be >= 0 (or -1: by host)", (long long)v);
  out->node_id = (int)v;

  /* shared GPU (a test mode: not in meld_config_t) */
  v = 0;
  MELD_CHECK(meld_env_int64("MELD_SHARE_GPU", 0, 1, &v));
  out->share_gpu = (int)v;

  /* trace path */
  const char *tp = in->trace_path ? in->trace_path : getenv("MELD_TRACE");
  if (tp && *tp) {
    if (strlen(tp) >= sizeof out->trace_path)
      return meld_error(MELD_ERR_INVALID_ARG, "trace path is longer than %zu characters",
                        sizeof out->trace_path - 1);
    snprintf(out->trace_path, sizeof out->trace_path, "%s", tp);
  }

  static int warned = 0;
  if (!warned) {
    warned = 1;
    meld_config_warn_unknown_env();
  }
  return MELD_OK;
}
