/* gemm_skinny.cuh — the swapped GEMM for small M (decode: M = 1..128) and for problems with
 * fewer 128x256 tiles than SMs, for meld_gemm.
 *
 *   C[M,N] = A[M,K] * B[N,K]^T   computed as   C^T = B * A^T
 *
 * At decode sizes the work is reading B (N x K bf16) once from HBM; the engine's 128x256 tile
 * would spend 128 rows of wgmma on M <= 128 rows and re-read A for every 256 columns. Here B's
 * rows are wgmma's M side (128 per CTA: two consumer warpgroups of m64) and A's rows, padded
 * to MT in {16, 32, 64, 128}, are wgmma's N side, so the tensor work is what M needs and each
 * stage is 16 KB of B plus MT x 128 B of A. Larger M runs as ceil(M / MT) m-blocks of MT in
 * {128, 160, 192, 256} rows: the tile is then 128 columns of C by MT rows, a width the engine
 * does not have (e.g. 2048 x 1280: 80 engine tiles for 132 SMs, 130 tiles of 128 x 160).
 *
 * Shape of one CTA (288 threads, one CTA per SM, ~195-200 KB of shared memory):
 *   warps 0..7  two consumer warpgroups: wgmma m64nMTk16 over the CTA's 128 rows of B;
 *   warp 8      producer: one thread issues TMA loads (B box 64 x 128, A box 64 x MT, 128-byte
 *               swizzle; rows past M or N and columns past K arrive as zeros) into a ring of
 *               STAGES stages (full / empty mbarriers).
 * Split-K without a workspace: a cluster of S = skinny_split CTAs (blockIdx.x = (m-block x
 * column blocks + column block) * S + s) shares one tile of C; CTA s runs k-blocks [s*KB/S, (s+1)*KB/S). Each CTA writes
 * its fp32 partial, transposed, into its own shared memory ([MT][132] floats, over the spent
 * ring), the cluster synchronizes, and CTA s sums rows s, s + S, ... of all S partials through
 * distributed shared memory (ld.shared::cluster), rounds once to bf16 and stores 8-byte
 * pieces of C. A second cluster barrier keeps every CTA's partial alive until read.
 *
 * Nothing waits on another kernel or GPU: the only waits are the ring's mbarriers (whose
 * producer is this CTA) and the cluster barriers (CTAs launched together), so no deadline. */
#ifndef MELD_DEVICE_GEMM_SKINNY_CUH
#define MELD_DEVICE_GEMM_SKINNY_CUH

#include "device/gemm.cuh"


#define SKINNY_BN 128 /* rows of B (columns of C) per CTA */
#define SKINNY_THREADS 288
#define SKINNY_B_BYTES (SKINNY_BN * GEMM_BK * 2) /* 16 KB */
#define SKINNY_RED_PITCH 132                     /* floats per row of the partial (bank spread) */
#define SKINNY_MAX_SPLIT 8                       /* portable cluster size */

/* The padded m-block heights compiled (one kernel each; below 128 only as the single m-block),
 * shared by the planner, the legality check and the launcher. */
#define SKINNY_NHEIGHTS 7
static const int skinny_heights[SKINNY_NHEIGHTS] = {16, 32, 64, 128, 160, 192, 256};
#define SKINNY_HEIGHTS_TEXT "16, 32, 64, 128, 160, 192 or 256"
static inline int skinny_height_ok(int mt) {
  for (int i = 0; i < SKINNY_NHEIGHTS; i++)
    if (skinny_heights[i] == mt) return 1;
  return 0;
}

/* Stages per padded row count: ~180-205 KB of ring (at most 11; at least what the partial
 * [mt][SKINNY_RED_PITCH] floats needs, as it reuses the ring). Shared with the planner.
 * SKINNY_RING_BYTES may be set at build time for experiments. */
#ifndef SKINNY_RING_BYTES
#define SKINNY_RING_BYTES 204800
#endif
#define SKINNY_STAGE_BYTES(mt) (SKINNY_B_BYTES + (mt) * GEMM_BK * 2)
#define SKINNY_STAGES_RING(mt) (SKINNY_RING_BYTES / SKINNY_STAGE_BYTES(mt))
#define SKINNY_STAGES_RED(mt) (((mt) * SKINNY_RED_PITCH * 4 + SKINNY_STAGE_BYTES(mt) - 1) / SKINNY_STAGE_BYTES(mt))
#define SKINNY_STAGES_MIN(mt) (SKINNY_STAGES_RED(mt) > 2 ? SKINNY_STAGES_RED(mt) : 2)
#define SKINNY_STAGES(mt)                                                                                       \
  (SKINNY_STAGES_RING(mt) > 11 ? 11 : SKINNY_STAGES_RING(mt) < SKINNY_STAGES_MIN(mt) ? SKINNY_STAGES_MIN(mt) \
                                                                                       : SKINNY_STAGES_RING(mt))
