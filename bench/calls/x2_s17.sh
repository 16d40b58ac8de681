#!/usr/bin/env bash
# x2_s17.sh — 2 GPUs, first call after session 17: the decode GEMM+AR as one kernel
# (MELD_GEMM_AR_DECODE_FUSED=1, gemm_ar_decode.cu; built and verified in loopback on one H200 only).
# (1) test_gemm_rs at 2 ranks (its new cases: the decode kernel at 16 / 128 / 100 (N 1000, 1003) /
# 512 rows, 200 back to back, graphs, two shapes alternating with every third call unfused, PDL
# off, a missing rank -> MELD_ERR_TIMEOUT and the sticky error after); (2) bench_gemm_rs --decode
# at 2 ranks, eager and graphs: AUTO (meld_gemm + the ZC one-shot), the decode kernel, seq
# (cuBLAS + NCCL) — issue 7's decode goal, 128 x 4096 x 7168 at parity since session 4.
# Prediction (before the run): tests pass; the decode kernel = meld_gemm + ~6-9 us (READY one way
# over NVLink and the ranks' skew ~2 us, the peer's 1-2 MB pulled ~3-6 us, sum and stores ~1 us):
# 128 x 4096 x 7168 ~0.029-0.031 ms eager against AUTO ~0.040 and seq ~0.040 (1.25-1.35x), graphs
# ~0.026-0.028 against 0.035-0.036; M 16 shapes ~1.1-1.2x AUTO; M 512 (4096 x 7168) ~1.1x.
# The push variant (MELD_GEMM_AR_DECODE_PUSH=1, its own bench row and tests): prediction 0.5-1.5 us
# faster than pull at M 128 (the sum reads local memory; the stores drain under READY's release).
# Then run x2_s10.sh, x2_sustained.sh, x2_s12.sh (session 16's list).
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/x2_s17.sh (carry build/bench, build/tests/gpu)
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
export BENCH_COMMIT=${BENCH_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)} BENCH_RUN=${BENCH_RUN:-x2-s17}
nvidia-smi -L > "$OUT/gpus.txt" 2>&1
build lib build/bench/bench_gemm_rs build/tests/gpu/test_gemm_rs
TEST_TIMEOUT_S=${TEST_TIMEOUT_S:-300} MELD_TIMEOUT_MS=3000 tests/gpu/run.sh test_gemm_rs > "$OUT/gpu_tests.log" 2>&1
echo "test_gemm_rs rc=$? at $(el) s"; grep -E "FAIL|decode kernel|DECODE_FUSED|checks passed" "$OUT/gpu_tests.log" | cut -c1-160 | head -30
cp build/tests/gpu/*.log "$OUT/" 2>/dev/null
timeout -k 5 200 build/bench/bench_gemm_rs --decode --op ar --json "$OUT/gemm_ar-x2-s17-decode.jsonl" > "$OUT/dec.log" 2>&1
echo "bench rc=$? at $(el) s"; grep -E "^gemm_ar|graph:|decode GEMM\+AR as one|pushing|zero-copy" "$OUT/dec.log" | cut -c1-200
# (session 19) Up to 32 rows at N 4096 the small-M GEMM now runs clusters of 2 (AUTO's GEMM 1-3 us
# faster in loopback), but the decode kernel preferred clusters of 3 there in loopback (graphs
# 21.0 vs 22.5 us at 16 x 4096 x 7168): that shape again with 3 (MELD_GEMM_SPLIT_K sets the
# small-M kernel's cluster size for AUTO's GEMM and the decode kernel alike).
MELD_GEMM_SPLIT_K=3 timeout -k 5 60 build/bench/bench_gemm_rs --shape 16,4096,14336 --op ar \
  --json "$OUT/gemm_ar-x2-s17-decode-s3.jsonl" > "$OUT/dec_s3.log" 2>&1
echo "bench (clusters of 3) rc=$? at $(el) s"; grep -E "^gemm_ar|graph:|decode GEMM\+AR as one|pushing" "$OUT/dec_s3.log" | cut -c1-200
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
