/* bench_fence.cu — what one memory-ordering instruction costs on this GPU, as the protocol uses
 * them (src/device/ptx.cuh): one thread of one CTA issues each form N times in a row on a word of
 * local device memory, and the loop's %globaltimer / clock64 difference per iteration is
 * printed. Variants: relaxed / acquire loads at system scope, relaxed / release stores, the
 * acq_rel and sc fences at GPU and system scope, an acq_rel GPU-scope atomic (meld_call_end),
 * and the wait's success path both ways (relaxed load + fence.acq_rel.sys, the form of
 * meld_wait_impl until session 10, against one ld.acquire.sys; session 26: the acquire-only
 * fence, and the entry handshake's shape, 7 posts acquired one by one or read relaxed together
 * and followed by one fence.acquire.sys; the release fence alone and in a release pattern).
 * "after stores": each iteration
 * first stores 64 bytes per lane (a warp's 2 KB) to another buffer, so that a release has
 * writes to drain; with --peer (2 GPUs) those stores go to GPU 1's memory over NVLink, so a
 * release must wait for the link's acknowledgements.
 *
 * Usage: bench_fence [--iters N] [--peer]   (prints a table, no JSON: an instruction fact for
 * docs/HOPPER-GEMM-FACTS.md and perf-notes, not a BENCH.md figure) */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/ptx.cuh"

enum {
  V_LD_RELAXED, V_LD_ACQUIRE, V_ST_RELAXED, V_ST_RELEASE, V_FENCE_ACQREL_GPU, V_FENCE_ACQREL_SYS,
  V_FENCE_SC_SYS, V_ATOM_ACQREL_GPU, V_WAIT_FENCE, V_WAIT_ACQUIRE, V_FENCE_ACQ_SYS, V_WAIT_FENCE_ACQ,
  V_ENTRY7_ACQUIRE, V_ENTRY7_FENCE_ACQ, V_FENCE_REL_SYS, V_FENCE_REL_ST, V_FENCE_ACQREL_ST, V_ST_RELEASE_GPU,
  V_NVARIANTS
};
static const char *const g_names[V_NVARIANTS] = {
    "ld.relaxed.sys",       "ld.acquire.sys",          "st.relaxed.sys",          "st.release.sys",
    "fence.acq_rel.gpu",    "fence.acq_rel.sys",       "fence.sc.sys",            "atom.acq_rel.gpu.add",
    "wait: ld.relaxed + fence.acq_rel.sys", "wait: ld.acquire.sys", "fence.acquire.sys",
    "wait: ld.relaxed + fence.acquire.sys", "7 words: ld.acquire.sys each", "7 words: ld.relaxed + fence.acquire",
    "fence.release.sys", "fence.release.sys + st.relaxed.sys", "fence.acq_rel.sys + st.relaxed.sys",
    "st.release.gpu"};

__global__ void fence_kernel(int variant, int stores, int iters, uint64_t *word, uint4 *sink, uint64_t *out) {
  uint64_t acc = 0;
  const uint64_t t0 = globaltimer_ns();
  const long long c0 = clock64();
  for (int i = 0; i < iters; i++) {
    if (stores) { /* a warp's worth of writes for the release to drain */
#pragma unroll
      for (int k = 0; k < 4; k++) sink[(size_t)(i & 63) * 128 + k * 32 + threadIdx.x] = make_uint4(i, k, 0, 0);
    }
    if (threadIdx.x == 0) {
      switch (variant) {
        case V_LD_RELAXED: acc += ld_relaxed_sys_u64(word); break;
        case V_LD_ACQUIRE: acc += ld_acquire_sys_u64(word); break;
        case V_ST_RELAXED: st_relaxed_sys_u64(word, (uint64_t)i); break;
        case V_ST_RELEASE: st_release_sys_u64(word, (uint64_t)i); break;
        case V_FENCE_ACQREL_GPU: asm volatile("fence.acq_rel.gpu;" ::: "memory"); break;
        case V_FENCE_ACQREL_SYS: fence_acq_rel_sys(); break;
        case V_FENCE_SC_SYS: fence_sc_sys(); break;
        case V_ATOM_ACQREL_GPU: acc += atom_add_acq_rel_gpu_u32((uint32_t *)word, 1u); break;
        case V_WAIT_FENCE: acc += ld_relaxed_sys_u64(word); fence_acq_rel_sys(); break;
        case V_FENCE_ACQ_SYS: fence_acquire_sys(); break;
        case V_WAIT_FENCE_ACQ: acc += ld_relaxed_sys_u64(word); fence_acquire_sys(); break;
        case V_ENTRY7_ACQUIRE: /* the entry handshake's acquires until session 26: one per peer */
          for (int k = 1; k < 8; k++) acc += ld_acquire_sys_u64(word + 16 * k);
          break;
        case V_ENTRY7_FENCE_ACQ: { /* relaxed loads in flight together, then one acquire fence */
          uint64_t v[7];
#pragma unroll
          for (int k = 0; k < 7; k++) v[k] = ld_relaxed_sys_u64(word + 16 * (k + 1));
#pragma unroll
          for (int k = 0; k < 7; k++) acc += v[k];
          fence_acquire_sys();
          break;
        }
        case V_WAIT_ACQUIRE: acc += ld_acquire_sys_u64(word); break;
        case V_FENCE_REL_SYS: fence_release_sys(); break;
        case V_FENCE_REL_ST: fence_release_sys(); st_relaxed_sys_u64(word, (uint64_t)i); break; /* a release pattern */
        case V_FENCE_ACQREL_ST: fence_acq_rel_sys(); st_relaxed_sys_u64(word, (uint64_t)i); break;
        case V_ST_RELEASE_GPU:
          asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(word), "l"((uint64_t)i) : "memory");
          break;
        default: break;
      }
    }
    __syncwarp();
  }
  const long long c1 = clock64();
  const uint64_t t1 = globaltimer_ns();
  if (threadIdx.x == 0) {
    out[0] = t1 - t0;
    out[1] = (uint64_t)(c1 - c0);
    out[2] = acc;
  }
}

