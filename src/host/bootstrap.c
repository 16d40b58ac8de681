/* bootstrap.c — TCP rendezvous of one job's ranks, and host collectives as a star via rank 0.
 *
 * Protocol. Every message is a frame: a 32-byte header {magic, type, seq, arg, size, len}
 * and `len` payload bytes, in host byte order (the ranks of one job share an architecture).
 *   joiner -> root   HELLO  payload {MELD_BOOT_MAGIC, key, nranks, rank}
 *   root -> joiner   ACK    payload {key}; sent to everyone only once all nranks have joined,
 *                           so a returned meld_bootstrap_init means the whole job is there.
 *   root -> any      ABORT  arg = result code, payload = the root's sentence. The root sends
 *                           it when it refuses a joiner or fails (timeout, a dead rank, ranks
 *                           calling different collectives), so that the others fail at once
 *                           with the root's sentence, which names the culprit, instead of
 *                           waiting for their own timeout with nothing to say.
 *   collectives      every non-root sends {type, seq, arg = bcast root, size = bytes as the
 *                    caller passed them, len = what it contributes}; the root checks that all
 *                    agree (else ABORT), then answers each rank with its result. Every
 *                    collective is thus also a barrier, and a mismatch is a sentence, not
 *                    garbled data or a hang.
 *
 * Deadlines. Each call turns its timeout into one absolute deadline (CLOCK_MONOTONIC). All
 * sockets are non-blocking and every wait is a poll() bounded by what remains of it, so
 * connect retries, accept, send and recv together never outlast it. Non-roots wait GRACE_MS
 * longer for the root's answer than the root waits for the ranks: the root's sentence (which
 * names the missing ranks) then reaches them before their own, vaguer, timeout fires. */
#include "bootstrap.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "sock.h"

#define BOOT_MAX_RANKS 4096      /* = MELD_MAX_RANKS (comm.h); also in bootstrap_env.c */
#define FRAME_MAGIC 0x6d6c6466u  /* "mldf" */
#define GRACE_MS 250             /* extra wait of non-roots for the root's answer (see top) */
#define ABORT_SEND_MS 200        /* budget for telling the others why we fail */
#define MAX_PENDING 64           /* accepted connections whose hello has not arrived yet */
#define MAX_LISTENERS 64         /* unique ids of this process not yet taken by a rank 0 */
#define REASON_MAX 512
#define LIST_MAX 16              /* missing ranks named in a timeout sentence */

enum { MSG_HELLO = 1, MSG_ACK, MSG_ABORT, MSG_ALLGATHER, MSG_BCAST, MSG_BARRIER, MSG_END };
static const char *const g_msg_name[MSG_END] = {"?", "hello", "ack", "abort", "allgather",
                                                "bcast", "barrier"};
static const char *msg_name(uint32_t t) { return t < MSG_END ? g_msg_name[t] : "?"; }

typedef struct {
  uint32_t magic, type, seq; /* seq: collectives called so far, equal on every rank */
  int32_t arg;               /* bcast root; ABORT: the result code */
  uint64_t size, len;        /* size: the caller's byte count; len: payload that follows */
} frame_t;

typedef struct {
  uint64_t boot_magic, key;
  int32_t nranks, rank;
} hello_t;

struct meld_bootstrap {
  int rank, nranks;
  int64_t timeout_ms;   /* the configured bound of every call */
  int64_t cur_timeout;  /* the bound of the call in progress, for sentences */
  uint64_t key;
  uint32_t seq;
  int root_fd;          /* non-root: its socket to the root */
  int *fds;             /* root: [nranks] socket to each rank; fds[0] = -1 */
  char root_name[80];   /* "host:port", for sentences */
  meld_result_t failed; /* sticky: after a failed collective the ranks are out of step */
  char failed_msg[REASON_MAX];
};

/* ---- process-wide table of listening sockets opened by meld_bootstrap_root_listen ---- */

static pthread_mutex_t g_listen_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
  uint64_t key;
  int fd;
} g_listen[MAX_LISTENERS];
static int g_nlisten;

static int listener_take(uint64_t key) {
  int fd = -1;
  pthread_mutex_lock(&g_listen_mu);
  for (int i = 0; i < g_nlisten; i++)
    if (g_listen[i].key == key) {
      fd = g_listen[i].fd;
      g_listen[i] = g_listen[--g_nlisten];
      break;
    }
  pthread_mutex_unlock(&g_listen_mu);
  return fd;
}

void meld_bootstrap_root_release(uint64_t key) {
  int fd = listener_take(key);
  if (fd >= 0) close(fd);
}

