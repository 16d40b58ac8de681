#!/usr/bin/env bash
# RAN in session 34 call 8; the split (MELD_MOE_COPY_SPLIT) was REVERTED after it: decode 0.5273-0.5284 ms
# with 4 pieces vs 0.5289 whole, 0.5303 with 8 (no gain); its last two bench runs (the session's rows
# with torch) ran with the split at its default (4 at decode and T512; 1 elsewhere).
# p1_s34h.sh — ONE GPU: copy units split in S pieces (MELD_MOE_COPY_SPLIT; default 4 where
# capacity / local experts <= 128: decode and DeepSeek-V3 T512), each piece released on its own,
# a block complete at P x S. At decode one thread's bulk copies took ~14 us a 32-row unit (call 2)
# while the first wave's tiles waited: fused - nocopy 17-21 us (calls 3, 5, 6, 7).
# Prediction: test_moe 1,2,4,8 pass (paths: default, 3 pieces, whole units); decode fused -7..-10 us
# (S 4 vs 1); T512 within noise; rows with S 1 unchanged. Then the session's final rows with torch.
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_moe build/bench/bench_moe
export MELD_TIMEOUT_MS=5000
test_ranks build/tests/gpu/test_moe 1 2 4 8
BENCH_MOE_ROWS=dsv3-32e_T128,dsv3_T512 BENCH_MOE_VARIANTS=fused,nocopy \
  BENCH_MOE_AB=MELD_MOE_COPY_SPLIT=1,MELD_MOE_COPY_SPLIT=8,MELD_MOE_COPY_SPLIT=4 moe_rows 5
cp "$OUT/bench_moe_p1.log" "$OUT/bench_moe_p1_split.log"
BENCH_MOE_ROWS=dsv3_T512,dsv3_T4096,dsv3-zipf_T4096,dsv3_T8192,dsv3-32e_T4096,mixtral_T4096,dsv3-32e_T128 \
  BENCH_MOE_VARIANTS=fused,nocopy,ffn,cublas-loop moe_rows 3
BENCH_MOE_ROWS=dsv3_T512,dsv3_T4096,dsv3-zipf_T4096,dsv3_T8192,dsv3-32e_T4096,mixtral_T4096,dsv3-32e_T128 \
  moe_torch_rows
echo "== done at $(el) s"
