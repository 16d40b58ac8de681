#!/usr/bin/env bash
# p1_s22h.sh — ONE GPU, session 22 call 8 (run as one command line on the warm machine; this file
# records it). At a44dda6: bench_inproc 2 ranks, LL and forced ZC, 4 KB .. 1 MB (the session's
# final rows), then test_abort, test_gemm_rs, test_ag_gemm at 2 rank processes sharing the GPU.
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s22h.sh (carry build/tests/gpu build/bench/bench_inproc)
. "$(dirname "$0")/../device_env.sh"
for k in "ord" "sym --zc"; do
  MELD_TIMEOUT_MS=3000 timeout -k 5 60 build/bench/bench_inproc --ranks 2 --sizes 4096,65536,262144,1048576 --kinds $k \
    --json "$OUT/inproc.jsonl" --label s22h > "$OUT/ip_${k%% *}.log" 2>&1
  echo "== $k rc=$?"; grep -E "^(all|reduce)" "$OUT/ip_${k%% *}.log" | awk '{printf "%s %s %s %s | ", substr($1,1,6), $2, $3, $4}'; echo
done
PREBUILT=1 TEST_TIMEOUT_S=150 GT_SPAWN_TIMEOUT_S=140 timeout -k 5 200 tests/gpu/run_shared.sh 2 test_abort test_gemm_rs test_ag_gemm > "$OUT/p2.log" 2>&1
echo "== P=2 shared rc=$? at $(el) s"; grep -E "^== gpu|FAIL|passed" "$OUT/p2.log" | head
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log
