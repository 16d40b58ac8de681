/* test_moe_plan.c — meld_moe_dispatch_gemm's host side on the CPU: every refused argument with
 * its sentence; the workspace layout (regions in order, 256-aligned, sized, the public size
 * function equal to the plan's); the plan (workspace too small names the size, the comm-CTA
 * override, the argument hash over what ranks must share); and the layout rule (moe_layout_ref,
 * the host's statement of what the routing kernel computes on the device; test_moe checks the
 * device's) against a brute force over random count matrices: every expert's
 * segment starts at a multiple of 128 after the padded segments of the experts before it on its
 * rank, a rank's rows inside a segment start after the lower ranks', blocks in use, overflow.
 * Across nodes (src/common/moe_net.h): the scheme against the global routing by brute force
 * (every routed slot reaches its expert's rank exactly once, through the node that holds the
 * expert, and its origin maps back to its global rank and pair), the node call's arguments and
 * their sentences, the scratch layout. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/moe_net.h"
#include "meld.h"
#include "moe_plan.h"

#define FAKE(x) ((void *)(uintptr_t)(x))

static meld_moe_args_t good(void) {
  meld_moe_args_t a;
  memset(&a, 0, sizeof a);
  a.x = FAKE(0x100000), a.topk_ids = (const int32_t *)FAKE(0x200000), a.w = FAKE(0x300000), a.y = FAKE(0x400000);
  a.expert_offsets = (int32_t *)FAKE(0x500000), a.expert_counts = (int32_t *)FAKE(0x600000);
  a.row_origin = (int32_t *)FAKE(0x700000);
  a.tokens = 1000, a.topk = 8, a.experts = 64, a.hidden = 1024, a.n = 512, a.capacity = 16384;
  return a;
}

static void expect_err(const meld_moe_args_t *a, int P, meld_result_t want, const char *needle) {
  const meld_result_t r = moe_args_validate(a, P);
  assert_int_equal(r, want);
  if (!strstr(meld_last_error(), needle)) fail_msg("message \"%s\" lacks \"%s\"", meld_last_error(), needle);
}

static void test_validation(void **state) {
  (void)state;
  meld_moe_args_t a = good();
  assert_int_equal(moe_args_validate(&a, 4), MELD_OK);
  expect_err(NULL, 2, MELD_ERR_INVALID_ARG, "args is NULL");
  expect_err(&a, 17, MELD_ERR_UNSUPPORTED, "17 ranks");
  a = good(), a.tokens = -1;
  expect_err(&a, 2, MELD_ERR_INVALID_ARG, "tokens -1");
  a = good(), a.topk = 0;
  expect_err(&a, 2, MELD_ERR_INVALID_ARG, "topk 0");
  a = good(), a.topk = 65;
  expect_err(&a, 2, MELD_ERR_INVALID_ARG, "topk 65");
  a = good(), a.experts = 6;
  expect_err(&a, 4, MELD_ERR_INVALID_ARG, "experts 6 is not a positive multiple of the 4 ranks");
  a = good(), a.experts = 2;
  expect_err(&a, 4, MELD_ERR_INVALID_ARG, "experts 2");
  a = good(), a.experts = 2048;
  expect_err(&a, 1, MELD_ERR_UNSUPPORTED, "experts 2048");
  a = good(), a.hidden = 1020;
  expect_err(&a, 2, MELD_ERR_INVALID_ARG, "hidden 1020");
  a = good(), a.n = 4;
  expect_err(&a, 2, MELD_ERR_INVALID_ARG, "n 4");
  a = good(), a.capacity = 1000;
  expect_err(&a, 2, MELD_ERR_INVALID_ARG, "capacity 1000 is not a positive multiple of 128");
  a = good(), a.ldx = 1000;
  expect_err(&a, 2, MELD_ERR_INVALID_ARG, "ldx 1000");
  a = good(), a.ldx = 1028;
  expect_err(&a, 2, MELD_ERR_INVALID_ARG, "ldx 1028");
  a = good(), a.ldx = 2048;
  assert_int_equal(moe_args_validate(&a, 2), MELD_OK);
  a = good(), a.y = NULL;
  expect_err(&a, 2, MELD_ERR_INVALID_ARG, "y is NULL");
  a = good(), a.w = FAKE(0x300008);
  expect_err(&a, 2, MELD_ERR_INVALID_ARG, "w 0x300008 is not 16-byte aligned");
  a = good(), a.expert_counts = NULL;
  expect_err(&a, 2, MELD_ERR_INVALID_ARG, "expert_counts is NULL");
  a = good(), a.row_origin = NULL; /* optional */
  assert_int_equal(moe_args_validate(&a, 2), MELD_OK);
  a = good(), a.row_origin = (int32_t *)FAKE(0x700004);
  expect_err(&a, 2, MELD_ERR_INVALID_ARG, "row_origin");
  a = good(), a.tokens = 0, a.x = NULL, a.topk_ids = NULL; /* a rank without tokens */
  assert_int_equal(moe_args_validate(&a, 2), MELD_OK);
  a = good(), a.x = NULL;
  expect_err(&a, 2, MELD_ERR_INVALID_ARG, "x is NULL");
  a = good(), a.tokens = (int64_t)1 << 28;
  expect_err(&a, 2, MELD_ERR_INVALID_ARG, "exceeds 2^31");
}

