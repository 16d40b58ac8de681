/* proxy.c — the proxy thread, its command ring and the host producer (see proxy.h and
 * common/proxy_ring.h for the ring protocol and its ordering argument).
 *
 * The proxy thread: acquire head -> copy the command out of its slot -> check it (a device
 * producer cannot be told "invalid argument" at enqueue: a bad command fails the proxy with
 * the sentence) -> meld_transport_write -> release tail. It polls the transport for
 * completions (publishing `done`) and errors every 64 commands and whenever idle. Idle, it
 * backs off from yielding to 20-200 us sleeps (a CPU test on 2 cores runs dozens of these
 * threads). Failure is sticky: the status word in the ring (for device producers), a code and
 * a sentence here (meld_proxy_check); the thread then stops consuming. */
#include "proxy.h"

#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "log.h"
#include "sock.h"

#define MSG_MAX 640
#define POLL_EVERY 64 /* commands between transport polls while busy */

struct meld_proxy {
  meld_transport_t *t;
  meld_cmdring_hdr_t *ring;
  int own_ring;
  uint32_t nslots;
  int64_t timeout_ms;
  const uint32_t *abort_word;
  pthread_t thread;
  int stop, aborted; /* __atomic */
  uint64_t head, cached_tail; /* host producer */
  uint64_t posted;            /* proxy thread: writes started */
  uint64_t completed;         /* proxy thread: writes complete (the transport's last count) */
  pthread_mutex_t mu;         /* guards code and msg */
  meld_result_t code;
  char msg[MSG_MAX];
};

static void backoff(unsigned *idle) {
  unsigned i = (*idle)++;
  if (i < 16) {
    sched_yield();
    return;
  }
  struct timespec ts = {0, i < 1000 ? 20000 : 200000};
  nanosleep(&ts, NULL);
}

/* Records the first failure: code, sentence, and the ring's status word (release). */
static void proxy_fail(meld_proxy_t *p, meld_result_t code, const char *msg) {
  pthread_mutex_lock(&p->mu);
  if (__atomic_load_n(&p->ring->status, __ATOMIC_RELAXED) == 0) {
    p->code = code;
    snprintf(p->msg, sizeof p->msg, "%s", msg);
    __atomic_store_n(&p->ring->status, (uint32_t)code, __ATOMIC_RELEASE);
    if (code != MELD_ERR_ABORTED) MELD_WARN(MELD_SUB_PROXY, "%s", msg);
  }
  pthread_mutex_unlock(&p->mu);
}

static int is_aborted(const meld_proxy_t *p);
static void fail_aborted(meld_proxy_t *p) {
  char msg[128];
  snprintf(msg, sizeof msg, "meld proxy: rank %d: aborted", p->t->rank);
  proxy_fail(p, MELD_ERR_ABORTED, msg);
}

meld_result_t meld_proxy_check(meld_proxy_t *p) {
  if (!p) return meld_error(MELD_ERR_INVALID_ARG, "meld proxy: p is NULL");
  if (__atomic_load_n(&p->ring->status, __ATOMIC_ACQUIRE) == 0) {
    if (!is_aborted(p)) return MELD_OK;
    fail_aborted(p); /* the abort word was raised: make it the sticky error at once */
  }
  char buf[MSG_MAX];
  pthread_mutex_lock(&p->mu);
  meld_result_t code = p->code;
  snprintf(buf, sizeof buf, "%s", p->msg);
  pthread_mutex_unlock(&p->mu);
  return meld_error(code, "%s", buf);
}

static int is_aborted(const meld_proxy_t *p) {
  return __atomic_load_n(&p->aborted, __ATOMIC_ACQUIRE) ||
         (p->abort_word && __atomic_load_n(p->abort_word, __ATOMIC_ACQUIRE) != 0);
}

