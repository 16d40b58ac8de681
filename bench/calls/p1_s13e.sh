#!/usr/bin/env bash
# p1_s13e.sh — ONE GPU, session 13 call 5: (1) test_ag_gemm at one rank (the session's only
# device-code change: the DIAG bit 2 start barrier, off by default); (2) why the GEMM+RS kernel
# instantiated with hook g (RED) costs ~2% over the same kernel without it when every hook is
# off (call 4: diag 8 0.8585 vs diag 16 0.8433 vs meld_gemm_plain 0.8409 ms sustained; session
# 8: 1,185,486 vs 1,153,857 cycles): SASS of both instantiations and of meld_gemm's kernel, and
# Nsight Compute source counters (executed instructions, stall samples) of one launch each.
# Usage (device): OUT=... bash bench/calls/p1_s13e.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/tests/gpu/test_ag_gemm build/bench/bench_gemm_rs
MELD_TIMEOUT_MS=3000 timeout -k 5 240 build/tests/gpu/test_ag_gemm > "$OUT/test_ag_gemm.log" 2>&1
echo "test_ag_gemm rc=$? at $(el) s"; grep -E "FAIL|checks passed" "$OUT/test_ag_gemm.log" | cut -c1-150 | head -5
CUOBJ=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
for o in gemm_rs gemm; do "$CUOBJ" -sass build/obj/src/ops/$o.o > "$OUT/sass_$o.txt" 2>&1; done
/usr/bin/env python3 - "$OUT" <<'PY'
import re, sys, gzip
out = sys.argv[1]
keep = {"gemm_rs": ["_Z14gemm_rs_kernelILb0ELb0ELb0ELb0EE", "_Z14gemm_rs_kernelILb0ELb0ELb1ELb0EE"],
        "gemm": ["_Z11gemm_kernelILb0ELi0ELi256EE", "_Z11gemm_kernelILb0ELi1ELi256EE"]}
for o, names in keep.items():
    txt = open(f"{out}/sass_{o}.txt").read()
    parts = re.split(r"(?=\n\s+Function : )", txt)
    sel = [p for p in parts if any(n in p.split("\n", 2)[1] for n in names)]
    print(o, "functions:", len(parts) - 1, "kept:", [p.split("\n", 2)[1].strip()[:70] for p in sel])
    with gzip.open(f"{out}/sass_{o}.txt.gz", "wt") as f: f.write("".join(sel))
PY
rm -f "$OUT"/sass_*.txt
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for d in 8 16; do
  MELD_GEMM_RS_DIAG=$d timeout -k 5 150 "$NCU" --clock-control none -k regex:gemm_rs_kernel --launch-skip 1 --launch-count 1 \
    --import-source yes --section WarpStateStats --section SourceCounters --section SpeedOfLight --section LaunchStats \
    -o "$OUT/rs_d$d" -f build/bench/bench_gemm_rs --op rs --shape 8192,8192,4096 > "$OUT/ncu_d$d.log" 2>&1
  echo "ncu diag $d rc=$? at $(el) s"
  "$NCU" -i "$OUT/rs_d$d.ncu-rep" --page details > "$OUT/details_d$d.log" 2>&1
  "$NCU" -i "$OUT/rs_d$d.ncu-rep" --page source --csv --print-source sass > "$OUT/source_d$d.csv" 2>&1
  gzip -f "$OUT/source_d$d.csv"; rm -f "$OUT/rs_d$d.ncu-rep"
  grep -E "Duration|Elapsed Cycles|Registers Per|Warp Cycles Per Issued|Issued Warp|No Eligible" "$OUT/details_d$d.log" | head -8
done
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log build.log
ls -la "$OUT"
