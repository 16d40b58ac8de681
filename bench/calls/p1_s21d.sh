#!/usr/bin/env bash
# p1_s21d.sh — ONE GPU, session 21 call 4: the other multi-rank GPU tests at 2 ranks sharing the
# GPU on the session's library (= call 2's: the compact LL arguments of call 3 were reverted).
# What changed for them: every kernel's last CTA advances the epoch counter from the epoch it read
# at entry (launch.cuh); the LL / ZC collectives (the decode GEMM+AR's all-reduce among them) launch
# with PDL and the lean LL kernel by default. Call 2 ran all 7 programs at one rank and test_coll
# at 2 shared ranks (every data case), call 3 test_coll's whole 2-rank run.
# Prediction (before the run): all pass.
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s21d.sh   (carry build/tests/gpu)
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
for t in test_gemm_rs test_ag_gemm test_signal test_abort test_comm; do
  PREBUILT=1 TEST_TIMEOUT_S=150 GT_SPAWN_TIMEOUT_S=145 tests/gpu/run_shared.sh 2 $t > "$OUT/p2_$t.log" 2>&1
  echo "== P=2 shared $t rc=$? at $(el) s"; grep -E "^== gpu|FAIL|killing|checks passed|^test_[a-z_]+: [0-9.]+ s" "$OUT/p2_$t.log" | head -4
  (cd "$OUT" && tar czf logs.tgz p2_*.log)
done
rm -f "$OUT"/p2_*.log
