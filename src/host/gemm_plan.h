/* gemm_plan.h — host side of the GEMM engine: argument validation, tensor-map encoding,
 * variant choice (cluster, raster group, epilogue), printable plan. Internal (not public).
 *
 * The kernel parameters (gemm_params_t, with its hooks) are defined at the top of
 * src/device/gemm.cuh, in plain C, so that this planner and fused ops share them. */
#ifndef MELD_HOST_GEMM_PLAN_H
#define MELD_HOST_GEMM_PLAN_H

#include "device/gemm.cuh"
#include "device/gemm_skinny.cuh"
#include "meld.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Choices a caller (meld_gemm, a fused op, the benchmark) may force; 0 / -1 = let the
 * heuristic choose. */
typedef struct {
  int sm_count;     /* CTAs available to the engine (required, >= 1)                      */
  int max_clusters; /* co-resident 2-CTA clusters on the device; 0 = unknown (no clusters) */
  int cluster_m;    /* 0 = choose, 1 or 2                                                  */
  int group_m;      /* 0 = choose; raster group in m-units                                 */
  int epi_tma;      /* -1 = choose (TMA store), 0 = generic 16-byte stores, 1 = TMA store  */
  int split_k;      /* 0 = choose (cost model below), 1 = off, 2..8 = forced               */
  /* Stream-K (fields added after the first ones; zero = defaults):
   *   0 = default: gemm_plan_default_sk (2 or off; needs has_workspace), 1 = off,
   *   2 = the last partial wave's tiles (all tiles when there are fewer than sm_count),
   *   3 = one full wave + the partial wave (each range is 1..2 tiles of k-blocks),
   *   4 = the cost model's choice of 1 or 3 (needs has_workspace). */
  int stream_k;
  int has_workspace; /* 1: the caller provides p->workspace / p->counters (gemm_plan_for does) */
  /* Split-K / stream-K combine (added later; zero = default): 1 = partials stored and read
   * back by the last arriver, 2 = partials added in L2 into one zeroed tile
   * (red.global.add.v4.f32; needs has_workspace: the caller keeps that workspace zeroed),
   * 3 = as 2 with the arrival ticket taken first (the last arriver adds nothing to L2).
   * Default: 3 for split-K whose pieces all run at once (tiles x split_k <= CTAs), else 1. */
  int fixup_red;
  /* Epilogue overlap of the stand-alone kernel (p->epi_defer): 0 = default, 1 = off, 2 = on
   * (each tile's second half stored during the next tile's first k-block; the 128 x 320 tile's
   * default is off, its 64-column third deferred only when forced). Only with the
   * TMA-store epilogue (which needs n % 8 == 0: else 16-byte stores, even if epi_tma is 1);
   * fused kernels ignore it. */
  int epi_defer;
  /* Split-K k-block order (p->split_ileave): 0 = default (contiguous), 1 = contiguous ranges,
   * 2 = interleaved (split s takes k-blocks s, s + split_k, ...). */
  int split_ileave;
  /* Swapped small-M kernel (p->skinny_mt, src/device/gemm_skinny.cuh; added later):
   * 0 = the engine (what fused ops and callers forcing engine options get), 1 = choose by
   * gemm_plan_default_skinny (meld_gemm's default), 2 = forced (needs m <= 128 and B [N,K]).
   * With the skinny kernel, split_k 1..8 forces its cluster size. */
  int skinny;
  int skinny_hint; /* 0 = default; else 1 + p->skinny_hint bits (1: B evict_first, 2: A evict_last) */
  int skinny_mt;   /* 0 = choose; else the padded row count (16, 32, 64, 128, 160, 192, 256) */
  /* NULL = unknown; else [S] (S = 1..8) = how many clusters of S small-M CTAs the device runs
   * at once (cudaOccupancyMaxActiveClusters; gemm_plan_for fills it). */
  const int *skinny_clusters;
  /* Stream-K ranges (added later; 0 = default): 0 = one range per worker (the static
   * schedule's stream-K: worker w runs range w); n >= 1 = n equal ranges per stream-K tile
   * (at most its k-blocks), for a caller whose workers take tickets from a dynamic queue
   * (the order hook's queue): the pieces are then small enough that a worker that joined late
   * (a fused kernel's comm CTAs) takes fewer of them. */
  int sk_pieces;
  /* Tiles added to the stream-K region (0 = none): a caller whose queue has workers that join
   * late (AG+GEMM's comm CTAs) moves that many whole tiles into pieces, so that the late ones
   * are not still on a whole tile when the others have run out of work. */
  int sk_extra;
  /* Tile width (added later): 0 = GEMM_BN (what fused ops get: their kernels have only that
   * tile), 1 = choose by gemm_plan_default_tile_n (meld_gemm's default; MELD_GEMM_TILE_N=256
   * or 320 is preferred instead where legal), 256 or 320 = forced. 320 (GEMM_BN_WIDE) needs B
   * [N,K] and takes no split-K or stream-K (cluster_m 2 only as the experimental B-multicast
   * pair); the stand-alone kernel only (its deferred epilogue part is the 64-column third).
   * 128 (GEMM_BN_PP, session 42) = the ping-pong tile: each consumer warpgroup owns whole
   * 128 x 128 tiles and one's epilogue overlaps the other's mainloop; B [N,K], the TMA-store
   * epilogue (n % 8 == 0), no cluster, split-K, stream-K or deferred half; the stand-alone
   * kernel only. With tile_n 1, MELD_GEMM_TILE_N=128 prefers it where legal. */
  int tile_n;
  /* Early stage release (p->early_release; added later): 0 = the plan's (on for the wide tile
   * only), 1 = off, 2 = on. MELD_GEMM_EARLY_RELEASE=0/1 (off / on) replaces 0. */
  int early_release;
  /* C's TMA stores with L2::evict_first (p->store_hint; session 15): 0 = the plan's (off),
   * 1 = off, 2 = on. MELD_GEMM_STORE_HINT=0/1 replaces 0. */
  int store_hint;
  /* Reproducible results (added later; MELD_GEMM_DETERMINISTIC=1 sets it): 1 = every tile's K
   * pieces combine in an order that does not depend on timing: split-K of at most 2 pieces (two
   * fp32 partials add the same in either order) where it is chosen, no stream-K by default; a
   * forced split_k > 2 or stream_k > 1 is refused. */
  int deterministic;
} gemm_plan_opts_t;

