#!/usr/bin/env bash
# x2_s9.sh — 2 GPUs, session 9 call 3: (1) test_gemm_rs at 2 ranks with zero-copy AR as the
# default; (2) sustained GEMM+RS / GEMM+AR / AG+GEMM rows and the torch async-TP baselines (run
# once with an energy-per-call column from NVML's energy counter, removed after that run: too
# coarse over 0.3 s and it slowed the short rows; tests/gpu/results/2026-12-01-h200x2-s9-energy/
# NOTE.md); (3) on GPU 0 alone, the experimental 2-CTA multicast GEMM (bench/calls/p1_cluster.sh)
# while time is left.
# Usage (device): OUT=... [SOAK=600] [LIMIT=560] bash bench/calls/x2_s9.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
export BENCH_COMMIT=${BENCH_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)} BENCH_RUN=${BENCH_RUN:-x2-s9}
S=${SOAK:-600}; LIMIT=${LIMIT:-560}; d=$(date -u +%Y-%m-%d)
make -j32 lib build/tests/gpu/test_gemm_rs build/tests/gpu/test_gemm build/bench/bench_gemm build/bench/bench_gemm_rs \
  build/bench/bench_ag_gemm > "$OUT/build.log" 2>&1 || { grep -E "error" "$OUT/build.log" | head -20; exit 1; }
echo "build: $(el) s"
TEST_TIMEOUT_S=150 MELD_TIMEOUT_MS=3000 tests/gpu/run.sh test_gemm_rs > "$OUT/gpu_tests.log" 2>&1
echo "test_gemm_rs rc=$? at $(el) s"; grep -E "FAIL|checks passed|zero copy \(default\)|^== " "$OUT/gpu_tests.log" | head -12
for g in 0 1; do
  CUDA_VISIBLE_DEVICES=$g timeout -k 5 30 build/bench/bench_gemm --custom-only --shape 8192,8192,8192 --rounds 1 --soak 2000 \
    > "$OUT/preheat$g.log" 2>&1 &
done
wait; echo "preheat at $(el) s"
for s in "rs 8192,8192,8192" "ar 8192,8192,8192"; do
  set -- $s
  timeout -k 5 120 build/bench/bench_gemm_rs --op $1 --shape $2 --soak $S --json "$OUT/gemm_rs-x2-energy-$d.jsonl" >> "$OUT/gemm_rs.log" 2>&1
  echo "bench_gemm_rs $s rc=$? at $(el) s"
done
BENCH_SOAK_MS=$S timeout -k 5 100 torchrun --nproc_per_node=2 bench/gemm_rs_torch.py --quick --json "$OUT/torch-rs-energy-$d.jsonl" > "$OUT/torch_rs.log" 2>&1
echo "torch rs rc=$? at $(el) s"
timeout -k 5 120 build/bench/bench_ag_gemm --shape 8192,5120,8192 --soak $S --json "$OUT/ag_gemm-x2-energy-$d.jsonl" > "$OUT/ag.log" 2>&1
echo "bench_ag_gemm rc=$? at $(el) s"
BENCH_SOAK_MS=$S timeout -k 5 100 torchrun --nproc_per_node=2 bench/ag_gemm_torch.py --quick --json "$OUT/torch-ag-energy-$d.jsonl" > "$OUT/torch_ag.log" 2>&1
echo "torch ag rc=$? at $(el) s"
python3 tools/soak_table.py "$OUT"/*energy*.jsonl > "$OUT/soak_table.log" 2>&1
grep -vE "GEMM_RS_PRELOAD|vec_cc|group_m|chunk256|stream_k_p0|stream_k2" "$OUT/soak_table.log" | head -90
left=$(( LIMIT - $(el) ))
if [ $left -gt 90 ]; then
  CUDA_VISIBLE_DEVICES=0 SHAPES="2048,5120,8192 8192,8192,4096" OUT="$OUT/cl" timeout -k 5 $((left - 10)) bash bench/calls/p1_cluster.sh > "$OUT/cluster.log" 2>&1
  echo "p1_cluster rc=$? at $(el) s"; tail -40 "$OUT/cluster.log" | cut -c1-200
fi
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log cl 2>/dev/null && rm -rf *.log cl
