/* transport_tcp.c — the tcp transport: one TCP connection per pair of ranks on different
 * nodes, used in both directions; a receiver thread per process applies incoming writes.
 *
 * Wire format (host byte order: the ranks of one job share an architecture). Every message is
 * a 48-byte frame header, then for DATA `bytes` payload bytes:
 *   HELLO  connector -> acceptor, once: region = connector's rank, flag_region = nranks.
 *   DATA   {region, offset, bytes, flag_region, flag_offset, flag_value} + payload.
 *   BYE    the sender sends nothing more on this connection (clean close).
 * Connection set-up: every rank listens (any port) and all-gathers {host, port}; rank r
 * connects to every remote rank below it and accepts every remote rank above it. Connects
 * complete through the listener's backlog, so no rank waits for another's accept order.
 *
 * Receiving: one thread poll()s all connections (and a wake-up pipe), reads a whole frame
 * from a ready connection (header, then the payload straight into the registered region:
 * no staging copy), and only then release-stores the flag (the ordering argument:
 * transport.h). EOF before BYE means the peer died or aborted: a sticky error naming it.
 * Sending: the proxy thread writes header + payload with sendmsg (partial writes continued,
 * MSG_NOSIGNAL: no SIGPIPE), in poll slices so that a failure seen by the receiver, or an
 * abort, ends a send blocked on a peer that stopped reading. Every step has a deadline. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "sock.h"
#include "transport.h"

#define TCP_MAGIC 0x6d6c6474u /* "mldt" */
#define SLICE_MS 50           /* a blocked send re-checks failure and abort this often */

enum { FR_HELLO = 1, FR_DATA, FR_BYE };

typedef struct {
  uint32_t magic, type;
  uint32_t region, flag_region;
  uint64_t offset, bytes, flag_offset, flag_value;
} frame_t;
_Static_assert(sizeof(frame_t) == 48, "frame header is 48 bytes");

typedef struct {
  char host[64];
  uint16_t port;
} addr_t;

typedef struct {
  int fd;        /* -1: same node (or not connected) */
  int bye;       /* receiver thread: the peer said BYE */
} peer_t;

typedef struct {
  meld_transport_t *t;
  char host[64];
  peer_t *peers;             /* [nranks] */
  pthread_t rx;
  int rx_started;
  int wake[2];               /* pipe: close() wakes the receiver */
  atomic_int stop;
  atomic_int open;           /* connections still open for receiving (no BYE, no failure) */
  uint64_t completed;        /* proxy thread: writes handed to the kernel */
} tcp_t;

#define tcp_fail(c, ...) meld_transport_fail((c)->t, __VA_ARGS__)
#define tcp_sticky(c) meld_transport_sticky((c)->t)
#define tcp_failed(c) meld_transport_failed((c)->t)

/* ---- receiving ---------------------------------------------------------------------------- */

/* Reads and applies one frame from peer p. 0 = fine; -1 = failed (recorded). */
static int rx_frame(tcp_t *c, int p) {
  meld_transport_t *t = c->t;
  peer_t *pe = &c->peers[p];
  frame_t f;
  int64_t deadline = meld_now_ms() + t->timeout_ms;
  meld_io_t io = meld_sock_recv_all(pe->fd, &f, sizeof f, deadline);
  if (io == MELD_IO_EOF) {
    tcp_fail(c, MELD_ERR_SYSTEM,
             "meld tcp transport: rank %d: rank %d closed its connection without saying goodbye "
             "(it died or aborted)", t->rank, p);
    return -1;
  }
  if (io != MELD_IO_OK) {
    tcp_fail(c, io == MELD_IO_TIMEOUT ? MELD_ERR_TIMEOUT : MELD_ERR_SYSTEM,
             "meld tcp transport: rank %d: receiving a frame header from rank %d: %s", t->rank, p,
             meld_sock_what(io));
    return -1;
  }
  if (f.magic != TCP_MAGIC || (f.type != FR_DATA && f.type != FR_BYE)) {
    tcp_fail(c, MELD_ERR_INTERNAL,
             "meld tcp transport: rank %d: rank %d sent a bad frame (magic 0x%x, type %u)",
             t->rank, p, f.magic, f.type);
    return -1;
  }
  if (f.type == FR_BYE) {
    pe->bye = 1;
    atomic_fetch_sub(&c->open, 1);
    return 0;
  }
  /* The sender checked these against our sizes; a mismatch here is a bug or corruption. */
  char *dst = meld_transport_local(t, f.region, f.offset, f.bytes);
  uint64_t *flag = NULL;
  if (f.flag_region != MELD_TRANSPORT_NO_FLAG) {
    flag = meld_transport_local(t, f.flag_region, f.flag_offset, 8);
    if (flag && (uintptr_t)flag % 8) flag = NULL;
  }
  if (!dst || (f.flag_region != MELD_TRANSPORT_NO_FLAG && !flag)) {
    tcp_fail(c, MELD_ERR_INTERNAL,
             "meld tcp transport: rank %d: rank %d wrote outside our regions (region %u offset "
             "%llu bytes %llu, flag region %u offset %llu)", t->rank, p, f.region,
             (unsigned long long)f.offset, (unsigned long long)f.bytes, f.flag_region,
             (unsigned long long)f.flag_offset);
    return -1;
  }
  io = meld_sock_recv_all(pe->fd, dst, f.bytes, deadline);
  if (io != MELD_IO_OK) {
    tcp_fail(c, io == MELD_IO_TIMEOUT ? MELD_ERR_TIMEOUT : MELD_ERR_SYSTEM,
             "meld tcp transport: rank %d: receiving %llu bytes from rank %d: %s%s", t->rank,
             (unsigned long long)f.bytes, p, meld_sock_what(io),
             io == MELD_IO_EOF ? " (it died or aborted mid-transfer)" : "");
    return -1;
  }
  /* All payload bytes are in memory (recv returned): now, and only now, the flag. */
  if (flag) atomic_store_explicit((_Atomic uint64_t *)flag, f.flag_value, memory_order_release);
  return 0;
}

