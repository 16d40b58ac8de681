/* test_gemm_args.c — meld_gemm argument validation (CPU only: bad arguments are rejected
 * before any CUDA call, with a sentence naming the problem). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cuda_runtime_api.h>

#include "device/gemm.cuh"
#include "gemm_plan.h"
#include "meld.h"

/* Fake, 16-byte aligned device addresses: validation must never dereference them. */
#define FAKE_A ((const void *)(uintptr_t)0x100000)
#define FAKE_B ((const void *)(uintptr_t)0x200000)
#define FAKE_C ((void *)(uintptr_t)0x300000)

static meld_gemm_args_t good_args(void) {
  meld_gemm_args_t a;
  memset(&a, 0, sizeof a);
  a.a = FAKE_A;
  a.b = FAKE_B;
  a.c = FAKE_C;
  a.m = 1000;
  a.n = 2000;
  a.k = 4104;
  a.lda = 4104;
  a.ldb = 4104;
  a.ldc = 2000;
  a.b_layout = MELD_B_NK;
  return a;
}

/* Expects MELD_ERR_INVALID_ARG and a message containing `needle`. */
static void expect_invalid(const meld_gemm_args_t *a, const char *needle) {
  meld_result_t r = meld_gemm(a, 0);
  assert_int_equal(r, MELD_ERR_INVALID_ARG);
  if (!strstr(meld_last_error(), needle)) fail_msg("message \"%s\" lacks \"%s\"", meld_last_error(), needle);
}

static void test_null_args(void **state) {
  (void)state;
  expect_invalid(NULL, "args is NULL");
}

static void test_null_pointers(void **state) {
  (void)state;
  meld_gemm_args_t a = good_args();
  a.a = NULL;
  expect_invalid(&a, "meld_gemm: a is NULL");
  a = good_args();
  a.b = NULL;
  expect_invalid(&a, "meld_gemm: b is NULL");
  a = good_args();
  a.c = NULL;
  expect_invalid(&a, "meld_gemm: c is NULL");
}

static void test_dims(void **state) {
  (void)state;
  meld_gemm_args_t a = good_args();
  a.k = 0;
  expect_invalid(&a, "k 0 < 1");
  a = good_args();
  a.m = -1;
  expect_invalid(&a, "must be >= 0");
  a = good_args();
  a.n = -5;
  expect_invalid(&a, "must be >= 0");
  a = good_args();
  a.m = (int64_t)1 << 31;
  expect_invalid(&a, "< 2^31");
  a = good_args();
  a.b_layout = (meld_b_layout_t)7;
  expect_invalid(&a, "b_layout 7");
  a = good_args();
  a.sm_count = -1;
  expect_invalid(&a, "sm_count -1");
}

static void test_alignment(void **state) {
  (void)state;
  meld_gemm_args_t a = good_args();
  a.a = (const char *)FAKE_A + 2;
  expect_invalid(&a, "is not 16-byte aligned");
  a = good_args();
  a.c = (char *)FAKE_C + 8;
  expect_invalid(&a, "c 0x300008 is not 16-byte aligned");
  a = good_args();
  a.lda = 4108;
  expect_invalid(&a, "lda 4108 is not a multiple of 8 (rows must start on 16-byte boundaries for TMA)");
  a = good_args();
  a.ldc = 2004;
  expect_invalid(&a, "ldc 2004 is not a multiple of 8");
}

static void test_leading_dims(void **state) {
  (void)state;
  meld_gemm_args_t a = good_args();
  a.lda = 4096;
  expect_invalid(&a, "lda 4096 is smaller than k 4104");
  a = good_args();
  a.ldc = 1992;
  expect_invalid(&a, "ldc 1992 is smaller than n 2000");
  a = good_args();
  a.b_layout = MELD_B_KN; /* B [K,N]: ldb must cover n */
  a.ldb = 1000;
  expect_invalid(&a, "ldb 1000 is smaller than n (B is [K,N]) 2000");
  a = good_args();
  a.ldb = 4096;
  expect_invalid(&a, "ldb 4096 is smaller than k (B is [N,K]) 4104");
}

static void test_empty_is_noop(void **state) {
  (void)state;
  meld_gemm_args_t a = good_args();
  a.m = 0;
  a.a = NULL; /* unused when there is nothing to compute */
  assert_int_equal(meld_gemm(&a, 0), MELD_OK);
  a = good_args();
  a.n = 0;
  assert_int_equal(meld_gemm(&a, 0), MELD_OK);
}

/* Valid arguments on a machine without a GPU: a CUDA or "unsupported" error, never a crash.
 * (Skipped where a GPU exists: the fake pointers must not reach a kernel.) */
static void test_no_device(void **state) {
  (void)state;
  int n = 0;
  if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0) skip();
  meld_gemm_args_t a = good_args();
  meld_result_t r = meld_gemm(&a, 0);
  assert_true(r == MELD_ERR_CUDA || r == MELD_ERR_UNSUPPORTED);
  assert_true(strlen(meld_last_error()) > 0);
}

/* The fp8 entry points refuse bad arguments before any CUDA call, with their own names and
 * fp8 terms (k and leading dimensions multiples of 16, not the bf16 view's 8); the fused ones
 * check k before the comm (NULL here). */
static void expect_fp8(meld_result_t r, const char *needle) {
  assert_int_equal(r, MELD_ERR_INVALID_ARG);
  if (!strstr(meld_last_error(), needle)) fail_msg("message \"%s\" lacks \"%s\"", meld_last_error(), needle);
}
static void test_fp8_args(void **state) {
  (void)state;
  meld_gemm_fp8_args_t g;
  memset(&g, 0, sizeof g);
  g.a = FAKE_A, g.b = FAKE_B, g.c = FAKE_C, g.m = 64, g.n = 64, g.k = 256, g.lda = 256, g.ldb = 256, g.ldc = 64;
  expect_fp8(meld_gemm_fp8(NULL, 0), "meld_gemm_fp8: args is NULL");
  meld_gemm_fp8_args_t x = g;
  x.k = 200; /* a multiple of 8 (the bf16 view would take it), not of 16 */
  expect_fp8(meld_gemm_fp8(&x, 0), "meld_gemm_fp8: k 200 is not a positive multiple of 16");
  x = g, x.lda = 264;
  expect_fp8(meld_gemm_fp8(&x, 0), "lda 264 and ldb 256 must be >= k 256 and multiples of 16");
  x = g, x.ldb = 128;
  expect_fp8(meld_gemm_fp8(&x, 0), "ldb 128");
  x = g, x.ldc = 60;
  expect_fp8(meld_gemm_fp8(&x, 0), "ldc 60");
  x = g, x.b = NULL;
  expect_fp8(meld_gemm_fp8(&x, 0), "meld_gemm_fp8: b is NULL");
  x = g, x.c = (void *)((uintptr_t)FAKE_C + 8);
  expect_fp8(meld_gemm_fp8(&x, 0), "c must be 16-byte aligned");
  x = g, x.scale_b = (const float *)(uintptr_t)0x400002;
  expect_fp8(meld_gemm_fp8(&x, 0), "4-byte aligned");
  x = g, x.scaling = (meld_fp8_scaling_t)4;
  expect_fp8(meld_gemm_fp8(&x, 0), "meld_gemm_fp8: scaling 4 is not a meld_fp8_scaling_t");
  x = g, x.scaling = (meld_fp8_scaling_t)-1;
  expect_fp8(meld_gemm_fp8(&x, 0), "scaling -1");
  x = g, x.m = 0; /* empty: nothing to do, no device needed */
  assert_int_equal(meld_gemm_fp8(&x, 0), MELD_OK);

  meld_ag_gemm_fp8_args_t ag;
  memset(&ag, 0, sizeof ag);
  ag.a_shard = FAKE_A, ag.b = FAKE_B, ag.c = FAKE_C, ag.m_loc = 128, ag.n_loc = 64, ag.k = 1000;
  ag.lda = 1008, ag.ldb = 1008, ag.ldc = 64;
  expect_fp8(meld_ag_gemm_fp8(NULL, NULL, 0), "meld_ag_gemm_fp8: args is NULL");
  expect_fp8(meld_ag_gemm_fp8(NULL, &ag, 0), "meld_ag_gemm_fp8: k 1000 is not a positive multiple of 16");
  ag.k = 1008;
  ag.m_loc = 0; /* (k is checked even with nothing to gather: the view's k is half of it) */
  ag.k = 24;
  expect_fp8(meld_ag_gemm_fp8(NULL, &ag, 0), "k 24");
  ag.m_loc = 128, ag.k = 1008, ag.a_gathered = FAKE_C, ag.ld_gathered = 1000;
  expect_fp8(meld_ag_gemm_fp8(NULL, &ag, 0), "ld_gathered 1000");
  ag.ld_gathered = 1008, ag.scaling = (meld_fp8_scaling_t)5;
  expect_fp8(meld_ag_gemm_fp8(NULL, &ag, 0), "meld_ag_gemm_fp8: scaling 5");
  ag.scaling = MELD_FP8_ROWWISE; /* a valid mode: the arguments pass, the NULL comm does not */
  expect_fp8(meld_ag_gemm_fp8(NULL, &ag, 0), "meld_ag_gemm_fp8: comm is NULL");

  meld_gemm_rs_fp8_args_t rs;
  memset(&rs, 0, sizeof rs);
  rs.a = FAKE_A, rs.b = FAKE_B, rs.c = FAKE_C, rs.m = 256, rs.n = 64, rs.k = 40, rs.lda = 48, rs.ldb = 48, rs.ldc = 64;
  expect_fp8(meld_gemm_rs_fp8(NULL, &rs, 0), "meld_gemm_rs_fp8: k 40 is not a positive multiple of 16");
  expect_fp8(meld_gemm_ar_fp8(NULL, &rs, 0), "meld_gemm_ar_fp8: k 40");
  rs.k = 48, rs.lda = 40;
  expect_fp8(meld_gemm_ar_fp8(NULL, &rs, 0), "lda 40");
  rs.lda = 48, rs.scaling = (meld_fp8_scaling_t)7;
  expect_fp8(meld_gemm_rs_fp8(NULL, &rs, 0), "meld_gemm_rs_fp8: scaling 7");
  expect_fp8(meld_gemm_rs_fp8(NULL, NULL, 0), "args is NULL");
}

