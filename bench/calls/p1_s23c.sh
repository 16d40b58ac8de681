#!/usr/bin/env bash
# p1_s23c.sh — ONE GPU, session 23 call 2. Carry: build/bench/bench_inproc build/bench/bench_coll
#   build/tests/gpu/test_inproc build/tests/gpu/test_coll build_exp (= main before the LL
#   prefetch: exp/pull-relaxed-done rebased on f98f3a6, the code main merged).
# (1) tests with the LL prefetch and the merged pull-only relaxed done: test_inproc, test_coll.
# (2) A/B, the LL prefetch (a one-CTA LL call loads its first units of the send before the
#     entry's round trips): A = build_exp, N = this tree, A N A N; 2 in-process ranks (LL,
#     ordinary buffers, 4 KB = one CTA, 64 KB = 16 CTAs as control) and one rank (loopback LL).
#     Prediction: 4 KB -0.2..-0.5 us for all three ops; 64 KB within 0.05 us.
# (3) ZC trace, 2 ranks, 4 KB (where the remaining fixed cost is, after session 23's -1.4..-2.4 us).
# (4) bench_inproc --fused with 2 pairs of passes and a longer settle (call 1 drifted 5-10%
#     between passes within a shape).
# Usage (device): OUT=... bash bench/calls/p1_s23c.sh
. "$(dirname "$0")/../device_env.sh"
MELD_TIMEOUT_MS=3000 timeout -k 5 120 build/tests/gpu/test_inproc > "$OUT/test_inproc.log" 2>&1
echo "== test_inproc rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_inproc.log" | head -6
PREBUILT=1 MELD_TIMEOUT_MS=3000 timeout -k 5 60 tests/gpu/run.sh test_coll > "$OUT/test_coll.log" 2>&1
echo "== test_coll rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_coll.log" | head -4
for pass in 1 2; do
  for v in a n; do
    bin=build/bench; [ $v = a ] && bin=build_exp/bench
    MELD_TIMEOUT_MS=3000 timeout -k 5 60 $bin/bench_inproc --ranks 2 --sizes 4096,65536 --kinds ord \
      --json "$OUT/inproc.jsonl" --label "s23c_${v}$pass" > "$OUT/ip_${v}$pass.log" 2>&1
    echo "== $v$pass rc=$? at $(el) s: $(grep -E '^(all|reduce)' "$OUT/ip_${v}$pass.log" | awk '{printf "%s %s %s %s | ", substr($1,1,6), $3, $4, $6}')"
    MELD_TIMEOUT_MS=3000 timeout -k 5 30 $bin/bench_coll --zc --max-bytes 65536 > "$OUT/coll_${v}$pass.log" 2>&1
    echo "   one rank: $(grep -E 'll_loop_lean_pdl.*graph' "$OUT/coll_${v}$pass.log" | awk '{printf "%s %s %s | ", substr($1,1,6), $3, $5}')"
  done
done
for op in all_reduce all_gather reduce_scatter; do
  MELD_TRACE="$OUT/tr_$op.json" MELD_TIMEOUT_MS=3000 timeout -k 5 60 build/bench/bench_inproc --ranks 2 --kinds sym --zc \
    --only $op --sizes 4096 --trace 16 > "$OUT/tr_$op.log" 2>&1
  echo "== trace $op rc=$? at $(el) s"
  for f in $(ls "$OUT"/tr_$op*.json* 2>/dev/null); do
    python3 tools/trace_stats.py "$f" > "$f.stats" 2>&1; echo "-- $(basename $f)"; sed -n '/call 10:/,/call 11:/p' "$f.stats" | head -10
  done
done
export MELD_WORKSPACE_BYTES=402653184
BENCH_SETTLE_MS=500 MELD_TIMEOUT_MS=5000 timeout -k 5 300 build/bench/bench_inproc --ranks 2 --samples 3 --fused-pairs 2 \
  --fused ag:8192,5120,8192/ag:8192,14336,4096/rs:8192,8192,8192/rs:8192,4096,14336/ar:8192,8192,8192 \
  --json "$OUT/inproc_fused.jsonl" --label s23c > "$OUT/fused.log" 2>&1
echo "== fused rc=$? at $(el) s"; grep -E "mean of|FAIL" "$OUT/fused.log"
cd "$OUT" && tar czf logs.tgz *.log tr_* && rm -f *.log tr_*
