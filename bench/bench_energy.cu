/* bench_energy.cu — what moving bytes costs a GEMM at the power cap (one GPU).
 *
 * Session 9 modelled a fused op under steady load as T_gemm + T_comm x P_comm / P_cap, with
 * P_comm the power NVML read while the communication ran alone (450-490 W). That charges the
 * communication with the whole GPU's power at full clock while it runs, not with what its
 * bytes add. This bench measures the addition directly on one GPU: the GEMM soaked alone, and
 * the same GEMM with a 64 MiB copy per call (the byte count of a TP=2 shard at M = 8192,
 * K = 8192) running beside it on a second stream, moved by
 *   ce      the copy engine (cudaMemcpyAsync; no SM involved),
 *   vec     --ctas CTAs (16) of 384 threads, 16-byte loads and stores (the comm CTAs' vector path),
 *   bulk    as many CTAs, one thread each, bulk copies through 6 x 32 KiB of shared memory (TMA),
 * the SM copies on the SMs the GEMM leaves free (meld_gemm with sm_count = SMs - ctas). Each row runs
 * back-to-back for --ms ms; NVML's cumulative energy counter is read before and after (joules
 * per call), its clock and power sampled meanwhile (bench_soak.h). The copies alone and the idle
 * GPU are rows too, so the copy's own energy per GiB can be compared with what it adds to the
 * GEMM.
 *
 *   bench_energy [--ms MS] [--shape M,N,K] [--mib MIB] [--ctas N] [--json FILE]
 *
 * A local copy reads and writes HBM once per byte; an NVLink push reads here and writes there,
 * so this measures the SM- and HBM-side part of a push, not the link's. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tests/gpu/gpu_test.h" /* gt_fill_bf16 */
#include "bench_common.h"
#include "bench_soak.h"
#include "device/copy.cuh"
#include "device/ptx.cuh"
#include "device/ptx_async.cuh"
#include "meld.h"


/* ---- the copies ---------------------------------------------------------------------------- */

__global__ void __launch_bounds__(384) k_copy_vec(int4 *dst, const int4 *src, size_t n16) {
  /* each CTA its own contiguous share, as a comm CTA copies its chunk */
  const size_t per = (n16 + gridDim.x - 1) / gridDim.x, beg = blockIdx.x * per;
  if (beg >= n16) return;
  const size_t len = per < n16 - beg ? per : n16 - beg;
  copy_vec16<8>(dst + beg, src + beg, len, threadIdx.x, blockDim.x);
}

#define EB_PIECE 32768u
#define EB_NB 6
#define EB_LAG 2
#define EB_SMEM (EB_NB * EB_PIECE + 8 * EB_NB + 128)

__device__ __forceinline__ void eb_load(const uint8_t *src, size_t off, uint32_t len, uint32_t sbase, uint32_t b) {
  const uint32_t bar = sbase + EB_NB * EB_PIECE + 8 * b;
  mbarrier_arrive_expect_tx_cta(bar, len);
  cp_async_bulk_g2s(sbase + b * EB_PIECE, src + off, len, bar);
}

