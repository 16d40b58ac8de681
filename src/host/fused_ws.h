/* fused_ws.h — split-K / stream-K workspaces of the fused kernels (GEMM+RS/AR, AG+GEMM): one per
 * (op, device, stream), private to the op (a fused call that fails part-way may leave counters
 * non-zero: then its comm is failed for good, while meld_gemm's own workspaces and the other
 * ops' stay clean). Grown outside stream capture only (the stream is synchronized first: earlier
 * calls may still use the old buffers); counters zeroed once, then reset by the kernels. */
#ifndef MELD_HOST_FUSED_WS_H
#define MELD_HOST_FUSED_WS_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { FUSED_WS_GEMM_RS = 0, FUSED_WS_AG_GEMM = 1 };

/* 0 and the buffers (>= bytes, >= words counters), or 1: none large enough (capturing, out of
 * memory): the caller plans without split-K / stream-K. */
int fused_ws_get(int owner, cudaStream_t stream, size_t bytes, size_t words, float **ws, uint32_t **counters);

#ifdef __cplusplus
}
#endif
#endif /* MELD_HOST_FUSED_WS_H */
