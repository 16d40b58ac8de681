/* test_ag_gemm_plan.c — meld_ag_gemm's plan and argument validation on the CPU: legality of
 * the plan for many shapes and 1..16 ranks (roles fit the SMs, the chunking covers every
 * row of every shard exactly once and maps each GEMM m-block to the flag of the chunk that
 * holds it, workspace size and the out-of-memory sentence), env/hint overrides, and clear
 * errors for bad arguments before any CUDA call. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ag_gemm_plan.h"
#include "device/gemm.cuh" /* gemm_compact_row (plain C part) */
#include "meld.h"

#define FAKE_A ((const void *)(uintptr_t)0x100000)
#define FAKE_B ((const void *)(uintptr_t)0x200000)
#define FAKE_C ((void *)(uintptr_t)0x300000)
#define BIG_WS ((size_t)1 << 40)

static meld_ag_gemm_args_t good_args(int64_t m_loc, int64_t n_loc, int64_t k) {
  meld_ag_gemm_args_t a;
  memset(&a, 0, sizeof a);
  a.a_shard = FAKE_A, a.lda = k, a.b = FAKE_B, a.ldb = k, a.b_layout = MELD_B_NK;
  a.c = FAKE_C, a.ldc = (n_loc + 7) / 8 * 8, a.m_loc = m_loc, a.n_loc = n_loc, a.k = k;
  return a;
}

static void expect_invalid(const meld_ag_gemm_args_t *a, int nranks, const char *needle) {
  meld_result_t r = ag_gemm_validate(a, nranks);
  assert_int_not_equal(r, MELD_OK);
  if (!strstr(meld_last_error(), needle)) fail_msg("message \"%s\" lacks \"%s\"", meld_last_error(), needle);
}

static void test_validation(void **state) {
  (void)state;
  meld_ag_gemm_args_t a = good_args(1000, 1000, 4104);
  assert_int_equal(ag_gemm_validate(&a, 2), MELD_OK);
  expect_invalid(NULL, 2, "args is NULL");
  a.k = 4100;
  a.lda = a.ldb = 4104;
  expect_invalid(&a, 2, "k 4100 is not a multiple of 8");
  a = good_args(1000, 1000, 4104);
  a.a_shard = NULL;
  expect_invalid(&a, 2, "a_shard is NULL");
  a = good_args(1000, 1000, 4104);
  a.c = (void *)(uintptr_t)0x300008;
  expect_invalid(&a, 2, "not 16-byte aligned");
  a = good_args(1000, 1000, 4104);
  a.lda = 4000;
  expect_invalid(&a, 2, "lda 4000 is smaller than k");
  a = good_args(1000, 1000, 4104);
  a.ldc = 1004;
  expect_invalid(&a, 2, "ldc 1004 is not a multiple of 8");
  a = good_args(1000, 1000, 4104);
  a.b_layout = MELD_B_KN;
  a.ldb = 1000;
  assert_int_equal(ag_gemm_validate(&a, 2), MELD_OK);
  a.ldb = 996;
  expect_invalid(&a, 2, "ldb 996 is smaller than n_loc");
  a = good_args(1000, 1000, 4104);
  a.a_gathered = FAKE_C;
  a.ld_gathered = 8;
  expect_invalid(&a, 2, "ld_gathered 8 is smaller than k");
  a = good_args(1000, 1000, 4104);
  a.b_layout = (meld_b_layout_t)7;
  expect_invalid(&a, 2, "b_layout 7");
  a = good_args(-1, 1000, 4104);
  expect_invalid(&a, 2, "must be >= 0");
  a = good_args(1000, 1000, 4104);
  expect_invalid(&a, 0, "ranks");
  expect_invalid(&a, AG_GEMM_MAX_RANKS + 1, "ranks");
  a = good_args((int64_t)1 << 30, 1000, 4104);
  expect_invalid(&a, 4, "< 2^31");
  /* Empty: nothing is needed. */
  a = good_args(0, 1000, 4104);
  a.a_shard = NULL, a.b = NULL, a.c = NULL;
  assert_int_equal(ag_gemm_validate(&a, 2), MELD_OK);
  assert_true(ag_gemm_is_empty(&a));
  /* The public entry rejects a NULL comm before anything else. */
  a = good_args(1000, 1000, 4104);
  assert_int_equal(meld_ag_gemm(NULL, &a, 0), MELD_ERR_INVALID_ARG);
  assert_non_null(strstr(meld_last_error(), "comm is NULL"));
}

/* Comm warps: no comm CTAs, no stream-K extra tiles; the pieces of every chunk cover its real
 * rows' bytes exactly once (pieces past them are empty), each piece at most
 * AG_GEMM_SIDE_PIECE bytes per row and a whole number of 16-byte vectors. */