/* One thread per CTA: its contiguous share in 32 KiB pieces, global -> smem -> global. */
__global__ void __launch_bounds__(32) k_copy_bulk(uint8_t *dst, const uint8_t *src, size_t bytes) {
  extern __shared__ __align__(128) uint8_t sm[];
  if (threadIdx.x != 0) return;
  const uint32_t sbase = (smem_addr(sm) + 127u) & ~127u;
  for (uint32_t b = 0; b < EB_NB; b++) mbarrier_init_cta(sbase + EB_NB * EB_PIECE + 8 * b, 1);
  fence_proxy_async_smem_cta();
  size_t per = (bytes + gridDim.x - 1) / gridDim.x;
  per = (per + EB_PIECE - 1) / EB_PIECE * EB_PIECE;
  const size_t beg = blockIdx.x * per;
  if (beg >= bytes) return;
  const size_t len = per < bytes - beg ? per : bytes - beg;
  const uint32_t np = (uint32_t)((len + EB_PIECE - 1) / EB_PIECE);
#define EB_LEN(q) ((uint32_t)(len - (size_t)(q) * EB_PIECE < EB_PIECE ? len - (size_t)(q) * EB_PIECE : EB_PIECE))
  for (uint32_t q = 0; q < np && q < EB_NB; q++) eb_load(src + beg, (size_t)q * EB_PIECE, EB_LEN(q), sbase, q);
  for (uint32_t q = 0; q < np; q++) {
    const uint32_t b = q % EB_NB;
    mbar_wait(sbase + EB_NB * EB_PIECE + 8 * b, (q / EB_NB) & 1u);
    cp_async_bulk_s2g(dst + beg + (size_t)q * EB_PIECE, sbase + b * EB_PIECE, EB_LEN(q));
    cp_async_bulk_commit_group();
    if (q >= EB_LAG && q - EB_LAG + EB_NB < np) { /* refill piece q - LAG's buffer once read */
      asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(EB_LAG) : "memory");
      const uint32_t r = q - EB_LAG + EB_NB;
      eb_load(src + beg, (size_t)r * EB_PIECE, EB_LEN(r), sbase, r % EB_NB);
    }
  }
#undef EB_LEN
  cp_async_bulk_wait_group0();
}

/* ---- rows ---------------------------------------------------------------------------------- */

enum { COPY_NONE = 0, COPY_CE, COPY_VEC, COPY_BULK };
static const char *copy_name[] = {"", "ce", "vec", "bulk"};

typedef struct {
  meld_gemm_args_t g;
  int gemm;      /* 0: the copy alone */
  int copy;      /* COPY_* */
  void *src, *dst;
  size_t bytes;
  int ctas; /* CTAs of the SM copies */
  cudaStream_t s1, s2;
  cudaEvent_t go[2], done[2];
  int i;
} row_t;

static void enqueue_copy(row_t *r, cudaStream_t s) {
  if (r->copy == COPY_CE) CK(cudaMemcpyAsync(r->dst, r->src, r->bytes, cudaMemcpyDeviceToDevice, s));
  else if (r->copy == COPY_VEC) k_copy_vec<<<r->ctas, 384, 0, s>>>((int4 *)r->dst, (const int4 *)r->src, r->bytes / 16);
  else if (r->copy == COPY_BULK) k_copy_bulk<<<r->ctas, 32, EB_SMEM, s>>>((uint8_t *)r->dst, (const uint8_t *)r->src, r->bytes);
}

/* One call: the copy starts with the GEMM (s2 waits for s1's "go"), the next GEMM waits for the copy. */
static void row_call(void *ctx, int set) {
  (void)set;
  row_t *r = (row_t *)ctx;
  const int j = r->i++ & 1;
  if (!r->gemm) {
    enqueue_copy(r, r->s1);
    return;
  }
  if (r->copy) {
    CK(cudaEventRecord(r->go[j], r->s1));
    CK(cudaStreamWaitEvent(r->s2, r->go[j], 0));
    enqueue_copy(r, r->s2);
    CK(cudaEventRecord(r->done[j], r->s2));
  }
  if (meld_gemm(&r->g, r->s1) != MELD_OK) {
    fprintf(stderr, "meld_gemm: %s\n", meld_last_error());
    exit(1);
  }
  if (r->copy) CK(cudaStreamWaitEvent(r->s1, r->done[j], 0));
}

typedef int (*nvml_energy_fn)(void *dev, unsigned long long *mj);

static double energy_j(nvml_energy_fn f, const soak_nvml_t *n) {
  unsigned long long mj = 0;
  if (!f || f(n->dev, &mj) != 0) return -1;
  return mj * 1e-3;
}

typedef struct {
  const char *name;
  double ms, j_per_call, watts, mhz;
  int calls;
} result_t;

