/* attn_plan.h — host side of the attention kernel (src/ops/attention.cu): argument checks, the
 * kernel's parameters (plain C, shared with the device code), and the geometry both sides use
 * (which K/V blocks a query tile reads, which of them need a mask). Internal (not public). */
#ifndef MELD_HOST_ATTN_PLAN_H
#define MELD_HOST_ATTN_PLAN_H

#include <cuda.h>
#include <stdint.h>

#include "common/proto.h" /* MELD_HD */
#include "meld.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Tile shape: 128 queries (two consumer warpgroups of 64) x 128 keys; head_dim 64 or 128 (the
 * kernels are compiled once per head_dim: src/ops/attention_kernels.cuh). */
#define ATTN_BM 128
#define ATTN_BN 128

/* The kernel's parameters (__grid_constant__). Q's map is 4-D {head_dim, heads, seq, batch}, K's
 * and V's 5-D {head_dim, heads_kv, seq_kv, batch, segment}, 128-byte swizzle: Q and K boxes of
 * 128 rows of 64, V boxes of 64 rows of 64. K/V segments: the parts of the sequence the keys
 * come from (one for meld_attention; one per rank in the ring), segment s's first key at
 * position kv_pos0 + s * kv_seg_pos. */
typedef struct {
  CUtensorMap map_q, map_k, map_v;
  CUtensorMap map_ks, map_vs; /* fused ring only: the peers' parts in this rank's staging, 5-D
                                 {head_dim, launch's heads_kv, seq_kv, batch, P - 1}, part of
                                 ring step i (i >= 1) at segment i - 1 */
  void *o;
  float *lse;
  int64_t stride_o;  /* elements between output tokens */
  int batch, heads, group; /* group = heads / heads_kv */
  int head_dim;            /* 64 or 128 (which kernels) */
  int seq_q, seq_kv;
  int q_tiles, kv_tiles;
  int causal;
  int64_t q_pos0, kv_pos0;
  int kv_segs;
  int64_t kv_seg_pos;
  int seg_rot;      /* ring order: step s reads the part of rank (seg_rot - s) mod kv_segs (own first) */
  int zz_half;      /* zigzag ring (parts cut in two halves of zz_half tokens, a multiple of ATTN_BM:
                       rank r holds chunks r and 2P - 1 - r of the sequence in 2P): 0 = contiguous */
  int64_t q_pos1;   /* zigzag: the position of local query 0 as seen from the second half
                       (query i >= zz_half sits at q_pos1 + i)                                      */
  int h_base, hk_base, heads_all; /* the launch's first head / K/V head of the call (the fused ring
                                     takes the heads in launches that fit its staging), and the
                                     call's heads (LSE rows); 0, 0, heads otherwise */
  float scale_log2; /* scale * log2(e) */
  int chunk_heads;  /* work order: heads taken together (attn_work_of); 1..heads */
} attn_params_t;

/* The fused ring attention (meld_ring_attention): every rank pushes its K and V, chunk by chunk,
 * into every peer's staging (the comm's workspace) from inside the attention kernel, whose
 * producer waits for a chunk's signal before loading its blocks; the own part is read in place
 * and first. The heads go in launches of heads_per_launch K/V heads whose staging fits the
 * workspace; a chunk is (batch, K/V head, chunk_tokens tokens) of K and V. */
typedef struct {
  int fused;            /* 0: all-gather K/V, then the kernel over the parts (unfused)         */
  int heads_per_launch; /* K/V heads per fused launch (the last may take fewer)                */
  int launches;
  int chunk_tokens;     /* a multiple of ATTN_BN                                               */
  int token_chunks;     /* chunks of a (batch, K/V head): ceil(seq / chunk_tokens)             */
  int comm_ctas;        /* CTAs that push first (then join the attention)                     */
  size_t stage_bytes;   /* staging of one launch (K and V of P - 1 parts)                      */
  const char *why;      /* why unfused (a static string), or NULL                              */
} attn_ring_plan_t;

/* The ring's plan for valid args (attn_args_validate first) of P ranks, a workspace of ws_bytes
 * and sm_count SMs a rank; MELD_RING_ATTN=unfused, MELD_RING_ATTN_HEADS (most K/V heads a launch)
 * and MELD_RING_ATTN_COMM_CTAS override. MELD_ERR_INVALID_ARG for a bad override. */
meld_result_t attn_ring_plan_make(const meld_attention_args_t *a, int nranks, size_t ws_bytes, int sm_count,
                                  attn_ring_plan_t *rp);

/* K/V bytes the CTAs running at once should share in L2 (of the H200's 60 MB): sets how many
 * heads the work order takes together (attn_plan_geometry). */
