/* test_ring_attn.cu — meld_ring_attention with ranks as threads of this process (sharing the GPUs
 * present, as test_inproc does): every rank holds its part of one random sequence (Q, K, V cut
 * from full tensors that every rank generates alike), calls the ring, and checks its O and LSE
 * against the fp32 reference kernel of test_attn.cu run over the FULL K and V with its queries'
 * positions (rank r's part starts at r * seq). Outputs poisoned first; causal and not, GQA,
 * tails (parts not a multiple of 128), batches, head_dim 64, packed QKV (strided Q, K, V), two
 * calls a case with new inputs, a CUDA graph of a call replayed on new inputs, the refused
 * arguments, and ranks that disagree (fused paths). Every rank count runs the paths:
 * the fused kernel (all heads in one launch; one K/V head a launch with one comm CTA, i.e.
 * several launches and calls' staging reuse; PIPE 0) and the gathered fallback.
 * Rank counts: argument 1 (default 2,3,4). */
#include <pthread.h>

#include "attn_ref.h"

#define RING_MAX 8
static int P;
static meld_unique_id g_id;
static int g_ndev;
static pthread_barrier_t g_bar; /* the P rank threads of the running path */
static int g_fused;             /* the running path is the fused kernel's */

typedef struct {
  int B, S, H, HKV, causal, zz; /* S: each rank's part; zz: zigzag layout */
  int D;                        /* head_dim (0 = 128) */
  int packed;                   /* q, k, v views of one [B, S, 3, H, D] buffer (H == HKV) */
} ring_case_t;
static const ring_case_t g_cases[] = {
    {1, 256, 4, 2, 1, 0, 0, 0}, {2, 300, 4, 4, 0, 0, 0, 0}, {1, 1000, 8, 2, 1, 0, 0, 0}, {2, 384, 2, 1, 1, 0, 0, 0}, {1, 128, 2, 2, 0, 0, 0, 0},
    {1, 256, 4, 2, 1, 1, 0, 0}, {2, 1024, 4, 4, 1, 1, 0, 0}, {1, 512, 2, 1, 0, 1, 0, 0},
    {1, 1000, 8, 2, 1, 0, 64, 0}, {2, 512, 4, 4, 1, 1, 64, 0}, /* head_dim 64 */
    {2, 300, 4, 4, 1, 0, 0, 1}, {1, 512, 4, 4, 1, 1, 64, 1},   /* packed QKV (strided K and V) */
};
static int ring_d(const ring_case_t *rc) { return rc->D ? rc->D : 128; }
#define RING_MAX_ELEMS ((size_t)2 * 1000 * 8 * 128 * RING_MAX) /* the largest full Q */

/* This rank's part of each batch's sequence from a full tensor [B, S x P, heads, 128]: piece
 * `rank` of P, or (zigzag) pieces rank and 2P - 1 - rank of 2P. */
static void take_part(uint16_t *dst, const uint16_t *full, const ring_case_t *rc, int heads, int rank,
                      cudaStream_t st) {
  const size_t tok = (size_t)heads * ring_d(rc) * 2, part = (size_t)rc->S * tok, whole = part * P;
  if (!rc->zz) {
    GT_CUDA(cudaMemcpy2DAsync(dst, part, (const char *)full + rank * part, whole, part, rc->B, cudaMemcpyDeviceToDevice, st));
    return;
  }
  const size_t half = part / 2;
  GT_CUDA(cudaMemcpy2DAsync(dst, part, (const char *)full + rank * half, whole, half, rc->B, cudaMemcpyDeviceToDevice, st));
  GT_CUDA(cudaMemcpy2DAsync((char *)dst + half, part, (const char *)full + (2 * P - 1 - rank) * half, whole, half, rc->B,
                            cudaMemcpyDeviceToDevice, st));
}

/* Fresh inputs from `seed` (the same full tensors on every rank), this rank's part of them (and,
 * for a packed case, the same interleaved into qkv), and its outputs poisoned. */
