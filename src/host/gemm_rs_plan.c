/* gemm_rs_plan.c — validation, row split, layout and algorithm choice of GEMM+RS / GEMM+AR. */
#include "gemm_rs_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/proto.h"
#include "error.h"
#include "gemm_plan.h"

void gemm_rs_rows(int64_t m, int nranks, int rank, int64_t *first, int64_t *count) {
  const int64_t R = nranks > 0 ? (m + nranks - 1) / nranks : 0;
  int64_t f = R * rank;
  if (f > m) f = m;
  int64_t e = f + R;
  if (e > m) e = m;
  *first = f;
  *count = e - f;
}

meld_result_t meld_gemm_rs_rows(int64_t m, int nranks, int rank, int64_t *first, int64_t *count) {
  if (!first || !count) return meld_error(MELD_ERR_INVALID_ARG, "meld_gemm_rs_rows: NULL output");
  if (m < 0 || nranks < 1 || rank < 0 || rank >= nranks)
    return meld_error(MELD_ERR_INVALID_ARG, "meld_gemm_rs_rows: m %lld, nranks %d, rank %d: need m >= 0 and 0 <= rank < nranks",
                      (long long)m, nranks, rank);
  gemm_rs_rows(m, nranks, rank, first, count);
  return MELD_OK;
}

meld_gemm_args_t gemm_rs_gemm_args(const meld_gemm_rs_args_t *a) {
  meld_gemm_args_t g;
  memset(&g, 0, sizeof g);
  g.a = a->a;
  g.lda = a->lda;
  g.b = a->b;
  g.ldb = a->ldb;
  g.b_layout = a->b_layout;
  g.m = a->m;
  g.n = a->n;
  g.k = a->k;
  return g;
}

meld_result_t gemm_rs_args_validate(const meld_gemm_rs_args_t *a, int is_ar, int nranks, int rank) {
  const char *name = is_ar ? "meld_gemm_ar" : "meld_gemm_rs";
  if (!a) return meld_error(MELD_ERR_INVALID_ARG, "%s: args is NULL", name);
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return meld_error(MELD_ERR_INVALID_ARG, "%s: rank %d of %d ranks", name, rank, nranks);
  if (a->algo != MELD_GEMM_RS_AUTO && a->algo != MELD_GEMM_RS_FUSED && a->algo != MELD_GEMM_RS_UNFUSED)
    return meld_error(MELD_ERR_INVALID_ARG, "%s: algo %d is not AUTO (0), FUSED (1) or UNFUSED (2)", name,
                      (int)a->algo);
  if (a->m < 1 || a->n < 1 || a->k < 1)
    return meld_error(MELD_ERR_INVALID_ARG, "%s: m %lld, n %lld, k %lld: each must be >= 1", name,
                      (long long)a->m, (long long)a->n, (long long)a->k);
  if (a->m > INT32_MAX || a->n > INT32_MAX || a->k > INT32_MAX)
    return meld_error(MELD_ERR_INVALID_ARG, "%s: m %lld, n %lld, k %lld: each must be < 2^31", name,
                      (long long)a->m, (long long)a->n, (long long)a->k);
  int64_t first = 0, rows = a->m;
  if (!is_ar) gemm_rs_rows(a->m, nranks, rank, &first, &rows);
  /* A and B as meld_gemm checks them (its sentences name meld_gemm's fields). */
  meld_gemm_args_t g = gemm_rs_gemm_args(a);
  g.c = a->c ? a->c : (void *)(uintptr_t)a->a; /* C is checked below (it may be empty on a rank of meld_gemm_rs) */
  g.ldc = a->ldc >= a->n ? a->ldc : ((a->n + 7) / 8) * 8;
  meld_result_t r = gemm_args_validate(&g);
  if (r != MELD_OK) return meld_error(r, "%s: %s", name, meld_last_error());
  if (rows > 0) {
    if (!a->c) return meld_error(MELD_ERR_INVALID_ARG, "%s: c is NULL (this rank receives %lld rows)", name, (long long)rows);
    if ((uintptr_t)a->c % 16)
      return meld_error(MELD_ERR_INVALID_ARG, "%s: c %p is not 16-byte aligned", name, a->c);
    if (a->ldc < a->n || a->ldc % 8)
      return meld_error(MELD_ERR_INVALID_ARG, "%s: ldc %lld must be >= n %lld and a multiple of 8", name,
                        (long long)a->ldc, (long long)a->n);
  }
  return MELD_OK;
}

