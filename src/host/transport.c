/* transport.c — the generic half of a transport: state, regions, argument checks, and the
 * collective connect (see transport.h). Implementations only see legal calls. */
#include "transport.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "log.h"

meld_result_t meld_transport_new(const meld_transport_ops_t *ops, void *impl, int rank,
                                 int nranks, int node, int64_t timeout_ms,
                                 meld_transport_t **out) {
  if (!out) return meld_error(MELD_ERR_INVALID_ARG, "meld transport: out is NULL");
  *out = NULL;
  if (!ops || !ops->write_with_flag || !ops->poll || !ops->close)
    return meld_error(MELD_ERR_INVALID_ARG, "meld transport: ops or one of its functions is NULL");
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return meld_error(MELD_ERR_INVALID_ARG,
                      "meld transport: rank %d is not in [0, nranks %d)", rank, nranks);
  if (node < 0) return meld_error(MELD_ERR_INVALID_ARG, "meld transport: node %d < 0", node);
  if (timeout_ms < 1)
    return meld_error(MELD_ERR_INVALID_ARG, "meld transport: timeout_ms %lld < 1",
                      (long long)timeout_ms);
  meld_transport_t *t = calloc(1, sizeof *t);
  if (!t) return meld_error(MELD_ERR_OUT_OF_MEMORY, "meld transport: out of host memory");
  t->ops = ops;
  t->impl = impl;
  t->rank = rank;
  t->nranks = nranks;
  t->node = node;
  t->timeout_ms = timeout_ms;
  pthread_mutex_init(&t->err_mu, NULL);
  *out = t;
  return MELD_OK;
}

meld_result_t meld_transport_fail(meld_transport_t *t, meld_result_t code, const char *fmt, ...) {
  char buf[sizeof t->err_msg];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&t->err_mu);
  if (!__atomic_load_n(&t->failed, __ATOMIC_RELAXED)) {
    t->err_code = code;
    snprintf(t->err_msg, sizeof t->err_msg, "%s", buf);
    __atomic_store_n(&t->failed, 1, __ATOMIC_RELEASE);
    MELD_WARN(MELD_SUB_PROXY, "%s", buf);
  }
  pthread_mutex_unlock(&t->err_mu);
  return meld_error(code, "%s", buf);
}

int meld_transport_failed(meld_transport_t *t) {
  return __atomic_load_n(&t->failed, __ATOMIC_ACQUIRE);
}

meld_result_t meld_transport_sticky(meld_transport_t *t) {
  char buf[sizeof t->err_msg];
  pthread_mutex_lock(&t->err_mu);
  const meld_result_t code = t->err_code;
  snprintf(buf, sizeof buf, "%s", t->err_msg);
  pthread_mutex_unlock(&t->err_mu);
  return meld_error(code, "%s", buf);
}

meld_result_t meld_transport_create(const char *kind, int rank, int nranks, int node,
                                   int local_index, const char *gpu_bus_id, int64_t timeout_ms,
                                   meld_transport_t **out) {
  if (kind && strcmp(kind, "ibv") == 0)
    return meld_transport_ibv_create(rank, nranks, node, local_index, gpu_bus_id, timeout_ms, out);
  if (!kind || strcmp(kind, "tcp") == 0)
    return meld_transport_tcp_create(rank, nranks, node, NULL, timeout_ms, out);
  if (out) *out = NULL;
  return meld_error(MELD_ERR_INVALID_ARG, "meld transport: unknown kind \"%s\" (tcp or ibv)", kind);
}

meld_result_t meld_transport_register(meld_transport_t *t, void *base, uint64_t bytes,
                                      uint32_t *region) {
  if (!t || !base || !region)
    return meld_error(MELD_ERR_INVALID_ARG, "meld transport register: t, base or region is NULL");
  if (t->connected)
    return meld_error(MELD_ERR_INVALID_ARG,
                      "meld transport register: already connected: register every region "
                      "before meld_transport_connect");
  if (bytes == 0)
    return meld_error(MELD_ERR_INVALID_ARG, "meld transport register: bytes is 0");
  if ((uintptr_t)base % 8)
    return meld_error(MELD_ERR_INVALID_ARG,
                      "meld transport register: base %p is not 8-byte aligned", base);
  if (t->nregions >= MELD_TRANSPORT_MAX_REGIONS)
    return meld_error(MELD_ERR_INVALID_ARG,
                      "meld transport register: too many regions (at most %d)",
                      MELD_TRANSPORT_MAX_REGIONS);
  t->regions[t->nregions] = (meld_region_t){base, bytes};
  *region = (uint32_t)t->nregions++;
  return MELD_OK;
}

