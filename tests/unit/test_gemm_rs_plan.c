/* test_gemm_rs_plan.c — GEMM+RS / GEMM+AR planning on the CPU: argument validation, the row
 * split, fused legality, layout bounds, the tile order that keeps own tiles last, the own-tile
 * add mode rule, and a model of the fused kernel's flag order (no deadlock). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "device/gemm.cuh" /* GEMM_PUSH_MAPS */
#include "error.h"
#include "gemm_rs_plan.h"
#include "meld.h"

static char g_buf[16];

static meld_gemm_rs_args_t args(int64_t m, int64_t n, int64_t k) {
  meld_gemm_rs_args_t a;
  memset(&a, 0, sizeof a);
  a.a = g_buf;
  a.b = g_buf;
  a.c = g_buf;
  a.lda = k;
  a.ldb = k;
  a.ldc = ((n + 7) / 8) * 8;
  a.m = m, a.n = n, a.k = k;
  return a;
}

static void test_rows(void **state) {
  (void)state;
  int64_t f, c;
  assert_int_equal(meld_gemm_rs_rows(1000, 2, 1, &f, &c), MELD_OK);
  assert_int_equal(f, 500);
  assert_int_equal(c, 500);
  assert_int_equal(meld_gemm_rs_rows(1001, 4, 3, &f, &c), MELD_OK); /* R = 251 */
  assert_int_equal(f, 753);
  assert_int_equal(c, 248);
  assert_int_equal(meld_gemm_rs_rows(5, 4, 3, &f, &c), MELD_OK); /* R = 2: 2, 2, 1, 0 */
  assert_int_equal(f, 5);
  assert_int_equal(c, 0);
  assert_int_equal(meld_gemm_rs_rows(5, 4, 4, &f, &c), MELD_ERR_INVALID_ARG);
  assert_int_equal(meld_gemm_rs_rows(5, 4, 0, NULL, &c), MELD_ERR_INVALID_ARG);
  /* the split covers [0, M) exactly */
  for (int P = 1; P <= 9; P++)
    for (int64_t m = 1; m < 700; m += 37) {
      int64_t next = 0;
      for (int r = 0; r < P; r++) {
        gemm_rs_rows(m, P, r, &f, &c);
        assert_int_equal(f, next);
        next = f + c;
      }
      assert_int_equal(next, m);
    }
}

static void test_validation(void **state) {
  (void)state;
  gemm_rs_plan_t pl;
  meld_gemm_rs_args_t a = args(1024, 1024, 1024);
  assert_int_equal(gemm_rs_plan_make(NULL, 0, 2, 0, 1, 1 << 30, &pl), MELD_ERR_INVALID_ARG);
  a.m = 0;
  assert_int_equal(gemm_rs_plan_make(&a, 0, 2, 0, 1, 1 << 30, &pl), MELD_ERR_INVALID_ARG);
  a = args(1024, 1024, 1024);
  a.lda = 1020; /* < k */
  assert_int_equal(gemm_rs_plan_make(&a, 0, 2, 0, 1, 1 << 30, &pl), MELD_ERR_INVALID_ARG);
  assert_non_null(strstr(meld_last_error(), "meld_gemm_rs"));
  a = args(1024, 1024, 1024);
  a.ldc = 1020;
  assert_int_equal(gemm_rs_plan_make(&a, 1, 2, 0, 1, 1 << 30, &pl), MELD_ERR_INVALID_ARG);
  a = args(1024, 1024, 1024);
  a.c = NULL; /* this rank receives rows */
  assert_int_equal(gemm_rs_plan_make(&a, 0, 2, 1, 1, 1 << 30, &pl), MELD_ERR_INVALID_ARG);
  a = args(5, 1024, 1024);
  a.c = NULL; /* rank 3 of 4 receives no rows: C may be NULL */
  assert_int_equal(gemm_rs_plan_make(&a, 0, 4, 3, 1, 1 << 30, &pl), MELD_OK);
  a = args(1024, 1024, 1024);
  a.algo = (meld_gemm_rs_algo_t)7;
  assert_int_equal(gemm_rs_plan_make(&a, 0, 2, 0, 1, 1 << 30, &pl), MELD_ERR_INVALID_ARG);
  a = args(1024, 1024, 1024);
  a.a = g_buf + 1; /* misaligned */
  assert_int_equal(gemm_rs_plan_make(&a, 0, 2, 0, 1, 1 << 30, &pl), MELD_ERR_INVALID_ARG);
}

