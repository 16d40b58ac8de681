#!/usr/bin/env bash
# p1_s34n.sh — ONE GPU (no kernel run): call 13's Nsight Compute report of the one-CTA routing
# kernel at decode (carried back as build/carry/route.ncu-rep) printed as SASS with warp-state
# samples: the header, the top instructions by samples, and the samples summed by stall reason.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
"$NCU" -i build/carry/route.ncu-rep --page source --csv --print-source sass > "$OUT/sass.csv" 2> "$OUT/sass.err"
echo "rc=$? $(wc -l < "$OUT/sass.csv") lines"; head -c 300 "$OUT/sass.err"
python3 - "$OUT/sass.csv" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if r]
hi = next(i for i, r in enumerate(rows) if len(r) > 4)
h = rows[hi]; body = [r for r in rows[hi + 1:] if len(r) == len(h)]
print("columns:", h)
def num(x):
    try: return float(x.replace(",", ""))
    except: return 0.0
k = next((i for i, c in enumerate(h) if "Warp Stall Sampling (All" in c), None)
if k is None: sys.exit("no sampling column")
tot = sum(num(r[k]) for r in body)
print(f"instructions {len(body)}, samples {tot:.0f}")
src = next((i for i, c in enumerate(h) if c == "Source"), 1)
adr = next((i for i, c in enumerate(h) if c == "Address"), 0)
for r in sorted(body, key=lambda r: -num(r[k]))[:45]:
    print(f"{num(r[k]):6.0f} {100*num(r[k])/tot:5.1f}% {r[adr]:>8} {r[src][:90]}")
# cumulative by address ranges of 200 instructions, to see which part of the kernel
acc = 0
for i in range(0, len(body), 200):
    s = sum(num(r[k]) for r in body[i:i+200]); acc += s
    print(f"  instrs {i:5d}-{i+199:5d}: {100*s/tot:5.1f}%")
PY
