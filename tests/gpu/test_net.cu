/* test_net.cu — the collectives of a comm that spans several (emulated) nodes: ranks get
 * MELD_NODE_ID = rank / ranks_per_node, so bytes between nodes go through the proxy (pinned
 * staging, command ring written by the kernel, tcp) and bytes within a node through the
 * workspace. Layouts: 2 nodes x 1 rank (every peer remote), 3 nodes x 1 rank, and 2 nodes x 2
 * ranks (both kinds in one call) where 3 / 4 ranks are available (tests/gpu/run_shared.sh 4
 * test_net on one GPU). At 2 x 2 the all_reduce / reduce_scatter / all_gather go through the
 * hierarchy (coll_net.cu net_hier: within the node, then across; references sum the same way),
 * and again flat with MELD_NET_HIER=0.
 * MELD_NET_CHUNK_BYTES = 64 KiB, so the larger counts take many chunks per pair (more than the
 * MELD_NET_SLOTS slots: credits are exercised).
 *
 * Checks (bitwise, against host references from the same generator; outputs poisoned first):
 * all_gather (and in place), all_to_all, reduce_scatter and all_reduce (in and out of place, and
 * at a count that is not a multiple of the ranks: shorter or empty last parts; fp32 sums in rank
 * order rounded once, as the device does) at 1, 1000 and 70001 elements in
 * bf16 and fp32; all_to_allv with uneven per-pair counts (some empty, some many chunks);
 * 40 back-to-back all_reduces with changing inputs; CUDA-graph replays with new inputs; what is
 * refused (a forced fused GEMM+RS) with its sentence; meld_ag_gemm / meld_gemm_rs / meld_gemm_ar / meld_ring_attention (their unfused
 * paths) against fp32 references; the MoE ops across nodes (moe_net.cu: dispatch + grouped GEMM
 * with the layout and every row's origin checked, combine with out's ld > hidden, the three
 * replayed from a CUDA graph, meld_moe_ffn with x's ld > hidden; a rank whose dispatch is refused
 * makes every rank fail at once through the rail's agreement, not by its deadline; at 2 x 2 with
 * the hierarchy's comms and with MELD_NET_HIER=0, the MoE ops' own); meld_comm_split into children across and within nodes (an
 * all_reduce on each); and a rank that never calls: MELD_ERR_TIMEOUT on the other,
 * no hang; ranks of two nodes calling different sizes: both fail at once with the argument record
 * (the check across nodes on each pair's first chunk). */
#include <pthread.h>

#include "attn_ref.h"          /* (includes gpu_test.h) */
#include "common/ref_coll.c" /* the GPU rule links no tests/common objects */
#include "common/ref_gemm.c"

static int g_per_node = 1;
static const char *g_chunk = "65536"; /* MELD_NET_CHUNK_BYTES; NULL: the default */

static void env_nodes(int rank) {
  char b[16];
  snprintf(b, sizeof b, "%d", rank / g_per_node);
  setenv("MELD_NODE_ID", b, 1);
  if (g_chunk) setenv("MELD_NET_CHUNK_BYTES", g_chunk, 1);
  else unsetenv("MELD_NET_CHUNK_BYTES");
}

static meld_config_t test_config(void) {
  meld_config_t cfg = MELD_CONFIG_INIT;
  cfg.bootstrap_timeout_ms = 30000;
  cfg.workspace_bytes = (size_t)32 << 20;
  return cfg;
}

/* This rank's comm (test_config, the launcher's layout) and a stream for it; NULL on failure
 * (checked). */
static meld_comm_t open_comm(cudaStream_t *st) {
  meld_config_t cfg = test_config();
  meld_comm_t comm = NULL;
  GT_MELD(meld_comm_init_env(&comm, &cfg));
  if (comm) GT_CUDA(cudaStreamCreateWithFlags(st, cudaStreamNonBlocking));
  return comm;
}

/* Element i of rank r's input for case `seed`, as stored (bf16 or fp32 bits). */
static float val(int r, uint64_t i, uint64_t seed) {
  uint64_t s = (seed * 1000003ull + (uint64_t)r) * 0x9E3779B97F4A7C15ull + i * 0xD1B54A32D192ED03ull + 1;
  float f = gt_rand_f(&s);
  return fabsf(f) < 1.0f / 64 ? 0.5f : f;
}
static void fill(void *h, uint64_t n, int dtype, int r, uint64_t seed) {
  for (uint64_t i = 0; i < n; i++) ref_store(h, (meld_dtype_t)dtype, i, val(r, i, seed));
}
/* 1 if a comm of P ranks, per_node a node, sums hierarchically (comm.h hier_node / hier_rail:
 * several nodes of several ranks, MELD_NET_HIER not 0). */
static int hier_on(int P, int per_node) {
  const char *h = getenv("MELD_NET_HIER");
  return per_node > 1 && P / per_node > 1 && !(h && !strcmp(h, "0"));
}
/* The same for ranks that are threads of one process: the hierarchy only with MELD_NET_HIER=2
 * (comm.c hier_create). */
static int thread_hier_on(int P, int per_node) {
  const char *h = getenv("MELD_NET_HIER");
  return per_node > 1 && P / per_node > 1 && h && !strcmp(h, "2");
}
/* The sum of P sources of n elements as the comm computes it into out: flat (fp32 from 0 in
 * rank order, rounded once: ref_all_reduce_f32), or hierarchical (each node's ranks so, rounded
 * to the dtype, then the nodes' sums so: coll_net.cu net_hier). */
static void ref_sum(int P, int per_node, int hier, const void **src, void *out, uint64_t n, int dtype) {
  if (!hier) {
    ref_all_reduce_f32(P, src, out, n, (meld_dtype_t)dtype);
    return;
  }
  const int N = P / per_node;
  const size_t bytes = n * ref_elem_bytes((meld_dtype_t)dtype);
  uint8_t *node = (uint8_t *)malloc(bytes * N);
  const void *ns[64];
  for (int k = 0; k < N; k++) {
    ref_all_reduce_f32(per_node, src + k * per_node, node + k * bytes, n, (meld_dtype_t)dtype);
    ns[k] = node + k * bytes;
  }
  ref_all_reduce_f32(N, ns, out, n, (meld_dtype_t)dtype);
  free(node);
}
/* The same for one fp32 element of every rank (v[q]). */
static float sum_f32(const float *v, int P, int per_node, int hier) {
  float s = 0.0f;
  if (!hier) {
    for (int q = 0; q < P; q++) s += v[q];
    return s;
  }
  for (int k = 0; k < P / per_node; k++) {
    float t = 0.0f;
    for (int l = 0; l < per_node; l++) t += v[k * per_node + l];
    s += t;
  }
  return s;
}
/* The all-reduce of every rank's fill(q, seed) of n elements as the comm computes it (a count
 * that is not a multiple of the node size takes the flat path). */
static void all_reduce_ref(void *out, uint64_t n, int dtype, int P, uint64_t seed) {
  const size_t bytes = n * ref_elem_bytes((meld_dtype_t)dtype);
  uint8_t *all = (uint8_t *)malloc(bytes * P);
  const void *src[64];
  for (int q = 0; q < P; q++) fill(all + q * bytes, n, dtype, q, seed), src[q] = all + q * bytes;
  ref_sum(P, g_per_node, hier_on(P, g_per_node) && n % (uint64_t)g_per_node == 0, src, out, n, dtype);
  free(all);
}

/* Elements rank r sends rank q in the all_to_allv case: 0 for some pairs, up to ~10 chunks of
 * 64 KiB for others (the same function on every rank). */
static size_t a2av_count(int r, int q) {
  if ((r + 2 * q) % 3 == 0) return 0;
  return 1000u * (1u + 53u * (unsigned)((r * 5 + q) % 4)) + (unsigned)(r + q);
}

static int same(const void *a, const void *b, size_t bytes, const char *what) {
  if (memcmp(a, b, bytes) == 0) return 1;
  size_t i = 0;
  while (((const uint8_t *)a)[i] == ((const uint8_t *)b)[i]) i++;
  GT_CHECK(0, "%s: first difference at byte %zu of %zu", what, i, bytes);
  return 0;
}

