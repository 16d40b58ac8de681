#!/usr/bin/env bash
# p1_s8.sh — session 8's first call on ONE GPU: the GEMM at the async-TP chunk shapes
# (M/P rows) against the full M, run back-to-back with the SM clock and power sampled (is a
# taller GEMM slower per FLOP because the GPU clocks it lower?), then bench/p1_check.sh (every
# GPU test at one rank, the GEMM+RS/AR rows incl. loopback, AG+GEMM) — the first run of
# session 7's wait polling. Usage (device): OUT=... [SOAK_SHAPES="m,n,k ..."] bash bench/calls/p1_s8.sh
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export BENCH_RUN=${BENCH_RUN:-s8-p1}
t0=$(date +%s)
make -j16 lib build/bench/bench_gemm > "$OUT/build_gemm.log" 2>&1 || { grep -E "error" "$OUT/build_gemm.log" | head; exit 1; }
shapes=""
for s in ${SOAK_SHAPES:-1024,28672,8192 2048,28672,8192 1024,14336,4096 2048,14336,4096 4096,14336,4096 8192,14336,4096}; do
  shapes="$shapes --shape $s"
done
timeout -k 5 200 build/bench/bench_gemm --custom-only $shapes --only ${SOAK_VARIANTS:-default,g8} \
  --soak ${SOAK_MS:-1500} --json "$OUT/gemm-soak-$(date -u +%Y-%m-%d).jsonl" > "$OUT/gemm_soak.log" 2>&1
echo "gemm soak rc=$? at $(( $(date +%s) - t0 )) s"
grep -vE "^#|^shape [0-9]" "$OUT/gemm_soak.log"
NO_TRACE=${NO_TRACE:-1} RS_RUNS=${RS_RUNS:-"rs 8192,8192,4096 --diag;ar 8192,8192,4096 --diag"} bash bench/p1_check.sh
