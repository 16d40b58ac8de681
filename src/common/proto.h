/* proto.h — the device protocol's arithmetic, in plain C shared by host, device and CPU tests.
 *
 * Everything here is a pure function or a layout constant: the signal-pad layout, stamps
 * (epoch + sequence) held by signal and credit slots, ring-of-slots credit rules, the role
 * ticket, the argument hash and its handshake slot, abort codes, the deadline state of a
 * wait, and the layouts of the host-mapped error record and wait-for mirror. The GPU loops
 * (src/device/signal.cuh, launch.cuh) and the CPU simulation (tests/unit/test_proto_threads.c)
 * both build on these functions, so the protocol is exercised without a GPU.
 *
 * Protocol summary (DESIGN.md section 4):
 *   - Every rank owns a 4 MiB signal pad (comm->pad, symmetric, zeroed at init).
 *   - A comm's call counter lives in its pad; the epoch of a call is counter + 1, read by
 *     every CTA at entry; the last CTA to finish advances the counter (so graph replays and
 *     back-to-back calls need no host involvement).
 *   - Slots hold stamps = (epoch << MELD_STAMP_SEQ_BITS) | seq, written with release stores,
 *     never reset; a waiter waits until slot >= stamp. Stamps of older calls are smaller.
 *   - At entry each call posts (epoch, hash of its argument shapes) into every same-node
 *     peer's pad and waits for every peer's post of the same epoch: a rank-wide handshake
 *     that (a) detects mismatched arguments and (b) proves every peer has finished the
 *     previous call, so staging slots can be reused across calls without credits. Credits
 *     are only needed for ring slots reused WITHIN a call.
 */
#ifndef MELD_COMMON_PROTO_H
#define MELD_COMMON_PROTO_H

#include <stddef.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define MELD_HD __host__ __device__ __forceinline__
#else
#define MELD_HD static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- signal pad layout (per rank, MELD_PAD_BYTES, zeroed at init) ------------------------ */

#define MELD_PAD_BYTES ((size_t)8 << 20)
#define MELD_PROTO_MAX_RANKS 4096 /* == MELD_MAX_RANKS (comm.h)                            */

/* Control block, [0, 4 KiB). Words marked "per-call scratch" are reset by the last CTA. */
#define MELD_PAD_OFF_ABORT 0u     /* u32: sticky abort word, 0 = running (meld_abort_code)   */
#define MELD_PAD_OFF_CLAIM 4u     /* u32: error-record claim (0 free, 1 claimed), by CAS     */
#define MELD_PAD_OFF_COUNTER 8u   /* u64: calls completed; epoch of the running call = +1    */
#define MELD_PAD_OFF_DONE 16u     /* u32: per-call scratch: CTAs that finished this call     */
#define MELD_PAD_OFF_TICKET 20u   /* u32: per-call scratch: role tickets taken               */
#define MELD_PAD_OFF_QUEUES 64u   /* u32[MELD_NUM_QUEUES]: per-call scratch: work queues     */
#define MELD_NUM_QUEUES 8u
#define MELD_PAD_OFF_SCRATCH 128u /* u32[MELD_SCRATCH_WORDS]: per-call scratch for ops      */
#define MELD_SCRATCH_WORDS 64u
/* Argument-handshake slots: u64 [sender rank][2] (epoch parity), at 4 KiB. */
#define MELD_PAD_OFF_ARGS 4096u
/* Signal slots (u64 stamps), indexed by meld_signal_index: 2 MiB at 128 KiB. */
#define MELD_PAD_OFF_SIGNALS ((uint32_t)128 << 10)
#define MELD_PAD_SIGNAL_SLOTS ((uint32_t)(2u << 20) / 8u)
/* Credit slots (u64 stamps), indexed by meld_credit_index: 1 MiB after the signals. */
#define MELD_PAD_OFF_CREDITS (MELD_PAD_OFF_SIGNALS + MELD_PAD_SIGNAL_SLOTS * 8u)
#define MELD_PAD_CREDIT_SLOTS ((uint32_t)(1u << 20) / 8u)
/* Then, up to 4 MiB, ops' small exchanged data (e.g. MoE counts). */
#define MELD_PAD_OFF_DATA (MELD_PAD_OFF_CREDITS + MELD_PAD_CREDIT_SLOTS * 8u)
#define MELD_PAD_DATA_BYTES (MELD_PAD_OFF_LL - MELD_PAD_OFF_DATA)
/* In it: the epoch of this rank's last call of the decode GEMM+AR kernel (u64, 0 = none;
 * src/ops/gemm_ar_decode.cu: its next call waits for the peers' CONSUMED_ALL of that call). */
