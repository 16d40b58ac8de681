/* coll_net.cu — the collectives of a comm that spans several nodes (where its hierarchy applies,
 * all_reduce / reduce_scatter / all_gather go through net_hier below instead: steps on the
 * node and rail comms). The flat path: ONE kernel per call moves
 * every ordered pair's stream of chunks (src/common/net.h: slots, stamps, credits, the reuse
 * argument) over the proxy (host-pinned staging, the command ring, the transport) to ranks of
 * other nodes and through the workspace (NVLink, pad signals and credits) to ranks of this node.
 *
 *   op               rank me sends peer q                 and with what it receives from q
 *   all_gather       its block (staged once for all       copies q's chunks to recv[q * B]
 *                    remote peers)
 *   all_to_all(v)    its send piece for q                 copies them to recv's piece of q
 *   reduce_scatter   send block q                         sums chunk j of every peer and its own
 *                                                         in rank order (fp32, rounded once)
 *   all_reduce       phase 1: send part q (parts of ceil(count / P) elements, the last shorter
 *                    or empty), summed as reduce_scatter into recv's own part; phase 2: its
 *                    reduced part, chunk j as soon as it is summed (staged once for all remote
 *                    peers); copies q's part into recv. One stream per pair: phase 2's chunks
 *                    follow phase 1's.
 *
 * CTAs by role (blockIdx.x): 0 is the FEEDER (one thread), then NS senders, then NR receivers.
 *   sender:   its share of the send items (round robin in a fixed order: chunk j ascending, peers
 *             in rotation): waits for the slot's credit (chunk c - S consumed: a pad credit from a
 *             same-node peer, a flag over PCIe from a remote one; an all-reduce's phase-2 chunk
 *             also for its own sum), copies the chunk (into the peer's workspace row, or into the
 *             send staging), then publishes it: a pad signal to a same-node peer; the slot's
 *             staged word (device memory) for the feeder;
 *   receiver: its share of the receive items: waits for the chunk's data stamp, copies (or sums
 *             every peer's chunk j), then returns the credit: a pad credit to a same-node peer; the
 *             slot's consumed word for the feeder (only chunks a later chunk will wait for);
 *   feeder:   owns the proxy's ring and never blocks on one item: it polls every remote peer's
 *             next staged chunk and next consumed chunk and turns each into a command (WRITE of
 *             the chunk with its data stamp; a flag-only WRITE of the credit), publishing the
 *             ring's head once per pass. (A feeder that waited on one chunk whose sender waits
 *             for a credit behind it in the same queue would deadlock two ranks.)
 * Every wait has the comm's deadline and sees aborts; the feeder's is measured from its last
 * progress, and it stops when the proxy reports an error. */
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

enum { NET_AG = MELD_NET_AG, NET_A2A = MELD_NET_A2A, NET_RS = MELD_NET_RS, NET_AR = MELD_NET_AR };

#define NET_THREADS 512
#define NET_MAX_ROLE_CTAS 8 /* senders, and receivers, at most */

static_assert((2u * MELD_COLL_MAX_RANKS + 1u) * MELD_NET_SLOTS * 8u <= MELD_PAD_NET_BYTES, "net words fit the pad");

typedef struct {
  uint32_t op_id, arg_hash;
  int32_t rank, nranks, kind, dtype;
  const uint8_t *src;     /* AG: the own block; A2A / RS / AR: send                                */
  uint8_t *dst;           /* AG / A2A / AR: recv; RS: the result                                   */
  /* phase 1, per peer: what goes to q (src + tx_off[q], tx_bytes[q]; AG: the own block for all)
   * and where q's bytes land (dst + rx_off[q], rx_bytes[q]); RS / AR: rx_bytes[q] = the own
   * part's bytes, summed into sum_out. AR's phase 2 sends sum_out (own_bytes) and receives q's
   * part into dst + tx_off[q] (tx_bytes[q]). */
  uint64_t tx_off[MELD_COLL_MAX_RANKS], tx_bytes[MELD_COLL_MAX_RANKS];
  uint64_t rx_off[MELD_COLL_MAX_RANKS], rx_bytes[MELD_COLL_MAX_RANKS];
  const uint8_t *own_src; /* AG / A2A: the own block, copied to own_dst; RS / AR: own contribution  */
  uint8_t *own_dst;       /* AG / A2A: NULL = in place                                             */
  uint64_t own_bytes;     /* AG / A2A: the own block's bytes; RS / AR: the own part's              */
  uint8_t *sum_out;       /* RS / AR: where the own part's sum goes                                 */
  uint64_t block;         /* a staging slot's bytes                                                 */
  meld_cmdring_hdr_t *ring;
  uint64_t *flags;        /* [2][nranks][S], host-mapped                                            */
  uint8_t *snd, *rcv;     /* staging, host-mapped                                                   */
  uint32_t region_send, region_recv, region_flags, nslots;
  int32_t argcheck;       /* the argument check across nodes (meld_net_args_word; MELD_NET_ARG_CHECK)  */
  uint8_t *ws;            /* this rank's workspace: row q (q * S slots of block) holds same-node q's */
  uint8_t *peer_ws[MELD_COLL_MAX_RANKS]; /* same-node peers' workspaces, NULL for other nodes       */
} coll_net_kargs_t;