/* Largest power of two <= 16 dividing x (x = 0: 16). */
static int pow2_divisor16(int64_t x) {
  int g = 16;
  while (g > 1 && x % g) g /= 2;
  return g;
}

meld_result_t gemm_rs_plan_make(const meld_gemm_rs_args_t *a, int is_ar, int nranks, int rank,
                                int nnodes, size_t workspace_bytes, gemm_rs_plan_t *pl) {
  return gemm_rs_plan_make_sm(a, is_ar, nranks, rank, nnodes, workspace_bytes, 0, pl);
}

meld_result_t gemm_rs_plan_make_sm(const meld_gemm_rs_args_t *a, int is_ar, int nranks, int rank, int nnodes,
                                   size_t workspace_bytes, int sm_count, gemm_rs_plan_t *pl) {
  const char *name = is_ar ? "meld_gemm_ar" : "meld_gemm_rs";
  if (!pl) return meld_error(MELD_ERR_INVALID_ARG, "%s: plan is NULL", name);
  MELD_CHECK(gemm_rs_args_validate(a, is_ar, nranks, rank));
  memset(pl, 0, sizeof *pl);
  const int P = nranks;
  pl->is_ar = is_ar;
  pl->nranks = P;
  pl->rank = rank;
  pl->m = a->m;
  pl->n = a->n;
  pl->k = a->k;
  pl->split_rows = (a->m + P - 1) / P;
  if (is_ar) {
    pl->rows_first = 0;
    pl->rows_count = a->m;
  } else {
    gemm_rs_rows(a->m, P, rank, &pl->rows_first, &pl->rows_count);
  }
  pl->ldn = ((a->n + 7) / 8) * 8;
  pl->tiles_m = (int)((a->m + 127) / 128);
  pl->tiles_n = (int)((a->n + 255) / 256);
  /* Symmetric AR: one owner block of every row (rank 0's, on every rank: all tiles reduce). */
  const char *sym_env = getenv("MELD_GEMM_AR_SYM"); /* "0": owner mode (must match on every rank) */
  pl->sym = is_ar && P == 2 && (int64_t)pl->tiles_m * pl->tiles_n <= GEMM_RS_SYM_MAX_TILES &&
            !(sym_env && !strcmp(sym_env, "0"));
  pl->rpo = pl->sym ? (int64_t)pl->tiles_m * 128 : ((pl->split_rows + 127) / 128) * 128;
  pl->tiles_own = (int)(pl->rpo / 128) * pl->tiles_n;
  pl->slot_bytes = (((size_t)pl->rpo * (size_t)pl->ldn * 2) + 255) / 256 * 256;
  pl->ws_needed = GEMM_RS_HDR_BYTES + (size_t)(is_ar && !pl->sym ? 2 : 1) * (size_t)(P - 1) * pl->slot_bytes;
  pl->scratch_bytes = is_ar ? 0 : (size_t)(P + 1) * (size_t)pl->split_rows * (size_t)pl->ldn * 2;
  /* Tile order: logical m-block i runs as (i + m_rotate) % tiles_m. The next ranks' rows
   * first, own rows last (so that the epilogue's waits only ever depend on tiles that peers
   * compute before any of their own waits: no cycle). When every later owner is empty
   * (small M), no rotation: the own rows are then the last existing ones. */
  const int64_t B = pl->rpo / 128, T = pl->tiles_m;
  if (pl->sym) {
    pl->m_rotate = 0;
    pl->own_first = 0;
  } else if ((int64_t)(rank + 1) * B < T) {
    pl->m_rotate = (int)((rank + 1) * B);
    pl->own_first = (int)(T - B);
  } else {
    pl->m_rotate = 0;
    pl->own_first = (int)((int64_t)rank * B < T ? (int64_t)rank * B : T);
  }
  pl->group_m = pow2_divisor16(pl->own_first);
  /* The interleaved owner order (at 2 ranks opt-in, MELD_GEMM_RS_ORDER=ileave; at more the
   * default, below; "rotate": the order above everywhere). Session 13 read session 9's 2-GPU
   * trace: with own tiles last, every CTA pushes its partials in the same first half of the
   * call, often at the same moment, and the pushes' epilogues took 7.6 us median (p99 18.5)
   * against 2.4 for a plain one. Interleaved, own and
   * peer tiles share the raster groups after the first, and own block j always runs a group
   * after the peer's block j (gemm.cuh gemm_ileave_mblk: no wait cycle). RS at 2 ranks with
   * whole owner blocks only (tiles_m = 2 x blocks per owner); elsewhere the rotation stays. */
  const char *order = getenv("MELD_GEMM_RS_ORDER");
  pl->ileave = 0;
  if (order && *order && strcmp(order, "rotate") && strcmp(order, "ileave"))
    return meld_error(MELD_ERR_INVALID_ARG, "MELD_GEMM_RS_ORDER=%s: expected rotate or ileave", order);
  if (order && !strcmp(order, "ileave") && !is_ar && P == 2 && !pl->sym && B >= 2 && T == 2 * B) {
    int G = B < 16 ? (int)B : 16;
    G -= G % 2;
    while (G > 2 && B % (G / 2)) G -= 2;
    /* An own tile asks for its partial at its start; the peer computed it at least one raster
     * group (G x tiles_n tickets) earlier, and its flag appears one epilogue after the push.
     * With fewer than two waves of tickets per group (sm_count known) the own tiles of group 1
     * would wait for pushes of the same wave: keep the rotation there. */
    if (sm_count <= 0 || (int64_t)G * pl->tiles_n >= 2 * (int64_t)sm_count) {
      pl->ileave = 1;
      pl->m_rotate = 0;
      pl->own_first = (int)(rank * B);
      pl->group_m = G;
    }
  }
  /* More than 2 ranks (session 27; RS and AR in owner mode, whole owner blocks): rounds of P
   * raster groups of G m-blocks, own group last in each round (gemm.cuh gemm_ileave_mblk), G
   * the largest divisor of the blocks per owner up to 16 that leaves >= 2 rounds. Own tiles
   * then come every P groups instead of all in the last 1 / P of the call (the session 27
   * trace at 4 ranks: own tiles' epilogues and the AR's copies all at the end). A wave rule as
   * above, of one wave: the closest peer computed an own tile's partial in the group before
   * (8192 x 8192 at 4 ranks: 8 x 32 = 256 tickets a group, 1.9 waves of 132 CTAs).
   * The default since session 28 (MELD_GEMM_RS_ORDER=rotate: the rotation). Ranks as threads
   * on one H200, sustained, both orders in the same passes (bench_inproc --ab), fused GEMM+RS /
   * GEMM+AR (result slots) / GEMM+AR (zero copy) at 8192 x 8192 x K: 3 ranks (M 8064, K 8256 /
   * 1032) -9.4 / -6.4 / -7.6% and -5.9 / -7.4 / -6.8%; 4 ranks -2.6 / -1.0 / -1.6% and
   * -2.6 / -3.6 / -1.0%; 8 ranks +1.1 / -3.3 / +0.4% and -0.1 / -1.6 / +0.2%. */
  const int ileave_p = !order || !*order || !strcmp(order, "ileave");
  /* MELD_GEMM_RS_ILEAVE_G (tuning): G itself, any divisor of the blocks per owner that leaves
   * >= 2 rounds (no wave rule: waits may then stall, but every own tile's partials still have
   * smaller tickets on every peer, so none cycles); elsewhere an error. */
  const char *g_env = getenv("MELD_GEMM_RS_ILEAVE_G");
  if (ileave_p && P >= 3 && !pl->sym && B >= 2 && T == (int64_t)P * B) {
    int G = (int)(B / 2 < 16 ? B / 2 : 16);
    while (G > 1 && B % G) G--;
    int forced = 0;
    if (g_env && *g_env) {
      char *end = NULL;
      const long g = strtol(g_env, &end, 10);
      if (*end || g < 1 || B % g || B / g < 2)
        return meld_error(MELD_ERR_INVALID_ARG,
                          "MELD_GEMM_RS_ILEAVE_G=%s: expected a divisor of the %lld blocks of 128 rows per owner "
                          "that leaves at least 2 rounds (at most %lld)",
                          g_env, (long long)B, (long long)(B / 2));
      G = (int)g;
      forced = 1;
    }
    if (forced || sm_count <= 0 || (int64_t)G * pl->tiles_n >= (int64_t)sm_count) {
      pl->ileave = 1;
      pl->m_rotate = 0;
      pl->own_first = (int)(rank * B);
      pl->group_m = G;
    }
  }
  /* The argument hash: every shape the ranks must agree on (pointers and leading dimensions
   * are per rank). The algorithm is part of it, so ranks that planned differently fail
   * together instead of waiting for each other. */
  pl->algo = MELD_GEMM_RS_FUSED;
  const char *why_not = NULL;
  int ws_short = 0;
  /* One rank: AUTO is a plain GEMM (meld_gemm); a forced FUSED runs the fused kernel with every
   * tile its own and nothing exchanged (its GEMM and epilogue can be tested and timed on one GPU). */
  if (P == 1 && a->algo != MELD_GEMM_RS_FUSED) why_not = "one rank: a plain GEMM";
  else if (nnodes > 1) why_not = "ranks on several nodes (the fused kernel is intra-node)";
  else if (P > GEMM_RS_MAX_RANKS) why_not = "more than 16 ranks";
  else if (!is_ar && pl->split_rows % 128) why_not = "rows per rank ceil(M/P) are not a multiple of 128";
  else if (!meld_signal_layout_fits(P, 2, (uint32_t)pl->tiles_own) || pl->tiles_own > (int)MELD_PAD_SIGNAL_SLOTS)
    why_not = "too many tiles per rank for the signal pad";
  else if (workspace_bytes < pl->ws_needed) {
    why_not = "the workspace cannot hold the partial staging";
    ws_short = 1;
  }
  if (a->algo == MELD_GEMM_RS_FUSED && why_not) {
    if (ws_short)
      return meld_error(MELD_ERR_OUT_OF_MEMORY,
                        "%s: the fused path needs %zu bytes of workspace (M %lld, N %lld, %d ranks), the comm has "
                        "%zu: set MELD_WORKSPACE_BYTES (or config.workspace_bytes) to at least %zu",
                        name, pl->ws_needed, (long long)a->m, (long long)a->n, P, workspace_bytes, pl->ws_needed);
    return meld_error(MELD_ERR_UNSUPPORTED, "%s: the fused path cannot run: %s", name, why_not);
  }
  /* Decode-size AR (run 2, docs/perf-notes.md): with at most half as many 128 x 256 tiles as
   * SMs, the fused kernel's chain (partial push, owner's reduce, result push, copy: two
   * system-scope fences and NVLink trips after the GEMM, plus the entry handshake) cost
   * 24-60 us over its split-K GEMM, while meld_gemm + the LL all-reduce cost ~14-27 us over it:
   * unfused was 0.054 vs 0.075 .. 0.105 vs 0.138 ms at M 16..512; at 128 tiles (M 512, N
   * 8192) fused still won 0.096 vs 0.101. Session 3 (meld_gemm's small-M kernel): unfused wins
   * every M <= 128 shape by 20-50%, eager and in graphs. Session 4 (the zero-copy all-reduce
   * from the workspace): unfused also wins at 128 tiles, M 512 with N 8192: 0.091 / 0.085 ms
   * (eager / graph) vs fused 0.097 / 0.094 at K 4096, 0.211 / 0.214 vs 0.215 / 0.219 at K 14336;
   * so the rule is now one wave (tiles <= SMs). gemm_rs.cu passes sm_count 0 (rule off) when
   * MELD_GEMM_AR_DECODE_UNFUSED=0. sm_count is the node's smallest (same on every rank). */
  if (!why_not && is_ar && a->algo == MELD_GEMM_RS_AUTO && sm_count > 0 &&
      (int64_t)pl->tiles_m * pl->tiles_n <= (int64_t)sm_count)
    why_not = "decode-size all-reduce: at most one wave of tiles (meld_gemm + zero-copy / LL all-reduce is faster)";
  if (why_not || a->algo == MELD_GEMM_RS_UNFUSED) {
    pl->algo = MELD_GEMM_RS_UNFUSED;
    pl->why_unfused = why_not ? why_not : "forced";
  }
  uint64_t h = meld_hash_init();
  h = meld_hash_u64(h, is_ar ? MELD_OP_GEMM_AR : MELD_OP_GEMM_RS);
  h = meld_hash_u64(h, (uint64_t)a->m);
  h = meld_hash_u64(h, (uint64_t)a->n);
  h = meld_hash_u64(h, (uint64_t)a->k);
  h = meld_hash_u64(h, (uint64_t)pl->algo);
  h = meld_hash_u64(h, (uint64_t)P);
  h = meld_hash_u64(h, (uint64_t)pl->sym);
  h = meld_hash_u64(h, (uint64_t)pl->ileave); /* (an order set on one rank only fails on both) */
  if (pl->ileave) h = meld_hash_u64(h, (uint64_t)pl->group_m); /* (so does another group size) */
  pl->arg_hash = meld_hash_fold(h);
  return MELD_OK;
}


