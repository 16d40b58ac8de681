#!/usr/bin/env bash
# p1_s43a.sh — ONE GPU (session 43, call 1): the fp8 rowwise epilogue's scales, and the ping-pong
# tile in B-multicast pairs (session 42's p1_s42b.sh, which found no machine; it is this script now).
# New: the column scales of a tile are spread over the warp (BN / 32 registers a lane, 8-byte
# loads) and read by shuffle; the 128 x 256 kernels (stand-alone and AllGather's) load them
# before the mainloop's last wgmma wait (gemm_fp8_early). MELD_GEMM_FP8_LATE=1: after it.
# (A) test_gemm_fp8 as is, with MELD_GEMM_FP8_LATE=1, and in ping-pong pairs: all pass (new
#     cases: n odd, scale_b not 8-byte aligned). test_ag_gemm (its fp8 kernels load early too).
# (B) gemm_fp8_torch.py --rowwise: default, LATE=1, ping-pong pairs. Prediction: meld rowwise
#     within 1.5% of meld per tensor (was +3.7-5.8%), LATE=1 between; pairs 0.97-1.03x torch.
# (C) bench_gemm bf16 default / cl2 / pp / ppcl2: prediction ppcl2 1.00-1.04x default.
# (E) Nsight Compute counters (see below).
# (D) test_gemm with MELD_GEMM_CLUSTER_EXPERIMENTAL=1 (bf16 ping-pong cases, single and pairs).
# Usage (device, nvidia-h200): OUT=... PREBUILT=1 bash bench/calls/p1_s43a.sh (carry build/carry:
#   bench/pack_bins.sh build/lib/libmeld.so build/tests/gpu/test_gemm_fp8 build/tests/gpu/test_gemm
#   build/tests/gpu/test_ag_gemm build/bench/bench_gemm)
# Estimated wall: (A) 60 s, (B) 105 s, (C) 50 s, (E) 150 s, (D) 150 s (cut by DEADLINE).
. "$(dirname "$0")/../device_env.sh"
build lib build/tests/gpu/test_gemm_fp8 build/tests/gpu/test_gemm build/tests/gpu/test_ag_gemm build/bench/bench_gemm
export MELD_TIMEOUT_MS=5000
PP="MELD_GEMM_TILE_N=128 MELD_GEMM_CLUSTER_EXPERIMENTAL=1"
for v in default late ppcl2; do
  e=IP_ROW_NO_ENV=1; [ $v = late ] && e=MELD_GEMM_FP8_LATE=1; [ $v = ppcl2 ] && e=$PP
  env $e timeout -k 5 "$(tl 60)" build/tests/gpu/test_gemm_fp8 > "$OUT/test_gemm_fp8_$v.log" 2>&1
  echo "== (A) test_gemm_fp8 $v rc=$? at $(el) s"; grep -E "FAIL|checks" "$OUT/test_gemm_fp8_$v.log" | cut -c1-160 | head -6
done
timeout -k 5 "$(tl 90)" build/tests/gpu/test_ag_gemm > "$OUT/test_ag_gemm.log" 2>&1
echo "== (A) test_ag_gemm rc=$? at $(el) s"; grep -E "FAIL|checks" "$OUT/test_ag_gemm.log" | cut -c1-160 | head -6
SH=8192x8192x8192,8192x28672x4096,2048x5120x8192,4096x4096x4096
for v in default late ppcl2; do
  e=IP_ROW_NO_ENV=1; [ $v = late ] && e=MELD_GEMM_FP8_LATE=1; [ $v = ppcl2 ] && e=$PP
  env $e BENCH_SETTLE_MS=300 timeout -k 5 "$(tl 60)" python3 bench/gemm_fp8_torch.py --rowwise --shapes $SH \
    --json "$OUT/gemm_fp8_rowwise_$v.jsonl" > "$OUT/gemm_fp8_rowwise_$v.log" 2>&1
  echo "== (B) gemm_fp8_torch --rowwise $v rc=$? at $(el) s"; grep -E "meld|fast " "$OUT/gemm_fp8_rowwise_$v.log" | head -12
done
MELD_GEMM_CLUSTER_EXPERIMENTAL=1 timeout -k 5 "$(tl 90)" build/bench/bench_gemm --variants --only default,cl2,pp,ppcl2 --custom-only \
  --shape 8192,8192,8192 --shape 8192,28672,4096 --shape 2048,5120,8192 --json "$OUT/bench_gemm_ppcl2.jsonl" > "$OUT/bench_gemm_ppcl2.log" 2>&1
echo "== (C) bench_gemm bf16 rc=$? at $(el) s"; grep -E "^custom|geomean" "$OUT/bench_gemm_ppcl2.log" | cut -c1-150 | head -14
# (E) Nsight Compute, one launch each of meld rowwise / torch fast / torch accum / meld per tensor
#     at 8192 x 28672 x 4096 (clocks left alone): 128 x 256 (scales early), the same late, the
#     ping-pong pairs: L2->SM sectors, DRAM bytes, tensor pipe, warp stalls; for 128 x 256 also
#     the per-instruction stall samples of meld's rowwise and per-tensor launches
#     (bench/ncu_top.py). Prediction: pairs' L2 sectors ~ 128 x 256's; torch's rowwise kernel
#     ~ the pairs'; late rowwise's extra samples on the scale loads' waits, early's not.
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
M=gpu__time_duration.sum,sm__cycles_elapsed.max,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_ltcfabric.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__inst_executed_pipe_tensor.sum,smsp__inst_executed.sum
for tn in default late ppcl2; do
  e=IP_ROW_NO_ENV=1; [ $tn = late ] && e=MELD_GEMM_FP8_LATE=1; [ $tn = ppcl2 ] && e=$PP
  src=; [ $tn != ppcl2 ] && src="--section SourceCounters"
  env $e BENCH_SETTLE_MS=0 timeout -k 5 "$(tl 100)" "$NCU" --clock-control none -k regex:"gemm_kernel|cutlass|sm90_xmma|device_kernel" \
    --launch-count 6 --section SpeedOfLight --section WarpStateStats --section LaunchStats $src \
    --metrics $M -o "$OUT/ncu_$tn" -f python3 bench/gemm_fp8_torch.py --rowwise --shapes 8192x28672x4096 --rounds 1 --calls 1 \
    > "$OUT/ncu_$tn.log" 2>&1
  echo "== (E) ncu $tn rc=$? at $(el) s"; grep -E "==ERR" "$OUT/ncu_$tn.log" | head -3
  "$NCU" -i "$OUT/ncu_$tn.ncu-rep" --page raw --csv > "$OUT/ncu_${tn}_raw.csv" 2>&1
  ids=$(python3 bench/ncu_raw_table.py "$OUT/ncu_${tn}_raw.csv")
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
