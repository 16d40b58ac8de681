/* test_attn_plan.c — meld_attention's argument checks and geometry on the CPU: every refused
 * argument with its sentence; for many sequence lengths, causal or not, and query / key
 * positions (ring steps), the K/V blocks a query tile reads are exactly those holding a key
 * visible to one of its queries, a block read without a mask has every key visible to every
 * query of the tile, and the grid's work items cover each (tile, head, batch) once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "attn_plan.h"
#include "common/proto.h"
#include "meld.h"

#define FAKE(x) ((void *)(uintptr_t)(x))

static meld_attention_args_t good(void) {
  meld_attention_args_t a;
  memset(&a, 0, sizeof a);
  a.q = FAKE(0x100000), a.k = FAKE(0x200000), a.v = FAKE(0x300000), a.o = FAKE(0x400000);
  a.lse = (float *)FAKE(0x500000);
  a.batch = 2, a.seq_q = 1000, a.seq_kv = 1000, a.heads = 32, a.heads_kv = 8, a.head_dim = 128;
  return a;
}

static void expect_err(const meld_attention_args_t *a, meld_result_t want, const char *needle) {
  meld_result_t r = attn_args_validate(a);
  assert_int_equal(r, want);
  if (!strstr(meld_last_error(), needle)) fail_msg("message \"%s\" lacks \"%s\"", meld_last_error(), needle);
}

static void test_validation(void **state) {
  (void)state;
  meld_attention_args_t a = good();
  assert_int_equal(attn_args_validate(&a), MELD_OK);
  expect_err(NULL, MELD_ERR_INVALID_ARG, "args is NULL");
  a.v = NULL;
  expect_err(&a, MELD_ERR_INVALID_ARG, "v is NULL");
  a = good(), a.q = FAKE(0x100008);
  expect_err(&a, MELD_ERR_INVALID_ARG, "q 0x100008 is not 16-byte aligned");
  a = good(), a.lse = (float *)FAKE(0x500002);
  expect_err(&a, MELD_ERR_INVALID_ARG, "lse");
  a = good(), a.head_dim = 64;
  assert_int_equal(attn_args_validate(&a), MELD_OK);
  a = good(), a.head_dim = 96;
  expect_err(&a, MELD_ERR_UNSUPPORTED, "head_dim 96 (64 and 128");
  a = good(), a.head_dim = 0;
  expect_err(&a, MELD_ERR_INVALID_ARG, "head_dim 0");
  a = good(), a.heads_kv = 5;
  expect_err(&a, MELD_ERR_INVALID_ARG, "heads 32 is not a multiple of heads_kv 5");
  a = good(), a.heads_kv = 0;
  expect_err(&a, MELD_ERR_INVALID_ARG, "heads_kv 0");
  a = good(), a.seq_kv = 0;
  expect_err(&a, MELD_ERR_INVALID_ARG, "seq_kv 0 < 1");
  a = good(), a.seq_q = -1;
  expect_err(&a, MELD_ERR_INVALID_ARG, "seq_q -1");
  a = good(), a.causal = 3;
  expect_err(&a, MELD_ERR_INVALID_ARG, "causal 3");
  a = good(), a.scale = -0.5f;
  expect_err(&a, MELD_ERR_INVALID_ARG, "scale");
  a = good(), a.stride_q = 4000;
  expect_err(&a, MELD_ERR_INVALID_ARG, "stride_q 4000 is smaller than a token's 4096");
  a = good(), a.stride_k = 1028;
  expect_err(&a, MELD_ERR_INVALID_ARG, "stride_k 1028 is not a multiple of 8");
  a = good(), a.stride_v = 3 * 1024, a.stride_o = 4096 + 64, a.stride_q = 3 * 4096;
  assert_int_equal(attn_args_validate(&a), MELD_OK);
  a = good(), a.q_pos0 = (int64_t)1 << 61;
  expect_err(&a, MELD_ERR_INVALID_ARG, "q_pos0");
  a = good(), a.seq_q = 0; /* nothing to do: valid */
  assert_int_equal(attn_args_validate(&a), MELD_OK);
  a = good(), a.lse = NULL;
  assert_int_equal(attn_args_validate(&a), MELD_OK);
}

static int visible(const attn_params_t *p, int64_t i, int64_t j) {
  return i < p->seq_q && j < p->seq_kv && (!p->causal || p->kv_pos0 + j <= p->q_pos0 + i);
}

