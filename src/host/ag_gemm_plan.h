/* ag_gemm_plan.h — meld_ag_gemm's argument validation and plan (internal, pure host C: no CUDA
 * calls, so validation and planning are unit-tested on the CPU).
 *
 * The fused schedule (src/ops/ag_gemm.cu): ONE cooperative kernel, one CTA per SM. The first
 * `comm_ctas` CTAs to start push this rank's shard, chunk by chunk, into every peer's staging
 * (the comm's symmetric workspace), releasing one signal per (producer rank, chunk) in the
 * consumer's pad; then they join the GEMM. Every other CTA runs the GEMM engine over the
 * gathered staging geometry, tiles claimed from a dynamic queue, local m-blocks first and then
 * rank+1, rank+2, ... (arrival order). Local m-blocks read the caller's shard in place (the
 * engine's second A map, no wait); the others wait on their chunk's signal (ready hook).
 * (`inplace` 0, for comparison: the comm CTAs first copy the shard into the own staging and
 * the local m-blocks wait for that copy, as in run 2.)
 *
 * Staging geometry (identical on every rank): [nranks][m_loc_pad][k] bf16, rows of k
 * elements, m_loc_pad = m_loc rounded up to 128 (a GEMM m-block never spans two shards).
 * Shard r's chunk j = its padded rows [j * chunk_rows, (j + 1) * chunk_rows), of which the
 * rows < m_loc are real; chunk_rows is a multiple of 128 that divides m_loc_pad, so the flag
 * of global m-block mb is signal (mb * 128) / chunk_rows = r * chunks_per_rank + j. When
 * m_loc is not a multiple of 128 ("compact" plan), the pad rows hold garbage, and the GEMM's
 * compact-rows epilogue drops them and writes real rows to C row r * m_loc + i. */
#ifndef MELD_HOST_AG_GEMM_PLAN_H
#define MELD_HOST_AG_GEMM_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/proto.h"
#include "meld.h"