#define MELD_PAD_OFF_DECODE_LAST MELD_PAD_OFF_DATA
/* Then, at +4 KiB, the inter-node collectives' words (src/ops/coll_net.cu; u64 stamps, never
 * reset): staged [MELD_COLL_MAX_RANKS][MELD_NET_SLOTS] (a chunk for a remote peer is in the send
 * staging: for the kernel's feeder), consumed [same] (a remote peer's chunk is read: the feeder
 * returns its credit), reduced [MELD_NET_SLOTS] (an all-reduce's own part chunk is summed). */
#define MELD_PAD_OFF_NET (MELD_PAD_OFF_DATA + 4096u)
#define MELD_PAD_NET_BYTES (16u << 10)
/* [4 MiB, 8 MiB): the collectives' low-latency buffers (src/ops/collectives.cu), owned by
 * them alone: 8-byte lines {4 data bytes, 4 flag bytes = low bits of the epoch}, two halves
 * by epoch parity. No other op may write here: a stray word equal to a flag would be taken
 * for data. */
#define MELD_PAD_OFF_LL ((uint32_t)4 << 20)
#define MELD_PAD_LL_BYTES ((uint32_t)4 << 20)

/* Byte offset of the handshake slot that `sender` writes for a call of `epoch`. Two slots per
 * sender (epoch parity): a peer can be at most one call ahead of us (it cannot post epoch
 * e+2 before we posted e+1, i.e. before we finished call e), so parity never collides. */
MELD_HD uint32_t meld_pad_args_offset(int sender, uint64_t epoch) {
  return MELD_PAD_OFF_ARGS + ((uint32_t)sender * 2u + (uint32_t)(epoch & 1u)) * 8u;
}

/* Signal slot of (producer rank, channel, chunk) in the consumer's pad: chunk-major within a
 * (channel, producer) stream. nchunks is the op's chunks per stream. */
MELD_HD uint32_t meld_signal_index(int producer, int nranks, uint32_t channel, uint32_t chunk,
                                   uint32_t nchunks) {
  return (channel * (uint32_t)nranks + (uint32_t)producer) * nchunks + chunk;
}
/* Credit slot of (consumer rank, channel, ring slot) in the producer's pad. */
MELD_HD uint32_t meld_credit_index(int consumer, int nranks, uint32_t channel, uint32_t slot,
                                   uint32_t nslots) {
  return (channel * (uint32_t)nranks + (uint32_t)consumer) * nslots + slot;
}
/* 1 if nranks x nchannels x n slots fit in the signal (credit) region; ops check at plan
 * time and fail with a sentence otherwise. */
MELD_HD int meld_signal_layout_fits(int nranks, uint32_t nchannels, uint32_t n) {
  return nranks > 0 && (uint64_t)nranks * nchannels * n <= MELD_PAD_SIGNAL_SLOTS;
}
MELD_HD int meld_credit_layout_fits(int nranks, uint32_t nchannels, uint32_t n) {
  return nranks > 0 && (uint64_t)nranks * nchannels * n <= MELD_PAD_CREDIT_SLOTS;
}
MELD_HD uint32_t meld_pad_signal_offset(uint32_t index) { return MELD_PAD_OFF_SIGNALS + index * 8u; }
MELD_HD uint32_t meld_pad_credit_offset(uint32_t index) { return MELD_PAD_OFF_CREDITS + index * 8u; }

/* ---- stamps: what slots hold -------------------------------------------------------------- */

/* A stamp orders (epoch, seq) pairs as one u64: every stamp of call e is larger than every
 * stamp of call e-1, so slots are never reset. seq < 2^20 (e.g. round of a ring slot + 1);
 * epochs get 44 bits (1.7e13 calls). */
#define MELD_STAMP_SEQ_BITS 20
#define MELD_STAMP_SEQ_MAX ((1u << MELD_STAMP_SEQ_BITS) - 1u)

MELD_HD uint64_t meld_stamp(uint64_t epoch, uint32_t seq) {
  return (epoch << MELD_STAMP_SEQ_BITS) | (uint64_t)(seq & MELD_STAMP_SEQ_MAX);
}
MELD_HD uint64_t meld_stamp_epoch(uint64_t stamp) { return stamp >> MELD_STAMP_SEQ_BITS; }
MELD_HD uint32_t meld_stamp_seq(uint64_t stamp) { return (uint32_t)(stamp & MELD_STAMP_SEQ_MAX); }
/* The waiter's condition: slot has reached target. */
MELD_HD int meld_stamp_reached(uint64_t observed, uint64_t target) { return observed >= target; }

