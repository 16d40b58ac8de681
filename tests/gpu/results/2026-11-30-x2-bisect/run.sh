#!/usr/bin/env bash
# One device call: compute-sanitizer on HEAD's hook tests (GPU 0) while older commits' test_gemm
# build; then each older test_gemm on GPU 1, to find which change broke the epilogue hook test.
OUT=${OUT:-/tmp/out}
root=$(pwd)
for c in 1978afa 8934568 f9a5539 750bc1e; do
  (mkdir -p /tmp/b_$c && tar -xf bisect/$c.tar -C /tmp/b_$c && cd /tmp/b_$c &&
   make -j6 build/tests/gpu/test_gemm > $OUT/build_$c.log 2>&1; echo "build $c rc=$?") &
  pids="$pids $!"
done
cd snap && make -j8 build/tests/gpu/test_gemm > $OUT/build_head.log 2>&1; echo "build head rc=$?"
CUDA_VISIBLE_DEVICES=0 TEST_GEMM_ONLY=hooks timeout 150 compute-sanitizer --tool memcheck --show-backtrace no \
  build/tests/gpu/test_gemm > $OUT/sanitizer.log 2>&1 &
san=$!
wait $pids
for c in 1978afa 8934568 f9a5539 750bc1e; do
  [ -x /tmp/b_$c/build/tests/gpu/test_gemm ] || { echo "$c: no binary"; continue; }
  (cd /tmp/b_$c && CUDA_VISIBLE_DEVICES=1 timeout 60 build/tests/gpu/test_gemm > $OUT/test_$c.log 2>&1)
  echo "$c: $(grep -c FAIL $OUT/test_$c.log) FAIL lines; $(grep -m1 'FAIL' $OUT/test_$c.log)"
done
wait $san
echo "sanitizer:"; grep -E "Invalid|at |by thread|ERROR SUMMARY|Address" $OUT/sanitizer.log | head -20
