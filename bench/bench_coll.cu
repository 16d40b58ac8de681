/* bench_coll.cu — meld's collectives vs NCCL, side by side in one run, on all GPUs present:
 * all_gather, reduce_scatter, all_reduce (auto, and two-shot forced), all_to_all, bf16,
 * sizes 4 KB .. 1 GB (powers of 4), launched plainly and as CUDA-graph replays; and meld's
 * all-gather GB/s vs the number of 384-thread comm CTAs at 256 MB.
 *
 * Sizes and bus bandwidth follow nccl-tests: "size" is the total buffer (all_gather: the
 * gathered output; reduce_scatter: the input; all_reduce: the buffer; all_to_all: the input);
 * busbw = size / time x (P-1)/P (AG, RS, A2A) or x 2(P-1)/P (AR); P = 1 reports algbw.
 * Times are medians of >= 20 calls (batches of back-to-back calls, timed with events, ranks
 * aligned by a barrier before each batch) after 5 warm-up calls. rel_err compares meld's
 * output with NCCL's on the same inputs (0 for the copies; sums differ by summation order).
 *
 * Usage: bench_coll [--quick] [--json FILE] [--max-bytes N]
 *   --quick: sizes up to 256 MB, fewer samples (< 60 s).  NCCL_NVLS_ENABLE=0 is set here. */
#include <cuda_bf16.h>
#include <math.h>

#include "../tests/gpu/gpu_test.h"
/* bench_env copies the 256-byte device name into 128 bytes: truncation is intended there. */
#pragma GCC diagnostic ignored "-Wformat-truncation"
#include "bench_common.h"
#include "coll_plan.h"
#include "comm.h"
#include "nccl_baseline.h"

static int g_quick = 0;
static const char *g_json = NULL;
static size_t g_max_bytes = (size_t)1 << 30;

enum { OP_AG = 0, OP_RS = 1, OP_AR = 2, OP_A2A = 3 };
static const char *const g_opname[] = {"all_gather", "reduce_scatter", "all_reduce", "all_to_all"};

__global__ void bc_fill(uint16_t *p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t h = (uint32_t)i * 0x9E3779B1u ^ seed * 0x85EBCA77u;
    h ^= h >> 15, h *= 0x2C1B3C6Du, h ^= h >> 13;
    float v = ((int)(h & 0x3ff) - 512) / 256.0f;
    __nv_bfloat16 b = __float2bfloat16_rn(v == 0.0f ? 0.25f : v);
    p[i] = *(uint16_t *)&b;
  }
}

/* acc[0] += (a - b)^2, acc[1] += b^2 over n bf16 elements. */
__global__ void bc_diff(const uint16_t *a, const uint16_t *b, size_t n, double *acc) {
  double num = 0, den = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    double x = __uint_as_float((uint32_t)a[i] << 16), y = __uint_as_float((uint32_t)b[i] << 16);
    num += (x - y) * (x - y);
    den += y * y;
  }
  atomicAdd(&acc[0], num);
  atomicAdd(&acc[1], den);
}

typedef struct {
  int lib; /* 0 meld, 1 NCCL */
  int op;
  const void *send;
  void *recv;
  size_t count;
  const meld_coll_plan_hint_t *hint; /* meld only; NULL = the public function */
} bc_run_t;

typedef struct {
  meld_comm_t comm;
  ncclComm_t nc;
  cudaStream_t s;
  cudaEvent_t e0, e1;
  int rank, P;
} bc_ctx_t;

static int bc_enqueue(bc_ctx_t *c, const bc_run_t *r) {
  if (r->lib == 1) return nb_run(r->op, r->send, r->recv, r->count, MELD_BF16, c->nc, c->s) == ncclSuccess;
  meld_result_t res;
  if (!r->hint) {
    switch (r->op) {
      case OP_AG: res = meld_all_gather(c->comm, r->send, r->recv, r->count, MELD_BF16, c->s); break;
      case OP_RS: res = meld_reduce_scatter(c->comm, r->send, r->recv, r->count, MELD_BF16, c->s); break;
      case OP_AR: res = meld_all_reduce(c->comm, r->send, r->recv, r->count, MELD_BF16, c->s); break;
      default: res = meld_all_to_all(c->comm, r->send, r->recv, r->count, MELD_BF16, c->s); break;
    }
  } else {
    static meld_coll_args_t a;
    memset(&a, 0, sizeof a);
    a.op = (meld_coll_op_t)r->op; /* same numbering as MELD_COLL_* */
    a.dtype = MELD_BF16;
    a.send = r->send;
    a.recv = r->recv;
    a.count = r->count;
    for (int q = 0; q < c->P; q++) {
      a.send_counts[q] = a.recv_counts[q] = r->count;
      a.send_offsets[q] = a.recv_offsets[q] = (size_t)q * r->count;
    }
    res = meld_coll_run(c->comm, "bench", &a, r->hint, c->s, NULL);
  }
  if (res != MELD_OK) fprintf(stderr, "[rank %d] meld %s: %s\n", c->rank, g_opname[r->op], meld_last_error());
  return res == MELD_OK;
}