/* The activation: SwiGLU needs n a multiple of 256 (gate and up halves of 128-column tiles); an
 * unknown one is refused; it enters the argument hash (ranks must agree). */
static void test_activation(void **state) {
  (void)state;
  meld_moe_args_t a = good();
  a.activation = MELD_MOE_ACT_SWIGLU;
  assert_int_equal(moe_args_validate(&a, 4), MELD_OK);
  a.n = 384;
  expect_err(&a, 4, MELD_ERR_INVALID_ARG, "n 384 (gate and up rows) must be a multiple of 256");
  a = good(), a.activation = 7;
  expect_err(&a, 4, MELD_ERR_INVALID_ARG, "activation 7");
  a = good();
  moe_plan_t p, q;
  const size_t need = meld_moe_workspace_bytes(4, a.tokens, a.topk, a.experts, a.hidden, a.capacity);
  assert_int_equal(moe_plan_make(&a, 4, 0, 132, need, &p), MELD_OK);
  a.activation = MELD_MOE_ACT_SWIGLU;
  assert_int_equal(moe_plan_make(&a, 4, 0, 132, need, &q), MELD_OK);
  assert_int_equal(q.act, MELD_MOE_ACT_SWIGLU);
  assert_int_not_equal(p.arg_hash, q.arg_hash);
}

static meld_moe_ffn_args_t ffn_good(void *scratch) {
  meld_moe_ffn_args_t f;
  memset(&f, 0, sizeof f);
  f.x = FAKE(0x100000), f.topk_ids = (const int32_t *)FAKE(0x200000), f.topk_weights = (const float *)FAKE(0x210000);
  f.w1 = FAKE(0x300000), f.w2 = FAKE(0x380000), f.out = FAKE(0x400000), f.scratch = scratch;
  f.tokens = 1000, f.topk = 8, f.experts = 64, f.hidden = 1024, f.ffn = 512, f.capacity = 16384;
  return f;
}

static void ffn_err(const meld_moe_ffn_args_t *f, const char *needle) {
  meld_moe_args_t d;
  meld_moe_gemm_args_t g;
  meld_moe_combine_args_t c;
  assert_int_equal(moe_ffn_split(f, 4, &d, &g, &c), MELD_ERR_INVALID_ARG);
  if (!strstr(meld_last_error(), needle)) fail_msg("message \"%s\" lacks \"%s\"", meld_last_error(), needle);
  if (strncmp(meld_last_error(), "meld_moe_ffn", 12)) fail_msg("message \"%s\" does not name meld_moe_ffn", meld_last_error());
}

/* meld_moe_ffn's split into its three calls: the scratch's regions (activation, second GEMM's rows,
 * offsets, counts) in order, 256-aligned, inside meld_moe_ffn_scratch_bytes; the dispatch is
 * SwiGLU with n = 2 ffn into the activation; the second GEMM reads it (k = ffn) into h2 (n =
 * hidden); the combine sums h2 into out; a caller's expert_counts is used; every refused argument
 * named, the sentence starting with meld_moe_ffn. */
