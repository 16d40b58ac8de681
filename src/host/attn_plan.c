/* attn_plan.c — argument checks, geometry and tensor maps of meld_attention (attn_plan.h). */
#include "attn_plan.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h" /* meld_env_int64 */
#include "error.h"
#include "common/proto.h" /* MELD_PAD_SIGNAL_SLOTS */
#include "gemm_plan.h" /* tmap_encode_bf16 */

static int aligned(const void *p, uintptr_t n) { return ((uintptr_t)p % n) == 0; }

/* The stride of a tensor whose tokens hold `width` elements: 0 -> width. */
static meld_result_t check_stride(int64_t stride, int64_t width, const char *name) {
  if (stride == 0) return MELD_OK;
  if (stride < width)
    return meld_error(MELD_ERR_INVALID_ARG, "meld_attention: %s %lld is smaller than a token's %lld elements", name,
                      (long long)stride, (long long)width);
  if (stride % 8)
    return meld_error(MELD_ERR_INVALID_ARG,
                      "meld_attention: %s %lld is not a multiple of 8 (token rows must be 16-byte aligned)", name,
                      (long long)stride);
  return MELD_OK;
}

meld_result_t attn_args_validate(const meld_attention_args_t *a) {
  if (!a) return meld_error(MELD_ERR_INVALID_ARG, "meld_attention: args is NULL");
  const struct {
    const void *p;
    const char *name;
  } ptrs[4] = {{a->q, "q"}, {a->k, "k"}, {a->v, "v"}, {a->o, "o"}};
  for (int i = 0; i < 4; i++) {
    if (!ptrs[i].p) return meld_error(MELD_ERR_INVALID_ARG, "meld_attention: %s is NULL", ptrs[i].name);
    if (!aligned(ptrs[i].p, 16))
      return meld_error(MELD_ERR_INVALID_ARG, "meld_attention: %s %p is not 16-byte aligned", ptrs[i].name, ptrs[i].p);
  }
  if (a->lse && !aligned(a->lse, 4))
    return meld_error(MELD_ERR_INVALID_ARG, "meld_attention: lse %p is not 4-byte aligned", (void *)a->lse);
  if (a->batch < 0 || a->seq_q < 0)
    return meld_error(MELD_ERR_INVALID_ARG, "meld_attention: batch %lld and seq_q %lld must be >= 0",
                      (long long)a->batch, (long long)a->seq_q);
  if (a->seq_kv < 1) return meld_error(MELD_ERR_INVALID_ARG, "meld_attention: seq_kv %lld < 1", (long long)a->seq_kv);
  if (a->heads < 1 || a->heads_kv < 1)
    return meld_error(MELD_ERR_INVALID_ARG, "meld_attention: heads %lld and heads_kv %lld must be >= 1",
                      (long long)a->heads, (long long)a->heads_kv);
  if (a->heads % a->heads_kv)
    return meld_error(MELD_ERR_INVALID_ARG, "meld_attention: heads %lld is not a multiple of heads_kv %lld",
                      (long long)a->heads, (long long)a->heads_kv);
  if (a->head_dim != 64 && a->head_dim != 128)
    return meld_error(a->head_dim < 1 ? MELD_ERR_INVALID_ARG : MELD_ERR_UNSUPPORTED,
                      "meld_attention: head_dim %lld (64 and 128 are supported today)", (long long)a->head_dim);
  if (a->causal != 0 && a->causal != 1)
    return meld_error(MELD_ERR_INVALID_ARG, "meld_attention: causal %d is neither 0 nor 1", a->causal);
  if (!(a->scale >= 0.0f) || isinf(a->scale))
    return meld_error(MELD_ERR_INVALID_ARG, "meld_attention: scale %g must be finite and >= 0 (0 = 1/sqrt(head_dim))",
                      (double)a->scale);
  MELD_CHECK(check_stride(a->stride_q, a->heads * a->head_dim, "stride_q"));
  MELD_CHECK(check_stride(a->stride_o, a->heads * a->head_dim, "stride_o"));
  MELD_CHECK(check_stride(a->stride_k, a->heads_kv * a->head_dim, "stride_k"));
  MELD_CHECK(check_stride(a->stride_v, a->heads_kv * a->head_dim, "stride_v"));
  if (a->seq_q > INT32_MAX - ATTN_BM || a->seq_kv > INT32_MAX - ATTN_BN || a->heads > 65536 || a->batch > INT32_MAX)
    return meld_error(MELD_ERR_INVALID_ARG, "meld_attention: seq_q %lld / seq_kv %lld / heads %lld / batch %lld too large",
                      (long long)a->seq_q, (long long)a->seq_kv, (long long)a->heads, (long long)a->batch);
  const int64_t q_tiles = (a->seq_q + ATTN_BM - 1) / ATTN_BM;
  if (a->batch > 0 && q_tiles > 0 && q_tiles * a->heads > INT32_MAX / a->batch)
    return meld_error(MELD_ERR_INVALID_ARG, "meld_attention: %lld query tiles x %lld heads x %lld batches exceed a grid",
                      (long long)q_tiles, (long long)a->heads, (long long)a->batch);
  const int64_t lim = (int64_t)1 << 40; /* the tensor maps' stride limit, bytes */
  const int64_t sq = a->stride_q ? a->stride_q : a->heads * a->head_dim;
  const int64_t sk = a->stride_k ? a->stride_k : a->heads_kv * a->head_dim;
  const int64_t sv = a->stride_v ? a->stride_v : a->heads_kv * a->head_dim;
  if (a->seq_q * sq * 2 >= lim || a->seq_kv * sk * 2 >= lim || a->seq_kv * sv * 2 >= lim)
    return meld_error(MELD_ERR_INVALID_ARG, "meld_attention: a batch spans 2^40 bytes or more");
  const int64_t pos_lim = (int64_t)1 << 60;
  if (a->q_pos0 <= -pos_lim || a->q_pos0 >= pos_lim || a->kv_pos0 <= -pos_lim || a->kv_pos0 >= pos_lim)
    return meld_error(MELD_ERR_INVALID_ARG, "meld_attention: q_pos0 %lld / kv_pos0 %lld out of range (|x| < 2^60)",
                      (long long)a->q_pos0, (long long)a->kv_pos0);
  return MELD_OK;
}