static result_t run_row(const char *name, row_t *r, int ms, nvml_energy_fn ef) {
  result_t out = {name, 0, 0, 0, 0, 0};
  /* burst estimate: 5 calls */
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < 3; i++) row_call(r, 0);
  CK(cudaEventRecord(a, r->s1));
  for (int i = 0; i < 5; i++) row_call(r, 0);
  CK(cudaEventRecord(b, r->s1));
  CK(cudaEventSynchronize(b));
  float t = 0;
  CK(cudaEventElapsedTime(&t, a, b));
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  const int calls = (int)(ms / (t / 5)) + 1;
  /* 300 ms lead-in, unrecorded: NVML's power is a lagging average, the clock settles */
  soak_result_t lead;
  soak_run_on(soak_nvml(), row_call, r, 1, (int)(300 / (t / 5)) + 1, r->s1, &lead);
  const double e0 = energy_j(ef, soak_nvml());
  soak_result_t s;
  soak_run_on(soak_nvml(), row_call, r, 1, calls, r->s1, &s);
  const double e1 = energy_j(ef, soak_nvml());
  CK(cudaGetLastError());
  out.ms = s.ms_per_call;
  out.calls = calls;
  out.mhz = s.sm_mhz;
  if (e0 >= 0 && e1 >= 0) {
    out.j_per_call = (e1 - e0) / calls;
    out.watts = out.j_per_call / (s.ms_per_call * 1e-3);
  }
  printf("%-16s %9.4f ms  %8.4f J/call  %5.0f W (NVML avg %3.0f)  SM %4.0f MHz  reasons 0x%llx  (%d calls)\n", name, out.ms,
         out.j_per_call, out.watts, s.power_w, out.mhz, s.reasons, calls);
  fflush(stdout);
  return out;
}