static void test_ffn_split(void **state) {
  (void)state;
  uint8_t *sc = (uint8_t *)FAKE(0x10000000);
  meld_moe_ffn_args_t f = ffn_good(sc);
  meld_moe_args_t d;
  meld_moe_gemm_args_t g;
  meld_moe_combine_args_t c;
  assert_int_equal(moe_ffn_split(&f, 4, &d, &g, &c), MELD_OK);
  const size_t bytes = meld_moe_ffn_scratch_bytes(4, 64, 1024, 512, 16384);
  const size_t act = (size_t)16384 * 512 * 2, h2 = (size_t)16384 * 1024 * 2;
  assert_true(bytes >= act + h2 + (size_t)16384 * 8 + 17 * 4 + 16 * 4);
  assert_ptr_equal(d.y, sc);
  assert_int_equal(d.n, 1024);
  assert_int_equal(d.activation, MELD_MOE_ACT_SWIGLU);
  assert_ptr_equal(d.w, f.w1);
  assert_ptr_equal(g.a, sc), assert_int_equal(g.k, 512), assert_ptr_equal(g.w, f.w2), assert_int_equal(g.n, 1024);
  assert_ptr_equal(g.c, sc + act);
  assert_ptr_equal(c.y2, sc + act), assert_ptr_equal(c.out, f.out), assert_ptr_equal(c.topk_weights, f.topk_weights);
  assert_ptr_equal(g.dispatch, &d), assert_ptr_equal(c.dispatch, &d);
  const uint8_t *off = (const uint8_t *)d.expert_offsets, *cnt = (const uint8_t *)d.expert_counts;
  const uint8_t *org = (const uint8_t *)d.row_origin; /* (the second GEMM's sends read it) */
  assert_true(org >= sc + act + h2 && (uintptr_t)org % 256 == 0);
  assert_true(off >= org + (size_t)16384 * 8 && (uintptr_t)off % 256 == 0);
  assert_true(cnt >= off + 17 * 4 && (uintptr_t)cnt % 256 == 0 && cnt + 16 * 4 <= sc + bytes);
  f.expert_counts = (int32_t *)FAKE(0x7000000);
  assert_int_equal(moe_ffn_split(&f, 4, &d, &g, &c), MELD_OK);
  assert_ptr_equal(d.expert_counts, f.expert_counts);
  assert_int_equal(meld_moe_ffn_scratch_bytes(0, 64, 1024, 512, 16384), 0);
  /* refused */
  ffn_err(NULL, "args is NULL");
  f = ffn_good(sc), f.ffn = 200;
  ffn_err(&f, "ffn 200");
  f = ffn_good(sc), f.experts = 6;
  ffn_err(&f, "experts 6");
  f = ffn_good(sc), f.hidden = 1020;
  ffn_err(&f, "hidden 1020");
  f = ffn_good(sc), f.capacity = 1000;
  ffn_err(&f, "capacity 1000");
  f = ffn_good(sc), f.w1 = NULL;
  ffn_err(&f, "w1 is NULL");
  f = ffn_good(sc), f.w2 = NULL;
  ffn_err(&f, "w2 is NULL");
  f = ffn_good(NULL);
  ffn_err(&f, "scratch is NULL");
  f = ffn_good(sc + 16);
  ffn_err(&f, "256-byte aligned");
  f = ffn_good(sc), f.topk_weights = NULL;
  ffn_err(&f, "topk_weights");
  f = ffn_good(sc), f.out = NULL;
  ffn_err(&f, "out");
  f = ffn_good(sc), f.x = NULL;
  ffn_err(&f, "x is NULL");
  f = ffn_good(sc), f.tokens = 3000; /* 3000 x 8 > capacity 16384: the combine's staging */
  ffn_err(&f, "exceeds capacity");
  /* the sends' default: always with several ranks; one rank only at <= 16 rows an expert */
  assert_int_equal(moe_ffn_send_default(2, 4096, 8, 256), 1);
  assert_int_equal(moe_ffn_send_default(8, 1, 1, 1024), 1);
  assert_int_equal(moe_ffn_send_default(1, 512, 8, 256), 1);  /* 16 rows an expert (dsv3 T512) */
  assert_int_equal(moe_ffn_send_default(1, 513, 8, 256), 0);
  assert_int_equal(moe_ffn_send_default(1, 128, 8, 32), 0);   /* 32 rows (the decode row) */
  assert_int_equal(moe_ffn_send_default(1, 4096, 8, 256), 0); /* 128 rows */
  assert_int_equal(moe_ffn_send_default(1, 0, 8, 256), 1);
}

static void test_layout(void **state) {
  (void)state;
  const moe_layout_t l = moe_layout(4, 8000, 64, 1024, 16384);
  const size_t regions[] = {l.stage, l.origin, l.flags,  l.counts, l.arrivals, l.estart, l.seg,
                            l.srcoff, l.used, l.brow, l.span, l.sorted, l.inv, l.ccount, l.bytes};
  const size_t need[] = {16384 * 1024 * 2, 16384 * 8, 128 * 8, 4 * 64 * 4, 4 * 8, 65 * 4, 64 * 4,
                         64 * 4, 4 * 4, 128 * 4, 128 * 8, 8000 * 4, 8000 * 4, MOE_ROUTE_MAX_CTAS * 64 * 4};
  for (size_t i = 0; i + 1 < sizeof regions / sizeof regions[0]; i++) {
    assert_int_equal(regions[i] % 256, 0);
    if (regions[i + 1] < regions[i] + need[i]) fail_msg("region %zu at %zu overlaps the next at %zu", i, regions[i], regions[i + 1]);
  }
  assert_int_equal(l.stage, 0);
  /* (tables for nranks x max_tokens: a node's call across nodes routes every node's tokens) */
  assert_int_equal(meld_moe_workspace_bytes(4, 250, 8, 64, 1024, 16384), l.bytes);
  assert_int_equal(meld_moe_workspace_bytes(4, 1000, 8, 64, 1024, 16384), moe_layout(4, 32000, 64, 1024, 16384).bytes);
  assert_int_equal(meld_moe_workspace_bytes(0, 1000, 8, 64, 1024, 16384), 0);
  /* the regions peers write sit at the same offsets whatever this rank's tokens */
  const moe_layout_t l2 = moe_layout(4, 10, 64, 1024, 16384);
  assert_int_equal(l2.stage, l.stage);
  assert_int_equal(l2.origin, l.origin);
  assert_int_equal(l2.flags, l.flags);
  assert_int_equal(l2.counts, l.counts);
}

