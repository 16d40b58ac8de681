#!/usr/bin/env bash
# p1_s12b.sh — ONE GPU, session 12 call 2: which early-release decision should the wide tile
# use? Call 1: the per-warp probe (1, non-conforming: wgmma.wait_group may differ across the
# warps of a warpgroup) kept all the gain, the warpgroup OR (2) lost most of it at 2048 x 5120
# x 8192. Two more conforming variants: 3 releases at every k-block (no probe, no barrier), 4
# is the warpgroup AND (early only when all 4 warps saw the stage late). test_gemm (rows for 3
# and 4), then 0..4 soaked, A B C D E twice, at the two wide shapes.
# Usage (device): OUT=... bash bench/calls/p1_s12b.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/tests/gpu/test_gemm build/bench/bench_gemm build/bench/bench_gemm_rs build/bench/bench_ag_gemm
MELD_TIMEOUT_MS=3000 timeout -k 5 200 build/tests/gpu/test_gemm > "$OUT/test_gemm.log" 2>&1
echo "test_gemm rc=$? at $(el) s"; grep -E "FAIL|checks passed" "$OUT/test_gemm.log" | cut -c1-150 | head -12
for r in 1 2; do for e in 0 1 2 3 4; do
  MELD_GEMM_EARLY_RELEASE=$e timeout -k 5 60 build/bench/bench_gemm --custom-only --shape 2048,5120,8192 --shape 8192,1280,8192 \
    --soak ${SOAK:-600} --commit "er$e" --json "$OUT/gemm-er-variants.jsonl" > "$OUT/bench_er$e-$r.log" 2>&1
  grep -E "^custom|^soak" "$OUT/bench_er$e-$r.log" | grep -v cuBLASLt | sed "s/^/er$e.$r /" | cut -c1-120
done; done
echo "total: $(el) s"
