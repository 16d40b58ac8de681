/* coll_net.cu — the collectives of a comm that spans several nodes: ONE kernel per launch moves
 * each peer's block, over the proxy (host-pinned staging, the command ring, the transport) to
 * ranks of other nodes and through the workspace (NVLink, pad signals) to ranks of this node.
 * Layout of the staging and why slots are reused without credits: src/common/net.h.
 *
 *   op               every rank sends peer q             and with what it receives
 *   all_gather       its block (one staging copy)        copies q's block to recv[q * B]
 *   all_to_all       send block q                        copies it to recv[q * B]
 *   reduce_scatter   send block q                        sums all P blocks (own from send) in
 *                                                        rank order, fp32, rounded once
 *   all_reduce       = reduce_scatter of parts of ceil(count / P) elements into recv's own
 *                      part, then all_gather of the parts in place (two launches per chunk)
 *
 * A launch (one call of the device protocol: entry handshake with same-node peers, epoch):
 *   A. every CTA copies its share of the outgoing bytes: into same-node peers' workspace
 *      slots (slot `rank` at q) and into this rank's send staging slot for remote peers
 *      (PCIe writes), and the own block where it goes;
 *   B. the last CTA to finish A (an arrival count in the pad's per-call scratch) signals the
 *      same-node peers (release stores into their pads) and writes one WRITE command per
 *      remote peer into the ring (bytes, then a flag = the call's stamp at flags[rank] there),
 *      publishing head with a release store: the proxy thread sends them;
 *   C. every CTA waits for what it consumes (pad signals; remote flags in pinned memory, read
 *      over PCIe) and copies or sums it into recv.
 * Blocks longer than MELD_NET_CHUNK_BYTES take several launches (the host loops). All waits
 * have the comm's deadline and see aborts; a peer that never calls ends in MELD_ERR_TIMEOUT.
 *
 * This is the functional first version: the bytes between nodes go through host memory and
 * TCP (no RDMA yet), and same-node peers through one workspace slot per launch, so it is a
 * correctness path, not a fast one. Fused ops refuse multi-node comms. */
#include <stdint.h>
#include <string.h>

#include "coll_plan.h"
#include "comm.h"
#include "common/net.h"
#include "common/proto.h"
#include "common/proxy_ring.h"
#include "device/copy.cuh"
#include "device/launch.cuh"
#include "device/signal.cuh"
#include "error.h"
#include "log.h"
#include "net.h"
#include "proto.h"

enum { NET_AG = 0, NET_A2A = 1, NET_RS = 2 };

#define NET_THREADS 512
#define NET_MAX_CTAS 8

typedef struct {
  uint32_t op_id, arg_hash;
  int32_t rank, nranks, action, dtype;
  const uint8_t *src;     /* AG: the own block (piece at + c0); A2A / RS: send (block q at q * blk) */
  uint8_t *dst;           /* AG / A2A: recv (block q at q * blk); RS: the result (piece at + c0)  */
  const uint8_t *own_in;  /* RS: the own contribution (send's block `rank`)                        */
  uint8_t *own_out;       /* AG / A2A: where the own block goes (recv + rank * blk); NULL: in place */
  uint64_t blk, total;    /* block q: [q * blk, min((q + 1) * blk, total)) of the send / recv       */
  uint64_t c0, len;       /* this launch: bytes [c0, c0 + len) of every block                       */
  uint64_t block;         /* a staging slot's bytes                                                 */
  meld_cmdring_hdr_t *ring;
  uint64_t *flags;        /* [nranks], host-mapped                                                  */
  uint8_t *snd, *rcv;     /* staging, host-mapped                                                   */
  uint32_t region_send, region_recv, region_flags, nslots;
  uint8_t *ws;            /* this rank's workspace: slot q (q * block) holds same-node q's piece   */
  uint8_t *peer_ws[MELD_COLL_MAX_RANKS]; /* same-node peers' workspaces, NULL for other nodes       */
} coll_net_kargs_t;

/* Bytes of block q's piece in this launch. */
MELD_HD uint64_t net_piece(const coll_net_kargs_t *a, int q) { return meld_net_piece(a->blk, a->total, a->c0, a->len, q); }

/* What this rank sends peer q: (source, bytes). */
MELD_DEV const uint8_t *net_out_src(const coll_net_kargs_t *a, int q, uint64_t *n) {
  if (a->action == NET_AG) {
    *n = net_piece(a, a->rank);
    return a->src + a->c0;
  }
  *n = net_piece(a, q);
  return a->src + (uint64_t)q * a->blk + a->c0;
}

/* Where peer q's piece lies here once it arrived. */
MELD_DEV const uint8_t *net_in(const coll_net_kargs_t *a, int q, uint64_t epoch) {
  return a->peer_ws[q] ? a->ws + (uint64_t)q * a->block : a->rcv + meld_net_slot(epoch, q, a->nranks, a->block);
}

