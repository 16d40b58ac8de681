#!/usr/bin/env bash
# p1_s26d.sh — ONE GPU, session 26 call 4. Carried (build/carry/bins.tar.xz):
#   build_h/: fa22749 (baseline for the fused GEMM+AR kernel: unchanged since);
#   build_j/: main at 9f67e89 + the fused GEMM+AR's deferred copy flags as ONE fence.release.sys
#             and P - 1 relaxed stores (were P - 1 st.release.sys in series by thread 0 of
#             warpgroup 0, ~650 ns each, once per reduced tile);
#   build/:   main's GPU tests as `make test` built them (the session's final library: the
#             acquire fences, the decode READY post, the in-process sharing fixes), run last.
# Prediction: tests pass; fused AR ("fused" row: ordinary C, slots and copies) at 8 ranks
# 8192 x 8192 x 1024 -2..-6% (short mainloops: the epilogue's serial releases weigh), x 8192 ~0;
# 4 ranks about half that; the symmetric-C row (fused_symc) unchanged.
. "$(dirname "$0")/../device_env.sh"
export PREBUILT=1 MELD_TIMEOUT_MS=3000
mkdir -p build/tests/gpu
timeout -k 5 100 build_j/tests/gpu/test_inproc 8,2,3,4 > "$OUT/test_inproc_j.log" 2>&1
echo "== j test_inproc 8,2,3,4 rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_inproc_j.log" | cut -c1-300 | head -3
TEST_TIMEOUT_S=80 timeout -k 5 90 build_j/tests/gpu/test_gemm_rs > "$OUT/j_test_gemm_rs.log" 2>&1
echo "== j test_gemm_rs (1 rank) rc=$? at $(el) s"; grep -E "checks passed|FAIL" "$OUT/j_test_gemm_rs.log" | cut -c1-200 | head -3
for P in 8 4; do
  for v in h j; do
    BENCH_SETTLE_MS=200 MELD_WORKSPACE_BYTES=402653184 timeout -k 5 100 build_$v/bench/bench_inproc --ranks $P --samples 3 \
      --fused-pairs 2 --fused ar:8192,8192,1024/ar:8192,8192,8192 --json "$OUT/inproc.jsonl" \
      --label "s26d_ar${P}_$v" > "$OUT/ar_${P}_$v.log" 2>&1
    echo "== fused AR $v P=$P rc=$? at $(el) s"; grep -E "mean of" "$OUT/ar_${P}_$v.log" | cut -c1-110
  done
done
TEST_TIMEOUT_S=150 timeout -k 5 200 tests/gpu/run.sh > "$OUT/gpu_tests.log" 2>&1
echo "== main: every GPU test at one rank rc=$? at $(el) s"; grep -E "checks passed|FAILED|FAIL" "$OUT/gpu_tests.log" | head -12
cp build/tests/gpu/*.log "$OUT/" 2>/dev/null
echo "== done at $(el) s"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log
