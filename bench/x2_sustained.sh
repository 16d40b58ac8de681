#!/usr/bin/env bash
# x2_sustained.sh — 2 GPUs: meld vs PyTorch async-TP vs sequential at the quick shapes, timed
# SUSTAINED (session 8: under steady load an H200 sits at its 700 W cap near 1450 MHz, and a
# short burst after a pause runs 10-17% faster, so rows timed in different bursts or processes
# are not comparable). Both GPUs are heated first; the C benches' --soak runs every row
# back-to-back for SOAK ms twice (opposite orders); the torch baselines do the same with
# BENCH_SOAK_MS. Burst medians are printed too. Usage (device): OUT=... [SOAK=800]
# [RS_RUNS="rs,8192,8192,8192,--diag ..." (the diagnostic rows soaked too: where the fused
# kernel's +18% over meld_gemm goes, sustained)] [PREBUILT=1: carry build/bench] bash bench/x2_sustained.sh
. "$(dirname "$0")/device_env.sh" # set -u, $OUT, no multicast, el
export BENCH_COMMIT=${BENCH_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)} BENCH_RUN=${BENCH_RUN:-x2-sustained}
S=${SOAK:-800}
d=$(date -u +%Y-%m-%d)
build lib build/bench/bench_gemm build/bench/bench_gemm_rs build/bench/bench_ag_gemm
for g in 0 1; do # heat both GPUs (3 s of a big GEMM each, at once)
  CUDA_VISIBLE_DEVICES=$g timeout -k 5 60 build/bench/bench_gemm --custom-only --shape 8192,8192,8192 --rounds 1 --soak 3000 \
    > "$OUT/preheat$g.log" 2>&1 &
done
wait; echo "preheat at $(el) s"; grep -h "^soak" "$OUT"/preheat*.log
for s in ${RS_RUNS:-"rs,8192,8192,8192" "ar,8192,8192,8192" "rs,8192,4096,14336"}; do
  IFS=, read -r op m n k flags <<< "$s" # (a 5th field: more bench flags, e.g. --diag)
  timeout -k 5 150 build/bench/bench_gemm_rs --op $op --shape $m,$n,$k ${flags:-} --soak $S --json "$OUT/gemm_rs-x2-sustained-$d.jsonl" >> "$OUT/gemm_rs.log" 2>&1
  echo "bench_gemm_rs $s rc=$? at $(el) s"
done
grep -E "soak|^gemm_|per rank" "$OUT/gemm_rs.log" | cut -c1-170
timeout -k 5 150 build/bench/bench_ag_gemm --quick --soak $S --json "$OUT/ag_gemm-x2-sustained-$d.jsonl" > "$OUT/ag.log" 2>&1
echo "bench_ag_gemm rc=$? at $(el) s"; grep -E "soak|^[0-9]+x|per rank" "$OUT/ag.log" | grep -vE "vec_cc|group_m|chunk256|bulk |staged" | cut -c1-170
BENCH_SOAK_MS=$S timeout -k 5 120 torchrun --nproc_per_node=2 bench/gemm_rs_torch.py --quick --json "$OUT/torch-rs-sustained-$d.jsonl" > "$OUT/torch_rs.log" 2>&1
echo "torch rs rc=$? at $(el) s"; grep -E "gemm_rs|Error" "$OUT/torch_rs.log" | head -8
BENCH_SOAK_MS=$S timeout -k 5 120 torchrun --nproc_per_node=2 bench/ag_gemm_torch.py --quick --json "$OUT/torch-ag-sustained-$d.jsonl" > "$OUT/torch_ag.log" 2>&1
echo "torch ag rc=$? at $(el) s"; grep -E "async-TP|Error" "$OUT/torch_ag.log" | head -8
python3 tools/soak_table.py "$OUT"/*.jsonl > "$OUT/soak_table.log" 2>&1; grep -E "^[a-z_]+ [0-9]|meld |meld_gemm |cublas |torch |meld fused  " "$OUT/soak_table.log" | head -60
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f build.log preheat*.log
