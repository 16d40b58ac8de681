#!/usr/bin/env bash
# p1_s22f.sh — ONE GPU, session 22 call 6. Changes since call 5: gemm_rs.cu's kernel arguments
# per thread (a process-wide static: two in-process ranks' calls wrote each other's arguments;
# test_inproc's fused cases read rel err ~1 and then timed out); flag waits poll with
# ld.acquire.sys (the poll that sees the value is the acquire: no re-read; signal.cuh
# meld_wait_impl / meld_wait_ge_raw, launch.cuh argument verify).
# Parts: (1) test_inproc, then every GPU test at one rank but test_gemm; (2) test_abort,
# test_gemm_rs, test_ag_gemm, test_coll at 2 rank processes sharing the GPU (acquire polls in
# every 2-rank path); (3) bench_inproc 2 ranks, A (build_a: this tree without the acquire
# polls) B A B, forced ZC and LL rows, 4 KB / 64 KB / 1 MB.
# Predictions (before the run): all pass; ZC -0.3..-0.8 us a call (one L2 round trip at the
# entry and one at the exit), LL rows equal (its waits are polls of data lines, unchanged).
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s22f.sh (carry build/bench/bench_inproc build/tests/gpu build_a)
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
MELD_TIMEOUT_MS=3000 timeout -k 5 120 build/tests/gpu/test_inproc > "$OUT/test_inproc.log" 2>&1
echo "== test_inproc rc=$? at $(el) s"; grep -vE "collective cases|back-to-back|graph \(" "$OUT/test_inproc.log" | cut -c1-200 | head -20
PREBUILT=1 MELD_TIMEOUT_MS=3000 TEST_TIMEOUT_S=120 timeout -k 5 200 tests/gpu/run.sh test_coll test_gemm_rs \
  test_ag_gemm test_abort test_signal test_comm > "$OUT/tests_p1.log" 2>&1
echo "== GPU tests (1 rank) rc=$? at $(el) s"; grep -E "checks passed|FAIL|^== gpu" "$OUT/tests_p1.log" | cut -c1-160 | head -12
PREBUILT=1 TEST_TIMEOUT_S=200 GT_SPAWN_TIMEOUT_S=190 timeout -k 5 260 tests/gpu/run_shared.sh 2 test_abort test_gemm_rs test_ag_gemm test_coll > "$OUT/p2_tests.log" 2>&1
echo "== P=2 shared rc=$? at $(el) s"; grep -E "^== gpu|FAIL|passed" "$OUT/p2_tests.log" | head -8
for pass in 1 2; do
  for v in a b; do
    bin=build/bench/bench_inproc; [ $v = a ] && bin=build_a/bench/bench_inproc
    for k in "ord" "sym --zc"; do
      MELD_TIMEOUT_MS=3000 timeout -k 5 60 $bin --ranks 2 --sizes 4096,65536,1048576 --kinds $k --json "$OUT/inproc.jsonl" \
        --label "acq_${v}$pass" > "$OUT/ip_${v}${pass}_${k%% *}.log" 2>&1
      echo "== $v$pass $k rc=$? at $(el) s: $(grep -E '^(all|reduce)' "$OUT/ip_${v}${pass}_${k%% *}.log" | awk '{printf "%s %s %s | ", substr($1,1,6), $3, $4}')"
    done
  done
done
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log
