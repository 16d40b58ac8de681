/* moe_net.cu — the MoE ops on a comm whose ranks span nodes (a first, functional version; the
 * scheme and its arithmetic: src/common/moe_net.h; DESIGN.md section 7b).
 *
 * Each op is a short sequence of meld's own calls on the comm's node and rail comms
 * (meld_comm_moe_comms): the rail all-gathers the tokens (and ids, weights) of its ranks, a small
 * kernel renumbers the gathered ids for this node, the one-node op runs on the node comm over the
 * gathered tokens (within the node only routed rows move, as ever), and the combine's per-node
 * partial sums are reduce-scattered over the rail. No host synchronization; graph-capturable once
 * a first call made the comms and the scratch (outside a capture). What crosses nodes is dense:
 * every token to every node, which top-k routing over few nodes nearly needs anyway; a token-sparse
 * exchange inside the fused kernel (the proxy's chunk streams) is the next step.
 *
 * The rail's agreement (net_agree). Every peer of a rail is on another node: a rank whose call
 * was refused launches nothing its rail peers could pair with (they would wait until their
 * deadline; the collectives' argument check across nodes only compares calls that were made), and
 * a node whose op failed on the device is invisible to the other nodes. So every op's FIRST rail
 * call, made by every rank (a refusing one too, before it returns its error), all-gathers a header {op, T, topk, hidden, experts,
 * capacity, n or ffn, status} (status: 1 refused on the host, 2 this rank's node comm aborted on
 * the device), and a one-thread kernel compares the rail's headers: on any difference or status
 * every rank of the rail finds the same verdict and raises the abort of its rail comm and of its
 * node comm (with the same-node peers'), recording why; every later kernel of both comms then ends
 * at its entry or wait. The combine (and meld_moe_ffn) agrees again before its reduce-scatter, so a
 * node whose op failed on the device (e.g. a capacity overflow) stops the sum on every node instead
 * of sending stale partials. */
#include <cuda_runtime.h>
#include <string.h>

#include "comm.h"
#include "common/moe_net.h"
#include "device/signal.cuh" /* meld_fail_record, meld_abort_word */
#include "error.h"
#include "moe_plan.h"
#include "proto.h"

/* ids [n] in place: the gathered ids as node `node` sees them; tok[l] = tokens (this rank's T,
 * at its place among the node's ranks, for the origins). */
__global__ void moe_net_ids_kernel(int32_t *ids, int64_t n, int node, int32_t e_node, int32_t *tok, int l,
                                   int32_t tokens) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    ids[i] = moe_net_local_id(ids[i], node, e_node);
  if (blockIdx.x == 0 && threadIdx.x == 0) tok[l] = tokens;
}

/* row_origin [rows, 2] in place: the node op's (l, gathered slot) as the global (rank, pair);
 * tok[l] = the T of the node's rank l. Rows without an origin (-1) stay. */
__global__ void moe_net_origin_kernel(int32_t *orig, int64_t rows, int32_t topk, const int32_t *tok, int L) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < rows; i += stride) {
    const int32_t l = orig[2 * i];
    if (l < 0 || l >= L || tok[l] <= 0) continue;
    int32_t r, p;
    moe_net_origin(l, orig[2 * i + 1], topk, tok[l], L, &r, &p);
    orig[2 * i] = r, orig[2 * i + 1] = p;
  }
}

typedef struct {
  int64_t w[MOE_NET_HDR_WORDS]; /* op, T, topk, hidden, experts, capacity, n or ffn, status */
} net_hdr_t;
enum { NET_HDR_STATUS = MOE_NET_HDR_WORDS - 1, NET_REFUSED = 1, NET_NODE_ABORTED = 2 };

/* This rank's header into its row; where its node comm is aborted, status |= NET_NODE_ABORTED
 * with the node's abort word in the high half (its reason travels). */