static void check_side_pieces(const ag_gemm_plan_t *p) {
  assert_int_equal(p->comm_ctas, 0);
  assert_int_equal(p->sk_extra, 0);
  assert_true(p->side_pieces >= 1 && p->side_pieces < MELD_STAMP_SEQ_MAX);
  assert_true(p->side_rows >= 1 && p->side_ppr >= 1 && (p->side_rows == 1 || p->side_ppr == 1));
  const int64_t rb = p->k * 2;
  for (int64_t j = 0; j < p->chunks_per_rank; j++) {
    int64_t r0, real;
    ag_gemm_chunk_rows(p, j, &r0, &real);
    int64_t covered = 0;
    int64_t next_row = r0, next_c = 0; /* pieces come in row-major order */
    for (int q = 0; q < (int)p->side_pieces; q++) {
      int64_t row0, c0, clen;
      int rows;
      ag_gemm_side_piece(p->chunk_rows, p->m_loc, p->k, p->side_rows, p->side_ppr, j, q, &row0, &rows, &c0, &clen);
      if (rows <= 0) continue;
      assert_true(clen > 0 && clen <= AG_GEMM_SIDE_PIECE && clen % 16 == 0 && c0 % 16 == 0);
      assert_true((int64_t)rows * clen <= AG_GEMM_SIDE_PIECE || p->side_rows == 1);
      if (row0 != next_row || c0 != next_c)
        fail_msg("chunk %lld piece %d: row %lld col %lld, expected row %lld col %lld", (long long)j, q, (long long)row0,
                 (long long)c0, (long long)next_row, (long long)next_c);
      assert_true(row0 + rows <= r0 + real);
      covered += (int64_t)rows * clen;
      next_c = c0 + clen;
      if (next_c == rb) next_row = row0 + rows, next_c = 0;
    }
    assert_int_equal(covered, real * rb);
  }
}

/* Legality for one (shape, P, SMs): every row covered once, flags consistent, roles fit. */
static void check_plan(int64_t m_loc, int64_t n_loc, int64_t k, int P, int sms, const ag_gemm_hint_t *hint) {
  meld_ag_gemm_args_t a = good_args(m_loc, n_loc, k);
  ag_gemm_plan_t p;
  meld_result_t r = ag_gemm_plan_make(&a, P, sms, BIG_WS, hint, &p);
  if (r != MELD_OK) fail_msg("m_loc %lld P %d: %s", (long long)m_loc, P, meld_last_error());
  assert_int_equal(p.nranks, P);
  if (P == 1) {
    assert_int_equal(p.schedule, AG_GEMM_DIRECT);
    return;
  }
  if (p.schedule != AG_GEMM_FUSED) return;
  if (p.comm_warps) check_side_pieces(&p);
  else assert_true(p.comm_ctas >= 1 && p.comm_ctas < p.grid && p.grid <= sms);
  assert_true(p.m_loc_pad % 128 == 0 && p.m_loc_pad >= m_loc && p.m_loc_pad - m_loc < 128);
  assert_true(p.chunk_rows % 128 == 0 && p.m_loc_pad % p.chunk_rows == 0);
  assert_int_equal(p.compact, m_loc % 128 != 0);
  assert_int_equal(p.ws_bytes, (size_t)P * (size_t)p.m_loc_pad * (size_t)k * 2);
  assert_int_equal(p.signal_slots, (size_t)P * (size_t)p.chunks_per_rank);
  /* Chunks cover [0, m_loc) exactly once, in order. */
  unsigned char *seen = calloc((size_t)m_loc, 1);
  assert_non_null(seen);
  int64_t next = 0;
  for (int64_t j = 0; j < p.chunks_per_rank; j++) {
    int64_t r0, rows;
    ag_gemm_chunk_rows(&p, j, &r0, &rows);
    assert_int_equal(r0, j * p.chunk_rows);
    assert_true(rows >= 0 && rows <= p.chunk_rows);
    if (rows) assert_int_equal(r0, next);
    for (int64_t i = 0; i < rows; i++) {
      assert_int_equal(seen[r0 + i], 0);
      seen[r0 + i] = 1;
    }
    next = r0 + rows;
  }
  for (int64_t i = 0; i < m_loc; i++) assert_int_equal(seen[i], 1);
  free(seen);
  /* Every GEMM m-block of the staging waits on the flag of the chunk holding its rows. */
  const int64_t mb_per_rank = p.m_loc_pad / 128;
  for (int r = 0; r < P; r++)
    for (int64_t b = 0; b < mb_per_rank; b++) {
      const int64_t mb = r * mb_per_rank + b, j = b * 128 / p.chunk_rows;
      assert_int_equal(ag_gemm_flag_of_mblock(&p, mb), ag_gemm_flag_of_chunk(&p, r, j));
    }
}

