#!/usr/bin/env python3
"""test_python_capi.py: the Python binding (python/meld) against include/meld.h, on the CPU.

- Layout: a C program compiled against meld.h prints every field's offset and size, every
  struct's size and every constant; each must equal the ctypes definition in _capi.py.
- Prototypes: every function declared in meld.h is bound with the C types of its declaration
  (mapped to ctypes), and nothing is bound that the header lacks.
- Behaviour with no GPU needed: version, result names, unique ids, errors raised as the right
  classes with the library's sentences (no GPU: Comm init says so), a missing library named.
"""
import ctypes
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pycheck import check, finish  # noqa: E402

import meld  # noqa: E402
from meld import _capi as C  # noqa: E402

HEADER = os.path.join(ROOT, "include", "meld.h")
CUDA_HOME = os.environ.get("CUDA_HOME", "/usr/local/cuda")


def c_layout():
    """{"struct.field": (offset, size)}, {"struct": size}, {"CONSTANT": value} from the C compiler."""
    lines = ["#include <stddef.h>", "#include <stdio.h>", "#include <meld.h>", "int main(void) {"]
    for sname, cls in C.STRUCTS.items():
        lines.append(f'printf("S {sname} %zu\\n", sizeof({sname}));')
        for fname, _ in cls._fields_:
            lines.append(f'printf("F {sname}.{fname} %zu %zu\\n", offsetof({sname}, {fname}), '
                         f'sizeof((({sname} *)0)->{fname}));')
    for cname in C.CONSTANTS:
        lines.append(f'printf("C {cname} %lld\\n", (long long)({cname}));')
    lines.append('printf("V %d\\n", MELD_VERSION_CODE);')
    lines.append("meld_config_t ci = MELD_CONFIG_INIT;")
    lines.append('printf("I %zu %u %zu %lld %lld %d %d %d\\n", ci.size, ci.version, ci.workspace_bytes, '
                 '(long long)ci.timeout_ms, (long long)ci.bootstrap_timeout_ms, ci.port, ci.node_id, '
                 'ci.trace_path != NULL);')
    lines.append("return 0; }")
    with tempfile.TemporaryDirectory() as d:
        src, exe = os.path.join(d, "layout.c"), os.path.join(d, "layout")
        with open(src, "w") as f:
            f.write("\n".join(lines) + "\n")
        cc = os.environ.get("CC", "gcc")
        subprocess.run([cc, "-std=c11", "-Wall", "-Werror", f"-I{ROOT}/include",
                        f"-I{CUDA_HOME}/include", src, "-o", exe], check=True)
        out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
    fields, sizes, consts, ver = {}, {}, {}, None
    for line in out.splitlines():
        kind, name, *vals = line.split()
        if kind == "I":
            consts["MELD_CONFIG_INIT"] = [int(v) for v in [name] + vals]
        elif kind == "F":
            fields[name] = (int(vals[0]), int(vals[1]))
        elif kind == "S":
            sizes[name] = int(vals[0])
        elif kind == "C":
            consts[name] = int(vals[0])
        else:
            ver = int(name)
    return fields, sizes, consts, ver


def test_layout():
    fields, sizes, consts, ver = c_layout()
    for sname, cls in C.STRUCTS.items():
        check(ctypes.sizeof(cls) == sizes[sname],
              f"sizeof({sname}): C {sizes[sname]}, ctypes {ctypes.sizeof(cls)}")
        for fname, ftype in cls._fields_:
            off, size = fields[f"{sname}.{fname}"]
            got = getattr(cls, fname)
            check(got.offset == off and got.size == size,
                  f"{sname}.{fname}: C offset {off} size {size}, ctypes {got.offset} {got.size}")
    for cname, value in C.CONSTANTS.items():
        check(consts[cname] == value, f"{cname}: C {consts[cname]}, Python {value}")
    check(meld.version() == ver, f"meld_version() {meld.version()} != MELD_VERSION_CODE {ver}")
    from meld import _ops
    c = _ops._config()
    mine = [c.size, c.version, c.workspace_bytes, c.timeout_ms, c.bootstrap_timeout_ms, c.port, c.node_id,
            int(c.trace_path is not None)]
    check(mine == consts["MELD_CONFIG_INIT"], f"MELD_CONFIG_INIT {consts['MELD_CONFIG_INIT']} vs _config() {mine}")


