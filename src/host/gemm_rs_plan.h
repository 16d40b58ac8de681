/* gemm_rs_plan.h — GEMM + ReduceScatter / AllReduce: argument validation, the row split, the
 * fused kernel's workspace and signal layout, and the fused/unfused choice. Pure host C (no
 * CUDA calls), unit-tested on the CPU (tests/unit/test_gemm_rs_plan.c).
 *
 * Fused layout (P ranks, this rank r, R = rows per owner, a multiple of 128, ldn = N rounded up
 * to 8, T_own = (R / 128) * ceil(N / 256) tiles per owner):
 *   workspace of every rank, from offset 0:
 *     [0, 4 KiB)           header, rewritten by every CTA of every call (identical values):
 *                          the call's stamp and the hook pointer arrays (offsets below)
 *     partial slot s       (s = 0..P-2) at GEMM_RS_HDR_BYTES + s * slot_bytes: the bf16
 *                          partial of this rank's rows from sender q = (r + 1 + s) % P,
 *                          R x ldn, local rows (row - r * R)
 *     result slot s (AR)   at GEMM_RS_HDR_BYTES + (P - 1 + s) * slot_bytes: the reduced rows
 *                          of owner q = (r + 1 + s) % P, R x ldn
 *   signal pad of every rank: slot meld_signal_index(sender q, P, channel, tile, T_own);
 *     channel 0: "partial of my tile from q arrived", channel 1 (AR): "q's reduced tile
 *     arrived". Values are meld_stamp(epoch, 1): never reset, larger every call.
 * Sender q's slot index at owner o: (q - o - 1 + P) % P. */
#ifndef MELD_HOST_GEMM_RS_PLAN_H
#define MELD_HOST_GEMM_RS_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "common/proto.h"
#include "meld.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GEMM_RS_MAX_RANKS 16       /* fused path: hook pointer arrays in the header         */
#define GEMM_RS_HDR_BYTES 4096     /* workspace header                                      */
/* Header offsets (bytes): stamp, then eight pointer arrays of GEMM_RS_MAX_RANKS entries. */
#define GEMM_RS_HDR_STAMP 0
#define GEMM_RS_HDR_OUT 64
#define GEMM_RS_HDR_SIGNAL (GEMM_RS_HDR_OUT + 8 * GEMM_RS_MAX_RANKS)
#define GEMM_RS_HDR_SRC (GEMM_RS_HDR_SIGNAL + 8 * GEMM_RS_MAX_RANKS)
#define GEMM_RS_HDR_FLAGS (GEMM_RS_HDR_SRC + 8 * GEMM_RS_MAX_RANKS)
#define GEMM_RS_HDR_COPIES (GEMM_RS_HDR_FLAGS + 8 * GEMM_RS_MAX_RANKS)
#define GEMM_RS_HDR_COPY_SIGNAL (GEMM_RS_HDR_COPIES + 8 * GEMM_RS_MAX_RANKS)
#define GEMM_RS_HDR_PUSH (GEMM_RS_HDR_COPY_SIGNAL + 8 * GEMM_RS_MAX_RANKS)
#define GEMM_RS_HDR_PUSH_SIGNAL (GEMM_RS_HDR_PUSH + 8 * GEMM_RS_MAX_RANKS)
/* Symmetric AR (decode sizes, 2 ranks): at most this many 128 x 256 tiles (about one per SM:
 * each rank computes every tile, pushes its partial to the peer and reduces every tile itself;
 * one NVLink trip after the GEMM instead of partial push, owner's reduce, result push, copy). */
#define GEMM_RS_SYM_MAX_TILES 128

