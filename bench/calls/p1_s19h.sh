#!/usr/bin/env bash
# p1_s19h.sh — ONE GPU, session 19 call 8: call 7 found this session's cluster-reduce change
# (all loads of a two-row pass before the adds) 5-8% slower on the swapped kernel's tall tiles
# without a split (2048 x 1280 x 8192 / 4096: 0.0628 -> 0.0661 / 0.0353 -> 0.0383 ms) and within
# 1% elsewhere, so it is reverted: the kernel is session 18's again (plus the ring size as a
# build-time macro with the same stage counts). Same A/B as call 7, then test_gemm and
# test_gemm_rs at one rank.
# Prediction (before the run): both builds within 1% at every shape; tests pass.
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s19h.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
args=()
for s in 2048,1280,8192 2048,1280,4096 128,4096,7168 128,8192,8192 192,8192,8192 256,8192,8192 512,4096,7168 16,8192,8192; do
  args+=(--shape "$s"); done
i=0
for b in build_old build build build_old; do
  i=$((i + 1))
  timeout -k 5 60 $b/bench/bench_gemm --custom-only --only default "${args[@]}" --json "$OUT/ab-$i-$b.jsonl" \
    > "$OUT/ab-$i-$b.log" 2>&1
  echo "== $i $b rc=$?"
  grep -E "^custom" "$OUT/ab-$i-$b.log" | awk '{printf "%s x %s x %s: %s %s %s | ", $2, $3, $4, $(NF-6), $(NF-4), $(NF-2)}'; echo
done
PREBUILT=1 TEST_TIMEOUT_S=150 tests/gpu/run.sh test_gemm test_gemm_rs > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; grep -E "checks passed|PASSED|FAIL" "$OUT/tests.log" | head -6
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
