/* moe_plan.c — argument checks, workspace layout and plan of meld_moe_dispatch_gemm (moe_plan.h). */
#include "moe_plan.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/proto.h" /* meld_hash_*, MELD_OP_* */
#include "config.h"       /* meld_env_int64 */
#include "error.h"

#define FN "meld_moe_dispatch_gemm"

static int aligned(const void *p, uintptr_t n) { return ((uintptr_t)p % n) == 0; }
static size_t up256(size_t v) { return (v + 255) & ~(size_t)255; }

moe_layout_t moe_layout(int nranks, int64_t pairs, int32_t experts, int64_t hidden, int64_t capacity) {
  moe_layout_t l;
  const size_t cap = (size_t)capacity, E = (size_t)experts, P = (size_t)nranks, blocks = cap / MOE_BM;
  size_t o = 0;
  l.stage = o, o = up256(o + cap * (size_t)hidden * 2);
  l.origin = o, o = up256(o + cap * 8);
  l.flags = o, o = up256(o + blocks * 8);
  l.counts = o, o = up256(o + P * E * 4);
  l.arrivals = o, o = up256(o + P * 8);
  l.estart = o, o = up256(o + (E + 1) * 4);
  l.seg = o, o = up256(o + E * 4);
  l.srcoff = o, o = up256(o + E * 4);
  l.used = o, o = up256(o + P * 4);
  l.brow = o, o = up256(o + blocks * 4);
  l.span = o, o = up256(o + blocks * 8);
  l.sorted = o, o = up256(o + (size_t)(pairs > 0 ? pairs : 0) * 4);
  l.inv = o, o = up256(o + (size_t)(pairs > 0 ? pairs : 0) * 4);
  l.ccount = o, o = up256(o + (size_t)MOE_ROUTE_MAX_CTAS * E * 4);
  l.bytes = o;
  return l;
}

meld_result_t moe_args_validate(const meld_moe_args_t *a, int P) {
  if (!a) return meld_error(MELD_ERR_INVALID_ARG, FN ": args is NULL");
  if (P < 1 || P > MOE_MAX_RANKS)
    return meld_error(MELD_ERR_UNSUPPORTED, FN ": %d ranks (1..%d are supported)", P, MOE_MAX_RANKS);
  if (a->tokens < 0) return meld_error(MELD_ERR_INVALID_ARG, FN ": tokens %lld < 0", (long long)a->tokens);
  if (a->topk < 1 || a->topk > MOE_MAX_TOPK)
    return meld_error(MELD_ERR_INVALID_ARG, FN ": topk %d is outside [1, %d]", a->topk, MOE_MAX_TOPK);
  if (a->tokens * (int64_t)a->topk >= ((int64_t)1 << 31))
    return meld_error(MELD_ERR_INVALID_ARG, FN ": tokens x topk = %lld exceeds 2^31 - 1",
                      (long long)(a->tokens * a->topk));
  if (a->experts < P || a->experts % P)
    return meld_error(MELD_ERR_INVALID_ARG, FN ": experts %d is not a positive multiple of the %d ranks", a->experts, P);
  if (a->experts > MOE_MAX_EXPERTS || a->experts / P > MOE_MAX_LOCAL)
    return meld_error(MELD_ERR_UNSUPPORTED, FN ": experts %d (at most %d, and %d a rank, are supported)", a->experts, MOE_MAX_EXPERTS,
                      MOE_MAX_LOCAL);
  if (a->hidden < 8 || a->hidden % 8)
    return meld_error(MELD_ERR_INVALID_ARG, FN ": hidden %lld is not a positive multiple of 8", (long long)a->hidden);
  if (a->n < 8 || a->n % 8)
    return meld_error(MELD_ERR_INVALID_ARG, FN ": n %lld is not a positive multiple of 8", (long long)a->n);
  if (a->capacity < MOE_BM || a->capacity % MOE_BM)
    return meld_error(MELD_ERR_INVALID_ARG, FN ": capacity %lld is not a positive multiple of %d rows",
                      (long long)a->capacity, MOE_BM);
  if (a->capacity >= ((int64_t)1 << 30) || a->hidden >= ((int64_t)1 << 30) ||
      (int64_t)(a->experts / P) * a->n >= ((int64_t)1 << 31))
    return meld_error(MELD_ERR_INVALID_ARG, FN ": capacity %lld, hidden %lld or (experts / ranks) x n too large",
                      (long long)a->capacity, (long long)a->hidden);
  if (a->activation != MELD_MOE_ACT_NONE && a->activation != MELD_MOE_ACT_SWIGLU)
    return meld_error(MELD_ERR_INVALID_ARG, FN ": activation %d is not MELD_MOE_ACT_NONE or MELD_MOE_ACT_SWIGLU",
                      a->activation);
  if (a->activation == MELD_MOE_ACT_SWIGLU && a->n % (2 * MOE_BM))
    return meld_error(MELD_ERR_INVALID_ARG,
                      FN ": with MELD_MOE_ACT_SWIGLU, n %lld (gate and up rows) must be a multiple of %d (n / 2, "
                      "the activation's width, of %d)",
                      (long long)a->n, 2 * MOE_BM, MOE_BM);
  const int64_t ldx = a->ldx ? a->ldx : a->hidden;
  if (ldx < a->hidden || ldx % 8)
    return meld_error(MELD_ERR_INVALID_ARG, FN ": ldx %lld is smaller than hidden %lld or not a multiple of 8",
                      (long long)a->ldx, (long long)a->hidden);
  const struct {
    const void *p;
    const char *name;
    uintptr_t align;
    int need;
  } ptrs[] = {{a->x, "x", 16, a->tokens > 0}, {a->topk_ids, "topk_ids", 4, a->tokens > 0}, {a->w, "w", 16, 1},
              {a->y, "y", 16, 1}, {a->expert_offsets, "expert_offsets", 4, 1}, {a->expert_counts, "expert_counts", 4, 1},
              {a->row_origin, "row_origin", 8, 0}};
  for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++) {
    if (!ptrs[i].p) {
      if (ptrs[i].need) return meld_error(MELD_ERR_INVALID_ARG, FN ": %s is NULL", ptrs[i].name);
      continue;
    }
    if (!aligned(ptrs[i].p, ptrs[i].align))
      return meld_error(MELD_ERR_INVALID_ARG, FN ": %s %p is not %d-byte aligned", ptrs[i].name, ptrs[i].p,
                        (int)ptrs[i].align);
  }
  return MELD_OK;
}