static void test_choice(void **state) {
  (void)state;
  gemm_rs_plan_t pl;
  char why[256];
  meld_gemm_rs_args_t a = args(8192, 8192, 4096);
  assert_int_equal(gemm_rs_plan_make(&a, 0, 2, 0, 1, (size_t)256 << 20, &pl), MELD_OK);
  assert_int_equal(pl.algo, MELD_GEMM_RS_FUSED);
  assert_int_equal(gemm_rs_plan_check(&pl, (size_t)256 << 20, why, sizeof why), 0);
  assert_int_equal(pl.rpo, 4096);
  assert_int_equal(pl.m_rotate, 32); /* rank 0 starts with rank 1's rows */
  assert_int_equal(pl.own_first, 32);
  /* workspace too small: AUTO falls back, FUSED fails naming the size */
  assert_int_equal(gemm_rs_plan_make(&a, 0, 2, 0, 1, (size_t)64 << 20, &pl), MELD_OK);
  assert_int_equal(pl.algo, MELD_GEMM_RS_UNFUSED);
  a.algo = MELD_GEMM_RS_FUSED;
  assert_int_equal(gemm_rs_plan_make(&a, 0, 2, 0, 1, (size_t)64 << 20, &pl), MELD_ERR_OUT_OF_MEMORY);
  assert_non_null(strstr(meld_last_error(), "MELD_WORKSPACE_BYTES"));
  /* RS rows per rank not a multiple of 128: unfused (AUTO), unsupported (FUSED) */
  a = args(1000, 1000, 4104);
  assert_int_equal(gemm_rs_plan_make(&a, 0, 2, 1, 1, (size_t)256 << 20, &pl), MELD_OK);
  assert_int_equal(pl.algo, MELD_GEMM_RS_UNFUSED);
  a.algo = MELD_GEMM_RS_FUSED;
  assert_int_equal(gemm_rs_plan_make(&a, 0, 2, 1, 1, (size_t)256 << 20, &pl), MELD_ERR_UNSUPPORTED);
  /* ... but AR owns rows in blocks of 128: fused; with 32 tiles at 2 ranks symmetric (every
   * rank reduces every tile: one owner block of all 8 m-blocks, one slot) */
  assert_int_equal(gemm_rs_plan_make(&a, 1, 2, 1, 1, (size_t)256 << 20, &pl), MELD_OK);
  assert_int_equal(pl.algo, MELD_GEMM_RS_FUSED);
  assert_int_equal(pl.sym, 1);
  assert_int_equal(pl.rpo, 1024);
  assert_int_equal(pl.m_rotate, 0);
  assert_int_equal(pl.ws_needed, GEMM_RS_HDR_BYTES + pl.slot_bytes);
  assert_int_equal(gemm_rs_plan_check(&pl, (size_t)256 << 20, why, sizeof why), 0);
  /* ... owner blocks of 128 rows at 3 ranks (no symmetric mode) */
  assert_int_equal(gemm_rs_plan_make(&a, 1, 3, 1, 1, (size_t)256 << 20, &pl), MELD_OK);
  assert_int_equal(pl.sym, 0);
  assert_int_equal(pl.rpo, 384);
  assert_int_equal(gemm_rs_plan_check(&pl, (size_t)256 << 20, why, sizeof why), 0);
  /* symmetric up to GEMM_RS_SYM_MAX_TILES tiles, AR at 2 ranks only */
  const int64_t symc[][3] = {{16, 8192, 1}, {128, 8192, 1}, {512, 8192, 1}, {640, 8192, 0}, {8192, 8192, 0}, {512, 4096, 1}};
  for (int i = 0; i < 6; i++) {
    a = args(symc[i][0], symc[i][1], 4096);
    assert_int_equal(gemm_rs_plan_make(&a, 1, 2, 0, 1, (size_t)1 << 30, &pl), MELD_OK);
    assert_int_equal(pl.sym, (int)symc[i][2]);
    assert_int_equal(gemm_rs_plan_make(&a, 0, 2, 0, 1, (size_t)1 << 30, &pl), MELD_OK);
    assert_int_equal(pl.sym, 0);
  }
  a = args(1000, 1000, 4104);
  /* one rank, several nodes: unfused */
  a = args(8192, 8192, 4096);
  assert_int_equal(gemm_rs_plan_make(&a, 0, 1, 0, 1, (size_t)256 << 20, &pl), MELD_OK);
  assert_int_equal(pl.algo, MELD_GEMM_RS_UNFUSED);
  /* one rank, FUSED forced: the fused kernel with every tile its own (no rotation, no staging) */
  a.algo = MELD_GEMM_RS_FUSED;
  for (int is_ar = 0; is_ar < 2; is_ar++) {
    assert_int_equal(gemm_rs_plan_make(&a, is_ar, 1, 0, 1, (size_t)1 << 20, &pl), MELD_OK);
    assert_int_equal(pl.algo, MELD_GEMM_RS_FUSED);
    assert_int_equal(pl.m_rotate, 0);
    assert_int_equal(pl.rpo, 8192);
    assert_int_equal(pl.tiles_own, 64 * 32);
    assert_int_equal(gemm_rs_plan_check(&pl, (size_t)1 << 20, why, sizeof why), 0);
  }
  a.algo = MELD_GEMM_RS_AUTO;
  assert_int_equal(gemm_rs_plan_make(&a, 0, 2, 0, 2, (size_t)256 << 20, &pl), MELD_OK);
  assert_int_equal(pl.algo, MELD_GEMM_RS_UNFUSED);
  /* decode-size AR with the node's SM count: AUTO takes the unfused path at <= SMs tiles
   * (M 16 / 512, N 4096 / 8192: 16 / 64 / 128 tiles), fused above (M 1024, N 8192: 256 tiles);
   * RS, forced FUSED and an unknown SM count (0) keep the fused path */
  a = args(16, 8192, 4096);
  assert_int_equal(gemm_rs_plan_make_sm(&a, 1, 2, 0, 1, (size_t)256 << 20, 132, &pl), MELD_OK);
  assert_int_equal(pl.algo, MELD_GEMM_RS_UNFUSED);
  assert_non_null(pl.why_unfused);
  assert_int_equal(gemm_rs_plan_make_sm(&a, 1, 2, 0, 1, (size_t)256 << 20, 0, &pl), MELD_OK);
  assert_int_equal(pl.algo, MELD_GEMM_RS_FUSED);
  a.algo = MELD_GEMM_RS_FUSED;
  assert_int_equal(gemm_rs_plan_make_sm(&a, 1, 2, 0, 1, (size_t)256 << 20, 132, &pl), MELD_OK);
  assert_int_equal(pl.algo, MELD_GEMM_RS_FUSED);
  a = args(512, 4096, 7168);
  assert_int_equal(gemm_rs_plan_make_sm(&a, 1, 2, 1, 1, (size_t)256 << 20, 132, &pl), MELD_OK);
  assert_int_equal(pl.algo, MELD_GEMM_RS_UNFUSED);
  a = args(512, 8192, 4096);
  assert_int_equal(gemm_rs_plan_make_sm(&a, 1, 2, 1, 1, (size_t)256 << 20, 132, &pl), MELD_OK);
  assert_int_equal(pl.algo, MELD_GEMM_RS_UNFUSED);
  assert_int_equal(gemm_rs_plan_make_sm(&a, 1, 2, 1, 1, (size_t)256 << 20, 127, &pl), MELD_OK);
  assert_int_equal(pl.algo, MELD_GEMM_RS_FUSED); /* 128 tiles on 127 SMs: two waves */
  a = args(1024, 8192, 4096);
  assert_int_equal(gemm_rs_plan_make_sm(&a, 1, 2, 1, 1, (size_t)256 << 20, 132, &pl), MELD_OK);
  assert_int_equal(pl.algo, MELD_GEMM_RS_FUSED);
  a = args(512, 8192, 4096);
  assert_int_equal(gemm_rs_plan_make_sm(&a, 0, 2, 1, 1, (size_t)256 << 20, 132, &pl), MELD_OK);
  assert_int_equal(pl.algo, MELD_GEMM_RS_FUSED);
  /* the hash depends on shapes and the algorithm, not on pointers */
  gemm_rs_plan_t p2;
  a = args(8192, 8192, 4096);
  assert_int_equal(gemm_rs_plan_make(&a, 0, 2, 0, 1, (size_t)256 << 20, &pl), MELD_OK);
  a.c = g_buf + 0;
  a.ldc = 8200;
  assert_int_equal(gemm_rs_plan_make(&a, 0, 2, 1, 1, (size_t)256 << 20, &p2), MELD_OK);
  assert_int_equal(pl.arg_hash, p2.arg_hash);
  a.m = 8064;
  assert_int_equal(gemm_rs_plan_make(&a, 0, 2, 1, 1, (size_t)256 << 20, &p2), MELD_OK);
  assert_int_not_equal(pl.arg_hash, p2.arg_hash);
}

