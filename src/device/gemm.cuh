/* gemm.cuh — meld's persistent, warp-specialized Hopper GEMM engine (bf16 in, fp32
 * accumulate, bf16 out), reusable by fused kernels.
 *
 *   C[M,N] = A[M,K] * B^T   (B stored [N,K], "NK")   or   A[M,K] * B   (B stored [K,N], "KN")
 *
 * Shape of one CTA (384 threads, __launch_bounds__(384, 1), ~226 KB dynamic shared memory):
 *   warpgroup 0  producer: setmaxnreg 40; ONE thread takes tiles from the scheduler, waits
 *                the ready hook, and issues TMA loads into a 4-stage ring (full/empty
 *                mbarriers). Warps 1..3 are idle (room for a comm warp, hook e).
 *   warpgroups 1, 2  consumers: setmaxnreg 232; each owns 64 rows x 256 cols of the
 *                128x256 tile in 128 fp32 registers/thread (4 x m64n256k16 wgmma per 64-wide
 *                k-block), then the epilogue: registers -> swizzled smem staging (64x128 per
 *                half) -> TMA store (or 16-byte generic stores for redirected output).
 *   Optional 2x1 cluster: the two CTAs compute vertically adjacent tiles of one n-block and
 *   each loads half of B, multicast to both (halves B's L2->SM traffic). EXPERIMENTAL: the
 *   planner refuses it unless MELD_GEMM_CLUSTER_EXPERIMENTAL is set. Session 9 on H200: the
 *   wrong tiles and illegal instruction were the scheduler's (phantom tiles past the last
 *   m-pair, fixed in gemm_tile_of), the 0.5x speed a cluster-scope release on every stage
 *   (mbar_arrive_cluster); now exact and 0.90-1.0x of cluster 1 (perf-notes "Session 9").
 *
 * Why 128x256x64: 256 is wgmma's widest N; a 64x256 fp32 accumulator is 128 registers, under
 * the 232 cap; 4 stages x 48 KB = 192 KB leaves 32 KB for two 16 KB epilogue stagings.
 *
 * The first part of this file is plain C (the host planner in src/host/gemm_plan.c includes
 * it); the device part is compiled only by nvcc. */
#ifndef MELD_DEVICE_GEMM_CUH
#define MELD_DEVICE_GEMM_CUH

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "common/proto.h" /* meld_trace_dev_t */

/* ---- compile-time shape ------------------------------------------------------------------ */
#define GEMM_BM 128
/* hook f's table entries (gemm_params_t.grp_brow): the weight's index, and a flag that the
 * m-block's second 64 rows are padding */
#define GEMM_GRP_INDEX 0x3fffffff
#define GEMM_GRP_PAD1 0x40000000
#define GEMM_BN 256
#define GEMM_BK 64
#define GEMM_STAGES 4
#define GEMM_THREADS 384
#define GEMM_A_BYTES (GEMM_BM * GEMM_BK * 2)         /* 16 KB */
#define GEMM_B_BYTES (GEMM_BN * GEMM_BK * 2)         /* 32 KB */
#define GEMM_STAGE_BYTES (GEMM_A_BYTES + GEMM_B_BYTES) /* 48 KB */
#define GEMM_EPI_BYTES 16384                         /* per consumer warpgroup: 64 x 128 bf16 */
#define GEMM_EPI_OFF (GEMM_STAGES * GEMM_STAGE_BYTES)
#define GEMM_BAR_OFF (GEMM_EPI_OFF + 2 * GEMM_EPI_BYTES)
/* Ring barriers (full, then empty) and tile infos for up to GEMM_RING_MAX stages: the
 * ping-pong tile's ring has 6 (GEMM_STAGES_OF). */
#define GEMM_RING_MAX 6
#define GEMM_INFO_OFF (GEMM_BAR_OFF + 16 * GEMM_RING_MAX)
#define GEMM_INFO_BYTES 32 /* one gemm_tile_t per stage */
#define GEMM_FLAG_OFF (GEMM_INFO_OFF + GEMM_INFO_BYTES * GEMM_RING_MAX) /* split-K "last" word */
/* Words after the split-K "last" flag: hook g2's pending tile, the call's epilogue value (hook g
 * kernels read epi.epoch_src once into it, gemm_consumer), the per-tile trace's start time. */
#define GEMM_PEND_OFF (GEMM_FLAG_OFF + 8)
#define GEMM_EPOCH_OFF (GEMM_FLAG_OFF + 16)
#define GEMM_TRACE_T0_OFF (GEMM_FLAG_OFF + 24)
/* Hook g, add mode 4: per consumer warpgroup an mbarrier for the partial's TMA loads into its
 * staging, and the count of its completed loads (the wait's parity). */
#define GEMM_PBAR_OFF (GEMM_FLAG_OFF + 32)
/* The ping-pong kernel (no hook g): its two turn mbarriers in the same words (gemm_consumer_pp) */
#define GEMM_TURN_OFF GEMM_PBAR_OFF
#define GEMM_PCNT_OFF (GEMM_FLAG_OFF + 48)
#define GEMM_PASK_OFF (GEMM_FLAG_OFF + 56) /* loads asked (thread 0 of the warpgroup only) */
#define GEMM_SMEM_USED (GEMM_FLAG_OFF + 64)
/* Flag helper (hook g2 with HELPER): a ring of GEMM_HELPER_SLOTS pending-tile words, a post
 * counter, and per slot a "full" and an "empty" mbarrier, in static shared memory of the kernels
 * that use it (gemm_helper_smem), so that no other kernel's layout changes. */
#define GEMM_HELPER_SLOTS 4
#define GEMM_SMEM_BYTES (GEMM_SMEM_USED + 1024) /* + slack to align the base to 1024 B */
/* The wide tile (gemm_params_t.bn 320, stand-alone kernel only): 128 x 320 in 3 stages of
 * 16 + 40 KB, inside the 4 x 48 KB ring region, so every offset above stays. Why: at
 * M = 2048, N = 5120 the 128 x 256 tiles make 2.42 waves on 132 SMs (3 rounds), 128 x 320 make
 * 1.94 (2 rounds of 1.25 x the work); cuBLASLt's kernel there has this tile (perf-notes,
 * session 8). Each consumer warpgroup holds 64 x 320 in 160 fp32 registers (m64n256k16 +
 * m64n64k16 per k-step); B comes as two TMA boxes of 160 rows. */
#define GEMM_BN_WIDE 320
/* The ping-pong tile (gemm_params_t.bn 128, stand-alone kernel only): each consumer warpgroup
 * owns a whole 128 x 128 tile (two m64n128 accumulators, 128 registers) and the two take
 * turns, so one's epilogue runs while the other's mainloop keeps the tensor cores busy (the
 * 128 x 256 tile's epilogue leaves them idle: 2-4% of a bf16 tile at K = 8192, twice that in
 * fp8, whose mainloop is half as long). 6 stages of 16 + 16 KB fill the same ring region.
 * Whole tiles in the static order only (no split-K, stream-K, queue, cluster or hook). */
#define GEMM_BN_PP 128
#define GEMM_STAGES_OF(BN) ((BN) == GEMM_BN_WIDE ? 3 : (BN) == GEMM_BN_PP ? 6 : GEMM_STAGES)
#define GEMM_STAGE_BYTES_OF(BN) (GEMM_A_BYTES + (BN) * GEMM_BK * 2)
/* Named barriers used by the engine's consumers (fused kernels must use other ids). */
#define GEMM_BAR_WG0 1
#define GEMM_BAR_WG1 2
#define GEMM_BAR_CONSUMERS 3
/* Hook g2's push maps for more than 2 ranks (gemm_push_map): up to 8 ranks. */
#define GEMM_PUSH_MAPS 7
#define GEMM_SCAT_MAX 16 /* ranks a row-scatter epilogue sends to */

/* What the ready hook reports in *status (first giver-up wins). */
enum { GEMM_STATUS_OK = 0, GEMM_STATUS_ABORTED = 1, GEMM_STATUS_TIMEOUT = 2 };

/* Hook (a): before the producer loads A rows [r, r+128) it waits until
 * flags[r / rows_per_flag] >= epoch (ld.acquire.sys, then fence.proxy.async.global so the
 * TMA reads see the data). It gives up when *abort_word != 0 or after timeout_ns: the CTA
 * then stops taking tiles, drains its pipeline and returns; *status records why. */
typedef struct {
  const uint64_t *flags;      /* NULL = hook off                                             */
  int32_t rows_per_flag;      /* rows of A covered by one flag; a multiple of 128            */
  uint64_t epoch;             /* wait until flag >= epoch                                    */
  const uint32_t *abort_word; /* NULL or a word that becomes nonzero to stop                 */
  uint64_t timeout_ns;        /* 0 = no deadline; else per wait, measured with %globaltimer  */
  uint32_t *status;           /* NULL or receives GEMM_STATUS_* (atomicCAS from 0)           */
  /* Epoch from device memory (fused kernels replayed by CUDA graphs keep their call counter
   * on the device, DESIGN.md section 4). NULL = wait for flag >= epoch. Else the producer
   * reads *epoch_counter once, before its first wait, and waits for
   *   flag >= ((*epoch_counter + 1) << epoch_shift) + epoch
   * (e.g. the protocol's stamp of the running call: counter = calls completed, shift =
   * MELD_STAMP_SEQ_BITS, epoch = the sequence number). */
  const uint64_t *epoch_counter;
  int32_t epoch_shift;
} gemm_ready_hook_t;

/* Hook (b): tile order. Logical m-block i (the scheduler's raster order) runs as
 *   mb = (i + m_rotate) % tiles_m;  if (m_order) mb = m_order[mb];
 * so rank r of an all-gather can start with its own shard and follow the arrival order.
 * With `queue`, tiles are claimed from a device atomic counter instead of the static
 * worker + i * workers sequence. queue[0] = next ticket, queue[1] = finished workers; both
 * must be 0 before the first launch; the last worker to finish resets them (no memset). */
typedef struct {
  int32_t m_rotate;
  const int32_t *m_order; /* NULL or a permutation of [0, tiles_m) in device memory */
  uint32_t *queue;        /* NULL = static schedule                                  */
  /* Interleaved owner order (GEMM+RS at 2 ranks; 0 = off; needs m_rotate 0, no m_order,
   * cluster 1, tiles_m = 2 * ileave_b, an even group_m G with G <= ileave_b and ileave_b a
   * multiple of G / 2): logical m-block i runs gemm_ileave_mblk's m-block. The first raster
   * group holds G peer blocks, then each group G / 2 own and G / 2 peer blocks, the last group
   * the remaining own ones: own block j always runs in a later group than peer block j, so
   * with both ranks on this order every wait for a partial targets a smaller ticket on the
   * peer (no wait cycle), and only about half of the CTAs push at any time. */
  int32_t ileave_b;    /* m-blocks per owner                                          */
  int32_t ileave_own;  /* first m-block of this rank's own rows (0 or ileave_b)       */
  int32_t ileave_peer; /* first m-block of the peer's rows (ileave_b or 0)            */
  /* The same for P = ileave_p >= 3 ranks (GEMM+RS / GEMM+AR owner mode; 0 = the 2-rank order
   * above; needs tiles_m = P * ileave_b and group_m G dividing ileave_b): rounds of P raster
   * groups; group j of round c holds m-blocks c G .. c G + G - 1 of owner (ileave_rank + 1 + j)
   * % P, so a rank's own group is the last of each round and every peer computed the same
   * m-blocks in an earlier group of that round: waits target smaller tickets (no cycle), own
   * tiles (their partials' reads and, for AR, the reduced tiles' copies) spread over the call
   * instead of its last 1 / P. */
  int32_t ileave_p, ileave_rank;
} gemm_order_hook_t;

/* Hook (c): epilogue redirect and signal. With `out`, tile rows [r, r+128) are written to
 * out[r / rows_per_owner] + (r % rows_per_owner) * out_ld (e.g. the owner's buffer on a
 * peer GPU) with 16-byte generic stores. With `signal`, after the tile's stores are complete
 * and visible (all consumer threads stored, named barrier, fence.acq_rel.sys; TMA stores:
 * wait_group 0 first) one thread st.release.sys's
 *   signal[owner][(mb - owner * rows_per_owner / 128) * tiles_n + nb] = epoch.
 * Without `out`, owner is 0 and rows_per_owner is ignored. */
typedef struct {
  void *const *out;        /* NULL = write C at params.c / ldc                       */
  int64_t out_ld;          /* elements; multiple of 8                                 */
  int32_t rows_per_owner;  /* a multiple of 128                                       */
  uint64_t *const *signal; /* NULL = no signal; device array of per-owner flag arrays */
  uint64_t epoch;
  /* Compact rows (without `out`): A's rows come in owner blocks of rows_per_owner rows of
   * which only the first rows_valid are real (the rest pad each block to a multiple of 128);
   * tile row r = owner * rows_per_owner + i is written to C row owner * rows_valid + i, and
   * rows i >= rows_valid are dropped. 0 = off. Uses the 16-byte-store epilogue. */
  int32_t rows_valid;
  /* (GEMM+RS/AR, additive) non-NULL: the value released by the signal hook and waited for
   * by the reduce hook is *epoch_src (device memory, read per tile) instead of `epoch`, so
   * that a CUDA-graph replay publishes its own call's stamp. */
  const uint64_t *epoch_src;
  /* Hook (g), fused reduction (GEMM+RS/AR, additive; `on` 0 = off; needs `out`; compiled
   * only into kernels that run gemm_cta_run<BKN, true>). A tile whose owner (row0 /
   * rows_per_owner) is `owner` is not redirected: one thread per warpgroup waits (acquire;
   * gives up on *abort_word, on *status != 0, or after timeout_ns, then sets *status like
   * hook a) until flags[s][local tile] >= the epilogue value for every s < nsrc (local tile
   * = (mb - owner * rows_per_owner / 128) * tiles_n + nb); the epilogue adds the bf16 tiles
   * src[s] (local rows, ld out_ld, ld.global.cg) to its own tile (rounded to bf16 first) in
   * fp32 and stores the sum, rounded once, to dst + local_row * dst_ld and to each copies[c]
   * (ld out_ld, full 16-byte vectors: out_ld >= n rounded up to 8); after the tile's stores
   * it releases copy_signal[c][local tile] like the signal hook. */
  struct {
    int32_t on, owner, nsrc, ncopies;
    const uint16_t *const *src;
    const uint64_t *const *flags;
    void *dst;
    int64_t dst_ld;
    void *const *copies;
    uint64_t *const *copy_signal;
    const uint32_t *abort_word;
    uint64_t timeout_ns;
    uint32_t *status;
    /* Symmetric mode (additive; npush 0 = off): before its wait, a reduced tile stores its own
     * bf16 values (rows < M) into each push[c] (local rows, ld out_ld, full 16-byte vectors)
     * and releases push_signal[c][local tile] (after a barrier and fence.acq_rel.sys), so
     * every rank can reduce every tile with one NVLink trip (decode-size all-reduce: no owner,
     * no result push). The sum order is own then src[0..]: equal on every rank only for 2. */
    int32_t npush;
    void *const *push;
    uint64_t *const *push_signal;
    /* Timing diagnostics (WRONG results; 0 in every real call): bit 1 = no wait for the
     * partials' flags, bit 2 = no partial loads/adds (the own values are stored), bit 3 = with
     * tma: no pass over the staging at all (the own values go out by TMA as staged), bit 5 =
     * hook g2's deferred flag released without its fence.acq_rel.sys (unordered), bit 6 = no
     * L2 prefetch of own tiles' partials (gemm_reduce_prefetch; a hint: results stay right). */
    int32_t diag;
    /* (additive; 0 = off) 1: the reduced tile reaches dst by TMA store through
     * gemm_params_t.map_c2 (a map over dst like map_c: dims {n, rows}, ld dst_ld, box {64, 64},
     * SWIZZLE_128B; rows past its extent are dropped) instead of the threads' 16-byte stores:
     * each thread writes its rounded sums back into the swizzled staging it read its own values
     * from, and one thread stores the half. Needs n % 8 == 0; not with npush (symmetric mode).
     * Session 5: within noise of the 16-byte stores at one rank; on 2 x H200 0.971 vs 1.082 ms
     * (RS 8192 x 8192 x 4096), 3.031 vs 3.052 and AR 3.141 vs 3.244 (K 14336), 0.797 vs 0.790
     * and AR 0.831 vs 0.794 (8192 x 4096 x 7168). */
    int32_t tma;
    /* Own tiles' add mode (additive; 0 = the pass above; only with tma and npush 0; chosen by
     * gemm_rs_preload_mode). The partials are added to the fp32 accumulators, so the epilogue
     * stores the sums like a plain tile (no pass; copies[c] from the staging); the sum is
     * rounded once from this rank's unrounded products, in the order own, src[0], src[1], ...
     *   4 (the default): thread 0 of each warpgroup waits for the flags at the tile's start
     *     (after the CTA released a pending push flag: see gemm_consumer) and asks for half 0
     *     of src[0] by TMA through map_p into its staging, landing during the mainloop; half 1
     *     is asked once half 0's store has read the staging out; each thread adds its own
     *     pairs from the staging and restages the sums (gemm_add_staged_half). A split tile's
     *     last piece asks in its epilogue. Further sources as in 1.
     *   5 (opt-in, measured equal to 4): the producer loads src[0] into two more pipeline
     *     stages after an own tile's k-blocks (gemm_part_stages; whole tiles of >=
     *     GEMM_STAGES k-blocks, cluster_m 1); the consumers add it after the mainloop.
     *   1, 2, 3: after the mainloop every thread loads its fragment's pairs of each src[s]
     *     (ld.global.cg; 64 / 16 / 32 in flight) into registers (gemm_reduce_add); slower than
     *     the pass (4-byte loads).
     * The flag-helper kernels lack 4 and 5 (docs/perf-notes.md, session 6). */
    int32_t preload;
    /* (additive; 0 = off; in hook g2 kernels with out_tma, not with the flag helper, and (session
     * 28, opt-in) in the lean kernels without hook g2 that copy by TMA; local tiles < 2^24) 1: a
     * reduced tile's copy_signal flags are released like a pushed tile's (hook g2): at the start
     * of the CTA's next epilogue or after its last tile (pending word GEMM_PEND_COPY << 24 |
     * local tile; gemm_epi_flush), instead of at the end of its own epilogue after both
     * warpgroups' barrier and a fence.acq_rel.sys that waits for the copies' stores (at 2 GPUs
     * NVLink stores into the peer's slot or C). Session 14. */
    int32_t copy_defer;
    /* (additive; 0 = off; needs tma) 1 (ncopies 1): a reduced tile's sums reach copies[0] by
     * TMA store through gemm_params_t.map_cp (a map over copies[0] like map_c2: dims {n, rows},
     * ld out_ld, box {64, 64}, SWIZZLE_128B), issued with the own store from the same staging,
     * instead of the 128 threads' 16-byte stores (at 2 GPUs NVLink stores from registers that
     * hold the warpgroup in its epilogue). The copy flags follow the issuing thread's
     * cp.async.bulk.wait_group 0 like a pushed tile's. Only the kernels with the add mode compiled
     * in (PRE >= 0) have it: in the general one it spilled 12 bytes. Session 15.
     * 2 (ncopies 2 .. GEMM_PUSH_MAPS, session 28): every copies[c] alike, through the maps the
     * fused kernel's parameter holds after its push maps (gemm_copy_map). */
    int32_t copy_tma;
    /* (additive; 0 = off; the kernels with the add mode compiled in, PRE >= 0) 1: an own
     * tile's start does not release a pending copy flag (a reduced tile's, reduce.copy_defer):
     * it waits for the next epilogue's start, a mainloop later. Only push flags can close a
     * wait cycle there (the peer's own tiles wait for them at their start; copy flags are
     * waited for by the tail's copy phase, after the CTA's last flush, and by the early
     * copy's side warps, which hold none). Without it the AR's own tiles, which follow each
     * other, released the previous tile's copy flag at the next one's start, right after its
     * stores were issued: cp.async.bulk.wait_group 0 on the warpgroup's path (session 16,
     * loopback: 2.4 us per own tile; at 2 GPUs the copies' NVLink drain). */
    int32_t copy_hold;
    /* (additive; 0 = off; add mode 4) s + 1: at an own tile's start, after the flags' acquire,
     * the thread that asks for src[0]'s half 0 also asks L2 for its warpgroup's rows of the
     * partial slots s, s + 1, ... (as many as gemm_params_t.map_pf's box holds: a 3-D map over
     * the slots, dims {n, rows_per_owner, slots}, ld out_ld, slot pitch = the slots' distance,
     * box {256, 64, slots}, no swizzle) with ONE tensor prefetch, so that the epilogue's loads of
     * src[1..] (registers, after the mainloop) and of src[0]'s half 1 (TMA, after half 0's
     * stores) hit L2 instead of waiting for HBM with the tensor cores idle. Only where the
     * mainloop is short (the host's rule, gemm_rs_pf_first): after 32 k-blocks the lines were
     * gone again. A hint: peers' writes land in this GPU's L2 whenever they come; results are
     * the same with or without it. Session 27 (perf-notes). */
    int32_t pf;
  } reduce;
  /* Hook (g2), asynchronous push (GEMM+RS/AR, additive; 0 = off; only with reduce.on, in
   * kernels running gemm_cta_run<BKN, true>): a tile redirected to an owner other than
   * reduce.owner is stored with TMA through map_c, which then describes THAT owner's buffer
   * (dims {n, rows_per_owner}, ld out_ld, box {64, 64}, SWIZZLE_128B; so at most one such
   * owner: 2 ranks; the G2 2 kernels take one map per owner instead, gemm_push_map, for up
   * to GEMM_PUSH_MAPS + 1 ranks), at row (row - owner * rows_per_owner). Its signal is deferred: released
   * at the start of this CTA's next epilogue (before any reduce wait) or after its last tile,
   * after the issuing threads' cp.async.bulk.wait_group 0, the consumers' barrier and a
   * fence.acq_rel.sys; so the consumers never wait for NVLink in the epilogue. */
  int32_t out_tma;
  /* (hook g2 in the kernels with the add mode compiled in and DEFER, gemm_rs's
   * MELD_GEMM_RS_PUSH_DEFER) a pushed tile's second 64 x 128 half per warpgroup is packed into
   * registers and staged + stored during the CTA's next mainloop, after that tile's k-block
   * out_defer_kb's wgmmas are issued (after its last, if it has fewer; before an own tile's
   * mainloop). Its flag still waits for the next epilogue (gemm_epi_flush). */
  int32_t out_defer_kb;
} gemm_epilogue_hook_t;