int main(int argc, char **argv) {
  int iters = 2000, peer = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--peer")) peer = 1;
    else {
      fprintf(stderr, "usage: %s [--iters N] [--peer]\n", argv[0]);
      return 2;
    }
  }
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
    printf("bench_fence: no GPU: nothing to measure\n");
    return 0;
  }
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  uint64_t *word = NULL, *out = NULL;
  uint4 *sink = NULL;
  int can = 0;
  if (peer && (ndev < 2 || cudaDeviceCanAccessPeer(&can, 0, 1) != cudaSuccess || !can)) {
    printf("bench_fence: --peer needs 2 GPUs with peer access: nothing to measure\n");
    return 0;
  }
  if (peer) { /* the stores' buffer on GPU 1, written from GPU 0 over NVLink */
    cudaSetDevice(1);
    if (cudaMalloc(&sink, (size_t)64 * 128 * sizeof(uint4))) {
      printf("bench_fence: cudaMalloc on GPU 1 failed\n");
      return 1;
    }
    cudaSetDevice(0);
    if (cudaDeviceEnablePeerAccess(1, 0) != cudaSuccess) {
      printf("bench_fence: cudaDeviceEnablePeerAccess failed\n");
      return 1;
    }
  } else if (cudaMalloc(&sink, (size_t)64 * 128 * sizeof(uint4))) {
    sink = NULL;
  }
  if (!sink || cudaMalloc(&word, 1024) || cudaMalloc(&out, 64)) {
    printf("bench_fence: cudaMalloc failed\n");
    return 1;
  }
  cudaMemset(word, 0, 1024);
  printf("bench_fence: %s, one thread (warp 0 stores when asked%s), %d iterations; ns and SM cycles per iteration\n",
         prop.name, peer ? ", to GPU 1 over NVLink" : "", iters);
  printf("%-40s %12s %12s %14s %14s\n", "instruction", "ns", "cycles", "ns after st", "cycles after st");
  for (int v = 0; v < V_NVARIANTS; v++) {
    double ns[2], cyc[2];
    for (int st = 0; st < 2; st++) {
      double best_ns = 1e30, best_c = 1e30;
      for (int rep = 0; rep < 3; rep++) { /* best of 3 launches (the first warms up) */
        fence_kernel<<<1, 32>>>(v, st, iters, word, sink, out);
        uint64_t h[3];
        if (cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost) != cudaSuccess) {
          printf("bench_fence: kernel failed: %s\n", cudaGetErrorString(cudaGetLastError()));
          return 1;
        }
        if (h[0] / (double)iters < best_ns) best_ns = h[0] / (double)iters;
        if (h[1] / (double)iters < best_c) best_c = h[1] / (double)iters;
      }
      ns[st] = best_ns, cyc[st] = best_c;
    }
    printf("%-40s %12.1f %12.0f %14.1f %14.0f\n", g_names[v], ns[0], cyc[0], ns[1], cyc[1]);
  }
  cudaFree(word);
  cudaFree(out);
  cudaFree(sink);
  return 0;
}