static void *rx_main(void *arg) {
  tcp_t *c = arg;
  const int n = c->t->nranks;
  struct pollfd *pf = calloc((size_t)n + 1, sizeof *pf);
  int *who = calloc((size_t)n + 1, sizeof *who);
  if (!pf || !who) {
    tcp_fail(c, MELD_ERR_OUT_OF_MEMORY, "meld tcp transport: receiver: out of host memory");
    goto out;
  }
  while (!atomic_load(&c->stop)) {
    int k = 0;
    pf[k++] = (struct pollfd){c->wake[0], POLLIN, 0};
    for (int p = 0; p < n; p++)
      if (c->peers[p].fd >= 0 && !c->peers[p].bye) {
        who[k] = p;
        pf[k++] = (struct pollfd){c->peers[p].fd, POLLIN, 0};
      }
    int r = poll(pf, (nfds_t)k, 1000);
    if (r < 0 && errno != EINTR) {
      tcp_fail(c, MELD_ERR_SYSTEM, "meld tcp transport: receiver poll: %s", strerror(errno));
      break;
    }
    if (r <= 0) continue;
    if (pf[0].revents) break; /* close() */
    for (int i = 1; i < k; i++)
      if (pf[i].revents && rx_frame(c, who[i]) != 0) goto out;
  }
out:
  free(pf);
  free(who);
  return NULL;
}

/* ---- sending ------------------------------------------------------------------------------- */

/* Sends header + payload to peer p in one stream of sendmsg calls. */
static meld_result_t tx_frame(tcp_t *c, int p, const frame_t *f, const void *payload,
                              uint64_t bytes, int64_t deadline) {
  meld_transport_t *t = c->t;
  struct iovec iov[2] = {{(void *)f, sizeof *f}, {(void *)payload, bytes}};
  struct msghdr m = {.msg_iov = iov, .msg_iovlen = bytes ? 2 : 1};
  const int fd = c->peers[p].fd;
  for (;;) {
    ssize_t k = sendmsg(fd, &m, MSG_NOSIGNAL);
    if (k > 0) {
      while (k > 0 && m.msg_iovlen > 0) { /* partial write: advance the iovecs */
        size_t used = (size_t)k < m.msg_iov[0].iov_len ? (size_t)k : m.msg_iov[0].iov_len;
        m.msg_iov[0].iov_base = (char *)m.msg_iov[0].iov_base + used;
        m.msg_iov[0].iov_len -= used;
        k -= (ssize_t)used;
        if (m.msg_iov[0].iov_len == 0) m.msg_iov++, m.msg_iovlen--;
      }
      if (m.msg_iovlen == 0) return MELD_OK;
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      int e = errno;
      return tcp_fail(c, MELD_ERR_SYSTEM,
                      "meld tcp transport: rank %d: sending to rank %d failed: %s (rank %d died "
                      "or closed its transport)", t->rank, p, strerror(e), p);
    }
    /* Blocked: wait in slices, so a failure found by the receiver or an abort ends it. */
    if (tcp_failed(c)) return tcp_sticky(c);
    if (__atomic_load_n(&t->aborted, __ATOMIC_ACQUIRE))
      return meld_error(MELD_ERR_ABORTED, "meld tcp transport: rank %d: aborted while sending "
                        "to rank %d", t->rank, p);
    if (meld_now_ms() >= deadline)
      return tcp_fail(c, MELD_ERR_TIMEOUT,
                      "meld tcp transport: rank %d: sending to rank %d timed out after %lld ms "
                      "(rank %d is not receiving)", t->rank, p, (long long)t->timeout_ms, p);
    int64_t slice = meld_now_ms() + SLICE_MS;
    meld_sock_wait(fd, POLLOUT, slice < deadline ? slice : deadline);
  }
}