/* ---- messages ---- */

static meld_io_t send_frame(int fd, uint32_t type, uint32_t seq, int32_t arg, uint64_t size,
                           const void *payload, size_t len, int64_t deadline) {
  frame_t f = {FRAME_MAGIC, type, seq, arg, size, len};
  meld_io_t r = meld_sock_send_all(fd, &f, sizeof f, deadline);
  return r != MELD_IO_OK ? r : meld_sock_send_all(fd, payload, len, deadline);
}

static meld_result_t random_key(uint64_t *key) {
  ssize_t n;
  do n = getrandom(key, sizeof *key, 0);
  while (n < 0 && errno == EINTR);
  if (n == (ssize_t)sizeof *key) return MELD_OK;
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  n = fd >= 0 ? read(fd, key, sizeof *key) : -1;
  if (fd >= 0) close(fd);
  if (n == (ssize_t)sizeof *key) return MELD_OK;
  return meld_error(MELD_ERR_SYSTEM, "meld bootstrap: no random source (getrandom, /dev/urandom)");
}

/* The address other ranks should dial: `host`, else MELD_SOCKET_ADDR, else the first
 * non-loopback IPv4 address that is up, else 127.0.0.1 (a single-host job). */
static meld_result_t pick_host(const char *host, char out[64]) {
  if (!host || !*host) host = getenv("MELD_SOCKET_ADDR");
  if (host && *host) {
    if (strlen(host) >= 64)
      return meld_error(MELD_ERR_INVALID_ARG, "meld bootstrap: address \"%s\" is longer than 63 "
                        "characters", host);
    snprintf(out, 64, "%s", host);
    return MELD_OK;
  }
  meld_sock_host_address(out, 64);
  return MELD_OK;
}

meld_result_t meld_bootstrap_root_listen(int port, const char *host, meld_boot_addr_t *addr) {
  if (!addr) return meld_error(MELD_ERR_INVALID_ARG, "meld_get_unique_id: NULL id");
  if (port < 0 || port > 65535)
    return meld_error(MELD_ERR_INVALID_ARG, "meld_get_unique_id: port %d is outside [0, 65535]",
                      port);
  memset(addr, 0, sizeof *addr);
  MELD_CHECK(pick_host(host, addr->host));
  MELD_CHECK(random_key(&addr->key));
  int fd;
  uint16_t bound;
  MELD_CHECK(meld_sock_listen(port, &fd, &bound));
  pthread_mutex_lock(&g_listen_mu);
  int full = g_nlisten == MAX_LISTENERS;
  if (!full) g_listen[g_nlisten].key = addr->key, g_listen[g_nlisten++].fd = fd;
  pthread_mutex_unlock(&g_listen_mu);
  if (full) {
    close(fd);
    return meld_error(MELD_ERR_SYSTEM, "meld_get_unique_id: %d unique ids of this process are "
                      "still unused by meld_comm_init", MAX_LISTENERS);
  }
  addr->magic = MELD_BOOT_MAGIC;
  addr->port = bound;
  MELD_INFO(MELD_SUB_BOOT, "bootstrap root listening on port %u, advertised as %s", bound,
            addr->host);
  return MELD_OK;
}

/* ---- abort and failure sentences ---- */

/* Best effort: tells every connected rank why we fail (the thread's last error), so that
 * they fail now with this sentence. A peer that cannot take 600 bytes in ABORT_SEND_MS is
 * dead or stuck anyway. */
static void abort_all(meld_bootstrap_t *b, meld_result_t code) {
  if (!b->fds) return;
  const char *msg = meld_last_error();
  size_t len = strnlen(msg, REASON_MAX - 1);
  int64_t deadline = meld_now_ms() + ABORT_SEND_MS;
  for (int r = 1; r < b->nranks; r++)
    if (b->fds[r] >= 0) send_frame(b->fds[r], MSG_ABORT, b->seq, code, 0, msg, len, deadline);
}

/* "ranks 3, 5 (2 of 8 missing)" from a per-rank done flag. */
static void missing_list(const meld_bootstrap_t *b, const char *done, char *out, size_t n) {
  int missing = 0, listed = 0;
  size_t at = 0;
  for (int r = 1; r < b->nranks; r++) missing += !done[r];
  at += (size_t)snprintf(out, n, missing == 1 ? "rank " : "ranks ");
  for (int r = 1; r < b->nranks && at < n; r++) {
    if (done[r]) continue;
    if (listed++ == LIST_MAX) {
      at += (size_t)snprintf(out + at, n - at, ", ...");
      break;
    }
    at += (size_t)snprintf(out + at, n - at, listed > 1 ? ", %d" : "%d", r);
  }
  if (at < n) snprintf(out + at, n - at, " (%d of %d missing)", missing, b->nranks);
}