/* Turns a command into a transport write and checks it; the sentence names the command. */
static meld_result_t cmd_to_write(const meld_proxy_t *p, const meld_cmd_t *c, uint64_t k,
                                  meld_write_t *w) {
  if (c->opcode != MELD_CMD_WRITE)
    return meld_error(MELD_ERR_INVALID_ARG, "meld proxy: command %llu: unknown opcode %u",
                      (unsigned long long)k, (unsigned)c->opcode);
  const void *src = NULL;
  if (c->bytes > 0 && !(src = meld_transport_local(p->t, c->src_region, c->src_offset, c->bytes)))
    return meld_error(MELD_ERR_INVALID_ARG,
                      "meld proxy: command %llu: source %llu bytes at offset %llu are not inside "
                      "local region %u", (unsigned long long)k, (unsigned long long)c->bytes,
                      (unsigned long long)c->src_offset, (unsigned)c->src_region);
  *w = (meld_write_t){c->dst_rank, c->dst_region, c->dst_offset, src, c->bytes,
                      c->flag_region == MELD_REGION_NONE ? MELD_TRANSPORT_NO_FLAG : c->flag_region,
                      (uint64_t)c->flag_index * 8u, c->flag_value};
  meld_result_t rc = meld_transport_check_write(p->t, w);
  if (rc != MELD_OK) meld_error_prefix("meld proxy: command %llu", (unsigned long long)k);
  return rc;
}

static void *proxy_main(void *arg) {
  meld_proxy_t *p = arg;
  meld_cmdring_hdr_t *ring = p->ring;
  const meld_cmd_t *cmds = meld_cmdring_cmds(ring);
  uint64_t tail = 0, done = 0;
  unsigned idle = 0;
  char msg[MSG_MAX];
  while (!__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE)) {
    if (is_aborted(p)) {
      fail_aborted(p);
      break;
    }
    const uint64_t head = __atomic_load_n(&ring->head, __ATOMIC_ACQUIRE);
    meld_result_t rc = MELD_OK;
    /* A NOP is done when consumed, which is right only if no write before it is still in
     * flight (`done` is a prefix): one behind an incomplete write waits until the writes have
     * completed (NOPs are rare; the producers here write none). */
    const int hold = head != tail && p->posted > p->completed &&
                     cmds[meld_cmdring_slot(tail, p->nslots)].opcode == MELD_CMD_NOP;
    if (head != tail && !hold) {
      if (!meld_cmdring_consistent(head, tail, p->nslots)) {
        snprintf(msg, sizeof msg, "meld proxy: rank %d: ring head %llu is more than %u slots "
                 "ahead of tail %llu (corrupted, or a producer ignored its credits)",
                 p->t->rank, (unsigned long long)head, p->nslots, (unsigned long long)tail);
        proxy_fail(p, MELD_ERR_INTERNAL, msg);
        break;
      }
      const meld_cmd_t c = cmds[meld_cmdring_slot(tail, p->nslots)];
      if (c.seq != tail) {
        snprintf(msg, sizeof msg, "meld proxy: rank %d: slot %u holds command %llu, expected "
                 "%llu (the producer published head before writing the command)", p->t->rank,
                 meld_cmdring_slot(tail, p->nslots), (unsigned long long)c.seq,
                 (unsigned long long)tail);
        proxy_fail(p, MELD_ERR_INTERNAL, msg);
        break;
      }
      meld_write_t w;
      if (c.opcode != MELD_CMD_NOP) {
        rc = cmd_to_write(p, &c, tail, &w);
        if (rc == MELD_OK) rc = meld_transport_write(p->t, &w);
        if (rc != MELD_OK) {
          proxy_fail(p, rc, meld_last_error());
          break;
        }
        p->posted++;
      }
      /* The command is copied out: its slot may be overwritten. */
      __atomic_store_n(&ring->tail, ++tail, __ATOMIC_RELEASE);
      idle = 0;
      if (tail % POLL_EVERY != 0) continue;
    }
    uint64_t completed = 0;
    rc = meld_transport_poll(p->t, &completed);
    if (rc != MELD_OK) {
      proxy_fail(p, rc, meld_last_error());
      break;
    }
    p->completed = completed;
    /* Writes complete as a prefix (tcp: at once; ibv: the oldest in flight bounds it), so the
     * commands before the oldest incomplete write are done; NOPs count as done when consumed
     * (none is consumed behind an incomplete write: `hold`). */
    uint64_t d = tail - (p->posted - completed);
    if (d != done) __atomic_store_n(&ring->done, done = d, __ATOMIC_RELEASE);
    if (head == tail) backoff(&idle);
  }
  return NULL;
}

