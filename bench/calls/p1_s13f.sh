#!/usr/bin/env bash
# p1_s13f.sh — ONE GPU, session 13 call 6: (1) test_ag_gemm at one rank with the session's last
# host change (the P > 1 timing diagnostics, off by default); (2) the GEMM+AR loopback breakdown
# with the soak lead-in (8192^2 x 4096; zero copy into a symmetric C and the slot path), to set
# beside call 4's GEMM+RS one. Usage (device): OUT=... bash bench/calls/p1_s13f.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/tests/gpu/test_ag_gemm build/bench/bench_gemm_rs
MELD_TIMEOUT_MS=3000 timeout -k 5 240 build/tests/gpu/test_ag_gemm > "$OUT/test_ag_gemm.log" 2>&1
echo "test_ag_gemm rc=$? at $(el) s"; grep -E "FAIL|checks passed" "$OUT/test_ag_gemm.log" | cut -c1-150 | head -5
timeout -k 5 240 build/bench/bench_gemm_rs --op ar --shape 8192,8192,4096 --diag --symc --soak ${SOAK:-600} \
  --json "$OUT/gemm_ar-p1-soak-s13.jsonl" > "$OUT/ar.log" 2>&1
echo "bench_gemm_rs ar rc=$? at $(el) s"; grep -E "soak" "$OUT/ar.log" | sed 's/^\[rank 0\] //' | cut -c1-150
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
