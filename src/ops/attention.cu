/* attention.cu — the host side of the attention (meld_attention, meld_ring_attention): plans,
 * the fused ring's launches and its gathered fallback. The kernels (attention_kernels.cuh, once
 * per head_dim: attention_d64.cu, attention_d128.cu) are described there; DESIGN.md section 7.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention_int.h"
#include "attn_plan.h"
#include "comm.h"
#include "common/proto.h"
#include "error.h"
#include "log.h"
#include "proto.h"

/* MELD_ATTN_PIPE: 0, 1 or 2 (default). */
static int attn_pipe_variant(void) {
  const char *pipe = getenv("MELD_ATTN_PIPE");
  return pipe && pipe[0] == '0' ? 0 : pipe && pipe[0] == '1' ? 1 : 2;
}

static int g_attn_ready[64][2];

/* The kernels of head_dim d (64 or 128), their shared-memory limits set once per device. The
 * device must be a Hopper (sm_90a): MELD_ERR_UNSUPPORTED otherwise. */
static meld_result_t attn_kernels(int d, attn_kernel_set_t *ks) {
  int dev = 0, major = 0;
  MELD_CUDA_CHECK(cudaGetDevice(&dev));
  MELD_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  if (major != 9)
    return meld_error(MELD_ERR_UNSUPPORTED,
                      "meld_attention: device %d has compute capability %d.x; the kernel needs Hopper (sm_90a)", dev,
                      major);
  *ks = d == 64 ? attn_kernels_d64() : attn_kernels_d128();
  const int di = d == 64 ? 0 : 1;
  if (dev >= 64 || !g_attn_ready[dev][di]) {
    for (int v = 0; v < 3; v++) {
      const void *fns[4] = {ks->fwd[0][v], ks->fwd[1][v], ks->persist[v], ks->ring[v]};
      for (int f = 0; f < 4; f++)
        MELD_CUDA_CHECK(cudaFuncSetAttribute(fns[f], cudaFuncAttributeMaxDynamicSharedMemorySize, (int)ks->smem[v]));
    }
    if (dev < 64) g_attn_ready[dev][di] = 1;
  }
  return MELD_OK;
}

/* Launches the kernel variant MELD_ATTN_PIPE names for a plan with its maps. */
static meld_result_t attn_launch(const attn_params_t *p, int64_t grid, cudaStream_t stream) {
  attn_kernel_set_t ks;
  MELD_CHECK(attn_kernels(p->head_dim, &ks));
  /* MELD_ATTN_PIPE: 2 (default) overlaps each block's softmax with the previous block's PV
   * wgmmas and lets the two warpgroups take turns to issue (ping-pong); 1 without the turns; 0
   * in series (the first version). Session 29, one H200, sustained: 2 vs 1 -0.5..-2.3% at S
   * 4096, -7.3..+2.5% at S 16384 (two calls; geomean ~-1%); 1 vs 0 -2..-17%. */
  const int v = attn_pipe_variant();
  /* MELD_ATTN_PERSIST=1: persistent CTAs, items by stride (session 30, one H200: non-causal
   * -1..-2.4%, causal MHA +11..+13%: opt-in) */
  const char *ps = getenv("MELD_ATTN_PERSIST");
  attn_params_t pv = *p;
  if (p->kv_segs == 1 && ps && ps[0] == '1') {
    int dev = 0, sms = 0;
    MELD_CUDA_CHECK(cudaGetDevice(&dev));
    MELD_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    uint32_t items = (uint32_t)grid;
    void *args[] = {&pv, &items};
    MELD_CUDA_CHECK(cudaLaunchKernel(ks.persist[v], dim3((unsigned)(grid < sms ? grid : sms)), dim3(ATTN_THREADS), args,
                                     ks.smem[v], stream));
  } else {
    void *args[] = {&pv};
    MELD_CUDA_CHECK(cudaLaunchKernel(ks.fwd[p->kv_segs > 1][v], dim3((unsigned)grid), dim3(ATTN_THREADS), args,
                                     ks.smem[v], stream));
  }
  return MELD_OK;
}

/* One GPU, one K/V segment: plan (validated) and launch; nothing to do for an empty batch. */
static meld_result_t attn_single(const meld_attention_args_t *args, cudaStream_t stream) {
  attn_params_t p;
  int64_t grid = 0;
  MELD_CHECK(attn_args_validate(args));
  if (args->batch == 0 || args->seq_q == 0) return MELD_OK;
  MELD_CHECK(attn_plan_make(args, &p, &grid));
  return attn_launch(&p, grid, stream);
}

extern "C" meld_result_t meld_attention(const meld_attention_args_t *args, cudaStream_t stream) {
  meld_error_clear();
  if (args && args->zigzag)
    return meld_error(MELD_ERR_INVALID_ARG, "meld_attention: zigzag %d (a ring layout: meld_ring_attention only; "
                      "give positions by q_pos0 / kv_pos0)", args->zigzag);
  return attn_single(args, stream);
}

