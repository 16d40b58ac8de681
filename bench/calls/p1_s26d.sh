#!/usr/bin/env bash
# p1_s26d.sh — ONE GPU, session 26 call 4. Carried (build/carry/bins.tar.xz):
#   build_h/: fa22749 (baseline for the fused GEMM+AR kernel: unchanged since);
#   build_j/: main at 9f67e89 + the fused GEMM+AR's deferred copy flags as ONE fence.release.sys
#             and P - 1 relaxed stores (were P - 1 st.release.sys in series by thread 0 of
#             warpgroup 0, ~650 ns each, once per reduced tile);
#   build/:   main's GPU tests as `make test` built them at dd467c5 (the session's final
#             library: the acquire fences, the decode READY post, the in-process sharing fixes).
# Most valuable first; logs.tgz is rewritten after every stage (a cut call keeps what ran).
# Prediction: tests pass; fused AR ("fused" row: ordinary C, slots and copies) at 8 ranks
# 8192 x 8192 x 1024 -2..-6% (short mainloops: the epilogue's serial releases weigh), x 8192 ~0;
# 4 ranks about half that; the symmetric-C row (fused_symc) unchanged.
. "$(dirname "$0")/../device_env.sh"
export PREBUILT=1 MELD_TIMEOUT_MS=3000
L="$OUT/l"; mkdir -p "$L" build/tests/gpu
snap() { (cd "$L" && tar czf "$OUT/logs.tgz" *.log); }
timeout -k 5 100 build_j/tests/gpu/test_inproc 8,2,3,4 > "$L/test_inproc_j.log" 2>&1
echo "== j test_inproc 8,2,3,4 rc=$? at $(el) s"; grep -E "checks|FAIL" "$L/test_inproc_j.log" | cut -c1-300 | head -3
ar_row() { # P variant
  BENCH_SETTLE_MS=200 MELD_WORKSPACE_BYTES=402653184 timeout -k 5 100 build_$2/bench/bench_inproc --ranks $1 --samples 3 \
    --fused-pairs 2 --fused ar:8192,8192,1024/ar:8192,8192,8192 --json "$OUT/inproc.jsonl" \
    --label "s26d_ar$1_$2" > "$L/ar_$1_$2.log" 2>&1
  echo "== fused AR $2 P=$1 rc=$? at $(el) s"; grep -E "mean of" "$L/ar_$1_$2.log" | cut -c1-110
}
ar_row 8 h; ar_row 8 j; snap
TEST_TIMEOUT_S=80 timeout -k 5 90 build_j/tests/gpu/test_gemm_rs > "$L/j_test_gemm_rs.log" 2>&1
echo "== j test_gemm_rs (1 rank) rc=$? at $(el) s"; grep -E "checks passed|FAIL" "$L/j_test_gemm_rs.log" | cut -c1-200 | head -3
snap
TEST_TIMEOUT_S=150 timeout -k 5 200 tests/gpu/run.sh > "$L/gpu_tests.log" 2>&1
echo "== main: every GPU test at one rank rc=$? at $(el) s"; grep -E "checks passed|FAILED|FAIL" "$L/gpu_tests.log" | head -12
cp build/tests/gpu/*.log "$L/" 2>/dev/null; snap
ar_row 4 h; ar_row 4 j
echo "== done at $(el) s"
snap; rm -rf "$L"
