"""ncu_top.py SOURCE.csv [N] — reads an Nsight Compute source page (ncu -i R --page source --csv
--print-source sass): total warp-stall samples, the stall reasons, and the N instructions with
the most samples (bench/ncu_rs.sh writes such files)."""
import csv,sys
f=sys.argv[1]
lines=open(f).read().splitlines()
rows=list(csv.reader(lines[1:]))
h=rows[0]
idx={k:i for i,k in enumerate(h)}
data=[r for r in rows[1:] if len(r)==len(h)]
def num(x):
    try: return float(x.replace(',',''))
    except: return 0.0
tot=sum(num(r[idx["Warp Stall Sampling (All Samples)"]]) for r in data)
print("instructions",len(data),"total samples",tot)
stalls=[k for k in h if k.startswith("stall_") and "Not Issued" not in k]
agg={k:sum(num(r[idx[k]]) for r in data) for k in stalls}
print(sorted(((round(v/tot*100,1),k) for k,v in agg.items()),reverse=True)[:8])
data.sort(key=lambda r:-num(r[idx["Warp Stall Sampling (All Samples)"]]))
for r in data[:int(sys.argv[2]) if len(sys.argv)>2 else 30]:
    s=num(r[idx["Warp Stall Sampling (All Samples)"]])
    top=sorted(((num(r[idx[k]]),k) for k in stalls),reverse=True)[:2]
    print(f'{r[idx["Address"]]:>6s} {s/tot*100:5.1f}% {r[idx["Source"]][:70]:70s} {top[0][1]}:{top[0][0]:.0f} {top[1][1]}:{top[1][0]:.0f} exec={r[idx["Instructions Executed"]]}')
