/* copy.cuh — the data loops of the communication engines: byte copies and fp32-accumulating
 * sums, spread over `nw` workers (worker `w` = a thread's index among the threads that share
 * the job: a CTA's threads, a few warps of a fused kernel, or several CTAs). No blockIdx,
 * no gridDim, no barriers inside: the caller synchronizes its workers around each call.
 *
 * Fast path: 16-byte vector accesses with several loads in flight per thread (NVLink and HBM
 * need tens of KB in flight per SM to stream). Any alignment works: a copy whose source and
 * destination agree modulo 16 takes the vector body with byte head/tail; otherwise the widest
 * word both agree on (8, 4, 2 or 1 bytes). Sums: vector body when every pointer is 16-byte
 * aligned, else an element-wise loop; lengths need not be multiples of anything.
 *
 * Loads use ld.global.cg (L2 only, __ldcg): staging slots are rewritten by peers within one
 * kernel, so a line left in this SM's L1 by an earlier round must never serve a later one
 * (the acquire fence before the read covers this too; .cg makes it independent of it, and L1
 * does not help a stream anyway). */
#ifndef MELD_DEVICE_COPY_CUH
#define MELD_DEVICE_COPY_CUH

#include <cuda_bf16.h>
#include <stddef.h>
#include <stdint.h>

#define COPY_DEV __device__ __forceinline__

/* Loads in flight per thread in the vector loops. (8 was tried with the RING engine, run 2 of
 * 2026-11-30: ROUNDS two-shot unchanged within noise; kept at 4, the value the default
 * engine was measured with.) */
#define COPY_UNROLL 4

/* ---- copies ----------------------------------------------------------------------------- */

/* 16-byte vectors: n16 vectors from src to dst (both 16-byte aligned), U loads per thread in
 * flight (the collectives' engines use 8: collectives.cu). I: the index type (int where the
 * caller has few registers and n16 < 2^31: AG+GEMM's comm warps, 40 registers). */
template <int U = COPY_UNROLL, class I = size_t>
COPY_DEV void copy_vec16(int4 *dst, const int4 *src, I n16, uint32_t w, uint32_t nw) {
  I i = (I)w;
  const I s = (I)nw;
  for (; i + (U - 1) * s < n16; i += U * s) {
    int4 v[U];
#pragma unroll
    for (int u = 0; u < U; u++) v[u] = __ldcg(src + i + u * s);
#pragma unroll
    for (int u = 0; u < U; u++) dst[i + u * s] = v[u];
  }
  for (; i < n16; i += s) dst[i] = __ldcg(src + i);
}

/* Word loops for the misaligned cases (8, 4, 2, 1 bytes). */
COPY_DEV void copy_w8(uint64_t *d, const uint64_t *s, size_t n, uint32_t w, uint32_t nw) {
  for (size_t i = w; i < n; i += nw) d[i] = __ldcg((const unsigned long long *)(s + i));
}
COPY_DEV void copy_w4(uint32_t *d, const uint32_t *s, size_t n, uint32_t w, uint32_t nw) {
  for (size_t i = w; i < n; i += nw) d[i] = __ldcg((const unsigned int *)(s + i));
}
COPY_DEV void copy_w2(uint16_t *d, const uint16_t *s, size_t n, uint32_t w, uint32_t nw) {
  for (size_t i = w; i < n; i += nw) d[i] = __ldcg((const unsigned short *)(s + i));
}
COPY_DEV void copy_w1(uint8_t *d, const uint8_t *s, size_t n, uint32_t w, uint32_t nw) {
  for (size_t i = w; i < n; i += nw) d[i] = __ldcg((const unsigned char *)(s + i));
}

/* Copies `bytes` bytes from src to dst (any alignment; dst and src may be a peer's mapped
 * memory). The ranges must not overlap, except dst == src (then nothing is done). */
