#!/usr/bin/env bash
# p1_s21b.sh — ONE GPU, session 21 call 2. Changes since call 1: the lean LL instantiation and
# programmatic dependent launch are the defaults (MELD_COLL_LL_LEAN=0 / MELD_COLL_PDL=0 turn them
# off); every call's last CTA advances the epoch counter from the epoch read at entry (no reload:
# launch.cuh, every kernel). (1) all 7 GPU test programs at one rank; (2) test_coll at 2 ranks
# sharing the GPU (defaults, then PDL=0 / LEAN=0 passes inside); (3) bench_coll's one-rank rows
# (LL loopback: plain / PDL / lean / lean+PDL; ZC forced; ROUNDS) for all-reduce,
# reduce-scatter, all-gather at 4-64 KB; (4) Nsight Compute with source counters (SASS + stall
# samples per instruction) on the lean LL loopback kernel and the ZC kernel at one rank, 4 KB
# all-reduce: where the ~2.3 us over an empty kernel (LL) and ~6 us (ZC) go.
# Prediction (before the run): all pass; every kernel row 0.2-0.4 us lower than call 1 (one L2
# round trip less at exit): ll_loop_lean all-reduce 4 KB 2.92 -> 2.55-2.75, ll_loop_lean_pdl
# 2.3-2.5; stalls: long_scoreboard on the entry loads / polls, no_instruction (i-cache).
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s21b.sh   (carry build/bench/bench_coll build/tests/gpu)
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
PREBUILT=1 MELD_TIMEOUT_MS=3000 TEST_TIMEOUT_S=120 timeout -k 5 200 tests/gpu/run.sh > "$OUT/tests_p1.log" 2>&1
echo "== GPU tests (1 rank) rc=$? at $(el) s"; grep -E "checks passed|FAIL|^== gpu" "$OUT/tests_p1.log" | cut -c1-150 | head -12
for op in all_reduce reduce_scatter all_gather; do
  MELD_TIMEOUT_MS=3000 timeout -k 5 30 build/bench/bench_coll --zc --only $op --max-bytes 65536 --json "$OUT/coll_$op.jsonl" > "$OUT/coll_$op.log" 2>&1
  echo "== bench_coll $op rc=$? at $(el) s"; grep -E "(ll_loop|zc|rounds_p1).*graph|empty" "$OUT/coll_$op.log"
done
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for k in ll:'coll_ll_kernelILi2' zc:'coll_zc_kernel'; do
  n=${k%%:*}; re=${k#*:}
  MELD_TIMEOUT_MS=3000 timeout -k 5 100 "$NCU" --clock-control none --cache-control none --kernel-name-base mangled -k regex:"$re" --launch-skip 20 \
    --launch-count 1 --import-source yes --section WarpStateStats --section SourceCounters --section LaunchStats \
    --metrics gpu__time_duration.sum,sm__cycles_active.max,smsp__inst_executed.sum -o "$OUT/ncu_$n" -f \
    build/bench/bench_coll --zc --only all_reduce --bytes 4096 > "$OUT/ncu_$n.log" 2>&1
  echo "== ncu $n rc=$? at $(el) s"
  "$NCU" -i "$OUT/ncu_$n.ncu-rep" --page details > "$OUT/ncu_${n}_details.log" 2>&1
  "$NCU" -i "$OUT/ncu_$n.ncu-rep" --page source --csv --print-source sass > "$OUT/ncu_${n}_sass.log" 2>&1
  "$NCU" -i "$OUT/ncu_$n.ncu-rep" --page raw --csv > "$OUT/ncu_${n}_raw.log" 2>&1
  rm -f "$OUT/ncu_$n.ncu-rep"
  grep -E "Duration|cycles|inst_executed|Warp Cycles Per|Stall|stall" "$OUT/ncu_${n}_details.log" | head -12
done
PREBUILT=1 TEST_TIMEOUT_S=130 GT_SPAWN_TIMEOUT_S=125 tests/gpu/run_shared.sh 2 test_coll > "$OUT/p2_test_coll.log" 2>&1
echo "== P=2 shared test_coll rc=$? at $(el) s"; grep -E "^== gpu|FAIL|killing|passed" "$OUT/p2_test_coll.log" | head -5
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log
