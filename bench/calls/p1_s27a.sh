#!/usr/bin/env bash
# p1_s27a.sh — ONE GPU, prepared at the end of session 26 (not run). Session 26 call 4 saw the
# fused GEMM+AR kernel (AUTO's choice) slower than the same op unfused at 4 and 8 in-process
# ranks (8 ranks 8192^3 3.96 vs 3.16 ms; K 1024 2.94 vs 2.17). (1) Does GEMM+RS do the same?
# (2) Where does the fused AR lose: a trace of 3 calls at 4 ranks, K 1024 (each tile's mainloop
# short: K_loc 256) and K 8192, read by tools/trace_stats.py (per role: mainloops, pushed and own
# epilogues, the entry and the tail).
# Hypothesis (perf-notes session 26): K_loc = K / P shortens each tile's mainloop while the fused
# kernel's epilogue (push or reduce of a 64 KB tile, flags) stays in series with its tensor
# cores. Prediction: the trace shows epilogue time per CTA comparable to its mainloop time at K
# 1024 (>= 0.5x), well below at K 8192; fused RS within a few % of unfused at 4 ranks.
# Usage (device, nvidia-h200): bash bench/calls/p1_s27a.sh   (builds bench_inproc there unless
#   PREBUILT=1 with build/bench/bench_inproc carried)
. "$(dirname "$0")/../device_env.sh"
build build/bench/bench_inproc
export MELD_TIMEOUT_MS=3000 MELD_WORKSPACE_BYTES=402653184
for P in 4 8; do
  BENCH_SETTLE_MS=100 timeout -k 5 60 build/bench/bench_inproc --ranks $P --samples 3 --fused-pairs 1 \
    --fused rs:8192,8192,8192/rs:8192,8192,1024 --json "$OUT/inproc.jsonl" --label "s27a_rs$P" > "$OUT/rs_$P.log" 2>&1
  echo "== fused RS P=$P rc=$? at $(el) s"; grep -E "mean of" "$OUT/rs_$P.log" | cut -c1-110
done
for K in 1024 8192; do
  BENCH_VARIANTS=fused MELD_TRACE="$OUT/ar4_k$K.json" timeout -k 5 60 build/bench/bench_inproc --ranks 4 --trace 3 \
    --fused ar:8192,8192,$K > "$OUT/trace_ar4_k$K.log" 2>&1
  echo "== trace fused AR 4 ranks K $K rc=$? at $(el) s"
  python3 tools/trace_stats.py "$OUT"/ar4_k$K.rank0.json* "$OUT"/ar4_k$K.rank1.json* 2>&1 | head -60
done
echo "== done at $(el) s"
cd "$OUT" && tar czf logs.tgz *.log ar4_* && rm -f *.log ar4_*