COPY_DEV void copy_bytes(void *dst, const void *src, size_t bytes, uint32_t w, uint32_t nw) {
  if (bytes == 0 || dst == src) return;
  uint8_t *d = (uint8_t *)dst;
  const uint8_t *s = (const uint8_t *)src;
  uintptr_t mis = ((uintptr_t)d ^ (uintptr_t)s);
  size_t width = (mis & 15) == 0 ? 16 : (mis & 7) == 0 ? 8 : (mis & 3) == 0 ? 4 : (mis & 1) == 0 ? 2 : 1;
  /* Head: bytes up to dst's first width-aligned address (src is then aligned too). */
  size_t head = (width - ((uintptr_t)d & (width - 1))) & (width - 1);
  if (head > bytes) head = bytes;
  copy_w1(d, s, head, w, nw);
  d += head, s += head, bytes -= head;
  size_t n = bytes / width;
  switch (width) {
    case 16: copy_vec16<>((int4 *)d, (const int4 *)s, n, w, nw); break;
    case 8: copy_w8((uint64_t *)d, (const uint64_t *)s, n, w, nw); break;
    case 4: copy_w4((uint32_t *)d, (const uint32_t *)s, n, w, nw); break;
    case 2: copy_w2((uint16_t *)d, (const uint16_t *)s, n, w, nw); break;
    default: copy_w1(d, s, n, w, nw); break;
  }
  size_t done = n * width;
  copy_w1(d + done, s + done, bytes - done, w, nw);
}

/* ---- sums (fp32 accumulation) --------------------------------------------------------------- */

/* Element dtypes of the engines (== meld_dtype_t). */
enum { COPY_BF16 = 0, COPY_FP32 = 1 };

/* 8 bf16 (one 16-byte vector) -> 8 floats. Exact widening (bf16 is the high half of an fp32). */
COPY_DEV void widen_bf16x8(int4 v, float f[8]) {
  const uint32_t u[4] = {(uint32_t)v.x, (uint32_t)v.y, (uint32_t)v.z, (uint32_t)v.w};
#pragma unroll
  for (int k = 0; k < 4; k++) {
    f[2 * k] = __uint_as_float(u[k] << 16);
    f[2 * k + 1] = __uint_as_float(u[k] & 0xffff0000u);
  }
}
/* The same, added into acc. */
COPY_DEV void acc_bf16x8(float acc[8], int4 v) {
  float f[8];
  widen_bf16x8(v, f);
#pragma unroll
  for (int k = 0; k < 8; k++) acc[k] += f[k];
}
/* 8 floats -> 8 bf16, round to nearest even (cvt.rn.bf16x2.f32). */
COPY_DEV int4 pack_bf16x8(const float acc[8]) {
  uint32_t u[4];
#pragma unroll
  for (int k = 0; k < 4; k++) {
    __nv_bfloat162 h = __floats2bfloat162_rn(acc[2 * k], acc[2 * k + 1]);
    u[k] = *(const uint32_t *)&h;
  }
  return make_int4((int)u[0], (int)u[1], (int)u[2], (int)u[3]);
}
/* The 16-byte vector of a sum's first 8 (bf16) or 4 (fp32) accumulators. */
COPY_DEV int4 pack_acc(const float acc[8], int dtype) {
  return dtype == COPY_BF16 ? pack_bf16x8(acc)
                            : make_int4(__float_as_int(acc[0]), __float_as_int(acc[1]), __float_as_int(acc[2]),
                                        __float_as_int(acc[3]));
}
COPY_DEV void acc_f32x4(float acc[4], int4 v) {
  acc[0] += __int_as_float(v.x), acc[1] += __int_as_float(v.y);
  acc[2] += __int_as_float(v.z), acc[3] += __int_as_float(v.w);
}

/* One element of a source, as float. */
COPY_DEV float load_elem(const void *p, size_t i, int dtype) {
  if (dtype == COPY_BF16)
    return __uint_as_float((uint32_t)__ldcg((const unsigned short *)p + i) << 16);
  return __ldcg((const float *)p + i);
}
COPY_DEV void store_elem(void *p, size_t i, float v, int dtype) {
  if (dtype == COPY_BF16) ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
  else ((float *)p)[i] = v;
}

/* Source i (0..nsrc) of a sum in summation order: staging slots first..nsrc-1, then own,
 * then slots 0..first-1. With slots ordered "rank me+1, me+2, ..." (mod P) and
 * first = P - 1 - me, that is rank order 0..P-1 on every rank. */