void attn_plan_order(const meld_attention_args_t *a, attn_params_t *p) {
  /* the chunk of heads the work order takes together: not causal, one K/V group; causal, whole
   * groups whose K and V (every segment's) fit the L2 budget; MELD_ATTN_ORDER=heads (all) or
   * tiles (one head) for A/B */
  const uint64_t kv_bytes = (uint64_t)a->seq_kv * (uint64_t)p->kv_segs * (uint64_t)a->head_dim * 4u;
  uint64_t groups = ATTN_L2_BUDGET / (kv_bytes ? kv_bytes : 1);
  if (groups < 1) groups = 1;
  if (groups > (uint64_t)a->heads_kv) groups = (uint64_t)a->heads_kv;
  /* non-causal tiles weigh the same: one group at a time reads K/V from L2 best (session 29:
   * -1..-4% against the L2-budget chunk); causal ones gain from the heaviest tiles of several
   * heads first (S 4096 MHA: 0.270 ms with 12 heads together, 0.287 with one, 0.285 with all) */
  p->chunk_heads = a->causal ? (int)groups * p->group : p->group;
  const char *order = getenv("MELD_ATTN_ORDER");
  if (order && !strcmp(order, "heads")) p->chunk_heads = p->heads;
  else if (order && !strcmp(order, "tiles")) p->chunk_heads = 1;
}

