#!/usr/bin/env bash
# p1_s21c.sh — ONE GPU, session 21 call 3. Change since call 2: the lean LL kernel takes its own
# compact arguments (coll_ll2_args_t, ~150 bytes, instead of coll_kargs_t's ~3 KB: call 2's
# Nsight put 1.5 stall cycles per issued instruction on immediate-constant-cache misses, and a
# launch copies its parameters). (1) test_coll at one rank (loopback: plain / PDL / lean);
# (2) bench_coll's one-rank LL loopback rows, all-reduce / reduce-scatter / all-gather 4-64 KB;
# (3) test_coll at 2 ranks sharing the GPU (call 2's ran out of its 130 s after every data case
# passed; now 260 s).
# Prediction (before the run): all pass; ll_loop_lean and ll_loop_lean_pdl 0.1-0.3 us below
# call 2 (all-reduce 4 KB 2.75 / 2.42), the generic rows unchanged within 0.05.
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s21c.sh   (carry build/bench/bench_coll build/tests/gpu/test_coll)
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
MELD_TIMEOUT_MS=3000 timeout -k 5 40 build/tests/gpu/test_coll > "$OUT/test_coll.log" 2>&1
echo "== test_coll (1 rank) rc=$? at $(el) s"; grep -E "FAIL|checks passed|loopback" "$OUT/test_coll.log" | cut -c1-150 | head -6
for rep in 1 2; do
  for op in all_reduce reduce_scatter all_gather; do
    MELD_TIMEOUT_MS=3000 timeout -k 5 30 build/bench/bench_coll --zc --only $op --max-bytes 65536 --json "$OUT/coll_${op}_$rep.jsonl" > "$OUT/coll_${op}_$rep.log" 2>&1
    echo "== bench_coll $op rep $rep rc=$? at $(el) s"; grep -E "ll_loop.*graph|empty.*graph" "$OUT/coll_${op}_$rep.log" | awk '{printf "%s %s %s | ", $2, $3, $5}'; echo
  done
done
cat "$OUT"/coll_*.jsonl > "$OUT/coll-p1-s21c.jsonl"; rm -f "$OUT"/coll_*.jsonl
PREBUILT=1 TEST_TIMEOUT_S=260 GT_SPAWN_TIMEOUT_S=255 tests/gpu/run_shared.sh 2 test_coll > "$OUT/p2_test_coll.log" 2>&1
echo "== P=2 shared test_coll rc=$? at $(el) s"; grep -E "^== gpu|FAIL|killing|passed" "$OUT/p2_test_coll.log" | head -5
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log