meld_result_t meld_proxy_create(meld_transport_t *t, const meld_proxy_config_t *cfg,
                                meld_proxy_t **out) {
  meld_proxy_config_t def = MELD_PROXY_CONFIG_INIT;
  if (!cfg) cfg = &def;
  if (!t || !out) return meld_error(MELD_ERR_INVALID_ARG, "meld proxy create: t or out is NULL");
  *out = NULL;
  if (!t->connected || !t->impl)
    return meld_error(MELD_ERR_INVALID_ARG, "meld proxy create: the transport is not connected");
  const uint32_t n = cfg->nslots ? cfg->nslots : 256u;
  if (!meld_cmdring_valid_nslots(n))
    return meld_error(MELD_ERR_INVALID_ARG,
                      "meld proxy create: nslots %u is not a power of two in [%u, %u]", n,
                      MELD_CMDRING_MIN_SLOTS, MELD_CMDRING_MAX_SLOTS);
  if (cfg->timeout_ms < 0)
    return meld_error(MELD_ERR_INVALID_ARG, "meld proxy create: timeout_ms %lld < 0",
                      (long long)cfg->timeout_ms);
  if ((uintptr_t)cfg->ring % 64)
    return meld_error(MELD_ERR_INVALID_ARG, "meld proxy create: ring %p is not 64-byte aligned",
                      cfg->ring);
  meld_proxy_t *p = calloc(1, sizeof *p);
  if (!p) return meld_error(MELD_ERR_OUT_OF_MEMORY, "meld proxy create: out of host memory");
  const size_t bytes = meld_cmdring_bytes(n);
  p->ring = cfg->ring ? cfg->ring : aligned_alloc(64, bytes);
  if (!p->ring) {
    free(p);
    return meld_error(MELD_ERR_OUT_OF_MEMORY, "meld proxy create: no memory for %zu ring bytes",
                      bytes);
  }
  p->own_ring = cfg->ring == NULL;
  memset(p->ring, 0, bytes);
  p->ring->nslots = n;
  p->nslots = n;
  p->t = t;
  p->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : t->timeout_ms;
  p->abort_word = cfg->abort_word;
  pthread_mutex_init(&p->mu, NULL);
  if (pthread_create(&p->thread, NULL, proxy_main, p) != 0) {
    pthread_mutex_destroy(&p->mu);
    if (p->own_ring) free(p->ring);
    free(p);
    return meld_error(MELD_ERR_SYSTEM, "meld proxy create: cannot start the proxy thread");
  }
  *out = p;
  return MELD_OK;
}

meld_cmdring_hdr_t *meld_proxy_ring(meld_proxy_t *p) { return p ? p->ring : NULL; }

uint64_t meld_proxy_done(meld_proxy_t *p) {
  return p ? __atomic_load_n(&p->ring->done, __ATOMIC_ACQUIRE) : 0;
}

meld_result_t meld_proxy_enqueue(meld_proxy_t *p, const meld_cmd_t *cmd, uint64_t *index) {
  if (!p || !cmd) return meld_error(MELD_ERR_INVALID_ARG, "meld proxy enqueue: p or cmd is NULL");
  MELD_CHECK(meld_proxy_check(p));
  meld_write_t w;
  if (cmd->opcode != MELD_CMD_NOP) MELD_CHECK(cmd_to_write(p, cmd, p->head, &w));
  /* A credit: the slot's previous command (head - nslots) was consumed. Acquiring tail
   * orders our overwrite after the proxy's copy of that command. */
  const int64_t deadline = meld_now_ms() + p->timeout_ms;
  unsigned idle = 0;
  while (meld_cmdring_full(p->head, p->cached_tail, p->nslots)) {
    p->cached_tail = __atomic_load_n(&p->ring->tail, __ATOMIC_ACQUIRE);
    if (!meld_cmdring_full(p->head, p->cached_tail, p->nslots)) break;
    MELD_CHECK(meld_proxy_check(p)); /* also an abort */
    if (meld_now_ms() >= deadline)
      return meld_error(MELD_ERR_TIMEOUT,
                        "meld proxy enqueue: rank %d: no free command slot for %lld ms (%u "
                        "slots, all waiting): the proxy is stuck or the network too slow",
                        p->t->rank, (long long)p->timeout_ms, p->nslots);
    backoff(&idle);
  }
  meld_cmd_t c = *cmd;
  c.seq = p->head;
  c.reserved = 0;
  meld_cmdring_cmds(p->ring)[meld_cmdring_slot(p->head, p->nslots)] = c;
  /* Publishes the command (and the source bytes written before this call). */
  __atomic_store_n(&p->ring->head, ++p->head, __ATOMIC_RELEASE);
  if (index) *index = c.seq;
  return MELD_OK;
}

