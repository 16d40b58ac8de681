/* coll_plan.h — the collectives' arguments, their validation, and the plan: how many CTAs of
 * how many threads, the chunk (slot) size, the ring depth, one-shot vs two-shot all-reduce.
 *
 * Pure host C (no CUDA calls), so that validation and planning are unit-tested on the CPU.
 * The plan is a deterministic function of (op, nranks, sizes, dtype, min SM count of the
 * node, workspace size, MELD_COMM_CTAS / MELD_CHUNK_BYTES): every rank computes the same
 * plan, which the device protocol relies on (slot and signal indices must agree).
 *
 * Staging geometry (what the plan sizes): at every consumer rank, for each "stage" (1, or 2
 * for the two-shot all-reduce), for each of the P-1 peers that push to it, for each CTA, a
 * ring of `slots` slots of `chunk_bytes`:
 *   offset(stage, src_idx, cta, slot) = (((stage * (P-1) + src_idx) * ctas + cta) * slots + slot)
 *                                       * chunk_bytes
 * where src_idx = (src - me - 1 + P) % P ranges 0..P-2. Signals (one per slot, at the consumer)
 * and credits (one per slot, at the producer) use the protocol's layout (src/common/proto.h):
 * channel = stage * ctas + cta, ring slot = chunk % slots, so nranks * stages * ctas * slots
 * u64 words of the pad's signal and credit regions. */
#ifndef MELD_HOST_COLL_PLAN_H
#define MELD_HOST_COLL_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "meld.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most ranks of one node the collectives handle (kernel parameters carry per-rank arrays;
 * 72 covers an NVL72 domain). */
#define MELD_COLL_MAX_RANKS 72
/* Largest plan values (the legality check's bounds). */
#define MELD_COLL_MAX_CTAS 132
#define MELD_COLL_MAX_SLOTS 8
/* Threads per CTA the kernels are compiled for (__launch_bounds__: registers without spills). */
#define MELD_COLL_LL_MAX_THREADS 512
#define MELD_COLL_RING_MAX_THREADS 640
#define MELD_COLL_ROUNDS_MAX_THREADS 512
#define MELD_COLL_ZC_MAX_THREADS 512
#define MELD_COLL_MIN_CHUNK 4096
#define MELD_COLL_MAX_CHUNK ((size_t)16 << 20)
/* Chunks per (peer, CTA) stream in one call: the ring round (chunk / slots + 1) must fit the
 * sequence bits of a stamp (MELD_STAMP_SEQ_BITS = 20, src/common/proto.h). */
#define MELD_COLL_MAX_ROUNDS ((int64_t)1 << 20)
/* Bytes per rank any single buffer may have (keeps every offset far from overflow). */
#define MELD_COLL_MAX_BYTES ((size_t)1 << 46)

typedef enum {
  MELD_COLL_ALL_GATHER = 0,
  MELD_COLL_REDUCE_SCATTER = 1,
  MELD_COLL_ALL_REDUCE = 2,
  MELD_COLL_ALL_TO_ALL = 3, /* uniform and variable splits alike (counts per peer)      */
  MELD_COLL_NUM_OPS
} meld_coll_op_t;

typedef enum { MELD_AR_AUTO = 0, MELD_AR_ONE_SHOT = 1, MELD_AR_TWO_SHOT = 2 } meld_ar_algo_t;

/* How the data travels (src/ops/collectives.cu):
 * - LL: small messages. Each rank stores its data straight into the peers' low-latency
 *   buffers (pad region MELD_PAD_OFF_LL) as 8-byte lines {4 data bytes, 4 flag bytes}; the
 *   receiver polls the lines themselves: no signal, no credit, and no argument handshake
 *   before the data moves (posted at entry, verified at the end). 2x the bytes on the link.
 * - RING: the staging ring with warp-specialized CTAs: producer warps push chunks into the
 *   consumers' slots while consumer warps of the same CTA drain the slots that arrived, each
 *   group paced by its own control warp (signals, credits), so the link never waits for a
 *   local copy.
 * - ROUNDS: the first engine: every thread pushes round j, then waits for and drains round j.
 *   The default above LL (measured faster than RING so far) and the two-shot all-reduce's.
 * - ZC (zero copy): no staging. Where the buffers that peers touch lie in symmetric memory
 *   (meld_mem_alloc: all_gather / all_to_all recv, reduce_scatter send, all_reduce both), each
 *   rank writes its data straight into the peers' recv (push) or reads the peers' send and
 *   sums (pull): one pass through an SM per byte instead of two or three. Two waits per call:
 *   the entry handshake (every peer's buffers are ready) and one "done" signal per (peer,
 *   CTA) at the end (every peer finished reading and writing this rank's buffers). All-reduce
 *   = pull-reduce of this rank's part from every send, then its sum pushed to every recv.
 * - CE (copy engine; all-gather and all-to-all whose send lies in symmetric memory): the
 *   link is driven by the GPU's copy engines, no SM moves data. A one-thread kernel makes the
 *   entry handshake; the copies pull every peer's block out of its send into this rank's recv
 *   and copy the own block (cudaMemcpyAsync: the first copy on the caller's stream, the others
 *   on the comm's side streams, up to 4, forked and joined by events: capturable); a
 *   one-thread kernel then posts
 *   "done reading" to every peer and waits for theirs (deadline). Pull only, so a failed
 *   handshake cannot make this rank write into a peer's memory. Opt-in (MELD_COLL_CE=1, from
 *   MELD_COLL_CE_MIN_BYTES per peer) until measured on two GPUs. */