#define ATTN_L2_BUDGET (24u << 20)

/* Checks every argument; MELD_OK or MELD_ERR_INVALID_ARG / MELD_ERR_UNSUPPORTED with a
 * sentence naming the argument. No CUDA call. */
meld_result_t attn_args_validate(const meld_attention_args_t *a);

/* Fills *p for valid args (validated first) without the tensor maps (CPU-testable), and the
 * grid size: one CTA per (query tile, head, batch). */
meld_result_t attn_plan_geometry(const meld_attention_args_t *a, attn_params_t *p, int64_t *grid);

/* The work order's chunk of heads (p->chunk_heads) for the geometry and segments in *p. */
void attn_plan_order(const meld_attention_args_t *a, attn_params_t *p);

/* The K and V maps over `segs` segments of [batch, seq_kv, heads_kv, head_dim] at k / v, tokens
 * sk / sv elements apart, segments one whole [batch, seq_kv] block apart. */
meld_result_t attn_plan_kv_maps(const meld_attention_args_t *a, attn_params_t *p, const void *k, const void *v,
                                int64_t sk, int64_t sv, int segs);

/* The same with the K/V head count and dimension count (4 or 5) given: the fused ring's staging
 * maps (heads_kv of one launch, P - 1 segments, always 5-D) into *mk / *mv. */
meld_result_t attn_plan_kv_maps_at(const meld_attention_args_t *a, CUtensorMap *mk, CUtensorMap *mv, const void *k,
                                   const void *v, int64_t sk, int64_t sv, int64_t heads_kv, int segs, int dims);

/* Q's map. */
meld_result_t attn_plan_q_map(const meld_attention_args_t *a, attn_params_t *p);

/* attn_plan_geometry, then the three tensor maps (driver entry point). MELD_ERR_CUDA if the
 * encoder rejects one. */
meld_result_t attn_plan_make(const meld_attention_args_t *a, attn_params_t *p, int64_t *grid);

/* Query tile qt's origin: its query i (local index in the part) sits at attn_q_base(p, qt) + i
 * (zigzag: the second half's tiles have their own; zz_half is a multiple of ATTN_BM). */
MELD_HD int64_t attn_q_base(const attn_params_t *p, int qt) {
  return p->zz_half && (int64_t)qt * ATTN_BM >= p->zz_half ? p->q_pos1 : p->q_pos0;
}

/* The K/V blocks [*jb, *je) within [jlo, jhi) of a segment whose key j (local index) sits at
 * position pos0 + j that query tile qt reads (causal: the blocks with a key visible to at least
 * one of its queries, before the tail of the sequence); *je <= *jb when none. */
MELD_HD void attn_kv_range_in(const attn_params_t *p, int qt, int64_t pos0, int jlo, int jhi, int *jb, int *je) {
  *jb = jlo;
  *je = jhi;
  if (p->causal) {
    /* the last visible key of the tile's last query: pos0 + j <= q_base + q_last */
    int64_t q_last = (int64_t)qt * ATTN_BM + ATTN_BM - 1;
    if (q_last > p->seq_q - 1) q_last = p->seq_q - 1;
    const int64_t j_last = attn_q_base(p, qt) + q_last - pos0;
    if (j_last < 0) *je = 0;
    else if (j_last / ATTN_BN + 1 < *je) *je = (int)(j_last / ATTN_BN + 1);
  }
}

/* The same over the whole segment. */
MELD_HD void attn_kv_range(const attn_params_t *p, int qt, int64_t pos0, int *jb, int *je) {
  attn_kv_range_in(p, qt, pos0, 0, p->kv_tiles, jb, je);
}

/* Whether block j (of the segment at pos0) of query tile qt has keys some of its queries must not
 * see (causal diagonal, or keys past seq_kv). */
MELD_HD int attn_block_masked(const attn_params_t *p, int qt, int j, int64_t pos0) {
  if ((int64_t)(j + 1) * ATTN_BN > p->seq_kv) return 1;
  if (!p->causal) return 0;
  /* the block's last key against the tile's first query */
  return pos0 + (int64_t)j * ATTN_BN + ATTN_BN - 1 > attn_q_base(p, qt) + (int64_t)qt * ATTN_BM;
}

/* The K/V blocks a query tile reads, in order: segment by segment, each segment's range. A
 * zigzag ring's segments are the halves of the parts: s = 2 x step + half. */
typedef struct {
  int s, j, je; /* segment, block (the part's local index), the segment's end block */
} attn_iter_t;

/* The part ring step s reads: rank (seg_rot - s) mod kv_segs. */
MELD_HD int attn_seg_src(const attn_params_t *p, int s) {
  const int r = p->seg_rot - s;
  return r < 0 ? r + p->kv_segs : r;
}