static void check_geometry(int sq, int skv, int causal, int64_t qp0, int64_t kp0) {
  meld_attention_args_t a = good();
  a.batch = 1, a.heads = 2, a.heads_kv = 1, a.seq_q = sq, a.seq_kv = skv, a.causal = causal;
  a.q_pos0 = qp0, a.kv_pos0 = kp0;
  attn_params_t p;
  int64_t grid = 0;
  assert_int_equal(attn_plan_geometry(&a, &p, &grid), MELD_OK);
  assert_int_equal(grid, (int64_t)p.q_tiles * 2);
  for (int qt = 0; qt < p.q_tiles; qt++) {
    int jb, je;
    attn_kv_range(&p, qt, p.kv_pos0, &jb, &je);
    for (int j = 0; j < p.kv_tiles; j++) {
      int any = 0, all = 1;
      for (int64_t i = (int64_t)qt * ATTN_BM; i < (int64_t)(qt + 1) * ATTN_BM && i < sq; i++)
        for (int64_t k = (int64_t)j * ATTN_BN; k < (int64_t)(j + 1) * ATTN_BN; k++) {
          const int v = visible(&p, i, k);
          any |= v;
          all &= v;
        }
      const int in = j >= jb && j < je;
      if (in != any)
        fail_msg("sq %d skv %d causal %d pos %lld/%lld: tile %d block %d read %d, holds a visible key %d", sq, skv,
                 causal, (long long)qp0, (long long)kp0, qt, j, in, any);
      if (in && !attn_block_masked(&p, qt, j, p.kv_pos0) && !all)
        fail_msg("sq %d skv %d causal %d pos %lld/%lld: tile %d block %d unmasked with a hidden key", sq, skv, causal,
                 (long long)qp0, (long long)kp0, qt, j);
    }
  }
}

static void test_geometry(void **state) {
  (void)state;
  const int seqs[] = {1, 5, 127, 128, 129, 300, 384, 640};
  const int64_t pos[] = {0, 1, 100, 128, 200, 513, -77};
  for (size_t a = 0; a < sizeof seqs / sizeof *seqs; a++)
    for (size_t b = 0; b < sizeof seqs / sizeof *seqs; b++) {
      check_geometry(seqs[a], seqs[b], 0, 0, 0);
      for (size_t x = 0; x < sizeof pos / sizeof *pos; x++)
        for (size_t y = 0; y < sizeof pos / sizeof *pos; y++) check_geometry(seqs[a], seqs[b], 1, pos[x], pos[y]);
    }
}

/* Every (tile, head, batch) once for any chunk of heads; inside a chunk, tile ranks in order
 * (heavier first when causal) with the chunk's heads side by side. */
static void check_order(int batch, int heads, int heads_kv, int causal, int chunk) {
  meld_attention_args_t a = good();
  a.batch = batch, a.seq_q = 1000, a.heads = heads, a.heads_kv = heads_kv, a.causal = causal;
  attn_params_t p;
  int64_t grid = 0;
  assert_int_equal(attn_plan_geometry(&a, &p, &grid), MELD_OK);
  p.chunk_heads = chunk;
  assert_int_equal(grid, (int64_t)8 * heads * batch);
  char *seen = calloc((size_t)grid, 1);
  int prev_b = 0, prev_c = 0, prev_r = -1;
  for (int64_t x = 0; x < grid; x++) {
    int qt, h, b;
    attn_work_of(&p, x, &qt, &h, &b);
    assert_true(qt >= 0 && qt < 8 && h >= 0 && h < heads && b >= 0 && b < batch);
    assert_int_equal(seen[((int64_t)b * heads + h) * 8 + qt]++, 0);
    const int c = h / chunk, r = causal ? 7 - qt : qt;
    assert_true(b > prev_b || (b == prev_b && (c > prev_c || (c == prev_c && r >= prev_r))));
    if (b != prev_b || c != prev_c) prev_r = -1;
    prev_b = b, prev_c = c, prev_r = r;
  }
  free(seen);
}

/* A ring's layout for the checks below: rank r of P holds piece r of P (contiguous: its query i
 * at qp0 + i, rank s's key k at s * seg_pos + k) or, with h > 0, pieces r and 2P - 1 - r of 2P
 * of h tokens each (zigzag). rot: the part step 0 reads (own part first: rot = r). */
typedef struct {
  int P, r, rot, sq, skv, causal;
  int64_t qp0, seg_pos, h;
} ring_layout_t;

