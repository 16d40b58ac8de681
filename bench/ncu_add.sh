#!/usr/bin/env bash
# ncu_add.sh — Nsight Compute on one GPU (session 6): the fused GEMM+RS kernel at one rank with
# one synthetic partial (MELD_GEMM_RS_DIAG=130: the 2-rank own-tile loads and adds, no wait)
# in each own-tile mode, and diag 32 (no pass, no loads) as the base. Each config: the third
# fused launch of bench_gemm_rs (its first variant after the one-rank AUTO = meld_gemm takes the
# process-wide env). Writes details/source CSVs under $OUT. Clocks left alone. SECTIONS="--section
# SpeedOfLight" NO_SOURCE=1: cycles only (faster). OP=ar, ARGS="--symc": other bench runs; SKIP, COUNT: which launches (default the 3rd).
# A config "name:ENV=.. ENV=..@regex" profiles kernels matching regex (default gemm_rs_kernel),
# e.g. "mg:@gemm_kernel" = meld_gemm's kernel. SECTIONS="--metrics a,b,c" for raw counters.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
make -j16 lib build/bench/bench_gemm_rs > "$OUT/build.log" 2>&1 || { tail -5 "$OUT/build.log"; exit 1; }
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
IFS=';' read -ra cfgs <<< "${CFGS:-d32:MELD_GEMM_RS_DIAG=32;stages:MELD_GEMM_RS_DIAG=130;tma:MELD_GEMM_RS_DIAG=130 MELD_GEMM_RS_PRELOAD=4;pass:MELD_GEMM_RS_DIAG=130 MELD_GEMM_RS_PRELOAD=0}"
for c in "${cfgs[@]}"; do
  name=${c%%:*}; envs=${c#*:}; kre=gemm_rs_kernel
  case "$envs" in *@*) kre=${envs##*@}; envs=${envs%@*};; esac
  env $envs timeout -k 5 150 "$NCU" --clock-control none -k regex:$kre --launch-skip ${SKIP:-2} --launch-count ${COUNT:-1} \
    ${SECTIONS:---section SpeedOfLight --section WarpStateStats --section SourceCounters --section MemoryWorkloadAnalysis} \
    -o "$OUT/rs_$name" -f build/bench/bench_gemm_rs --quick --op ${OP:-rs} ${ARGS:-} --shape ${SHAPE:-8192,8192,4096} > "$OUT/ncu_$name.log" 2>&1
  echo "ncu $name rc=$?"; grep -E "==ERR|error" "$OUT/ncu_$name.log" | head -3
  "$NCU" -i "$OUT/rs_$name.ncu-rep" --page details --csv > "$OUT/details_$name.csv" 2>&1
  [ "${NO_SOURCE:-0}" = 1 ] || "$NCU" -i "$OUT/rs_$name.ncu-rep" --page source --csv --print-source sass > "$OUT/source_$name.csv" 2>&1
  rm -f "$OUT/rs_$name.ncu-rep"
  grep -E '"(Elapsed Cycles|Duration|L2 Hit Rate|L1/TEX Hit Rate|DRAM Throughput|Memory Throughput)"' "$OUT/details_$name.csv" | cut -d, -f13- | head -8
  grep -E '"(dram__|lts__|smsp__|sm__|l1tex__|gpu__)' "$OUT/details_$name.csv" | cut -d, -f13- | head -20
  [ "${NO_SOURCE:-0}" = 1 ] || python3 bench/ncu_top.py "$OUT/source_$name.csv" 12 2>&1 | head -16
done
