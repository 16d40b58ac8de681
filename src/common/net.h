/* net.h — the inter-node path's staging layout, chunk arithmetic and flag words, in plain C shared
 * by the host (src/host/net.c, the collectives' launch), the device (src/ops/coll_net.cu) and CPU
 * tests (tests/unit/test_net_plan.c). DESIGN.md section 6.
 *
 * One collective call is ONE kernel. Between every ordered pair of ranks (me -> q) it moves a
 * STREAM of chunks c = 0, 1, ... of at most `block` bytes each (at least one chunk per pair, maybe
 * empty: the reuse argument below needs every pair to exchange something every call). Chunk c
 * lives in ring slot c % S (S = MELD_NET_SLOTS) of the pair; its data stamp is stamp(e, c + 1)
 * (e = the call's epoch) in a per-(sender, slot) word at the receiver, and once the receiver has
 * read it, it returns a credit stamp(e, c + 1) in a per-(receiver, slot) word at the sender, which
 * waits for it before writing chunk c + S into the slot (meld_net_credit_needed). Chunks are
 * published per slot, so they may complete out of order.
 *
 * A multi-node comm owns, per rank, in host-pinned memory mapped into the GPU:
 *   - send staging [2 parities][nranks][S][block]: chunks this rank's kernel stages for ranks of
 *     other nodes (the proxy's source bytes). Slot row `rank` (never a destination) holds chunks
 *     that every remote peer is sent alike (an all-gather's block): staged once;
 *   - recv staging [2 parities][nranks][S][block]: where rank q's chunks land (row q; written by
 *     this rank's proxy receiver, read by this rank's kernel);
 *   - flags u64 [2][nranks][S]: [0][q][s] the data stamp of q's chunk in slot s (release-stored
 *     by the receiving proxy after the bytes), [1][q][s] q's credit for this rank's slot s; then
 *     u64 [2 parities][nranks]: q's call's (epoch, argument hash) (meld_net_args_word); the kernel
 *     polls them over PCIe;
 *   - the proxy's command ring (src/common/proxy_ring.h), written by the kernel's feeder.
 * Same-node peers exchange through the workspace ([nranks][S][block]: row q holds q's chunks) and
 * the pad's signal (data) and credit slots (index q * S + s), as the intra-node engines do.
 *
 * Reuse across calls. A call's first S chunks of a pair need no credit. Same-node: the entry
 * handshake proves the peers finished the previous call. Other nodes: the staging slots of call e
 * are those of parity e & 1. A rank sends its call-e chunks only from inside call e, after its
 * call e-1 returned, and call e-1 waited for every peer's call-(e-1) chunks, which each peer sent
 * only after its own call e-2 had returned (and all its reads of it were done). So when call-e
 * chunks from q arrive, q has finished with the parity-of-e slots of call e-2; a rank is never
 * two calls ahead of a peer it exchanges with. Stamps only grow, so no word is ever reset. */
#ifndef MELD_COMMON_NET_H
#define MELD_COMMON_NET_H

#include <stdint.h>

#include "proto.h" /* MELD_HD, meld_stamp */