/* Everything one GEMM launch (or one fused kernel's GEMM part) needs. Filled by
 * gemm_plan_make() (src/host/gemm_plan.h); hooks are then set by the fused op. Passed to the
 * kernel as a __grid_constant__ parameter (the tensor maps must live in parameter space). */
typedef struct {
  CUtensorMap map_a; /* A [M,K]: dims {K, M}, box {64, 128}, SWIZZLE_128B                     */
  CUtensorMap map_b; /* NK: {K, N}, box {64, 256 / cluster_m}; KN: {N, K}, box {64, 64}       */
  CUtensorMap map_c; /* C [M,N]: dims {N, M}, box {64, 64}, SWIZZLE_128B (TMA-store epilogue) */
  void *c;           /* C base (bf16) and leading dimension (elements)                        */
  int64_t ldc;
  int32_t m, n, k;
  int32_t tiles_m, tiles_n, k_blocks; /* ceil(M/128), ceil(N/bn: 256 or 320), ceil(K/64)   */
  int32_t b_kn;      /* 1: B stored [K,N] (kernel variant), 0: [N,K]                         */
  int32_t cluster_m; /* 1, or 2: 2x1 cluster, B multicast                                    */
  int32_t cluster_mc; /* cluster_m 2: 1 = B multicast (the design); 0 = diagnosis only: the
                       * pair's schedule and launch, but each CTA loads all of B itself and
                       * releases only its own stages (MELD_GEMM_CLUSTER_EXPERIMENTAL=2)      */
  int32_t group_m;   /* raster group: this many m-blocks (m-pairs if cluster_m 2) per sweep  */
  int32_t epi_tma;   /* 1: TMA-store epilogue from map_c; 0: 16-byte generic stores          */
  int32_t workers;   /* CTAs that run the engine in the launch it was planned for            */
  /* Split-K for the last partial wave (hybrid; all tiles when there are fewer than the
   * workers): scheduler tiles [split_from, tiles) have their k-blocks cut into split_k
   * ranges of kb_per_split, run by different CTAs at once; each writes its fp32 partial to
   * the workspace, and the last to arrive (counters[slot], self-resetting) adds the others'
   * partials and runs the epilogue. No CTA waits for another. */
  int32_t split_k;      /* 1 = off                                                         */
  int32_t kb_per_split; /* k-blocks per split; (split_k - 1) * kb_per_split < k_blocks      */
  int32_t split_from;   /* first split tile (scheduler order); = tiles when split_k is 1    */
  float *workspace;     /* split-K: (tiles - split_from) * split_k * 128 * 256 floats;      */
                        /* stream-K: sk_tiles * sk_cmax * 128 * 256 floats                  */
  uint32_t *counters;   /* split-K: tiles - split_from words; stream-K: sk_tiles; 0 at first */
  /* Stream-K (additive; sk_tiles 0 = off; exclusive with split_k > 1): the last sk_tiles
   * tiles of the scheduler order are not run whole; their sk_tiles * k_blocks k-blocks are cut
   * into sk_workers equal contiguous ranges (worker w: [w*T/W, (w+1)*T/W)), which may span
   * tile boundaries. Scheduler ticket tiles - sk_tiles + part * sk_workers + w is worker w's
   * piece in its part-th tile (part < sk_parts; an empty piece is skipped). Pieces of one tile
   * are combined like split-K (fp32 partials, last arriver adds and runs the epilogue; no CTA
   * waits for another). With the static schedule, tiles - sk_tiles should be a multiple of
   * the workers so that worker w runs exactly its own range. */
  int32_t sk_tiles;   /* tiles run stream-K (0 = off)                                        */
  int32_t sk_workers; /* ranges (normally = workers)                                         */
  int32_t sk_parts;   /* max tiles one range touches                                         */
  int32_t sk_cmax;    /* max ranges touching one tile (workspace slots per tile)             */
  gemm_ready_hook_t ready;
  gemm_order_hook_t order;
  gemm_epilogue_hook_t epi;
  /* Hook (h), second A source (additive; a2_rows 0 = off; cluster_m 1 only): tiles whose A rows
   * r lie in [a2_row_begin, a2_row_begin + a2_rows) load them from map_a2 at row
   * r - a2_row_begin (a map like map_a: box {64, 128}, SWIZZLE_128B; rows past its extent read
   * as zeros) and skip the ready hook (a). Both bounds multiples of 128. E.g. AG+GEMM reads its
   * own shard in place while the peers' rows come from the staging. */
  CUtensorMap map_a2;
  int32_t a2_row_begin, a2_rows;
  /* The reduced tiles' destination map (hook g with epi.reduce.tma; see there). */
  CUtensorMap map_c2;
  /* The first partial's source map (hook g, reduce.preload 4): over reduce.src[0] like map_c
   * (dims {n, rows_per_owner}, ld out_ld, box {64, 64}, SWIZZLE_128B). */
  CUtensorMap map_p;
  /* The reduced tiles' copy map (hook g with epi.reduce.copy_tma; see there). */
  CUtensorMap map_cp;
  /* The partial slots' prefetch map (hook g with epi.reduce.pf; see there). */
  CUtensorMap map_pf;
  /* Split-K / stream-K combine (additive; 0 = each piece stores its partial, the last
   * arriver reads them; 1 = pieces add into one zeroed fp32 tile with red.global.add.v4.f32,
   * the last reads the sum and re-zeroes it: `workspace` must then be all zeros before the
   * first launch and hold gemm_plan_workspace_bytes(p) = slots x 128 x 256 floats; 2 = as 1
   * with the arrival ticket taken first, the last arriver adding the others' sum to its own
   * (counters: 2 words per slot, gemm_plan_counter_words). */
  int32_t fixup_red;
  /* Epilogue overlap (additive; selects the stand-alone gemm_kernel<., DEFER = epi_defer>;
   * fused kernels ignore it; 0 = off): 1 = on the plain TMA-store path (no hooks), each
   * consumer warpgroup packs its tile's second 64x128 half to 32 bf16x2 registers and stages
   * + TMA-stores it while the next tile's first k-block runs. (Deferring both halves, 64
   * registers through the mainloop, spilled: 24 bytes.) */
  int32_t epi_defer;
  /* Split-K k-block order (additive; 0 = each split takes a contiguous range of kb_per_split
   * k-blocks): 1 = split s takes k-blocks s, s + split_k, s + 2 split_k, ... so that the
   * split_k CTAs of a tile read neighbouring 128-byte pieces of the same A/B rows at about
   * the same time (DRAM locality for decode-like shapes). */
  int32_t split_ileave;
  /* Swapped small-M path (additive; skinny_mt 0 = the engine; meld_gemm only, never in fused
   * kernels): src/device/gemm_skinny.cuh computes C^T = B * A^T with B's rows as wgmma's M
   * (128 per CTA) and A's rows as wgmma's N (skinny_mt = 16, 32, 64 or 128 >= m). map_a then
   * has box {64, skinny_mt}, map_b box {64, 128}; a cluster of skinny_split CTAs shares one
   * 128-column block of C, each CTA a contiguous k-range, and sums the fp32 partials through
   * distributed shared memory (no workspace). skinny_hint: bit 0 = B loads evict_first in
   * L2, bit 1 = A loads evict_last. */
  int32_t skinny_mt;
  int32_t skinny_split;
  int32_t skinny_hint;
  /* Per-tile timeline (additive; trace.events NULL = off; fused kernels pass the comm's
   * MELD_TRACE buffer): consumer thread 0 of warpgroup 0 records each tile's mainloop
   * (role compute) and its epilogue (reduce: own tile of hook g; comm: redirected/pushed;
   * other: plain store), item = m_blk * tiles_n + n_blk. The kernel's other recorders must not
   * record at the same time (one writer per CTA). */
  meld_trace_dev_t trace;
  /* Tile width (additive; 0 = GEMM_BN): GEMM_BN_WIDE selects the 128 x 320 tile of the
   * stand-alone kernel (B [N,K], no split-K / stream-K / hooks; cluster_m 2 only as the
   * experimental B multicast, one 160-row box per CTA; epi_defer, off by
   * default for it, defers the 64-column third);
   * tiles_n is then ceil(n / 320) and map_b's box {64, 160}. */
  int32_t bn;
  /* Stage release (additive; the plan: 1 for the wide tile, MELD_GEMM_EARLY_RELEASE=0/1
   * forces): 0 = the previous k-block's stage is released after the next k-block's wgmmas are
   * issued (wgmma wait 1); 1 = before waiting for the next stage, wait for all wgmmas and
   * release the previous one (a late stage no longer holds back the refill of the one before:
   * with 3 stages the wide tile's consumers spent 37% of their samples there). */
  int32_t early_release;
  /* C's stores (additive; 0 = plain): 1 = the TMA stores of C (the plain epilogue and its
   * deferred part, a reduced tile's own store and copy; not a push) carry L2::evict_first, so
   * that the output, written once and not read here, leaves L2 before A's and B's tiles that
   * later CTAs read again. Not in the general hook g kernel (PRE -1: 12 bytes spilled). Session
   * 15 (MELD_GEMM_STORE_HINT=1). */
  int32_t store_hint;
  /* (diagnostic, additive; read only by kernels built with DEFER 2: gemm_rs's bare kernel with
   * MELD_GEMM_RS_DIAG bit 13) each warpgroup's epilogue starts this many SM clocks late (thread
   * 0 spins, the warpgroup waits on its barrier): how much epilogue time the pipeline's full
   * stages absorb (session 16's model: up to ~4 k-blocks' worth). */
  int64_t diag_delay_cycles;
  /* Hook (f), grouped rows (additive; NULL = off; cluster_m 1, B [N,K], the 128 x 256 tile, no
   * split-K / stream-K / second A map): grp_brow[m] (device memory, written by an earlier kernel,
   * read by the producer once per tile) is the weight of m-block m's tiles, whose B rows start at
   * grp_brow[m] x grp_rows (map_b spans several weights stacked, e.g. a MoE layer's experts
   * [E, n, k] as [E n, k], grp_rows = n), or -1 for an m-block the call does not use: its tiles
   * are skipped (no loads, no store). A partial last n-block reads the next weight's first rows;
   * C's map (width n) drops those columns. (The table holds the weight's index, not its row, so
   * GEMMs of other widths share one table: a MoE layer's two GEMMs.) An index with GEMM_GRP_PAD1
   * set says the block's rows 64..127 are padding: warpgroup 1 runs no MMAs for its tiles (the
   * stages are released as they come; warpgroup 0 has the tensor cores alone) and stores zeros
   * as those rows of C. */
  const int32_t *grp_brow;
  int32_t grp_rows;
  /* Hook f's runs (NULL = off; with grp_brow, no split-K / stream-K / other m-order): grp_span[2 m]
   * and [2 m + 1] are the first m-block and the number of blocks of the run holding block m (a
   * MoE expert's blocks; an unused block is its own run of 1). Tiles then go run by run, each
   * run's in raster groups of group_m blocks (the last group of a run shorter), so the blocks
   * sharing a weight run together and read it from L2 once, whatever the runs' sizes. */
  const int32_t *grp_span;
  /* Hook f's tables written in this very kernel (NULL = by an earlier one): the producer waits
   * until this word is >= 1 (acquire; the ready hook's deadline, abort word and status) before
   * it reads grp_brow / grp_span for its first tile. The MoE dispatch's routing in its comm CTAs. */
  const uint64_t *grp_ready;
  /* Gated (SwiGLU) tiles, with hook f (0 = off): B holds, per weight, gate rows [0, grp_glu) then
   * up rows [grp_glu, 2 grp_glu) (grp_rows = 2 grp_glu, a multiple of 128). Tile n-block j loads
   * gate rows [128 j, +128) and up rows [grp_glu + 128 j, +128) as its 256 B rows (two boxes of
   * 128: map_b's box is {64, 128}); its epilogue stores silu(gate) x up, 128 columns, at column
   * 128 j of C [m, grp_glu] (map_c, ldc over grp_glu). n = 2 grp_glu (the tiles), TMA-store
   * epilogue only. The MoE layer's first GEMM with its activation (meld_moe_ffn). */
  int32_t grp_glu;
  /* Row scatter (scat_origin NULL = off): C's row r goes to rank o.x's buffer scat_dst[o.x] at
   * row o.y (ld ldc), o = scat_origin[2r..2r+1], and is dropped where o.x < 0 (16-byte generic
   * stores: epi_tma 0). After each 64-row half-tile's stores its warpgroup meets, and warp 0
   * counts the rows it sent to each rank (ballots), fences once (fence.acq_rel, scat_sys) and adds them
   * to scat_count[rank] (relaxed): a receiver that expects R rows from here waits for R x
   * tiles_n. No other epilogue hook. The MoE layer's second GEMM with the combine's sends. */
  const int32_t *scat_origin;
  uint8_t *scat_dst[GEMM_SCAT_MAX];
  uint64_t *scat_count[GEMM_SCAT_MAX];
  int32_t scat_n;   /* ranks (entries of scat_dst / scat_count) */
  int32_t scat_sys; /* 1: the counts' fence at system scope (ranks on other GPUs); 0: GPU scope
                       (every rank on this GPU: one rank, or ranks sharing it)               */
  /* FP8 (meld_gemm_fp8): A and B are e4m3; the engine sees them as bf16 matrices of half the
   * K (the same bytes: TMA boxes, swizzle, stages and k-blocks are byte-for-byte those of bf16,
   * a k-block is 128 fp8 elements) and runs the m64nNk32 e4m3 wgmma instead of m64nNk16 bf16.
   * Each tile's (or piece's) fp32 accumulators are multiplied by the scales before its
   * epilogue (device memory: graph replays may change them). fp8_rows: bit 0, scale_a holds
   * one fp32 per row of A (m); bit 1, scale_b one per row of B (n, C's columns); a clear bit:
   * that scale is one fp32 (per tensor). Bit 2 (with bit 0; the fused AllGather, whose comm
   * CTAs carry each chunk's row scales with its rows): scale_a is indexed by the tile row
   * itself (the padded staging's rows, written before the chunk's signal: read with coherent
   * loads after the rows' wait), except hook h's own rows [a2_row_begin, a2_row_begin +
   * a2_rows), read from scale_a2 at r - a2_row_begin (0 past the shard's rows). Bit 3
   * (diagnostic, MELD_GEMM_FP8_LATE=1): the kernels that load the scales before the mainloop's
   * last wait (gemm_fp8_early) load them after it instead, as before session 43. */
  int32_t fp8;
  int32_t fp8_rows;
  const float *scale_a, *scale_b, *scale_a2;
} gemm_params_t;

/* The plan's tile width. */
#define GEMM_BN_OF(p) ((p)->bn == GEMM_BN_WIDE ? GEMM_BN_WIDE : (p)->bn == GEMM_BN_PP ? GEMM_BN_PP : GEMM_BN)

#ifdef __CUDACC__
#define GEMM_HD __host__ __device__ __forceinline__
#else
#define GEMM_HD static inline
#endif

/* Stream-K arithmetic is 32-bit unsigned (the producer thread has 40 registers; 64-bit
 * division spills): the planner only enables stream-K when (total + 1) * (W + 1) < 2^31,
 * total = sk_tiles * k_blocks. */
#define GEMM_SK_LIMIT 2147483647LL

/* Compact rows (epi.rows_valid > 0, the fused AllGather's shards padded to 128 rows): the
 * dense row of tile row r (owner (r / rows_per_owner) rows_valid + r % rows_per_owner), -1 for a
 * padding row; r itself without compact rows. (The fp8 per-row scales of such A, gathered dense:
 * gemm_fp8_scale.) */
/* FP8 column scales spread over a warp (gemm_fp8_sc_t): the tile column of lane's pair k (and
 * + 1), and the lane holding the pair that thread tid's accumulator pair j needs (columns
 * 8 j + 2 (tid % 4), + 1: the m64nN fragment's). */
GEMM_HD int gemm_fp8_col_held(int lane, int k) { return 8 * (lane >> 2) + 2 * (lane & 3) + 64 * k; }
GEMM_HD int gemm_fp8_col_src(int tid, int j) { return 4 * (j & 7) + (tid & 3); }

GEMM_HD int gemm_compact_row(const gemm_epilogue_hook_t *e, int r) {
  if (e->rows_valid <= 0) return r;
  const int i = r % e->rows_per_owner;
  return i < e->rows_valid ? r / e->rows_per_owner * e->rows_valid + i : -1;
}

/* The range owning k-iteration i (0 <= i < total) when total iterations are cut into W
 * ranges [w*total/W, (w+1)*total/W): the largest w with floor(w*total/W) <= i. */
GEMM_HD int gemm_sk_owner(uint32_t i, uint32_t total, uint32_t W) {
  return (int)(((i + 1) * W + total - 1) / total) - 1;
}

/* Stream-K piece `u` (= part * W + w) of a plan with `tiles` stream-K tiles of kb k-blocks
 * and W ranges. Returns 0 when u is past the last part, -1 for an empty piece, else 1 with
 * the stream-K tile index j, its k-blocks [kb0, kb0 + nkb) and the range w. Shared by the
 * device scheduler and the host planner / tests, so both agree on the partition. */
GEMM_HD int gemm_sk_piece(int tiles, int kb, int W, int parts, int u, int *j, int *kb0, int *nkb,
                          int *w_out) {
  const uint32_t uW = (uint32_t)W, ukb = (uint32_t)kb;
  const uint32_t part = (uint32_t)u / uW, w = (uint32_t)u - part * uW;
  if (part >= (uint32_t)parts) return 0;
  const uint32_t total = (uint32_t)tiles * ukb;
  const uint32_t s = w * total / uW, e = (w + 1) * total / uW;
  const uint32_t jj = s / ukb + part;
  const uint32_t ts = jj * ukb;
  const uint32_t lo = s > ts ? s : ts, hi = e < ts + ukb ? e : ts + ukb;
  if (jj >= (uint32_t)tiles || lo >= hi) return -1;
  *j = (int)jj;
  *kb0 = (int)(lo - ts);
  *nkb = (int)(hi - lo);
  *w_out = (int)w;
  return 1;
}

/* The ranges that contribute to stream-K tile j: first (c_lo) and count. */
GEMM_HD int gemm_sk_contrib(int j, int tiles, int kb, int W, int *c_lo) {
  const uint32_t total = (uint32_t)tiles * (uint32_t)kb, ts = (uint32_t)j * (uint32_t)kb;
  const int lo = gemm_sk_owner(ts, total, (uint32_t)W);
  *c_lo = lo;
  return gemm_sk_owner(ts + (uint32_t)kb - 1, total, (uint32_t)W) - lo + 1;
}

/* The next ticket of a worker under the queue with stream-K (gemm_producer SKQ): while *base <
 * 0, `drawn` is the ticket the queue gave; the first one at or past sk_from switches the worker
 * to its own pieces (tickets sk_from + part * W + uw: the caller's loop counter *i is reset here
 * and advanced by the caller after every ticket). Shared with the unit test. */
GEMM_HD int gemm_skq_next(int drawn, int sk_from, int uw, int unw, int *base, int *i) {
  if (*base < 0) {
    if (drawn < sk_from) return drawn;
    *base = sk_from;
    *i = 0;
    return sk_from + uw;
  }
  return *base + uw + *i * unw;
}

/* One unit of work, passed from the producer to the consumers through smem next to the
 * stage that holds its first k-block. m_blk < 0 means "no more tiles". A split tile has
 * split >= 0 and its workspace/counter slot; a whole tile has split -1. */
typedef struct {
  int32_t m_blk, n_blk, k_blk0, k_nblk;
  int32_t split, slot, k_step, pad1; /* stream-K: split = the range w; k_step: see split_ileave */
} gemm_tile_t;