static void test_plan_legality(void **state) {
  (void)state;
  const int64_t mlocs[] = {1, 100, 127, 128, 129, 500, 1000, 1024, 2048, 3000, 4096, 8192, 16384 / 3};
  const int64_t ns[] = {1, 1000, 5120, 28672};
  const int64_t ks[] = {8, 4104, 8192};
  const int sms[] = {8, 78, 132};
  for (int P = 1; P <= 16; P++)
    for (size_t i = 0; i < sizeof mlocs / sizeof *mlocs; i++)
      for (size_t j = 0; j < sizeof ns / sizeof *ns; j++)
        for (size_t q = 0; q < sizeof ks / sizeof *ks; q++)
          for (size_t s = 0; s < sizeof sms / sizeof *sms; s++) check_plan(mlocs[i], ns[j], ks[q], P, sms[s], NULL);
  /* Forced chunk sizes: rounded down to a divisor of the padded shard. */
  ag_gemm_hint_t h = AG_GEMM_HINT_INIT;
  const int64_t chunks[] = {128, 256, 384, 1024, 4096};
  for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++) {
    h.chunk_rows = chunks[c];
    for (int P = 2; P <= 16; P += 3)
      for (size_t i = 0; i < sizeof mlocs / sizeof *mlocs; i++) check_plan(mlocs[i], 1000, 4104, P, 132, &h);
  }
  h = (ag_gemm_hint_t)AG_GEMM_HINT_INIT;
  h.comm_ctas = 7;
  h.schedule = AG_GEMM_FUSED;
  check_plan(100, 1000, 4104, 2, 132, &h); /* fused forced on a tiny shard */
}

/* Compact rows as the fused kernel sets them (epi.rows_per_owner = m_loc_pad, rows_valid =
 * m_loc where the plan is compact): every tile row of the padded row space maps to its dense
 * row (the gathered fp8 per-row scales' index) or to -1 for padding, each dense row exactly
 * once, in rank order. */
static void test_compact_rows(void **state) {
  (void)state;
  const int64_t mls[] = {200, 100, 128, 1, 300};
  for (int P = 1; P <= 8; P *= 2)
    for (int i = 0; i < 5; i++) {
      meld_ag_gemm_args_t a = good_args(mls[i], 512, 1024);
      ag_gemm_plan_t p;
      assert_int_equal(ag_gemm_plan_make(&a, P, 132, BIG_WS, NULL, &p), MELD_OK);
      assert_int_equal(p.compact, mls[i] % 128 != 0);
      gemm_epilogue_hook_t e;
      memset(&e, 0, sizeof e);
      if (p.compact) e.rows_per_owner = (int32_t)p.m_loc_pad, e.rows_valid = (int32_t)p.m_loc;
      int64_t next = 0;
      for (int r = 0; r < (int)(P * p.m_loc_pad); r++) {
        const int d = gemm_compact_row(&e, r);
        const int64_t q = r / p.m_loc_pad, li = r % p.m_loc_pad;
        if (li < mls[i]) {
          assert_int_equal(d, next); /* dense, in order: rank q's row li */
          assert_int_equal(d, q * mls[i] + li);
          next++;
        } else {
          assert_int_equal(d, -1);
        }
      }
      assert_int_equal(next, P * mls[i]);
    }
}

/* The GEMM's tile width (hint / MELD_AG_GEMM_TILE_N, else the default); 320 turns stream-K and
 * the deferred epilogue off, needs B [N,K] and the TMA epilogue (not compact), is refused with a
 * stream-K hint, and is outranked by a stream-K hint when only the env asked for it. The
 * default takes 320 where meld_gemm's rule does (fused, B [N,K], not compact). */