int gemm_rs_plan_check(const gemm_rs_plan_t *pl, size_t workspace_bytes, char *why, size_t len) {
  if (!pl) MELD_WHY("gemm_rs: plan is NULL");
  if (pl->nranks < 1 || pl->rank < 0 || pl->rank >= pl->nranks) MELD_WHY("gemm_rs: rank %d of %d", pl->rank, pl->nranks);
  if (pl->algo != MELD_GEMM_RS_FUSED && pl->algo != MELD_GEMM_RS_UNFUSED) MELD_WHY("gemm_rs: algo %d", (int)pl->algo);
  if (pl->rows_first < 0 || pl->rows_count < 0 || pl->rows_first + pl->rows_count > pl->m)
    MELD_WHY("gemm_rs: rows [%lld, +%lld) outside M %lld", (long long)pl->rows_first, (long long)pl->rows_count,
        (long long)pl->m);
  if (pl->algo == MELD_GEMM_RS_UNFUSED) return 0;
  if (pl->nranks < 1 || pl->nranks > GEMM_RS_MAX_RANKS) MELD_WHY("gemm_rs: fused needs 1..%d ranks, not %d", GEMM_RS_MAX_RANKS, pl->nranks);
  if (pl->rpo < 128 || pl->rpo % 128) MELD_WHY("gemm_rs: rows per owner %lld is not a positive multiple of 128", (long long)pl->rpo);
  if (pl->rpo * pl->nranks < pl->m) MELD_WHY("gemm_rs: %d owners x %lld rows do not cover M %lld", pl->nranks, (long long)pl->rpo, (long long)pl->m);
  if (pl->sym && (!pl->is_ar || pl->nranks != 2 || pl->rpo != (int64_t)pl->tiles_m * 128 || pl->m_rotate != 0))
    MELD_WHY("gemm_rs: symmetric mode needs AR, 2 ranks, one owner block of all %d m-blocks, no rotation", pl->tiles_m);
  if (!pl->is_ar && pl->rpo != pl->split_rows)
    MELD_WHY("gemm_rs: rows per owner %lld differ from the split ceil(M/P) = %lld", (long long)pl->rpo, (long long)pl->split_rows);
  if (pl->ldn < pl->n || pl->ldn % 8) MELD_WHY("gemm_rs: staging ld %lld", (long long)pl->ldn);
  if (pl->m_rotate < 0 || pl->m_rotate >= pl->tiles_m) MELD_WHY("gemm_rs: m_rotate %d outside [0, %d)", pl->m_rotate, pl->tiles_m);
  if (pl->ileave && pl->nranks >= 3) {
    const int64_t B = pl->rpo / 128;
    if (pl->sym || pl->m_rotate || pl->tiles_m != pl->nranks * B || B < 2 || pl->group_m < 1 || B % pl->group_m ||
        B / pl->group_m < 2)
      MELD_WHY("gemm_rs: the interleaved order for %d ranks needs whole owner blocks (tiles_m %d = %d x %lld), no "
          "rotation and a group_m %d dividing the blocks per owner at least twice",
          pl->nranks, pl->tiles_m, pl->nranks, (long long)B, pl->group_m);
  } else if (pl->ileave) {
    const int64_t B = pl->rpo / 128;
    if (pl->is_ar || pl->nranks != 2 || pl->sym || pl->m_rotate || pl->tiles_m != 2 * B || pl->group_m < 2 ||
        pl->group_m % 2 || pl->group_m > B || B % (pl->group_m / 2))
      MELD_WHY("gemm_rs: the interleaved order needs RS at 2 ranks, whole owner blocks (tiles_m %d = 2 x %lld), "
          "no rotation and an even group_m %d of at most the blocks per owner whose half divides them",
          pl->tiles_m, (long long)B, pl->group_m);
  } else if (pl->group_m < 1 || pl->own_first % pl->group_m)
    MELD_WHY("gemm_rs: group_m %d does not divide the first own m-block %d (own tiles must come strictly last)",
        pl->group_m, pl->own_first);
  if (!meld_signal_layout_fits(pl->nranks, 2, (uint32_t)pl->tiles_own))
    MELD_WHY("gemm_rs: %d ranks x 2 channels x %d tiles exceed the pad's %u signal slots", pl->nranks, pl->tiles_own,
        MELD_PAD_SIGNAL_SLOTS);
  if (pl->ws_needed > workspace_bytes)
    MELD_WHY("gemm_rs: needs %zu bytes of workspace, has %zu (MELD_WORKSPACE_BYTES)", pl->ws_needed, workspace_bytes);
  return 0;
}

