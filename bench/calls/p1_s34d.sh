#!/usr/bin/env bash
# p1_s34d.sh — ONE GPU: the routing kernel's place walk, four ways (MELD_MOE_ROUTE bits: 1 =
# ballots instead of __match_any_sync, 2 = sorted pairs staged in shared memory, written out
# coalesced); the count walk now by shared atomics (order-free). Call 3 (p1_s34c, ballots in both
# walks): count 6.2 / 19.8 us, place 7.3 / 35.5 at decode / dsv3 T4096 (match_any: 3.4 / 35.7,
# 3.0 / 35.5): ballots lose at 1024 pairs, and the place walk at 32768 pairs is bound elsewhere
# (1024 scattered 4-byte stores a step from one SM?).
# Prediction: count <= 2 us at decode, <= 5 at T4096; staging cuts the T4096 place walk to
# <= 15 us if the scattered stores bound it (mode 2), and ballots + staging (3) lower still there.
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_moe build/bench/bench_moe
export MELD_TIMEOUT_MS=5000
for m in 0 1 3; do MELD_MOE_ROUTE=$m test_ranks build/tests/gpu/test_moe 1 2; done
test_ranks build/tests/gpu/test_moe 4 8
for row in "dsv3-32e_T128" "dsv3_T4096" "mixtral_T4096"; do
  for m in 0 1 2 3; do
    f=$OUT/trace_$row.json
    MELD_MOE_ROUTE=$m MELD_TRACE=$f BENCH_MOE_ROWS=$row BENCH_MOE_VARIANTS=nocopy BENCH_SETTLE_MS=0 timeout -k 5 120 \
      build/bench/bench_moe --ranks 1 --samples 2 > "$OUT/bm.log" 2>&1
    echo "== trace $row route=$m rc=$? at $(el) s"
    g=$(ls "$OUT"/trace_"$row"*.json 2>/dev/null | head -1)
    [ -n "$g" ] && python3 tools/trace_phases.py "$g" route | grep -E "count|place|per call"
    rm -f "$OUT"/trace_"$row"*.json
  done
done
echo "== done at $(el) s"
