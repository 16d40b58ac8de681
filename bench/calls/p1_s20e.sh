#!/usr/bin/env bash
# p1_s20e.sh — ONE GPU, session 20 call 5: call 4 timed a one-rank collective at 6.2-8.7 us per
# call inside a CUDA graph (NCCL's one-rank call ~1 us), 4 KB .. 256 KB: most of that is our
# kernel's own fixed path (entry, exit), which every P pays and which issue 5's latency goal
# (<= 0.7x NCCL at <= 256 KB) is about. Nsight Compute on the 4 KB all-reduce and all-gather
# (the default plan on symmetric buffers, one rank): which kernel, its duration, grid and block,
# instructions, cycles; and the same with MELD_COLL_PDL=1.
# Prediction (before the run): the LL kernel, 2-4 us of duration at 4 KB (entry atomics, the
# counter, the exit's last-CTA advance), with 512+ threads per CTA in 1-2 CTAs.
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s20e.sh   (carry build/bench/bench_coll)
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
MET=gpu__time_duration.sum,sm__cycles_elapsed.max,sm__cycles_active.max,smsp__inst_executed.sum,launch__grid_size,launch__block_size,launch__registers_per_thread,dram__bytes_read.sum
for op in all_reduce all_gather; do
  for pdl in 0 1; do
    MELD_COLL_PDL=$pdl MELD_TIMEOUT_MS=3000 timeout -k 5 120 "$NCU" --clock-control none -k regex:coll --launch-skip 30 --launch-count 3 \
      --metrics $MET --csv build/bench/bench_coll --zc --only $op --bytes 4096 > "$OUT/ncu_${op}_pdl$pdl.log" 2>&1
    echo "== ncu $op pdl=$pdl rc=$?"
    grep -E '^"[0-9]' "$OUT/ncu_${op}_pdl$pdl.log" | awk -F'","' '{print $5" | "$(NF-2)" = "$NF}' | sed 's/"//g' | cut -c1-140 | sort | uniq | head -12
  done
done
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
