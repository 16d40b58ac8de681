#!/usr/bin/env bash
# p1_s42b.sh — ONE GPU: the ping-pong tile in 2x1 clusters with B multicast (session 42, call 2).
# Call 1: the single-CTA ping-pong tile was correct but 6-9% slower (fp8) than 128 x 256; the
# arithmetic says its L2 feed (7.8e-3 B/FLOP, 8.7 TB/s at its rate) is the limit. In pairs each
# CTA loads 64 of B's 128 rows and multicasts them: 24 KB a k-block per CTA, torch's ratio.
# (A) test_gemm_fp8 with MELD_GEMM_TILE_N=128 MELD_GEMM_CLUSTER_EXPERIMENTAL=1: every legal case
#     (and the forced ping-pong cases) in pairs: prediction all pass.
# (B) gemm_fp8_torch.py --rowwise: 128 x 256 default vs ping-pong pairs (same env as A), each vs
#     torch in its process. Prediction: pairs 0.97-1.03x torch's rowwise kernel per tensor (its
#     own shape: 128 x 128 ping-pong in 2x1 clusters), 1.03-1.08x faster than 128 x 256.
# (C) bench_gemm bf16 default / cl2 / pp / ppcl2 (interleaved): prediction ppcl2 1.00-1.04x.
# (D) test_gemm with MELD_GEMM_CLUSTER_EXPERIMENTAL=1 (the forced ping-pong cases, single and in
#     pairs, and every other case): all pass.
# Usage (device, nvidia-h200): OUT=... PREBUILT=1 bash bench/calls/p1_s42b.sh (carry build/carry:
#   bench/pack_bins.sh build/lib/libmeld.so build/tests/gpu/test_gemm_fp8 build/tests/gpu/test_gemm
#   build/bench/bench_gemm)
# Estimated wall: (A) 20 s, (B) 35 s, (C) 50 s, (E) 90 s, (D) 150 s.
. "$(dirname "$0")/../device_env.sh"
build lib build/tests/gpu/test_gemm_fp8 build/tests/gpu/test_gemm build/bench/bench_gemm
export MELD_TIMEOUT_MS=5000
PP="MELD_GEMM_TILE_N=128 MELD_GEMM_CLUSTER_EXPERIMENTAL=1"
env $PP timeout -k 5 "$(tl 60)" build/tests/gpu/test_gemm_fp8 > "$OUT/test_gemm_fp8_ppcl2.log" 2>&1
echo "== (A) test_gemm_fp8 ping-pong pairs rc=$? at $(el) s"; grep -E "FAIL|checks" "$OUT/test_gemm_fp8_ppcl2.log" | cut -c1-160 | head -8
SH=8192x8192x8192,8192x28672x4096,2048x5120x8192,4096x4096x4096
for tn in default ppcl2; do
  e=IP_ROW_NO_ENV=1; [ $tn = ppcl2 ] && e=$PP
  env $e BENCH_SETTLE_MS=300 timeout -k 5 "$(tl 60)" python3 bench/gemm_fp8_torch.py --rowwise --shapes $SH \
    --json "$OUT/gemm_fp8_rowwise_$tn.jsonl" > "$OUT/gemm_fp8_rowwise_$tn.log" 2>&1
  echo "== (B) gemm_fp8_torch --rowwise $tn rc=$? at $(el) s"; grep -E "meld|fast " "$OUT/gemm_fp8_rowwise_$tn.log" | head -12
done
MELD_GEMM_CLUSTER_EXPERIMENTAL=1 timeout -k 5 "$(tl 90)" build/bench/bench_gemm --variants --only default,cl2,pp,ppcl2 --custom-only \
  --shape 8192,8192,8192 --shape 8192,28672,4096 --shape 2048,5120,8192 --json "$OUT/bench_gemm_ppcl2.jsonl" > "$OUT/bench_gemm_ppcl2.log" 2>&1
echo "== (C) bench_gemm bf16 rc=$? at $(el) s"; grep -E "^custom|geomean" "$OUT/bench_gemm_ppcl2.log" | cut -c1-150 | head -14
# (E) Nsight Compute, one launch each of meld rowwise / torch fast / torch accum / meld per tensor
#     at 8192 x 28672 x 4096 (clocks left alone) under the three tiles: L2->SM sectors, DRAM bytes,
#     tensor pipe, warp stalls; for 128 x 256 also the per-instruction stall samples of meld's
#     rowwise and per-tensor launches (bench/ncu_top.py: where rowwise's +4-6% goes).
#     Prediction: 128 x 128 single pulls ~1.33x the L2 sectors of 128 x 256; pairs ~1.0x; torch's
#     rowwise kernel ~ the pairs'; rowwise's extra samples sit on the scale loads' waits.
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
M=gpu__time_duration.sum,sm__cycles_elapsed.max,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_ltcfabric.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__inst_executed_pipe_tensor.sum,smsp__inst_executed.sum
for tn in default pp ppcl2; do
  e=IP_ROW_NO_ENV=1; [ $tn = pp ] && e=MELD_GEMM_TILE_N=128; [ $tn = ppcl2 ] && e=$PP
  src=; [ $tn = default ] && src="--section SourceCounters"
  env $e BENCH_SETTLE_MS=0 timeout -k 5 "$(tl 100)" "$NCU" --clock-control none -k regex:"gemm_kernel|cutlass|sm90_xmma|device_kernel" \
    --launch-count 6 --section SpeedOfLight --section WarpStateStats --section LaunchStats $src \
    --metrics $M -o "$OUT/ncu_$tn" -f python3 bench/gemm_fp8_torch.py --rowwise --shapes 8192x28672x4096 --rounds 1 --calls 1 \
    > "$OUT/ncu_$tn.log" 2>&1
  echo "== (E) ncu $tn rc=$? at $(el) s"; grep -E "==ERR" "$OUT/ncu_$tn.log" | head -3
  "$NCU" -i "$OUT/ncu_$tn.ncu-rep" --page raw --csv > "$OUT/ncu_${tn}_raw.csv" 2>&1
  ids=$(python3 - "$OUT/ncu_${tn}_raw.csv" <<'PY'
import csv, sys
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
for n, r in enumerate(data):
    print(f"  [{n}] {r[ki][:100]}", file=sys.stderr)
    for i, m in enumerate(h):
        v = num(r[i])
        if m in keep or ("issue_stalled" in m and v and v > (2 if m.endswith("pct") else 0.1)):
            print(f"      {m[:78]:78s} {r[i]}", file=sys.stderr)
    if "gemm_kernel" in r[ki]: print(n)
PY
)
  if [ -n "$src" ]; then for id in $ids; do
    "$NCU" -i "$OUT/ncu_$tn.ncu-rep" --page source --csv --print-source sass --launch-skip $id --launch-count 1 > "$OUT/src_$id.csv" 2>&1
    echo "  -- stall samples, launch $id:"; python3 bench/ncu_top.py "$OUT/src_$id.csv" 14 | cut -c1-170
    gzip -f "$OUT/src_$id.csv"
  done; fi
  gzip -f "$OUT/ncu_${tn}_raw.csv"; rm -f "$OUT/ncu_$tn.ncu-rep"
done
MELD_GEMM_CLUSTER_EXPERIMENTAL=1 timeout -k 5 "$(tl 240)" build/tests/gpu/test_gemm > "$OUT/test_gemm_cl.log" 2>&1
echo "== (D) test_gemm (clusters on) rc=$? at $(el) s"; grep -E "FAIL|checks" "$OUT/test_gemm_cl.log" | cut -c1-160 | head -8
echo "== done at $(el) s"