typedef enum {
  MELD_PROTO_AUTO = 0,
  MELD_PROTO_LL = 1,
  MELD_PROTO_RING = 2,
  MELD_PROTO_ROUNDS = 3,
  MELD_PROTO_ZC = 4,
  MELD_PROTO_CE = 5
} meld_coll_proto_t;

/* Low-latency buffers: half of MELD_PAD_LL_BYTES per epoch parity, split among the P-1
 * producers; 16 bytes of buffer carry 8 bytes of data. */
#define MELD_COLL_LL_HALF_BYTES ((size_t)2 << 20)

/* One call's arguments, in elements. For all-to-all, the four per-rank arrays are filled for
 * the uniform case too (counts = count, offsets = q * count). */
typedef struct {
  meld_coll_op_t op;
  meld_dtype_t dtype;
  const void *send;
  void *recv;
  size_t count;   /* AG: per rank; RS: per rank (recv); AR: whole buffer; A2A: unused       */
  int vector;     /* all-to-allv (the public name in messages)                             */
  size_t send_counts[MELD_COLL_MAX_RANKS], send_offsets[MELD_COLL_MAX_RANKS];
  size_t recv_counts[MELD_COLL_MAX_RANKS], recv_offsets[MELD_COLL_MAX_RANKS];
  int zc;         /* set by meld_coll_run, not by callers: when the ZC engine may carry this
                     call (symmetric buffers, uniform sizes, no racy overlap): 1; 2 = an
                     all-reduce whose send only is symmetric (ZC one-shot: every rank pulls
                     every send and sums into its own recv)                                */
  int ce;         /* set by meld_coll_run: the CE engine may carry this call (meld_coll_ce_request
                     and the send symmetric): 1 = when a hint asks for it, 2 = also by AUTO
                     (MELD_COLL_CE=1)                                                      */
} meld_coll_args_t;

/* The plan of one call. Printable; checked by meld_coll_plan_check. */
typedef struct {
  meld_coll_op_t op;
  int nranks;
  size_t elem_bytes;      /* 2 (bf16) or 4 (fp32)                                           */
  size_t pair_bytes;      /* most bytes one rank pushes to one peer per stage               */
  int ctas;               /* CTAs of the kernel (all of them move data)                     */
  int threads;            /* threads per CTA (multiple of 32)                               */
  size_t chunk_bytes;     /* bytes per slot, multiple of 16                                 */
  int slots;              /* ring depth per (peer, CTA)                                      */
  int stages;             /* 1, or 2 for the two-shot all-reduce (RS ring + AG ring)          */
  meld_ar_algo_t ar_algo; /* all-reduce: one-shot or two-shot (other ops: AUTO)              */
  size_t oneshot_max_bytes; /* all-reduce threshold: buffers up to this take one-shot       */
  size_t part_elems;      /* two-shot all-reduce: elements per rank's part (16-byte multiple)*/
  int64_t rounds;         /* rounds per CTA: ceil(pair_bytes / (ctas * chunk_bytes))        */
  size_t ws_bytes;        /* workspace bytes the staging needs                              */
  size_t signal_words;    /* u64 signal slots (and as many credits) the layout spans:
                             nranks * stages * ctas * slots (0 for LL)                      */
  meld_coll_proto_t proto; /* LL, RING, ROUNDS, ZC or CE (never AUTO in a made plan)         */
  int cons_warps;         /* RING: consumer (drain) warps per CTA; the producer warps are
                             threads/32 - 2 - cons_warps (2 control warps)                   */
  size_t ll_max_bytes;    /* LL is chosen when pair_bytes <= this (and fits the buffers)     */
  int unroll;             /* RING/ROUNDS: 16-byte loads in flight per thread in the data
                             loops: 4 (copy.cuh's depth) or 8 (copies 8, sums 4 per source) */
  int bulk;               /* RING: 1 = the push is one warp whose lane 0 moves the chunks with
                             TMA bulk copies (cons_warps = threads/32 - 3); 2 = also the drain
                             of copies (AG, A2A) by one thread with TMA; 0 = push warps     */
} meld_coll_plan_t;

