#!/usr/bin/env bash
# p1_s12d.sh — ONE GPU, session 12 call 4: the 128 x 320 tile in the fused AG+GEMM kernel
# (hint tile_n 320 / MELD_AG_GEMM_TILE_N=320; no stream-K, no deferral). test_ag_gemm at one
# rank (the fused kernel at one rank and the 2-rank kernel in loopback, each with the wide
# tile: bitwise against meld_gemm on the same tile), then bench_ag_gemm at M = 2048, N_loc =
# 5120, K = 8192 (the shape the tile is for: 256 tiles = 1.94 waves vs 320 = 2.42): default
# (128 x 256 + stream-K in loopback) vs fused_p1_w320 / loopback_p1_w320, burst and soaked;
# then the loopback per-tile traces both ways. Prediction: loopback 0.267 (s7, stream-K) ->
# ~0.24 with the wide tile (meld_gemm alone: 0.2146 burst; the comm CTAs join ~70 us late
# but 256 tiles on 132 CTAs leave them 8 tiles).
# Usage (device): OUT=... bash bench/calls/p1_s12d.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/tests/gpu/test_ag_gemm build/bench/bench_ag_gemm
MELD_TIMEOUT_MS=3000 timeout -k 5 240 build/tests/gpu/test_ag_gemm > "$OUT/test_ag_gemm.log" 2>&1
echo "test_ag_gemm rc=$? at $(el) s"; grep -E "FAIL|checks passed|320" "$OUT/test_ag_gemm.log" | cut -c1-170 | head -16
timeout -k 5 150 build/bench/bench_ag_gemm --shape 2048,5120,8192 --soak ${SOAK:-600} --json "$OUT/ag_gemm-w320.jsonl" > "$OUT/bench.log" 2>&1
echo "bench rc=$? at $(el) s"; grep -vE "^\s*$" "$OUT/bench.log" | grep -E "default|meld_gemm|fused_p1|loopback|w320|soak" | cut -c1-170 | head -60
for w in 256 320; do
  MELD_AG_GEMM_TILE_N=$w MELD_TRACE="$OUT/ag_loop_w$w.json" timeout -k 5 60 build/bench/bench_ag_gemm --trace --loopback \
    --shape 2048,5120,8192 > "$OUT/ag_trace_w$w.log" 2>&1
  echo "ag loopback trace tile $w rc=$?"; grep -E "plan|ms" "$OUT/ag_trace_w$w.log" | head -3 | cut -c1-200
  python3 tools/trace_stats.py "$OUT"/ag_loop_w$w*.json 2>&1 | tail -8
done
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log *.json 2>/dev/null && rm -f *.log *.json