typedef struct {
  int is_ar;                /* 0: meld_gemm_rs, 1: meld_gemm_ar                           */
  int nranks, rank;
  int64_t m, n, k;
  int64_t rows_first, rows_count; /* RS: this rank's output rows; AR: 0, M                */
  int64_t split_rows;       /* R = ceil(M / P): the user-visible split (RS)                 */
  meld_gemm_rs_algo_t algo; /* FUSED or UNFUSED (never AUTO after planning)                 */
  const char *why_unfused;  /* static sentence when AUTO chose UNFUSED (or NULL)            */
  /* fused: */
  int64_t rpo;              /* rows per owner (multiple of 128)                             */
  int64_t ldn;              /* staging leading dimension (elements)                         */
  int tiles_m, tiles_n;     /* of the whole GEMM (128 x 256 tiles)                          */
  int tiles_own;            /* (rpo / 128) * tiles_n: flags per (sender, channel)           */
  int m_rotate;             /* GEMM tile order: the next ranks' rows first, own rows last   */
  int own_first;            /* first logical m-block of this rank's own rows                */
  int group_m;              /* raster group dividing own_first (own tiles strictly last)    */
  int ileave;               /* 1: the interleaved owner order (gemm.cuh gemm_order_hook_t
                               ileave_b / ileave_p; RS at 2 ranks with MELD_GEMM_RS_ORDER=ileave,
                               RS / AR owner mode at >= 3 ranks by default): m_rotate 0, own
                               tiles spread over the call, not last */
  int sym;                  /* AR, 2 ranks, <= GEMM_RS_SYM_MAX_TILES: every rank reduces every tile */
  size_t slot_bytes;        /* rpo * ldn * 2, rounded up to 256                             */
  size_t ws_needed;         /* header + slots                                               */
  /* unfused (RS): scratch buffer rows x ldn for the GEMM output and the received rows */
  size_t scratch_bytes;
  uint32_t arg_hash;        /* folded hash of the shapes every rank must agree on           */
} gemm_rs_plan_t;

/* The row split of meld_gemm_rs (see meld.h). */
void gemm_rs_rows(int64_t m, int nranks, int rank, int64_t *first, int64_t *count);

/* Checks arguments (name = "meld_gemm_rs" / "meld_gemm_ar" for messages). MELD_OK or
 * MELD_ERR_INVALID_ARG with a sentence. Touches no CUDA state. */
meld_result_t gemm_rs_args_validate(const meld_gemm_rs_args_t *a, int is_ar, int nranks, int rank);

/* The per-rank GEMM of a GEMM+RS/AR call as meld_gemm arguments: A, B, layout and M x N x K
 * (c and ldc left 0: each caller says where the product goes). */
meld_gemm_args_t gemm_rs_gemm_args(const meld_gemm_rs_args_t *a);

/* The one-kernel decode GEMM+AR (src/ops/gemm_ar_decode.cu, MELD_GEMM_AR_DECODE_FUSED=1):
 * runs the call when its conditions hold (*taken = 1), else returns MELD_OK with *taken = 0
 * for the unfused path. g: the rank's GEMM (its c / ldc are ignored); C = c [M, ldc]; loop:
 * the one-rank loopback (C = 2 x the partial); plan_hash: the plan's argument hash. */
struct meld_comm;
/* The decode kernel's partials (P slots) take the workspace's top, at most its upper half; the unfused
 * path's zero-copy partial (written by meld_gemm before any handshake) the bottom half: the two
 * never overlap (a peer may still read the kernel's partial after its call ended). */
#define GEMM_AR_DECODE_MAX_PART(ws_bytes) ((size_t)(ws_bytes) / 2)
meld_result_t gemm_ar_decode_fused(struct meld_comm *comm, const meld_gemm_args_t *g, void *c, int64_t ldc, int loop,
                                   uint32_t plan_hash, cudaStream_t stream, int *taken);

/* Plans one call: validates, computes the split, the layout, and the algorithm. nnodes > 1
 * or nranks > GEMM_RS_MAX_RANKS make the fused path illegal; a workspace smaller than
 * ws_needed too (AUTO then takes the unfused path; forced FUSED fails with
 * MELD_ERR_OUT_OF_MEMORY naming MELD_WORKSPACE_BYTES). */
meld_result_t gemm_rs_plan_make(const meld_gemm_rs_args_t *a, int is_ar, int nranks, int rank,
                                int nnodes, size_t workspace_bytes, gemm_rs_plan_t *pl);

/* As gemm_rs_plan_make, with the node's smallest SM count (0 = unknown): AUTO then also takes
 * the unfused path for an all-reduce whose GEMM has at most sm_count / 2 tiles (decode). */