#define GEMM_PLAN_OPTS_INIT {0, 0, 0, 0, -1, 0, 0, 0, 0, 0, 0, 0, 0, 0, NULL, 0, 0, 0, 0, 0, 0}

/* The default tile width: GEMM_BN_WIDE (320) for B [N,K] when the 128 x 256 tiles number at
 * least sm_count and the wide tiles' rounds (ceil(tiles / sm_count) x 320 columns of work)
 * cost at most 0.9 x the 256 tiles' rounds, and k has >= 16 k-blocks; else GEMM_BN. E.g. on
 * 132 SMs 2048 x 5120: 3 rounds x 256 against 2 x 320 (0.83) -> 320; 8192 x 5120: 10 x 256
 * against 8 x 320 (1.0) -> 256. Pure arithmetic. */
int gemm_plan_default_tile_n(int64_t m, int64_t n, int64_t k, int b_kn, int sm_count);

/* The default choice of the swapped kernel (B [N,K] only): 1 when m <= 128; or when the
 * engine's 128x256 tiles fill at most 3/4 of sm_count SMs, K has >= 32 k-blocks, and some
 * m-block height (gemm_plan_skinny_mt) makes >= 9/10 of sm_count tiles; else 0. Pure
 * arithmetic. */
int gemm_plan_default_skinny(int64_t m, int64_t n, int64_t k, int b_kn, int sm_count);

/* The swapped kernel's padded m-block height MT (16, 32, 64, 128, 160, 192, 256) and cluster
 * size (*split, may be NULL) for m x n with k_blocks k-blocks on sm_count SMs: the most CTAs
 * (ceil(n / 128) x ceil(m / MT) tiles x the split rule's S) in one wave; ties: fewer m-blocks,
 * then the smaller MT; 256 when no height fits one wave. *split is then that S, but 2 for
 * MT <= 32 where 2 per tile keep >= 3/8 of the SMs busy (session 19; the explicit-MT plan
 * applies the same rule). gemm_plan_skinny_mt: the height without cluster data or a k-block
 * limit. */
int gemm_plan_skinny_shape(int64_t m, int64_t n, int k_blocks, int sm_count, const int *clusters, int *split);
int gemm_plan_skinny_mt(int64_t m, int64_t n, int sm_count);

/* The skinny kernel's cluster size for n columns, k_blocks k-blocks on sm_count SMs: the
 * largest S in 1..8 (at most k_blocks) whose ceil(n / 128) x S CTAs fit the SMs once and, when
 * `clusters` is given, whose ceil(n / 128) clusters of S all run at once (clusters[S]; a GPC
 * holds whole clusters, so e.g. 32 clusters of 4 may not fit on 132 SMs). */
int gemm_plan_skinny_split(int64_t n, int k_blocks, int sm_count, const int *clusters);
/* The same for `tiles` tiles (column blocks x m-blocks). */
int gemm_plan_skinny_split_tiles(int64_t tiles, int k_blocks, int sm_count, const int *clusters);