meld_result_t meld_proxy_write(meld_proxy_t *p, int dst_rank, uint32_t src_region,
                               uint64_t src_offset, uint32_t dst_region, uint64_t dst_offset,
                               uint64_t bytes, uint32_t flag_region, uint32_t flag_index,
                               uint64_t flag_value) {
  if (src_region > 0xffffu || dst_region > 0xffffu || flag_region > 0xffffu)
    return meld_error(MELD_ERR_INVALID_ARG, "meld proxy write: a region id is above 65535");
  meld_cmd_t c = {MELD_CMD_WRITE, (uint16_t)src_region, (uint16_t)dst_region,
                  (uint16_t)flag_region, dst_rank, flag_index, src_offset, dst_offset, bytes,
                  flag_value, 0, 0};
  return meld_proxy_enqueue(p, &c, NULL);
}

meld_result_t meld_proxy_flush(meld_proxy_t *p, int64_t timeout_ms) {
  if (!p) return meld_error(MELD_ERR_INVALID_ARG, "meld proxy flush: p is NULL");
  const uint64_t head = __atomic_load_n(&p->ring->head, __ATOMIC_ACQUIRE);
  const int64_t deadline = meld_now_ms() + timeout_ms;
  unsigned idle = 0;
  while (__atomic_load_n(&p->ring->done, __ATOMIC_ACQUIRE) < head) {
    MELD_CHECK(meld_proxy_check(p));
    if (meld_now_ms() >= deadline)
      return meld_error(MELD_ERR_TIMEOUT,
                        "meld proxy flush: rank %d: %llu of %llu commands done after %lld ms",
                        p->t->rank, (unsigned long long)meld_proxy_done(p),
                        (unsigned long long)head, (long long)timeout_ms);
    backoff(&idle);
  }
  return meld_proxy_check(p);
}

meld_result_t meld_proxy_wait_flag(meld_proxy_t *p, const uint64_t *flag, uint64_t target,
                                   int64_t timeout_ms, const char *what) {
  if (!p || !flag || (uintptr_t)flag % 8)
    return meld_error(MELD_ERR_INVALID_ARG, "meld proxy wait: p is NULL or flag %p is not an "
                      "8-byte aligned pointer", (const void *)flag);
  const int64_t deadline = meld_now_ms() + timeout_ms;
  unsigned idle = 0;
  for (;;) {
    uint64_t v = __atomic_load_n(flag, __ATOMIC_ACQUIRE); /* pairs with the receiver's release */
    if (meld_stamp_reached(v, target)) return MELD_OK;
    MELD_CHECK(meld_proxy_check(p));
    if (meld_now_ms() >= deadline)
      return meld_error(MELD_ERR_TIMEOUT,
                        "meld proxy wait: rank %d: %s: flag is %llu (epoch %llu seq %u), waited "
                        "%lld ms for %llu (epoch %llu seq %u)", p->t->rank, what ? what : "flag",
                        (unsigned long long)v, (unsigned long long)meld_stamp_epoch(v),
                        meld_stamp_seq(v), (long long)timeout_ms, (unsigned long long)target,
                        (unsigned long long)meld_stamp_epoch(target), meld_stamp_seq(target));
    backoff(&idle);
  }
}

void meld_proxy_abort(meld_proxy_t *p) {
  if (!p) return;
  __atomic_store_n(&p->aborted, 1, __ATOMIC_RELEASE);
  fail_aborted(p); /* producers and waiters see it at once */
  meld_transport_abort(p->t);
}

meld_result_t meld_proxy_destroy(meld_proxy_t *p) {
  if (!p) return MELD_OK;
  meld_result_t rc = meld_proxy_flush(p, p->timeout_ms);
  char msg[MSG_MAX];
  snprintf(msg, sizeof msg, "%s", meld_last_error());
  if (rc == MELD_ERR_TIMEOUT) { /* a send may be blocked on a peer: make it give up */
    meld_proxy_abort(p);
  }
  __atomic_store_n(&p->stop, 1, __ATOMIC_RELEASE);
  pthread_join(p->thread, NULL); /* bounded: each transport step has a deadline */
  pthread_mutex_destroy(&p->mu);
  if (p->own_ring) free(p->ring);
  free(p);
  return rc == MELD_OK ? MELD_OK : meld_error(rc, "%s", msg);
}
