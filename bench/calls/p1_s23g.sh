#!/usr/bin/env bash
# p1_s23g.sh — ONE GPU, session 23 call 6. Carry: build_b/bench/bench_inproc build_za/bench/bench_inproc
#   build_zc/bench/bench_inproc build/tests/gpu/test_coll (built from C's code).
# The ZC kernels after the LL lesson (a kernel's time follows its code):
#   B = main at d5ca113;
#   A = one ZC kernel per op AND unroll (8, the default; 4 for comparisons), so each holds one
#       copy loop: PTX lines AG 3752 -> 3308, RS 5505 -> 4347, AR 8602 -> 6405, A2A 2457 -> 2364;
#   C = A + a leaner exit: no CTA-wide vote after the done wait (nothing of the call follows) and
#       the "CTAs done" count relaxed like LL's (a ZC CTA writes none of the call's scratch).
# Order B A C C A B; 2 in-process ranks, forced ZC on symmetric buffers, 4 KB (1 CTA) .. 16 MB.
# Prediction: A -0.1..-0.3 us at every size; C a further -0.05..-0.2 where the call has several
# CTAs (64 KB up), ~0 at 4 KB (one CTA counts nothing). test_coll (C) passes.
# Usage (device): OUT=... bash bench/calls/p1_s23g.sh
. "$(dirname "$0")/../device_env.sh"
PREBUILT=1 MELD_TIMEOUT_MS=3000 timeout -k 5 60 tests/gpu/run.sh test_coll > "$OUT/test_coll.log" 2>&1
echo "== test_coll rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_coll.log" | head -4
i=0
for v in b za zc zc za b; do
  i=$((i + 1))
  MELD_TIMEOUT_MS=3000 timeout -k 5 60 build_$v/bench/bench_inproc --ranks 2 --sizes 4096,65536,1048576,16777216 --kinds sym --zc \
    --json "$OUT/inproc.jsonl" --label "s23g_${v}$i" > "$OUT/ip_${v}$i.log" 2>&1
  echo "== $v$i rc=$? at $(el) s: $(grep -E '^(all|reduce)' "$OUT/ip_${v}$i.log" | awk '{printf "%s %s %s %s | ", substr($1,1,6), $3, $4, $7}')"
done
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log
