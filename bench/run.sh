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
build/bin/meld-bench --suite "$@" --json-dir bench/results
rc=$?
# The peers in the same run (BENCH.md), where torch is installed: the one-GPU ones always, the
# 2-GPU ones with torchrun where 2+ GPUs are present. A peer that fails is reported, not fatal.
if python3 -c "import torch" >/dev/null 2>&1; then
  day=$(date -u +%Y-%m-%d)
  quick=""; for a in "$@"; do [ "$a" = --quick ] && quick=--quick; done
  peer() { echo "== peer: $*"; "$@" || echo "bench/run.sh: peer failed (rc $?): $*"; }
  peer python3 bench/attn_torch.py $quick --json "bench/results/attn-$day.jsonl"
  peer python3 bench/moe_torch.py $quick --json "bench/results/moe-$day.jsonl"
  ngpu=$(nvidia-smi -L | wc -l)
  if [ "$ngpu" -ge 2 ]; then
    tr="python3 -m torch.distributed.run --nproc-per-node 2"
    peer $tr bench/ag_gemm_torch.py $quick --json "bench/results/ag_gemm-$day.jsonl"
    peer $tr bench/gemm_rs_torch.py $quick --json "bench/results/gemm_rs-$day.jsonl"
    peer $tr bench/ring_attn_torch.py --json "bench/results/ring_attn-$day.jsonl"
  fi
else
  echo "bench/run.sh: torch not installed: the peers (bench/*_torch.py) not run"
fi
exit $rc
