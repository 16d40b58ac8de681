/* gemm.cu — the stand-alone GEMM: the engine's kernel (one per B layout) and meld_gemm(). */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "device/gemm.cuh"
#include "device/gemm_skinny.cuh"
#include "error.h"
#include "gemm_plan.h"

/* One persistent CTA per SM (or per cluster slot); all CTAs run the engine. */
/* DEFER = p.epi_defer (0 or 1): the stand-alone kernel may overlap a tile's second epilogue
 * half with the next tile's first k-block (fused kernels keep the plain epilogue). */
/* Both stand-alone kernels let a kernel launched after them with programmatic stream
 * serialization (the decode GEMM+AR's zero-copy all-reduce) be scheduled once every CTA has
 * started; that kernel waits (griddepcontrol.wait) for this grid's completion and memory
 * before touching its output. No effect on ordinary launches. */
/* BN: the tile width (GEMM_BN, GEMM_BN_WIDE for p.bn 320 or GEMM_BN_PP for the ping-pong tile,
 * p.bn 128: both B [N,K], DEFER 0). */
/* F8: p.fp8 (meld_gemm_fp8: e4m3 A and B seen as bf16 of half the K; gemm.cuh gemm_params_t). */
template <bool BKN, int DEFER, int BN = GEMM_BN, bool F8 = false>
__global__ void __launch_bounds__(GEMM_THREADS, 1) gemm_kernel(const __grid_constant__ gemm_params_t p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  extern __shared__ __align__(1024) uint8_t gemm_smem[];
  gemm_cta_run<BKN, false, false, DEFER, false, false, gemm_no_tail, gemm_no_tail, BN, -1, false, F8>(
      &p, gemm_smem, (int)blockIdx.x, (int)gridDim.x);
#endif
}

/* The swapped small-M kernel (p.skinny_mt = MT): ceil(n / 128) x skinny_split CTAs in
 * clusters of skinny_split. */
template <int MT, bool F8 = false>
__global__ void __launch_bounds__(SKINNY_THREADS, 1) gemm_skinny_kernel(const __grid_constant__ gemm_params_t p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  extern __shared__ __align__(1024) uint8_t gemm_smem[];
  gemm_skinny_run<MT, gemm_skinny_plain, F8>(&p, gemm_smem);
#endif
}

typedef void (*gemm_kernel_fn)(gemm_params_t);
static gemm_kernel_fn gemm_skinny_kernel_for(int mt, int fp8) {
  if (fp8) return skinny_for_height(mt, [](auto h) -> gemm_kernel_fn { return gemm_skinny_kernel<h.value, true>; });
  return skinny_for_height(mt, [](auto h) -> gemm_kernel_fn { return gemm_skinny_kernel<h.value>; });
}
static gemm_kernel_fn gemm_kernel_for(int b_kn, int defer, int bn, int fp8) {
  static const gemm_kernel_fn k[2][2] = {{gemm_kernel<false, 0>, gemm_kernel<false, 1>},
                                         {gemm_kernel<true, 0>, gemm_kernel<true, 1>}};
  if (bn == GEMM_BN_PP) /* (gemm_params_check: B [N,K], no deferred half) */
    return fp8 ? gemm_kernel<false, 0, GEMM_BN_PP, true> : gemm_kernel<false, 0, GEMM_BN_PP>;
  if (fp8) { /* (gemm_params_check: B [N,K]) */
    if (bn == GEMM_BN_WIDE)
      return defer > 0 ? gemm_kernel<false, 1, GEMM_BN_WIDE, true> : gemm_kernel<false, 0, GEMM_BN_WIDE, true>;
    return defer > 0 ? gemm_kernel<false, 1, GEMM_BN, true> : gemm_kernel<false, 0, GEMM_BN, true>;
  }
  if (bn == GEMM_BN_WIDE) /* (gemm_params_check: B [N,K]) */
    return defer > 0 ? gemm_kernel<false, 1, GEMM_BN_WIDE> : gemm_kernel<false, 0, GEMM_BN_WIDE>;
  return k[b_kn ? 1 : 0][defer > 0 ? 1 : 0];
}

