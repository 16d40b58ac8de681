#!/usr/bin/env bash
# x2_s9b.sh — 2 GPUs, session 9 call 4: (1) every GPU test at 2 ranks (the cluster fix touches
# the GEMM engine); (2) on GPU 0 alone, the 2-CTA multicast GEMM (MELD_GEMM_CLUSTER_EXPERIMENTAL=1):
# test_gemm's cluster cases, then meld_gemm default vs cl2 vs cuBLASLt sustained; (3) GEMM+RS
# 8192^3 with --diag soaked: where the fused kernel's +18% over meld_gemm goes, sustained (the
# bare GEMM in the fused kernel, without the push, without the own-tile wait / loads / adds).
# Usage (device): OUT=... [SOAK=600] [LIMIT=560] bash bench/x2_s9b.sh
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export BENCH_COMMIT=${BENCH_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)} BENCH_RUN=${BENCH_RUN:-x2-s9b}
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
S=${SOAK:-600}; LIMIT=${LIMIT:-560}; d=$(date -u +%Y-%m-%d)
make -j32 lib build/bench/bench_gemm build/bench/bench_gemm_rs > "$OUT/build.log" 2>&1 ||
  { grep -E "error" "$OUT/build.log" | head -20; exit 1; }
echo "build: $(el) s"
TEST_TIMEOUT_S=150 MELD_TIMEOUT_MS=3000 tests/gpu/run.sh ${TESTS:-} > "$OUT/gpu_tests.log" 2>&1
echo "gpu tests rc=$? at $(el) s"; grep -E "FAIL|checks passed|^== " "$OUT/gpu_tests.log" | head -14
MELD_GEMM_CLUSTER_EXPERIMENTAL=1 CUDA_VISIBLE_DEVICES=0 MELD_TIMEOUT_MS=3000 timeout -k 5 120 build/tests/gpu/test_gemm \
  > "$OUT/test_gemm_cl.log" 2>&1
echo "test_gemm (cluster experimental) rc=$? at $(el) s"; grep -E "FAIL|checks passed" "$OUT/test_gemm_cl.log" | head -8
grep -c " cl 2 " "$OUT/test_gemm_cl.log"
if ! grep -q FAIL "$OUT/test_gemm_cl.log"; then
  MELD_GEMM_CLUSTER_EXPERIMENTAL=1 CUDA_VISIBLE_DEVICES=0 timeout -k 5 120 build/bench/bench_gemm --custom-only \
    --shape 2048,5120,8192 --shape 8192,8192,4096 --only default,dp,cl2,cl2g16 --soak $S --json "$OUT/gemm-cl2-$d.jsonl" \
    > "$OUT/bench_gemm_cl.log" 2>&1
  echo "bench_gemm cl2 rc=$? at $(el) s"; grep -E "^custom|^soak|skipped|ERROR" "$OUT/bench_gemm_cl.log" | cut -c1-170
fi
left=$(( LIMIT - $(el) ))
if [ $left -gt 100 ]; then
  for g in 0 1; do
    CUDA_VISIBLE_DEVICES=$g timeout -k 5 30 build/bench/bench_gemm --custom-only --shape 8192,8192,8192 --rounds 1 \
      --soak 2000 > /dev/null 2>&1 &
  done
  wait
  timeout -k 5 $((left - 15)) build/bench/bench_gemm_rs --op rs --shape 8192,8192,8192 --diag --soak $S \
    --json "$OUT/gemm_rs-x2-diag-soak-$d.jsonl" > "$OUT/gemm_rs_diag.log" 2>&1
  echo "bench_gemm_rs --diag --soak rc=$? at $(el) s"
  grep -E "soak" "$OUT/gemm_rs_diag.log" | grep "rank 0" | cut -c1-190
  grep -E "per rank|diag:" "$OUT/gemm_rs_diag.log" | head -8
fi
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