static void new_inputs(const ring_case_t *rc, uint64_t seed, int rank, uint16_t *qf, uint16_t *kf, uint16_t *vf,
                       uint16_t *q, uint16_t *k, uint16_t *v, uint16_t *qkv, uint16_t *o, float *lse, cudaStream_t st) {
  const int64_t D = ring_d(rc), S = (int64_t)rc->S * P;
  const size_t nq = (size_t)rc->B * S * rc->H * D, nk = (size_t)rc->B * S * rc->HKV * D;
  gt_fill_bf16<<<256, 256, 0, st>>>(qf, nq, seed);
  gt_fill_bf16<<<256, 256, 0, st>>>(kf, nk, seed + 1);
  gt_fill_bf16<<<256, 256, 0, st>>>(vf, nk, seed + 2);
  take_part(q, qf, rc, rc->H, rank, st);
  take_part(k, kf, rc, rc->HKV, rank, st);
  take_part(v, vf, rc, rc->HKV, rank, st);
  if (rc->packed) { /* [B, S, 3, H, D]: the dense parts interleaved token by token */
    const size_t row = (size_t)rc->H * D * 2, rows = (size_t)rc->B * rc->S;
    GT_CUDA(cudaMemcpy2DAsync(qkv, 3 * row, q, row, row, rows, cudaMemcpyDeviceToDevice, st));
    GT_CUDA(cudaMemcpy2DAsync((char *)qkv + row, 3 * row, k, row, row, rows, cudaMemcpyDeviceToDevice, st));
    GT_CUDA(cudaMemcpy2DAsync((char *)qkv + 2 * row, 3 * row, v, row, row, rows, cudaMemcpyDeviceToDevice, st));
  }
  GT_CUDA(cudaMemsetAsync(o, 0xff, (size_t)rc->B * rc->S * rc->H * D * 2, st));
  GT_CUDA(cudaMemsetAsync(lse, 0xff, (size_t)rc->B * rc->H * rc->S * 4, st));
}

/* The fp32 reference for this rank's queries over the whole sequence (positions by layout). */
static void ring_ref(const uint16_t *q, const uint16_t *kf, const uint16_t *vf, float *oref, float *lref,
                     const ring_case_t *rc, int rank, cudaStream_t st) {
  const int64_t D = ring_d(rc), S = (int64_t)rc->S * P, h = rc->S / 2;
  const int64_t warps = (int64_t)rc->B * rc->H * rc->S;
  const int64_t qp0 = rc->zz ? rank * h : (int64_t)rank * rc->S, qp1 = (2 * P - 1 - rank) * h - h;
  ref_attn<<<(unsigned)((warps + 7) / 8), 256, 0, st>>>((const __nv_bfloat16 *)q, (const __nv_bfloat16 *)kf,
                                                         (const __nv_bfloat16 *)vf, oref, lref, rc->B, rc->S, (int)S,
                                                         rc->H, rc->HKV, rc->H * D, rc->HKV * D, rc->HKV * D, rc->causal,
                                                         1.0f / sqrtf((float)D), qp0, 0, rc->zz ? h : 0, qp1, (int)D);
}

