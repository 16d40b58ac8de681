#!/usr/bin/env bash
# p1_cluster2.sh — ONE GPU, session 9: where the 2x1 cluster GEMM's 0.53-0.58x comes from.
# MELD_GEMM_CLUSTER_EXPERIMENTAL=1 (B multicast) vs =2 (the same pairs and launch, each CTA
# loading all of B): test_gemm's cluster cases under =2, bench rows dp / cl2 under both, and the
# cl2 kernel's counters under both. Usage (device): OUT=... bash bench/calls/p1_cluster2.sh
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
make -j16 lib build/tests/gpu/test_gemm build/bench/bench_gemm > "$OUT/build.log" 2>&1 || { grep -E "error" "$OUT/build.log" | head; exit 1; }
echo "build: $(el) s"
MELD_GEMM_CLUSTER_EXPERIMENTAL=2 MELD_TIMEOUT_MS=3000 timeout -k 5 120 build/tests/gpu/test_gemm > "$OUT/test_gemm_nomc.log" 2>&1
echo "test_gemm (=2) rc=$? at $(el) s"; grep -E "FAIL|checks passed" "$OUT/test_gemm_nomc.log" | head -5
for e in 1 2; do
  MELD_GEMM_CLUSTER_EXPERIMENTAL=$e timeout -k 5 60 build/bench/bench_gemm --custom-only --shape 2048,5120,8192 \
    --shape 8192,8192,4096 --only dp,cl2 > "$OUT/bench$e.log" 2>&1
  echo "bench (=$e) rc=$? at $(el) s"; grep -E "^custom" "$OUT/bench$e.log" | cut -c1-150
done
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
M=gpu__time_duration.sum,sm__cycles_elapsed.max,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_requests_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_ltcfabric.sum,smsp__inst_executed.sum,sm__inst_executed_pipe_tensor.sum
for e in 1 2; do
  MELD_GEMM_CLUSTER_EXPERIMENTAL=$e timeout -k 5 100 "$NCU" --clock-control none -k regex:gemm_kernel --launch-skip 3 --launch-count 1 \
    --section WarpStateStats --section LaunchStats --metrics $M -o "$OUT/cl$e" -f build/bench/bench_gemm --custom-only \
    --shape 2048,5120,8192 --rounds 1 --only cl2 > "$OUT/ncu$e.log" 2>&1
  echo "ncu (=$e) rc=$? at $(el) s"
  "$NCU" -i "$OUT/cl$e.ncu-rep" --page details --csv > "$OUT/cl$e.csv" 2>&1; rm -f "$OUT/cl$e.ncu-rep"
  python3 - "$OUT/cl$e.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
h = rows[0]; ni, vi = h.index("Metric Name"), h.index("Metric Value")
for r in rows[1:]:
    if len(r) > vi and (r[ni].startswith(("gpu__", "sm__", "lts__", "smsp__inst")) or "Stall" in r[ni] or r[ni] in ("Cluster Size", "Grid Size", "Warp Cycles Per Issued Instruction")):
        print(f"  {r[ni][:60]:60s} {r[vi]}")
PY
done
echo "total: $(el) s"