__global__ void moe_net_hdr_kernel(const __grid_constant__ meld_proto_dev_t node, int64_t *row, net_hdr_t h) {
  const uint32_t ab = ld_relaxed_sys_u32(meld_abort_word(&node));
  if (ab != 0u) h.w[NET_HDR_STATUS] |= NET_NODE_ABORTED | (int64_t)((uint64_t)ab << 32);
  for (int i = 0; i < MOE_NET_HDR_WORDS; i++) row[i] = h.w[i];
}

/* The rail's verdict from its N gathered headers (hdr [N][words]; this rank is row me, global
 * rank me L + l): every rank computes the same one from the same rows. Failures, in this order:
 * this rank's rail comm aborted (its gather may have left other calls' rows: no verdict from
 * them; the node comm is aborted with the same code), a row's status (a refused call: the input
 * record; a node whose comm is aborted: that abort, passed on), a row whose shapes differ (the
 * argument record, with the headers' hashes). Each records on both comms and raises their aborts
 * (the node's at its same-node peers too). */
__device__ uint32_t moe_net_hdr_hash(const int64_t *h) {
  uint64_t x = meld_hash_init();
  for (int i = 0; i < NET_HDR_STATUS; i++) x = meld_hash_u64(x, (uint64_t)h[i]);
  return meld_hash_fold(x);
}
__global__ void moe_net_agree_kernel(const __grid_constant__ meld_proto_dev_t node,
                                     const __grid_constant__ meld_proto_dev_t rail, const int64_t *hdr, int N, int me,
                                     int L, int l, uint32_t op) {
  const uint32_t rail_ab = ld_relaxed_sys_u32(meld_abort_word(&rail));
  uint32_t kind = 0, field = 0, pass_on = rail_ab;
  uint64_t want = 0, got = 0;
  int32_t peer = me * L + l;
  const char *label = "moe: the rail comm is aborted"; /* (labels: at most 31 characters) */
  const int64_t *mine = hdr + (size_t)me * MOE_NET_HDR_WORDS;
  for (int q = 0; q < N && !rail_ab && !kind; q++) {
    const int64_t st = hdr[(size_t)q * MOE_NET_HDR_WORDS + NET_HDR_STATUS];
    if (st & NET_REFUSED)
      kind = MELD_FAIL_INPUT, got = (uint64_t)st, peer = q * L + l, label = "moe: a rail rank refused";
    else if (st & NET_NODE_ABORTED)
      kind = MELD_FAIL_ABORTED, got = (uint64_t)st, peer = q * L + l, label = "moe: a node's comm aborted",
      pass_on = (uint32_t)((uint64_t)st >> 32);
  }
  for (int q = 0; q < N && !rail_ab && !kind; q++) {
    const int64_t *h = hdr + (size_t)q * MOE_NET_HDR_WORDS;
    for (int i = 0; i < NET_HDR_STATUS && !kind; i++)
      if (h[i] != mine[i])
        kind = MELD_FAIL_ARGS, field = (uint32_t)i, want = moe_net_hdr_hash(mine), got = moe_net_hdr_hash(h),
        peer = q * L + l, label = "moe: rail ranks' shapes differ";
  }
  if (rail_ab) kind = MELD_FAIL_ABORTED;
  if (!kind) return;
  for (int c = 0; c < 2; c++) {
    const meld_proto_dev_t *p = c ? &node : &rail;
    meld_fail_record(p, op, 0, MELD_ROLE_COMM, 0, kind, MELD_REGION_OTHER, field, peer, label, want, got, 0, pass_on);
    if (kind == MELD_FAIL_ABORTED) meld_raise_abort(p, pass_on); /* (the record raises the others) */
  }
}

static unsigned grid_for(int64_t n) {
  const int64_t b = (n + 255) / 256;
  return (unsigned)(b < 1 ? 1 : b > 1024 ? 1024 : b);
}

/* One call's view: the comms, this rank's place, the scratch. */
typedef struct {
  struct meld_comm *node, *rail;
  int N, L, b, l;
  int64_t T;
  moe_net_scratch_t s;
  uint8_t *base;
} net_call_t;

