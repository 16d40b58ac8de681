# device_env.sh — the common start of the bench/*.sh device scripts (sourced, not run): strict
# variables, $OUT (where results go; the device tool's folder, else /tmp/out), no NVLink
# multicast for NCCL / torch / NVSHMEM, and `el` (seconds since the script began).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
