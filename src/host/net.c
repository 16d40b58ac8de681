/* net.c — a multi-node comm's inter-node path (net.h). */
#include "net.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "common/net.h"
#include "error.h"
#include "log.h"
#include "proto.h"
#include "proxy.h"
#include "transport.h"

meld_result_t meld_net_block_env(uint64_t *block) {
  *block = MELD_NET_BLOCK_DEFAULT;
  const char *s = getenv("MELD_NET_CHUNK_BYTES");
  if (!s || !*s) return MELD_OK;
  size_t v = 0;
  if (meld_parse_size(s, &v) != 0 || !meld_net_block_valid(v))
    return meld_error(MELD_ERR_INVALID_ARG,
                      "MELD_NET_CHUNK_BYTES=%s: give a multiple of 256 bytes in [%llu, %llu] (K, M suffixes "
                      "allowed)",
                      s, (unsigned long long)MELD_NET_BLOCK_MIN, (unsigned long long)MELD_NET_BLOCK_MAX);
  *block = v;
  return MELD_OK;
}

int meld_net_sizes(const meld_coll_args_t *a, int P, int me, meld_net_sizes_t *s) {
  memset(s, 0, sizeof *s);
  const uint64_t es = meld_coll_dtype_bytes(a->dtype);
  switch (a->op) {
  case MELD_COLL_ALL_GATHER: {
    const uint64_t blk = a->count * es;
    s->kind = MELD_NET_AG;
    for (int q = 0; q < P; q++) s->tx_bytes[q] = blk, s->rx_off[q] = (uint64_t)q * blk, s->rx_bytes[q] = blk;
    s->own_bytes = blk;
    s->own_dst = (uint64_t)me * blk;
    return 0;
  }
  case MELD_COLL_ALL_TO_ALL:
    s->kind = MELD_NET_A2A;
    for (int q = 0; q < P; q++) {
      s->tx_off[q] = a->send_offsets[q] * es, s->tx_bytes[q] = a->send_counts[q] * es;
      s->rx_off[q] = a->recv_offsets[q] * es, s->rx_bytes[q] = a->recv_counts[q] * es;
    }
    s->own_src = s->tx_off[me];
    s->own_dst = s->rx_off[me];
    s->own_bytes = s->tx_bytes[me] < s->rx_bytes[me] ? s->tx_bytes[me] : s->rx_bytes[me];
    return 0;
  case MELD_COLL_REDUCE_SCATTER: {
    const uint64_t blk = a->count * es;
    s->kind = MELD_NET_RS;
    for (int q = 0; q < P; q++) s->tx_off[q] = (uint64_t)q * blk, s->tx_bytes[q] = blk, s->rx_bytes[q] = blk;
    s->own_src = (uint64_t)me * blk;
    s->own_bytes = blk;
    s->sum_out = 0;
    return 0;
  }
  case MELD_COLL_ALL_REDUCE: {
    /* parts of ceil(count / P) elements (the last ones shorter or empty) */
    const uint64_t part = (a->count + (uint64_t)P - 1) / (uint64_t)P * es, total = a->count * es;
    const uint64_t mine = meld_net_part_len(part, total, me);
    s->kind = MELD_NET_AR;
    for (int q = 0; q < P; q++)
      s->tx_off[q] = (uint64_t)q * part, s->tx_bytes[q] = meld_net_part_len(part, total, q), s->rx_bytes[q] = mine;
    s->own_src = (uint64_t)me * part;
    s->own_bytes = mine;
    s->sum_out = (uint64_t)me * part;
    s->part = part;
    return 0;
  }
  default:
    return -1;
  }
}

/* The offsets of the four parts in the one host allocation (each 4 KiB aligned). */
typedef struct {
  size_t ring, flags, send, recv, total;
} net_layout_t;

static size_t align4k(size_t x) { return (x + 4095) & ~(size_t)4095; }

