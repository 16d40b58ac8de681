#!/usr/bin/env bash
# p1_s10.sh — ONE GPU, session 10, call 1: the repaired 2x1 cluster GEMM sustained (p1_cluster.sh:
# test_gemm's cluster cases, default / dp / cl2 / cl2g16 / cuBLASLt burst and --soak 600, counters
# at 2048 x 5120 x 8192), then counters at 8192 x 8192 x 4096, where cl2 lagged in burst (0.803
# vs 0.689 ms; suspicion: order-biased burst timing, the GPU heating into its power cap by then).
# Usage (device): OUT=... bash bench/calls/p1_s10.sh
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
OUT="$OUT" bash bench/calls/p1_cluster.sh 2>&1 | tee "$OUT/p1_cluster.out"
MELD_GEMM_CLUSTER_EXPERIMENTAL=1 ARGS="--only dp,cl2" COUNT=5 SHAPE=8192,8192,4096 OUT="$OUT/ncu8k" \
  bash bench/ncu_gemm_vs_cublas.sh 2>&1 | tail -45