/* One case of every collective for (count, dtype); seed varies the data. */
static void one_case(meld_comm_t comm, int rank, int P, uint64_t count, int dtype, uint64_t seed,
                     cudaStream_t st) {
  const size_t es = dtype == MELD_BF16 ? 2 : 4, B = count * es;
  const char *dn = dtype == MELD_BF16 ? "bf16" : "fp32";
  uint8_t *hs = (uint8_t *)malloc(B * P), *hr = (uint8_t *)malloc(B * P), *ref = (uint8_t *)malloc(B * P);
  uint8_t *in = (uint8_t *)malloc(B * P);
  void *ds = NULL, *dr = NULL;
  GT_CUDA(cudaMalloc(&ds, B * P));
  GT_CUDA(cudaMalloc(&dr, B * P));
  char what[128];
  /* all_gather: rank r's block is fill(r) */
  fill(hs, count, dtype, rank, seed);
  GT_CUDA(cudaMemcpy(ds, hs, B, cudaMemcpyHostToDevice));
  GT_CUDA(cudaMemsetAsync(dr, 0xff, B * P, st));
  GT_MELD(meld_all_gather(comm, ds, dr, count, (meld_dtype_t)dtype, st));
  GT_CUDA(cudaStreamSynchronize(st));
  GT_CUDA(cudaMemcpy(hr, dr, B * P, cudaMemcpyDeviceToHost));
  for (int q = 0; q < P; q++) fill(ref + q * B, count, dtype, q, seed);
  snprintf(what, sizeof what, "all_gather %s count %llu", dn, (unsigned long long)count);
  same(hr, ref, B * P, what);
  /* in place: send = recv + rank * B */
  GT_CUDA(cudaMemsetAsync(dr, 0xff, B * P, st));
  GT_CUDA(cudaStreamSynchronize(st)); /* (st does not order with cudaMemcpy's legacy stream) */
  GT_CUDA(cudaMemcpy((uint8_t *)dr + rank * B, hs, B, cudaMemcpyHostToDevice));
  GT_MELD(meld_all_gather(comm, (uint8_t *)dr + rank * B, dr, count, (meld_dtype_t)dtype, st));
  GT_CUDA(cudaStreamSynchronize(st));
  GT_CUDA(cudaMemcpy(hr, dr, B * P, cudaMemcpyDeviceToHost));
  snprintf(what, sizeof what, "all_gather in place %s count %llu", dn, (unsigned long long)count);
  same(hr, ref, B * P, what);
  /* all_to_all: rank r's send = fill(r, seed + 1) over P blocks; block q goes to q */
  fill(hs, count * P, dtype, rank, seed + 1);
  GT_CUDA(cudaMemcpy(ds, hs, B * P, cudaMemcpyHostToDevice));
  GT_CUDA(cudaMemsetAsync(dr, 0xff, B * P, st));
  GT_MELD(meld_all_to_all(comm, ds, dr, count, (meld_dtype_t)dtype, st));
  GT_CUDA(cudaStreamSynchronize(st));
  GT_CUDA(cudaMemcpy(hr, dr, B * P, cudaMemcpyDeviceToHost));
  for (int q = 0; q < P; q++) {
    fill(in, count * P, dtype, q, seed + 1);
    memcpy(ref + q * B, in + rank * B, B);
  }
  snprintf(what, sizeof what, "all_to_all %s count %llu", dn, (unsigned long long)count);
  same(hr, ref, B * P, what);
  /* reduce_scatter: sum over q of q's block `rank` (same data as all_to_all) */
  GT_CUDA(cudaMemsetAsync(dr, 0xff, B, st));
  GT_MELD(meld_reduce_scatter(comm, ds, dr, count, (meld_dtype_t)dtype, st));
  GT_CUDA(cudaStreamSynchronize(st));
  GT_CUDA(cudaMemcpy(hr, dr, B, cudaMemcpyDeviceToHost));
  {
    const void *blocks[64];
    for (int q = 0; q < P; q++) blocks[q] = ref + q * B;
    ref_sum(P, g_per_node, hier_on(P, g_per_node), blocks, in, count, dtype);
  }
  snprintf(what, sizeof what, "reduce_scatter %s count %llu", dn, (unsigned long long)count);
  same(hr, in, B, what);
  /* all_reduce of P * count elements, out of place then in place */
  const uint64_t n = count * P;
  fill(hs, n, dtype, rank, seed + 2);
  GT_CUDA(cudaMemcpy(ds, hs, B * P, cudaMemcpyHostToDevice));
  GT_CUDA(cudaMemsetAsync(dr, 0xff, B * P, st));
  GT_MELD(meld_all_reduce(comm, ds, dr, n, (meld_dtype_t)dtype, st));
  GT_MELD(meld_all_reduce(comm, ds, ds, n, (meld_dtype_t)dtype, st));
  GT_CUDA(cudaStreamSynchronize(st));
  all_reduce_ref(ref, n, dtype, P, seed + 2);
  GT_CUDA(cudaMemcpy(hr, dr, B * P, cudaMemcpyDeviceToHost));
  snprintf(what, sizeof what, "all_reduce %s count %llu", dn, (unsigned long long)n);
  same(hr, ref, B * P, what);
  GT_CUDA(cudaMemcpy(hr, ds, B * P, cudaMemcpyDeviceToHost));
  snprintf(what, sizeof what, "all_reduce in place %s count %llu", dn, (unsigned long long)n);
  same(hr, ref, B * P, what);
  /* n - 1 elements: not a multiple of P, so the last parts are shorter (or empty) */
  if (n > 1) {
    const uint64_t n1 = n - 1;
    fill(hs, n1, dtype, rank, seed + 3);
    GT_CUDA(cudaMemcpy(ds, hs, n1 * es, cudaMemcpyHostToDevice));
    GT_CUDA(cudaMemsetAsync(dr, 0xff, B * P, st));
    GT_MELD(meld_all_reduce(comm, ds, dr, n1, (meld_dtype_t)dtype, st));
    GT_CUDA(cudaStreamSynchronize(st));
    all_reduce_ref(ref, n1, dtype, P, seed + 3);
    GT_CUDA(cudaMemcpy(hr, dr, n1 * es, cudaMemcpyDeviceToHost));
    snprintf(what, sizeof what, "all_reduce %s count %llu (uneven parts)", dn, (unsigned long long)n1);
    same(hr, ref, n1 * es, what);
  }
  cudaFree(ds);
  cudaFree(dr);
  free(hs), free(hr), free(ref), free(in);
}

