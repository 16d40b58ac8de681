#!/usr/bin/env bash
# p1_s43d.sh — ONE GPU (session 43, call 4): fewer instructions a k-block. Call 3's stall samples
# of the ping-pong tile (fp8, 8192 x 28672 x 4096) showed 142 instructions a k-block and warp
# for its 8 wgmmas, 32 of them R2UR moving descriptors into uniform registers before each wgmma
# (the descriptors were computed per thread, from counters the compiler could not prove
# warp-uniform), against a k-block's 512 tensor cycles: issue-bound. Now the stand-alone kernels
# take their warpgroup index through a shuffle from lane 0 (warp-uniform to the compiler) and
# build the K-major descriptors without the address mask (wgmma_desc_sw128_k).
# (A) correctness: test_gemm_fp8 (default, ping-pong pairs), test_gemm (bf16: every stand-alone
#     path incl. B [K,N], wide, split-K, stream-K; clusters on).
# (S) SASS: R2UR and QGMMA/HGMMA counts of the previous and the new library.
# (B) A/B in separate processes (MELD_LIBRARY): gemm_fp8_torch --rowwise and per tensor (bf16
#     rows too) with the previous library (session 43's call-1 code) and the new one, default
#     plan and ping-pong pairs. Prediction: ping-pong pairs 5-10% faster than before (toward
#     torch's 1.23 ms under ncu at 8192 x 28672 x 4096); 128 x 256 within 1%.
# Every output ends in one archive (s43d.tgz).
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s43d.sh (carry: bench/pack_bins.sh
#   build/lib/libmeld.so build/lib_prev/libmeld.so build/tests/gpu/test_gemm_fp8 build/tests/gpu/test_gemm)
. "$(dirname "$0")/../device_env.sh"
build lib build/tests/gpu/test_gemm_fp8 build/tests/gpu/test_gemm
export MELD_TIMEOUT_MS=5000
PP="MELD_GEMM_TILE_N=128 MELD_GEMM_CLUSTER_EXPERIMENTAL=1"
for v in default ppcl2; do
  e=IP_ROW_NO_ENV=1; [ $v = ppcl2 ] && e=$PP
  env $e timeout -k 5 "$(tl 60)" build/tests/gpu/test_gemm_fp8 > "$OUT/test_gemm_fp8_$v.log" 2>&1
  echo "== (A) test_gemm_fp8 $v rc=$? at $(el) s"; grep -E "FAIL|checks" "$OUT/test_gemm_fp8_$v.log" | cut -c1-140 | head -6
done
CUOBJ=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
for l in build/lib_prev/libmeld.so build/lib/libmeld.so; do
  "$CUOBJ" -sass "$l" > "$OUT/sass.txt" 2>/dev/null
  python3 - "$OUT/sass.txt" "$l" <<'PY'
import re, sys
cur, cnt = None, {}
for line in open(sys.argv[1]):
    m = re.search(r"Function : (\S+)", line)
    if m: cur = m.group(1); cnt[cur] = [0, 0, 0]; continue
    if cur and "gemm_kernel" in cur:
        if "R2UR" in line: cnt[cur][0] += 1
        if "GMMA." in line: cnt[cur][1] += 1
        if re.search(r"/\*[0-9a-f]{4,}\*/", line): cnt[cur][2] += 1
print(sys.argv[2])
for f, (r, g, n) in sorted(cnt.items()):
    if "gemm_kernel" in f and g: print(f"  {f[:60]:60s} R2UR {r:5d} GMMA {g:4d} inst {n:6d}")
PY
done
rm -f "$OUT/sass.txt"
SH=8192x28672x4096,8192x8192x8192,4096x4096x4096
for lib in prev new; do for v in default ppcl2; do
  e=IP_ROW_NO_ENV=1; [ $v = ppcl2 ] && e=$PP
  L=$PWD/build/lib/libmeld.so; [ $lib = prev ] && L=$PWD/build/lib_prev/libmeld.so
  env $e MELD_LIBRARY=$L BENCH_SETTLE_MS=300 timeout -k 5 "$(tl 50)" python3 bench/gemm_fp8_torch.py --rowwise --shapes $SH \
    --rounds 3 --json "$OUT/fp8_rowwise_${lib}_$v.jsonl" > "$OUT/fp8_rowwise_${lib}_$v.log" 2>&1
  echo "== (B) rowwise $lib $v rc=$? at $(el) s"; grep -E " meld |fast " "$OUT/fp8_rowwise_${lib}_$v.log" | head -6
done; done
for lib in prev new; do for v in default ppcl2; do
  e=IP_ROW_NO_ENV=1; [ $v = ppcl2 ] && e=$PP
  L=$PWD/build/lib/libmeld.so; [ $lib = prev ] && L=$PWD/build/lib_prev/libmeld.so
  env $e MELD_LIBRARY=$L BENCH_SETTLE_MS=300 timeout -k 5 "$(tl 50)" python3 bench/gemm_fp8_torch.py --shapes 8192x28672x4096,8192x8192x8192 \
    --rounds 3 --json "$OUT/fp8_tensor_${lib}_$v.jsonl" > "$OUT/fp8_tensor_${lib}_$v.log" 2>&1
  echo "== (B) per tensor + bf16 $lib $v rc=$? at $(el) s"; grep -E " meld |fast |bf16" "$OUT/fp8_tensor_${lib}_$v.log" | head -8
done; done
MELD_GEMM_CLUSTER_EXPERIMENTAL=1 timeout -k 5 "$(tl 200)" build/tests/gpu/test_gemm > "$OUT/test_gemm_cl.log" 2>&1
echo "== (A) test_gemm (clusters on) rc=$? at $(el) s"; grep -E "FAIL|checks" "$OUT/test_gemm_cl.log" | cut -c1-140 | head -6
cd "$OUT" && tar czf s43d.tgz --remove-files $(ls | grep -v s43d.tgz); ls -la "$OUT"
echo "== done at $(el) s"
