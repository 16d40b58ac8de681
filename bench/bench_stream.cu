/* bench_stream.cu — how fast the small-M GEMM's weight stream can be read: an N x K bf16 matrix
 * (B of C = A B^T, row-major [N, K]) read once from HBM with nothing computed, by the access
 * patterns a decode GEMM can use, at several CTA counts. It is the floor of
 * src/device/gemm_skinny.cuh (session 3: its B stream runs at 3.0-3.5 TB/s).
 *
 *   tma2d  the small-M kernel's pattern: boxes of 64 (K) x R rows (128-byte swizzle), CTAs =
 *          ceil(N / R) column blocks x S k-splits, each streaming its block's k-range through a
 *          ring of `ring` bytes (one producer thread, one consumer thread releasing stages)
 *   tma3d  the same but each box takes c adjacent k-blocks of its rows (a 3-D view of B:
 *          {64, N, K / 64} with strides {2K, 128} bytes): c x 128 contiguous bytes per row per request
 *   bulk   cp.async.bulk of contiguous pieces (the ideal order for DRAM): each CTA one range
 *   ldg    16-byte loads by every thread of the grid, grid-strided (no TMA)
 *
 * Four copies of the matrix are read in turn so that L2 holds none of it. Times are the median
 * of 20 launches (CUDA events around each); TB/s = N K 2 / time.
 * Usage: bench_stream [--shape N,K]... [--json FILE]   (prints a table) */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "device/ptx.cuh"
#include "device/ptx_async.cuh"


enum { P_TMA2D, P_TMA3D, P_BULK, P_LDG };
static const char *const g_pat[] = {"tma2d", "tma3d", "bulk", "ldg"};
#define COPIES 4
#define THREADS 288 /* a producer warp + up to 8 consumer warps (the small-M kernel's shape) */
#define TIMED 20
#define WARMUP 3

__device__ __forceinline__ void tma_load_3d(uint32_t dst, const void *map, uint32_t bar, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5}], [%2];" ::"r"(dst),
      "l"(map), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

struct stream_args {
  const uint8_t *base; /* the matrix (bulk) */
  int64_t bytes;       /* N K 2 */
  int n, kblocks;      /* rows, K / 64 */
  int rows, chunks, S; /* box rows, k-blocks per box, k-splits */
  int stages;
  uint32_t box;  /* bytes per request */
  int cwarps;    /* consumer warps that wait for each stage and release it (1 or 8) */
};

__global__ void __launch_bounds__(THREADS, 1)
    stream_kernel(const __grid_constant__ CUtensorMap map, const __grid_constant__ stream_args a, int pat,
                  unsigned long long *sink) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  const uint32_t raw = smem_addr(smem_raw);
  const uint32_t sbase = raw + ((1024 - (raw & 1023)) & 1023);
  const uint32_t full0 = sbase + (uint32_t)a.stages * a.box, empty0 = full0 + 8 * a.stages;
  int nsteps;
  int64_t b0 = 0;
  int row0 = 0, kb0 = 0;
  if (pat == P_BULK) {
    const int64_t per = (a.bytes / gridDim.x + a.box - 1) / a.box * a.box;
    b0 = per * blockIdx.x;
    const int64_t b1 = b0 + per < a.bytes ? b0 + per : a.bytes;
    nsteps = b1 > b0 ? (int)((b1 - b0 + a.box - 1) / a.box) : 0;
  } else {
    const int blk = (int)(blockIdx.x / (unsigned)a.S), s = (int)(blockIdx.x % (unsigned)a.S);
    const int steps = a.kblocks / a.chunks;
    const int s0 = (int)((int64_t)steps * s / a.S), s1 = (int)((int64_t)steps * (s + 1) / a.S);
    row0 = blk * a.rows;
    kb0 = s0 * a.chunks;
    nsteps = s1 - s0;
  }
  if (threadIdx.x == 0) {
    for (int i = 0; i < a.stages; ++i) {
      mbarrier_init_cta(full0 + 8 * i, 1);
      mbarrier_init_cta(empty0 + 8 * i, (uint32_t)a.cwarps);
    }
    fence_mbar_init();
    prefetch_tensormap(&map);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int i = 0; i < nsteps; ++i) {
      const int st = i % a.stages;
      if (i >= a.stages) mbar_wait(empty0 + 8 * st, (uint32_t)((i / a.stages - 1) & 1));
      const uint32_t full = full0 + 8 * st, dst = sbase + (uint32_t)st * a.box;
      if (pat == P_BULK) {
        const int64_t off = b0 + (int64_t)i * a.box;
        const uint32_t len = (uint32_t)(a.bytes - off < a.box ? a.bytes - off : a.box);
        mbarrier_arrive_expect_tx_cta(full, len);
        cp_async_bulk_g2s(dst, a.base + off, len, full);
      } else {
        mbarrier_arrive_expect_tx_cta(full, a.box);
        if (pat == P_TMA2D) tma_load_2d(dst, &map, full, (kb0 + i) * 64, row0);
        else tma_load_3d(dst, &map, full, 0, row0, kb0 + i * a.chunks);
      }
    }
  } else if (threadIdx.x >= 32 && threadIdx.x < 32u * (1 + a.cwarps)) {
    unsigned long long acc = 0;
    for (int i = 0; i < nsteps; ++i) {
      const int st = i % a.stages;
      mbar_wait(full0 + 8 * st, (uint32_t)((i / a.stages) & 1));
      uint32_t v;
      asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(sbase + (uint32_t)st * a.box) : "memory");
      acc += v;
      __syncwarp();
      if ((threadIdx.x & 31) == 0) mbar_arrive(empty0 + 8 * st);
    }
    if (acc == 0x123456789ull) *sink = acc; /* keeps the reads */
  }
}