/* ---- rendezvous ---- */

typedef struct {
  int fd;
  size_t got;
  unsigned char buf[sizeof(frame_t) + sizeof(hello_t)];
  char from[48];
} pending_t;

/* Reads from a connection that has not said hello yet; admits or refuses it when its hello
 * is complete. Returns 1 when the connection leaves the pending list, 0 if it stays. */
static int read_hello(meld_bootstrap_t *b, pending_t *p, int *joined) {
  ssize_t k = recv(p->fd, p->buf + p->got, sizeof p->buf - p->got, 0);
  if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
  if (k <= 0) {
    MELD_TRACE(MELD_SUB_BOOT, "connection from %s closed before its hello", p->from);
    close(p->fd);
    return 1;
  }
  p->got += (size_t)k;
  if (p->got < sizeof p->buf) return 0;
  frame_t f;
  hello_t h;
  memcpy(&f, p->buf, sizeof f);
  memcpy(&h, p->buf + sizeof f, sizeof h);
  if (f.magic != FRAME_MAGIC || f.type != MSG_HELLO || f.len != sizeof h ||
      h.boot_magic != MELD_BOOT_MAGIC) {
    MELD_WARN(MELD_SUB_BOOT, "meld bootstrap: a connection from %s did not send a meld hello: "
              "closed", p->from);
    close(p->fd);
    return 1;
  }
  char why[256] = "";
  if (h.key != b->key)
    snprintf(why, sizeof why, "a process with another job key tried to join: refused");
  else if (h.nranks != b->nranks)
    snprintf(why, sizeof why, "rank %d says nranks is %d but the job has %d ranks: refused",
             h.rank, h.nranks, b->nranks);
  else if (h.rank < 1 || h.rank >= b->nranks)
    snprintf(why, sizeof why, "rank %d is out of range [1, %d): refused", h.rank, b->nranks);
  else if (b->fds[h.rank] >= 0)
    snprintf(why, sizeof why, "rank %d joined twice (two processes use rank %d): refused",
             h.rank, h.rank);
  if (why[0]) {
    MELD_WARN(MELD_SUB_BOOT, "meld bootstrap: %s (connection from %s)", why, p->from);
    char msg[REASON_MAX];
    int len = snprintf(msg, sizeof msg, "meld bootstrap: the root at %s: %s", b->root_name, why);
    send_frame(p->fd, MSG_ABORT, 0, MELD_ERR_INVALID_ARG, 0, msg, (size_t)len,
               meld_now_ms() + ABORT_SEND_MS);
    meld_sock_close(p->fd);
    return 1;
  }
  b->fds[h.rank] = p->fd;
  (*joined)++;
  MELD_TRACE(MELD_SUB_BOOT, "rank %d joined from %s", h.rank, p->from);
  return 1;
}

