#!/usr/bin/env bash
# p1_s20g.sh — ONE GPU, session 20 call 7: where the LL kernel's fixed path goes. Call 6: at one
# rank the LL kernel (forced) costs 3.6-4.95 us a call in CUDA graphs for a LOCAL copy of 4-256
# KB, an empty kernel 0.72: ~2.9 us of our own per call, most of the ~4.5 us LL latency session 4
# measured on 2 GPUs. Nsight Compute (caches and clocks left alone) on the 4 KB all-reduce and
# all-gather LL kernels at one rank: duration, cycles, instructions, launch stats and the warp
# stall breakdown (no_instruction = instruction fetch, i.e. code size / cold i-cache).
# Prediction (before the run): duration 2-3 us; stalls dominated by no_instruction (the kernel
# carries every op and dtype: ~20K SASS instructions) and long_scoreboard (the counter / abort
# word loads at entry).
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s20g.sh   (carry build/bench/bench_coll)
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for op in all_reduce all_gather; do
  MELD_TIMEOUT_MS=3000 timeout -k 5 120 "$NCU" --clock-control none --cache-control none -k regex:coll_ll --launch-skip 20 \
    --launch-count 1 --section LaunchStats --section WarpStateStats --section SpeedOfLight --section SchedulerStats \
    --metrics gpu__time_duration.sum,sm__cycles_active.max,smsp__inst_executed.sum,smsp__cycles_active.max \
    --csv --page details build/bench/bench_coll --zc --only $op --bytes 4096 > "$OUT/ncu_ll_$op.log" 2>&1
  echo "== ncu LL $op rc=$?"
  grep -E '^"[0-9]' "$OUT/ncu_ll_$op.log" | awk -F'","' '{print $(NF-2)" = "$NF}' | sed 's/"//g' |
    grep -iE "duration|cycles|inst_executed|Stall|Registers|Block Size|Grid Size|Shared Memory|Warp Cycles|Issued|No Eligible|Active Warps" | head -40
done
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