/* meld_fp8_quantize refuses bad arguments before any CUDA call, with the reason; empty is a no-op
 * (rowwise). */
static void test_fp8_quantize_args(void **state) {
  (void)state;
  meld_fp8_quantize_args_t q;
  memset(&q, 0, sizeof q);
  q.x = FAKE_A, q.ldx = 64, q.out = (void *)(uintptr_t)0x200000, q.ldo = 64, q.scale = (float *)FAKE_C, q.rows = 8, q.cols = 64, q.rowwise = 1;
  expect_fp8(meld_fp8_quantize(NULL, 0), "meld_fp8_quantize: args is NULL");
  meld_fp8_quantize_args_t x = q;
  x.rowwise = 2;
  expect_fp8(meld_fp8_quantize(&x, 0), "rowwise 2");
  x = q, x.rows = -1;
  expect_fp8(meld_fp8_quantize(&x, 0), "rows -1");
  x = q, x.ldx = 32;
  expect_fp8(meld_fp8_quantize(&x, 0), "ldx 32 and ldo 64 must be >= cols 64");
  x = q, x.ldo = 63;
  expect_fp8(meld_fp8_quantize(&x, 0), "ldo 63");
  x = q, x.out = NULL;
  expect_fp8(meld_fp8_quantize(&x, 0), "out is NULL");
  x = q, x.scale = NULL;
  expect_fp8(meld_fp8_quantize(&x, 0), "scale is NULL");
  x = q, x.x = (const void *)((uintptr_t)FAKE_A + 1);
  expect_fp8(meld_fp8_quantize(&x, 0), "aligned");
  x = q, x.rows = 0; /* empty, rowwise: nothing to do, no device needed */
  assert_int_equal(meld_fp8_quantize(&x, 0), MELD_OK);
}

/* Stream-K partition (shared by the device scheduler and the planner): every k-block of every
 * stream-K tile is covered exactly once, pieces of a tile have distinct contributor indices
 * below the count, and the count matches the pieces seen. */
static void test_stream_k_partition(void **state) {
  (void)state;
  static const int cfg[][3] = {{5, 65, 7},  {12, 65, 7},  {200, 128, 132}, {68, 128, 132},
                               {2, 3, 4},   {32, 64, 132}, {1, 1, 1},       {5, 1, 5},
                               {264, 128, 132}, {9, 16, 132}, {80, 128, 132}, {48, 63, 132}, {3, 2, 5},
                               /* sk_pieces n: W = tiles x n ranges (AG+GEMM's pieces from the queue) */
                               {56, 128, 224}, {188, 128, 752}, {60, 65, 240}, {60, 65, 480}, {7, 3, 21}};
  for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
    const int tiles = cfg[c][0], kb = cfg[c][1], W = cfg[c][2];
    const int total = tiles * kb; /* >= W (the planner's precondition: no empty range) */
    assert_true(total >= W);
    const int len = (total + W - 1) / W, parts = (len + kb - 1) / kb + 1;
    int cover[264 * 128], seen[264], ids[264];
    memset(cover, 0, sizeof cover);
    memset(seen, 0, sizeof seen);
    memset(ids, 0, sizeof ids);
    int u = 0, r;
    while ((r = (u < parts * W ? 1 : 0)) != 0) {
      int j = -1, kb0 = 0, nkb = 0, w = 0;
      r = gemm_sk_piece(tiles, kb, W, parts, u, &j, &kb0, &nkb, &w);
      assert_true(r != 0);
      if (r > 0) {
        assert_true(j >= 0 && j < tiles && kb0 >= 0 && nkb >= 1 && kb0 + nkb <= kb);
        for (int i = kb0; i < kb0 + nkb; i++) cover[j * kb + i]++;
        int c_lo = 0;
        const int n = gemm_sk_contrib(j, tiles, kb, W, &c_lo);
        const int split = w - c_lo;
        assert_true(split >= 0 && split < n && split < 31);
        assert_false(ids[j] & (1 << split));
        ids[j] |= 1 << split;
        seen[j]++;
      }
      u++;
    }
    int after = 0, dummy = 0;
    assert_int_equal(gemm_sk_piece(tiles, kb, W, parts, parts * W, &after, &dummy, &dummy, &dummy), 0);
    for (int i = 0; i < total; i++)
      if (cover[i] != 1) fail_msg("tiles %d kb %d W %d: k-block %d covered %d times", tiles, kb, W, i, cover[i]);
    for (int j = 0; j < tiles; j++) {
      int c_lo = 0;
      assert_int_equal(seen[j], gemm_sk_contrib(j, tiles, kb, W, &c_lo));
    }
  }
}

/* The queue with stream-K (AG+GEMM's producer, gemm_skq_next): W workers draw whole tiles from
 * a shared counter in a random interleaving; each one's first ticket at or past the stream-K
 * tiles switches it to its own pieces. Every k-block of every tile runs exactly once, and
 * every stream-K piece runs on the worker whose range it is (the balance the partition
 * assumes). */
static void test_stream_k_queue(void **state) {
  (void)state;
  static const int cfg[][4] = {{320, 128, 132, 132}, {448, 128, 132, 68}, {140, 64, 132, 8}, {7, 5, 3, 4}};
  unsigned seed = 12345;
  for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
    const int tiles = cfg[c][0], kb = cfg[c][1], W = cfg[c][2], sk_tiles = cfg[c][3];
    const int sk_from = tiles - sk_tiles, total = sk_tiles * kb;
    const int len = (total + W - 1) / W, parts = (len + kb - 1) / kb + 1;
    int *cover = calloc((size_t)tiles * kb, sizeof *cover);
    int base[132], it[132], done[132], queue = 0, left = W;
    assert_non_null(cover);
    for (int w = 0; w < W; w++) base[w] = -1, it[w] = 0, done[w] = 0;
    while (left > 0) {
      seed = seed * 1103515245u + 12345u;
      const int w = (int)((seed >> 8) % (unsigned)W);
      if (done[w]) continue;
      const int t = gemm_skq_next(base[w] < 0 ? queue++ : 0, sk_from, w, W, &base[w], &it[w]);
      it[w]++;
      if (t < sk_from) { /* a whole tile */
        for (int k = 0; k < kb; k++) cover[t * kb + k]++;
        continue;
      }
      int j = 0, kb0 = 0, nkb = 0, ww = 0;
      const int r = gemm_sk_piece(sk_tiles, kb, W, parts, t - sk_from, &j, &kb0, &nkb, &ww);
      if (r == 0) {
        done[w] = 1;
        left--;
        continue;
      }
      if (r < 0) continue;
      assert_int_equal(ww, w); /* its own range */
      for (int k = kb0; k < kb0 + nkb; k++) cover[(sk_from + j) * kb + k]++;
    }
    for (int i = 0; i < tiles * kb; i++)
      if (cover[i] != 1) fail_msg("tiles %d kb %d W %d sk %d: k-block %d of tile %d ran %d times", tiles, kb, W, sk_tiles,
                                  i % kb, i / kb, cover[i]);
    free(cover);
  }
}

