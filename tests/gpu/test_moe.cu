/* test_moe.cu — meld_moe_dispatch_gemm with ranks as threads of this process (sharing the GPUs
 * present, as test_ring_attn does). Every rank generates every rank's tokens and routing alike
 * (seeded), calls the op, and checks on its own experts:
 * - expert_counts and expert_offsets against the counts from every rank's routing (segments
 *   padded to 128 rows, in expert order);
 * - row_origin: every (source rank, slot) routed to one of its experts appears exactly once, in
 *   that expert's segment, sources in rank order within it and a source's slots in order (the
 *   deterministic layout); padding rows (-1, -1);
 * - y against an fp32 reference (each used row = its origin token x the expert's weight^T),
 *   relative Frobenius error <= 1e-2 per expert segment.
 * Outputs poisoned first; fresh random inputs per call; tokens differing between ranks (one rank
 * with none), -1 slots, skewed routing (most tokens to one expert, empty experts), hidden and n
 * not multiples of 64 / 256, two calls back to back without host sync, a CUDA graph replayed on
 * new inputs, refused arguments, and (last, the comm is then aborted) a capacity overflow, ranks
 * that disagree, or a topk id out of range (one per path): every rank fails fast with a clear
 * message. The paths: the default (the routing in the fused kernel's comm CTAs); one comm CTA, no
 * deferred epilogue, 3 routing CTAs (the routing kernel); vector copies, the combine's own sends,
 * 16 routing CTAs (MELD_MOE_ROUTE_CTAS: the per-CTA counts and their barrier, also where a CTA has
 * no pairs; in the fused kernel up to its comm CTAs); the routing kernel with 16 CTAs (ends with a
 * topk id out of range); the fused kernel's routing on 4 CTAs (ends with ranks that disagree).
 * After each case: meld_moe_combine (every slot's row back, weighted sum, against a host reference
 * from every rank's origins and y2) and meld_moe_grouped_gemm on the same layout (against an fp32
 * reference per expert segment).
 * Then meld_moe_ffn (the whole SwiGLU layer) against an fp32 reference computed from the inputs
 * alone (per slot: silu(x gate^T) x (x up^T) rounded to bf16, then down_proj, weighted fp32 sum),
 * expert_counts, two calls back to back, a graph replayed; and its refused arguments.
 * Rank counts: argument 1 (default 1,2,3,4). */
#include <pthread.h>

#include "gpu_test.h"

#define MOE_MAXP 8
static int P;
static meld_unique_id g_id;
static int g_ndev;
static pthread_barrier_t g_bar;
static int g_last; /* 0: end with the capacity overflow; 1: with mismatched arguments; 2: a topk id
                      out of range on every rank */
/* the combine's check: every rank's origins, layout and y2 on the host (filled between barriers) */
static int32_t *g_orig[MOE_MAXP], *g_off[MOE_MAXP], *g_cnt[MOE_MAXP];
static uint16_t *g_y2[MOE_MAXP];

typedef struct {
  int T, topk, E, H, N, cap; /* T: tokens of rank 0 (rank r: T + 37 r, rank 1 none when T_zero) */
  int skew;                  /* 1: 3 of 4 slots to expert 1, experts 2, 3 never named            */
  int holes;                 /* 1: every 5th slot -1                                              */
  int t_zero;                /* 1: rank 1 has no tokens                                            */
} moe_case_t;
static const moe_case_t g_cases[] = {
    {200, 2, 24, 256, 256, 0, 0, 0, 0},  {300, 4, 48, 264, 200, 0, 0, 1, 0},
    {129, 1, 4, 512, 512, 0, 1, 0, 1},   {1000, 8, 32, 1024, 136, 0, 0, 0, 0},
    {64, 3, 12, 128, 1032, 0, 1, 1, 0},
};
#define MOE_CASES (sizeof g_cases / sizeof g_cases[0])
#define MAX_T 1300 /* T + 37 x 7 */
#define MAX_ELEMS_X ((size_t)MAX_T * 1024)

static int tokens_of(const moe_case_t *c, int r) { return c->t_zero && r == 1 ? 0 : c->T + 37 * r; }
static int64_t cap_of(const moe_case_t *c) {
  /* rows in use on a rank <= all pairs + 128 per expert; the case's capacity is set from that */
  int64_t pairs = 0;
  for (int r = 0; r < P; r++) pairs += (int64_t)tokens_of(c, r) * c->topk;
  const int64_t el = c->E / (c->E % P == 0 ? P : 1);
  return ((pairs + 127) / 128 + el) * 128;
}

/* Rank s's routing for seed: ids[t * topk + j] (distinct experts per token, or -1). */
static void routing(const moe_case_t *c, int s, uint64_t seed, int32_t *ids) {
  uint64_t st = seed * 7919 + (uint64_t)s * 104729 + 1;
  const int T = tokens_of(c, s);
  for (int t = 0; t < T; t++)
    for (int j = 0; j < c->topk; j++) {
      int32_t e;
      for (;;) {
        if (c->skew && gt_rand_u64(&st) % 4 != 0) e = 1;
        else e = (int32_t)(gt_rand_u64(&st) % (uint64_t)c->E);
        if (c->skew && (e == 2 || e == 3)) continue;
        int dup = 0;
        for (int q = 0; q < j; q++) dup |= ids[t * c->topk + q] == e;
        if (!dup || c->E <= c->topk) break;
      }
      if (c->holes && (t * c->topk + j) % 5 == 4) e = -1;
      ids[t * c->topk + j] = e;
    }
}

/* y_ref[row, col] = x_src[token] . w[expert, col] in fp32 for every row with an origin. */
__global__ void ref_moe(float *yref, const int32_t *origin, const __nv_bfloat16 *xall, const int64_t *xoff,
                        const __nv_bfloat16 *w, const int32_t *row_expert, int64_t rows, int n, int h, int topk) {
  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i >= rows * n) return;
  const int64_t row = i / n;
  const int col = (int)(i % n);
  const int s = origin[2 * row], pair = origin[2 * row + 1], e = row_expert[row];
  if (s < 0 || e < 0) {
    yref[i] = 0.f;
    return;
  }
  const __nv_bfloat16 *xr = xall + (xoff[s] + pair / topk) * h, *wr = w + ((int64_t)e * n + col) * h;
  float acc = 0.f;
  for (int k = 0; k < h; k++) acc += __bfloat162float(xr[k]) * __bfloat162float(wr[k]);
  yref[i] = acc;
}

/* The worst relative Frobenius error over the expert segments (rows [off[j], + cnt[j]) of n
 * columns) of y (bf16) against ref (fp32); a NaN stays. */
