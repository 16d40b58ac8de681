#!/usr/bin/env bash
# p1_s15.sh — ONE GPU, the first call after session 14 if only one GPU is lent: session 14's last
# device change (the general hook g kernel releases a pending flag at every own tile's start;
# the lean default kernels unchanged) ran on no GPU. Every GPU test program at one rank;
# test_gemm_rs's new loopback cases at 8448 x 1024 x 1024 with add modes 0 and 2 and with the
# flag helper time out without that change.
# Usage (device): OUT=... bash bench/calls/p1_s15.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib
TEST_TIMEOUT_S=240 MELD_TIMEOUT_MS=3000 tests/gpu/run.sh > "$OUT/gpu_tests.log" 2>&1
echo "gpu tests rc=$? at $(el) s"; grep -E "checks passed|FAIL|TIMEOUT|timed out" "$OUT/gpu_tests.log" | cut -c1-160 | head -20
grep -E "8448 N 1024 K 1024" "$OUT/gpu_tests.log" | cut -c1-170
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