/* The static schedule (gemm_producer: worker w's i-th ticket is uw + i * unw, counted in m-units:
 * with cluster_m 2, uw = w / 2 and unw = workers / 2, so both CTAs of a pair take the same
 * tickets) through gemm_tile_of, for workers as gemm_plan_make counts them: every k-block of
 * every tile runs exactly once; every tile lies in the grid (with cluster_m 2 and odd tiles_m,
 * also the pad m-block tiles_m, loaded clamped and never stored); the two CTAs of a pair run
 * the same tickets step by step (same end, n-block, m-pair and k-range), so every multicast and
 * remote arrival has a live partner. Before the end check was made unconditional, cluster_m 2
 * with split_k 1 ran tickets [units_m * tiles_n, tiles_m * tiles_n) as phantom tiles (4096^3
 * on 132 SMs: tickets 256..511, a division by zero in the raster; on the GPU n-block -1, tiles
 * (29..31, 15) overwritten; here SIGFPE or the range check). */
static void test_static_schedule(void **state) {
  (void)state;
  /* m, n, k_blocks, SMs, cluster_m, group_m, split_k (0: none), split_from (-1: 0), stream_k
   * (0: off, 2: partial wave, 3: one + partial wave) */
  static const int cfg[][9] = {
      {4096, 4096, 64, 132, 2, 8, 0, 0, 0},  /* the H200 failure: 256 m-pair tickets, 66 clusters */
      {4096, 4096, 64, 132, 2, 16, 0, 0, 0}, /* bench row cl2g16 */
      {2048, 5120, 128, 132, 2, 8, 0, 0, 0}, /* bench: plan w132 c2 s1/128/320 g8 */
      {8192, 8192, 64, 132, 2, 8, 0, 0, 0},
      {8000, 7000, 63, 132, 2, 8, 0, 0, 0},  /* tiles_m 63: the pad m-block in every n-block */
      {8000, 7000, 63, 132, 2, 16, 0, 0, 0},
      {256, 512, 10, 132, 2, 8, 0, 0, 0},    /* fewer m-pairs than clusters */
      {300, 200, 2, 132, 2, 8, 0, 0, 0},
      {1000, 1000, 65, 16, 2, 8, 0, 0, 0},
      {1000, 1000, 65, 6, 2, 3, 0, 0, 0},    /* 3 clusters, groups of 3 of 4 m-pairs */
      {130, 300, 3, 2, 2, 8, 0, 0, 0},       /* one cluster, one m-pair with its pad tile */
      {4096, 4096, 64, 132, 1, 16, 0, 0, 0},
      {8000, 7000, 63, 132, 1, 16, 0, 0, 0},
      {1000, 1000, 65, 1, 1, 16, 0, 0, 0},
      {300, 200, 65, 132, 1, 16, 3, -1, 0},  /* split-K, every tile */
      {1000, 1000, 65, 20, 1, 16, 3, -1, 0}, /* split-K, 5 rounds */
      {8192, 8192, 128, 132, 1, 16, 2, 1980, 0}, /* hybrid: the last 68 tiles split */
      {2048, 5120, 128, 132, 1, 16, 0, 0, 2},
      {2048, 5120, 128, 132, 1, 16, 0, 0, 3},
      {1000, 1000, 65, 13, 1, 16, 0, 0, 2},
  };
  for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
    const int m = cfg[c][0], n = cfg[c][1], kb = cfg[c][2], sms = cfg[c][3], cl = cfg[c][4];
    gemm_params_t p;
    memset(&p, 0, sizeof p);
    p.m = m; p.n = n; p.k = kb * 64;
    p.tiles_m = (m + 127) / 128; p.tiles_n = (n + 255) / 256; p.k_blocks = kb;
    p.cluster_m = cl; p.group_m = cfg[c][5];
    const int tiles = p.tiles_m * p.tiles_n, units_m = (p.tiles_m + cl - 1) / cl;
    p.split_k = cfg[c][6] > 1 ? cfg[c][6] : 1;
    p.kb_per_split = (kb + p.split_k - 1) / p.split_k;
    p.split_from = p.split_k > 1 ? (cfg[c][7] < 0 ? 0 : cfg[c][7]) : tiles;
    int W; /* engine CTAs, as gemm_plan_make counts them */
    if (cfg[c][8] > 1) {
      W = sms < tiles * kb ? sms : tiles * kb;
      int64_t skt = 0, ranges = 0;
      assert_true(gemm_plan_sk_region(tiles, W, kb, cfg[c][8] == 3, 0, 0, &skt, &ranges));
      const uint32_t total = (uint32_t)skt * (uint32_t)kb, len = (total + (uint32_t)ranges - 1) / (uint32_t)ranges;
      p.sk_tiles = (int32_t)skt;
      p.sk_workers = (int32_t)ranges;
      p.sk_parts = (int)((len + kb - 1) / kb) + 1;
    } else if (cl == 2) {
      const int pairs = sms / 2 < units_m * p.tiles_n ? sms / 2 : units_m * p.tiles_n;
      W = 2 * pairs;
    } else {
      const int units = p.split_k == 1 ? tiles : p.split_from + (tiles - p.split_from) * p.split_k;
      W = sms < units ? sms : units;
    }
    const int unw = W / cl;
    int *cover = calloc((size_t)tiles * kb, sizeof *cover);
    assert_non_null(cover);
    for (int uw = 0; uw < unw; uw++) {
      for (int i = 0;; i++) {
        if (i > tiles * kb) fail_msg("case %zu: unit worker %d does not end", c, uw);
        const int ticket = uw + i * unw;
        gemm_tile_t t[2];
        int got[2] = {0, 0};
        for (int rank = 0; rank < cl; rank++) {
          memset(&t[rank], 0x5a, sizeof t[rank]);
          got[rank] = gemm_tile_of(&p, ticket, rank, &t[rank]);
        }
        if (cl == 2) { /* the pair agrees at every step */
          if (got[0] != got[1] || (got[0] > 0 && (t[0].n_blk != t[1].n_blk || t[0].m_blk / 2 != t[1].m_blk / 2 ||
                                                  t[0].m_blk % 2 != 0 || t[1].m_blk % 2 != 1 ||
                                                  t[0].k_blk0 != t[1].k_blk0 || t[0].k_nblk != t[1].k_nblk)))
            fail_msg("case %zu: the CTAs of pair %d disagree on ticket %d", c, uw, ticket);
        }
        if (got[0] == 0) break;
        if (got[0] < 0) continue;
        for (int rank = 0; rank < cl; rank++) {
          const gemm_tile_t *u = &t[rank];
          const int pad = cl == 2 && p.tiles_m % 2 && u->m_blk == p.tiles_m;
          if (u->n_blk < 0 || u->n_blk >= p.tiles_n || u->m_blk < 0 || (u->m_blk >= p.tiles_m && !pad))
            fail_msg("case %zu (%d x %d, cluster_m %d, %d workers): ticket %d -> tile (%d, %d) outside %d x %d tiles",
                     c, m, n, cl, W, ticket, u->m_blk, u->n_blk, p.tiles_m, p.tiles_n);
          if (u->k_nblk < 1 || u->k_step < 1) fail_msg("case %zu: ticket %d has no k-blocks", c, ticket);
          for (int j = 0; j < u->k_nblk && !pad; j++) {
            const int k = u->k_blk0 + j * u->k_step;
            assert_true(k >= 0 && k < kb);
            cover[(u->m_blk * p.tiles_n + u->n_blk) * kb + k]++;
          }
        }
      }
    }
    for (int i = 0; i < tiles * kb; i++)
      if (cover[i] != 1)
        fail_msg("case %zu (%d x %d, cluster_m %d, %d workers): k-block %d of tile (%d, %d) ran %d times", c, m, n, cl, W,
                 i % kb, i / kb / p.tiles_n, i / kb % p.tiles_n, cover[i]);
    free(cover);
  }
}

