#!/usr/bin/env bash
# p1_s18b.sh — ONE GPU, session 18 call 2: the multi-rank tests at P = 3 and P = 4 on one GPU
# (MELD_SHARE_GPU=1, GT_RANKS_PER_GPU=3 / 4: processes taking turns in time slices). The code is
# written for any P but has only ever run at P <= 2 (2 GPUs at most were ever lent). Then P = 2
# again for the two programs that failed in call 1 for test reasons (test_signal's 10000 round
# trips and its NVLink latency bound; test_comm's leak check seeing the other process's memory).
# Prediction (before the run): P = 3 and 4 pass test_gemm_rs and test_ag_gemm (the fused RS / AR
# kernels are 2-rank designs: at P > 2 the plan takes the unfused path; AG+GEMM's fused kernel is
# written for P ranks), test_coll passes at P = 3 (odd P: the ring and the ZC engine's owner
# blocks of unequal size are the likeliest to break); P = 2 test_signal and test_comm pass.
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s18b.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
export MELD_SHARE_GPU=1 MELD_TIMEOUT_MS=15000
for t in 3:test_coll:150 3:test_gemm_rs:120 3:test_ag_gemm:60 4:test_gemm_rs:120 4:test_ag_gemm:60 2:test_signal:30 2:test_comm:40 4:test_coll:150; do
  IFS=: read -r p n lim <<< "$t"
  left=$(( 575 - $(el) ))
  [ "$left" -lt 20 ] && { echo "P=$p $n: skipped (time)"; continue; }
  [ "$lim" -gt "$left" ] && lim=$left
  GT_RANKS_PER_GPU=$p PREBUILT=1 TEST_TIMEOUT_S=$lim GT_SPAWN_TIMEOUT_S=$((lim - 5)) tests/gpu/run.sh "$n" > "$OUT/p${p}_$n.log" 2>&1
  echo "P=$p $n rc=$? at $(el) s"
  grep -E "^== gpu|FAIL|ping-pong|killing|failed \(|skipped" "$OUT/p${p}_$n.log" | cut -c1-170 | head -16
done
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