/* Rank 0: accepts connections until nranks - 1 valid hellos arrived, then acks everyone. */
static meld_result_t root_init(meld_bootstrap_t *b, uint16_t port, int64_t deadline) {
  int lfd = listener_take(b->key);
  if (lfd < 0) {
    uint16_t bound;
    meld_result_t r = meld_sock_listen(port, &lfd, &bound);
    if (r != MELD_OK) {
      meld_error_prefix("meld_comm_init rank 0 (if meld_get_unique_id ran in another process "
                        "of this host, call it in rank 0's process instead)");
      return r;
    }
  }
  pending_t *pend = calloc(MAX_PENDING, sizeof *pend);
  struct pollfd *pfd = calloc(MAX_PENDING + 1, sizeof *pfd);
  char *done = calloc((size_t)b->nranks, 1);
  meld_result_t res = MELD_OK;
  int npend = 0, joined = 0;
  if (!pend || !pfd || !done)
    res = meld_error(MELD_ERR_OUT_OF_MEMORY, "meld bootstrap: out of host memory");
  while (res == MELD_OK && joined < b->nranks - 1) {
    int np = 0;
    pfd[np++] = (struct pollfd){lfd, POLLIN, 0};
    for (int i = 0; i < npend; i++) pfd[np++] = (struct pollfd){pend[i].fd, POLLIN, 0};
    int n = poll(pfd, (nfds_t)np, meld_poll_ms(deadline));
    if (n < 0 && errno != EINTR) {
      res = meld_error(MELD_ERR_SYSTEM, "meld bootstrap: poll: %s", strerror(errno));
    } else if (n == 0 && meld_now_ms() >= deadline) {
      char list[200];
      for (int r = 1; r < b->nranks; r++) done[r] = b->fds[r] >= 0;
      missing_list(b, done, list, sizeof list);
      res = meld_error(MELD_ERR_TIMEOUT, "meld bootstrap: timed out after %lld ms waiting for %s; "
                       "check that every rank started and uses the same MASTER_ADDR/port",
                       (long long)b->timeout_ms, list);
    }
    if (n <= 0) continue;
    /* Backwards, so that moving the last entry into a freed slot skips nothing. */
    for (int i = np - 1; i >= 1; i--)
      if (pfd[i].revents && read_hello(b, &pend[i - 1], &joined)) pend[i - 1] = pend[--npend];
    while (pfd[0].revents & POLLIN) {
      int fd = meld_sock_accept(lfd);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
          res = meld_error(MELD_ERR_SYSTEM, "meld bootstrap: accept: %s", strerror(errno));
        break;
      }
      if (npend == MAX_PENDING) { /* a flood of silent connections: drop the oldest */
        MELD_WARN(MELD_SUB_BOOT, "meld bootstrap: connection from %s said nothing: closed",
                  pend[0].from);
        close(pend[0].fd);
        pend[0] = pend[--npend];
      }
      pend[npend] = (pending_t){.fd = fd};
      meld_sock_peer_name(fd, pend[npend].from, sizeof pend[npend].from);
      npend++;
    }
  }
  size_t why_len = strnlen(meld_last_error(), REASON_MAX - 1);
  for (int i = 0; i < npend; i++) { /* strays, or (on failure) ranks whose hello came late */
    if (res != MELD_OK)
      send_frame(pend[i].fd, MSG_ABORT, 0, res, 0, meld_last_error(), why_len,
                 meld_now_ms() + ABORT_SEND_MS);
    meld_sock_close(pend[i].fd);
  }
  close(lfd); /* everyone is in (or we fail): later strays get "connection refused" */
  uint64_t key = b->key;
  for (int r = 1; r < b->nranks && res == MELD_OK; r++) {
    meld_io_t io = send_frame(b->fds[r], MSG_ACK, 0, 0, 0, &key, sizeof key, deadline);
    if (io != MELD_IO_OK)
      res = meld_error(io == MELD_IO_TIMEOUT ? MELD_ERR_TIMEOUT : MELD_ERR_SYSTEM,
                       "meld bootstrap: acknowledging rank %d failed (%s): the process exited "
                       "or is stuck", r, meld_sock_what(io));
  }
  if (res != MELD_OK) abort_all(b, res);
  else MELD_INFO(MELD_SUB_BOOT, "bootstrap: all %d ranks joined", b->nranks);
  free(pend);
  free(pfd);
  free(done);
  return res;
}

/* Non-root: reads the root's next frame header. ABORT becomes the root's result code and
 * sentence; timeout and a lost connection become sentences of our own. */
static meld_result_t recv_from_root(meld_bootstrap_t *b, frame_t *f, int64_t deadline,
                                    const char *waiting_for) {
  meld_io_t io = meld_sock_recv_all(b->root_fd, f, sizeof *f, deadline);
  if (io == MELD_IO_TIMEOUT)
    return meld_error(MELD_ERR_TIMEOUT, "meld bootstrap: rank %d timed out after %lld ms waiting "
                      "for the root (rank 0 at %s) to %s; some rank did not arrive (the root's "
                      "log names it)", b->rank, (long long)b->cur_timeout, b->root_name,
                      waiting_for);
  if (io != MELD_IO_OK)
    return meld_error(MELD_ERR_SYSTEM, "meld bootstrap: rank %d lost its connection to the root "
                      "(rank 0 at %s) while waiting for it to %s (%s): the root exited, failed "
                      "or refused this rank (see its log)", b->rank, b->root_name, waiting_for,
                      meld_sock_what(io));
  if (f->magic != FRAME_MAGIC)
    return meld_error(MELD_ERR_SYSTEM, "meld bootstrap: rank %d got a garbled message from %s",
                      b->rank, b->root_name);
  if (f->type != MSG_ABORT) return MELD_OK;
  char msg[REASON_MAX] = "";
  size_t len = f->len < sizeof msg - 1 ? (size_t)f->len : sizeof msg - 1;
  meld_sock_recv_all(b->root_fd, msg, len, meld_now_ms() + ABORT_SEND_MS);
  msg[len] = '\0';
  meld_result_t code =
      f->arg > 0 && f->arg < (int32_t)MELD_NUM_RESULTS ? (meld_result_t)f->arg : MELD_ERR_SYSTEM;
  return meld_error(code, "%s [reported by the root to rank %d]", msg, b->rank);
}