void gemm_rs_plan_format(const gemm_rs_plan_t *pl, char *buf, size_t len) {
  if (!buf || !len) return;
  if (!pl) {
    snprintf(buf, len, "gemm_rs plan: NULL");
    return;
  }
  snprintf(buf, len,
           "%s %lld x %lld x %lld, rank %d of %d, rows [%lld, +%lld), algo %s%s%s\n"
           "  fused: rows/owner %lld, ldn %lld, tiles %d x %d (%d per owner), m_rotate %d, own_first %d, "
           "group_m %d, ileave %d, sym %d, slot %zu B, workspace %zu B; unfused scratch %zu B; hash %08x",
           pl->is_ar ? "gemm_ar" : "gemm_rs", (long long)pl->m, (long long)pl->n, (long long)pl->k, pl->rank,
           pl->nranks, (long long)pl->rows_first, (long long)pl->rows_count,
           pl->algo == MELD_GEMM_RS_FUSED ? "fused" : "unfused", pl->why_unfused ? ": " : "",
           pl->why_unfused ? pl->why_unfused : "", (long long)pl->rpo, (long long)pl->ldn, pl->tiles_m, pl->tiles_n,
           pl->tiles_own, pl->m_rotate, pl->own_first, pl->group_m, pl->ileave, pl->sym, pl->slot_bytes, pl->ws_needed, pl->scratch_bytes,
           pl->arg_hash);
}