static int64_t zz_pos(int rank, int P, int64_t h, int64_t i) {
  return i < h ? rank * h + i : (2 * P - 1 - rank) * h + (i - h);
}
static int64_t lay_qpos(const ring_layout_t *L, int64_t i) { return L->h ? zz_pos(L->r, L->P, L->h, i) : L->qp0 + i; }
static int64_t lay_kpos(const ring_layout_t *L, int s, int64_t k) {
  return L->h ? zz_pos(s, L->P, L->h, k) : s * L->seg_pos + k;
}

/* The iterator of a query tile visits exactly the (step, half, block) triples holding a key visible
 * to one of the tile's queries, in order (own part first; zigzag: first half before second), each
 * at its true origin, counts them, and a block it reads without a mask has every key visible to
 * every query of the tile. */
static void check_ring(const ring_layout_t *L) {
  meld_attention_args_t a = good();
  a.batch = 1, a.heads = 2, a.heads_kv = 1, a.seq_q = L->sq, a.seq_kv = L->skv, a.causal = L->causal;
  a.q_pos0 = L->h ? 0 : L->qp0;
  attn_params_t p;
  int64_t grid = 0;
  assert_int_equal(attn_plan_geometry(&a, &p, &grid), MELD_OK);
  p.kv_segs = L->P, p.seg_rot = L->rot;
  if (L->h) p.zz_half = (int)L->h, p.q_pos0 = L->r * L->h, p.q_pos1 = (2 * L->P - 1 - L->r) * L->h - L->h;
  else p.kv_seg_pos = L->seg_pos;
  const int halves = L->h ? 2 : 1;
  for (int qt = 0; qt < p.q_tiles; qt++) {
    assert_int_equal(attn_q_base(&p, qt) + (int64_t)qt * ATTN_BM, lay_qpos(L, (int64_t)qt * ATTN_BM));
    attn_iter_t it = {0, 0, 0};
    int more = attn_iter_seek(&p, qt, 0, &it), n = 0;
    for (int step = 0; step < L->P; step++)
      for (int half = 0; half < halves; half++) {
        const int s = (L->rot - step + L->P) % L->P; /* the part this step reads */
        assert_int_equal(attn_seg_src(&p, step), s);
        const int jlo = L->h ? (int)(half * L->h / ATTN_BN) : 0;
        const int jhi = L->h ? (int)((half + 1) * L->h / ATTN_BN) : p.kv_tiles;
        for (int j = jlo; j < jhi; j++) {
          int any = 0, all = 1;
          for (int64_t i = (int64_t)qt * ATTN_BM; i < (int64_t)(qt + 1) * ATTN_BM && i < L->sq; i++)
            for (int64_t k = (int64_t)j * ATTN_BN; k < (int64_t)(j + 1) * ATTN_BN && k < L->skv; k++) {
              const int vis = !L->causal || lay_kpos(L, s, k) <= lay_qpos(L, i);
              any |= vis, all &= vis;
            }
          if (!any) continue;
          if (!more || it.s != halves * step + half || it.j != j)
            fail_msg("ring P %d rank %d rot %d, %d x %d, causal %d, zigzag %lld: tile %d should read step %d half %d "
                     "(part %d) block %d next", L->P, L->r, L->rot, L->sq, L->skv, L->causal, (long long)L->h, qt, step,
                     half, s, j);
          assert_int_equal(attn_seg_step(&p, it.s), step);
          /* the segment's origin: key j sits at pos0 + j */
          assert_int_equal(attn_iter_pos0(&p, &it) + (int64_t)j * ATTN_BN, lay_kpos(L, s, (int64_t)j * ATTN_BN));
          if (!attn_block_masked(&p, qt, j, attn_iter_pos0(&p, &it)) && !all)
            fail_msg("ring P %d rank %d, zigzag %lld: tile %d block %d read unmasked with hidden keys", L->P, L->r,
                     (long long)L->h, qt, j);
          more = attn_iter_next(&p, qt, &it);
          n++;
        }
      }
    if (more) fail_msg("ring P %d rank %d, zigzag %lld: tile %d reads a block too many", L->P, L->r, (long long)L->h, qt);
    assert_int_equal(attn_iter_count(&p, qt), n);
  }
}