/* Non-root: a send to the root failed. If the root closed the connection, it may have sent
 * an ABORT saying why just before (e.g. it saw a mismatch from a faster rank): prefer that. */
static meld_result_t send_failed(meld_bootstrap_t *b, meld_io_t io, const char *what) {
  frame_t f = {0};
  if (io == MELD_IO_EOF) {
    meld_result_t r = recv_from_root(b, &f, meld_now_ms() + ABORT_SEND_MS, what);
    if (r != MELD_OK && f.magic == FRAME_MAGIC && f.type == MSG_ABORT) return r;
  }
  return meld_error(io == MELD_IO_TIMEOUT ? MELD_ERR_TIMEOUT : MELD_ERR_SYSTEM,
                    "meld bootstrap: rank %d could not send its %s message to the root (rank 0 "
                    "at %s): %s", b->rank, what, b->root_name, meld_sock_what(io));
}

/* Non-root: connects to the root (retrying while it is not up yet), says hello, waits for
 * the ack. */
static meld_result_t joiner_init(meld_bootstrap_t *b, const meld_boot_addr_t *addr,
                                 int64_t deadline) {
  const char *last = "no attempt";
  for (int attempt = 0;; attempt++) {
    /* 20-50 ms between attempts, spread by rank so that thousands of ranks do not retry in
     * lockstep against a root that is still starting. */
    int64_t pause = 20 + (b->rank * 7 + attempt * 13) % 31, left = deadline - meld_now_ms();
    if (attempt > 0) meld_sleep_ms(pause < left ? pause : left);
    if (meld_now_ms() >= deadline)
      return meld_error(MELD_ERR_TIMEOUT, "meld bootstrap: rank %d could not reach the root at "
                        "%s within %lld ms (%s); check that rank 0 started and that every rank "
                        "uses the same MASTER_ADDR/port", b->rank, b->root_name,
                        (long long)b->timeout_ms, last);
    const char *gai = NULL;
    int e = meld_sock_connect(addr->host, addr->port, deadline, &b->root_fd, &gai);
    if (e == 0) break;
    if (e < 0)
      return meld_error(MELD_ERR_SYSTEM, "meld bootstrap: cannot resolve the root's address "
                        "\"%s\": %s", addr->host, gai);
    if (e != ECONNREFUSED && e != ETIMEDOUT && e != EHOSTUNREACH && e != ENETUNREACH &&
        e != ECONNRESET && e != EAGAIN && e != EINTR)
      return meld_error(MELD_ERR_SYSTEM, "meld bootstrap: rank %d cannot connect to the root at "
                        "%s: %s", b->rank, b->root_name, strerror(e));
    last = strerror(e); /* the root is not listening yet: retry until the deadline */
  }
  hello_t h = {MELD_BOOT_MAGIC, addr->key, b->nranks, b->rank};
  meld_io_t io = send_frame(b->root_fd, MSG_HELLO, 0, 0, 0, &h, sizeof h, deadline);
  if (io != MELD_IO_OK) return send_failed(b, io, "hello");
  frame_t f;
  MELD_CHECK(recv_from_root(b, &f, deadline + GRACE_MS, "acknowledge that all ranks joined"));
  uint64_t key = 0;
  if (f.type != MSG_ACK || f.len != sizeof key ||
      meld_sock_recv_all(b->root_fd, &key, sizeof key, deadline + GRACE_MS) != MELD_IO_OK ||
      key != addr->key)
    return meld_error(MELD_ERR_SYSTEM, "meld bootstrap: rank %d got no valid acknowledgement "
                      "from %s (is it the root of another job?)", b->rank, b->root_name);
  return MELD_OK;
}

