#!/usr/bin/env bash
# p1_s22e.sh — ONE GPU, session 22 call 5. Changes since call 4: the argument post is a relaxed
# store in main (was branch exp/relaxed-post; every kernel's entry); ranks of one process that
# share a GPU plan with their share of the SMs (so fused kernels fit side by side); the unfused
# GEMM+RS/AR scratch is per comm, grown stream-ordered (was per device: two comms on one GPU
# raced); gpu_test.h counts checks atomically; new tests/gpu/test_inproc.cu (2 ranks as threads:
# every collective x bf16/fp32 x ordinary/meld_mem_alloc/registered x 2 sizes, 200 back-to-back
# and a graph, GEMM+RS/AR fused and unfused, AG+GEMM, a peer that never calls -> timeout).
# Parts: (1) the GPU tests at one rank but test_gemm (unchanged: no comm), incl. test_inproc;
# (2) test_abort, test_gemm_rs, test_ag_gemm at 2 rank processes sharing the GPU (the relaxed
# post in the argument-mismatch and fused paths); (3) bench_inproc P = 2 ord + forced ZC, 4 KB,
# 64 KB, 256 KB, 1 MB.
# Predictions (before the run): all pass; ZC rows as call 3's relaxed build (4 KB all-reduce
# ~7.5 us), LL rows as call 3 (2.4-2.8 us at 4 KB); 256 KB LL ~3.5-4.5 us.
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s22e.sh (carry build/bench/bench_inproc build/tests/gpu)
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
PREBUILT=1 MELD_TIMEOUT_MS=3000 TEST_TIMEOUT_S=120 timeout -k 5 200 tests/gpu/run.sh test_inproc test_coll test_gemm_rs \
  test_ag_gemm test_abort test_signal test_comm > "$OUT/tests_p1.log" 2>&1
echo "== GPU tests (1 rank) rc=$? at $(el) s"; grep -E "checks passed|FAIL|^== gpu|inproc|missing" "$OUT/tests_p1.log" | cut -c1-160 | head -30
PREBUILT=1 TEST_TIMEOUT_S=150 GT_SPAWN_TIMEOUT_S=140 timeout -k 5 200 tests/gpu/run_shared.sh 2 test_abort test_gemm_rs test_ag_gemm > "$OUT/p2_tests.log" 2>&1
echo "== P=2 shared rc=$? at $(el) s"; grep -E "^== gpu|FAIL|killing|passed" "$OUT/p2_tests.log" | head -8
for k in "ord" "sym --zc"; do
  MELD_TIMEOUT_MS=3000 timeout -k 5 90 build/bench/bench_inproc --ranks 2 --sizes 4096,65536,262144,1048576 --kinds $k \
    --json "$OUT/inproc.jsonl" --label "s22e" > "$OUT/inproc_${k%% *}.log" 2>&1
  echo "== inproc $k rc=$? at $(el) s"; grep -E "^(all|reduce)|FAIL" "$OUT/inproc_${k%% *}.log"
done
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log
