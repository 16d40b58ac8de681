#!/usr/bin/env bash
# p1_s19d.sh — ONE GPU, session 19 call 4: the small-M kernel's cluster size up to 32 rows
# (clusters of 2 where they keep >= 3/8 of the SMs busy; was the largest that fits one wave),
# and every GPU test on the session's last library code.
# Tests: all 7 programs at one rank; test_gemm_rs at 2 ranks sharing the GPU (the decode
# kernel's 2-rank cases, its copies now stored by the shared row helper).
# Bench: decode shapes default vs the old default (skinny_s3 where N = 4096) against cuBLASLt;
# the decode GEMM+AR in loopback (bench_gemm_rs --decode --diag).
# Prediction (before the run): tests pass; 16 x 4096 x 7168 default ~20.5 us (call 3's S 2:
# 1.048 of cuBLASLt), 16 x 4096 x 14336 ~34.2 us (0.99); 32 x 4096 x 7168 gains 1-2 us over S 3;
# the N 8192 and 2048 rows unchanged (same plans).
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s19d.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
args=()
for s in 16,4096,7168 16,4096,14336 32,4096,7168 32,4096,14336 16,8192,8192 16,8192,4096 16,2048,8192 64,4096,7168; do
  args+=(--shape "$s"); done
timeout -k 5 100 build/bench/bench_gemm --custom-only --only default,skinny_s3 "${args[@]}" \
  --json "$OUT/gemm-decode.jsonl" > "$OUT/bench_gemm.log" 2>&1
echo "bench_gemm rc=$? at $(el) s"
timeout -k 5 60 build/bench/bench_gemm_rs --decode --diag --op ar --json "$OUT/decode-loopback.jsonl" > "$OUT/decode.log" 2>&1
echo "bench_gemm_rs --decode --diag rc=$? at $(el) s"
PREBUILT=1 TEST_TIMEOUT_S=150 tests/gpu/run.sh > "$OUT/tests.log" 2>&1
echo "tests (1 rank) rc=$? at $(el) s"; grep -E "checks passed|PASSED|FAIL" "$OUT/tests.log" | sort | uniq -c | head -8
PREBUILT=1 TEST_TIMEOUT_S=70 GT_SPAWN_TIMEOUT_S=65 tests/gpu/run_shared.sh 2 test_gemm_rs > "$OUT/p2_test_gemm_rs.log" 2>&1
echo "P=2 shared test_gemm_rs rc=$? at $(el) s"; grep -E "^== gpu|FAIL|killing" "$OUT/p2_test_gemm_rs.log" | head -5
grep -E "^custom|geomean" "$OUT/bench_gemm.log" | cut -c1-150
grep -E "^gemm_ar|graph:|one kernel" "$OUT/decode.log" | cut -c1-170
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f tests.log p2_test_gemm_rs.log