meld_result_t meld_transport_set_peers(meld_transport_t *t, const int *nodes,
                                       const uint64_t *peer_bytes) {
  if (!t || !nodes || !peer_bytes)
    return meld_error(MELD_ERR_INVALID_ARG, "meld transport: t, nodes or peer_bytes is NULL");
  size_t n = (size_t)t->nranks, nb = n * MELD_TRANSPORT_MAX_REGIONS;
  int *nd = malloc(n * sizeof *nd);
  uint64_t *pb = malloc(nb * sizeof *pb);
  if (!nd || !pb) {
    free(nd), free(pb);
    return meld_error(MELD_ERR_OUT_OF_MEMORY, "meld transport: out of host memory");
  }
  memcpy(nd, nodes, n * sizeof *nd);
  memcpy(pb, peer_bytes, nb * sizeof *pb);
  free(t->nodes), free(t->peer_bytes);
  t->nodes = nd;
  t->peer_bytes = pb;
  t->connected = 1;
  return MELD_OK;
}

typedef struct {
  int32_t node, nregions;
  uint64_t bytes[MELD_TRANSPORT_MAX_REGIONS];
} peer_info_t;

meld_result_t meld_transport_connect(meld_transport_t *t, meld_bootstrap_t *b) {
  if (!t || !b) return meld_error(MELD_ERR_INVALID_ARG, "meld transport connect: t or b is NULL");
  if (t->connected)
    return meld_error(MELD_ERR_INVALID_ARG, "meld transport connect: already connected");
  if (meld_bootstrap_rank(b) != t->rank || meld_bootstrap_nranks(b) != t->nranks)
    return meld_error(MELD_ERR_INVALID_ARG,
                      "meld transport connect: the bootstrap is rank %d of %d, the transport "
                      "rank %d of %d", meld_bootstrap_rank(b), meld_bootstrap_nranks(b),
                      t->rank, t->nranks);
  const int n = t->nranks;
  peer_info_t *all = calloc((size_t)n, sizeof *all);
  int *nodes = malloc((size_t)n * sizeof *nodes);
  uint64_t *bytes = calloc((size_t)n * MELD_TRANSPORT_MAX_REGIONS, sizeof *bytes);
  int32_t *results = calloc((size_t)n, sizeof *results);
  meld_result_t rc = MELD_OK;
  if (!all || !nodes || !bytes || !results) {
    rc = meld_error(MELD_ERR_OUT_OF_MEMORY, "meld transport connect: out of host memory");
    goto out;
  }
  peer_info_t *me = &all[t->rank];
  me->node = t->node;
  me->nregions = t->nregions;
  for (int i = 0; i < t->nregions; i++) me->bytes[i] = t->regions[i].bytes;
  MELD_CHECK_GOTO(meld_bootstrap_allgather(b, all, sizeof *all), rc, out);
  for (int r = 0; r < n; r++) {
    if (all[r].nregions != all[0].nregions) {
      rc = meld_error(MELD_ERR_INVALID_ARG,
                      "meld transport connect: rank %d registered %d regions, rank 0 %d: every "
                      "rank must register the same regions in the same order",
                      r, (int)all[r].nregions, (int)all[0].nregions);
      goto out;
    }
    nodes[r] = all[r].node;
    memcpy(bytes + (size_t)r * MELD_TRANSPORT_MAX_REGIONS, all[r].bytes, sizeof all[r].bytes);
  }
  MELD_CHECK_GOTO(meld_transport_set_peers(t, nodes, bytes), rc, out);
  t->connected = 0; /* until the implementation has connected */
  rc = t->ops->connect ? t->ops->connect(t, b) : MELD_OK;
  /* All ranks fail together: a rank whose connect failed is named by everyone else. */
  char mine[512];
  snprintf(mine, sizeof mine, "%s", meld_last_error());
  results[t->rank] = (int32_t)rc;
  meld_result_t ag = meld_bootstrap_allgather(b, results, sizeof *results);
  if (rc != MELD_OK) {
    meld_error(rc, "%s", mine);
    goto out;
  }
  if (ag != MELD_OK) {
    rc = ag;
    goto out;
  }
  for (int r = 0; r < n; r++)
    if (results[r] != MELD_OK) {
      rc = meld_error((meld_result_t)results[r],
                      "meld transport connect: rank %d failed to connect (%s); its log says why",
                      r, meld_strerror((meld_result_t)results[r]));
      t->ops->close(t, 0); /* our connections: the job cannot use them */
      t->impl = NULL;
      goto out;
    }
  if (t->ops->ready) {
    /* Every rank's connections exist now: each proves its own carry a message both ways. */
    rc = t->ops->ready(t);
    snprintf(mine, sizeof mine, "%s", meld_last_error());
    memset(results, 0, (size_t)n * sizeof *results);
    results[t->rank] = (int32_t)rc;
    ag = meld_bootstrap_allgather(b, results, sizeof *results);
    if (rc != MELD_OK) {
      meld_error(rc, "%s", mine);
    } else if (ag != MELD_OK) {
      rc = ag;
    } else {
      for (int r = 0; rc == MELD_OK && r < n; r++)
        if (results[r] != MELD_OK)
          rc = meld_error((meld_result_t)results[r], "meld transport connect: rank %d's "
                          "connections failed their first message (%s); its log says why", r,
                          meld_strerror((meld_result_t)results[r]));
    }
    if (rc != MELD_OK) {
      t->ops->close(t, 0);
      t->impl = NULL;
      goto out;
    }
  }
  t->connected = 1;
  MELD_INFO(MELD_SUB_PROXY, "transport %s: rank %d connected (%d ranks)", t->ops->name,
            t->rank, n);
out:
  free(all), free(nodes), free(bytes), free(results);
  return rc;
}

