#!/usr/bin/env bash
# run.sh — the main job: benchmarks on the GPUs present, results as JSON lines under
# bench/results/<op>-<date>.jsonl and a table on stdout.  Usage: bench/run.sh [--quick]
set -u
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
quick=""
[ "${1:-}" = "--quick" ] && quick="--quick"
date=$(date -u +%Y-%m-%d)
mkdir -p bench/results
make --no-print-directory -j"$(nproc)" bench || exit 1
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "bench/run.sh: no GPU on this machine: nothing to measure"; exit 0
fi
ngpu=$(nvidia-smi -L | wc -l)
status=0
if [ -x build/bench/bench_gemm ]; then
  echo "== GEMM (1 GPU)"
  build/bench/bench_gemm $quick --json bench/results/gemm-$date.jsonl || status=1
fi
if [ "$ngpu" -ge 2 ]; then
  echo "== NVLink bandwidth ($ngpu GPUs)"
  build/bench/bench_p2p --json bench/results/p2p-$date.jsonl || status=1
else
  echo "== NVLink bandwidth: skipped (1 GPU)"
fi
exit $status