meld_result_t moe_gemm_validate(const meld_moe_gemm_args_t *a, int P) {
  if (!a) return meld_error(MELD_ERR_INVALID_ARG, "meld_moe_grouped_gemm: args is NULL");
  if (!a->dispatch) return meld_error(MELD_ERR_INVALID_ARG, "meld_moe_grouped_gemm: dispatch is NULL");
  meld_result_t r = moe_args_validate(a->dispatch, P);
  if (r != MELD_OK) {
    meld_error_prefix("meld_moe_grouped_gemm: the dispatch arguments");
    return r;
  }
  if (a->k < 8 || a->k % 8 || a->k >= ((int64_t)1 << 30))
    return meld_error(MELD_ERR_INVALID_ARG, "meld_moe_grouped_gemm: k %lld is not a positive multiple of 8", (long long)a->k);
  if (a->n < 8 || a->n % 8 || (int64_t)(a->dispatch->experts / P) * a->n >= ((int64_t)1 << 31))
    return meld_error(MELD_ERR_INVALID_ARG, "meld_moe_grouped_gemm: n %lld is not a positive multiple of 8 (or too large)",
                      (long long)a->n);
  const struct {
    const void *p;
    const char *name;
  } ptrs[] = {{a->a, "a"}, {a->w, "w"}, {a->c, "c"}};
  for (int i = 0; i < 3; i++)
    if (!ptrs[i].p || ((uintptr_t)ptrs[i].p % 16))
      return meld_error(MELD_ERR_INVALID_ARG, "meld_moe_grouped_gemm: %s %p is NULL or not 16-byte aligned", ptrs[i].name,
                        ptrs[i].p);
  return MELD_OK;
}