/* Contiguous parts (a part at position kv_pos0 + s * seg_pos). */
static void test_segments(void **state) {
  (void)state;
  for (int P = 1; P <= 4; P++)
    for (int r = 0; r < P; r++) {
      const int lens[] = {128, 300, 1000};
      for (size_t i = 0; i < 3; i++) {
        const int64_t n = lens[i];
        /* rank r of a causal ring, own part first (rot r) and in rank order (rot 0) */
        const ring_layout_t ls[3] = {{P, r, r, (int)n, (int)n, 1, r * n, n, 0},
                                     {P, r, r, (int)n, (int)n, 0, r * n, n, 0},
                                     {P, r, 0, (int)n, (int)n, 1, r * n, n, 0}};
        for (int v = 0; v < 3; v++) check_ring(&ls[v]);
      }
    }
}

/* The zigzag ring (rank r holds pieces r and 2P - 1 - r of 2P, h tokens each). */
static void test_zigzag(void **state) {
  (void)state;
  for (int P = 1; P <= 4; P++)
    for (int r = 0; r < P; r++) {
      const int lens[] = {256, 512, 1024};
      for (size_t i = 0; i < 3; i++) {
        for (int causal = 0; causal < 2; causal++) {
          const ring_layout_t l = {P, r, r, lens[i], lens[i], causal, 0, 0, lens[i] / 2};
          check_ring(&l);
        }
      }
    }
}

static void test_work_order(void **state) {
  (void)state;
  for (int causal = 0; causal < 2; causal++) {
    const int chunks[] = {1, 2, 3, 4, 8, 12};
    for (size_t i = 0; i < sizeof chunks / sizeof *chunks; i++) check_order(3, 12, 4, causal, chunks[i]);
    check_order(1, 5, 5, causal, 2); /* a partial last chunk */
  }
  /* the rule: whole K/V groups within the L2 budget, at least one group, at most all heads */
  meld_attention_args_t a = good(); /* 32 heads, 8 KV heads: groups of 4 */
  attn_params_t p;
  int64_t grid;
  a.causal = 1;
  a.seq_q = a.seq_kv = 16384; /* 8 MB of K + V a group: 3 groups */
  assert_int_equal(attn_plan_geometry(&a, &p, &grid), MELD_OK);
  assert_int_equal(p.chunk_heads, 12);
  a.seq_kv = 4096; /* 2 MB: 12 groups, capped at the 8 there are */
  assert_int_equal(attn_plan_geometry(&a, &p, &grid), MELD_OK);
  assert_int_equal(p.chunk_heads, 32);
  a.heads_kv = 32, a.seq_kv = 1 << 20; /* 512 MB a head: one */
  assert_int_equal(attn_plan_geometry(&a, &p, &grid), MELD_OK);
  assert_int_equal(p.chunk_heads, 1);
  a.causal = 0, a.heads_kv = 8, a.seq_kv = 4096; /* not causal: one K/V group */
  assert_int_equal(attn_plan_geometry(&a, &p, &grid), MELD_OK);
  assert_int_equal(p.chunk_heads, 4);
}

/* The fused ring's plan: K/V heads a launch from the workspace (K and V of the P - 1 peers'
 * parts), the gathered fallback with its reason, chunks that fit the signal slots, comm CTAs by
 * SM share, and the overrides. */