/* ---- the stream arithmetic (every role computes the same) ----------------------------------- */

MELD_DEV bool net_remote(const coll_net_kargs_t *a, int q) { return q != a->rank && !a->peer_ws[q]; }
MELD_DEV bool net_sum_kind(const coll_net_kargs_t *a) { return a->kind == NET_RS || a->kind == NET_AR; }
MELD_DEV uint64_t net_tx1(const coll_net_kargs_t *a, int q) { return meld_net_chunks(a->tx_bytes[q], a->block); }
MELD_DEV uint64_t net_rx1(const coll_net_kargs_t *a, int q) { return meld_net_chunks(a->rx_bytes[q], a->block); }
/* Phase-2 chunks (all-reduce): sent to every peer / received from q. */
MELD_DEV uint64_t net_tx2(const coll_net_kargs_t *a) { return a->kind == NET_AR ? meld_net_chunks(a->own_bytes, a->block) : 0; }
MELD_DEV uint64_t net_rx2(const coll_net_kargs_t *a, int q) {
  return a->kind == NET_AR ? meld_net_chunks(a->tx_bytes[q], a->block) : 0;
}
MELD_DEV uint64_t net_ntx(const coll_net_kargs_t *a, int q) { return meld_net_ntx(a->kind, a->tx_bytes[q], a->own_bytes, a->block); }
MELD_DEV uint64_t net_nrx(const coll_net_kargs_t *a, int q) { return meld_net_nrx(a->kind, a->rx_bytes[q], a->tx_bytes[q], a->block); }
/* 1 if chunk j of phase ph toward a remote peer is staged once for all remote peers. */
MELD_DEV bool net_shared(const coll_net_kargs_t *a, int ph) { return a->kind == NET_AG || ph == 1; }

MELD_DEV uint64_t *net_staged(const meld_ctx_t *c, int row, uint32_t slot) {
  return meld_pad_u64(c->p->pad, MELD_PAD_OFF_NET) + meld_net_word(row, slot);
}
MELD_DEV uint64_t *net_consumed(const meld_ctx_t *c, int row, uint32_t slot) {
  return meld_pad_u64(c->p->pad, MELD_PAD_OFF_NET) + MELD_COLL_MAX_RANKS * MELD_NET_SLOTS + meld_net_word(row, slot);
}
MELD_DEV uint64_t *net_reduced(const meld_ctx_t *c, uint32_t slot) {
  return meld_pad_u64(c->p->pad, MELD_PAD_OFF_NET) + 2u * MELD_COLL_MAX_RANKS * MELD_NET_SLOTS + slot;
}

/* ---- sender ------------------------------------------------------------------------------- */

MELD_DEV bool net_wait_data(meld_ctx_t *ctx, const coll_net_kargs_t *a, int q, uint64_t c);

/* One thread: waits for the credit of chunk c toward q (a no-op for c < S). */
MELD_DEV bool net_wait_credit(meld_ctx_t *ctx, const coll_net_kargs_t *a, int q, uint64_t c) {
  const uint64_t need = meld_net_credit_needed(ctx->epoch, c);
  if (!need) return true;
  const uint32_t word = meld_net_word(q, (uint32_t)(c % MELD_NET_SLOTS));
  if (!net_remote(a, q)) return meld_wait_credit(ctx, word, need, q, "net credit (this node)");
  return meld_wait_ge(ctx, a->flags + meld_net_words(a->nranks) + word, need,
                      meld_wait_info(MELD_REGION_OTHER, word, q, "net credit (proxy)"));
}

