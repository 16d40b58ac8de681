#!/usr/bin/env bash
# p1_s20k.sh — ONE GPU, session 20 call 12 (the last ~130 s of device time): the lean LL
# instantiation (coll_ll<2>, opt-in MELD_COLL_LL_LEAN=1: P = 2 constant, plain 8-byte units,
# 32-bit indices; 74 registers vs 94). test_coll at one rank (its loopback cases run plain, PDL
# and lean), then the LL loopback rows of bench_coll for all-reduce and all-gather.
# Prediction (before the run): tests pass; lean 0.3-0.8 us a call less than ll_loop in graphs
# at 4-64 KB (call 8: 3.3-4.1 us; ~590 instructions a warp on the generic path).
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s20k.sh   (carry build/bench/bench_coll build/tests/gpu/test_coll)
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
MELD_TIMEOUT_MS=3000 timeout -k 5 40 build/tests/gpu/test_coll > "$OUT/test_coll.log" 2>&1
echo "== test_coll (1 rank) rc=$?"; grep -E "FAIL|checks passed|loopback" "$OUT/test_coll.log" | cut -c1-150 | head -6
for op in all_reduce all_gather; do
  MELD_TIMEOUT_MS=3000 timeout -k 5 30 build/bench/bench_coll --zc --only $op --max-bytes 65536 > "$OUT/coll_$op.log" 2>&1
  echo "== bench_coll $op rc=$?"; grep -E "ll_loop.*graph" "$OUT/coll_$op.log"
done
