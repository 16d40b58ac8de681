#!/usr/bin/env bash
# p1_s13b.sh — ONE GPU, session 13 call 2: is the fused AG+GEMM kernel with nothing to gather
# (fused_p1) slower than meld_gemm on the same plan? Call 1 measured it 2.7% slower sustained
# at 8192 x 10240 x 8192, but there meld_gemm takes stream-K over the partial wave (2560 tiles,
# 19.4 waves; 52 tiles in the last) and the fused kernel does not: one tile of 103 us x 0.6 =
# ~60 us, the burst gap. At 8192 x 5120 x 8192 (the 2-GPU shape per rank; 9.7 waves, stream-K
# off in both) the two plans are the same. Nsight Compute, one launch of each (clocks left
# alone): cycles, DRAM and L2 traffic, instructions. Then the sustained bench at that shape.
# VARIANTS (ncu), EXTRA_MET (metrics, each followed by a comma), ROWS (soak rows printed): see p1_s13c.sh.
# Usage (device): OUT=... bash bench/calls/p1_s13b.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/bench/bench_ag_gemm
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
MET=${EXTRA_MET:-}gpu__time_duration.sum,sm__cycles_elapsed.max,sm__cycles_active.avg,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum,lts__t_sectors_srcunit_ltcfabric.sum,smsp__inst_executed.sum,launch__registers_per_thread,launch__grid_size,smsp__inst_executed_pipe_tensor.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,smsp__cycles_active.avg
S=${SHAPE:-8192,5120,8192}
for v in ${VARIANTS:-meld_gemm fused_p1 fused_p1_static loopback_p1 fused_p1_w320}; do
  timeout -k 5 120 "$NCU" --clock-control none -k regex:gemm --launch-skip 1 --launch-count 1 --metrics $MET --csv \
    build/bench/bench_ag_gemm --shape $S --run $v > "$OUT/ncu_$v.log" 2>&1
  echo "ncu $v rc=$? at $(el) s"
done
/usr/bin/env python3 - "$OUT" <<'PY'
import csv, glob, io, os, sys
out = sys.argv[1]
rows = {}
for f in sorted(glob.glob(out + "/ncu_*.log")):
    v = os.path.basename(f)[4:-4]
    txt = open(f).read()
    i = txt.find('"ID"')
    if i < 0: print(v, "no csv"); continue
    for r in csv.DictReader(io.StringIO(txt[i:])):
        rows.setdefault(v, {})[r["Metric Name"]] = (r["Metric Value"], r["Metric Unit"], r["Kernel Name"][:40])
names = sorted({m for d in rows.values() for m in d})
print("%-50s" % "metric" + "".join("%18s" % v[:17] for v in rows))
for m in names:
    print("%-50s" % m[:50] + "".join("%18s" % (rows[v].get(m, ("-",))[0]) for v in rows))
print("kernels:", {v: list(d.values())[0][2] for v, d in rows.items()})
PY
timeout -k 5 200 build/bench/bench_ag_gemm --shape $S --soak ${SOAK:-600} --json "$OUT/ag_gemm-p1-${S//,/x}.jsonl" > "$OUT/ag-${S//,/x}.log" 2>&1
echo "bench_ag_gemm $S rc=$? at $(el) s"; grep -E "soak ag_gemm" "$OUT/ag-${S//,/x}.log" | grep -E "${ROWS:- default | meld_gemm | fused_p1 | fused_p1_static | fused_p1_sk_p0 | loopback_p1 | cublas }" | cut -c1-150
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