/* ---- ring of staging slots with credits (within one call) --------------------------------- *
 * Chunk k of a (producer -> consumer, channel) stream goes to ring slot k % nslots, in round
 * k / nslots. The data signal of a ring slot and its credit both hold stamp(epoch, round + 1).
 * Before writing chunk k the producer needs the credit of chunk k - nslots (same slot, one
 * round earlier). The first use of a slot in a call (k < nslots) needs no credit: the entry
 * handshake proved the consumer finished the previous call (all its reads are done). */
MELD_HD uint32_t meld_ring_slot(uint32_t k, uint32_t nslots) { return k % nslots; }
MELD_HD uint32_t meld_ring_round(uint32_t k, uint32_t nslots) { return k / nslots; }
/* What the producer publishes in the data signal once chunk k is in its slot. */
MELD_HD uint64_t meld_ring_data_stamp(uint64_t epoch, uint32_t k, uint32_t nslots) {
  return meld_stamp(epoch, k / nslots + 1u);
}
/* What the consumer publishes in the credit once its last read of chunk k is done. */
MELD_HD uint64_t meld_ring_credit_stamp(uint64_t epoch, uint32_t k, uint32_t nslots) {
  return meld_stamp(epoch, k / nslots + 1u);
}
/* The credit the producer must see before writing chunk k; 0 = no wait needed. */
MELD_HD uint64_t meld_ring_credit_needed(uint64_t epoch, uint32_t k, uint32_t nslots) {
  return k < nslots ? 0 : meld_stamp(epoch, k / nslots);
}

/* ---- roles --------------------------------------------------------------------------------- */

enum {
  MELD_ROLE_COMM = 0,
  MELD_ROLE_COMPUTE = 1,
  MELD_ROLE_WAIT = 2,
  MELD_ROLE_OTHER = 3,
  MELD_ROLE_REDUCE = 4,
  MELD_ROLE_ROUTE = 5 /* trace only: the MoE routing kernel's phases (item = phase) */
};

/* The first ncomm tickets (in the order CTAs actually start) are communication CTAs. */
MELD_HD int meld_role_of_ticket(uint32_t ticket, uint32_t ncomm) {
  return ticket < ncomm ? MELD_ROLE_COMM : MELD_ROLE_COMPUTE;
}
/* Index of the CTA within its role (comm index, or compute index). */
MELD_HD uint32_t meld_role_index(uint32_t ticket, uint32_t ncomm) {
  return ticket < ncomm ? ticket : ticket - ncomm;
}
/* 1 if the CTA whose "done" increment returned done_before is the last of nctas. */
MELD_HD int meld_is_last_cta(uint32_t done_before, uint32_t nctas) { return done_before + 1u == nctas; }
/* The epoch of the running call from the call counter (calls completed). */
MELD_HD uint64_t meld_epoch_of_counter(uint64_t counter) { return counter + 1u; }

/* ---- argument hash and handshake ----------------------------------------------------------- */

/* FNV-1a 64 over the little-endian bytes of each shape field. Usage on the host:
 *   uint64_t h = meld_hash_init(); h = meld_hash_u64(h, MELD_OP_X); h = meld_hash_u64(h, m); ...
 *   kernel arg: meld_hash_fold(h). */
MELD_HD uint64_t meld_hash_init(void) { return 0xcbf29ce484222325ull; }
MELD_HD uint64_t meld_hash_u64(uint64_t h, uint64_t v) {
  for (int i = 0; i < 8; i++) {
    h ^= (v >> (8 * i)) & 0xffu;
    h *= 0x100000001b3ull;
  }
  return h;
}
MELD_HD uint32_t meld_hash_fold(uint64_t h) { return (uint32_t)(h ^ (h >> 32)); }

/* A handshake slot packs (low 32 bits of the epoch, hash) into ONE 64-bit store, so that a
 * reader never sees the epoch of one call with the hash of another. */
MELD_HD uint64_t meld_args_pack(uint64_t epoch, uint32_t hash) {
  return ((uint64_t)(uint32_t)epoch << 32) | hash;
}
MELD_HD uint32_t meld_args_hash(uint64_t slot) { return (uint32_t)slot; }
/* 1 if the slot holds the post of call `epoch` (wrap-safe: the slot's epoch is e or e - 2). */
MELD_HD int meld_args_arrived(uint64_t slot, uint64_t epoch) {
  return (int32_t)((uint32_t)(slot >> 32) - (uint32_t)epoch) >= 0;
}

/* ---- abort codes ----------------------------------------------------------------------------- */