/* The tile for scheduler ticket `ticket`; returns 0 when the ticket is past the last tile,
 * -1 for an empty stream-K piece (skip it and take the next ticket).
 * Raster: groups of group_m m-units sweep all n-blocks, m fastest, so the ~#SM live tiles
 * share A and B panels in L2. Grouped mode (hook f, not implemented) would map the ticket
 * through a device-side prefix sum of per-group tile counts here.
 * An m-unit is an m-block, or with cluster_m 2 an m-pair (rank r of the pair takes m-block
 * 2 um + r; m-block tiles_m, when tiles_m is odd, is the pad tile: loaded clamped, never
 * stored), so the scheduler has units_m * tiles_n tickets, half of tiles_m * tiles_n.
 * Shared with the host (tests/unit/test_gemm_args.c runs every worker's static schedule);
 * host callers pass m_order NULL (it points to device memory). */
/* The interleaved owner order (gemm_order_hook_t.ileave_b): the m-block of logical position i
 * for B = ileave_b blocks per owner and raster groups of G = group_m (see the hook). */
GEMM_HD int gemm_ileave_mblk(const gemm_order_hook_t *o, int G, int i) {
  const int B = o->ileave_b, h = G / 2;
  if (o->ileave_p) { /* P ranks: round c = group / P, its group j = owner rank + 1 + j */
    const int P = o->ileave_p, gi = i / G;
    return ((o->ileave_rank + 1 + gi % P) % P) * B + (gi / P) * G + i % G;
  }
  if (i < G) return o->ileave_peer + i; /* group 0: peer blocks 0 .. G-1 */
  const int q = i - G, u = q / G, r = q % G, mixed = (B - G) / h;
  if (u < mixed) return r < h ? o->ileave_own + u * h + r : o->ileave_peer + G + u * h + (r - h);
  return o->ileave_own + mixed * h + (q - mixed * G); /* the last group: own blocks B-G .. B-1 */
}

/* gemm_tile_of under hook f's runs (grp_span; cluster_m 1, whole tiles): tickets go run by run,
 * raster groups of group_m blocks inside each (the last group of a run shorter). 0 past the end. */
GEMM_HD int gemm_tile_of_run(const gemm_params_t *p, int ticket, gemm_tile_t *t) {
  const int tiles_n = p->tiles_n;
  if (ticket >= p->tiles_m * tiles_n) return 0;
  const int rm = ticket / tiles_n; /* (a block of the ticket's run: runs are contiguous in tickets) */
  const int first = p->grp_span[2 * rm], nb = p->grp_span[2 * rm + 1];
  const int local = ticket - first * tiles_n, G = p->group_m;
  const int gi = local / (G * tiles_n);
  const int gm = G < nb - gi * G ? G : nb - gi * G;
  const int r = local - gi * G * tiles_n;
  t->m_blk = first + gi * G + r % gm;
  t->n_blk = r / gm;
  t->split = -1;
  t->slot = 0;
  t->k_step = 1;
  t->pad1 = 0;
  t->k_blk0 = 0;
  t->k_nblk = p->k_blocks;
  return 1;
}

GEMM_HD int gemm_tile_of(const gemm_params_t *p, int ticket, int rank, gemm_tile_t *t) {
  const int cl = p->cluster_m;
  const int units_m = (p->tiles_m + cl - 1) / cl;
  const int tiles_n = p->tiles_n;
  const int S = p->split_k, from = p->split_from;
  int split = -1, slot = 0, kb0 = 0, nkb = p->k_blocks;
  if (p->sk_tiles > 0) {
    const int sk_from = units_m * tiles_n - p->sk_tiles;
    if (ticket >= sk_from) { /* split = the range w; the consumers derive its contributor index */
      const int r = gemm_sk_piece(p->sk_tiles, p->k_blocks, p->sk_workers, p->sk_parts,
                                  ticket - sk_from, &slot, &kb0, &nkb, &split);
      if (r <= 0) return r;
      ticket = sk_from + slot;
    }
  } else if (ticket >= from) { /* a tile's splits are consecutive tickets: they run at once */
    const int u = ticket - from;
    slot = u / S;
    split = u - slot * S;
    ticket = from + slot;
  }
  /* The end, for every mode. (From 41d9b5e until this fix it sat inside the split branch
   * above; split_from is tiles_m * tiles_n when split_k is 1, so with cluster_m 2 the tickets
   * [units_m * tiles_n, tiles_m * tiles_n) ran as phantom tiles. Their group has
   * gm = units_m - first <= 0; gm 0 divides by zero below, which on the GPU gave -1 for both
   * (as the damage shows): m-blocks 2 (first - 1) + rank, n-block -1, zeros (the B box lies
   * wholly left of column 0), stored by the generic-store epilogue (no lower column bound)
   * into the row above. One H200, 4096^3 on 66 clusters (session 9 call 3): tiles (29, 15)
   * 1 row, (30, 15) 128 rows, (31, 15) 127 rows wrong (errors 8.5e-2 / 1.0 / 0.996); the
   * TMA-store launch after it, whose phantom stores start left of column 0, died with an
   * illegal instruction. Each cluster also ran about twice its tiles. Small problems hid it:
   * their phantom n-blocks lay past tiles_n and were never stored.) */
  if (ticket >= units_m * tiles_n) return 0;
  const int per_group = p->group_m * tiles_n;
  const int g = ticket / per_group;
  const int first = g * p->group_m;
  const int gm = p->group_m < units_m - first ? p->group_m : units_m - first; /* >= 1 here */
  const int r = ticket - g * per_group;
  int um = first + r % gm;
  if (cl == 1) {
    um = (um + p->order.m_rotate) % p->tiles_m;
    if (p->order.m_order) um = p->order.m_order[um];
    else if (p->order.ileave_b) um = gemm_ileave_mblk(&p->order, p->group_m, um);
    t->m_blk = um;
  } else {
    t->m_blk = um * 2 + rank;
  }
  t->n_blk = r / gm;
  t->split = split;
  t->slot = slot;
  t->k_step = 1;
  t->pad1 = 0;
  if (split >= 0 && p->sk_tiles == 0) {
    if (p->split_ileave) { /* split-K: k-blocks split, split + S, split + 2S, ... */
      kb0 = split;
      nkb = (p->k_blocks - split + S - 1) / S;
      t->k_step = S;
    } else { /* split-K: equal ranges */
      kb0 = split * p->kb_per_split;
      nkb = p->kb_per_split < p->k_blocks - kb0 ? p->kb_per_split : p->k_blocks - kb0;
    }
  }
  t->k_blk0 = kb0;
  t->k_nblk = nkb;
  return 1;
}

#ifdef __cplusplus
extern "C" {
#endif
/* Writes every field of p (one line per group) into buf. */
void gemm_params_format(const gemm_params_t *p, char *buf, size_t len);
/* Returns 0 if p is legal for a launch of `workers` engine CTAs; else 1 and a sentence in
 * why (e.g. "gemm: cluster_m 2 cannot be combined with the dynamic tile queue"). */
int gemm_params_check(const gemm_params_t *p, int workers, char *why, size_t len);
#ifdef __cplusplus
}
#endif

/* ========================================================================================= */
#ifdef __CUDACC__
#include <cuda_bf16.h>

#include "device/ptx_async.cuh"
#include "device/trace.cuh"

#include <type_traits>

/* A consumer tail that does nothing (gemm_cta_run's default). */
struct gemm_no_tail {
  __device__ __forceinline__ void operator()(int, int) const {}
};

/* The guard of the hooks' flag waits, at spin `spin`: every 64 spins only, the shared abort
 * word (one line every waiter of the GPU reads: spinning on it slowed a GEMM beside 264
 * waiters 100x, HOPPER-GEMM-FACTS 8d), the call's status word (may be NULL) and the clock
 * against timeout_ns (0: none; *start set at spin 0). Returns GEMM_STATUS_OK or why to give up. */
__device__ __forceinline__ int gemm_wait_guard(uint32_t spin, const uint32_t *abort_word, const volatile uint32_t *status,
                                               uint64_t timeout_ns, uint64_t *start) {
  if ((spin & 63) != 0) return GEMM_STATUS_OK;
  if ((abort_word && ld_relaxed_sys_u32(abort_word) != 0) || (status && *status != 0)) return GEMM_STATUS_ABORTED;
  if (timeout_ns) {
    const uint64_t now = globaltimer_ns();
    if (spin == 0) *start = now;
    else if (now - *start > timeout_ns) return GEMM_STATUS_TIMEOUT;
  }
  return GEMM_STATUS_OK;
}

/* One thread waits until *flag >= target (acquire), under the ready hook's deadline and abort
 * word; GEMM_STATUS_OK, else the status code, also left in *ready.status (first giver-up wins). */
__device__ __forceinline__ int gemm_wait_flag(const gemm_params_t *p, const uint64_t *flag, uint64_t target) {
  uint64_t start = 0;
  for (uint32_t spin = 0; ld_acquire_sys_u64(flag) < target; ++spin) {
    const int why = gemm_wait_guard(spin, p->ready.abort_word, nullptr, p->ready.timeout_ns, &start);
    if (why != GEMM_STATUS_OK) {
      if (p->ready.status) atomicCAS(p->ready.status, 0u, (uint32_t)why);
      return why;
    }
    __nanosleep(64);
  }
  return GEMM_STATUS_OK;
}

/* Hook (a): wait for A rows of m-block mb. Returns 0 when ready, else the status code. */
__device__ __forceinline__ int gemm_ready_wait(const gemm_params_t *p, int mb, uint64_t epoch) {
  const int why = gemm_wait_flag(p, p->ready.flags + (mb * GEMM_BM) / p->ready.rows_per_flag, epoch);
  /* The acquire made the data visible to this thread's generic proxy; TMA reads through the
   * async proxy, which needs its own fence. */
  if (why == GEMM_STATUS_OK) fence_proxy_async_gmem();
  return why;
}

/* The producer: one thread. Takes tiles, waits the ready hook, streams k-blocks into the
 * ring, then publishes the end marker.
 * SKQ (the tile queue with stream-K; AG+GEMM): the queue hands out whole tiles only; the first
 * ticket at or past the stream-K tiles switches this worker to its own pieces (tickets sk_from +
 * part * W + worker, part = 0, 1, ...), so every worker runs the equal k-range the partition
 * assumes. (From the queue, a worker could take two pieces and another none: one H200, AG+GEMM
 * 2048 x 5120 x 8192 fused at one rank ran 0.280-0.282 ms with stream-K, 0.284-0.288 without,
 * while meld_gemm's static stream-K ran 0.245.) A separate instantiation: the producer has 40
 * registers, and the other kernels' producers stay as they were. */
/* Hook g: tile t belongs to this rank (reduce.owner) in a kernel with the reduction on. */
__device__ __forceinline__ int gemm_own_tile(const gemm_params_t *p, gemm_tile_t t) {
  return p->epi.out && p->epi.reduce.on && t.m_blk / (p->epi.rows_per_owner / GEMM_BM) == p->epi.reduce.owner;
}

/* Hook g kernels' add mode fixed at compile time (PRE template parameter of gemm_cta_run,
 * gemm_consumer and gemm_epilogue): -1 = every mode, read from reduce.preload / .tma / .npush at
 * run time (the general kernel); 4 = the default plan only: reduce.preload 4, reduce.tma 1,
 * reduce.npush 0, whole tiles (split_k 1, sk_tiles 0; the host checks all before it picks the
 * kernel), so the other modes' code (the staging pass, the register loads of modes 1-3, mode
 * 5's stages, the symmetric push, the split-K fixup) is not compiled in. Session 13: the hook g
 * kernel with every hook off ran 1.1-2.1% slower than the engine alone, its main loop the same
 * SASS. Session 14, one H200, RS 8192^2 x 4096 in loopback: PRE 4 2.0% faster sustained, 4%
 * fewer instructions executed, fewer branch and instruction-cache stalls. */
template <int PRE>
__device__ __forceinline__ int gemm_preload_of(const gemm_params_t *p) {
  static_assert(PRE == -1 || PRE == 4, "PRE: -1 (run time) or 4");
  return PRE >= 0 ? PRE : p->epi.reduce.preload;
}

/* (defined after gemm_reduce_wait) */
__device__ __forceinline__ void gemm_part_stages(const gemm_params_t *p, gemm_tile_t t, uint32_t sbase,
                                                 uint32_t &stage, uint32_t &phase);

template <bool BKN, bool SKQ = false, bool PART = false, int BN = GEMM_BN, bool GRP = false>
__device__ __forceinline__ void gemm_producer(const gemm_params_t *p, uint8_t *smem,
                                              uint32_t sbase, int worker, int nworkers) {
  static_assert(BN == GEMM_BN || (!BKN && !PART), "the wide and ping-pong tiles: B [N,K], no partial stages");
  constexpr int NST = GEMM_STAGES_OF(BN);
  constexpr uint32_t SB = GEMM_STAGE_BYTES_OF(BN);
  const int cl = p->cluster_m;
  const uint32_t rank = cl == 2 ? cluster_ctarank() : 0;
  const int uw = cl == 2 ? worker / 2 : worker;
  const int unw = cl == 2 ? nworkers / 2 : nworkers;
  const uint32_t full0 = sbase + GEMM_BAR_OFF, empty0 = full0 + 8 * GEMM_RING_MAX;
  volatile int32_t *info = (volatile int32_t *)(smem + GEMM_INFO_OFF);
  const void *map_a = &p->map_a, *map_b = &p->map_b;
  uint32_t *queue = SKQ ? nullptr : p->order.queue; /* (SKQ: read from p where used) */
  const int last_m = p->tiles_m - 1;
  const int has_ready = p->ready.flags != 0;
  int ready_ok = -1; /* last flag index found ready */
  uint64_t ready_target = p->ready.epoch;
  if (has_ready && p->ready.epoch_counter) /* written by an earlier kernel: a plain load */
    ready_target = ((*(const volatile uint64_t *)p->ready.epoch_counter + 1) << p->ready.epoch_shift) +
                   p->ready.epoch;
  uint32_t stage = 0, phase = 0;
  int base = -1; /* SKQ: -1 while taking from the queue, then the first stream-K ticket */
  /* hook f's tables written in this kernel (grp_ready): read only once they are */
  const int go = !GRP || !p->grp_ready || gemm_wait_flag(p, p->grp_ready, 1ull) == GEMM_STATUS_OK;
  for (int i = 0; go; ++i) {
    int ticket;
    if (SKQ) { /* (cluster_m 1 with the queue) */
      ticket = gemm_skq_next(base < 0 ? (int)atomicAdd(p->order.queue, 1u) : 0, p->tiles_m * p->tiles_n - p->sk_tiles,
                             uw, unw, &base, &i);
    } else {
      ticket = queue ? (int)atomicAdd(queue, 1u) : uw + i * unw;
    }
    gemm_tile_t t;
    const int got = GRP && p->grp_span ? gemm_tile_of_run(p, ticket, &t) : gemm_tile_of(p, ticket, (int)rank, &t);
    if (got == 0) break;
    if (got < 0) continue; /* empty stream-K piece */
    int b_row0 = 0; /* hook f: the m-block's weight (its first row of B), or skip it */
    if (p->grp_brow) {
      if ((b_row0 = p->grp_brow[t.m_blk]) < 0) continue;
      b_row0 = (b_row0 & GEMM_GRP_INDEX) * p->grp_rows;
    }
    /* hook h: rows of the second A source skip the wait */
    if (has_ready && (uint32_t)(t.m_blk * GEMM_BM - p->a2_row_begin) >= (uint32_t)p->a2_rows) {
      const int fi = (t.m_blk * GEMM_BM) / p->ready.rows_per_flag;
      if (fi != ready_ok) {
        if (gemm_ready_wait(p, t.m_blk, ready_target) != GEMM_STATUS_OK) break;
        ready_ok = fi;
      }
    }
    const int a_row = min(t.m_blk, last_m) * GEMM_BM; /* cluster pad tile: a valid box */
    const int glu = p->grp_glu; /* gated tiles: 128 gate rows + 128 up rows a tile */
    const int n0 = t.n_blk * (glu ? BN / 2 : BN) + b_row0;
    for (int kb = 0; kb < t.k_nblk; ++kb) {
      mbar_wait(empty0 + 8 * stage, phase ^ 1);
      if (kb == 0) {
        volatile int32_t *ti = info + 8 * stage;
        ti[0] = t.m_blk;
        ti[1] = t.n_blk;
        ti[2] = t.k_blk0;
        ti[3] = t.k_nblk;
        ti[4] = t.split; /* -1: whole tile */
        ti[5] = t.slot;
        /* hook f, GRP kernels: the block's rows 64..127 are padding (GEMM_GRP_PAD1; read again
         * here, an L1 hit, rather than kept live across the tile: the producer has 40 registers) */
        if (GRP) ti[6] = p->grp_brow ? (int32_t)((uint32_t)p->grp_brow[t.m_blk] >> 30) : 0;
      }
      const uint32_t full = full0 + 8 * stage;
      const uint32_t a_dst = sbase + stage * SB, b_dst = a_dst + GEMM_A_BYTES;
      const int k0 = (t.k_blk0 + kb * t.k_step) * GEMM_BK;
      /* Every CTA expects its full stage: A (own) + both B halves (own + multicast). */
      mbarrier_arrive_expect_tx_cta(full, SB);
      /* Hook h, decided per k-block (nothing more stays live: the producer has 40 registers;
       * deciding it per tile, 2 more live registers, spilled 4-24 bytes in session 5). */
      const uint32_t a2_row = (uint32_t)(a_row - p->a2_row_begin);
      const int a2 = a2_row < (uint32_t)p->a2_rows;
      tma_load_2d(a_dst, a2 ? (const void *)&p->map_a2 : map_a, full, k0, a2 ? (int)a2_row : a_row);
      if (BN == GEMM_BN_WIDE) { /* two boxes of 160 rows; with multicast, one per CTA of the pair */
        if (!p->cluster_mc) {
          tma_load_2d(b_dst, map_b, full, k0, n0);
          tma_load_2d(b_dst + 160 * 128, map_b, full, k0, n0 + 160);
        } else {
          tma_load_2d_multicast(b_dst + 160 * 128 * rank, map_b, full, k0, n0 + 160 * (int)rank, 0x3);
        }
      } else if (!p->cluster_mc) {
        if (!BKN) {
          tma_load_2d(b_dst, map_b, full, k0, n0);
          if (BN == GEMM_BN && glu) tma_load_2d(b_dst + GEMM_B_BYTES / 2, map_b, full, k0, n0 + glu);
        } else {
#pragma unroll
          for (int q = 0; q < 4; ++q) tma_load_2d(b_dst + 8192 * q, map_b, full, n0 + 64 * q, k0);
        }
      } else {
        if (!BKN) {
          tma_load_2d_multicast(b_dst + (BN / 2) * 128 * rank, map_b, full, k0, n0 + (BN / 2) * (int)rank, 0x3);
        } else {
#pragma unroll
          for (int q = 0; q < 2; ++q) {
            const int qq = 2 * (int)rank + q;
            tma_load_2d_multicast(b_dst + 8192 * qq, map_b, full, n0 + 64 * qq, k0, 0x3);
          }
        }
      }
      if (++stage == NST) { stage = 0; phase ^= 1; }
    }
    /* hook g, add mode 5 (PART kernels): after an own, whole tile's k-blocks, two more stages
     * carry the first partial (gemm_part_stages) */
    if (PART && t.split < 0 && p->epi.reduce.preload == 5 && gemm_own_tile(p, t))
      gemm_part_stages(p, t, sbase, stage, phase);
  }
  if (SKQ) queue = p->order.queue;
  if (queue) {
    /* Reset by the last worker: every worker's final claim precedes its "done" add. */
    __threadfence();
    if (atomicAdd(queue + 1, 1u) == (uint32_t)nworkers - 1) {
      atomicExch(queue, 0u);
      atomicExch(queue + 1, 0u);
    }
  }
  mbar_wait(empty0 + 8 * stage, phase ^ 1);
  info[8 * stage] = -1;
  mbar_arrive(full0 + 8 * stage);
}

/* Releases a stage: one arrival per consumer warp, to this CTA and (cluster) to the peer
 * whose producer multicasts into our copy of the stage. */
__device__ __forceinline__ void gemm_release(uint32_t empty, int lane, int cl, uint32_t peer) {
  if (lane == 0) {
    mbar_arrive(empty);
    if (cl == 2) mbar_arrive_cluster(empty, peer);
  }
}

__device__ __forceinline__ uint32_t gemm_pack_bf16x2(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *(uint32_t *)&v;
}

/* The value the epilogue releases (signal, copy_signal) and the reduce hook waits for.
 * cache_sa: 0, or the shared word where the hook g kernels keep *epoch_src (read once per CTA:
 * the volatile global load cost one thread ~1 us per tile, and its warpgroup waited for it at
 * the next barrier; one H200, fused GEMM+RS at one rank: 0.896 ms with the wait, 0.867
 * without). */
__device__ __forceinline__ uint64_t gemm_epi_value(const gemm_epilogue_hook_t *eh, uint32_t cache_sa = 0) {
  if (eh->epoch_src && cache_sa) return ld_shared_u64(cache_sa);
  /* NOTE: not `src ? *(volatile *)src : eh->epoch`: in C++ that conditional is a volatile
   * lvalue, so eh->epoch (a __grid_constant__ parameter) was read by a volatile generic load
   * from the parameter symbol without cvta.param: an illegal address on the GPU (seen with
   * compute-sanitizer in test_gemm's epilogue-hook test). */
  if (eh->epoch_src) return *(const volatile uint64_t *)eh->epoch_src;
  return eh->epoch;
}