/* Median time per call in ms; graph: replays of a graph of `batch` captured calls. */
static float bc_time(bc_ctx_t *c, const bc_run_t *r, int graph, int samples, int batch) {
  for (int i = 0; i < 5; i++)
    if (!bc_enqueue(c, r)) return NAN;
  cudaGraphExec_t ge = NULL;
  if (graph) {
    cudaGraph_t g = NULL;
    if (cudaStreamBeginCapture(c->s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) return NAN;
    int ok = 1;
    for (int i = 0; i < batch; i++) ok &= bc_enqueue(c, r);
    if (cudaStreamEndCapture(c->s, &g) != cudaSuccess || !ok) return NAN;
    if (cudaGraphInstantiate(&ge, g, 0) != cudaSuccess) return NAN;
    cudaGraphDestroy(g);
    cudaGraphLaunch(ge, c->s); /* warm-up replay */
  }
  cudaStreamSynchronize(c->s);
  float *ms = (float *)malloc(sizeof(float) * (size_t)samples);
  for (int sIdx = 0; sIdx < samples; sIdx++) {
    meld_bootstrap_barrier(c->comm->boot);
    cudaEventRecord(c->e0, c->s);
    if (graph) cudaGraphLaunch(ge, c->s);
    else
      for (int i = 0; i < batch; i++) bc_enqueue(c, r);
    cudaEventRecord(c->e1, c->s);
    cudaEventSynchronize(c->e1);
    float t = 0;
    cudaEventElapsedTime(&t, c->e0, c->e1);
    ms[sIdx] = t / (float)batch;
  }
  float med = bench_median(ms, samples);
  free(ms);
  if (ge) cudaGraphExecDestroy(ge);
  if (cudaGetLastError() != cudaSuccess || meld_comm_check(c->comm) != MELD_OK) return NAN;
  return med;
}

/* Relative Frobenius difference between meld's and NCCL's outputs (bf16, n elements). */
static double bc_rel_err(bc_ctx_t *c, const uint16_t *a, const uint16_t *b, size_t n, double *d_acc) {
  cudaMemsetAsync(d_acc, 0, 2 * sizeof(double), c->s);
  bc_diff<<<264, 512, 0, c->s>>>(a, b, n, d_acc);
  double h[2] = {0, 0};
  cudaMemcpyAsync(h, d_acc, sizeof h, cudaMemcpyDeviceToHost, c->s);
  cudaStreamSynchronize(c->s);
  if (!isfinite(h[0])) return INFINITY;
  return h[1] > 0 ? sqrt(h[0] / h[1]) : sqrt(h[0]);
}

static double busbw_factor(int op, int P) {
  if (P == 1) return 1.0;
  return op == OP_AR ? 2.0 * (P - 1) / P : (double)(P - 1) / P;
}

static void json_line(FILE *jf, const bench_env_t *env, const char *nccl_ver, const char *op, size_t bytes,
                      size_t count, const char *mode, const char *variant, int ctas, int threads, int P,
                      float meld_ms, float nccl_ms, double busbw, double nccl_busbw, double rel_err) {
  if (!jf) return;
  char nccl_ms_s[32] = "null", nbw[32] = "null", err[32] = "null";
  if (nccl_ms == nccl_ms && nccl_ms > 0) snprintf(nccl_ms_s, sizeof nccl_ms_s, "%.5f", nccl_ms);
  if (nccl_busbw == nccl_busbw && nccl_busbw > 0) snprintf(nbw, sizeof nbw, "%.2f", nccl_busbw);
  if (rel_err == rel_err && rel_err >= 0) snprintf(err, sizeof err, "%.3g", rel_err);
  fprintf(jf,
          "{\"op\":\"%s\",\"shape\":{\"bytes\":%zu,\"count\":%zu,\"mode\":\"%s\",\"variant\":\"%s\","
          "\"ctas\":%d,\"threads\":%d},\"nranks\":%d,\"nnodes\":1,\"dtype\":\"bf16\",\"meld_ms\":%.5f,"
          "\"seq_ms\":%s,\"peer_ms\":%s,\"peer\":\"nccl\",\"compute_ms\":null,\"meld_compute_ms\":null,"
          "\"comm_ms\":%s,\"bound_ms\":null,\"busbw\":%.2f,\"nccl_busbw\":%s,\"rel_err\":%s,\"gpu\":\"%s\","
          "\"driver\":\"%s\",\"cuda\":\"%s\",\"nccl\":\"%s\",\"torch\":null,\"date\":\"%s\",\"commit\":\"%s\"}\n",
          op, bytes, count, mode, variant, ctas, threads, P, meld_ms, nccl_ms_s, nccl_ms_s, nccl_ms_s, busbw, nbw,
          err, env->gpu, env->driver, env->cuda, nccl_ver, env->date, env->commit);
  fflush(jf);
}

static void rank_main(int rank, int P) {
  bc_ctx_t c;
  memset(&c, 0, sizeof c);
  c.rank = rank;
  c.P = P;
  meld_config_t cfg = MELD_CONFIG_INIT;
  GT_MELD(meld_comm_init_env(&c.comm, &cfg));
  if (!c.comm) return;
  if (nb_init(c.comm, &c.nc) != ncclSuccess) {
    GT_CHECK(0, "NCCL init failed");
    meld_comm_destroy(c.comm);
    return;
  }
  bench_env_t env;
  bench_env(&env, c.comm->device);
  char nccl_ver[32];
  nb_version(nccl_ver, sizeof nccl_ver);
  GT_CUDA(cudaStreamCreateWithFlags(&c.s, cudaStreamNonBlocking));
  cudaEventCreate(&c.e0);
  cudaEventCreate(&c.e1);
  const size_t maxb = g_max_bytes;
  uint16_t *d_send = NULL, *d_m = NULL, *d_n = NULL;
  double *d_acc = NULL;
  GT_CUDA(cudaMalloc(&d_send, maxb));
  GT_CUDA(cudaMalloc(&d_m, maxb));
  GT_CUDA(cudaMalloc(&d_n, maxb));
  GT_CUDA(cudaMalloc(&d_acc, 2 * sizeof(double)));
  bc_fill<<<264, 512, 0, c.s>>>(d_send, maxb / 2, (uint32_t)rank + 1);
  GT_CUDA(cudaStreamSynchronize(c.s));
  FILE *jf = (rank == 0 && g_json) ? fopen(g_json, "a") : NULL;
  if (rank == 0 && g_json && !jf) printf("cannot open %s\n", g_json);
  const int samples = g_quick ? 7 : 20;
  if (rank == 0)
    printf("%-15s %-9s %11s %6s %10s %10s %9s %9s %7s %9s\n", "op", "variant", "bytes", "mode", "meld_us",
           "nccl_us", "meld_GBs", "nccl_GBs", "ratio", "rel_err");
  meld_coll_plan_hint_t two;
  memset(&two, 0, sizeof two);
  two.ar_algo = MELD_AR_TWO_SHOT;
  for (int op = 0; op < 4; op++) {
    for (int variant = 0; variant < (op == OP_AR && P > 1 ? 2 : 1); variant++) {
      for (size_t bytes = 4096; bytes <= maxb; bytes *= 4) {
        size_t count = op == OP_AR ? bytes / 2 : bytes / 2 / (size_t)P;
        if (count == 0) continue;
        bc_run_t rm = {0, op, d_send, d_m, count, variant ? &two : NULL};
        bc_run_t rn = {1, op, d_send, d_n, count, NULL};
        /* Correctness in the same run: meld vs NCCL on the same inputs. */
        bc_enqueue(&c, &rm);
        bc_enqueue(&c, &rn);
        size_t out_n = op == OP_AG || op == OP_A2A ? count * P : count;
        double err = bc_rel_err(&c, d_m, d_n, out_n, d_acc);
        int batch = bytes <= ((size_t)1 << 20) ? 20 : bytes <= ((size_t)64 << 20) ? 4 : 1;
        for (int graph = 0; graph < 2; graph++) {
          if (graph && bytes > ((size_t)16 << 20)) break;
          int gbatch = graph ? 20 : batch;
          float tm = bc_time(&c, &rm, graph, samples, gbatch);
          float tn = bc_time(&c, &rn, graph, samples, gbatch);
          double f = busbw_factor(op, P);
          double bm = bytes / (tm * 1e-3) / 1e9 * f, bn = bytes / (tn * 1e-3) / 1e9 * f;
          const char *vname = variant ? "two_shot" : "auto";
          if (rank == 0) {
            printf("%-15s %-9s %11zu %6s %10.2f %10.2f %9.1f %9.1f %7.2f %9.2g\n", g_opname[op], vname, bytes,
                   graph ? "graph" : "plain", tm * 1e3, tn * 1e3, bm, bn, tn / tm, err);
            fflush(stdout);
          }
          GT_CHECK(tm == tm, "%s %zu bytes: meld failed", g_opname[op], bytes);
          GT_CHECK(err <= (op == OP_AG || op == OP_A2A ? 0.0 : 1e-2), "%s %zu bytes: meld vs NCCL rel err %.3g",
                   g_opname[op], bytes, err);
          json_line(jf, &env, nccl_ver, g_opname[op], bytes, count, graph ? "graph" : "plain", vname, 0, 0, P,
                    tm, tn, bm, bn, err);
        }
      }
    }
  }
  /* GB/s vs comm CTAs (384 threads), all-gather 256 MB. */
  size_t ag_bytes = (size_t)256 << 20;
  if (ag_bytes > maxb) ag_bytes = maxb;
  size_t count = ag_bytes / 2 / (size_t)P;
  const int ctas[] = {1, 2, 4, 8, 16, 32, c.comm->sm_count};
  if (rank == 0) printf("\nall_gather %zu bytes: GB/s (busbw) vs comm CTAs of 384 threads\n%6s %10s %9s\n", ag_bytes,
                        "ctas", "meld_us", "busbw");
  bc_run_t rn = {1, OP_AG, d_send, d_n, count, NULL};
  float tn = bc_time(&c, &rn, 0, samples, 1);
  for (int i = 0; i < 7; i++) {
    meld_coll_plan_hint_t h;
    memset(&h, 0, sizeof h);
    h.ctas = ctas[i];
    h.threads = 384;
    bc_run_t rm = {0, OP_AG, d_send, d_m, count, &h};
    float tm = bc_time(&c, &rm, 0, samples, 1);
    double f = busbw_factor(OP_AG, P);
    double bm = ag_bytes / (tm * 1e-3) / 1e9 * f, bn = ag_bytes / (tn * 1e-3) / 1e9 * f;
    if (rank == 0) {
      printf("%6d %10.1f %9.1f   (NCCL %.1f)\n", ctas[i], tm * 1e3, bm, bn);
      fflush(stdout);
    }
    json_line(jf, &env, nccl_ver, "all_gather_ctas", ag_bytes, count, "plain", "ctas", ctas[i], 384, P, tm, tn, bm,
              bn, -1);
  }
  if (jf) fclose(jf);
  meld_bootstrap_barrier(c.comm->boot);
  ncclCommDestroy(c.nc);
  cudaFree(d_send);
  cudaFree(d_m);
  cudaFree(d_n);
  cudaFree(d_acc);
  GT_MELD(meld_comm_destroy(c.comm));
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) g_quick = 1;
    else if (!strcmp(argv[i], "--json") && i + 1 < argc) g_json = argv[++i];
    else if (!strcmp(argv[i], "--max-bytes") && i + 1 < argc) g_max_bytes = strtoull(argv[++i], NULL, 0);
    else {
      fprintf(stderr, "usage: %s [--quick] [--json FILE] [--max-bytes N]\n", argv[0]);
      return 2;
    }
  }
  if (g_quick && g_max_bytes > ((size_t)256 << 20)) g_max_bytes = (size_t)256 << 20;
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  int ndev = gt_device_count();
  if (ndev < 1) {
    printf("bench_coll: no GPU: nothing to measure\n");
    return 0;
  }
  int n = ndev > 8 ? 8 : ndev;
  printf("bench_coll: %d rank(s), bf16, sizes 4 KB .. %zu MB (nccl-tests size and busbw)%s\n", n, g_max_bytes >> 20,
         g_quick ? ", quick" : "");
  double t0 = gt_now_s();
  int failed = gt_spawn(n, rank_main);
  printf("bench_coll: %.1f s\n", gt_now_s() - t0);
  return failed ? 1 : 0;
}