meld_result_t attn_plan_geometry(const meld_attention_args_t *a, attn_params_t *p, int64_t *grid) {
  MELD_CHECK(attn_args_validate(a));
  memset(p, 0, sizeof *p);
  p->o = a->o;
  p->lse = a->lse;
  p->stride_o = a->stride_o ? a->stride_o : a->heads * a->head_dim;
  p->batch = (int)a->batch;
  p->heads = (int)a->heads;
  p->group = (int)(a->heads / a->heads_kv);
  p->head_dim = (int)a->head_dim;
  p->seq_q = (int)a->seq_q;
  p->seq_kv = (int)a->seq_kv;
  p->q_tiles = (int)((a->seq_q + ATTN_BM - 1) / ATTN_BM);
  p->kv_tiles = (int)((a->seq_kv + ATTN_BN - 1) / ATTN_BN);
  p->causal = a->causal;
  p->q_pos0 = a->q_pos0;
  p->kv_pos0 = a->kv_pos0;
  const float scale = a->scale > 0.0f ? a->scale : (float)(1.0 / sqrt((double)a->head_dim));
  p->scale_log2 = scale * 1.4426950408889634f;
  p->kv_segs = 1;
  p->kv_seg_pos = 0;
  p->heads_all = p->heads;
  attn_plan_order(a, p);
  *grid = (int64_t)p->q_tiles * p->heads * p->batch;
  return MELD_OK;
}

meld_result_t attn_plan_kv_maps_at(const meld_attention_args_t *a, CUtensorMap *mk, CUtensorMap *mv, const void *k,
                                   const void *v, int64_t sk, int64_t sv, int64_t heads_kv, int segs, int dims) {
  const int64_t D = a->head_dim;
  uint64_t dkv[5] = {(uint64_t)D, (uint64_t)heads_kv, (uint64_t)a->seq_kv, (uint64_t)a->batch, (uint64_t)segs};
  /* segments lie a whole [batch, seq_kv] apart (the ring's gathered K/V) */
  uint64_t sk_b[4] = {(uint64_t)D * 2, (uint64_t)sk * 2, (uint64_t)(a->seq_kv * sk * 2),
                      (uint64_t)(a->batch * a->seq_kv * sk * 2)};
  uint64_t sv_b[4] = {(uint64_t)D * 2, (uint64_t)sv * 2, (uint64_t)(a->seq_kv * sv * 2),
                      (uint64_t)(a->batch * a->seq_kv * sv * 2)};
  uint32_t box_k[5] = {64, 1, ATTN_BN, 1, 1};
  MELD_CHECK(tmap_encode_bf16(mk, k, dims, dkv, sk_b, box_k, "meld_attention (k)"));
  uint32_t box_v[5] = {64, 1, 64, 1, 1};
  return tmap_encode_bf16(mv, v, dims, dkv, sv_b, box_v, "meld_attention (v)");
}

meld_result_t attn_plan_kv_maps(const meld_attention_args_t *a, attn_params_t *p, const void *k, const void *v,
                                int64_t sk, int64_t sv, int segs) {
  /* one segment: 4-D maps (the kernel's single-segment variant loads 4-D boxes) */
  return attn_plan_kv_maps_at(a, &p->map_k, &p->map_v, k, v, sk, sv, a->heads_kv, segs, segs > 1 ? 5 : 4);
}