/* For every rank, the logical tile order puts the own m-blocks strictly last, and the raster
 * group divides the first own block (no group mixes own and other tiles); with the order unset,
 * plans at 3 or more ranks may take the interleave instead (its own order: test_gemm_args
 * test_ileave_p_order), which the check accepts. */
static void test_order(void **state) {
  (void)state;
  const int64_t ms[] = {16, 128, 512, 1000, 2048, 8192, 16384, 1 << 20};
  for (int rotate = 0; rotate < 2; rotate++) {
    if (rotate) setenv("MELD_GEMM_RS_ORDER", "rotate", 1);
    for (int P = 2; P <= 16; P++)
      for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
        for (int r = 0; r < P; r++) {
          meld_gemm_rs_args_t a = args(ms[i], 4096, 1024);
          gemm_rs_plan_t pl;
          assert_int_equal(gemm_rs_plan_make(&a, 1, P, r, 1, (size_t)1 << 40, &pl), MELD_OK);
          if (pl.algo != MELD_GEMM_RS_FUSED) continue;
          char why[256];
          assert_int_equal(gemm_rs_plan_check(&pl, (size_t)1 << 40, why, sizeof why), 0);
          if (pl.sym) { /* every tile is reduced by every rank: no order constraint */
            assert_true(P == 2 && pl.m_rotate == 0 && pl.rpo == 128 * pl.tiles_m);
            continue;
          }
          if (pl.ileave) {
            assert_true(!rotate && P >= 3 && pl.m_rotate == 0 &&
                        pl.own_first == r * (int)(pl.rpo / 128));
            continue;
          }
          const int B = (int)(pl.rpo / 128), T = pl.tiles_m;
          for (int li = 0; li < T; li++) {
            const int mb = (li + pl.m_rotate) % T;
            const int own = mb / B == r;
            assert_int_equal(own, li >= pl.own_first);
          }
        }
  }
  unsetenv("MELD_GEMM_RS_ORDER");
}

static int unset_order_env(void **state) {
  (void)state;
  unsetenv("MELD_GEMM_RS_ORDER");
  unsetenv("MELD_GEMM_RS_ILEAVE_G");
  return 0;
}

/* MELD_GEMM_RS_ORDER: "ileave" takes the interleaved owner order where it applies (RS at 2
 * ranks, whole owner blocks: m_rotate 0, an even group_m whose half divides the blocks, in the
 * argument hash; RS / AR owner mode at 3 or more ranks, where it is also the default),
 * nowhere else; "rotate" keeps the rotation everywhere; unset: the rotation at 2 ranks; other
 * values fail. */
