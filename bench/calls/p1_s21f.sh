#!/usr/bin/env bash
# p1_s21f.sh — ONE GPU, session 21 call 6: instruction fetch on short calls. Call 5's trace of the
# forced ZC kernel at one rank (4 KB, warm, 16 calls): entry 2.56 us, a 4 KB move 2.18 us, exit
# 0.29; Nsight (call 2): its thread 0 ran 30 separate stretches of a 24.6K-instruction kernel
# (every op in one), the other warps waiting at barriers (13 of 21.8 stall cycles per issue).
# Changes: (a) one ZC kernel per op (op a template constant: 4.4-11.3K instructions each);
# (b) in collectives.cu the failure record is out of line (meld_fail_record, noinline: LL lean
# 9.5K -> 7.2K instructions, LL generic 20.2K -> 13.7K). (1) test_coll and test_gemm_rs at one
# rank; (2) bench_coll one-rank rows 4-64 KB (ZC forced, LL loopback) for all four ops;
# (3) the ZC trace again (4 KB, 1 MB); (4) test_coll at 2 ranks sharing the GPU.
# Prediction (before the run): all pass; ZC forced 4 KB 5.9-6.5 -> 4.0-5.0 us, trace entry
# 2.56 -> <= 1.8, move 2.18 -> <= 1.5; LL lean+PDL 2.36-2.42 -> 2.2-2.35, generic LL rows -0.2..-0.5.
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s21f.sh   (carry build/bench/bench_coll build/tests/gpu)
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
PREBUILT=1 MELD_TIMEOUT_MS=3000 TEST_TIMEOUT_S=60 timeout -k 5 130 tests/gpu/run.sh test_coll test_gemm_rs > "$OUT/tests_p1.log" 2>&1
echo "== test_coll, test_gemm_rs (1 rank) rc=$? at $(el) s"; grep -E "checks passed|FAIL|^== gpu|loopback" "$OUT/tests_p1.log" | cut -c1-150 | head -6
for op in all_reduce reduce_scatter all_gather all_to_all; do
  MELD_TIMEOUT_MS=3000 timeout -k 5 30 build/bench/bench_coll --zc --only $op --max-bytes 65536 --json "$OUT/coll_$op.jsonl" > "$OUT/coll_$op.log" 2>&1
  echo "== bench_coll $op rc=$? at $(el) s"; grep -E "(ll_loop|zc|rounds_p1).*graph|empty.*graph" "$OUT/coll_$op.log" | awk '{printf "%s %s %s | ", $2, $3, $5}'; echo
done
cat "$OUT"/coll_*.jsonl > "$OUT/coll-p1-s21f.jsonl"; rm -f "$OUT"/coll_*.jsonl
for b in 4096 1048576; do
  MELD_TRACE="$OUT/trace_$b.json" MELD_TIMEOUT_MS=3000 timeout -k 5 30 build/bench/bench_coll --zc --trace --only all_reduce \
    --max-bytes $b > "$OUT/trace_$b.log" 2>&1
  python3 tools/trace_stats.py $(ls "$OUT"/trace_$b*.json* | head -1) > "$OUT/stats_$b.log" 2>&1
  echo "== trace $b at $(el) s"; sed -n '/call 6:/,/call 8:/p' "$OUT/stats_$b.log"
done
PREBUILT=1 TEST_TIMEOUT_S=200 GT_SPAWN_TIMEOUT_S=195 tests/gpu/run_shared.sh 2 test_coll > "$OUT/p2_test_coll.log" 2>&1
echo "== P=2 shared test_coll rc=$? at $(el) s"; grep -E "^== gpu|FAIL|killing|checks passed" "$OUT/p2_test_coll.log" | head -5
cd "$OUT" && tar czf logs.tgz *.log trace_* && rm -f *.log trace_*