#define SKINNY_SMEM_BYTES(mt) (SKINNY_STAGES(mt) * SKINNY_STAGE_BYTES(mt) + 16 * SKINNY_STAGES(mt) + 1024)

#ifdef __CUDACC__

/* f(skinny_height_t<MT>{}) for the compiled height mt (unknown: 256): how a launcher picks its
 * kernel template's instance, e.g. [](auto h) { return my_kernel<h.value>; }. */
template <int MT>
struct skinny_height_t {
  static constexpr int value = MT;
};
template <class F>
static constexpr auto skinny_for_height(int mt, F f) {
  switch (mt) {
    case 16: return f(skinny_height_t<16>{});
    case 32: return f(skinny_height_t<32>{});
    case 64: return f(skinny_height_t<64>{});
    case 128: return f(skinny_height_t<128>{});
    case 160: return f(skinny_height_t<160>{});
    case 192: return f(skinny_height_t<192>{});
    default: return f(skinny_height_t<256>{});
  }
}

static_assert(skinny_for_height(16, [](auto h) { return h.value; }) == 16 &&
                  skinny_for_height(32, [](auto h) { return h.value; }) == 32 &&
                  skinny_for_height(64, [](auto h) { return h.value; }) == 64 &&
                  skinny_for_height(128, [](auto h) { return h.value; }) == 128 &&
                  skinny_for_height(160, [](auto h) { return h.value; }) == 160 &&
                  skinny_for_height(192, [](auto h) { return h.value; }) == 192 &&
                  skinny_for_height(256, [](auto h) { return h.value; }) == 256,
              "skinny_for_height: every compiled height maps to itself");

/* What a kernel around gemm_skinny_run adds (the stand-alone kernel: nothing). Its block may
 * be larger than SKINNY_THREADS: warps 9.. are side warps, which run side() while the GEMM runs
 * and take no part in it. kPdl: the producer loads the first stages' B (weights, not written
 * by the kernel before) before griddepcontrol.wait and A after it, for a launch with
 * programmatic stream serialization. store_ok(): whether the block's rows may be stored (read
 * after the first cluster barrier, so a side warp can decide before it). ncopies() / copy(i):
 * more buffers laid out like p->c that get the same rows (e.g. peers' memory). finish(): every
 * thread, after the block's rows are stored and this CTA's cluster arrival (its partial is no
 * longer read), before the cluster wait that ends the kernel's use of shared memory. */
struct gemm_skinny_plain {
  static constexpr bool kPdl = false;
  __device__ __forceinline__ void side(int) const {}
  __device__ __forceinline__ bool store_ok() const { return true; } /* (after the first cluster barrier) */
  __device__ __forceinline__ int ncopies() const { return 0; }
  __device__ __forceinline__ void *copy(int) const { return nullptr; }
  __device__ __forceinline__ void finish(int, int, int, int) const {}
};

/* F8: p->fp8 (meld_gemm_fp8: e4m3 A and B seen as bf16 of half the K; gemm.cuh gemm_params_t):
 * the e4m3 wgmma, and the cluster's sum times the scales. */