meld_result_t moe_combine_validate(const meld_moe_combine_args_t *a, int P) {
  if (!a) return meld_error(MELD_ERR_INVALID_ARG, "meld_moe_combine: args is NULL");
  if (!a->dispatch) return meld_error(MELD_ERR_INVALID_ARG, "meld_moe_combine: dispatch is NULL");
  meld_result_t r = moe_args_validate(a->dispatch, P);
  if (r != MELD_OK) {
    meld_error_prefix("meld_moe_combine: the dispatch arguments");
    return r;
  }
  const meld_moe_args_t *d = a->dispatch;
  if (d->tokens * d->topk > d->capacity)
    return meld_error(MELD_ERR_INVALID_ARG,
                      "meld_moe_combine: tokens x topk = %lld exceeds capacity %lld (the rows come back into the "
                      "staging of capacity rows)",
                      (long long)(d->tokens * d->topk), (long long)d->capacity);
  const int64_t ldo = a->ldo ? a->ldo : d->hidden;
  if (ldo < d->hidden || ldo % 8)
    return meld_error(MELD_ERR_INVALID_ARG, "meld_moe_combine: ldo %lld is smaller than hidden %lld or not a multiple of 8",
                      (long long)a->ldo, (long long)d->hidden);
  if (!a->y2 || ((uintptr_t)a->y2 % 16))
    return meld_error(MELD_ERR_INVALID_ARG, "meld_moe_combine: y2 %p is NULL or not 16-byte aligned", a->y2);
  if (d->tokens > 0 && (!a->out || ((uintptr_t)a->out % 16)))
    return meld_error(MELD_ERR_INVALID_ARG, "meld_moe_combine: out %p is NULL or not 16-byte aligned", a->out);
  if (d->tokens > 0 && (!a->topk_weights || ((uintptr_t)a->topk_weights % 4)))
    return meld_error(MELD_ERR_INVALID_ARG, "meld_moe_combine: topk_weights %p is NULL or not 4-byte aligned",
                      (const void *)a->topk_weights);
  return MELD_OK;
}