#define GEMM_MAX_DEVICES 64

/* Per device: shared-memory attribute set, and how many 2-CTA clusters fit at once. */
static int g_dev_ready[GEMM_MAX_DEVICES];
static int g_dev_clusters[GEMM_MAX_DEVICES];
/* [dev][S]: co-resident clusters of S small-M CTAs (the largest-smem variant), 0 = unknown */
static int g_skinny_clusters[GEMM_MAX_DEVICES][SKINNY_MAX_SPLIT + 1];

static meld_result_t gemm_device_setup(int dev) {
  if (dev < GEMM_MAX_DEVICES && g_dev_ready[dev]) return MELD_OK;
  for (int f8 = 0; f8 < 2; f8++)
    for (int kn = 0; kn < 2 - f8; kn++)
      for (int d = 0; d < 2; d++)
        MELD_CUDA_CHECK(cudaFuncSetAttribute(gemm_kernel_for(kn, d, GEMM_BN, f8),
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, GEMM_SMEM_BYTES));
  for (int f8 = 0; f8 < 2; f8++) {
    for (int d = 0; d < 2; d++)
      MELD_CUDA_CHECK(cudaFuncSetAttribute(gemm_kernel_for(0, d, GEMM_BN_WIDE, f8),
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, GEMM_SMEM_BYTES));
    MELD_CUDA_CHECK(cudaFuncSetAttribute(gemm_kernel_for(0, 0, GEMM_BN_PP, f8),
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, GEMM_SMEM_BYTES));
  }
  for (int f8 = 0; f8 < 2; f8++)
    for (int i = 0; i < SKINNY_NHEIGHTS; i++)
      MELD_CUDA_CHECK(cudaFuncSetAttribute(gemm_skinny_kernel_for(skinny_heights[i], f8),
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           SKINNY_SMEM_BYTES(skinny_heights[i])));
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 2;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.gridDim = dim3(2, 1, 1);
  cfg.blockDim = dim3(GEMM_THREADS, 1, 1);
  cfg.dynamicSmemBytes = GEMM_SMEM_BYTES;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, gemm_kernel_for(0, 0, GEMM_BN, 0), &cfg) != cudaSuccess) {
    (void)cudaGetLastError(); /* no clusters: plans fall back to cluster_m 1 */
    clusters = 0;
  }
  int skinny_clusters[SKINNY_MAX_SPLIT + 1] = {0};
  for (int S = 1; S <= SKINNY_MAX_SPLIT; S++) {
    const int mt = 32; /* the largest shared-memory footprint of the variants */
    attr[0].val.clusterDim.x = (unsigned)S;
    cfg.gridDim = dim3((unsigned)S, 1, 1);
    cfg.blockDim = dim3(SKINNY_THREADS, 1, 1);
    cfg.dynamicSmemBytes = SKINNY_SMEM_BYTES(mt);
    if (cudaOccupancyMaxActiveClusters(&skinny_clusters[S], gemm_skinny_kernel_for(mt, 0), &cfg) != cudaSuccess) {
      (void)cudaGetLastError();
      skinny_clusters[S] = 0; /* unknown: the plan then ignores cluster packing */
    }
  }
  if (dev < GEMM_MAX_DEVICES) {
    g_dev_clusters[dev] = clusters;
    memcpy(g_skinny_clusters[dev], skinny_clusters, sizeof skinny_clusters);
    g_dev_ready[dev] = 1;
  }
  return MELD_OK;
}

/* Co-resident clusters of S small-M CTAs on the current device (0 = unknown), for benches. */
extern "C" int gemm_skinny_clusters(int S) {
  int dev = 0;
  if (S < 1 || S > SKINNY_MAX_SPLIT || cudaGetDevice(&dev) != cudaSuccess || dev >= GEMM_MAX_DEVICES) return 0;
  if (gemm_device_setup(dev) != MELD_OK) return 0;
  return g_skinny_clusters[dev][S];
}

