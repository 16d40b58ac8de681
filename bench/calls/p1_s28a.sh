#!/usr/bin/env bash
# p1_s28a.sh — ONE GPU, prepared at the end of session 27 (not run). The interleaved owner order
# for more than 2 ranks (opt-in MELD_GEMM_RS_ORDER=ileave; gemm.cuh gemm_ileave_mblk with
# ileave_p): rounds of P raster groups, own group last in each, so own tiles (their P - 1
# partial reads and, for GEMM+AR, the reduced tiles' copies) spread over the call instead of
# its last 1 / P (bench/results/gemm_ar-inproc4-trace-s27.png shows them all at the end).
# CPU-tested only (tests/unit/test_gemm_args.c test_ileave_p_order: each rank's schedule covers
# every tile once; every own tile's partials have smaller tickets on every peer).
# (1) correctness: test_inproc 8,2,3,4 (its opt_cases run the fused GEMM+RS / GEMM+AR with the
# order, the several-owner push, both, at a shape where the plan takes them (asserted); at 2
# ranks the 2-rank order of session 13, RS only, never run on a GPU before either); (2) A/B at
# 4, 8, 3 ranks, both orders in the same passes of one process (bench_inproc --ab); (3) a trace
# of the 4-rank GEMM+AR with it.
# Prediction: 4 ranks GEMM+AR 8192^3 -5..-10% (2.34 ms), K 1024 -3..-8%; GEMM+RS -2..-5%;
# 8 ranks alike; the trace shows reduce epilogues every 4th group and no copy tail.
# Usage (device, nvidia-h200): bash bench/calls/p1_s28a.sh   (~7-8 min of device time with the build)
. "$(dirname "$0")/../device_env.sh"
build build/bench/bench_inproc $(ls tests/gpu/*.cu | sed 's|tests/gpu/\(.*\)\.cu|build/tests/gpu/\1|')
export MELD_TIMEOUT_MS=3000 MELD_WORKSPACE_BYTES=402653184 BENCH_VARIANTS=gemm,fused,fused_symc
FR_LABEL=s28a L="$OUT/l"; mkdir -p "$L" build/tests/gpu
snap() { (cd "$L" && tar czf "$OUT/logs.tgz" *.log ar4_* 2>/dev/null); }
# (0) the library since session 27's call 5 is CPU-built only (the fused kernels' parameter grew by
# the push maps, the order hook by two fields): every GPU test at one rank first, then test_inproc.
PREBUILT=1 TEST_TIMEOUT_S=150 timeout -k 5 200 tests/gpu/run.sh > "$L/gpu_tests.log" 2>&1
echo "== every GPU test at one rank rc=$? at $(el) s"; grep -E "checks passed|FAILED|FAIL" "$L/gpu_tests.log" | head -12
cp build/tests/gpu/*.log "$L/" 2>/dev/null
timeout -k 5 120 build/tests/gpu/test_inproc 8,2,3,4 > "$L/test_inproc.log" 2>&1
echo "== test_inproc 8,2,3,4 (defaults) rc=$? at $(el) s"; grep -E "checks|FAIL" "$L/test_inproc.log" | cut -c1-300 | head -3
snap
# A/B in one process per rank count (bench_inproc --ab: both orders in the same passes, 2 pairs)
AB="--ab MELD_GEMM_RS_ORDER=rotate,ileave --fused-pairs 2"
S=rs:8192,8192,8192/rs:8192,8192,1024/ar:8192,8192,8192/ar:8192,8192,1024
fused_row 4 IP_ROW_NO_ENV=1 $S p4 $AB; snap
fused_row 8 IP_ROW_NO_ENV=1 $S p8 $AB; snap
S3=rs:8064,8192,8256/rs:8064,8192,1032/ar:8064,8192,8256/ar:8064,8192,1032
fused_row 3 IP_ROW_NO_ENV=1 $S3 p3 $AB; snap
# (4) the TMA push to several owners (opt-in MELD_GEMM_RS_PUSH=tma from 3 ranks: one map per
# owner, flags deferred to the next epilogue as at 2 ranks; CPU-built only): A/B.
# In-process the stores it replaces only wait for local memory: expect 0..-3% here; the case for
# it is NVLink (2 GPUs, session 2: the stores' path 0.1-0.17 ms slower of 0.87). (Its tests: (1).)
fused_row 4 IP_ROW_NO_ENV=1 $S p4push --ab MELD_GEMM_RS_PUSH=st,tma --fused-pairs 2; snap
fused_row 8 IP_ROW_NO_ENV=1 $S p8push --ab MELD_GEMM_RS_PUSH=st,tma --fused-pairs 2; snap
MELD_GEMM_RS_ORDER=ileave BENCH_VARIANTS=fused MELD_TRACE="$L/ar4_ileave.json" timeout -k 5 60 build/bench/bench_inproc \
  --ranks 4 --trace 3 --fused ar:8192,8192,8192 > "$L/trace_ar4_ileave.log" 2>&1
echo "== trace AR 4 ranks ileave rc=$? at $(el) s"
python3 tools/trace_stats.py "$L"/ar4_ileave.rank0.json* 2>&1 | sed -n '/call 3:/,/call 4:/p' | head -14
echo "== done at $(el) s"
snap; rm -rf "$L"
