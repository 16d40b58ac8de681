#!/usr/bin/env bash
# p1_s20j.sh — ONE GPU, session 20 call 10: where the LL kernel's ~2.7-3 us (over an empty
# kernel, in graphs; calls 8-9) go. Nsight Compute on the LL kernel in loopback
# (MELD_COLL_LOOPBACK=1) at 4 KB (one CTA) and 64 KB (16 CTAs), all-reduce, caches and clocks
# left alone: duration (in-kernel time: the rest of the per-call time is launch), cycles,
# instructions, warp stall breakdown (no_instruction = instruction fetch: the kernel carries
# every op and dtype; long_scoreboard = global loads; membar; barrier), launch stats.
# Prediction (before the run): duration 1.5-2.5 us at 4 KB, stalls led by long_scoreboard, then
# no_instruction.
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s20j.sh   (carry build/bench/bench_coll)
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for b in 4096 65536; do
  MELD_TIMEOUT_MS=3000 timeout -k 5 120 "$NCU" --clock-control none --cache-control none -k regex:coll_ll --launch-skip 40 \
    --launch-count 1 --section LaunchStats --section WarpStateStats \
    --metrics gpu__time_duration.sum,sm__cycles_active.max,smsp__inst_executed.sum \
    --csv --page details build/bench/bench_coll --zc --only all_reduce --bytes $b > "$OUT/ncu_ll_$b.log" 2>&1
  echo "== ncu LL loopback all_reduce $b rc=$?"
  grep -E '^"[0-9]' "$OUT/ncu_ll_$b.log" | awk -F'","' '{print $(NF-2)" = "$NF}' | sed 's/"//g' |
    grep -iE "duration|cycles|inst_executed|Stall|Registers|Block Size|Grid Size|Warp Cycles Per|Parameter" | head -40
done
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
