#!/usr/bin/env bash
# p1_s13.sh — ONE GPU, session 13 call 1.
# (1) test_ag_gemm at one rank (the loopback case whose default plan must take 128 x 320).
# (2) Does bench_gemm's preheat remove the first-row bias (session 12: the run's first soaked
#     row read ~450 W and ran ~90 MHz higher)? Two processes at 8192^3 + 2048 x 5120 x 8192,
#     --soak-rounds 2: with the preheat both rounds' cuBLASLt rows should agree within ~1%.
# (3) bench_energy: what a 64 MiB copy per call adds to a GEMM at the cap (8192^3), by copy
#     engine, 16 vector CTAs, 16 bulk-copy CTAs. Prediction (written before the run): session 9's
#     model (T_copy x P_copy / P_cap) says +2%; HBM energy alone (~5 pJ/bit, 128 MiB moved)
#     says +0.5%. Expect +0.5..2%, bulk <= vec.
# (4) bench_ag_gemm at 8192 x 10240 x 8192, one rank: loopback vec (default) vs bulk pushes.
# Usage (device): OUT=... bash bench/calls/p1_s13.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/tests/gpu/test_ag_gemm build/bench/bench_gemm build/bench/bench_energy build/bench/bench_ag_gemm
MELD_TIMEOUT_MS=3000 timeout -k 5 240 build/tests/gpu/test_ag_gemm > "$OUT/test_ag_gemm.log" 2>&1
echo "test_ag_gemm rc=$? at $(el) s"; grep -E "FAIL|checks passed|default plan" "$OUT/test_ag_gemm.log" | cut -c1-150 | head -8
timeout -k 5 120 build/bench/bench_energy --ms ${EMS:-2000} --json "$OUT/energy-s13.jsonl" > "$OUT/energy.log" 2>&1
echo "energy rc=$? at $(el) s"; cat "$OUT/energy.log"
for r in 1 2; do
  timeout -k 5 120 build/bench/bench_gemm --custom-only --shape 8192,8192,8192 --shape 2048,5120,8192 --soak ${SOAK:-600} \
    --soak-rounds 2 --json "$OUT/gemm-preheat-$r.jsonl" > "$OUT/bench$r.log" 2>&1
  echo "bench $r rc=$? at $(el) s"; grep -E "preheat|^soak" "$OUT/bench$r.log" | cut -c1-60,100-175
done
s=8192,10240,8192
timeout -k 5 200 build/bench/bench_ag_gemm --shape $s --soak ${SOAK:-600} --json "$OUT/ag_gemm-bulk-${s//,/x}.jsonl" > "$OUT/ag-${s//,/x}.log" 2>&1
echo "bench_ag_gemm $s rc=$? at $(el) s"; grep -E "soak ag_gemm" "$OUT/ag-${s//,/x}.log" | grep -E " meld_gemm | fused_p1 | loopback_p1 | loopback_p1_bulk | cublas " | cut -c1-150
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