int main(int argc, char **argv) {
  int ms = 1500, ctas = 16;
  long long M = 8192, N = 8192, K = 8192, mib = 64;
  const char *json = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--ms") && i + 1 < argc) ms = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--shape") && i + 1 < argc && sscanf(argv[i + 1], "%lld,%lld,%lld", &M, &N, &K) == 3) i++;
    else if (!strcmp(argv[i], "--mib") && i + 1 < argc) mib = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--ctas") && i + 1 < argc) ctas = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
    else {
      fprintf(stderr, "usage: %s [--ms MS] [--shape M,N,K] [--mib MIB] [--ctas N] [--json FILE]\n", argv[0]);
      return 2;
    }
  }
  int dev_count = 0;
  if (cudaGetDeviceCount(&dev_count) != cudaSuccess || dev_count < 1) {
    printf("bench_energy: no GPU, nothing to do\n");
    return 0;
  }
  CK(cudaSetDevice(0));
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CK(cudaFuncSetAttribute(k_copy_bulk, cudaFuncAttributeMaxDynamicSharedMemorySize, EB_SMEM));
  const soak_nvml_t *nv = soak_nvml();
  nvml_energy_fn ef = nv->lib ? (nvml_energy_fn)dlsym(nv->lib, "nvmlDeviceGetTotalEnergyConsumption") : NULL;
  if (!ef) printf("# NVML energy counter not available: times and clocks only\n");

  row_t r;
  memset(&r, 0, sizeof r);
  void *A, *B, *C;
  CK(cudaMalloc(&A, M * K * 2));
  CK(cudaMalloc(&B, N * K * 2));
  CK(cudaMalloc(&C, M * N * 2));
  gt_fill_bf16<<<1024, 256>>>((uint16_t *)A, M * K, 1);
  gt_fill_bf16<<<1024, 256>>>((uint16_t *)B, N * K, 2);
  r.bytes = (size_t)mib << 20;
  if (ctas < 1 || ctas >= sms || mib < 1) {
    fprintf(stderr, "bench_energy: --ctas must be in [1, %d) and --mib >= 1\n", sms);
    return 2;
  }
  r.ctas = ctas;
  CK(cudaMalloc(&r.src, r.bytes));
  CK(cudaMalloc(&r.dst, r.bytes));
  CK(cudaMemset(r.src, 0x3c, r.bytes));
  CK(cudaStreamCreateWithFlags(&r.s1, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&r.s2, cudaStreamNonBlocking));
  for (int j = 0; j < 2; j++) {
    CK(cudaEventCreateWithFlags(&r.go[j], cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&r.done[j], cudaEventDisableTiming));
  }
  r.g.a = A, r.g.lda = K, r.g.b = B, r.g.ldb = K, r.g.b_layout = MELD_B_NK, r.g.c = C, r.g.ldc = N;
  r.g.m = M, r.g.n = N, r.g.k = K;
  printf("# bench_energy: GEMM %lld x %lld x %lld, copy %lld MiB per call (SM copies: %d CTAs), %d ms per row, %d SMs\n", M,
         N, K, mib, ctas, ms, sms);

  /* idle: the GPU's floor, from the counter alone */
  CK(cudaDeviceSynchronize());
  usleep(500000);
  const double i0 = energy_j(ef, nv);
  usleep(ms * 1000);
  const double i1 = energy_j(ef, nv);
  const double idle_w = (i0 >= 0 && i1 >= 0) ? (i1 - i0) / (ms * 1e-3) : -1;
  printf("%-16s %5.0f W\n", "idle", idle_w);

  enum { NR = 10 };
  const struct {
    const char *name;
    int gemm, sms, copy;
  } rows[NR] = {
      {"copy_ce", 0, 0, COPY_CE},         {"copy_vec", 0, 0, COPY_VEC},  {"copy_bulk", 0, 0, COPY_BULK},
      {"gemm_all", 1, 0, COPY_NONE},      {"gemm_all+ce", 1, 0, COPY_CE},  {"gemm_rest", 1, sms - ctas, COPY_NONE},
      {"gemm_rest+vec", 1, sms - ctas, COPY_VEC}, {"gemm_rest+bulk", 1, sms - ctas, COPY_BULK},
      {"gemm_rest+ce", 1, sms - ctas, COPY_CE}, {"gemm_all again", 1, 0, COPY_NONE},
  };
  result_t res[NR];
  for (int i = 0; i < NR; i++) {
    r.gemm = rows[i].gemm, r.copy = rows[i].copy, r.g.sm_count = rows[i].sms;
    res[i] = run_row(rows[i].name, &r, ms, ef);
  }
  /* what the copy adds to the GEMM it runs beside, per GiB, against what it costs alone */
  const double gib = (double)r.bytes / (1 << 30);
  printf("\n# per GiB copied: alone = (J/call - idle W x s/call) / GiB; added = (J/call with GEMM - GEMM's J/call) / GiB\n");
  const struct {
    int alone, with, base;
  } cmp[3] = {{0, 4, 3}, {1, 6, 5}, {2, 7, 5}};
  for (int c = 0; c < 3; c++) {
    const result_t *al = &res[cmp[c].alone], *w = &res[cmp[c].with], *b = &res[cmp[c].base];
    const double alone = idle_w >= 0 ? (al->j_per_call - idle_w * al->ms * 1e-3) / gib : -1;
    const double added = (w->j_per_call - b->j_per_call) / gib;
    printf("%-8s alone %6.3f J/GiB above idle (%5.0f GB/s)   beside the GEMM: +%.4f ms/call (%+.2f%%), %+.3f J/GiB\n",
           copy_name[rows[cmp[c].alone].copy], alone, r.bytes / (al->ms * 1e-3) * 1e-9, w->ms - b->ms,
           100.0 * (w->ms / b->ms - 1), added);
  }
  if (json) {
    FILE *f = fopen(json, "a");
    if (f) {
      for (int i = 0; i < NR; i++)
        fprintf(f,
                "{\"op\": \"energy\", \"shape\": {\"m\": %lld, \"n\": %lld, \"k\": %lld}, \"variant\": \"%s\", \"copy_mib\": %lld, "
                "\"copy_ctas\": %d, \"timing\": \"soak\", \"ms_per_call\": %.5f, \"j_per_call\": %.5f, \"watts\": %.1f, "
                "\"sm_mhz\": %.0f, \"calls\": %d, \"idle_w\": %.1f, \"gpu\": \"H200\"}\n",
                M, N, K, res[i].name, mib, ctas, res[i].ms, res[i].j_per_call, res[i].watts, res[i].mhz, res[i].calls, idle_w);
      fclose(f);
    }
  }
  return 0;
}