/* One thread: waits until peer q's piece of this call is here (pad signal or remote flag). */
MELD_DEV bool net_wait_peer(meld_ctx_t *ctx, const coll_net_kargs_t *a, int q) {
  const uint64_t stamp = meld_stamp(ctx->epoch, 1);
  if (a->peer_ws[q]) return meld_wait_signal(ctx, (uint32_t)q, stamp, q, "net piece (this node)");
  return meld_wait_ge(ctx, a->flags + q, stamp, meld_wait_info(MELD_REGION_OTHER, (uint32_t)q, q, "net piece (proxy)"));
}

/* B: the last CTA of phase A signals same-node peers and enqueues the remote writes. */
MELD_DEV bool net_publish(meld_ctx_t *ctx, const coll_net_kargs_t *a) {
  const uint64_t stamp = meld_stamp(ctx->epoch, 1);
  meld_cmdring_hdr_t *ring = a->ring;
  uint64_t head = ld_relaxed_sys_u64(&ring->head); /* (this GPU is the ring's one producer) */
  for (int i = 1; i < a->nranks; i++) {
    const int q = (a->rank + i) % a->nranks;
    if (a->peer_ws[q]) {
      meld_signal_put(ctx, q, (uint32_t)a->rank, stamp);
      continue;
    }
    if (meld_cmdring_full(head, ld_relaxed_sys_u64(&ring->tail), a->nslots) &&
        !meld_wait_ge(ctx, &ring->tail, head - a->nslots + 1,
                      meld_wait_info(MELD_REGION_OTHER, 0u, -1, "proxy ring credit")))
      return false;
    uint64_t n = 0;
    (void)net_out_src(a, q, &n);
    meld_cmd_t *c = meld_cmdring_cmds(ring) + meld_cmdring_slot(head, a->nslots);
    c->opcode = MELD_CMD_WRITE;
    c->src_region = (uint16_t)a->region_send;
    c->dst_region = (uint16_t)a->region_recv;
    c->flag_region = (uint16_t)a->region_flags;
    c->dst_rank = q;
    c->flag_index = (uint32_t)a->rank;
    c->src_offset = meld_net_slot(ctx->epoch, a->action == NET_AG ? 0 : q, a->nranks, a->block);
    c->dst_offset = meld_net_slot(ctx->epoch, a->rank, a->nranks, a->block);
    c->bytes = n;
    c->flag_value = stamp;
    c->seq = head;
    c->reserved = 0;
    st_release_sys_u64(&ring->head, ++head); /* the command and the staged bytes before it */
  }
  return true;
}

/* RS: dst[c0 + e] = sum over q in rank order of q's piece (own from own_in), e < n elements.
 * (Not copy.cuh's reduce_sum: its sources lie one stride apart in one staging, these in two,
 * the workspace for same-node peers and the pinned staging for remote ones.) */
MELD_DEV void net_sum(const coll_net_kargs_t *a, uint64_t epoch, uint64_t n, uint32_t w, uint32_t nw) {
  const int P = a->nranks, es = a->dtype == COPY_BF16 ? 2 : 4;
  const uint8_t *own = a->own_in + a->c0;
  uint8_t *out = a->dst + a->c0;
  bool aligned = ((uintptr_t)own | (uintptr_t)out) % 16 == 0;
  const uint64_t elems = n / (uint64_t)es, nvec = aligned ? n / 16 : 0;
  for (uint64_t i = w; i < nvec; i += nw) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int q = 0; q < P; q++) {
      const int4 v = __ldcv((const int4 *)(q == a->rank ? own : net_in(a, q, epoch)) + i);
      if (es == 2) acc_bf16x8(acc, v);
      else acc_f32x4(acc, v);
    }
    ((int4 *)out)[i] = pack_acc(acc, a->dtype);
  }
  for (uint64_t e = nvec * 16 / es + w; e < elems; e += nw) {
    float s = 0.0f;
    for (int q = 0; q < P; q++) {
      const uint8_t *p = q == a->rank ? own : net_in(a, q, epoch);
      s += es == 2 ? __bfloat162float(__ushort_as_bfloat16(__ldcv((const unsigned short *)p + e)))
                   : __ldcv((const float *)p + e);
    }
    store_elem(out, e, s, a->dtype);
  }
}