meld_result_t moe_plan_make(const meld_moe_args_t *a, int P, int rank, int sm_count, size_t ws_bytes, moe_plan_t *p) {
  memset(p, 0, sizeof *p);
  p->nranks = P;
  p->rank = rank;
  p->tokens = a->tokens;
  p->hidden = a->hidden;
  p->n = a->n;
  p->capacity = a->capacity;
  p->ldx = a->ldx ? a->ldx : a->hidden;
  p->topk = a->topk;
  p->experts = a->experts;
  p->e_loc = a->experts / P;
  p->blocks = (int)(a->capacity / MOE_BM);
  p->act = a->activation;
  p->ws = moe_layout(P, a->tokens * a->topk, a->experts, a->hidden, a->capacity);
  if (p->ws.bytes > ws_bytes)
    return meld_error(MELD_ERR_OUT_OF_MEMORY,
                      FN ": the workspace holds %zu bytes; this call needs %zu (capacity %lld x hidden %lld staging "
                      "and tables): set MELD_WORKSPACE_BYTES (or meld_config_t.workspace_bytes) to at least that",
                      ws_bytes, p->ws.bytes, (long long)a->capacity, (long long)a->hidden);
  int64_t ctas = sm_count / 8;
  if (ctas < 1) ctas = 1;
  MELD_CHECK(meld_env_int64("MELD_MOE_COMM_CTAS", 1, MOE_MAX_COMM_CTAS, &ctas));
  if (ctas >= sm_count) ctas = sm_count > 1 ? sm_count - 1 : 1;
  p->comm_ctas = (int)ctas;
  int64_t v = -1;
  MELD_CHECK(meld_env_int64("MELD_MOE_DEFER", 0, 1, &v));
  p->defer = (int)v;
  /* The raster group: where an expert's rows fit one or two m-blocks, one m-block a group (each
   * block sweeps its expert's n-blocks: the weight is streamed in order) measured fastest
   * (session 32, one H200, dispatch + first GEMM against 8 / 16: DeepSeek-V3 256 experts T 512
   * 3.91 vs 4.37 ms, T 4096 6.19 vs 7.58, Zipf 6.48 vs 7.66, 32 experts T 128 0.565 vs 0.635;
   * session 31: 8 beat 16 at T 512); with ~1000 rows an expert the engine's choice (16): group 1
   * took 1.40x at Mixtral's 112 n-blocks (each block rereads the whole weight), even at 32 experts. */
  /* With the runs (default; MELD_MOE_RUNS=0 off) the tiles go expert by expert, in groups of
   * up to 16 of its blocks: an expert of 1-2 blocks is one group (its weight read once: with
   * group 1, its second block's tiles came ~16 tiles after the first's and missed L2 (session 33:
   * DeepSeek-V3 T 4096 read 20 GB from DRAM for 15.5 GB of weights and rows)), ~8 blocks as
   * the aligned group 8, more as the engine's group 16. */
  v = 1;
  MELD_CHECK(meld_env_int64("MELD_MOE_RUNS", 0, 1, &v));
  p->runs = (int)v;
  const int64_t per_expert = a->tokens * a->topk * P / a->experts; /* even routing, this rank's view */
  v = p->runs ? 16 : per_expert <= 256 ? 1 : 0;
  MELD_CHECK(meld_env_int64("MELD_MOE_GROUP_M", 1, 1024, &v));
  p->group_m = (int)v;
  /* The routing kernel (session 34, one H200, traced). One CTA walks ~1 us a step of 32 pairs a
   * warp at 32768 pairs (DeepSeek-V3 T 4096: 85 us, 114 at T 8192), bound by __match_any_sync and
   * its 1024 scattered stores a step; from 16384 pairs the pairs are split over one CTA per 4096
   * (each counts and places its range; one barrier exchanges the per-CTA counts). Its place walk:
   * __match_any_sync and direct stores by default (decode, 1024 pairs: 5.7 us vs 8.5-8.9 with
   * ballots; Mixtral T 4096, 8192 pairs: 6.6 vs 7.3-9.3); MELD_MOE_ROUTE bit 0 ballots, bit 1 the
   * sorted pairs staged in shared memory (one CTA only; at 32768 pairs on one CTA both together
   * took the walk 37 -> 26 us, each alone nothing). */
  const int64_t pairs = a->tokens * a->topk;
  /* Where the routing runs (MELD_MOE_ROUTE_IN, default 1): in the fused kernel's first
   * route_ctas comm CTAs (the other comm CTAs and the GEMM's producers wait for its layout word),
   * or in a routing kernel of its own before it (0). A fused kernel's CTA has 12 warps, not 32:
   * there one routing CTA per 1536 pairs from 6144 pairs, up to the comm CTAs. */
  v = p->defer != 0; /* (only the kernel with the deferred epilogue routes: moe.cu moe_kernel) */
  MELD_CHECK(meld_env_int64("MELD_MOE_ROUTE_IN", 0, 1, &v));
  if (v && p->defer == 0)
    return meld_error(MELD_ERR_INVALID_ARG, "MELD_MOE_ROUTE_IN=1 needs the deferred epilogue (MELD_MOE_DEFER is 0)");
  p->route_in = (int)v;
  if (p->route_in) v = pairs < 6144 ? 1 : (pairs + 1535) / 1536;
  else v = pairs < 16384 ? 1 : (pairs + 4095) / 4096;
  if (v > MOE_ROUTE_MAX_CTAS) v = MOE_ROUTE_MAX_CTAS;
  MELD_CHECK(meld_env_int64("MELD_MOE_ROUTE_CTAS", 1, MOE_ROUTE_MAX_CTAS, &v));
  if (v > sm_count) v = sm_count; /* (this rank's SMs: ranks as threads share a GPU) */
  if (p->route_in && v > p->comm_ctas) v = p->comm_ctas;
  p->route_ctas = (int)v;
  v = 0;
  MELD_CHECK(meld_env_int64("MELD_MOE_ROUTE", 0, 3, &v));
  p->route = p->route_ctas > 1 ? (int)v & 1 : (int)v; /* (staging: one CTA only) */
  const char *cp = getenv("MELD_MOE_COPY");
  p->copy = MOE_COPY_BULK;
  if (cp && *cp) {
    if (!strcmp(cp, "vec")) p->copy = MOE_COPY_VEC;
    else if (strcmp(cp, "bulk") != 0)
      return meld_error(MELD_ERR_INVALID_ARG, "MELD_MOE_COPY=%s: not vec or bulk", cp);
  }
  p->grid = sm_count;
  uint64_t h = meld_hash_init();
  h = meld_hash_u64(h, MELD_OP_MOE_DISPATCH_GEMM);
  h = meld_hash_u64(h, (uint64_t)P);
  h = meld_hash_u64(h, (uint64_t)a->experts);
  h = meld_hash_u64(h, (uint64_t)a->topk);
  h = meld_hash_u64(h, (uint64_t)a->hidden);
  h = meld_hash_u64(h, (uint64_t)a->n);
  h = meld_hash_u64(h, (uint64_t)a->capacity);
  if (a->activation) h = meld_hash_u64(h, 0xac700000ull + (uint64_t)a->activation);
  /* (ranks that route in different places launch different kernels: their entries must refuse) */
  if (!p->route_in) h = meld_hash_u64(h, 0x0e0e0e0eull);
  p->arg_hash = meld_hash_fold(h);
  return MELD_OK;
}