/* The abort word: 0 = running; else (reason << 24) | (origin rank + 1). The first raiser
 * wins (CAS from 0), so the word names the cause. */
enum {
  MELD_ABORT_TIMEOUT = 1, /* a wait passed its deadline on the origin rank                  */
  MELD_ABORT_USER = 2,    /* meld_comm_abort on the origin rank                              */
  MELD_ABORT_ARGS = 3,    /* the origin rank found mismatched argument hashes                 */
  MELD_ABORT_INPUT = 4    /* the origin rank found its input unusable (MELD_FAIL_INPUT)       */
};
MELD_HD uint32_t meld_abort_code(uint32_t reason, int origin_rank) {
  return (reason << 24) | (((uint32_t)origin_rank + 1u) & 0xffffffu);
}
MELD_HD uint32_t meld_abort_reason(uint32_t word) { return word >> 24; }
MELD_HD int meld_abort_origin(uint32_t word) { return (int)(word & 0xffffffu) - 1; }

/* ---- deadline of one wait -------------------------------------------------------------------- */

/* Spins between two reads of the clock (and of the host-mapped abort word). */
#define MELD_WAIT_CHECK_EVERY 64u
/* A slow wait reads the host's abort word (PCIe) every this many clock checks. */
#define MELD_WAIT_HOST_EVERY 8u
/* Sleep between spins once a wait has spun MELD_WAIT_CHECK_EVERY times (~tens of us). */
#define MELD_WAIT_SLEEP_NS 64u
/* A wait longer than this is mirrored into host-mapped memory (the wait-for picture). */
#define MELD_WAIT_MIRROR_AFTER_NS 20000ull

enum { MELD_WAIT_PENDING = 0, MELD_WAIT_DONE = 1, MELD_WAIT_ABORTED = 2, MELD_WAIT_TIMEOUT = 3 };

typedef struct {
  uint64_t start_ns;
  uint64_t deadline_ns;
  uint32_t spins;
  uint32_t mirrored;
} meld_wait_state_t;

MELD_HD void meld_wait_start(meld_wait_state_t *w, uint64_t now_ns, uint64_t timeout_ns) {
  w->start_ns = now_ns;
  w->deadline_ns = now_ns + timeout_ns < now_ns ? ~0ull : now_ns + timeout_ns; /* saturate */
  w->spins = 0;
  w->mirrored = 0;
}
/* Counts one spin; 1 when it is time to read the clock (every MELD_WAIT_CHECK_EVERY). */
MELD_HD int meld_wait_tick(meld_wait_state_t *w) {
  return (++w->spins % MELD_WAIT_CHECK_EVERY) == 0;
}
MELD_HD int meld_wait_expired(const meld_wait_state_t *w, uint64_t now_ns) {
  return now_ns >= w->deadline_ns;
}
MELD_HD int meld_wait_should_mirror(const meld_wait_state_t *w, uint64_t now_ns) {
  return !w->mirrored && now_ns - w->start_ns >= MELD_WAIT_MIRROR_AFTER_NS;
}

/* ---- ops (names for messages) ---------------------------------------------------------------- */

enum {
  MELD_OP_NONE = 0,
  MELD_OP_AG_GEMM = 1,
  MELD_OP_GEMM_RS = 2,
  MELD_OP_GEMM_AR = 3,
  MELD_OP_MOE_DISPATCH_GEMM = 4,
  MELD_OP_MOE_FFN = 5,
  MELD_OP_RING_ATTENTION = 6,
  MELD_OP_ALL_GATHER = 7,
  MELD_OP_REDUCE_SCATTER = 8,
  MELD_OP_ALL_REDUCE = 9,
  MELD_OP_ALL_TO_ALL = 10,
  MELD_OP_MOE_COMBINE = 11,
  MELD_OP_TEST_SIGNAL = 100, /* test kernels (tests/gpu)                                    */
  MELD_OP_TEST_PINGPONG = 101,
  MELD_OP_TEST_LITMUS = 102,
  MELD_OP_TEST_ABORT = 103,
  MELD_OP_COUNT_
};

/* ---- host-mapped error record and wait-for mirror -------------------------------------------- */

/* MELD_FAIL_INPUT: a kernel found its input unusable (e.g. meld_moe_dispatch_gemm: a rank's
 * experts receive more rows than capacity, or a topk id out of range): the record's label says
 * what, observed the value found, expected the limit, peer the rank concerned. */
enum { MELD_FAIL_NONE = 0, MELD_FAIL_TIMEOUT = 1, MELD_FAIL_ABORTED = 2, MELD_FAIL_ARGS = 3, MELD_FAIL_INPUT = 4 };

