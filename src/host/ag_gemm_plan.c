/* ag_gemm_plan.c — meld_ag_gemm: validation, plan heuristic, legality, chunk arithmetic. */
#include "ag_gemm_plan.h"

#include <stdlib.h>
#include <string.h>

#include "common/proto.h"
#include "config.h"
#include "error.h"
#include "gemm_plan.h"

#define FN "meld_ag_gemm"

/* Heuristic constants (docs/perf-notes.md "AG+GEMM"). */
#define PLAN_GEMM_FLOPS 650e12    /* what the engine sustains on big shapes (H200)          */
#define PLAN_CTA_COPY_BPS 30e9    /* bytes/s one comm CTA moves (384 threads, 16-byte stores) */
#define PLAN_COMM_SHARE 0.5       /* comm should finish within this share of the GEMM time   */
/* At least 8 whatever N: the peers' first m-blocks are needed after the own ones' first wave,
 * and 2-4 CTAs deliver them late (run 2: 8-9 best at both swept shapes, 2 -> 2.1x slower). */
#define PLAN_MIN_COMM_CTAS 8
#define PLAN_MAX_COMM_CTAS 16
#define AG_GEMM_SK_PIECES 4       /* stream-K pieces per tile, from the queue (session 7)    */
#define PLAN_GROUP_M 16