static net_layout_t net_layout(int nranks, uint64_t block) {
  net_layout_t l;
  l.ring = 0;
  l.flags = align4k(meld_cmdring_bytes(MELD_NET_RING_SLOTS));
  l.send = l.flags + align4k((size_t)meld_net_flag_words(nranks) * sizeof(uint64_t));
  l.recv = l.send + (size_t)meld_net_stage_bytes(nranks, block);
  l.total = l.recv + (size_t)meld_net_stage_bytes(nranks, block);
  return l;
}

static void net_free(meld_net_t *n) {
  if (!n) return;
  if (n->proxy) (void)meld_proxy_destroy(n->proxy);
  if (n->tp) meld_transport_close(n->tp, 5000);
  if (n->host) cudaFreeHost(n->host);
  free(n);
}

int meld_net_transport_want(const char *env) {
  if (!env || !*env || strcmp(env, "auto") == 0) return 2;
  if (strcmp(env, "tcp") == 0) return 0;
  if (strcmp(env, "ibv") == 0) return 1;
  return -1;
}

meld_result_t meld_net_transport_pick(const int32_t *all, int P, const char **kind, int *cannot) {
  *kind = "tcp";
  *cannot = -1;
  for (int r = 0; r < P; r++)
    if (all[2 * r] != all[0])
      return meld_error(MELD_ERR_INVALID_ARG, "MELD_NET_TRANSPORT differs between ranks (rank %d "
                        "and rank 0): set it alike everywhere", r);
  for (int r = 0; r < P && *cannot < 0; r++)
    if (!all[2 * r + 1]) *cannot = r;
  const int want = all[0];
  if (want == 1 && *cannot >= 0)
    return meld_error(MELD_ERR_UNSUPPORTED, "MELD_NET_TRANSPORT=ibv, but rank %d cannot use "
                      "ibverbs", *cannot);
  if (want != 0 && *cannot < 0) *kind = "ibv";
  return MELD_OK;
}

/* The transport every rank uses (meld_net_transport_pick over every rank's wish and ability).
 * Collective: ranks decide alike or fail together. */
static meld_result_t choose_transport(struct meld_comm *comm, const char **kind) {
  const char *env = getenv("MELD_NET_TRANSPORT");
  const int32_t want = meld_net_transport_want(env);
  meld_result_t mine = MELD_OK;
  if (want < 0) mine = meld_error(MELD_ERR_INVALID_ARG, "MELD_NET_TRANSPORT=%s: give tcp, ibv or auto", env);
  MELD_CHECK(meld_comm_agree(comm, mine, "MELD_NET_TRANSPORT"));
  char why[512] = "";
  const int32_t can = want != 0 && meld_transport_ibv_probe() == MELD_OK;
  if (want != 0 && !can) snprintf(why, sizeof why, "%s", meld_last_error());
  const int P = comm->nranks;
  int32_t *all = calloc(2 * (size_t)P, sizeof *all);
  if (!all) return meld_error(MELD_ERR_OUT_OF_MEMORY, "meld_comm_init: out of host memory");
  all[2 * comm->rank] = want, all[2 * comm->rank + 1] = can;
  meld_result_t res = meld_bootstrap_allgather(comm->boot, all, 2 * sizeof *all);
  int cannot = -1;
  if (res == MELD_OK) res = meld_net_transport_pick(all, P, kind, &cannot);
  free(all);
  if (res != MELD_OK && cannot == comm->rank) /* (this rank knows why) */
    return meld_error(res, "%s: %s", meld_last_error(), why);
  MELD_CHECK(res);
  if (want == 2 && cannot >= 0)
    MELD_INFO(MELD_SUB_PROXY, "inter-node path: tcp, as rank %d cannot use ibverbs%s%s", cannot,
              cannot == comm->rank ? ": " : "", cannot == comm->rank ? why : "");
  return MELD_OK;
}

