#!/usr/bin/env bash
# p1_s18a.sh — ONE GPU, session 18 call 1.
# A: all 7 GPU test programs at one rank: GPU-verifies session 17's review refactors (decode
#    kernel post / wait by channel, skinny_for_height, meld_call_done_thread in AG+GEMM), which
#    were CPU-built only.
# B: the new shared-GPU mode (MELD_SHARE_GPU=1): two rank processes on the one GPU, their kernels
#    time-sliced. First time it runs: does a spinning kernel of process 0 yield to process 1's
#    kernel (compute preemption), and what does a round trip cost? Then the 2-rank cases of every
#    test program — nothing of sessions 10-17 has run at 2 ranks.
# Prediction (before the run): A passes (7 of 7). B: test_signal passes with round trips of
#    ~1-10 ms (one time slice per turn); the tests run 10-100x slower than on 2 GPUs but pass
#    unless a protocol bug of sessions 10-17 is there; the leak checks of test_comm may report
#    the other process's allocations (cudaMemGetInfo is per GPU).
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s18a.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
nvidia-smi --query-gpu=name,compute_mode,clocks.sm,power.draw --format=csv > "$OUT/smi.txt" 2>&1
MELD_TIMEOUT_MS=3000 PREBUILT=1 TEST_TIMEOUT_S=120 tests/gpu/run.sh > "$OUT/one_rank.log" 2>&1
echo "A one rank rc=$? at $(el) s"; grep -E "^== gpu|FAIL" "$OUT/one_rank.log" | cut -c1-160 | head -12
export MELD_SHARE_GPU=1 MELD_TIMEOUT_MS=10000 GT_SPAWN_TIMEOUT_S=110
for t in test_signal:60 test_abort:60 test_comm:60 test_coll:110 test_gemm_rs:110 test_ag_gemm:110; do
  n=${t%%:*}; lim=${t##*:}
  left=$(( 570 - $(el) ))
  [ "$left" -lt 20 ] && { echo "B $n: skipped (time)"; continue; }
  [ "$lim" -gt "$left" ] && lim=$left
  PREBUILT=1 TEST_TIMEOUT_S=$lim GT_SPAWN_TIMEOUT_S=$((lim - 5)) tests/gpu/run.sh "$n" > "$OUT/shared_$n.log" 2>&1
  echo "B $n rc=$? at $(el) s"
  grep -E "^== gpu|FAIL|round trip|latency|ranks\)|: [0-9.]+ s$|killing|failed \(" "$OUT/shared_$n.log" | cut -c1-170 | head -30
done
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
