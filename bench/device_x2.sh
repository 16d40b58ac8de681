#!/usr/bin/env bash
# device_x2.sh — one device call: build, run the named GPU tests, then the named benches;
# every log lands in $OUT. Usage: bench/device_x2.sh "test_comm test_coll" "p2p coll_quick"
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export MELD_TIMEOUT_MS=${MELD_TIMEOUT_MS:-3000}
export BENCH_COMMIT=${BENCH_COMMIT:-$(cat .commit 2>/dev/null || echo unknown)}
tests=${1:-}; benches=${2:-}
nvidia-smi -L > "$OUT/gpus.txt" 2>&1; nvidia-smi topo -m >> "$OUT/gpus.txt" 2>&1
t0=$(date +%s)
targets="lib"
for t in $tests; do targets="$targets build/tests/gpu/$t"; done
for b in $benches; do targets="$targets build/bench/bench_${b%%_*}"; done
make -j16 $targets > "$OUT/build.log" 2>&1 || { grep -E "error" "$OUT/build.log" | head -30; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
for t in $tests; do
  echo "=== $t"
  timeout -k 5 ${TEST_TIMEOUT_S:-150} build/tests/gpu/$t > "$OUT/$t.log" 2>&1; echo "rc=$?" >> "$OUT/$t.log"
  grep -E "FAIL|PASSED|FAILED|rc=|skipped|us |GB/s" "$OUT/$t.log" | head -40
done
d=$(date -u +%Y-%m-%d)
for b in $benches; do
  echo "=== bench $b"
  case $b in
    p2p) timeout 120 build/bench/bench_p2p --json "$OUT/p2p-$d.jsonl" > "$OUT/bench_p2p.log" 2>&1 ;;
    coll_quick) timeout 200 build/bench/bench_coll --quick --json "$OUT/coll-$d.jsonl" > "$OUT/bench_coll.log" 2>&1 ;;
    coll) timeout 400 build/bench/bench_coll --json "$OUT/coll-$d.jsonl" > "$OUT/bench_coll.log" 2>&1 ;;
    gemm_quick) timeout 200 build/bench/bench_gemm --quick --json "$OUT/gemm-$d.jsonl" > "$OUT/bench_gemm.log" 2>&1 ;;
    gemm) timeout 400 build/bench/bench_gemm --json "$OUT/gemm-$d.jsonl" > "$OUT/bench_gemm.log" 2>&1 ;;
  esac
  echo "rc=$?"; tail -25 "$OUT/bench_${b%%_*}.log"
done
echo "total: $(( $(date +%s) - t0 )) s"
