#!/usr/bin/env bash
# p1_wide_rule.sh — ONE GPU (next session): should meld_gemm take the 128 x 320 tile at more
# shapes now that it releases stages early? gemm_plan_default_tile_n takes it only where its
# rounds cost <= 0.9x the 256-wide rounds, because without early release it was ~0.4-1% slower
# per unit of work (session 11 call 6: 8192 x 5120 x 8192 w320 1.0255 vs 1.0213 sustained).
# Early release cut its cycles 7.8%; the shapes of the suite with a ratio in (0.9, 1.0]:
# 2048 x 7168 (0.938), 2048 x 28672, 8192 x 14336 x 4096, 8000 x 7000 x 4000 (0.982), and ties
# (8192 x 5120 x 8192, 16384 x 1280). default vs w320 (wide + early release), burst and sustained.
# Prediction: w320 wins at 0.938 by 2-4%, is within 1% at 0.982, and loses <1% at ties.
# Usage (device): OUT=... bash bench/calls/p1_wide_rule.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/bench/bench_gemm
SH=""; for s in 2048,7168,8192 2048,28672,8192 8192,14336,4096 8000,7000,4000 8192,5120,8192 16384,1280,8192; do SH="$SH --shape $s"; done
timeout -k 5 400 build/bench/bench_gemm --custom-only $SH --only default,w320 --soak ${SOAK:-600} --soak-rounds 2 \
  --json "$OUT/gemm-wide-rule.jsonl" > "$OUT/bench.log" 2>&1
echo "bench rc=$? at $(el) s"; grep -E "^custom|^soak median|ERROR|skipped" "$OUT/bench.log" | cut -c1-160
echo "total: $(el) s"
