#!/usr/bin/env bash
# run.sh P PROGRAM [ARGS...] — starts P ranks of an example on this host with the variables
# torchrun sets (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), which
# meld_comm_init_env reads: rank r on GPU r (with fewer GPUs than ranks, the ranks share them:
# MELD_SHARE_GPU=1, a test mode). Exits non-zero if any rank does. Under torchrun, Slurm or
# Open MPI, start the program with their launcher instead.
set -u
P=${1:?usage: examples/run.sh P PROGRAM [ARGS...]}; shift
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then ngpu=$(echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c .)
else ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true); fi
[ "${ngpu:-0}" -ge 1 ] || { echo "run.sh: no GPU here"; exit 2; }
export MASTER_ADDR=127.0.0.1 MASTER_PORT=${MASTER_PORT:-$((20000 + RANDOM % 20000))} WORLD_SIZE=$P LOCAL_WORLD_SIZE=$P
[ "$ngpu" -lt "$P" ] && export MELD_SHARE_GPU=1
pids=()
for r in $(seq 0 $((P - 1))); do
  RANK=$r LOCAL_RANK=$r "$@" &
  pids+=($!)
done
# the first rank that fails ends the others (they would wait for it until their deadlines)
rc=0
for _ in "${pids[@]}"; do
  if ! wait -n; then rc=1; kill "${pids[@]}" 2>/dev/null; fi
done
exit $rc