/* The default stream-K choice for a problem of `tiles` 128x256 tiles of k_blocks k-blocks on
 * sm_count CTAs: 2 (stream-K over the partial wave) when tiles >= sm_count, k_blocks >= 48
 * and the partial wave holds 10%..62% of sm_count tiles; else 1 (off). Pure arithmetic. */
int gemm_plan_default_sk(int64_t tiles, int sm_count, int k_blocks);

/* The stream-K region gemm_plan_make takes for `tiles` tiles of k_blocks on W workers: the
 * partial wave (+ one full wave with full_wave), + `extra` tiles, in `pieces` ranges per tile
 * (0: W ranges). Returns 1 when it fits the engine's 32-bit partition arithmetic, else 0. */
int gemm_plan_sk_region(int64_t tiles, int W, int k_blocks, int full_wave, int pieces, int extra, int64_t *sk_tiles,
                        int64_t *ranges);

/* Overrides of the plan's choices from the environment, read once (gemm_plan_for applies them
 * to options left at "choose"): MELD_GEMM_GROUP_M, MELD_GEMM_SPLIT_K, MELD_GEMM_STREAM_K;
 * MELD_GEMM_SKINNY=0 turns the small-M kernel's rule off (skinny 1 becomes 0);
 * MELD_GEMM_TILE_N=256 or 320 is preferred where tile_n is 1 (choose), 320 only where the wide
 * tile is legal (applied in gemm_plan_make). */
void gemm_plan_env(gemm_plan_opts_t *o);
/* MELD_GEMM_FP8_LATE=1 (diagnostic): gemm_params_t.fp8_rows bit 3 on meld_gemm_fp8's plans, the
 * scales loaded after the mainloop's last wait as before session 43 (A/B of gemm_fp8_early). */
int gemm_plan_fp8_late(void);

/* Checks meld_gemm arguments. Returns MELD_OK, or MELD_ERR_INVALID_ARG with a sentence
 * ("meld_gemm: lda 4100 is not a multiple of 8 ..."). Touches no CUDA state. */
meld_result_t gemm_args_validate(const meld_gemm_args_t *a);

/* A bf16 map over `slots` equal buffers `slot_pitch` bytes apart (a fused op's partial slots),
 * each `rows` rows of `n` elements, `ld` elements apart: dims {n, rows, slots}, box
 * {min(256, n rounded up to 8), min(64, rows), box_slots}, no swizzle: for whole-box L2
 * prefetches (gemm.cuh tma_prefetch_3d). `ld` a multiple of 8, `slot_pitch` of 16. */
meld_result_t gemm_plan_map_slots(CUtensorMap *map, const void *base, int64_t n, int64_t rows, int64_t ld,
                                  uint64_t slot_pitch, int slots, int box_slots);

/* A bf16 tensor map of `rank` (1..5) dims, innermost first, `strides` in bytes (rank - 1 of
 * them), 128-byte swizzle, zero fill: for kernels beyond the GEMM engine (attention). `what`
 * names the caller in the error sentence. */
meld_result_t tmap_encode_bf16(CUtensorMap *map, const void *base, int rank, const uint64_t *dims,
                               const uint64_t *strides, const uint32_t *box, const char *what);

/* Fills *p for valid args a (validated first) and sets *workers, the number of engine CTAs
 * to launch (a multiple of p->cluster_m). Encodes the three tensor maps through the driver
 * entry point cuTensorMapEncodeTiled (fetched with cudaGetDriverEntryPointByVersion; meld
 * does not link libcuda). Hooks are left off (zero). Fails: MELD_ERR_INVALID_ARG,
 * MELD_ERR_CUDA (no driver entry point, or the encoder rejected a map). */
meld_result_t gemm_plan_make(const meld_gemm_args_t *a, const gemm_plan_opts_t *o,
                             gemm_params_t *p, int *workers);

/* The deterministic option's part of the plan (pure): refuses (MELD_ERR_INVALID_ARG) a forced
 * split_k > 2 or stream_k > 1 when o->deterministic; else caps *split (the chosen split-K) at 2
 * and sets *sk (the stream-K mode about to be chosen) to 1 (off) when o->deterministic. */
meld_result_t gemm_plan_det_apply(const gemm_plan_opts_t *o, int *split, int *sk);

/* Gated tiles (gemm_params_t.grp_glu) for a plan p of hook f whose n is 2 up: map_b over the
 * stacked weights b [b_rows, k] (ld ldb) with the gated box (128 rows), map_c over C = c [m, up]
 * (ld ldc), grp_glu = up. The caller sets grp_brow / grp_rows (= 2 up) and checks the plan. */