meld_result_t meld_transport_check_write(const meld_transport_t *t, const meld_write_t *w) {
  if (!t || !w) return meld_error(MELD_ERR_INVALID_ARG, "meld transport write: t or w is NULL");
  if (!t->connected || !t->impl)
    return meld_error(MELD_ERR_INVALID_ARG, "meld transport write: the transport is not connected");
  const int d = w->dst_rank;
  if (d < 0 || d >= t->nranks)
    return meld_error(MELD_ERR_INVALID_ARG,
                      "meld transport write: dst rank %d is not in [0, nranks %d)", d, t->nranks);
  if (!meld_transport_is_remote(t, d))
    return meld_error(MELD_ERR_INVALID_ARG,
                      "meld transport write: dst rank %d is on this node (node %d): the "
                      "intra-node path carries that", d, t->node);
  const uint64_t *pb = t->peer_bytes + (size_t)d * MELD_TRANSPORT_MAX_REGIONS;
  if (w->dst_region >= (uint32_t)t->nregions)
    return meld_error(MELD_ERR_INVALID_ARG,
                      "meld transport write: dst region %u is not registered (%d regions)",
                      w->dst_region, t->nregions);
  if (w->dst_offset > pb[w->dst_region] || w->bytes > pb[w->dst_region] - w->dst_offset)
    return meld_error(MELD_ERR_INVALID_ARG,
                      "meld transport write: %llu bytes at offset %llu pass the end of region %u "
                      "(%llu bytes) at rank %d", (unsigned long long)w->bytes,
                      (unsigned long long)w->dst_offset, w->dst_region,
                      (unsigned long long)pb[w->dst_region], d);
  if (w->bytes > 0 && !w->src)
    return meld_error(MELD_ERR_INVALID_ARG, "meld transport write: src is NULL (%llu bytes)",
                      (unsigned long long)w->bytes);
  if (w->flag_region == MELD_TRANSPORT_NO_FLAG) return MELD_OK;
  if (w->flag_region >= (uint32_t)t->nregions)
    return meld_error(MELD_ERR_INVALID_ARG,
                      "meld transport write: flag region %u is not registered (%d regions)",
                      w->flag_region, t->nregions);
  if (w->flag_offset % 8 || w->flag_offset > pb[w->flag_region] - 8 || pb[w->flag_region] < 8)
    return meld_error(MELD_ERR_INVALID_ARG,
                      "meld transport write: flag offset %llu is not an 8-byte aligned slot "
                      "inside region %u (%llu bytes) at rank %d",
                      (unsigned long long)w->flag_offset, w->flag_region,
                      (unsigned long long)pb[w->flag_region], d);
  return MELD_OK;
}

meld_result_t meld_transport_write(meld_transport_t *t, const meld_write_t *w) {
  MELD_CHECK(meld_transport_check_write(t, w));
  if (__atomic_load_n(&t->aborted, __ATOMIC_ACQUIRE))
    return meld_error(MELD_ERR_ABORTED, "meld transport: rank %d: aborted", t->rank);
  return t->ops->write_with_flag(t, w);
}

meld_result_t meld_transport_poll(meld_transport_t *t, uint64_t *completed) {
  if (!t || !completed) return meld_error(MELD_ERR_INVALID_ARG, "meld transport poll: NULL");
  if (!t->impl) return meld_error(MELD_ERR_INVALID_ARG, "meld transport poll: not connected");
  return t->ops->poll(t, completed);
}

void *meld_transport_local(const meld_transport_t *t, uint32_t region, uint64_t offset,
                           uint64_t bytes) {
  if (!t || region >= (uint32_t)t->nregions) return NULL;
  const meld_region_t *r = &t->regions[region];
  if (offset > r->bytes || bytes > r->bytes - offset) return NULL;
  return (char *)r->base + offset;
}

int meld_transport_is_remote(const meld_transport_t *t, int rank) {
  return t && t->nodes && rank >= 0 && rank < t->nranks && rank != t->rank &&
         t->nodes[rank] != t->node;
}

void meld_transport_abort(meld_transport_t *t) {
  if (t) __atomic_store_n(&t->aborted, 1, __ATOMIC_RELEASE);
}

void meld_transport_close(meld_transport_t *t, int64_t timeout_ms) {
  if (!t) return;
  if (t->impl) t->ops->close(t, timeout_ms);
  free(t->nodes);
  free(t->peer_bytes);
  pthread_mutex_destroy(&t->err_mu);
  free(t);
}