/* MELD_RING_ATTN_DIAG (timing diagnostics, WRONG RESULTS): bit 0 the fused kernel without its
 * pushes and waits (what the kernel costs beside the communication), bit 1 the gathered path
 * without its all-gathers (the gathered kernel alone). */
static int attn_ring_diag(void) {
  const char *d = getenv("MELD_RING_ATTN_DIAG");
  return d ? atoi(d) : 0;
}

/* Rank `me`'s positions in a ring of P (the parts as segments, own part first). */
static void attn_ring_positions(const meld_attention_args_t *args, int P, int me, attn_params_t *p) {
  p->kv_segs = P;
  p->seg_rot = me;
  if (args->zigzag) { /* pieces me and 2P - 1 - me of 2P, each of h tokens */
    const int64_t h = args->seq_q / 2;
    p->zz_half = (int)h;
    p->q_pos0 = (int64_t)me * h;
    p->q_pos1 = (int64_t)(2 * P - 1 - me) * h - h;
  } else {
    p->q_pos0 = (int64_t)me * args->seq_q;
    p->kv_seg_pos = args->seq_kv;
  }
}

static void attn_ring_refuse(struct meld_comm *comm, cudaStream_t stream);

/* All-gathers every rank's [rows, dense] part (tokens `stride` elements apart; 0 = dense) into
 * recv [rank][rows][dense]; a strided part is copied into this rank's place first and gathered in
 * place (send == recv + rank x count). */
static meld_result_t attn_gather_part(meld_comm_t comm, const void *part, int64_t stride, int64_t dense, size_t rows,
                                      char *recv, cudaStream_t stream) {
  const size_t row = (size_t)dense * 2, count = rows * (size_t)dense;
  const void *send = part;
  if (stride && stride != dense) {
    char *mine = recv + (size_t)comm->rank * count * 2;
    MELD_CUDA_CHECK(cudaMemcpy2DAsync(mine, row, part, (size_t)stride * 2, row, rows, cudaMemcpyDeviceToDevice, stream));
    send = mine;
  }
  return meld_all_gather(comm, send, recv, count, MELD_BF16, stream);
}

/* The gathered ring (unfused; the fallback where one K/V head's staging exceeds the workspace,
 * and MELD_RING_ATTN=unfused for A/B): every rank's K and V are all-gathered into the comm's
 * unfused scratch [rank][batch][seq][heads_kv][head_dim] (K, then V), then ONE attention kernel
 * reads them as P segments, own part first. The scratch is the comm's (grown outside capture,
 * shared with the other unfused paths): no allocation inside a call, so a captured graph holds
 * no memory nodes (session 30: with 8 ranks as threads on one GPU, the first replay of a graph
 * with cudaMallocAsync / cudaFreeAsync nodes kept one rank's launch back past the timeout). */
static meld_result_t attn_ring_gathered(meld_comm_t comm, const meld_attention_args_t *args, cudaStream_t stream) {
  const int P = comm->nranks;
  const int64_t dense = args->heads_kv * args->head_dim;
  const size_t rows = (size_t)args->batch * (size_t)args->seq_kv, bytes = rows * (size_t)dense * 2;
  attn_params_t p;
  int64_t grid = 0;
  MELD_CHECK(attn_plan_geometry(args, &p, &grid));
  attn_ring_positions(args, P, comm->rank, &p);
  attn_plan_order(args, &p);
  char *kv = NULL;
  meld_result_t res = meld_comm_scratch(comm, "meld_ring_attention", "run the call once before capturing",
                                        2 * (size_t)P * bytes, stream, (void **)&kv);
  if (res != MELD_OK) {
    /* the peers are in their all-gather's handshake: a mismatching one ends it at once */
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", meld_last_error());
    attn_ring_refuse(comm, stream);
    return meld_error(res, "%s", msg);
  }
  if (!(attn_ring_diag() & 2)) { /* (bit 1, timing only, WRONG RESULTS: the kernel alone) */
    res = attn_gather_part(comm, args->k, args->stride_k, dense, rows, kv, stream);
    if (res == MELD_OK) res = attn_gather_part(comm, args->v, args->stride_v, dense, rows, kv + (size_t)P * bytes, stream);
  }
  if (res == MELD_OK) res = attn_plan_q_map(args, &p);
  if (res == MELD_OK) res = attn_plan_kv_maps(args, &p, kv, kv + (size_t)P * bytes, dense, dense, P);
  if (res == MELD_OK) res = attn_launch(&p, grid, stream);
  return res;
}

/* Launches the fused kernel (grid = every SM of the rank's share: cooperative, all CTAs
 * resident, so CTAs waiting for peers never keep the comm CTAs from running). */