def header_prototypes():
    text = open(HEADER).read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"^\s*#.*$", " ", text, flags=re.M)
    protos = {}
    for m in re.finditer(r"([A-Za-z_][\w \t\*]*?)\b(meld_\w+)\s*\(([^;{}]*?)\)\s*;", text):
        ret, name, params = m.group(1), m.group(2), m.group(3)
        if "typedef" in ret or "}" in ret:
            continue
        ret = ret.split("\n")[-1].strip()
        plist = [] if params.strip() in ("", "void") else [p.strip() for p in params.split(",")]
        protos[name] = (ret, plist)
    return protos


def ctype_of(decl, with_name=True):
    """The ctypes type of a C declaration ("const meld_gemm_args_t *args" -> POINTER(GemmArgs))."""
    decl = " ".join(decl.replace("*", " * ").split())
    if with_name:
        decl = decl.rsplit(" ", 1)[0] if not decl.endswith("*") else decl
    decl = decl.replace("const ", "").strip()
    stars = decl.count("*")
    base = decl.replace("*", "").strip()
    scalar = {"meld_result_t": C.c_int, "int": C.c_int, "int32_t": C.c_int32, "int64_t": C.c_int64,
              "size_t": C.c_size_t, "meld_dtype_t": C.c_int, "meld_comm_t": C.c_void_p,
              "cudaStream_t": C.c_void_p, "float": C.c_float}
    if base == "char" and stars == 1:
        return C.c_char_p
    if base == "void" and stars == 1:
        return C.c_void_p
    if base == "void" and stars == 2:
        return ctypes.POINTER(C.c_void_p)
    t = scalar.get(base) or C.STRUCTS.get(base)
    if t is None:
        raise KeyError(f"no ctypes mapping for C type {base!r}")
    for _ in range(stars):
        t = ctypes.POINTER(t)
    return t


def test_prototypes():
    protos = header_prototypes()
    check(len(protos) >= 30, f"parsed only {len(protos)} prototypes from meld.h")
    for name, (ret, params) in protos.items():
        if name not in C.FUNCTIONS:
            check(False, f"{name} is declared in meld.h but not bound in _capi.FUNCTIONS")
            continue
        res, args = C.FUNCTIONS[name]
        check(ctype_of(ret, with_name=False) == res, f"{name}: result type {ret} vs {res}")
        want = [ctype_of(p) for p in params]
        check(want == args, f"{name}: parameters {params} map to {want}, bound as {args}")
    for name in C.FUNCTIONS:
        check(name in protos, f"_capi binds {name}, which meld.h does not declare")


