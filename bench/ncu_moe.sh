#!/usr/bin/env bash
# ncu_moe.sh — ONE GPU: Nsight Compute counters of one MoE GEMM kernel per case (clocks left
# alone): time, SM clock (elapsed cycles / time), DRAM bytes, L2 read sectors and hit rate,
# tensor instructions. A case is "LABEL;ENV;VARIANTS;KERNEL_REGEX;SKIP": bench_moe --ranks 1 on
# BENCH_MOE_ROWS (default dsv3-32e-even; ENV may set it) with ENV ("VAR=VAL ..." or -) and BENCH_MOE_VARIANTS,
# the kernel launch SKIP + 1 of those matching the regex profiled.
# Usage (device): OUT=... ROWS=... bash bench/ncu_moe.sh 'case' 'case' ...
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
M=gpu__time_duration.sum,sm__cycles_elapsed.max,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,sm__inst_executed_pipe_tensor.sum
printf "%-28s %9s %7s %8s %8s %9s %6s %10s\n" case us GHz dramR_GB dramW_GB L2rd_Msec hit% tensor_M
for c in "$@"; do
  IFS=';' read -r label env vars kre skip <<< "$c"
  [ "$env" = - ] && env=NCU_MOE_NO_ENV=1
  env BENCH_SETTLE_MS=0 BENCH_MOE_ROWS="${ROWS:-dsv3-32e-even}" BENCH_MOE_VARIANTS="$vars" $env timeout -k 5 120 "$NCU" \
    --clock-control none -k regex:"$kre" --launch-skip "$skip" --launch-count 1 --metrics $M --csv --page raw \
    build/bench/bench_moe --ranks 1 --calls 1 --samples 1 > "$OUT/ncu_$label.csv" 2> "$OUT/ncu_$label.err"
  python3 - "$OUT/ncu_$label.csv" "$label" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if r]
i = next((j for j, r in enumerate(rows) if "Kernel Name" in r), None)
if i is None or len(rows) < i + 3: print(f"{sys.argv[2]:28s} no kernel profiled"); sys.exit()
h = rows[i]; r = rows[i + 2]; m = dict(zip(h, r))
f = lambda k: float(m[k].replace(",", ""))
t = f("gpu__time_duration.sum") / 1e3  # ns -> us
print(f"{sys.argv[2]:28s} {t:9.1f} {f('sm__cycles_elapsed.max') / t / 1e3:7.3f} {f('dram__bytes_read.sum') / 1e9:8.3f} "
      f"{f('dram__bytes_write.sum') / 1e9:8.3f} {f('lts__t_sectors_srcunit_tex_op_read.sum') / 1e6:9.1f} "
      f"{100 * f('lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum') / max(1, f('lts__t_sectors_srcunit_tex_op_read.sum')):6.1f} "
      f"{f('sm__inst_executed_pipe_tensor.sum') / 1e6:10.3f}  [{m.get('Kernel Name', '')[:40]}]")
PY
done