/* Send item: chunk j of phase ph toward q (shared: toward every remote peer, staged once). */
MELD_DEV bool net_send_item(meld_ctx_t *ctx, const coll_net_kargs_t *a, int q, bool shared, int ph, uint64_t j) {
  const int P = a->nranks, me = a->rank;
  const uint64_t e = ctx->epoch;
  meld_cta_shared_t *s = meld_cta_shared();
  if (threadIdx.x == 0) {
    bool ok = true;
    if (shared) {
      for (int r = 0; ok && r < P; r++)
        if (net_remote(a, r)) ok = net_wait_credit(ctx, a, r, ph == 0 ? j : net_tx1(a, r) + j);
    } else {
      ok = net_wait_credit(ctx, a, q, ph == 0 ? j : net_tx1(a, q) + j);
    }
    /* An all-reduce's phase-2 chunk j is the own part's chunk j, summed by a receiver of this
     * kernel. First the peers' chunks it sums (the real dependency: a missing peer is reported
     * as such, whichever CTA's deadline passes first), then the sum. */
    for (int r = 0; ok && ph == 1 && r < P; r++)
      if (r != me) ok = net_wait_data(ctx, a, r, j);
    if (ok && ph == 1)
      ok = meld_wait_ge(ctx, net_reduced(ctx, (uint32_t)(j % MELD_NET_SLOTS)), meld_net_stamp(e, j),
                        meld_wait_info(MELD_REGION_OTHER, (uint32_t)j, me, "net own sum"));
    s->ok = ok ? 1u : 0u;
  }
  if (!__syncthreads_and(s->ok)) return false;
  const uint8_t *from;
  uint64_t n;
  if (ph == 0) {
    from = (a->kind == NET_AG ? a->src : a->src + a->tx_off[q]) + j * a->block;
    n = meld_net_chunk_len(a->tx_bytes[q], a->block, j);
  } else {
    from = a->sum_out + j * a->block;
    n = meld_net_chunk_len(a->own_bytes, a->block, j);
  }
  const uint64_t c = ph == 0 ? j : net_tx1(a, q) + j; /* (not used when shared) */
  uint8_t *to;
  if (shared) to = a->snd + meld_net_slot(e, me, (uint32_t)(j % MELD_NET_SLOTS), P, a->block);
  else if (net_remote(a, q)) to = a->snd + meld_net_slot(e, q, (uint32_t)(c % MELD_NET_SLOTS), P, a->block);
  else to = a->peer_ws[q] + (uint64_t)meld_net_word(me, (uint32_t)(c % MELD_NET_SLOTS)) * a->block;
  copy_bytes(to, from, n, threadIdx.x, blockDim.x);
  __syncthreads(); /* every thread's stores before thread 0's release (cumulative) */
  if (threadIdx.x == 0) {
    if (shared) st_release_sys_u64(net_staged(ctx, me, (uint32_t)(j % MELD_NET_SLOTS)), meld_net_stamp(e, j));
    else if (net_remote(a, q)) st_release_sys_u64(net_staged(ctx, q, (uint32_t)(c % MELD_NET_SLOTS)), meld_net_stamp(e, c));
    else meld_signal_put(ctx, q, meld_net_word(me, (uint32_t)(c % MELD_NET_SLOTS)), meld_net_stamp(e, c));
  }
  return true;
}

/* Sender `si` of ns: its items of both phases. */
MELD_DEV bool net_sender(meld_ctx_t *ctx, const coll_net_kargs_t *a, uint32_t si, uint32_t ns) {
  const int P = a->nranks, me = a->rank;
  uint64_t k = 0;
  for (int ph = 0; ph < (a->kind == NET_AR ? 2 : 1); ph++) {
    uint64_t maxn = 0;
    for (int q = 0; q < P; q++)
      if (q != me) maxn = max(maxn, ph == 0 ? net_tx1(a, q) : net_tx2(a));
    for (uint64_t j = 0; j < maxn; j++) {
      bool group = false;
      for (int i = 1; i < P; i++) {
        const int q = (me + i) % P;
        if (ph == 0 && j >= net_tx1(a, q)) continue;
        const bool shared = net_remote(a, q) && net_shared(a, ph);
        if (shared && group) continue;
        group = group || shared;
        if (k++ % ns != si) continue;
        if (!net_send_item(ctx, a, q, shared, ph, j)) return false;
      }
    }
  }
  return true;
}

/* ---- receiver ----------------------------------------------------------------------------- */

/* One thread: waits until q's chunk c is here. */
MELD_DEV bool net_wait_data(meld_ctx_t *ctx, const coll_net_kargs_t *a, int q, uint64_t c) {
  const uint64_t stamp = meld_net_stamp(ctx->epoch, c);
  const uint32_t word = meld_net_word(q, (uint32_t)(c % MELD_NET_SLOTS));
  if (!net_remote(a, q)) return meld_wait_signal(ctx, word, stamp, q, "net chunk (this node)");
  if (!meld_wait_ge(ctx, a->flags + word, stamp, meld_wait_info(MELD_REGION_OTHER, word, q, "net chunk (proxy)")))
    return false;
  /* Chunk 0 of a remote peer: its argument word came first on the same connection (the wait's
   * acquire covers it); a different call there fails both ranks (the same-node handshake's rule). */
  if (c != 0 || !a->argcheck) return true;
  const uint32_t aw = meld_net_args_word(a->nranks, ctx->epoch, q);
  const uint64_t w = ld_relaxed_sys_u64(a->flags + aw);
  if (w == meld_args_pack(ctx->epoch, a->arg_hash)) return true;
  /* (another call's word: its epoch differs, so the hashes printed may agree; the label says so) */
  const bool same_call = (uint32_t)(w >> 32) == (uint32_t)ctx->epoch;
  meld_fail(ctx, MELD_FAIL_ARGS,
            meld_wait_info(MELD_REGION_OTHER, aw, q, same_call ? "net arguments" : "net arguments: another call"),
            a->arg_hash, meld_args_hash(w), 0, 0u);
  return false;
}
/* Where q's chunk c lies here. */
MELD_DEV const uint8_t *net_in(const meld_ctx_t *ctx, const coll_net_kargs_t *a, int q, uint64_t c) {
  const uint32_t slot = (uint32_t)(c % MELD_NET_SLOTS);
  return net_remote(a, q) ? a->rcv + meld_net_slot(ctx->epoch, q, slot, a->nranks, a->block)
                          : a->ws + (uint64_t)meld_net_word(q, slot) * a->block;
}
/* One thread, after the CTA's barrier that followed its reads of q's chunk c: the credit. */
MELD_DEV void net_release(const meld_ctx_t *ctx, const coll_net_kargs_t *a, int q, uint64_t c) {
  if (!meld_net_credit_returned(c, net_nrx(a, q))) return;
  const uint32_t slot = (uint32_t)(c % MELD_NET_SLOTS);
  if (net_remote(a, q)) st_release_sys_u64(net_consumed(ctx, q, slot), meld_net_stamp(ctx->epoch, c));
  else meld_credit_put(ctx, q, meld_net_word(a->rank, slot), meld_net_stamp(ctx->epoch, c));
}