COPY_DEV const uint8_t *sum_src(const uint8_t *own, const uint8_t *s0, size_t stride, int nsrc,
                                int first, int i) {
  int item = first + i;
  if (item < nsrc) return s0 + (size_t)item * stride;
  if (item == nsrc) return own;
  return s0 + (size_t)(item - nsrc - 1) * stride;
}

/* dst[e] = sum of own[e] and (src0 + k * src_stride)[e] for k < nsrc, e < elems: summed in
 * fp32 registers from 0.0f in the order of sum_src (so equal ranks' sums are bitwise equal,
 * and equal to a CPU loop in rank order), rounded once to dtype. own may equal dst (in
 * place). The vector path needs dst, own, src0 and src_stride 16-byte aligned; otherwise
 * the loop goes element by element. nsrc may be 0 (a copy). */
COPY_DEV void reduce_sum(void *dst, const void *own, const void *src0, size_t src_stride,
                         int nsrc, int first, size_t elems, int dtype, uint32_t w, uint32_t nw) {
  const uint8_t *s0 = (const uint8_t *)src0;
  const uint8_t *o = (const uint8_t *)own;
  const size_t es = dtype == COPY_BF16 ? 2 : 4;
  const int aligned = (((uintptr_t)dst | (uintptr_t)own | (uintptr_t)s0 | src_stride) & 15) == 0;
  const size_t nvec = aligned ? elems * es / 16 : 0;
  const size_t vs = nw;
  size_t i = w;
  if (dtype == COPY_BF16) {
    /* Two vectors per thread at a time: two loads in flight per source. */
    for (; i + vs < nvec; i += 2 * vs) {
      float a0[8] = {0, 0, 0, 0, 0, 0, 0, 0}, a1[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int k = 0; k <= nsrc; k++) {
        const int4 *p = (const int4 *)sum_src(o, s0, src_stride, nsrc, first, k);
        const int4 v0 = __ldcg(p + i), v1 = __ldcg(p + i + vs);
        acc_bf16x8(a0, v0);
        acc_bf16x8(a1, v1);
      }
      ((int4 *)dst)[i] = pack_bf16x8(a0);
      ((int4 *)dst)[i + vs] = pack_bf16x8(a1);
    }
    for (; i < nvec; i += vs) {
      float a0[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int k = 0; k <= nsrc; k++)
        acc_bf16x8(a0, __ldcg((const int4 *)sum_src(o, s0, src_stride, nsrc, first, k) + i));
      ((int4 *)dst)[i] = pack_bf16x8(a0);
    }
  } else {
    for (; i + 3 * vs < nvec; i += 4 * vs) {
      float a[4][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}};
      for (int k = 0; k <= nsrc; k++) {
        const int4 *p = (const int4 *)sum_src(o, s0, src_stride, nsrc, first, k);
        int4 v[4];
#pragma unroll
        for (int u = 0; u < 4; u++) v[u] = __ldcg(p + i + u * vs);
#pragma unroll
        for (int u = 0; u < 4; u++) acc_f32x4(a[u], v[u]);
      }
#pragma unroll
      for (int u = 0; u < 4; u++)
        ((int4 *)dst)[i + u * vs] = make_int4(__float_as_int(a[u][0]), __float_as_int(a[u][1]),
                                              __float_as_int(a[u][2]), __float_as_int(a[u][3]));
    }
    for (; i < nvec; i += vs) {
      float a[4] = {0, 0, 0, 0};
      for (int k = 0; k <= nsrc; k++)
        acc_f32x4(a, __ldcg((const int4 *)sum_src(o, s0, src_stride, nsrc, first, k) + i));
      ((int4 *)dst)[i] = make_int4(__float_as_int(a[0]), __float_as_int(a[1]), __float_as_int(a[2]),
                                   __float_as_int(a[3]));
    }
  }
  /* Tail (and the whole range when misaligned): element by element. */
  for (size_t e = nvec * 16 / es + w; e < elems; e += nw) {
    float a = 0.0f;
    for (int k = 0; k <= nsrc; k++) a += load_elem(sum_src(o, s0, src_stride, nsrc, first, k), e, dtype);
    store_elem(dst, e, a, dtype);
  }
}

#endif /* MELD_DEVICE_COPY_CUH */
