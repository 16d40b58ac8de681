#!/usr/bin/env bash
# p1_s13d.sh — ONE GPU, session 13 call 4: the fused kernels' own cost at the cap, like for like.
# Calls 2-3: at 8192 x 5120 x 8192 the fused AG+GEMM kernel with nothing to gather costs
# 0.6-1.0% over the same plan through meld_gemm, its loopback pushes ~1.5% more; call 1's 2.7%
# at 8192 x 10240 was meld_gemm's stream-K over the partial wave, which the fused kernel lacks.
# Session 8's GEMM+RS breakdown (bare fused +5%, loopback +8.6% over meld_gemm at 8192^2 x 4096)
# had the same confound (meld_gemm took stream-K over 68 tiles) and the soak order bias that
# the lead-in now removes. Re-measure with the lead-in: bench_gemm_rs --diag at 8192^2 x 4096
# (mg_plain = meld_gemm without stream-K or deferral = the fused kernels' GEMM options), and
# bench_ag_gemm at 8192 x 5120 x 8192 (do meld_gemm's two passes agree now?).
# Prediction: RS bare fused within 1% of mg_plain, loopback +3-5% over it.
# Usage (device): OUT=... bash bench/calls/p1_s13d.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/bench/bench_gemm_rs build/bench/bench_ag_gemm
timeout -k 5 240 build/bench/bench_gemm_rs --op rs --shape 8192,8192,4096 --diag --soak ${SOAK:-600} \
  --json "$OUT/gemm_rs-p1-soak-s13.jsonl" > "$OUT/rs.log" 2>&1
echo "bench_gemm_rs rc=$? at $(el) s"; grep -E "soak" "$OUT/rs.log" | sed 's/^\[rank 0\] //' | cut -c1-150
S=8192,5120,8192
timeout -k 5 200 build/bench/bench_ag_gemm --shape $S --soak ${SOAK:-600} --json "$OUT/ag_gemm-p1-lead-s13.jsonl" > "$OUT/ag.log" 2>&1
echo "bench_ag_gemm $S rc=$? at $(el) s"; grep -E "soak ag_gemm" "$OUT/ag.log" | grep -E " default | meld_gemm | fused_p1 | fused_p1_static | loopback_p1 | loopback_p1_bulk | cublas " | cut -c1-150
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