/* Caller-chosen plan fields (bench and tests); 0 / AUTO = heuristic. Environment variables
 * MELD_COMM_CTAS and MELD_CHUNK_BYTES override the heuristic but not these. */
typedef struct {
  int ctas, threads, slots;
  size_t chunk_bytes;
  meld_ar_algo_t ar_algo;
  size_t oneshot_max_bytes;
  meld_coll_proto_t proto; /* AUTO: by size; LL / ZC fall back to ROUNDS where they cannot run */
  int cons_warps;
  size_t ll_max_bytes;
  int unroll; /* 4 or 8; 0 = default */
  int bulk;   /* RING: 1 = TMA bulk push, 2 = + TMA drain of copies (see meld_coll_plan_t) */
  int pdl;    /* ZC: launch with programmatic stream serialization (the kernel before it on
                 the stream must be one of meld's stand-alone GEMM kernels, which trigger it;
                 the ZC kernel waits for that grid's completion before its handshake) */
} meld_coll_plan_hint_t;

/* Most data bytes one producer can send one consumer by LL in one call, for nranks ranks
 * (0 when P = 1 or the op cannot use LL). */
size_t meld_coll_ll_capacity(int nranks);

/* How many side streams the CE engine takes (comm.c ce_stream_create): one per peer up to
 * max_streams; where gpu_share > 1 ranks of one process share a GPU (their kernels wait for
 * each other), only as many as leave every rank's caller's stream, protocol side stream and
 * side streams a hardware queue of its own among `queues` (CUDA_DEVICE_MAX_CONNECTIONS),
 * at least 1. 0 for one rank. */
int meld_coll_ce_side_streams(int nranks, int gpu_share, int queues, int max_streams);

/* Size of one element of dtype, or 0 for an unknown dtype. */
size_t meld_coll_dtype_bytes(meld_dtype_t dtype);
/* "bf16", "fp32" or "?" ; "all_gather", ... */
const char *meld_coll_dtype_name(meld_dtype_t dtype);
const char *meld_coll_op_name(meld_coll_op_t op);
const char *meld_coll_proto_name(meld_coll_proto_t proto); /* "ll", "ring", "rounds", "zc", "ce" */

/* Checks one call's arguments for a communicator of nranks ranks (fn = public name, used in
 * messages). Never touches CUDA. Returns MELD_OK, or MELD_ERR_INVALID_ARG with a sentence:
 * unknown dtype or op, NULL buffer with data to move, pointer not aligned to the element
 * size, sizes overflowing (count * nranks * element size, offset + count), nranks outside
 * [1, MELD_COLL_MAX_RANKS]. */
meld_result_t meld_coll_validate(const char *fn, int nranks, const meld_coll_args_t *args);

/* 1 if the call moves no data anywhere (uniform count 0): no launch needed. A2A with
 * variable splits never counts as empty (peers may still exchange among themselves). */
int meld_coll_is_empty(const meld_coll_args_t *args);

/* The ZC engine's eligibility, pure (src/ops/collectives.cu looks the buffers up):
 * meld_coll_zc_request says whether a validated call could take ZC at all, and if so which
 * byte ranges must lie in symmetric memory: 0 for multi-node comms, all-to-allv (or splits
 * that are not uniform), a count of 0, blocks that are not 16-byte multiples (all-gather,
 * reduce-scatter, all-to-all; an all-reduce takes any count), and send / recv overlapping other
 * than in the op's in-place form (all-gather send = recv + rank * B, reduce-scatter recv =
 * send + rank * B, all-reduce send = recv; none for all-to-all). meld_coll_zc_mode then decides
 * from where the buffers are (send_sym / recv_sym: the whole range lies in one symmetric
 * buffer mapped from every rank): 0 = not ZC, 1 = ZC, 2 = the one-shot all-reduce (send
 * symmetric, recv not, not in place). */
typedef struct {
  size_t send_bytes, recv_bytes; /* the ranges to look up                                   */
  int need_send, need_recv;      /* which must be symmetric (all-gather / all-to-all: recv;
                                    reduce-scatter: send; all-reduce: send, recv optional)  */
  int inplace;                   /* all-gather: send == recv + rank * B                      */
} meld_coll_zc_req_t;
int meld_coll_zc_request(const meld_coll_args_t *a, int nranks, int rank, int nnodes, meld_coll_zc_req_t *req);
int meld_coll_zc_mode(const meld_coll_args_t *a, const meld_coll_zc_req_t *req, int send_sym, int recv_sym);