static void test_ileave_plan(void **state) {
  (void)state;
  gemm_rs_plan_t pl, p0;
  char why[256];
  meld_gemm_rs_args_t a = args(8192, 8192, 4096);
  assert_int_equal(gemm_rs_plan_make(&a, 0, 2, 1, 1, (size_t)1 << 40, &p0), MELD_OK);
  assert_int_equal(p0.ileave, 0);
  setenv("MELD_GEMM_RS_ORDER", "ileave", 1);
  for (int r = 0; r < 2; r++) {
    assert_int_equal(gemm_rs_plan_make(&a, 0, 2, r, 1, (size_t)1 << 40, &pl), MELD_OK);
    assert_int_equal(pl.ileave, 1);
    assert_int_equal(pl.m_rotate, 0);
    assert_int_equal(pl.group_m, 16); /* 32 blocks per owner */
    assert_int_equal(gemm_rs_plan_check(&pl, (size_t)1 << 40, why, sizeof why), 0);
  }
  assert_true(pl.arg_hash != p0.arg_hash); /* a rank without it fails the handshake with it */
  const int64_t ms[] = {256, 384, 1280, 2560, 5120, 8192, 16384};
  for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) { /* every group size the rule picks is legal */
    a = args(ms[i], 4096, 1024);
    assert_int_equal(gemm_rs_plan_make(&a, 0, 2, 0, 1, (size_t)1 << 40, &pl), MELD_OK);
    const int64_t B = pl.rpo / 128;
    assert_int_equal(pl.ileave, B >= 2 && pl.tiles_m == 2 * B); /* (M 384: 3 m-blocks, owners of 2) */
    if (pl.ileave) {
      assert_true(pl.group_m >= 2 && pl.group_m % 2 == 0 && pl.group_m <= B && B % (pl.group_m / 2) == 0);
      assert_int_equal(gemm_rs_plan_check(&pl, (size_t)1 << 40, why, sizeof why), 0);
    }
  }
  a = args(8192, 8192, 4096);
  assert_int_equal(gemm_rs_plan_make(&a, 1, 2, 0, 1, (size_t)1 << 40, &pl), MELD_OK); /* AR: not taken */
  assert_int_equal(pl.ileave, 0);
  /* more than 2 ranks (RS and AR in owner mode): rounds of P groups, G the largest divisor of
   * the blocks per owner up to 16 that leaves >= 2 rounds, in the hash, legal for the check */
  static const int64_t pm[][3] = {/* P, M, expected group_m (0: not taken) */
                                  {4, 8192, 8}, {8, 8192, 4}, {3, 8064, 7}, {4, 16384, 16}, {5, 8192, 0},
                                  {4, 1024, 1}, {4, 512, 0}, {8, 16384, 8}, {3, 8192, 0}};
  for (size_t i = 0; i < sizeof pm / sizeof pm[0]; i++)
    for (int ar = 0; ar < 2; ar++)
      for (int r = 0; r < (int)pm[i][0]; r++) {
        a = args(pm[i][1], 8192, 4096);
        assert_int_equal(gemm_rs_plan_make(&a, ar, (int)pm[i][0], r, 1, (size_t)1 << 40, &pl), MELD_OK);
        if (pl.ileave != (pm[i][2] > 0) || (pl.ileave && pl.group_m != pm[i][2]))
          fail_msg("P %lld M %lld %s rank %d: ileave %d group_m %d", (long long)pm[i][0], (long long)pm[i][1],
                   ar ? "AR" : "RS", r, pl.ileave, pl.group_m);
        if (pl.ileave) {
          assert_int_equal(pl.m_rotate, 0);
          assert_int_equal(gemm_rs_plan_check(&pl, (size_t)1 << 40, why, sizeof why), 0);
          gemm_rs_plan_t q = pl;
          q.group_m = (int)(pl.rpo / 128); /* one round: the rotation's order, refused as an interleave */
          assert_int_equal(gemm_rs_plan_check(&q, (size_t)1 << 40, why, sizeof why), 1);
          assert_non_null(strstr(why, "interleaved"));
        }
      }
  a = args(8192, 2048, 4096); /* 4 ranks: 8 x 8 = 64 tickets per group, under 2 waves of 132: not taken */
  assert_int_equal(gemm_rs_plan_make_sm(&a, 0, 4, 0, 1, (size_t)1 << 40, 132, &pl), MELD_OK);
  assert_int_equal(pl.ileave, 0);
  a = args(8192, 8192, 4096); /* 8 x 32 = 256: taken */
  assert_int_equal(gemm_rs_plan_make_sm(&a, 1, 4, 0, 1, (size_t)1 << 40, 132, &pl), MELD_OK);
  assert_int_equal(pl.ileave, 1);
  assert_int_equal(gemm_rs_plan_make_sm(&a, 0, 2, 0, 1, (size_t)1 << 40, 132, &pl), MELD_OK); /* 16 x 32 tickets per group: taken */
  assert_int_equal(pl.ileave, 1);
  a = args(8192, 2048, 4096); /* 16 x 8 = 128 tickets per group, under 2 waves of 132 SMs: not taken */
  assert_int_equal(gemm_rs_plan_make_sm(&a, 0, 2, 0, 1, (size_t)1 << 40, 132, &pl), MELD_OK);
  assert_int_equal(pl.ileave, 0);
  assert_int_equal(pl.m_rotate, 32);
  a = args(8191, 8192, 4096); /* the last owner one row short: still whole blocks (its last is a tail) */
  assert_int_equal(gemm_rs_plan_make(&a, 0, 2, 1, 1, (size_t)1 << 40, &pl), MELD_OK);
  assert_int_equal(pl.algo, MELD_GEMM_RS_FUSED);
  assert_int_equal(pl.ileave, 1);
  assert_int_equal(gemm_rs_plan_check(&pl, (size_t)1 << 40, why, sizeof why), 0);
  a = args(8192, 8192, 4096);
  assert_int_equal(gemm_rs_plan_make(&a, 0, 2, 0, 1, (size_t)1 << 40, &pl), MELD_OK);
  pl.group_m = 12; /* the check refuses what the kernel's order cannot take */
  assert_int_equal(gemm_rs_plan_check(&pl, (size_t)1 << 40, why, sizeof why), 1);
  assert_non_null(strstr(why, "interleaved"));
  setenv("MELD_GEMM_RS_ORDER", "rotate", 1);
  assert_int_equal(gemm_rs_plan_make(&a, 0, 2, 0, 1, (size_t)1 << 40, &pl), MELD_OK);
  assert_int_equal(pl.ileave, 0);
  setenv("MELD_GEMM_RS_ORDER", "zigzag", 1);
  assert_int_equal(gemm_rs_plan_make(&a, 0, 2, 0, 1, (size_t)1 << 40, &pl), MELD_ERR_INVALID_ARG);
  assert_non_null(strstr(meld_last_error(), "MELD_GEMM_RS_ORDER=zigzag"));
  /* more than 2 ranks: the interleave is the default (unset or empty); "rotate" turns it off,
   * and the two plans' hashes differ (a rank with it set alone fails the handshake) */
  a = args(8192, 8192, 4096);
  for (int ar = 0; ar < 2; ar++) {
    unsetenv("MELD_GEMM_RS_ORDER");
    assert_int_equal(gemm_rs_plan_make(&a, ar, 4, 1, 1, (size_t)1 << 40, &p0), MELD_OK);
    assert_int_equal(p0.ileave, 1);
    assert_int_equal(p0.group_m, 8);
    setenv("MELD_GEMM_RS_ORDER", "", 1);
    assert_int_equal(gemm_rs_plan_make(&a, ar, 4, 1, 1, (size_t)1 << 40, &pl), MELD_OK);
    assert_int_equal(pl.ileave, 1);
    setenv("MELD_GEMM_RS_ORDER", "rotate", 1);
    assert_int_equal(gemm_rs_plan_make(&a, ar, 4, 1, 1, (size_t)1 << 40, &pl), MELD_OK);
    assert_int_equal(pl.ileave, 0);
    assert_int_equal(pl.m_rotate, 2 * 16);
    assert_true(pl.arg_hash != p0.arg_hash);
  }
  unsetenv("MELD_GEMM_RS_ORDER");
  assert_int_equal(gemm_rs_plan_make(&a, 0, 2, 0, 1, (size_t)1 << 40, &pl), MELD_OK); /* 2 ranks: unset = rotate */
  assert_int_equal(pl.ileave, 0);
  /* MELD_GEMM_RS_ILEAVE_G: a group size of its own (a divisor of the 16 blocks per owner leaving
   * >= 2 rounds, taken without the wave rule), in the hash; anything else fails */
  setenv("MELD_GEMM_RS_ILEAVE_G", "2", 1);
  assert_int_equal(gemm_rs_plan_make_sm(&a, 1, 4, 3, 1, (size_t)1 << 40, 132, &pl), MELD_OK);
  assert_int_equal(pl.ileave, 1);
  assert_int_equal(pl.group_m, 2); /* 2 x 32 tickets, under a wave of 132: forced anyway */
  assert_int_equal(gemm_rs_plan_check(&pl, (size_t)1 << 40, why, sizeof why), 0);
  assert_true(pl.arg_hash != p0.arg_hash);
  static const char *const bad[] = {"3", "16", "0", "-2", "2x"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    setenv("MELD_GEMM_RS_ILEAVE_G", bad[i], 1);
    assert_int_equal(gemm_rs_plan_make(&a, 1, 4, 3, 1, (size_t)1 << 40, &pl), MELD_ERR_INVALID_ARG);
    assert_non_null(strstr(meld_last_error(), "MELD_GEMM_RS_ILEAVE_G"));
  }
  assert_int_equal(gemm_rs_plan_make(&a, 1, 2, 1, 1, (size_t)1 << 40, &pl), MELD_OK); /* not read at 2 ranks */
  unsetenv("MELD_GEMM_RS_ILEAVE_G");
}

