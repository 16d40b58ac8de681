#!/usr/bin/env bash
# p1_device.sh — one device call on ONE GPU for the fused kernels' own cost (session 5): the
# GEMM+RS and AG+GEMM fused kernels forced at one rank (every tile its own, nothing exchanged)
# against meld_gemm and cuBLAS, with the diagnostics that strip them down; tests first.
# Usage (device): OUT=... bash bench/p1_device.sh [quick]
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export BENCH_COMMIT=${BENCH_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)} BENCH_RUN=${BENCH_RUN:-p1}
t0=$(date +%s)
nvidia-smi -L > "$OUT/gpus.txt" 2>&1
make -j16 lib build/tests/gpu/test_gemm_rs build/tests/gpu/test_ag_gemm build/bench/bench_gemm_rs \
  build/bench/bench_ag_gemm > "$OUT/build.log" 2>&1 || { grep -E "error" "$OUT/build.log" | head -30; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
for t in test_gemm_rs test_ag_gemm; do
  MELD_TIMEOUT_MS=3000 timeout -k 5 ${TEST_TIMEOUT_S:-150} build/tests/gpu/$t > "$OUT/$t.log" 2>&1; echo "$t rc=$?"
  grep -E "FAIL|PASSED|FAILED|rc=" "$OUT/$t.log" | head -20
done
echo "tests: $(( $(date +%s) - t0 )) s"
d=$(date +%F)
for s in ${RS_SHAPES:-8192,8192,4096 8192,8192,14336 8192,4096,7168}; do
  timeout -k 5 120 build/bench/bench_gemm_rs --diag --op rs --shape $s --json "$OUT/gemm_rs-p1-$d.jsonl" \
    >> "$OUT/bench_gemm_rs.log" 2>&1; echo "bench_gemm_rs $s rc=$?"
done
grep -v "^\[" "$OUT/bench_gemm_rs.log" | grep -v "^bench_gemm_rs:" | head -40
echo "t: $(( $(date +%s) - t0 )) s"
for s in ${AG_SHAPES:-8192,5120,8192 8192,14336,4096 2048,5120,8192}; do
  timeout -k 5 120 build/bench/bench_ag_gemm --shape $s --json "$OUT/ag_gemm-p1-$d.jsonl" >> "$OUT/bench_ag_gemm.log" 2>&1
  echo "bench_ag_gemm $s rc=$?"
done
grep -E "^ |^[0-9]" "$OUT/bench_ag_gemm.log" | grep -vE "vec_cc|group_m|chunk256|bulk|staged|run2" | head -40
echo "total: $(( $(date +%s) - t0 )) s"