static meld_result_t tcp_write(meld_transport_t *t, const meld_write_t *w) {
  tcp_t *c = t->impl;
  if (tcp_failed(c)) return tcp_sticky(c);
  if (c->peers[w->dst_rank].fd < 0)
    return meld_error(MELD_ERR_INTERNAL, "meld tcp transport: no connection to rank %d",
                      w->dst_rank);
  frame_t f = {TCP_MAGIC, FR_DATA, w->dst_region, w->flag_region, w->dst_offset,
               w->bytes, w->flag_offset, w->flag_value};
  MELD_CHECK(tx_frame(c, w->dst_rank, &f, w->src, w->bytes, meld_now_ms() + t->timeout_ms));
  c->completed++; /* sendmsg copied the source into the kernel: it may be reused */
  return MELD_OK;
}

static meld_result_t tcp_poll(meld_transport_t *t, uint64_t *completed) {
  tcp_t *c = t->impl;
  *completed = c->completed;
  return tcp_failed(c) ? tcp_sticky(c) : MELD_OK;
}

/* ---- connect and close ---------------------------------------------------------------------- */

static void close_peers(tcp_t *c) {
  for (int p = 0; p < c->t->nranks; p++) {
    meld_sock_close(c->peers[p].fd);
    c->peers[p].fd = -1;
  }
}

/* Accepts connections until every remote rank above us has said HELLO, or the deadline. */
static meld_result_t accept_peers(tcp_t *c, int lfd, int expected, int64_t deadline) {
  meld_transport_t *t = c->t;
  while (expected > 0) {
    meld_io_t io = meld_sock_wait(lfd, POLLIN, deadline);
    if (io != MELD_IO_OK) {
      char list[256] = "";
      size_t len = 0;
      for (int p = t->rank + 1; p < t->nranks && len + 16 < sizeof list; p++)
        if (meld_transport_is_remote(t, p) && c->peers[p].fd < 0)
          len += (size_t)snprintf(list + len, sizeof list - len, "%s%d", len ? ", " : "", p);
      return meld_error(io == MELD_IO_TIMEOUT ? MELD_ERR_TIMEOUT : MELD_ERR_SYSTEM,
                        "meld tcp transport: rank %d: %s after %lld ms waiting for connections "
                        "from ranks %s", t->rank, meld_sock_what(io), (long long)t->timeout_ms,
                        list);
    }
    int fd = meld_sock_accept(lfd);
    if (fd < 0) continue; /* EAGAIN, or a connection that went away */
    frame_t h = {0};
    int64_t hd = meld_now_ms() + 1000;
    io = meld_sock_recv_all(fd, &h, sizeof h, hd < deadline ? hd : deadline);
    int p = (int)h.region;
    if (io != MELD_IO_OK || h.magic != TCP_MAGIC || h.type != FR_HELLO ||
        h.flag_region != (uint32_t)t->nranks || p <= t->rank || p >= t->nranks ||
        !meld_transport_is_remote(t, p) || c->peers[p].fd >= 0) {
      char name[80];
      meld_sock_peer_name(fd, name, sizeof name);
      MELD_WARN(MELD_SUB_PROXY, "tcp transport: rank %d refused a connection from %s (not an "
                "expected rank of this job)", t->rank, name);
      meld_sock_close(fd);
      continue;
    }
    c->peers[p].fd = fd;
    expected--;
  }
  return MELD_OK;
}

