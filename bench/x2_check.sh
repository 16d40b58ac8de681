#!/usr/bin/env bash
# x2_check.sh — the 2-GPU check of the fused ops in one call (sessions 5-7; run it first on 2
# GPUs): build; every GPU test program (incl. test_gemm_rs's flag helper, stream-K, own-tile
# modes, zero-copy and early-copy AR; test_ag_gemm's stream-K pieces; session 8's registered
# memory in test_comm, test_coll and test_gemm_rs), test_coll's TMA-bulk RING, bench_coll --zc-reg;
# GEMM+RS/AR at the three M = 8192 shapes (RS 8192^2 x 4096 with --diag: no-push, no-fence,
# flag-helper, own-tile-mode rows), a per-tile trace picture, AG+GEMM --quick; then PyTorch
# async-TP for both while LIMIT seconds last.
. "$(dirname "$0")/device_env.sh" # set -u, $OUT, no multicast, el
export BENCH_COMMIT=${BENCH_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)} BENCH_RUN=${BENCH_RUN:-x2}
LIMIT=${LIMIT:-300}
nvidia-smi -L > "$OUT/gpus.txt" 2>&1
make -j32 lib build/tests/gpu/test_coll build/bench/bench_gemm_rs build/bench/bench_ag_gemm > "$OUT/build.log" 2>&1 ||
  { grep -E "error" "$OUT/build.log" | head -20; exit 1; }
echo "build: $(el) s"
# every GPU test program (session 7 changed the protocol's waits: test_signal, test_abort, test_coll)
TEST_TIMEOUT_S=${TEST_TIMEOUT_S:-150} MELD_TIMEOUT_MS=3000 tests/gpu/run.sh ${TESTS:-} > "$OUT/gpu_tests.log" 2>&1
echo "gpu tests rc=$? at $(el) s"; grep -E "^== |FAILED|FAIL " "$OUT/gpu_tests.log" | head -12
TEST_COLL_ONLY=bulk MELD_TIMEOUT_MS=3000 timeout -k 5 60 build/tests/gpu/test_coll > "$OUT/test_coll_bulk.log" 2>&1
echo "test_coll bulk rc=$? at $(el) s"; grep -E "FAIL|PASSED|FAILED|checks" "$OUT/test_coll_bulk.log" | head -5
# session 8: the zero-copy collectives on registered ordinary memory (meld_mem_register) vs NCCL
make -j32 build/bench/bench_coll >> "$OUT/build.log" 2>&1
timeout -k 5 90 build/bench/bench_coll --zc-reg --max-bytes $((256 << 20)) --json "$OUT/coll-zcreg-$(date -u +%Y-%m-%d).jsonl" > "$OUT/bench_coll_zcreg.log" 2>&1
echo "bench_coll --zc-reg rc=$? at $(el) s"; grep -E "reg_|FAIL" "$OUT/bench_coll_zcreg.log" | grep -E " (67108864|268435456|4096|262144) " | head -24
d=$(date -u +%Y-%m-%d)
# (the --diag rows at one shape, RS only: with --op both they ran past 60 s in session 5)
for s in "rs 8192,8192,8192 --diag" "ar 8192,8192,8192" "both 8192,4096,14336" "both 8192,8192,28672"; do
  set -- $s
  timeout -k 5 90 build/bench/bench_gemm_rs --op "$1" --shape "$2" ${3:-} --json "$OUT/gemm_rs-x2-$d.jsonl" >> "$OUT/bench_gemm_rs.log" 2>&1
  echo "bench_gemm_rs $s rc=$? at $(el) s"
done
grep -v "^\[" "$OUT/bench_gemm_rs.log" | grep -v "^bench_gemm_rs:" | head -60
# Per-tile timeline of 3 fused GEMM+RS calls (issue 7's trace picture); another bootstrap port:
# the bench just before may leave its port in TIME_WAIT.
MELD_PORT=${TRACE_PORT:-47913} MELD_TRACE="$OUT/gemm_rs-trace.json" timeout -k 5 40 build/bench/bench_gemm_rs --trace --op rs \
  --shape 8192,8192,8192 > "$OUT/trace.log" 2>&1; echo "trace rc=$? at $(el) s"
python3 tools/trace_png.py -o "$OUT/gemm_rs-trace.png" --title "GEMM+RS 8192x8192x4096, 2 x H200, 3 calls" \
  "$OUT"/gemm_rs-trace.rank*.json >> "$OUT/trace.log" 2>&1; echo "trace png rc=$?"
timeout -k 5 90 build/bench/bench_ag_gemm --quick --json "$OUT/ag_gemm-x2-$d.jsonl" > "$OUT/bench_ag_gemm.log" 2>&1
echo "bench_ag_gemm rc=$? at $(el) s"; grep -v "^\[" "$OUT/bench_ag_gemm.log" | grep -vE "vec_cc|group_m|chunk256|bulk |staged" | head -40
left=$(( LIMIT - $(el) - 10 ))
if [ $left -gt 40 ]; then
  timeout -k 5 $left torchrun --nproc_per_node=2 bench/gemm_rs_torch.py --quick --json "$OUT/torch-rs-$d.jsonl" > "$OUT/torch_rs.log" 2>&1
  echo "torch rs rc=$? at $(el) s"; grep -E "gemm_rs|Error" "$OUT/torch_rs.log" | head -8
fi
left=$(( LIMIT - $(el) - 5 ))
if [ $left -gt 40 ]; then
  timeout -k 5 $left torchrun --nproc_per_node=2 bench/ag_gemm_torch.py --quick --json "$OUT/torch-ag-$d.jsonl" > "$OUT/torch_ag.log" 2>&1
  echo "torch ag rc=$? at $(el) s"; grep -vE "^W|warn" "$OUT/torch_ag.log" | tail -6
fi
echo "total: $(el) s"
# (a device call brings back at most 8 files: logs and traces in one archive)
cd "$OUT" && tar czf logs.tgz *.log *.txt *.json 2>/dev/null && rm -f *.log *.txt *.json