/* Legal params of the plain engine schedule for m x n x k (128 x 256 tiles, no split). */
static gemm_params_t plain_params(int m, int n, int k) {
  gemm_params_t p;
  memset(&p, 0, sizeof p);
  p.m = m, p.n = n, p.k = k;
  p.tiles_m = (m + 127) / 128, p.tiles_n = (n + 255) / 256, p.k_blocks = (k + 63) / 64;
  p.cluster_m = 1, p.group_m = 16, p.c = (void *)16, p.split_k = 1, p.kb_per_split = p.k_blocks;
  p.split_from = p.tiles_m * p.tiles_n;
  return p;
}

/* gemm_params_check on stream-K fields (no GPU: pure validation). */
static void test_stream_k_check(void **state) {
  (void)state;
  gemm_params_t p = plain_params(8192, 8192, 8192);
  char why[256];
  assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 0);
  p.sk_tiles = 200; p.sk_workers = 132; p.sk_parts = 3; p.sk_cmax = 3;
  assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 1);
  assert_non_null(strstr(why, "workspace"));
  p.workspace = (float *)64; p.counters = (uint32_t *)64;
  assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 0);
  p.sk_cmax = 1;
  assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 1);
  assert_non_null(strstr(why, "contributors"));
  p.sk_cmax = 3; p.sk_parts = 1;
  assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 1);
  assert_non_null(strstr(why, "sk_parts"));
  p.sk_parts = 3; p.sk_workers = 30000; /* more ranges than k-blocks: empty ranges */
  assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 1);
  p.sk_workers = 132; p.split_k = 2; p.kb_per_split = 64; p.split_from = 0;
  assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 1);
  assert_non_null(strstr(why, "split_k 1"));
}

/* gemm_params_check on hook f (grouped rows: the MoE grouped GEMM): legal with the plain 128 x 256
 * engine schedule and a row count per weight; refused with clusters, B [K,N], the wide tile,
 * split-K, stream-K, a second A map, the small-M kernel, or no grp_rows. */
static void test_grouped_check(void **state) {
  (void)state;
  gemm_params_t p = plain_params(8192, 4096, 7168);
  char why[256];
  p.grp_brow = (const int32_t *)64; p.grp_rows = 4096;
  assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 0);
  p.grp_rows = 0;
  assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 1);
  assert_non_null(strstr(why, "grp_rows"));
  p.grp_rows = 4096;
  gemm_params_t q = p;
  q.cluster_m = 2;
  assert_int_equal(gemm_params_check(&q, 132, why, sizeof why), 1);
  q = p, q.b_kn = 1;
  assert_int_equal(gemm_params_check(&q, 132, why, sizeof why), 1);
  assert_non_null(strstr(why, "grouped rows"));
  q = p, q.a2_rows = 128;
  assert_int_equal(gemm_params_check(&q, 132, why, sizeof why), 1);
  assert_non_null(strstr(why, "grouped rows"));
  q = p, q.split_k = 2, q.kb_per_split = 56, q.split_from = 0, q.workspace = (float *)64, q.counters = (uint32_t *)64;
  assert_int_equal(gemm_params_check(&q, 132, why, sizeof why), 1);
  q = p, q.sk_tiles = 100, q.sk_workers = 132, q.sk_parts = 3, q.sk_cmax = 3, q.workspace = (float *)64;
  q.counters = (uint32_t *)64;
  assert_int_equal(gemm_params_check(&q, 132, why, sizeof why), 1);
  assert_non_null(strstr(why, "grouped rows"));
}

/* Hook f's runs (grp_span): every tile of every block comes exactly once, each run's tiles in
 * one contiguous range of tickets, inside it groups of group_m blocks that take one n-block after
 * another (a run of <= group_m blocks: all its blocks at n-block 0, then all at 1, ...); the
 * check wants hook f and no other m-block order. */
static void test_runs_order(void **state) {
  (void)state;
  const int runs[] = {3, 1, 2, 17, 1, 1, 5, 16}; /* blocks a run (an expert) */
  enum { NR = sizeof runs / sizeof runs[0], TN = 5 };
  int32_t span[2 * 64], run_of[64];
  int tm = 0;
  for (int r = 0; r < NR; r++) {
    for (int b = 0; b < runs[r]; b++) span[2 * (tm + b)] = tm, span[2 * (tm + b) + 1] = runs[r], run_of[tm + b] = r;
    tm += runs[r];
  }
  for (int G = 1; G <= 16; G *= 4) {
    gemm_params_t p = plain_params((int64_t)tm * 128, TN * 256, 1024);
    p.grp_brow = (const int32_t *)64, p.grp_rows = 256, p.grp_span = span, p.group_m = G;
    char why[256];
    assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 0);
    int seen[64][TN];
    memset(seen, 0, sizeof seen);
    int prev_run = -1;
    for (int tk = 0;; tk++) {
      gemm_tile_t t;
      if (!gemm_tile_of_run(&p, tk, &t)) {
        assert_int_equal(tk, tm * TN);
        break;
      }
      assert_true(t.m_blk >= 0 && t.m_blk < tm && t.n_blk >= 0 && t.n_blk < TN);
      assert_int_equal(t.k_blk0, 0);
      assert_int_equal(t.k_nblk, p.k_blocks);
      seen[t.m_blk][t.n_blk]++;
      assert_true(run_of[t.m_blk] >= prev_run); /* runs in order, each contiguous */
      prev_run = run_of[t.m_blk];
      const int first = span[2 * t.m_blk], nb = span[2 * t.m_blk + 1], local = tk - first * TN;
      if (nb <= G) { /* one group: the run's blocks in turn at each n-block */
        assert_int_equal(t.m_blk, first + local % nb);
        assert_int_equal(t.n_blk, local / nb);
      }
    }
    for (int m = 0; m < tm; m++)
      for (int n = 0; n < TN; n++) assert_int_equal(seen[m][n], 1);
    gemm_params_t q = p;
    q.grp_brow = NULL;
    assert_int_equal(gemm_params_check(&q, 132, why, sizeof why), 1);
    assert_non_null(strstr(why, "runs"));
    q = p, q.order.m_rotate = 3;
    assert_int_equal(gemm_params_check(&q, 132, why, sizeof why), 1);
    assert_non_null(strstr(why, "runs"));
  }
}

/* gemm_params_check on gated tiles (grp_glu, the MoE layer's SwiGLU): legal with hook f,
 * grp_rows = n = 2 grp_glu, grp_glu a multiple of 128 and the plain TMA-store epilogue; refused
 * without hook f, with a width mismatch, an odd grp_glu, the generic-store epilogue or an epilogue
 * hook. */
static void test_gated_check(void **state) {
  (void)state;
  gemm_params_t p = plain_params(8192, 4096, 7168);
  char why[256];
  p.grp_brow = (const int32_t *)64, p.grp_rows = 4096, p.grp_glu = 2048, p.epi_tma = 1;
  assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 0);
  gemm_params_t q = p;
  q.grp_brow = NULL;
  assert_int_equal(gemm_params_check(&q, 132, why, sizeof why), 1);
  assert_non_null(strstr(why, "gated tiles"));
  q = p, q.grp_rows = 4224;
  assert_int_equal(gemm_params_check(&q, 132, why, sizeof why), 1);
  assert_non_null(strstr(why, "gated tiles"));
  q = p, q.grp_glu = 2000, q.grp_rows = 4000, q.n = 4000;
  assert_int_equal(gemm_params_check(&q, 132, why, sizeof why), 1);
  assert_non_null(strstr(why, "multiple of 128"));
  q = p, q.epi_tma = 0;
  assert_int_equal(gemm_params_check(&q, 132, why, sizeof why), 1);
  assert_non_null(strstr(why, "TMA-store"));
  q = p, q.epi.signal = (uint64_t **)64;
  assert_int_equal(gemm_params_check(&q, 132, why, sizeof why), 1);
}

/* gemm_params_check on the row scatter (the MoE layer's second GEMM with the combine's sends):
 * legal with the generic-store epilogue and 1..16 ranks; refused with the TMA store, deferral, no
 * or too many ranks, gated tiles, another epilogue hook or split-K. */