static meld_result_t tcp_connect(meld_transport_t *t, meld_bootstrap_t *b) {
  tcp_t *c = t->impl;
  const int n = t->nranks;
  int lfd = -1;
  addr_t *addrs = calloc((size_t)n, sizeof *addrs);
  if (!addrs) return meld_error(MELD_ERR_OUT_OF_MEMORY, "meld tcp transport: out of memory");
  meld_result_t rc = meld_sock_listen(0, &lfd, &addrs[t->rank].port);
  if (rc != MELD_OK) {
    meld_error_prefix("meld tcp transport: rank %d", t->rank);
    free(addrs);
    return rc;
  }
  snprintf(addrs[t->rank].host, sizeof addrs[t->rank].host, "%s", c->host);
  MELD_CHECK_GOTO(meld_bootstrap_allgather(b, addrs, sizeof *addrs), rc, out);
  const int64_t deadline = meld_now_ms() + t->timeout_ms;
  int expected = 0;
  for (int p = 0; p < n; p++) {
    if (!meld_transport_is_remote(t, p)) continue;
    if (p > t->rank) {
      expected++;
      continue;
    }
    for (;;) { /* lower ranks listen already (before the all-gather): retry only transients */
      const char *gai = NULL;
      int fd = -1, e = meld_sock_connect(addrs[p].host, addrs[p].port, deadline, &fd, &gai);
      if (e == 0) {
        c->peers[p].fd = fd;
        break;
      }
      if (e == -1 || e == ETIMEDOUT || meld_now_ms() >= deadline) {
        rc = meld_error(e == ETIMEDOUT ? MELD_ERR_TIMEOUT : MELD_ERR_SYSTEM,
                        "meld tcp transport: rank %d: cannot connect to rank %d at %s:%u: %s",
                        t->rank, p, addrs[p].host, (unsigned)addrs[p].port,
                        e == -1 ? gai : strerror(e));
        goto out;
      }
      meld_sleep_ms(10);
    }
    frame_t h = {TCP_MAGIC, FR_HELLO, (uint32_t)t->rank, (uint32_t)n, 0, 0, 0, 0};
    meld_io_t io = meld_sock_send_all(c->peers[p].fd, &h, sizeof h, deadline);
    if (io != MELD_IO_OK) {
      rc = meld_error(MELD_ERR_SYSTEM, "meld tcp transport: rank %d: greeting rank %d: %s",
                      t->rank, p, meld_sock_what(io));
      goto out;
    }
  }
  MELD_CHECK_GOTO(accept_peers(c, lfd, expected, deadline), rc, out);
  int open = 0;
  for (int p = 0; p < n; p++) open += c->peers[p].fd >= 0;
  atomic_store(&c->open, open);
  if (pthread_create(&c->rx, NULL, rx_main, c) != 0) {
    rc = meld_error(MELD_ERR_SYSTEM, "meld tcp transport: rank %d: cannot start the receiver "
                    "thread", t->rank);
    goto out;
  }
  c->rx_started = 1;
out:
  if (rc != MELD_OK) close_peers(c);
  close(lfd);
  free(addrs);
  return rc;
}

static void tcp_close(meld_transport_t *t, int64_t timeout_ms) {
  tcp_t *c = t->impl;
  const int64_t deadline = meld_now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
  /* BYE to everyone: after it we send nothing, so a peer that sees it has all our data. */
  for (int p = 0; p < t->nranks && !tcp_failed(c); p++) {
    if (c->peers[p].fd < 0) continue;
    frame_t f = {TCP_MAGIC, FR_BYE, 0, 0, 0, 0, 0, 0};
    if (tx_frame(c, p, &f, NULL, 0, deadline) != MELD_OK) break;
  }
  /* Wait until every peer said BYE (so nothing is still addressed to our regions). */
  if (c->rx_started) {
    while (atomic_load(&c->open) > 0 && !tcp_failed(c) && meld_now_ms() < deadline)
      meld_sleep_ms(1);
    if (atomic_load(&c->open) > 0 && !tcp_failed(c))
      MELD_WARN(MELD_SUB_PROXY, "tcp transport: rank %d closed with %d peers still connected "
                "(they did not close within %lld ms)", t->rank, atomic_load(&c->open),
                (long long)timeout_ms);
    atomic_store(&c->stop, 1);
    char one = 1;
    while (write(c->wake[1], &one, 1) < 0 && errno == EINTR) {
    }
    pthread_join(c->rx, NULL);
  }
  close_peers(c);
  close(c->wake[0]);
  close(c->wake[1]);
  free(c->peers);
  free(c);
  t->impl = NULL;
}

static const meld_transport_ops_t g_tcp_ops = {.name = "tcp", .connect = tcp_connect,
                                               .write_with_flag = tcp_write, .poll = tcp_poll,
                                               .close = tcp_close};

meld_result_t meld_transport_tcp_create(int rank, int nranks, int node, const char *host,
                                        int64_t timeout_ms, meld_transport_t **out) {
  meld_transport_t *t = NULL;
  MELD_CHECK(meld_transport_new(&g_tcp_ops, NULL, rank, nranks, node, timeout_ms, &t));
  tcp_t *c = calloc(1, sizeof *c);
  peer_t *peers = calloc((size_t)nranks, sizeof *peers);
  if (!c || !peers || pipe2(c->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    free(c), free(peers);
    meld_transport_close(t, 0);
    return meld_error(MELD_ERR_SYSTEM, "meld tcp transport: out of memory or file descriptors");
  }
  for (int p = 0; p < nranks; p++) peers[p].fd = -1;
  c->t = t;
  c->peers = peers;
  const char *env = getenv("MELD_SOCKET_ADDR");
  if (host && *host)
    snprintf(c->host, sizeof c->host, "%s", host);
  else if (env && *env)
    snprintf(c->host, sizeof c->host, "%s", env);
  else
    meld_sock_host_address(c->host, sizeof c->host);
  t->impl = c;
  *out = t;
  return MELD_OK;
}
