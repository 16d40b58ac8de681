"""ncu_raw_table.py RAW.csv [NAME_RE] — an Nsight Compute raw page (ncu -i R --page raw --csv) as one
table: a column per profiled launch, a row per chosen counter (time, cycles, L2 and DRAM
traffic, tensor-pipe and all instructions, launch shape, throughput, and every warp-stall
reason above 0.2 per issue in some launch), printed to stderr; prints to stdout the indices of
the launches whose kernel name matches NAME_RE (default gemm_kernel), for the source-page
dumps that follow (bench/calls/p1_s43b.sh)."""
import csv
import re
import sys

rows = list(csv.reader(open(sys.argv[1])))
h = next((r for r in rows if "Kernel Name" in r), None)
if not h: print("  no csv", file=sys.stderr); sys.exit()
data = [r for r in rows[rows.index(h) + 2:] if len(r) == len(h)]
ki = h.index("Kernel Name")
def num(x):
    try: return float(x.replace(",", ""))
    except ValueError: return None
keep = ("gpu__time_duration.sum", "sm__cycles_elapsed.max", "lts__t_sectors_srcunit_tex_op_read.sum",
        "lts__t_sectors_srcunit_ltcfabric.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
        "sm__inst_executed_pipe_tensor.sum", "smsp__inst_executed.sum", "launch__cluster_dim_x",
        "launch__grid_size", "launch__registers_per_thread", "smsp__issue_active.avg.pct_of_peak_sustained_active",
        "sm__throughput.avg.pct_of_peak_sustained_elapsed", "smsp__average_warp_latency_per_inst_issued.ratio")
sel = [i for i, m in enumerate(h) if m in keep or ("issue_stalled" in m and m.endswith("per_issue_active.ratio")
                                                      and any((num(r[i]) or 0) > 0.2 for r in data))]
print("  kernels: " + " | ".join(f"[{n}] {r[ki][:48]}" for n, r in enumerate(data)), file=sys.stderr)
for i in sel:
    m = h[i].replace("smsp__average_warps_issue_stalled_", "stall_").replace("_per_issue_active.ratio", "")
    print(f"  {m[:52]:52s}" + "".join(f"{r[i][:14]:>15s}" for r in data), file=sys.stderr)
pat = re.compile(sys.argv[2] if len(sys.argv) > 2 else "gemm_kernel")
for n, r in enumerate(data):
    if pat.search(r[ki]): print(n)