static meld_result_t attn_ring_launch(struct meld_comm *comm, attn_ring_kargs_t *k, cudaStream_t stream) {
  attn_kernel_set_t ks;
  MELD_CHECK(attn_kernels(k->p.head_dim ? k->p.head_dim : 128, &ks));
  const int v = attn_pipe_variant();
  const void *fn = ks.ring[v];
  const size_t smem = ks.smem[v];
  int grid = 0;
  MELD_CHECK(meld_coop_grid(fn, ATTN_THREADS, smem, 0, meld_comm_node_sm_count(comm), &grid));
  meld_proto_dev_t proto = meld_proto_dev(comm);
  void *kargs[] = {&proto, k};
  return meld_launch_coop(fn, grid, ATTN_THREADS, smem, kargs, stream);
}

/* Launch l of the fused ring: K/V heads [l * hpl, ...) and their query heads. */
static meld_result_t attn_ring_fill(struct meld_comm *comm, const meld_attention_args_t *args,
                                    const attn_ring_plan_t *rp, int l, attn_ring_kargs_t *k) {
  const int P = comm->nranks, me = comm->rank;
  const int64_t G = args->heads / args->heads_kv, k0 = (int64_t)l * rp->heads_per_launch;
  const int64_t nk = args->heads_kv - k0 < rp->heads_per_launch ? args->heads_kv - k0 : rp->heads_per_launch;
  memset(k, 0, sizeof *k);
  /* the launch's geometry: its heads as if they were all (maps, O and LSE then placed by the
   * head offsets) */
  meld_attention_args_t sub = *args;
  sub.heads = nk * G;
  sub.heads_kv = nk;
  sub.stride_q = args->stride_q ? args->stride_q : args->heads * args->head_dim;
  sub.stride_o = args->stride_o ? args->stride_o : args->heads * args->head_dim;
  sub.stride_k = sub.stride_v = nk * args->head_dim; /* the staging's tokens */
  attn_params_t *p = &k->p;
  int64_t grid = 0;
  MELD_CHECK(attn_plan_geometry(&sub, p, &grid));
  attn_ring_positions(args, P, me, p);
  p->h_base = (int)(k0 * G);
  p->hk_base = (int)k0;
  p->heads_all = (int)args->heads;
  attn_plan_order(&sub, p);
  const int64_t dense = args->heads_kv * args->head_dim;
  const int64_t sk = args->stride_k ? args->stride_k : dense, sv = args->stride_v ? args->stride_v : dense;
  MELD_CHECK(attn_plan_q_map(args, p));
  MELD_CHECK(attn_plan_kv_maps_at(args, &p->map_k, &p->map_v, args->k, args->v, sk, sv, args->heads_kv, 1, 4));
  uint8_t *st = (uint8_t *)comm->workspace.local;
  const int64_t seg_bytes = args->batch * args->seq_kv * nk * args->head_dim * 2;
  k->stage_v = (int64_t)(P - 1) * seg_bytes;
  MELD_CHECK(attn_plan_kv_maps_at(&sub, &p->map_ks, &p->map_vs, st, st + k->stage_v, nk * args->head_dim,
                                  nk * args->head_dim, nk, P - 1, 5));
  k->rank = me;
  k->nranks = P;
  k->comm_ctas = rp->comm_ctas;
  k->diag = attn_ring_diag();
  k->nk = (int32_t)nk;
  k->chunk_tokens = rp->chunk_tokens;
  k->token_chunks = rp->token_chunks;
  k->k_ld = sk * 2;
  k->v_ld = sv * 2;
  k->chunks = (uint32_t)(args->batch * nk * rp->token_chunks);
  k->items = (uint32_t)grid;
  k->k = (const uint8_t *)args->k;
  k->v = (const uint8_t *)args->v;
  for (int r = 0; r < P; r++) k->stage[r] = (uint8_t *)comm->workspace.peer[r];
  k->stage[me] = st;
  /* what every rank must agree on (the shapes, the launch, the plan) */
  uint64_t h = meld_hash_init();
  const int64_t vals[] = {MELD_OP_RING_ATTENTION, args->batch, args->seq_q, args->seq_kv, args->heads, args->heads_kv,
                          args->head_dim, args->causal, args->zigzag, l, nk, rp->chunk_tokens, rp->comm_ctas,
                          attn_pipe_variant()};
  for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) h = meld_hash_u64(h, (uint64_t)vals[i]);
  k->arg_hash = meld_hash_fold(h);
  return MELD_OK;
}


/* A call this rank cannot make must not leave its peers waiting: the entry handshake alone with
 * a hash no valid call has (the peers report the mismatch; as AG+GEMM's). */