extern "C" meld_result_t gemm_launch_params(const gemm_params_t *p, int workers,
                                            cudaStream_t stream) {
  char why[256];
  if (gemm_params_check(p, workers, why, sizeof why))
    return meld_error(MELD_ERR_INVALID_ARG, "%s", why);
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  if (p->skinny_mt) {
    attr[0].val.clusterDim.x = (unsigned)p->skinny_split;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.gridDim = dim3((unsigned)workers, 1, 1);
    cfg.blockDim = dim3(SKINNY_THREADS, 1, 1);
    cfg.dynamicSmemBytes = SKINNY_SMEM_BYTES(p->skinny_mt);
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = p->skinny_split > 1 ? 1 : 0;
    MELD_CUDA_CHECK(cudaLaunchKernelEx(&cfg, gemm_skinny_kernel_for(p->skinny_mt, p->fp8), *p));
    return MELD_OK;
  }
  attr[0].val.clusterDim.x = (unsigned)p->cluster_m;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.gridDim = dim3((unsigned)workers, 1, 1);
  cfg.blockDim = dim3(GEMM_THREADS, 1, 1);
  cfg.dynamicSmemBytes = GEMM_SMEM_BYTES;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = p->cluster_m > 1 ? 1 : 0;
  MELD_CUDA_CHECK(cudaLaunchKernelEx(&cfg, gemm_kernel_for(p->b_kn, p->epi_defer, p->bn, p->fp8), *p));
  return MELD_OK;
}

/* Split-K workspaces, one per (owner, device, stream) so concurrent GEMMs on different streams
 * never share partials, and a fused op whose call failed part-way (counters left non-zero: its
 * comm is failed for good) never leaves meld_gemm's or another op's workspace dirty. Grown on demand (cudaFree/cudaMalloc: the first call of a larger shape on a
 * stream synchronizes the device); counters are zeroed on the stream and reset themselves.
 * Under stream capture nothing may be allocated or freed (it would invalidate the capture):
 * then an existing, large enough workspace of the stream is used, or none (grow = 0 fails and
 * the caller plans without split-K / stream-K: same result within rounding). */
#define GEMM_MAX_WS 64
typedef struct {
  int used, owner, dev;
  cudaStream_t stream;
  float *ws;
  size_t ws_bytes;
  float *zws; /* fixup_red: kept all-zero (zeroed at allocation; each launch re-zeroes it) */
  size_t zws_bytes;
  uint32_t *counters;
  size_t counter_words;
} gemm_ws_t;
static gemm_ws_t g_ws[GEMM_MAX_WS];
static pthread_mutex_t g_ws_lock = PTHREAD_MUTEX_INITIALIZER;

