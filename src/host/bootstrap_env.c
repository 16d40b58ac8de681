/* bootstrap_env.c — the rank layout and root address from the launcher's environment
 * (torchrun, Open MPI, Slurm), and a job key derived from the job's own variables. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap.h"
#include "config.h"
#include "error.h"
#include "log.h"

#define BOOT_MAX_RANKS 4096 /* = MELD_MAX_RANKS (comm.h) */

static const char *env(const char *name) {
  const char *s = getenv(name);
  return s && *s ? s : NULL;
}

/* FNV-1a over "NAME=value" and a terminator, so that values of different variables can
 * never combine into equal byte streams. */
static uint64_t fnv1a(uint64_t h, const char *name, const char *value) {
  for (const char *s = name; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
  h = (h ^ '=') * 0x100000001b3ull;
  for (const char *s = value; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
  return (h ^ 0xff) * 0x100000001b3ull;
}

meld_result_t meld_bootstrap_from_env(int port, meld_boot_addr_t *addr, int *rank, int *nranks) {
  if (!addr || !rank || !nranks)
    return meld_error(MELD_ERR_INVALID_ARG, "meld_comm_init_env: NULL output");
  static const char *const layouts[][3] = {
      {"RANK", "WORLD_SIZE", "torchrun"},
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "Open MPI"},
      {"SLURM_PROCID", "SLURM_NTASKS", "Slurm"}};
  int l = 0;
  while (l < 3 && !(env(layouts[l][0]) && env(layouts[l][1]))) l++;
  if (l == 3)
    return meld_error(MELD_ERR_INVALID_ARG,
                      "meld_comm_init_env: no launcher variables found: set RANK and "
                      "WORLD_SIZE (as torchrun does), or run under Open MPI "
                      "(OMPI_COMM_WORLD_RANK/SIZE) or Slurm (SLURM_PROCID/SLURM_NTASKS)");
  const char *rv = layouts[l][0], *nv = layouts[l][1];
  int64_t r, n, p = port;
  if (meld_parse_int64(env(nv), 1, BOOT_MAX_RANKS, &n) != 0)
    return meld_error(MELD_ERR_INVALID_ARG,
                      "meld_comm_init_env: %s=%s: not an integer in [1, %d]", nv, env(nv),
                      BOOT_MAX_RANKS);
  if (meld_parse_int64(env(rv), 0, INT32_MAX, &r) != 0)
    return meld_error(MELD_ERR_INVALID_ARG,
                      "meld_comm_init_env: %s=%s: not a non-negative integer", rv, env(rv));
  if (r >= n)
    return meld_error(MELD_ERR_INVALID_ARG, "meld_comm_init_env: %s=%lld is not below %s=%lld", rv,
                      (long long)r, nv, (long long)n);
  /* The root's address: MELD_MASTER_ADDR, else MASTER_ADDR. A job of one rank needs none. */
  const char *hv = env("MELD_MASTER_ADDR") ? "MELD_MASTER_ADDR" : "MASTER_ADDR";
  const char *host = env(hv) ? env(hv) : n == 1 ? "127.0.0.1" : NULL;
  if (!host)
    return meld_error(MELD_ERR_INVALID_ARG,
                      "meld_comm_init_env: %s layout found but the root's address is "
                      "unknown: set MASTER_ADDR (or MELD_MASTER_ADDR) to rank 0's host",
                      layouts[l][2]);
  if (strlen(host) >= sizeof addr->host)
    return meld_error(MELD_ERR_INVALID_ARG,
                      "meld_comm_init_env: %s=%s is longer than %zu characters", hv, host,
                      sizeof addr->host - 1);
  /* meld's port: the configured one, else MASTER_PORT + 1 (torch's TCPStore holds
   * MASTER_PORT itself for the whole job). */
  if (port < 0 || port > 65535)
    return meld_error(MELD_ERR_INVALID_ARG, "meld_comm_init_env: port %d is outside [1, 65535]",
                      port);
  if (!port && env("MASTER_PORT")) {
    if (meld_parse_int64(env("MASTER_PORT"), 1, 65534, &p) != 0)
      return meld_error(MELD_ERR_INVALID_ARG,
                        "meld_comm_init_env: MASTER_PORT=%s: not an integer in [1, 65534] "
                        "(meld listens on MASTER_PORT + 1; or set MELD_PORT)",
                        env("MASTER_PORT"));
    p++;
  } else if (!port && n > 1) {
    return meld_error(MELD_ERR_INVALID_ARG,
                      "meld_comm_init_env: no port for meld's rendezvous: set MELD_PORT (or "
                      "config.port), or MASTER_PORT (meld then uses MASTER_PORT + 1)");
  }
  /* The job key: equal on every rank of this job, different for another job or another
   * restart of it, so that stale or stray processes are refused by the root. */
  char num[32];
  uint64_t key = 0xcbf29ce484222325ull;
  key = fnv1a(key, "addr", host);
  snprintf(num, sizeof num, "%lld", (long long)p);
  key = fnv1a(key, "port", num);
  snprintf(num, sizeof num, "%lld", (long long)n);
  key = fnv1a(key, "world", num);
  static const char *const job_vars[] = {
      "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "SLURM_JOB_ID",
      "SLURM_STEP_ID",       "OMPI_MCA_ess_base_jobid",    "MELD_JOB_KEY"};
  for (size_t i = 0; i < sizeof job_vars / sizeof job_vars[0]; i++)
    if (env(job_vars[i])) key = fnv1a(key, job_vars[i], env(job_vars[i]));
  memset(addr, 0, sizeof *addr);
  addr->magic = MELD_BOOT_MAGIC;
  addr->key = key;
  addr->port = (uint16_t)p;
  snprintf(addr->host, sizeof addr->host, "%s", host);
  *rank = (int)r;
  *nranks = (int)n;
  MELD_INFO(MELD_SUB_BOOT, "%s layout: rank %d of %d, root %s:%u", layouts[l][2], *rank, *nranks,
            addr->host, (unsigned)addr->port);
  return MELD_OK;
}
