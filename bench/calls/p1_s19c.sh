#!/usr/bin/env bash
# p1_s19c.sh — ONE GPU, session 19 call 3: why the small-M kernel streams B slower than a bare
# stream of the same boxes. Call 2: 16 x 4096 x 14336 meld_gemm 38.0 us (cuBLASLt 35) against
# 34.2 us for the bare S 3 stream in call 1; 16 x 4096 x 7168 21.6 vs 19.3. The kernel differs
# from the bare stream in (a) its cluster launch (a cluster's CTAs share a GPC: 32 clusters of 3
# may crowd some GPCs), (b) 8 consumer warps polling each stage, (c) its L2 hints, (d) the end
# (partials, cluster reduce). bench_stream now has (a) and (b); bench_gemm has (c) (nohint,
# bfirst variants).
# Prediction (before the run): (b) changes nothing (< 1%); (a) costs 5-10% of the stream's rate
# at 96 CTAs (it would explain most of the gap); (c) within 1-3% as in session 3.
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s19c.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
timeout -k 5 90 build/bench/bench_stream --json "$OUT/stream.jsonl" > "$OUT/stream.log" 2>&1
echo "bench_stream rc=$? at $(el) s"
args=()
for s in 16,4096,14336 16,4096,7168 128,4096,14336 128,4096,7168; do args+=(--shape "$s"); done
timeout -k 5 100 build/bench/bench_gemm --custom-only --only default,skinny_nohint,skinny_bfirst,skinny_s2 "${args[@]}" \
  --json "$OUT/gemm-decode.jsonl" > "$OUT/bench_gemm.log" 2>&1
echo "bench_gemm rc=$? at $(el) s"
grep -E "^ *(4096x|N x K)" "$OUT/stream.log" | awk '$3=="128" || $1=="N"' | cut -c1-90
grep -E "^custom|geomean" "$OUT/bench_gemm.log" | cut -c1-150
echo "total: $(el) s"
