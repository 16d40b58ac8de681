#!/usr/bin/env bash
# x2_s10.sh — 2 GPUs, session 10, one call: (1) every GPU test program at 2 ranks (session 9's
# GEMM scheduler fix is in every GEMM path and has not run at 2 ranks); (2) bench_coll --zc-reg
# 4 KB .. 256 MB with and without programmatic dependent launch (MELD_COLL_PDL=1: never measured
# on 2 GPUs; the question is whether it buys issue 5's latency (<= 0.7x NCCL) and part of the
# ~10-15 us fixed cost at 64 MB); (3) a per-CTA trace of 4 back-to-back 64 MB ZC all-gathers and
# reduce-scatters (entry handshake / move / done wait: where the fixed cost goes; since session
# 10 every wait ends with an ld.acquire.sys instead of a fence.acq_rel.sys); (4) GEMM+RS
# 8192^3 with the diagnostic rows, sustained after both GPUs are heated (where the fused
# kernel's +18% over meld_gemm goes). Still the first 2-GPU call after session 11: its GPU tests
# also run session 11's flag change (st.release.sys alone; one fence for the reduce pushes and
# epilogue signals) at 2 ranks for the first time. Session 13: test_gemm_rs now also runs the
# opt-in interleaved owner order (MELD_GEMM_RS_ORDER=ileave) at 2 ranks, and the GEMM+RS diag
# rows include it ("interleaved owner order"): does spreading the pushes shorten the push
# epilogues (7.6 us median, p99 18.5 in session 9's trace) and the tail?
# Usage (device): OUT=... [PREBUILT=1] bash bench/calls/x2_s10.sh (PREBUILT: carry build/bench and build/tests/gpu)
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
export BENCH_COMMIT=${BENCH_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)} BENCH_RUN=${BENCH_RUN:-x2-s10}
d=$(date -u +%Y-%m-%d)
nvidia-smi -L > "$OUT/gpus.txt" 2>&1
build lib build/bench/bench_coll build/bench/bench_gemm build/bench/bench_gemm_rs build/bench/bench_fence \
  $(ls tests/gpu/*.cu | sed 's#tests/gpu/\(.*\)\.cu#build/tests/gpu/\1#')
# what a release costs when its stores went over NVLink (session 10: 0.6 us with local stores)
timeout -k 5 60 build/bench/bench_fence --peer > "$OUT/bench_fence_peer.log" 2>&1; cat "$OUT/bench_fence_peer.log"
if [ -z "${SKIP_TESTS:-}" ]; then
  TEST_TIMEOUT_S=${TEST_TIMEOUT_S:-150} MELD_TIMEOUT_MS=3000 tests/gpu/run.sh ${TESTS:-} > "$OUT/gpu_tests.log" 2>&1
  echo "gpu tests rc=$? at $(el) s"; grep -E "^== |FAILED|FAIL |checks passed|PASSED" "$OUT/gpu_tests.log" | head -14
fi
timeout -k 5 150 build/bench/bench_coll --zc-reg --max-bytes $((256 << 20)) --json "$OUT/coll-zcreg-pdl-$d.jsonl" > "$OUT/bench_coll.log" 2>&1
echo "bench_coll --zc-reg rc=$? at $(el) s"
grep -E " (4096|65536|262144|67108864|268435456) " "$OUT/bench_coll.log" | cut -c1-120
for op in all_gather reduce_scatter; do
  MELD_PORT=$((47913 + ${#op})) MELD_TRACE="$OUT/coll-trace-$op.json" timeout -k 5 40 build/bench/bench_coll --zc-reg --trace \
    --bytes $((64 << 20)) --only $op > "$OUT/trace-$op.log" 2>&1; echo "trace $op rc=$? at $(el) s"
  python3 tools/trace_png.py -o "$OUT/coll-trace-$op.png" --title "ZC $op 64 MB, 16 CTAs, 2 x H200, 4 calls" \
    "$OUT"/coll-trace-$op.rank*.json >> "$OUT/trace-$op.log" 2>&1; echo "trace png rc=$?"
  python3 tools/trace_stats.py "$OUT"/coll-trace-$op.rank*.json 2>&1 | tail -12
done
for g in 0 1; do # heat both GPUs (3 s of a big GEMM each, at once)
  CUDA_VISIBLE_DEVICES=$g timeout -k 5 60 build/bench/bench_gemm --custom-only --shape 8192,8192,8192 --rounds 1 --soak 3000 \
    > "$OUT/preheat$g.log" 2>&1 &
done
wait; echo "preheat at $(el) s"
timeout -k 5 200 build/bench/bench_gemm_rs --op rs --shape 8192,8192,8192 --diag --soak ${SOAK:-600} \
  --json "$OUT/gemm_rs-x2-diag-sustained-$d.jsonl" > "$OUT/gemm_rs.log" 2>&1
echo "bench_gemm_rs --diag --soak rc=$? at $(el) s"; grep -E "soak|^gemm_|per rank" "$OUT/gemm_rs.log" | grep -v "^\[rank 1\]" | cut -c1-150
echo "total: $(el) s"
# (a device call brings back at most 8 files: logs and traces in one archive)
cd "$OUT" && tar czf logs.tgz *.log *.txt *.json 2>/dev/null && rm -f *.log *.txt *.json
