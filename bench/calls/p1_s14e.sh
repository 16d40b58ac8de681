#!/usr/bin/env bash
# p1_s14e.sh — ONE GPU, session 14 call 5 (last): the kernel pick moved into gemm_rs_plan.c
# (gemm_rs_kernel_variant, unit-tested) after call 4; host code only. test_gemm_rs at one rank,
# then the RS loopback burst rows default vs MELD_GEMM_RS_LEAN=0 / 2 (the pick still takes the
# lean kernels: default faster than LEAN=0).
# Usage (device): OUT=... bash bench/calls/p1_s14e.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/bench/bench_gemm_rs build/tests/gpu/test_gemm_rs
MELD_TIMEOUT_MS=3000 timeout -k 5 200 build/tests/gpu/test_gemm_rs > "$OUT/test_gemm_rs.log" 2>&1
echo "test_gemm_rs rc=$? at $(el) s"; grep -E "checks passed|FAIL" "$OUT/test_gemm_rs.log" | head -5
timeout -k 5 120 build/bench/bench_gemm_rs --op rs --shape 8192,8192,4096 --diag > "$OUT/rs.log" 2>&1
echo "bench_gemm_rs rc=$? at $(el) s"; grep -E "loopback|LEAN" "$OUT/rs.log" | sed 's/^\[rank 0\] //' | cut -c1-160
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
