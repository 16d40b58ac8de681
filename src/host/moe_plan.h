/* moe_plan.h — host side of meld_moe_dispatch_gemm (src/ops/moe.cu): argument checks, the
 * workspace layout both kernels and every rank agree on, and the launch plan. Internal. */
#ifndef MELD_HOST_MOE_PLAN_H
#define MELD_HOST_MOE_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "meld.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MOE_BM 128            /* rows of a GEMM m-block: every expert's segment starts at a multiple */
#define MOE_MAX_RANKS 16      /* the fused kernel's parameters carry every rank's workspace        */
#define MOE_MAX_EXPERTS 1024  /* the routing kernel keeps 32 warps' counters per expert in smem      */
#define MOE_MAX_LOCAL 1024    /* experts per rank                                                   */
#define MOE_MAX_TOPK 64
#define MOE_ROUTE_THREADS 1024
#define MOE_ROUTE_MAX_CTAS 16 /* the routing kernel's CTAs at most (each a range of the pairs)      */
#define MOE_MAX_COMM_CTAS 64
enum { MOE_COPY_VEC = 0, MOE_COPY_BULK = 1 }; /* the comm CTAs' copies (moe_plan_t.copy) */

/* Where things live in every rank's workspace (byte offsets, 256-aligned; the same on every
 * rank for the regions peers write: staging, origins, block counters, counts). The local
 * tables come last (their size follows this rank's tokens). */
typedef struct {
  size_t stage;   /* bf16 [capacity, hidden]: received rows, grouped by local expert  (peers write) */
  size_t origin;  /* int32 [capacity, 2]: (source rank, pair) of each received row    (peers write) */
  size_t flags;   /* u64 [capacity / 128]: pieces landed per m-block (red.add by peers; zeroed by
                     the routing kernel: P pieces, one per source, complete a block)              */
  size_t counts;  /* int32 [P, E]: row s = rank s's rows per global expert            (peers write) */
  size_t arrivals; /* u64 [P]: meld_moe_combine's rows landed from each rank (red.add by peers;
                      zeroed by the routing kernel: one combine per dispatch)                 */
  size_t estart;  /* int32 [E + 1]: first slot of each expert in `sorted` (local tables from here)  */
  size_t seg;     /* int32 [E]: first row of expert e's segment on its rank                         */
  size_t srcoff;  /* int32 [E]: this rank's first row within expert e's segment                     */
  size_t used;    /* int32 [P]: m-blocks in use on each rank                                        */
  size_t brow;    /* int32 [capacity / 128]: hook f's table (local expert, or -1)                   */
  size_t span;    /* int32 [capacity / 128, 2]: hook f's runs (each block's expert's first block and
                     block count; an unused block: itself, 1)                                    */
  size_t sorted;  /* int32 [tokens x topk]: this rank's pairs sorted by expert                      */
  size_t inv;     /* int32 [tokens x topk]: each pair's place in `sorted` (the combine finds the
                     rows this rank's own experts computed for it: their row in y2)              */
  size_t ccount;  /* int32 [MOE_ROUTE_MAX_CTAS, E]: the routing kernel's per-CTA pairs per expert
                     (several routing CTAs: moe_plan_t.route_ctas)                               */
  size_t bytes;   /* the whole                                                                      */
} moe_layout_t;

/* The layout for P ranks, E experts, `pairs` = tokens x topk of this rank. */
moe_layout_t moe_layout(int nranks, int64_t pairs, int32_t experts, int64_t hidden, int64_t capacity);

typedef struct {
  int nranks, rank;
  int64_t tokens, hidden, n, capacity, ldx;
  int topk, experts, e_loc;
  int blocks;        /* capacity / 128 */
  moe_layout_t ws;
  int comm_ctas;     /* fused kernel: CTAs that copy rows first, then join the GEMM */
  int grid;          /* fused kernel: CTAs (one per SM) */
  uint32_t arg_hash; /* over what every rank must agree on */
  int defer;         /* the GEMM's deferred epilogue: -1 = the engine's choice (on), 0 / 1
                        (MELD_MOE_DEFER)                                                    */
  int runs;          /* the GEMMs' tiles expert by expert (hook f's runs; MELD_MOE_RUNS, default 1) */
  int group_m;       /* the GEMMs' raster group (MELD_MOE_GROUP_M; default 16 within the runs;
                        without them 1 where a local expert gets <= 256 rows on average with
                        even routing, else the engine's)                                     */
  int act;           /* MELD_MOE_ACT_*: SWIGLU = the GEMM's gated tiles (grp_glu = n / 2)   */
  int route_ctas;    /* the routing kernel's CTAs: 1 below 16384 pairs, else one per 4096 pairs up
                        to MOE_ROUTE_MAX_CTAS (MELD_MOE_ROUTE_CTAS forces 1..MOE_ROUTE_MAX_CTAS) */
  int route_in;      /* 1: the routing runs in the fused kernel's first route_ctas comm CTAs (no
                        routing kernel; MELD_MOE_ROUTE_IN, default 1), 0: in its own kernel */
  int route;         /* the routing kernel's place walk (MELD_MOE_ROUTE, bits: 1 = ballots, 2 = the
                        sorted pairs staged in shared memory, one routing CTA only; default 0) */
  int copy;          /* comm CTAs' copies: 0 = 16-byte vectors by every warp, 1 = bulk copies
                        through shared memory by one thread (MELD_MOE_COPY=vec|bulk)         */
} moe_plan_t;

/* MELD_MOE_ROUTE_IN as a plan reads it (1 when unset or bad): how many kernels a dispatch launches
 * (the refused call's handshakes must be as many as a valid call's). */
int moe_route_in_env(void);