/* The hook g kernel a fused call runs (gemm_rs_kernel_variant): the default plan takes the lean
 * kernel (session 14: 2-3% faster), every other mode the general one, whose code it needs. */
static void test_kernel_variant(void **state) {
  (void)state;
  /* lean, is_ar, bare, helper, reduce_on, preload, tma, npush, split_k, sk_tiles */
  assert_int_equal(gemm_rs_kernel_variant(1, 0, 0, 0, 1, 4, 1, 0, 1, 0), 2); /* RS default: RS-only lean */
  assert_int_equal(gemm_rs_kernel_variant(1, 1, 0, 0, 1, 4, 1, 0, 1, 0), 1); /* AR default: lean with the copy code */
  assert_int_equal(gemm_rs_kernel_variant(2, 0, 0, 0, 1, 4, 1, 0, 1, 0), 1); /* RS in the AR's lean kernel */
  assert_int_equal(gemm_rs_kernel_variant(2, 1, 0, 0, 1, 4, 1, 0, 1, 0), 1);
  assert_int_equal(gemm_rs_kernel_variant(0, 0, 0, 0, 1, 4, 1, 0, 1, 0), 0); /* MELD_GEMM_RS_LEAN=0 */
  assert_int_equal(gemm_rs_kernel_variant(0, 1, 0, 0, 1, 4, 1, 0, 1, 0), 0);
  /* every departure from the default plan needs the general kernel */
  for (int is_ar = 0; is_ar < 2; is_ar++) {
    assert_int_equal(gemm_rs_kernel_variant(1, is_ar, 1, 0, 1, 4, 1, 0, 1, 0), 0); /* bare (diag 16) */
    assert_int_equal(gemm_rs_kernel_variant(1, is_ar, 0, 1, 1, 4, 1, 0, 1, 0), 0); /* flag helper */
    assert_int_equal(gemm_rs_kernel_variant(1, is_ar, 0, 0, 0, 4, 1, 0, 1, 0), 0); /* reduction off (diag 8) */
    for (int m = 0; m <= 5; m++)
      if (m != 4) assert_int_equal(gemm_rs_kernel_variant(1, is_ar, 0, 0, 1, m, 1, 0, 1, 0), 0); /* other add modes */
    assert_int_equal(gemm_rs_kernel_variant(1, is_ar, 0, 0, 1, 4, 0, 0, 1, 0), 0); /* own tiles by 16-byte stores */
    assert_int_equal(gemm_rs_kernel_variant(1, is_ar, 0, 0, 1, 4, 1, 1, 1, 0), 0); /* symmetric push */
    assert_int_equal(gemm_rs_kernel_variant(1, is_ar, 0, 0, 1, 4, 1, 0, 2, 0), 0); /* split-K */
    assert_int_equal(gemm_rs_kernel_variant(1, is_ar, 0, 0, 1, 4, 1, 0, 1, 12), 0); /* stream-K */
  }
}

/* The AR copy flags' deferral (gemm_rs_copy_defer): on by default in the TMA-push kernels;
 * opt-in (MELD_GEMM_AR_COPY_FLAG=next) in the other lean kernels with the TMA copies; never
 * with the flag helper (its ring carries push flags only) or past the pending word's 24-bit
 * tile field. */
static void test_copy_defer(void **state) {
  (void)state;
  /* g2, lean, copy_tma, helper, ncopies, tiles_own, flag (0 unset, 1 now, 2 next) */
  assert_int_equal(gemm_rs_copy_defer(1, 1, 1, 0, 1, 2048, 0), 1);
  assert_int_equal(gemm_rs_copy_defer(1, 0, 0, 0, 1, 2048, 0), 1); /* (the general TMA-push kernel too) */
  assert_int_equal(gemm_rs_copy_defer(1, 1, 1, 0, 1, 2048, 1), 0); /* MELD_GEMM_AR_COPY_FLAG=now */
  assert_int_equal(gemm_rs_copy_defer(0, 1, 2, 0, 3, 2048, 0), 0); /* 16-byte-store push: not by default */
  assert_int_equal(gemm_rs_copy_defer(0, 1, 2, 0, 3, 2048, 2), 1); /* ... but with =next (3+ ranks) */
  assert_int_equal(gemm_rs_copy_defer(0, 0, 2, 0, 3, 2048, 2), 0); /* not in the general kernel */
  assert_int_equal(gemm_rs_copy_defer(0, 1, 0, 0, 3, 2048, 2), 0); /* nor with the threads' copies */
  assert_int_equal(gemm_rs_copy_defer(1, 1, 1, 1, 1, 2048, 0), 0); /* flag helper */
  assert_int_equal(gemm_rs_copy_defer(0, 1, 2, 1, 3, 2048, 2), 0);
  assert_int_equal(gemm_rs_copy_defer(1, 1, 1, 0, 0, 2048, 0), 0); /* RS: nothing copied */
  assert_int_equal(gemm_rs_copy_defer(0, 1, 2, 0, 0, 2048, 2), 0);
  assert_int_equal(gemm_rs_copy_defer(1, 1, 1, 0, 1, ((int64_t)1 << 24) - 1, 0), 1);
  assert_int_equal(gemm_rs_copy_defer(1, 1, 1, 0, 1, (int64_t)1 << 24, 0), 0);
  assert_int_equal(gemm_rs_copy_defer(1, 1, 1, 0, 1, 2048, 2), 1); /* =next in a TMA-push kernel: as the default */
  assert_int_equal(gemm_rs_copy_defer(0, 1, 2, 0, 3, (int64_t)1 << 24, 2), 0); /* the tile field's limit here too */
  assert_int_equal(gemm_rs_copy_defer(0, 1, 2, 0, 3, ((int64_t)1 << 24) - 1, 2), 1);
}