/* Hook g: one thread waits for the nsrc partials of local tile `lt` (acquire). Gives up like
 * hook a, and at once when another warpgroup already gave up (*status != 0). */
__device__ __forceinline__ void gemm_reduce_wait(const gemm_epilogue_hook_t *eh, int64_t lt, uint32_t cache_sa) {
  if (eh->reduce.nsrc <= 0) return;
  const uint64_t want = gemm_epi_value(eh, cache_sa);
  volatile uint32_t *status = eh->reduce.status;
  for (int s = 0; s < eh->reduce.nsrc; ++s) {
    const uint64_t *flag = eh->reduce.flags[s] + lt;
    uint64_t start = 0;
    for (uint32_t spin = 0;; ++spin) {
      if (ld_acquire_sys_u64(flag) >= want) break;
      const int why = gemm_wait_guard(spin, eh->reduce.abort_word, status, eh->reduce.timeout_ns, &start);
      if (why != GEMM_STATUS_OK) {
        if (status) atomicCAS((uint32_t *)status, 0u, (uint32_t)why);
        return; /* the call is failing: the tile's value no longer matters */
      }
      if (spin >= 64) __nanosleep(32); /* (a short sleep once the wait is not short) */
    }
  }
}

/* Hook g: own tile t's m-block within its owner's rows, and its local tile index (the index of
 * its flags and of its partial in the slots). */
__device__ __forceinline__ int gemm_own_mblk(const gemm_params_t *p, gemm_tile_t t) {
  return t.m_blk - p->epi.reduce.owner * (p->epi.rows_per_owner / GEMM_BM);
}
/* Hook g: one thread waits for own tile t's partials (gemm_reduce_wait; not with diag bit 1). */
__device__ __forceinline__ void gemm_own_wait(const gemm_params_t *p, gemm_tile_t t, uint32_t sbase) {
  if (!(p->epi.reduce.diag & 2))
    gemm_reduce_wait(&p->epi, (int64_t)gemm_own_mblk(p, t) * p->tiles_n + t.n_blk, sbase + GEMM_EPOCH_OFF);
}

/* Hook g, add mode 5 (reduce.preload 5): after own tile t's k-blocks the producer (one
 * thread) loads the first partial through map_p into two more pipeline stages: stage h holds
 * columns 128 h .. +128 of both warpgroups' 64 rows (warpgroup g at +16 KB g, two 64 x 64 boxes
 * 8 KB apart: the staging's format). Boxes wholly past n or m are not loaded. The flags were
 * acquired by consumer thread 0 of each warpgroup at the tile's start (gemm_own_wait); the
 * chain to these reads: that acquire, then (program order) its arrival on the empty barrier of
 * one of this tile's k-blocks (release), the producer's wait on it for the first partial
 * stage (acquire: the host uses mode 5 only with >= GEMM_STAGES k-blocks per tile, so the
 * stage's previous occupant is a k-block of this tile), then fence.proxy.async.global. (The
 * wait inside the producer, 40 registers, spilled.) */
__device__ __forceinline__ void gemm_part_stages(const gemm_params_t *p, gemm_tile_t t, uint32_t sbase,
                                                 uint32_t &stage, uint32_t &phase) {
  const int lmb = gemm_own_mblk(p, t);
#pragma unroll 1
  for (int h = 0; h < 2; ++h) {
    const uint32_t full = sbase + GEMM_BAR_OFF + 8 * stage;
    mbar_wait(full + 8 * GEMM_RING_MAX, phase ^ 1); /* its empty barrier */
    fence_proxy_async_gmem();
    const int c0 = t.n_blk * GEMM_BN + 128 * h;
    const int nb = c0 >= p->n ? 0 : c0 + 64 >= p->n ? 1 : 2;
    const int ng = t.m_blk * GEMM_BM + 64 >= p->m ? 1 : 2;
    mbarrier_arrive_expect_tx_cta(full, (uint32_t)(nb * ng) * 8192u);
#pragma unroll 1
    for (int q = 0; q < nb * ng; ++q) {
      const int g = q / nb, b = q % nb;
      tma_load_2d(sbase + stage * GEMM_STAGE_BYTES + 16384u * g + 8192u * b, &p->map_p, full, c0 + 64 * b,
                  lmb * GEMM_BM + 64 * g);
    }
    if (++stage == GEMM_STAGES) { stage = 0; phase ^= 1; }
  }
}

/* Hook g: adds the 8 bf16 of `v` to f[0..7] in fp32 (bf16 -> fp32 is exact). */
__device__ __forceinline__ void gemm_add_bf16x8(float *f, uint4 v) {
  const uint32_t wv[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int x = 0; x < 8; ++x) f[x] += __uint_as_float((wv[x >> 1] >> (16 * (x & 1))) << 16);
}

__device__ __forceinline__ uint4 gemm_pack_bf16x8(const float *f) {
  uint4 r;
  r.x = gemm_pack_bf16x2(f[0], f[1]);
  r.y = gemm_pack_bf16x2(f[2], f[3]);
  r.z = gemm_pack_bf16x2(f[4], f[5]);
  r.w = gemm_pack_bf16x2(f[6], f[7]);
  return r;
}

/* Staging layout of one warpgroup's 64x128 half (two 64x64 blocks, 128B swizzle: 16-byte chunk
 * c of row r sits at chunk c ^ (r % 8), conflict-free): the address of this thread's pair of
 * bf16x2 words for accumulator group jj (0..15) of the half. r0 = 16 * warp + lane / 4. */
__device__ __forceinline__ uint32_t gemm_stg_addr(uint32_t stg, int jj, int r0, int l) {
  return stg + (jj >> 3) * 8192 + r0 * 128 + (((jj & 7) ^ (r0 & 7)) << 4) + 4 * (l & 3);
}
/* The 16-byte vector c (0..7) of row `row` (0..63) in block b (0/1) of the staging. */
__device__ __forceinline__ uint32_t gemm_stg_vec(uint32_t stg, int b, int row, int c) {
  return stg + b * 8192 + row * 128 + ((c ^ (row & 7)) << 4);
}
/* Writes half h of this thread's accumulators into the staging as bf16 (rows r0 and r0 + 8). */
/* The CTA's (aligned) shared base from warpgroup g's epilogue staging address. */
__device__ __forceinline__ uint32_t gemm_sbase_of(uint32_t stg, int g) {
  return stg - (uint32_t)g * GEMM_EPI_BYTES - GEMM_EPI_OFF;
}

/* nj < 16: only the first nj n8 groups (the wide tile's last half is 64 columns). */
__device__ __forceinline__ void gemm_stage_half(const float *acc, uint32_t stg, int h, int r0, int l, int nj = 16) {
#pragma unroll
  for (int jj = 0; jj < 16; ++jj) {
    if (jj >= nj) break;
    const int j = 16 * h + jj;
    const uint32_t a0 = gemm_stg_addr(stg, jj, r0, l);
    st_shared_u32(a0, gemm_pack_bf16x2(acc[4 * j], acc[4 * j + 1]));
    st_shared_u32(a0 + 8 * 128, gemm_pack_bf16x2(acc[4 * j + 2], acc[4 * j + 3]));
  }
}

/* Hook g, the reduction of one 64x128 half (staging `stg` holds this CTA's bf16 values, the
 * partials arrived, gemm_reduce_wait done): each thread sums its 8 vectors of 8 bf16, own value
 * first and then src[0], src[1], ... in fp32 (the same order on every rank), rounds once and
 * stores to the staging (reduce.tma: one TMA store of the half follows) or to dst, and to
 * every copy. The pieces: gemm_red_args (the hook's values, read once per half: `eh` points into
 * the kernel's parameter space through a generic pointer, which the compiler re-reads after
 * every asm volatile("memory"); hoisting alone did not change the time), gemm_reduce_vec (one
 * vector), gemm_reduce_half (the rolled loop, partial loads two vectors ahead). */
typedef struct {
  const uint16_t *src0;  /* src[0] (2 ranks: the only partial)                        */
  int64_t out_ld;
  int nsrc, ncopies;
} gemm_red_args_t;

__device__ __forceinline__ gemm_red_args_t gemm_red_args(const gemm_epilogue_hook_t *eh) {
  gemm_red_args_t r;
  r.nsrc = eh->reduce.diag & 4 ? 0 : eh->reduce.nsrc;
  r.ncopies = eh->reduce.ncopies;
  r.out_ld = eh->out_ld;
  r.src0 = r.nsrc > 0 ? eh->reduce.src[0] : nullptr;
  return r;
}

/* The first n (< 8) bf16 of r to o[0..n) (a vector that straddles N). Rolled: rare, small. */
__device__ __forceinline__ void gemm_store_bf16_tail(uint16_t *o, uint4 r, int n) {
#pragma unroll 1
  for (int x = 0; x < n; ++x) {
    const uint32_t w = x < 2 ? r.x : x < 4 ? r.y : x < 6 ? r.z : r.w;
    o[x] = (uint16_t)(w >> (16 * (x & 1)));
  }
}

/* One vector of the pass below: own (from the staging) + partials, rounded once, to the
 * staging (to_smem) or dst, and to every copy. Vector i: block b = i / 4, rows rt + 16 (i % 4). */
__device__ __forceinline__ void gemm_reduce_vec(const gemm_epilogue_hook_t *eh, const gemm_red_args_t &ra, int i,
                                                uint4 own, uint4 part, uint32_t sv, int row_base, int rt, int gcol,
                                                int M, int N, int64_t dst_row0, uint16_t *dst, int64_t ld,
                                                int to_smem) {
  const int row = rt + 16 * (i & 3);
  if (gcol >= N || row_base + row >= M) return;
  const int64_t off = (dst_row0 + row) * ra.out_ld + gcol; /* partials and copies */
  float f[8];
  const uint32_t ov[4] = {own.x, own.y, own.z, own.w};
#pragma unroll
  for (int x = 0; x < 8; ++x) f[x] = __uint_as_float((ov[x >> 1] >> (16 * (x & 1))) << 16);
  if (ra.nsrc == 1) {
    gemm_add_bf16x8(f, part);
  } else if (ra.nsrc > 1) {
#pragma unroll 1
    for (int s = 0; s < ra.nsrc; ++s) gemm_add_bf16x8(f, __ldcg((const uint4 *)(eh->reduce.src[s] + off)));
  }
  const uint4 sum = gemm_pack_bf16x8(f);
#pragma unroll 1
  for (int cc = 0; cc < ra.ncopies; ++cc) *(uint4 *)((uint16_t *)eh->reduce.copies[cc] + off) = sum;
  if (to_smem) {
    st_shared_v4(sv, sum);
  } else {
    uint16_t *o = dst + (dst_row0 + row) * ld + gcol;
    if (gcol + 8 <= N) *(uint4 *)o = sum;
    else gemm_store_bf16_tail(o, sum, N - gcol);
  }
}

/* Hook g, add modes: the bf16 pairs v0 (row r, columns c, c+1) and v1 (row r + 8) of a
 * partial added to the 4 accumulators a[0..3] of one n8 block of the wgmma fragment. */
__device__ __forceinline__ void gemm_add_pairs(float *a, uint32_t v0, uint32_t v1) {
  a[0] += __uint_as_float(v0 << 16);
  a[1] += __uint_as_float(v0 & 0xffff0000u);
  a[2] += __uint_as_float(v1 << 16);
  a[3] += __uint_as_float(v1 & 0xffff0000u);
}

/* Hook g, add modes 4 and 5: this thread's bf16 pairs of half h of a partial laid out like
 * the staging at `src` (the staging itself, landed there by TMA; or a pipeline stage) added
 * to its accumulators. The words a thread reads are the ones gemm_stage_half(acc, src, h, ..)
 * then writes (mode 4 restages the sums in place): no barrier between. */
__device__ __forceinline__ void gemm_add_staged_half(float *acc, uint32_t src, int h, int r0, int l) {
#pragma unroll
  for (int jj = 0; jj < 16; ++jj) {
    const uint32_t a0 = gemm_stg_addr(src, jj, r0, l);
    gemm_add_pairs(acc + 4 * (16 * h + jj), ld_shared_u32(a0), ld_shared_u32(a0 + 8 * 128));
  }
}

/* Hook g, add mode 4: one thread of warpgroup g asks for half h of the first partial of own
 * tile t (local rows dst_row0 .., columns col_base + 128 h ..) into its staging `stg`, on the
 * warpgroup's barrier. The staging must be free: the previous TMA stores from it read out. */
__device__ __forceinline__ void gemm_partial_tma(const gemm_params_t *p, uint32_t stg, uint32_t sbase, int g, int h,
                                                 int col_base, int64_t dst_row0) {
  const uint32_t pbar = sbase + GEMM_PBAR_OFF + 8 * g;
  const int c0 = col_base + 128 * h, two = c0 + 64 < p->n;
  cp_async_bulk_wait_group_read0();
  st_shared_u32(sbase + GEMM_PASK_OFF + 4 * g, ld_shared_u32(sbase + GEMM_PASK_OFF + 4 * g) + 1);
  mbarrier_arrive_expect_tx_cta(pbar, two ? 16384u : 8192u);
  tma_load_2d(stg, &p->map_p, pbar, c0, (int32_t)dst_row0);
  if (two) tma_load_2d(stg + 8192, &p->map_p, pbar, c0 + 64, (int32_t)dst_row0);
}

/* Hook g, add mode 4: thread 0 of warpgroup g waits for own tile t's partials (acquire; not
 * with diag bit 1), then fence.proxy.async.global (the TMA reads after the acquire), and asks
 * for half 0 of the first partial. Called at the tile's start (after the CTA released any
 * pending push flag: waiting while holding it could deadlock at 2 ranks, see gemm_consumer)
 * or, for a split tile, in its last piece's epilogue. A warpgroup whose rows all lie past m
 * asks nothing (its epilogue skips both halves). */
__device__ __forceinline__ void gemm_partial_first(const gemm_params_t *p, gemm_tile_t t, int g, uint32_t stg,
                                                   uint32_t sbase) {
  if (t.m_blk * GEMM_BM + 64 * g >= p->m) return;
  gemm_own_wait(p, t, sbase);
  fence_proxy_async_gmem();
  const int64_t lrow0 = (int64_t)gemm_own_mblk(p, t) * GEMM_BM + 64 * g;
  gemm_partial_tma(p, stg, sbase, g, 0, t.n_blk * GEMM_BN, lrow0);
  if (p->epi.reduce.pf) tma_prefetch_3d(&p->map_pf, t.n_blk * GEMM_BN, (int32_t)lrow0, p->epi.reduce.pf - 1);
}

/* Hook g, the reduction of one 64x128 half (see the comment above gemm_red_args_t). Thread tid
 * owns the 16-byte column chunk c = tid % 8 of rows rt + 16 k (rt = tid / 8, k = 0..3) in both
 * 64-column blocks b: 8 vectors, the same ones as the staging's other passes. The swizzle of
 * those rows is the same (16 k is a multiple of 8), so one staging address per thread serves
 * all of them. One iteration handles 2 vectors while the next 2 vectors' partials are loaded
 * (2 ranks: 2-4 loads in flight per thread).
 * Cost (ncu cycles, one H200, fused GEMM+RS forced at one rank, 8192 x 8192 x 4096): ~6,800
 * cycles per tile with the tensor cores idle (1,276,801 cycles vs 1,171,249 without the pass).
 * The pass was first unrolled over all 16 vectors of both halves (~1,000 distinct instructions
 * per tile, fetched cold: stall_no_inst; 1,354,913 vs 1,194,869 cycles), then 4 vectors per
 * block (1,227 straight-line instructions, no faster), now rolled. Hiding it needs overlap with
 * the next tile's mainloop (docs/perf-notes.md, session 5). */
__device__ __forceinline__ void gemm_reduce_half(const gemm_epilogue_hook_t *eh, uint32_t stg, int tid,
                                                 int row_base, int col_base, int M, int N,
                                                 int64_t dst_row0, uint16_t *dst, int64_t ld, int to_smem) {
  const gemm_red_args_t ra = gemm_red_args(eh);
  const int rt = tid >> 3, c = tid & 7;
  const uint32_t s_t = stg + (uint32_t)rt * 128u + ((uint32_t)(c ^ (rt & 7)) << 4);
  /* the partial of vector i (zeros where it does not exist or there is no single source) */
  auto part = [&](int i) -> uint4 {
    const int row = rt + 16 * (i & 3), gcol = col_base + 64 * (i >> 2) + 8 * c;
    return ra.nsrc == 1 && gcol < N && row_base + row < M
               ? __ldcg((const uint4 *)(ra.src0 + (dst_row0 + row) * ra.out_ld + gcol))
               : make_uint4(0, 0, 0, 0);
  };
  uint4 p0 = part(0), p1 = part(1);
#pragma unroll 1
  for (int i = 0; i < 8; i += 2) {
    uint4 n0 = make_uint4(0, 0, 0, 0), n1 = n0;
    if (i < 6) {
      n0 = part(i + 2);
      n1 = part(i + 3);
    }
    const uint32_t sv0 = s_t + (uint32_t)(i >> 2) * 8192u + (uint32_t)(i & 3) * 2048u;
    const uint4 o0 = ld_shared_v4(sv0), o1 = ld_shared_v4(sv0 + 2048u);
    const int gcol = col_base + 64 * (i >> 2) + 8 * c;
    gemm_reduce_vec(eh, ra, i, o0, p0, sv0, row_base, rt, gcol, M, N, dst_row0, dst, ld, to_smem);
    gemm_reduce_vec(eh, ra, i + 1, o1, p1, sv0 + 2048u, row_base, rt, gcol, M, N, dst_row0, dst, ld, to_smem);
    p0 = n0;
    p1 = n1;
  }
}

/* Hook g, add mode with copies (AllReduce, owner mode): the staged sums of one half go to
 * every copies[c] (local rows, ld out_ld) with 16-byte stores; the flags follow in the
 * epilogue (barrier, fence, release). */
__device__ __forceinline__ void gemm_copy_half(const gemm_epilogue_hook_t *eh, uint32_t stg, int tid, int row_base,
                                               int col_base, int M, int N, int64_t dst_row0) {
#pragma unroll 1
  for (int i = 0; i < 8; ++i) {
    const int q = tid + 128 * i;
    const int b = q >> 9, row = (q >> 3) & 63, c = q & 7;
    const int gcol = col_base + 64 * b + 8 * c;
    if (row_base + row >= M || gcol >= N) continue;
    const uint4 v = ld_shared_v4(gemm_stg_vec(stg, b, row, c));
#pragma unroll 1
    for (int cc = 0; cc < eh->reduce.ncopies; ++cc)
      *(uint4 *)((uint16_t *)eh->reduce.copies[cc] + (dst_row0 + row) * eh->out_ld + gcol) = v;
  }
}

/* Hook g2 (and reduce.copy_defer in the lean kernels without it): releases the deferred
 * signal of this CTA's previous TMA-pushed tile, or its previous reduced tile's copy flags. The
 * pending flag (owner << 24 | local tile, GEMM_PEND_COPY << 24 | local tile, or ~0) lives in a
 * shared word (GEMM_PEND_OFF) that only consumer thread 0 of warpgroup 0 touches. All 256 consumer threads call this (uniform:
 * both warpgroups see the same tiles), with keep 0: at the START of every epilogue of a g2
 * kernel (before this tile's TMA stores and before any reduce wait: the previous pushed
 * tile's writes, issued a whole mainloop earlier, are complete, and the fence has none of our
 * NVLink stores in flight to wait for), and after the last tile. (Until s2 run 2 it ran at the
 * end of a pushed tile's epilogue, with that tile's stores in flight, and before an own tile's
 * mainloop, waiting for the just-issued stores.) Chain (DESIGN.md section 4, litmus in
 * test_signal): the issuing threads' cp.async.bulk.wait_group (writes complete; implies the
 * async-generic proxy fence) -> bar.sync -> one thread's fence.acq_rel.sys + st.release.sys.
 * Then `next` (or ~0) becomes the pending tile. */
/* Flag helper (HELPER): consumer thread 0 of warpgroup 0 hands the word `v` (a pending tile,
 * or GEMM_HELPER_END) to the helper warp through the shared ring: waits until the slot is free
 * (the helper runs ahead: a flag takes ~1-3 us, a tile tens), writes it, arrives on the slot's
 * "full" barrier (release, CTA scope). */
#define GEMM_HELPER_END 0xfffffffeu
/* [0, 2 * SLOTS): full[k], empty[k] mbarriers; then ring[SLOTS] and the post count (u32). */
__device__ __forceinline__ uint32_t gemm_helper_smem(void) {
  __shared__ __align__(8) uint64_t s_helper[2 * GEMM_HELPER_SLOTS + GEMM_HELPER_SLOTS / 2 + 1];
  return smem_addr(s_helper);
}
__device__ __forceinline__ void gemm_helper_post(uint32_t v) {
  const uint32_t bars = gemm_helper_smem(), ring = bars + 16 * GEMM_HELPER_SLOTS;
  const uint32_t n = ld_shared_u32(ring + 4 * GEMM_HELPER_SLOTS), k = n % GEMM_HELPER_SLOTS;
  mbar_wait(bars + 8 * (GEMM_HELPER_SLOTS + k), ((n / GEMM_HELPER_SLOTS) & 1u) ^ 1u);
  st_shared_u32(ring + 4 * k, v);
  st_shared_u32(ring + 4 * GEMM_HELPER_SLOTS, n + 1);
  mbar_arrive(bars + 8 * k);
}