/* Receive item: q's chunk j of phase ph, copied where it goes. */
MELD_DEV bool net_recv_copy(meld_ctx_t *ctx, const coll_net_kargs_t *a, int q, int ph, uint64_t j) {
  meld_cta_shared_t *s = meld_cta_shared();
  const uint64_t c = ph == 0 ? j : net_rx1(a, q) + j;
  if (threadIdx.x == 0) s->ok = net_wait_data(ctx, a, q, c) ? 1u : 0u;
  if (!__syncthreads_and(s->ok)) return false;
  uint8_t *to = a->dst + (ph == 0 ? a->rx_off[q] : a->tx_off[q]) + j * a->block;
  copy_bytes(to, net_in(ctx, a, q, c), meld_net_chunk_len(ph == 0 ? a->rx_bytes[q] : a->tx_bytes[q], a->block, j),
             threadIdx.x, blockDim.x);
  __syncthreads();
  if (threadIdx.x == 0) net_release(ctx, a, q, c);
  return true;
}

/* Receive item of RS / AR phase 1: chunk j of the own part = the sum over q in rank order of q's
 * chunk j (own: own_src), fp32, rounded once. */
MELD_DEV bool net_recv_sum(meld_ctx_t *ctx, const coll_net_kargs_t *a, uint64_t j) {
  const int P = a->nranks, me = a->rank;
  meld_cta_shared_t *s = meld_cta_shared();
  __shared__ const uint8_t *srcs[MELD_COLL_MAX_RANKS];
  if (threadIdx.x == 0) {
    bool ok = true;
    for (int i = 1; ok && i < P; i++) ok = net_wait_data(ctx, a, (me + i) % P, j);
    s->ok = ok ? 1u : 0u;
  }
  for (int q = threadIdx.x; q < P; q += blockDim.x) srcs[q] = q == me ? a->own_src + j * a->block : net_in(ctx, a, q, j);
  if (!__syncthreads_and(s->ok)) return false;
  const uint64_t n = meld_net_chunk_len(a->own_bytes, a->block, j);
  const int es = a->dtype == COPY_BF16 ? 2 : 4;
  uint8_t *out = a->sum_out + j * a->block;
  const bool aligned = ((uintptr_t)srcs[me] | (uintptr_t)out) % 16 == 0; /* (slots are 256-aligned) */
  const uint64_t elems = n / (uint64_t)es, nvec = aligned ? n / 16 : 0;
  for (uint64_t i = threadIdx.x; i < nvec; i += blockDim.x) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int q = 0; q < P; q++) {
      const int4 v = __ldcv((const int4 *)srcs[q] + i);
      if (es == 2) acc_bf16x8(acc, v);
      else acc_f32x4(acc, v);
    }
    ((int4 *)out)[i] = pack_acc(acc, a->dtype);
  }
  for (uint64_t e = nvec * 16 / es + threadIdx.x; e < elems; e += blockDim.x) {
    float sum = 0.0f;
    for (int q = 0; q < P; q++)
      sum += es == 2 ? __bfloat162float(__ushort_as_bfloat16(__ldcv((const unsigned short *)srcs[q] + e)))
                     : __ldcv((const float *)srcs[q] + e);
    store_elem(out, e, sum, a->dtype);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    /* `reduced` BEFORE the credits: a credit lets peers send chunk j + S, which another CTA may
     * sum and mark; this store must not land after (and over) that one. */
    if (a->kind == NET_AR) /* for this rank's phase-2 senders (this GPU's memory) */
      st_release_sys_u64(net_reduced(ctx, (uint32_t)(j % MELD_NET_SLOTS)), meld_net_stamp(ctx->epoch, j));
    for (int q = 0; q < P; q++)
      if (q != me) net_release(ctx, a, q, j);
  }
  return true;
}