static const char *k_instead = "make one MoE call with these sizes before capturing";

/* The comms (collective on the first call) and this rank's place. */
static meld_result_t net_begin(struct meld_comm *comm, const char *fn, cudaStream_t st, net_call_t *c) {
  memset(c, 0, sizeof *c);
  meld_error_clear();
  MELD_CHECK(meld_proto_sticky_error(comm, fn));
  MELD_CHECK(meld_comm_moe_comms(comm, fn, st, &c->node, &c->rail));
  c->N = comm->nnodes, c->L = comm->local_size, c->b = comm->node, c->l = comm->local_rank;
  return MELD_OK;
}

/* The scratch for T tokens a rank (same size, so the same buffer, for a dispatch and its combine). */
static meld_result_t net_scratch(struct meld_comm *comm, const char *fn, net_call_t *c, int64_t T, int32_t topk,
                                 int64_t hidden, cudaStream_t st) {
  c->T = T;
  c->s = moe_net_scratch(c->N, c->L, T, topk, hidden);
  void *p = NULL;
  MELD_CHECK(meld_comm_scratch_slot(comm, MELD_SCRATCH_MOE, fn, k_instead, c->s.bytes, st, &p));
  c->base = (uint8_t *)p;
  return MELD_OK;
}

/* rows x row_bytes from src (ld_bytes apart) into this rank's block of dst, then the rail's
 * all-gather in place: dst = the rail's blocks, node by node. */
static meld_result_t net_gather(const net_call_t *c, const void *src, size_t ld_bytes, int64_t rows, size_t row_bytes,
                                void *dst, cudaStream_t st) {
  if (rows <= 0) return MELD_OK; /* (T = 0: 0 on every rank of the rail, which the count's check demands) */
  uint8_t *own = (uint8_t *)dst + (size_t)c->b * (size_t)rows * row_bytes;
  MELD_CUDA_CHECK(cudaMemcpy2DAsync(own, row_bytes, src, ld_bytes, row_bytes, (size_t)rows, cudaMemcpyDeviceToDevice, st));
  return meld_all_gather(c->rail, own, dst, (size_t)rows * row_bytes / 2, MELD_BF16, st);
}

/* x and the ids of the rail into the scratch; the ids renumbered for this node. */
static meld_result_t net_gather_tokens(const net_call_t *c, const void *x, int64_t ldx, const int32_t *ids,
                                       int32_t topk, int32_t experts, int64_t hidden, cudaStream_t st) {
  const size_t row = (size_t)hidden * 2;
  MELD_CHECK(net_gather(c, x, (size_t)(ldx ? ldx : hidden) * 2, c->T, row, c->base + c->s.x, st));
  MELD_CHECK(net_gather(c, ids, (size_t)topk * 4, c->T, (size_t)topk * 4, c->base + c->s.ids, st));
  const int64_t n = (int64_t)c->N * c->T * topk;
  moe_net_ids_kernel<<<grid_for(n), 256, 0, st>>>((int32_t *)(c->base + c->s.ids), n, c->b, experts / c->N,
                                                   (int32_t *)(c->base + c->s.tok), c->l, (int32_t)c->T);
  MELD_CUDA_CHECK(cudaGetLastError());
  return MELD_OK;
}

/* The rail's reduce-scatter of the node's partial sums into out (ld ldo, 0 = hidden). */
static meld_result_t net_reduce(const net_call_t *c, void *out, int64_t ldo, int64_t hidden, cudaStream_t st) {
  if (c->T <= 0) return MELD_OK;
  const size_t count = (size_t)c->T * (size_t)hidden;
  const int dense = !ldo || ldo == hidden;
  void *dst = dense ? out : (void *)(c->base + c->s.out);
  MELD_CHECK(meld_reduce_scatter(c->rail, c->base + c->s.part, dst, count, MELD_BF16, st));
  if (!dense)
    MELD_CUDA_CHECK(cudaMemcpy2DAsync(out, (size_t)ldo * 2, dst, (size_t)hidden * 2, (size_t)hidden * 2, (size_t)c->T,
                                      cudaMemcpyDeviceToDevice, st));
  return MELD_OK;
}