meld_result_t gemm_rs_plan_make_sm(const meld_gemm_rs_args_t *a, int is_ar, int nranks, int rank, int nnodes,
                                   size_t workspace_bytes, int sm_count, gemm_rs_plan_t *pl);

/* The own-tile add mode of the fused kernel (gemm.cuh hook g reduce.preload) for a call whose
 * own tiles reach C by TMA store: `requested` (MELD_GEMM_RS_PRELOAD; 4 unset) = 0 the pass,
 * 1..3 loads into registers, 4 the first partial by TMA into the staging, 5 the producer's
 * partial stages. Modes 4 and 5 are not in the flag-helper kernels (`helper`: the pass) nor
 * with diag bit 2 (no partial loads); 5 needs whole tiles (`split` 0) of >= `min_kb` k-blocks
 * (`k_blocks`) and cluster 1, else 4; with no source to add (`nsrc` 0, one rank) own tiles are
 * stored as staged (1). Other values: the pass. */
int gemm_rs_preload_mode(int requested, int helper, int diag, int nsrc, int split, int k_blocks, int min_kb,
                         int cluster_m);

/* Which hook g kernel runs a fused call (gemm_rs.cu; gemm.cuh template parameter PRE): 0 the
 * general one (every add mode at run time), 1 the one with add mode 4 compiled in (AR's copy
 * code included), 2 the same for RS only (without it). The lean kernels need the default
 * plan's mode: reduction on (`reduce_on`), `preload` 4, own tiles by TMA store (`tma`), no
 * symmetric push (`npush` 0), whole tiles (`split_k` 1, `sk_tiles` 0), neither the diagnostic
 * bare kernel (`bare`) nor the flag helper's (`helper`). `lean` = MELD_GEMM_RS_LEAN (1 unset):
 * 0 keeps the general kernel, 2 runs RS in the AR's lean kernel (diagnosis). */
int gemm_rs_kernel_variant(int lean, int is_ar, int bare, int helper, int reduce_on, int preload, int tma, int npush,
                           int split_k, int sk_tiles);

/* 1 when a fused call's reduced tiles release their copy flags one epilogue later, like the
 * pushes' (gemm.cuh reduce.copy_defer): never with the flag helper, without copies to make
 * (`ncopies` > 0: AR in owner mode), past local tiles < 2^24 (the pending word's field) or with
 * MELD_GEMM_AR_COPY_FLAG=now (`flag` 1); then by default in the TMA-push kernels (`g2`), and
 * in the other lean kernels (`lean`) with the copies by TMA (`copy_tma`) only with
 * MELD_GEMM_AR_COPY_FLAG=next (`flag` 2; 3+ ranks, session 28, opt-in). */
int gemm_rs_copy_defer(int g2, int lean, int copy_tma, int helper, int ncopies, int64_t tiles_own, int flag);

/* Whether a fused call's reduced tiles reach their copies (AR in owner mode: the peers' result
 * slots or, zero copy, their C) by TMA store from the staging (gemm.cuh reduce.copy_tma): 1 for
 * one copy (2 ranks; map_cp), 2 for 2 .. GEMM_PUSH_MAPS copies (3 .. 8 ranks, session 28: one
 * map per peer in the fused kernel's parameter), else 0; in the lean kernels only (`lean`:
 * gemm_rs_kernel_variant != 0), own tiles stored by TMA (`tma`), and not with
 * MELD_GEMM_AR_COPY=st (`st`: the threads' 16-byte stores, as before session 15; at more than 2
 * ranks before session 28). */
int gemm_rs_copy_tma(int lean, int tma, int ncopies, int st);

