#!/usr/bin/env bash
# p1_s8d.sh — ONE GPU: does the fused kernel's worker numbering (arrival ticket vs block index)
# explain its bare GEMM's cost over meld_gemm? test_comm (registration, after a refactor), then
# GEMM+RS 8192^2 x 4096 --diag --soak (rows with diag bit 12), then Nsight Compute counters of
# meld_gemm and the bare / loopback fused kernels with both numberings (L2 sectors by source).
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/bench/bench_gemm_rs build/tests/gpu/test_comm
MELD_TIMEOUT_MS=3000 timeout -k 5 60 build/tests/gpu/test_comm > "$OUT/test_comm.log" 2>&1
echo "test_comm rc=$? at $(el) s"; grep -E "register|checks passed|FAIL" "$OUT/test_comm.log" | head -5
timeout -k 5 200 build/bench/bench_gemm_rs --op rs --shape 8192,8192,4096 --diag --soak ${SOAK:-700} \
  --json "$OUT/gemm_rs-soak-d.jsonl" > "$OUT/bench_rs.log" 2>&1
echo "bench rc=$? at $(el) s"; grep -E "soak|^gemm_|diag: (worker|bare|loopback)" "$OUT/bench_rs.log" | sed 's/^\[rank 0\] //' | grep -E "meld_gemm|DIAG=(8|16|1024|4104|4112|5120) |^gemm_|diag:" | cut -c1-160
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
M=gpu__time_duration.sum,sm__cycles_elapsed.max,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,smsp__inst_executed.sum
"$NCU" --query-metrics > "$OUT/metrics.txt" 2>&1
for x in lts__t_sectors_srcunit_tex_op_read lts__t_sectors_srcunit_ltcfabric lts__t_sectors_srcunit_tex_lookup_hit lts__t_sectors_srcunit_tex_op_read_lookup_hit lts__t_sectors_srcunit_tex_op_read_lookup_miss; do
  grep -q "^$x " "$OUT/metrics.txt" && M="$M,$x.sum"
done
echo "metrics: $M"
CFGS="mg:@gemm_kernel;d16:MELD_GEMM_RS_DIAG=16;d16w:MELD_GEMM_RS_DIAG=4112;d8:MELD_GEMM_RS_DIAG=8;d8w:MELD_GEMM_RS_DIAG=4104;loop:MELD_GEMM_RS_DIAG=1024;loopw:MELD_GEMM_RS_DIAG=5120" \
  SECTIONS="--metrics $M" NO_SOURCE=1 OUT="$OUT" bash bench/ncu_add.sh 2>&1 | grep -vE '"(gpu__time|dram__bytes_write)' | sed 's/.*Command line profiler metrics",//' 
echo "total: $(el) s"
cd "$OUT" && rm -f metrics.txt && tar czf logs.tgz *.log *.csv 2>/dev/null && rm -f *.log *.csv
