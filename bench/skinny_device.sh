#!/usr/bin/env bash
# skinny_device.sh — one device call (2 GPUs) for the small-M GEMM work: build everything, every
# GPU test (unless SKIP_TESTS=1), the decode GEMM sweep (meld_gemm's default, the engine, the
# small-M kernel's cluster sizes and L2 hints, vs cuBLASLt; GPU 0), then the GEMM+AR bench (its
# decode rows time meld_gemm and the unfused path). Logs and JSON land in $OUT.
#   SHAPES (M,N,K list), VARIANTS (bench_gemm --only list), TESTS (GPU test names; default all),
#   AR_ARGS (bench_gemm_rs arguments; default --quick --op ar), SKIP_AR=1, FULL=1 (then the
#   48-shape bench_gemm, default plans only)
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export BENCH_COMMIT=${BENCH_COMMIT:-$(cat .commit 2>/dev/null || echo unknown)}
t0=$(date +%s)
el() { echo $(($(date +%s) - t0)); }
make -j32 all build/bench/bench_gemm build/bench/bench_gemm_rs > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "build: $(el) s"
if [ -z "${SKIP_TESTS:-}" ]; then
  # shellcheck disable=SC2086
  TEST_TIMEOUT_S=150 tests/gpu/run.sh ${TESTS:-} > "$OUT/gpu_tests.log" 2>&1
  echo "gpu tests rc=$? at $(el) s"
  grep -E "PASSED|FAILED|FAIL |checks" "$OUT/gpu_tests.log" | tail -20
fi
SHAPES=${SHAPES:-"1,8192,8192 16,8192,8192 32,8192,8192 64,8192,8192 96,8192,8192 128,8192,8192 16,8192,4096 128,8192,4096 16,4096,7168 128,4096,7168 16,8192,14336 128,8192,14336"}
VARIANTS=${VARIANTS:-default,engine,skinny,skinny_s1,skinny_s2,skinny_s4,skinny_s8,skinny_nohint,skinny_bfirst}
args=()
for s in $SHAPES; do args+=(--shape "$s"); done
timeout -k 5 150 build/bench/bench_gemm --custom-only --only "$VARIANTS" "${args[@]}" --commit "$BENCH_COMMIT" \
  --json "$OUT/gemm-skinny.jsonl" > "$OUT/bench_gemm.log" 2> "$OUT/bench_gemm.err"
echo "bench_gemm rc=$? at $(el) s"
if [ -z "${SKIP_AR:-}" ]; then
  # shellcheck disable=SC2086
  timeout -k 5 120 build/bench/bench_gemm_rs ${AR_ARGS:---quick --op ar} --json "$OUT/fused-ar.jsonl" > "$OUT/bench_ar.log" 2>&1
  echo "bench_gemm_rs ar rc=$? at $(el) s"
fi
if [ -n "${FULL:-}" ]; then
  timeout -k 5 150 build/bench/bench_gemm --commit "$BENCH_COMMIT" --json "$OUT/gemm-full.jsonl" > "$OUT/bench_gemm_full.log" 2>&1
  echo "bench_gemm full rc=$? at $(el) s"
fi
grep -vE "^$" "$OUT/bench_gemm.log" | cut -c1-160 | tail -120
[ -z "${SKIP_AR:-}" ] && grep -vE "^\[rank|^W|warn" "$OUT/bench_ar.log" | tail -30
[ -n "${FULL:-}" ] && grep -E "decode|geomean|qkv" "$OUT/bench_gemm_full.log" | cut -c1-160
echo "total: $(el) s"