static void attn_ring_refuse(struct meld_comm *comm, cudaStream_t stream) {
  if (comm->nranks < 2 || !comm->proto) return;
  attn_ring_kargs_t k;
  memset(&k, 0, sizeof k);
  k.handshake_only = 1;
  k.arg_hash = meld_hash_fold(meld_hash_u64(meld_hash_init(), 0xbad0a77e6ull));
  (void)attn_ring_launch(comm, &k, stream);
}

/* The ring attention: the fused kernel (attn_ring_kernel) in as many launches as the staging
 * needs, or the gathered fallback (plan). */
extern "C" meld_result_t meld_ring_attention(meld_comm_t comm, const meld_attention_args_t *args,
                                             cudaStream_t stream) {
  meld_error_clear();
  const char *fn = "meld_ring_attention";
  if (!comm) return meld_error(MELD_ERR_INVALID_ARG, "%s: comm is NULL", fn);
  MELD_CHECK(meld_proto_sticky_error(comm, fn));
  meld_result_t vr = attn_args_validate(args);
  if (vr == MELD_OK && (args->q_pos0 != 0 || args->kv_pos0 != 0))
    vr = meld_error(MELD_ERR_INVALID_ARG,
                    "%s: q_pos0 %lld / kv_pos0 %lld must be 0 (the ring sets positions: rank r's part starts at r * "
                    "seq_q)", fn, (long long)args->q_pos0, (long long)args->kv_pos0);
  if (vr == MELD_OK && (args->zigzag < 0 || args->zigzag > 1))
    vr = meld_error(MELD_ERR_INVALID_ARG, "%s: zigzag %d is neither 0 nor 1", fn, args->zigzag);
  if (vr == MELD_OK && args->zigzag && args->seq_q % (2 * ATTN_BM))
    vr = meld_error(MELD_ERR_INVALID_ARG, "%s: zigzag needs a part of a multiple of %d tokens (two halves of whole "
                    "%d-query tiles); seq_q is %lld", fn, 2 * ATTN_BM, ATTN_BM, (long long)args->seq_q);
  if (vr == MELD_OK && args->seq_q != args->seq_kv)
    vr = meld_error(MELD_ERR_INVALID_ARG, "%s: seq_q %lld != seq_kv %lld (each rank holds its part of one sequence for "
                    "Q, K and V)", fn, (long long)args->seq_q, (long long)args->seq_kv);
  const int64_t dense = vr == MELD_OK ? args->heads_kv * args->head_dim : 0;
  const int P = comm->nranks;
  if (vr == MELD_OK && P > ATTN_RING_MAX_RANKS)
    vr = meld_error(MELD_ERR_UNSUPPORTED, "%s: %d ranks (at most %d)", fn, P, ATTN_RING_MAX_RANKS);
  if (vr == MELD_OK && (uint64_t)args->batch * (uint64_t)args->seq_kv * (uint64_t)dense * 2u * (uint64_t)P >=
                           ((uint64_t)1 << 45))
    vr = meld_error(MELD_ERR_INVALID_ARG, "%s: K of %lld x %lld tokens is too large", fn, (long long)args->batch,
                    (long long)args->seq_kv);
  attn_ring_plan_t rp;
  if (vr == MELD_OK) vr = attn_ring_plan_make(args, P, comm->workspace.bytes, meld_comm_node_sm_count(comm), &rp);
  if (vr == MELD_OK && comm->nnodes > 1 && rp.fused) { /* (the fused kernel pushes over NVLink only) */
    rp.fused = 0;
    rp.why = "ranks on several nodes: K and V all-gathered by the inter-node path";
  }
  if (vr != MELD_OK) {
    /* (only the fused path's kernel takes part in a handshake; a rank whose peers run the
     * gathered path's all-gather sees its own mismatch there) */
    if (vr == MELD_ERR_INVALID_ARG || vr == MELD_ERR_UNSUPPORTED) {
      const meld_result_t keep = vr;
      char msg[1024];
      snprintf(msg, sizeof msg, "%s", meld_last_error());
      attn_ring_refuse(comm, stream);
      return meld_error(keep, "%s", msg);
    }
    return vr;
  }
  if (P == 1) return attn_single(args, stream);
  if (args->batch == 0 || args->seq_q == 0) return MELD_OK; /* the same on every rank (collective) */
  if (!rp.fused) {
    MELD_INFO(MELD_SUB_OPS, "%s: gathered path (%s)", fn, rp.why);
    return attn_ring_gathered(comm, args, stream);
  }
  for (int l = 0; l < rp.launches; l++) {
    attn_ring_kargs_t k; /* ~1.5 KB of kernel parameters */
    MELD_CHECK(attn_ring_fill(comm, args, &rp, l, &k));
    meld_result_t r = attn_ring_launch(comm, &k, stream);
    if (r != MELD_OK) {
      meld_error_prefix("%s", fn);
      return r;
    }
  }
  return MELD_OK;
}