meld_result_t gemm_plan_glu(gemm_params_t *p, const void *b, int64_t b_rows, int64_t ldb, void *c, int64_t ldc,
                            int32_t up);

/* Bytes of split-K workspace and counter words a plan needs (0 when split_k is 1). The
 * caller sets p->workspace / p->counters (counters zeroed once; they reset themselves). */
size_t gemm_plan_workspace_bytes(const gemm_params_t *p);
size_t gemm_plan_counter_words(const gemm_params_t *p);

/* Split-K / stream-K workspaces (src/ops/gemm.cu), one per (owner, device, stream). A fused op
 * keeps its own (a call that fails part-way may leave counters non-zero: then its comm is failed
 * for good, while meld_gemm's and the other ops' stay clean). Grown outside stream capture
 * only; counters zeroed at allocation (stream-ordered), then reset by the kernels. Returns 0
 * and buffers of >= bytes and >= words counters, or 1 (capturing and none large enough, or
 * out of memory): the caller then plans without split-K / stream-K. */
enum { GEMM_WS_MELD_GEMM = 0, GEMM_WS_GEMM_RS = 1, GEMM_WS_AG_GEMM = 2 };
int gemm_stream_workspace(int owner, cudaStream_t stream, size_t bytes, size_t words, float **ws,
                          uint32_t **counters);

/* What gemm_launch would run (device setup, plan, split-K workspace for this stream). */
meld_result_t gemm_plan_for(const meld_gemm_args_t *a, const gemm_plan_opts_t *o,
                            cudaStream_t stream, gemm_params_t *p, int *workers);

/* How many clusters of S (1..8) small-M CTAs the current device runs at once (0 = unknown). */
int gemm_skinny_clusters(int S);

/* Launches the stand-alone engine kernel for a finished plan (src/ops/gemm.cu); checks the
 * plan with gemm_params_check first. */
meld_result_t gemm_launch_params(const gemm_params_t *p, int workers, cudaStream_t stream);

/* Plans with options o and launches (what meld_gemm does with defaults). */
meld_result_t gemm_launch(const meld_gemm_args_t *a, const gemm_plan_opts_t *o,
                          cudaStream_t stream);

/* FP8 (meld_gemm_fp8 and the fused ops' fp8 forms): the scales (device pointers, never NULL:
 * gemm_fp8_scales fills NULLs with a device 1.0) and rows = gemm_params_t.fp8_rows (bit 0:
 * scale_a per row of A, bit 1: scale_b per row of B). Such calls pass their bf16 view: the
 * e4m3 matrices as bf16 of half the K (gemm.cuh gemm_params_t.fp8). */
typedef struct gemm_fp8 {
  const float *scale_a, *scale_b;
  int rows;
  int shard_rows; /* meld_ag_gemm_fp8: scale_a holds this rank's shard's rows only (rows bit 0
                     set); ag_gemm_run gathers every rank's into the comm's scratch first */
} gemm_fp8_t;

/* f8's scales: scaling a meld_fp8_scaling_t (checked by gemm_fp8_validate); each NULL replaced by
 * a device 1.0 read per tensor. */
meld_result_t gemm_fp8_scales(const float *scale_a, const float *scale_b, int scaling, gemm_fp8_t *f8);

/* k of an fp8 problem: a positive multiple of 16 (checked whatever the other sizes: the bf16
 * view halves it). */
meld_result_t gemm_fp8_check_k(const char *fn, int64_t k);

/* Validates meld_gemm_fp8-style operands (gemm_fp8_check_k included; fn names the caller in the
 * sentences): lda and ldb >= k and multiples of 16, 16-byte aligned bases, scales 4-byte
 * aligned, scaling a meld_fp8_scaling_t. */
meld_result_t gemm_fp8_validate(const char *fn, const void *a, int64_t lda, const void *b, int64_t ldb, int64_t k,
                                const float *scale_a, const float *scale_b, int scaling);

/* gemm_launch for the bf16 view of an fp8 problem (meld_gemm's defaults, o NULL). */
meld_result_t gemm_launch_fp8(const meld_gemm_args_t *view, const gemm_fp8_t *f8, cudaStream_t stream);
/* The same with gemm_plan_opts_t.tile_n (1: meld_gemm_fp8's choice; 128: the ping-pong tile). */
meld_result_t gemm_launch_fp8_tile(const meld_gemm_args_t *view, const gemm_fp8_t *f8, int tile_n,
                                   cudaStream_t stream);
/* meld_gemm_fp8 with tile_n as above (tests and benches force the ping-pong tile with 128). */
meld_result_t gemm_fp8_tile(const meld_gemm_fp8_args_t *a, int tile_n, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