int gemm_rs_kernel_variant(int lean, int is_ar, int bare, int helper, int reduce_on, int preload, int tma, int npush,
                           int split_k, int sk_tiles) {
  if (lean == 0 || bare || helper || !reduce_on || preload != 4 || !tma || npush || split_k != 1 || sk_tiles)
    return 0;
  return is_ar || lean == 2 ? 1 : 2;
}

int gemm_rs_copy_defer(int g2, int lean, int copy_tma, int helper, int ncopies, int64_t tiles_own, int flag) {
  if (helper || ncopies <= 0 || tiles_own >= ((int64_t)1 << 24) || flag == 1) return 0;
  return g2 || (flag == 2 && lean && copy_tma);
}

int gemm_rs_copy_tma(int lean, int tma, int ncopies, int st) {
  if (!lean || !tma || st || ncopies < 1 || ncopies > GEMM_PUSH_MAPS) return 0;
  return ncopies == 1 ? 1 : 2;
}

int gemm_rs_push_defer_kb(int variant, int g2, int requested) {
  if (!variant || !g2 || requested == -1) return -1;
  return requested >= 0 ? requested : GEMM_RS_PUSH_DEFER_KB;
}

int gemm_rs_copy_hold(int variant, int copy_defer, int requested) {
  if (!variant || !copy_defer) return 0;
  return requested >= 0 ? requested != 0 : GEMM_RS_COPY_HOLD;
}