static void test_plan(void **state) {
  (void)state;
  meld_moe_args_t a = good();
  moe_plan_t p;
  const size_t need = meld_moe_workspace_bytes(4, a.tokens, a.topk, a.experts, a.hidden, a.capacity);
  unsetenv("MELD_MOE_COMM_CTAS");
  assert_int_equal(moe_plan_make(&a, 4, 1, 132, need, &p), MELD_OK);
  assert_int_equal(p.e_loc, 16);
  assert_int_equal(p.blocks, 128);
  assert_int_equal(p.comm_ctas, 16);
  assert_int_equal(p.grid, 132);
  assert_int_equal(p.ldx, 1024);
  char want[64]; /* (the public size reserves tables for 4 x the tokens: across nodes; the plan's own need) */
  const size_t exact = moe_layout(4, a.tokens * a.topk, a.experts, a.hidden, a.capacity).bytes;
  assert_true(exact <= need);
  snprintf(want, sizeof want, "needs %zu", exact);
  assert_int_equal(moe_plan_make(&a, 4, 1, 132, exact, &p), MELD_OK);
  assert_int_equal(moe_plan_make(&a, 4, 1, 132, exact - 1, &p), MELD_ERR_OUT_OF_MEMORY);
  if (!strstr(meld_last_error(), want)) fail_msg("\"%s\" lacks \"%s\"", meld_last_error(), want);
  setenv("MELD_MOE_COMM_CTAS", "3", 1);
  assert_int_equal(moe_plan_make(&a, 4, 1, 132, need, &p), MELD_OK);
  assert_int_equal(p.comm_ctas, 3);
  setenv("MELD_MOE_COMM_CTAS", "0", 1);
  assert_int_equal(moe_plan_make(&a, 4, 1, 132, need, &p), MELD_ERR_INVALID_ARG);
  unsetenv("MELD_MOE_COMM_CTAS");
  assert_int_equal(moe_plan_make(&a, 4, 1, 8, need, &p), MELD_OK);
  assert_int_equal(p.comm_ctas, 1); /* (at least one; fewer than the grid) */
  /* the tiles expert by expert (hook f's runs) in groups of 16 blocks by default; without the
   * runs the raster group is 1 where an expert gets <= 256 rows with even routing, else the
   * engine's */
  assert_int_equal(moe_plan_make(&a, 4, 1, 132, need, &p), MELD_OK);
  assert_int_equal(p.runs, 1);
  assert_int_equal(p.group_m, 16);
  setenv("MELD_MOE_RUNS", "0", 1);
  assert_int_equal(moe_plan_make(&a, 4, 1, 132, need, &p), MELD_OK);
  assert_int_equal(p.runs, 0);
  assert_int_equal(p.group_m, 0); /* (1000 x 8 x 4 / 64 = 500 rows an expert) */
  meld_moe_args_t sm = a;
  sm.tokens = 500; /* 500 x 8 x 4 / 64 = 250 rows an expert */
  assert_int_equal(moe_plan_make(&sm, 4, 1, 132, need, &p), MELD_OK);
  assert_int_equal(p.group_m, 1);
  setenv("MELD_MOE_RUNS", "2", 1);
  assert_int_equal(moe_plan_make(&sm, 4, 1, 132, need, &p), MELD_ERR_INVALID_ARG);
  if (!strstr(meld_last_error(), "MELD_MOE_RUNS")) fail_msg("\"%s\"", meld_last_error());
  unsetenv("MELD_MOE_RUNS");
  setenv("MELD_MOE_GROUP_M", "24", 1);
  assert_int_equal(moe_plan_make(&sm, 4, 1, 132, need, &p), MELD_OK);
  assert_int_equal(p.group_m, 24);
  unsetenv("MELD_MOE_GROUP_M");
  /* the copies: bulk by default, vec on request, anything else refused */
  assert_int_equal(p.copy, 1);
  setenv("MELD_MOE_COPY", "vec", 1);
  assert_int_equal(moe_plan_make(&a, 4, 1, 132, need, &p), MELD_OK);
  assert_int_equal(p.copy, 0);
  setenv("MELD_MOE_COPY", "fast", 1);
  assert_int_equal(moe_plan_make(&a, 4, 1, 132, need, &p), MELD_ERR_INVALID_ARG);
  if (!strstr(meld_last_error(), "MELD_MOE_COPY=fast")) fail_msg("\"%s\"", meld_last_error());
  unsetenv("MELD_MOE_COPY");
  /* where the routing runs: in the fused kernel by default (MELD_MOE_ROUTE_IN=1), one routing CTA
   * below 6144 pairs, else one per 1536 up to MOE_ROUTE_MAX_CTAS and the comm CTAs; in a routing
   * kernel of its own (0): one CTA below 16384 pairs, else one per 4096 up to MOE_ROUTE_MAX_CTAS
   * (MELD_MOE_ROUTE_CTAS forces either); the place walk (MELD_MOE_ROUTE 0..3, 0 by default; the
   * staging bit only with one CTA) */
  assert_int_equal(moe_plan_make(&a, 4, 1, 132, need, &p), MELD_OK);
  assert_int_equal(p.route_in, 1);
  assert_int_equal(p.route_ctas, 6); /* (8000 pairs) */
  assert_int_equal(p.route, 0);
  assert_int_equal(moe_route_in_env(), 1);
  const uint32_t hash_in = p.arg_hash;
  assert_int_equal(moe_plan_make(&a, 4, 1, 40, need, &p), MELD_OK);
  assert_int_equal(p.comm_ctas, 5);
  assert_int_equal(p.route_ctas, 5); /* (up to the comm CTAs) */
  meld_moe_args_t few = a;
  few.tokens = 767; /* 6136 pairs */
  assert_int_equal(moe_plan_make(&few, 4, 1, 132, need, &p), MELD_OK);
  assert_int_equal(p.route_ctas, 1);
  few.tokens = 768;
  assert_int_equal(moe_plan_make(&few, 4, 1, 132, need, &p), MELD_OK);
  assert_int_equal(p.route_ctas, 4);
  setenv("MELD_MOE_ROUTE_IN", "0", 1);
  assert_int_equal(moe_route_in_env(), 0);
  assert_int_equal(moe_plan_make(&a, 4, 1, 132, need, &p), MELD_OK);
  assert_int_equal(p.route_in, 0);
  assert_int_not_equal(p.arg_hash, hash_in); /* (ranks routing in different places refuse each other) */
  assert_int_equal(p.route_ctas, 1); /* (8000 pairs) */
  meld_moe_args_t big = a;
  big.tokens = 2048, big.capacity = 2048 * 8 * 4 + 64 * 128; /* 16384 pairs */
  const size_t need_big = meld_moe_workspace_bytes(4, big.tokens, big.topk, big.experts, big.hidden, big.capacity);
  assert_int_equal(moe_plan_make(&big, 4, 1, 132, need_big, &p), MELD_OK);
  assert_int_equal(p.route_ctas, 4);
  big.tokens = 2047;
  assert_int_equal(moe_plan_make(&big, 4, 1, 132, need_big, &p), MELD_OK);
  assert_int_equal(p.route_ctas, 1);
  big.tokens = 8192; /* 65536 pairs: 16 */
  big.capacity = 8192 * 8 * 4 + 64 * 128;
  const size_t need_8k = meld_moe_workspace_bytes(4, big.tokens, big.topk, big.experts, big.hidden, big.capacity);
  assert_int_equal(moe_plan_make(&big, 4, 1, 132, need_8k, &p), MELD_OK);
  assert_int_equal(p.route_ctas, MOE_ROUTE_MAX_CTAS);
  unsetenv("MELD_MOE_ROUTE_IN");
  assert_int_equal(moe_plan_make(&big, 4, 1, 132, need_8k, &p), MELD_OK);
  assert_int_equal(p.route_ctas, MOE_ROUTE_MAX_CTAS);
  /* only the kernel with the deferred epilogue routes: MELD_MOE_DEFER=0 means the routing kernel,
   * and asking for both is refused */
  setenv("MELD_MOE_DEFER", "0", 1);
  assert_int_equal(moe_route_in_env(), 0);
  assert_int_equal(moe_plan_make(&a, 4, 1, 132, need, &p), MELD_OK);
  assert_int_equal(p.route_in, 0);
  setenv("MELD_MOE_ROUTE_IN", "1", 1);
  assert_int_equal(moe_plan_make(&a, 4, 1, 132, need, &p), MELD_ERR_INVALID_ARG);
  if (!strstr(meld_last_error(), "MELD_MOE_ROUTE_IN=1")) fail_msg("\"%s\"", meld_last_error());
  unsetenv("MELD_MOE_DEFER");
  setenv("MELD_MOE_ROUTE_IN", "2", 1);
  assert_int_equal(moe_plan_make(&a, 4, 1, 132, need, &p), MELD_ERR_INVALID_ARG);
  if (!strstr(meld_last_error(), "MELD_MOE_ROUTE_IN")) fail_msg("\"%s\"", meld_last_error());
  assert_int_equal(moe_route_in_env(), 1); /* (a bad value: the plan refuses; a refused call's count) */
  unsetenv("MELD_MOE_ROUTE_IN");
  setenv("MELD_MOE_ROUTE", "3", 1);
  assert_int_equal(moe_plan_make(&big, 4, 1, 132, need_8k, &p), MELD_OK);
  assert_int_equal(p.route, 1); /* (no staging with several CTAs) */
  setenv("MELD_MOE_ROUTE_CTAS", "1", 1);
  assert_int_equal(moe_plan_make(&big, 4, 1, 132, need_8k, &p), MELD_OK);
  assert_int_equal(p.route_ctas, 1);
  assert_int_equal(p.route, 3);
  setenv("MELD_MOE_ROUTE_CTAS", "17", 1);
  assert_int_equal(moe_plan_make(&big, 4, 1, 132, need_8k, &p), MELD_ERR_INVALID_ARG);
  if (!strstr(meld_last_error(), "MELD_MOE_ROUTE_CTAS")) fail_msg("\"%s\"", meld_last_error());
  unsetenv("MELD_MOE_ROUTE_CTAS");
  setenv("MELD_MOE_ROUTE", "4", 1);
  assert_int_equal(moe_plan_make(&big, 4, 1, 132, need_8k, &p), MELD_ERR_INVALID_ARG);
  if (!strstr(meld_last_error(), "MELD_MOE_ROUTE")) fail_msg("\"%s\"", meld_last_error());
  unsetenv("MELD_MOE_ROUTE");
  /* the hash: tokens and pointers may differ between ranks; the shapes may not */
  moe_plan_t q;
  assert_int_equal(moe_plan_make(&a, 4, 0, 132, need, &p), MELD_OK);
  meld_moe_args_t b = a;
  b.tokens = 10, b.x = FAKE(0x900000);
  assert_int_equal(moe_plan_make(&b, 4, 2, 132, need, &q), MELD_OK);
  assert_int_equal(p.arg_hash, q.arg_hash);
  const int64_t *fields[] = {&b.hidden, &b.n, &b.capacity};
  for (int i = 0; i < 3; i++) {
    b = a;
    *(int64_t *)((char *)&b + ((const char *)fields[i] - (const char *)&b)) += 128;
    assert_int_equal(moe_plan_make(&b, 4, 0, 132, need * 2, &q), MELD_OK);
    assert_int_not_equal(p.arg_hash, q.arg_hash);
  }
  b = a, b.topk = 4;
  assert_int_equal(moe_plan_make(&b, 4, 0, 132, need, &q), MELD_OK);
  assert_int_not_equal(p.arg_hash, q.arg_hash);
  b = a, b.experts = 128;
  assert_int_equal(moe_plan_make(&b, 4, 0, 132, need * 2, &q), MELD_OK);
  assert_int_not_equal(p.arg_hash, q.arg_hash);
}