int moe_route_in_env(void) {
  int64_t d = -1, v;
  if (meld_env_int64("MELD_MOE_DEFER", 0, 1, &d) != MELD_OK) d = -1;
  v = d != 0;
  if (meld_env_int64("MELD_MOE_ROUTE_IN", 0, 1, &v) != MELD_OK || (v && d == 0)) v = 1; /* (moe_plan_make refuses it) */
  meld_error_clear();
  return (int)v;
}

int moe_layout_ref(const int32_t *cnt, int P, int E, int64_t capacity, int me, int32_t *seg, int32_t *srcoff,
                   int32_t *used) {
  const int el = E / P;
  int bad = -1;
  for (int d = 0; d < P; d++) {
    int64_t row = 0;
    for (int j = 0; j < el; j++) {
      const int e = d * el + j;
      int64_t m = 0, before = 0;
      for (int s = 0; s < P; s++) {
        if (s < me) before += cnt[(size_t)s * E + e];
        m += cnt[(size_t)s * E + e];
      }
      seg[e] = (int32_t)row;
      srcoff[e] = (int32_t)before;
      row += (m + MOE_BM - 1) / MOE_BM * MOE_BM;
    }
    used[d] = (int32_t)(row / MOE_BM);
    if (row > capacity && bad < 0) bad = d;
  }
  return bad;
}

size_t meld_moe_workspace_bytes(int nranks, int64_t max_tokens, int32_t topk, int32_t experts, int64_t hidden,
                                int64_t capacity) {
  if (nranks < 1 || max_tokens < 0 || topk < 1 || experts < 1 || hidden < 1 || capacity < 1) return 0;
  /* (tables for nranks x max_tokens tokens: across N nodes each node's call routes the N x
   * max_tokens tokens its rail gathered, N <= nranks; a few bytes a pair, next to the staging) */
  return moe_layout(nranks, (int64_t)nranks * max_tokens * topk, experts, hidden, capacity).bytes;
}

/* ---- meld_moe_ffn ------------------------------------------------------------------------------ */

#define FFN "meld_moe_ffn"

/* Where meld_moe_ffn's intermediates sit in its scratch (256-aligned offsets). */
typedef struct {
  size_t act, h2, origin, offsets, counts, bytes;
} moe_ffn_scratch_t;

static moe_ffn_scratch_t moe_ffn_scratch(int P, int32_t experts, int64_t hidden, int64_t ffn, int64_t capacity) {
  moe_ffn_scratch_t s;
  const size_t cap = (size_t)capacity, el = (size_t)(experts / P);
  size_t o = 0;
  s.act = o, o = up256(o + cap * (size_t)ffn * 2);
  s.h2 = o, o = up256(o + cap * (size_t)hidden * 2);
  s.origin = o, o = up256(o + cap * 8);
  s.offsets = o, o = up256(o + (el + 1) * 4);
  s.counts = o, o = up256(o + el * 4);
  s.bytes = o;
  return s;
}

int moe_ffn_send_default(int nranks, int64_t tokens, int32_t topk, int32_t experts) {
  return nranks > 1 || tokens * (int64_t)topk <= 16 * (int64_t)experts;
}

size_t meld_moe_ffn_scratch_bytes(int nranks, int32_t experts, int64_t hidden, int64_t ffn, int64_t capacity) {
  if (nranks < 1 || experts < nranks || hidden < 1 || ffn < 1 || capacity < 1) return 0;
  return moe_ffn_scratch(nranks, experts, hidden, ffn, capacity).bytes;
}