/* The k-block of a CTA's next mainloop after which a pushed tile's deferred second half is
 * staged and pushed (gemm.cuh out_defer_kb), or -1 for none (the half goes out in the tile's
 * epilogue once the first half's store has read the staging out): only in the lean kernels
 * (`variant` != 0, gemm_rs_kernel_variant) with the TMA push (`g2`: 2 ranks). `requested` =
 * MELD_GEMM_RS_PUSH_DEFER: -1 "off", >= 0 that k-block, -2 unset: GEMM_RS_PUSH_DEFER_KB.
 * GEMM_RS_PUSH_DEFER_KB is off (-1) until 2 GPUs measure it. The case for it: at 2 GPUs with every CTA pushing
 * at once, half 0's 32 KB per CTA drain at ~360 GB/s / 132 CTAs, up to ~12 us, with both
 * warpgroups waiting; 16 k-blocks of K 64 are ~13 us of mainloop at the cap (8192^2 x 4096),
 * so KB 16 is the candidate. One GPU, loopback, sustained RS 8192^2 x 4096 (session 15, four
 * runs): off 0.8805 / 0.8702 / 0.8734 / 0.8723 ms, KB 16 0.8806 / 0.8770 / 0.8779 / 0.8787
 * (+0.5% in the last three), KB 0 0.8798 / 0.8771 / 0.8734 / 0.8757: the drain it removes
 * exists only on NVLink, and it costs ~0.5% without it. */
#define GEMM_RS_PUSH_DEFER_KB (-1)
int gemm_rs_push_defer_kb(int variant, int g2, int requested);

/* 1 when an own tile's start keeps a pending copy flag for the next epilogue's start (gemm.cuh
 * reduce.copy_hold): only where copy flags are deferred (`copy_defer`, gemm_rs_copy_defer) in
 * the lean kernels (`variant` != 0); `requested` = MELD_GEMM_AR_COPY_HOLD: 0 / 1, -1 unset:
 * GEMM_RS_COPY_HOLD (on). Session 16, one H200, AR loopback 8192^2 x 4096: an own tile's start
 * work 3.5 -> 1.3 us (median; the release moves to the epilogue's start, +0.45 us there, when
 * the copies issued a mainloop earlier are done); sustained, zero copy (the 2-rank default for a
 * symmetric or registered C) 0.8804 / 0.8825 vs 0.8850 / 0.8884 ms (two processes; call 2:
 * even), slots within noise. At 2 GPUs the wait it removes is the copies' NVLink drain (every
 * CTA copying at once). */
#define GEMM_RS_COPY_HOLD 1
int gemm_rs_copy_hold(int variant, int copy_defer, int requested);

/* 1 when a fused call's C stores (own tiles, AR copies; not pushes) carry L2::evict_first
 * (gemm.cuh gemm_store_c; the lean kernels: the general one ignores it): `requested` =
 * MELD_GEMM_STORE_HINT 0 / 1, -1 unset: GEMM_RS_STORE_HINT (off). One H200, loopback 8192^2 x
 * 4096, sustained, with / without: RS -0.6% (s15), -0.65% (s16 call 2), -0.8 / +0.3 / -0.3%
 * (s16 call 6, three processes), +1.4% (call 7, two rows, one pair of passes), -0.3% (call
 * 8, four pairs); zero-copy AR -0.3 / -0.8 / -0.4%, +1.4%, -0.2%: ~0.2-0.3%, and off anyway,
 * as for meld_gemm: the next kernel of a model reads C, and evict-first would send that read
 * to HBM wherever C fits in L2 (the benches do not see that). */
#define GEMM_RS_STORE_HINT 0
int gemm_rs_store_hint(int requested);

/* The first partial slot that an own tile's start asks L2 for (gemm.cuh reduce.pf = the
 * result + 1, map_pf's box holding slots [first, nsrc)), or -1 for none. Only with add mode 4
 * (`preload`), which loads src[0]'s halves by TMA and further sources into registers after the
 * mainloop. `requested` = MELD_GEMM_RS_PF: 0 off, 1 the further sources (slot 1 on; more than
 * 2 ranks), 2 every source (slot 0 on: src[0]'s half 1 too; any rank count), -1 unset: the
 * further sources where a tile's mainloop has at most GEMM_RS_PF_KB k-blocks (`k_blocks`),
 * else none. Session 27, 4 and 8 ranks as threads on one H200, 8192 x 8192 x K, asked at the
 * tile's start: K 1024 (4 / 2 k-blocks a tile) -8 / -3.5% for GEMM+RS, -7 / -3% GEMM+AR; K 8192
 * (32 / 16) +1.6 / +1.2% (the lines are gone again by the epilogue); 2 ranks, every source, K
 * 8192: +-1%. Asked by the producer a few k-blocks before the end instead: worse at K 1024
 * (+5%, the prefetch ahead of the peers' data and in the TMA unit's queue before the loads). */
