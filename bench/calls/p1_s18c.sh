#!/usr/bin/env bash
# p1_s18c.sh — ONE GPU, session 18 call 3: the fix for GEMM+RS / GEMM+AR at more than 2 ranks.
# Call 2 (p1_s18b) ran test_gemm_rs at P = 3 and 4 on one GPU (MELD_SHARE_GPU): every fused
# shape with split-K tiles came out wrong (rel 0.54-1.6; e.g. AR 1000 x 1000 x 4104, RS 768 x 1000,
# 2/3 of the back-to-back calls), the large shapes (whole tiles) right. Cause found by reading
# (gemm.cuh gemm_reduce_add): in add mode 4 a split tile's own partials past src[0] were loaded
# before their flags were acquired (the acquire of whole tiles happens at their start; split
# tiles ask in the last piece's epilogue, after those loads). At 2 ranks there is no src[1].
# Also the test forced FUSED RS at M 8192 where ceil(M/3) is not a multiple of 128 (refused, as
# documented): those cases now round M up (m_fused).
# Prediction (before the run): test_gemm_rs passes at P = 3, 4, 2 (shared) and 1.
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s18c.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
for t in 3:test_gemm_rs:130 4:test_gemm_rs:130 1:test_gemm_rs:40 2:test_gemm_rs:80 2:test_signal:60; do
  IFS=: read -r p n lim <<< "$t"
  left=$(( 560 - $(el) ))
  [ "$left" -lt 20 ] && { echo "P=$p $n: skipped (time)"; continue; }
  [ "$lim" -gt "$left" ] && lim=$left
  if [ "$p" = 1 ]; then env MELD_TIMEOUT_MS=3000 PREBUILT=1 TEST_TIMEOUT_S=$lim tests/gpu/run.sh "$n" > "$OUT/p${p}_$n.log" 2>&1
  else env MELD_SHARE_GPU=1 MELD_TIMEOUT_MS=15000 GT_RANKS_PER_GPU=$p PREBUILT=1 TEST_TIMEOUT_S=$lim GT_SPAWN_TIMEOUT_S=$((lim - 5)) \
    tests/gpu/run.sh "$n" > "$OUT/p${p}_$n.log" 2>&1; fi
  echo "P=$p $n rc=$? at $(el) s"
  grep -E "^== gpu|FAIL|ping-pong|back-to-back:|graph:|killing|failed \(" "$OUT/p${p}_$n.log" | cut -c1-170 | head -14
done
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