static meld_result_t gemm_workspace(int owner, int dev, cudaStream_t stream, size_t bytes, size_t words, int grow,
                                    int zeroed, float **ws, uint32_t **counters) {
  meld_result_t res = MELD_OK;
  pthread_mutex_lock(&g_ws_lock);
  gemm_ws_t *e = NULL;
  for (int i = 0; i < GEMM_MAX_WS && !e; i++)
    if (g_ws[i].used && g_ws[i].owner == owner && g_ws[i].dev == dev && g_ws[i].stream == stream) e = &g_ws[i];
  for (int i = 0; i < GEMM_MAX_WS && !e; i++)
    if (!g_ws[i].used) {
      e = &g_ws[i];
      memset(e, 0, sizeof *e);
      e->used = 1;
      e->owner = owner;
      e->dev = dev;
      e->stream = stream;
    }
  if (!e) {
    res = meld_error(MELD_ERR_OUT_OF_MEMORY, "meld_gemm: more than %d streams use split-K", GEMM_MAX_WS);
    goto out;
  }
  {
    float **buf = zeroed ? &e->zws : &e->ws;
    size_t *have = zeroed ? &e->zws_bytes : &e->ws_bytes;
    if (!grow && (*have < bytes || e->counter_words < words)) {
      res = MELD_ERR_OUT_OF_MEMORY; /* quiet: the caller falls back */
      goto out;
    }
    /* Stream-ordered (cudaFreeAsync / cudaMallocAsync on the entry's own stream): a cudaMalloc
     * is an implicit synchronization between streams, so a kernel of another stream that waits
     * for this thread's next one (a rank of this process on the same GPU) would never end. */
    if (*have < bytes) {
      if (*buf) MELD_CUDA_CHECK_GOTO(cudaFreeAsync(*buf, stream), res, out);
      *buf = NULL;
      *have = 0;
      MELD_CUDA_CHECK_GOTO(cudaMallocAsync((void **)buf, bytes, stream), res, out);
      if (zeroed) MELD_CUDA_CHECK_GOTO(cudaMemsetAsync(*buf, 0, bytes, stream), res, out);
      *have = bytes;
    }
    *ws = *buf;
  }
  if (e->counter_words < words) {
    if (e->counters) MELD_CUDA_CHECK_GOTO(cudaFreeAsync(e->counters, stream), res, out);
    e->counters = NULL;
    e->counter_words = 0;
    MELD_CUDA_CHECK_GOTO(cudaMallocAsync((void **)&e->counters, words * 4, stream), res, out);
    MELD_CUDA_CHECK_GOTO(cudaMemsetAsync(e->counters, 0, words * 4, stream), res, out);
    e->counter_words = words;
  }
  *counters = e->counters;
out:
  pthread_mutex_unlock(&g_ws_lock);
  return res;
}

extern "C" int gemm_stream_workspace(int owner, cudaStream_t stream, size_t bytes, size_t words, float **ws,
                                     uint32_t **counters) {
  int dev = 0;
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaStreamIsCapturing(stream, &cs) != cudaSuccess) {
    (void)cudaGetLastError();
    return 1;
  }
  if (gemm_workspace(owner, dev, stream, bytes, words, cs == cudaStreamCaptureStatusNone, 0, ws, counters) != MELD_OK) {
    (void)cudaGetLastError(); /* a failed allocation: the caller plans without split-K */
    return 1;
  }
  return 0;
}

extern "C" meld_result_t gemm_plan_for(const meld_gemm_args_t *a, const gemm_plan_opts_t *o,
                                       cudaStream_t stream, gemm_params_t *p, int *workers) {
  MELD_CHECK(gemm_args_validate(a));
  if (a->m == 0 || a->n == 0)
    return meld_error(MELD_ERR_INVALID_ARG, "gemm_plan_for: empty problem (m or n is 0)");
  int dev = 0, major = 0, sms = 0;
  MELD_CUDA_CHECK(cudaGetDevice(&dev));
  MELD_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  if (major != 9)
    return meld_error(MELD_ERR_UNSUPPORTED,
                      "meld_gemm: device %d has compute capability %d.x; the engine needs Hopper "
                      "(sm_90a)",
                      dev, major);
  MELD_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  MELD_CHECK(gemm_device_setup(dev));
  gemm_plan_opts_t opts = GEMM_PLAN_OPTS_INIT;
  if (o) opts = *o;
  else {
    opts.skinny = 1; /* meld_gemm's defaults: the small-M kernel where its rule says */
    opts.tile_n = 1; /* and the wide tile where its rule says */
  }
  gemm_plan_env(&opts);
  opts.has_workspace = 1; /* the per-stream workspace below */
  if (opts.sm_count <= 0 || opts.sm_count > sms)
    opts.sm_count = a->sm_count > 0 && a->sm_count < sms ? a->sm_count : sms;
  opts.max_clusters = dev < GEMM_MAX_DEVICES ? g_dev_clusters[dev] : 0;
  if (!opts.skinny_clusters && dev < GEMM_MAX_DEVICES) opts.skinny_clusters = g_skinny_clusters[dev];
  MELD_CHECK(gemm_plan_make(a, &opts, p, workers));
  if (p->split_k > 1 || p->sk_tiles > 0) {
    float *ws = NULL;
    uint32_t *counters = NULL;
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    MELD_CUDA_CHECK(cudaStreamIsCapturing(stream, &cs));
    if (gemm_workspace(GEMM_WS_MELD_GEMM, dev, stream, gemm_plan_workspace_bytes(p), gemm_plan_counter_words(p),
                       cs == cudaStreamCaptureStatusNone, p->fixup_red, &ws, &counters) != MELD_OK) {
      opts.split_k = 1; /* no workspace: run without split-K / stream-K rather than fail */
      opts.stream_k = 1;
      opts.fixup_red = 1;
      MELD_CHECK(gemm_plan_make(a, &opts, p, workers));
    } else {
      p->workspace = ws;
      p->counters = counters;
    }
  }
  return MELD_OK;
}

