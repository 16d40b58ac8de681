#!/usr/bin/env bash
# p1_s7b.sh — one device call on ONE GPU (session 7): why AG+GEMM's stream-K is slower in the
# 2-rank kernel (loopback) than at one rank: per-tile traces of the loopback with and without
# stream-K at 2048 x 5120 x 8192 (JSON for numbers, PNGs); then Nsight Compute cycles of the
# GEMM+RS loopback against the bare GEMM in the fused kernel (the start-of-tile flag release).
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
make -j16 lib build/bench/bench_ag_gemm build/bench/bench_gemm_rs > "$OUT/build.log" 2>&1 || { grep -E "error" "$OUT/build.log" | head -30; exit 1; }
echo "build: $(el) s"
for v in plain sk; do
  f=""; [ $v = sk ] && f="--sk"
  MELD_TRACE="$OUT/ag_loop_$v.json" timeout -k 5 60 build/bench/bench_ag_gemm --trace --loopback $f --shape ${AG_SHAPE:-2048,5120,8192} > "$OUT/trace_$v.log" 2>&1
  echo "trace $v rc=$? at $(el) s"; grep -E "trace:|FAIL|error" "$OUT/trace_$v.log" | head -3
  python3 tools/trace_png.py -o "$OUT/ag_loop_$v.png" --title "AG+GEMM 2-rank kernel in loopback (1 x H200), ${AG_SHAPE:-2048,5120,8192}, $v" \
    "$OUT"/ag_loop_$v*.json >> "$OUT/trace_$v.log" 2>&1; echo "png rc=$?"
done
[ "${NO_NCU:-0}" = 1 ] || CFGS=${CFGS:-"bare:MELD_GEMM_RS_DIAG=8;loop:MELD_GEMM_RS_DIAG=1024;loopnf:MELD_GEMM_RS_DIAG=1280"} SECTIONS="--section SpeedOfLight" NO_SOURCE=1 bash bench/ncu_add.sh 2>&1 | tail -30
echo "total: $(el) s"