/* The AR copies by TMA (gemm_rs_copy_tma): the default in the lean kernels wherever own tiles
 * leave by TMA and there is one copy (2 ranks); gemm_params_check refuses anything else. */
static void test_copy_tma(void **state) {
  (void)state;
  /* lean, tma, ncopies, st */
  assert_int_equal(gemm_rs_copy_tma(1, 1, 1, 0), 1);
  assert_int_equal(gemm_rs_copy_tma(1, 1, 1, 1), 0); /* MELD_GEMM_AR_COPY=st */
  assert_int_equal(gemm_rs_copy_tma(0, 1, 1, 0), 0); /* the general kernel (it spilled with it) */
  assert_int_equal(gemm_rs_copy_tma(1, 0, 1, 0), 0); /* own tiles by 16-byte stores: no staged sums */
  assert_int_equal(gemm_rs_copy_tma(1, 1, 0, 0), 0); /* RS: nothing copied */
  assert_int_equal(gemm_rs_copy_tma(1, 1, 2, 0), 2); /* 3 ranks: a map per copy (session 28) */
  assert_int_equal(gemm_rs_copy_tma(1, 1, GEMM_PUSH_MAPS, 0), 2); /* 8 ranks */
  assert_int_equal(gemm_rs_copy_tma(1, 1, GEMM_PUSH_MAPS + 1, 0), 0); /* 9 ranks: the threads' stores */
  assert_int_equal(gemm_rs_copy_tma(1, 1, 3, 1), 0);
  assert_int_equal(gemm_rs_copy_tma(0, 1, 3, 0), 0);
  /* the default AR plan at 2 ranks takes it */
  assert_int_equal(gemm_rs_copy_tma(gemm_rs_kernel_variant(1, 1, 0, 0, 1, 4, 1, 0, 1, 0) != 0, 1, 1, 0), 1);
}

/* The pushed tiles' deferred second half (gemm_rs_push_defer_kb): lean kernels with the TMA
 * push only; "off" wins; a k-block as asked; unset: the default. */
static void test_push_defer(void **state) {
  (void)state;
  /* variant, g2, requested */
  assert_int_equal(gemm_rs_push_defer_kb(1, 1, 16), 16);
  assert_int_equal(gemm_rs_push_defer_kb(2, 1, 0), 0);
  assert_int_equal(gemm_rs_push_defer_kb(1, 1, -1), -1); /* "off" */
  assert_int_equal(gemm_rs_push_defer_kb(1, 1, -2), -1); /* unset: off until 2 GPUs measure it */
  assert_int_equal(gemm_rs_push_defer_kb(2, 1, -2), -1);
  assert_int_equal(gemm_rs_push_defer_kb(0, 1, 16), -1); /* the general kernel has no deferral */
  assert_int_equal(gemm_rs_push_defer_kb(1, 0, 16), -1); /* no TMA push (one rank, 16-byte stores) */
}

/* The AR's copy flags kept over an own tile's start (gemm_rs_copy_hold): lean kernels with
 * deferred copy flags only; 0 as asked; unset: on. */
static void test_copy_hold(void **state) {
  (void)state;
  /* variant, copy_defer, requested */
  assert_int_equal(gemm_rs_copy_hold(2, 1, 1), 1);
  assert_int_equal(gemm_rs_copy_hold(2, 1, 0), 0);
  assert_int_equal(gemm_rs_copy_hold(2, 1, -1), 1); /* unset: on */
  assert_int_equal(gemm_rs_copy_hold(0, 1, 1), 0); /* the general kernel */
  assert_int_equal(gemm_rs_copy_hold(2, 0, 1), 0); /* copy flags not deferred: nothing to hold */
  /* the fused kernels' evict-first C stores (gemm_rs_store_hint): as asked; unset: the default */
  assert_int_equal(gemm_rs_store_hint(0), 0);
  assert_int_equal(gemm_rs_store_hint(1), 1);
  assert_int_equal(gemm_rs_store_hint(-1), GEMM_RS_STORE_HINT);
}

/* The partial slots' L2 prefetch (gemm_rs_pf_first): the first slot asked for, -1 for none. */
static void test_pf_first(void **state) {
  (void)state;
  /* unset: the further sources where a tile's mainloop is short, none where it is long or
   * there is one source (2 ranks) */
  assert_int_equal(gemm_rs_pf_first(-1, 4, 3, 4), 1);
  assert_int_equal(gemm_rs_pf_first(-1, 4, 7, GEMM_RS_PF_KB), 1);
  assert_int_equal(gemm_rs_pf_first(-1, 4, 3, GEMM_RS_PF_KB + 1), -1);
  assert_int_equal(gemm_rs_pf_first(-1, 4, 3, 32), -1);
  assert_int_equal(gemm_rs_pf_first(-1, 4, 1, 4), -1);
  /* 1: the further sources only, at any length, so none at 2 ranks (one source) */
  assert_int_equal(gemm_rs_pf_first(1, 4, 3, 32), 1);
  assert_int_equal(gemm_rs_pf_first(1, 4, 7, 2), 1);
  assert_int_equal(gemm_rs_pf_first(1, 4, 1, 2), -1);
  /* 2: every source, from slot 0, at any rank count with a source */
  assert_int_equal(gemm_rs_pf_first(2, 4, 1, 64), 0);
  assert_int_equal(gemm_rs_pf_first(2, 4, 7, 2), 0);
  assert_int_equal(gemm_rs_pf_first(2, 4, 0, 2), -1);
  /* off, unknown values, and every add mode but 4 (which alone has the map and the request) */
  assert_int_equal(gemm_rs_pf_first(0, 4, 3, 2), -1);
  assert_int_equal(gemm_rs_pf_first(3, 4, 3, 2), -1);
  for (int m = 0; m <= 5; m++)
    if (m != 4) {
      assert_int_equal(gemm_rs_pf_first(2, m, 3, 2), -1);
      assert_int_equal(gemm_rs_pf_first(-1, m, 3, 2), -1);
    }
}