static void test_scatter_check(void **state) {
  (void)state;
  gemm_params_t p = plain_params(8192, 7168, 2048);
  char why[256];
  p.grp_brow = (const int32_t *)64, p.grp_rows = 7168;
  p.scat_origin = (const int32_t *)64, p.scat_n = 8, p.epi_tma = 0, p.epi_defer = 0;
  assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 0);
  gemm_params_t q = p;
  q.epi_tma = 1;
  assert_int_equal(gemm_params_check(&q, 132, why, sizeof why), 1);
  assert_non_null(strstr(why, "row scatter"));
  q = p, q.epi_defer = 1;
  assert_int_equal(gemm_params_check(&q, 132, why, sizeof why), 1);
  q = p, q.scat_n = 0;
  assert_int_equal(gemm_params_check(&q, 132, why, sizeof why), 1);
  q = p, q.scat_n = GEMM_SCAT_MAX + 1;
  assert_int_equal(gemm_params_check(&q, 132, why, sizeof why), 1);
  q = p, q.epi.rows_valid = 64, q.epi.rows_per_owner = 128;
  assert_int_equal(gemm_params_check(&q, 132, why, sizeof why), 1);
  q = p, q.grp_brow = NULL, q.split_k = 2, q.kb_per_split = 16, q.split_from = 0, q.workspace = (float *)64;
  q.counters = (uint32_t *)64;
  assert_int_equal(gemm_params_check(&q, 132, why, sizeof why), 1);
  assert_non_null(strstr(why, "row scatter"));
}

/* The small-M kernel: when meld_gemm takes it, its cluster size, and the legality check. */
static void test_skinny_rules(void **state) {
  (void)state;
  assert_int_equal(gemm_plan_default_skinny(16, 8192, 8192, 0, 132), 1);
  assert_int_equal(gemm_plan_default_skinny(128, 8192, 8192, 0, 132), 1);
  assert_int_equal(gemm_plan_default_skinny(129, 8192, 8192, 0, 132), 1); /* 64 engine tiles -> 2 x 64 swapped */
  assert_int_equal(gemm_plan_default_skinny(512, 8192, 8192, 0, 132), 0); /* 128 engine tiles: the engine */
  assert_int_equal(gemm_plan_default_skinny(16, 8192, 8192, 1, 132), 0); /* B [K,N]: the engine */
  assert_int_equal(gemm_plan_default_skinny(0, 8192, 8192, 0, 132), 0);
  /* fewer engine tiles than SMs: 2048 x 1280 (80 tiles) -> 130 swapped tiles of 128 x 160 */
  assert_int_equal(gemm_plan_default_skinny(2048, 1280, 8192, 0, 132), 1);
  assert_int_equal(gemm_plan_skinny_mt(2048, 1280, 132), 160);
  assert_int_equal(gemm_plan_default_skinny(2048, 1280, 1024, 0, 132), 0); /* 16 k-blocks: too short */
  assert_int_equal(gemm_plan_default_skinny(512, 4096, 7168, 0, 132), 1); /* 64 engine tiles */
  assert_int_equal(gemm_plan_skinny_mt(512, 4096, 132), 256); /* 2 m-blocks x 32 x S 2 = 128 CTAs */
  assert_int_equal(gemm_plan_default_skinny(8192, 8192, 8192, 0, 132), 0);
  assert_int_equal(gemm_plan_skinny_mt(100, 8192, 132), 128);
  assert_int_equal(gemm_plan_skinny_mt(17, 8192, 132), 32);
  /* below 128 rows a height holds all of m (run 5: 64 x 4096 and 128 x 264 scored 32 / 16-row
   * m-blocks, which the kernel's check refuses) */
  assert_int_equal(gemm_plan_skinny_mt(64, 4096, 132), 64);
  assert_int_equal(gemm_plan_skinny_mt(128, 264, 132), 128);
  assert_int_equal(gemm_plan_skinny_mt(100, 264, 132), 128);
  assert_int_equal(gemm_plan_skinny_mt(129, 8192, 132), 160); /* one m-block, S 2 */
  assert_int_equal(gemm_plan_skinny_mt(192, 8192, 132), 192);
  assert_int_equal(gemm_plan_skinny_mt(256, 8192, 132), 256);
  assert_int_equal(gemm_plan_default_skinny(256, 8192, 8192, 0, 132), 1);
  /* many m-blocks with a cluster split lost in run 4: the engine */
  assert_int_equal(gemm_plan_default_skinny(1024, 1280, 8192, 0, 132), 0);
  assert_int_equal(gemm_plan_skinny_mt(8192, 8192, 132), 256); /* nothing fits: the widest */
  {
    int S = 0;
    const int cl[9] = {0, 132, 66, 39, 30, 22, 17, 15, 15};
    assert_int_equal(gemm_plan_skinny_shape(64, 4096, 112, 132, NULL, &S), 64);
    assert_int_equal(S, 4);
    assert_int_equal(gemm_plan_skinny_shape(128, 4096, 112, 132, cl, &S), 128);
    assert_int_equal(S, 3); /* 32 clusters of 4 do not fit */
    /* up to 32 rows: clusters of 2 where 2 per block keep >= 3/8 of the SMs busy (session 19) */
    assert_int_equal(gemm_plan_skinny_shape(16, 4096, 112, 132, cl, &S), 16);
    assert_int_equal(S, 2);
    assert_int_equal(gemm_plan_skinny_shape(32, 4096, 224, 132, NULL, &S), 32);
    assert_int_equal(S, 2);
    assert_int_equal(gemm_plan_skinny_shape(16, 8192, 128, 132, cl, &S), 16);
    assert_int_equal(S, 2);
    assert_int_equal(gemm_plan_skinny_shape(16, 2048, 128, 132, cl, &S), 16);
    assert_int_equal(S, 6); /* 16 blocks: 2 each would leave most SMs idle */
  }
  /* 132 SMs: 64 column blocks -> 2 CTAs each; 32 -> 4; 112 -> 1; 8 -> 8 (the cap); k-blocks cap */
  assert_int_equal(gemm_plan_skinny_split(8192, 128, 132, NULL), 2);
  assert_int_equal(gemm_plan_skinny_split(4096, 128, 132, NULL), 4);
  assert_int_equal(gemm_plan_skinny_split(14336, 64, 132, NULL), 1);
  assert_int_equal(gemm_plan_skinny_split(1000, 65, 132, NULL), 8);
  assert_int_equal(gemm_plan_skinny_split(1000, 3, 132, NULL), 3);
  assert_int_equal(gemm_plan_skinny_split(20000, 64, 132, NULL), 1); /* more blocks than SMs */
  assert_int_equal(gemm_plan_skinny_split(512, 16, 1, NULL), 1);
  { /* cluster packing: 32 blocks, but only 30 clusters of 4 run at once -> 3 */
    const int cl[9] = {0, 132, 66, 40, 30, 24, 16, 16, 16};
    assert_int_equal(gemm_plan_skinny_split(4096, 128, 132, cl), 3);
    assert_int_equal(gemm_plan_skinny_split(8192, 128, 132, cl), 2);
    const int unknown[9] = {0};
    assert_int_equal(gemm_plan_skinny_split(4096, 128, 132, unknown), 4);
  }

  gemm_params_t p;
  memset(&p, 0, sizeof p);
  char why[256];
  p.m = 16; p.n = 8192; p.k = 8192;
  p.tiles_m = 1; p.tiles_n = 32; p.k_blocks = 128;
  p.cluster_m = 1; p.group_m = 1; p.c = (void *)16; p.split_k = 1; p.kb_per_split = 128; p.split_from = 32;
  p.skinny_mt = 16; p.skinny_split = 2; p.skinny_hint = 3;
  assert_int_equal(gemm_params_check(&p, 128, why, sizeof why), 0);
  assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 1); /* 64 blocks x 2 = 128 CTAs */
  assert_non_null(strstr(why, "128 CTAs"));
  p.skinny_mt = 48;
  assert_int_equal(gemm_params_check(&p, 128, why, sizeof why), 1);
  p.skinny_mt = 16; p.m = 17; /* more rows than the padded tile (one m-block below 128) */
  assert_int_equal(gemm_params_check(&p, 128, why, sizeof why), 1);
  assert_non_null(strstr(why, "exceeds skinny_mt"));
  p.skinny_mt = 128; p.m = 300; p.tiles_m = 3; /* 3 m-blocks x 64 column blocks x 2 */
  assert_int_equal(gemm_params_check(&p, 384, why, sizeof why), 0);
  assert_int_equal(gemm_params_check(&p, 128, why, sizeof why), 1);
  p.skinny_mt = 16; p.m = 16; p.tiles_m = 1; p.skinny_split = 9;
  assert_int_equal(gemm_params_check(&p, 64 * 9, why, sizeof why), 1);
  p.skinny_split = 2; p.b_kn = 1;
  assert_int_equal(gemm_params_check(&p, 128, why, sizeof why), 1);
  assert_non_null(strstr(why, "[N,K]"));
  p.b_kn = 0; p.epi.reduce.on = 1; /* no hooks on the small-M kernel */
  assert_int_equal(gemm_params_check(&p, 128, why, sizeof why), 1);
  assert_non_null(strstr(why, "hooks"));
  p.epi.reduce.on = 0;
  char buf[1024];
  gemm_params_format(&p, buf, sizeof buf);
  assert_non_null(strstr(buf, "small-M kernel"));
}

