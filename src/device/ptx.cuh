/* ptx.cuh — inline-PTX wrappers for the memory model of the device protocol (sm_90a).
 *
 * Each wrapper is one instruction with a one-line comment of its meaning (PTX ISA "Memory
 * Consistency Model" section 8; "Async Proxy" 9.7.9.25.2). Peer GPUs and the host are only
 * covered by .sys scope: flags, credits, abort words and host-mapped records use .sys.
 * Shared-memory operands are 32-bit shared-window addresses (smem_addr()).
 *
 * Names differ from src/device/ptx_async.cuh (the GEMM engine's TMA/wgmma wrappers) so that
 * both headers can be included in one translation unit. */
#ifndef MELD_DEVICE_PTX_CUH
#define MELD_DEVICE_PTX_CUH

#include <stdint.h>

#define MELD_DEV __device__ __forceinline__

/* ---- loads and stores at system scope ------------------------------------------------------ */

/* Release store: every write this thread performed or observed before it (release is
 * cumulative: including other threads' writes ordered before it by bar.sync) is visible to
 * any thread, on any GPU or the host, that acquires this value. */
MELD_DEV void st_release_sys_u64(uint64_t *p, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
/* Release store, 32-bit (abort words, record kind). */
MELD_DEV void st_release_sys_u32(uint32_t *p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
/* Relaxed store at system scope: single-copy atomic and eventually visible everywhere, no
 * ordering of other accesses (the wait-for mirror). */
MELD_DEV void st_relaxed_sys_u64(uint64_t *p, uint64_t v) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
MELD_DEV void st_relaxed_sys_u32(uint32_t *p, uint32_t v) {
  asm volatile("st.relaxed.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
/* Relaxed load at system scope: reads the latest value in coherence order (never a stale
 * L1 copy), no ordering: spin on it, then one fence_acquire_sys once it is reached
 * (signal.cuh meld_acquire_seen). */
MELD_DEV uint64_t ld_relaxed_sys_u64(const uint64_t *p) {
  uint64_t v;
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
MELD_DEV uint32_t ld_relaxed_sys_u32(const uint32_t *p) {
  uint32_t v;
  asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
/* Acquire load: if it reads a value written by a release, every write before that release
 * is visible to this thread's later accesses. */
MELD_DEV uint64_t ld_acquire_sys_u64(const uint64_t *p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
MELD_DEV uint32_t ld_acquire_sys_u32(const uint32_t *p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
/* Relaxed load at GPU scope (this GPU's counters, e.g. the call counter). */
MELD_DEV uint64_t ld_relaxed_gpu_u64(const uint64_t *p) {
  uint64_t v;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

/* ---- fences ----------------------------------------------------------------------------------- */

/* Acquire + release fence at system scope: after a relaxed load that saw a released value,
 * makes the releaser's prior writes visible (fence-based synchronization, PTX 8.8). */
MELD_DEV void fence_acq_rel_sys(void) { asm volatile("fence.acq_rel.sys;" ::: "memory"); }
MELD_DEV void fence_acq_rel_gpu(void) { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }
/* Acquire-only fence at system scope (PTX ISA 8.6, sm_90): with earlier relaxed loads that saw
 * released values, an acquire pattern for each of them; no release half, so it need not wait
 * for this thread's earlier writes to be performed, as fence.acq_rel.sys must. */
MELD_DEV void fence_acquire_sys(void) { asm volatile("fence.acquire.sys;" ::: "memory"); }
/* Release-only fence at system scope (PTX ISA 8.6, sm_90): with later relaxed stores, a
 * release pattern for each of them. It costs what st.release.sys does (~650 ns: the wait for
 * the thread's earlier writes; bench_fence, session 26), so it pays only where one fence
 * serves several stores. */
MELD_DEV void fence_release_sys(void) { asm volatile("fence.release.sys;" ::: "memory"); }
/* Sequentially consistent fence at system scope (orders stores to host-mapped memory). */
MELD_DEV void fence_sc_sys(void) { asm volatile("fence.sc.sys;" ::: "memory"); }
/* Generic -> async proxy fence for global memory: generic-proxy accesses of this thread
 * (incl. data acquired from a peer) are ordered before its later bulk/TMA accesses. Issue it
 * after acquiring a flag and before reading the flagged data with cp.async.bulk. */
MELD_DEV void fence_proxy_async_gmem(void) {
  asm volatile("fence.proxy.async.global;" ::: "memory");
}
/* Generic -> async proxy fence for this CTA's shared memory: ordinary st.shared before it
 * are visible to later bulk copies / wgmma reading that shared memory (then bar.sync). */
MELD_DEV void fence_proxy_async_smem_cta(void) {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

/* ---- atomics ---------------------------------------------------------------------------------- */

/* Release reduction: adds v after all prior writes of this thread are visible (a count that
 * a peer or the host acquires). */
MELD_DEV void red_release_sys_add_u64(uint64_t *p, uint64_t v) {
  asm volatile("red.release.sys.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
/* Relaxed reduction (after a fence: the release pattern for several counters, one fence). */
MELD_DEV void red_relaxed_sys_add_u64(uint64_t *p, uint64_t v) {
  asm volatile("red.relaxed.sys.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
/* CAS with acquire+release at system scope (claims, abort words on peers over NVLink).
 * Returns the old value. */
MELD_DEV uint32_t atom_cas_acq_rel_sys_u32(uint32_t *p, uint32_t cmp, uint32_t v) {
  uint32_t old;
  asm volatile("atom.acq_rel.sys.global.cas.b32 %0, [%1], %2, %3;"
               : "=r"(old) : "l"(p), "r"(cmp), "r"(v) : "memory");
  return old;
}
MELD_DEV uint64_t atom_cas_acq_rel_sys_u64(uint64_t *p, uint64_t cmp, uint64_t v) {
  uint64_t old;
  asm volatile("atom.acq_rel.sys.global.cas.b64 %0, [%1], %2, %3;"
               : "=l"(old) : "l"(p), "l"(cmp), "l"(v) : "memory");
  return old;
}
/* Relaxed add at GPU scope (tickets, work queues: no data is published through them).
 * Returns the old value. */
MELD_DEV uint32_t atom_add_relaxed_gpu_u32(uint32_t *p, uint32_t v) {
  uint32_t old;
  asm volatile("atom.relaxed.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}
/* Acquire+release add at GPU scope ("CTAs done": the last CTA sees every CTA's prior
 * writes). Returns the old value. */
MELD_DEV uint32_t atom_add_acq_rel_gpu_u32(uint32_t *p, uint32_t v) {
  uint32_t old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}

/* ---- bulk copies (async proxy) and mbarriers ------------------------------------------------ */

/* The 32-bit shared-window address of a generic pointer into this CTA's shared memory. */
MELD_DEV uint32_t smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* Initializes an mbarrier in shared memory with `count` arrivals per phase. */
MELD_DEV void mbarrier_init_cta(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
/* Adds `bytes` to the barrier's expected transaction count and arrives once. */
MELD_DEV void mbarrier_arrive_expect_tx_cta(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}
/* One probe: 1 if the phase of parity `parity` has completed (acquire at CTA scope: the
 * bulk copy's bytes are then visible to this thread), else 0 after a bounded hardware wait.
 * (No suspend-time hint: a 10 ms hint changed neither instructions, cycles nor sustained time
 * of the GEMM on an H200, session 11; the wait already parks in hardware.) */
MELD_DEV uint32_t mbarrier_try_wait_parity_cta(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
      "selp.u32 %0, 1, 0, p;\n\t}"
      : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  return done;
}
/* Bulk copy global -> shared (async proxy); completion is counted as `bytes` transactions on
 * mbarrier `bar`. dst, src 16-byte aligned; bytes a multiple of 16. */
MELD_DEV void cp_async_bulk_g2s(uint32_t dst_smem, const void *src, uint32_t bytes, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
      ::"r"(dst_smem), "l"(src), "r"(bytes), "r"(bar) : "memory");
}
/* Bulk copy shared -> global (async proxy; dst may be a peer's mapped memory), tracked in
 * this thread's current bulk group. */
MELD_DEV void cp_async_bulk_s2g(void *dst, uint32_t src_smem, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
               ::"l"(dst), "r"(src_smem), "r"(bytes) : "memory");
}
/* Closes this thread's pending bulk copies into one bulk group. */
MELD_DEV void cp_async_bulk_commit_group(void) {
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
/* Waits until all of this thread's bulk groups have COMPLETED: the writes are performed
 * (visible to a later release by this thread; completion implies a generic-async proxy
 * fence). Required before publishing a flag for data written by bulk copies. */
MELD_DEV void cp_async_bulk_wait_group0(void) {
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}
/* Waits until all of this thread's bulk groups have finished READING their shared-memory
 * source (the smem may be reused); says nothing about the destination writes. */
MELD_DEV void cp_async_bulk_wait_group_read0(void) {
  asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}

/* ---- time ----------------------------------------------------------------------------------- */

/* The global nanosecond timer (coarse: about a microsecond; fine for deadlines). */
MELD_DEV uint64_t globaltimer_ns(void) {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
/* Suspends the thread for about ns nanoseconds (a hint; 0..1 ms). */
MELD_DEV void nanosleep_ns(uint32_t ns) { asm volatile("nanosleep.u32 %0;" ::"r"(ns)); }

#endif /* MELD_DEVICE_PTX_CUH */