/* What a wait is for (region of the flag, index in it, the rank expected to set it). */
enum {
  MELD_REGION_NONE = 0,     /* not a flag wait (e.g. found aborted at kernel entry)        */
  MELD_REGION_SIGNAL = 1,   /* signal slot of this rank's pad                              */
  MELD_REGION_CREDIT = 2,   /* credit slot of this rank's pad                              */
  MELD_REGION_ARGS = 3,     /* argument-handshake slot                                     */
  MELD_REGION_MBARRIER = 4, /* an mbarrier phase in shared memory                          */
  MELD_REGION_OTHER = 5     /* any other 64-bit flag (index = low bits of its address)     */
};

#define MELD_RECORD_LABEL_BYTES 32

/* The first failure of a comm, in host-mapped pinned memory. Claimed on the device by CAS on
 * the pad's claim word; the winner writes every field, then `kind` last with release, so a
 * host that reads kind != 0 (acquire) sees a complete record. */
typedef struct {
  uint32_t kind;        /* MELD_FAIL_*; written last                                     */
  uint32_t op;          /* MELD_OP_*                                                      */
  int32_t rank;         /* this rank                                                       */
  int32_t cta;          /* blockIdx.x of the CTA that claimed                              */
  int32_t role;         /* MELD_ROLE_* of that CTA                                          */
  int32_t peer;         /* rank expected to set the flag (-1: none / unknown)              */
  uint32_t region;      /* MELD_REGION_*                                                   */
  uint32_t index;       /* slot index in the region (or mbarrier address)                  */
  uint64_t expected;    /* stamp waited for (ARGS: this rank's hash)                       */
  uint64_t observed;    /* value seen last (ARGS: the peer's hash)                         */
  uint64_t epoch;       /* epoch of the call                                               */
  uint64_t waited_ns;   /* time spent in the failed wait                                   */
  uint32_t abort_word;  /* abort word seen (ABORTED: who raised it and why)                */
  uint32_t pad_;
  char label[MELD_RECORD_LABEL_BYTES]; /* the op's words for the wait ("A rows ready")   */
} meld_error_record_t;

/* One CTA's current slow wait (mirrored after MELD_WAIT_MIRROR_AFTER_NS of spinning). */
typedef struct {
  uint32_t state;       /* 0 idle, 1 waiting                                               */
  uint32_t op;
  int32_t role;
  int32_t peer;
  uint32_t region;
  uint32_t index;
  uint64_t target;
  uint64_t epoch;
  uint64_t since_ns;    /* %globaltimer at the start of the wait                           */
  uint64_t pad_[2];
} meld_wait_mirror_t;   /* 64 bytes                                                        */

#define MELD_MIRROR_CTAS 1024

/* ---- trace events ---------------------------------------------------------------------------- */

typedef struct {
  uint64_t start_ns, end_ns; /* %globaltimer                                                */
  uint32_t item;             /* work item (tile, chunk, ...)                                 */
  uint32_t epoch;            /* low bits of the call's epoch                                  */
  uint16_t role;             /* MELD_ROLE_*                                                   */
  uint16_t cta;              /* blockIdx.x                                                    */
  uint32_t pad_;
} meld_trace_event_t;        /* 32 bytes                                                     */

/* A device trace buffer: cap events per CTA (CTA c writes events[c * cap ...]); counts[c]
 * counts the CTA's events (it keeps counting past cap: the excess was dropped). events ==
 * NULL: tracing off (the recording code is compiled in always). */
typedef struct {
  meld_trace_event_t *events;
  uint32_t *counts;
  uint32_t cap_per_cta;
  uint32_t max_ctas;
} meld_trace_dev_t;

/* ---- what a fused kernel receives (by value, as a __grid_constant__ parameter) ------------- */

typedef struct {
  uint8_t *pad;                        /* this rank's signal pad (device memory)                 */
  uint8_t *const *peer_pads;           /* device array [nranks]: peers' mapped pads, NULL for
                                          ranks of other nodes; [rank] == pad                    */
  const uint32_t *host_abort;          /* host-mapped: nonzero after meld_comm_abort (polled)   */
  meld_error_record_t *record;         /* host-mapped error record                              */
  meld_wait_mirror_t *mirror;          /* host-mapped [MELD_MIRROR_CTAS]                        */
  meld_trace_dev_t trace;              /* events == NULL: off                                   */
  uint64_t timeout_ns;                 /* deadline of every wait                                */
  int32_t rank, nranks;
} meld_proto_dev_t;

#ifdef __cplusplus
}
#endif

#endif /* MELD_COMMON_PROTO_H */