/* Publishes a pushed tile's flag: st.release.sys alone (cumulative: it covers the stores the
 * barriers ordered before it; until session 10 a fence.acq_rel.sys preceded it, a second
 * system-scope barrier of ~0.6 us with nothing left to drain: facts sheet 8g). diag 32: a
 * relaxed store, unordered (timing only). */
__device__ __forceinline__ void gemm_flag_put(const gemm_params_t *p, uint64_t *flag, uint64_t value) {
  if (p->epi.reduce.diag & 32) st_relaxed_sys_u64(flag, value);
  else st_release_sys_u64(flag, value);
}

/* The flag helper (HELPER): one thread of the producer warpgroup's warp 1 (40 registers)
 * releases the pushed tiles' flags that gemm_epi_flush hands it, so that the system-scope
 * fence of each release is off the consumers' path. Chain: the issuing threads' wait_group 0
 * -> consumers' bar.sync -> the posting thread's mbarrier arrive (release) -> this thread's
 * wait (acquire) -> st.release.sys (gemm_flag_put). Ends at GEMM_HELPER_END (posted after
 * the consumers' last flush, always: their own waits have deadlines and stop on abort). So the
 * helper waits only as long as the consumers' slowest wait; past twice the call's deadline
 * plus 10 s it traps (a bug, not a peer). */
__device__ __forceinline__ void gemm_flag_helper(const gemm_params_t *p, uint32_t sbase) {
  const uint32_t bars = gemm_helper_smem(), ring = bars + 16 * GEMM_HELPER_SLOTS;
  const uint64_t limit = p->epi.reduce.timeout_ns ? 2 * p->epi.reduce.timeout_ns + 10000000000ull : 0;
  for (uint32_t n = 0;; ++n) {
    const uint32_t k = n % GEMM_HELPER_SLOTS, par = (n / GEMM_HELPER_SLOTS) & 1u;
    const uint64_t t0 = globaltimer_ns();
    while (!mbarrier_try_wait_parity_cta(bars + 8 * k, par))
      if (limit && globaltimer_ns() - t0 > limit) __trap();
    const uint32_t v = ld_shared_u32(ring + 4 * k);
    if (v == GEMM_HELPER_END) break;
    gemm_flag_put(p, p->epi.signal[v >> 24] + (v & 0xffffffu), gemm_epi_value(&p->epi, sbase + GEMM_EPOCH_OFF));
    mbar_arrive(bars + 8 * (GEMM_HELPER_SLOTS + k));
  }
}

/* The pending word's owner field for a reduced tile's deferred copy flags (reduce.copy_defer). */
#define GEMM_PEND_COPY 0xfeu
template <bool HELPER = false>
__device__ __forceinline__ void gemm_epi_flush(const gemm_params_t *p, int g, int tid, uint32_t sbase, int keep,
                                               uint32_t next) {
  if (tid == 0) {
    if (keep >= 2) asm volatile("cp.async.bulk.wait_group 2;" ::: "memory");
    else if (keep == 1) asm volatile("cp.async.bulk.wait_group 1;" ::: "memory");
    else cp_async_bulk_wait_group0();
  }
  named_bar_sync(GEMM_BAR_CONSUMERS, 256);
  if (g == 0 && tid == 0) {
    const uint32_t pend_sa = sbase + GEMM_PEND_OFF;
    const uint32_t pend = ld_shared_u32(pend_sa);
    if (pend != 0xffffffffu) {
      if constexpr (HELPER) {
        gemm_helper_post(pend); /* (copy_defer is off with the helper) */
      } else if ((pend >> 24) == GEMM_PEND_COPY) { /* a reduced tile's copies (reduce.copy_defer) */
        const uint64_t value = gemm_epi_value(&p->epi, sbase + GEMM_EPOCH_OFF);
        const int nc = p->epi.reduce.ncopies;
        if (nc == 1 || (p->epi.reduce.diag & 32)) {
          for (int cc = 0; cc < nc; ++cc) gemm_flag_put(p, p->epi.reduce.copy_signal[cc] + (pend & 0xffffffu), value);
        } else { /* several: one fence, then relaxed stores (P - 1 st.release.sys run in series,
                  * ~0.65 us each: facts sheet 8g); the barrier above ordered every copy's wait */
          fence_acq_rel_sys();
          for (int cc = 0; cc < nc; ++cc) st_relaxed_sys_u64(p->epi.reduce.copy_signal[cc] + (pend & 0xffffffu), value);
        }
      } else {
        gemm_flag_put(p, p->epi.signal[pend >> 24] + (pend & 0xffffffu), gemm_epi_value(&p->epi, sbase + GEMM_EPOCH_OFF));
      }
    }
    st_shared_u32(pend_sa, next);
  }
}

/* Hook g2 with several owners (G2 2): the map of `owner`'s slot for this rank's partials. The
 * maps are not in gemm_params_t (every other kernel would carry their 0.9 KB): a G2 2 kernel's
 * parameter holds GEMM_PUSH_MAPS of them right after its gemm_params_t, map s over owner
 * (reduce.owner + 1 + s) % P's slot (gemm_rs.cu gemm_rs_kargs_t.map_push, checked there). */
__device__ __forceinline__ const CUtensorMap *gemm_push_map(const gemm_params_t *p, int owner) {
  const int P = p->epi.reduce.nsrc + 1;
  return reinterpret_cast<const CUtensorMap *>(p + 1) + (owner - p->epi.reduce.owner - 1 + P) % P;
}

/* reduce.copy_tma 2 (several copies): the map of copies[c], GEMM_PUSH_MAPS maps after the push
 * maps in the fused kernel's parameter (gemm_rs.cu gemm_rs_kargs_t.map_copy, checked there). */
__device__ __forceinline__ const CUtensorMap *gemm_copy_map(const gemm_params_t *p, int c) {
  return reinterpret_cast<const CUtensorMap *>(p + 1) + GEMM_PUSH_MAPS + c;
}

/* One TMA store of a C box (gemm_params_t.store_hint: with L2::evict_first). */
__device__ __forceinline__ void gemm_store_c(const gemm_params_t *p, const CUtensorMap *map, uint32_t src, int c0, int c1) {
  if (p->store_hint) tma_store_2d_hint(map, src, c0, c1, l2_policy_evict_first());
  else tma_store_2d(map, src, c0, c1);
}

/* Epilogue of one consumer warpgroup g (rows m0 + 64g .. +64 of the tile). RED: hook g is
 * compiled in (fused reduction kernels only; the stand-alone engine keeps its registers). */
/* Hook g, symmetric mode: this tile's own bf16 values (both halves of warpgroup g, staged
 * through `stg`) go to every push[c] with 16-byte stores; then both warpgroups meet and one
 * thread releases push_signal[c][lt] (cumulativity: the barrier orders every thread's stores
 * before its fence.acq_rel.sys). acc is left intact (the reduction stages it again). */
__device__ __forceinline__ void gemm_reduce_push(const gemm_params_t *p, const float *acc, uint32_t stg, int g,
                                                 int tid, int row_base, int col_base, int64_t dst_row0, int64_t lt) {
  const gemm_epilogue_hook_t *eh = &p->epi;
  const int w = tid >> 5, l = tid & 31, r0 = 16 * w + (l >> 2);
  const uint32_t bar = GEMM_BAR_WG0 + g;
  /* read once (see gemm_red_args) */
  const int M = p->m, N = p->n, npush = eh->reduce.npush;
  const int64_t out_ld = eh->out_ld;
  uint16_t *push0 = npush == 1 ? (uint16_t *)eh->reduce.push[0] : nullptr;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (row_base >= M || col_base + 128 * h >= N) continue; /* warpgroup-uniform */
    named_bar_sync(bar, 128);
    gemm_stage_half(acc, stg, h, r0, l);
    named_bar_sync(bar, 128);
#pragma unroll 2
    for (int i = 0; i < 8; ++i) {
      const int q = tid + 128 * i;
      const int b = q >> 9, row = (q >> 3) & 63, c = q & 7;
      const int gcol = col_base + 128 * h + 64 * b + 8 * c;
      if (row_base + row >= M || gcol >= N) continue;
      const uint4 v = ld_shared_v4(gemm_stg_vec(stg, b, row, c));
      if (npush == 1) *(uint4 *)(push0 + (dst_row0 + row) * out_ld + gcol) = v;
      else
        for (int cc = 0; cc < npush; ++cc) *(uint4 *)((uint16_t *)eh->reduce.push[cc] + (dst_row0 + row) * out_ld + gcol) = v;
    }
  }
  named_bar_sync(GEMM_BAR_CONSUMERS, 256);
  if (g == 0 && tid == 0) {
    const uint64_t value = gemm_epi_value(eh, gemm_sbase_of(stg, g) + GEMM_EPOCH_OFF);
    fence_acq_rel_sys(); /* then relaxed flags: a release pattern for each, one fence for all */
    for (int cc = 0; cc < eh->reduce.npush; ++cc) st_relaxed_sys_u64(eh->reduce.push_signal[cc] + lt, value);
  }
}

/* Returns 1 when it left this reduced tile's copy flags in the pending word (reduce.copy_defer;
 * released by gemm_epi_flush before the CTA's next epilogue or after its last tile). */
/* Gated tiles: a thread's accumulators for columns c (gate, c < 128) and c + 128 (up, the same
 * feature) are acc[4 j + e] and acc[4 (j + 16) + e]; the latter becomes silu(gate) x up in fp32
 * (sigmoid by ex2 and rcp.approx: a gate of -inf-like size gives -0, not NaN). */
__device__ __forceinline__ void gemm_glu(float *acc) {
#pragma unroll
  for (int i = 0; i < 64; ++i) {
    const float g = acc[i], e = exp2f(-1.4426950408889634f * g);
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(1.f + e));
    acc[64 + i] *= g * r;
  }
}

template <bool RED, int G2 = 0, int DEFER = 0, bool HELPER = false, int BN = GEMM_BN, int PRE = -1>
__device__ __forceinline__ int gemm_epilogue(const gemm_params_t *p, float *acc,
                                              gemm_tile_t t, uint32_t stg, int g, int tid,
                                              uint32_t *pk = nullptr, int *pk_on = nullptr,
                                              int *pk_col = nullptr, int *pk_row = nullptr) {
  static_assert(BN == GEMM_BN || (!RED && !G2 && !HELPER), "the wide tile: plain epilogue only");
  static_assert(G2 != 2 || (DEFER == 0 && !HELPER), "pushes to several owners: no deferred half, no flag helper");
  constexpr int NH = (BN + 127) / 128; /* halves of 128 columns (the wide tile's third: 64) */
  const int w = tid >> 5, l = tid & 31;
  /* Gated tiles (grp_glu): half 1 becomes silu(gate) x up and is stored at column 128 n_blk of
   * C [m, grp_glu]; half 0 is not stored. */
  const int glu = BN == GEMM_BN && !RED && !G2 && p->grp_glu;
  const int scat = !RED && !G2 && p->scat_origin != nullptr; /* row scatter */
  if (glu) gemm_glu(acc);
  const int M = p->m, N = glu ? p->grp_glu : p->n;
  const int row0 = t.m_blk * GEMM_BM; /* tile's first row */
  const int row_base = row0 + 64 * g;
  const int col_base = glu ? t.n_blk * (BN / 2) - 128 : t.n_blk * BN;
  const gemm_epilogue_hook_t *eh = &p->epi;
  const uint32_t sb = gemm_sbase_of(stg, g);
  int owner = 0;
  uint16_t *dst = (uint16_t *)p->c;
  int64_t ld = p->ldc;
  int64_t dst_row0 = row_base;
  int64_t dst_row_end = INT64_MAX; /* compact rows: end of this owner's real rows */
  if (eh->out) {
    owner = row0 / eh->rows_per_owner;
    dst = (uint16_t *)eh->out[owner];
    ld = eh->out_ld;
    dst_row0 = row_base - (int64_t)owner * eh->rows_per_owner;
  } else if (eh->rows_valid > 0) {
    const int ow = row0 / eh->rows_per_owner;
    dst_row0 = row_base - (int64_t)ow * (eh->rows_per_owner - eh->rows_valid);
    dst_row_end = (int64_t)(ow + 1) * eh->rows_valid;
  }
  const int red = RED && eh->out && eh->reduce.on && owner == eh->reduce.owner; /* hook g */
  const int64_t red_tile =
      red ? (int64_t)(t.m_blk - owner * (eh->rows_per_owner / GEMM_BM)) * p->tiles_n + t.n_blk : 0;
  const int red_tma = RED && red && (PRE >= 0 || eh->reduce.tma);
  const int npush = PRE >= 0 ? 0 : eh->reduce.npush;
  if (red) {
    dst = (uint16_t *)eh->reduce.dst;
    ld = eh->reduce.dst_ld;
    /* (the previous tile's TMA store may still read this warpgroup's staging) */
    if (red_tma && npush > 0 && tid == 0) cp_async_bulk_wait_group_read0();
    if (npush > 0) gemm_reduce_push(p, acc, stg, g, tid, row_base, col_base, dst_row0, red_tile);
    /* Ordered before the other threads' loads by the named barrier below (causality). */
    if (tid == 0 && row_base < M && !(eh->reduce.diag & 2) && !gemm_preload_of<PRE>(p))
      gemm_reduce_wait(eh, red_tile, sb + GEMM_EPOCH_OFF);
  }
  const int tma_out = G2 && RED && eh->out_tma && eh->out && eh->reduce.on && owner != eh->reduce.owner; /* g2 */
  const uint32_t pend_sa = sb + GEMM_PEND_OFF;
  /* hook g2: the pending (previous pushed) tile's flag goes first, before any wait of this
   * epilogue and before this tile's TMA stores are in flight, so that the fence.acq_rel.sys
   * has nothing of ours on NVLink to wait for (the previous tile's stores had a mainloop). */
  if (G2 && RED && eh->out_tma && t.m_blk < p->tiles_m) gemm_epi_flush<HELPER>(p, g, tid, sb, 0, 0xffffffffu);
  const int use_tma = G2 ? tma_out : (p->epi_tma && !eh->out && eh->rows_valid <= 0);
  /* Deferred half 1 (DEFER): packed into 32 registers now, staged and stored by
   * gemm_epi_deferred during the next tile's mainloop. The plain TMA-store path (no hooks), and
   * hook g2's pushed tiles (the kernels with the add mode compiled in, PRE >= 0): there half
   * 0's TMA store must have read the staging out before half 1 can be staged, and at 2 GPUs
   * that read runs at the NVLink drain rate, with every CTA pushing at once. */
  const int defer = DEFER > 0 && ((!RED && !G2 && use_tma && !eh->signal) || (G2 && RED && PRE >= 0 && tma_out));
  const int r0 = 16 * w + (l >> 2); /* this thread's first row in the warpgroup's 64 */
  const uint32_t bar = GEMM_BAR_WG0 + g;
#pragma unroll
  for (int h = 0; h < NH; ++h) {
    if (row_base >= M || col_base + 128 * h >= N || (glu && h == 0)) continue; /* warpgroup-uniform */
    if (DEFER > 0 && defer && h == NH - 1) { /* the last half (wide: the 64-column third) */
      constexpr int NJ = (BN - 128 * (NH - 1)) / 8;
#pragma unroll
      for (int jj = 0; jj < NJ; ++jj) {
        const int j = 16 * (NH - 1) + jj;
        pk[2 * jj] = gemm_pack_bf16x2(acc[4 * j], acc[4 * j + 1]);
        pk[2 * jj + 1] = gemm_pack_bf16x2(acc[4 * j + 2], acc[4 * j + 3]);
      }
      *pk_on = 1;
      *pk_col = col_base + 128 * (NH - 1);
      *pk_row = tma_out ? (int)dst_row0 : row_base; /* (g2: the row in the owner's buffer, map_c) */
      continue;
    }
    /* add mode 4: half 0 of the partial was asked for at the tile's start (a split tile: now),
     * half 1 now */
    const int red_tl = RED && !HELPER && red_tma && gemm_preload_of<PRE>(p) == 4; /* (helper kernels: spilled) */
    if ((use_tma || red_tma) && tid == 0) {
      if (red_tl && h == 1) gemm_partial_tma(p, stg, sb, g, 1, col_base, dst_row0); /* (frees the staging first) */
      else if (red_tl && h == 0 && ld_shared_u32(sb + GEMM_PASK_OFF + 4 * g) == ld_shared_u32(sb + GEMM_PCNT_OFF + 4 * g))
        gemm_partial_first(p, t, g, stg, sb); /* not asked yet: a split tile's last piece */
      else cp_async_bulk_wait_group_read0(); /* staging free again */
    }
    uint32_t pcnt = 0;
    if (red_tl) {
      pcnt = ld_shared_u32(sb + GEMM_PCNT_OFF + 4 * g);
      mbar_wait(sb + GEMM_PBAR_OFF + 8 * g, pcnt & 1u);
    }
    named_bar_sync(bar, 128);
    if (red_tl) {
      if (tid == 0) st_shared_u32(sb + GEMM_PCNT_OFF + 4 * g, pcnt + 1); /* (all have read it) */
      gemm_add_staged_half(acc, stg, h, r0, l);
      gemm_stage_half(acc, stg, h, r0, l);
    } else {
      gemm_stage_half(acc, stg, h, r0, l, (BN - 128 * h) / 8 < 16 ? (BN - 128 * h) / 8 : 16);
    }
    if (use_tma) fence_proxy_async_smem_cta(); /* generic smem writes -> TMA reads */
    named_bar_sync(bar, 128);
    if (use_tma) {
      if (tid == 0) {
#pragma unroll
        for (int b = 0; b < 2; ++b) {
          const int c0 = col_base + 128 * h + 64 * b;
          if (c0 < N && 128 * h + 64 * b < BN) {
            if (tma_out || (RED && PRE < 0))
              tma_store_2d(G2 == 2 && tma_out ? gemm_push_map(p, owner) : &p->map_c, stg + 8192 * b, c0,
                           tma_out ? (int)dst_row0 : row_base);
            else gemm_store_c(p, &p->map_c, stg + 8192 * b, c0, row_base);
          }
        }
        cp_async_bulk_commit_group();
      }
    } else if (red) { /* hook g */
      if (red_tma && gemm_preload_of<PRE>(p)) { /* add mode: the staging holds the sums */
        if (eh->reduce.ncopies > 0 && !(PRE >= 0 && eh->reduce.copy_tma)) gemm_copy_half(eh, stg, tid, row_base, col_base + 128 * h, M, N, dst_row0);
      } else if (!(red_tma && (eh->reduce.diag & 8)))
        gemm_reduce_half(eh, stg, tid, row_base, col_base + 128 * h, M, N, dst_row0, dst, ld, red_tma);
      if (red_tma) { /* the sums are in the staging: one thread stores the half */
        fence_proxy_async_smem_cta();
        named_bar_sync(bar, 128);
        if (tid == 0) {
          const int copy_tma = PRE >= 0 ? eh->reduce.copy_tma : 0; /* (the lean kernels only) */
#pragma unroll
          for (int b = 0; b < 2; ++b) {
            const int c0 = col_base + 128 * h + 64 * b;
            if (c0 < N) {
              if (PRE >= 0) gemm_store_c(p, &p->map_c2, stg + 8192 * b, c0, (int)dst_row0);
              else tma_store_2d(&p->map_c2, stg + 8192 * b, c0, (int)dst_row0); /* (the general kernel: spilled) */
              if (copy_tma == 1) gemm_store_c(p, &p->map_cp, stg + 8192 * b, c0, (int)dst_row0);
              else if (copy_tma)
                for (int cc = 0; cc < eh->reduce.ncopies; ++cc)
                  gemm_store_c(p, gemm_copy_map(p, cc), stg + 8192 * b, c0, (int)dst_row0);
            }
          }
          cp_async_bulk_commit_group();
        }
      }
    } else if (!G2) { /* (hook g2 kernels: every tile is pushed by TMA or reduced) */
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const int q = tid + 128 * i;
        const int b = q >> 9, row = (q >> 3) & 63, c = q & 7;
        if (128 * h + 64 * b >= BN) continue; /* (the wide tile's last half has one block) */
        const uint4 v = ld_shared_v4(gemm_stg_vec(stg, b, row, c));
        const int grow = row_base + row;
        const int gcol = col_base + 128 * h + 64 * b + 8 * c;
        if (grow < M && gcol < N && dst_row0 + row < dst_row_end) {
          uint16_t *o = dst + (dst_row0 + row) * ld + gcol;
          if (scat) { /* row scatter: the row's rank and row there, or dropped */
            const int2 og = __ldg((const int2 *)p->scat_origin + grow);
            if (og.x < 0) continue;
            o = (uint16_t *)p->scat_dst[og.x] + (int64_t)og.y * ld + gcol;
          }
          if (gcol + 8 <= N) {
            *(uint4 *)o = v;
          } else {
            const uint32_t wv[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int x = 0; x < 8; ++x) /* compile-time indices: stays in registers */
              if (x < N - gcol) o[x] = (uint16_t)(wv[x >> 1] >> (16 * (x & 1)));
          }
        }
      }
    }
  }
  if (scat && row_base < M) { /* row scatter: this half-tile's rows counted at their ranks */
    named_bar_sync(bar, 128); /* every thread of the warpgroup stored its rows */
    if (w == 0) {
      const int2 *og = (const int2 *)p->scat_origin;
      const int ra = row_base + l, rb = row_base + 32 + l;
      const int sa = ra < M ? __ldg(&og[ra]).x : -1, sb2 = rb < M ? __ldg(&og[rb]).x : -1;
      int mine = 0;
      for (int d = 0; d < p->scat_n; ++d) {
        const int k = __popc(__ballot_sync(0xffffffffu, sa == d)) + __popc(__ballot_sync(0xffffffffu, sb2 == d));
        if (l == d) mine = k;
      }
      /* Cumulativity: the barrier ordered the warpgroup's stores before this fence. */
      if (p->scat_sys) fence_acq_rel_sys();
      else fence_acq_rel_gpu();
      if (mine) red_relaxed_sys_add_u64(p->scat_count[l], (uint64_t)mine);
    }
  }
  /* (a reduced tile is never a pushed one: this excludes the branch above) */
  const int copy_pend = (G2 ? !HELPER && eh->out_tma : PRE >= 0 && eh->reduce.copy_tma) && red && eh->reduce.copy_defer &&
                        eh->reduce.ncopies > 0 && t.m_blk < p->tiles_m;
  if (tma_out && eh->signal && t.m_blk < p->tiles_m) { /* hook g2: this tile's flag waits for the next epilogue */
    if (g == 0 && tid == 0)
      st_shared_u32(pend_sa, ((uint32_t)owner << 24) |
                                 (uint32_t)((t.m_blk - owner * (eh->rows_per_owner / GEMM_BM)) * p->tiles_n + t.n_blk));
  } else if (copy_pend) { /* the copies' flags wait for the next epilogue, like a push's */
    if (g == 0 && tid == 0) st_shared_u32(pend_sa, (GEMM_PEND_COPY << 24) | (uint32_t)red_tile);
  } else if (((eh->signal && !red) || (red && eh->reduce.ncopies > 0)) &&
             t.m_blk < p->tiles_m) { /* (a cluster pad tile has no flag; a reduced tile's own flag is waited for by nobody) */
    if ((use_tma || (PRE >= 0 && red && eh->reduce.copy_tma)) && tid == 0) cp_async_bulk_wait_group0(); /* the TMA writes themselves are done */
    named_bar_sync(GEMM_BAR_CONSUMERS, 256);     /* every consumer thread's stores precede */
    if (g == 0 && tid == 0) {
      const int local_mb = eh->out ? t.m_blk - owner * (eh->rows_per_owner / GEMM_BM) : t.m_blk;
      const uint64_t value = gemm_epi_value(eh, RED ? sb + GEMM_EPOCH_OFF : 0);
      /* Cumulativity: the barrier ordered all threads' stores before this thread's fence.
       * Fence, then relaxed flags: a release pattern for each flag with one system-scope
       * barrier (fence + st.release paid two, ~0.6 us each: facts sheet 8g). */
      fence_acq_rel_sys();
      if (eh->signal && !red) st_relaxed_sys_u64(eh->signal[owner] + (int64_t)local_mb * p->tiles_n + t.n_blk, value);
      if (red)
        for (int cc = 0; cc < eh->reduce.ncopies; ++cc)
          st_relaxed_sys_u64(eh->reduce.copy_signal[cc] + red_tile, value);
    }
  }
  return copy_pend;
}

