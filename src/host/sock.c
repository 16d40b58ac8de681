/* sock.c — non-blocking IPv4 TCP with deadlines: see sock.h. */
#include "sock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "error.h"

int64_t meld_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int meld_poll_ms(int64_t deadline) {
  int64_t r = deadline - meld_now_ms();
  return r <= 0 ? 0 : r > INT_MAX ? INT_MAX : (int)r;
}

void meld_sleep_ms(int64_t ms) {
  if (ms <= 0) return;
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
  nanosleep(&ts, NULL); /* EINTR: the caller's loop re-checks its deadline */
}

meld_io_t meld_sock_wait(int fd, short events, int64_t deadline) {
  for (;;) {
    struct pollfd p = {fd, events, 0};
    int n = poll(&p, 1, meld_poll_ms(deadline));
    if (n > 0) return MELD_IO_OK;
    if (n == 0 && meld_now_ms() >= deadline) return MELD_IO_TIMEOUT;
    if (n < 0 && errno != EINTR) return MELD_IO_ERR;
  }
}

meld_io_t meld_sock_send_all(int fd, const void *buf, size_t n, int64_t deadline) {
  const char *p = buf;
  while (n > 0) {
    ssize_t k = send(fd, p, n, MSG_NOSIGNAL); /* never SIGPIPE on a dead peer */
    if (k > 0) {
      p += k, n -= (size_t)k;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      meld_io_t r = meld_sock_wait(fd, POLLOUT, deadline);
      if (r != MELD_IO_OK) return r;
    } else if (errno != EINTR) {
      return (errno == EPIPE || errno == ECONNRESET) ? MELD_IO_EOF : MELD_IO_ERR;
    }
  }
  return MELD_IO_OK;
}

meld_io_t meld_sock_recv_all(int fd, void *buf, size_t n, int64_t deadline) {
  char *p = buf;
  while (n > 0) {
    ssize_t k = recv(fd, p, n, 0);
    if (k > 0) {
      p += k, n -= (size_t)k;
    } else if (k == 0) {
      return MELD_IO_EOF;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      meld_io_t r = meld_sock_wait(fd, POLLIN, deadline);
      if (r != MELD_IO_OK) return r;
    } else if (errno != EINTR) {
      return errno == ECONNRESET ? MELD_IO_EOF : MELD_IO_ERR;
    }
  }
  return MELD_IO_OK;
}

const char *meld_sock_what(meld_io_t io) {
  return io == MELD_IO_TIMEOUT ? "timed out"
         : io == MELD_IO_EOF   ? "connection closed"
                               : strerror(errno);
}

static void set_nodelay(int fd) {
  int one = 1; /* small request/answer messages: do not let Nagle hold them back */
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

meld_result_t meld_sock_listen(int port, int *out_fd, uint16_t *bound_port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return meld_error(MELD_ERR_SYSTEM, "meld bootstrap: socket(): %s", strerror(errno));
  /* SO_REUSEADDR lets a restarted job rebind a port whose old connections linger in
   * TIME_WAIT; unlike SO_REUSEPORT it never lets two live listeners share a port. */
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  sa.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof sa;
  if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    int e = errno;
    close(fd);
    if (e == EADDRINUSE)
      return meld_error(MELD_ERR_SYSTEM,
                        "meld bootstrap: port %d is already in use (set MELD_PORT or "
                        "config.port to another)", port);
    return meld_error(MELD_ERR_SYSTEM, "meld bootstrap: bind to port %d: %s", port, strerror(e));
  }
  if (listen(fd, SOMAXCONN) != 0 || getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
    int e = errno;
    close(fd);
    return meld_error(MELD_ERR_SYSTEM, "meld bootstrap: listen on port %d: %s", port, strerror(e));
  }
  *out_fd = fd;
  *bound_port = ntohs(sa.sin_port);
  return MELD_OK;
}

int meld_sock_connect(const char *host, uint16_t port, int64_t deadline, int *out_fd,
                      const char **gai_error) {
  struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai = NULL;
  char service[8];
  snprintf(service, sizeof service, "%u", (unsigned)port);
  int g = getaddrinfo(host, service, &hints, &ai);
  if (g == EAI_AGAIN) return EAGAIN;
  if (g != 0) {
    *gai_error = gai_strerror(g);
    return -1;
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int e = fd < 0 ? errno : connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 ? 0 : errno;
  freeaddrinfo(ai);
  if (e == EINPROGRESS) {
    socklen_t len = sizeof e;
    meld_io_t w = meld_sock_wait(fd, POLLOUT, deadline);
    if (w == MELD_IO_TIMEOUT)
      e = ETIMEDOUT;
    else if (w == MELD_IO_ERR || getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) != 0)
      e = errno;
  }
  if (e != 0) {
    if (fd >= 0) close(fd);
    return e;
  }
  set_nodelay(fd);
  *out_fd = fd;
  return 0;
}

int meld_sock_accept(int listen_fd) {
  int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd >= 0) set_nodelay(fd);
  return fd;
}

void meld_sock_close(int fd) {
  if (fd < 0) return;
  shutdown(fd, SHUT_WR);
  char tmp[4096];
  while (recv(fd, tmp, sizeof tmp, MSG_DONTWAIT) > 0) {
  }
  close(fd);
}

void meld_sock_peer_name(int fd, char *out, size_t n) {
  struct sockaddr_in sa = {0};
  socklen_t len = sizeof sa;
  char ip[INET_ADDRSTRLEN] = "?";
  if (getpeername(fd, (struct sockaddr *)&sa, &len) == 0 && sa.sin_family == AF_INET)
    inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof ip);
  snprintf(out, n, "%s:%u", ip, (unsigned)ntohs(sa.sin_port));
}

void meld_sock_host_address(char *out, size_t n) {
  snprintf(out, n, "127.0.0.1");
  struct ifaddrs *ifs = NULL;
  if (getifaddrs(&ifs) != 0) return;
  for (struct ifaddrs *i = ifs; i; i = i->ifa_next)
    if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) &&
        !(i->ifa_flags & IFF_LOOPBACK)) {
      inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, out, (socklen_t)n);
      break;
    }
  freeifaddrs(ifs);
}
