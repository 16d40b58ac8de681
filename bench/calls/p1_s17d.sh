#!/usr/bin/env bash
# p1_s17d.sh — ONE GPU, session 17 call 4: the decode kernel after its sum was batched (U = 4
# items per thread with every load in flight; call 3 summed one item at a time), test_gemm_rs
# again, then bench_gemm_rs --decode --diag at one rank: meld_gemm vs the loopback, and the
# loopback without CONSUMED / without READY too / without exchange and sum
# (MELD_GEMM_AR_DECODE_DIAG 1 / 3 / 7, timing only).
# Prediction (before the run): loopback 0.5-1 us faster than call 3 at M 128 (+4.6-6.5 us graph
# over meld_gemm there); of what remains, CONSUMED ~1-2 us, READY ~1-2 us (each a system-scope
# release and an acquire poll), the sum ~1-2 us, the rest (~1 us) the side warp's entry and
# the extra barriers.
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s17d.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
export MELD_TIMEOUT_MS=3000
PREBUILT=1 TEST_TIMEOUT_S=300 tests/gpu/run.sh test_gemm_rs > "$OUT/gpu_tests.log" 2>&1
echo "tests rc=$? at $(el) s"; grep -E "FAIL|passed|failed|decode kernel" "$OUT/gpu_tests.log" | tail -14
cp build/tests/gpu/*.log "$OUT/" 2>/dev/null
for rep in 1 2; do
  timeout -k 5 150 build/bench/bench_gemm_rs --decode --diag --op ar --json "$OUT/gemm_ar-p1-s17d-$rep.jsonl" > "$OUT/dec$rep.log" 2>&1
  echo "bench $rep rc=$? at $(el) s"; grep -E "^gemm_ar|decode GEMM\+AR as one|decode kernel's loopback|graph:" "$OUT/dec$rep.log" | cut -c1-190
done
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