/* The deferred half 1 of the previous tile's epilogue (plain TMA-store path, DEFER): waits
 * until the staging is free again (half 0's TMA store has read it), writes the 32 packed
 * registers in the same swizzled layout as gemm_epilogue, and TMA-stores the 64 x 128 block
 * at (col c0, row). Called by all 128 threads of warpgroup g while the tensor cores run the
 * next tile's first k-block (or after the last tile). */
template <int NJ = 16> /* n8 groups deferred: 16 (a 128-column half) or 8 (the wide tile's third) */
__device__ __forceinline__ void gemm_epi_deferred(const gemm_params_t *p, const uint32_t *pk, int c0,
                                                  int row, uint32_t stg, int g, int tid) {
  const int w = tid >> 5, l = tid & 31;
  const int r0 = 16 * w + (l >> 2);
  const uint32_t bar = GEMM_BAR_WG0 + g;
  if (tid == 0) cp_async_bulk_wait_group_read0();
  named_bar_sync(bar, 128);
#pragma unroll
  for (int jj = 0; jj < NJ; ++jj) {
    const uint32_t a0 = gemm_stg_addr(stg, jj, r0, l);
    st_shared_u32(a0, pk[2 * jj]);
    st_shared_u32(a0 + 8 * 128, pk[2 * jj + 1]);
  }
  fence_proxy_async_smem_cta();
  named_bar_sync(bar, 128);
  if (tid == 0) {
#pragma unroll
    for (int b = 0; b < NJ / 8; ++b)
      if (c0 + 64 * b < p->n) {
        if (p->epi.reduce.on) tma_store_2d(&p->map_c, stg + 8192 * b, c0 + 64 * b, row); /* (a push) */
        else gemm_store_c(p, &p->map_c, stg + 8192 * b, c0 + 64 * b, row);
      }
    cp_async_bulk_commit_group();
  }
}

/* Vector fp32 reduction in L2 (sm_90: red.global.add.v4.f32), fire-and-forget. */
__device__ __forceinline__ void gemm_red_add_v4(float4 *addr, float4 v) {
  asm volatile("red.relaxed.gpu.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(addr), "f"(v.x), "f"(v.y),
               "f"(v.z), "f"(v.w)
               : "memory");
}

/* acc[4q..4q+3] += ws[q * 256] for q in [Q0, Q0 + G): G loads in flight, then the adds. */
template <int Q0, int G>
__device__ __forceinline__ void gemm_fixup_add_sum(float *acc, const float4 *ws) {
  float4 v[G];
#pragma unroll
  for (int q = 0; q < G; ++q) v[q] = __ldcg(ws + (Q0 + q) * 256);
#pragma unroll
  for (int q = 0; q < G; ++q) {
    acc[4 * (Q0 + q)] += v[q].x;
    acc[4 * (Q0 + q) + 1] += v[q].y;
    acc[4 * (Q0 + q) + 2] += v[q].z;
    acc[4 * (Q0 + q) + 3] += v[q].w;
  }
  asm volatile("" ::: "memory"); /* keep the next group's loads after these adds */
}

/* Split-K / stream-K fixup for consumer thread ctid (0..255) of a partial tile (contributor
 * `split` of `ncontrib`, workspace slot `slot` of `stride` partials): stores the partial,
 * counts arrivals; returns 0 if another contributor will finish the tile, else adds the
 * others' partials into acc and returns 1 (this CTA runs the epilogue). No CTA ever waits for
 * another. Threads whose rows are all past M (`live` 0) skip their loads and stores.
 * Three ways to combine (p->fixup_red):
 *   0: each contributor stores its partial to its own slice [slot][split]; the last reads the
 *      others', 16 float4 loads in flight per thread (64 registers next to the 128
 *      accumulators), one partial after the other: 2 L2 round trips per other partial
 *      (was 4 with 8 in flight).
 *   1: every contributor adds its partial into ONE zeroed fp32 tile [slot] with
 *      red.global.add.v4.f32 (no read-back, no wait); the last reads the sum (2 round trips
 *      whatever the split) and zeroes the tile again for the next launch. The workspace must
 *      be all zeros before the first launch (gemm_plan_for keeps a separate zeroed buffer).
 *   2: as 1, but each contributor takes its arrival ticket first (counters[slot]); the last
 *      adds nothing to L2: it waits until the others have counted their additions done
 *      (counters[slots + slot]; they are running, so the wait is finite) and adds their sum
 *      to its accumulators. Saves the last arriver's own reductions and fence. */
template <int NLD = 16, bool EARLY = true>
__device__ __forceinline__ int gemm_splitk_fixup(const gemm_params_t *p, float *acc, int slot,
                                                 int split, int ncontrib, int stride, int ctid,
                                                 uint32_t last_flag, int live) {
  const int red = p->fixup_red;
  /* [slot][split][q][ctid] float4s (red: [slot][q][ctid]): each warp access is 512
   * contiguous bytes. */
  float4 *ws = (float4 *)p->workspace + (size_t)slot * (red ? 1 : stride) * (32 * 256) + ctid;
  if (EARLY && red == 2) { /* early ticket: the arrival order is taken BEFORE adding the partial */
    if (ctid == 0) {
      const uint32_t ticket = atomicAdd(p->counters + slot, 1u);
      st_shared_u32(last_flag, (uint32_t)(ticket == (uint32_t)ncontrib - 1));
    }
    named_bar_sync(GEMM_BAR_CONSUMERS, 256);
    /* "done" counter of the slot: counters[slots + slot] (computed where used: registers) */
#define GEMM_FIXUP_DONE (p->counters + (p->sk_tiles > 0 ? p->sk_tiles : p->tiles_m * p->tiles_n - p->split_from) + slot)
    if (!ld_shared_u32(last_flag)) { /* add the partial in L2, then count it as done */
      if (live) {
#pragma unroll
        for (int q = 0; q < 32; ++q)
          gemm_red_add_v4(ws + q * 256, make_float4(acc[4 * q], acc[4 * q + 1], acc[4 * q + 2], acc[4 * q + 3]));
      }
      named_bar_sync(GEMM_BAR_CONSUMERS, 256);
      if (ctid == 0) {
        __threadfence(); /* cumulative: the 256 threads' reductions precede the count */
        atomicAdd(GEMM_FIXUP_DONE, 1u);
      }
      return 0;
    }
    if (ctid == 0) {
      uint32_t *done = GEMM_FIXUP_DONE;
      /* The last ticket waits only for contributors that already took theirs: they are
       * running and add, fence and count without waiting for anyone, so the wait is finite.
       * Deadline 10 s (a bug, or a preempted GPU): trap rather than hang. */
      const uint64_t t0 = globaltimer_ns();
      while (ld_acquire_sys_u32(done) != (uint32_t)ncontrib - 1) {
        if (globaltimer_ns() - t0 > 10000000000ull) __trap();
        __nanosleep(32);
      }
      atomicExch(p->counters + slot, 0u); /* every piece has counted: reset for next launch */
      atomicExch(done, 0u);
      __threadfence();
    }
#undef GEMM_FIXUP_DONE
    named_bar_sync(GEMM_BAR_CONSUMERS, 256);
    if (!live) return 1;
    gemm_fixup_add_sum<0, 16>(acc, ws); /* the others' sum, added to this one's partial */
    gemm_fixup_add_sum<16, 16>(acc, ws);
#pragma unroll
    for (int q = 0; q < 32; ++q) __stcg(ws + q * 256, make_float4(0.f, 0.f, 0.f, 0.f)); /* for the next launch */
    return 1;
  }
  if (live) {
    if (red) {
#pragma unroll
      for (int q = 0; q < 32; ++q)
        gemm_red_add_v4(ws + q * 256, make_float4(acc[4 * q], acc[4 * q + 1], acc[4 * q + 2], acc[4 * q + 3]));
    } else {
      float4 *mine = ws + (size_t)split * (32 * 256);
#pragma unroll
      for (int q = 0; q < 32; ++q)
        __stcg(mine + q * 256, make_float4(acc[4 * q], acc[4 * q + 1], acc[4 * q + 2], acc[4 * q + 3]));
    }
  }
  named_bar_sync(GEMM_BAR_CONSUMERS, 256); /* all partial stores precede the count */
  if (ctid == 0) {
    __threadfence(); /* cumulative: publishes the 256 threads' stores before the add */
    const uint32_t old = atomicAdd(p->counters + slot, 1u);
    const int last = old == (uint32_t)ncontrib - 1;
    if (last) {
      atomicExch(p->counters + slot, 0u); /* every piece has counted: reset for next launch */
      __threadfence();                    /* acquire side: the others' partials are visible */
    }
    st_shared_u32(last_flag, (uint32_t)last);
  }
  named_bar_sync(GEMM_BAR_CONSUMERS, 256);
  if (!ld_shared_u32(last_flag)) return 0;
  if (!live) return 1;
  if (red) { /* the sum of all contributors, this one's included: replaces acc */
#pragma unroll
    for (int q0 = 0; q0 < 32; q0 += NLD) {
      float4 v[NLD];
#pragma unroll
      for (int q = 0; q < NLD; ++q) v[q] = __ldcg(ws + (q0 + q) * 256);
#pragma unroll
      for (int q = 0; q < NLD; ++q) {
        acc[4 * (q0 + q)] = v[q].x;
        acc[4 * (q0 + q) + 1] = v[q].y;
        acc[4 * (q0 + q) + 2] = v[q].z;
        acc[4 * (q0 + q) + 3] = v[q].w;
        __stcg(ws + (q0 + q) * 256, make_float4(0.f, 0.f, 0.f, 0.f)); /* zero for the next launch */
      }
      asm volatile("" ::: "memory");
    }
    return 1;
  }
#pragma unroll
  for (int q0 = 0; q0 < 32; q0 += NLD) {
    for (int s2 = 0; s2 < ncontrib; ++s2) {
      if (s2 == split) continue;
      const float4 *o = ws + (size_t)s2 * (32 * 256);
      /* NLD (16) loads in flight: 128 accumulators + 64 staging registers fit in 232. */
      float4 v[NLD];
#pragma unroll
      for (int q = 0; q < NLD; ++q) v[q] = __ldcg(o + (q0 + q) * 256);
#pragma unroll
      for (int q = 0; q < NLD; ++q) {
        acc[4 * (q0 + q)] += v[q].x;
        acc[4 * (q0 + q) + 1] += v[q].y;
        acc[4 * (q0 + q) + 2] += v[q].z;
        acc[4 * (q0 + q) + 3] += v[q].w;
      }
      asm volatile("" ::: "memory"); /* keep the next group's loads after these adds */
    }
  }
  return 1;
}

/* Hook g, add mode (reduce.preload): own tile t's partials are added to warpgroup g's fp32
 * accumulators (rows row_base .. +64) in registers, so the epilogue stores the sums as staged
 * (no pass over the staging). Pieces:
 * - gemm_reduce_add_wait: thread 0 waits for the flags (gemm_reduce_wait); the warpgroup's
 *   barrier orders every thread's loads after its acquire (causality).
 * - gemm_reduce_load: pairs j0 .. j0+J-1 of source s into v[2J]. Fragment layout (wgmma
 *   m64n256 D): thread (warp w, lane l) holds rows 16 w + l / 4 (+8) and columns 8 j + 2 (l % 4)
 *   (+1), j = 0..31: one bf16 pair each, 64 4-byte loads per source. n % 8 == 0 (the mode needs
 *   reduce.tma): a pair is whole or past n.
 * - gemm_reduce_acc: v into the accumulators.
 * It all runs after wgmma_wait0, like the split-K fixup: accumulators written before the first
 * wgmma of the tile serialized every wgmma (ptxas C7515), and partial loads issued inside the
 * mainloop (their registers live across it) spilled in every hook g kernel. One H200, one
 * rank, a synthetic partial (bench_gemm_rs --diag): loads in rounds of 16 cost ~10 us per tile
 * with the tensor cores idle (loaded-system latency), no better than the pass. */
__device__ __forceinline__ void gemm_reduce_add_wait(const gemm_params_t *p, gemm_tile_t t, int g, int tid,
                                                     uint32_t sbase) {
  if (tid == 0 && t.m_blk * GEMM_BM + 64 * g < p->m) gemm_own_wait(p, t, sbase);
  named_bar_sync(GEMM_BAR_WG0 + g, 128);
}
template <int J>
__device__ __forceinline__ void gemm_reduce_load(const gemm_params_t *p, gemm_tile_t t, int g, int tid, int s, int j0,
                                                 uint32_t *v) {
  const gemm_epilogue_hook_t *eh = &p->epi;
  const int row_base = t.m_blk * GEMM_BM + 64 * g;
  const int l = tid & 31, r = 16 * (tid >> 5) + (l >> 2);
  const int col0 = t.n_blk * GEMM_BN + 2 * (l & 3);
  const int lim = p->n - col0;          /* pair j exists: 8 j < lim */
  const int rows = p->m - row_base - r; /* row r: 0 < rows; row r + 8: 8 < rows */
  const uint16_t *src = eh->reduce.src[s] + ((int64_t)gemm_own_mblk(p, t) * GEMM_BM + 64 * g + r) * eh->out_ld + col0;
  const int64_t ld8 = 8 * eh->out_ld;
#pragma unroll
  for (int j = 0; j < J; ++j) {
    const int in = 8 * (j0 + j) < lim;
    v[2 * j] = 0 < rows && in ? __ldcg((const unsigned int *)(src + 8 * (j0 + j))) : 0u;
    v[2 * j + 1] = 8 < rows && in ? __ldcg((const unsigned int *)(src + ld8 + 8 * (j0 + j))) : 0u;
  }
}
template <int J>
__device__ __forceinline__ void gemm_reduce_acc(float *acc, int j0, const uint32_t *v) {
#pragma unroll
  for (int j = 0; j < J; ++j) gemm_add_pairs(acc + 4 * (j0 + j), v[2 * j], v[2 * j + 1]);
}
/* After the mainloop (reduce.preload: 1 = all 64 loads of a source in flight at once, 2 = in
 * rounds of 16, 3 = rounds of 32: each round costs a loaded-system latency with the tensor
 * cores idle). */
template <int J>
__device__ __forceinline__ void gemm_reduce_add_src(const gemm_params_t *p, float *acc, gemm_tile_t t, int g, int tid,
                                                    int s) {
#pragma unroll
  for (int j0 = 0; j0 < 32; j0 += J) {
    uint32_t v[2 * J];
    gemm_reduce_load<J>(p, t, g, tid, s, j0, v);
    gemm_reduce_acc<J>(acc, j0, v);
    asm volatile("" ::: "memory"); /* the next round's loads after these adds */
  }
}
template <int PRE>
__device__ __forceinline__ void gemm_reduce_add(const gemm_params_t *p, float *acc, gemm_tile_t t, int g, int tid,
                                                uint32_t sbase) {
  const int nsrc = p->epi.reduce.diag & 4 ? 0 : p->epi.reduce.nsrc, mode = gemm_preload_of<PRE>(p);
  /* mode 4: src[0] comes through the staging (gemm_add_staged_half) and thread 0 acquired
   * every flag at the tile's start (gemm_partial_first; a split tile's last piece: after its
   * fixup, gemm_consumer): the barrier orders the others' loads */
  const int s0 = mode >= 4 ? 1 : 0; /* (mode 5: the producer acquired; the stages' barriers order) */
  if (s0 == 0) gemm_reduce_add_wait(p, t, g, tid, sbase);
  else if (nsrc > 1) named_bar_sync(GEMM_BAR_WG0 + g, 128);
#pragma unroll 1
  for (int s = s0; s < nsrc; ++s) {
    if (mode == 2) gemm_reduce_add_src<8>(p, acc, t, g, tid, s);
    else if (mode == 3) gemm_reduce_add_src<16>(p, acc, t, g, tid, s);
    else gemm_reduce_add_src<32>(p, acc, t, g, tid, s);
  }
}

/* A consumer warpgroup g (0/1): waits stages, issues wgmma, releases stages, epilogue. */
/* Hook g: L2 prefetch of the partials of own tile t, rows of warpgroup g, by lanes of one warp
 * (cp.async.bulk.prefetch.L2: 2 rows of up to 512 bytes per lane and source). */
__device__ __forceinline__ void gemm_reduce_prefetch(const gemm_params_t *p, gemm_tile_t t, int g, int lane) {
  const gemm_epilogue_hook_t *eh = &p->epi;
  const int col0 = t.n_blk * GEMM_BN;
  const int cols = p->n - col0 < GEMM_BN ? p->n - col0 : GEMM_BN;
  const uint32_t bytes = (uint32_t)((cols + 7) / 8) * 16u;
  const int64_t lrow0 = (int64_t)t.m_blk * GEMM_BM + 64 * g - (int64_t)eh->reduce.owner * eh->rows_per_owner;
  const int64_t grow0 = (int64_t)t.m_blk * GEMM_BM + 64 * g;
  for (int s = 0; s < eh->reduce.nsrc; ++s)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int r = lane + 32 * i;
      if (grow0 + r < p->m) {
        const uint16_t *src = eh->reduce.src[s] + (lrow0 + r) * eh->out_ld + col0;
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(src), "r"(bytes) : "memory");
      }
    }
}

