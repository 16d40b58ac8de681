#!/usr/bin/env bash
# p1_cluster.sh — ONE GPU: the 2x1 cluster with B multicast (MELD_GEMM_CLUSTER_EXPERIMENTAL=1):
# test_gemm's cluster cases, then meld_gemm default vs cl2 vs cuBLASLt burst and sustained
# (--soak), then Nsight Compute traffic counters of the cl2 kernel (target: ~30% fewer L2
# reads). Session 9 fixed its schedule and its per-stage cluster-scope release (now exact and
# 0.86-1.0x of cluster 1 in burst); the sustained rows and counters are the next measurement.
# Usage (device): OUT=... [SHAPES="m,n,k ..."] bash bench/calls/p1_cluster.sh
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
make -j16 lib build/tests/gpu/test_gemm build/bench/bench_gemm > "$OUT/build.log" 2>&1 || { grep -E "error" "$OUT/build.log" | head; exit 1; }
echo "build: $(el) s"
export MELD_GEMM_CLUSTER_EXPERIMENTAL=1
TEST_GEMM_ONLY=${TEST_GEMM_ONLY:-} MELD_TIMEOUT_MS=3000 timeout -k 5 120 build/tests/gpu/test_gemm > "$OUT/test_gemm.log" 2>&1
echo "test_gemm rc=$? at $(el) s"; grep -E "cl 2|FAIL|checks passed" "$OUT/test_gemm.log" | head -20
shapes=""; for s in ${SHAPES:-2048,5120,8192 8192,8192,4096 4096,4096,4096}; do shapes="$shapes --shape $s"; done
timeout -k 5 200 build/bench/bench_gemm --custom-only $shapes --only default,dp,cl2,cl2g16 --soak ${SOAK:-600} \
  --json "$OUT/gemm-cl2.jsonl" > "$OUT/bench.log" 2>&1
echo "bench rc=$? at $(el) s"; grep -E "^custom|^soak|skipped|ERROR" "$OUT/bench.log" | cut -c1-170
ARGS="--only cl2" COUNT=5 SHAPE=${NCU_SHAPE:-2048,5120,8192} OUT="$OUT/ncu" bash bench/ncu_gemm_vs_cublas.sh 2>&1 | tail -40
echo "total: $(el) s"