static double seg_rel_err(const uint16_t *y, const float *ref, int n, const int32_t *off, const int32_t *cnt, int EL) {
  double worst = 0;
  for (int j = 0; j < EL; j++) {
    double num = 0, den = 0;
    for (int64_t r = off[j]; r < off[j] + cnt[j]; r++)
      for (int q = 0; q < n; q++) {
        const double d = (double)bf2f(y[r * n + q]) - ref[r * n + q];
        num += d * d, den += (double)ref[r * n + q] * ref[r * n + q];
      }
    const double rel = cnt[j] ? sqrt(num / (den > 0 ? den : 1)) : 0;
    if (!(rel <= worst)) worst = rel;
  }
  return worst;
}

typedef struct {
  uint16_t *x[2], *xall[2], *w, *y[2];
  int32_t *ids[2], *off[2], *cnt[2], *orig[2], *rexp;
  int64_t *xoff[2];
  float *yref;
} moe_bufs_t;

/* Inputs of call `call` (seed): this rank's x and ids, and every rank's x into xall (the
 * reference's copy); outputs poisoned. Host: every rank's ids into hids[s]. */
static void moe_inputs(const moe_case_t *c, int rank, uint64_t seed, moe_bufs_t *b, int call, int32_t **hids,
                       cudaStream_t st) {
  int64_t xo[MOE_MAXP], acc = 0;
  for (int s = 0; s < P; s++) {
    routing(c, s, seed, hids[s]);
    xo[s] = acc;
    const int T = tokens_of(c, s);
    if (T) gt_fill_bf16<<<128, 256, 0, st>>>(b->xall[call] + acc * c->H, (size_t)T * c->H, seed * 31 + s);
    acc += T;
  }
  const int T = tokens_of(c, rank);
  if (T) {
    GT_CUDA(cudaMemcpyAsync(b->x[call], b->xall[call] + xo[rank] * c->H, (size_t)T * c->H * 2, cudaMemcpyDeviceToDevice, st));
    GT_CUDA(cudaMemcpyAsync(b->ids[call], hids[rank], (size_t)T * c->topk * 4, cudaMemcpyHostToDevice, st));
  }
  GT_CUDA(cudaMemcpyAsync(b->xoff[call], xo, sizeof xo, cudaMemcpyHostToDevice, st));
  GT_CUDA(cudaMemsetAsync(b->y[call], 0xff, (size_t)cap_of(c) * c->N * 2, st));
  GT_CUDA(cudaMemsetAsync(b->off[call], 0x7f, (size_t)(c->E / P + 1) * 4, st));
  GT_CUDA(cudaMemsetAsync(b->cnt[call], 0x7f, (size_t)(c->E / P) * 4, st));
  GT_CUDA(cudaMemsetAsync(b->orig[call], 0x55, (size_t)cap_of(c) * 8, st));
  GT_CUDA(cudaStreamSynchronize(st)); /* (hids are reused by the next call's inputs) */
}

static void moe_args(const moe_case_t *c, int rank, moe_bufs_t *b, int call, meld_moe_args_t *a) {
  memset(a, 0, sizeof *a);
  a->x = b->x[call], a->topk_ids = b->ids[call], a->tokens = tokens_of(c, rank), a->topk = c->topk;
  a->experts = c->E, a->hidden = c->H, a->w = b->w, a->n = c->N, a->y = b->y[call], a->capacity = cap_of(c);
  a->expert_offsets = b->off[call], a->expert_counts = b->cnt[call], a->row_origin = b->orig[call];
}

/* Checks call `call`'s outputs of this rank (inputs from moe_inputs of the same slot). */
static void moe_check(const moe_case_t *c, int rank, moe_bufs_t *b, int call, int32_t **hids, const char *what,
                      cudaStream_t st) {
  const int EL = c->E / P, N = c->N;
  const int64_t cap = cap_of(c);
  int32_t *off = (int32_t *)malloc((EL + 1) * 4), *cnt = (int32_t *)malloc(EL * 4), *orig = (int32_t *)malloc(cap * 8);
  int32_t *rexp = (int32_t *)malloc(cap * 4);
  GT_CUDA(cudaMemcpyAsync(off, b->off[call], (EL + 1) * 4, cudaMemcpyDeviceToHost, st));
  GT_CUDA(cudaMemcpyAsync(cnt, b->cnt[call], EL * 4, cudaMemcpyDeviceToHost, st));
  GT_CUDA(cudaMemcpyAsync(orig, b->orig[call], cap * 8, cudaMemcpyDeviceToHost, st));
  GT_CUDA(cudaStreamSynchronize(st));
  char name[160];
  snprintf(name, sizeof name, "moe P=%d T %d topk %d E %d H %d N %d%s%s%s, %s", P, c->T, c->topk, c->E, c->H, N,
           c->skew ? " skew" : "", c->holes ? " holes" : "", c->t_zero ? " rank1-empty" : "", what);
  /* expected counts and layout */
  int64_t want_cnt[1024] = {0};
  for (int s = 0; s < P; s++)
    for (int i = 0; i < tokens_of(c, s) * c->topk; i++) {
      const int e = hids[s][i];
      if (e >= rank * EL && e < (rank + 1) * EL) want_cnt[e - rank * EL]++;
    }
  int bad = 0;
  int64_t row = 0;
  for (int j = 0; j < EL && !bad; j++) {
    if (cnt[j] != want_cnt[j] || off[j] != row) bad = 1, gt_log("%s: expert %d: count %d (want %lld), offset %d (want %lld)\n", name, j, cnt[j], (long long)want_cnt[j], off[j], (long long)row);
    row += (want_cnt[j] + 127) / 128 * 128;
  }
  if (!bad && off[EL] != row) bad = 1, gt_log("%s: rows in use %d, want %lld\n", name, off[EL], (long long)row);
  GT_CHECK(!bad, "%s: counts / offsets", name);
  /* origins: each routed slot exactly once, in its expert's segment, sources in order */
  size_t seen_n = 0;
  int64_t base[MOE_MAXP + 1];
  base[0] = 0;
  for (int s = 0; s < P; s++) base[s + 1] = base[s] + (int64_t)tokens_of(c, s) * c->topk;
  uint8_t *seen = (uint8_t *)calloc(base[P] + 1, 1);
  bad = 0;
  for (int64_t r = 0; r < cap; r++) rexp[r] = -1;
  for (int j = 0; j < EL && !bad; j++) {
    int prev_s = -1, prev_pr = -1;
    const int64_t end = j + 1 < EL ? off[j + 1] : off[EL];
    for (int64_t r = off[j]; r < end && !bad; r++) {
      const int s = orig[2 * r], pr = orig[2 * r + 1];
      if (r - off[j] >= cnt[j]) {
        if (s != -1 || pr != -1) bad = 1, gt_log("%s: padding row %lld has origin (%d, %d)\n", name, (long long)r, s, pr);
        continue;
      }
      if (s < 0 || s >= P || pr < 0 || pr >= tokens_of(c, s) * c->topk || hids[s][pr] != rank * EL + j || s < prev_s ||
          (s == prev_s && pr <= prev_pr) || seen[base[s] + pr]) {
        bad = 1;
        gt_log("%s: row %lld (expert %d): origin (%d, %d) wrong\n", name, (long long)r, j, s, pr);
        continue;
      }
      seen[base[s] + pr] = 1, seen_n++, prev_s = s, prev_pr = pr, rexp[r] = j;
    }
  }
  for (int64_t r = off[EL]; r < cap && !bad; r++)
    if (orig[2 * r] != -1 || orig[2 * r + 1] != -1) bad = 1, gt_log("%s: unused row %lld has an origin\n", name, (long long)r);
  int64_t want_n = 0;
  for (int j = 0; j < EL; j++) want_n += want_cnt[j];
  if (!bad && (int64_t)seen_n != want_n) bad = 1, gt_log("%s: %zu rows, want %lld\n", name, seen_n, (long long)want_n);
  GT_CHECK(!bad, "%s: row_origin", name);
  /* y against the fp32 reference, per expert segment */
  GT_CUDA(cudaMemcpyAsync(b->rexp, rexp, cap * 4, cudaMemcpyHostToDevice, st));
  const int64_t used = off[EL] > 0 && off[EL] <= cap ? off[EL] : 0;
  if (used > 0) {
    ref_moe<<<(unsigned)((used * N + 255) / 256), 256, 0, st>>>(b->yref, b->orig[call], (const __nv_bfloat16 *)b->xall[call],
                                                                 b->xoff[call], (const __nv_bfloat16 *)b->w, b->rexp, used, N,
                                                                 c->H, c->topk);
    float *yr = (float *)malloc(used * N * 4);
    uint16_t *y = (uint16_t *)malloc(used * N * 2);
    GT_CUDA(cudaMemcpyAsync(yr, b->yref, used * N * 4, cudaMemcpyDeviceToHost, st));
    GT_CUDA(cudaMemcpyAsync(y, b->y[call], used * N * 2, cudaMemcpyDeviceToHost, st));
    GT_CUDA(cudaStreamSynchronize(st));
    const double worst = seg_rel_err(y, yr, N, off, cnt, EL);
    GT_CHECK(worst <= 1e-2, "%s: y relative error %.3g (> 1e-2)", name, worst);
    free(yr), free(y);
  }
  free(off), free(cnt), free(orig), free(rexp), free(seen);
}

