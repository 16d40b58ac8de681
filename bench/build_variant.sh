#!/usr/bin/env bash
# build_variant.sh — builds programs of this tree into build_NAME/ with extra preprocessor
# definitions for host and device code (an experiment's variant, e.g. a kernel constant), or of
# another commit into build_NAME/ (a baseline), for an A/B in one device call (bench/ab_gemm.sh).
# build_*/ is git-ignored: carry the binaries with the device tool's `carry`.
#   bench/build_variant.sh NAME "-DSKINNY_RING_BYTES=98304" [targets...]
#   bench/build_variant.sh NAME @COMMIT [targets...]      (a worktree of COMMIT in /tmp)
# Targets default to bench/bench_gemm (relative to the build folder).
set -eu
cd "$(dirname "$0")/.."
name=$1 what=$2
shift 2
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(bench/bench_gemm)
nvcc=${NVCC:-${CUDA_HOME:-/usr/local/cuda}/bin/nvcc}
if [ "${what#@}" != "$what" ]; then # another commit: build it in a worktree, copy the binaries here
  wt=/tmp/meld-variant-$name
  git worktree add -f "$wt" "${what#@}" > /dev/null
  trap 'git worktree remove --force "$wt"' EXIT
  (cd "$wt" && make -j"$(nproc)" "${targets[@]/#/build/}")
  for t in "${targets[@]}"; do mkdir -p "build_$name/$(dirname "$t")" && cp "$wt/build/$t" "build_$name/$t"; done
else # this tree with extra definitions (make's CFLAGS / NVCCFLAGS would replace its own flags)
  make -j"$(nproc)" BUILD="build_$name" CC="${CC:-gcc} $what" NVCC="$nvcc $what" "${targets[@]/#/build_$name/}"
fi
echo "built: ${targets[*]/#/build_$name/}"
