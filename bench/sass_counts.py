"""sass_counts.py LIB_OR_OBJ... — per GEMM kernel of each file, from `cuobjdump -sass` (run on a
machine with the CUDA toolkit's cuobjdump; this repository's CPU machine has none): SASS
instructions, wgmma instructions (HGMMA/QGMMA), R2UR moves (per-thread values moved into uniform
registers, e.g. wgmma descriptors built per thread: session 43 found 32 a k-block in the
ping-pong kernel's 142), and uniform-datapath instructions (U*). Kernels whose name matches
--match (default gemm_kernel|ag_gemm_kernel|gemm_rs_kernel|moe_gemm_kernel). Compare two builds
by passing both files: the rows are printed per file, in name order.
Usage: python3 bench/sass_counts.py [--match RE] build/lib_prev/libmeld.so build/lib/libmeld.so"""
import argparse
import re
import shutil
import subprocess
import sys


def counts(path, pat, cuobjdump):
    out = subprocess.run([cuobjdump, "-sass", path], capture_output=True, text=True).stdout
    res, cur = {}, None
    for line in out.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            cur = m.group(1) if pat.search(m.group(1)) else None
            if cur:
                res[cur] = [0, 0, 0, 0]
            continue
        if not cur:
            continue
        m = re.match(r"\s+/\*[0-9a-f]{4,}\*/\s+(@!?U?P\w+\s+)?([A-Z0-9_.]+)", line)
        if not m:
            continue
        op = m.group(2)
        c = res[cur]
        c[0] += 1
        c[1] += "GMMA." in op
        c[2] += op.startswith("R2UR")
        c[3] += op.startswith("U")
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--match", default=r"gemm_kernel|ag_gemm_kernel|gemm_rs_kernel|moe_gemm_kernel")
    args = ap.parse_args()
    cuobjdump = shutil.which("cuobjdump") or "/usr/local/cuda/bin/cuobjdump"
    pat = re.compile(args.match)
    for f in args.files:
        print(f)
        for name, (n, g, r, u) in sorted(counts(f, pat, cuobjdump).items()):
            print(f"  {name[:64]:64s} inst {n:6d} gmma {g:3d} r2ur {r:4d} uniform {u:5d}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
