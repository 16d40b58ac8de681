#!/usr/bin/env bash
# p1_s19i.sh — ONE GPU, session 19 call 9 (the last ~4 min of device time): is a k-split of 4
# as two clusters of 2 per column block (128 CTAs at N 4096, all resident; a second-level sum
# would go through L2) worth building for 64-128 rows? bench_stream's floor for it against the
# kernel's clusters of 3 (96 CTAs) and the unclustered 128 CTAs. (bench_stream's JSON key
# "cluster" is now the cluster size; in call 3's file 1 meant "clusters of S".)
# Prediction (before the run): 128 CTAs in clusters of 2 stream within 0.3 us of 128 without
# clusters (18.7-19.0 us at 4096 x 7168), 0.7-1 us under the clusters of 3 (19.7-19.8).
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s19i.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
timeout -k 5 60 build/bench/bench_stream --shape 4096,7168 --shape 4096,14336 --json "$OUT/stream.jsonl" > "$OUT/stream.log" 2>&1
echo "bench_stream rc=$?"
grep -E "^ *(4096x|N x K)" "$OUT/stream.log" | awk '($3=="128" && $5>=2) || $1=="N"' | cut -c1-90