__global__ void ldg_kernel(const uint4 *p, int64_t n16, unsigned long long *sink) {
  uint32_t x = 0;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n16; i += 4 * stride) {
    uint4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = __ldcs(p + i + u * stride);
#pragma unroll
    for (int u = 0; u < 4; ++u) x ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n16; i += stride) {
    const uint4 v = __ldcs(p + i);
    x ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (x == 0x9e3779b9u) *sink = x;
}

typedef CUresult (*encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                              const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                              CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
static encode_fn g_encode;

/* 0 on success; the map of copy `base` for the pattern. */
static int make_map(CUtensorMap *m, void *base, int pat, int n, int k, int rows, int chunks, CUtensorMapL2promotion l2) {
  if (pat == P_TMA2D) {
    cuuint64_t dims[2] = {(cuuint64_t)k, (cuuint64_t)n}, str[1] = {(cuuint64_t)k * 2};
    cuuint32_t box[2] = {64, (cuuint32_t)rows}, es[2] = {1, 1};
    return g_encode(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, base, dims, str, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                    CU_TENSOR_MAP_SWIZZLE_128B, l2, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS;
  }
  if (pat == P_TMA3D) {
    cuuint64_t dims[3] = {64, (cuuint64_t)n, (cuuint64_t)k / 64}, str[2] = {(cuuint64_t)k * 2, 128};
    cuuint32_t box[3] = {64, (cuuint32_t)rows, (cuuint32_t)chunks}, es[3] = {1, 1, 1};
    return g_encode(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, base, dims, str, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                    CU_TENSOR_MAP_SWIZZLE_128B, l2, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS;
  }
  memset(m, 0, sizeof *m);
  return 0;
}


typedef struct {
  int pat, rows, chunks, S, ring_kb, ctas, l2; /* ctas: bulk / ldg only; l2: 0 none, 1 128B, 2 256B */
  int cwarps, cluster; /* consumer warps (0 = 1); cluster: launched in clusters of this many CTAs
                          (0: none; S: as the kernel; S / 2: two clusters per column block) */
} conf_t;

int main(int argc, char **argv) {
  int shapes[16][2], ns = 0;
  const char *json = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--shape") && i + 1 < argc && ns < 16 &&
        sscanf(argv[i + 1], "%d,%d", &shapes[ns][0], &shapes[ns][1]) == 2) {
      ns++;
      i++;
    } else if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
    else {
      fprintf(stderr, "usage: %s [--shape N,K]... [--json FILE]\n", argv[0]);
      return 2;
    }
  }
  if (!ns) {
    const int d[4][2] = {{4096, 7168}, {8192, 8192}, {8192, 4096}, {4096, 14336}};
    memcpy(shapes, d, sizeof d);
    ns = 4;
  }
  void *fn = NULL;
  cudaDriverEntryPointQueryResult q;
  CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q));
  if (q != cudaDriverEntryPointSuccess) { fprintf(stderr, "no cuTensorMapEncodeTiled\n"); return 1; }
  g_encode = (encode_fn)fn;
  CK(cudaFuncSetAttribute(stream_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  bench_env_t env;
  bench_env(&env, 0);
  const int sms = prop.multiProcessorCount;
  int64_t maxb = 0;
  for (int s = 0; s < ns; s++)
    if ((int64_t)shapes[s][0] * shapes[s][1] * 2 > maxb) maxb = (int64_t)shapes[s][0] * shapes[s][1] * 2;
  uint8_t *buf[COPIES];
  for (int c = 0; c < COPIES; c++) {
    CK(cudaMalloc(&buf[c], maxb));
    CK(cudaMemset(buf[c], 0x3c + c, maxb));
  }
  unsigned long long *sink;
  CK(cudaMalloc(&sink, 8));
  FILE *jf = json ? fopen(json, "a") : NULL;
  printf("# bench_stream on %s (%d SMs): N x K bf16 read once, median of %d launches, %d copies in turn\n",
         prop.name, sms, TIMED, COPIES);
  printf("%-12s %-6s %4s %3s %2s %5s %4s %3s %2s %2s %8s %7s\n", "N x K", "pat", "rows", "c", "S", "ctas", "ring", "l2",
         "cw", "cl", "us", "TB/s");
  const conf_t confs[] = {
      /* the small-M kernel's pattern at its cluster sizes, and more CTAs */
      {P_TMA2D, 128, 1, 1, 192, 0, 2, 1, 0}, {P_TMA2D, 128, 1, 2, 192, 0, 2, 1, 0}, {P_TMA2D, 128, 1, 3, 192, 0, 2, 1, 0},
      {P_TMA2D, 128, 1, 4, 192, 0, 2, 1, 0}, {P_TMA2D, 128, 1, 8, 192, 0, 2, 1, 0},
      /* bytes in flight per CTA */
      {P_TMA2D, 128, 1, 3, 48, 0, 2, 1, 0}, {P_TMA2D, 128, 1, 3, 96, 0, 2, 1, 0},
      /* L2 promotion */
      {P_TMA2D, 128, 1, 3, 192, 0, 0, 1, 0}, {P_TMA2D, 128, 1, 3, 192, 0, 1, 1, 0},
      /* box height */
      {P_TMA2D, 64, 1, 1, 192, 0, 2, 1, 0}, {P_TMA2D, 64, 1, 2, 192, 0, 2, 1, 0}, {P_TMA2D, 256, 1, 2, 192, 0, 2, 1, 0},
      {P_TMA2D, 256, 1, 4, 192, 0, 2, 1, 0},
      /* longer runs per row per request */
      {P_TMA3D, 128, 2, 1, 192, 0, 2, 1, 0}, {P_TMA3D, 128, 2, 2, 192, 0, 2, 1, 0}, {P_TMA3D, 128, 2, 3, 192, 0, 2, 1, 0},
      {P_TMA3D, 128, 2, 4, 192, 0, 2, 1, 0}, {P_TMA3D, 128, 4, 3, 192, 0, 2, 1, 0}, {P_TMA3D, 128, 4, 4, 192, 0, 2, 1, 0},
      {P_TMA3D, 64, 4, 2, 192, 0, 2, 1, 0},
      /* contiguous */
      {P_BULK, 0, 0, 0, 192, 64, 0, 1, 0}, {P_BULK, 0, 0, 0, 192, 96, 0, 1, 0}, {P_BULK, 0, 0, 0, 192, 128, 0, 1, 0},
      {P_BULK, 0, 0, 0, 192, -1, 0, 1, 0}, {P_BULK, 0, 0, 0, 96, -1, 0, 1, 0},
      {P_LDG, 0, 0, 0, 0, -1, 0, 1, 0}, {P_LDG, 0, 0, 0, 0, -4, 0, 1, 0},
      /* the kernel's 8 consumer warps polling each stage, and its cluster launch (CTAs of a
       * cluster share a GPC) */
      {P_TMA2D, 128, 1, 2, 192, 0, 2, 8, 0}, {P_TMA2D, 128, 1, 2, 192, 0, 2, 1, 2}, {P_TMA2D, 128, 1, 2, 192, 0, 2, 8, 2},
      {P_TMA2D, 128, 1, 3, 192, 0, 2, 8, 0}, {P_TMA2D, 128, 1, 3, 192, 0, 2, 1, 3}, {P_TMA2D, 128, 1, 3, 192, 0, 2, 8, 3},
      {P_TMA2D, 128, 1, 4, 192, 0, 2, 8, 0}, {P_TMA2D, 128, 1, 4, 192, 0, 2, 1, 4},
      /* a k-split of 4 as two clusters of 2 per column block (128 CTAs at N 4096, all resident) */
      {P_TMA2D, 128, 1, 4, 192, 0, 2, 8, 2},
  };
  const int nconf = (int)(sizeof confs / sizeof confs[0]);
  const CUtensorMapL2promotion l2s[3] = {CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                         CU_TENSOR_MAP_L2_PROMOTION_L2_256B};
  cudaEvent_t ev[2 * TIMED];
  for (int i = 0; i < 2 * TIMED; i++) CK(cudaEventCreate(&ev[i]));
  for (int s = 0; s < ns; s++) {
    const int n = shapes[s][0], k = shapes[s][1];
    const int64_t bytes = (int64_t)n * k * 2;
    for (int ci = 0; ci < nconf; ci++) {
      const conf_t c = confs[ci];
      stream_args a;
      memset(&a, 0, sizeof a);
      a.bytes = bytes;
      a.n = n;
      a.kblocks = k / 64;
      a.rows = c.rows;
      a.chunks = c.chunks;
      a.S = c.S;
      a.cwarps = c.cwarps > 0 ? c.cwarps : 1;
      int ctas;
      if (c.pat == P_BULK || c.pat == P_LDG) {
        a.box = 16384;
        ctas = c.ctas < 0 ? -c.ctas * sms : c.ctas;
      } else {
        a.box = (uint32_t)c.rows * 128u * (uint32_t)c.chunks;
        if (a.kblocks % c.chunks) continue;
        ctas = (n + c.rows - 1) / c.rows * c.S;
      }
      a.stages = c.pat == P_LDG ? 0 : (int)((uint32_t)c.ring_kb * 1024u / a.box);
      if (c.pat != P_LDG && a.stages < 2) continue;
      CUtensorMap maps[COPIES];
      int bad = 0;
      for (int cp = 0; cp < COPIES; cp++) bad |= make_map(&maps[cp], buf[cp], c.pat, n, k, c.rows, c.chunks, l2s[c.l2]);
      if (bad) {
        printf("%5dx%-6d %-6s %4d %3d %2d  (tensor map refused)\n", n, k, g_pat[c.pat], c.rows, c.chunks, c.S);
        continue;
      }
      const size_t smem = (size_t)a.stages * a.box + 16 * (size_t)a.stages + 1024;
      float t[TIMED];
      for (int it = 0; it < WARMUP + TIMED; it++) {
        const int cp = it % COPIES;
        a.base = buf[cp];
        if (it >= WARMUP) CK(cudaEventRecord(ev[2 * (it - WARMUP)], 0));
        if (c.pat == P_LDG) ldg_kernel<<<ctas, 512>>>((const uint4 *)buf[cp], bytes / 16, sink);
        else if (c.cluster > 1) {
          cudaLaunchConfig_t cfg = {};
          cudaLaunchAttribute attr[1];
          attr[0].id = cudaLaunchAttributeClusterDimension;
          attr[0].val.clusterDim.x = (unsigned)c.cluster;
          attr[0].val.clusterDim.y = attr[0].val.clusterDim.z = 1;
          cfg.gridDim = dim3((unsigned)ctas);
          cfg.blockDim = dim3(THREADS);
          cfg.dynamicSmemBytes = smem;
          cfg.attrs = attr;
          cfg.numAttrs = 1;
          CK(cudaLaunchKernelEx(&cfg, stream_kernel, maps[cp], a, c.pat, sink));
        } else stream_kernel<<<ctas, THREADS, smem>>>(maps[cp], a, c.pat, sink);
        if (it >= WARMUP) CK(cudaEventRecord(ev[2 * (it - WARMUP) + 1], 0));
      }
      CK(cudaGetLastError());
      CK(cudaDeviceSynchronize());
      for (int i = 0; i < TIMED; i++) CK(cudaEventElapsedTime(&t[i], ev[2 * i], ev[2 * i + 1]));
      const float us = 1000.f * bench_median(t, TIMED); /* (sorts t) */
      const double tbs = (double)bytes / (us * 1e-6) / 1e12;
      printf("%5dx%-6d %-6s %4d %3d %2d %5d %4d %3d %2d %2d %8.2f %7.3f\n", n, k, g_pat[c.pat], c.rows, c.chunks, c.S,
             ctas, c.ring_kb, c.l2, a.cwarps, c.cluster, us, tbs);
      fflush(stdout);
      if (jf)
        fprintf(jf,
                "{\"bench\":\"stream\",\"gpu\":\"%s\",\"n\":%d,\"k\":%d,\"pattern\":\"%s\",\"rows\":%d,\"chunks\":%d,"
                "\"split\":%d,\"ctas\":%d,\"ring_kb\":%d,\"l2_promotion\":%d,\"consumer_warps\":%d,\"cluster\":%d,\"us_median\":%.3f,\"tb_s\":%.4f,"
                "\"us_min\":%.3f,\"us_max\":%.3f,\"driver\":\"%s\",\"cuda\":\"%s\",\"date\":\"%s\",\"commit\":\"%s\"}\n",
                env.gpu, n, k, g_pat[c.pat], c.rows, c.chunks, c.S, ctas, c.ring_kb, c.l2, a.cwarps, c.cluster, us, tbs, 1000.f * t[0],
                1000.f * t[TIMED - 1], env.driver, env.cuda, env.date, env.commit);
    }
  }
  if (jf) fclose(jf);
  return 0;
}
