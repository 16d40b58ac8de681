#!/usr/bin/env bash
# p1_s17i.sh — ONE GPU, session 17 call 12: the decode kernel's opt-in push
# (MELD_GEMM_AR_DECODE_PUSH=1: the partial also stored into this rank's slot of every peer's
# workspace while the DSMEM reduce runs; every rank then reads all slots locally after READY),
# test_gemm_rs at one rank (push loopback: bitwise 2 x meld_gemm, 50 back to back, graphs, two
# shapes alternating), then bench_gemm_rs --decode: loopback pull vs push.
# Prediction (before the run): tests pass; push loopback = pull + 0.2-0.6 us (a second local copy
# of the partial; on one GPU nothing crosses NVLink, so the push's point, reads from local memory
# after READY instead of NVLink round trips, shows only at 2 GPUs: x2_s17.sh has both rows).
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s17i.sh (carry the two binaries)
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
export MELD_TIMEOUT_MS=3000
PREBUILT=1 TEST_TIMEOUT_S=200 tests/gpu/run.sh test_gemm_rs > "$OUT/gpu_tests.log" 2>&1
echo "tests rc=$? at $(el) s"; grep -E "FAIL|checks passed" "$OUT/gpu_tests.log" | tail -4
grep -c "decode kernel" "$OUT/gpu_tests.log"
timeout -k 5 120 build/bench/bench_gemm_rs --decode --op ar --json "$OUT/gemm_ar-p1-s17i.jsonl" > "$OUT/dec.log" 2>&1
echo "bench rc=$? at $(el) s"; grep -E "^gemm_ar m +(16|128)|as one kernel|pushing" "$OUT/dec.log" | cut -c1-150
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