/* The 128 x 320 tile: when meld_gemm takes it, and what the legality check refuses with it. */
/* The interleaved orders' tests: a plain whole-tile plan of T x TN tiles, raster groups of G. */
static void ileave_params(gemm_params_t *p, int T, int TN, int G) {
  memset(p, 0, sizeof *p);
  p->m = T * 128; p->n = TN * 256; p->k = 64 * 8;
  p->tiles_m = T; p->tiles_n = TN; p->k_blocks = 8;
  p->cluster_m = 1; p->group_m = G; p->c = (void *)16; p->split_k = 1; p->kb_per_split = 8; p->split_from = T * TN;
}
/* Runs every ticket of p's static schedule: each tile exactly once, tk[m * TN + n] = its ticket
 * + 1 (tk zeroed), and no ticket past the last tile. */
static void ileave_schedule(const gemm_params_t *p, int *tk) {
  const int tiles = p->tiles_m * p->tiles_n;
  for (int t = 0; t < tiles; t++) {
    gemm_tile_t x;
    assert_int_equal(gemm_tile_of(p, t, 0, &x), 1);
    assert_true(x.m_blk >= 0 && x.m_blk < p->tiles_m && x.n_blk >= 0 && x.n_blk < p->tiles_n);
    assert_int_equal(tk[x.m_blk * p->tiles_n + x.n_blk], 0); /* once */
    tk[x.m_blk * p->tiles_n + x.n_blk] = t + 1;
  }
  gemm_tile_t x;
  assert_int_equal(gemm_tile_of(p, tiles, 0, &x), 0);
}

/* The interleaved owner order (GEMM+RS at 2 ranks, gemm_order_hook_t.ileave_b): on both ranks'
 * schedules every tile runs exactly once; each own tile's partial (the same tile, a peer tile on
 * the other rank) has a strictly smaller ticket there (so the static schedule has no wait
 * cycle); raster groups between the first and the last hold half own and half peer m-blocks;
 * and gemm_params_check takes exactly the legal layouts. */
static void test_ileave_order(void **state) {
  (void)state;
  static const int cfg[][3] = {/* B (m-blocks per owner), group_m, tiles_n */
                               {32, 16, 32}, {64, 16, 32}, {32, 16, 1}, {20, 10, 3}, {16, 16, 5},
                               {3, 2, 7},    {5, 2, 2},    {24, 16, 4}, {2, 2, 1},   {64, 16, 56}};
  for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
    const int B = cfg[c][0], G = cfg[c][1], TN = cfg[c][2], T = 2 * B, tiles = T * TN;
    int *tk = calloc((size_t)2 * tiles, sizeof *tk); /* [rank][m * TN + n] = ticket + 1 */
    assert_non_null(tk);
    for (int r = 0; r < 2; r++) {
      gemm_params_t p;
      ileave_params(&p, T, TN, G);
      p.order.ileave_b = B; p.order.ileave_own = r * B; p.order.ileave_peer = (1 - r) * B;
      char why[256];
      assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 0);
      ileave_schedule(&p, tk + r * tiles);
      /* groups strictly between the first and the last: half own, half peer m-blocks */
      for (int g = 1; g < T / G - 1; g++) {
        int own = 0;
        for (int i = g * G; i < (g + 1) * G; i++) {
          const int mb = gemm_ileave_mblk(&p.order, G, i);
          own += mb >= r * B && mb < (r + 1) * B;
        }
        assert_int_equal(own, G / 2);
      }
      if (c == 0) { /* the checks refuse what the order cannot take */
        p.order.m_rotate = 1;
        assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 1);
        assert_non_null(strstr(why, "interleaved"));
        p.order.m_rotate = 0; p.group_m = 12; /* 32 % 6 != 0 */
        assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 1);
        p.group_m = 15; /* odd */
        assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 1);
        p.group_m = G; p.tiles_m = T - 1;
        assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 1);
        p.tiles_m = T; p.order.ileave_peer = p.order.ileave_own;
        assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 1);
        p.order.ileave_peer = (1 - r) * B; p.cluster_m = 2;
        assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 1);
      }
    }
    for (int r = 0; r < 2; r++) /* own tile (m, n) of rank r: the peer's partial comes first */
      for (int m = r * B; m < (r + 1) * B; m++)
        for (int n = 0; n < TN; n++) assert_true(tk[(1 - r) * tiles + m * TN + n] < tk[r * tiles + m * TN + n]);
    free(tk);
  }
}

/* The reduced tiles' TMA copies (epi.reduce.copy_tma): mode 1 takes exactly one copy, mode 2
 * (maps in the fused kernel's parameter) 2 .. GEMM_PUSH_MAPS; both need the TMA store of the
 * sums; anything else is refused with a sentence. */
static void test_copy_tma_check(void **state) {
  (void)state;
  gemm_params_t p;
  char why[256];
  ileave_params(&p, 4, 4, 1);
  p.epi.reduce.on = 1;
  p.epi.reduce.tma = 1;
  assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 0);
  static const int ok[][2] = {{1, 1}, {2, 2}, {2, 3}, {2, GEMM_PUSH_MAPS}, {0, 5}};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    p.epi.reduce.copy_tma = ok[i][0];
    p.epi.reduce.ncopies = ok[i][1];
    if (gemm_params_check(&p, 132, why, sizeof why)) fail_msg("copy_tma %d ncopies %d: %s", ok[i][0], ok[i][1], why);
  }
  static const int bad[][2] = {{1, 2}, {1, 0}, {2, 1}, {2, GEMM_PUSH_MAPS + 1}, {3, 2}, {-1, 2}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    p.epi.reduce.copy_tma = bad[i][0];
    p.epi.reduce.ncopies = bad[i][1];
    assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 1);
    assert_non_null(strstr(why, "TMA copy"));
  }
  p.epi.reduce.tma = 0; /* no staged sums to copy from, either mode */
  for (int mode = 1; mode <= 2; mode++) {
    p.epi.reduce.copy_tma = mode;
    p.epi.reduce.ncopies = mode == 1 ? 1 : 3;
    assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 1);
    assert_non_null(strstr(why, "TMA copy"));
  }
}

/* The interleaved owner order for P >= 3 ranks (gemm_order_hook_t.ileave_p): on every rank's
 * schedule each tile runs once; an own tile (m-block of the rank's owner block) has a strictly
 * larger ticket than the same tile on every other rank (its partials come first: no wait cycle
 * in the static schedule); own tiles come every P groups, not all at the end; and
 * gemm_params_check refuses what the order cannot take. */
static void test_ileave_p_order(void **state) {
  (void)state;
  static const int cfg[][4] = {/* P, B (m-blocks per owner), group_m, tiles_n */
                               {4, 16, 8, 32}, {8, 8, 4, 32}, {3, 21, 7, 5}, {4, 16, 4, 3}, {5, 6, 3, 1},
                               {8, 8, 1, 2},   {3, 2, 1, 7},  {6, 10, 5, 4}};
  for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
    const int P = cfg[c][0], B = cfg[c][1], G = cfg[c][2], TN = cfg[c][3], T = P * B, tiles = T * TN;
    int *tk = calloc((size_t)P * tiles, sizeof *tk); /* [rank][m * TN + n] = ticket + 1 */
    assert_non_null(tk);
    for (int r = 0; r < P; r++) {
      gemm_params_t p;
      ileave_params(&p, T, TN, G);
      p.order.ileave_b = B; p.order.ileave_p = P; p.order.ileave_rank = r;
      char why[256];
      assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 0);
      ileave_schedule(&p, tk + r * tiles);
      /* round c's last group is this rank's own m-blocks c G .. c G + G - 1 */
      for (int rc = 0; rc < B / G; rc++)
        for (int i = 0; i < G; i++)
          assert_int_equal(gemm_ileave_mblk(&p.order, G, (rc * P + P - 1) * G + i), r * B + rc * G + i);
      if (c == 0) { /* the checks refuse what the order cannot take */
        p.group_m = 6; /* 16 % 6 != 0 */
        assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 1);
        assert_non_null(strstr(why, "interleaved"));
        p.group_m = G; p.tiles_m = T - 1;
        assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 1);
        p.tiles_m = T; p.order.ileave_rank = P;
        assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 1);
        p.order.ileave_rank = r; p.order.m_rotate = 1;
        assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 1);
        p.order.m_rotate = 0; p.cluster_m = 2;
        assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 1);
        p.cluster_m = 1; p.order.ileave_p = 2; p.tiles_m = 2 * B; /* 2 ranks: the 2-rank order's rules */
        p.order.ileave_own = 0; p.order.ileave_peer = 0;
        assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 1);
      }
    }
    for (int o = 0; o < P; o++) /* own tile (m, n) of rank o: every peer's partial comes first */
      for (int m = o * B; m < (o + 1) * B; m++)
        for (int n = 0; n < TN; n++)
          for (int q = 0; q < P; q++)
            if (q != o && !(tk[q * tiles + m * TN + n] < tk[o * tiles + m * TN + n]))
              fail_msg("P %d B %d G %d: tile (%d, %d) of owner %d runs at ticket %d there, %d on rank %d", P, B, G, m, n,
                       o, tk[o * tiles + m * TN + n] - 1, tk[q * tiles + m * TN + n] - 1, q);
    free(tk);
  }
}