static void *ring_rank(void *arg) {
  const int rank = (int)(intptr_t)arg;
  meld_config_t cfg;
  meld_comm_t comm;
  cudaStream_t st;
  if (gt_thread_comm(rank, P, g_ndev, g_id, 5000, &cfg, &comm, &st)) return NULL;
  /* everything allocated before the first collective (a cudaMalloc / cudaFree may wait for the
   * device, i.e. for the other ranks' kernels) */
  uint16_t *qf, *kf, *vf, *q, *k, *v, *o, *qkv;
  float *lse, *oref, *lref;
  const size_t full = RING_MAX_ELEMS, part = full / 2; /* a part is at most half the full tensor */
  GT_CUDA(cudaMalloc(&qf, full * 2));
  GT_CUDA(cudaMalloc(&kf, full * 2));
  GT_CUDA(cudaMalloc(&vf, full * 2));
  GT_CUDA(cudaMalloc(&q, part * 2));
  GT_CUDA(cudaMalloc(&qkv, 3 * part * 2));
  GT_CUDA(cudaMalloc(&k, part * 2));
  GT_CUDA(cudaMalloc(&v, part * 2));
  GT_CUDA(cudaMalloc(&o, part * 2));
  GT_CUDA(cudaMalloc(&oref, part * 4));
  GT_CUDA(cudaMalloc(&lse, part / 128 * 4));
  GT_CUDA(cudaMalloc(&lref, part / 128 * 4));
  for (size_t ci = 0; ci < sizeof g_cases / sizeof g_cases[0]; ci++)
    for (int call = 0; call < 2; call++) {
      const ring_case_t *rc = &g_cases[ci];
      const int64_t D = ring_d(rc), S = (int64_t)rc->S * P;
      const uint64_t seed = 7000 + 100 * ci + 10 * call; /* the same on every rank */
      new_inputs(rc, seed, rank, qf, kf, vf, q, k, v, qkv, o, lse, st);
      const size_t no = (size_t)rc->B * rc->S * rc->H * D;
      meld_attention_args_t a;
      memset(&a, 0, sizeof a);
      a.q = q, a.k = k, a.v = v, a.o = o, a.lse = lse;
      if (rc->packed) { /* Q, K and V read from the interleaved buffer (strides 3 x H x D) */
        a.q = qkv, a.k = qkv + rc->H * D, a.v = qkv + 2 * rc->H * D;
        a.stride_q = a.stride_k = a.stride_v = 3 * rc->H * D;
      }
      a.batch = rc->B, a.seq_q = a.seq_kv = rc->S, a.heads = rc->H, a.heads_kv = rc->HKV, a.head_dim = D;
      a.causal = rc->causal;
      a.zigzag = rc->zz;
      GT_MELD(meld_ring_attention(comm, &a, st));
      ring_ref(q, kf, vf, oref, lref, rc, rank, st);
      GT_CUDA(cudaStreamSynchronize(st));
      char name[96];
      snprintf(name, sizeof name, "ring P=%d B %d part %d H %d/%d D %d causal %d%s%s", P, rc->B, rc->S, rc->H, rc->HKV,
               (int)D, rc->causal, rc->zz ? " zigzag" : "", rc->packed ? " packed" : "");
      attn_case_t c = {name, rc->B, rc->S, (int)S, rc->H, rc->HKV, rc->causal, 0, 0, 0.f, 0, 0, (int)D};
      attn_bufs_t x;
      memset(&x, 0, sizeof x);
      x.o = o, x.lse = lse, x.oref = oref, x.lref = lref, x.o_elems = no, x.a = a;
      compare(&c, &x, call ? "second call" : "first call");
      if ((ci != 0 && ci != 6 && ci != 9) || call != 1) continue;
      /* the same case captured once as a CUDA graph, replayed on new inputs (the fused path
       * allocates nothing, takes its epoch on the device) */
      cudaGraph_t graph;
      cudaGraphExec_t exec;
      GT_CUDA(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
      const meld_result_t gr = meld_ring_attention(comm, &a, st);
      GT_CUDA(cudaStreamEndCapture(st, &graph));
      GT_MELD(gr);
      GT_CUDA(cudaGraphInstantiate(&exec, graph, 0));
      /* uploaded, and every rank past its upload, before any replays: a graph's first launch
       * may wait for the device while the peers' kernels wait for this rank's (DESIGN section 5) */
      GT_CUDA(cudaGraphUpload(exec, st));
      GT_CUDA(cudaStreamSynchronize(st));
      pthread_barrier_wait(&g_bar);
      for (int rep = 0; rep < 2; rep++) {
        new_inputs(rc, seed + 1000 + 10 * rep, rank, qf, kf, vf, q, k, v, qkv, o, lse, st);
        GT_CUDA(cudaGraphLaunch(exec, st));
        ring_ref(q, kf, vf, oref, lref, rc, rank, st);
        GT_CUDA(cudaStreamSynchronize(st));
        GT_MELD(meld_comm_check(comm));
        compare(&c, &x, rep ? "graph replay 2" : "graph replay 1");
      }
      GT_CUDA(cudaGraphExecDestroy(exec));
      GT_CUDA(cudaGraphDestroy(graph));
    }
  /* refused: positions set by the caller, seq_q != seq_kv, strided K (every rank alike) */
  meld_attention_args_t a;
  memset(&a, 0, sizeof a);
  a.q = q, a.k = k, a.v = v, a.o = o, a.batch = 1, a.seq_q = a.seq_kv = 128, a.heads = 2, a.heads_kv = 2;
  a.head_dim = 128;
  a.q_pos0 = 5;
  GT_CHECK(meld_ring_attention(comm, &a, st) == MELD_ERR_INVALID_ARG && strstr(meld_last_error(), "must be 0"),
           "ring: q_pos0 accepted: %s", meld_last_error());
  a.q_pos0 = 0, a.seq_kv = 64;
  GT_CHECK(meld_ring_attention(comm, &a, st) == MELD_ERR_INVALID_ARG && strstr(meld_last_error(), "seq_q 128 != seq_kv"),
           "ring: seq_q != seq_kv accepted: %s", meld_last_error());
  a.seq_kv = 128, a.zigzag = 1; /* a part of 128: halves of 64 */
  GT_CHECK(meld_ring_attention(comm, &a, st) == MELD_ERR_INVALID_ARG && strstr(meld_last_error(), "multiple of 256"),
           "ring: zigzag with a part of 128 accepted: %s", meld_last_error());
  GT_CHECK(meld_attention(&a, st) == MELD_ERR_INVALID_ARG && strstr(meld_last_error(), "zigzag"),
           "meld_attention: zigzag accepted: %s", meld_last_error());
  a.zigzag = 0;
  a.stride_k = 260; /* not a multiple of 8 */
  GT_CHECK(meld_ring_attention(comm, &a, st) == MELD_ERR_INVALID_ARG && strstr(meld_last_error(), "stride_k"),
           "ring: stride_k 260 accepted: %s", meld_last_error());
  GT_CHECK(meld_ring_attention(NULL, &a, st) == MELD_ERR_INVALID_ARG, "ring: NULL comm accepted");
  GT_MELD(meld_comm_check(comm));
  GT_CUDA(cudaStreamSynchronize(st));
  if (g_fused) {
    /* ranks that disagree (rank 0 causal, the others not): every rank's call fails fast with the
     * argument mismatch, none hangs (the comm is aborted: last) */
    a.stride_k = 0, a.causal = rank == 0;
    const double t0 = gt_now_s();
    GT_MELD(meld_ring_attention(comm, &a, st));
    GT_CUDA(cudaStreamSynchronize(st));
    const meld_result_t r = meld_comm_check(comm);
    const double el = gt_now_s() - t0;
    GT_CHECK(r == MELD_ERR_ABORTED && strstr(meld_last_error(), "arguments differ"),
             "ring: ranks with different arguments: %s: %s", meld_strerror(r), meld_last_error());
    GT_CHECK(el < 2.0, "ring: the mismatch took %.2f s to fail", el);
  }
  cudaFree(qf), cudaFree(kf), cudaFree(vf), cudaFree(q), cudaFree(k), cudaFree(v), cudaFree(o), cudaFree(qkv);
  cudaFree(lse), cudaFree(oref), cudaFree(lref);
  GT_CUDA(cudaStreamDestroy(st));
  (void)meld_comm_destroy(comm);
  return NULL;
}

int main(int argc, char **argv) {
  gt_inproc_env();
  const char *list = argc > 1 ? argv[1] : "2,3,4";
  if (!gt_hopper(&g_ndev)) {
    printf("test_ring_attn: no Hopper GPU: skipped\n[  PASSED  ] 0 test(s).\n");
    return 0;
  }
  for (const char *s = list;;) {
    P = gt_next_count(&s, RING_MAX, "test_ring_attn", list);
    if (P <= 0) {
      if (P < 0) return 2;
      break;
    }
    if (g_ndev < P) setenv("MELD_SHARE_GPU", "1", 1);
    /* the paths (environment set between runs, while no rank thread lives) */
    static const struct {
      const char *name, *mode, *heads, *ctas, *pipe;
    } paths[] = {{"fused", NULL, NULL, NULL, NULL},
                 {"fused, one K/V head a launch, one comm CTA", NULL, "1", "1", NULL},
                 {"fused, PIPE 0", NULL, NULL, NULL, "0"},
                 {"gathered", "unfused", NULL, NULL, NULL}};
    for (size_t pi = 0; pi < sizeof paths / sizeof paths[0]; pi++) {
      const char *names[] = {"MELD_RING_ATTN", "MELD_RING_ATTN_HEADS", "MELD_RING_ATTN_COMM_CTAS", "MELD_ATTN_PIPE"};
      const char *vals[] = {paths[pi].mode, paths[pi].heads, paths[pi].ctas, paths[pi].pipe};
      for (int e = 0; e < 4; e++) {
        if (vals[e]) setenv(names[e], vals[e], 1);
        else unsetenv(names[e]);
      }
      g_fused = paths[pi].mode == NULL;
      printf("test_ring_attn: %d ranks as threads on %d GPU(s), %s\n", P, g_ndev < P ? g_ndev : P, paths[pi].name);
      fflush(stdout);
      if (meld_get_unique_id(&g_id) != MELD_OK) {
        printf("meld_get_unique_id: %s\n", meld_last_error());
        return 1;
      }
      gt_run_ranks(P, ring_rank, &g_bar);
    }
  }
  return gt_summary("test_ring_attn");
}