/* meld_moe_combine after the dispatch of slot 0 (routing hids): y2 random, weights random, out
 * poisoned; the reference from every rank's origins and y2 (host, fp32). */
static void combine_check(const moe_case_t *c, int rank, moe_bufs_t *b, int32_t **hids, const meld_moe_args_t *disp,
                          uint16_t *y2, float *wt, uint16_t *out, meld_comm_t comm, cudaStream_t st) {
  const int EL = c->E / P, T = tokens_of(c, rank), H = c->H;
  const int64_t cap = cap_of(c);
  gt_fill_bf16<<<256, 256, 0, st>>>(y2, (size_t)cap * H, 900 + 7 * rank + c->T);
  float *hw = (float *)malloc(((size_t)T * c->topk + 1) * 4);
  uint64_t sd = 4242 + rank;
  for (int i = 0; i < T * c->topk; i++) hw[i] = 0.25f + 0.5f * (gt_rand_f(&sd) + 1.f);
  if (T) GT_CUDA(cudaMemcpyAsync(wt, hw, (size_t)T * c->topk * 4, cudaMemcpyHostToDevice, st));
  if (T) GT_CUDA(cudaMemsetAsync(out, 0xff, (size_t)T * H * 2, st));
  meld_moe_combine_args_t cb;
  memset(&cb, 0, sizeof cb);
  cb.dispatch = disp, cb.y2 = y2, cb.topk_weights = wt, cb.out = out;
  GT_MELD(meld_moe_combine(comm, &cb, st));
  GT_CUDA(cudaStreamSynchronize(st));
  GT_MELD(meld_comm_check(comm));
  g_orig[rank] = (int32_t *)malloc(cap * 8), g_off[rank] = (int32_t *)malloc((EL + 1) * 4);
  g_cnt[rank] = (int32_t *)malloc(EL * 4), g_y2[rank] = (uint16_t *)malloc(cap * H * 2);
  GT_CUDA(cudaMemcpy(g_orig[rank], b->orig[0], cap * 8, cudaMemcpyDeviceToHost));
  GT_CUDA(cudaMemcpy(g_off[rank], b->off[0], (EL + 1) * 4, cudaMemcpyDeviceToHost));
  GT_CUDA(cudaMemcpy(g_cnt[rank], b->cnt[0], EL * 4, cudaMemcpyDeviceToHost));
  GT_CUDA(cudaMemcpy(g_y2[rank], y2, cap * H * 2, cudaMemcpyDeviceToHost));
  pthread_barrier_wait(&g_bar);
  /* where each of this rank's slots went: (rank d, row r) */
  int64_t *where = (int64_t *)malloc(((size_t)T * c->topk + 1) * 8);
  for (int i = 0; i < T * c->topk; i++) where[i] = -1;
  for (int d = 0; d < P; d++)
    for (int j = 0; j < EL; j++)
      for (int64_t r = g_off[d][j]; r < g_off[d][j] + g_cnt[d][j]; r++)
        if (g_orig[d][2 * r] == rank) where[g_orig[d][2 * r + 1]] = (int64_t)d * cap + r;
  uint16_t *ho = (uint16_t *)malloc((size_t)T * H * 2 + 2);
  if (T) GT_CUDA(cudaMemcpy(ho, out, (size_t)T * H * 2, cudaMemcpyDeviceToHost));
  double num = 0, den = 0;
  int missing = 0;
  for (int t = 0; t < T; t++)
    for (int h = 0; h < H; h++) {
      double ref = 0;
      for (int j = 0; j < c->topk; j++) {
        const int q = t * c->topk + j;
        if (hids[rank][q] < 0) continue;
        if (where[q] < 0) {
          missing++;
          continue;
        }
        ref += (double)hw[q] * bf2f(g_y2[where[q] / cap][(where[q] % cap) * H + h]);
      }
      const double dd = bf2f(ho[(size_t)t * H + h]) - ref;
      num += dd * dd, den += ref * ref;
    }
  const double rel = den > 0 ? sqrt(num / den) : (num > 0 ? 1 : 0);
  GT_CHECK(missing == 0 && rel <= 1e-2, "moe combine P=%d T %d topk %d E %d H %d: rel err %.3g, %d slots without a row", P,
           c->T, c->topk, c->E, H, rel, missing);
  if (rank == 0) gt_log("moe combine P=%d T %d topk %d E %d H %d: rel err %.3g\n", P, c->T, c->topk, c->E, H, rel);
  pthread_barrier_wait(&g_bar); /* (every rank done with the shared copies) */
  free(g_orig[rank]), free(g_off[rank]), free(g_cnt[rank]), free(g_y2[rank]);
  free(hw), free(where), free(ho);
}