#ifdef __cplusplus
extern "C" {
#endif

#define MELD_NET_BLOCK_MIN ((uint64_t)4 << 10)     /* MELD_NET_CHUNK_BYTES bounds            */
#define MELD_NET_BLOCK_MAX ((uint64_t)64 << 20)
#define MELD_NET_BLOCK_DEFAULT ((uint64_t)256 << 10)
#define MELD_NET_RING_SLOTS 256u
#define MELD_NET_SLOTS 4u /* ring slots per ordered pair (S): chunks in flight per pair       */
/* Most chunks one pair's stream may have in one call (its stamps' seq field holds c + 1). */
#define MELD_NET_MAX_CHUNKS ((uint64_t)MELD_STAMP_SEQ_MAX - 1u)

/* Bytes of one rank's send (or recv) staging. */
MELD_HD uint64_t meld_net_stage_bytes(int nranks, uint64_t block) {
  return 2ull * (uint64_t)nranks * MELD_NET_SLOTS * block;
}
/* Offset of the (parity of epoch, row, slot) staging slot. */
MELD_HD uint64_t meld_net_slot(uint64_t epoch, int row, uint32_t slot, int nranks, uint64_t block) {
  return (((epoch & 1ull) * (uint64_t)nranks + (uint64_t)row) * MELD_NET_SLOTS + slot) * block;
}
/* Index of the (row, slot) word in one half of the flags, in the pad's signal / credit slots and
 * in the workspace's rows (times block). */
MELD_HD uint32_t meld_net_word(int row, uint32_t slot) { return (uint32_t)row * MELD_NET_SLOTS + slot; }
/* Words of one half of the flags. */
MELD_HD uint32_t meld_net_words(int nranks) { return (uint32_t)nranks * MELD_NET_SLOTS; }
/* The argument check across nodes: after the two halves, one word per (parity of the epoch,
 * sender q) holding q's call's (epoch, argument hash) (meld_args_pack), written by q's feeder to
 * every remote peer before q's first chunk to it in that call: the pair's connection delivers it
 * first, so a receiver that saw chunk 0's stamp compares it with its own call's. By parity, as
 * the staging: q may be one call ahead (its call e + 1's word must not overwrite call e's before
 * this rank read it), never two (q starts call e + 2 only after its call e + 1 received this
 * rank's call-(e + 1) chunk 0, sent after this rank's call e ended). Index of q's word for call
 * `epoch`, and the flags' words in all. */
MELD_HD uint32_t meld_net_args_word(int nranks, uint64_t epoch, int q) {
  return 2u * meld_net_words(nranks) + (uint32_t)(epoch & 1ull) * (uint32_t)nranks + (uint32_t)q;
}
MELD_HD uint32_t meld_net_flag_words(int nranks) { return 2u * meld_net_words(nranks) + 2u * (uint32_t)nranks; }
/* Chunks of a pair's stream for `bytes` (at least one, maybe empty). */
MELD_HD uint64_t meld_net_chunks(uint64_t bytes, uint64_t block) {
  return bytes == 0 ? 1 : (bytes - 1) / block + 1;
}
/* Bytes of chunk j of a piece of `bytes` (0 past its end). */
MELD_HD uint64_t meld_net_chunk_len(uint64_t bytes, uint64_t block, uint64_t j) {
  const uint64_t c0 = j * block;
  return c0 >= bytes ? 0 : (bytes - c0 < block ? bytes - c0 : block);
}
/* Stamp of stream chunk c of call `epoch` (its data word; the credit for it holds the same). */
MELD_HD uint64_t meld_net_stamp(uint64_t epoch, uint64_t c) { return meld_stamp(epoch, (uint32_t)(c + 1u)); }
/* The credit stamp the sender must see before writing chunk c; 0: none needed (c < S). */
MELD_HD uint64_t meld_net_credit_needed(uint64_t epoch, uint64_t c) {
  return c < MELD_NET_SLOTS ? 0 : meld_net_stamp(epoch, c - MELD_NET_SLOTS);
}
/* 1 if the receiver returns a credit for chunk c of a stream of n chunks (only chunks that a
 * later chunk of the same call will wait for: c + S < n). */
MELD_HD int meld_net_credit_returned(uint64_t c, uint64_t n) { return c + MELD_NET_SLOTS < n; }
/* Bytes of all-reduce part q: parts of `part` bytes over `total`, the last ones shorter or empty. */
MELD_HD uint64_t meld_net_part_len(uint64_t part, uint64_t total, int q) {
  const uint64_t start = (uint64_t)q * part;
  return start >= total ? 0 : (total - start < part ? total - start : part);
}
/* ---- one call's streams (what every rank computes alike for the pairs it is in) ---------- */

/* What a call does per pair (src/ops/coll_net.cu): copy (all-gather: the own block to every
 * peer; all-to-all(v): a piece per peer), sum (reduce-scatter), or sum then copy (all-reduce:
 * phase 1 reduces the parts, phase 2 gathers the reduced parts, one stream per pair). */
enum { MELD_NET_AG = 0, MELD_NET_A2A = 1, MELD_NET_RS = 2, MELD_NET_AR = 3 };

/* Chunks of the stream toward q: phase 1's piece (tx_bytes_q) and, for an all-reduce, phase 2's
 * (the own part, own_bytes). */
MELD_HD uint64_t meld_net_ntx(int kind, uint64_t tx_bytes_q, uint64_t own_bytes, uint64_t block) {
  return meld_net_chunks(tx_bytes_q, block) + (kind == MELD_NET_AR ? meld_net_chunks(own_bytes, block) : 0);
}
/* Chunks of the stream from q: phase 1's (rx_bytes_q) and, for an all-reduce, q's part
 * (tx_bytes_q: the part this rank sends q in phase 1 is q's part). */
MELD_HD uint64_t meld_net_nrx(int kind, uint64_t rx_bytes_q, uint64_t tx_bytes_q, uint64_t block) {
  return meld_net_chunks(rx_bytes_q, block) + (kind == MELD_NET_AR ? meld_net_chunks(tx_bytes_q, block) : 0);
}

/* ---- the hierarchy (coll_net.cu net_hier): ranks numbered node by node, r = node * L + local */

/* One strided copy: `height` rows of `width` bytes from src + src_off (row pitch spitch) to
 * dst + dst_off (row pitch dpitch) (cudaMemcpy2DAsync's arguments). */
typedef struct {
  uint64_t dst_off, dpitch, src_off, spitch, width, height;
} meld_copy2d_t;
/* reduce_scatter, copy l < L: send's blocks (of blk bytes) for ranks n * L + l, n < Nn, into
 * row l of the [local][node] scratch. */
MELD_HD meld_copy2d_t meld_hier_rs_perm(int l, int L, int Nn, uint64_t blk) {
  meld_copy2d_t c = {(uint64_t)l * (uint64_t)Nn * blk, blk, (uint64_t)l * blk, (uint64_t)L * blk, blk, (uint64_t)Nn};
  return c;
}
/* all_gather, copy l < L: row l of the [local][node] scratch to recv's blocks n * L + l. */
MELD_HD meld_copy2d_t meld_hier_ag_perm(int l, int L, int Nn, uint64_t blk) {
  meld_copy2d_t c = {(uint64_t)l * blk, (uint64_t)L * blk, (uint64_t)l * (uint64_t)Nn * blk, blk, blk, (uint64_t)Nn};
  return c;
}
/* 1 if the ranks are numbered node by node, L on every node (rank_node[r] == r / L,
 * rank_local[r] == r % L; L = 1: rank r on node r). */
MELD_HD int meld_node_by_node(const int *rank_node, const int *rank_local, int nranks, int L) {
  if (L < 1 || nranks % L != 0) return 0;
  for (int r = 0; r < nranks; r++)
    if (rank_node[r] != r / L || rank_local[r] != r % L) return 0;
  return 1;
}
/* 1 if the hierarchy applies to a layout: several nodes of L > 1 ranks each, numbered node by
 * node. */
MELD_HD int meld_hier_layout(const int *rank_node, const int *rank_local, int nranks, int L) {
  return L >= 2 && nranks / L >= 2 && meld_node_by_node(rank_node, rank_local, nranks, L);
}

/* 1 if `block` is a legal staging block: in [MIN, MAX] and a multiple of 256 bytes (every
 * slot then keeps the 16-byte alignment the vector loops want, and a 64-byte line per slot). */
MELD_HD int meld_net_block_valid(uint64_t block) {
  return block >= MELD_NET_BLOCK_MIN && block <= MELD_NET_BLOCK_MAX && block % 256 == 0;
}

#ifdef __cplusplus
}
#endif

#endif
