#!/usr/bin/env bash
# run.sh — the main job: the benchmark suite on the GPUs present (meld-bench --suite), results
# as JSON lines under bench/results/<family>-<date>.jsonl and tables on stdout.
# Usage: bench/run.sh [--quick] [--soak MS]   (--soak: the GEMM and fused rows also timed sustained)
set -u
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
make --no-print-directory -j"$(nproc)" all bench || exit 1
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "bench/run.sh: no GPU on this machine: nothing to measure"; exit 0
fi
mkdir -p bench/results
exec build/bin/meld-bench --suite "$@" --json-dir bench/results