/* Receiver `ri` of nr: its items of both phases, then its share of the own block's copy. */
MELD_DEV bool net_receiver(meld_ctx_t *ctx, const coll_net_kargs_t *a, uint32_t ri, uint32_t nr) {
  const int P = a->nranks, me = a->rank;
  uint64_t k = 0;
  for (int ph = 0; ph < (a->kind == NET_AR ? 2 : 1); ph++) {
    if (ph == 0 && net_sum_kind(a)) {
      const uint64_t n = meld_net_chunks(a->own_bytes, a->block);
      for (uint64_t j = 0; j < n; j++)
        if (k++ % nr == ri && !net_recv_sum(ctx, a, j)) return false;
      continue;
    }
    uint64_t maxn = 0;
    for (int q = 0; q < P; q++)
      if (q != me) maxn = max(maxn, ph == 0 ? net_rx1(a, q) : net_rx2(a, q));
    for (uint64_t j = 0; j < maxn; j++)
      for (int i = 1; i < P; i++) {
        const int q = (me + P - i) % P;
        if (j >= (ph == 0 ? net_rx1(a, q) : net_rx2(a, q))) continue;
        if (k++ % nr == ri && !net_recv_copy(ctx, a, q, ph, j)) return false;
      }
  }
  if (a->own_dst) copy_bytes(a->own_dst, a->own_src, a->own_bytes, ri * blockDim.x + threadIdx.x, nr * blockDim.x);
  return true;
}

/* ---- feeder ------------------------------------------------------------------------------- */

/* The feeder's enqueue: a WRITE of `bytes` (0: flag only) to rank q with its flag, into the
 * ring's next slot if one is free (tail re-read only when the ring looks full). Called after
 * the relaxed load that saw the staged / consumed word: the acquire fence here orders what that
 * word published (the staged bytes, the receiver's reads) before the command. Not published
 * until the caller's release of head. */
MELD_DEV bool net_enqueue(const coll_net_kargs_t *a, meld_cmdring_hdr_t *ring, uint64_t *head, uint64_t *tail, int q,
                          uint32_t flag_index, uint64_t src_off, uint64_t dst_off, uint64_t bytes, uint64_t value) {
  if (meld_cmdring_full(*head, *tail, a->nslots)) *tail = ld_acquire_sys_u64(&ring->tail);
  if (meld_cmdring_full(*head, *tail, a->nslots)) return false;
  fence_acquire_sys();
  meld_cmd_t *cmd = meld_cmdring_cmds(ring) + meld_cmdring_slot(*head, a->nslots);
  cmd->opcode = MELD_CMD_WRITE;
  cmd->src_region = (uint16_t)a->region_send;
  cmd->dst_region = (uint16_t)a->region_recv;
  cmd->flag_region = (uint16_t)a->region_flags;
  cmd->dst_rank = q;
  cmd->flag_index = flag_index;
  cmd->src_offset = src_off;
  cmd->dst_offset = dst_off;
  cmd->bytes = bytes;
  cmd->flag_value = value;
  cmd->seq = *head;
  cmd->reserved = 0;
  ++*head;
  return true;
}

/* One thread: every remote peer's chunks and credits into the ring, in whatever order they
 * become ready. */