__global__ void __launch_bounds__(NET_THREADS, 1) coll_net_kernel(const __grid_constant__ meld_proto_dev_t proto,
                                                                  const __grid_constant__ coll_net_kargs_t a) {
  meld_ctx_t ctx;
  if (meld_call_begin(&ctx, &proto, a.op_id, a.arg_hash, gridDim.x)) {
    const uint32_t w = blockIdx.x * blockDim.x + threadIdx.x, nw = gridDim.x * blockDim.x;
    const int P = a.nranks, me = a.rank;
    /* A. outgoing pieces (a remote all-gather piece is staged once), the own block */
    bool staged = false;
    for (int i = 1; i < P; i++) {
      const int q = (me + i) % P;
      uint64_t n = 0;
      const uint8_t *src = net_out_src(&a, q, &n);
      if (a.peer_ws[q]) {
        copy_bytes(a.peer_ws[q] + (uint64_t)me * a.block, src, n, w, nw);
      } else if (!(a.action == NET_AG && staged)) {
        copy_bytes(a.snd + meld_net_slot(ctx.epoch, a.action == NET_AG ? 0 : q, P, a.block), src, n, w, nw);
        staged = true;
      }
    }
    if (a.own_out) {
      const uint64_t n = net_piece(&a, me);
      copy_bytes(a.own_out + a.c0, a.action == NET_AG ? a.src + a.c0 : a.src + (uint64_t)me * a.blk + a.c0, n, w, nw);
    }
    /* B. the last CTA publishes (fences: every CTA's stores before the arrival it counts; the
     * last one's releases are cumulative over what its acquire saw) */
    __syncthreads();
    meld_cta_shared_t *s = meld_cta_shared();
    if (threadIdx.x == 0) {
      fence_sc_sys();
      const uint32_t before = atom_add_acq_rel_gpu_u32(meld_scratch(&ctx, 0), 1u);
      s->ok = 1;
      if (before == gridDim.x - 1) {
        fence_sc_sys();
        s->ok = net_publish(&ctx, &a) ? 1u : 0u;
      }
    }
    bool ok = __syncthreads_and(s->ok) != 0;
    /* C. consume */
    if (ok && a.action == NET_RS) {
      if (threadIdx.x == 0) {
        s->ok = 1;
        for (int i = 1; i < P && s->ok; i++) s->ok = net_wait_peer(&ctx, &a, (me + i) % P) ? 1u : 0u;
      }
      ok = __syncthreads_and(s->ok) != 0;
      if (ok) net_sum(&a, ctx.epoch, net_piece(&a, me), w, nw);
    } else if (ok) {
      for (int i = 1; ok && i < P; i++) {
        const int q = (me + P - i) % P;
        if (threadIdx.x == 0) s->ok = net_wait_peer(&ctx, &a, q) ? 1u : 0u;
        ok = __syncthreads_and(s->ok) != 0;
        if (ok)
          copy_bytes(a.dst + (uint64_t)q * a.blk + a.c0, net_in(&a, q, ctx.epoch),
                     net_piece(&a, a.action == NET_AG ? q : me), w, nw);
      }
    }
    if (!ok) ctx.failed = 1;
  }
  meld_call_end(&ctx);
}

/* ---- host side ------------------------------------------------------------------------------ */

static const uint32_t g_net_op_ids[MELD_COLL_NUM_OPS] = {MELD_OP_ALL_GATHER, MELD_OP_REDUCE_SCATTER,
                                                         MELD_OP_ALL_REDUCE, MELD_OP_ALL_TO_ALL};

/* The launches of one exchange (every chunk of blk bytes), stream-ordered. */
static meld_result_t net_exchange(meld_comm_t comm, const char *fn, coll_net_kargs_t *k, cudaStream_t stream) {
  const meld_net_t *net = comm->net;
  const uint64_t launches = meld_net_launches(k->blk, net->block);
  int grid = 0;
  MELD_CHECK(meld_coop_grid((const void *)coll_net_kernel, NET_THREADS, 0, NET_MAX_CTAS, comm->sm_count, &grid));
  meld_proto_dev_t proto = meld_proto_dev(comm);
  for (uint64_t i = 0; i < launches; i++) {
    meld_net_launch_range(k->blk, net->block, i, &k->c0, &k->len);
    uint64_t h = meld_hash_init();
    h = meld_hash_u64(h, k->op_id);
    h = meld_hash_u64(h, (uint64_t)k->action);
    h = meld_hash_u64(h, (uint64_t)k->dtype);
    h = meld_hash_u64(h, k->blk);
    h = meld_hash_u64(h, k->total);
    h = meld_hash_u64(h, k->c0);
    k->arg_hash = meld_hash_fold(h);
    void *kargs[] = {&proto, k};
    meld_result_t r = meld_launch_coop((const void *)coll_net_kernel, grid, NET_THREADS, 0, kargs, stream);
    if (r != MELD_OK) {
      meld_error_prefix("%s (inter-node path, launch %llu of %llu)", fn, (unsigned long long)i + 1,
                        (unsigned long long)launches);
      return r;
    }
  }
  return MELD_OK;
}

