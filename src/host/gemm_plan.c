/* gemm_plan.c — validation, tensor maps, variant choice and printing for the GEMM engine. */
#include "gemm_plan.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "log.h"

/* ---- validation --------------------------------------------------------------------------- */

meld_result_t gemm_args_validate(const meld_gemm_args_t *a) {
  if (!a) return meld_error(MELD_ERR_INVALID_ARG, "meld_gemm: args is NULL");
  if (a->m < 0 || a->n < 0)
    return meld_error(MELD_ERR_INVALID_ARG, "meld_gemm: m %lld and n %lld must be >= 0",
                      (long long)a->m, (long long)a->n);
  if (a->k < 1)
    return meld_error(MELD_ERR_INVALID_ARG,
                      "meld_gemm: k %lld < 1 (the inner dimension must be positive)",
                      (long long)a->k);
  if (a->m > INT32_MAX || a->n > INT32_MAX || a->k > INT32_MAX)
    return meld_error(MELD_ERR_INVALID_ARG,
                      "meld_gemm: m %lld, n %lld, k %lld: each must be < 2^31",
                      (long long)a->m, (long long)a->n, (long long)a->k);
  if (a->b_layout != MELD_B_NK && a->b_layout != MELD_B_KN)
    return meld_error(MELD_ERR_INVALID_ARG,
                      "meld_gemm: b_layout %d is neither MELD_B_NK (0) nor MELD_B_KN (1)",
                      (int)a->b_layout);
  if (a->sm_count < 0)
    return meld_error(MELD_ERR_INVALID_ARG, "meld_gemm: sm_count %d < 0 (0 means all)",
                      a->sm_count);
  if (a->m == 0 || a->n == 0) return MELD_OK; /* nothing to compute: pointers unused */
  const struct {
    const char *name;
    const void *ptr;
  } ptrs[3] = {{"a", a->a}, {"b", a->b}, {"c", a->c}};
  for (int i = 0; i < 3; i++) {
    if (!ptrs[i].ptr) return meld_error(MELD_ERR_INVALID_ARG, "meld_gemm: %s is NULL", ptrs[i].name);
    if ((uintptr_t)ptrs[i].ptr % 16)
      return meld_error(MELD_ERR_INVALID_ARG,
                        "meld_gemm: %s %p is not 16-byte aligned (TMA needs 16-byte aligned "
                        "base addresses)",
                        ptrs[i].name, ptrs[i].ptr);
  }
  const int kn = a->b_layout == MELD_B_KN;
  const struct {
    const char *name;
    int64_t ld, row;
    const char *row_name;
  } lds[3] = {{"lda", a->lda, a->k, "k"},
              {"ldb", a->ldb, kn ? a->n : a->k, kn ? "n (B is [K,N])" : "k (B is [N,K])"},
              {"ldc", a->ldc, a->n, "n"}};
  for (int i = 0; i < 3; i++) {
    if (lds[i].ld < lds[i].row)
      return meld_error(MELD_ERR_INVALID_ARG, "meld_gemm: %s %lld is smaller than %s %lld",
                        lds[i].name, (long long)lds[i].ld, lds[i].row_name, (long long)lds[i].row);
    if (lds[i].ld % 8)
      return meld_error(MELD_ERR_INVALID_ARG,
                        "meld_gemm: %s %lld is not a multiple of 8 (rows must start on 16-byte "
                        "boundaries for TMA)",
                        lds[i].name, (long long)lds[i].ld);
    if (lds[i].ld >= (INT64_C(1) << 39))
      return meld_error(MELD_ERR_INVALID_ARG,
                        "meld_gemm: %s %lld is too large (TMA strides must be < 2^40 bytes)",
                        lds[i].name, (long long)lds[i].ld);
  }
  return MELD_OK;
}

/* ---- tensor maps through the driver entry point -------------------------------------------- */

typedef CUresult (*encode_tiled_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                                    const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                                    const cuuint32_t *, CUtensorMapInterleave,
                                    CUtensorMapSwizzle, CUtensorMapL2promotion,
                                    CUtensorMapFloatOOBfill);

static pthread_once_t g_encode_once = PTHREAD_ONCE_INIT;
static encode_tiled_fn g_encode;
static cudaError_t g_encode_err;

static void encode_lookup(void) {
  void *fn = NULL;
  enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  g_encode_err = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                                  cudaEnableDefault, &q);
  if (g_encode_err == cudaSuccess && q == cudaDriverEntryPointSuccess) g_encode = (encode_tiled_fn)fn;
}

/* The one call of the encoder (looked up first): a bf16 tiled map of `rank` (1..5) dims,
 * element strides 1, zero fill. */
