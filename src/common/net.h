/* net.h — the inter-node path's staging layout and launch arithmetic, in plain C shared by the
 * host (src/host/net.c, the collectives' launch), the device (the net kernel in
 * src/ops/collectives.cu) and CPU tests (tests/unit/test_net_plan.c). DESIGN.md section 6.
 *
 * A multi-node comm owns, per rank, in host-pinned memory mapped into the GPU:
 *   - send staging [2 parities][nranks][block]: what this rank's kernel writes for rank q of
 *     another node (the proxy's source bytes; an all-gather writes one block, [parity][0], that
 *     every remote peer is sent),
 *   - recv staging [2 parities][nranks][block]: where rank q's bytes land (written by this
 *     rank's proxy receiver, read by this rank's kernel),
 *   - flags u64 [nranks]: flag q holds the stamp of q's latest data (release-stored by the
 *     receiver after the bytes; the kernel polls it over PCIe),
 *   - the proxy's command ring (src/common/proxy_ring.h), written by the kernel.
 * Same-node peers exchange through the workspace ([nranks][block] at offset 0: slot q holds
 * q's block) and signal slots of the pad, as the intra-node engines do.
 *
 * Reuse without credits. Every net launch is one call (one epoch); parity = epoch & 1. A rank
 * sends its call-e bytes only from inside call e, after its call e-1 returned, and call e-1
 * waited for every peer's call-(e-1) bytes, which each peer sent only after its own call e-2
 * had returned. So when call-e bytes from q arrive, q has finished reading (and sending from)
 * the parity-of-e slots of call e-2; a rank is never two calls ahead of a peer whose bytes it
 * needs. Same-node slots need no parity: every call's entry handshake proves the peers
 * finished the previous call.
 *
 * A call whose blocks exceed `block` bytes is cut into launches of one block each (on every
 * rank alike: the block size and the counts agree). */
#ifndef MELD_COMMON_NET_H
#define MELD_COMMON_NET_H

#include <stdint.h>

#include "proto.h" /* MELD_HD */

#ifdef __cplusplus
extern "C" {
#endif

#define MELD_NET_BLOCK_MIN ((uint64_t)4 << 10)     /* MELD_NET_CHUNK_BYTES bounds            */
#define MELD_NET_BLOCK_MAX ((uint64_t)256 << 20)
#define MELD_NET_BLOCK_DEFAULT ((uint64_t)1 << 20)
#define MELD_NET_RING_SLOTS 256u

/* Bytes of one rank's send (or recv) staging. */
MELD_HD uint64_t meld_net_stage_bytes(int nranks, uint64_t block) { return 2ull * (uint64_t)nranks * block; }
/* Offset of the (parity of epoch, peer) slot in a staging. */
MELD_HD uint64_t meld_net_slot(uint64_t epoch, int peer, int nranks, uint64_t block) {
  return ((epoch & 1ull) * (uint64_t)nranks + (uint64_t)peer) * block;
}
/* Launches for per-peer blocks of `bytes` (0 bytes: none). */
MELD_HD uint64_t meld_net_launches(uint64_t bytes, uint64_t block) {
  return bytes == 0 ? 0 : (bytes - 1) / block + 1;
}
/* Bytes [*c0, *c0 + *len) of every block handled by launch i. */
MELD_HD void meld_net_launch_range(uint64_t bytes, uint64_t block, uint64_t i, uint64_t *c0, uint64_t *len) {
  *c0 = i * block;
  *len = *c0 >= bytes ? 0 : (bytes - *c0 < block ? bytes - *c0 : block);
}
/* Bytes of block q's piece in the launch that handles bytes [c0, c0 + len) of every block, where
 * block q is [q * blk, min((q + 1) * blk, total)) (the last blocks of an all-reduce's parts may
 * be shorter, or empty). */
MELD_HD uint64_t meld_net_piece(uint64_t blk, uint64_t total, uint64_t c0, uint64_t len, int q) {
  const uint64_t start = (uint64_t)q * blk;
  const uint64_t blen = start >= total ? 0 : (total - start < blk ? total - start : blk);
  return c0 >= blen ? 0 : (blen - c0 < len ? blen - c0 : len);
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