#define GEMM_RS_PF_KB 8
int gemm_rs_pf_first(int requested, int preload, int nsrc, int k_blocks);

/* 1 when a fused GEMM+AR with result slots (owner mode, C not symmetric: `slots`) copies the
 * peers' reduced tiles into C during the GEMM as well (warps 2-3 of the producer warpgroup,
 * gemm_rs.cu gemm_ar_copy_early), not only in the tail after it: `requested` =
 * MELD_GEMM_AR_EARLY_COPY 0 / 1, -1 unset: from GEMM_RS_EARLY_COPY_MIN_RANKS ranks (`nranks`)
 * on. Session 7 (one H200, 2-rank loopback, Nsight Compute cycles at locked clocks, the wait
 * then spinning): the GEMM slowed by more than the copy it hid. Session 27 (ranks as threads
 * on one H200, 8192 x 8192 x K, sustained): 2 ranks -3% at K 8192, -0.6% at K 1024; 4 ranks
 * -3.5..-4.5% and -6.5%; 8 ranks (with the prefetch) -5.5% at K 8192; the tail's copy of
 * (P - 1) / P of C by one warp per CTA was ~0.45 ms of a 2.4 ms call at 4 ranks. 2 x H200
 * (session 9): 1.068 vs 1.082 ms at 8192^3, within noise. */
#define GEMM_RS_EARLY_COPY_MIN_RANKS 2
int gemm_rs_early_copy(int requested, int slots, int nranks);

/* The fused kernel's partial push (gemm.cuh hook g2; the kernels' G2): 1 = TMA store into the
 * one peer's slot with the flag deferred to the next epilogue (2 ranks, the default there since
 * session 2; `st` = MELD_GEMM_RS_PUSH=st: 0), 2 = the same with one map per owner for 3 ..
 * GEMM_PUSH_MAPS + 1 ranks, opt-in (`tma` = MELD_GEMM_RS_PUSH=tma; session 27: built and
 * CPU-tested only), 0 = the threads' 16-byte stores with the flag released in the epilogue
 * after a fence (the default from 3 ranks on; also symmetric mode, `sym`, and the diagnostic bare
 * kernel, `bare`). */
int gemm_rs_push_mode(int nranks, int sym, int bare, int st, int tma);

/* 0 if a fused plan is consistent (layout fits the pad's signal region and the workspace,
 * group_m divides own_first, ...); else 1 and a sentence in why. */
int gemm_rs_plan_check(const gemm_rs_plan_t *pl, size_t workspace_bytes, char *why, size_t len);

/* One line per group of fields. */
void gemm_rs_plan_format(const gemm_rs_plan_t *pl, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

/* The AR copy phase's item `item` (< sources x tiles_own) -> the source index *s and the owner-
 * local tile *tile (m * tiles_n + n): items run in the peers' raster order (groups of group_m
 * m-blocks, m fastest, as the engine's tickets), so copiers meet tiles roughly as they arrive.
 * A bijection on each source's tiles (tests/unit/test_gemm_rs_plan.c). Host and device. */
MELD_HD void gemm_ar_item_tile(uint32_t item, uint32_t tiles_own, uint32_t tiles_n, uint32_t group_m,
                               uint32_t sources_minor, int *s, int *tile) {
  /* (sources_minor = the source count: every source's tile i before any tile i + 1, for the
   * interleaved order of more than 2 ranks, where owners reduce their tiles i at the same
   * time all through the call; 0: source after source, where they all come at the end) */
  *s = (int)(sources_minor ? item % sources_minor : item / tiles_own);
  const uint32_t i = sources_minor ? item / sources_minor : item % tiles_own, B = tiles_own / tiles_n,
                 gmx = group_m > 0 ? group_m : 1u;
  const uint32_t per = gmx * tiles_n, g = i / per, first = g * gmx, gm = gmx < B - first ? gmx : B - first;
  const uint32_t r = i - g * per;
  *tile = (int)((first + r % gm) * tiles_n + r / gm);
}

#endif
