/* bootstrap.h — TCP rendezvous of the ranks of one job, and host collectives over it.
 *
 * The root (rank 0) listens; every other rank connects, presents the job key, its rank and
 * nranks; the root admits only matching, not-yet-seen ranks (a stray or stale process with
 * another key is refused and logged), then acknowledges everyone. Host collectives run as a
 * star through the root. Every step is bounded by the bootstrap deadline: a rank that never
 * arrives makes the others fail with MELD_ERR_TIMEOUT (and a sentence naming the missing
 * ranks) within the timeout, never a hang. */
#ifndef MELD_HOST_BOOTSTRAP_H
#define MELD_HOST_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>

#include "meld.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MELD_BOOT_MAGIC 0x6d656c64626f6f74ull /* "meldboot" */

/* What a meld_unique_id holds (it fits in MELD_UNIQUE_ID_BYTES). */
typedef struct {
  uint64_t magic;    /* MELD_BOOT_MAGIC: a zeroed or foreign id is rejected */
  uint64_t key;      /* random job key (or derived from the launcher's variables) */
  uint16_t port;     /* root's TCP port */
  char host[64];     /* root's address: IPv4 dotted quad or host name */
} meld_boot_addr_t;

typedef struct meld_bootstrap meld_bootstrap_t;

/* Creates a root address with a fresh random key and opens its listening socket now, on
 * `port` (0 = any free port) on all interfaces; `host` is advertised (NULL: MELD_SOCKET_ADDR,
 * else this host's first non-loopback IPv4 address, else 127.0.0.1). The socket is kept in a
 * process-wide table until a rank 0 of this process takes it in meld_bootstrap_init.
 * Fails: MELD_ERR_SYSTEM (e.g. "port 29501 is already in use"). */
meld_result_t meld_bootstrap_root_listen(int port, const char *host, meld_boot_addr_t *addr);

/* Closes this process's listening socket for `key` (from meld_bootstrap_root_listen), if it
 * still holds one; otherwise does nothing. For a process that made an id but will not be its
 * rank 0 (e.g. the parent or non-zero ranks after fork(): each inherited a copy of the
 * table, and only rank 0's copy should keep listening), and for error paths that drop an
 * unused id. Thread-safe. */
void meld_bootstrap_root_release(uint64_t key);

/* Joins the job as `rank` of `nranks`. Rank 0 becomes the root: it takes the listening
 * socket opened by meld_bootstrap_root_listen for addr->key in this process, or else binds
 * addr->port itself. Other ranks connect (retrying until the deadline). Returns when all
 * nranks have joined. Every step is bounded by timeout_ms (non-roots wait up to 250 ms more
 * for the root's answer, so that the root's sentence reaches them). nranks == 1 opens no
 * socket (and closes a listener made for addr->key, if this process holds one).
 * Fails: MELD_ERR_INVALID_ARG (bad arguments, bad magic; or the root refused this rank:
 * another job key, another nranks, a duplicate rank), MELD_ERR_TIMEOUT (the root's sentence
 * names the missing ranks), MELD_ERR_SYSTEM (port in use, the root died). When the root
 * fails, it tells the connected ranks, which fail at once with its code and sentence.
 * On failure *out is NULL and all sockets are closed. */
meld_result_t meld_bootstrap_init(const meld_boot_addr_t *addr, int nranks, int rank,
                                  int64_t timeout_ms, meld_bootstrap_t **out);

/* Collectives below: every rank must call the same ones, in the same order, with the same
 * bytes (and root); each is bounded by the init timeout and is also a barrier. Fails:
 * MELD_ERR_INVALID_ARG (NULL; or ranks called different collectives or sizes: "rank 2 sent
 * 64 bytes, expected 32: ranks called different collectives", on every rank),
 * MELD_ERR_TIMEOUT (names the ranks that did not call), MELD_ERR_SYSTEM (a rank or the root
 * died; names it). After a failure b is unusable: every later collective fails at once
 * (destroy it). */

/* In-place all-gather: on entry buf + rank * bytes holds this rank's part; on return
 * buf holds every rank's part in rank order. Collective. */
meld_result_t meld_bootstrap_allgather(meld_bootstrap_t *b, void *buf, size_t bytes);

/* Broadcast `bytes` of buf from rank `root` to all. Collective. */
meld_result_t meld_bootstrap_bcast(meld_bootstrap_t *b, void *buf, size_t bytes, int root);

/* Returns when every rank has entered the barrier. Collective. */
meld_result_t meld_bootstrap_barrier(meld_bootstrap_t *b);

/* Like barrier, with its own (usually short) deadline; used on teardown, where a dead peer
 * must not hold us up for the full bootstrap timeout. */
meld_result_t meld_bootstrap_barrier_timeout(meld_bootstrap_t *b, int64_t timeout_ms);

int meld_bootstrap_rank(const meld_bootstrap_t *b);
int meld_bootstrap_nranks(const meld_bootstrap_t *b);

/* Closes all sockets and frees b. NULL is a no-op. */
void meld_bootstrap_destroy(meld_bootstrap_t *b);

/* Rank layout from the launcher's environment (torchrun, Open MPI, Slurm): see meld.h's
 * meld_comm_init_env. `port` is the configured port (0 = MASTER_PORT + 1: torch's TCPStore
 * holds MASTER_PORT itself). Layout: torchrun (RANK and WORLD_SIZE) before Open MPI
 * (OMPI_COMM_WORLD_RANK/SIZE) before Slurm (SLURM_PROCID/SLURM_NTASKS). Root address:
 * MELD_MASTER_ADDR, else MASTER_ADDR (a job of one rank needs neither, nor a port).
 * Fills the root address (key: a hash of the address, port, world size, TORCHELASTIC_RUN_ID,
 * TORCHELASTIC_RESTART_COUNT, SLURM_JOB_ID, SLURM_STEP_ID, OMPI_MCA_ess_base_jobid and
 * MELD_JOB_KEY, those set), rank and nranks. Fails with MELD_ERR_INVALID_ARG naming the
 * missing/bad variable and its value. (bootstrap_env.c) */
meld_result_t meld_bootstrap_from_env(int port, meld_boot_addr_t *addr, int *rank, int *nranks);

#ifdef __cplusplus
}
#endif

#endif
