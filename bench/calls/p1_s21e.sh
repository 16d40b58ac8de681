#!/usr/bin/env bash
# p1_s21e.sh — ONE GPU, session 21 call 5: where the ZC kernel's fixed path goes. At one rank,
# forced, it costs 5.9-7.0 us a call in CUDA graphs for 4-64 KB (call 2), the lean LL 2.5-3.2
# and an empty kernel 0.65; Nsight (call 2): 60% of its warps' stall cycles at CTA barriers
# (warps waiting for thread 0), ~512 warp instructions per warp. Its trace (MELD_TRACE, thread 0,
# %globaltimer: entry = kernel start to the handshake's end, move, exit wait) over 16 back-to-back
# calls at one rank (bench_coll --zc --trace, forced ZC), 4 KB and 1 MB, with and without PDL.
# Prediction (before the run): entry 0.5-1 us, move (4 KB) < 0.5 us, the rest (the exit's
# release + done count, the kernel boundary) shows as the gap between calls, 3-4 us.
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s21e.sh   (carry build/bench/bench_coll)
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
for b in 4096 1048576; do
  for pdl in 1 0; do
    f="$OUT/trace_${b}_pdl$pdl.json"
    MELD_COLL_PDL=$pdl MELD_TRACE="$f" MELD_TIMEOUT_MS=3000 timeout -k 5 30 build/bench/bench_coll --zc --trace --only all_reduce \
      --max-bytes $b > "$OUT/trace_${b}_pdl$pdl.log" 2>&1
    echo "== trace $b pdl=$pdl rc=$? at $(el) s"; ls "$OUT" | grep "trace_${b}_pdl$pdl" | head -3
    python3 tools/trace_stats.py $(ls "$OUT"/trace_${b}_pdl$pdl*.json* | head -1) > "$OUT/stats_${b}_pdl$pdl.log" 2>&1
    head -30 "$OUT/stats_${b}_pdl$pdl.log"
  done
done
cd "$OUT" && tar czf logs.tgz *.log trace_* && rm -f *.log trace_*