static meld_result_t net_local_setup(struct meld_comm *comm, meld_net_t *n, uint64_t block,
                                     const char *kind) {
  meld_result_t res = MELD_OK;
  n->block = block;
  const net_layout_t l = net_layout(comm->nranks, n->block);
  n->host_bytes = l.total;
  MELD_CUDA_CHECK_GOTO(cudaHostAlloc(&n->host, l.total, cudaHostAllocMapped | cudaHostAllocPortable), res, out);
  memset(n->host, 0, l.total);
  uint8_t *h = (uint8_t *)n->host, *d = NULL;
  MELD_CUDA_CHECK_GOTO(cudaHostGetDevicePointer((void **)&d, n->host, 0), res, out);
  n->ring = (meld_cmdring_hdr_t *)(h + l.ring), n->ring_dev = (meld_cmdring_hdr_t *)(d + l.ring);
  n->flags = (uint64_t *)(h + l.flags), n->flags_dev = (uint64_t *)(d + l.flags);
  n->send = h + l.send, n->send_dev = d + l.send;
  n->recv = h + l.recv, n->recv_dev = d + l.recv;
  /* Regions in the same order on every rank (send, recv, flags: ids 0, 1, 2). */
  MELD_CHECK_GOTO(meld_transport_create(kind, comm->rank, comm->nranks, comm->node, comm->local_rank,
                                        comm->ranks[comm->rank].bus_id, comm->cfg.bootstrap_timeout_ms,
                                        &n->tp),
                  res, out);
  const uint64_t stage = meld_net_stage_bytes(comm->nranks, n->block);
  MELD_CHECK_GOTO(meld_transport_register(n->tp, n->send, stage, &n->region_send), res, out);
  MELD_CHECK_GOTO(meld_transport_register(n->tp, n->recv, stage, &n->region_recv), res, out);
  MELD_CHECK_GOTO(meld_transport_register(n->tp, n->flags, (uint64_t)meld_net_flag_words(comm->nranks) * 8u,
                                          &n->region_flags),
                  res, out);
out:
  return res;
}

meld_result_t meld_net_create(struct meld_comm *comm, uint64_t block) {
  meld_result_t res = MELD_OK;
  comm->net = NULL;
  const char *kind = "tcp";
  MELD_CHECK(choose_transport(comm, &kind));
  meld_net_t *n = calloc(1, sizeof *n);
  if (!n) res = meld_error(MELD_ERR_OUT_OF_MEMORY, "meld_comm_init: out of host memory (inter-node path)");
  /* The local steps (pinned memory, the transport, its regions), then one agreement: a rank
   * that failed here must not leave the others waiting in connect. */
  if (res == MELD_OK) res = net_local_setup(comm, n, block, kind);
  res = meld_comm_agree(comm, res, "the inter-node path's setup");
  if (res != MELD_OK) goto fail;
  MELD_CHECK_GOTO(meld_transport_connect(n->tp, comm->boot), res, fail);

  meld_proxy_config_t pc = MELD_PROXY_CONFIG_INIT;
  pc.nslots = MELD_NET_RING_SLOTS;
  pc.timeout_ms = comm->cfg.timeout_ms;
  pc.abort_word = meld_proto_host_abort(comm);
  pc.ring = n->ring;
  MELD_CHECK_GOTO(meld_proxy_create(n->tp, &pc, &n->proxy), res, fail);
  comm->net = n;
  MELD_INFO(MELD_SUB_PROXY, "inter-node path: %s, %llu-byte staging blocks, %zu bytes pinned",
            kind, (unsigned long long)n->block, n->host_bytes);
  return MELD_OK;
fail:
  if (n) net_free(n);
  return res;
}

void meld_net_destroy(struct meld_comm *comm) {
  if (!comm || !comm->net) return;
  net_free(comm->net);
  comm->net = NULL;
}

meld_result_t meld_net_check(struct meld_comm *comm) {
  if (!comm || !comm->net || !comm->net->proxy) return MELD_OK;
  return meld_proxy_check(comm->net->proxy);
}