static void test_plan_tile_n(void **state) {
  (void)state;
  ag_gemm_plan_t p;
  /* the default: meld_gemm's rule (M = 2048, N_loc = 5120: 1.94 vs 2.42 waves), fused only */
  meld_ag_gemm_args_t a = good_args(1024, 5120, 8192);
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, NULL, &p), MELD_OK);
  assert_int_equal(p.tile_n, 320);
  assert_int_equal(p.stream_k, 0);
  assert_int_equal(p.epi_defer, 0);
  const int64_t not_wide[][3] = {{4096, 5120, 8192}, {1024, 28672, 8192}, {4096, 14336, 4096}, {8192, 5120, 8192}};
  for (int i = 0; i < 4; i++) { /* the suite's other shapes at P = 2 keep 128 x 256 */
    meld_ag_gemm_args_t o = good_args(not_wide[i][0], not_wide[i][1], not_wide[i][2]);
    assert_int_equal(ag_gemm_plan_make(&o, 2, 132, BIG_WS, NULL, &p), MELD_OK);
    assert_int_equal(p.tile_n, 256);
  }
  ag_gemm_hint_t h = AG_GEMM_HINT_INIT;
  h.stream_k = 1; /* a stream-K request keeps 128 x 256 (hint or env) */
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, &h, &p), MELD_OK);
  assert_int_equal(p.tile_n, 256);
  assert_int_equal(p.stream_k, 1);
  setenv("MELD_AG_GEMM_STREAM_K", "2", 1);
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, NULL, &p), MELD_OK);
  assert_int_equal(p.tile_n, 256);
  assert_int_equal(p.stream_k, 1);
  setenv("MELD_AG_GEMM_STREAM_K", "0", 1);
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, NULL, &p), MELD_OK);
  assert_int_equal(p.tile_n, 320);
  unsetenv("MELD_AG_GEMM_STREAM_K");
  setenv("MELD_AG_GEMM_TILE_N", "256", 1);
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, NULL, &p), MELD_OK);
  assert_int_equal(p.tile_n, 256);
  assert_int_equal(p.stream_k, 1);
  unsetenv("MELD_AG_GEMM_TILE_N");
  h = (ag_gemm_hint_t)AG_GEMM_HINT_INIT;
  h.tile_n = 256;
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, &h, &p), MELD_OK);
  assert_int_equal(p.tile_n, 256);
  h.tile_n = 320;
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, &h, &p), MELD_OK);
  assert_int_equal(p.tile_n, 320);
  assert_int_equal(p.stream_k, 0);
  assert_int_equal(p.epi_defer, 0);
  assert_int_equal(p.sk_pieces + p.sk_extra, 0);
  char buf[512];
  ag_gemm_plan_format(&p, buf, sizeof buf);
  assert_non_null(strstr(buf, "tile_n=320"));
  h.tile_n = 288;
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, &h, &p), MELD_ERR_INVALID_ARG);
  assert_non_null(strstr(meld_last_error(), "tile_n 288"));
  h.tile_n = 320, h.stream_k = 1;
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, &h, &p), MELD_ERR_INVALID_ARG);
  assert_non_null(strstr(meld_last_error(), "no stream-K"));
  h.stream_k = -1;
  meld_ag_gemm_args_t kn = a;
  kn.b_layout = MELD_B_KN, kn.ldb = kn.n_loc;
  assert_int_equal(ag_gemm_plan_make(&kn, 2, 132, BIG_WS, &h, &p), MELD_ERR_INVALID_ARG);
  assert_non_null(strstr(meld_last_error(), "B [N,K]"));
  meld_ag_gemm_args_t odd = good_args(1000, 5120, 8192); /* compact epilogue: stays 256 */
  assert_int_equal(ag_gemm_plan_make(&odd, 2, 132, BIG_WS, &h, &p), MELD_OK);
  assert_int_equal(p.tile_n, 256);
  assert_int_equal(ag_gemm_plan_make(&a, 1, 132, BIG_WS, &h, &p), MELD_OK); /* one rank: meld_gemm */
  assert_int_equal(p.schedule, AG_GEMM_DIRECT);
  assert_int_equal(p.tile_n, 256);
  setenv("MELD_AG_GEMM_TILE_N", "320", 1);
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, NULL, &p), MELD_OK);
  assert_int_equal(p.tile_n, 320);
  assert_int_equal(ag_gemm_plan_make(&kn, 2, 132, BIG_WS, NULL, &p), MELD_OK); /* B [K,N]: the env yields */
  assert_int_equal(p.tile_n, 256);
  h = (ag_gemm_hint_t)AG_GEMM_HINT_INIT;
  h.stream_k = 1; /* a stream-K hint outranks the env's width */
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, &h, &p), MELD_OK);
  assert_int_equal(p.tile_n, 256);
  assert_int_equal(p.stream_k, 1);
  setenv("MELD_AG_GEMM_TILE_N", "300", 1);
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, NULL, &p), MELD_ERR_INVALID_ARG);
  assert_non_null(strstr(meld_last_error(), "MELD_AG_GEMM_TILE_N"));
  unsetenv("MELD_AG_GEMM_TILE_N");
}

/* Ranks on several nodes: the unfused schedule (its all-gather crosses nodes through the
 * collectives' inter-node path); a fused schedule asked for is refused with a sentence, and a
 * workspace too small for the fused staging does not matter there. */
static void test_plan_nodes(void **state) {
  (void)state;
  ag_gemm_plan_t p;
  meld_ag_gemm_args_t a = good_args(4096, 5120, 8192);
  assert_int_equal(ag_gemm_plan_make_nodes(&a, 2, 1, 132, BIG_WS, NULL, &p), MELD_OK);
  assert_int_equal(p.schedule, AG_GEMM_FUSED);
  assert_int_equal(ag_gemm_plan_make_nodes(&a, 4, 2, 132, BIG_WS, NULL, &p), MELD_OK);
  assert_int_equal(p.schedule, AG_GEMM_UNFUSED);
  assert_int_equal(ag_gemm_plan_make_nodes(&a, 2, 2, 132, 1 << 20, NULL, &p), MELD_OK);
  assert_int_equal(p.schedule, AG_GEMM_UNFUSED);
  ag_gemm_hint_t h = AG_GEMM_HINT_INIT;
  h.schedule = AG_GEMM_FUSED;
  assert_int_equal(ag_gemm_plan_make_nodes(&a, 2, 2, 132, BIG_WS, &h, &p), MELD_ERR_UNSUPPORTED);
  assert_non_null(strstr(meld_last_error(), "the fused schedule is intra-node; the ranks span 2 nodes"));
  setenv("MELD_SCHEDULE", "fused", 1);
  assert_int_equal(ag_gemm_plan_make_nodes(&a, 2, 2, 132, BIG_WS, NULL, &p), MELD_ERR_UNSUPPORTED);
  setenv("MELD_SCHEDULE", "unfused", 1);
  assert_int_equal(ag_gemm_plan_make_nodes(&a, 2, 2, 132, BIG_WS, NULL, &p), MELD_OK);
  assert_int_equal(p.schedule, AG_GEMM_UNFUSED);
  unsetenv("MELD_SCHEDULE");
}