static void test_combine_validation(void **state) {
  (void)state;
  meld_moe_args_t d = good();
  meld_moe_combine_args_t c;
  memset(&c, 0, sizeof c);
  c.dispatch = &d, c.y2 = FAKE(0x800000), c.topk_weights = (const float *)FAKE(0x900000), c.out = FAKE(0xa00000);
  assert_int_equal(moe_combine_validate(&c, 4), MELD_OK);
  assert_int_equal(moe_combine_validate(NULL, 4), MELD_ERR_INVALID_ARG);
  c.dispatch = NULL;
  assert_int_equal(moe_combine_validate(&c, 4), MELD_ERR_INVALID_ARG);
  if (!strstr(meld_last_error(), "dispatch is NULL")) fail_msg("\"%s\"", meld_last_error());
  c.dispatch = &d, d.capacity = 128 * 60; /* 1000 x 8 = 8000 > 7680 */
  assert_int_equal(moe_combine_validate(&c, 4), MELD_ERR_INVALID_ARG);
  if (!strstr(meld_last_error(), "exceeds capacity 7680")) fail_msg("\"%s\"", meld_last_error());
  d = good(), d.hidden = 1001;
  assert_int_equal(moe_combine_validate(&c, 4), MELD_ERR_INVALID_ARG);
  if (!strstr(meld_last_error(), "the dispatch arguments")) fail_msg("\"%s\"", meld_last_error());
  d = good(), c.ldo = 1020;
  assert_int_equal(moe_combine_validate(&c, 4), MELD_ERR_INVALID_ARG);
  c.ldo = 0, c.y2 = FAKE(0x800008);
  assert_int_equal(moe_combine_validate(&c, 4), MELD_ERR_INVALID_ARG);
  c.y2 = FAKE(0x800000), c.topk_weights = NULL;
  assert_int_equal(moe_combine_validate(&c, 4), MELD_ERR_INVALID_ARG);
  d.tokens = 0, d.x = NULL, d.topk_ids = NULL, c.out = NULL; /* no tokens: no out, no weights */
  assert_int_equal(moe_combine_validate(&c, 4), MELD_OK);
}