static CUresult encode_tiled(CUtensorMap *map, const void *base, int rank, const cuuint64_t *dims,
                             const cuuint64_t *strides, const cuuint32_t *box, CUtensorMapSwizzle swizzle,
                             CUtensorMapL2promotion l2) {
  const cuuint32_t estr[5] = {1, 1, 1, 1, 1};
  return g_encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, (cuuint32_t)rank, (void *)base, dims, strides, box, estr,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, l2, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

/* A 2-D bf16 map: inner dimension `inner` (contiguous), `outer` rows `ld` elements apart. */
static meld_result_t encode_2d(CUtensorMap *map, const void *base, int64_t inner, int64_t outer,
                               int64_t ld, uint32_t box_inner, uint32_t box_outer,
                               CUtensorMapL2promotion l2, const char *what) {
  cuuint64_t dims[2] = {(cuuint64_t)inner, (cuuint64_t)outer};
  cuuint64_t strides[1] = {(cuuint64_t)ld * 2};
  cuuint32_t box[2] = {box_inner, box_outer};
  CUresult r = encode_tiled(map, base, 2, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B, l2);
  if (r != CUDA_SUCCESS)
    return meld_error(MELD_ERR_CUDA,
                      "meld_gemm: cuTensorMapEncodeTiled rejected the %s map (error %d; dims %lld x "
                      "%lld, ld %lld, box %u x %u)",
                      what, (int)r, (long long)inner, (long long)outer, (long long)ld, box_inner,
                      box_outer);
  return MELD_OK;
}

meld_result_t gemm_plan_map_slots(CUtensorMap *map, const void *base, int64_t n, int64_t rows, int64_t ld,
                                  uint64_t slot_pitch, int slots, int box_slots) {
  pthread_once(&g_encode_once, encode_lookup);
  if (!g_encode)
    return meld_error(MELD_ERR_CUDA, "gemm: the driver entry point cuTensorMapEncodeTiled is unavailable (%s)",
                      cudaGetErrorString(g_encode_err));
  if (n <= 0 || rows <= 0 || ld < n || ld % 8 || slot_pitch % 16 || slots < 1 || box_slots < 1 || box_slots > slots ||
      box_slots > 256)
    return meld_error(MELD_ERR_INVALID_ARG, "gemm: slot map n %lld, rows %lld, ld %lld, pitch %llu, slots %d / %d",
                      (long long)n, (long long)rows, (long long)ld, (unsigned long long)slot_pitch, box_slots, slots);
  const int64_t n8 = (n + 7) / 8 * 8;
  cuuint64_t dims[3] = {(cuuint64_t)n, (cuuint64_t)rows, (cuuint64_t)slots};
  cuuint64_t strides[2] = {(cuuint64_t)ld * 2, (cuuint64_t)slot_pitch};
  cuuint32_t box[3] = {(cuuint32_t)(n8 < 256 ? n8 : 256), (cuuint32_t)(rows < 64 ? rows : 64), (cuuint32_t)box_slots};
  CUresult r = encode_tiled(map, base, 3, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_NONE,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
  if (r != CUDA_SUCCESS)
    return meld_error(MELD_ERR_CUDA,
                      "gemm: cuTensorMapEncodeTiled rejected the slot map (error %d; %lld x %lld x %d, ld %lld, "
                      "pitch %llu, box %u x %u x %u)",
                      (int)r, (long long)n, (long long)rows, slots, (long long)ld, (unsigned long long)slot_pitch,
                      box[0], box[1], box[2]);
  return MELD_OK;
}

meld_result_t tmap_encode_bf16(CUtensorMap *map, const void *base, int rank, const uint64_t *dims,
                               const uint64_t *strides, const uint32_t *box, const char *what) {
  pthread_once(&g_encode_once, encode_lookup);
  if (!g_encode)
    return meld_error(MELD_ERR_CUDA, "%s: the driver entry point cuTensorMapEncodeTiled is unavailable (%s)", what,
                      cudaGetErrorString(g_encode_err));
  if (rank < 1 || rank > 5) return meld_error(MELD_ERR_INTERNAL, "%s: tensor map rank %d", what, rank);
  CUresult r = encode_tiled(map, base, rank, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
  if (r != CUDA_SUCCESS)
    return meld_error(MELD_ERR_CUDA, "%s: cuTensorMapEncodeTiled rejected the map (error %d; rank %d, dims %llu x %llu, box %u x %u)",
                      what, (int)r, rank, (unsigned long long)dims[0], (unsigned long long)dims[rank - 1], box[0],
                      box[rank - 1]);
  return MELD_OK;
}

/* ---- plan -------------------------------------------------------------------------------- */

/* L2-reduction fixup chosen by default for one-round split-K (p->fixup_red 1 or 2). */
#define GEMM_FIXUP_RED_DEFAULT 2
/* Epilogue overlap level chosen by default (p->epi_defer; opts.epi_defer 0). */
#define GEMM_EPI_DEFER_DEFAULT 1
/* Swapped kernel L2 hints (bit 0: B evict_first, bit 1: A evict_last): on; session 3 runs 1-2
 * measured them within 1-3% of off (nohint / bfirst variants). */
#define GEMM_SKINNY_HINT_DEFAULT 3

/* Split-K cost model for the L tiles of the last partial wave (L = tiles % SMs; all tiles
 * when there are fewer than SMs): time ~ rounds of (tile / S) work, + 8% per extra split for
 * the fp32 partial traffic and fixup; each split keeps >= 4 k-blocks. Picks S in 1..4 (ties:
 * smaller). E.g. on 132 SMs: 32 tiles (decode M <= 128, N 8192) -> 4; 160 tiles -> 132
 * whole + 28 split 4; 2048 tiles (8192^3) -> 15 whole waves + 68 tiles split 1. */
static int gemm_choose_split(int64_t tiles, int sms, int k_blocks) {
  int best = 1;
  double best_cost = 1e30;
  for (int s = 1; s <= 4; s++) {
    if (s > 1 && k_blocks / s < 4) break;
    const int64_t rounds = (tiles * s + sms - 1) / sms;
    const double cost = (double)rounds / s * (1.0 + 0.08 * (s - 1));
    if (cost < best_cost - 1e-9) {
      best_cost = cost;
      best = s;
    }
  }
  return best;
}

size_t gemm_plan_workspace_bytes(const gemm_params_t *p) {
  if (!p) return 0;
  const size_t tile = (size_t)GEMM_BM * GEMM_BN * sizeof(float);
  if (p->sk_tiles > 0) return (size_t)p->sk_tiles * (p->fixup_red ? 1 : p->sk_cmax) * tile;
  if (p->split_k <= 1) return 0;
  return ((size_t)p->tiles_m * p->tiles_n - p->split_from) * (p->fixup_red ? 1 : p->split_k) * tile;
}

size_t gemm_plan_counter_words(const gemm_params_t *p) {
  if (!p) return 0;
  const size_t per_slot = p->fixup_red == 2 ? 2 : 1; /* early ticket: + a "done" word */
  if (p->sk_tiles > 0) return (size_t)p->sk_tiles * per_slot;
  if (p->split_k <= 1) return 0;
  return ((size_t)p->tiles_m * p->tiles_n - p->split_from) * per_slot;
}

static int env_int(const char *name, int dflt) {
  const char *v = getenv(name);
  if (!v || !*v) return dflt;
  char *end = NULL;
  long x = strtol(v, &end, 10);
  return end && *end == 0 ? (int)x : dflt;
}

/* env_int limited to [lo, hi] or one of `also`: anything else is warned about and reads as dflt. */
static int env_int_checked(const char *name, int dflt, int lo, int hi, int also, const char *hint) {
  const int v = env_int(name, dflt);
  if (v == dflt || v == also || (v >= lo && v <= hi)) return v;
  MELD_WARN(MELD_SUB_OPS, "%s=%s ignored: give %s", name, getenv(name), hint);
  return dflt;
}

static pthread_once_t g_env_once = PTHREAD_ONCE_INIT;
static int g_env_group, g_env_split, g_env_sk, g_env_skinny, g_env_cluster_exp, g_env_tile_n, g_env_early_rel,
    g_env_store_hint, g_env_det, g_env_fp8_late;
static void env_read(void) {
  /* (128: the ping-pong tile where legal, gemm_plan_make) */
  g_env_tile_n = env_int("MELD_GEMM_TILE_N", 0) == GEMM_BN_PP
                     ? GEMM_BN_PP
                     : env_int_checked("MELD_GEMM_TILE_N", 0, GEMM_BN, GEMM_BN, GEMM_BN_WIDE, "128, 256 or 320");
  /* gemm_params_t.early_release forced (-1: the plan's) */
  g_env_early_rel = env_int_checked("MELD_GEMM_EARLY_RELEASE", -1, 0, 1, 0, "0 (off) or 1 (on)");
  g_env_store_hint = env_int_checked("MELD_GEMM_STORE_HINT", -1, 0, 1, 0, "0 (off) or 1 (on)");
  g_env_cluster_exp = env_int("MELD_GEMM_CLUSTER_EXPERIMENTAL", 0);
  g_env_skinny = env_int("MELD_GEMM_SKINNY", 1);
  g_env_group = env_int("MELD_GEMM_GROUP_M", 0);
  g_env_split = env_int("MELD_GEMM_SPLIT_K", 0);
  g_env_sk = env_int("MELD_GEMM_STREAM_K", 0);
  g_env_det = env_int_checked("MELD_GEMM_DETERMINISTIC", 0, 0, 1, 0, "0 (off) or 1 (on)");
  g_env_fp8_late = env_int_checked("MELD_GEMM_FP8_LATE", 0, 0, 1, 0, "0 (off) or 1 (on)");
}

int gemm_plan_fp8_late(void) {
  pthread_once(&g_env_once, env_read);
  return g_env_fp8_late;
}

void gemm_plan_env(gemm_plan_opts_t *o) {
  pthread_once(&g_env_once, env_read);
  if (!o) return;
  if (o->group_m == 0) o->group_m = g_env_group;
  if (o->split_k == 0) o->split_k = g_env_split;
  if (o->stream_k == 0) o->stream_k = g_env_sk;
  if (o->deterministic == 0) o->deterministic = g_env_det;
  if (o->skinny == 1 && g_env_skinny == 0) o->skinny = 0;
  /* (MELD_GEMM_TILE_N is a preference applied in gemm_plan_make where tile_n is 1 (choose):
   * rewriting tile_n here would turn it into "forced" and fail B [K,N] / split-K calls) */
}

meld_result_t gemm_plan_det_apply(const gemm_plan_opts_t *o, int *split, int *sk) {
  if (!o->deterministic) return MELD_OK;
  if (o->split_k > 2 || o->stream_k > 1)
    return meld_error(MELD_ERR_INVALID_ARG,
                      "gemm_plan_make: deterministic plans take split_k <= 2 and no stream-K (asked split_k %d, "
                      "stream_k %d): three or more partials of a tile add in the order they finish",
                      o->split_k, o->stream_k);
  if (*split > 2) *split = 2;
  *sk = 1;
  return MELD_OK;
}

int gemm_plan_default_tile_n(int64_t m, int64_t n, int64_t k, int b_kn, int sm_count) {
  if (b_kn || sm_count < 1 || m < 1 || n < 1 || (k + GEMM_BK - 1) / GEMM_BK < 16) return GEMM_BN;
  const int64_t tm = (m + GEMM_BM - 1) / GEMM_BM;
  const int64_t t256 = tm * ((n + GEMM_BN - 1) / GEMM_BN), t320 = tm * ((n + GEMM_BN_WIDE - 1) / GEMM_BN_WIDE);
  if (t256 < sm_count) return GEMM_BN;
  const int64_t c256 = (t256 + sm_count - 1) / sm_count * GEMM_BN;
  const int64_t c320 = (t320 + sm_count - 1) / sm_count * GEMM_BN_WIDE;
  return c320 * 10 <= c256 * 9 ? GEMM_BN_WIDE : GEMM_BN;
}

/* The cluster size for padded height mt, given the largest that fits one wave (S). Session 19
 * (one H200, bench_gemm against cuBLASLt in the same run): up to 32 rows the tensor work is
 * small, a CTA streams B as fast at 64 CTAs as at 96-128, and a larger cluster costs more at its
 * end (its CTAs' skew and reduce): 16 x 4096 x 7168 in clusters of 2 (64 CTAs) 20.3-20.5 us vs
 * 21.6-22.1 in clusters of 3, 16 x 4096 x 14336 34.2-34.3 vs 37.1-37.2 (cuBLASLt 20.7-21.6 /
 * 33.2-34.0). At 64 and 128 rows clusters of 3 win (0.887 vs 0.849, 0.947 vs 0.760 of
 * cuBLASLt's speed). So up to 32 rows clusters of 2, where they keep >= 3/8 of the SMs busy
 * (measured at N 4096 and 8192 only). */
static int skinny_split_for_height(int mt, int64_t tiles, int S, int sm_count) {
  if (mt <= 32 && S > 2 && tiles * 2 * 8 >= (int64_t)sm_count * 3) return 2;
  return S;
}

/* Scored choice of the swapped kernel's height and cluster size (run 4, docs/perf-notes.md):
 * the most CTAs in one wave (tiles x S, tiles <= SMs); ties: fewer m-blocks (B read fewer
 * times: 129..256 x 8192 at one m-block of 160..256 with S 2 ran 0.93-1.04x cuBLASLt, as two
 * m-blocks of 128 0.49-0.84), then the smaller height. */
int gemm_plan_skinny_shape(int64_t m, int64_t n, int k_blocks, int sm_count, const int *clusters, int *split) {
  const int64_t nblk = (n + SKINNY_BN - 1) / SKINNY_BN;
  int best = 256, best_s = 1;
  int64_t best_ctas = -1, best_mb = 0;
  for (int i = 0; i < SKINNY_NHEIGHTS; i++) {
    const int h = skinny_heights[i];
    if (h < 128 && m > h) continue; /* heights below 128 only as the one m-block */
    const int64_t mb = (m + h - 1) / h, tiles = nblk * mb;
    const int S = tiles <= sm_count ? gemm_plan_skinny_split_tiles(tiles, k_blocks, sm_count, clusters) : 1;
    const int64_t ctas = tiles <= sm_count ? tiles * S : 0;
    if (ctas > best_ctas || (ctas == best_ctas && mb < best_mb)) {
      best_ctas = ctas;
      best_mb = mb;
      best = h;
      best_s = S;
    }
  }
  if (split) *split = skinny_split_for_height(best, nblk * ((m + best - 1) / best), best_s, sm_count);
  return best;
}

int gemm_plan_skinny_mt(int64_t m, int64_t n, int sm_count) {
  return gemm_plan_skinny_shape(m, n, 1 << 20, sm_count, NULL, NULL);
}

int gemm_plan_default_skinny(int64_t m, int64_t n, int64_t k, int b_kn, int sm_count) {
  if (m < 1 || b_kn) return 0;
  if (m <= 128) return 1;
  /* Fewer engine tiles than SMs (session 3: ag P8 qkv 2048 x 1280 x 8192, 80 tiles, 0.73x
   * cuBLASLt with split-K or stream-K; 0.89x as 130 swapped tiles of 128 x 160): a 128-column
   * tile of the swapped kernel may fill the SMs in one wave. Run 4 also measured it losing with
   * a cluster split over many m-blocks (1024 x 1280 x 8192: 6 m-blocks of 192, S 2: 0.62 vs
   * the engine's 0.80), so a split needs <= 2 m-blocks. */
  const int64_t engine_tiles = ((m + GEMM_BM - 1) / GEMM_BM) * ((n + GEMM_BN - 1) / GEMM_BN);
  const int kb = (int)((k + GEMM_BK - 1) / GEMM_BK);
  if (engine_tiles * 4 > (int64_t)sm_count * 3 || kb < 32) return 0;
  int S = 1;
  const int mt = gemm_plan_skinny_shape(m, n, kb, sm_count, NULL, &S);
  const int64_t mb = (m + mt - 1) / mt, tiles = ((n + SKINNY_BN - 1) / SKINNY_BN) * mb;
  return tiles <= sm_count && tiles * S * 10 >= (int64_t)sm_count * 9 && (S == 1 || mb <= 2);
}

int gemm_plan_skinny_split_tiles(int64_t tiles, int k_blocks, int sm_count, const int *clusters) {
  for (int s = SKINNY_MAX_SPLIT; s > 1; s--)
    if (s <= k_blocks && tiles * s <= sm_count && (!clusters || clusters[s] <= 0 || tiles <= clusters[s]))
      return s;
  return 1;
}

int gemm_plan_skinny_split(int64_t n, int k_blocks, int sm_count, const int *clusters) {
  return gemm_plan_skinny_split_tiles((n + SKINNY_BN - 1) / SKINNY_BN, k_blocks, sm_count, clusters);
}

/* The skinny plan (p's problem fields set): maps with the skinny boxes, the cluster size. */
static meld_result_t gemm_plan_skinny(const meld_gemm_args_t *a, const gemm_plan_opts_t *o,
                                      gemm_params_t *p, int *workers) {
  if (a->b_layout != MELD_B_NK)
    return meld_error(MELD_ERR_INVALID_ARG, "gemm_plan_make: the swapped (small-M) kernel needs B stored [N,K]");
  int S_dflt = 1;
  const int mt = o->skinny_mt ? o->skinny_mt
                              : gemm_plan_skinny_shape(a->m, a->n, p->k_blocks, o->sm_count, o->skinny_clusters, &S_dflt);
  if (!skinny_height_ok(mt))
    return meld_error(MELD_ERR_INVALID_ARG, "gemm_plan_make: skinny_mt %d is not " SKINNY_HEIGHTS_TEXT, mt);
  const int64_t tiles = ((a->n + SKINNY_BN - 1) / SKINNY_BN) * ((a->m + mt - 1) / mt);
  if (tiles > ((int64_t)1 << 30))
    return meld_error(MELD_ERR_INVALID_ARG, "gemm_plan_make: %lld tiles are too many for the swapped kernel", (long long)tiles);
  int S = o->split_k >= 1 ? o->split_k
                           : o->skinny_mt ? skinny_split_for_height(mt, tiles,
                                                                    gemm_plan_skinny_split_tiles(tiles, p->k_blocks,
                                                                                                 o->sm_count,
                                                                                                 o->skinny_clusters),
                                                                    o->sm_count)
                                          : S_dflt;
  if (S > SKINNY_MAX_SPLIT)
    return meld_error(MELD_ERR_INVALID_ARG, "gemm_plan_make: the small-M kernel's cluster size (split_k) %d exceeds %d",
                      S, SKINNY_MAX_SPLIT);
  if (S > p->k_blocks) S = p->k_blocks;
  if (o->skinny_hint < 0 || o->skinny_hint > 4)
    return meld_error(MELD_ERR_INVALID_ARG, "gemm_plan_make: skinny_hint %d is outside [0, 4]", o->skinny_hint);
  p->skinny_mt = mt;
  p->skinny_split = S;
  p->skinny_hint = o->skinny_hint == 0 ? GEMM_SKINNY_HINT_DEFAULT : o->skinny_hint - 1;
  p->cluster_m = 1;
  p->group_m = 1;
  p->split_k = 1;
  p->kb_per_split = p->k_blocks;
  p->split_from = p->tiles_m * p->tiles_n;
  p->workers = (int32_t)(tiles * S);
  MELD_CHECK(encode_2d(&p->map_a, a->a, a->k, a->m, a->lda, GEMM_BK, (uint32_t)mt,
                       CU_TENSOR_MAP_L2_PROMOTION_L2_256B, "A"));
  MELD_CHECK(encode_2d(&p->map_b, a->b, a->k, a->n, a->ldb, GEMM_BK, SKINNY_BN,
                       CU_TENSOR_MAP_L2_PROMOTION_L2_256B, "B"));
  *workers = p->workers;
  return MELD_OK;
}

/* Stream-K over the last `sk_tiles` tiles with W ranges: fills the sk_* fields (sk_parts and
 * sk_cmax from the same partition the device uses). */
static void gemm_sk_setup(gemm_params_t *p, int sk_tiles, int W) {
  const int kb = p->k_blocks;
  const uint32_t total = (uint32_t)sk_tiles * (uint32_t)kb;
  /* A range of ceil(total / W) k-blocks touches at most ceil(len / kb) + 1 tiles. */
  const uint32_t len = (total + W - 1) / W;
  int parts = (int)((len + kb - 1) / kb) + 1;
  int cmax = 1, c_lo = 0;
  for (int j = 0; j < sk_tiles; j++) {
    const int c = gemm_sk_contrib(j, sk_tiles, kb, W, &c_lo);
    if (c > cmax) cmax = c;
  }
  p->sk_tiles = sk_tiles;
  p->sk_workers = W;
  p->sk_parts = parts;
  p->sk_cmax = cmax;
}

/* The default stream-K rule, from the interleaved bench of session 5 (run s5-1, 48 shapes,
 * docs/perf-notes.md): stream-K over the partial wave (2) won 12-15% where 2-3 whole waves
 * leave a partial wave of 0.39-0.42 x SMs at K = 8192 (320 / 448 tiles: the M = 2048 AG
 * shapes), and 0.5-2% on most shapes with a partial wave of 0.15-0.61 x SMs and >= 56
 * k-blocks; it lost where the partial wave is almost full (L/W >= 0.7: up to -22%), where
 * K is short (16-28 k-blocks: -1..-8%), with fewer tiles than SMs, and over a handful of
 * tiles (L/W 0.03). */
int gemm_plan_default_sk(int64_t tiles, int sm_count, int k_blocks) {
  if (sm_count < 1 || tiles < sm_count || k_blocks < 48) return 1;
  const int64_t L = tiles % sm_count;
  return L * 100 >= (int64_t)sm_count * 10 && L * 100 <= (int64_t)sm_count * 62 ? 2 : 1;
}

int gemm_plan_sk_region(int64_t tiles, int W, int k_blocks, int full_wave, int pieces, int extra, int64_t *sk_tiles,
                        int64_t *ranges) {
  int64_t skt = tiles < W ? tiles : tiles % W;
  if (full_wave && tiles >= W) skt += W;
  if (skt == 0) skt = tiles >= W ? W : tiles; /* whole waves: the last one */
  skt = skt + extra < tiles ? skt + extra : tiles;
  const int64_t r = pieces > 0 ? skt * (pieces < k_blocks ? pieces : k_blocks) : W;
  *sk_tiles = skt;
  *ranges = r;
  return (skt * k_blocks + 1) * (r + 1) < GEMM_SK_LIMIT;
}

/* Stream-K choice for tiles >= SMs (k-blocks as the time unit): the data-parallel schedule
 * runs ceil(tiles / W) rounds of kb; stream-K over one full + the partial wave runs
 * floor(tiles / W) - 1 rounds plus (1 + L / W) * kb, plus ~4 k-blocks of partial traffic
 * and fixup per CTA. Chosen when it wins by more than 2% of the data-parallel time. */
static int gemm_choose_sk(int64_t tiles, int W, int kb) {
  const int64_t L = tiles % W, waves = tiles / W;
  if (L == 0 || waves < 1 || kb < 8) return 1;
  const double dp = (double)(waves + 1) * kb;
  const double sk = (double)waves * kb + (double)L / W * kb + 4.0;
  return sk < dp * 0.98 ? 3 : 1;
}

meld_result_t gemm_plan_make(const meld_gemm_args_t *a, const gemm_plan_opts_t *o,
                             gemm_params_t *p, int *workers) {
  MELD_CHECK(gemm_args_validate(a));
  if (!o || !p || !workers)
    return meld_error(MELD_ERR_INVALID_ARG, "gemm_plan_make: NULL options, params or workers");
  if (o->sm_count < 1)
    return meld_error(MELD_ERR_INVALID_ARG, "gemm_plan_make: sm_count %d < 1", o->sm_count);
  if (a->m == 0 || a->n == 0)
    return meld_error(MELD_ERR_INVALID_ARG, "gemm_plan_make: empty problem (m or n is 0)");
  pthread_once(&g_encode_once, encode_lookup);
  if (!g_encode)
    return meld_error(MELD_ERR_CUDA,
                      "meld_gemm: the driver entry point cuTensorMapEncodeTiled is unavailable "
                      "(%s); is an NVIDIA driver >= 12.0 installed?",
                      g_encode_err == cudaSuccess ? "symbol not found" : cudaGetErrorString(g_encode_err));
  memset(p, 0, sizeof *p);
  p->m = (int32_t)a->m;
  p->n = (int32_t)a->n;
  p->k = (int32_t)a->k;
  p->tiles_m = (int32_t)((a->m + GEMM_BM - 1) / GEMM_BM);
  p->tiles_n = (int32_t)((a->n + GEMM_BN - 1) / GEMM_BN);
  p->k_blocks = (int32_t)((a->k + GEMM_BK - 1) / GEMM_BK);
  p->b_kn = a->b_layout == MELD_B_KN;
  if (o->tile_n != 0 && o->tile_n != 1 && o->tile_n != GEMM_BN && o->tile_n != GEMM_BN_WIDE &&
      o->tile_n != GEMM_BN_PP)
    return meld_error(MELD_ERR_INVALID_ARG, "gemm_plan_make: tile_n %d is not 0, 1, %d, %d or %d", o->tile_n,
                      GEMM_BN, GEMM_BN_WIDE, GEMM_BN_PP);
  p->c = a->c;
  p->ldc = a->ldc;
  if (o->skinny < 0 || o->skinny > 2)
    return meld_error(MELD_ERR_INVALID_ARG, "gemm_plan_make: skinny %d is outside [0, 2]", o->skinny);
  if (o->early_release < 0 || o->early_release > 2)
    return meld_error(MELD_ERR_INVALID_ARG, "gemm_plan_make: early_release %d is outside [0, 2]", o->early_release);
  if (o->store_hint < 0 || o->store_hint > 2)
    return meld_error(MELD_ERR_INVALID_ARG, "gemm_plan_make: store_hint %d is outside [0, 2]", o->store_hint);
  if (o->skinny == 2 && o->tile_n == GEMM_BN_PP)
    return meld_error(MELD_ERR_INVALID_ARG,
                      "gemm_plan_make: the ping-pong tile (tile_n %d) is the engine's: not with the small-M kernel "
                      "forced (skinny 2)", GEMM_BN_PP);
  /* (the ping-pong tile forced: the engine, whatever the small-M rule says) */
  if (o->skinny == 2 || (o->skinny == 1 && o->tile_n != GEMM_BN_PP &&
                         gemm_plan_default_skinny(a->m, a->n, a->k, p->b_kn, o->sm_count)))
    return gemm_plan_skinny(a, o, p, workers); /* (its own kernel: no tile width, no stage-release option) */

  /* The wide tile: forced, or chosen (tile_n 1) where the caller forces none of what it lacks
   * (B [K,N], split-K, stream-K; the experimental cluster only when forced). With tile_n 1,
   * MELD_GEMM_TILE_N=256|320 replaces the rule (320 still only where the tile is legal). */
  const int wide_forced = o->tile_n == GEMM_BN_WIDE;
  if (wide_forced && (p->b_kn || o->split_k > 1 || o->stream_k > 1))
    return meld_error(MELD_ERR_INVALID_ARG,
                      "gemm_plan_make: the 128 x %d tile needs B stored [N,K] and takes no split-K or stream-K",
                      GEMM_BN_WIDE);
  pthread_once(&g_env_once, env_read);
  const int wide_legal = !p->b_kn && o->cluster_m != 2 && o->split_k <= 1 && o->stream_k <= 1;
  const int wide_pref = g_env_tile_n ? g_env_tile_n
                                     : gemm_plan_default_tile_n(a->m, a->n, a->k, p->b_kn, o->sm_count);
  if (wide_forced || (o->tile_n == 1 && wide_legal && wide_pref == GEMM_BN_WIDE)) {
    p->bn = GEMM_BN_WIDE;
    p->tiles_n = (int32_t)((a->n + GEMM_BN_WIDE - 1) / GEMM_BN_WIDE);
  }
  /* The ping-pong tile (128 x 128 per consumer warpgroup): forced, or chosen (tile_n 1) where
   * MELD_GEMM_TILE_N=128 asks and nothing it lacks is forced (it takes whole tiles only). */
  const int pp_forced = o->tile_n == GEMM_BN_PP;
  const int pp_legal = !p->b_kn && o->split_k <= 1 && o->stream_k <= 1 && a->n % 8 == 0 &&
                       o->epi_tma != 0 && o->epi_defer <= 1;
  if (pp_forced && !pp_legal)
    return meld_error(MELD_ERR_INVALID_ARG,
                      "gemm_plan_make: the ping-pong 128 x %d tile needs B stored [N,K], n a multiple of 8 (n %lld) "
                      "and the TMA-store epilogue, and takes no split-K, stream-K or deferred half",
                      GEMM_BN_PP, (long long)a->n);
  if (pp_forced || (o->tile_n == 1 && pp_legal && !wide_forced && g_env_tile_n == GEMM_BN_PP)) {
    p->bn = GEMM_BN_PP;
    p->tiles_n = (int32_t)((a->n + GEMM_BN_PP - 1) / GEMM_BN_PP);
  }
  const int pp = p->bn == GEMM_BN_PP;
  const int wide = p->bn == GEMM_BN_WIDE;
  /* Cluster 2x1 (B multicast) only when asked: measured on H200 (run 1, perf-notes) it was
   * 0.56-0.75x of cluster 1 with this kernel, so the default is 1. */
  int cl = o->cluster_m; /* (env_read ran above, before the tile rules) */
  /* The ping-pong tile in B-multicast pairs: where MELD_GEMM_CLUSTER_EXPERIMENTAL=1 asks (session
   * 42: measuring whether the pairs' halved B traffic is what its single CTAs lack) */
  if (cl == 0)
    cl = pp && g_env_cluster_exp == 1 && o->max_clusters > 0 && o->sm_count >= 2 && p->tiles_m >= 2 ? 2 : 1;
  if (cl != 1 && cl != 2)
    return meld_error(MELD_ERR_INVALID_ARG, "gemm_plan_make: cluster_m %d is not 1 or 2", cl);
  /* MELD_GEMM_CLUSTER_EXPERIMENTAL=1 lets it through, for tests and benches only (session 8:
   * the L2 traffic it saves is the GEMM's next lever at the power cap; perf-notes); =2 runs
   * the pairs without the multicast (diagnosis: it told the 0.5x of session 9 was the
   * multicast path's, found to be a cluster-scope release per stage) */
  if (cl == 2 && !g_env_cluster_exp)
    return meld_error(MELD_ERR_UNSUPPORTED,
                      "gemm_plan_make: cluster_m 2 (B multicast) is disabled: exact since session 9 but "
                      "0.86-1.0x of cluster 1 on H200 (docs/perf-notes.md); use cluster_m 1");
  if (cl == 2 && (o->sm_count < 2 || o->max_clusters < 1))
    return meld_error(MELD_ERR_INVALID_ARG,
                      "gemm_plan_make: cluster_m 2 needs >= 2 SMs and co-resident clusters "
                      "(sm_count %d, max_clusters %d)",
                      o->sm_count, o->max_clusters);
  p->cluster_m = cl;
  /* (=2: the pair without its multicast, to tell the cluster's cost from the multicast's) */
  p->cluster_mc = cl == 2 && g_env_cluster_exp != 2;
  int split = o->split_k;
  if (split < 0 || split > 8)
    return meld_error(MELD_ERR_INVALID_ARG, "gemm_plan_make: split_k %d is outside [0, 8]", split);
  const int64_t tiles = (int64_t)p->tiles_m * p->tiles_n;
  int64_t from = 0; /* forced split: every tile */
  if (split == 0) { /* chosen: only when there are fewer tiles than SMs */
    /* Splitting the last partial wave of a large problem (hybrid, split_from > 0) works but
     * measured slower at 8192^3 (run 2: 0.944x vs 0.984x unsplit), so it is not chosen. */
    from = tiles < o->sm_count && !wide && !pp ? 0 : tiles;
    split = cl == 1 && from == 0 ? gemm_choose_split(tiles, o->sm_count, p->k_blocks) : 1;
  }
  int sk = o->stream_k;
  MELD_CHECK(gemm_plan_det_apply(o, &split, &sk));
  if (split > p->k_blocks) split = p->k_blocks;
  if (split > 1 && cl != 1)
    return meld_error(MELD_ERR_INVALID_ARG, "gemm_plan_make: split-K needs cluster_m 1");
  p->kb_per_split = (p->k_blocks + split - 1) / split;
  p->split_k = (p->k_blocks + p->kb_per_split - 1) / p->kb_per_split; /* no empty split */
  if (p->split_k == 1) {
    p->kb_per_split = p->k_blocks;
    from = tiles;
  }
  p->split_from = (int32_t)from;
  if (o->split_ileave < 0 || o->split_ileave > 2)
    return meld_error(MELD_ERR_INVALID_ARG, "gemm_plan_make: split_ileave %d is outside [0, 2]", o->split_ileave);
  p->split_ileave = p->split_k > 1 && o->split_ileave == 2;
  const int64_t units = p->split_k == 1 ? (int64_t)((p->tiles_m + cl - 1) / cl) * p->tiles_n
                                        : from + (tiles - from) * p->split_k;
  /* Stream-K: by default gemm_plan_default_sk (a rule measured in runs s5-1/s5-2; the old
   * cost model (4) lost 4-29% on 12 suite shapes in run 4), only when the caller provides a
   * workspace and split-K is not in use; forced (2, 3); or the old model (4). */
  if (sk < 0 || sk > 4)
    return meld_error(MELD_ERR_INVALID_ARG, "gemm_plan_make: stream_k %d is outside [0, 4]", sk);
  if (sk == 0) /* default: the measured rule (needs the caller's workspace) */
    sk = o->has_workspace && p->split_k == 1 && cl == 1 && o->split_k == 0 && !wide && !pp
             ? gemm_plan_default_sk(tiles, o->sm_count, p->k_blocks) : 1;
  if (sk == 4) sk = o->has_workspace && p->split_k == 1 && cl == 1 && o->split_k == 0 && !wide && !pp
                        ? gemm_choose_sk(tiles, o->sm_count, p->k_blocks) : 1;
  if (sk > 1 && (cl != 1 || p->split_k > 1))
    return meld_error(MELD_ERR_INVALID_ARG,
                      "gemm_plan_make: stream-K needs cluster_m 1 and split_k 1 (got %d, %d)", cl,
                      p->split_k);
  int64_t w;
  int64_t skt = 0;
  const int W = (int)(o->sm_count < tiles * p->k_blocks ? o->sm_count : tiles * p->k_blocks);
  if (o->sk_pieces < 0 || o->sk_extra < 0)
    return meld_error(MELD_ERR_INVALID_ARG, "gemm_plan_make: sk_pieces %d or sk_extra %d < 0", o->sk_pieces,
                      o->sk_extra);
  int64_t Wsk = W; /* stream-K ranges */
  if (sk > 1) {
    if (!gemm_plan_sk_region(tiles, W, p->k_blocks, sk == 3, o->sk_pieces, o->sk_extra, &skt, &Wsk)) {
      if (o->stream_k > 1)
        return meld_error(MELD_ERR_INVALID_ARG,
                          "gemm_plan_make: stream-K over %lld tiles of %d k-blocks in %lld ranges "
                          "exceeds the engine's 32-bit partition arithmetic",
                          (long long)skt, p->k_blocks, (long long)Wsk);
      sk = 1;
    }
  }
  if (sk > 1) {
    gemm_sk_setup(p, (int)skt, (int)Wsk);
    w = W;
  } else if (cl == 1) {
    w = o->sm_count < units ? o->sm_count : units;
  } else {
    int64_t pairs = o->sm_count / 2;
    if (pairs > o->max_clusters) pairs = o->max_clusters;
    if (pairs > units) pairs = units;
    w = 2 * pairs;
  }
  p->workers = (int32_t)w;
  if (o->fixup_red < 0 || o->fixup_red > 3)
    return meld_error(MELD_ERR_INVALID_ARG, "gemm_plan_make: fixup_red %d is outside [0, 3]", o->fixup_red);
  if (o->fixup_red >= 2 && !o->has_workspace)
    return meld_error(MELD_ERR_INVALID_ARG,
                      "gemm_plan_make: fixup_red 2 (partials added in L2) needs has_workspace: the "
                      "caller must provide an all-zero fp32 workspace");
  /* Default (0): partials added in L2 only for split-K whose pieces all run in one round
   * (decode: run s5-1 M=16 0.790 -> 0.840, M=128 0.754 -> 0.774; with 2 rounds, 80 tiles x
   * split 3, it measured 0.708 -> 0.694; stream-K: sk2red <= sk2 on 41 of 46 shapes). */
  const int red_dflt = o->has_workspace && p->split_k > 1 && units <= w;
  const int red = o->fixup_red == 0 ? (red_dflt ? GEMM_FIXUP_RED_DEFAULT : 0) : o->fixup_red - 1;
  p->fixup_red = p->split_k > 1 || p->sk_tiles > 0 ? red : 0;
  /* Raster group: ~2K x 2K outputs per sweep (16 m-blocks x 8 n-blocks) keep the live A and
   * B panels of ~132 CTAs small in L2. */
  p->group_m = o->group_m > 0 ? o->group_m : (cl == 2 ? 8 : 16);
  /* TMA store only when n is a multiple of 8: at the right edge the TMA store wrote the whole
   * 16-byte chunk that straddles n (H200, run s5-1: 384 x 1100 wrote columns 1100..1103 of
   * every row, both with and without the deferred half). Else 16-byte generic stores, which
   * write element by element past the last full vector. */
  p->epi_tma = (o->epi_tma < 0 ? 1 : (o->epi_tma != 0)) && a->n % 8 == 0;
  if (o->epi_defer < 0 || o->epi_defer > 2)
    return meld_error(MELD_ERR_INVALID_ARG, "gemm_plan_make: epi_defer %d is outside [0, 2]", o->epi_defer);
  /* The wide tile can defer its 64-column third (16 registers), but by default does not:
   * measured on one H200 (session 11 call 2) it lost 1-4% sustained (2048 x 5120 x 8192:
   * 0.2620 ms deferred vs 0.2524 not; ncu 400.7K vs 387.7K cycles). epi_defer 2 forces it. */
  p->epi_defer = p->epi_tma && !pp ? (o->epi_defer == 0 ? (wide ? 0 : GEMM_EPI_DEFER_DEFAULT) : o->epi_defer - 1) : 0;
  /* Early stage release: on for the wide tile's 3 stages (session 11 call 7, one H200, 2048 x
   * 5120 x 8192: cycles 399 K -> 368 K, burst -6.3%, sustained -2.2%), off for the 4-stage
   * 128 x 256 tile (8192^3 sustained +0.4% with it, 8192 x 5120 x 8192 even). */
  p->early_release = pp ? 0 : o->early_release ? o->early_release - 1 : g_env_early_rel >= 0 ? g_env_early_rel : wide;
  p->store_hint = o->store_hint ? o->store_hint - 1 : g_env_store_hint > 0;
  if (p->fixup_red == 2) p->epi_defer = 0; /* gemm_kernel<., 1> has no early-ticket code */

  MELD_CHECK(encode_2d(&p->map_a, a->a, a->k, a->m, a->lda, GEMM_BK, GEMM_BM,
                       CU_TENSOR_MAP_L2_PROMOTION_L2_256B, "A"));
  if (!p->b_kn)
    MELD_CHECK(encode_2d(&p->map_b, a->b, a->k, a->n, a->ldb, GEMM_BK,
                         (uint32_t)(wide ? GEMM_BN_WIDE / 2 : (pp ? GEMM_BN_PP : GEMM_BN) / (p->cluster_mc ? 2 : 1)),
                         CU_TENSOR_MAP_L2_PROMOTION_L2_256B, "B"));
  else
    MELD_CHECK(encode_2d(&p->map_b, a->b, a->n, a->k, a->ldb, 64, GEMM_BK,
                         CU_TENSOR_MAP_L2_PROMOTION_L2_256B, "B"));
  MELD_CHECK(encode_2d(&p->map_c, a->c, a->n, a->m, a->ldc, 64, 64,
                       CU_TENSOR_MAP_L2_PROMOTION_NONE, "C"));
  *workers = (int)w;
  return MELD_OK;
}

meld_result_t gemm_plan_glu(gemm_params_t *p, const void *b, int64_t b_rows, int64_t ldb, void *c, int64_t ldc,
                            int32_t up) {
  MELD_CHECK(encode_2d(&p->map_b, b, p->k, b_rows, ldb, GEMM_BK, GEMM_BN / 2, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                       "B (gated)"));
  MELD_CHECK(encode_2d(&p->map_c, c, up, p->m, ldc, 64, 64, CU_TENSOR_MAP_L2_PROMOTION_NONE, "C (gated)"));
  p->c = c;
  p->ldc = ldc;
  p->grp_glu = up;
  return MELD_OK;
}

/* ---- legality and printing (declared in device/gemm.cuh) --------------------------------- */


int gemm_params_check(const gemm_params_t *p, int workers, char *why, size_t len) {
  if (!p) MELD_WHY("gemm: params is NULL");
  if (p->m < 1 || p->n < 1 || p->k < 1) MELD_WHY("gemm: empty problem %d x %d x %d", p->m, p->n, p->k);
  if (p->bn != 0 && p->bn != GEMM_BN_WIDE && p->bn != GEMM_BN_PP)
    MELD_WHY("gemm: bn %d is not 0 (%d), %d or %d", p->bn, GEMM_BN, GEMM_BN_WIDE, GEMM_BN_PP);
  if (p->tiles_m != (p->m + GEMM_BM - 1) / GEMM_BM || p->tiles_n != (p->n + GEMM_BN_OF(p) - 1) / GEMM_BN_OF(p) ||
      p->k_blocks != (p->k + GEMM_BK - 1) / GEMM_BK)
    MELD_WHY("gemm: tile counts %d x %d x %d do not match the problem %d x %d x %d", p->tiles_m,
        p->tiles_n, p->k_blocks, p->m, p->n, p->k);
  if (p->fp8 && (p->b_kn || !p->scale_a || !p->scale_b))
    MELD_WHY("gemm: fp8 needs B stored [N,K] and both scales");
  if (p->skinny_mt) { /* the swapped small-M kernel: none of the engine's schedule or hooks */
    const int mt = p->skinny_mt;
    if (!skinny_height_ok(mt)) MELD_WHY("gemm: skinny_mt %d is not " SKINNY_HEIGHTS_TEXT, mt);
    if (mt < 128 && p->m > mt) MELD_WHY("gemm: m %d exceeds skinny_mt %d (below 128: one m-block)", p->m, mt);
    if (p->b_kn) MELD_WHY("gemm: the small-M kernel needs B stored [N,K]");
    if (p->skinny_split < 1 || p->skinny_split > SKINNY_MAX_SPLIT || p->skinny_split > p->k_blocks)
      MELD_WHY("gemm: skinny_split %d is outside [1, min(%d, k_blocks %d)]", p->skinny_split, SKINNY_MAX_SPLIT,
          p->k_blocks);
    const int64_t tiles = (int64_t)((p->n + SKINNY_BN - 1) / SKINNY_BN) * ((p->m + mt - 1) / mt);
    if ((int64_t)workers != tiles * p->skinny_split)
      MELD_WHY("gemm: the small-M kernel runs ceil(n / %d) x ceil(m / %d) x skinny_split = %lld CTAs, not %d",
          SKINNY_BN, mt, (long long)(tiles * p->skinny_split), workers);
    if (p->skinny_hint < 0 || p->skinny_hint > 3) MELD_WHY("gemm: skinny_hint %d is outside [0, 3]", p->skinny_hint);
    if (p->split_k != 1 || p->sk_tiles || p->cluster_m != 1 || p->ready.flags || p->order.queue ||
        p->order.m_order || p->order.m_rotate || p->order.ileave_b || p->epi.out || p->epi.signal || p->epi.rows_valid ||
        p->epi.reduce.on || p->epi.out_tma || p->a2_rows || p->epi_tma || p->epi_defer || p->grp_brow)
      MELD_WHY("gemm: the small-M kernel takes no split-K, stream-K, cluster, TMA-store epilogue or hooks");
    if (!p->c) MELD_WHY("gemm: no output (c is NULL)");
    return 0;
  }
  if (p->cluster_m != 1 && p->cluster_m != 2) MELD_WHY("gemm: cluster_m %d is not 1 or 2", p->cluster_m);
  /* (the producer's hooks, a / h and the tile order, are the same code for both widths; the
   * epilogue's are not: the wide tile stores C whole, by TMA or plainly) */
  if (p->bn == GEMM_BN_WIDE && (p->b_kn || p->split_k != 1 || p->sk_tiles || p->epi.out || p->epi.signal ||
                                p->epi.rows_valid || p->epi.reduce.on || p->epi.out_tma))
    MELD_WHY("gemm: the 128 x %d tile needs B [N,K] and takes no split-K, stream-K or epilogue hook "
        "(of the hooks it takes the producer's: ready waits, a second A map, the tile order)",
        GEMM_BN_WIDE);
  /* The ping-pong tile: each consumer warpgroup computes its tiles in the static order,
   * whole, and stores them by TMA (gemm_consumer_pp); nothing else of the engine's. */
  if (p->bn == GEMM_BN_PP &&
      (p->b_kn || p->split_k != 1 || p->sk_tiles || p->ready.flags || p->order.queue ||
       p->order.m_order || p->order.m_rotate || p->order.ileave_b || p->epi.out || p->epi.signal ||
       p->epi.rows_valid || p->epi.reduce.on || p->epi.reduce.preload || p->epi.reduce.tma || p->epi.reduce.copy_tma ||
       p->epi.out_tma || p->a2_rows || !p->epi_tma || p->epi_defer || p->grp_brow || p->scat_origin ||
       p->trace.events))
    MELD_WHY("gemm: the ping-pong 128 x %d tile needs B [N,K] and the TMA-store epilogue (n %% 8 == 0), and takes no "
        "split-K, stream-K, deferred half, tile order or hook", GEMM_BN_PP);
  if (p->grp_span && (!p->grp_brow || p->order.m_order || p->order.ileave_b || p->order.m_rotate))
    MELD_WHY("gemm: hook f's runs (grp_span) need hook f and no other m-block order");
  if (p->grp_ready && (!p->grp_brow || !p->ready.abort_word || !p->ready.timeout_ns))
    MELD_WHY("gemm: hook f's ready word (grp_ready) needs hook f and the ready hook's abort word and deadline");
  if (p->grp_brow && p->grp_rows < 1) MELD_WHY("gemm: grouped rows (hook f) need grp_rows >= 1, not %d", p->grp_rows);
  if (p->grp_brow && (p->cluster_m != 1 || p->b_kn || p->bn == GEMM_BN_WIDE || p->split_k != 1 || p->sk_tiles ||
                      p->a2_rows || p->skinny_mt))
    MELD_WHY("gemm: grouped rows (hook f) need cluster_m 1, B [N,K], the 128 x %d tile and no split-K, stream-K or "
        "second A map", GEMM_BN);
  if (p->grp_glu && (!p->grp_brow || p->grp_glu < 0 || p->grp_glu % 128 || p->grp_rows != 2 * p->grp_glu ||
                     p->n != 2 * (int64_t)p->grp_glu || !p->epi_tma || p->epi.out || p->epi.signal ||
                     p->epi.rows_valid || p->epi.reduce.on || p->epi.out_tma))
    MELD_WHY("gemm: gated tiles (grp_glu %d) need hook f with grp_rows = n = 2 grp_glu (grp_rows %d, n %lld), "
        "grp_glu a multiple of 128, and the plain TMA-store epilogue", p->grp_glu, p->grp_rows, (long long)p->n);
  if (p->scat_origin && (p->epi_tma || p->epi_defer || p->scat_n < 1 || p->scat_n > GEMM_SCAT_MAX || p->grp_glu ||
                         p->epi.out || p->epi.signal || p->epi.rows_valid || p->epi.reduce.on || p->epi.out_tma ||
                         p->split_k != 1 || p->sk_tiles || p->cluster_m != 1 || p->bn == GEMM_BN_WIDE || p->skinny_mt))
    MELD_WHY("gemm: the row scatter needs the generic-store epilogue (no TMA store, no deferral), 1..%d ranks (%d), "
        "no other epilogue hook, no gated tiles, split-K, stream-K, cluster or wide tile", GEMM_SCAT_MAX, p->scat_n);
  if (p->cluster_mc && p->cluster_m != 2) MELD_WHY("gemm: B multicast (cluster_mc) needs cluster_m 2");
  if (p->epi.reduce.tma && (!p->epi.reduce.on || p->epi.reduce.npush > 0 || p->n % 8))
    MELD_WHY("gemm: the reduced tiles' TMA store needs the reduce hook on, no symmetric push and n %% 8 == 0 (n %d)",
        p->n);
  if (p->epi.reduce.copy_tma &&
      (!p->epi.reduce.tma || p->epi.reduce.copy_tma < 1 || p->epi.reduce.copy_tma > 2 ||
       (p->epi.reduce.copy_tma == 1 && p->epi.reduce.ncopies != 1) ||
       (p->epi.reduce.copy_tma == 2 && (p->epi.reduce.ncopies < 2 || p->epi.reduce.ncopies > GEMM_PUSH_MAPS))))
    MELD_WHY("gemm: the reduced tiles' TMA copy (mode %d) needs their TMA store and one copy (mode 1) or 2..%d "
        "(mode 2, maps in the fused kernel's parameter), not %d",
        p->epi.reduce.copy_tma, GEMM_PUSH_MAPS, p->epi.reduce.ncopies);
  if (workers < 1) MELD_WHY("gemm: %d workers; at least 1 CTA must run the engine", workers);
  if (p->cluster_m == 2 && workers % 2)
    MELD_WHY("gemm: cluster_m 2 needs an even number of workers, not %d", workers);
  if (p->group_m < 1) MELD_WHY("gemm: group_m %d < 1", p->group_m);
  if (p->split_k < 1) MELD_WHY("gemm: split_k %d < 1", p->split_k);
  if (p->split_k > 1) {
    if (p->cluster_m != 1) MELD_WHY("gemm: split-K needs cluster_m 1");
    if (!p->workspace || !p->counters)
      MELD_WHY("gemm: split_k %d needs a workspace and tile counters", p->split_k);
    if (p->kb_per_split < 1 || (int64_t)(p->split_k - 1) * p->kb_per_split >= p->k_blocks)
      MELD_WHY("gemm: split_k %d x kb_per_split %d leaves an empty split of %d k-blocks", p->split_k,
          p->kb_per_split, p->k_blocks);
    if (p->split_from < 0 || p->split_from >= p->tiles_m * p->tiles_n)
      MELD_WHY("gemm: split_from %d is outside [0, %d tiles)", p->split_from, p->tiles_m * p->tiles_n);
  } else if (p->split_from != p->tiles_m * p->tiles_n) {
    MELD_WHY("gemm: split_k 1 needs split_from = tiles (%d), not %d", p->tiles_m * p->tiles_n,
        p->split_from);
  }
  if (p->epi_defer < 0 || p->epi_defer > 1) MELD_WHY("gemm: epi_defer %d is not 0 or 1", p->epi_defer);
  if (p->early_release < 0 || p->early_release > 1)
    MELD_WHY("gemm: early_release %d is not 0 or 1", p->early_release);
  if (p->fixup_red < 0 || p->fixup_red > 2) MELD_WHY("gemm: fixup_red %d is outside [0, 2]", p->fixup_red);
  if (p->fixup_red == 2 && p->epi_defer)
    MELD_WHY("gemm: fixup_red 2 (early ticket) needs epi_defer 0 (the deferred-epilogue kernel lacks it)");
  if (p->sk_tiles < 0) MELD_WHY("gemm: sk_tiles %d < 0", p->sk_tiles);
  if (p->sk_tiles > 0) {
    if (p->split_k != 1 || p->cluster_m != 1)
      MELD_WHY("gemm: stream-K needs split_k 1 and cluster_m 1 (got %d, %d)", p->split_k, p->cluster_m);
    if (!p->workspace || !p->counters)
      MELD_WHY("gemm: stream-K (%d tiles) needs a workspace and tile counters", p->sk_tiles);
    if (p->sk_tiles > p->tiles_m * p->tiles_n)
      MELD_WHY("gemm: sk_tiles %d exceeds the %d tiles", p->sk_tiles, p->tiles_m * p->tiles_n);
    if (p->sk_workers < 1 || p->sk_parts < 1 || p->sk_cmax < 1)
      MELD_WHY("gemm: stream-K sk_workers %d, sk_parts %d, sk_cmax %d must be >= 1", p->sk_workers,
          p->sk_parts, p->sk_cmax);
    if ((int64_t)p->sk_tiles * p->k_blocks < p->sk_workers)
      MELD_WHY("gemm: stream-K %d tiles x %d k-blocks < %d ranges (a range would be empty)",
          p->sk_tiles, p->k_blocks, p->sk_workers);
    if (((int64_t)p->sk_tiles * p->k_blocks + 1) * (p->sk_workers + 1) >= GEMM_SK_LIMIT)
      MELD_WHY("gemm: stream-K %d tiles x %d k-blocks x %d ranges exceeds 32-bit arithmetic",
          p->sk_tiles, p->k_blocks, p->sk_workers);
    {
      const uint32_t total = (uint32_t)p->sk_tiles * (uint32_t)p->k_blocks;
      const uint32_t len = (total + p->sk_workers - 1) / p->sk_workers;
      if (p->sk_parts < (int)((len + p->k_blocks - 1) / p->k_blocks) + 1)
        MELD_WHY("gemm: sk_parts %d is too small for ranges of %u k-blocks", p->sk_parts, len);
      for (int j = 0, c_lo = 0; j < p->sk_tiles; j++) {
        const int c = gemm_sk_contrib(j, p->sk_tiles, p->k_blocks, p->sk_workers, &c_lo);
        if (c > p->sk_cmax) MELD_WHY("gemm: stream-K tile %d has %d contributors > sk_cmax %d", j, c, p->sk_cmax);
      }
    }
  }
  if (p->cluster_m == 2 && (p->order.queue || p->order.m_order || p->order.m_rotate || p->order.ileave_b))
    MELD_WHY("gemm: cluster_m 2 cannot be combined with the tile-order hook (queue, m_order, "
        "m_rotate): both CTAs of a pair must see the same tile sequence");
  if (p->cluster_m == 2 && p->ready.flags)
    MELD_WHY("gemm: cluster_m 2 cannot be combined with the ready hook (an aborting CTA would "
        "leave its peer waiting for multicast data)");
  if (p->order.m_rotate < 0 || p->order.m_rotate >= p->tiles_m)
    MELD_WHY("gemm: m_rotate %d is outside [0, tiles_m %d)", p->order.m_rotate, p->tiles_m);
  if (p->order.ileave_b && p->order.ileave_p) {
    const int B = p->order.ileave_b, G = p->group_m, P = p->order.ileave_p;
    if (B < 1 || P < 3 || p->cluster_m != 1 || p->order.m_rotate || p->order.m_order || p->tiles_m != P * B || G < 1 ||
        B % G || p->order.ileave_rank < 0 || p->order.ileave_rank >= P)
      MELD_WHY("gemm: the interleaved owner order for %d ranks needs cluster 1, no m_rotate or m_order, tiles_m %d = "
          "%d x ileave_b %d, a group_m %d dividing ileave_b, and a rank %d in [0, %d)",
          P, p->tiles_m, P, B, G, p->order.ileave_rank, P);
  } else if (p->order.ileave_b) {
    const int B = p->order.ileave_b, G = p->group_m;
    if (B < 0 || p->cluster_m != 1 || p->order.m_rotate || p->order.m_order || p->tiles_m != 2 * B || G < 2 ||
        G % 2 || G > B || B % (G / 2) ||
        !((p->order.ileave_own == 0 && p->order.ileave_peer == B) || (p->order.ileave_own == B && p->order.ileave_peer == 0)))
      MELD_WHY("gemm: the interleaved owner order needs cluster 1, no m_rotate or m_order, tiles_m %d = 2 x "
          "ileave_b %d, an even group_m %d of at most ileave_b whose half divides ileave_b, and own / peer first "
          "m-blocks {0, ileave_b} (%d / %d)",
          p->tiles_m, B, G, p->order.ileave_own, p->order.ileave_peer);
  }
  if (p->ready.flags && (p->ready.rows_per_flag < GEMM_BM || p->ready.rows_per_flag % GEMM_BM))
    MELD_WHY("gemm: ready.rows_per_flag %d is not a positive multiple of %d (one flag must cover "
        "whole m-blocks)",
        p->ready.rows_per_flag, GEMM_BM);
  if (p->epi.out) {
    if (p->epi.rows_per_owner < GEMM_BM || p->epi.rows_per_owner % GEMM_BM)
      MELD_WHY("gemm: epi.rows_per_owner %d is not a positive multiple of %d", p->epi.rows_per_owner,
          GEMM_BM);
    if (p->epi.out_ld < p->n || p->epi.out_ld % 8)
      MELD_WHY("gemm: epi.out_ld %lld must be >= n %d and a multiple of 8", (long long)p->epi.out_ld,
          p->n);
  } else if (!p->c) {
    MELD_WHY("gemm: no output (c is NULL and no epilogue redirect)");
  }
  return 0;
}

void gemm_params_format(const gemm_params_t *p, char *buf, size_t len) {
  if (!buf || !len) return;
  if (!p) {
    snprintf(buf, len, "gemm params: NULL");
    return;
  }
  if (p->skinny_mt) {
    snprintf(buf, len,
             "gemm %d x %d x %d (B [N,K]) on the small-M kernel: A padded to %d rows, %d columns per "
             "CTA, cluster of %d CTAs per column block (k-blocks %d), %d stages, smem %d B, L2 hints %d, "
             "workers %d, c %p ldc %lld",
             p->m, p->n, p->k, p->skinny_mt, SKINNY_BN, p->skinny_split, p->k_blocks,
             SKINNY_STAGES(p->skinny_mt), SKINNY_SMEM_BYTES(p->skinny_mt), p->skinny_hint, p->workers, p->c,
             (long long)p->ldc);
    return;
  }
  snprintf(buf, len,
           "gemm %d x %d x %d (B %s), tiles %d x %d x %d of %dx%dx%d, %d stages%s, smem %d B\n"
           "  c %p ldc %lld, cluster_m %d, group_m %d, epilogue %s (half 1 deferred %d), workers %d\n"
           "  split_k %d (kb_per_split %d, from tile %d, interleaved %d) workspace %p counters %p\n"
           "  stream-K: %d tiles, %d ranges, %d parts, %d contributors max; fixup %s\n"
           "  ready: flags %p rows_per_flag %d epoch %llu abort %p timeout_ns %llu status %p\n"
           "  order: m_rotate %d m_order %p queue %p ileave %d (own %d, peer %d)\n"
           "  epi: out %p out_ld %lld rows_per_owner %d signal %p epoch %llu",
           p->m, p->n, p->k, p->b_kn ? "[K,N]" : "[N,K]", p->tiles_m, p->tiles_n, p->k_blocks,
           GEMM_BM, GEMM_BN_OF(p), GEMM_BK, GEMM_STAGES_OF(GEMM_BN_OF(p)),
           p->bn == GEMM_BN_PP ? " (ping-pong: a whole tile per consumer warpgroup)"
           : p->early_release == 2 ? " (early release, warpgroup-uniform)" : p->early_release ? " (early release)" : "",
           GEMM_SMEM_BYTES, p->c, (long long)p->ldc,
           p->cluster_m, p->group_m, p->epi_tma ? "TMA store" : "16-byte stores", p->epi_defer, p->workers,
           p->split_k, p->kb_per_split, p->split_from, p->split_ileave, (void *)p->workspace, (void *)p->counters,
           p->sk_tiles, p->sk_workers, p->sk_parts, p->sk_cmax,
           p->fixup_red == 2 ? "red.add in L2, early ticket" : p->fixup_red ? "red.add in L2" : "stores",
           (const void *)p->ready.flags, p->ready.rows_per_flag,
           (unsigned long long)p->ready.epoch, (const void *)p->ready.abort_word,
           (unsigned long long)p->ready.timeout_ns, (void *)p->ready.status, p->order.m_rotate,
           (const void *)p->order.m_order, (void *)p->order.queue, p->order.ileave_b, p->order.ileave_own,
           p->order.ileave_peer, (const void *)p->epi.out,
           (long long)p->epi.out_ld, p->epi.rows_per_owner, (const void *)p->epi.signal,
           (unsigned long long)p->epi.epoch);
}
