#!/usr/bin/env bash
# p1_s12e.sh — ONE GPU, session 12 call 5: the 128 x 320 tile as the fused AG+GEMM default
# where meld_gemm's rule takes it (M = 2048, N_loc = 5120 at P = 2). test_ag_gemm (its
# loopback M = 2048 cases now run it by default), then bench_ag_gemm again at 2048 x 5120 x
# 8192 (call 4's A/B repeated: loopback_p1 is now the wide default, loopback_p1_sk the old
# one) and at 2048 x 28672 x 8192, where the rule keeps 128 x 256 (ratio 0.98): does w320 lose?
# Usage (device): OUT=... bash bench/calls/p1_s12e.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/tests/gpu/test_ag_gemm build/bench/bench_ag_gemm
MELD_TIMEOUT_MS=3000 timeout -k 5 240 build/tests/gpu/test_ag_gemm > "$OUT/test_ag_gemm.log" 2>&1
echo "test_ag_gemm rc=$? at $(el) s"; grep -E "FAIL|checks passed" "$OUT/test_ag_gemm.log" | cut -c1-170 | head -8
grep -E "loopback.*M=2048" "$OUT/test_ag_gemm.log" | grep -oE "^.{0,60}|tile_n=[0-9]+|stream_k=[0-9]" | paste - - - | head -6
for s in 2048,5120,8192 2048,28672,8192; do
  timeout -k 5 200 build/bench/bench_ag_gemm --shape $s --soak ${SOAK:-600} --json "$OUT/ag_gemm-w320-${s//,/x}.jsonl" > "$OUT/bench-${s//,/x}.log" 2>&1
  echo "bench $s rc=$? at $(el) s"; grep -E "soak ag_gemm" "$OUT/bench-${s//,/x}.log" | grep -E " default | cublas | fused_p1 | fused_p1_sk | fused_p1_w320 | loopback_p1 | loopback_p1_sk | loopback_p1_sk_p2 | loopback_p1_w320 " | cut -c1-150
  grep -E "^ +(fused_p1|fused_p1_sk|fused_p1_w320|loopback_p1|loopback_p1_sk|loopback_p1_w320) " "$OUT/bench-${s//,/x}.log"
done
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
