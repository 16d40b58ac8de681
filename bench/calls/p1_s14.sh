#!/usr/bin/env bash
# p1_s14.sh — ONE GPU, the first call of the session after 13: session 13 changed device code after
# its last GPU call (gemm.cuh: the order hook's interleaved mode, one untaken branch per tile by
# default; gemm_rs.cu wiring), so (1) every GPU test program at one rank (test_gemm_rs includes
# the interleaved order in loopback: 8192^2 x 4096, 8448 x 11100 x 4104 with group_m 6, 100 back
# to back); (2) bench_gemm_rs --diag --soak at 8192^2 x 4096 (one rank: K is the whole K; as s13 call 4):
# the loopback row with the interleaved order beside the default loopback (no gain expected on
# one GPU: the order is for NVLink bursts), and the soak lead-in's rows like session 13 call 4.
# Then on 2 GPUs: bench/calls/x2_s10.sh and x2_s12.sh.
# Usage (device): OUT=... bash bench/calls/p1_s14.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/bench/bench_gemm_rs
TEST_TIMEOUT_S=240 MELD_TIMEOUT_MS=3000 tests/gpu/run.sh > "$OUT/gpu_tests.log" 2>&1
echo "gpu tests rc=$? at $(el) s"; grep -E "^== |FAILED|FAIL |checks passed|PASSED|ileave|interleaved" "$OUT/gpu_tests.log" | cut -c1-160 | head -20
timeout -k 5 240 build/bench/bench_gemm_rs --op rs --shape 8192,8192,4096 --diag --soak ${SOAK:-600} \
  --json "$OUT/gemm_rs-p1-ileave.jsonl" > "$OUT/rs.log" 2>&1
echo "bench_gemm_rs rc=$? at $(el) s"; grep -E "soak" "$OUT/rs.log" | sed 's/^\[rank 0\] //' | grep -E " meld_gemm | meld_gemm_plain |DIAG=1024|ORDER|DIAG=8 |DIAG=16 | meld fused  " | cut -c1-150
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
