/* config.h — meld_config_t resolution: explicit fields > MELD_* environment > defaults. */
#ifndef MELD_HOST_CONFIG_H
#define MELD_HOST_CONFIG_H

#include <stdint.h>

#include "meld.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MELD_DEFAULT_WORKSPACE_BYTES ((size_t)64 << 20)
#define MELD_DEFAULT_TIMEOUT_MS 300000
#define MELD_DEFAULT_BOOTSTRAP_TIMEOUT_MS 120000

/* The resolved configuration: every field has its final value. */
typedef struct {
  size_t workspace_bytes;
  int64_t timeout_ms;
  int64_t bootstrap_timeout_ms;
  int port;     /* 0 = none chosen (get_unique_id picks one; init_env uses MASTER_PORT+1) */
  int node_id;  /* -1 = by host */
  int share_gpu; /* MELD_SHARE_GPU=1: ranks may share one GPU (testing the protocol only) */
  char trace_path[1024]; /* "" = off */
  int internal;  /* not from the environment: 1 for the hierarchy's comms (comm.c hier_create:
                    no CE side streams, which their calls never use, so the streams of ranks that
                    are threads on one GPU stay within its hardware queues) */
  int sm_cap;    /* not from the environment: > 0 caps the comm's SM count (the hierarchy's comms
                    plan within the parent's share where ranks are threads sharing a GPU) */
  void *side_stream; /* not from the environment: the hierarchy's comms use their parent's
                    protocol side stream (a cudaStream_t) instead of their own (comm.c
                    hier_create: the streams of ranks that are threads on one GPU share its
                    hardware queues) */
} meld_resolved_config_t;

/* Resolves `in` (NULL = all unset) into *out. Checks the size/version fields and each
 * value (from the struct or the environment); on a bad one returns MELD_ERR_INVALID_ARG
 * naming the field or variable and the value. Warns once about unknown MELD_* variables. */
meld_result_t meld_config_resolve(const meld_config_t *in, meld_resolved_config_t *out);

/* Parses a size with optional K/M/G suffix (powers of 1024): "64M" -> 67108864.
 * Returns 0 on success, -1 on a malformed, negative or overflowing value. */
int meld_parse_size(const char *s, size_t *out);
/* Parses a base-10 integer in [lo, hi]; returns 0 on success, -1 otherwise. */
int meld_parse_int64(const char *s, int64_t lo, int64_t hi, int64_t *out);

/* Reads environment variable `name` as an integer in [lo, hi]: returns MELD_OK and leaves
 * *out untouched when unset, MELD_ERR_INVALID_ARG ("MELD_X=abc: not an integer in [lo, hi]")
 * when malformed. */
meld_result_t meld_env_int64(const char *name, int64_t lo, int64_t hi, int64_t *out);

/* Number of unknown MELD_* variables found in the environment (each is warned about). */
int meld_config_warn_unknown_env(void);

#ifdef __cplusplus
}
#endif

#endif