/* The partial push (gemm_rs_push_mode): TMA to one owner at 2 ranks unless "st"; to several only
 * when asked ("tma") at 3 .. GEMM_PUSH_MAPS + 1 ranks; never in symmetric mode or the bare kernel. */
static void test_push_mode(void **state) {
  (void)state;
  assert_int_equal(gemm_rs_push_mode(2, 0, 0, 0, 0), 1);
  assert_int_equal(gemm_rs_push_mode(2, 0, 0, 0, 1), 1);
  assert_int_equal(gemm_rs_push_mode(2, 0, 0, 1, 0), 0);
  for (int P = 3; P <= 12; P++) {
    assert_int_equal(gemm_rs_push_mode(P, 0, 0, 0, 0), 0);
    assert_int_equal(gemm_rs_push_mode(P, 0, 0, 0, 1), P <= GEMM_PUSH_MAPS + 1 ? 2 : 0);
    assert_int_equal(gemm_rs_push_mode(P, 0, 0, 1, 0), 0);
  }
  assert_int_equal(gemm_rs_push_mode(2, 1, 0, 0, 0), 0); /* symmetric */
  assert_int_equal(gemm_rs_push_mode(4, 0, 1, 0, 1), 0); /* bare kernel */
  assert_int_equal(gemm_rs_push_mode(1, 0, 0, 0, 1), 0); /* one rank: nothing to push */
}

/* The AR's early copy (gemm_rs_early_copy): only with result slots and peers; as asked, else
 * from GEMM_RS_EARLY_COPY_MIN_RANKS ranks on. */
static void test_early_copy(void **state) {
  (void)state;
  for (int P = 2; P <= 8; P++) {
    assert_int_equal(gemm_rs_early_copy(-1, 1, P), P >= GEMM_RS_EARLY_COPY_MIN_RANKS);
    assert_int_equal(gemm_rs_early_copy(1, 1, P), 1);
    assert_int_equal(gemm_rs_early_copy(0, 1, P), 0);
    assert_int_equal(gemm_rs_early_copy(1, 0, P), 0); /* zero copy / symmetric: nothing to copy */
    assert_int_equal(gemm_rs_early_copy(-1, 0, P), 0);
  }
  assert_int_equal(gemm_rs_early_copy(1, 1, 1), 0); /* one rank */
  assert_int_equal(gemm_rs_early_copy(-1, 1, 1), 0);
}

/* The own-tile add mode (gemm_rs_preload_mode): each rule that the kernels depend on. */
static void test_preload_mode(void **state) {
  (void)state;
  /* default (4) at 2 ranks, whole tiles */
  assert_int_equal(gemm_rs_preload_mode(4, 0, 0, 1, 0, 64, 4, 1), 4);
  /* explicit choices */
  assert_int_equal(gemm_rs_preload_mode(0, 0, 0, 1, 0, 64, 4, 1), 0);
  for (int m = 1; m <= 3; m++) assert_int_equal(gemm_rs_preload_mode(m, 0, 0, 1, 0, 64, 4, 1), m);
  assert_int_equal(gemm_rs_preload_mode(5, 0, 0, 1, 0, 64, 4, 1), 5);
  /* mode 5 falls back to 4: split tiles, short K (its ordering chain needs >= min_kb), cluster 2 */
  assert_int_equal(gemm_rs_preload_mode(5, 0, 0, 1, 1, 64, 4, 1), 4);
  assert_int_equal(gemm_rs_preload_mode(5, 0, 0, 1, 0, 3, 4, 1), 4);
  assert_int_equal(gemm_rs_preload_mode(5, 0, 0, 1, 0, 4, 4, 1), 5);
  assert_int_equal(gemm_rs_preload_mode(5, 0, 0, 1, 0, 64, 4, 2), 4);
  /* mode 4 with split tiles stays 4 (the last piece's epilogue asks) */
  assert_int_equal(gemm_rs_preload_mode(4, 0, 0, 1, 1, 64, 4, 1), 4);
  /* the flag-helper kernels lack modes 4 and 5: the pass; registers modes are kept */
  assert_int_equal(gemm_rs_preload_mode(4, 1, 0, 1, 0, 64, 4, 1), 0);
  assert_int_equal(gemm_rs_preload_mode(5, 1, 0, 1, 0, 64, 4, 1), 0);
  assert_int_equal(gemm_rs_preload_mode(2, 1, 0, 1, 0, 64, 4, 1), 2);
  /* diag bit 2 (no partial loads) keeps the pass, which honours it */
  assert_int_equal(gemm_rs_preload_mode(4, 0, 4, 1, 0, 64, 4, 1), 0);
  /* one rank, nothing to add: stored as staged (1), never a TMA read of the workspace */
  assert_int_equal(gemm_rs_preload_mode(4, 0, 0, 0, 0, 64, 4, 1), 1);
  assert_int_equal(gemm_rs_preload_mode(5, 0, 0, 0, 0, 64, 4, 1), 1);
  assert_int_equal(gemm_rs_preload_mode(0, 0, 0, 0, 0, 64, 4, 1), 0);
  /* out of range: the pass */
  assert_int_equal(gemm_rs_preload_mode(6, 0, 0, 1, 0, 64, 4, 1), 0);
  assert_int_equal(gemm_rs_preload_mode(-1, 0, 0, 1, 0, 64, 4, 1), 0);
}