template <int MT, class Tail = gemm_skinny_plain, bool F8 = false>
__device__ __forceinline__ void gemm_skinny_run(const gemm_params_t *p, uint8_t *smem_raw, const Tail &tail = Tail{}) {
  constexpr int STAGES = SKINNY_STAGES(MT);
  constexpr uint32_t STAGE = SKINNY_STAGE_BYTES(MT);
  static_assert(MT * SKINNY_RED_PITCH * 4 <= STAGES * STAGE, "the partial must fit in the ring");
  const uint32_t raw = smem_addr(smem_raw);
  const uint32_t sbase = raw + ((1024 - (raw & 1023)) & 1023);
  const uint32_t full0 = sbase + STAGES * STAGE, empty0 = full0 + 8 * STAGES;
  const int S = p->skinny_split;
  const int s = (int)(blockIdx.x % (unsigned)S); /* = %cluster_ctarank for a (S,1,1) cluster */
  const int nblk = (p->n + SKINNY_BN - 1) / SKINNY_BN;
  const int tile = (int)(blockIdx.x / (unsigned)S), blk = tile % nblk, mb = tile / nblk;
  const int row0 = mb * MT; /* first row of A / C of this tile */
  const int kb0 = (int)((int64_t)p->k_blocks * s / S), kb1 = (int)((int64_t)p->k_blocks * (s + 1) / S);
  const int nkb = kb1 - kb0;
  const int warp = (int)(threadIdx.x >> 5), lane = (int)(threadIdx.x & 31);
  if (threadIdx.x == 0) {
    for (int i = 0; i < STAGES; ++i) {
      mbarrier_init_cta(full0 + 8 * i, 1);
      mbarrier_init_cta(empty0 + 8 * i, 8); /* one arrival per consumer warp */
    }
    fence_mbar_init();
    fence_proxy_async_smem_cta();
    prefetch_tensormap(&p->map_a);
    prefetch_tensormap(&p->map_b);
  }
  __syncthreads();
  /* FP8 at heights <= 128: the k-steps alternate between two accumulators, two independent
   * wgmma chains (a k32 e4m3 step of small N takes about as long as bf16's k16 one, so one
   * chain of 4 a k-block held fp8 at bf16's k-block rate: 16 x 8192 x 8192 in 35.6 us, the
   * same as the engine's; session 39). Summed after the mainloop. */
  constexpr bool DUAL = F8 && MT <= 128;
  float acc[MT / 2], acc2[DUAL ? MT / 2 : 1];
  if (warp == 8) {
    if (lane == 0) {
      const uint64_t pol_b = l2_policy_evict_first(), pol_a = l2_policy_evict_last();
      const auto load_a = [&](int i) {
        const uint32_t full = full0 + 8 * (i % STAGES), dst = sbase + (i % STAGES) * STAGE + SKINNY_B_BYTES;
        if (p->skinny_hint & 2) tma_load_2d_hint(dst, &p->map_a, full, (kb0 + i) * GEMM_BK, row0, pol_a);
        else tma_load_2d(dst, &p->map_a, full, (kb0 + i) * GEMM_BK, row0);
      };
      /* kPdl: the first `pre` stages' B before the wait for the previous grid, their A after */
      const int pre = Tail::kPdl ? (nkb < STAGES ? nkb : STAGES) : 0;
      for (int i = 0; i <= nkb; ++i) {
        if (Tail::kPdl && i == pre) {
          asm volatile("griddepcontrol.wait;" ::: "memory");
          for (int j = 0; j < pre; ++j) load_a(j);
        }
        if (i == nkb) break;
        const int st = i % STAGES;
        if (i >= STAGES) mbar_wait(empty0 + 8 * st, (uint32_t)((i / STAGES - 1) & 1));
        const uint32_t full = full0 + 8 * st, dst = sbase + st * STAGE;
        const int k0 = (kb0 + i) * GEMM_BK;
        mbarrier_arrive_expect_tx_cta(full, STAGE);
        if (p->skinny_hint & 1) tma_load_2d_hint(dst, &p->map_b, full, k0, blk * SKINNY_BN, pol_b);
        else tma_load_2d(dst, &p->map_b, full, k0, blk * SKINNY_BN);
        if (i >= pre) load_a(i);
      }
    }
    __syncwarp();
  } else if (warp > 8) {
    tail.side(warp);
  } else {
    const int g = warp >> 2; /* consumer warpgroup: rows [64 g, 64 g + 64) of the CTA's B rows */
#pragma unroll
    for (int i = 0; i < MT / 2; ++i) acc[i] = 0.f;
    if constexpr (DUAL) {
#pragma unroll
      for (int i = 0; i < MT / 2; ++i) acc2[i] = 0.f;
    }
    int prev = 0;
    for (int i = 0; i < nkb; ++i) {
      const int st = i % STAGES;
      mbar_wait(full0 + 8 * st, (uint32_t)((i / STAGES) & 1));
      const uint32_t b = sbase + st * STAGE + g * 8192, a = sbase + st * STAGE + SKINNY_B_BYTES;
      wgmma_fence();
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (DUAL) /* (each chain's first step overwrites: k-block 0, j 0 and 1) */
          wgmma_m64nNk32_e4m3_ss<MT>((j & 1) ? acc2 : acc, wgmma_desc_sw128(b + 32 * j, 16, 1024),
                                     wgmma_desc_sw128(a + 32 * j, 16, 1024), i | (j >> 1));
        else if (F8)
          wgmma_m64nNk32_e4m3_ss<MT>(acc, wgmma_desc_sw128(b + 32 * j, 16, 1024),
                                     wgmma_desc_sw128(a + 32 * j, 16, 1024), i | j);
        else
          wgmma_m64nNk16_ss<MT>(acc, wgmma_desc_sw128(b + 32 * j, 16, 1024),
                                wgmma_desc_sw128(a + 32 * j, 16, 1024), i | j);
      wgmma_commit();
      if (i) {
        wgmma_wait1(); /* the previous k-block's wgmmas have read their stage */
        if (lane == 0) mbar_arrive(empty0 + 8 * prev);
      }
      prev = st;
    }
    wgmma_wait0();
    wgmma_fence_accN<MT>(acc);
    if constexpr (DUAL) {
      wgmma_fence_accN<MT>(acc2);
#pragma unroll
      for (int i = 0; i < MT / 2; ++i) acc[i] += acc2[i];
    }
    /* Both warpgroups are done reading the ring before it becomes the partial. */
    named_bar_sync(1, 256);
    /* acc[i]: B row (64 g + 16 (warp & 3) + lane / 4 + 8 ((i / 2) & 1)), A row (8 (i / 4) +
     * 2 (lane & 3) + (i & 1)); stored at red[A row][B row]. */
    const int nrow = 64 * g + 16 * (warp & 3) + (lane >> 2);
#pragma unroll
    for (int i = 0; i < MT / 2; ++i) {
      const int mrow = 8 * (i >> 2) + 2 * (lane & 3) + (i & 1);
      const int n = nrow + 8 * ((i >> 1) & 1);
      asm volatile("st.shared.f32 [%0], %1;" ::"r"(sbase + (uint32_t)(mrow * SKINNY_RED_PITCH + n) * 4),
                   "f"(acc[i])
                   : "memory");
    }
  }
  cluster_sync(); /* every partial of the cluster is written */
  /* CTA s: rows s, s + S, ... of C's block; a warp per row, 4 columns per lane. */
  const int rows = !tail.store_ok() ? 0 : p->m - row0 < MT ? p->m - row0 : MT;
  const int64_t col = (int64_t)blk * SKINNY_BN + 4 * lane;
  /* F8: the scales (gemm_params_t.fp8_rows): the tensor parts folded into sc, the columns' own
   * (bit 1) in sb, a row's own (bit 0) per row below */
  const int f8_rows = F8 ? p->fp8_rows : 0;
  const float sc = !F8 ? 1.0f : (f8_rows & 1 ? 1.0f : __ldg(p->scale_a)) * (f8_rows & 2 ? 1.0f : __ldg(p->scale_b));
  float4 sb = make_float4(1.f, 1.f, 1.f, 1.f);
  if (f8_rows & 2) {
    sb.x = col < p->n ? __ldg(p->scale_b + col) : 0.f;
    sb.y = col + 1 < p->n ? __ldg(p->scale_b + col + 1) : 0.f;
    sb.z = col + 2 < p->n ? __ldg(p->scale_b + col + 2) : 0.f;
    sb.w = col + 3 < p->n ? __ldg(p->scale_b + col + 3) : 0.f;
  }
  for (int r = s + S * warp; warp < SKINNY_THREADS / 32 && r < rows; r += S * (SKINNY_THREADS / 32)) {
    const uint32_t off = sbase + (uint32_t)(r * SKINNY_RED_PITCH + 4 * lane) * 4;
    float4 v = ld_dsmem_v4f(off, 0);
    for (int c = 1; c < S; ++c) {
      const float4 w = ld_dsmem_v4f(off, (uint32_t)c);
      v.x += w.x;
      v.y += w.y;
      v.z += w.z;
      v.w += w.w;
    }
    if (F8) {
      const float sr = f8_rows & 1 ? sc * __ldg(p->scale_a + row0 + r) : sc;
      v.x *= sr * sb.x, v.y *= sr * sb.y, v.z *= sr * sb.z, v.w *= sr * sb.w;
    }
    if (col < p->n) {
      const int64_t o = (int64_t)(row0 + r) * p->ldc + col;
      const auto put = [&](__nv_bfloat16 *dst) {
        if (col + 4 <= p->n) {
          const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
          uint2 u;
          u.x = *(const uint32_t *)&lo;
          u.y = *(const uint32_t *)&hi;
          *(uint2 *)dst = u;
        } else {
          const float f[4] = {v.x, v.y, v.z, v.w};
          for (int e = 0; e < 4 && col + e < p->n; ++e) dst[e] = __float2bfloat16_rn(f[e]);
        }
      };
      put((__nv_bfloat16 *)p->c + o);
      for (int i = 0; i < tail.ncopies(); ++i) put((__nv_bfloat16 *)tail.copy(i) + o);
    }
  }
  /* no CTA leaves while a peer may still read its partial */
  cluster_arrive();
  tail.finish(s, S, row0, rows);
  cluster_wait();
}

#endif /* __CUDACC__ */
#endif /* MELD_DEVICE_GEMM_SKINNY_CUH */