/* Segments the iterator walks: the parts, or (zigzag) their halves. */
MELD_HD int attn_nseg(const attn_params_t *p) { return p->zz_half ? 2 * p->kv_segs : p->kv_segs; }

/* The ring step of segment s. */
MELD_HD int attn_seg_step(const attn_params_t *p, int s) { return p->zz_half ? s >> 1 : s; }

/* Segment s's origin: its key j (the part's local index) sits at attn_seg_pos0 + j. Zigzag: the
 * first half of rank q's part is chunk q of 2P, the second half chunk 2P - 1 - q. */
MELD_HD int64_t attn_seg_pos0(const attn_params_t *p, int s) {
  const int src = attn_seg_src(p, attn_seg_step(p, s));
  if (!p->zz_half) return p->kv_pos0 + (int64_t)src * p->kv_seg_pos;
  const int64_t h = p->zz_half;
  return (s & 1) ? (int64_t)(2 * p->kv_segs - 1 - src) * h - h : (int64_t)src * h;
}

/* Segment s's blocks [*lo, *hi) of the part (zigzag: its half's). */
MELD_HD void attn_seg_blocks(const attn_params_t *p, int s, int *lo, int *hi) {
  if (!p->zz_half) {
    *lo = 0, *hi = p->kv_tiles;
  } else {
    const int hb = p->zz_half / ATTN_BN;
    *lo = (s & 1) * hb, *hi = (s & 1) ? p->kv_tiles : hb;
  }
}

/* The origin of the iterator's segment. */
MELD_HD int64_t attn_iter_pos0(const attn_params_t *p, const attn_iter_t *it) { return attn_seg_pos0(p, it->s); }

/* Moves *it to the first block of the first segment >= s that the tile reads; 0 when none. */
MELD_HD int attn_iter_seek(const attn_params_t *p, int qt, int s, attn_iter_t *it) {
  for (; s < attn_nseg(p); s++) {
    int jb, je, lo, hi;
    attn_seg_blocks(p, s, &lo, &hi);
    attn_kv_range_in(p, qt, attn_seg_pos0(p, s), lo, hi, &jb, &je);
    if (je > jb) {
      it->s = s, it->j = jb, it->je = je;
      return 1;
    }
  }
  return 0;
}

/* The next block; 0 after the last. */
MELD_HD int attn_iter_next(const attn_params_t *p, int qt, attn_iter_t *it) {
  if (++it->j < it->je) return 1;
  return attn_iter_seek(p, qt, it->s + 1, it);
}

/* How many blocks query tile qt reads. */
MELD_HD int attn_iter_count(const attn_params_t *p, int qt) {
  int n = 0;
  for (int s = 0; s < attn_nseg(p); s++) {
    int jb, je, lo, hi;
    attn_seg_blocks(p, s, &lo, &hi);
    attn_kv_range_in(p, qt, attn_seg_pos0(p, s), lo, hi, &jb, &je);
    if (je > jb) n += je - jb;
  }
  return n;
}

/* Work item x of the grid -> (query tile, head, batch). Batches outermost, then chunks of
 * p->chunk_heads heads; inside a chunk the tiles go by rank (causal: heavier, later tiles
 * first), the chunk's heads side by side for each rank. attn_plan_geometry's rule: not causal,
 * one K/V group a chunk, so the CTAs running at once read K/V from L2, not HBM (one H200, S 16384
 * MHA: all heads together 7.8 ms, one at a time 6.8-7.0); causal, as many heads (whole groups)
 * as fit their K/V in ATTN_L2_BUDGET, the heaviest tiles of several heads first (balance at the
 * end: S 4096 MHA 0.270 ms vs 0.287 one head at a time, 0.285 all together). */
MELD_HD void attn_work_of(const attn_params_t *p, int64_t x, int *qt, int *h, int *b) {
  const int64_t per_b = (int64_t)p->heads * p->q_tiles, per_c = (int64_t)p->chunk_heads * p->q_tiles;
  *b = (int)(x / per_b);
  const int64_t rem = x % per_b;
  const int c = (int)(rem / per_c);
  const int64_t i = rem % per_c;
  const int nc = p->heads - c * p->chunk_heads < p->chunk_heads ? p->heads - c * p->chunk_heads : p->chunk_heads;
  const int r = (int)(i / nc);
  *h = c * p->chunk_heads + (int)(i % nc);
  *qt = p->causal ? p->q_tiles - 1 - r : r;
}

#ifdef __cplusplus
}
#endif

#endif /* MELD_HOST_ATTN_PLAN_H */
