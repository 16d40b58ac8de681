#!/usr/bin/env bash
# p1_s26b.sh — ONE GPU, session 26 call 2. Carried (build/carry/bins.tar.xz):
#   build/: main after the acquire-fence merge (f2c04e2 + bench_fence's release rows): every GPU
#           test (make test's build), bench_inproc, bench_fence;
#   build_g/: branch exp/rel-fence: every release as fence.release.sys + relaxed store(s) (the
#           signal / credit puts, the GEMM flag puts, the fused epilogues' release fences, the
#           AG+GEMM side-copy signals; the decode GEMM+AR's P - 1 serial st.release.sys to its
#           peers become ONE fence and P - 1 relaxed stores).
# Build and pack (CPU machine): make test; make -j2 build/bench/bench_inproc build/bench/bench_fence;
#   on the branch make -j2 BUILD=build_g build_g/tests/gpu/{test_inproc,test_gemm_rs,test_ag_gemm}
#   build_g/bench/bench_inproc (copied here); bench/pack_bins.sh build/tests/gpu/test_* build/bench/
#   {bench_inproc,bench_fence} build_g/...; carry ["build/carry"].
# Predictions: fence.release.sys ~= st.release.sys (~0.6 us: the release half is what costs); if
# so G equals main on the ZC rows, and the decode GEMM+AR at 8 ranks gains ~6 x 0.6 us (its
# serial releases) with MELD_GEMM_AR_DECODE_FUSED=1. If fence.release.sys is cheaper, G gains
# that difference on every ZC push call (its done signal). All tests pass.
. "$(dirname "$0")/../device_env.sh"
export PREBUILT=1 MELD_TIMEOUT_MS=3000
timeout -k 5 30 build/bench/bench_fence > "$OUT/fence.log" 2>&1; echo "== bench_fence rc=$?"; cat "$OUT/fence.log"
for v in build build_g; do
  timeout -k 5 150 $v/tests/gpu/test_inproc 8,2,3,4 > "$OUT/test_inproc_$v.log" 2>&1
  echo "== $v test_inproc 8,2,3,4 rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_inproc_$v.log" | cut -c1-300 | head -4
done
for t in test_gemm_rs test_ag_gemm; do
  TEST_TIMEOUT_S=100 timeout -k 5 110 build_g/tests/gpu/$t > "$OUT/g_$t.log" 2>&1
  echo "== build_g $t (1 rank: loopback) rc=$? at $(el) s"; grep -E "checks passed|FAIL" "$OUT/g_$t.log" | cut -c1-160 | head -3
done
for i in 1 2; do
  for v in build build_g; do
    for P in 8 4 2; do ip_row s26b zc${P}_${v#build}$i - $v/bench/bench_inproc --ranks $P --kinds sym --zc --sizes 4096,1048576; done
  done
done
for v in build build_g; do
  for P in 8 2; do
    MELD_GEMM_AR_DECODE_FUSED=1 MELD_WORKSPACE_BYTES=67108864 timeout -k 5 90 $v/bench/bench_inproc --ranks $P --samples 3 \
      --fused-pairs 1 --fused-calls 50 --fused ar:128,4096,14336/ar:16,4096,7168 --json "$OUT/inproc.jsonl" \
      --label "s26b_dec${P}_${v#build}" > "$OUT/dec_${P}_$v.log" 2>&1
    echo "== decode fused $v P=$P rc=$? at $(el) s"; grep -E " x [0-9]+ x |mean of|FAIL" "$OUT/dec_${P}_$v.log" | head -12
  done
done
TEST_TIMEOUT_S=150 timeout -k 5 200 tests/gpu/run.sh > "$OUT/gpu_tests.log" 2>&1
echo "== main: every GPU test at one rank rc=$? at $(el) s"; grep -E "checks passed|PASSED|FAILED|FAIL" "$OUT/gpu_tests.log" | head -12
cp build/tests/gpu/*.log "$OUT/" 2>/dev/null
echo "== done at $(el) s"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log
