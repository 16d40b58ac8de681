#!/usr/bin/env bash
# run.sh P PROGRAM [ARGS...] — starts P ranks of an example on this host with the variables
# torchrun sets (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), which
# meld_comm_init_env reads: rank r on GPU r (with fewer GPUs than ranks, the ranks share them:
# MELD_SHARE_GPU=1, a test mode). Exits non-zero if any rank does. Under torchrun, Slurm or
# Open MPI, start the program with their launcher instead.
set -u
P=${1:?usage: examples/run.sh P PROGRAM [ARGS...]}; shift
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
[ "${ngpu:-0}" -ge 1 ] || { echo "run.sh: no GPU here"; exit 2; }
export MASTER_ADDR=127.0.0.1 MASTER_PORT=${MASTER_PORT:-$((20000 + RANDOM % 20000))} WORLD_SIZE=$P LOCAL_WORLD_SIZE=$P
[ "$ngpu" -lt "$P" ] && export MELD_SHARE_GPU=1
pids=()
for r in $(seq 0 $((P - 1))); do
  RANK=$r LOCAL_RANK=$r "$@" &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
exit $rc
