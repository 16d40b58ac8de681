#!/usr/bin/env bash
# p1_s19b.sh — ONE GPU, session 19 call 2: the small-M kernel's cluster reduce with every load
# of a pass in flight (2 rows x S partials before the first add; it was one load after another).
# Tests: test_gemm (every swapped case) and test_gemm_rs (the decode kernel, which runs the same
# code) at one rank. Bench: the decode shapes, default and S 2 / 3 where N = 4096, against
# cuBLASLt in the same run; the decode kernel in loopback (bench_gemm_rs --decode --diag).
# Smoke: bench_coll at 2 ranks sharing the GPU now checks against meld's default plan (call 1:
# 176 false FAILs against an unwritten NCCL buffer).
# Call 1 (old reduce), cuBLASLt ms / meld ms: 16x4096x7168 0.970, 128x4096x7168 0.960,
# 16x8192x8192 0.928, 128x8192x8192 0.954, 128x8192x4096 0.929, 128x4096x14336 1.009,
# 512x4096x7168 0.879; bench_stream's floor for 4096 x 7168 at 96 CTAs 19.3 us.
# Prediction (before the run): tests pass (sum order unchanged: bitwise as before); M = 128
# rows gain 1-2 us (0.96 -> ~1.02 at 128 x 4096 x 7168; 23.8 -> ~22.3 us), M = 16 rows
# 0.2-0.5 us, 512 x 4096 x 7168 (S 2, 256-row partials) 1-3 us (0.879 -> ~0.93).
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s19b.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
PREBUILT=1 TEST_TIMEOUT_S=150 tests/gpu/run.sh test_gemm test_gemm_rs > "$OUT/tests.log" 2>&1
echo "tests rc=$? at $(el) s"; grep -E "checks passed|PASSED|FAIL" "$OUT/tests.log" | head -8
args=()
for s in 16,4096,7168 128,4096,7168 16,8192,8192 128,8192,8192 128,8192,4096 128,4096,14336 512,4096,7168 64,4096,7168 32,8192,8192; do
  args+=(--shape "$s"); done
timeout -k 5 120 build/bench/bench_gemm --custom-only --only default,skinny_s2,skinny_s3 "${args[@]}" \
  --json "$OUT/gemm-decode.jsonl" > "$OUT/bench_gemm.log" 2>&1
echo "bench_gemm rc=$? at $(el) s"
timeout -k 5 60 build/bench/bench_gemm_rs --decode --diag --op ar --json "$OUT/decode-loopback.jsonl" > "$OUT/decode.log" 2>&1
echo "bench_gemm_rs --decode --diag rc=$? at $(el) s"
MELD_SHARE_GPU=1 MELD_TIMEOUT_MS=15000 GT_SPAWN_TIMEOUT_S=40 timeout -k 5 45 build/bench/bench_coll --zc-reg --only all_to_all \
  --max-bytes $((1 << 20)) --json "$OUT/coll.jsonl" > "$OUT/coll.log" 2>&1
echo "bench_coll shared rc=$? at $(el) s: $(grep -c FAIL "$OUT/coll.log") FAIL lines"
grep -E "^custom|geomean" "$OUT/bench_gemm.log" | cut -c1-150
grep -vE "^\[rank|^meld|WARN|^$" "$OUT/decode.log" | tail -30 | cut -c1-170
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz tests.log 2>/dev/null && rm -f tests.log