static void test_plan_choices(void **state) {
  (void)state;
  ag_gemm_plan_t p;
  meld_ag_gemm_args_t a = good_args(4096, 5120, 8192);
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, NULL, &p), MELD_OK);
  assert_int_equal(p.schedule, AG_GEMM_FUSED);
  assert_int_equal(p.compact, 0);
  assert_int_equal(p.chunk_rows, 128);
  assert_int_equal(p.inplace, 1);
  assert_int_equal(p.group_m, 16); /* 32 own m-blocks: groups of 16 */
  assert_true(p.comm_ctas >= 8);
  /* At least 8 comm CTAs whatever N (run 2's heuristic gave 2 at N_loc = 28672), 128-row
   * chunks, and a raster group holding own m-blocks only. */
  const int64_t suite[][3] = {{1024, 5120, 8192},  {4096, 5120, 8192},  {8192, 5120, 8192},
                              {1024, 28672, 8192}, {4096, 28672, 8192}, {8192, 28672, 8192},
                              {1024, 14336, 4096}, {4096, 14336, 4096}, {8192, 14336, 4096}};
  for (int i = 0; i < 9; i++) {
    a = good_args(suite[i][0], suite[i][1], suite[i][2]);
    assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, NULL, &p), MELD_OK);
    assert_int_equal(p.schedule, AG_GEMM_FUSED);
    assert_true(p.comm_ctas >= 8 && p.comm_ctas <= 16);
    assert_int_equal(p.chunk_rows, 128);
    assert_int_equal((p.m_loc_pad / 128) % p.group_m, 0);
  }
  a = good_args(1024, 5120, 8192);
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, NULL, &p), MELD_OK);
  assert_int_equal(p.group_m, 8);
  /* stream-K: by default at P > 1 where meld_gemm's rule takes it (last wave 10..62% full,
   * >= 48 k-blocks) and the GEMM has < 4 waves: 320 tiles (L/W 0.42, 2.4 waves): yes; 1792
   * tiles (13.6 waves): only with MELD_AG_GEMM_STREAM_K=2 (meld_gemm's rule alone); 1280
   * tiles (L/W 0.70): no; 64 tiles, below one wave: no; =0 off; hint 0 / 1 force it off / on.
   * (The 128 x 256 tile's rule: at 320 tiles the default width is 320, which has no stream-K:
   * test_plan_tile_n.) */
  setenv("MELD_AG_GEMM_TILE_N", "256", 1);
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, NULL, &p), MELD_OK);
  assert_int_equal(p.stream_k, 1);
  ag_gemm_hint_t hs = AG_GEMM_HINT_INIT;
  setenv("MELD_AG_GEMM_STREAM_K", "0", 1);
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, NULL, &p), MELD_OK);
  assert_int_equal(p.stream_k, 0);
  setenv("MELD_AG_GEMM_STREAM_K", "3", 1);
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, NULL, &p), MELD_ERR_INVALID_ARG);
  setenv("MELD_AG_GEMM_STREAM_K", "2", 1);
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, NULL, &p), MELD_OK);
  assert_int_equal(p.stream_k, 1);
  hs.stream_k = 0;
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, &hs, &p), MELD_OK);
  assert_int_equal(p.stream_k, 0);
  a = good_args(1024, 28672, 8192);
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, NULL, &p), MELD_OK);
  assert_int_equal(p.stream_k, 1); /* meld_gemm's rule: yes at 13.6 waves */
  unsetenv("MELD_AG_GEMM_STREAM_K");
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, NULL, &p), MELD_OK);
  assert_int_equal(p.stream_k, 0); /* the default: not at >= 4 waves */
  a = good_args(1024, 5120, 8192);
  assert_int_equal(ag_gemm_plan_make(&a, 1, 132, BIG_WS, NULL, &p), MELD_OK);
  assert_int_equal(p.stream_k, 0); /* one rank: meld_gemm (DIRECT) */
  a = good_args(4096, 5120, 8192);
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, NULL, &p), MELD_OK);
  assert_int_equal(p.stream_k, 0);
  hs.stream_k = 1;
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, &hs, &p), MELD_OK);
  assert_int_equal(p.stream_k, 1);
  assert_int_equal(p.sk_pieces, 4); /* pieces per stream-K tile from the queue (default) */
  assert_int_equal(p.sk_extra, p.comm_ctas); /* one whole tile per comm CTA into the pieces */
  hs.sk_pieces = 0;                 /* one range per worker */
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, &hs, &p), MELD_OK);
  assert_int_equal(p.sk_pieces, 0);
  assert_int_equal(p.sk_extra, 0);
  hs.sk_pieces = -1, hs.stream_k = 2; /* over one full + the partial wave */
  setenv("MELD_AG_GEMM_SK_PIECES", "8", 1);
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, &hs, &p), MELD_OK);
  assert_int_equal(p.stream_k, 2);
  assert_int_equal(p.sk_pieces, 8);
  setenv("MELD_AG_GEMM_SK_PIECES", "65", 1);
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, &hs, &p), MELD_ERR_INVALID_ARG);
  assert_non_null(strstr(meld_last_error(), "MELD_AG_GEMM_SK_PIECES"));
  unsetenv("MELD_AG_GEMM_SK_PIECES");
  hs.stream_k = 3;
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, &hs, &p), MELD_ERR_INVALID_ARG);
  assert_non_null(strstr(meld_last_error(), "stream_k 3"));
  hs.stream_k = 1, hs.sk_pieces = 65;
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, &hs, &p), MELD_ERR_INVALID_ARG);
  /* a region past the engine's 32-bit partition arithmetic: off by the rule, an error when forced */
  a = good_args(1024, 5120, 1 << 20); /* 320 tiles, 16384 k-blocks */
  setenv("MELD_AG_GEMM_SK_PIECES", "64", 1);
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, (size_t)1 << 40, NULL, &p), MELD_OK);
  assert_int_equal(p.stream_k, 0);
  hs.stream_k = 1, hs.sk_pieces = -1;
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, (size_t)1 << 40, &hs, &p), MELD_ERR_INVALID_ARG);
  assert_non_null(strstr(meld_last_error(), "32-bit"));
  unsetenv("MELD_AG_GEMM_SK_PIECES");
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, (size_t)1 << 40, NULL, &p), MELD_OK);
  assert_int_equal(p.stream_k, 1); /* 4 pieces: (72 x 16384 + 1) x 289 < 2^31 */
  hs.sk_pieces = -1;
  a = good_args(1000, 1000, 4104);
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, &hs, &p), MELD_OK);
  assert_int_equal(p.stream_k, 0); /* 64 tiles: no partial wave to spread */
  unsetenv("MELD_AG_GEMM_TILE_N");
  a = good_args(1000, 1000, 4104); /* 8 padded m-blocks */
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, NULL, &p), MELD_OK);
  assert_int_equal(p.group_m, 8);
  a = good_args(384, 1000, 4104); /* 3 m-blocks: one group */
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, NULL, &p), MELD_OK);
  assert_int_equal(p.group_m, 3);
  ag_gemm_hint_t hi = AG_GEMM_HINT_INIT;
  hi.inplace = 0;
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, &hi, &p), MELD_OK);
  assert_int_equal(p.inplace, 0);
  a = good_args(100, 5120, 8192);
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, NULL, &p), MELD_OK);
  assert_int_equal(p.schedule, AG_GEMM_UNFUSED);
  /* Workspace too small: the sentence names the size to set. */
  a = good_args(4096, 5120, 8192);
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, (size_t)64 << 20, NULL, &p), MELD_ERR_OUT_OF_MEMORY);
  assert_non_null(strstr(meld_last_error(), "MELD_WORKSPACE_BYTES >= 134217728"));
  /* Environment overrides, then the hint. */
  setenv("MELD_COMM_CTAS", "5", 1);
  setenv("MELD_CHUNK_BYTES", "4M", 1); /* 256 rows of k = 8192 */
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, NULL, &p), MELD_OK);
  assert_int_equal(p.comm_ctas, 5);
  assert_int_equal(p.chunk_rows, 256);
  ag_gemm_hint_t h = AG_GEMM_HINT_INIT;
  h.comm_ctas = 9;
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, &h, &p), MELD_OK);
  assert_int_equal(p.comm_ctas, 9);
  setenv("MELD_COMM_CTAS", "200", 1);
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, NULL, &p), MELD_ERR_INVALID_ARG);
  unsetenv("MELD_COMM_CTAS");
  unsetenv("MELD_CHUNK_BYTES");
  setenv("MELD_SCHEDULE", "sideways", 1);
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, NULL, &p), MELD_ERR_INVALID_ARG);
  setenv("MELD_SCHEDULE", "unfused", 1);
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, NULL, &p), MELD_OK);
  assert_int_equal(p.schedule, AG_GEMM_UNFUSED);
  unsetenv("MELD_SCHEDULE");
  /* Illegal hints. */
  h = (ag_gemm_hint_t)AG_GEMM_HINT_INIT;
  h.comm_ctas = 132;
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, &h, &p), MELD_ERR_INVALID_ARG);
  assert_non_null(strstr(meld_last_error(), "comm CTAs"));
  h = (ag_gemm_hint_t)AG_GEMM_HINT_INIT;
  h.chunk_rows = 100;
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, &h, &p), MELD_ERR_INVALID_ARG);
  h = (ag_gemm_hint_t)AG_GEMM_HINT_INIT;
  h.schedule = AG_GEMM_DIRECT;
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, &h, &p), MELD_ERR_INVALID_ARG);
  /* One rank: DIRECT by default; FUSED on request (the fused kernel, nothing to gather) is a
   * legal plan with the deferred epilogue on; UNFUSED is refused. */
  h = (ag_gemm_hint_t)AG_GEMM_HINT_INIT;
  assert_int_equal(ag_gemm_plan_make(&a, 1, 132, BIG_WS, &h, &p), MELD_OK);
  assert_int_equal(p.schedule, AG_GEMM_DIRECT);
  h.schedule = AG_GEMM_FUSED;
  if (ag_gemm_plan_make(&a, 1, 132, BIG_WS, &h, &p) != MELD_OK) fail_msg("one rank, FUSED: %s", meld_last_error());
  assert_int_equal(p.schedule, AG_GEMM_FUSED);
  assert_int_equal(p.epi_defer, 1);
  assert_true(p.comm_ctas >= 1 && p.comm_ctas < p.grid);
  h.epi_defer = 0;
  assert_int_equal(ag_gemm_plan_make(&a, 1, 132, BIG_WS, &h, &p), MELD_OK);
  assert_int_equal(p.epi_defer, 0);
  h.schedule = AG_GEMM_UNFUSED;
  assert_int_equal(ag_gemm_plan_make(&a, 1, 132, BIG_WS, &h, &p), MELD_ERR_INVALID_ARG);
  /* compact shards (m_loc % 128 != 0) store C without TMA: no deferred epilogue */
  meld_ag_gemm_args_t ac = good_args(1000, 1000, 4104);
  assert_int_equal(ag_gemm_plan_make(&ac, 2, 132, BIG_WS, NULL, &p), MELD_OK);
  assert_int_equal(p.schedule, AG_GEMM_FUSED);
  assert_int_equal(p.epi_defer, 0);
  /* The hash depends on what ranks must agree on, not on n_loc. */
  ag_gemm_plan_t p2;
  meld_ag_gemm_args_t b = good_args(4096, 1000, 8192);
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, NULL, &p), MELD_OK);
  assert_int_equal(ag_gemm_plan_make(&b, 2, 132, BIG_WS, NULL, &p2), MELD_OK);
  assert_int_equal(ag_gemm_arg_hash(&p), ag_gemm_arg_hash(&p2));
  b = good_args(4096, 5120, 8184);
  assert_int_equal(ag_gemm_plan_make(&b, 2, 132, BIG_WS, NULL, &p2), MELD_OK);
  assert_int_not_equal(ag_gemm_arg_hash(&p), ag_gemm_arg_hash(&p2));
  /* meld_ag_gemm_fp8's bf16 view of K 2k equals meld_ag_gemm's call of K k: the dtype tells
   * them apart (a rank of each fails the handshake instead of gathering mixed rows) */
  p2 = p;
  p2.fp8 = 1;
  assert_int_not_equal(ag_gemm_arg_hash(&p), ag_gemm_arg_hash(&p2));
}

