#!/usr/bin/env bash
# p1_s11d.sh — ONE GPU, session 11, call 4: the mbarrier wait with a suspend-time hint.
# The engine's waits (consumer: stage full; producer: stage empty) loop on
# mbarrier.try_wait.parity without a hint; under ncu the wide kernel executes 44.5 M instructions
# against cuBLASLt's 27.9 M at 2048 x 5120 x 8192, much of it spinning. At the 700 W cap issue
# slots cost energy, so fewer spins could buy clock. Build A = default, B = -DMELD_MBAR_SUSPEND_NS
# (${NS:-10000000}); test_gemm on B; soaks A, B, A, B (each process also soaks cuBLASLt: the
# drift control); ncu instructions / cycles of both at two shapes.
# Prediction: B executes 20-35% fewer instructions, same cycles +-1% under ncu (locked work),
# sustained 0-2% faster where the kernel sits at the cap.
# (MELD_MBAR_SUSPEND_NS was removed from ptx.cuh after this call measured no effect; build B
# now equals A. To rerun, restore it from commit 63408dc.)
# Usage (device): OUT=... bash bench/calls/p1_s11d.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
T="lib build/bench/bench_gemm build/tests/gpu/test_gemm"
make -j16 $T > "$OUT/buildA.log" 2>&1 || { grep -E "error" "$OUT/buildA.log" | head; exit 1; }
cp build/bench/bench_gemm /tmp/bench_gemm_A
rm -f build/obj/src/ops/*.o build/lib/libmeld.a build/bench/bench_gemm build/tests/gpu/test_gemm
NVCCFLAGS="-O3 -lineinfo -DMELD_MBAR_SUSPEND_NS=${NS:-10000000}" make -j16 $T > "$OUT/buildB.log" 2>&1 ||
  { grep -E "error" "$OUT/buildB.log" | head; exit 1; }
cp build/bench/bench_gemm /tmp/bench_gemm_B
echo "builds: $(el) s"
MELD_TIMEOUT_MS=3000 timeout -k 5 150 build/tests/gpu/test_gemm > "$OUT/test_gemm_B.log" 2>&1
echo "test_gemm (B) rc=$? at $(el) s"; grep -E "FAIL|checks passed" "$OUT/test_gemm_B.log" | head -5
SH="--shape 2048,5120,8192 --shape 8192,8192,8192 --shape 8192,5120,8192"
for r in 1 2; do for v in A B; do
  timeout -k 5 120 /tmp/bench_gemm_$v --custom-only $SH --soak ${SOAK:-600} --commit "$(git rev-parse --short HEAD 2>/dev/null)-$v" --json "$OUT/soak-mbar-s11.jsonl" > "$OUT/soak_$v$r.log" 2>&1
  echo "soak $v$r rc=$? at $(el) s"; grep -E "^custom|^soak" "$OUT/soak_$v$r.log" | sed "s/^/$v$r /" | cut -c1-160
done; done
for v in A B; do for s in 2048,5120,8192 8192,8192,8192; do
  BIN=/tmp/bench_gemm_$v SHAPE=$s OUT="$OUT/ncu_${v}_${s}" timeout -k 5 120 bash bench/ncu_gemm_vs_cublas.sh > "$OUT/ncu_${v}_$s.out" 2>&1
  echo "== ncu $v $s"; grep -E "launch|gpu__time|cycles_elapsed|inst_executed.sum|pipe_tensor" "$OUT/ncu_${v}_$s.out" | head -16
done; done
echo "total: $(el) s"