static void test_gemm_validation(void **state) {
  (void)state;
  meld_moe_args_t d = good();
  meld_moe_gemm_args_t g;
  memset(&g, 0, sizeof g);
  g.dispatch = &d, g.a = FAKE(0x800000), g.k = 2048, g.w = FAKE(0x900000), g.n = 1024, g.c = FAKE(0xa00000);
  assert_int_equal(moe_gemm_validate(&g, 4), MELD_OK);
  assert_int_equal(moe_gemm_validate(NULL, 4), MELD_ERR_INVALID_ARG);
  g.k = 2044;
  assert_int_equal(moe_gemm_validate(&g, 4), MELD_ERR_INVALID_ARG);
  if (!strstr(meld_last_error(), "k 2044")) fail_msg("\"%s\"", meld_last_error());
  g.k = 2048, g.n = 0;
  assert_int_equal(moe_gemm_validate(&g, 4), MELD_ERR_INVALID_ARG);
  g.n = 1024, g.w = FAKE(0x900004);
  assert_int_equal(moe_gemm_validate(&g, 4), MELD_ERR_INVALID_ARG);
  if (!strstr(meld_last_error(), "w 0x900004")) fail_msg("\"%s\"", meld_last_error());
  g.w = FAKE(0x900000), g.c = NULL;
  assert_int_equal(moe_gemm_validate(&g, 4), MELD_ERR_INVALID_ARG);
  g.c = FAKE(0xa00000), d.capacity = 100;
  assert_int_equal(moe_gemm_validate(&g, 4), MELD_ERR_INVALID_ARG);
  if (!strstr(meld_last_error(), "dispatch arguments")) fail_msg("\"%s\"", meld_last_error());
}