/* c[row] = a[row] x w2[expert of row]^T in fp32, rows in use (rexp >= 0), else 0. */
__global__ void ref_grouped(float *cref, const __nv_bfloat16 *a, const __nv_bfloat16 *w2, const int32_t *rexp,
                            int64_t rows, int n, int k) {
  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i >= rows * n) return;
  const int64_t row = i / n;
  const int col = (int)(i % n), e = rexp[row];
  float acc = 0.f;
  if (e >= 0)
    for (int h = 0; h < k; h++) acc += __bfloat162float(a[row * k + h]) * __bfloat162float(w2[((int64_t)e * n + col) * k + h]);
  cref[i] = acc;
}

/* meld_moe_grouped_gemm on slot 0's dispatch layout: a = that dispatch's y [capacity, N] (k = N),
 * w2 random [E_loc, 72, N] -> c [capacity, 72], checked per expert segment against ref_grouped. */
static void grouped_check(const moe_case_t *c, int rank, moe_bufs_t *b, const meld_moe_args_t *disp, uint16_t *w2,
                          uint16_t *cc, meld_comm_t comm, cudaStream_t st) {
  const int EL = c->E / P, N2 = 72, K = c->N;
  const int64_t cap = cap_of(c);
  gt_fill_bf16<<<256, 256, 0, st>>>(w2, (size_t)EL * N2 * K, 77 + rank);
  GT_CUDA(cudaMemsetAsync(cc, 0xff, (size_t)cap * N2 * 2, st));
  meld_moe_gemm_args_t g;
  memset(&g, 0, sizeof g);
  g.dispatch = disp, g.a = b->y[0], g.k = K, g.w = w2, g.n = N2, g.c = cc;
  GT_MELD(meld_moe_grouped_gemm(comm, &g, st));
  int32_t *off = (int32_t *)malloc((EL + 1) * 4), *cnt = (int32_t *)malloc(EL * 4), *rexp = (int32_t *)malloc(cap * 4);
  GT_CUDA(cudaMemcpyAsync(off, b->off[0], (EL + 1) * 4, cudaMemcpyDeviceToHost, st));
  GT_CUDA(cudaMemcpyAsync(cnt, b->cnt[0], EL * 4, cudaMemcpyDeviceToHost, st));
  GT_CUDA(cudaStreamSynchronize(st));
  for (int64_t r = 0; r < cap; r++) rexp[r] = -1;
  for (int j = 0; j < EL; j++)
    for (int64_t r = off[j]; r < off[j] + cnt[j]; r++) rexp[r] = j;
  GT_CUDA(cudaMemcpyAsync(b->rexp, rexp, cap * 4, cudaMemcpyHostToDevice, st));
  ref_grouped<<<(unsigned)((cap * N2 + 255) / 256), 256, 0, st>>>(b->yref, (const __nv_bfloat16 *)b->y[0],
                                                                 (const __nv_bfloat16 *)w2, b->rexp, cap, N2, K);
  float *yr = (float *)malloc(cap * N2 * 4);
  uint16_t *hc = (uint16_t *)malloc(cap * N2 * 2);
  GT_CUDA(cudaMemcpyAsync(yr, b->yref, cap * N2 * 4, cudaMemcpyDeviceToHost, st));
  GT_CUDA(cudaMemcpyAsync(hc, cc, cap * N2 * 2, cudaMemcpyDeviceToHost, st));
  GT_CUDA(cudaStreamSynchronize(st));
  GT_MELD(meld_comm_check(comm));
  const double worst = seg_rel_err(hc, yr, N2, off, cnt, EL);
  GT_CHECK(worst <= 1e-2, "moe grouped GEMM P=%d T %d E %d k %d: relative error %.3g (> 1e-2)", P, c->T, c->E, K, worst);
  if (rank == 0) gt_log("moe grouped GEMM P=%d T %d E %d k %d n %d: rel err %.3g\n", P, c->T, c->E, K, N2, worst);
  free(off), free(cnt), free(rexp), free(yr), free(hc);
}

/* ---- meld_moe_ffn: the whole layer against an fp32 reference from the inputs alone ------------- */

/* FFN cases (N = ffn): the dispatch's N is 2 ffn (gate and up rows). */
static const moe_case_t g_ffn_cases[] = {
    {200, 2, 24, 256, 128, 0, 0, 0, 0}, {300, 4, 48, 264, 256, 0, 0, 1, 0},
    {129, 1, 4, 512, 128, 0, 1, 0, 1},  {1000, 8, 32, 1024, 256, 0, 0, 0, 0},
};
#define FFN_CASES (sizeof g_ffn_cases / sizeof g_ffn_cases[0])

/* act[q, f] = bf16(silu(x_t . w1[e, f]) * (x_t . w1[e, F + f])) for slot q = t topk + j, e = ids[q]
 * (0 for -1): the layer's intermediate, rounded as the layer rounds it. w1 is every expert's. */
__global__ void ref_ffn_act(float *act, const __nv_bfloat16 *x, const int32_t *ids, const __nv_bfloat16 *w1,
                            int64_t slots, int F, int H, int topk) {
  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i >= slots * F) return;
  const int64_t q = i / F;
  const int f = (int)(i % F), e = ids[q];
  if (e < 0) {
    act[i] = 0.f;
    return;
  }
  const __nv_bfloat16 *xr = x + (q / topk) * H, *g = w1 + ((int64_t)e * 2 * F + f) * H, *u = g + (int64_t)F * H;
  float ag = 0.f, au = 0.f;
  for (int k = 0; k < H; k++) {
    const float xv = __bfloat162float(xr[k]);
    ag += xv * __bfloat162float(g[k]), au += xv * __bfloat162float(u[k]);
  }
  act[i] = __bfloat162float(__float2bfloat16(ag / (1.f + expf(-ag)) * au));
}

/* out[t, h] = sum_j wt[t, j] bf16(act[t topk + j] . w2[e, h]) (the second GEMM's rows rounded). */
__global__ void ref_ffn_out(float *out, const float *act, const int32_t *ids, const float *wt, const __nv_bfloat16 *w2,
                            int64_t T, int F, int H, int topk) {
  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i >= T * H) return;
  const int64_t t = i / H;
  const int h = (int)(i % H);
  float o = 0.f;
  for (int j = 0; j < topk; j++) {
    const int64_t q = t * topk + j;
    const int e = ids[q];
    if (e < 0) continue;
    const __nv_bfloat16 *wr = w2 + ((int64_t)e * H + h) * F;
    float a = 0.f;
    for (int f = 0; f < F; f++) a += act[q * F + f] * __bfloat162float(wr[f]);
    o += wt[q] * __bfloat162float(__float2bfloat16(a));
  }
  out[i] = o;
}

typedef struct {
  uint16_t *w1, *w2, *out[2]; /* every expert's weights (each rank derives them alike); out per slot */
  float *wt[2], *act_ref, *out_ref;
  int32_t *counts[2];
  void *scratch;
} ffn_bufs_t;

/* out's leading dimension: H + 24 where that fits the buffer (H <= 512), else dense (0). */
static int64_t ffn_ldo(const moe_case_t *c) { return c->H <= 512 ? c->H + 24 : 0; }