/* The CE engine's eligibility, pure: 1 if a validated call could take it (all-gather or
 * uniform all-to-all, 2+ ranks of one node, ZC's size and overlap rules), with req->send_bytes
 * the range of send that must lie in symmetric memory (the peers pull from it: all-gather B,
 * all-to-all P x B) and req->inplace as ZC's (meld_coll_zc_request fills req). */
int meld_coll_ce_request(const meld_coll_args_t *a, int nranks, int rank, int nnodes, meld_coll_zc_req_t *req);
/* Per-peer bytes from which AUTO takes CE when MELD_COLL_CE=1 (MELD_COLL_CE_MIN_BYTES
 * overrides). Not measured yet on two GPUs: the copy engine moved 387-391 GB/s over NV18
 * where 16 SM CTAs push 332-347 (sessions 1-2), so large blocks should gain. */
#define MELD_COLL_CE_MIN_BYTES_DEFAULT ((size_t)4 << 20)

/* Fills *plan for a validated call: heuristic, then MELD_COMM_CTAS / MELD_CHUNK_BYTES from
 * the environment (malformed values: MELD_ERR_INVALID_ARG naming the variable), then `hint`
 * (may be NULL); then shrinks the chunk (and CTAs) to fit workspace_bytes, unless they were
 * set explicitly; then checks the plan (meld_coll_plan_check). sm_count: the smallest SM
 * count of the node's GPUs (equal on every rank). signal_words_max: the pad's credit slots
 * (MELD_PAD_CREDIT_SLOTS; the signal region is larger). */
meld_result_t meld_coll_plan_make(const meld_coll_args_t *args, int nranks, int sm_count,
                                  size_t workspace_bytes, size_t signal_words_max,
                                  const meld_coll_plan_hint_t *hint, meld_coll_plan_t *plan);

/* Legality: CTAs in [1, min(sm_count, MELD_COLL_MAX_CTAS)], threads a multiple of 32 in
 * [64, 1024] (RING: 2 control warps, >= 1 producer and >= 1 consumer warp), LL: pair_bytes
 * within meld_coll_ll_capacity, ROUNDS or RING as the stages require, chunk a multiple of 16 in [MELD_COLL_MIN_CHUNK, MELD_COLL_MAX_CHUNK], slots in
 * [2, MELD_COLL_MAX_SLOTS], rounds < MELD_COLL_MAX_ROUNDS, signals within the pad's share;
 * the staging fits the workspace (else MELD_ERR_OUT_OF_MEMORY: "needs N bytes of workspace:
 * set workspace_bytes / MELD_WORKSPACE_BYTES >= N, or lower MELD_COMM_CTAS /
 * MELD_CHUNK_BYTES"). */
meld_result_t meld_coll_plan_check(const meld_coll_plan_t *plan, int sm_count,
                                   size_t workspace_bytes, size_t signal_words_max);

/* Recomputes plan->rounds, ws_bytes and signal_words from the other fields (after a field
 * was changed by hand). */
void meld_coll_plan_derive(meld_coll_plan_t *plan);

struct meld_comm;
/* 0 when MELD_COLL_ZC=0 (or malformed): ops that put a collective's buffer in the workspace
 * (which only ZC may carry) check it first (src/ops/collectives.cu). */
int meld_coll_zc_enabled(void);
/* Loads the CE engine's kernels (comm init; src/ops/collectives.cu). */
meld_result_t meld_coll_ce_preload(void);

/* Plans and launches one validated, non-empty intra-node call (src/ops/collectives.cu): the
 * engine behind the public functions, with `hint` (may be NULL) forcing plan fields (bench,
 * tests). *plan_out (may be NULL) receives the plan used. Fails as the public functions. */
meld_result_t meld_coll_run(struct meld_comm *comm, const char *fn, const meld_coll_args_t *args,
                            const meld_coll_plan_hint_t *hint, cudaStream_t stream,
                            meld_coll_plan_t *plan_out);
/* (A send or recv inside the comm's workspace, as ops pass, is refused with MELD_ERR_INTERNAL
 * when the plan is a staged engine, whose slots live there.) */

/* The same for a comm that spans several nodes (src/ops/coll_net.cu): one kernel a launch,
 * remote peers over the proxy, same-node peers through the workspace. Fails as the public
 * functions, and MELD_ERR_UNSUPPORTED for all-to-all with per-peer counts. */
meld_result_t meld_coll_net_run(struct meld_comm *comm, const char *fn, const meld_coll_args_t *args,
                                cudaStream_t stream);

/* One line describing every field ("all_reduce P=2 ctas=16 threads=512 chunk=262144 ..."). */
int meld_coll_plan_format(const meld_coll_plan_t *plan, char *buf, size_t len);
void meld_coll_plan_print(const meld_coll_plan_t *plan, FILE *f);

#ifdef __cplusplus
}
#endif

#endif
