#!/usr/bin/env bash
# p1_s26e.sh — ONE GPU, prepared in session 26 as call 5; NOT RUN (too little device time left). Carried: build_h/
# bench_inproc (fa22749; the fused GEMM+RS kernel is unchanged since). Call 4 saw the fused
# GEMM+AR slower than unfused at 4 and 8 in-process ranks; does GEMM+RS do the same?
# Prediction: fused RS within a few % of unfused at 4 ranks (its kernel has no copy phase).
. "$(dirname "$0")/../device_env.sh"
export PREBUILT=1 MELD_TIMEOUT_MS=3000
for P in 4 8; do
  BENCH_SETTLE_MS=100 MELD_WORKSPACE_BYTES=402653184 timeout -k 5 40 build_h/bench/bench_inproc --ranks $P --samples 3 \
    --fused-pairs 1 --fused rs:8192,8192,8192 --json "$OUT/inproc.jsonl" --label "s26e_rs$P" > "$OUT/rs_$P.log" 2>&1
  echo "== fused RS P=$P rc=$? at $(el) s"; grep -E "mean of" "$OUT/rs_$P.log" | cut -c1-110
done