MELD_DEV bool net_feeder(meld_ctx_t *ctx, const coll_net_kargs_t *a) {
  const int P = a->nranks, me = a->rank;
  const uint64_t e = ctx->epoch;
  __shared__ uint64_t tx_next[MELD_COLL_MAX_RANKS], cr_next[MELD_COLL_MAX_RANKS];
  __shared__ uint8_t args_sent[MELD_COLL_MAX_RANKS];
  for (int q = 0; q < P; q++) tx_next[q] = cr_next[q] = 0, args_sent[q] = !a->argcheck;
  meld_cmdring_hdr_t *ring = a->ring;
  uint64_t head = ld_relaxed_sys_u64(&ring->head); /* (this GPU is the ring's one producer) */
  uint64_t tail = ld_acquire_sys_u64(&ring->tail);
  const uint32_t *abort_word = meld_abort_word(ctx->p);
  uint64_t last_progress = globaltimer_ns();
  int stuck_q = -1;
  const char *stuck_what = "";
  for (uint32_t pass = 1;; pass++) {
    bool all = true;
    const uint64_t head0 = head;
    for (int i = 1; i < P; i++) {
      const int q = (me + i) % P;
      if (!net_remote(a, q)) continue;
      /* first this call's argument word to q (flag only), so that it precedes every chunk */
      if (!args_sent[q]) {
        all = false;
        if (!net_enqueue(a, ring, &head, &tail, q, meld_net_args_word(P, e, me), 0, 0, 0, meld_args_pack(e, a->arg_hash))) {
          stuck_q = q, stuck_what = "net feeder: room in the proxy's ring";
          continue;
        }
        args_sent[q] = 1;
      }
      /* the next chunk toward q, once staged */
      const uint64_t c = tx_next[q];
      if (c < net_ntx(a, q)) {
        all = false;
        const int ph = c < net_tx1(a, q) ? 0 : 1;
        const bool shared = net_shared(a, ph);
        const uint64_t j = ph == 0 ? c : c - net_tx1(a, q);    /* the shared staging's chunk */
        const uint32_t sslot = (uint32_t)((shared ? j : c) % MELD_NET_SLOTS);
        const int row = shared ? me : q;
        if (ld_relaxed_sys_u64(net_staged(ctx, row, sslot)) >= meld_net_stamp(e, shared ? j : c)) {
          const uint64_t n = ph == 0 ? meld_net_chunk_len(a->tx_bytes[q], a->block, j)
                                     : meld_net_chunk_len(a->own_bytes, a->block, j);
          const uint32_t slot = (uint32_t)(c % MELD_NET_SLOTS);
          if (net_enqueue(a, ring, &head, &tail, q, meld_net_word(me, slot), meld_net_slot(e, row, sslot, P, a->block),
                          meld_net_slot(e, me, slot, P, a->block), n, meld_net_stamp(e, c)))
            tx_next[q] = c + 1;
        } else {
          stuck_q = q, stuck_what = "net feeder: a chunk to stage";
        }
      }
      /* the next credit owed to q, once its chunk is consumed */
      const uint64_t r = cr_next[q], nrx = net_nrx(a, q);
      if (meld_net_credit_returned(r, nrx)) {
        all = false;
        const uint32_t slot = (uint32_t)(r % MELD_NET_SLOTS);
        if (ld_relaxed_sys_u64(net_consumed(ctx, q, slot)) >= meld_net_stamp(e, r)) {
          if (net_enqueue(a, ring, &head, &tail, q, meld_net_words(P) + meld_net_word(me, slot), 0, 0, 0,
                          meld_net_stamp(e, r))) /* (flag only) */
            cr_next[q] = r + 1;
        } else {
          stuck_q = q, stuck_what = "net feeder: a chunk to consume";
        }
      }
    }
    if (head != head0) {
      st_release_sys_u64(&ring->head, head); /* the commands (and what they name) before head */
      last_progress = globaltimer_ns();
    }
    if (all) return true;
    if (pass % MELD_WAIT_CHECK_EVERY == 0) {
      uint32_t ab = ld_relaxed_sys_u32(abort_word);
      if (!ab && (ab = ld_relaxed_sys_u32(ctx->p->host_abort)) != 0u) meld_raise_abort(ctx->p, ab);
      const uint64_t now = globaltimer_ns(), waited = now - last_progress;
      const uint32_t status = ld_relaxed_sys_u32(&ring->status);
      if (ab || status) {
        fence_acq_rel_sys();
        if (status && !ab) meld_raise_abort(ctx->p, meld_abort_code(MELD_ABORT_TIMEOUT, me));
        meld_fail(ctx, MELD_FAIL_ABORTED,
                  meld_wait_info(MELD_REGION_OTHER, 0u, stuck_q, status ? "net proxy failed (meld_comm_check)" : stuck_what),
                  0, status, waited, ab);
        return false;
      }
      if (waited > ctx->p->timeout_ns) {
        meld_fail(ctx, MELD_FAIL_TIMEOUT, meld_wait_info(MELD_REGION_OTHER, 0u, stuck_q, stuck_what), 0, 0, waited, 0u);
        return false;
      }
      nanosleep_ns(MELD_WAIT_SLEEP_NS);
    }
  }
}

__global__ void __launch_bounds__(NET_THREADS, 1) coll_net_kernel(const __grid_constant__ meld_proto_dev_t proto,
                                                                  const __grid_constant__ coll_net_kargs_t a) {
  meld_ctx_t ctx;
  if (meld_call_begin(&ctx, &proto, a.op_id, a.arg_hash, gridDim.x)) {
    const uint32_t roles = gridDim.x - 1u, ns = roles / 2u, nr = roles - ns;
    bool ok = true;
    if (blockIdx.x == 0) {
      if (threadIdx.x == 0) ok = net_feeder(&ctx, &a);
    } else if (blockIdx.x <= ns) {
      ok = net_sender(&ctx, &a, blockIdx.x - 1u, ns);
    } else {
      ok = net_receiver(&ctx, &a, blockIdx.x - 1u - ns, nr);
    }
    if (!ok) ctx.failed = 1;
  }
  meld_call_end(&ctx);
}

/* ---- host side ------------------------------------------------------------------------------ */

static const uint32_t g_net_op_ids[MELD_COLL_NUM_OPS] = {MELD_OP_ALL_GATHER, MELD_OP_REDUCE_SCATTER,
                                                         MELD_OP_ALL_REDUCE, MELD_OP_ALL_TO_ALL};