meld_result_t meld_bootstrap_init(const meld_boot_addr_t *addr, int nranks, int rank,
                                  int64_t timeout_ms, meld_bootstrap_t **out) {
  if (!out) return meld_error(MELD_ERR_INVALID_ARG, "meld_comm_init: NULL output");
  *out = NULL;
  if (!addr) return meld_error(MELD_ERR_INVALID_ARG, "meld_comm_init: NULL unique id");
  if (addr->magic != MELD_BOOT_MAGIC)
    return meld_error(MELD_ERR_INVALID_ARG, "meld_comm_init: the unique id was not made by "
                      "meld_get_unique_id (was it zeroed, or not passed to every rank?)");
  if (nranks <= 0 || nranks > BOOT_MAX_RANKS)
    return meld_error(MELD_ERR_INVALID_ARG, "meld_comm_init: nranks %d is outside [1, %d]",
                      nranks, BOOT_MAX_RANKS);
  if (rank < 0) return meld_error(MELD_ERR_INVALID_ARG, "meld_comm_init: rank %d < 0", rank);
  if (rank >= nranks)
    return meld_error(MELD_ERR_INVALID_ARG, "meld_comm_init: rank %d >= nranks %d", rank, nranks);
  if (timeout_ms < 1)
    return meld_error(MELD_ERR_INVALID_ARG, "meld_comm_init: bootstrap timeout %lld ms must be "
                      ">= 1", (long long)timeout_ms);
  if (!memchr(addr->host, '\0', sizeof addr->host) || (nranks > 1 && rank > 0 && !addr->port))
    return meld_error(MELD_ERR_INVALID_ARG, "meld_comm_init: the unique id holds no valid root "
                      "address");
  meld_bootstrap_t *b = calloc(1, sizeof *b);
  if (!b) return meld_error(MELD_ERR_OUT_OF_MEMORY, "meld_comm_init: out of host memory");
  b->rank = rank;
  b->nranks = nranks;
  b->timeout_ms = b->cur_timeout = timeout_ms;
  b->key = addr->key;
  b->root_fd = -1;
  snprintf(b->root_name, sizeof b->root_name, "%s:%u", addr->host, (unsigned)addr->port);
  int64_t deadline = meld_now_ms() + timeout_ms;
  meld_result_t r = MELD_OK;
  if (nranks == 1) {
    meld_bootstrap_root_release(addr->key); /* alone: no sockets at all */
  } else if (rank == 0) {
    b->fds = malloc((size_t)nranks * sizeof *b->fds);
    if (!b->fds) r = meld_error(MELD_ERR_OUT_OF_MEMORY, "meld_comm_init: out of host memory");
    for (int i = 0; b->fds && i < nranks; i++) b->fds[i] = -1;
    if (r == MELD_OK) r = root_init(b, addr->port, deadline);
  } else {
    r = joiner_init(b, addr, deadline);
  }
  if (r != MELD_OK) {
    meld_bootstrap_destroy(b);
    return r;
  }
  *out = b;
  return MELD_OK;
}

/* ---- collectives ---- */

/* What rank r contributes to / receives from a collective (see the protocol above). */
static size_t send_len(uint32_t type, int r, int root, size_t bytes) {
  return type == MSG_ALLGATHER || (type == MSG_BCAST && r == root) ? bytes : 0;
}
static size_t reply_len(const meld_bootstrap_t *b, uint32_t type, int r, int root, size_t bytes) {
  return type == MSG_ALLGATHER ? (size_t)b->nranks * bytes
         : type == MSG_BCAST && r != root ? bytes : 0;
}

/* Checks rank r's header against the root's own call; reads its payload. */
static meld_result_t root_take(meld_bootstrap_t *b, int r, const frame_t *f, uint32_t type,
                               char *buf, size_t bytes, int root, int64_t deadline) {
  const char *op = msg_name(type);
  if (f->magic != FRAME_MAGIC)
    return meld_error(MELD_ERR_SYSTEM, "meld bootstrap %s: rank %d sent a garbled message", op, r);
  if (f->type != type)
    return meld_error(MELD_ERR_INVALID_ARG, "meld bootstrap: rank %d called %s while rank 0 called "
                      "%s: ranks called different collectives", r, msg_name(f->type), op);
  if (f->seq != b->seq)
    return meld_error(MELD_ERR_INVALID_ARG, "meld bootstrap %s: rank %d is at collective #%u, "
                      "rank 0 at #%u: ranks called different collectives", op, r, f->seq, b->seq);
  if (f->size != bytes)
    return meld_error(MELD_ERR_INVALID_ARG, "meld bootstrap %s: rank %d sent %llu bytes, expected "
                      "%zu: ranks called different collectives", op, r,
                      (unsigned long long)f->size, bytes);
  if (f->arg != root)
    return meld_error(MELD_ERR_INVALID_ARG, "meld bootstrap %s: rank %d called it with root %d, "
                      "rank 0 with root %d", op, r, f->arg, root);
  size_t len = send_len(type, r, root, bytes);
  if (f->len != len)
    return meld_error(MELD_ERR_SYSTEM, "meld bootstrap %s: rank %d sent a garbled message", op, r);
  char *dst = type == MSG_ALLGATHER && bytes ? buf + (size_t)r * bytes : buf;
  meld_io_t io = meld_sock_recv_all(b->fds[r], dst, len, deadline);
  if (io != MELD_IO_OK)
    return meld_error(io == MELD_IO_TIMEOUT ? MELD_ERR_TIMEOUT : MELD_ERR_SYSTEM,
                      "meld bootstrap %s: receiving from rank %d failed (%s)", op, r,
                      meld_sock_what(io));
  return MELD_OK;
}

