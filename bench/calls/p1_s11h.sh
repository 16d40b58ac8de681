#!/usr/bin/env bash
# p1_s11h.sh — ONE GPU, session 11, call 8: the early stage release as the wide tile's default
# (gemm_plan_opts_t.early_release 0 = plan's): test_gemm (default rule expects it with the wide
# tile only; forced-off wide and forced-on 128 x 256 cases), then a burst check of the default
# against MELD_GEMM_EARLY_RELEASE=0 and =2 (warpgroup-uniform) at the two wide shapes; the wide
# B-multicast pairs with it. If =2 keeps the gain, make it the wide tile's default (it conforms).
# Usage (device): OUT=... bash bench/calls/p1_s11h.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/tests/gpu/test_gemm build/bench/bench_gemm
MELD_TIMEOUT_MS=3000 timeout -k 5 200 build/tests/gpu/test_gemm > "$OUT/test_gemm.log" 2>&1
echo "test_gemm rc=$? at $(el) s"; grep -E "FAIL|checks passed| early| late" "$OUT/test_gemm.log" | cut -c1-150 | head -12
# 0 = off, 1 = each warp's probe (measured in session 11), 2 = the warpgroup-uniform decision
# (conforms to wgmma.wait_group's .aligned; one named barrier per k-block): A B C A B C, soaked
for r in 1 2; do for e in 0 1 2; do
  MELD_GEMM_EARLY_RELEASE=$e timeout -k 5 60 build/bench/bench_gemm --custom-only --shape 2048,5120,8192 --shape 8192,1280,8192 \
    --soak ${SOAK:-600} --commit "er$e" --json "$OUT/gemm-er-uniform.jsonl" > "$OUT/bench_er$e-$r.log" 2>&1
  grep -E "^custom|^soak" "$OUT/bench_er$e-$r.log" | sed "s/^/er$e.$r /" | cut -c1-150
done; done
# the wide pairs (call 6: -0.8..0.9% sustained) now with early release too: does it still add?
MELD_GEMM_CLUSTER_EXPERIMENTAL=1 timeout -k 5 150 build/bench/bench_gemm --custom-only --shape 2048,5120,8192 --shape 8192,1280,8192 \
  --only default,w320cl2,n256 --soak ${SOAK:-600} --soak-rounds 2 --json "$OUT/gemm-wide-er-cl2.jsonl" > "$OUT/bench_cl2.log" 2>&1
echo "bench (pairs) rc=$? at $(el) s"; grep -E "^custom|^soak median" "$OUT/bench_cl2.log" | cut -c1-160
echo "total: $(el) s"