extern "C" meld_result_t gemm_launch(const meld_gemm_args_t *a, const gemm_plan_opts_t *o,
                                     cudaStream_t stream) {
  MELD_CHECK(gemm_args_validate(a));
  if (a->m == 0 || a->n == 0) return MELD_OK;
  gemm_params_t p;
  int workers = 0;
  MELD_CHECK(gemm_plan_for(a, o, stream, &p, &workers));
  return gemm_launch_params(&p, workers, stream);
}

extern "C" meld_result_t meld_gemm(const meld_gemm_args_t *args, cudaStream_t stream) {
  meld_error_clear();
  return gemm_launch(args, NULL, stream);
}

/* ---- FP8 -------------------------------------------------------------------------------- */

__device__ const float g_fp8_one = 1.0f; /* a NULL scale */

static int misaligned(const void *ptr, uintptr_t to) { return ((uintptr_t)ptr & (to - 1)) != 0; }

extern "C" meld_result_t gemm_fp8_scales(const float *scale_a, const float *scale_b, int scaling, gemm_fp8_t *f8) {
  const float *one = NULL;
  MELD_CUDA_CHECK(cudaGetSymbolAddress((void **)&one, g_fp8_one));
  f8->scale_a = scale_a ? scale_a : one;
  f8->scale_b = scale_b ? scale_b : one;
  f8->rows = (scale_a ? scaling & MELD_FP8_ROWWISE_A : 0) | (scale_b ? scaling & MELD_FP8_ROWWISE_B : 0);
  f8->shard_rows = 0;
  return MELD_OK;
}

extern "C" meld_result_t gemm_fp8_check_k(const char *fn, int64_t k) {
  if (k < 1 || k % 16)
    return meld_error(MELD_ERR_INVALID_ARG,
                      "%s: k %lld is not a positive multiple of 16 (fp8 rows are read in 16-byte units; pad K with "
                      "zeros)",
                      fn, (long long)k);
  return MELD_OK;
}

extern "C" meld_result_t gemm_fp8_validate(const char *fn, const void *a, int64_t lda, const void *b, int64_t ldb,
                                           int64_t k, const float *scale_a, const float *scale_b, int scaling) {
  MELD_CHECK(gemm_fp8_check_k(fn, k));
  if (scaling < MELD_FP8_PER_TENSOR || scaling > MELD_FP8_ROWWISE)
    return meld_error(MELD_ERR_INVALID_ARG, "%s: scaling %d is not a meld_fp8_scaling_t (0 per tensor .. 3 rowwise)",
                      fn, scaling);
  if (lda < k || lda % 16 || ldb < k || ldb % 16)
    return meld_error(MELD_ERR_INVALID_ARG, "%s: lda %lld and ldb %lld must be >= k %lld and multiples of 16", fn,
                      (long long)lda, (long long)ldb, (long long)k);
  if (misaligned(a, 16) || misaligned(b, 16))
    return meld_error(MELD_ERR_INVALID_ARG, "%s: the fp8 operands must be 16-byte aligned", fn);
  if (misaligned(scale_a, 4) || misaligned(scale_b, 4))
    return meld_error(MELD_ERR_INVALID_ARG, "%s: scale_a and scale_b must be 4-byte aligned", fn);
  return MELD_OK;
}