meld_result_t attn_ring_plan_make(const meld_attention_args_t *a, int nranks, size_t ws_bytes, int sm_count,
                                  attn_ring_plan_t *rp) {
  memset(rp, 0, sizeof *rp);
  const int P = nranks;
  const char *mode = getenv("MELD_RING_ATTN");
  if (mode && *mode && strcmp(mode, "fused") && strcmp(mode, "unfused"))
    return meld_error(MELD_ERR_INVALID_ARG, "MELD_RING_ATTN=%s: expected fused or unfused", mode);
  int64_t cap = a->heads_kv, ctas = 0;
  MELD_CHECK(meld_env_int64("MELD_RING_ATTN_HEADS", 1, 65536, &cap));
  MELD_CHECK(meld_env_int64("MELD_RING_ATTN_COMM_CTAS", 1, 1024, &ctas));
  /* one K/V head's staging: K and V of the P - 1 peers' parts */
  const uint64_t per_head = 2u * (uint64_t)(P - 1) * (uint64_t)a->batch * (uint64_t)a->seq_kv * (uint64_t)a->head_dim * 2u;
  uint64_t nk = per_head ? ws_bytes / per_head : 0;
  if (nk > (uint64_t)a->heads_kv) nk = (uint64_t)a->heads_kv;
  if (nk > (uint64_t)cap) nk = (uint64_t)cap;
  rp->fused = P > 1;
  if (P > 1 && mode && !strcmp(mode, "unfused")) rp->fused = 0, rp->why = "MELD_RING_ATTN=unfused";
  else if (P > 1 && nk < 1) rp->fused = 0, rp->why = "one K/V head's staging exceeds the workspace (MELD_WORKSPACE_BYTES)";
  else if (P > 1 && sm_count < 2) rp->fused = 0, rp->why = "fewer than 2 SMs a rank";
  if (!rp->fused) return MELD_OK;
  rp->heads_per_launch = (int)nk;
  rp->launches = (int)((a->heads_kv + (int64_t)nk - 1) / (int64_t)nk);
  rp->stage_bytes = (size_t)(nk * per_head);
  /* chunks of 512 tokens (256 KB of K and V at one head): a signal per chunk and peer must fit
   * the pad's slots (P x chunks of a launch); longer chunks where they would not */
  int ct = 4 * ATTN_BN;
  for (;;) {
    const int64_t tcs = (a->seq_kv + ct - 1) / ct;
    if ((uint64_t)P * (uint64_t)a->batch * nk * (uint64_t)tcs <= MELD_PAD_SIGNAL_SLOTS || ct >= a->seq_kv) break;
    ct *= 2;
  }
  rp->chunk_tokens = ct;
  rp->token_chunks = (int)((a->seq_kv + ct - 1) / ct);
  if ((uint64_t)P * (uint64_t)a->batch * nk * (uint64_t)rp->token_chunks > MELD_PAD_SIGNAL_SLOTS)
    rp->fused = 0, rp->why = "more chunks than signal slots (batch x heads)";
  /* comm CTAs: 8 of a whole H200's 132, fewer on a share of the SMs (ranks sharing a GPU) */
  int cc = sm_count / 8;
  if (cc > 8) cc = 8;
  if (cc < 1) cc = 1;
  if (ctas > 0) cc = (int)ctas;
  if (cc > sm_count - 1) cc = sm_count - 1;
  rp->comm_ctas = cc;
  return MELD_OK;
}

meld_result_t attn_plan_q_map(const meld_attention_args_t *a, attn_params_t *p) {
  const int64_t D = a->head_dim;
  const int64_t sq = a->stride_q ? a->stride_q : a->heads * D;
  uint64_t dq[4] = {(uint64_t)D, (uint64_t)a->heads, (uint64_t)a->seq_q, (uint64_t)a->batch};
  uint64_t sq_b[3] = {(uint64_t)D * 2, (uint64_t)sq * 2, (uint64_t)(a->seq_q * sq * 2)};
  uint32_t box_q[4] = {64, 1, ATTN_BM, 1};
  return tmap_encode_bf16(&p->map_q, a->q, 4, dq, sq_b, box_q, "meld_attention (q)");
}

meld_result_t attn_plan_make(const meld_attention_args_t *a, attn_params_t *p, int64_t *grid) {
  MELD_CHECK(attn_plan_geometry(a, p, grid));
  if (*grid == 0) return MELD_OK;
  const int64_t sk = a->stride_k ? a->stride_k : a->heads_kv * a->head_dim;
  const int64_t sv = a->stride_v ? a->stride_v : a->heads_kv * a->head_dim;
  MELD_CHECK(attn_plan_q_map(a, p));
  return attn_plan_kv_maps(a, p, a->k, a->v, sk, sv, 1);
}