meld_result_t moe_ffn_split(const meld_moe_ffn_args_t *f, int P, meld_moe_args_t *d, meld_moe_gemm_args_t *g,
                            meld_moe_combine_args_t *c) {
  /* (the shapes the three calls share are checked by their validators below, named as theirs) */
  if (!f) return meld_error(MELD_ERR_INVALID_ARG, FFN ": args is NULL");
  if (f->ffn < MOE_BM || f->ffn % MOE_BM || f->ffn >= ((int64_t)1 << 29))
    return meld_error(MELD_ERR_INVALID_ARG, FFN ": ffn %lld is not a positive multiple of %d (or too large)",
                      (long long)f->ffn, MOE_BM);
  const struct {
    const void *p;
    const char *name;
  } ptrs[] = {{f->w1, "w1"}, {f->w2, "w2"}, {f->scratch, "scratch"}};
  for (int i = 0; i < 3; i++)
    if (!ptrs[i].p) return meld_error(MELD_ERR_INVALID_ARG, FFN ": %s is NULL", ptrs[i].name);
  if (!aligned(f->scratch, 256))
    return meld_error(MELD_ERR_INVALID_ARG, FFN ": scratch %p is not 256-byte aligned", f->scratch);
  if (f->expert_counts && !aligned(f->expert_counts, 4))
    return meld_error(MELD_ERR_INVALID_ARG, FFN ": expert_counts %p is not 4-byte aligned", (void *)f->expert_counts);
  const moe_ffn_scratch_t s = moe_ffn_scratch(P, f->experts, f->hidden, f->ffn, f->capacity); /* (offsets only) */
  uint8_t *sc = (uint8_t *)f->scratch;
  memset(d, 0, sizeof *d);
  d->x = f->x, d->ldx = f->ldx, d->topk_ids = f->topk_ids, d->tokens = f->tokens, d->topk = f->topk;
  d->experts = f->experts, d->hidden = f->hidden;
  d->w = f->w1, d->n = 2 * f->ffn, d->y = sc + s.act, d->capacity = f->capacity;
  d->expert_offsets = (int32_t *)(sc + s.offsets);
  d->expert_counts = f->expert_counts ? f->expert_counts : (int32_t *)(sc + s.counts);
  d->row_origin = (int32_t *)(sc + s.origin); /* (the second GEMM's epilogue sends each row by it) */
  d->activation = MELD_MOE_ACT_SWIGLU;
  memset(g, 0, sizeof *g);
  g->dispatch = d, g->a = sc + s.act, g->k = f->ffn, g->w = f->w2, g->n = f->hidden, g->c = sc + s.h2;
  memset(c, 0, sizeof *c);
  c->dispatch = d, c->y2 = sc + s.h2, c->topk_weights = f->topk_weights, c->out = f->out, c->ldo = f->ldo;
  meld_result_t r = moe_args_validate(d, P);
  if (r == MELD_OK) r = moe_gemm_validate(g, P);
  if (r == MELD_OK) r = moe_combine_validate(c, P);
  if (r != MELD_OK) meld_error_prefix(FFN);
  return r;
}

/* ---- across nodes (src/common/moe_net.h, src/ops/moe_net.cu) -------------------------------- */

moe_net_scratch_t moe_net_scratch(int nodes, int L, int64_t tokens, int32_t topk, int64_t hidden) {
  moe_net_scratch_t s;
  const size_t g = (size_t)nodes * (size_t)(tokens > 0 ? tokens : 0); /* gathered tokens */
  size_t o = 0;
  s.x = o, o = up256(o + g * (size_t)hidden * 2);
  s.ids = o, o = up256(o + g * (size_t)topk * 4);
  s.wt = o, o = up256(o + g * (size_t)topk * 4);
  s.part = o, o = up256(o + g * (size_t)hidden * 2);
  s.out = o, o = up256(o + (size_t)(tokens > 0 ? tokens : 0) * (size_t)hidden * 2);
  s.tok = o, o = up256(o + (size_t)L * 4);
  s.hdr = o, o = up256(o + (size_t)nodes * MOE_NET_HDR_WORDS * 8);
  s.bytes = o;
  return s;
}

meld_result_t moe_net_args(const meld_moe_args_t *a, int nodes, int L, const void *xg, const int32_t *idsg,
                           meld_moe_args_t *d) {
  if (!a) return meld_error(MELD_ERR_INVALID_ARG, FN ": args is NULL");
  const int P = nodes * L;
  if (a->experts < P || a->experts % P)
    return meld_error(MELD_ERR_INVALID_ARG, FN ": experts %d is not a positive multiple of the %d ranks (%d nodes x %d)",
                      a->experts, P, nodes, L);
  if (a->tokens < 0) return meld_error(MELD_ERR_INVALID_ARG, FN ": tokens %lld < 0", (long long)a->tokens);
  *d = *a;
  d->tokens = a->tokens * nodes;
  d->experts = a->experts / nodes;
  if (xg) d->x = xg, d->ldx = a->hidden;
  if (idsg) d->topk_ids = idsg;
  const meld_result_t r = moe_args_validate(d, L);
  if (r != MELD_OK)
    meld_error_prefix("across %d nodes (each node's call of its %d ranks on the %lld tokens gathered from the nodes, "
                      "with the node's %d experts)",
                      nodes, L, (long long)d->tokens, d->experts);
  return r;
}
