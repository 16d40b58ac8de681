#!/usr/bin/env bash
# p1_s13b.sh — ONE GPU, session 13 call 2: why is the fused AG+GEMM kernel with nothing to
# gather (fused_p1) 2-3% slower than meld_gemm sustained at 8192 x 10240 x 8192 (call 1: 2.077
# vs 2.008-2.024 ms, at 1402 vs 1431-1448 MHz for the same ~690 W: more energy per tile)?
# Nsight Compute, one launch of each (clocks left alone): cycles, DRAM and L2 traffic,
# instructions, registers. Same for the GEMM+RS fused kernel at one rank vs meld_gemm.
# Usage (device): OUT=... bash bench/calls/p1_s13b.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/bench/bench_ag_gemm
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
MET=gpu__time_duration.sum,sm__cycles_elapsed.max,sm__cycles_active.avg,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum,lts__t_sectors_srcunit_ltcfabric.sum,smsp__inst_executed.sum,launch__registers_per_thread,launch__grid_size,smsp__inst_executed_pipe_tensor.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,smsp__cycles_active.avg
S=${SHAPE:-8192,10240,8192}
for v in meld_gemm fused_p1 fused_p1_static loopback_p1 fused_p1_w320; do
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
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