/* FP8: a tile's (or piece's) fp32 accumulators times the scales (gemm_params_t.fp8_rows). The
 * m64nN fragment: thread tid of warpgroup g holds rows 64 g + 16 (tid / 32) + (tid % 32) / 4
 * (+ 8 for acc[4j + 2, 3]) and columns 8 j + 2 (tid % 4) (+ 1 for odd i) of the tile. Rows and
 * columns past C's edge get scale 0 (their accumulators are not stored).
 * In two steps: gemm_fp8_load fills a gemm_fp8_sc_t with the thread's scales (H row halves of
 * 64: 1, or 2 for the ping-pong tile's whole 128 rows), gemm_fp8_apply multiplies. The column
 * scales (per row of B) are spread over the warp: lane 4 i + q holds columns 8 (i + 8 k) + 2 q
 * and + 1 for k < BN / 64 (BN / 32 registers, loaded as pairs), and the lanes that need column
 * pair j (those with tid % 4 = q) read it from lane 4 (j % 8) + q by shuffle: the same register
 * of every source lane, as shfl wants. Session 41-42: the former 2 BN / 8 loads a thread after
 * the mainloop (L1 or L2 hits, with the tensor cores idle in the 128 x 256 epilogue) cost
 * +3.7-5.8% over per tensor. The loads are few enough to issue before the mainloop's last
 * wgmma.wait_group (gemm_fp8_early), where the last k-block's wgmmas hide their latency. */
template <int BN, int H>
struct gemm_fp8_sc_t {
  float r[2 * H];   /* rows' (times scale_b where it is one value)      */
  float c[BN / 32]; /* columns' pairs held for the warp (fp8_rows bit 1) */
};

/* The rows' part: r[2 h], r[2 h + 1] for rows r0 and r0 + 8 of 64-row half g + h (times scale_b
 * where it is one value; the per-tensor product where both are) */
template <int H>
__device__ __forceinline__ void gemm_fp8_rows(const gemm_params_t *p, const gemm_tile_t &t, int g, int tid,
                                              float *r) {
  const int rows = p->fp8_rows;
  if (rows & 1) {
    const auto row_scale = [&](int x) -> float {
      if (x >= p->m) return 0.f;
      if (rows & 4) { /* staged with the rows (own rows: the shard's, in place) */
        const int o = x - p->a2_row_begin;
        if (p->scale_a2 && o >= 0 && o < p->a2_rows)
          return o < (p->epi.rows_valid > 0 ? p->epi.rows_valid : p->a2_rows) ? __ldg(p->scale_a2 + o) : 0.f;
        float v; /* (coherent: written by peers during this kernel; ordered by the rows' wait, so
                    volatile with a memory clobber: it may not move above the full-barrier waits) */
        asm volatile("ld.relaxed.sys.global.f32 %0, [%1];" : "=f"(v) : "l"(p->scale_a + x) : "memory");
        return v;
      }
      const int d = gemm_compact_row(&p->epi, x); /* (compact rows: the dense row's; padding 0) */
      return d >= 0 ? __ldg(p->scale_a + d) : 0.f;
    };
#pragma unroll
    for (int h = 0; h < H; ++h) {
      const int r0 = t.m_blk * GEMM_BM + 64 * (g + h) + 16 * (tid >> 5) + ((tid & 31) >> 2);
      r[2 * h] = row_scale(r0);
      r[2 * h + 1] = row_scale(r0 + 8);
    }
  } else {
    const float sa = __ldg(p->scale_a);
#pragma unroll
    for (int h = 0; h < 2 * H; ++h) r[h] = sa;
  }
  if (!(rows & 2)) {
    const float sb = __ldg(p->scale_b);
#pragma unroll
    for (int h = 0; h < 2 * H; ++h) r[h] *= sb;
  }
}

/* Lane tid % 32's column pair k (see gemm_fp8_sc_t): columns 8 (lane / 4 + 8 k) + 2 (lane % 4)
 * and + 1 of the tile, 0 past C's edge; one 8-byte load where scale_b is 8-byte aligned. */
template <int BN>
__device__ __forceinline__ float2 gemm_fp8_col_pair(const gemm_params_t *p, const gemm_tile_t &t, int tid, int k) {
  static_assert(BN % 64 == 0, "column pairs spread over 8 lanes x BN / 64");
  const int c = t.n_blk * BN + gemm_fp8_col_held(tid & 31, k);
  if (((uintptr_t)p->scale_b & 7) == 0 && c + 1 < p->n) return __ldg((const float2 *)(p->scale_b + c));
  return make_float2(c < p->n ? __ldg(p->scale_b + c) : 0.f, c + 1 < p->n ? __ldg(p->scale_b + c + 1) : 0.f);
}

/* Column pair j of this thread's fragment from the lane that holds it (pair k = j / 8) */
__device__ __forceinline__ float2 gemm_fp8_col_shfl(float2 held, int tid, int j) {
  const int src = gemm_fp8_col_src(tid, j);
  return make_float2(__shfl_sync(0xffffffffu, held.x, src), __shfl_sync(0xffffffffu, held.y, src));
}

template <int BN, int H>
__device__ __forceinline__ void gemm_fp8_load(const gemm_params_t *p, const gemm_tile_t &t, int g, int tid,
                                              gemm_fp8_sc_t<BN, H> &s) {
  gemm_fp8_rows<H>(p, t, g, tid, s.r);
  if (!(p->fp8_rows & 2)) return;
#pragma unroll
  for (int k = 0; k < BN / 64; ++k) {
    const float2 v = gemm_fp8_col_pair<BN>(p, t, tid, k);
    s.c[2 * k] = v.x, s.c[2 * k + 1] = v.y;
  }
}

/* The rows' scales alone (scale_b one value: in r) */
template <int BN, int H>
__device__ __forceinline__ void gemm_fp8_apply_rows(const float *r, float *acc) {
#pragma unroll
  for (int h = 0; h < H; ++h) {
    float *a = acc + h * (BN / 2);
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      a[4 * j] *= r[2 * h], a[4 * j + 1] *= r[2 * h];
      a[4 * j + 2] *= r[2 * h + 1], a[4 * j + 3] *= r[2 * h + 1];
    }
  }
}

template <int BN, int H>
__device__ __forceinline__ void gemm_fp8_apply(const gemm_params_t *p, const gemm_fp8_sc_t<BN, H> &s, int tid,
                                               float *acc) {
  if (p->fp8_rows & 2) {
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      const float2 c = gemm_fp8_col_shfl(make_float2(s.c[2 * (j >> 3)], s.c[2 * (j >> 3) + 1]), tid, j);
#pragma unroll
      for (int h = 0; h < H; ++h) {
        float *a = acc + h * (BN / 2) + 4 * j;
        a[0] *= s.r[2 * h] * c.x, a[1] *= s.r[2 * h] * c.y;
        a[2] *= s.r[2 * h + 1] * c.x, a[3] *= s.r[2 * h + 1] * c.y;
      }
    }
    return;
  }
  gemm_fp8_apply_rows<BN, H>(s.r, acc);
}

/* Both steps at once, one column pair held at a time (the kernels that load after the
 * mainloop's last wait: holding BN / 32 there spilled in the wide tile's deferred kernel) */
template <int BN>
__device__ __forceinline__ void gemm_fp8_scale(const gemm_params_t *p, const gemm_tile_t &t, int g, int tid,
                                               float *acc) {
  float r[2];
  gemm_fp8_rows<1>(p, t, g, tid, r);
  if (!(p->fp8_rows & 2)) {
    gemm_fp8_apply_rows<BN, 1>(r, acc);
    return;
  }
#pragma unroll
  for (int k = 0; k < BN / 64; ++k) {
    const float2 held = gemm_fp8_col_pair<BN>(p, t, tid, k);
#pragma unroll
    for (int j = 8 * k; j < 8 * k + 8; ++j) {
      const float2 c = gemm_fp8_col_shfl(held, tid, j);
      acc[4 * j] *= r[0] * c.x, acc[4 * j + 1] *= r[0] * c.y;
      acc[4 * j + 2] *= r[1] * c.x, acc[4 * j + 3] *= r[1] * c.y;
    }
  }
}

/* Whether a consumer loads its fp8 scales before the mainloop's last wait: at compile time (no
 * p) the kernels with registers to spare for BN / 32 + 2 beside the accumulators (the 128 x 256
 * tile without hook g: the stand-alone kernels and the AllGather's; the ping-pong tile; the
 * wide tile's kernels and GEMM+RS's spilled), at run time unless fp8_rows bit 3 asks for the
 * late order. */
template <bool F8, int BN, bool RED>
__host__ __device__ constexpr bool gemm_fp8_early() {
  return F8 && (BN == GEMM_BN || BN == GEMM_BN_PP) && !RED;
}
template <bool F8, int BN, bool RED>
__device__ __forceinline__ bool gemm_fp8_early(const gemm_params_t *p) {
  return gemm_fp8_early<F8, BN, RED>() && !(p->fp8_rows & 8);
}

/* Rowwise fp8 scales: this tile's column (and row) scales into L1 at its start, so the
 * epilogue's loads hit L1 instead of waiting on L2 (session 41: rowwise cost +3.5-8.8% over per
 * tensor; the loads come after the mainloop, with the tensor cores idle). Warp 0 of warpgroup 0
 * asks for the columns' lines of 128 bytes, warp 1 for the rows' (not the staged or compact
 * rows: those are read otherwise); TMA fills shared memory, so nothing evicts them meanwhile. */
template <int BN>
__device__ __forceinline__ void gemm_fp8_prefetch(const gemm_params_t *p, const gemm_tile_t &t, int g, int tid) {
  const int rows = p->fp8_rows;
  if (g != 0 || !rows) return;
  if (tid < 32) {
    const int c = t.n_blk * BN + 32 * tid;
    if ((rows & 2) && tid < (BN + 31) / 32 && c < p->n)
      asm volatile("prefetch.global.L1 [%0];" ::"l"(p->scale_b + c));
  } else if (tid < 36) {
    const int r = t.m_blk * GEMM_BM + 32 * (tid - 32);
    if ((rows & 1) && !(rows & 4) && p->epi.rows_valid <= 0 && r < p->m)
      asm volatile("prefetch.global.L1 [%0];" ::"l"(p->scale_a + r));
  }
}

template <bool BKN, bool RED = false, int G2 = 0, int DEFER = 0, bool HELPER = false, int BN = GEMM_BN,
          int PRE = -1, bool GRP = false, bool F8 = false>
__device__ __forceinline__ void gemm_consumer(const gemm_params_t *p, uint8_t *smem,
                                              uint32_t sbase, int g, int tid) {
  static_assert(BN == GEMM_BN || (BN == GEMM_BN_WIDE && !BKN && !RED && !G2 && !HELPER),
                "the wide tile: B [N,K], plain epilogue");
  static_assert(!F8 || !BKN, "fp8: B [N,K] only (wgmma reads 8-bit operands K-major)");
  constexpr int PKJ = BN == GEMM_BN ? 16 : 8; /* n8 groups of the deferred last half */
  constexpr bool PAD_SKIP = GRP && !BKN && !RED && !G2 && BN == GEMM_BN; /* (hook f's GEMM_GRP_PAD1) */
  constexpr int NST = GEMM_STAGES_OF(BN);
  constexpr uint32_t SB = GEMM_STAGE_BYTES_OF(BN);
  float acc[BN / 2];
  uint32_t pk[DEFER ? 2 * PKJ : 1]; /* DEFER: the previous tile's last half, packed bf16x2 */
  int pk_on = 0, pk_col = 0, pk_row = 0;
  const int cl = p->cluster_mc ? 2 : 1; /* (stage releases: the peer's too only with multicast) */
  const int early_rel = p->early_release;
  const uint32_t peer = cl == 2 ? (cluster_ctarank() ^ 1) : 0;
  const uint32_t full0 = sbase + GEMM_BAR_OFF, empty0 = full0 + 8 * GEMM_RING_MAX;
  const uint32_t info0 = sbase + GEMM_INFO_OFF; /* 32-bit smem addresses: fewer registers */
  const uint32_t stg = sbase + GEMM_EPI_OFF + g * GEMM_EPI_BYTES;
  const int lane = tid & 31;
  if ((G2 || (RED && PRE >= 0)) && g == 0 && tid == 0)
    st_shared_u32(sbase + GEMM_PEND_OFF, 0xffffffffu); /* hook g2 (or deferred copy flags): none pending */
  if (RED && p->epi.epoch_src) { /* the call's epilogue value, once per CTA (gemm_epi_value) */
    if (g == 0 && tid == 0) st_shared_u64(sbase + GEMM_EPOCH_OFF, *(const volatile uint64_t *)p->epi.epoch_src);
    named_bar_sync(GEMM_BAR_CONSUMERS, 256);
  }
  uint32_t stage = 0, phase = 0;
  int cp_pend = 0; /* (reduce.copy_defer without hook g2: the pending word holds copy flags) */
  for (;;) {
    mbar_wait(full0 + 8 * stage, phase);
    const uint4 ti = ld_shared_v4(info0 + GEMM_INFO_BYTES * stage);
    gemm_tile_t t;
    t.m_blk = (int32_t)ti.x;
    if (t.m_blk < 0) break;
    t.n_blk = (int32_t)ti.y;
    /* hook g: this own tile's partials are (being) written into local memory by the peers:
     * warp 0 of each warpgroup asks L2 to fetch them while the mainloop runs, so that the
     * epilogue's loads hit L2 (a hint: later peer writes update L2, the acquire still orders). */
    /* (recomputed where needed: one more register live across the mainloop spilled) */
    auto own_tile = [&]() { return RED && gemm_own_tile(p, t); };
    /* (not in add mode 4, which asks for half 0 by TMA right below: one H200, one rank, a
     * synthetic partial at 8192 x 8192 x 4096: 0.849 ms without these prefetches, 0.928 with:
     * 64 small bulk operations per warpgroup and tile queue in the TMA unit ahead of the
     * producer's loads) */
    if (own_tile() && lane == tid && !(p->epi.reduce.diag & 64) && gemm_preload_of<PRE>(p) != 4)
      gemm_reduce_prefetch(p, t, g, lane);
    t.k_blk0 = (int32_t)ti.z;
    t.k_nblk = (int32_t)ti.w;
    if (F8) gemm_fp8_prefetch<BN>(p, t, g, tid);
    const int32_t piece = (int32_t)ld_shared_u32(info0 + GEMM_INFO_BYTES * stage + 16);
    const int32_t slot = (int32_t)ld_shared_u32(info0 + GEMM_INFO_BYTES * stage + 20);
    /* hook f: rows 64..127 of the block are padding: warpgroup 1 only passes the stages on */
    const bool pad_wg = PAD_SKIP && g == 1 && ld_shared_u32(info0 + GEMM_INFO_BYTES * stage + 24);
    if (g == 0 && tid == 0 && p->trace.events) /* per-tile timeline: mainloop start */
      st_shared_u64(sbase + GEMM_TRACE_T0_OFF, globaltimer_ns());
    /* Hook g, add modes 4 and 5, at an own tile's start (not inside the mainloop: there the
     * registers next to the accumulators spilled): wait for the partials' flags, and (4) ask
     * for the first half, which lands during the mainloop. Hook g2: a CTA whose previous tile was pushed holds that tile's flag until its next
     * epilogue. Waiting here for the peer's partial while holding it could deadlock at 2
     * ranks (with own tiles = CTAs, or one wave of pushes, the peer CTA holding the awaited
     * flag may wait, the same way, for ours) or chain the waits CTA after CTA: release it
     * first (all 256 consumer threads, only when one is pending: the word is written by
     * consumer thread 0 at the end of an epilogue, so the 256 threads meet first and then all
     * read the same value). The other add modes wait later (0: in the epilogue, before its
     * flush; 1-3: after the mainloop), the flag-helper kernels (mode 0) too, and a split tile's
     * last piece in its epilogue: the general kernel releases here for every own tile and
     * piece (session 14: with modes 0-3 or the helper, 132 own tiles on 132 CTAs waited for
     * their own pending flag; found by reading, not yet run). (PRE 4: whole tiles only.) */
    if (DEFER > 0 && RED && pk_on && own_tile()) { /* a pushed tile's deferred half before its flag and the partial */
      gemm_epi_deferred<PKJ>(p, pk, pk_col, pk_row, stg, g, tid);
      pk_on = 0;
    }
    if (PRE >= 0 ? RED && G2 && !HELPER && piece < 0 && gemm_preload_of<PRE>(p) >= 4 && p->epi.out_tma && own_tile()
                 : RED && G2 && p->epi.out_tma && own_tile()) {
      named_bar_sync(GEMM_BAR_CONSUMERS, 256);
      const uint32_t pend = ld_shared_u32(sbase + GEMM_PEND_OFF);
      /* (reduce.copy_hold, the lean kernels: a reduced tile's pending copy flag stays for the
       * next epilogue's start: only push flags can close a wait cycle here) */
      if (pend != 0xffffffffu && !(PRE >= 0 && p->epi.reduce.copy_hold && (pend >> 24) == GEMM_PEND_COPY))
        gemm_epi_flush<HELPER>(p, g, tid, sbase, 0, 0xffffffffu);
    }
    if (RED && !HELPER && tid == 0 && piece < 0 && gemm_preload_of<PRE>(p) >= 4 && own_tile()) {
      /* per-tile timeline (warpgroup 0): the start work as two events inside the mainloop's:
       * "wait" = the barrier and pending-flag release above, "other" = the partial's flag
       * acquire and half 0's request (session 16) */
      const uint64_t t1 = g == 0 ? meld_trace_now(&p->trace) : 0;
      if (t1) meld_trace_record(&p->trace, MELD_ROLE_WAIT, (uint32_t)(t.m_blk * p->tiles_n + t.n_blk), 0,
                                ld_shared_u64(sbase + GEMM_TRACE_T0_OFF));
      if (gemm_preload_of<PRE>(p) == 4) gemm_partial_first(p, t, g, stg, sbase); /* (a split tile: its last piece's epilogue asks) */
      else gemm_own_wait(p, t, sbase); /* mode 5: the acquire that orders the producer's partial stages */
      if (t1) meld_trace_record(&p->trace, MELD_ROLE_OTHER, (uint32_t)(t.m_blk * p->tiles_n + t.n_blk), 0, t1);
    }
    uint32_t prev = 0;
    if (PAD_SKIP && pad_wg) { /* (no wgmma: each stage released once it is full; the last below) */
      for (int kb = 0; kb < t.k_nblk; ++kb) {
        if (kb) {
          gemm_release(empty0 + 8 * prev, lane, cl, peer);
          mbar_wait(full0 + 8 * stage, phase);
        }
        if (DEFER > 0 && pk_on && (!RED || kb == p->epi.out_defer_kb)) {
          gemm_epi_deferred<PKJ>(p, pk, pk_col, pk_row, stg, g, tid);
          pk_on = 0;
        }
        prev = stage;
        if (++stage == NST) { stage = 0; phase ^= 1; }
      }
    }
    for (int kb = 0; kb < (PAD_SKIP && pad_wg ? 0 : t.k_nblk); ++kb) {
      bool released = false;
      if (kb) {
        /* Early release: drain this k-block's predecessor and free its stage before waiting
         * for this one, at every k-block, so all four warps of the warpgroup run the same
         * wgmma.wait_group (it is .aligned). Session 12 measured it against deciding by a probe
         * of the stage (per warp: faster than off but non-conforming; over the warpgroup with
         * bar.red.or / .and: conforming, slower): unconditional was the fastest of all four. */
        if (early_rel) {
          wgmma_wait0();
          gemm_release(empty0 + 8 * prev, lane, cl, peer);
          released = true;
        }
        mbar_wait(full0 + 8 * stage, phase);
      }
      const uint32_t a = sbase + stage * SB + g * 8192;
      const uint32_t b = sbase + stage * SB + GEMM_A_BYTES;
      wgmma_fence();
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint64_t da = wgmma_desc_sw128(a + 32 * j, 16, 1024);
        if (F8) { /* (32 bytes of K a step, as bf16's k16: the same descriptors) */
          wgmma_m64n256k32_e4m3_ss(acc, da, wgmma_desc_sw128(b + 32 * j, 16, 1024), kb | j);
          if (BN == GEMM_BN_WIDE)
            wgmma_m64n64k32_e4m3_ss(acc + 128, da, wgmma_desc_sw128(b + 256 * 128 + 32 * j, 16, 1024), kb | j);
        } else if (BN == GEMM_BN_WIDE) { /* columns 0..255, then 256..319 (B rows 128 B apart) */
          wgmma_m64n256k16_ss(acc, da, wgmma_desc_sw128(b + 32 * j, 16, 1024), kb | j);
          wgmma_m64nNk16_ss<64>(acc + 128, da, wgmma_desc_sw128(b + 256 * 128 + 32 * j, 16, 1024), kb | j);
        } else if (BKN) {
          /* N-major B: 64-wide N blocks 8 KB apart (LBO), 8 K-rows 1 KB apart (SBO). */
          wgmma_m64n256k16_ss_tb(acc, da, wgmma_desc_sw128(b + 2048 * j, 8192, 1024), kb | j);
        } else {
          wgmma_m64n256k16_ss(acc, da, wgmma_desc_sw128(b + 32 * j, 16, 1024), kb | j);
        }
      }
      wgmma_commit();
      if (DEFER > 0 && pk_on && (!RED || kb == p->epi.out_defer_kb)) { /* the previous tile's last store overlaps this k-block */
        gemm_epi_deferred<PKJ>(p, pk, pk_col, pk_row, stg, g, tid);
        pk_on = 0;
      }
      if (kb && !released) {
        wgmma_wait1(); /* the previous k-block's wgmmas are done reading their stage */
        gemm_release(empty0 + 8 * prev, lane, cl, peer);
      }
      prev = stage;
      if (++stage == NST) { stage = 0; phase ^= 1; }
    }
    if (DEFER > 0 && RED && pk_on) { /* (a mainloop of out_defer_kb k-blocks or fewer) */
      gemm_epi_deferred<PKJ>(p, pk, pk_col, pk_row, stg, g, tid);
      pk_on = 0;
    }
    /* FP8 scales: loaded while the last k-block's wgmmas run, in the kernels with registers to
     * spare for them (gemm_fp8_early); else after the wait */
    [[maybe_unused]] gemm_fp8_sc_t<BN, 1> f8s;
    const bool f8_early = gemm_fp8_early<F8, BN, RED>(p);
    if constexpr (gemm_fp8_early<F8, BN, RED>())
      if (f8_early) gemm_fp8_load<BN, 1>(p, t, g, tid, f8s);
    wgmma_wait0();
    wgmma_fence_acc128(acc);
    if (BN == GEMM_BN_WIDE) wgmma_fence_acc32(acc + 128);
    gemm_release(empty0 + 8 * prev, lane, cl, peer);
    if (F8) { /* before any epilogue path (a piece's partial too) */
      if constexpr (gemm_fp8_early<F8, BN, RED>())
        if (f8_early) gemm_fp8_apply<BN, 1>(p, f8s, tid, acc);
      if (!f8_early) gemm_fp8_scale<BN>(p, t, g, tid, acc);
    }
    if (PAD_SKIP && pad_wg) { /* (zeros as the padding rows; here, past the wgmma pipeline: set
                                 between its start and end, ptxas serializes every wgmma, C7515) */
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
    }
    if (g == 0 && tid == 0 && p->trace.events) { /* per-tile timeline: the mainloop, then the epilogue's start */
      meld_trace_record(&p->trace, MELD_ROLE_COMPUTE, (uint32_t)(t.m_blk * p->tiles_n + t.n_blk), 0,
                        ld_shared_u64(sbase + GEMM_TRACE_T0_OFF));
      st_shared_u64(sbase + GEMM_TRACE_T0_OFF, globaltimer_ns());
    }
    if (BN == GEMM_BN && PRE < 0 && piece >= 0) { /* (the wide tile and PRE 4 have no split-K / stream-K) */
      if (DEFER > 0) { /* pk was stored at kb 0 (pk_on is 0): free its registers for the fixup */
#pragma unroll
        for (int i = 0; i < 2 * PKJ; ++i) pk[i] = 0;
      }
      const int live = t.m_blk * GEMM_BM + 64 * g + 16 * (tid >> 5) + ((tid & 31) >> 2) < p->m;
      int split = piece, ncontrib = p->split_k, stride = p->split_k;
      if (p->sk_tiles > 0) {
        int c_lo = 0;
        ncontrib = gemm_sk_contrib(slot, p->sk_tiles, p->k_blocks, p->sk_workers, &c_lo);
        split = piece - c_lo;
        stride = p->sk_cmax;
      }
      /* (the early ticket is not compiled into DEFER kernels: 4 bytes spilled; the planner
       * never combines them, and mode 2 without its code runs as mode 1, which is correct) */
      if (!gemm_splitk_fixup<16, DEFER == 0>(p, acc, slot, split, ncontrib, stride, g * 128 + tid,
                             sbase + GEMM_FLAG_OFF, live))
        continue;
      /* hook g, add mode 4, more than 2 ranks: a split tile's last piece asks for src[0] only in
       * its epilogue, but gemm_reduce_add loads the further sources before that: their flags
       * first. (Session 18, 3 and 4 ranks sharing one GPU: without this wait they were read
       * before their flags and every split-K shape came out wrong; 2 ranks have no src[1].) */
      if (RED && gemm_preload_of<PRE>(p) == 4 && p->epi.reduce.nsrc > 1 && own_tile())
        gemm_reduce_add_wait(p, t, g, tid, sbase);
    }
    /* hook g, add mode 5: the producer's two partial stages (gemm_part_stages) join the
     * accumulators; each warp releases a stage once all its lanes have read their pairs */
    if (RED && !HELPER && piece < 0 && gemm_preload_of<PRE>(p) == 5 && own_tile()) {
      const int l = tid & 31, r0 = 16 * (tid >> 5) + (l >> 2);
#pragma unroll /* (h indexes the accumulators: rolled, they went to local memory) */
      for (int h = 0; h < 2; ++h) {
        mbar_wait(full0 + 8 * stage, phase);
        gemm_add_staged_half(acc, sbase + stage * SB + 16384u * g, h, r0, l);
        __syncwarp();
        gemm_release(empty0 + 8 * stage, lane, cl, peer);
        if (++stage == NST) { stage = 0; phase ^= 1; }
      }
    }
    /* hook g, add mode: the partials join the (whole: split pieces combined) accumulators */
    /* (PRE 4: only further sources, past src[0], load here: more than 2 ranks) */
    if (RED && gemm_preload_of<PRE>(p) && (PRE < 0 || p->epi.reduce.nsrc > 1) && own_tile())
      gemm_reduce_add<PRE>(p, acc, t, g, tid, sbase);
    if constexpr (DEFER == 2) { /* (diagnostic: see gemm_params_t.diag_delay_cycles) */
      if (tid == 0) {
        const long long until = clock64() + p->diag_delay_cycles;
        while (clock64() < until) {
        }
      }
      named_bar_sync(GEMM_BAR_WG0 + g, 128);
    }
    /* (the lean kernels without the TMA push, reduce.copy_defer at 3+ ranks, opt-in: the previous
     * reduced tile's deferred copy flags, whose TMA copies had this tile's mainloop; only after
     * a tile that left them, which both warpgroups know alike) */
    if (!G2 && RED && PRE >= 0 && cp_pend) {
      gemm_epi_flush<false>(p, g, tid, sbase, 0, 0xffffffffu);
      cp_pend = 0;
    }
    const int left = DEFER > 0 ? gemm_epilogue<RED, G2, DEFER, false, BN, PRE>(p, acc, t, stg, g, tid, pk, &pk_on, &pk_col, &pk_row)
                               : gemm_epilogue<RED, G2, 0, HELPER, BN, PRE>(p, acc, t, stg, g, tid);
    if (!G2 && RED && PRE >= 0) cp_pend = left;
    if (g == 0 && tid == 0 && p->trace.events) { /* per-tile timeline: the epilogue */
      meld_trace_record(&p->trace, own_tile() ? MELD_ROLE_REDUCE : p->epi.out ? MELD_ROLE_COMM : MELD_ROLE_OTHER,
                        (uint32_t)(t.m_blk * p->tiles_n + t.n_blk), 0, ld_shared_u64(sbase + GEMM_TRACE_T0_OFF));
    }
  }
  if (DEFER > 0 && pk_on) gemm_epi_deferred<PKJ>(p, pk, pk_col, pk_row, stg, g, tid);
  if (G2 && RED && p->epi.out_tma) gemm_epi_flush<HELPER>(p, g, tid, sbase, 0, 0xffffffffu); /* hook g2: last */
  if (!G2 && RED && PRE >= 0 && p->epi.reduce.copy_defer) /* (always, whatever cp_pend says: nothing is left held) */
    gemm_epi_flush<false>(p, g, tid, sbase, 0, 0xffffffffu);
  if (HELPER && g == 0 && tid == 0) gemm_helper_post(GEMM_HELPER_END); /* always: the helper ends */
  if ((p->epi_tma || (RED && (PRE >= 0 || p->epi.reduce.tma))) && tid == 0) cp_async_bulk_wait_group0(); /* before the CTA may exit */
}

