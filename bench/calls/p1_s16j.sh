#!/usr/bin/env bash
# p1_s16j.sh — ONE GPU (next session): how much epilogue time do the pipeline's full stages
# absorb? Session 16's model: while both warpgroups are in an epilogue the producer keeps
# loading, so up to ~4 stages (~4 k-blocks, ~2.7 us at the cap) of the next mainloop are ready
# and a gap up to about that is caught up; beyond it, time is lost 1:1. The bare engine inside
# the fused kernel with its epilogues started D SM clocks late (MELD_GEMM_RS_DIAG=8208,
# MELD_GEMM_RS_DELAY_CYCLES), D = 0 / 2000 / 4000 / 6000 / 9000, sustained with 2 pass pairs,
# 8192^2 x 4096 (15.5 tiles per CTA), then burst medians.
# Prediction (before the run): 0 and 2000 within 0.5% (absorbed: the bare epilogue is 1.2 us,
# 2000 clocks ~1.4 us more), then ~+2.5% at 4000, ~+5% at 6000, ~+8.5% at 9000; if instead the
# time grows from D = 0 on (~+2.5% per 2000 clocks), epilogue time is never absorbed and the
# fused kernels' epilogues (3.3-5.4 us) are worth shortening wherever they are.
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s16j.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/bench/bench_gemm_rs
export MELD_TIMEOUT_MS=3000
rows="meld_gemm_plain|meld fused GEMM_RS_DIAG=16"
for d in 0 2000 4000 6000 9000; do rows="$rows|meld fused GEMM_RS_DIAG=8208 GEMM_RS_DELAY_CYCLES=$d"; done
timeout -k 5 200 build/bench/bench_gemm_rs --op rs --shape 8192,8192,4096 --diag --soak ${SOAK:-400} --soak-rounds 2 \
  --rows "$rows" --json "$OUT/gemm_rs-p1-delay.jsonl" > "$OUT/rs.log" 2>&1
echo "rs rc=$? at $(el) s"; grep -E "soak gemm|clocks late" "$OUT/rs.log" | sed 's/^\[rank 0\] //' | cut -c1-170
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