def test_behaviour():
    for code in range(C.NUM_RESULTS):
        check(meld.strerror(code).startswith("MELD_"), f"strerror({code}) = {meld.strerror(code)}")
    a, b = meld.get_unique_id(), meld.get_unique_id()
    check(len(a) == 128 and a != b, "two unique ids: 128 bytes each, different")
    # bad arguments: the library's sentence, the right class (also a ValueError)
    try:
        meld.Comm(1, 0, b"short")
        check(False, "Comm with a short unique id did not raise")
    except ValueError as e:
        check(isinstance(e, meld.MeldArgumentError) and "unique_id" in str(e), f"short id: {e}")
    try:
        meld.Comm(4, 7, a)
        check(False, "Comm with rank 7 of 4 did not raise")
    except meld.MeldArgumentError as e:
        check("rank 7 >= nranks 4" in str(e) and e.code == C.ERR_INVALID_ARG, f"rank 7 of 4: {e}")
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID")}
    r = subprocess.run([sys.executable, "-c",
                        "import meld\ntry:\n meld.Comm.from_env()\nexcept meld.MeldArgumentError as e:"
                        "\n print('ERR', e)"], env=dict(env, PYTHONPATH=os.path.join(ROOT, "python")),
                       capture_output=True, text=True)
    check("ERR" in r.stdout and "launcher variables" in r.stdout, f"from_env without a launcher: "
          f"{r.stdout.strip()} {r.stderr.strip()[-300:]}")
    e = C.error(C.ERR_TIMEOUT, "rank 1 did not arrive")
    check(isinstance(e, TimeoutError) and "rank 1 did not arrive [MELD_ERR_TIMEOUT" in str(e),
          f"timeout error: {e!r}")
    # a C call with bad arguments, through the raw binding
    code = C.lib.meld_gemm(None, None)
    check(code == C.ERR_INVALID_ARG and "NULL" in C.lib.meld_last_error().decode(),
          f"meld_gemm(NULL): {code} {C.lib.meld_last_error()}")
    try:
        C.check(C.lib.meld_gemm_rs_rows(100, 0, 0, None, None))
        check(False, "meld_gemm_rs_rows with nranks 0 did not raise")
    except meld.MeldArgumentError as e:
        check("meld_gemm_rs_rows" in str(e), f"gemm_rs_rows: {e}")
    # one rank: with no GPU the sentence says so; with one, init works and destroy frees it
    gpu = subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0 \
        if any(os.access(os.path.join(p, "nvidia-smi"), os.X_OK)
               for p in os.environ.get("PATH", "").split(os.pathsep)) else False
    try:
        with meld.Comm.single() as comm:
            check(gpu and comm.nranks == 1 and comm.rank == 0, f"single rank: {comm}")
    except meld.MeldError as e:
        check(not gpu and e.code == C.ERR_CUDA and "no usable CUDA device" in str(e),
              f"Comm.single() with{'' if gpu else ' no'} GPU: {e}")
    # the torch-free helpers of the ops layer: layouts, the config struct, the comm's dead handle
    from meld import _ops
    check(_ops._layout("nk") == C.B_NK and _ops._layout("kn") == C.B_KN, "b_layout names")
    try:
        _ops._layout("nn")
        check(False, "b_layout 'nn' did not raise")
    except ValueError as e:
        check("b_layout" in str(e) and "'nk'" in str(e), f"b_layout: {e}")
    cfg = _ops._config(workspace_bytes=3 << 20, timeout_ms=1500, node_id=2, trace_path="/tmp/t.json")
    check(cfg.size == ctypes.sizeof(C.Config) and cfg.version == C.CONFIG_VERSION and
          cfg.workspace_bytes == 3 << 20 and cfg.timeout_ms == 1500 and cfg.bootstrap_timeout_ms == 0 and
          cfg.port == 0 and cfg.node_id == 2 and cfg.trace_path == b"/tmp/t.json", "config fields")
    unset = _ops._config()
    check(unset.node_id == -1 and unset.workspace_bytes == 0 and unset.trace_path is None,
          "config defaults are MELD_CONFIG_INIT's")
    dead = meld.Comm.__new__(meld.Comm)
    dead._h = None
    try:
        dead.check()
        check(False, "check() on a destroyed comm did not raise")
    except meld.MeldArgumentError as e:
        check("destroyed" in str(e), f"destroyed comm: {e}")
    dead.destroy()  # (again: a no-op)
    # a missing library is named with what to do
    r = subprocess.run([sys.executable, "-c", "import meld"],
                       env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"),
                                MELD_LIBRARY="/nonexistent/libmeld.so"),
                       capture_output=True, text=True)
    check(r.returncode != 0 and "MELD_LIBRARY" in r.stderr and "make lib" in r.stderr,
          f"missing library: {r.stderr.strip()[-300:]}")


test_layout()
test_prototypes()
test_behaviour()
finish()