extern "C" meld_result_t gemm_launch_fp8_tile(const meld_gemm_args_t *v, const gemm_fp8_t *f8, int tile_n,
                                              cudaStream_t stream) {
  if (v->m == 0 || v->n == 0) return MELD_OK;
  gemm_plan_opts_t o = GEMM_PLAN_OPTS_INIT;
  o.skinny = 1; /* meld_gemm's defaults: the small-M kernel and the wide tile where their rules say */
  o.tile_n = tile_n;
  gemm_params_t p;
  int workers = 0;
  MELD_CHECK(gemm_plan_for(v, &o, stream, &p, &workers));
  p.fp8 = 1;
  p.fp8_rows = f8->rows | (gemm_plan_fp8_late() ? 8 : 0);
  p.scale_a = f8->scale_a;
  p.scale_b = f8->scale_b;
  return gemm_launch_params(&p, workers, stream);
}

extern "C" meld_result_t gemm_launch_fp8(const meld_gemm_args_t *v, const gemm_fp8_t *f8, cudaStream_t stream) {
  return gemm_launch_fp8_tile(v, f8, 1, stream);
}

extern "C" meld_result_t meld_gemm_fp8(const meld_gemm_fp8_args_t *a, cudaStream_t stream) {
  return gemm_fp8_tile(a, 1, stream);
}

extern "C" meld_result_t gemm_fp8_tile(const meld_gemm_fp8_args_t *a, int tile_n, cudaStream_t stream) {
  meld_error_clear();
  const char *fn = "meld_gemm_fp8";
  if (!a) return meld_error(MELD_ERR_INVALID_ARG, "%s: args is NULL", fn);
  if (!a->a || !a->b || !a->c)
    return meld_error(MELD_ERR_INVALID_ARG, "%s: %s is NULL", fn, !a->a ? "a" : !a->b ? "b" : "c");
  if (a->m < 0 || a->n < 0 || a->k < 1 || a->m > INT32_MAX || a->n > INT32_MAX || a->k > INT32_MAX)
    return meld_error(MELD_ERR_INVALID_ARG, "%s: m %lld, n %lld, k %lld: need m, n >= 0 and k >= 1 (each < 2^31)", fn,
                      (long long)a->m, (long long)a->n, (long long)a->k);
  MELD_CHECK(gemm_fp8_validate(fn, a->a, a->lda, a->b, a->ldb, a->k, a->scale_a, a->scale_b, (int)a->scaling));
  if (a->ldc < a->n || a->ldc % 8)
    return meld_error(MELD_ERR_INVALID_ARG, "%s: ldc %lld must be >= n %lld and a multiple of 8", fn,
                      (long long)a->ldc, (long long)a->n);
  if (misaligned(a->c, 16)) return meld_error(MELD_ERR_INVALID_ARG, "%s: c must be 16-byte aligned", fn);
  if (a->m == 0 || a->n == 0) return MELD_OK;
  /* The engine's view: bf16 matrices of half the K, the same bytes (gemm.cuh gemm_params_t.fp8). */
  meld_gemm_args_t v;
  memset(&v, 0, sizeof v);
  v.a = a->a, v.lda = a->lda / 2, v.b = a->b, v.ldb = a->ldb / 2, v.b_layout = MELD_B_NK;
  v.c = a->c, v.ldc = a->ldc, v.m = a->m, v.n = a->n, v.k = a->k / 2, v.sm_count = a->sm_count;
  gemm_fp8_t f8;
  MELD_CHECK(gemm_fp8_scales(a->scale_a, a->scale_b, (int)a->scaling, &f8));
  return gemm_launch_fp8_tile(&v, &f8, tile_n, stream);
}