static void rank_collectives(int rank, int P) {
  meld_config_t cfg = test_config();
  meld_comm_t comm = NULL;
  GT_MELD(meld_comm_init_env(&comm, &cfg));
  if (!comm) return;
  meld_comm_info_t info;
  GT_MELD(meld_comm_info(comm, &info));
  GT_CHECK(info.nnodes == P / g_per_node && info.local_size == g_per_node, "nnodes %d local_size %d",
           info.nnodes, info.local_size);
  const char *want_tp = getenv("MELD_NET_TRANSPORT"); /* (auto: ibv where a NIC is, else tcp) */
  GT_CHECK(want_tp && strcmp(want_tp, "auto") != 0 && *want_tp ? strcmp(info.net_transport, want_tp) == 0
                                                               : strcmp(info.net_transport, "tcp") == 0 ||
                                                                     strcmp(info.net_transport, "ibv") == 0,
           "net_transport \"%s\" (MELD_NET_TRANSPORT %s)", info.net_transport, want_tp ? want_tp : "unset");
  cudaStream_t st;
  GT_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  const double t0 = gt_now_s();
  const uint64_t counts[] = {1, 1000, 70001};
  for (int c = 0; c < 3; c++)
    for (int dt = 0; dt < 2; dt++) one_case(comm, rank, P, counts[c], dt, 10 + c, st);
  gt_log("every collective at 3 counts x 2 dtypes: %.2f s", gt_now_s() - t0);

  /* 40 back-to-back all_reduces (fp32, 5000 elements: one launch each), inputs changing */
  const int reps = 40;
  const uint64_t n = 5000;
  float *d_in = NULL, *d_out = NULL, *h = (float *)malloc(n * 4 * reps), *hr = (float *)malloc(n * 4 * reps);
  GT_CUDA(cudaMalloc(&d_in, n * 4 * reps));
  GT_CUDA(cudaMalloc(&d_out, n * 4 * reps));
  for (int i = 0; i < reps; i++) fill(h + i * n, n, MELD_FP32, rank, 100 + i);
  GT_CUDA(cudaMemcpy(d_in, h, n * 4 * reps, cudaMemcpyHostToDevice));
  GT_CUDA(cudaMemsetAsync(d_out, 0xff, n * 4 * reps, st));
  for (int i = 0; i < reps; i++) GT_MELD(meld_all_reduce(comm, d_in + i * n, d_out + i * n, n, MELD_FP32, st));
  GT_CUDA(cudaStreamSynchronize(st));
  GT_CUDA(cudaMemcpy(hr, d_out, n * 4 * reps, cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int i = 0; i < reps && !bad; i++)
    for (uint64_t e = 0; e < n; e++) {
      float v[64];
      for (int q = 0; q < P; q++) v[q] = val(q, e, 100 + i);
      const float s = sum_f32(v, P, g_per_node, hier_on(P, g_per_node));
      if (memcmp(&s, hr + i * n + e, 4) != 0) {
        GT_CHECK(0, "back-to-back all_reduce %d element %llu: %g, expected %g", i, (unsigned long long)e,
                 hr[i * n + e], s);
        bad = 1;
        break;
      }
    }
  GT_CHECK(!bad, "40 back-to-back all_reduces");

  /* a CUDA graph of an all_gather and an all_reduce, replayed with new inputs */
  cudaGraph_t g = NULL;
  cudaGraphExec_t ge = NULL;
  GT_CUDA(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  GT_MELD(meld_all_gather(comm, d_in, d_out, n, MELD_FP32, st));
  GT_MELD(meld_all_reduce(comm, d_in + n * P, d_out + n * P, n, MELD_FP32, st));
  GT_CUDA(cudaStreamEndCapture(st, &g));
  GT_CUDA(cudaGraphInstantiate(&ge, g, 0));
  for (int it = 0; it < 4; it++) {
    if (it == 3) {
      /* a larger eager all_gather first: the hierarchy's scratch grows, and the buffer the graph
       * captured must stay valid (kept, not freed: comm.c meld_comm_scratch) */
      const size_t big = 200000;
      float *bs = NULL, *br = NULL;
      GT_CUDA(cudaMalloc(&bs, big * 4));
      GT_CUDA(cudaMalloc(&br, big * 4 * P));
      GT_CUDA(cudaMemsetAsync(bs, 0, big * 4, st));
      GT_MELD(meld_all_gather(comm, bs, br, big, MELD_FP32, st));
      GT_CUDA(cudaStreamSynchronize(st));
      cudaFree(bs), cudaFree(br);
    }
    fill(h, n, MELD_FP32, rank, 500 + it);
    fill(h + n * P, n, MELD_FP32, rank, 600 + it);
    GT_CUDA(cudaMemcpy(d_in, h, n * 4 * (P + 1), cudaMemcpyHostToDevice));
    GT_CUDA(cudaGraphLaunch(ge, st));
    GT_CUDA(cudaStreamSynchronize(st));
    GT_CUDA(cudaMemcpy(hr, d_out, n * 4 * (P + 1), cudaMemcpyDeviceToHost));
    int ok = 1;
    for (int q = 0; q < P && ok; q++)
      for (uint64_t e = 0; e < n; e++) {
        const float v = val(q, e, 500 + it);
        if (memcmp(&v, hr + q * n + e, 4) != 0) { ok = 0; break; }
      }
    for (uint64_t e = 0; e < n && ok; e++) {
      float v[64];
      for (int q = 0; q < P; q++) v[q] = val(q, e, 600 + it);
      const float s = sum_f32(v, P, g_per_node, hier_on(P, g_per_node));
      if (memcmp(&s, hr + n * P + e, 4) != 0) ok = 0;
    }
    GT_CHECK(ok, "graph replay %d: all_gather + all_reduce", it);
  }
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);

  /* all_to_allv: uneven per-pair counts (some 0, some several chunks), send pieces packed in
   * reverse peer order, recv pieces in order with gaps (poisoned, must stay so) */
  {
    size_t sc[64], so[64], rc[64], ro[64];
    size_t stot = 0, rtot = 0;
    for (int q = P - 1; q >= 0; q--) sc[q] = a2av_count(rank, q), so[q] = stot, stot += sc[q];
    for (int q = 0; q < P; q++) rc[q] = a2av_count(q, rank), ro[q] = rtot + 16, rtot += rc[q] + 16;
    float *vs = NULL, *vr = NULL, *hs = (float *)malloc(stot * 4 + 4), *hr2 = (float *)malloc(rtot * 4 + 4);
    float *want = (float *)malloc(rtot * 4 + 4);
    GT_CUDA(cudaMalloc(&vs, stot * 4 + 4));
    GT_CUDA(cudaMalloc(&vr, rtot * 4 + 4));
    for (int q = 0; q < P; q++)
      for (size_t e = 0; e < sc[q]; e++) hs[so[q] + e] = val(rank, (uint64_t)q * 1000003u + e, 700);
    memset(want, 0xff, rtot * 4);
    for (int q = 0; q < P; q++)
      for (size_t e = 0; e < rc[q]; e++) want[ro[q] + e] = val(q, (uint64_t)rank * 1000003u + e, 700);
    GT_CUDA(cudaMemcpy(vs, hs, stot * 4 + 4, cudaMemcpyHostToDevice));
    for (int rep = 0; rep < 2; rep++) { /* twice: both staging parities */
      GT_CUDA(cudaMemsetAsync(vr, 0xff, rtot * 4 + 4, st));
      GT_MELD(meld_all_to_allv(comm, vs, sc, so, vr, rc, ro, MELD_FP32, st));
      GT_CUDA(cudaStreamSynchronize(st));
      GT_CUDA(cudaMemcpy(hr2, vr, rtot * 4, cudaMemcpyDeviceToHost));
      char what[96];
      snprintf(what, sizeof what, "all_to_allv (uneven counts, %zu elements in), rep %d", rtot, rep);
      same(hr2, want, rtot * 4, what);
    }
    cudaFree(vs), cudaFree(vr);
    free(hs), free(hr2), free(want);
  }

  GT_MELD(meld_comm_check(comm));
  cudaFree(d_in);
  cudaFree(d_out);
  free(h), free(hr);
  cudaStreamDestroy(st);
  GT_MELD(meld_comm_destroy(comm));
  gt_log("%d checks passed, %d failed", gt_passed, gt_failed);
}

/* meld_comm_split of a comm across nodes: "rails" (color = local rank, key = -rank: each child
 * spans the nodes, in reverse rank order, so its collectives take the inter-node path) and
 * "nodes" (color = node, key = rank; the last rank passes MELD_SPLIT_NOCOLOR where P > 2). Each
 * child's shape is checked and an all_reduce on it compared with the sum over its members in
 * child rank order; then the parent still works. */
static void rank_split(int rank, int P) {
  cudaStream_t st;
  meld_comm_t comm = open_comm(&st);
  if (!comm) return;
  const uint64_t n = 70001;
  float *d = NULL, *o = NULL, *h = (float *)malloc(n * 4), *want = (float *)malloc(n * 4);
  GT_CUDA(cudaMalloc(&d, n * 4));
  GT_CUDA(cudaMalloc(&o, n * 4));
  for (int v = 0; v < 2; v++) {
    int color[64], key[64];
    for (int r = 0; r < P; r++) {
      color[r] = v == 0 ? r % g_per_node : r / g_per_node;
      key[r] = v == 0 ? -r : r;
      if (v == 1 && P > 2 && r == P - 1) color[r] = MELD_SPLIT_NOCOLOR;
    }
    meld_comm_t child = (meld_comm_t)0x1;
    GT_MELD(meld_comm_split(comm, color[rank], key[rank], NULL, &child));
    const char *vn = v == 0 ? "rails" : "nodes";
    if (color[rank] == MELD_SPLIT_NOCOLOR) {
      GT_CHECK(child == NULL, "split %s: no color, no child", vn);
      continue;
    }
    if (!child) continue;
    /* members in child rank order: by key, ties by rank */
    int mem[64], m = 0;
    for (int r = 0; r < P; r++)
      if (color[r] == color[rank]) mem[m++] = r;
    for (int i = 1; i < m; i++)
      for (int j = i; j > 0 && key[mem[j]] < key[mem[j - 1]]; j--) {
        const int t = mem[j];
        mem[j] = mem[j - 1], mem[j - 1] = t;
      }
    int crank = -1;
    for (int i = 0; i < m; i++)
      if (mem[i] == rank) crank = i;
    meld_comm_info_t info;
    GT_MELD(meld_comm_info(child, &info));
    GT_CHECK(info.nranks == m && info.rank == crank && info.nnodes == (v == 0 ? P / g_per_node : 1),
             "split %s: child rank %d of %d, %d nodes (want %d of %d)", vn, info.rank, info.nranks, info.nnodes, crank, m);
    for (uint64_t i = 0; i < n; i++) h[i] = val(rank, i, 800 + v);
    GT_CUDA(cudaMemcpy(d, h, n * 4, cudaMemcpyHostToDevice));
    GT_CUDA(cudaMemsetAsync(o, 0xff, n * 4, st));
    GT_MELD(meld_all_reduce(child, d, o, n, MELD_FP32, st));
    GT_CUDA(cudaStreamSynchronize(st));
    GT_CUDA(cudaMemcpy(h, o, n * 4, cudaMemcpyDeviceToHost));
    for (uint64_t i = 0; i < n; i++) {
      float sum = 0.0f;
      for (int c = 0; c < m; c++) sum += val(mem[c], i, 800 + v);
      want[i] = sum;
    }
    char what[96];
    snprintf(what, sizeof what, "split %s: all_reduce on the child (rank %d of %d)", vn, crank, m);
    same(h, want, n * 4, what);
    GT_MELD(meld_comm_check(child));
    GT_MELD(meld_comm_destroy(child));
  }
  /* the parent after its children */
  for (uint64_t i = 0; i < n; i++) h[i] = val(rank, i, 810);
  GT_CUDA(cudaMemcpy(d, h, n * 4, cudaMemcpyHostToDevice));
  GT_MELD(meld_all_reduce(comm, d, o, n, MELD_FP32, st));
  GT_CUDA(cudaStreamSynchronize(st));
  GT_CUDA(cudaMemcpy(h, o, n * 4, cudaMemcpyDeviceToHost));
  for (uint64_t i = 0; i < n; i++) {
    float v[64];
    for (int q = 0; q < P; q++) v[q] = val(q, i, 810);
    want[i] = sum_f32(v, P, g_per_node, hier_on(P, g_per_node) && n % (uint64_t)g_per_node == 0);
  }
  same(h, want, n * 4, "all_reduce on the parent after the splits");
  GT_MELD(meld_comm_check(comm));
  cudaFree(d), cudaFree(o), free(h), free(want);
  cudaStreamDestroy(st);
  GT_MELD(meld_comm_destroy(comm));
  gt_log("split: %d checks passed, %d failed", gt_passed, gt_failed);
}

/* bf16 [n] from val(r, i, seed) x scale into host (may be NULL) and, unless dev is 0, a new
 * device buffer (returned). */
static uint16_t *vals_bf16(uint64_t n, int r, uint64_t seed, float scale, uint16_t *host, int dev) {
  uint16_t *h = host ? host : (uint16_t *)malloc(n * 2), *d = NULL;
  for (uint64_t i = 0; i < n; i++) h[i] = ref_f32_to_bf16(val(r, i, seed) * scale);
  if (dev) {
    GT_CUDA(cudaMalloc(&d, n * 2));
    GT_CUDA(cudaMemcpy(d, h, n * 2, cudaMemcpyHostToDevice));
  }
  if (!host) free(h);
  return d;
}

/* Relative Frobenius error of n bf16 values against fp32 ones (inf on a NaN: never written). */
static double rel_err(const uint16_t *got, const float *ref, uint64_t n) {
  return ref_rel_err_bf16(got, (int64_t)n, ref, (int64_t)n, 1, (int64_t)n);
}

/* The tensor-parallel ops and the ring attention on a comm across nodes: their unfused paths
 * over the collectives' inter-node path, against fp32 references. */
static void rank_tp_ops(int rank, int P) {
  cudaStream_t st;
  meld_comm_t comm = open_comm(&st);
  if (!comm) return;
  const int64_t ml = 128, K = 64, N = 96, M = ml * P;
  /* AG+GEMM: C [M, N] = AllGather(A) x B_r^T, and the gathered A */
  uint16_t *af = (uint16_t *)malloc(M * K * 2), *bf = (uint16_t *)malloc(N * K * 2);
  float *ref = (float *)malloc(M * N * 4), *tmp = (float *)malloc(M * N * 4);
  uint16_t *ha = (uint16_t *)malloc(M * K * 2), *hc = (uint16_t *)malloc(M * N * 2);
  uint16_t *da = vals_bf16(ml * K, rank, 700, 1.0f, NULL, 1), *db = vals_bf16(N * K, 100 + rank, 701, 0.125f, bf, 1);
  for (int q = 0; q < P; q++) vals_bf16(ml * K, q, 700, 1.0f, af + q * ml * K, 0);
  uint16_t *dc = NULL, *dg = NULL;
  GT_CUDA(cudaMalloc(&dc, M * N * 2));
  GT_CUDA(cudaMalloc(&dg, M * K * 2));
  GT_CUDA(cudaMemset(dc, 0xff, M * N * 2));
  meld_ag_gemm_args_t ag;
  memset(&ag, 0, sizeof ag);
  ag.a_shard = da, ag.lda = K, ag.b = db, ag.ldb = K, ag.b_layout = MELD_B_NK, ag.c = dc, ag.ldc = N;
  ag.a_gathered = dg, ag.ld_gathered = K, ag.m_loc = ml, ag.n_loc = N, ag.k = K;
  GT_MELD(meld_ag_gemm(comm, &ag, st));
  GT_CUDA(cudaStreamSynchronize(st));
  ref_gemm_bf16(af, K, bf, K, 0, ref, N, M, N, K);
  GT_CUDA(cudaMemcpy(hc, dc, M * N * 2, cudaMemcpyDeviceToHost));
  double e = rel_err(hc, ref, M * N);
  GT_CHECK(e < 1e-2, "ag_gemm across nodes: rel. error %.3g", e);
  GT_CUDA(cudaMemcpy(ha, dg, M * K * 2, cudaMemcpyDeviceToHost));
  GT_CHECK(memcmp(ha, af, M * K * 2) == 0, "ag_gemm across nodes: the gathered A");
  /* GEMM+RS and GEMM+AR: sum over ranks of A_q [M, K] x B_q^T */
  uint16_t *aq = (uint16_t *)malloc(M * K * 2), *bq = (uint16_t *)malloc(N * K * 2);
  memset(ref, 0, M * N * 4);
  for (int q = 0; q < P; q++) {
    vals_bf16(M * K, q, 800, 1.0f, aq, 0);
    vals_bf16(N * K, q, 801, 0.125f, bq, 0);
    ref_gemm_bf16(aq, K, bq, K, 0, tmp, N, M, N, K);
    for (int64_t i = 0; i < M * N; i++) ref[i] += tmp[i];
  }
  uint16_t *dA = vals_bf16(M * K, rank, 800, 1.0f, NULL, 1), *dB = vals_bf16(N * K, rank, 801, 0.125f, NULL, 1);
  int64_t first = 0, count = 0;
  GT_MELD(meld_gemm_rs_rows(M, P, rank, &first, &count));
  meld_gemm_rs_args_t g;
  memset(&g, 0, sizeof g);
  g.a = dA, g.lda = K, g.b = dB, g.ldb = K, g.b_layout = MELD_B_NK, g.c = dc, g.ldc = N, g.m = M, g.n = N, g.k = K;
  GT_CUDA(cudaMemset(dc, 0xff, M * N * 2));
  GT_MELD(meld_gemm_rs(comm, &g, st));
  GT_CUDA(cudaStreamSynchronize(st));
  GT_CUDA(cudaMemcpy(hc, dc, count * N * 2, cudaMemcpyDeviceToHost));
  e = rel_err(hc, ref + first * N, count * N);
  GT_CHECK(e < 1e-2, "gemm_rs across nodes: rel. error %.3g (rows %lld + %lld)", e, (long long)first, (long long)count);
  GT_CUDA(cudaMemset(dc, 0xff, M * N * 2));
  GT_MELD(meld_gemm_ar(comm, &g, st));
  GT_CUDA(cudaStreamSynchronize(st));
  GT_CUDA(cudaMemcpy(hc, dc, M * N * 2, cudaMemcpyDeviceToHost));
  e = rel_err(hc, ref, M * N);
  GT_CHECK(e < 1e-2, "gemm_ar across nodes: rel. error %.3g", e);
  g.algo = MELD_GEMM_RS_FUSED;
  meld_result_t r = meld_gemm_rs(comm, &g, st);
  GT_CHECK(r == MELD_ERR_UNSUPPORTED, "gemm_rs FUSED across nodes is refused: %d %s", (int)r, meld_last_error());
  /* ring attention (contiguous parts of 128 tokens, causal): against the whole sequence */
  const int S = 128 * P, H = 2, D = 64;
  uint16_t *qf = NULL, *kf = NULL, *vf = NULL, *o = NULL;
  float *oref = NULL, *lref = NULL;
  const size_t nt = (size_t)S * H * D, np = (size_t)128 * H * D;
  GT_CUDA(cudaMalloc(&qf, nt * 2));
  GT_CUDA(cudaMalloc(&kf, nt * 2));
  GT_CUDA(cudaMalloc(&vf, nt * 2));
  GT_CUDA(cudaMalloc(&o, np * 2));
  GT_CUDA(cudaMalloc(&oref, np * 4));
  GT_CUDA(cudaMalloc(&lref, (size_t)H * 128 * 4));
  gt_fill_bf16<<<256, 256>>>(qf, nt, 900);
  gt_fill_bf16<<<256, 256>>>(kf, nt, 901);
  gt_fill_bf16<<<256, 256>>>(vf, nt, 902);
  GT_CUDA(cudaMemset(o, 0xff, np * 2));
  GT_CUDA(cudaDeviceSynchronize());
  meld_attention_args_t at;
  memset(&at, 0, sizeof at);
  at.q = qf + (size_t)rank * np, at.k = kf + (size_t)rank * np, at.v = vf + (size_t)rank * np, at.o = o;
  at.batch = 1, at.seq_q = at.seq_kv = 128, at.heads = at.heads_kv = H, at.head_dim = D, at.causal = 1;
  GT_MELD(meld_ring_attention(comm, &at, st));
  ref_attn<<<(unsigned)((H * 128 + 7) / 8), 256>>>((const __nv_bfloat16 *)at.q, (const __nv_bfloat16 *)kf,
                                                   (const __nv_bfloat16 *)vf, oref, lref, 1, 128, S, H, H, H * D,
                                                   H * D, H * D, 1, 1.0f / sqrtf((float)D), (int64_t)rank * 128, 0,
                                                   0, 0, D);
  GT_CUDA(cudaStreamSynchronize(st));
  GT_CUDA(cudaDeviceSynchronize());
  uint16_t *ho = (uint16_t *)malloc(np * 2);
  float *hr = (float *)malloc(np * 4);
  GT_CUDA(cudaMemcpy(ho, o, np * 2, cudaMemcpyDeviceToHost));
  GT_CUDA(cudaMemcpy(hr, oref, np * 4, cudaMemcpyDeviceToHost));
  e = rel_err(ho, hr, np);
  GT_CHECK(e < 1e-2, "ring_attention across nodes (causal, part %d of %d): rel. error %.3g", rank, P, e);
  GT_MELD(meld_comm_check(comm));
  cudaFree(qf), cudaFree(kf), cudaFree(vf), cudaFree(o), cudaFree(oref), cudaFree(lref);
  cudaFree(da), cudaFree(db), cudaFree(dc), cudaFree(dg), cudaFree(dA), cudaFree(dB);
  free(af), free(bf), free(ref), free(tmp), free(ha), free(hc), free(aq), free(bq), free(ho), free(hr);
  cudaStreamDestroy(st);
  GT_MELD(meld_comm_destroy(comm));
  gt_log("%d checks passed, %d failed", gt_passed, gt_failed);
}

/* ---- MoE across nodes (src/ops/moe_net.cu): the rail gathers the tokens, each node routes its
 * experts' rows within the node, the combine's node sums are reduce-scattered over the rail ---- */
enum { NM_H = 128, NM_N = 128, NM_F = 128, NM_TOPK = 2 };

static int nm_tokens(int s) { return 40 + 24 * (s % g_per_node); } /* (equal along a rail) */
/* Token t of rank s's j-th expert: distinct, some second slots none (-1). */
static int32_t nm_id(int s, int t, int j, int E, uint64_t seed) {
  const uint64_t h = (seed * 7919ull + (uint64_t)s * 104729ull + (uint64_t)t) * 0x9E3779B97F4A7C15ull;
  const int32_t e0 = (int32_t)((h >> 33) % (uint64_t)E);
  if (j == 0) return e0;
  if (t % 5 == 3) return -1;
  return (int32_t)((e0 + 1 + (int32_t)((h >> 17) % (uint64_t)(E - 1))) % E);
}
static float nm_wt(int s, int t, int j) { return 0.25f + 0.125f * (float)((s + 3 * t + 5 * j) % 5); }

/* The reference expert outputs of token t of rank s through expert e (owner r = e / er, local
 * le): dispatch y = x W1^T rounded to bf16, z = y W2^T (fp32) into z[NM_H] (NULL: skip), and
 * y into y[NM_N] (NULL: skip). x: that rank's tokens [T, NM_H]. */
static void nm_expert(const uint16_t *x, int t, int e, int er, uint16_t *w1, uint16_t *w2, float *y, float *z) {
  const int r = e / er, le = e % er;
  vals_bf16((uint64_t)er * NM_N * NM_H, r, 1200, 0.125f, w1, 0);
  vals_bf16((uint64_t)er * NM_H * NM_N, r, 1300, 0.125f, w2, 0);
  float yf[NM_N];
  uint16_t yb[NM_N];
  ref_gemm_bf16(x + (size_t)t * NM_H, NM_H, w1 + (size_t)le * NM_N * NM_H, NM_H, 0, yf, NM_N, 1, NM_N, NM_H);
  for (int i = 0; i < NM_N; i++) yb[i] = ref_f32_to_bf16(yf[i]);
  if (y) memcpy(y, yf, sizeof yf);
  if (z) ref_gemm_bf16(yb, NM_N, w2 + (size_t)le * NM_H * NM_N, NM_N, 0, z, NM_H, 1, NM_H, NM_N);
}

/* meld_moe_ffn's reference for one slot: W2_e (silu(x W1gate_e^T) * x W1up_e^T, rounded to bf16). */
static void nm_ffn_expert(const uint16_t *x, int t, int e, int er, uint16_t *w1, uint16_t *w2, float *z) {
  const int r = e / er, le = e % er;
  vals_bf16((uint64_t)er * 2 * NM_F * NM_H, r, 1400, 0.125f, w1, 0);
  vals_bf16((uint64_t)er * NM_H * NM_F, r, 1500, 0.125f, w2, 0);
  float gu[2 * NM_F];
  uint16_t a[NM_F];
  ref_gemm_bf16(x + (size_t)t * NM_H, NM_H, w1 + (size_t)le * 2 * NM_F * NM_H, NM_H, 0, gu, 2 * NM_F, 1, 2 * NM_F, NM_H);
  for (int i = 0; i < NM_F; i++) a[i] = ref_f32_to_bf16(gu[i] / (1.0f + expf(-gu[i])) * gu[NM_F + i]);
  ref_gemm_bf16(a, NM_F, w2 + (size_t)le * NM_H * NM_F, NM_F, 0, z, NM_H, 1, NM_H, NM_F);
}

typedef struct {
  uint16_t *x, *w1, *w2, *y, *y2, *out, *fw1, *fw2, *scratch;
  int32_t *ids, *off, *cnt, *orig;
  float *wt;
} nm_dev_t;

/* This rank's inputs for case `seed` (x from val(s, ., 1100 + seed), ids, weights) into dev. */
static void nm_inputs(int rank, int E, uint64_t seed, const nm_dev_t *d, int64_t ldx, cudaStream_t st) {
  const int T = nm_tokens(rank);
  uint16_t *hx = (uint16_t *)malloc((size_t)T * NM_H * 2 + 2);
  int32_t *hi = (int32_t *)malloc((size_t)T * NM_TOPK * 4 + 4);
  float *hw = (float *)malloc((size_t)T * NM_TOPK * 4 + 4);
  vals_bf16((uint64_t)T * NM_H, rank, 1100 + seed, 1.0f, hx, 0);
  for (int t = 0; t < T; t++)
    for (int j = 0; j < NM_TOPK; j++)
      hi[t * NM_TOPK + j] = nm_id(rank, t, j, E, seed), hw[t * NM_TOPK + j] = nm_wt(rank, t, j);
  GT_CUDA(cudaMemcpy2DAsync(d->x, (size_t)ldx * 2, hx, NM_H * 2, NM_H * 2, (size_t)T, cudaMemcpyHostToDevice, st));
  GT_CUDA(cudaMemcpyAsync(d->ids, hi, (size_t)T * NM_TOPK * 4, cudaMemcpyHostToDevice, st));
  GT_CUDA(cudaMemcpyAsync(d->wt, hw, (size_t)T * NM_TOPK * 4, cudaMemcpyHostToDevice, st));
  GT_CUDA(cudaStreamSynchronize(st));
  free(hx), free(hi), free(hw);
}

/* The combine's (or the layer's) output of this rank against the reference: out[t] = sum_j
 * w[t,j] z(t, j), for the tokens of case `seed`. ffn: meld_moe_ffn's experts. */
static void nm_check_out(int rank, int P, int E, uint64_t seed, const uint16_t *dout, int64_t ldo, int ffn,
                         const char *what) {
  const int T = nm_tokens(rank), er = E / P;
  uint16_t *hx = (uint16_t *)malloc((size_t)T * NM_H * 2 + 2), *ho = (uint16_t *)malloc((size_t)T * ldo * 2 + 2);
  uint16_t *w1 = (uint16_t *)malloc((size_t)er * 2 * NM_F * NM_H * 2), *w2 = (uint16_t *)malloc((size_t)er * NM_H * NM_F * 2);
  float *ref = (float *)calloc((size_t)T * NM_H + 1, 4), z[NM_H];
  vals_bf16((uint64_t)T * NM_H, rank, 1100 + seed, 1.0f, hx, 0);
  for (int t = 0; t < T; t++)
    for (int j = 0; j < NM_TOPK; j++) {
      const int e = nm_id(rank, t, j, E, seed);
      if (e < 0) continue;
      if (ffn) nm_ffn_expert(hx, t, e, er, w1, w2, z);
      else nm_expert(hx, t, e, er, w1, w2, NULL, z);
      for (int i = 0; i < NM_H; i++) ref[(size_t)t * NM_H + i] += nm_wt(rank, t, j) * z[i];
    }
  GT_CUDA(cudaMemcpy(ho, dout, (size_t)T * ldo * 2, cudaMemcpyDeviceToHost));
  const double e = ref_rel_err_bf16(ho, ldo, ref, NM_H, T, NM_H);
  GT_CHECK(e < 1e-2, "%s (rank %d of %d, %d a node, %d tokens): rel. error %.3g", what, rank, P, g_per_node, T, e);
  free(hx), free(ho), free(w1), free(w2), free(ref);
}

/* The dispatch's layout and rows on this rank: every routed slot of every rank whose expert is
 * here, exactly once, in its expert's segment, by (source's local rank, source's node, pair),
 * with y = x W1^T; then the grouped GEMM's y2 = y W2^T on those rows. */
static void nm_check_dispatch(int rank, int P, int E, uint64_t seed, const nm_dev_t *d, int64_t cap) {
  const int er = E / P, L = g_per_node;
  int32_t *off = (int32_t *)malloc((er + 1) * 4), *cnt = (int32_t *)malloc(er * 4), *orig = (int32_t *)malloc(cap * 8);
  uint16_t *y = (uint16_t *)malloc(cap * NM_N * 2), *y2 = (uint16_t *)malloc(cap * NM_H * 2);
  GT_CUDA(cudaMemcpy(off, d->off, (er + 1) * 4, cudaMemcpyDeviceToHost));
  GT_CUDA(cudaMemcpy(cnt, d->cnt, er * 4, cudaMemcpyDeviceToHost));
  GT_CUDA(cudaMemcpy(orig, d->orig, cap * 8, cudaMemcpyDeviceToHost));
  GT_CUDA(cudaMemcpy(y, d->y, cap * NM_N * 2, cudaMemcpyDeviceToHost));
  GT_CUDA(cudaMemcpy(y2, d->y2, cap * NM_H * 2, cudaMemcpyDeviceToHost));
  uint16_t *xs = (uint16_t *)malloc((size_t)nm_tokens(L - 1) * NM_H * 2);
  uint16_t *w1 = (uint16_t *)malloc((size_t)er * NM_N * NM_H * 2), *w2 = (uint16_t *)malloc((size_t)er * NM_H * NM_N * 2);
  int bad_layout = 0, rows = 0;
  float *ry = (float *)malloc(cap * NM_N * 4), *ry2 = (float *)malloc(cap * NM_H * 4);
  uint16_t *gy = (uint16_t *)malloc(cap * NM_N * 2), *gy2 = (uint16_t *)malloc(cap * NM_H * 2);
  for (int le = 0; le < er; le++) {
    const int e = rank * er + le;
    int want = 0;
    for (int s = 0; s < P; s++)
      for (int t = 0; t < nm_tokens(s); t++)
        for (int j = 0; j < NM_TOPK; j++) want += nm_id(s, t, j, E, seed) == e;
    GT_CHECK(cnt[le] == want, "moe across nodes: expert %d gets %d rows, wants %d", e, cnt[le], want);
    GT_CHECK(off[le] % 128 == 0 && (le == 0 || off[le] >= off[le - 1] + cnt[le - 1]), "moe across nodes: expert %d's offset %d", e, off[le]);
    int64_t last = -1;
    for (int i = 0; i < cnt[le] && cnt[le] == want; i++) {
      const int row = off[le] + i, s = orig[2 * row], pair = orig[2 * row + 1];
      if (s < 0 || s >= P || pair < 0 || pair >= nm_tokens(s) * NM_TOPK ||
          nm_id(s, pair / NM_TOPK, pair % NM_TOPK, E, seed) != e) {
        bad_layout++;
        continue;
      }
      const int64_t key = ((int64_t)(s % L) * P + s / L) * 1000000 + pair; /* (local rank, node, pair) */
      bad_layout += key <= last;
      last = key;
      vals_bf16((uint64_t)nm_tokens(s) * NM_H, s, 1100 + seed, 1.0f, xs, 0);
      nm_expert(xs, pair / NM_TOPK, e, er, w1, w2, ry + (size_t)rows * NM_N, NULL);
      memcpy(gy + (size_t)rows * NM_N, y + (size_t)row * NM_N, NM_N * 2);
      /* the grouped GEMM from the device's y row */
      ref_gemm_bf16(y + (size_t)row * NM_N, NM_N, w2 + (size_t)le * NM_H * NM_N, NM_N, 0, ry2 + (size_t)rows * NM_H, NM_H,
                    1, NM_H, NM_N);
      memcpy(gy2 + (size_t)rows * NM_H, y2 + (size_t)row * NM_H, NM_H * 2);
      rows++;
    }
  }
  GT_CHECK(bad_layout == 0, "moe across nodes: %d rows with a wrong origin or out of order (rank %d of %d)", bad_layout,
           rank, P);
  if (rows) {
    const double e1 = rel_err(gy, ry, (uint64_t)rows * NM_N), e2 = rel_err(gy2, ry2, (uint64_t)rows * NM_H);
    GT_CHECK(e1 < 1e-2, "moe across nodes: dispatch_gemm rows, rel. error %.3g (%d rows)", e1, rows);
    GT_CHECK(e2 < 1e-2, "moe across nodes: grouped_gemm rows, rel. error %.3g (%d rows)", e2, rows);
  }
  free(off), free(cnt), free(orig), free(y), free(y2), free(xs), free(w1), free(w2), free(ry), free(ry2), free(gy), free(gy2);
}

static void rank_moe(int rank, int P) {
  cudaStream_t st;
  meld_comm_t comm = open_comm(&st);
  if (!comm) return;
  const int E = 2 * P, er = 2, T = nm_tokens(rank);
  int Tmax = 0;
  for (int s = 0; s < P; s++) Tmax = nm_tokens(s) > Tmax ? nm_tokens(s) : Tmax;
  const int N = P / g_per_node;
  /* rows a rank may receive (padded), and the combine's N T x topk */
  int64_t cap = ((int64_t)P * Tmax * NM_TOPK + er * 128 + 127) / 128 * 128;
  if (cap < (int64_t)N * Tmax * NM_TOPK) cap = ((int64_t)N * Tmax * NM_TOPK + 127) / 128 * 128;
  const int64_t ldx_ffn = NM_H + 16, ldo = NM_H + 8;
  nm_dev_t d;
  memset(&d, 0, sizeof d);
  GT_CUDA(cudaMalloc(&d.x, (size_t)T * ldx_ffn * 2 + 16));
  GT_CUDA(cudaMalloc(&d.ids, (size_t)T * NM_TOPK * 4 + 16));
  GT_CUDA(cudaMalloc(&d.wt, (size_t)T * NM_TOPK * 4 + 16));
  GT_CUDA(cudaMalloc(&d.out, (size_t)T * ldo * 2 + 16));
  GT_CUDA(cudaMalloc(&d.y, cap * NM_N * 2));
  GT_CUDA(cudaMalloc(&d.y2, cap * NM_H * 2));
  GT_CUDA(cudaMalloc(&d.off, (er + 1) * 4));
  GT_CUDA(cudaMalloc(&d.cnt, er * 4));
  GT_CUDA(cudaMalloc(&d.orig, cap * 8));
  d.w1 = vals_bf16((uint64_t)er * NM_N * NM_H, rank, 1200, 0.125f, NULL, 1);
  d.w2 = vals_bf16((uint64_t)er * NM_H * NM_N, rank, 1300, 0.125f, NULL, 1);
  d.fw1 = vals_bf16((uint64_t)er * 2 * NM_F * NM_H, rank, 1400, 0.125f, NULL, 1);
  d.fw2 = vals_bf16((uint64_t)er * NM_H * NM_F, rank, 1500, 0.125f, NULL, 1);
  const size_t scb = meld_moe_ffn_scratch_bytes(P, E, NM_H, NM_F, cap);
  GT_CUDA(cudaMalloc(&d.scratch, scb));
  meld_moe_args_t a;
  memset(&a, 0, sizeof a);
  a.x = d.x, a.ldx = NM_H, a.topk_ids = d.ids, a.tokens = T, a.topk = NM_TOPK, a.experts = E, a.hidden = NM_H;
  a.w = d.w1, a.n = NM_N, a.y = d.y, a.capacity = cap, a.expert_offsets = d.off, a.expert_counts = d.cnt;
  a.row_origin = d.orig;
  meld_moe_gemm_args_t g = {&a, d.y, NM_N, d.w2, NM_H, d.y2};
  meld_moe_combine_args_t c = {&a, d.y2, d.wt, d.out, ldo};
  /* two cases back to back (new inputs each), then the three calls replayed from a CUDA graph */
  for (int rep = 0; rep < 3; rep++) {
    const uint64_t seed = 10 + rep;
    nm_inputs(rank, E, seed, &d, NM_H, st);
    GT_CUDA(cudaMemsetAsync(d.y, 0xff, cap * NM_N * 2, st));
    GT_CUDA(cudaMemsetAsync(d.y2, 0xff, cap * NM_H * 2, st));
    GT_CUDA(cudaMemsetAsync(d.out, 0xff, (size_t)T * ldo * 2 + 16, st));
    if (rep < 2) {
      GT_MELD(meld_moe_dispatch_gemm(comm, &a, st));
      GT_MELD(meld_moe_grouped_gemm(comm, &g, st));
      GT_MELD(meld_moe_combine(comm, &c, st));
    } else {
      cudaGraph_t gr = NULL;
      cudaGraphExec_t ge = NULL;
      GT_CUDA(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
      GT_MELD(meld_moe_dispatch_gemm(comm, &a, st));
      GT_MELD(meld_moe_grouped_gemm(comm, &g, st));
      GT_MELD(meld_moe_combine(comm, &c, st));
      GT_CUDA(cudaStreamEndCapture(st, &gr));
      GT_CUDA(cudaGraphInstantiate(&ge, gr, 0));
      GT_CUDA(cudaGraphLaunch(ge, st));
      GT_CUDA(cudaStreamSynchronize(st));
      cudaGraphExecDestroy(ge), cudaGraphDestroy(gr);
    }
    GT_CUDA(cudaStreamSynchronize(st));
    GT_MELD(meld_comm_check(comm));
    char what[96];
    snprintf(what, sizeof what, "moe across nodes: combine, %s", rep < 2 ? "plain" : "CUDA graph");
    nm_check_dispatch(rank, P, E, seed, &d, cap);
    nm_check_out(rank, P, E, seed, d.out, ldo, 0, what);
  }
  /* the whole layer, x with ld > hidden */
  meld_moe_ffn_args_t f;
  memset(&f, 0, sizeof f);
  f.x = d.x, f.ldx = ldx_ffn, f.topk_ids = d.ids, f.topk_weights = d.wt, f.tokens = T, f.topk = NM_TOPK, f.experts = E;
  f.hidden = NM_H, f.w1 = d.fw1, f.w2 = d.fw2, f.ffn = NM_F, f.out = d.out, f.ldo = 0, f.capacity = cap, f.scratch = d.scratch;
  nm_inputs(rank, E, 20, &d, ldx_ffn, st);
  GT_CUDA(cudaMemsetAsync(d.out, 0xff, (size_t)T * ldo * 2, st));
  GT_MELD(meld_moe_ffn(comm, &f, st));
  GT_CUDA(cudaStreamSynchronize(st));
  GT_MELD(meld_comm_check(comm));
  nm_check_out(rank, P, E, 20, d.out, NM_H, 1, "moe across nodes: meld_moe_ffn");
  /* a rank whose arguments are refused: its sentence; every rank fails on the device at once (the
   * rail's agreement: moe_net.cu) instead of waiting for its deadline */
  nm_inputs(rank, E, 30, &d, NM_H, st);
  meld_moe_args_t bad = a;
  if (rank == 0) bad.w = NULL;
  const meld_result_t r = meld_moe_dispatch_gemm(comm, &bad, st);
  if (rank == 0)
    GT_CHECK(r == MELD_ERR_INVALID_ARG && strstr(meld_last_error(), "w is NULL"), "refused dispatch: %d %s", (int)r,
             meld_last_error());
  else /* (MELD_OK, or already the comm's error where the verdict landed while the call was enqueued) */
    gt_log("a valid dispatch beside a refused one returned %d %s", (int)r, r == MELD_OK ? "" : meld_last_error());
  const double t0 = gt_now_s();
  GT_CUDA(cudaStreamSynchronize(st));
  const meld_result_t rc = meld_comm_check(comm);
  const double waited = gt_now_s() - t0;
  const char *tms = getenv("MELD_TIMEOUT_MS");
  GT_CHECK(rc != MELD_OK, "rank %d beside a refused dispatch: meld_comm_check %d", rank, (int)rc);
  GT_CHECK(rc != MELD_ERR_TIMEOUT && (!tms || waited < atof(tms) / 1000.0),
           "rank %d beside a refused dispatch: failed by its deadline (%.1f s, %s), not by the rail's agreement", rank,
           waited, meld_last_error());
  gt_log("moe across nodes: beside the refused dispatch %.2f s, %s", waited, rc == MELD_OK ? "ok" : meld_last_error());
  cudaFree(d.x), cudaFree(d.ids), cudaFree(d.wt), cudaFree(d.out), cudaFree(d.y), cudaFree(d.y2), cudaFree(d.off);
  cudaFree(d.cnt), cudaFree(d.orig), cudaFree(d.w1), cudaFree(d.w2), cudaFree(d.fw1), cudaFree(d.fw2), cudaFree(d.scratch);
  cudaStreamDestroy(st);
  meld_comm_destroy(comm);
  gt_log("moe: %d checks passed, %d failed", gt_passed, gt_failed);
}

/* What the path moves (a functional figure: loopback TCP, ranks taking turns on one GPU where
 * they share it): all_gather and all_reduce of 64 MiB of fp32 at the chunk of the run. */
static void rank_timing(int rank, int P) {
  meld_config_t cfg = test_config();
  meld_comm_t comm = NULL;
  GT_MELD(meld_comm_init_env(&comm, &cfg));
  if (!comm) return;
  const size_t n = (size_t)16 << 20; /* 64 MiB of fp32 */
  float *d = NULL, *o = NULL;
  GT_CUDA(cudaMalloc(&d, n * 4));
  GT_CUDA(cudaMalloc(&o, n * 4 * P));
  GT_CUDA(cudaMemset(d, 0, n * 4));
  for (int op = 0; op < 2; op++) {
    const int reps = 3;
    GT_MELD(op ? meld_all_reduce(comm, d, o, n, MELD_FP32, 0) : meld_all_gather(comm, d, o, n / P, MELD_FP32, 0));
    GT_CUDA(cudaDeviceSynchronize());
    const double t0 = gt_now_s();
    for (int i = 0; i < reps; i++)
      GT_MELD(op ? meld_all_reduce(comm, d, o, n, MELD_FP32, 0) : meld_all_gather(comm, d, o, n / P, MELD_FP32, 0));
    GT_CUDA(cudaDeviceSynchronize());
    const double ms = (gt_now_s() - t0) / reps * 1e3;
    /* bus bandwidth as NCCL's tests define it: all_gather (P-1)/P x total, all_reduce 2(P-1)/P */
    const double bus = (op ? 2.0 : 1.0) * (P - 1) / P * (double)n * 4 / (ms * 1e-3) / 1e9;
    if (rank == 0)
      gt_log("%s 64 MiB fp32, %d ranks, %d a node, chunk %s: %.1f ms a call, bus bandwidth %.2f GB/s",
             op ? "all_reduce" : "all_gather", P, g_per_node, g_chunk ? g_chunk : "default", ms, bus);
  }
  GT_MELD(meld_comm_check(comm));
  cudaFree(d), cudaFree(o);
  GT_MELD(meld_comm_destroy(comm));
}

/* Rank 0 calls an all_reduce that rank 1 never joins: rank 0's wait ends in MELD_ERR_TIMEOUT. */
static void rank_missing(int rank, int P) {
  (void)P;
  meld_config_t cfg = test_config();
  meld_comm_t comm = NULL;
  GT_MELD(meld_comm_init_env(&comm, &cfg));
  if (!comm) return;
  if (rank == 0) {
    float *d = NULL;
    GT_CUDA(cudaMalloc(&d, 4096));
    const double t0 = gt_now_s();
    GT_MELD(meld_all_reduce(comm, d, d, 1024, MELD_FP32, 0));
    cudaError_t e = cudaDeviceSynchronize();
    meld_result_t r = meld_comm_check(comm);
    GT_CHECK(e == cudaSuccess && r == MELD_ERR_TIMEOUT, "a rank that never calls: cuda %d, meld %d (%s)", (int)e,
             (int)r, meld_last_error());
    gt_log("rank 0's timeout after %.1f s: %s", gt_now_s() - t0, meld_last_error());
    cudaFree(d);
  }
  meld_comm_destroy(comm);
}

/* Ranks of different nodes calling different sizes (all_gather of 1000 vs 1001 fp32: the same
 * chunk count, so without the argument check across nodes both would finish with a wrong block):
 * every rank fails at once with the argument record (MELD_NET_ARG_CHECK), not by its deadline. */
static void rank_mismatch(int rank, int P) {
  cudaStream_t st;
  meld_comm_t comm = open_comm(&st);
  if (!comm) return;
  float *d = NULL;
  GT_CUDA(cudaMalloc(&d, (size_t)2048 * (P + 1) * 4));
  GT_CUDA(cudaMemset(d, 0, (size_t)2048 * (P + 1) * 4));
  /* first 200 matched small calls back to back, no host sync: a rank may run a call ahead of its
   * peer (one chunk a pair: no credit holds it back), which must not look like a mismatch (the
   * argument words by parity) */
  float *h = (float *)malloc((size_t)1000 * 4);
  for (int i = 0; i < 1000; i++) h[i] = (float)(rank * 1000 + i);
  GT_CUDA(cudaMemcpy(d, h, (size_t)1000 * 4, cudaMemcpyHostToDevice));
  for (int i = 0; i < 200; i++) GT_MELD(meld_all_gather(comm, d, d + 2048, 1000, MELD_FP32, st));
  GT_CUDA(cudaStreamSynchronize(st));
  GT_MELD(meld_comm_check(comm));
  float *g = (float *)malloc((size_t)1000 * P * 4);
  GT_CUDA(cudaMemcpy(g, d + 2048, (size_t)1000 * P * 4, cudaMemcpyDeviceToHost));
  int wrong = 0;
  for (int q = 0; q < P; q++)
    for (int i = 0; i < 1000; i++) wrong += g[q * 1000 + i] != (float)(q * 1000 + i);
  GT_CHECK(wrong == 0, "200 back-to-back all_gathers across nodes: %d wrong elements", wrong);
  free(h), free(g);
  const double t0 = gt_now_s();
  GT_MELD(meld_all_gather(comm, d, d + 2048, rank == 0 ? 1000 : 1001, MELD_FP32, st));
  GT_CUDA(cudaStreamSynchronize(st));
  const meld_result_t r = meld_comm_check(comm);
  const double waited = gt_now_s() - t0;
  const char *tms = getenv("MELD_TIMEOUT_MS");
  GT_CHECK(r == MELD_ERR_ABORTED && strstr(meld_last_error(), "arguments differ") &&
               (!tms || waited < atof(tms) / 1000.0),
           "mismatched all_gather across nodes, rank %d: %d after %.1f s: %s", rank, (int)r, waited, meld_last_error());
  gt_log("mismatched sizes across nodes, rank %d: %.2f s: %s", rank, waited, meld_last_error());
  cudaFree(d);
  cudaStreamDestroy(st);
  meld_comm_destroy(comm);
}

/* ---- ranks as threads of this process (cfg.node_id = rank / per node): their kernels run at
 * the same time on the shared GPU, unlike rank processes, which take turns in time slices ---- */
static meld_unique_id g_tid;
static int g_tP = 2, g_tper = 1;
static pthread_barrier_t g_tbar;

/* all_gather and all_reduce of 64 MiB fp32 from rank threads: timed (3 calls after a warm-up),
 * then 4096 sampled outputs of each checked against the host's values. */
static void *thread_timing(void *arg) {
  const int rank = (int)(intptr_t)arg, P = g_tP;
  GT_CUDA(cudaSetDevice(0));
  meld_config_t cfg = test_config();
  cfg.node_id = rank / g_tper;
  meld_comm_t comm = NULL;
  GT_MELD(meld_comm_init(&comm, P, g_tid, rank, &cfg));
  if (!comm) return NULL;
  cudaStream_t st;
  GT_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  const size_t n = (size_t)16 << 20;
  float *d = NULL, *o = NULL, *h = (float *)malloc(n * 4);
  GT_CUDA(cudaMalloc(&d, n * 4));
  GT_CUDA(cudaMalloc(&o, n * 4 * P));
  for (size_t i = 0; i < n; i++) h[i] = val(rank, i, 900);
  GT_CUDA(cudaMemcpy(d, h, n * 4, cudaMemcpyHostToDevice));
  for (int op = 0; op < 2; op++) {
    const int reps = 3;
    double t0 = 0;
    for (int i = 0; i <= reps; i++) {
      if (i == 1) { /* after the warm-up: every rank starts the timed calls together */
        GT_CUDA(cudaStreamSynchronize(st));
        pthread_barrier_wait(&g_tbar);
        t0 = gt_now_s();
      }
      GT_MELD(op ? meld_all_reduce(comm, d, o, n, MELD_FP32, st) : meld_all_gather(comm, d, o, n / P, MELD_FP32, st));
    }
    GT_CUDA(cudaStreamSynchronize(st));
    const double ms = (gt_now_s() - t0) / reps * 1e3;
    pthread_barrier_wait(&g_tbar);
    const double bus = (op ? 2.0 : 1.0) * (P - 1) / P * (double)n * 4 / (ms * 1e-3) / 1e9;
    if (rank == 0)
      gt_log("threads: %s 64 MiB fp32, %d ranks, %d a node, chunk %s, %s: %.2f ms a call, bus bandwidth %.2f GB/s",
             op ? "all_reduce" : "all_gather", P, g_tper, g_chunk ? g_chunk : "default",
             thread_hier_on(P, g_tper) ? "hierarchical" : "flat", ms, bus);
    int bad = 0;
    for (int k = 0; k < 4096 && !bad; k++) {
      const size_t i = ((size_t)k * 2654435761u) % n;
      float got = 0, want = 0;
      if (op) {
        GT_CUDA(cudaMemcpy(&got, o + i, 4, cudaMemcpyDeviceToHost));
        float v[8];
        for (int q = 0; q < P; q++) v[q] = val(q, i, 900);
        want = sum_f32(v, P, g_tper, thread_hier_on(P, g_tper));
      } else {
        const int q = (int)(i / (n / P));
        GT_CUDA(cudaMemcpy(&got, o + i, 4, cudaMemcpyDeviceToHost));
        want = val(q, i % (n / P), 900);
      }
      if (memcmp(&got, &want, 4) != 0) {
        GT_CHECK(0, "threads: %s element %zu: %g, expected %g", op ? "all_reduce" : "all_gather", i, got, want);
        bad = 1;
      }
    }
    GT_CHECK(!bad, "threads: %s of %d ranks (%d a node): 4096 sampled outputs", op ? "all_reduce" : "all_gather", P,
             g_tper);
  }
  GT_MELD(meld_comm_check(comm));
  cudaFree(d), cudaFree(o), free(h);
  cudaStreamDestroy(st);
  GT_MELD(meld_comm_destroy(comm));
  return NULL;
}

static void run_threads(int P, int per_node) {
  g_tP = P, g_tper = per_node;
  printf("--- timing with rank threads (%d ranks, %d a node, chunk %s, %s, %s hardware queues)\n", P, per_node,
         g_chunk ? g_chunk : "default", thread_hier_on(P, per_node) ? "hierarchical" : "flat",
         getenv("CUDA_DEVICE_MAX_CONNECTIONS"));
  fflush(stdout);
  if (meld_get_unique_id(&g_tid) != MELD_OK) {
    GT_CHECK(0, "meld_get_unique_id: %s", meld_last_error());
    return;
  }
  pthread_barrier_init(&g_tbar, NULL, (unsigned)P);
  pthread_t th[8];
  for (int r = 0; r < P; r++) pthread_create(&th[r], NULL, thread_timing, (void *)(intptr_t)r);
  for (int r = 0; r < P; r++) pthread_join(th[r], NULL);
  pthread_barrier_destroy(&g_tbar);
}

static int run(const char *name, int nranks, gt_rank_fn fn) {
  printf("--- %s (%d ranks, %d a node)\n", name, nranks, g_per_node);
  fflush(stdout);
  int failed = gt_spawn_env(nranks, fn, env_nodes);
  GT_CHECK(failed == 0, "%s: %d rank(s) failed", name, failed);
  return failed;
}

static const char *g_chunks[] = {"65536", NULL, "1048576"}; /* MELD_NET_CHUNK_BYTES of the timings */

/* TEST_NET_ONLY=part[,part...] runs only those parts (collectives, split, tp, moe, timing, missing,
 * mismatch, threads); unset: all. */
static int want(const char *part) {
  const char *o = getenv("TEST_NET_ONLY");
  if (!o || !*o) return 1;
  const size_t n = strlen(part);
  for (const char *p = o; (p = strstr(p, part)) != NULL; p += n)
    if ((p == o || p[-1] == ',') && (p[n] == '\0' || p[n] == ',')) return 1;
  return 0;
}

static void run_procs(int ndev) {
  g_per_node = 1;
  if (want("collectives")) {
    run("collectives, 2 nodes x 1 rank", 2, rank_collectives);
    if (ndev >= 3) run("collectives, 3 nodes x 1 rank", 3, rank_collectives);
    if (ndev >= 4) {
      g_per_node = 2;
      run("collectives, 2 nodes x 2 ranks (hierarchical)", 4, rank_collectives);
      setenv("MELD_NET_HIER", "0", 1);
      run("collectives, 2 nodes x 2 ranks (flat: MELD_NET_HIER=0)", 4, rank_collectives);
      unsetenv("MELD_NET_HIER");
    }
  }
  g_per_node = 1;
  if (want("split")) {
    run("meld_comm_split, 2 nodes x 1 rank", 2, rank_split);
    if (ndev >= 4) {
      g_per_node = 2;
      run("meld_comm_split, 2 nodes x 2 ranks", 4, rank_split);
      g_per_node = 1;
    }
  }
  if (want("tp")) {
    run("tensor-parallel ops and ring attention, 2 nodes x 1 rank", 2, rank_tp_ops);
    if (ndev >= 4) {
      g_per_node = 2;
      run("tensor-parallel ops and ring attention, 2 nodes x 2 ranks", 4, rank_tp_ops);
      g_per_node = 1;
    }
  }
  if (want("moe")) {
    run("MoE dispatch, grouped GEMM, combine and layer, 2 nodes x 1 rank", 2, rank_moe);
    if (ndev >= 4) {
      g_per_node = 2;
      run("MoE dispatch, grouped GEMM, combine and layer, 2 nodes x 2 ranks (the hierarchy's comms)", 4, rank_moe);
      setenv("MELD_NET_HIER", "0", 1); /* (the MoE ops make their own node and rail comms) */
      run("MoE dispatch, grouped GEMM, combine and layer, 2 nodes x 2 ranks (MELD_NET_HIER=0)", 4, rank_moe);
      unsetenv("MELD_NET_HIER");
      g_per_node = 1;
    }
  }
  for (int i = 0; i < 3 && want("timing"); i++) {
    g_chunk = g_chunks[i];
    run("timing (a functional figure)", 2, rank_timing);
  }
  g_chunk = "65536";
  if (want("missing")) run("a rank that never calls", 2, rank_missing);
  if (want("mismatch")) run("sizes that differ between nodes", 2, rank_mismatch);
}

int main(void) {
  const int ndev = gt_device_count();
  printf("test_net: %d rank slot(s)\n", ndev);
  if (ndev < 2) {
    printf("skipped: needs 2 ranks (2 GPUs, or MELD_SHARE_GPU=1 on one: tests/gpu/run_shared.sh 2 test_net)\n");
    return gt_summary("test_net");
  }
  /* TEST_NET_THREADS_ONLY=1: only the rank-thread timings (the last part; = TEST_NET_ONLY=threads) */
  const int procs = !getenv("TEST_NET_THREADS_ONLY");
  if (procs) run_procs(ndev);
  if (!want("threads")) return gt_summary("test_net");
  /* Last: this process starts CUDA here (no fork after it). */
  gt_inproc_env(); /* (32 hardware queues unless set: gpu_test.h says why) */
  setenv("MELD_SHARE_GPU", "1", 1);
  unsetenv("MELD_NODE_ID");
  for (int i = 0; i < 3; i++) {
    g_chunk = g_chunks[i];
    if (g_chunk) setenv("MELD_NET_CHUNK_BYTES", g_chunk, 1);
    else unsetenv("MELD_NET_CHUNK_BYTES");
    run_threads(2, 1);
    if (ndev >= 4) {
      run_threads(4, 2); /* (flat; hierarchical too with MELD_NET_HIER=2: comm.c hier_create) */
      if (thread_hier_on(4, 2)) {
        setenv("MELD_NET_HIER", "0", 1);
        run_threads(4, 2);
        setenv("MELD_NET_HIER", "2", 1);
      }
    }
  }
  return gt_summary("test_net");
}
