#!/usr/bin/env bash
# p1_s11e.sh — ONE GPU, session 11, call 5: where the wide kernel's extra cycles go at
# 2048 x 5120 x 8192 (382 K vs cuBLASLt's 354 K, the same 320-wide tile and 3 stages of BK 64).
# Nsight Compute warp-state sampling and source counters of meld's kernel and cuBLASLt's.
# Usage (device): OUT=... bash bench/calls/p1_s11e.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/bench/bench_gemm
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
timeout -k 5 240 "$NCU" --clock-control none -k regex:'nvjet|gemm_kernel' --launch-count 2 --import-source yes \
  --section WarpStateStats --section SourceCounters --section SchedulerStats --section SpeedOfLight \
  --section MemoryWorkloadAnalysis -o "$OUT/stall" -f build/bench/bench_gemm --custom-only \
  --shape ${SHAPE:-2048,5120,8192} --rounds 1 > "$OUT/ncu.log" 2>&1
echo "ncu rc=$? at $(el) s"; grep -E "==ERR|error" "$OUT/ncu.log" | head -3
"$NCU" -i "$OUT/stall.ncu-rep" --page details > "$OUT/details.txt" 2>&1
"$NCU" -i "$OUT/stall.ncu-rep" --page raw --csv > "$OUT/raw.csv" 2>&1
for id in 0 1; do
  "$NCU" -i "$OUT/stall.ncu-rep" --page source --csv --print-source sass --launch-skip $id --launch-count 1 \
    > "$OUT/source_sass_$id.csv" 2>&1
done
gzip -f "$OUT"/source_*.csv "$OUT/raw.csv"; rm -f "$OUT/stall.ncu-rep" "$OUT/details.csv" "$OUT/build.log"
ls -la "$OUT"
grep -E "Stall|stall|Warp Cycles|Issued Warp|No Eligible|Active Warps|Eligible Warps|gemm_kernel|nvjet|Duration|Throughput" "$OUT/details.txt" | head -80
echo "total: $(el) s"
