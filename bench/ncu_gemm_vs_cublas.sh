#!/usr/bin/env bash
# ncu_gemm_vs_cublas.sh — ONE GPU: Nsight Compute counters of cuBLASLt's kernel and meld_gemm's
# at one shape (default 2048 x 5120 x 8192, where cuBLASLt is ~12% faster sustained, session 8):
# launch configuration (grid, block, cluster, registers, shared memory) and the traffic that
# costs energy at the power cap. Clocks left alone. Usage (device): OUT=... [SHAPE=m,n,k]
# [ARGS="--only cl2" COUNT=5: meld default, then the variant, then cuBLASLt]
# [BIN=path: another bench_gemm build, nothing built] [KERNEL=regex of the kernels' names] bash ...
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
BIN=${BIN:-}
[ -n "$BIN" ] || { BIN=build/bench/bench_gemm; make -j16 lib $BIN > "$OUT/build.log" 2>&1 || { tail -5 "$OUT/build.log"; exit 1; }; }
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
M=gpu__time_duration.sum,sm__cycles_elapsed.max,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_ltcfabric.sum,smsp__inst_executed.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,sm__inst_executed_pipe_tensor.sum
timeout -k 5 200 "$NCU" --clock-control none -k regex:"${KERNEL:-nvjet|sm90|cutlass|gemm_kernel|xmma}" --launch-count ${COUNT:-4} \
  --section LaunchStats --metrics $M -o "$OUT/gemm_cmp" -f "$BIN" --custom-only --shape ${SHAPE:-2048,5120,8192} --rounds 1 ${ARGS:-} \
  > "$OUT/ncu.log" 2>&1
echo "ncu rc=$?"; grep -E "==ERR|error" "$OUT/ncu.log" | head -3
"$NCU" -i "$OUT/gemm_cmp.ncu-rep" --page details --csv > "$OUT/details.csv" 2>&1
rm -f "$OUT/gemm_cmp.ncu-rep"
python3 - "$OUT/details.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
hdr = rows[0]
ki, ni, vi, ii = hdr.index("Kernel Name"), hdr.index("Metric Name"), hdr.index("Metric Value"), hdr.index("ID")
want = ("Grid Size", "Block Size", "Cluster Size", "Registers Per Thread", "Dynamic Shared Memory Per Block",
        "gpu__time_duration.sum", "sm__cycles_elapsed.max", "dram__bytes_read.sum", "dram__bytes_write.sum",
        "lts__t_sectors_srcunit_tex_op_read.sum", "lts__t_sectors_srcunit_ltcfabric.sum", "smsp__inst_executed.sum",
        "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum", "sm__inst_executed_pipe_tensor.sum")
seen = {}
for r in rows[1:]:
    if len(r) <= max(ki, ni, vi) or r[ni] not in want: continue
    seen.setdefault((r[ii], r[ki][:70]), {})[r[ni]] = r[vi]
for (i, k), m in seen.items():
    print(f"launch {i}: {k}")
    for w in want:
        if w in m: print(f"    {w:50s} {m[w]}")
PY
