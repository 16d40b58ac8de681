#!/usr/bin/env bash
# p1_s24a.sh — ONE GPU, session 24 call 1. Carry: build/carry (bench/pack_bins.sh of the GPU
# tests and bench_inproc at the session's start + test_inproc for P ranks).
# 1. test_inproc at 2, 3 and 4 ranks as threads (new: P > 2 with every rank in flight; sessions
#    18-23 ran P > 2 only as time-sliced processes). Prediction: P = 2 passes (2504 checks); P = 3
#    and 4 unknown (first concurrent run: the generic LL kernel, ZC with 3-4 sources, the fused
#    split-K tiles of session 18's fix under real concurrency).
# 2. Every GPU test at one rank and 3 at 2 rank processes (session 23's final code: 2b3248e's
#    LL out-of-line abort raise was CPU-only). Prediction: all pass.
# 3. bench_inproc rows (session 23's expected T rows: LL 4 KB 2.67 / 2.24 / 2.37, 64 KB 2.85 /
#    2.46 / 2.60; ZC 4 KB ~5.27 / ~3.8 / ~5.17, 1 MB 7.65 / 6.0 / 8.16), then 3 and 4 ranks
#    (first figures; prediction: LL 4 KB +0.5..+1.5 us at 4 ranks, the generic kernel).
# Usage (device): OUT=... bash bench/calls/p1_s24a.sh
. "$(dirname "$0")/../device_env.sh"
export PREBUILT=1
MELD_TIMEOUT_MS=3000 timeout -k 5 200 build/tests/gpu/test_inproc 2,3,4 > "$OUT/test_inproc.log" 2>&1
echo "== test_inproc 2,3,4 rc=$? at $(el) s"; grep -E "ranks as threads|checks|FAIL" "$OUT/test_inproc.log" | cut -c1-220 | head -12
MELD_TIMEOUT_MS=3000 TEST_TIMEOUT_S=150 timeout -k 5 250 tests/gpu/run.sh test_gemm test_coll test_gemm_rs \
  test_ag_gemm test_abort test_signal test_comm > "$OUT/tests_p1.log" 2>&1
echo "== GPU tests (1 rank) rc=$? at $(el) s"; grep -E "checks passed|FAIL|^== gpu" "$OUT/tests_p1.log" | cut -c1-160 | head -12
TEST_TIMEOUT_S=150 GT_SPAWN_TIMEOUT_S=140 timeout -k 5 200 tests/gpu/run_shared.sh 2 test_abort test_gemm_rs test_ag_gemm > "$OUT/p2.log" 2>&1
echo "== P=2 shared rc=$? at $(el) s"; grep -E "^== gpu|FAIL|passed" "$OUT/p2.log" | head
bench/ab_inproc.sh s24a "t t" "t=build/bench" --ranks 2 --sizes 4096,65536 --kinds ord
bench/ab_inproc.sh s24az "t t" "t=build/bench" --ranks 2 --sizes 4096,1048576 --kinds sym --zc
bench/ab_inproc.sh s24a3 "t" "t=build/bench" --ranks 3 --sizes 4104,65544 --kinds ord
bench/ab_inproc.sh s24a4 "t" "t=build/bench" --ranks 4 --sizes 4096,65536 --kinds ord
bench/ab_inproc.sh s24a4z "t" "t=build/bench" --ranks 4 --sizes 4096,1048576 --kinds sym --zc
echo "== done at $(el) s"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log
