/* attention_int.h — what the attention's host code (attention.cu) and its kernels
 * (attention_kernels.cuh, compiled once per head_dim: attention_d64.cu, attention_d128.cu) share:
 * the kernel modes, the fused ring's kernel arguments and the set of kernels of one head_dim.
 * Internal (not public). */
#ifndef MELD_OPS_ATTENTION_INT_H
#define MELD_OPS_ATTENTION_INT_H

#include <stddef.h>
#include <stdint.h>

#include "attn_plan.h"

#define ATTN_THREADS 384
#define ATTN_RING_MAX_RANKS 64

/* Kernel modes: 0 one K/V segment (meld_attention), 1 the gathered ring (P segments of one
 * 5-D map, segment = source rank), 2 the fused ring (persistent; step 0 = own K/V in place by
 * the 4-D maps, step i >= 1 = staging segment i - 1, waited for chunk by chunk). */
#define ATTN_SINGLE 0
#define ATTN_GATHERED 1
#define ATTN_FUSED 2
#define ATTN_PERSIST 3 /* one segment as ATTN_SINGLE, persistent CTAs (MELD_ATTN_PERSIST=1, opt-in) */
#define ATTN_MS(MODE) ((MODE) == ATTN_GATHERED || (MODE) == ATTN_FUSED) /* segment iterator */

/* The fused ring's kernel arguments (__grid_constant__, with the comm's meld_proto_dev_t). */
typedef struct {
  attn_params_t p;  /* the launch's heads; positions, ring order, maps (own K/V 4-D, staging 5-D) */
  int32_t rank, nranks, comm_ctas, handshake_only;
  int32_t diag;     /* MELD_RING_ATTN_DIAG bit 0 (timing only, WRONG RESULTS): no pushes, no waits */
  uint32_t arg_hash;
  int32_t nk, chunk_tokens, token_chunks;               /* launch's K/V heads, chunking            */
  uint32_t chunks, items; /* chunks a rank pushes (batch x nk x token_chunks); work items          */
  const uint8_t *k, *v;   /* this rank's K and V ([batch, seq, heads_kv, head_dim], tokens k_ld /  */
  int64_t k_ld, v_ld;     /* v_ld bytes apart: dense, or rows of a packed QKV)                     */
  uint8_t *stage[ATTN_RING_MAX_RANKS]; /* rank r's staging as mapped here: K of P - 1 parts, then V */
  int64_t stage_v;        /* bytes from a staging's K to its V                                    */
} attn_ring_kargs_t;

/* The kernels of one head_dim, by pipeline variant (MELD_ATTN_PIPE 0, 1, 2), and their dynamic
 * shared memory. fwd[0]: one segment, fwd[1]: the gathered ring's segments; the first parameter
 * of ring[] is the comm's meld_proto_dev_t. */
typedef struct {
  const void *fwd[2][3];
  const void *persist[3];
  const void *ring[3];
  size_t smem[3];
} attn_kernel_set_t;

attn_kernel_set_t attn_kernels_d64(void);
attn_kernel_set_t attn_kernels_d128(void);

#endif /* MELD_OPS_ATTENTION_INT_H */