extern "C" meld_result_t meld_coll_net_run(meld_comm_t comm, const char *fn, const meld_coll_args_t *a,
                                           cudaStream_t stream) {
  const meld_net_t *net = comm->net;
  const int P = comm->nranks, me = comm->rank;
  if (a->vector)
    return meld_error(MELD_ERR_UNSUPPORTED,
                      "%s: all-to-all with per-peer counts across nodes is not supported yet (%d nodes); "
                      "meld_all_to_all (equal counts) is",
                      fn, comm->nnodes);
  if (P > MELD_COLL_MAX_RANKS)
    return meld_error(MELD_ERR_UNSUPPORTED, "%s: %d ranks; the inter-node path handles up to %d", fn, P,
                      MELD_COLL_MAX_RANKS);
  if (!net)
    return meld_error(MELD_ERR_INTERNAL, "%s: the comm spans %d nodes but has no inter-node path", fn, comm->nnodes);
  if (comm->local_size > 1 && comm->workspace.bytes < (size_t)P * net->block)
    return meld_error(MELD_ERR_OUT_OF_MEMORY,
                      "%s: the inter-node path needs %llu bytes of workspace for %d ranks with same-node peers "
                      "(MELD_WORKSPACE_BYTES is %zu; or lower MELD_NET_CHUNK_BYTES, now %llu)",
                      fn, (unsigned long long)((uint64_t)P * net->block), P, comm->workspace.bytes,
                      (unsigned long long)net->block);
  MELD_CHECK(meld_proto_sticky_error(comm, fn)); /* (as the intra-node entry: a failed comm says so) */
  const uint64_t es = meld_coll_dtype_bytes(a->dtype);
  coll_net_kargs_t k;
  memset(&k, 0, sizeof k);
  k.op_id = g_net_op_ids[a->op];
  k.rank = me;
  k.nranks = P;
  k.dtype = (int32_t)a->dtype;
  k.block = net->block;
  k.ring = net->ring_dev;
  k.flags = net->flags_dev;
  k.snd = net->send_dev;
  k.rcv = net->recv_dev;
  k.region_send = net->region_send;
  k.region_recv = net->region_recv;
  k.region_flags = net->region_flags;
  k.nslots = MELD_NET_RING_SLOTS;
  k.ws = (uint8_t *)comm->workspace.local;
  for (int q = 0; q < P; q++)
    k.peer_ws[q] = q == me || comm->rank_node[q] != comm->node ? NULL : (uint8_t *)comm->workspace.peer[q];
  const uint8_t *send = (const uint8_t *)a->send;
  uint8_t *recv = (uint8_t *)a->recv;
  switch (a->op) {
  case MELD_COLL_ALL_GATHER:
    k.action = NET_AG;
    k.blk = a->count * es;
    k.total = k.blk * (uint64_t)P;
    k.src = send;
    k.dst = recv;
    k.own_out = send == recv + (uint64_t)me * k.blk ? NULL : recv + (uint64_t)me * k.blk;
    return net_exchange(comm, fn, &k, stream);
  case MELD_COLL_ALL_TO_ALL:
    k.action = NET_A2A;
    k.blk = a->send_counts[0] * es;
    k.total = k.blk * (uint64_t)P;
    k.src = send;
    k.dst = recv;
    k.own_out = recv + (uint64_t)me * k.blk;
    return net_exchange(comm, fn, &k, stream);
  case MELD_COLL_REDUCE_SCATTER:
    k.action = NET_RS;
    k.blk = a->count * es;
    k.total = k.blk * (uint64_t)P;
    k.src = send;
    k.own_in = send + (uint64_t)me * k.blk;
    k.dst = recv;
    return net_exchange(comm, fn, &k, stream);
  case MELD_COLL_ALL_REDUCE: {
    /* parts of ceil(count / P) elements (the last ones shorter or empty) */
    const uint64_t part = (a->count + (uint64_t)P - 1) / (uint64_t)P * es;
    k.action = NET_RS;
    k.blk = part;
    k.total = a->count * es;
    k.src = send;
    k.own_in = send + (uint64_t)me * part;
    k.dst = recv + (uint64_t)me * part;
    MELD_CHECK(net_exchange(comm, fn, &k, stream));
    k.op_id = MELD_OP_ALL_GATHER;
    k.action = NET_AG;
    k.src = recv + (uint64_t)me * part; /* the own reduced part, gathered in place */
    k.own_in = NULL;
    k.dst = recv;
    k.own_out = NULL;
    return net_exchange(comm, fn, &k, stream);
  }
  default:
    return meld_error(MELD_ERR_INTERNAL, "%s: unknown collective %d", fn, (int)a->op);
  }
}
