#!/usr/bin/env bash
# p1_s10b.sh — ONE GPU, session 10, call 2: what a system-scope fence costs against an acquire
# load (bench_fence, plus the SASS each compiles to), then every GPU test program at one rank
# with the waits' acquire loads (signal.cuh meld_acquire_slot, launch.cuh meld_args_verify),
# which replaced a fence.acq_rel.sys per wait. Usage (device): OUT=... bash bench/calls/p1_s10b.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
make -j16 lib build/bench/bench_fence > "$OUT/build.log" 2>&1 || { grep -E "error:|ptxas error" "$OUT/build.log" | head; exit 1; }
echo "build: $(el) s"
timeout -k 5 60 build/bench/bench_fence | tee "$OUT/bench_fence.log"
CUOBJ=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
if [ -n "$CUOBJ" ]; then
  "$CUOBJ" -sass -fun fence_kernel build/bench/bench_fence > "$OUT/fence_sass.txt" 2>&1
  echo "SASS opcodes of fence_kernel:"; grep -oE "(MEMBAR|FENCE|CCTL|ERRBAR|LDG|STG|ATOMG|RED)[A-Z0-9._]*" "$OUT/fence_sass.txt" | sort | uniq -c
fi
TEST_TIMEOUT_S=${TEST_TIMEOUT_S:-150} MELD_TIMEOUT_MS=3000 tests/gpu/run.sh ${TESTS:-} > "$OUT/gpu_tests.log" 2>&1
echo "gpu tests rc=$? at $(el) s"; grep -E "^== |FAILED|FAIL |checks passed|PASSED|passed" "$OUT/gpu_tests.log" | head -20
echo "total: $(el) s"
