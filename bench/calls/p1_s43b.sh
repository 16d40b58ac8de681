#!/usr/bin/env bash
# p1_s43b.sh — ONE GPU (session 43, call 2): p1_s43a.sh's correctness lines and counters again,
# compact (call 1's output beyond its last 12,000 characters and its 17+ files were lost):
# (A) test_gemm_fp8 (early scales, and MELD_GEMM_FP8_LATE=1), test_ag_gemm: all pass.
# (E) Nsight Compute at 8192 x 28672 x 4096 rowwise, one launch each of meld rowwise, torch fast
#     (cuBLASLt's nvjet or CUTLASS), torch accum, meld per tensor; early and late scales: counters
#     and meld's per-instruction stall samples. Prediction: early's epilogue samples (scale loads'
#     long scoreboard) gone; what separates meld from torch shows in the tensor-pipe and stall rows.
# Every output under $OUT ends in one archive (s43b.tgz).
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s43b.sh (carry: as p1_s43a.sh's)
. "$(dirname "$0")/../device_env.sh"
build lib build/tests/gpu/test_gemm_fp8 build/tests/gpu/test_ag_gemm
export MELD_TIMEOUT_MS=5000
for v in default late; do
  e=IP_ROW_NO_ENV=1; [ $v = late ] && e=MELD_GEMM_FP8_LATE=1
  env $e timeout -k 5 "$(tl 60)" build/tests/gpu/test_gemm_fp8 > "$OUT/test_gemm_fp8_$v.log" 2>&1
  echo "== (A) test_gemm_fp8 $v rc=$? at $(el) s"; grep -E "FAIL|checks|odd|5117|8191" "$OUT/test_gemm_fp8_$v.log" | cut -c1-120 | head -12
done
timeout -k 5 "$(tl 90)" build/tests/gpu/test_ag_gemm > "$OUT/test_ag_gemm.log" 2>&1
echo "== (A) test_ag_gemm rc=$? at $(el) s"; grep -E "FAIL|checks" "$OUT/test_ag_gemm.log" | cut -c1-160 | head -6
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
M=gpu__time_duration.sum,sm__cycles_elapsed.max,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_ltcfabric.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__inst_executed_pipe_tensor.sum,smsp__inst_executed.sum
for tn in default late; do
  e=IP_ROW_NO_ENV=1; [ $tn = late ] && e=MELD_GEMM_FP8_LATE=1; [ $tn = ppcl2 ] && e=$PP
  src="--section SourceCounters"
  env $e BENCH_SETTLE_MS=0 timeout -k 5 "$(tl 100)" "$NCU" --clock-control none -k regex:"gemm_kernel|nvjet|cutlass|xmma|device_kernel" \
    --launch-count 4 --section SpeedOfLight --section WarpStateStats --section LaunchStats $src \
    --metrics $M -o "$OUT/ncu_$tn" -f python3 bench/gemm_fp8_torch.py --rowwise --shapes 8192x28672x4096 --rounds 1 --calls 1 \
    > "$OUT/ncu_$tn.log" 2>&1
  echo "== (E) ncu $tn rc=$? at $(el) s"; grep -E "==ERR" "$OUT/ncu_$tn.log" | head -3
  "$NCU" -i "$OUT/ncu_$tn.ncu-rep" --page raw --csv > "$OUT/ncu_${tn}_raw.csv" 2>&1
  ids=$(python3 bench/ncu_raw_table.py "$OUT/ncu_${tn}_raw.csv")
  if [ -n "$src" ]; then for id in $ids; do
    "$NCU" -i "$OUT/ncu_$tn.ncu-rep" --page source --csv --print-source sass --launch-skip $id --launch-count 1 > "$OUT/src_${tn}_$id.csv" 2>&1
    echo "  -- stall samples, launch $id:"; python3 bench/ncu_top.py "$OUT/src_${tn}_$id.csv" 14 | cut -c1-150
    gzip -f "$OUT/src_${tn}_$id.csv"
  done; fi
  gzip -f "$OUT/ncu_${tn}_raw.csv"; rm -f "$OUT/ncu_$tn.ncu-rep"
done
cd "$OUT" && tar czf s43b.tgz --remove-files $(ls | grep -v s43b.tgz); ls -la "$OUT"
echo "== done at $(el) s"