static void ffn_args_of(const moe_case_t *c, int rank, moe_bufs_t *b, ffn_bufs_t *f, int slot, meld_moe_ffn_args_t *a) {
  const int EL = c->E / P, F = c->N, H = c->H;
  memset(a, 0, sizeof *a);
  a->x = b->x[slot], a->topk_ids = b->ids[slot], a->topk_weights = f->wt[slot], a->tokens = tokens_of(c, rank);
  a->topk = c->topk, a->experts = c->E, a->hidden = H, a->ffn = F, a->capacity = cap_of(c), a->out = f->out[slot];
  a->ldo = ffn_ldo(c);
  a->scratch = f->scratch, a->expert_counts = f->counts[slot];
  a->w1 = f->w1 + (size_t)rank * EL * 2 * F * H, a->w2 = f->w2 + (size_t)rank * EL * H * F;
}

/* Slot `slot`'s inputs for seed (x, ids, every rank's routing into hids, weights wt) and poisoned
 * outputs. */
static void ffn_inputs(const moe_case_t *c, int rank, uint64_t seed, moe_bufs_t *b, ffn_bufs_t *f, int slot,
                       int32_t **hids, cudaStream_t st) {
  const int T = tokens_of(c, rank), K = c->topk;
  moe_inputs(c, rank, seed, b, slot, hids, st);
  float *hw = (float *)malloc(((size_t)T * K + 1) * 4);
  uint64_t sd = seed * 13 + rank;
  for (int i = 0; i < T * K; i++) hw[i] = 0.25f + 0.5f * (gt_rand_f(&sd) + 1.f);
  if (T) GT_CUDA(cudaMemcpyAsync(f->wt[slot], hw, (size_t)T * K * 4, cudaMemcpyHostToDevice, st));
  if (T) GT_CUDA(cudaMemsetAsync(f->out[slot], 0xff, (size_t)T * (ffn_ldo(c) ? ffn_ldo(c) : c->H) * 2, st));
  GT_CUDA(cudaMemsetAsync(f->counts[slot], 0x7f, (size_t)(c->E / P) * 4, st));
  GT_CUDA(cudaStreamSynchronize(st));
  free(hw);
}

/* Slot `slot`'s out against the fp32 reference from its inputs alone, and its expert_counts
 * against every rank's routing. */
static void ffn_check(const moe_case_t *c, int rank, moe_bufs_t *b, ffn_bufs_t *f, int slot, int32_t **hids,
                      const char *what, cudaStream_t st) {
  const int EL = c->E / P, F = c->N, H = c->H, T = tokens_of(c, rank), K = c->topk;
  if (T) {
    ref_ffn_act<<<(unsigned)(((int64_t)T * K * F + 255) / 256), 256, 0, st>>>(
        f->act_ref, (const __nv_bfloat16 *)b->x[slot], b->ids[slot], (const __nv_bfloat16 *)f->w1, (int64_t)T * K, F, H, K);
    ref_ffn_out<<<(unsigned)(((int64_t)T * H + 255) / 256), 256, 0, st>>>(f->out_ref, f->act_ref, b->ids[slot], f->wt[slot],
                                                                          (const __nv_bfloat16 *)f->w2, T, F, H, K);
  }
  float *ref = (float *)malloc((size_t)T * H * 4 + 4);
  uint16_t *out = (uint16_t *)malloc((size_t)T * H * 2 + 2);
  int32_t cnt[1024];
  if (T) GT_CUDA(cudaMemcpyAsync(ref, f->out_ref, (size_t)T * H * 4, cudaMemcpyDeviceToHost, st));
  const int64_t ldo = ffn_ldo(c) ? ffn_ldo(c) : H;
  if (T)
    GT_CUDA(cudaMemcpy2DAsync(out, (size_t)H * 2, f->out[slot], (size_t)ldo * 2, (size_t)H * 2, (size_t)T,
                              cudaMemcpyDeviceToHost, st));
  uint16_t gap[24 * 4] = {0}; /* the columns between H and ldo of the first rows: still poison */
  const int gap_rows = T < 4 ? T : 4;
  if (ldo > H && gap_rows)
    GT_CUDA(cudaMemcpy2DAsync(gap, 24 * 2, f->out[slot] + H, (size_t)ldo * 2, 24 * 2, (size_t)gap_rows,
                              cudaMemcpyDeviceToHost, st));
  GT_CUDA(cudaMemcpyAsync(cnt, f->counts[slot], (size_t)EL * 4, cudaMemcpyDeviceToHost, st));
  GT_CUDA(cudaStreamSynchronize(st));
  double num = 0, den = 0;
  for (int64_t i = 0; i < (int64_t)T * H; i++) {
    const double d = (double)bf2f(out[i]) - ref[i];
    num += d * d, den += (double)ref[i] * ref[i];
  }
  const double rel = den > 0 ? sqrt(num / den) : (num > 0 ? 1 : 0);
  int gap_bad = 0;
  for (int i = 0; ldo > H && i < 24 * gap_rows; i++) gap_bad += gap[i] != 0xffff;
  GT_CHECK(gap_bad == 0, "moe ffn P=%d T %d H %d ldo %lld, %s: %d values written between hidden and ldo", P, c->T, H,
           (long long)ldo, what, gap_bad);
  int bad_cnt = 0;
  for (int j = 0; j < EL; j++) {
    int64_t want = 0;
    for (int s = 0; s < P; s++)
      for (int i = 0; i < tokens_of(c, s) * K; i++) want += hids[s][i] == rank * EL + j;
    bad_cnt += cnt[j] != want;
  }
  GT_CHECK(rel <= 1e-2 && bad_cnt == 0,
           "moe ffn P=%d T %d topk %d E %d H %d ffn %d%s%s%s, %s: out rel err %.3g (> 1e-2) or %d expert counts wrong",
           P, c->T, K, c->E, H, F, c->skew ? " skew" : "", c->holes ? " holes" : "", c->t_zero ? " rank1-empty" : "",
           what, rel, bad_cnt);
  if (rank == 0) gt_log("moe ffn P=%d T %d topk %d E %d H %d ffn %d, %s: rel err %.3g\n", P, c->T, K, c->E, H, F, what, rel);
  free(ref), free(out);
}

/* meld_moe_ffn on case ci: two calls back to back (slots 0 and 1, no host sync between), then
 * (case 1) a graph of a call replayed twice on new inputs. */
