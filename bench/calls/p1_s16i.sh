#!/usr/bin/env bash
# p1_s16i.sh — ONE GPU, session 16 call 9: the push deferral (MELD_GEMM_RS_PUSH_DEFER, opt-in;
# session 15 measured +0.5% in loopback with one pass pair per row) re-measured with 4 pass
# pairs (--soak-rounds 4): RS loopback off / after k-block 0 / after 16, meld_gemm_plain.
# Prediction (before the run): within +-0.4% of off (on one GPU there is no NVLink drain to hide;
# call 5's traces put the pushed tiles' epilogue at 3.3-3.9 us against the bare kernel's 1.2).
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s16i.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/bench/bench_gemm_rs
export MELD_TIMEOUT_MS=3000
rows="meld_gemm_plain|meld fused GEMM_RS_DIAG=1024|meld fused GEMM_RS_DIAG=1024 GEMM_RS_PUSH_DEFER=0|meld fused GEMM_RS_DIAG=1024 GEMM_RS_PUSH_DEFER=16"
timeout -k 5 150 build/bench/bench_gemm_rs --op rs --shape 8192,8192,4096 --diag --soak ${SOAK:-500} --soak-rounds 4 \
  --rows "$rows" --json "$OUT/gemm_rs-p1-s16i.jsonl" > "$OUT/rs.log" 2>&1
echo "rs rc=$? at $(el) s"; grep -E "soak gemm" "$OUT/rs.log" | sed 's/^\[rank 0\] //' | cut -c1-150
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