static void test_ring_plan(void **state) {
  (void)state;
  unsetenv("MELD_RING_ATTN"), unsetenv("MELD_RING_ATTN_HEADS"), unsetenv("MELD_RING_ATTN_COMM_CTAS");
  meld_attention_args_t a = good(); /* batch 2, 1000 tokens a part, 8 K/V heads */
  a.batch = 1, a.seq_q = a.seq_kv = 4096, a.heads = 32, a.heads_kv = 32;
  attn_ring_plan_t rp;
  /* one K/V head of 4096 tokens from one peer: 2 x 1 MB; a 64 MB workspace holds all 32 */
  assert_int_equal(attn_ring_plan_make(&a, 2, (size_t)64 << 20, 132, &rp), MELD_OK);
  assert_true(rp.fused);
  assert_int_equal(rp.heads_per_launch, 32);
  assert_int_equal(rp.launches, 1);
  assert_int_equal(rp.stage_bytes, (size_t)64 << 20);
  assert_int_equal(rp.chunk_tokens, 512);
  assert_int_equal(rp.token_chunks, 8);
  assert_int_equal(rp.comm_ctas, 8);
  /* 8 ranks, 16384 tokens: 7 x 8 MB a head: one head a launch in 64 MB, 32 launches */
  a.seq_q = a.seq_kv = 16384;
  assert_int_equal(attn_ring_plan_make(&a, 8, (size_t)64 << 20, 16, &rp), MELD_OK);
  assert_true(rp.fused);
  assert_int_equal(rp.heads_per_launch, 1);
  assert_int_equal(rp.launches, 32);
  assert_int_equal(rp.comm_ctas, 2); /* 16 SMs a rank (8 ranks on one GPU): 2 */
  /* a remainder launch: 3 heads (8 MB each) a launch of 8 */
  a.heads_kv = 8;
  assert_int_equal(attn_ring_plan_make(&a, 2, (size_t)24 << 20, 66, &rp), MELD_OK);
  assert_int_equal(rp.heads_per_launch, 3);
  assert_int_equal(rp.launches, 3);
  /* not even one head fits: the gathered path, saying why */
  assert_int_equal(attn_ring_plan_make(&a, 8, (size_t)32 << 20, 132, &rp), MELD_OK);
  assert_false(rp.fused);
  assert_non_null(strstr(rp.why, "MELD_WORKSPACE_BYTES"));
  /* a long batch: chunks grow until P x chunks fit the signal slots */
  a.batch = 256, a.seq_q = a.seq_kv = 65536, a.heads_kv = 8; /* 2 x 256 x 8 x 128 chunks of 512 */
  assert_int_equal(attn_ring_plan_make(&a, 2, (size_t)64 << 30, 132, &rp), MELD_OK);
  assert_true(rp.fused);
  assert_true((uint64_t)2 * 256 * (uint64_t)rp.heads_per_launch * (uint64_t)rp.token_chunks <= MELD_PAD_SIGNAL_SLOTS);
  assert_true(rp.chunk_tokens > 512 && rp.chunk_tokens % ATTN_BN == 0);
  /* head_dim 64: half the staging a head (S 16384, 8 ranks: 7 x 4 MB), two heads a launch in 64 MB */
  a = good(), a.batch = 1, a.seq_q = a.seq_kv = 16384, a.heads = 32, a.heads_kv = 32, a.head_dim = 64;
  assert_int_equal(attn_ring_plan_make(&a, 8, (size_t)64 << 20, 132, &rp), MELD_OK);
  assert_true(rp.fused);
  assert_int_equal(rp.heads_per_launch, 2);
  assert_int_equal(rp.launches, 16);
  assert_int_equal(rp.stage_bytes, (size_t)2 * 7 * 4 << 20);
  /* one rank: nothing to fuse */
  a = good();
  assert_int_equal(attn_ring_plan_make(&a, 1, (size_t)64 << 20, 132, &rp), MELD_OK);
  assert_false(rp.fused);
  /* overrides */
  setenv("MELD_RING_ATTN", "unfused", 1);
  assert_int_equal(attn_ring_plan_make(&a, 2, (size_t)64 << 20, 132, &rp), MELD_OK);
  assert_false(rp.fused);
  assert_string_equal(rp.why, "MELD_RING_ATTN=unfused");
  setenv("MELD_RING_ATTN", "fast", 1);
  assert_int_equal(attn_ring_plan_make(&a, 2, (size_t)64 << 20, 132, &rp), MELD_ERR_INVALID_ARG);
  assert_non_null(strstr(meld_last_error(), "MELD_RING_ATTN=fast"));
  unsetenv("MELD_RING_ATTN");
  setenv("MELD_RING_ATTN_HEADS", "3", 1);
  setenv("MELD_RING_ATTN_COMM_CTAS", "5", 1);
  assert_int_equal(attn_ring_plan_make(&a, 2, (size_t)64 << 20, 132, &rp), MELD_OK);
  assert_int_equal(rp.heads_per_launch, 3);
  assert_int_equal(rp.launches, 3); /* 8 K/V heads */
  assert_int_equal(rp.comm_ctas, 5);
  setenv("MELD_RING_ATTN_HEADS", "0", 1);
  assert_int_equal(attn_ring_plan_make(&a, 2, (size_t)64 << 20, 132, &rp), MELD_ERR_INVALID_ARG);
  assert_non_null(strstr(meld_last_error(), "MELD_RING_ATTN_HEADS=0"));
  unsetenv("MELD_RING_ATTN_HEADS"), unsetenv("MELD_RING_ATTN_COMM_CTAS");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ring_plan),
      cmocka_unit_test(test_validation),
      cmocka_unit_test(test_geometry),
      cmocka_unit_test(test_work_order),
      cmocka_unit_test(test_segments),
      cmocka_unit_test(test_zigzag),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