/* The rail's agreement (see the top): this rank's header (status NET_REFUSED where refused),
 * the rail's all-gather of the headers, the verdict. Every rank makes it first in every op. */
static meld_result_t net_agree(const net_call_t *c, uint32_t op, int64_t T, int64_t topk, int64_t hidden,
                               int64_t experts, int64_t capacity, int64_t extra, int refused, cudaStream_t st) {
  const net_hdr_t h = {{(int64_t)op, T, topk, hidden, experts, capacity, extra, refused ? NET_REFUSED : 0}};
  int64_t *all = (int64_t *)(c->base + c->s.hdr);
  const meld_proto_dev_t node = meld_proto_dev(c->node), rail = meld_proto_dev(c->rail);
  moe_net_hdr_kernel<<<1, 1, 0, st>>>(node, all + (size_t)c->b * MOE_NET_HDR_WORDS, h);
  MELD_CUDA_CHECK(cudaGetLastError());
  MELD_CHECK(meld_all_gather(c->rail, all + (size_t)c->b * MOE_NET_HDR_WORDS, all, MOE_NET_HDR_WORDS * 4, MELD_BF16,
                             st)); /* (int64 words as 4 bf16 each) */
  moe_net_agree_kernel<<<1, 1, 0, st>>>(node, rail, all, c->N, c->b, c->L, c->l, op & 0xffu);
  MELD_CUDA_CHECK(cudaGetLastError());
  return MELD_OK;
}

/* A failure on the host after this call's first rail launch: the peers already wait for what
 * follows, so both internal comms are aborted (their waits end; same-node peers see it at once,
 * the other nodes' at their deadline), and r (its message) is returned. */
static meld_result_t net_fail(const net_call_t *c, meld_result_t r) {
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", meld_last_error());
  (void)meld_proto_abort(c->node);
  (void)meld_proto_abort(c->rail);
  return meld_error(r, "%s", msg);
}
#define NET_TRY(c, call)                               \
  do {                                                 \
    const meld_result_t net_r_ = (call);               \
    if (net_r_ != MELD_OK) return net_fail(c, net_r_); \
  } while (0)

/* A refused call (vr, its message): the scratch for the headers alone and the agreement with
 * status NET_REFUSED, so that the rail (and through its verdict the nodes) fails at once; vr. */
static meld_result_t net_refuse(struct meld_comm *comm, const char *fn, net_call_t *c, meld_result_t vr, uint32_t op,
                                cudaStream_t st) {
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", meld_last_error());
  if (net_scratch(comm, fn, c, 0, 1, 8, st) != MELD_OK ||
      net_agree(c, op, 0, 0, 0, 0, 0, 0, 1, st) != MELD_OK) { /* (then the peers reach their deadlines) */
    (void)meld_proto_abort(c->node);
    (void)meld_proto_abort(c->rail);
  }
  return meld_error(vr, "%s", msg);
}

/* The node's dispatch arguments over the scratch's gathered tokens. */
static meld_result_t net_node_args(const net_call_t *c, const meld_moe_args_t *a, meld_moe_args_t *d) {
  return moe_net_args(a, c->N, c->L, c->base + c->s.x, (const int32_t *)(c->base + c->s.ids), d);
}