/* The one launch of a call. */
static meld_result_t net_launch(meld_comm_t comm, const char *fn, const meld_coll_args_t *ca, coll_net_kargs_t *k,
                                uint64_t ar_part, cudaStream_t stream) {
  const meld_net_t *net = comm->net;
  const int P = k->nranks;
  /* The chunks of one pair's stream in one call must fit a stamp's seq field. Decided from
   * sizes every rank shares (all-reduce: twice its part; the others: the per-rank block), so that
   * every rank refuses alike; an all_to_allv's counts are known to the two ranks of a pair only. */
  for (int q = 0; q < P; q++) {
    const uint64_t most = k->kind == NET_AR ? 2 * meld_net_chunks(ar_part, net->block)
                                            : meld_net_chunks(k->tx_bytes[q] > k->rx_bytes[q] ? k->tx_bytes[q]
                                                                                              : k->rx_bytes[q],
                                                              net->block);
    if (most > MELD_NET_MAX_CHUNKS)
      return meld_error(MELD_ERR_UNSUPPORTED,
                        "%s: the bytes between rank %d and %d take %llu chunks of MELD_NET_CHUNK_BYTES = %llu in one "
                        "call (at most %llu); raise MELD_NET_CHUNK_BYTES",
                        fn, k->rank, q, (unsigned long long)most, (unsigned long long)net->block,
                        (unsigned long long)MELD_NET_MAX_CHUNKS);
  }
  int grid = 0;
  MELD_CHECK(meld_coop_grid((const void *)coll_net_kernel, NET_THREADS, 0, 1 + 2 * NET_MAX_ROLE_CTAS,
                            comm->sm_count, &grid));
  if (grid < 3)
    return meld_error(MELD_ERR_UNSUPPORTED, "%s: the inter-node kernel needs 3 co-resident CTAs; %d fit", fn, grid);
  /* Same-node peers check that they run the same call: op, kind, dtype, sizes (the per-peer
   * counts of an all-to-allv differ by rank: only their presence is hashed). */
  uint64_t h = meld_hash_init();
  h = meld_hash_u64(h, k->op_id);
  h = meld_hash_u64(h, (uint64_t)k->kind);
  h = meld_hash_u64(h, (uint64_t)k->dtype);
  h = meld_hash_u64(h, ca->vector ? ~0ull : (uint64_t)ca->count);
  if (ca->op == MELD_COLL_ALL_TO_ALL && !ca->vector) h = meld_hash_u64(h, ca->send_counts[0]);
  /* Ranks of other nodes check the same hash on each pair's first chunk (meld_net_args_word),
   * unless MELD_NET_ARG_CHECK=0 (read once at init, on only where every rank asks for it). */
  k->argcheck = net->argcheck;
  k->arg_hash = meld_hash_fold(h);
  meld_proto_dev_t proto = meld_proto_dev(comm);
  void *kargs[] = {&proto, k};
  meld_result_t r = meld_launch_coop((const void *)coll_net_kernel, grid, NET_THREADS, 0, kargs, stream);
  if (r != MELD_OK) meld_error_prefix("%s (inter-node path)", fn);
  return r;
}

/* ---- the hierarchy (comm.h: hier_node, hier_rail) ------------------------------------------ *
 * Ranks are numbered node by node (r = node * L + local); the bytes that cross nodes are
 * reduced (or gathered) within the node first, so each crosses once per node pair instead of
 * once per remote rank: L times fewer than the flat path. Each step is one call of the child
 * comms (one kernel each, stream-ordered); the permutations are strided copies.
 *   all_reduce (count % L == 0): reduce_scatter within the node into recv's part `local`,
 *     all_reduce of that part across the nodes (rail), all_gather within the node in place.
 *   reduce_scatter: send permuted to [local][node] blocks, reduce_scatter of node * count
 *     elements within the node, then of count across the nodes.
 *   all_gather: all_gather across the nodes ([node] blocks), then within the node
 *     ([local][node]), then permuted into recv's [node][local] order.
 * Sums: within the node in local order, then over the nodes in node order, each in fp32 and
 * rounded once to the dtype per step (a bf16 sum is rounded after the node step too). */
static meld_result_t net_copy2d(const char *fn, uint8_t *dst, const uint8_t *src, meld_copy2d_t c, cudaStream_t stream) {
  if (cudaMemcpy2DAsync(dst + c.dst_off, c.dpitch, src + c.src_off, c.spitch, c.width, c.height,
                        cudaMemcpyDeviceToDevice, stream) == cudaSuccess)
    return MELD_OK;
  return meld_error(MELD_ERR_CUDA, "%s: a strided copy failed: %s", fn, cudaGetErrorString(cudaGetLastError()));
}

