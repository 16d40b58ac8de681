#!/usr/bin/env bash
# p1_s15f.sh — ONE GPU, session 15's last call: every GPU test program at one rank on the
# session's final code (AR copies by TMA by default; the push deferral and the store hint
# opt-in), binaries built on the CPU and carried (PREBUILT=1: no make here).
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s15f.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
export MELD_TIMEOUT_MS=3000 MELD_BOOTSTRAP_TIMEOUT_MS=30000
TEST_TIMEOUT_S=240 tests/gpu/run.sh > "$OUT/gpu_tests.log" 2>&1 # (PREBUILT=1: nothing made)
echo "gpu tests rc=$? at $(el) s"; grep -E "checks passed|FAIL|TIMEOUT|timed out" "$OUT/gpu_tests.log" | cut -c1-160 | head -20
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