static uint64_t rng(uint64_t *s) {
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
  return *s;
}

static void test_layout_ref(void **state) {
  (void)state;
  uint64_t s = 88172645463325252ull;
  for (int trial = 0; trial < 300; trial++) {
    const int P = 1 + (int)(rng(&s) % 8), EL = 1 + (int)(rng(&s) % 9), E = P * EL;
    int32_t *cnt = malloc(sizeof(int32_t) * P * E), *seg = malloc(4 * E), *off = malloc(4 * E), used[8];
    for (int i = 0; i < P * E; i++) cnt[i] = rng(&s) % 4 == 0 ? 0 : (int32_t)(rng(&s) % 300);
    const int64_t cap = 128 * (int64_t)(1 + rng(&s) % 40);
    for (int me = 0; me < P; me++) {
      const int bad = moe_layout_ref(cnt, P, E, cap, me, seg, off, used);
      int want_bad = -1;
      for (int d = 0; d < P; d++) {
        int64_t row = 0;
        for (int j = 0; j < EL; j++) {
          const int e = d * EL + j;
          int64_t m = 0, before = 0;
          for (int r = 0; r < P; r++) m += cnt[r * E + e], before += r < me ? cnt[r * E + e] : 0;
          assert_int_equal(seg[e], row);
          assert_int_equal(seg[e] % 128, 0);
          assert_int_equal(off[e], before);
          row += (m + 127) / 128 * 128;
          /* every source's rows lie inside the segment, after the lower ranks' */
          assert_true(before + (me < P ? cnt[me * E + e] : 0) <= (m + 127) / 128 * 128);
        }
        assert_int_equal(used[d], row / 128);
        if (row > cap && want_bad < 0) want_bad = d;
      }
      assert_int_equal(bad, want_bad);
    }
    free(cnt), free(seg), free(off);
  }
}


/* The scheme across nodes against the global routing, by brute force over random layouts: the
 * rail gathers its ranks' tokens node by node; node b keeps the ids of its experts (renumbered);
 * its node-comm rank l' receives a gathered slot when the renumbered id is one of its experts.
 * Every routed slot must reach exactly the rank that holds its expert globally, and the origin
 * the node op reports (l, gathered slot) must map back to (global source rank, pair). */
static void test_net_scheme(void **state) {
  (void)state;
  uint64_t rng = 12345;
  for (int iter = 0; iter < 300; iter++) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    const int N = 2 + (int)((rng >> 33) % 3), L = 1 + (int)((rng >> 40) % 4), P = N * L;
    const int topk = 1 + (int)((rng >> 20) % 4), E = P * (1 + (int)((rng >> 50) % 3));
    int T[4]; /* tokens a rail (equal along a rail, different between rails) */
    for (int l = 0; l < L; l++) T[l] = (int)((rng >> (8 + 5 * l)) % 7);
    const int en = E / N, er = E / P;
    /* ids[s][t][j]: distinct experts or -1 */
    int32_t *ids = calloc((size_t)P * 8 * 4, sizeof *ids);
    int *hits = calloc((size_t)P * 8 * 4, sizeof *hits);
    assert_non_null(ids), assert_non_null(hits);
    for (int s = 0; s < P; s++)
      for (int t = 0; t < T[s % L]; t++)
        for (int j = 0; j < topk; j++) {
          rng = rng * 6364136223846793005ull + 1442695040888963407ull;
          int32_t e = (int32_t)((rng >> 33) % (uint64_t)(E + 1)) - 1;
          for (int q = 0; q < j; q++)
            if (ids[(s * 8 + t) * 4 + q] == e) e = -1;
          ids[(s * 8 + t) * 4 + j] = e;
        }
    for (int b = 0; b < N; b++)      /* the receiving node */
      for (int l = 0; l < L; l++)    /* the node-comm source: rank b L + l, which gathered rail l */
        for (int a = 0; a < N; a++)  /* the gathered tokens of rank a L + l */
          for (int t = 0; t < T[l]; t++)
            for (int j = 0; j < topk; j++) {
              const int s = a * L + l;
              const int32_t id = ids[(s * 8 + t) * 4 + j];
              const int32_t lid = moe_net_local_id(id, b, en);
              if (id >= 0 && id / en == b) assert_int_equal(lid, id - b * en);
              else {
                assert_int_equal(lid, -1);
                continue;
              }
              const int dest = b * L + lid / er; /* the node op's destination, as a global rank */
              assert_int_equal(dest, id / er);
              const int32_t g = a * T[l] + t, slot = g * topk + j;
              int32_t rank = -1, pair = -1;
              moe_net_origin(l, slot, topk, T[l], L, &rank, &pair);
              assert_int_equal(rank, s);
              assert_int_equal(pair, t * topk + j);
              hits[(s * 8 + t) * 4 + j]++;
            }
    for (int s = 0; s < P; s++)
      for (int t = 0; t < T[s % L]; t++)
        for (int j = 0; j < topk; j++)
          assert_int_equal(hits[(s * 8 + t) * 4 + j], ids[(s * 8 + t) * 4 + j] >= 0 ? 1 : 0);
    free(ids), free(hits);
  }
  assert_int_equal(moe_net_local_id(-1, 0, 8), -1);
  assert_int_equal(moe_net_local_id(15, 1, 8), 7);
  assert_int_equal(moe_net_local_id(16, 1, 8), -1);
}