/* The ping-pong consumer (gemm_params_t.bn GEMM_BN_PP, the stand-alone kernel): warpgroup g
 * takes this CTA's tiles g, g + 2, g + 4, ... of the static order (the producer's tickets
 * worker + i nworkers, whole tiles of k_blocks each, so tile i's first k-block sits at ring
 * position i k_blocks) and computes each whole 128 x 128 tile in two m64n128 accumulators (rows
 * 0..63 and 64..127), 128 registers. Turns: a warpgroup starts a mainloop only after the other
 * has waited for its previous tile's last stage (the turn mbarriers at GEMM_TURN_OFF, one
 * arrival by thread 0). Then the producer, which fills the ring in tile order, has filled all
 * of that tile's stages, so each stage this warpgroup waits for is at most one phase ahead of
 * its barrier (a parity wait two phases ahead would pass on the older phase: the other
 * warpgroup's data), and the two mainloops overlap only at the hand-over, while the epilogue
 * of one runs beside the mainloop of the other. */
template <bool F8>
__device__ __forceinline__ void gemm_consumer_pp(const gemm_params_t *p, uint32_t sbase, int g, int tid,
                                                 int worker, int nworkers) {
  constexpr int NST = GEMM_STAGES_OF(GEMM_BN_PP);
  constexpr uint32_t SB = GEMM_STAGE_BYTES_OF(GEMM_BN_PP);
  float acc[128];
  const uint32_t full0 = sbase + GEMM_BAR_OFF, empty0 = full0 + 8 * GEMM_RING_MAX;
  const uint32_t turn = sbase + GEMM_TURN_OFF;
  const uint32_t stg = sbase + GEMM_EPI_OFF + g * GEMM_EPI_BYTES;
  const int lane = tid & 31, r0 = 16 * (tid >> 5) + (lane >> 2);
  const uint32_t bar = GEMM_BAR_WG0 + g;
  const int kn = p->k_blocks;
  /* B-multicast pairs (cluster_m 2): the producer's tickets and m-block (gemm_producer); a stage
   * is released to both CTAs, whose producers each fill half of its B */
  const int pair = p->cluster_m == 2, mc = p->cluster_mc ? 2 : 1;
  const uint32_t rank = pair ? cluster_ctarank() : 0, peer = rank ^ 1;
  const int uw = pair ? worker / 2 : worker, unw = pair ? nworkers / 2 : nworkers;
  uint32_t turn_phase = 0;
  for (int i = g;; i += 2) {
    gemm_tile_t t;
    if (gemm_tile_of(p, uw + i * unw, (int)rank, &t) <= 0) break;
    const int64_t pos = (int64_t)i * kn;
    uint32_t stage = (uint32_t)(pos % NST), phase = (uint32_t)((pos / NST) & 1);
    if (F8) gemm_fp8_prefetch<GEMM_BN_PP>(p, t, 0, tid); /* (either warpgroup: its own tiles) */
    mbar_wait(turn + 8 * g, turn_phase);
    turn_phase ^= 1;
    uint32_t prev = 0;
    for (int kb = 0; kb < kn; ++kb) {
      mbar_wait(full0 + 8 * stage, phase);
      if (kb == kn - 1 && tid == 0) mbar_arrive(turn + 8 * (g ^ 1)); /* the other's turn */
      const uint32_t a = sbase + stage * SB, b = a + GEMM_A_BYTES;
      wgmma_fence();
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint64_t db = wgmma_desc_sw128_k(b + 32 * j);
        const uint64_t da0 = wgmma_desc_sw128_k(a + 32 * j);
        const uint64_t da1 = wgmma_desc_sw128_k(a + 8192 + 32 * j); /* rows 64..127 */
        if (F8) {
          wgmma_m64nNk32_e4m3_ss<GEMM_BN_PP>(acc, da0, db, kb | j);
          wgmma_m64nNk32_e4m3_ss<GEMM_BN_PP>(acc + 64, da1, db, kb | j);
        } else {
          wgmma_m64nNk16_ss<GEMM_BN_PP>(acc, da0, db, kb | j);
          wgmma_m64nNk16_ss<GEMM_BN_PP>(acc + 64, da1, db, kb | j);
        }
      }
      wgmma_commit();
      if (kb) {
        wgmma_wait1(); /* the previous k-block's wgmmas are done reading their stage */
        gemm_release(empty0 + 8 * prev, lane, mc, peer);
      }
      prev = stage;
      if (++stage == NST) { stage = 0; phase ^= 1; }
    }
    [[maybe_unused]] gemm_fp8_sc_t<GEMM_BN_PP, 2> f8s; /* (both 64-row halves; see gemm_consumer) */
    const bool f8_early = gemm_fp8_early<F8, GEMM_BN_PP, false>(p);
    if (f8_early) gemm_fp8_load<GEMM_BN_PP, 2>(p, t, 0, tid, f8s);
    wgmma_wait0();
    wgmma_fence_accN<GEMM_BN_PP>(acc);
    wgmma_fence_accN<GEMM_BN_PP>(acc + 64);
    gemm_release(empty0 + 8 * prev, lane, mc, peer);
    if (f8_early) gemm_fp8_apply<GEMM_BN_PP, 2>(p, f8s, tid, acc);
    if (F8 && !f8_early) { /* (rows 64 h .. +64 as the scale's "warpgroup" h) */
      gemm_fp8_scale<GEMM_BN_PP>(p, t, 0, tid, acc);
      gemm_fp8_scale<GEMM_BN_PP>(p, t, 1, tid, acc + 64);
    }
    const int row0 = t.m_blk * GEMM_BM, col0 = t.n_blk * GEMM_BN_PP;
#pragma unroll
    for (int h = 0; h < 2; ++h) { /* each 64-row half through this warpgroup's 64 x 128 staging */
      if (row0 + 64 * h >= p->m) continue;
      if (tid == 0) cp_async_bulk_wait_group_read0(); /* the staging's previous store read it */
      named_bar_sync(bar, 128);
      gemm_stage_half(acc + 64 * h, stg, 0, r0, lane);
      fence_proxy_async_smem_cta(); /* generic smem writes -> TMA reads */
      named_bar_sync(bar, 128);
      if (tid == 0) {
#pragma unroll
        for (int b = 0; b < 2; ++b)
          if (col0 + 64 * b < p->n) gemm_store_c(p, &p->map_c, stg + 8192 * b, col0 + 64 * b, row0 + 64 * h);
        cp_async_bulk_commit_group();
      }
    }
  }
  if (tid == 0) cp_async_bulk_wait_group0(); /* before the CTA may exit */
}

/* The engine entry for one CTA of 384 threads (all must call it; it starts with
 * __syncthreads). `worker` / `nworkers` replace blockIdx.x / gridDim.x so a fused kernel can
 * give other CTAs other roles (hook d); with cluster_m 2, worker % 2 must equal the CTA's
 * cluster rank and all engine CTAs' clusters must be whole. `smem_raw` is the dynamic shared
 * memory (>= GEMM_SMEM_BYTES). The kernel must be __launch_bounds__(384, 1) (setmaxnreg).
 * On return (cluster_m 1), warps 1..3 of warpgroup 0 return at once, with 40 registers:
 * a fused kernel may use them (comm warp, hook e) with named barriers other than 1..3.
 * `tail(g, tid)`, if given, runs in consumer warpgroup g's 128 threads after both consumer
 * warpgroups finished their tiles (the pipeline smem is then free; TMA-store epilogues may
 * still be reading their staging): work after the engine that needs more than 40 registers
 * must go there. */
/* PRE (hook g kernels): the add mode fixed at compile time (gemm_preload_of): -1 = any.
 * HELPER (hook g2 kernels only): warp 1 of the producer warpgroup runs gemm_flag_helper.
 * SKQ: the producer's queue + static stream-K pieces (gemm_producer). */
/* Side (optional): work for warps 2 and 3 of the producer warpgroup (idle in the engine), run
 * WHILE this CTA's consumers run their tiles, with the producer warpgroup's 40 registers and
 * no shared memory of the engine's: side(w, lane), w = 0 or 1; must not use CTA barriers. */
template <bool BKN, bool RED = false, int G2 = 0, int DEFER = 0, bool HELPER = false, bool SKQ = false,
          class Tail = gemm_no_tail, class Side = gemm_no_tail, int BN = GEMM_BN, int PRE = -1, bool GRP = false,
          bool F8 = false>
__device__ __forceinline__ void gemm_cta_run(const gemm_params_t *p, uint8_t *smem_raw,
                                             int worker, int nworkers, const Tail &tail = Tail(),
                                             const Side &side = Side()) {
  const uint32_t raw = smem_addr(smem_raw);
  uint8_t *smem = smem_raw + ((1024 - (raw & 1023)) & 1023);
  const uint32_t sbase = smem_addr(smem);
  const int cl = p->cluster_m;
  if (threadIdx.x == 0) {
    for (int s = 0; s < GEMM_STAGES_OF(BN); ++s) {
      mbarrier_init_cta(sbase + GEMM_BAR_OFF + 8 * s, 1);
      /* (a ping-pong stage is released by one warpgroup's 4 warps) */
      mbarrier_init_cta(sbase + GEMM_BAR_OFF + 8 * (GEMM_RING_MAX + s),
                        (BN == GEMM_BN_PP ? 4 : 8) * (p->cluster_mc ? 2 : 1));
    }
    if (BN == GEMM_BN_PP) { /* the turns: warpgroup 0's first is given */
      mbarrier_init_cta(sbase + GEMM_TURN_OFF, 1);
      mbarrier_init_cta(sbase + GEMM_TURN_OFF + 8, 1);
    }
    if (BN == GEMM_BN_PP) mbar_arrive(sbase + GEMM_TURN_OFF);
    fence_mbar_init();         /* peers may arrive / multicast on them */
    fence_proxy_async_smem_cta(); /* the TMA unit sees initialized barriers */
    prefetch_tensormap(&p->map_a);
    prefetch_tensormap(&p->map_b);
    if (p->epi_tma) prefetch_tensormap(&p->map_c);
    if (p->epi.reduce.tma) prefetch_tensormap(&p->map_c2);
    if (p->epi.reduce.copy_tma == 1) prefetch_tensormap(&p->map_cp);
    else if (p->epi.reduce.copy_tma)
      for (int cc = 0; cc < p->epi.reduce.ncopies; ++cc) prefetch_tensormap(gemm_copy_map(p, cc));
    if (p->epi.reduce.preload >= 4) { /* (mode 5 uses only the map) */
      prefetch_tensormap(&p->map_p);
      if (p->epi.reduce.pf) prefetch_tensormap(&p->map_pf);
      for (int g = 0; g < 2; ++g) {
        mbarrier_init_cta(sbase + GEMM_PBAR_OFF + 8 * g, 1);
        st_shared_u32(sbase + GEMM_PCNT_OFF + 4 * g, 0u);
        st_shared_u32(sbase + GEMM_PASK_OFF + 4 * g, 0u);
      }
      fence_mbar_init();
      fence_proxy_async_smem_cta(); /* the TMA unit sees initialized barriers */
    }
    if (p->a2_rows > 0) prefetch_tensormap(&p->map_a2);
    if (HELPER) {
      const uint32_t hb = gemm_helper_smem();
      for (int k = 0; k < 2 * GEMM_HELPER_SLOTS; ++k) mbarrier_init_cta(hb + 8 * k, 1);
      st_shared_u32(hb + 16 * GEMM_HELPER_SLOTS + 4 * GEMM_HELPER_SLOTS, 0u); /* post count */
      fence_mbar_init();
    }
  }
  if (cl == 2) cluster_sync();
  else __syncthreads();
  /* (the ping-pong kernel: through a shuffle from lane 0, so that the compiler knows it is
   * warp-uniform, and so are its stage and phase counters and the wgmma descriptors made from
   * them. Session 43, one H100, fp8 8192 x 28672 x 4096 and 8192^3 in separate processes: the
   * ping-pong pairs 2.3-2.7% faster with it and wgmma_desc_sw128_k; the 128 x 256 kernels
   * within -0.8..+2.4%, so they keep the measured code. In fused kernels with a tail or side
   * work and in MoE's grouped kernels it made ptxas spill.) */
  const int wg = BN == GEMM_BN_PP ? __shfl_sync(0xffffffffu, (int)(threadIdx.x / 128), 0) : (int)(threadIdx.x / 128);
  if (wg == 0) {
    setmaxnreg_dec_40();
    if (threadIdx.x == 0) gemm_producer<BKN, SKQ, RED && !HELPER && PRE < 0, BN, GRP>(p, smem, sbase, worker, nworkers);
    else if (HELPER && threadIdx.x == 32) gemm_flag_helper(p, sbase);
    else if (threadIdx.x >= 64) side((int)threadIdx.x / 32 - 2, (int)threadIdx.x & 31);
    __syncwarp();
  } else {
    setmaxnreg_inc_232();
    if constexpr (BN == GEMM_BN_PP) gemm_consumer_pp<F8>(p, sbase, wg - 1, threadIdx.x & 127, worker, nworkers);
    else gemm_consumer<BKN, RED, G2, DEFER, HELPER, BN, PRE, GRP, F8>(p, smem, sbase, wg - 1, threadIdx.x & 127);
    /* Work after this CTA's last tile that needs registers: code after the role join below is
     * reachable from the producer warpgroup (setmaxnreg 40), so ptxas fits it in 40 registers
     * and spills beyond that. The consumer warpgroups' barriers are theirs to name (not 1..3
     * while other consumers may still be in the engine: none are here). */
    if constexpr (!std::is_same<Tail, gemm_no_tail>::value) {
      named_bar_sync(GEMM_BAR_CONSUMERS, 256); /* both warpgroups are done with the smem ring */
      tail(wg - 1, threadIdx.x & 127);
    }
  }
  /* No CTA of a pair may exit while its peer can still multicast into it or arrive on it. */
  if (cl == 2) cluster_sync();
}

#endif /* __CUDACC__ */
#endif /* MELD_DEVICE_GEMM_CUH */
