#!/usr/bin/env bash
# p1_s16.sh — ONE GPU, session 16 call 1: where the own tiles' longer mainloops go (session 15's
# lead: +4% in loopback, +9% at 2 GPUs). (1) per-tile traces of the fused kernel at 8192^2 x 4096
# (RS and AR loopback, RS every tile own with a synthetic partial), each own tile's start work now
# recorded inside its mainloop ("wait" = consumers' barrier + pending-flag release, "other" = the
# partial's acquire + half 0's request); tools/trace_stats.py splits mainloops own / peer.
# (2) Nsight Compute on the RS loopback's third call: warp stalls per SASS instruction.
# (3) the 128 x 320 tile vs the default at 8192 x 5120 x 8192, 4 soak rounds (session 15 aside).
# Predictions (before the run): own start work median 1-2 us of the ~1.7 us own-vs-peer gap in
# loopback (the barrier's warpgroup skew and the store drain before half 0's request); the
# wide tile within +-1% of the default sustained (no rule change unless it wins by > 1% twice).
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s16.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/bench/bench_gemm_rs build/bench/bench_gemm
export MELD_TIMEOUT_MS=3000
for v in rs:1024 ar:1024 rs:130; do
  op=${v%%:*}; dg=${v##*:}
  MELD_GEMM_RS_DIAG=$dg MELD_TRACE="$OUT/tr-$op-$dg.json" timeout -k 5 60 build/bench/bench_gemm_rs --trace --op $op \
    --shape 8192,8192,4096 > "$OUT/tr-$op-$dg.log" 2>&1; echo "trace $op diag $dg rc=$? at $(el) s"
  python3 tools/trace_stats.py "$OUT"/tr-$op-$dg*.json 2>&1 | grep -E "call 3|mainloops|compute|reduce|comm |wait|other" | tail -8 | cut -c1-230
done
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
MELD_GEMM_RS_DIAG=1024 timeout -k 5 240 "$NCU" --clock-control none -k regex:gemm_rs_kernel --launch-skip 2 --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section SourceCounters -o "$OUT/rsloop" -f \
  build/bench/bench_gemm_rs --trace --op rs --shape 8192,8192,4096 > "$OUT/ncu.log" 2>&1
echo "ncu rc=$? at $(el) s"; tail -2 "$OUT/ncu.log"
"$NCU" -i "$OUT/rsloop.ncu-rep" --page details --csv > "$OUT/details.csv" 2>&1
"$NCU" -i "$OUT/rsloop.ncu-rep" --page source --csv --print-source sass > "$OUT/source.csv" 2>&1
rm -f "$OUT/rsloop.ncu-rep"
python3 bench/ncu_top.py "$OUT/source.csv" 25 2>&1 | cut -c1-200
timeout -k 5 200 build/bench/bench_gemm --custom-only --shape 8192,5120,8192 --only default,w320 --soak 500 --soak-rounds 4 \
  --json "$OUT/gemm-wide-s16.jsonl" > "$OUT/gemm.log" 2>&1
echo "bench_gemm rc=$? at $(el) s"; grep -E "^custom|soak" "$OUT/gemm.log" | cut -c1-150 | tail -12
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log *.json *.csv 2>/dev/null && rm -f *.log *.json *.csv