static meld_result_t net_hier(meld_comm_t comm, const char *fn, const meld_coll_args_t *a, cudaStream_t stream,
                              int *done) {
  *done = 0;
  meld_comm_t nc = comm->hier_node, rc = comm->hier_rail;
  const int L = comm->local_size, Nn = comm->nnodes, lr = comm->local_rank;
  const size_t es = meld_coll_dtype_bytes(a->dtype);
  const uint8_t *send = (const uint8_t *)a->send;
  uint8_t *recv = (uint8_t *)a->recv;
  const char *instead = "make one call of this size outside capture first, or set MELD_NET_HIER=0";
  /* The strided copies' row pitch is L blocks; cudaMemcpy2DAsync refuses pitches past the
   * device's (2^31 - 1 bytes): the flat path then (the same decision on every rank). */
  if ((a->op == MELD_COLL_REDUCE_SCATTER || a->op == MELD_COLL_ALL_GATHER) &&
      (uint64_t)L * a->count * es > (uint64_t)INT32_MAX)
    return MELD_OK;
  meld_result_t r = MELD_OK;
  switch (a->op) {
  case MELD_COLL_ALL_REDUCE: {
    if (a->count % (size_t)L != 0) return MELD_OK; /* (the flat path) */
    const size_t part = a->count / (size_t)L;
    uint8_t *mine = recv + (size_t)lr * part * es;
    if ((r = meld_reduce_scatter(nc, send, mine, part, a->dtype, stream)) == MELD_OK &&
        (r = meld_all_reduce(rc, mine, mine, part, a->dtype, stream)) == MELD_OK)
      r = meld_all_gather(nc, mine, recv, part, a->dtype, stream);
    break;
  }
  case MELD_COLL_REDUCE_SCATTER: {
    const size_t c = a->count, blk = c * es;
    uint8_t *s1 = NULL;
    MELD_CHECK(meld_comm_scratch_slot(comm, MELD_SCRATCH_NET, fn, instead, (size_t)(L + 1) * Nn * blk, stream,
                                      (void **)&s1));
    uint8_t *s2 = s1 + (size_t)L * Nn * blk;
    for (int l = 0; l < L && r == MELD_OK; l++) r = net_copy2d(fn, s1, send, meld_hier_rs_perm(l, L, Nn, blk), stream);
    if (r == MELD_OK && (r = meld_reduce_scatter(nc, s1, s2, (size_t)Nn * c, a->dtype, stream)) == MELD_OK)
      r = meld_reduce_scatter(rc, s2, recv, c, a->dtype, stream);
    break;
  }
  case MELD_COLL_ALL_GATHER: {
    const size_t c = a->count, blk = c * es;
    uint8_t *s1 = NULL;
    MELD_CHECK(meld_comm_scratch_slot(comm, MELD_SCRATCH_NET, fn, instead, (size_t)(L + 1) * Nn * blk, stream,
                                      (void **)&s1));
    uint8_t *s2 = s1 + (size_t)Nn * blk;
    if ((r = meld_all_gather(rc, send, s1, c, a->dtype, stream)) == MELD_OK &&
        (r = meld_all_gather(nc, s1, s2, (size_t)Nn * c, a->dtype, stream)) == MELD_OK)
      for (int l = 0; l < L && r == MELD_OK; l++) r = net_copy2d(fn, recv, s2, meld_hier_ag_perm(l, L, Nn, blk), stream);
    break;
  }
  default:
    return MELD_OK; /* all_to_all(v): the flat path (nothing to combine on the way) */
  }
  *done = 1;
  if (r != MELD_OK) meld_error_prefix("%s (hierarchical, %d nodes x %d ranks)", fn, Nn, L);
  return r;
}

extern "C" meld_result_t meld_coll_net_run(meld_comm_t comm, const char *fn, const meld_coll_args_t *a,
                                           cudaStream_t stream) {
  const meld_net_t *net = comm->net;
  const int P = comm->nranks, me = comm->rank;
  if (P > MELD_COLL_MAX_RANKS)
    return meld_error(MELD_ERR_UNSUPPORTED, "%s: %d ranks; the inter-node path handles up to %d", fn, P,
                      MELD_COLL_MAX_RANKS);
  if (!net)
    return meld_error(MELD_ERR_INTERNAL, "%s: the comm spans %d nodes but has no inter-node path", fn, comm->nnodes);
  MELD_CHECK(meld_proto_sticky_error(comm, fn)); /* (as the intra-node entry: a failed comm says so) */
  if (comm->hier_node && comm->hier_rail) {
    int done = 0;
    const meld_result_t r = net_hier(comm, fn, a, stream, &done);
    if (done || r != MELD_OK) return r;
  }
  /* (the flat path only: the hierarchy's steps run on its own comms) */
  const uint64_t ws_need = (uint64_t)meld_net_words(P) * net->block;
  if (comm->local_size > 1 && comm->workspace.bytes < ws_need)
    return meld_error(MELD_ERR_OUT_OF_MEMORY,
                      "%s: the inter-node path needs %llu bytes of workspace for %d ranks with same-node peers "
                      "(MELD_WORKSPACE_BYTES is %zu; or lower MELD_NET_CHUNK_BYTES, now %llu)",
                      fn, (unsigned long long)ws_need, P, comm->workspace.bytes, (unsigned long long)net->block);
  coll_net_kargs_t k; /* (3 KB) */
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
  meld_net_sizes_t sz;
  if (meld_net_sizes(a, P, me, &sz) != 0) return meld_error(MELD_ERR_INTERNAL, "%s: unknown collective %d", fn, (int)a->op);
  k.kind = sz.kind;
  k.src = send;
  k.dst = recv;
  memcpy(k.tx_off, sz.tx_off, sizeof k.tx_off);
  memcpy(k.tx_bytes, sz.tx_bytes, sizeof k.tx_bytes);
  memcpy(k.rx_off, sz.rx_off, sizeof k.rx_off);
  memcpy(k.rx_bytes, sz.rx_bytes, sizeof k.rx_bytes);
  k.own_bytes = sz.own_bytes;
  k.own_src = send + sz.own_src;
  if (sz.kind == NET_AG || sz.kind == NET_A2A)
    k.own_dst = sz.kind == NET_AG && send == recv + sz.own_dst ? NULL : recv + sz.own_dst; /* (NULL: in place) */
  else
    k.sum_out = recv + sz.sum_out;
  return net_launch(comm, fn, a, &k, sz.part, stream);
}
