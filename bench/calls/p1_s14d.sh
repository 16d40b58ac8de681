#!/usr/bin/env bash
# p1_s14d.sh — ONE GPU, session 14 call 4: why the lean hook g kernel is faster (call 2-3:
# loopback 0.8718 vs 0.8891 ms sustained, RS 8192^2 x 4096). Nsight Compute, one loopback launch
# each of the lean kernel (default) and the general one (MELD_GEMM_RS_LEAN=0): cycles, executed
# instructions, warp stall reasons (no_instruction = instruction-cache misses, branch_resolving).
# Prediction (before the run): same executed instructions within 2%, fewer no_instruction stalls
# in the lean kernel, cycles -1..2%.
# Usage (device): OUT=... bash bench/calls/p1_s14d.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/bench/bench_gemm_rs
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for l in 1 0; do
  MELD_GEMM_RS_DIAG=1024 MELD_GEMM_RS_LEAN=$l timeout -k 5 150 "$NCU" --clock-control none -k regex:gemm_rs_kernel \
    --launch-skip 1 --launch-count 1 --section WarpStateStats --section SpeedOfLight --section InstructionStats \
    --section SchedulerStats --section LaunchStats -o "$OUT/rs_lean$l" -f \
    build/bench/bench_gemm_rs --op rs --shape 8192,8192,4096 --quick > "$OUT/ncu_lean$l.log" 2>&1
  echo "ncu lean $l rc=$? at $(el) s"
  "$NCU" -i "$OUT/rs_lean$l.ncu-rep" --page details > "$OUT/details_lean$l.log" 2>&1
  "$NCU" -i "$OUT/rs_lean$l.ncu-rep" --page raw --csv > "$OUT/raw_lean$l.csv" 2>&1
  grep -E "gemm_rs_kernel|Elapsed Cycles|Executed Instructions  |Warp Cycles Per Issued|No Eligible|Issued Warp Per" "$OUT/details_lean$l.log" | cut -c1-110 | head -9
  /usr/bin/python3 - "$OUT/raw_lean$l.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
hdr = next(i for i, r in enumerate(rows) if r and r[0] == "ID")
h, v = rows[hdr], rows[hdr + 2]
for k, x in zip(h, v):
    if "warp_latency_issue_stalled" in k and k.endswith(".ratio") or k in ("sm__cycles_elapsed.max", "smsp__inst_executed.sum"):
        try:
            if float(x.replace(",", "")) >= 0.05: print(f"  {k} {x}")
        except ValueError: pass
PY
  gzip -f "$OUT/raw_lean$l.csv"; rm -f "$OUT/rs_lean$l.ncu-rep"
done
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
