/* proxy_ring.h — the proxy's command ring: layout and index arithmetic in plain C, shared by
 * the host proxy (src/host/proxy.c), host producers, CPU tests, and (later) device producers.
 *
 * One ring has ONE producer (a host thread today; later one GPU thread, e.g. a comm CTA's
 * leader) and ONE consumer (the proxy thread). It lives in host memory; later host-pinned and
 * device-mapped (cudaHostAlloc(..., cudaHostAllocMapped)), so the layout below is plain
 * integers (no C11 _Atomic: CUDA cannot include it) with explicit padding, the same bytes
 * seen from C, C++ and CUDA. Every word is accessed with atomic loads/stores on the host
 * (__atomic builtins) and would be accessed with ld.acquire.sys / st.release.sys on the GPU.
 *
 * Indices are free-running 64-bit counters (never reset, never masked when stored): command k
 * lives in slot k & (nslots - 1). `head - tail` is the number of commands written and not
 * yet consumed; unsigned subtraction keeps it right across 2^64 wrap-around.
 *
 * Protocol (the ordering argument):
 *   producer: wait until head - tail < nslots (a credit: the slot's previous command was
 *             consumed: reading `tail` with acquire orders our overwrite after the proxy's
 *             reads of that slot) -> write the 64-byte command with ordinary stores, seq =
 *             its index -> release-store head = k + 1 (the command's bytes, and the source
 *             data the producer wrote before, are visible to whoever acquires head >= k + 1).
 *   proxy:    acquire-load head -> read command tail (checks seq == tail: a producer that
 *             published head before writing the command is caught, not obeyed) -> hand it to
 *             the transport -> release-store tail + 1 (the slot may be overwritten).
 *             `done` (release) counts commands whose source bytes the transport no longer
 *             reads (local completion): the producer may then reuse its source staging.
 *             `status` (release) becomes a nonzero meld_result_t when the proxy fails (sticky):
 *             a producer waiting for a credit stops waiting. */
#ifndef MELD_COMMON_PROXY_RING_H
#define MELD_COMMON_PROXY_RING_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h" /* MELD_HD */

#ifdef __cplusplus
extern "C" {
#endif

#define MELD_CMD_BYTES 64u
#define MELD_CMDRING_MIN_SLOTS 2u
#define MELD_CMDRING_MAX_SLOTS (1u << 20)
#define MELD_REGION_NONE 0xffffu /* flag_region of a write that raises no flag */

enum { MELD_CMD_NOP = 0, MELD_CMD_WRITE = 1 };

/* One command: 64 bytes, naturally aligned, no implicit padding. */
typedef struct {
  uint16_t opcode;      /* MELD_CMD_WRITE (MELD_CMD_NOP is consumed and ignored)              */
  uint16_t src_region;  /* local registered region holding the source bytes                  */
  uint16_t dst_region;  /* region id at dst_rank the bytes go to                              */
  uint16_t flag_region; /* region id at dst_rank of the flag, or MELD_REGION_NONE              */
  int32_t dst_rank;
  uint32_t flag_index;  /* u64 slot of the flag: byte offset flag_index * 8 in flag_region     */
  uint64_t src_offset;  /* in src_region                                                       */
  uint64_t dst_offset;  /* in dst_region at dst_rank                                           */
  uint64_t bytes;       /* may be 0: a flag-only write                                         */
  uint64_t flag_value;  /* stored (release) at the flag after the bytes: a stamp               */
  uint64_t seq;         /* the command's ring index, written by the producer (checked)         */
  uint64_t reserved;    /* 0 */
} meld_cmd_t;

/* The ring's header: one 64-byte line per writer, so producer and proxy never share a line.
 * The nslots commands follow it (meld_cmdring_cmds). */
typedef struct {
  uint64_t head;        /* producer: commands [0, head) are written                */
  uint64_t pad0[7];
  uint64_t tail;        /* proxy: commands [0, tail) are consumed                  */
  uint64_t pad1[7];
  uint64_t done;        /* proxy: commands [0, done) no longer read their source   */
  uint64_t pad2[7];
  uint32_t status;      /* proxy: 0 = running, else its meld_result_t (sticky)     */
  uint32_t nslots;      /* power of two in [MIN, MAX]: set at creation             */
  uint64_t pad3[7];
} meld_cmdring_hdr_t;

#if defined(__cplusplus)
static_assert(sizeof(meld_cmd_t) == MELD_CMD_BYTES, "command is 64 bytes");
static_assert(sizeof(meld_cmdring_hdr_t) == 256, "ring header is 4 lines");
#else
_Static_assert(sizeof(meld_cmd_t) == MELD_CMD_BYTES, "command is 64 bytes");
_Static_assert(offsetof(meld_cmd_t, src_offset) == 16, "command layout");
_Static_assert(offsetof(meld_cmd_t, flag_value) == 40, "command layout");
_Static_assert(offsetof(meld_cmd_t, seq) == 48, "command layout");
_Static_assert(sizeof(meld_cmdring_hdr_t) == 256, "ring header is 4 lines");
_Static_assert(offsetof(meld_cmdring_hdr_t, tail) == 64, "head and tail on separate lines");
_Static_assert(offsetof(meld_cmdring_hdr_t, done) == 128, "done on its own line");
_Static_assert(offsetof(meld_cmdring_hdr_t, status) == 192, "status on its own line");
#endif

/* 1 if n is a legal slot count: a power of two in [MELD_CMDRING_MIN_SLOTS, MAX]. */
MELD_HD int meld_cmdring_valid_nslots(uint32_t n) {
  return n >= MELD_CMDRING_MIN_SLOTS && n <= MELD_CMDRING_MAX_SLOTS && (n & (n - 1u)) == 0;
}
/* Bytes of a ring of n slots (header + commands); the memory must be 64-byte aligned. */
MELD_HD size_t meld_cmdring_bytes(uint32_t n) {
  return sizeof(meld_cmdring_hdr_t) + (size_t)n * MELD_CMD_BYTES;
}
MELD_HD meld_cmd_t *meld_cmdring_cmds(meld_cmdring_hdr_t *r) { return (meld_cmd_t *)(r + 1); }
/* The slot of command index k. */
MELD_HD uint32_t meld_cmdring_slot(uint64_t k, uint32_t nslots) {
  return (uint32_t)(k & (uint64_t)(nslots - 1u));
}
/* Commands written and not consumed. */
MELD_HD uint64_t meld_cmdring_used(uint64_t head, uint64_t tail) { return head - tail; }
/* Free slots (the producer's credits), given a tail it has read (possibly stale: a stale
 * tail only under-counts credits, never over-counts, since tail only grows). */
MELD_HD uint64_t meld_cmdring_space(uint64_t head, uint64_t tail, uint32_t nslots) {
  return (uint64_t)nslots - (head - tail);
}
MELD_HD int meld_cmdring_empty(uint64_t head, uint64_t tail) { return head == tail; }
MELD_HD int meld_cmdring_full(uint64_t head, uint64_t tail, uint32_t nslots) {
  return head - tail >= (uint64_t)nslots;
}
/* 1 if (head, tail) can be a real state: 0 <= head - tail <= nslots (else memory was
 * corrupted, or a producer ignored its credits). */
MELD_HD int meld_cmdring_consistent(uint64_t head, uint64_t tail, uint32_t nslots) {
  return head - tail <= (uint64_t)nslots;
}

#ifdef __cplusplus
}
#endif

#endif