/* Checks meld_moe_grouped_gemm's args for P ranks (the dispatch's included). */
meld_result_t moe_gemm_validate(const meld_moe_gemm_args_t *a, int nranks);

/* Checks meld_moe_combine's args for P ranks (the dispatch's included). */
meld_result_t moe_combine_validate(const meld_moe_combine_args_t *a, int nranks);

/* Checks args for P ranks; MELD_ERR_INVALID_ARG with a sentence naming the argument. */
meld_result_t moe_args_validate(const meld_moe_args_t *a, int nranks);

/* The plan for valid args on rank `rank` of P with sm_count SMs and a workspace of ws_bytes:
 * MELD_ERR_OUT_OF_MEMORY naming the size when it does not fit; MELD_MOE_COMM_CTAS, MELD_MOE_DEFER,
 * MELD_MOE_GROUP_M and MELD_MOE_COPY override (MELD_ERR_INVALID_ARG when bad). */
meld_result_t moe_plan_make(const meld_moe_args_t *a, int nranks, int rank, int sm_count, size_t ws_bytes,
                            moe_plan_t *p);

/* meld_moe_ffn's three calls from its args for P ranks: the dispatch (SwiGLU, y = the scratch's
 * activation), the second GEMM (into the scratch's h2) and the combine; g and c point at d.
 * Checks everything (MELD_ERR_INVALID_ARG, the sentence starting "meld_moe_ffn"). */
meld_result_t moe_ffn_split(const meld_moe_ffn_args_t *f, int nranks, meld_moe_args_t *d, meld_moe_gemm_args_t *g,
                            meld_moe_combine_args_t *c);

/* Whether meld_moe_ffn sends the combine's rows from the second GEMM's epilogue (1) or keeps the
 * GEMM and the combine's copies apart (0), by default. Several ranks: 1, so that the rows cross
 * NVLink while the GEMM runs (the same choice on every rank: it depends on nothing that differs
 * between them). One rank (tokens of it): 1 only where an expert gets <= 16 rows under even
 * routing, i.e. padding is >= 7/8 of each 128-row block, whose stores the scatter drops (session
 * 32, one H200: 8-10% faster in three runs of dsv3 T512, 16 rows an expert; 7% slower at 32 rows,
 * dsv3-32e T128; within the runs' +-4% noise at >= 128 rows). */
int moe_ffn_send_default(int nranks, int64_t tokens, int32_t topk, int32_t experts);

/* The layout rule the routing kernel applies (in parallel, on the device), stated on the host
 * for the unit test's brute-force check; test_moe checks the device's layout on the GPU. From the counts matrix
 * cnt[P][E] (rank s's rows per global expert) fills, for the rank `me`, seg[E] (first row of
 * expert e's segment on its rank), srcoff[E] (me's first row within it) and used[P] (m-blocks in
 * use per rank); returns the first rank whose padded rows exceed capacity, or -1. */
int moe_layout_ref(const int32_t *cnt, int nranks, int experts, int64_t capacity, int me, int32_t *seg,
                   int32_t *srcoff, int32_t *used);

/* ---- across nodes (src/common/moe_net.h: the scheme; src/ops/moe_net.cu) ---- */

/* Where the MoE ops across N nodes keep the rail's gathered data: the comm's MELD_SCRATCH_MOE slot,
 * 256-aligned offsets, the same for a dispatch and its combine (the layout depends only on N, T,
 * topk and hidden). */
typedef struct {
  size_t x;     /* bf16 [N T, hidden]: the rail's tokens, node by node                        */
  size_t ids;   /* int32 [N T, topk]: their ids, renumbered for this node (moe_net_local_id)  */
  size_t wt;    /* fp32 [N T, topk]: their weights (the combine, meld_moe_ffn)                 */
  size_t part;  /* bf16 [N T, hidden]: this node's partial sums, reduce-scattered over the rail */
  size_t out;   /* bf16 [T, hidden]: the reduce-scatter's result where out's ld is not hidden  */
  size_t tok;   /* int32 [L]: the node's ranks' T (for the origins), all-gathered              */
  size_t hdr;   /* int64 [N][MOE_NET_HDR_WORDS]: the rail's headers (moe_net.cu net_agree)       */
  size_t bytes; /* the whole                                                                    */
} moe_net_scratch_t;

#define MOE_NET_HDR_WORDS 8 /* a rank's header in the rail's agreement: op, shapes, status */

moe_net_scratch_t moe_net_scratch(int nodes, int L, int64_t tokens, int32_t topk, int64_t hidden);

/* The node's dispatch arguments on a rank of `nodes` nodes of L ranks: a with tokens N T, experts
 * E / N and, where given, x = xg (ld hidden) and topk_ids = idsg (NULL: a's, to check a before the
 * buffers exist). Checks that experts is a multiple of the N L ranks, then the node's call for L
 * ranks (moe_args_validate; the sentence then says it is the node's call on the gathered tokens). */
meld_result_t moe_net_args(const meld_moe_args_t *a, int nodes, int L, const void *xg, const int32_t *idsg,
                           meld_moe_args_t *d);

/* The four ops on a comm whose ranks span nodes (src/ops/moe_net.cu; the public entry points
 * hand such a comm to these). */
struct meld_comm;
meld_result_t moe_net_dispatch(struct meld_comm *comm, const meld_moe_args_t *a, cudaStream_t stream);
meld_result_t moe_net_grouped_gemm(struct meld_comm *comm, const meld_moe_gemm_args_t *g, cudaStream_t stream);
meld_result_t moe_net_combine(struct meld_comm *comm, const meld_moe_combine_args_t *c, cudaStream_t stream);
meld_result_t moe_net_ffn(struct meld_comm *comm, const meld_moe_ffn_args_t *f, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* MELD_HOST_MOE_PLAN_H */