int gemm_rs_store_hint(int requested) { return requested >= 0 ? requested != 0 : GEMM_RS_STORE_HINT; }

int gemm_rs_pf_first(int requested, int preload, int nsrc, int k_blocks) {
  if (preload != 4) return -1;
  if (requested == 1 || (requested < 0 && k_blocks <= GEMM_RS_PF_KB)) return nsrc > 1 ? 1 : -1;
  if (requested == 2) return nsrc > 0 ? 0 : -1;
  return -1;
}

int gemm_rs_push_mode(int nranks, int sym, int bare, int st, int tma) {
  if (sym || bare || st) return 0;
  if (nranks == 2) return 1;
  return nranks >= 3 && nranks <= GEMM_PUSH_MAPS + 1 && tma ? 2 : 0;
}

int gemm_rs_early_copy(int requested, int slots, int nranks) {
  if (!slots || nranks < 2) return 0;
  return requested >= 0 ? requested == 1 : nranks >= GEMM_RS_EARLY_COPY_MIN_RANKS;
}

int gemm_rs_preload_mode(int requested, int helper, int diag, int nsrc, int split, int k_blocks, int min_kb,
                         int cluster_m) {
  int mode = 0;
  if (requested >= 1 && requested <= 3) mode = requested;
  else if (requested >= 4 && requested <= 5 && !helper && !(diag & 4))
    mode = requested == 5 && !split && k_blocks >= min_kb && cluster_m == 1 ? 5 : 4;
  if (nsrc == 0 && mode) mode = 1;
  return mode;
}
