"""ncu_diff.py A.csv B.csv [N] — two Nsight Compute source pages of the same kernel binary: the N
instructions (by offset from the first) whose warp-stall samples grew most from B to A."""
import csv,sys
def load(f):
    lines=open(f).read().splitlines()
    rows=list(csv.reader(lines[1:]))
    h=rows[0]; idx={k:i for i,k in enumerate(h)}
    data=[r for r in rows[1:] if len(r)==len(h)]
    def num(x):
        try: return float(x.replace(',',''))
        except: return 0.0
    base=int(data[0][idx["Address"]],16)
    out=[]
    stalls=[k for k in h if k.startswith("stall_") and "Not Issued" not in k]
    for r in data:
        off=int(r[idx["Address"]],16)-base
        st=sorted(((num(r[idx[k]]),k) for k in stalls),reverse=True)[:2]
        out.append((off,r[idx["Source"]].strip(),num(r[idx["Warp Stall Sampling (All Samples)"]]),num(r[idx["Instructions Executed"]]),num(r[idx["Thread Instructions Executed"]]),st))
    return out
a=load(sys.argv[1]); b=load(sys.argv[2])
print(len(a),len(b), sum(x[2] for x in a), sum(x[2] for x in b))
bm={x[0]:x for x in b}
d=[]
for x in a:
    y=bm.get(x[0])
    if y is None: continue
    d.append((x[2]-y[2],x,y))
d.sort(key=lambda t:-t[0])
for dd,x,y in d[:int(sys.argv[3])]:
    print(f'{x[0]:6x} +{dd:6.0f} ({x[2]:6.0f} vs {y[2]:6.0f}) exec {x[3]:9.0f} vs {y[3]:9.0f} thr {x[4]:10.0f} {x[1][:60]:60s} {x[5][0][1]}')