/* Comm warps (hint / MELD_AG_GEMM_COMM_WARPS): legal plans over shapes (rows shorter and
 * longer than a piece, tails, strided chunks); off where a_gathered is asked for or the schedule
 * is not fused; a hint with a_gathered or out of range is refused with a sentence. */
static void test_plan_comm_warps(void **state) {
  (void)state;
  ag_gemm_hint_t h = AG_GEMM_HINT_INIT;
  h.comm_warps = 1;
  const int64_t mlocs[] = {1, 127, 129, 1000, 1024, 4096};
  const int64_t ks[] = {8, 1024, 4104, 8192, 16384, 20000};
  const int64_t chunks[] = {0, 256, 1024};
  for (int P = 2; P <= 8; P += 3)
    for (size_t i = 0; i < sizeof mlocs / sizeof *mlocs; i++)
      for (size_t q = 0; q < sizeof ks / sizeof *ks; q++)
        for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++) {
          h.chunk_rows = chunks[c];
          h.schedule = AG_GEMM_FUSED;
          check_plan(mlocs[i], 1000, ks[q], P, 132, &h);
          ag_gemm_plan_t p;
          meld_ag_gemm_args_t a = good_args(mlocs[i], 1000, ks[q]);
          assert_int_equal(ag_gemm_plan_make(&a, P, 132, BIG_WS, &h, &p), MELD_OK);
          assert_int_equal(p.comm_warps, 1);
        }
  /* 16 KB rows: two per piece; 40000-byte rows: two pieces each */
  ag_gemm_plan_t p;
  meld_ag_gemm_args_t a = good_args(4096, 5120, 8192);
  h = (ag_gemm_hint_t)AG_GEMM_HINT_INIT;
  h.comm_warps = 1;
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, &h, &p), MELD_OK);
  assert_int_equal(p.side_rows, 2);
  assert_int_equal(p.side_ppr, 1);
  assert_int_equal(p.side_pieces, p.chunk_rows / 2);
  a = good_args(4096, 5120, 20000);
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, &h, &p), MELD_OK);
  assert_int_equal(p.side_rows, 1);
  assert_int_equal(p.side_ppr, 2);
  /* the default: comm CTAs; the environment asks for warps */
  a = good_args(4096, 5120, 8192);
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, NULL, &p), MELD_OK);
  assert_int_equal(p.comm_warps, 0);
  assert_true(p.comm_ctas >= 1);
  setenv("MELD_AG_GEMM_COMM_WARPS", "1", 1);
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, NULL, &p), MELD_OK);
  assert_int_equal(p.comm_warps, 1);
  assert_int_equal(p.comm_ctas, 0);
  /* ... nor where this rank computes nothing (n_loc 0: no GEMM CTA would push its shard) */
  meld_ag_gemm_args_t none = a;
  none.n_loc = 0;
  assert_int_equal(ag_gemm_plan_make(&none, 2, 132, BIG_WS, NULL, &p), MELD_OK);
  assert_int_equal(p.comm_warps, 0);
  if (p.schedule == AG_GEMM_FUSED) assert_true(p.comm_ctas >= 1);
  /* ... but not with a_gathered (comm CTAs write it), nor unfused */
  a.a_gathered = FAKE_C, a.ld_gathered = a.k;
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, NULL, &p), MELD_OK);
  assert_int_equal(p.comm_warps, 0);
  assert_true(p.comm_ctas >= 1);
  meld_ag_gemm_args_t tiny = good_args(100, 300, 512);
  assert_int_equal(ag_gemm_plan_make(&tiny, 2, 132, BIG_WS, NULL, &p), MELD_OK);
  assert_int_equal(p.schedule, AG_GEMM_UNFUSED);
  assert_int_equal(p.comm_warps, 0);
  setenv("MELD_AG_GEMM_COMM_WARPS", "2", 1);
  assert_int_equal(ag_gemm_plan_make(&tiny, 2, 132, BIG_WS, NULL, &p), MELD_ERR_INVALID_ARG);
  assert_non_null(strstr(meld_last_error(), "MELD_AG_GEMM_COMM_WARPS"));
  unsetenv("MELD_AG_GEMM_COMM_WARPS");
  /* the hint: refused with a_gathered, out of range */
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, &h, &p), MELD_ERR_INVALID_ARG);
  assert_non_null(strstr(meld_last_error(), "a_gathered"));
  h.comm_warps = 3;
  a.a_gathered = NULL;
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, &h, &p), MELD_ERR_INVALID_ARG);
  assert_non_null(strstr(meld_last_error(), "comm_warps 3"));
  /* more pieces in a call than a 32-bit index holds (2^19 pieces per chunk of 2^26-element rows,
   * 2049 chunks per rank): refused with a sentence, not wrapped on the device */
  h.comm_warps = 1;
  meld_ag_gemm_args_t huge = good_args(2049 * 128, 1000, (int64_t)1 << 26);
  assert_int_equal(ag_gemm_plan_make(&huge, 2, 132, BIG_WS, &h, &p), MELD_ERR_INVALID_ARG);
  assert_non_null(strstr(meld_last_error(), "32-bit piece index"));
  /* a legal plan with comm CTAs fails the check as a comm-warp plan, and vice versa */
  h.comm_warps = 0;
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, &h, &p), MELD_OK);
  p.comm_warps = 1;
  assert_int_equal(ag_gemm_plan_check(&p, 132, BIG_WS), MELD_ERR_INVALID_ARG);
  h.comm_warps = 1;
  assert_int_equal(ag_gemm_plan_make(&a, 2, 132, BIG_WS, &h, &p), MELD_OK);
  p.comm_warps = 0;
  assert_int_equal(ag_gemm_plan_check(&p, 132, BIG_WS), MELD_ERR_INVALID_ARG);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_plan_comm_warps),
      cmocka_unit_test(test_validation),
      cmocka_unit_test(test_plan_legality),
      cmocka_unit_test(test_plan_choices),
      cmocka_unit_test(test_plan_nodes),
      cmocka_unit_test(test_plan_tile_n),
      cmocka_unit_test(test_compact_rows),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