#ifdef __cplusplus
extern "C" {
#endif

#define AG_GEMM_MAX_RANKS 72      /* kernel parameters carry per-rank staging pointers     */
#define AG_GEMM_BM 128            /* == GEMM_BM: rows of one GEMM m-block                  */
#define AG_GEMM_MAX_COMM_CTAS 64
#define AG_GEMM_MAX_SMS 1024
#define AG_GEMM_SIDE_PIECE 32768  /* comm warps: bytes of one piece of a chunk (ag_gemm.cu)   */

/* Schedules. */
typedef enum {
  AG_GEMM_FUSED = 0,   /* the one fused kernel                                            */
  AG_GEMM_UNFUSED = 1, /* meld_all_gather into a gathered buffer, then meld_gemm           */
  AG_GEMM_DIRECT = 2   /* one rank: meld_gemm on the shard (+ a copy for a_gathered)       */
} ag_gemm_schedule_t;

/* How comm CTAs move bytes: every thread's 16-byte stores, or one thread's TMA bulk copies
 * through shared memory (global -> smem -> peer). */
typedef enum { AG_GEMM_COPY_VEC = 0, AG_GEMM_COPY_BULK = 1 } ag_gemm_copy_t;

typedef struct {
  int nranks, sm_count;
  int64_t m_loc, m_loc_pad, m, n_loc, k; /* m = nranks * m_loc (C rows)                     */
  ag_gemm_schedule_t schedule;
  ag_gemm_copy_t copy;
  int comm_ctas;           /* fused: CTAs (first tickets) that copy and push              */
  int grid;                /* fused: CTAs of the kernel (one per SM)                      */
  int64_t chunk_rows;      /* fused: multiple of 128 dividing m_loc_pad                    */
  int64_t chunks_per_rank; /* m_loc_pad / chunk_rows                                       */
  int compact;             /* m_loc % 128 != 0: padded staging, compact-rows epilogue     */
  int group_m;             /* GEMM raster group (m-blocks per sweep)                       */
  int inplace;             /* 1: own m-blocks read the shard in place (default); 0: staged  */
  int stream_k;            /* fused: 1 = the GEMM runs stream-K over its last partial wave, */
                           /* 2 = over one full wave + the partial wave; 0 = off            */
  int sk_pieces;           /* fused stream-K: n >= 1 = n pieces per stream-K tile taken from */
                           /* the tile queue (a late comm CTA takes fewer); 0 = one range per */
                           /* worker, run by that worker after the queue (gemm_producer SKQ)  */
  int sk_extra;            /* fused stream-K with pieces: whole tiles moved into the stream-K */
                           /* region (default: comm_ctas at P > 1: they join the GEMM late)   */
  int epi_defer;           /* fused: 1 = the GEMM's deferred epilogue (TMA-store path only:   */
                           /* a tile's second half is stored during the next tile's mainloop) */
  size_t ws_bytes;         /* fused: staging bytes = nranks * m_loc_pad * k * 2            */
  size_t signal_slots;     /* fused: nranks * chunks_per_rank                              */
  int tile_n;              /* fused: the GEMM's tile width, 256 or 320 (the engine's wide   */
                           /* tile: B [N,K], no stream-K, no deferred epilogue)             */
  int comm_warps;          /* fused: 1 = no comm CTAs (comm_ctas 0): warps 2-3 of every     */
                           /* CTA's producer warpgroup push the shard while the GEMM runs   */
                           /* (the engine's side work; not with a_gathered)                 */
  int64_t side_pieces;     /* comm_warps: pieces per chunk: side_rows rows of <=             */
  int side_rows, side_ppr; /* AG_GEMM_SIDE_PIECE bytes each, or rows of side_ppr pieces      */
  int fp8;                 /* meld_ag_gemm_fp8: A and B e4m3, planned as bf16 of half the K   */
                           /* (set by ag_gemm_run; part of the argument hash)                 */
} ag_gemm_plan_t;

/* Caller-chosen plan fields (tests, bench); 0 / -1 = heuristic. The environment
 * (MELD_COMM_CTAS, MELD_CHUNK_BYTES, MELD_SCHEDULE=fused|unfused) overrides the heuristic,
 * the hint overrides both. */
typedef struct {
  int schedule;     /* -1 = choose, else ag_gemm_schedule_t (DIRECT only with one rank;
                       FUSED with one rank runs the fused kernel with nothing to gather) */
  int copy;         /* -1 = choose, else ag_gemm_copy_t                                    */
  int comm_ctas;    /* 0 = choose                                                          */
  int64_t chunk_rows; /* 0 = choose; a multiple of 128                                     */
  int group_m;      /* 0 = choose                                                          */
  int inplace;      /* -1 = choose (1), 0 = copy the own shard into the staging first       */
  int stream_k;     /* -1 = choose (off; MELD_AG_GEMM_STREAM_K=2: meld_gemm's rule), 0 = off, 1 = on
                       (the partial wave), 2 = on over one full wave + the partial wave */
  int epi_defer;    /* -1 = choose (on wherever the epilogue is the TMA store), 0 = off, 1 = on */
  int sk_pieces;    /* -1 = choose (AG_GEMM_SK_PIECES; MELD_AG_GEMM_SK_PIECES), else plan.sk_pieces */
  int sk_extra;     /* -1 = choose (comm_ctas at P > 1 with pieces; MELD_AG_GEMM_SK_EXTRA), else it */
  int tile_n;       /* 0 = choose (320 where meld_gemm's rule takes it, unless stream-K is asked;
                       MELD_AG_GEMM_TILE_N), else 256 or 320 (B [N,K] only: it turns stream-K and
                       the deferred epilogue off; a stream-K hint > 0 with 320 is an error) */
  int comm_warps;   /* -1 = choose (0; MELD_AG_GEMM_COMM_WARPS=1 asks, and is ignored where a_gathered
                       is given or the schedule is not fused), 0 = comm CTAs, 1 = comm warps (an
                       error with a_gathered: the comm warps do not write it) */
} ag_gemm_hint_t;

#define AG_GEMM_HINT_INIT {-1, -1, 0, 0, 0, -1, -1, -1, -1, -1, 0, -1}

/* Checks meld_ag_gemm's arguments for a communicator of nranks ranks. Never touches CUDA.
 * Returns MELD_OK, or MELD_ERR_INVALID_ARG with a sentence ("meld_ag_gemm: k 4100 is not a
 * multiple of 8 ..."). */
meld_result_t ag_gemm_validate(const meld_ag_gemm_args_t *a, int nranks);

/* 1 when the call computes nothing (m_loc or n_loc is 0; then it must be so on every rank). */
int ag_gemm_is_empty(const meld_ag_gemm_args_t *a);

/* Fills *plan for validated args: heuristic, environment, hint; then checks it
 * (ag_gemm_plan_check). sm_count: the smallest SM count of the node's GPUs (equal on every
 * rank: every rank must compute the same chunking). workspace_bytes: the comm's workspace.
 * Fails: MELD_ERR_INVALID_ARG (bad env value or hint), MELD_ERR_OUT_OF_MEMORY (the fused
 * staging does not fit the workspace: the message names MELD_WORKSPACE_BYTES to set). */
meld_result_t ag_gemm_plan_make(const meld_ag_gemm_args_t *a, int nranks, int sm_count,
                                size_t workspace_bytes, const ag_gemm_hint_t *hint,
                                ag_gemm_plan_t *plan);
/* The same for ranks on nnodes nodes: from 2 nodes the unfused schedule (a fused one asked by
 * MELD_SCHEDULE or the hint: MELD_ERR_UNSUPPORTED). ag_gemm_plan_make is nnodes 1. */
meld_result_t ag_gemm_plan_make_nodes(const meld_ag_gemm_args_t *a, int nranks, int nnodes, int sm_count,
                                      size_t workspace_bytes, const ag_gemm_hint_t *hint,
                                      ag_gemm_plan_t *plan);

/* Legality: roles fit the SMs (1 <= comm_ctas < grid <= sm_count; comm_ctas 0 with comm
 * warps, whose per-chunk piece counters fit the pad's credit slots), chunking (chunk_rows a
 * multiple of 128 dividing m_loc_pad), signals within the pad, staging within the workspace. */
meld_result_t ag_gemm_plan_check(const ag_gemm_plan_t *plan, int sm_count, size_t workspace_bytes);

/* The real rows of chunk j of shard r: its first row in the shard (*row0) and count
 * (*rows; 0 when the chunk is all padding). Global gathered row = r * m_loc + *row0 + i;
 * staging row = r * m_loc_pad + *row0 + i. */
void ag_gemm_chunk_rows(const ag_gemm_plan_t *plan, int64_t j, int64_t *row0, int64_t *rows);

/* Comm warps (plan comm_warps): piece q (< side_pieces) of chunk j covers the shard's rows
 * [*row0, *row0 + *rows) (*rows <= 0: an empty piece past a short chunk's rows; it still
 * counts) and, of each, the bytes [*c0, *c0 + *clen): side_rows whole rows of at most
 * AG_GEMM_SIDE_PIECE bytes, or one of side_ppr pieces of one longer row. Device and host. */
MELD_HD void ag_gemm_side_piece(int64_t chunk_rows, int64_t m_loc, int64_t k, int side_rows, int side_ppr, int64_t j,
                                int q, int64_t *row0, int *rows, int64_t *c0, int64_t *clen) {
  const int p0 = q / side_ppr * side_rows;
  const int64_t left = m_loc - j * chunk_rows; /* real rows from the chunk's start */
  const int64_t in_chunk = left < chunk_rows ? left : chunk_rows;
  *rows = (int)(in_chunk - p0 < side_rows ? in_chunk - p0 : side_rows);
  *row0 = j * chunk_rows + p0;
  *c0 = (int64_t)(q % side_ppr) * AG_GEMM_SIDE_PIECE;
  *clen = 2 * k - *c0 < AG_GEMM_SIDE_PIECE ? 2 * k - *c0 : AG_GEMM_SIDE_PIECE;
}

/* The signal (flag) index of global staging m-block mb, and of chunk j of shard r. */
int64_t ag_gemm_flag_of_mblock(const ag_gemm_plan_t *plan, int64_t mb);
int64_t ag_gemm_flag_of_chunk(const ag_gemm_plan_t *plan, int r, int64_t j);

/* The argument hash every rank must agree on (op, shard shape, chunking, schedule). */
uint32_t ag_gemm_arg_hash(const ag_gemm_plan_t *plan);

/* One line describing the plan. */
int ag_gemm_plan_format(const ag_gemm_plan_t *plan, char *buf, size_t len);

struct meld_comm;
struct gemm_fp8; /* gemm_plan.h gemm_fp8_t */
/* Plans (with `hint`, may be NULL) and runs one call: what meld_ag_gemm does (src/ops/
 * ag_gemm.cu). *plan_out (may be NULL) receives the plan. */
/* f8 (may be NULL: bf16): meld_ag_gemm_fp8's scales; args is then its bf16 view (half the K). */
meld_result_t ag_gemm_run(struct meld_comm *comm, const meld_ag_gemm_args_t *args,
                          const ag_gemm_hint_t *hint, const struct gemm_fp8 *f8, cudaStream_t stream,
                          ag_gemm_plan_t *plan_out);

#ifdef __cplusplus
}
#endif

#endif