static int64_t round_up64(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

meld_result_t ag_gemm_validate(const meld_ag_gemm_args_t *a, int nranks) {
  if (!a) return meld_error(MELD_ERR_INVALID_ARG, FN ": args is NULL");
  if (nranks < 1 || nranks > AG_GEMM_MAX_RANKS)
    return meld_error(MELD_ERR_UNSUPPORTED, FN ": %d ranks; the op handles 1..%d ranks of one node", nranks,
                      AG_GEMM_MAX_RANKS);
  if (a->m_loc < 0 || a->n_loc < 0)
    return meld_error(MELD_ERR_INVALID_ARG, FN ": m_loc %lld and n_loc %lld must be >= 0", (long long)a->m_loc,
                      (long long)a->n_loc);
  if (a->k < 1)
    return meld_error(MELD_ERR_INVALID_ARG, FN ": k %lld < 1 (the inner dimension must be positive)",
                      (long long)a->k);
  if (a->k % 8)
    return meld_error(MELD_ERR_INVALID_ARG,
                      FN ": k %lld is not a multiple of 8 (gathered rows are read with TMA, whose row "
                      "pitch must be a multiple of 16 bytes)",
                      (long long)a->k);
  const int64_t m_pad = round_up64(a->m_loc, AG_GEMM_BM);
  if (a->k > INT32_MAX || a->n_loc > INT32_MAX || m_pad * nranks > INT32_MAX)
    return meld_error(MELD_ERR_INVALID_ARG,
                      FN ": m_loc %lld x %d ranks, n_loc %lld, k %lld: each must be < 2^31",
                      (long long)a->m_loc, nranks, (long long)a->n_loc, (long long)a->k);
  if (a->b_layout != MELD_B_NK && a->b_layout != MELD_B_KN)
    return meld_error(MELD_ERR_INVALID_ARG, FN ": b_layout %d is neither MELD_B_NK (0) nor MELD_B_KN (1)",
                      (int)a->b_layout);
  if (a->m_loc == 0) return MELD_OK; /* nothing anywhere: pointers unused */
  const int gemm = a->n_loc > 0;
  const struct {
    const char *name;
    const void *ptr;
    int needed;
    int64_t ld, row;
    const char *row_name;
  } t[4] = {{"a_shard", a->a_shard, 1, a->lda, a->k, "k"},
            {"b", a->b, gemm, a->ldb, a->b_layout == MELD_B_KN ? a->n_loc : a->k,
             a->b_layout == MELD_B_KN ? "n_loc (B is [K,N])" : "k (B is [N,K])"},
            {"c", a->c, gemm, a->ldc, a->n_loc, "n_loc"},
            {"a_gathered", a->a_gathered, a->a_gathered != NULL, a->ld_gathered, a->k, "k"}};
  static const char *const ld_names[4] = {"lda", "ldb", "ldc", "ld_gathered"};
  for (int i = 0; i < 4; i++) {
    if (!t[i].needed) continue;
    if (!t[i].ptr) return meld_error(MELD_ERR_INVALID_ARG, FN ": %s is NULL", t[i].name);
    if ((uintptr_t)t[i].ptr % 16)
      return meld_error(MELD_ERR_INVALID_ARG,
                        FN ": %s %p is not 16-byte aligned (TMA and 16-byte copies need aligned bases)",
                        t[i].name, t[i].ptr);
    if (t[i].ld < t[i].row)
      return meld_error(MELD_ERR_INVALID_ARG, FN ": %s %lld is smaller than %s %lld", ld_names[i],
                        (long long)t[i].ld, t[i].row_name, (long long)t[i].row);
    if (t[i].ld % 8)
      return meld_error(MELD_ERR_INVALID_ARG,
                        FN ": %s %lld is not a multiple of 8 (rows must start on 16-byte boundaries)",
                        ld_names[i], (long long)t[i].ld);
    if (t[i].ld >= (INT64_C(1) << 39))
      return meld_error(MELD_ERR_INVALID_ARG, FN ": %s %lld is too large (strides must be < 2^40 bytes)",
                        ld_names[i], (long long)t[i].ld);
  }
  return MELD_OK;
}

int ag_gemm_is_empty(const meld_ag_gemm_args_t *a) { return a->m_loc == 0; }

/* Largest multiple of 128 that is <= want and divides m_pad (128 always does). */
static int64_t fit_chunk_rows(int64_t want, int64_t m_pad) {
  int64_t blocks = m_pad / AG_GEMM_BM, w = want / AG_GEMM_BM;
  if (w < 1) w = 1;
  if (w > blocks) w = blocks;
  while (w > 1 && blocks % w) w--;
  return w * AG_GEMM_BM;
}

static void plan_derive(ag_gemm_plan_t *p) {
  p->chunks_per_rank = p->chunk_rows > 0 ? p->m_loc_pad / p->chunk_rows : 0;
  /* comm warps' pieces: whole rows up to AG_GEMM_SIDE_PIECE bytes, or a row in several pieces */
  const int64_t rb = p->k * 2;
  p->side_ppr = p->comm_warps ? (int)((rb + AG_GEMM_SIDE_PIECE - 1) / AG_GEMM_SIDE_PIECE) : 0;
  p->side_rows = p->comm_warps ? (p->side_ppr > 1 ? 1 : (int)(AG_GEMM_SIDE_PIECE / rb)) : 0;
  if (p->side_rows > p->chunk_rows) p->side_rows = (int)p->chunk_rows;
  p->side_pieces = p->comm_warps ? (p->chunk_rows + p->side_rows - 1) / p->side_rows * p->side_ppr : 0;
  p->ws_bytes = p->schedule == AG_GEMM_FUSED ? (size_t)p->nranks * (size_t)p->m_loc_pad * (size_t)p->k * 2u : 0;
  p->signal_slots = p->schedule == AG_GEMM_FUSED ? (size_t)p->nranks * (size_t)p->chunks_per_rank : 0;
}

meld_result_t ag_gemm_plan_make(const meld_ag_gemm_args_t *a, int nranks, int sm_count, size_t workspace_bytes,
                                const ag_gemm_hint_t *hint, ag_gemm_plan_t *p) {
  return ag_gemm_plan_make_nodes(a, nranks, 1, sm_count, workspace_bytes, hint, p);
}

meld_result_t ag_gemm_plan_make_nodes(const meld_ag_gemm_args_t *a, int nranks, int nnodes, int sm_count,
                                      size_t workspace_bytes, const ag_gemm_hint_t *hint, ag_gemm_plan_t *p) {
  MELD_CHECK(ag_gemm_validate(a, nranks));
  if (!p) return meld_error(MELD_ERR_INVALID_ARG, "ag_gemm_plan_make: plan is NULL");
  if (sm_count < 2 || sm_count > AG_GEMM_MAX_SMS)
    return meld_error(MELD_ERR_INVALID_ARG, "ag_gemm_plan_make: sm_count %d outside [2, %d]", sm_count,
                      AG_GEMM_MAX_SMS);
  memset(p, 0, sizeof *p);
  p->nranks = nranks;
  p->sm_count = sm_count;
  p->m_loc = a->m_loc;
  p->m_loc_pad = round_up64(a->m_loc, AG_GEMM_BM);
  p->m = a->m_loc * nranks;
  p->n_loc = a->n_loc;
  p->k = a->k;
  p->compact = a->m_loc % AG_GEMM_BM != 0;
  p->grid = sm_count;
  /* Raster group: the largest divisor of the shard's m-blocks <= 16 (if >= 8), so that the
   * first group holds own m-blocks only (read in place, no wait) instead of mixing in the
   * first peer's, which arrive later. */
  {
    const int64_t bpr = p->m_loc_pad / AG_GEMM_BM;
    int gm = PLAN_GROUP_M;
    if (bpr > 0 && bpr < PLAN_GROUP_M) gm = (int)bpr;
    else
      for (int g = PLAN_GROUP_M; g >= 8; g--)
        if (bpr % g == 0) {
          gm = g;
          break;
        }
    /* Tried and measured worse (s2 run 2, 2 x H200, same sweep, steady clocks): one group of
     * all m-blocks when B_local is large, to stream B once: 2048x28672x8192 group 16 1.534 ms
     * vs own-only group 8 1.467; 2048x14336x4096 0.409 vs 0.377. Own-only groups stay. */
    p->group_m = gm;
  }
  p->copy = AG_GEMM_COPY_VEC;
  p->inplace = 1;

  /* Schedule: one rank = a plain GEMM; shards that padding to 128 rows would inflate by more
   * than 25% (m_loc < 512 and badly aligned) take the unfused path on their contiguous A. */
  if (nranks == 1) p->schedule = AG_GEMM_DIRECT;
  else if (p->m_loc_pad * 4 > p->m_loc * 5) p->schedule = AG_GEMM_UNFUSED;
  else p->schedule = AG_GEMM_FUSED;

  /* Comm CTAs: enough that the pushes take at most PLAN_COMM_SHARE of the GEMM's time, and
   * at least PLAN_MIN_COMM_CTAS. */
  const double gemm_s = 2.0 * (double)p->m * (double)(p->n_loc > 0 ? p->n_loc : 1) * (double)p->k / PLAN_GEMM_FLOPS;
  const double bytes = (double)(nranks - 1) * (double)p->m_loc * (double)p->k * 2.0; /* pushes */
  double want = bytes / (PLAN_CTA_COPY_BPS * PLAN_COMM_SHARE * gemm_s);
  int cc = (int)(want + 0.999);
  if (cc < PLAN_MIN_COMM_CTAS) cc = PLAN_MIN_COMM_CTAS;
  if (cc > PLAN_MAX_COMM_CTAS) cc = PLAN_MAX_COMM_CTAS;
  if (cc > sm_count / 2) cc = sm_count / 2 > 0 ? sm_count / 2 : 1;
  p->comm_ctas = cc;
  int64_t chunk_rows = AG_GEMM_BM;

  /* Environment. */
  int64_t v = 0;
  MELD_CHECK(meld_env_int64("MELD_COMM_CTAS", 1, AG_GEMM_MAX_COMM_CTAS, &v));
  if (v) p->comm_ctas = (int)v;
  const char *s = getenv("MELD_CHUNK_BYTES");
  if (s && *s) {
    size_t c = 0;
    if (meld_parse_size(s, &c) != 0)
      return meld_error(MELD_ERR_INVALID_ARG, "MELD_CHUNK_BYTES=%s: not a size (e.g. 2M)", s);
    chunk_rows = (int64_t)(c / ((size_t)p->k * 2u));
  }
  int fused_asked = 0; /* by MELD_SCHEDULE or the hint */
  s = getenv("MELD_SCHEDULE");
  if (s && *s && nranks > 1) {
    if (!strcmp(s, "fused")) p->schedule = AG_GEMM_FUSED, fused_asked = 1;
    else if (!strcmp(s, "unfused")) p->schedule = AG_GEMM_UNFUSED;
    else return meld_error(MELD_ERR_INVALID_ARG, "MELD_SCHEDULE=%s: expected fused or unfused", s);
  }
  /* Hint. */
  if (hint) {
    if (hint->schedule >= 0) {
      /* DIRECT needs one rank; FUSED may run at one rank (nothing to gather: its GEMM and
       * epilogue tested and timed on one GPU); UNFUSED needs two or more */
      if (hint->schedule > AG_GEMM_DIRECT || (hint->schedule == AG_GEMM_DIRECT && nranks != 1) ||
          (hint->schedule == AG_GEMM_UNFUSED && nranks == 1))
        return meld_error(MELD_ERR_INVALID_ARG, "ag_gemm hint: schedule %d is not possible with %d ranks",
                          hint->schedule, nranks);
      p->schedule = (ag_gemm_schedule_t)hint->schedule;
      fused_asked = p->schedule == AG_GEMM_FUSED;
    }
    if (hint->copy >= 0) {
      if (hint->copy > AG_GEMM_COPY_BULK)
        return meld_error(MELD_ERR_INVALID_ARG, "ag_gemm hint: copy %d unknown", hint->copy);
      p->copy = (ag_gemm_copy_t)hint->copy;
    }
    if (hint->comm_ctas) p->comm_ctas = hint->comm_ctas;
    if (hint->chunk_rows) {
      if (hint->chunk_rows % AG_GEMM_BM)
        return meld_error(MELD_ERR_INVALID_ARG, "ag_gemm hint: chunk_rows %lld is not a multiple of %d",
                          (long long)hint->chunk_rows, AG_GEMM_BM);
      chunk_rows = hint->chunk_rows;
    }
    if (hint->group_m) p->group_m = hint->group_m;
    if (hint->inplace >= 0) p->inplace = hint->inplace != 0;
  }
  /* Ranks on several nodes (nnodes is global: every rank decides alike): the unfused schedule,
   * whose all-gather takes the collectives' inter-node path; the fused kernel pushes over
   * NVLink only, so asking for it is refused. */
  if (nnodes > 1 && nranks > 1) {
    if (fused_asked)
      return meld_error(MELD_ERR_UNSUPPORTED, "meld_ag_gemm: the fused schedule is intra-node; the ranks span %d nodes",
                        nnodes);
    p->schedule = AG_GEMM_UNFUSED;
  }
  /* Comm warps instead of comm CTAs (issue 6 asks for both): every CTA computes from the
   * start and the idle warps 2-3 of its producer warpgroup push the shard (ag_gemm.cu
   * ag_side_push). They write no a_gathered, so a call that asks for it keeps comm CTAs. */
  v = 0;
  MELD_CHECK(meld_env_int64("MELD_AG_GEMM_COMM_WARPS", 0, 1, &v));
  if (hint && hint->comm_warps >= 0) {
    if (hint->comm_warps > 1)
      return meld_error(MELD_ERR_INVALID_ARG, "ag_gemm hint: comm_warps %d is not -1, 0 or 1", hint->comm_warps);
    if (hint->comm_warps && a->a_gathered)
      return meld_error(MELD_ERR_INVALID_ARG,
                        "ag_gemm hint: comm_warps 1 with a_gathered: the comm warps do not write the gathered A "
                        "(leave comm_warps at -1 or 0)");
    v = hint->comm_warps;
  }
  /* (n_loc 0: no GEMM CTAs run, so no producer warps would push the shard) */
  p->comm_warps = v && p->schedule == AG_GEMM_FUSED && !a->a_gathered && a->n_loc > 0;
  if (p->comm_warps) p->comm_ctas = 0;
  /* Stream-K over the GEMM's last partial wave. Session 2 (2 x H200) measured it slower in the
   * fused kernel with one range per worker from the queue (2048x5120x8192 0.304 vs 0.279 ms,
   * 8192x14336x4096 1.533 vs 1.512); session 7 (one H200, the 2-rank kernel in loopback) found
   * why in the trace: the comm CTAs join the GEMM ~70 us late and ended a whole tile after the
   * others. With 4 pieces per stream-K tile from the queue and one whole tile per comm CTA
   * moved into the pieces, 2048 x 5120 x 8192 (320 tiles, 2.4 waves) ran 0.267-0.269 vs
   * 0.287-0.297 without; at 13.6 waves (2048 x 28672 x 8192) it was even (1.405 vs 1.401) and
   * at 0.7-0.8 of a last wave slower. So ON at P > 1 where meld_gemm's rule takes it (last
   * wave 10..62% full, >= 48 k-blocks) and the GEMM has < 4 waves; MELD_AG_GEMM_STREAM_K: 0 =
   * off, 1 = this rule, 2 = meld_gemm's rule alone; hint 0 / 1 / 2 (2: one full + the
   * partial wave). Not bitwise equal to the non-split GEMM (pieces of a tile are summed in
   * fp32 in arrival order). 2 GPUs: not measured yet. */
  if (p->schedule == AG_GEMM_FUSED && p->n_loc > 0) {
    const int64_t tiles = ((int64_t)nranks * p->m_loc_pad / AG_GEMM_BM) * ((p->n_loc + 255) / 256);
    const int kb = (int)((p->k + 63) / 64);
    const int rule = gemm_plan_default_sk(tiles, sm_count, kb) == 2;
    int64_t mode = 1;
    MELD_CHECK(meld_env_int64("MELD_AG_GEMM_STREAM_K", 0, 2, &mode)); /* (unset: stays 1) */
    int sk = mode == 2 ? rule : mode == 1 ? rule && nranks > 1 && tiles < 4LL * sm_count : 0;
    if (hint && hint->stream_k >= 0) {
      if (hint->stream_k > 2)
        return meld_error(MELD_ERR_INVALID_ARG, "ag_gemm hint: stream_k %d is not 0, 1 or 2", hint->stream_k);
      sk = tiles >= sm_count && tiles % sm_count != 0 ? hint->stream_k : 0;
    }
    p->stream_k = sk;
    /* Pieces per stream-K tile. The comm CTAs join the GEMM only after their pushes (~50-70 us
     * at 2048 x 5120 x 8192), so with one range per worker (sk_pieces 0) they finished a whole
     * tile late (one H200, loopback trace, session 7); pieces from the queue balance that. */
    int64_t v = AG_GEMM_SK_PIECES;
    MELD_CHECK(meld_env_int64("MELD_AG_GEMM_SK_PIECES", 0, 64, &v)); /* (unset: v stays) */
    p->sk_pieces = (int)v;
    if (hint && hint->sk_pieces >= 0) {
      if (hint->sk_pieces > 64)
        return meld_error(MELD_ERR_INVALID_ARG, "ag_gemm hint: sk_pieces %d is outside [0, 64]", hint->sk_pieces);
      p->sk_pieces = hint->sk_pieces;
    }
    /* With pieces from the queue, one whole tile per comm CTA moves into the stream-K region:
     * the comm CTAs join after their pushes, so the queue would hand each a second whole tile
     * that ends after the others have run out of pieces (loopback trace, session 7). */
    v = nranks > 1 && p->sk_pieces > 0 ? p->comm_ctas : 0;
    MELD_CHECK(meld_env_int64("MELD_AG_GEMM_SK_EXTRA", 0, 1 << 20, &v));
    p->sk_extra = (int)v;
    if (hint && hint->sk_extra >= 0) p->sk_extra = hint->sk_extra;
    if (p->sk_pieces == 0) p->sk_extra = 0; /* (only pieces from the queue take extra tiles) */
    /* The region must fit the engine's 32-bit partition arithmetic (gemm_plan_make would
     * refuse it): else off, or a clear error when the hint forced it. */
    int64_t skt = 0, ranges = 0;
    const int W = (int)((int64_t)p->grid < tiles * kb ? p->grid : tiles * kb);
    if (p->stream_k &&
        !gemm_plan_sk_region(tiles, W, kb, p->stream_k == 2, p->sk_pieces, p->sk_extra, &skt, &ranges)) {
      if (hint && hint->stream_k > 0)
        return meld_error(MELD_ERR_INVALID_ARG,
                          "ag_gemm hint: stream-K over %lld tiles of %d k-blocks in %lld ranges exceeds the engine's "
                          "32-bit partition arithmetic (fewer sk_pieces)",
                          (long long)skt, kb, (long long)ranges);
      p->stream_k = 0;
    }
  }
  /* The deferred epilogue (the engine's epi_defer: +1.6% mean on meld_gemm, s5-1): only where
   * the fused GEMM stores C by TMA (not compact). */
  p->epi_defer = p->schedule == AG_GEMM_FUSED && !p->compact;
  if (hint && hint->epi_defer >= 0) p->epi_defer = hint->epi_defer && !p->compact;
  /* The GEMM's tile width. The engine's 128 x 320 tile has no stream-K or deferred epilogue;
   * it is the default by meld_gemm's rule (its rounds cost <= 0.9 of the 256-wide ones: e.g.
   * 2048 x 5120 on 132 SMs, 1.94 vs 2.42 waves), measured on one H200 in loopback (session 12:
   * 2048 x 5120 x 8192, the 2-rank kernel 0.2873 -> 0.2697 ms sustained, 0.269 -> 0.251 burst,
   * vs 128 x 256 with stream-K); 2 GPUs: not measured yet. A stream-K request (hint, or
   * MELD_AG_GEMM_STREAM_K set) keeps 128 x 256 unless the width is asked too
   * (MELD_AG_GEMM_TILE_N=256|320, hint tile_n). */
  const char *sk_env = getenv("MELD_AG_GEMM_STREAM_K");
  const int sk_asked = (hint && hint->stream_k > 0) || (sk_env && *sk_env && strcmp(sk_env, "0"));
  v = !sk_asked && nranks > 1 &&
              gemm_plan_default_tile_n(p->m, p->n_loc, p->k, a->b_layout == MELD_B_KN, sm_count) == 320
          ? 320
          : 256;
  const char *tn_env = getenv("MELD_AG_GEMM_TILE_N");
  if (tn_env && *tn_env) {
    MELD_CHECK(meld_env_int64("MELD_AG_GEMM_TILE_N", 256, 320, &v));
    if (v != 256 && v != 320)
      return meld_error(MELD_ERR_INVALID_ARG, "MELD_AG_GEMM_TILE_N=%lld: give 256 or 320", (long long)v);
  }
  p->tile_n = (int)v;
  if (hint && hint->tile_n) {
    if (hint->tile_n != 256 && hint->tile_n != 320)
      return meld_error(MELD_ERR_INVALID_ARG, "ag_gemm hint: tile_n %d is not 0, 256 or 320", hint->tile_n);
    if (hint->tile_n == 320 && a->b_layout == MELD_B_KN)
      return meld_error(MELD_ERR_INVALID_ARG, "ag_gemm hint: tile_n 320 needs B [N,K] (b_layout MELD_B_NK)");
    if (hint->tile_n == 320 && hint->stream_k > 0)
      return meld_error(MELD_ERR_INVALID_ARG, "ag_gemm hint: tile_n 320 has no stream-K (stream_k %d)", hint->stream_k);
    p->tile_n = hint->tile_n;
  } else if (hint && hint->stream_k > 0) {
    p->tile_n = 256; /* (a stream-K hint outranks the env's tile width) */
  }
  /* (the env's or hint's 320 where it cannot be: B [K,N] (env), the compact epilogue) */
  if (p->schedule != AG_GEMM_FUSED || a->b_layout == MELD_B_KN || p->compact) p->tile_n = 256;
  if (p->tile_n == 320) p->stream_k = 0, p->sk_pieces = 0, p->sk_extra = 0, p->epi_defer = 0;
  p->chunk_rows = fit_chunk_rows(chunk_rows, p->m_loc_pad > 0 ? p->m_loc_pad : AG_GEMM_BM);
  plan_derive(p);
  return ag_gemm_plan_check(p, sm_count, workspace_bytes);
}

meld_result_t ag_gemm_plan_check(const ag_gemm_plan_t *p, int sm_count, size_t workspace_bytes) {
  if (!p) return meld_error(MELD_ERR_INVALID_ARG, "ag_gemm plan: NULL");
  if (p->schedule != AG_GEMM_FUSED) return MELD_OK;
  if (p->grid < 2 || p->grid > sm_count)
    return meld_error(MELD_ERR_INVALID_ARG, FN " plan: grid %d outside [2, %d SMs]", p->grid, sm_count);
  if (p->comm_warps) {
    if (p->comm_ctas != 0)
      return meld_error(MELD_ERR_INVALID_ARG, FN " plan: comm warps with %d comm CTAs (must be 0)", p->comm_ctas);
    /* (the device enumerates every piece of the call in 32 bits: ag_gemm.cu ag_side_push) */
    if (p->side_pieces < 1 || p->side_pieces >= MELD_STAMP_SEQ_MAX ||
        !meld_credit_layout_fits(p->nranks, 1, (uint32_t)p->chunks_per_rank) ||
        (int64_t)p->nranks * p->chunks_per_rank * p->side_pieces > INT32_MAX)
      return meld_error(MELD_ERR_INVALID_ARG,
                        FN " plan: comm warps: %lld pieces per chunk, %d ranks x %lld chunks: too many for the "
                        "pad's counters or a 32-bit piece index (comm CTAs: MELD_AG_GEMM_COMM_WARPS=0)",
                        (long long)p->side_pieces, p->nranks, (long long)p->chunks_per_rank);
  } else if (p->comm_ctas < 1 || p->comm_ctas >= p->grid || p->comm_ctas > AG_GEMM_MAX_COMM_CTAS)
    return meld_error(MELD_ERR_INVALID_ARG,
                      FN " plan: %d comm CTAs outside [1, %d] (grid %d; MELD_COMM_CTAS?): at least one CTA "
                      "must compute",
                      p->comm_ctas, p->grid - 1 < AG_GEMM_MAX_COMM_CTAS ? p->grid - 1 : AG_GEMM_MAX_COMM_CTAS,
                      p->grid);
  if (p->m_loc_pad % AG_GEMM_BM || p->m_loc_pad < p->m_loc || p->m_loc_pad - p->m_loc >= AG_GEMM_BM)
    return meld_error(MELD_ERR_INTERNAL, FN " plan: m_loc_pad %lld is not m_loc %lld rounded up to %d",
                      (long long)p->m_loc_pad, (long long)p->m_loc, AG_GEMM_BM);
  if (p->chunk_rows < AG_GEMM_BM || p->chunk_rows % AG_GEMM_BM || p->m_loc_pad % p->chunk_rows ||
      p->chunks_per_rank * p->chunk_rows != p->m_loc_pad)
    return meld_error(MELD_ERR_INVALID_ARG,
                      FN " plan: chunk_rows %lld must be a multiple of %d that divides the padded shard "
                      "(%lld rows)",
                      (long long)p->chunk_rows, AG_GEMM_BM, (long long)p->m_loc_pad);
  if (p->chunks_per_rank >= MELD_STAMP_SEQ_MAX || !meld_signal_layout_fits(p->nranks, 1, (uint32_t)p->chunks_per_rank))
    return meld_error(MELD_ERR_INVALID_ARG, FN " plan: %d ranks x %lld chunks exceed the pad's %u signal slots",
                      p->nranks, (long long)p->chunks_per_rank, (unsigned)MELD_PAD_SIGNAL_SLOTS);
  if (p->group_m < 1) return meld_error(MELD_ERR_INVALID_ARG, FN " plan: group_m %d < 1", p->group_m);
  if (p->ws_bytes > workspace_bytes)
    return meld_error(MELD_ERR_OUT_OF_MEMORY,
                      FN ": the fused schedule stages the gathered A (%d ranks x %lld rows x %lld x 2 bytes = "
                      "%zu bytes) in the workspace, which has %zu bytes: set workspace_bytes / "
                      "MELD_WORKSPACE_BYTES >= %zu (or MELD_SCHEDULE=unfused)",
                      p->nranks, (long long)p->m_loc_pad, (long long)p->k, p->ws_bytes, workspace_bytes,
                      p->ws_bytes);
  return MELD_OK;
}

void ag_gemm_chunk_rows(const ag_gemm_plan_t *p, int64_t j, int64_t *row0, int64_t *rows) {
  const int64_t r0 = j * p->chunk_rows;
  int64_t n = p->m_loc - r0;
  if (n > p->chunk_rows) n = p->chunk_rows;
  if (n < 0) n = 0;
  *row0 = r0;
  *rows = n;
}

int64_t ag_gemm_flag_of_mblock(const ag_gemm_plan_t *p, int64_t mb) { return mb * AG_GEMM_BM / p->chunk_rows; }

int64_t ag_gemm_flag_of_chunk(const ag_gemm_plan_t *p, int r, int64_t j) {
  return (int64_t)meld_signal_index(r, p->nranks, 0, (uint32_t)j, (uint32_t)p->chunks_per_rank);
}

uint32_t ag_gemm_arg_hash(const ag_gemm_plan_t *p) {
  uint64_t h = meld_hash_init();
  h = meld_hash_u64(h, MELD_OP_AG_GEMM);
  h = meld_hash_u64(h, (uint64_t)p->nranks);
  h = meld_hash_u64(h, (uint64_t)p->m_loc);
  h = meld_hash_u64(h, (uint64_t)p->k);
  h = meld_hash_u64(h, (uint64_t)p->schedule);
  h = meld_hash_u64(h, (uint64_t)p->chunk_rows);
  if (p->fp8) h = meld_hash_u64(h, 0xf8); /* (bf16 hashes as before) */
  return meld_hash_fold(h);
}

static const char *schedule_name(ag_gemm_schedule_t s) {
  return s == AG_GEMM_FUSED ? "fused" : s == AG_GEMM_UNFUSED ? "unfused" : "direct";
}

int ag_gemm_plan_format(const ag_gemm_plan_t *p, char *buf, size_t len) {
  return snprintf(buf, len,
                  "ag_gemm P=%d m_loc=%lld (pad %lld) n_loc=%lld k=%lld %s copy=%s grid=%d comm_ctas=%d "
                  "chunk_rows=%lld chunks/rank=%lld compact=%d group_m=%d inplace=%d stream_k=%d sk_pieces=%d sk_extra=%d defer=%d tile_n=%d comm_warps=%d ws=%zu signals=%zu",
                  p->nranks, (long long)p->m_loc, (long long)p->m_loc_pad, (long long)p->n_loc, (long long)p->k,
                  schedule_name(p->schedule), p->copy == AG_GEMM_COPY_BULK ? "bulk" : "vec", p->grid,
                  p->comm_ctas, (long long)p->chunk_rows, (long long)p->chunks_per_rank, p->compact, p->group_m,
                  p->inplace, p->stream_k, p->sk_pieces, p->sk_extra, p->epi_defer, p->tile_n, p->comm_warps, p->ws_bytes, p->signal_slots);
}
