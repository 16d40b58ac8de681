#!/usr/bin/env bash
# p1_s19f.sh — ONE GPU, session 19 call 6: (1) the small-M kernel's ring size. bench_stream
# (calls 1, 3) read 4096 x 7168 / 4096 x 14336 ~1 us faster through a 96 KB ring than a 192 KB
# one at 96 CTAs (18.6 vs 19.3-19.8, 32.6 vs 33.7 us): fewer bytes in flight per SM streamed
# better. The kernel's ring is ~200 KB (11 stages at 16 rows, 6 at 128). Three builds of
# bench_gemm (ring 200 / 128 / 96 KB: SKINNY_RING_BYTES), run in the order A B C C B A, each
# against cuBLASLt in its own run. (2) test_gemm_rs at 3 ranks sharing the GPU (the decode
# kernel's 3-rank cases on this session's reduce). (3) bench_gemm's 48-shape suite, default plans.
# Prediction (before the run): 96 KB gains 0.5-1 us at 16 rows, loses at 128 rows (3 stages
# cannot cover its wgmma); 128 KB in between; test passes; suite geomean 1.00 +- 0.01 with the
# decode rows as calls 2-4.
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s19f.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
args=()
for s in 16,4096,7168 16,4096,14336 32,8192,8192 64,4096,7168 128,4096,7168 16,8192,8192 128,8192,8192 512,4096,7168 2048,1280,8192; do
  args+=(--shape "$s"); done
i=0
for b in build build_r131072 build_r98304 build_r98304 build_r131072 build; do
  i=$((i + 1))
  timeout -k 5 60 $b/bench/bench_gemm --custom-only --only default "${args[@]}" --json "$OUT/ring-$i-$b.jsonl" \
    > "$OUT/ring-$i-$b.log" 2>&1
  echo "== $i $b rc=$? at $(el) s"
  grep -E "^custom" "$OUT/ring-$i-$b.log" | awk '{printf "%s x %s x %s %s %s %s | ", $2, $3, $4, $6, $(NF-4), $(NF-2)}'; echo
done
PREBUILT=1 TEST_TIMEOUT_S=100 GT_SPAWN_TIMEOUT_S=95 tests/gpu/run_shared.sh 3 test_gemm_rs > "$OUT/p3_test_gemm_rs.log" 2>&1
echo "P=3 shared test_gemm_rs rc=$? at $(el) s"; grep -E "^== gpu|FAIL|killing" "$OUT/p3_test_gemm_rs.log" | head -5
left=$(( 300 - $(el) )); [ $left -gt 170 ] && left=170
if [ $left -gt 60 ]; then
  timeout -k 5 $left build/bench/bench_gemm --json "$OUT/gemm-full.jsonl" > "$OUT/bench_gemm_full.log" 2>&1
  echo "bench_gemm full rc=$? at $(el) s"
  grep -E "decode|geomean|qkv|lowest" "$OUT/bench_gemm_full.log" | cut -c1-160 | tail -14
fi
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f p3_test_gemm_rs.log