meld_result_t moe_net_dispatch(struct meld_comm *comm, const meld_moe_args_t *a, cudaStream_t st) {
  const char *fn = "meld_moe_dispatch_gemm";
  const uint32_t op = MELD_OP_MOE_DISPATCH_GEMM;
  net_call_t c;
  MELD_CHECK(net_begin(comm, fn, st, &c));
  meld_moe_args_t d;
  meld_result_t r = moe_net_args(a, c.N, c.L, NULL, NULL, &d);
  if (r == MELD_OK) r = net_scratch(comm, fn, &c, a->tokens, a->topk, a->hidden, st);
  if (r != MELD_OK) return net_refuse(comm, fn, &c, r, op, st);
  NET_TRY(&c, net_agree(&c, op, a->tokens, a->topk, a->hidden, a->experts, a->capacity, a->n * 2 + a->activation, 0,
                        st));
  NET_TRY(&c, net_gather_tokens(&c, a->x, a->ldx, a->topk_ids, a->topk, a->experts, a->hidden, st));
  /* The origins need the T of every rank of the node (a source's slots count its own tokens):
   * all-gathered on the node comm BEFORE the dispatch, whose tables in that comm's workspace the
   * grouped GEMM and the combine read later (a collective's staging there would overwrite them).
   * Whether or not row_origin is asked here: the node's ranks must make the same calls. */
  int32_t *tok = (int32_t *)(c.base + c.s.tok);
  if (c.L > 1) NET_TRY(&c, meld_all_gather(c.node, tok + c.l, tok, 2, MELD_BF16, st)); /* (an int32 as 2 bf16) */
  NET_TRY(&c, net_node_args(&c, a, &d));
  NET_TRY(&c, meld_moe_dispatch_gemm(c.node, &d, st));
  if (a->row_origin) {
    moe_net_origin_kernel<<<grid_for(a->capacity), 256, 0, st>>>(a->row_origin, a->capacity, a->topk, tok, c.L);
    NET_TRY(&c, cudaGetLastError() == cudaSuccess ? MELD_OK
                                                  : meld_error(MELD_ERR_CUDA, "%s: the origins' kernel did not launch", fn));
  }
  return MELD_OK;
}

meld_result_t moe_net_grouped_gemm(struct meld_comm *comm, const meld_moe_gemm_args_t *g, cudaStream_t st) {
  const char *fn = "meld_moe_grouped_gemm";
  if (!g || !g->dispatch) return meld_error(MELD_ERR_INVALID_ARG, "%s: args or their dispatch is NULL", fn);
  net_call_t c; /* (local to the node's rank: no agreement, no peer waits for it) */
  MELD_CHECK(net_begin(comm, fn, st, &c));
  const meld_moe_args_t *a = g->dispatch;
  meld_moe_args_t d;
  MELD_CHECK(moe_net_args(a, c.N, c.L, NULL, NULL, &d));
  MELD_CHECK(net_scratch(comm, fn, &c, a->tokens, a->topk, a->hidden, st)); /* (the dispatch's: no allocation) */
  MELD_CHECK(net_node_args(&c, a, &d));
  meld_moe_gemm_args_t gn = *g;
  gn.dispatch = &d;
  return meld_moe_grouped_gemm(c.node, &gn, st);
}

meld_result_t moe_net_combine(struct meld_comm *comm, const meld_moe_combine_args_t *cb, cudaStream_t st) {
  const char *fn = "meld_moe_combine";
  const uint32_t op = MELD_OP_MOE_COMBINE;
  net_call_t c;
  MELD_CHECK(net_begin(comm, fn, st, &c));
  meld_moe_args_t d;
  meld_result_t r = cb && cb->dispatch ? moe_net_args(cb->dispatch, c.N, c.L, NULL, NULL, &d)
                                       : meld_error(MELD_ERR_INVALID_ARG, "%s: args or their dispatch is NULL", fn);
  meld_moe_combine_args_t cn;
  if (r == MELD_OK) {
    cn = *cb;
    cn.dispatch = &d;
    r = moe_combine_validate(&cn, c.L); /* (the user's y2, weights, out; N T x topk <= capacity) */
    if (r != MELD_OK) meld_error_prefix("across %d nodes (each node's call on %lld gathered tokens)", c.N, (long long)d.tokens);
  }
  if (r == MELD_OK) r = net_scratch(comm, fn, &c, cb->dispatch->tokens, d.topk, d.hidden, st);
  if (r != MELD_OK) return net_refuse(comm, fn, &c, r, op, st);
  const meld_moe_args_t *a = cb->dispatch;
  NET_TRY(&c, net_agree(&c, op, a->tokens, a->topk, a->hidden, a->experts, a->capacity, 0, 0, st));
  NET_TRY(&c, net_gather(&c, cb->topk_weights, (size_t)d.topk * 4, c.T, (size_t)d.topk * 4, c.base + c.s.wt, st));
  NET_TRY(&c, net_node_args(&c, a, &d));
  cn.topk_weights = (const float *)(c.base + c.s.wt);
  cn.out = c.base + c.s.part, cn.ldo = 0;
  NET_TRY(&c, meld_moe_combine(c.node, &cn, st));
  /* (again, with every node's state after its op: no stale partial enters the sum) */
  NET_TRY(&c, net_agree(&c, op | 0x100u, a->tokens, a->topk, a->hidden, a->experts, a->capacity, 0, 0, st));
  NET_TRY(&c, net_reduce(&c, cb->out, cb->ldo, d.hidden, st));
  return MELD_OK;
}

