#!/usr/bin/env bash
# p1_s23e.sh — ONE GPU, session 23 call 4. Carry: build/bench/bench_inproc build_n/bench/bench_inproc
#   build/tests/gpu/test_inproc build/tests/gpu/test_coll.
# Call 3 (p1_s23d.sh): the lean LL kernel split by action (N) gained 0.02-0.075 us on every row;
# 2 units a step instead of 4 (U) a further 0.03-0.09 at 4-64 KB but lost 0.4-0.6 at 1 MB. Now
# S = N + the lean kernels with 2 units up to 64 KB per stream, 4 above (four lean kernels).
# (1) test_inproc, test_coll with S (the LL paths at every size and dtype, both unroll depths).
# (2) N S S N, 2 in-process ranks, LL on ordinary buffers, 4 KB .. 1 MB.
# Prediction: S 4 KB / 64 KB -0.03..-0.09 us against N; 256 KB / 1 MB within 0.03 us.
# Usage (device): OUT=... bash bench/calls/p1_s23e.sh
. "$(dirname "$0")/../device_env.sh"
MELD_TIMEOUT_MS=3000 timeout -k 5 120 build/tests/gpu/test_inproc > "$OUT/test_inproc.log" 2>&1
echo "== test_inproc rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_inproc.log" | head -6
PREBUILT=1 MELD_TIMEOUT_MS=3000 timeout -k 5 60 tests/gpu/run.sh test_coll > "$OUT/test_coll.log" 2>&1
echo "== test_coll rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_coll.log" | head -4
i=0
for v in n s s n; do
  i=$((i + 1)); bin=build/bench; [ $v = n ] && bin=build_n/bench
  MELD_TIMEOUT_MS=3000 timeout -k 5 60 $bin/bench_inproc --ranks 2 --sizes 4096,65536,262144,1048576 --kinds ord \
    --json "$OUT/inproc.jsonl" --label "s23e_${v}$i" > "$OUT/ip_${v}$i.log" 2>&1
  echo "== $v$i rc=$? at $(el) s: $(grep -E '^(all|reduce)' "$OUT/ip_${v}$i.log" | awk '{printf "%s %s %s | ", substr($1,1,6), $3, $4}')"
done
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log
