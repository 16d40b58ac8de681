#!/usr/bin/env bash
# p1_s17b.sh — ONE GPU, session 17 call 2: the decode GEMM+AR as one kernel (gemm_ar_decode.cu,
# MELD_GEMM_AR_DECODE_FUSED=1), first run. Every GPU test at one rank (launch.cuh's entry was
# split for the kernel's side warp: every meld kernel uses it; the small-M GEMM got the kernel's
# hooks), then bench_gemm_rs --decode at one rank: meld_gemm vs the decode kernel's loopback
# (C = 2 x the product; the exchange runs against this GPU's own memory: no NVLink).
# Prediction (before the run): tests pass; loopback = meld_gemm + 2-5 us (bar.sync, stamps,
# the block pulled twice from L2 and summed, CONSUMED), e.g. 128 x 4096 x 7168 ~14 -> ~17-19 us,
# graph the same. At 2 GPUs (not measurable here) that is what replaces the second launch, its
# entry handshake and done trip (~10 us of session 4's 40 us).
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s17b.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
export MELD_TIMEOUT_MS=3000
PREBUILT=1 TEST_TIMEOUT_S=200 tests/gpu/run.sh > "$OUT/gpu_tests.log" 2>&1
echo "tests rc=$? at $(el) s"; grep -E "FAIL|passed|failed|decode" "$OUT/gpu_tests.log" | grep -v "^\s*ok" | tail -25
cp build/tests/gpu/*.log "$OUT/" 2>/dev/null
timeout -k 5 150 build/bench/bench_gemm_rs --decode --op ar --json "$OUT/gemm_ar-p1-s17-decode.jsonl" > "$OUT/dec.log" 2>&1
echo "bench rc=$? at $(el) s"; grep -E "^gemm_ar|decode GEMM\+AR as one|graph:" "$OUT/dec.log" | cut -c1-200
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