meld_result_t moe_net_ffn(struct meld_comm *comm, const meld_moe_ffn_args_t *f, cudaStream_t st) {
  const char *fn = "meld_moe_ffn";
  const uint32_t op = MELD_OP_MOE_FFN;
  net_call_t c;
  MELD_CHECK(net_begin(comm, fn, st, &c));
  meld_result_t r = f ? MELD_OK : meld_error(MELD_ERR_INVALID_ARG, "%s: args is NULL", fn);
  meld_moe_ffn_args_t fa;
  if (r == MELD_OK) { /* (the node's call with the user's pointers: checks them, and N T x topk <= capacity) */
    const int P = c.N * c.L;
    if (f->experts < P || f->experts % P)
      r = meld_error(MELD_ERR_INVALID_ARG, "%s: experts %d is not a positive multiple of the %d ranks (%d nodes x %d)", fn,
                     f->experts, P, c.N, c.L);
    fa = *f;
    fa.tokens = f->tokens * c.N, fa.experts = f->experts / c.N;
    meld_moe_args_t d;
    meld_moe_gemm_args_t g;
    meld_moe_combine_args_t cb;
    if (r == MELD_OK && f->tokens < 0) r = meld_error(MELD_ERR_INVALID_ARG, "%s: tokens %lld < 0", fn, (long long)f->tokens);
    if (r == MELD_OK && (r = moe_ffn_split(&fa, c.L, &d, &g, &cb)) != MELD_OK)
      meld_error_prefix("across %d nodes (each node's call on %lld gathered tokens, with its %d experts)", c.N,
                        (long long)fa.tokens, fa.experts);
  }
  if (r == MELD_OK) r = net_scratch(comm, fn, &c, f->tokens, f->topk, f->hidden, st);
  if (r != MELD_OK) return net_refuse(comm, fn, &c, r, op, st);
  NET_TRY(&c, net_agree(&c, op, f->tokens, f->topk, f->hidden, f->experts, f->capacity, f->ffn, 0, st));
  NET_TRY(&c, net_gather_tokens(&c, f->x, f->ldx, f->topk_ids, f->topk, f->experts, f->hidden, st));
  NET_TRY(&c, net_gather(&c, f->topk_weights, (size_t)f->topk * 4, c.T, (size_t)f->topk * 4, c.base + c.s.wt, st));
  fa.x = c.base + c.s.x, fa.ldx = f->hidden;
  fa.topk_ids = (const int32_t *)(c.base + c.s.ids);
  fa.topk_weights = (const float *)(c.base + c.s.wt);
  fa.out = c.base + c.s.part, fa.ldo = 0;
  NET_TRY(&c, meld_moe_ffn(c.node, &fa, st));
  NET_TRY(&c, net_agree(&c, op | 0x100u, f->tokens, f->topk, f->hidden, f->experts, f->capacity, f->ffn, 0, st));
  NET_TRY(&c, net_reduce(&c, f->out, f->ldo, f->hidden, st));
  return MELD_OK;
}