static void ffn_case(int ci, int rank, moe_bufs_t *b, ffn_bufs_t *f, int32_t *(*hids)[MOE_MAXP], meld_comm_t comm,
                     cudaStream_t st) {
  const moe_case_t *c = &g_ffn_cases[ci];
  const int F = c->N, H = c->H;
  for (int e = 0; e < c->E; e++) { /* every expert's weights, alike on every rank */
    gt_fill_bf16<<<64, 256, 0, st>>>(f->w1 + (size_t)e * 2 * F * H, (size_t)2 * F * H, 7000 + 100 * ci + e);
    gt_fill_bf16<<<64, 256, 0, st>>>(f->w2 + (size_t)e * H * F, (size_t)H * F, 9000 + 100 * ci + e);
  }
  meld_moe_ffn_args_t a[2];
  for (int slot = 0; slot < 2; slot++) {
    ffn_inputs(c, rank, 600 + 10 * ci + slot, b, f, slot, hids[slot], st);
    ffn_args_of(c, rank, b, f, slot, &a[slot]);
  }
  GT_MELD(meld_moe_ffn(comm, &a[0], st));
  GT_MELD(meld_moe_ffn(comm, &a[1], st));
  GT_CUDA(cudaStreamSynchronize(st));
  GT_MELD(meld_comm_check(comm));
  ffn_check(c, rank, b, f, 0, hids[0], "call 1 of 2 back to back", st);
  ffn_check(c, rank, b, f, 1, hids[1], "call 2 of 2 back to back", st);
  pthread_barrier_wait(&g_bar); /* (every rank read hids before new inputs overwrite them) */
  if (ci != 1) return;
  cudaGraph_t g;
  cudaGraphExec_t exec;
  GT_CUDA(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  const meld_result_t gr = meld_moe_ffn(comm, &a[0], st);
  GT_CUDA(cudaStreamEndCapture(st, &g));
  GT_MELD(gr);
  GT_CUDA(cudaGraphInstantiate(&exec, g, 0));
  GT_CUDA(cudaGraphDestroy(g));
  GT_CUDA(cudaGraphUpload(exec, st));
  GT_CUDA(cudaStreamSynchronize(st));
  pthread_barrier_wait(&g_bar);
  for (int rep = 0; rep < 2; rep++) {
    ffn_inputs(c, rank, 700 + rep, b, f, 0, hids[0], st);
    GT_CUDA(cudaGraphLaunch(exec, st));
    GT_CUDA(cudaStreamSynchronize(st));
    GT_MELD(meld_comm_check(comm));
    ffn_check(c, rank, b, f, 0, hids[0], rep ? "graph replay 2" : "graph replay 1", st);
    pthread_barrier_wait(&g_bar);
  }
  GT_CUDA(cudaGraphExecDestroy(exec));
}

static void *moe_rank(void *arg) {
  const int rank = (int)(intptr_t)arg;
  meld_config_t cfg;
  meld_comm_t comm;
  cudaStream_t st;
  if (gt_thread_comm(rank, P, g_ndev, g_id, 5000, &cfg, &comm, &st)) return NULL;
  moe_bufs_t b;
  memset(&b, 0, sizeof b);
  size_t maxcap = 0, maxel = 0, maxw = 0;
  for (size_t ci = 0; ci < MOE_CASES; ci++) {
    const moe_case_t *c = &g_cases[ci];
    if (c->E % P) continue;
    if ((size_t)cap_of(c) * c->N > maxcap) maxcap = (size_t)cap_of(c) * c->N;
    if ((size_t)cap_of(c) > maxel) maxel = (size_t)cap_of(c);
    if ((size_t)(c->E / P) * c->N * c->H > maxw) maxw = (size_t)(c->E / P) * c->N * c->H;
  }
  /* meld_moe_ffn's buffers (allocated before any collective call, like the rest) */
  ffn_bufs_t fb;
  memset(&fb, 0, sizeof fb);
  size_t maxw1 = 0, maxscr = 0, maxslots = 0;
  for (size_t ci = 0; ci < FFN_CASES; ci++) {
    const moe_case_t *c = &g_ffn_cases[ci];
    if (c->E % P) continue;
    if ((size_t)cap_of(c) * c->N > maxcap) maxcap = (size_t)cap_of(c) * c->N; /* (moe_inputs poisons y) */
    if ((size_t)c->E * 2 * c->N * c->H > maxw1) maxw1 = (size_t)c->E * 2 * c->N * c->H;
    const size_t sb = meld_moe_ffn_scratch_bytes(P, c->E, c->H, c->N, cap_of(c));
    if (sb > maxscr) maxscr = sb;
    if ((size_t)MAX_T * c->topk * c->N > maxslots) maxslots = (size_t)MAX_T * c->topk * c->N;
  }
  GT_CUDA(cudaMalloc(&fb.w1, maxw1 * 2 + 16));
  GT_CUDA(cudaMalloc(&fb.w2, maxw1 + 16)); /* (E H ffn = half of w1's) */
  GT_CUDA(cudaMalloc(&fb.scratch, maxscr + 256));
  GT_CUDA(cudaMalloc(&fb.act_ref, maxslots * 4 + 16));
  GT_CUDA(cudaMalloc(&fb.out_ref, MAX_ELEMS_X * 4));
  for (int i = 0; i < 2; i++) {
    GT_CUDA(cudaMalloc(&fb.out[i], MAX_ELEMS_X * 2));
    GT_CUDA(cudaMalloc(&fb.wt[i], MAX_T * 8 * 4));
    GT_CUDA(cudaMalloc(&fb.counts[i], 1024 * 4));
  }
  for (int i = 0; i < 2; i++) {
    GT_CUDA(cudaMalloc(&b.x[i], MAX_ELEMS_X * 2));
    GT_CUDA(cudaMalloc(&b.y[i], maxcap * 2));
    GT_CUDA(cudaMalloc(&b.ids[i], MAX_T * 8 * 4));
    GT_CUDA(cudaMalloc(&b.off[i], 1025 * 4));
    GT_CUDA(cudaMalloc(&b.cnt[i], 1024 * 4));
    GT_CUDA(cudaMalloc(&b.orig[i], maxel * 8));
  }
  for (int i = 0; i < 2; i++) GT_CUDA(cudaMalloc(&b.xall[i], MAX_ELEMS_X * MOE_MAXP * 2));
  GT_CUDA(cudaMalloc(&b.w, maxw * 2));
  GT_CUDA(cudaMalloc(&b.rexp, maxel * 4));
  for (int i = 0; i < 2; i++) GT_CUDA(cudaMalloc(&b.xoff[i], MOE_MAXP * 8));
  GT_CUDA(cudaMalloc(&b.yref, maxcap * 4));
  uint16_t *y2, *cout;
  float *wt;
  size_t maxy2 = 0;
  for (size_t ci = 0; ci < MOE_CASES; ci++)
    if (g_cases[ci].E % P == 0 && (size_t)cap_of(&g_cases[ci]) * g_cases[ci].H > maxy2)
      maxy2 = (size_t)cap_of(&g_cases[ci]) * g_cases[ci].H;
  GT_CUDA(cudaMalloc(&y2, maxy2 * 2));
  GT_CUDA(cudaMalloc(&cout, MAX_ELEMS_X * 2));
  GT_CUDA(cudaMalloc(&wt, MAX_T * 8 * 4));
  uint16_t *w2g, *cg; /* the grouped GEMM's weight [E_loc, 72, N] and output [capacity, 72] */
  size_t maxw2 = 0, maxc = 0;
  for (size_t ci = 0; ci < MOE_CASES; ci++)
    if (g_cases[ci].E % P == 0) {
      const moe_case_t *cc = &g_cases[ci];
      if ((size_t)(cc->E / P) * 72 * cc->N > maxw2) maxw2 = (size_t)(cc->E / P) * 72 * cc->N;
      if ((size_t)cap_of(cc) * 72 > maxc) maxc = (size_t)cap_of(cc) * 72;
    }
  GT_CUDA(cudaMalloc(&w2g, maxw2 * 2));
  GT_CUDA(cudaMalloc(&cg, maxc * 2));
  int32_t *hids[2][MOE_MAXP]; /* every rank's routing, per call slot */
  for (int i = 0; i < 2; i++)
    for (int s = 0; s < P; s++) hids[i][s] = (int32_t *)malloc(MAX_T * 8 * 4);
  for (size_t ci = 0; ci < MOE_CASES; ci++) {
    const moe_case_t *c = &g_cases[ci];
    if (c->E % P) continue; /* (every rank skips alike) */
    gt_fill_bf16<<<256, 256, 0, st>>>(b.w, (size_t)(c->E / P) * c->N * c->H, 500 + 10 * ci + rank);
    /* three calls back to back (no host sync between the launches): slot 0's inputs, slot 1's,
     * slot 0's again into the same outputs; then both slots checked */
    meld_moe_args_t a0, a1;
    const uint64_t seed = 40 + 10 * ci;
    moe_inputs(c, rank, seed, &b, 0, hids[0], st);
    moe_inputs(c, rank, seed + 1, &b, 1, hids[1], st);
    moe_args(c, rank, &b, 0, &a0);
    moe_args(c, rank, &b, 1, &a1);
    GT_MELD(meld_moe_dispatch_gemm(comm, &a0, st));
    GT_MELD(meld_moe_dispatch_gemm(comm, &a1, st));
    GT_MELD(meld_moe_dispatch_gemm(comm, &a0, st));
    GT_CUDA(cudaStreamSynchronize(st));
    GT_MELD(meld_comm_check(comm));
    moe_check(c, rank, &b, 0, hids[0], "calls 1 and 3 (back to back)", st);
    moe_check(c, rank, &b, 1, hids[1], "call 2 (back to back)", st);
    /* the combine of the last dispatch (slot 0's) */
    combine_check(c, rank, &b, hids[0], &a0, y2, wt, cout, comm, st);
    /* the second GEMM on the same layout */
    grouped_check(c, rank, &b, &a0, w2g, cg, comm, st);
    if (ci != 1) continue;
    /* a CUDA graph of a call, replayed on new inputs */
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    GT_CUDA(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    const meld_result_t gr = meld_moe_dispatch_gemm(comm, &a0, st);
    GT_CUDA(cudaStreamEndCapture(st, &graph));
    GT_MELD(gr);
    GT_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    GT_CUDA(cudaGraphUpload(exec, st));
    GT_CUDA(cudaStreamSynchronize(st));
    pthread_barrier_wait(&g_bar);
    for (int rep = 0; rep < 2; rep++) {
      moe_inputs(c, rank, seed + 100 + rep, &b, 0, hids[0], st);
      GT_CUDA(cudaGraphLaunch(exec, st));
      GT_CUDA(cudaStreamSynchronize(st));
      GT_MELD(meld_comm_check(comm));
      moe_check(c, rank, &b, 0, hids[0], rep ? "graph replay 2" : "graph replay 1", st);
    }
    GT_CUDA(cudaGraphExecDestroy(exec));
    GT_CUDA(cudaGraphDestroy(graph));
  }
  /* the whole layer, meld_moe_ffn */
  for (size_t ci = 0; ci < FFN_CASES; ci++)
    if (g_ffn_cases[ci].E % P == 0) ffn_case((int)ci, rank, &b, &fb, hids, comm, st); /* (every rank skips alike) */
  /* refused on the host (every rank alike) */
  {
    meld_moe_ffn_args_t fa;
    ffn_args_of(&g_ffn_cases[0], rank, &b, &fb, 0, &fa);
    fa.ffn = 200;
    GT_CHECK(meld_moe_ffn(comm, &fa, st) == MELD_ERR_INVALID_ARG && strstr(meld_last_error(), "ffn 200"),
             "moe ffn: ffn 200 accepted: %s", meld_last_error());
    ffn_args_of(&g_ffn_cases[0], rank, &b, &fb, 0, &fa);
    fa.scratch = NULL;
    GT_CHECK(meld_moe_ffn(comm, &fa, st) == MELD_ERR_INVALID_ARG && strstr(meld_last_error(), "scratch is NULL"),
             "moe ffn: scratch NULL accepted: %s", meld_last_error());
    ffn_args_of(&g_ffn_cases[0], rank, &b, &fb, 0, &fa);
    fa.topk_weights = NULL;
    GT_CHECK(meld_moe_ffn(comm, &fa, st) == MELD_ERR_INVALID_ARG && strstr(meld_last_error(), "topk_weights"),
             "moe ffn: topk_weights NULL accepted: %s", meld_last_error());
  }
  {
    const moe_case_t *c = &g_cases[0];
    meld_moe_args_t a;
    moe_args(c, rank, &b, 0, &a);
    a.capacity = 200;
    GT_CHECK(meld_moe_dispatch_gemm(comm, &a, st) == MELD_ERR_INVALID_ARG && strstr(meld_last_error(), "capacity 200"),
             "moe: capacity 200 accepted: %s", meld_last_error());
    moe_args(c, rank, &b, 0, &a);
    a.experts = P == 1 ? 0 : P * 2 + 1; /* (any count is a multiple of one rank) */
    GT_CHECK(meld_moe_dispatch_gemm(comm, &a, st) == MELD_ERR_INVALID_ARG && strstr(meld_last_error(), "experts"),
             "moe: experts %d accepted: %s", a.experts, meld_last_error());
    moe_args(c, rank, &b, 0, &a);
    a.hidden = 260;
    GT_CHECK(meld_moe_dispatch_gemm(comm, &a, st) == MELD_ERR_INVALID_ARG && strstr(meld_last_error(), "hidden"),
             "moe: hidden 260 accepted: %s", meld_last_error());
    moe_args(c, rank, &b, 0, &a);
    a.y = NULL;
    GT_CHECK(meld_moe_dispatch_gemm(comm, &a, st) == MELD_ERR_INVALID_ARG && strstr(meld_last_error(), "y is NULL"),
             "moe: y NULL accepted: %s", meld_last_error());
    GT_CHECK(meld_moe_dispatch_gemm(NULL, &a, st) == MELD_ERR_INVALID_ARG, "moe: NULL comm accepted");
    GT_CUDA(cudaStreamSynchronize(st));
    GT_MELD(meld_comm_check(comm));
  }
  /* last (the comm is aborted after it): a capacity overflow (all tokens to expert 0, whose rank
   * gets more rows than capacity), or, with 2+ ranks, ranks that disagree (rank 0's n differs) */
  {
    const moe_case_t *c = &g_cases[0];
    meld_moe_args_t a;
    moe_inputs(c, rank, 99, &b, 0, hids[0], st);
    moe_args(c, rank, &b, 0, &a);
    const char *want;
    if (g_last == 2) { /* every rank's last pair names expert E + 5 (several routing CTAs: the last finds it) */
      const int n = tokens_of(c, rank) * c->topk;
      if (n > 0) {
        hids[0][rank][n - 1] = c->E + 5;
        GT_CUDA(cudaMemcpy(b.ids[0], hids[0][rank], (size_t)n * 4, cudaMemcpyHostToDevice));
      }
      want = n > 0 ? "topk id out of range" : "";
    } else if (g_last == 0 || P == 1) {
      for (int i = 0; i < tokens_of(c, rank) * c->topk; i++) hids[0][rank][i] = i % c->topk == 0 ? 0 : -1;
      GT_CUDA(cudaMemcpy(b.ids[0], hids[0][rank], (size_t)tokens_of(c, rank) * c->topk * 4, cudaMemcpyHostToDevice));
      a.capacity = 128; /* expert 0 gets sum_r T_r >= 200 rows */
      want = "capacity";
    } else {
      a.n = rank == 0 ? c->N - 8 : c->N;
      want = "arguments differ";
    }
    const double t0 = gt_now_s();
    GT_MELD(meld_moe_dispatch_gemm(comm, &a, st));
    GT_CUDA(cudaStreamSynchronize(st));
    const meld_result_t r = meld_comm_check(comm);
    const double el = gt_now_s() - t0;
    /* (every rank's last pair is bad, but a rank whose peer found its own first reports that peer's
     * abort for unusable input: both are the failure asked for) */
    const int found = strstr(meld_last_error(), want) ||
                      (g_last == 2 && strstr(meld_last_error(), "aborted by rank") && strstr(meld_last_error(), "(unusable input)"));
    GT_CHECK(r != MELD_OK && found, "moe: %s not reported: %s: %s", want, meld_strerror(r), meld_last_error());
    GT_CHECK(el < 2.0, "moe: the failure took %.2f s", el);
    if (rank == 0) gt_log("moe: expected failure (%s): %s\n", want, meld_last_error());
  }
  for (int i = 0; i < 2; i++)
    cudaFree(b.x[i]), cudaFree(b.y[i]), cudaFree(b.ids[i]), cudaFree(b.off[i]), cudaFree(b.cnt[i]), cudaFree(b.orig[i]);
  for (int i = 0; i < 2; i++) cudaFree(b.xall[i]), cudaFree(b.xoff[i]);
  cudaFree(y2), cudaFree(cout), cudaFree(wt), cudaFree(w2g), cudaFree(cg);
  cudaFree(b.w), cudaFree(b.rexp), cudaFree(b.yref);
  cudaFree(fb.w1), cudaFree(fb.w2), cudaFree(fb.scratch), cudaFree(fb.act_ref), cudaFree(fb.out_ref);
  for (int i = 0; i < 2; i++) cudaFree(fb.out[i]), cudaFree(fb.wt[i]), cudaFree(fb.counts[i]);
  for (int i = 0; i < 2; i++)
    for (int s = 0; s < P; s++) free(hids[i][s]);
  GT_CUDA(cudaStreamDestroy(st));
  (void)meld_comm_destroy(comm);
  return NULL;
}

int main(int argc, char **argv) {
  gt_inproc_env();
  setenv("MELD_WORKSPACE_BYTES", "256M", 0); /* the largest case stages 34816 rows of 1024 at 4 ranks */
  const char *list = argc > 1 ? argv[1] : "1,2,3,4";
  if (!gt_hopper(&g_ndev)) {
    printf("test_moe: no Hopper GPU: skipped\n[  PASSED  ] 0 test(s).\n");
    return 0;
  }
  for (const char *s = list;;) {
    P = gt_next_count(&s, MOE_MAXP, "test_moe", list);
    if (P <= 0) {
      if (P < 0) return 2;
      break;
    }
    if (g_ndev < P) setenv("MELD_SHARE_GPU", "1", 1);
    static const struct {
      const char *name, *ctas, *copy, *send, *defer, *rctas, *rin;
      int last; /* g_last: how the path ends */
    } paths[] = {
        {"default (routing in the fused kernel; bulk copies; ffn: sends in the second GEMM with several ranks)", NULL,
         NULL, NULL, NULL, NULL, NULL, 0},
        {"one comm CTA; no deferred epilogue (the gated tiles' direct store; the routing kernel); 3 routing CTAs", "1",
         NULL, "1", "0", "3", NULL, 1},
        {"16-byte vector copies; ffn: the combine kernel sends; 16 routing CTAs (in the fused kernel: up to its comm "
         "CTAs)",
         NULL, "vec", "0", NULL, "16", NULL, 2},
        {"the routing kernel (MELD_MOE_ROUTE_IN=0); 16 routing CTAs", NULL, NULL, NULL, NULL, "16", "0", 2},
        {"routing in the fused kernel, 4 routing CTAs", NULL, NULL, NULL, NULL, "4", NULL, 1}};
    for (size_t pi = 0; pi < sizeof paths / sizeof paths[0]; pi++) {
      if (paths[pi].ctas) setenv("MELD_MOE_COMM_CTAS", paths[pi].ctas, 1);
      else unsetenv("MELD_MOE_COMM_CTAS");
      if (paths[pi].copy) setenv("MELD_MOE_COPY", paths[pi].copy, 1);
      else unsetenv("MELD_MOE_COPY");
      if (paths[pi].send) setenv("MELD_MOE_FFN_SEND", paths[pi].send, 1);
      else unsetenv("MELD_MOE_FFN_SEND");
      if (paths[pi].defer) setenv("MELD_MOE_DEFER", paths[pi].defer, 1);
      else unsetenv("MELD_MOE_DEFER");
      if (paths[pi].rctas) setenv("MELD_MOE_ROUTE_CTAS", paths[pi].rctas, 1);
      else unsetenv("MELD_MOE_ROUTE_CTAS");
      if (paths[pi].rin) setenv("MELD_MOE_ROUTE_IN", paths[pi].rin, 1);
      else unsetenv("MELD_MOE_ROUTE_IN");
      g_last = paths[pi].last;
      printf("test_moe: %d ranks as threads on %d GPU(s), %s\n", P, g_ndev < P ? g_ndev : P, paths[pi].name);
      fflush(stdout);
      if (meld_get_unique_id(&g_id) != MELD_OK) {
        printf("meld_get_unique_id: %s\n", meld_last_error());
        return 1;
      }
      gt_run_ranks(P, moe_rank, &g_bar);
    }
  }
  return gt_summary("test_moe");
}
