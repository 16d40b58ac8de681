#!/usr/bin/env bash
# p1_s21a.sh — ONE GPU, session 21 call 1: verify and time the lean LL instantiation (session 20
# wrote it, CPU-built only: coll_ll<2>, opt-in MELD_COLL_LL_LEAN=1). (1) test_coll at one rank (its
# loopback cases run plain, PDL and lean); (2) test_coll at 2 ranks sharing the GPU, plain and with
# MELD_COLL_LL_LEAN=1 (the lean kernel between two processes: real peer mappings, P = 2);
# (3) bench_coll's LL loopback rows for all-reduce, reduce-scatter, all-gather (ll_loop, _pdl, _lean).
# Prediction (before the run): all pass; lean 0.3-0.8 us a call less than ll_loop in graphs at
# 4-64 KB (s20 call 8: 3.3-4.1 us; ~590 instructions a warp on the generic path).
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s21a.sh   (carry build/bench build/tests/gpu)
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
MELD_TIMEOUT_MS=3000 timeout -k 5 40 build/tests/gpu/test_coll > "$OUT/test_coll.log" 2>&1
echo "== test_coll (1 rank) rc=$? at $(el) s"; grep -E "FAIL|checks passed|loopback" "$OUT/test_coll.log" | cut -c1-150 | head -6
for op in all_reduce reduce_scatter all_gather; do
  MELD_TIMEOUT_MS=3000 timeout -k 5 30 build/bench/bench_coll --zc --only $op --max-bytes 65536 > "$OUT/coll_$op.log" 2>&1
  echo "== bench_coll $op rc=$? at $(el) s"; grep -E "ll_loop.*graph|empty" "$OUT/coll_$op.log"
done
for lean in 0 1; do
  MELD_COLL_LL_LEAN=$lean PREBUILT=1 TEST_TIMEOUT_S=120 GT_SPAWN_TIMEOUT_S=115 tests/gpu/run_shared.sh 2 test_coll \
    > "$OUT/p2_test_coll_lean$lean.log" 2>&1
  echo "== P=2 shared test_coll lean=$lean rc=$? at $(el) s"; grep -E "^== gpu|FAIL|killing|passed" "$OUT/p2_test_coll_lean$lean.log" | head -5
done
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log