/* The fp8 column scales' spread over a warp: for every tile width, every thread's every
 * accumulator pair j is read from a lane that holds exactly its columns, in a register (pair
 * k = j / 8) every source lane has (k < BN / 64), and each held pair is someone's. */
static void test_fp8_col_spread(void **state) {
  (void)state;
  const int widths[] = {GEMM_BN_PP, GEMM_BN, GEMM_BN_WIDE};
  for (int w = 0; w < 3; w++) {
    const int bn = widths[w];
    int used[32][8] = {{0}};
    for (int tid = 0; tid < 128; tid++)
      for (int j = 0; j < bn / 8; j++) {
        const int src = gemm_fp8_col_src(tid, j), k = j >> 3;
        assert_true(src >= 0 && src < 32 && k < bn / 64);
        assert_int_equal(gemm_fp8_col_held(src, k), 8 * j + 2 * (tid & 3));
        used[src][k] = 1;
      }
    for (int lane = 0; lane < 32; lane++)
      for (int k = 0; k < bn / 64; k++) {
        assert_true(used[lane][k]);
        assert_true(gemm_fp8_col_held(lane, k) + 1 < bn);
      }
  }
}

/* A legal plan of one wide or ping-pong tile shape (bn): whole tiles, one split, static order */
static void tile_params(gemm_params_t *p, int32_t m, int32_t n, int32_t k, int bn) {
  memset(p, 0, sizeof *p);
  p->m = m; p->n = n; p->k = k; p->bn = bn;
  p->tiles_m = (m + 127) / 128; p->tiles_n = (n + bn - 1) / bn;
  p->k_blocks = p->kb_per_split = (k + 63) / 64;
  p->cluster_m = 1; p->group_m = 16; p->c = (void *)16; p->split_k = 1;
  p->split_from = p->tiles_m * p->tiles_n;
}

static void test_wide_tile(void **state) {
  (void)state;
  /* 132 SMs, 2048 x 5120: 320 tiles of 256 (3 rounds) vs 256 of 320 (2 rounds x 1.25) -> wide */
  assert_int_equal(gemm_plan_default_tile_n(2048, 5120, 8192, 0, 132), GEMM_BN_WIDE);
  assert_int_equal(gemm_plan_default_tile_n(2048, 5120, 8192, 1, 132), GEMM_BN); /* B [K,N] */
  assert_int_equal(gemm_plan_default_tile_n(2048, 5120, 512, 0, 132), GEMM_BN); /* 8 k-blocks */
  assert_int_equal(gemm_plan_default_tile_n(8192, 5120, 8192, 0, 132), GEMM_BN); /* 10 x 256 = 8 x 320 */
  assert_int_equal(gemm_plan_default_tile_n(4096, 4096, 4096, 0, 132), GEMM_BN); /* 4 x 256 < 4 x 320 */
  assert_int_equal(gemm_plan_default_tile_n(8192, 14336, 4096, 0, 132), GEMM_BN); /* 28 x 256 vs 22 x 320: 0.98 */
  assert_int_equal(gemm_plan_default_tile_n(512, 4096, 8192, 0, 132), GEMM_BN); /* 64 tiles < SMs */
  assert_int_equal(gemm_plan_default_tile_n(2048, 5120, 8192, 0, 0), GEMM_BN);

  gemm_params_t p;
  char why[256];
  tile_params(&p, 2048, 5000, 8192, GEMM_BN_WIDE); /* 16 x 16 tiles (ceil(5000 / 320)) */
  assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 0);
  p.tiles_n = 20; /* the 256-wide count */
  assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 1);
  assert_non_null(strstr(why, "tile counts"));
  p.tiles_n = 16;
  p.bn = 300;
  assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 1);
  assert_non_null(strstr(why, "bn 300"));
  p.bn = GEMM_BN_WIDE;
  p.b_kn = 1; /* each refused combination, one at a time */
  assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 1);
  assert_non_null(strstr(why, "128 x 320"));
  p.b_kn = 0; p.epi_defer = 1; /* (its deferred part is the 64-column third) */
  assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 0);
  p.epi_defer = 0; p.epi.reduce.on = 1;
  assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 1);
  p.epi.reduce.on = 0; p.cluster_m = 2; p.cluster_mc = 1; /* the experimental B-multicast pair is taken */
  assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 0);
  p.cluster_m = 1; p.cluster_mc = 0; p.order.m_rotate = 1; /* the producer's hooks are taken (AG+GEMM) */
  assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 0);
  p.order.m_rotate = 0; p.epi.rows_valid = 100; p.epi.rows_per_owner = 128; /* the compact epilogue is not */
  assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 1);
  assert_non_null(strstr(why, "128 x 320"));
  p.epi.rows_valid = 0; p.epi.rows_per_owner = 0; p.sk_tiles = 20; p.sk_workers = 132; p.sk_parts = 2; p.sk_cmax = 2;
  p.workspace = (float *)64; p.counters = (uint32_t *)64;
  assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 1);
  assert_non_null(strstr(why, "128 x 320"));
  p.sk_tiles = 0;
  assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 0);
  p.early_release = 2; /* 0 or 1 */
  assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 1);
  assert_non_null(strstr(why, "early_release 2"));
  p.early_release = -1;
  assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 1);
  p.early_release = 1;
  assert_int_equal(gemm_params_check(&p, 132, why, sizeof why), 0);
  char buf[1024];
  gemm_params_format(&p, buf, sizeof buf);
  assert_non_null(strstr(buf, "128x320x64, 3 stages (early release)"));
  p.early_release = 0;
  p.bn = 0; p.tiles_n = 20;
  gemm_params_format(&p, buf, sizeof buf);
  assert_non_null(strstr(buf, "128x256x64, 4 stages"));
}

/* The ping-pong tile's legality: B [N,K], the TMA-store epilogue, whole tiles in the static
 * order; every other engine option or hook refused with the reason. */