/* A model of the fused GEMM+RS kernel's flag order at 2 ranks (gemm.cuh hooks g and g2, add
 * modes 4 and 5), to check that the order of its waits and releases cannot deadlock. Worker w
 * of W runs tickets w, w + W, ... of 2 T tiles: tickets < T push the peer's tile of that index,
 * tickets >= T are own tile i = ticket - T, which needs the peer's push of index i. The ranks
 * run the same schedule, so the peer's push i is released when this rank's push i is (the
 * one-rank loopback is exactly this). A push's flag is held ("pending") until the start of the
 * worker's next epilogue or its end; an own tile waits for its flag at the tile's start, after
 * releasing its pending flag (release_first; session 6's first version did not). Each round
 * every worker that can moves one step; returns 1 when all finish, 0 on a round without
 * progress (a deadlock). */
static int flag_model_runs(int W, int T, int release_first) {
  enum { START, LOOP, EPI, DONE };
  int *st = calloc((size_t)W, sizeof *st), *k = calloc((size_t)W, sizeof *k), *pend = malloc((size_t)W * sizeof *pend);
  unsigned char *rel = calloc((size_t)T + 1, 1);
  for (int w = 0; w < W; w++) pend[w] = -1;
  int done = 0, ok = 1;
  while (done < W) {
    int moved = 0;
    for (int w = 0; w < W; w++) {
      const int ticket = w + k[w] * W;
      if (st[w] == DONE) continue;
      if (st[w] == START) {
        if (ticket >= 2 * T) { /* after the last tile: the final flush */
          if (pend[w] >= 0) rel[pend[w]] = 1, pend[w] = -1;
          st[w] = DONE, done++, moved = 1;
          continue;
        }
        if (ticket >= T) { /* own tile i: wait for the peer's push i at the start */
          if (release_first && pend[w] >= 0) rel[pend[w]] = 1, pend[w] = -1;
          if (!rel[ticket - T]) continue; /* blocked */
        }
        st[w] = LOOP, moved = 1;
      } else if (st[w] == LOOP) {
        st[w] = EPI, moved = 1;
      } else { /* epilogue: the pending flag first, then this push becomes pending */
        if (pend[w] >= 0) rel[pend[w]] = 1, pend[w] = -1;
        if (ticket < T) pend[w] = ticket;
        k[w]++, st[w] = START, moved = 1;
      }
    }
    if (!moved) {
      ok = 0;
      break;
    }
  }
  free(st), free(k), free(pend), free(rel);
  return ok;
}

static void test_flag_order_model(void **state) {
  (void)state;
  const int ws[] = {1, 2, 3, 4, 7, 8, 16, 33, 64, 132};
  for (size_t a = 0; a < sizeof ws / sizeof ws[0]; a++)
    for (int T = 1; T <= 3 * ws[a] + 2; T++)
      if (!flag_model_runs(ws[a], T, 1)) fail_msg("flag order deadlocks with %d workers and %d own tiles", ws[a], T);
  /* the model sees the bug it guards against: waiting while holding the flag, one wave */
  assert_int_equal(flag_model_runs(132, 132, 0), 0);
  assert_int_equal(flag_model_runs(4, 4, 0), 0);
}

/* The AR copy-phase item order (gemm_ar_item_tile): every source's tiles, each exactly once,
 * for owner blocks that the raster group does and does not divide. */
static void test_ar_item_order(void **state) {
  (void)state;
  for (uint32_t B = 1; B <= 40; B++)
    for (uint32_t tn = 1; tn <= 9; tn++)
      for (uint32_t gi = 0; gi < 5; gi++) {
        const uint32_t gm = (uint32_t[]){1, 3, 8, 16, 32}[gi], own = B * tn;
        for (uint32_t ns = 2; ns <= 7; ns += 5) /* sources (ranks - 1) */
          for (uint32_t minor = 0; minor < 2; minor++) { /* source after source / sources minor */
            unsigned char seen[7 * 40 * 9];
            memset(seen, 0, sizeof seen);
            for (uint32_t item = 0; item < ns * own; item++) {
              int s = -1, tile = -1, s1 = -1, t1 = -1;
              gemm_ar_item_tile(item, own, tn, gm, minor ? ns : 0, &s, &tile);
              assert_int_equal(s, minor ? (int)(item % ns) : (int)(item / own));
              assert_true(tile >= 0 && (uint32_t)tile < own);
              /* sources minor: the same tile order as source after source, each tile once per source */
              gemm_ar_item_tile(minor ? (item / ns) : item % own, own, tn, gm, 0, &s1, &t1);
              assert_int_equal(tile, t1);
              seen[s * own + (uint32_t)tile]++;
            }
            for (uint32_t i = 0; i < ns * own; i++)
              if (seen[i] != 1) fail_msg("B %u tiles_n %u group_m %u sources %u minor %u: tile %u of source %u seen %d times",
                                         B, tn, gm, ns, minor, i % own, i / own, seen[i]);
          }
      }
  /* raster order: the first items are the first group's m-blocks at n-block 0 */
  int s, tile;
  gemm_ar_item_tile(1, 32 * 4, 4, 16, 0, &s, &tile);
  assert_int_equal(tile, 1 * 4 + 0); /* m-block 1, n-block 0 */
  gemm_ar_item_tile(16, 32 * 4, 4, 16, 0, &s, &tile);
  assert_int_equal(tile, 0 * 4 + 1); /* m-block 0, n-block 1 */
  gemm_ar_item_tile(3 * 16 + 2, 32 * 4, 4, 16, 3, &s, &tile); /* 3 sources minor: item 50 = tile 16's source 2 */
  assert_int_equal(s, 2);
  assert_int_equal(tile, 0 * 4 + 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ar_item_order),
      cmocka_unit_test_teardown(test_ileave_plan, unset_order_env),
      cmocka_unit_test(test_preload_mode),
      cmocka_unit_test(test_pf_first),
      cmocka_unit_test(test_early_copy),
      cmocka_unit_test(test_push_mode),
      cmocka_unit_test(test_kernel_variant),
      cmocka_unit_test(test_copy_defer),
      cmocka_unit_test(test_copy_tma),
      cmocka_unit_test(test_push_defer),
      cmocka_unit_test(test_copy_hold),
      cmocka_unit_test(test_flag_order_model),
      cmocka_unit_test(test_rows),
      cmocka_unit_test(test_validation),
      cmocka_unit_test(test_choice),
      cmocka_unit_test_teardown(test_order, unset_order_env),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
