/* sock.h — non-blocking TCP over IPv4 where every wait is bounded by an absolute deadline.
 *
 * Deadlines are meld_now_ms() values (CLOCK_MONOTONIC, milliseconds). The I/O calls return a
 * meld_io_t, not a meld_result_t, so that the caller, who knows which rank and which step it
 * was, writes the sentence. Used by the bootstrap. */
#ifndef MELD_HOST_SOCK_H
#define MELD_HOST_SOCK_H

#include <stddef.h>
#include <stdint.h>

#include "meld.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  MELD_IO_OK = 0,
  MELD_IO_TIMEOUT, /* the deadline passed */
  MELD_IO_EOF,     /* the peer closed or reset the connection */
  MELD_IO_ERR      /* another error; errno tells which */
} meld_io_t;

int64_t meld_now_ms(void);
/* Milliseconds left until `deadline`, clamped to [0, INT_MAX]: a poll() timeout. */
int meld_poll_ms(int64_t deadline);
/* Sleeps ms (<= 0: returns at once); a signal may end it early. */
void meld_sleep_ms(int64_t ms);

/* Waits until fd is ready for `events` (POLLIN/POLLOUT) or the deadline passes. POLLERR and
 * POLLHUP count as ready: the next send/recv reports them. */
meld_io_t meld_sock_wait(int fd, short events, int64_t deadline);
/* Sends / receives exactly n bytes on a non-blocking socket (partial transfers and EINTR are
 * continued; a dead peer never raises SIGPIPE). */
meld_io_t meld_sock_send_all(int fd, const void *buf, size_t n, int64_t deadline);
meld_io_t meld_sock_recv_all(int fd, void *buf, size_t n, int64_t deadline);
/* "timed out", "connection closed", or strerror(errno) for MELD_IO_ERR. */
const char *meld_sock_what(meld_io_t io);

/* Opens a non-blocking listening socket on `port` (0: any free one) on all interfaces;
 * *bound_port gets the port. Fails with MELD_ERR_SYSTEM ("port 29501 is already in use (set
 * MELD_PORT or config.port to another)"). */
meld_result_t meld_sock_listen(int port, int *fd, uint16_t *bound_port);
/* One non-blocking connect attempt to host:port (IPv4 dotted or a name), waiting at most
 * until the deadline. Returns 0 and *fd (TCP_NODELAY on); or the attempt's errno value
 * (ETIMEDOUT at the deadline, EAGAIN when name resolution should be retried); or -1 when the
 * name does not resolve, with *gai_error saying why. Name resolution itself (getaddrinfo) is
 * the one step the deadline cannot bound. */
int meld_sock_connect(const char *host, uint16_t port, int64_t deadline, int *fd,
                      const char **gai_error);
/* A non-blocking accept (TCP_NODELAY on): the socket, or -1 with errno (EAGAIN: none). */
int meld_sock_accept(int listen_fd);
/* Closes fd (-1: no-op) so that the last message sent still arrives: closing with unread
 * input makes TCP send a reset, which can destroy data still in flight, so drain first. */
void meld_sock_close(int fd);
/* "10.0.0.3:40122", for messages. */
void meld_sock_peer_name(int fd, char *out, size_t n);
/* This host's first non-loopback IPv4 address that is up, else "127.0.0.1". */
void meld_sock_host_address(char *out, size_t n);

#ifdef __cplusplus
}
#endif

#endif