static void test_pingpong_check(void **state) {
  (void)state;
  gemm_params_t p;
  char why[256];
  tile_params(&p, 1000, 1000, 4112, GEMM_BN_PP); /* 8 x 8 tiles (ceil(1000 / 128)), 65 k-blocks */
  p.epi_tma = 1;
  assert_int_equal(gemm_params_check(&p, 64, why, sizeof why), 0);
  p.tiles_n = 4; /* the 256-wide count */
  assert_int_equal(gemm_params_check(&p, 64, why, sizeof why), 1);
  assert_non_null(strstr(why, "tile counts"));
  p.tiles_n = 8;
  int *fields[] = {&p.b_kn, &p.epi_defer, &p.a2_rows, &p.order.m_rotate, &p.order.ileave_b, &p.epi.rows_valid};
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
    *fields[i] = 1;
    assert_int_equal(gemm_params_check(&p, 64, why, sizeof why), 1);
    assert_non_null(strstr(why, "ping-pong"));
    *fields[i] = 0;
  }
  p.epi_tma = 0; /* generic stores: not this kernel's */
  assert_int_equal(gemm_params_check(&p, 64, why, sizeof why), 1);
  assert_non_null(strstr(why, "ping-pong"));
  p.epi_tma = 1; p.sk_tiles = 8; p.sk_workers = 64; p.sk_parts = 2; p.sk_cmax = 2;
  p.workspace = (float *)64; p.counters = (uint32_t *)64;
  assert_int_equal(gemm_params_check(&p, 64, why, sizeof why), 1);
  assert_non_null(strstr(why, "ping-pong"));
  p.sk_tiles = 0; p.split_k = 2; p.kb_per_split = 33; p.split_from = 0;
  assert_int_equal(gemm_params_check(&p, 128, why, sizeof why), 1);
  assert_non_null(strstr(why, "ping-pong"));
  p.split_k = 1; p.kb_per_split = 65; p.split_from = 64; p.epi.reduce.on = 1;
  assert_int_equal(gemm_params_check(&p, 64, why, sizeof why), 1);
  p.epi.reduce.on = 0; p.epi.reduce.preload = 4; /* (its barriers' words are the turns') */
  assert_int_equal(gemm_params_check(&p, 64, why, sizeof why), 1);
  assert_non_null(strstr(why, "ping-pong"));
  p.epi.reduce.preload = 0; p.cluster_m = 2; p.cluster_mc = 1; /* the B-multicast pairs are taken */
  assert_int_equal(gemm_params_check(&p, 64, why, sizeof why), 0);
  p.cluster_m = 1; p.cluster_mc = 0;
  p.fp8 = 1; p.scale_a = p.scale_b = (const float *)64;
  assert_int_equal(gemm_params_check(&p, 64, why, sizeof why), 0);
  char buf[1024];
  gemm_params_format(&p, buf, sizeof buf);
  assert_non_null(strstr(buf, "128x128x64, 6 stages (ping-pong"));
}

/* The ping-pong ring protocol (gemm.cuh gemm_consumer_pp), modelled with the hardware's parity
 * waits: one producer fills a ring of NST stages in tile order (k-blocks kn a tile); warpgroup
 * g computes tiles g, g + 2, ...; its wait for ring position q (stage q % NST, lap q / NST)
 * passes when the stage's completed fills have the other parity than the lap, exactly what
 * mbarrier.try_wait.parity sees, so a wait two fills early would pass on the wrong data.
 * Random interleavings of the three roles; with the turns every passing wait must find the
 * stage filled exactly lap + 1 times (and every turn wait its exact arrival count); without
 * them (turns = 0) the model must find such a wrong pass: the check can fail. Returns the
 * number of wrong passes. */
typedef struct {
  int tile, kb, own, held, state;
} pp_wg_t;
static int pp_model(int kn, int NST, int tiles, int turns, unsigned seed) {
  int fills[8] = {0}, rels[8] = {0}, arrivals[2] = {1, 0}; /* warpgroup 0's first turn given */
  int prod_q = 0, bad = 0;
  pp_wg_t wg[2] = {{0, 0, 0, -1, 0}, {1, 0, 0, -1, 0}};
  /* state 0: wait the turn; 1: wait k-block kb's stage; 2: epilogue; 3: done */
  for (int g = 0; g < 2; g++) wg[g].state = wg[g].tile < tiles ? 0 : 3;
  unsigned r = seed;
  for (long step = 0; step < 1000000 && (wg[0].state != 3 || wg[1].state != 3); step++) {
    r = r * 1103515245u + 12345u;
    const int who = (int)((r >> 16) % 3);
    if (who == 2) { /* the producer: fill position prod_q once its stage's last occupant is released */
      if (prod_q < tiles * kn && rels[prod_q % NST] >= prod_q / NST) fills[prod_q++ % NST]++;
      continue;
    }
    pp_wg_t *w = &wg[who];
    if (w->state == 0) {
      const int want = w->own; /* the turn's arrivals before this wait: own tiles so far */
      if (!turns || (arrivals[who] & 1) != (want & 1)) {
        if (turns && arrivals[who] != want + 1) bad++;
        w->state = 1;
        w->kb = 0;
      }
    } else if (w->state == 1) {
      const int q = w->tile * kn + w->kb, s = q % NST, lap = q / NST;
      if ((fills[s] & 1) != (lap & 1)) { /* the parity wait passes */
        if (fills[s] != lap + 1) bad++;
        if (w->held >= 0) rels[w->held]++; /* wait_group 1: the previous k-block's stage */
        w->held = s;
        if (w->kb == kn - 1) {
          arrivals[who ^ 1]++; /* the other's turn */
          w->state = 2;
        } else {
          w->kb++;
        }
      }
    } else if (w->state == 2) { /* wait_group 0: the last stage, then the epilogue */
      rels[w->held]++;
      w->held = -1;
      w->own++;
      w->tile += 2;
      w->state = w->tile < tiles ? 0 : 3;
    }
  }
  if (turns) assert_true(wg[0].state == 3 && wg[1].state == 3); /* no deadlock */
  return bad;
}

static void test_pingpong_model(void **state) {
  (void)state;
  const int kns[] = {1, 2, 5, 6, 7, 13, 64};
  for (size_t i = 0; i < sizeof kns / sizeof kns[0]; i++)
    for (int tiles = 1; tiles <= 7; tiles++)
      for (unsigned seed = 1; seed <= 40; seed++)
        if (pp_model(kns[i], 6, tiles, 1, seed * 7919u + (unsigned)tiles))
          fail_msg("kn %d tiles %d seed %u: a parity wait passed on the wrong fill", kns[i], tiles, seed);
  int found = 0; /* without the turns the wrong passes happen */
  for (unsigned seed = 1; seed <= 40; seed++) found += pp_model(13, 6, 4, 0, seed) > 0;
  assert_true(found > 0);
}

/* The deterministic option's plan part: a chosen split-K capped at 2 pieces, stream-K off, a
 * forced split_k > 2 or stream_k > 1 refused with the reason; nothing changes without it. */
static void test_deterministic_plan(void **state) {
  (void)state;
  gemm_plan_opts_t o = GEMM_PLAN_OPTS_INIT;
  int split = 6, sk = 0;
  assert_int_equal(gemm_plan_det_apply(&o, &split, &sk), MELD_OK); /* off: untouched */
  assert_int_equal(split, 6);
  assert_int_equal(sk, 0);
  o.deterministic = 1;
  for (int s = 1; s <= 8; s++) {
    split = s, sk = 0;
    assert_int_equal(gemm_plan_det_apply(&o, &split, &sk), MELD_OK);
    assert_int_equal(split, s < 2 ? s : 2);
    assert_int_equal(sk, 1);
  }
  o.split_k = 2; /* forced 2: allowed */
  split = 2, sk = 0;
  assert_int_equal(gemm_plan_det_apply(&o, &split, &sk), MELD_OK);
  o.split_k = 3;
  assert_int_equal(gemm_plan_det_apply(&o, &split, &sk), MELD_ERR_INVALID_ARG);
  assert_non_null(strstr(meld_last_error(), "deterministic"));
  o.split_k = 0, o.stream_k = 2;
  assert_int_equal(gemm_plan_det_apply(&o, &split, &sk), MELD_ERR_INVALID_ARG);
  assert_non_null(strstr(meld_last_error(), "order they finish"));
  o.stream_k = 1; /* forced off: allowed */
  assert_int_equal(gemm_plan_det_apply(&o, &split, &sk), MELD_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_null_args),    cmocka_unit_test(test_null_pointers),
      cmocka_unit_test(test_dims),         cmocka_unit_test(test_alignment),
      cmocka_unit_test(test_leading_dims), cmocka_unit_test(test_empty_is_noop),
      cmocka_unit_test(test_no_device),    cmocka_unit_test(test_fp8_args), cmocka_unit_test(test_fp8_quantize_args), cmocka_unit_test(test_stream_k_partition),
    cmocka_unit_test(test_stream_k_queue),  cmocka_unit_test(test_static_schedule),
      cmocka_unit_test(test_stream_k_check), cmocka_unit_test(test_skinny_rules),
      cmocka_unit_test(test_grouped_check), cmocka_unit_test(test_runs_order), cmocka_unit_test(test_gated_check), cmocka_unit_test(test_scatter_check), cmocka_unit_test(test_wide_tile),    cmocka_unit_test(test_ileave_order), cmocka_unit_test(test_ileave_p_order),
      cmocka_unit_test(test_copy_tma_check), cmocka_unit_test(test_deterministic_plan),
      cmocka_unit_test(test_pingpong_check), cmocka_unit_test(test_pingpong_model), cmocka_unit_test(test_fp8_col_spread),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
