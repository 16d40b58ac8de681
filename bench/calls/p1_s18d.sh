#!/usr/bin/env bash
# p1_s18d.sh — ONE GPU, session 18 call 4: the 2-GPU call scripts' benchmark programs at 2 ranks
# sharing the GPU (MELD_SHARE_GPU=1: time slices, so every time printed is meaningless): do their
# 2-rank paths start, run every row and end cleanly (x2_s17's decode bench, x2_s10's bench_coll
# --zc-reg, x2_s12's bench_ag_gemm shape), so that the first 2-GPU call spends no time on a broken
# script? Also test_comm at 3 ranks (exchange, registration).
# Prediction (before the run): all rc 0; NCCL refuses two ranks on one GPU, so the seq / NCCL rows
# read -1 (the benches go on without them); test_comm passes at P = 3.
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s18d.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
PREBUILT=1 TEST_TIMEOUT_S=60 GT_SPAWN_TIMEOUT_S=55 tests/gpu/run_shared.sh 3 test_comm > "$OUT/p3_test_comm.log" 2>&1
echo "P=3 test_comm rc=$? at $(el) s"; grep -E "^== gpu|FAIL" "$OUT/p3_test_comm.log" | head -5
export MELD_SHARE_GPU=1 MELD_TIMEOUT_MS=15000 BENCH_RUN=p1-s18d-shared-smoke
run() { # name limit cmd...
  local n=$1 lim=$2; shift 2
  local left=$(( 330 - $(el) )); [ "$left" -lt 15 ] && { echo "$n: skipped (time)"; return; }
  [ "$lim" -gt "$left" ] && lim=$left
  GT_SPAWN_TIMEOUT_S=$((lim - 5)) timeout -k 5 "$lim" "$@" > "$OUT/$n.log" 2>&1
  echo "$n rc=$? at $(el) s: $(grep -cE '^(gemm_|all_|reduce_|ag_|[0-9]+x)' "$OUT/$n.log") row lines"
  grep -iE "error|fail|usage|nccl" "$OUT/$n.log" | grep -v "^meld.*WARN" | cut -c1-160 | head -5
}
run decode 120 build/bench/bench_gemm_rs --decode --op ar --json "$OUT/decode.jsonl"
run coll 70 build/bench/bench_coll --zc-reg --max-bytes $((4 << 20)) --json "$OUT/coll.jsonl"
run ag 90 build/bench/bench_ag_gemm --shape 2048,10240,8192 --json "$OUT/ag.jsonl"
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log *.jsonl 2>/dev/null && rm -f *.log *.jsonl
