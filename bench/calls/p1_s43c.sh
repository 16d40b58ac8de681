#!/usr/bin/env bash
# p1_s43c.sh — ONE GPU (session 43, call 3). (A) test_inproc 2,3: the fused fp8 kernels (the
# AllGather's 128 x 256 consumers now load the scales before the last wgmma wait; GEMM+RS's use
# the shuffle spread after it): all pass. (E) why the ping-pong tile loses: call 1 measured it
# (2x1 pairs, fp8 8192 x 28672 x 4096 rowwise, under ncu) at 1.47 ms vs 1.32 for 128 x 256 and
# 1.23 for cuBLASLt's nvjet 128x128x128, 6 stages, 1x2 cluster (tensor pipe 97% busy vs meld's
# 85%), with the same L2 sectors, so not its L2 feed. Per-instruction stall samples of the
# ping-pong kernel, single and in pairs (bench/ncu_groups.py: samples by region). Prediction: the
# per-k-block region carries most samples, on the turn or full-barrier waits.
# Every output ends in one archive (s43c.tgz).
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s43c.sh (carry: bench/pack_bins.sh
#   build/lib/libmeld.so build/tests/gpu/test_inproc)
. "$(dirname "$0")/../device_env.sh"
build lib build/tests/gpu/test_inproc
export MELD_TIMEOUT_MS=5000
timeout -k 5 "$(tl 120)" build/tests/gpu/test_inproc 2,3 > "$OUT/test_inproc.log" 2>&1
echo "== (A) test_inproc 2,3 rc=$? at $(el) s"; grep -E "FAIL|checks" "$OUT/test_inproc.log" | cut -c1-160 | head -8
grep -E "fp8" "$OUT/test_inproc.log" | cut -c1-150 | head -6
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for v in pp ppcl2; do
  e=MELD_GEMM_TILE_N=128; [ $v = ppcl2 ] && e="MELD_GEMM_TILE_N=128 MELD_GEMM_CLUSTER_EXPERIMENTAL=1"
  env $e BENCH_SETTLE_MS=0 timeout -k 5 "$(tl 100)" "$NCU" --clock-control none -k regex:gemm_kernel --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SourceCounters -o "$OUT/ncu_$v" -f \
    python3 bench/gemm_fp8_torch.py --rowwise --shapes 8192x28672x4096 --rounds 1 --calls 1 > "$OUT/ncu_$v.log" 2>&1
  echo "== (E) ncu $v rc=$? at $(el) s"; grep -E "==ERR" "$OUT/ncu_$v.log" | head -3
  "$NCU" -i "$OUT/ncu_$v.ncu-rep" --page source --csv --print-source sass > "$OUT/src_$v.csv" 2>&1
  "$NCU" -i "$OUT/ncu_$v.ncu-rep" --page details --csv > "$OUT/details_$v.csv" 2>&1
  grep -E "Duration|Elapsed Cycles|Compute \(SM\) Throughput|Warp Cycles Per Issued" "$OUT/details_$v.csv" | cut -d, -f12- | head -5
  python3 bench/ncu_groups.py "$OUT/src_$v.csv" 8 | cut -c1-140
  gzip -f "$OUT/src_$v.csv"; rm -f "$OUT/ncu_$v.ncu-rep"
done
cd "$OUT" && tar czf s43c.tgz --remove-files $(ls | grep -v s43c.tgz); ls -la "$OUT"
echo "== done at $(el) s"