/* Root: gathers every rank's header and contribution (in arrival order, so a timeout can
 * name all the ranks that did not call), then answers each rank. */
static meld_result_t coll_root(meld_bootstrap_t *b, uint32_t type, char *buf, size_t bytes,
                               int root, int64_t deadline) {
  const char *op = msg_name(type);
  int n = b->nranks, left = n - 1;
  frame_t *hdr = calloc((size_t)n, sizeof *hdr);
  size_t *got = calloc((size_t)n, sizeof *got);
  char *done = calloc((size_t)n, 1);
  struct pollfd *pfd = calloc((size_t)n, sizeof *pfd);
  int *who = calloc((size_t)n, sizeof *who);
  meld_result_t res = MELD_OK;
  if (!hdr || !got || !done || !pfd || !who)
    res = meld_error(MELD_ERR_OUT_OF_MEMORY, "meld bootstrap %s: out of host memory", op);
  while (res == MELD_OK && left > 0) {
    int np = 0;
    for (int r = 1; r < n; r++)
      if (!done[r]) who[np] = r, pfd[np++] = (struct pollfd){b->fds[r], POLLIN, 0};
    int k = poll(pfd, (nfds_t)np, meld_poll_ms(deadline));
    if (k < 0 && errno != EINTR) {
      res = meld_error(MELD_ERR_SYSTEM, "meld bootstrap %s: poll: %s", op, strerror(errno));
    } else if (k == 0 && meld_now_ms() >= deadline) {
      char list[200];
      missing_list(b, done, list, sizeof list);
      res = meld_error(MELD_ERR_TIMEOUT, "meld bootstrap %s: timed out after %lld ms waiting for "
                       "%s: they did not call %s, or are stuck", op, (long long)b->cur_timeout,
                       list, op);
    }
    for (int i = 0; i < np && k > 0 && res == MELD_OK; i++) {
      int r = who[i];
      if (!pfd[i].revents) continue;
      ssize_t m = recv(b->fds[r], (char *)&hdr[r] + got[r], sizeof(frame_t) - got[r], 0);
      if (m < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
      if (m <= 0) {
        res = meld_error(MELD_ERR_SYSTEM, "meld bootstrap %s: rank %d closed its connection (%s): "
                         "the process exited or failed", op, r,
                         m == 0 ? "end of stream" : strerror(errno));
      } else if ((got[r] += (size_t)m) == sizeof(frame_t)) {
        res = root_take(b, r, &hdr[r], type, buf, bytes, root, deadline);
        done[r] = 1, left--;
      }
    }
  }
  for (int r = 1; r < n && res == MELD_OK; r++) {
    size_t len = reply_len(b, type, r, root, bytes);
    meld_io_t io = send_frame(b->fds[r], type, b->seq, root, bytes, buf, len, deadline);
    if (io != MELD_IO_OK)
      res = meld_error(io == MELD_IO_TIMEOUT ? MELD_ERR_TIMEOUT : MELD_ERR_SYSTEM,
                       "meld bootstrap %s: sending to rank %d failed (%s): the process exited or "
                       "is stuck", op, r, meld_sock_what(io));
  }
  if (res != MELD_OK) abort_all(b, res);
  free(hdr);
  free(got);
  free(done);
  free(pfd);
  free(who);
  return res;
}

/* Non-root: sends its header and contribution, then reads the root's answer. */
static meld_result_t coll_leaf(meld_bootstrap_t *b, uint32_t type, char *buf, size_t bytes,
                               int root, int64_t deadline) {
  const char *op = msg_name(type);
  const char *src = type == MSG_ALLGATHER && bytes ? buf + (size_t)b->rank * bytes : buf;
  meld_io_t io = send_frame(b->root_fd, type, b->seq, root, bytes, src,
                            send_len(type, b->rank, root, bytes), deadline);
  if (io != MELD_IO_OK) return send_failed(b, io, op);
  frame_t f;
  char what[64];
  snprintf(what, sizeof what, "complete %s", op);
  MELD_CHECK(recv_from_root(b, &f, deadline + GRACE_MS, what));
  size_t len = reply_len(b, type, b->rank, root, bytes);
  if (f.type != type || f.seq != b->seq || f.len != len)
    return meld_error(MELD_ERR_INTERNAL, "meld bootstrap %s: rank %d got a %s answer of %llu "
                      "bytes for collective #%u, expected %zu bytes for #%u", op, b->rank,
                      msg_name(f.type), (unsigned long long)f.len, f.seq, len, b->seq);
  io = meld_sock_recv_all(b->root_fd, buf, len, deadline + GRACE_MS);
  if (io != MELD_IO_OK)
    return meld_error(io == MELD_IO_TIMEOUT ? MELD_ERR_TIMEOUT : MELD_ERR_SYSTEM,
                      "meld bootstrap %s: rank %d lost the root's answer (%s)", op, b->rank,
                      meld_sock_what(io));
  return MELD_OK;
}

static meld_result_t coll(meld_bootstrap_t *b, uint32_t type, void *buf, size_t bytes, int root,
                          int64_t timeout_ms) {
  if (b->failed)
    return meld_error(b->failed, "meld bootstrap %s: unusable after an earlier failure: %s",
                      msg_name(type), b->failed_msg);
  b->seq++;
  if (b->nranks == 1) return MELD_OK; /* alone: the data is already in place */
  int64_t deadline = meld_now_ms() + timeout_ms;
  b->cur_timeout = timeout_ms;
  meld_result_t r = b->rank == 0 ? coll_root(b, type, buf, bytes, root, deadline)
                                 : coll_leaf(b, type, buf, bytes, root, deadline);
  if (r != MELD_OK) {
    b->failed = r; /* the ranks are out of step now: later collectives would read garbage */
    snprintf(b->failed_msg, sizeof b->failed_msg, "%s", meld_last_error());
  }
  return r;
}

meld_result_t meld_bootstrap_allgather(meld_bootstrap_t *b, void *buf, size_t bytes) {
  if (!b || (!buf && bytes))
    return meld_error(MELD_ERR_INVALID_ARG, "meld_bootstrap_allgather: NULL %s", b ? "buf" : "b");
  if (bytes && (size_t)b->nranks > SIZE_MAX / bytes)
    return meld_error(MELD_ERR_INVALID_ARG, "meld_bootstrap_allgather: %zu bytes x %d ranks "
                      "overflows", bytes, b->nranks);
  return coll(b, MSG_ALLGATHER, buf, bytes, 0, b->timeout_ms);
}

meld_result_t meld_bootstrap_bcast(meld_bootstrap_t *b, void *buf, size_t bytes, int root) {
  if (!b || (!buf && bytes))
    return meld_error(MELD_ERR_INVALID_ARG, "meld_bootstrap_bcast: NULL %s", b ? "buf" : "b");
  if (root < 0 || root >= b->nranks)
    return meld_error(MELD_ERR_INVALID_ARG, "meld_bootstrap_bcast: root %d is outside [0, %d)",
                      root, b->nranks);
  return coll(b, MSG_BCAST, buf, bytes, root, b->timeout_ms);
}

meld_result_t meld_bootstrap_barrier(meld_bootstrap_t *b) {
  if (!b) return meld_error(MELD_ERR_INVALID_ARG, "meld_bootstrap_barrier: NULL b");
  return coll(b, MSG_BARRIER, NULL, 0, 0, b->timeout_ms);
}

meld_result_t meld_bootstrap_barrier_timeout(meld_bootstrap_t *b, int64_t timeout_ms) {
  if (!b) return meld_error(MELD_ERR_INVALID_ARG, "meld_bootstrap_barrier_timeout: NULL b");
  if (timeout_ms < 1)
    return meld_error(MELD_ERR_INVALID_ARG, "meld_bootstrap_barrier_timeout: timeout %lld ms "
                      "must be >= 1", (long long)timeout_ms);
  return coll(b, MSG_BARRIER, NULL, 0, 0, timeout_ms);
}

int meld_bootstrap_rank(const meld_bootstrap_t *b) { return b ? b->rank : -1; }
int meld_bootstrap_nranks(const meld_bootstrap_t *b) { return b ? b->nranks : -1; }

void meld_bootstrap_destroy(meld_bootstrap_t *b) {
  if (!b) return;
  for (int r = 0; b->fds && r < b->nranks; r++) meld_sock_close(b->fds[r]);
  meld_sock_close(b->root_fd);
  free(b->fds);
  free(b);
}
