#!/usr/bin/env bash
# p1_s33a.sh — ONE GPU, session 33, call 1: (1) session 32's CPU-only mends (test_moe 1,2,4,8:
# the ffn with sends forced + no deferred epilogue; the shared second-GEMM plan); (2) where the
# grouped GEMM loses to a cuBLAS loop at ~1024 rows an expert (0.85-0.91x meld's time): the same
# work as ONE dense meld_gemm ("dense"), a row with exactly 1024 rows an expert (no padding:
# dsv3-32e-even), the raster group and the deferred epilogue as A/B; (3) ncu counters of the
# grouped kernel (nocopy) and the dense one at the even row.
# Prediction: tests pass; dense ~0.87-0.9x nocopy's time (dense meld = cuBLAS at 8192 x 4096 x
# 7168); the even row ~6% faster than the random one (padding 1088 vs 1024 rows an expert).
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_moe build/bench/bench_moe
export MELD_TIMEOUT_MS=5000
test_ranks build/tests/gpu/test_moe 1 2 4 8
BENCH_MOE_ROWS="dsv3-32e T4096,dsv3-32e-even,mixtral" BENCH_MOE_VARIANTS=fused,nocopy,cublas-loop,meld-loop,dense \
  BENCH_MOE_AB=MELD_MOE_GROUP_M=8,MELD_MOE_GROUP_M=32,MELD_MOE_GROUP_M=64,MELD_MOE_DEFER=0 moe_rows 3
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
M=gpu__time_duration.sum,sm__cycles_elapsed.max,sm__cycles_active.avg,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,smsp__inst_executed.sum,sm__inst_executed_pipe_tensor.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active
for k in moe_kernel gemm_kernel; do
  BENCH_SETTLE_MS=0 BENCH_MOE_ROWS=dsv3-32e-even BENCH_MOE_VARIANTS=dense timeout -k 5 150 "$NCU" --clock-control none \
    -k regex:$k --launch-skip 3 --launch-count 1 --metrics $M --csv --page raw \
    build/bench/bench_moe --ranks 1 --calls 1 --samples 1 > "$OUT/ncu_$k.csv" 2> "$OUT/ncu_$k.err"
  echo "== ncu $k rc=$? at $(el) s"
  python3 - "$OUT/ncu_$k.csv" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if r]
i = next((j for j, r in enumerate(rows) if "Kernel Name" in r), None)
if i is None: print("  no ncu table"); sys.exit()
h = rows[i]
for r in rows[i + 2:]:
    if len(r) != len(h): continue
    for c, v in zip(h, r):
        if c in ("Kernel Name",) or "__" in c: print(f"  {c[:60]:60s} {v[:70]}")
PY
done
echo "== done at $(el) s"