/* The node call's arguments across nodes, and the sentences of what is refused. */
static void test_net_args(void **state) {
  (void)state;
  meld_moe_args_t a = good(), d;
  a.experts = 64, a.tokens = 100;
  /* 4 nodes x 8 ranks: 32 ranks in all (more than one node's limit), 8 a node */
  assert_int_equal(moe_net_args(&a, 4, 8, FAKE(0x900000), (const int32_t *)FAKE(0xa00000), &d), MELD_OK);
  assert_int_equal(d.tokens, 400);
  assert_int_equal(d.experts, 16);
  assert_ptr_equal(d.x, FAKE(0x900000));
  assert_int_equal(d.ldx, a.hidden);
  assert_ptr_equal(d.topk_ids, FAKE(0xa00000));
  assert_ptr_equal(d.w, a.w);
  assert_int_equal(d.capacity, a.capacity);
  assert_int_equal(d.n, a.n);
  /* without the buffers: the user's pointers, only to check them */
  assert_int_equal(moe_net_args(&a, 2, 2, NULL, NULL, &d), MELD_OK);
  assert_ptr_equal(d.x, a.x);
  a.experts = 60; /* not a multiple of 8 ranks */
  assert_int_equal(moe_net_args(&a, 2, 4, NULL, NULL, &d), MELD_ERR_INVALID_ARG);
  assert_non_null(strstr(meld_last_error(), "experts 60 is not a positive multiple of the 8 ranks (2 nodes x 4)"));
  a.experts = 64;
  a.tokens = -1;
  assert_int_equal(moe_net_args(&a, 2, 4, NULL, NULL, &d), MELD_ERR_INVALID_ARG);
  a.tokens = 100;
  a.w = NULL; /* the node call's own check, said to be the node's call */
  assert_int_equal(moe_net_args(&a, 2, 4, NULL, NULL, &d), MELD_ERR_INVALID_ARG);
  assert_non_null(strstr(meld_last_error(), "across 2 nodes"));
  assert_non_null(strstr(meld_last_error(), "w is NULL"));
  a.w = good().w;
  a.tokens = (int64_t)1 << 27; /* x 8 topk x 2 nodes: the gathered pairs pass 2^31 */
  assert_int_equal(moe_net_args(&a, 2, 4, NULL, NULL, &d), MELD_ERR_INVALID_ARG);
  assert_non_null(strstr(meld_last_error(), "268435456 tokens gathered"));
  assert_int_equal(moe_net_args(NULL, 2, 4, NULL, NULL, &d), MELD_ERR_INVALID_ARG);
  /* a node of more ranks than one node's op takes */
  a.tokens = 100, a.experts = 2 * 32;
  assert_int_equal(moe_net_args(&a, 2, 32, NULL, NULL, &d), MELD_ERR_UNSUPPORTED);
}

/* The scratch across nodes: regions in order, 256-aligned, each large enough. */
static void test_net_scratch(void **state) {
  (void)state;
  const int64_t T = 1000, H = 1032;
  const int32_t topk = 6;
  for (int N = 2; N <= 8; N *= 2)
    for (int L = 1; L <= 8; L *= 2) {
      const moe_net_scratch_t s = moe_net_scratch(N, L, T, topk, H);
      const size_t at[] = {s.x, s.ids, s.wt, s.part, s.out, s.tok, s.hdr, s.bytes};
      const size_t need[] = {(size_t)N * T * H * 2, (size_t)N * T * topk * 4, (size_t)N * T * topk * 4,
                             (size_t)N * T * H * 2, (size_t)T * H * 2, (size_t)L * 4, (size_t)N * MOE_NET_HDR_WORDS * 8};
      assert_int_equal(s.x, 0);
      for (int i = 0; i < 7; i++) {
        assert_int_equal(at[i] % 256, 0);
        if (at[i + 1] < at[i] + need[i]) fail_msg("N %d L %d: region %d at %zu overlaps the next at %zu", N, L, i, at[i], at[i + 1]);
      }
    }
  /* no tokens (a refusing rank's scratch): still room for the headers */
  const moe_net_scratch_t z = moe_net_scratch(16, 2, 0, 8, 1024);
  assert_true(z.bytes >= z.hdr + 16 * MOE_NET_HDR_WORDS * 8);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_validation),
      cmocka_unit_test(test_layout),
      cmocka_unit_test(test_plan),
      cmocka_unit_test(test_layout_ref),
      cmocka_unit_test(test_combine_validation),
      cmocka_unit_test(test_gemm_validation),
      cmocka_unit_test(test_activation),
      cmocka_unit_test(test_ffn_split),
      cmocka_unit_test(test_net_scheme),
      cmocka_unit_test(test_net_args),
      cmocka_unit_test(test_net_scratch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
