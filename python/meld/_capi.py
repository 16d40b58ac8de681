"""_capi.py: meld's C API through ctypes (no torch needed here).

The structures mirror include/meld.h field by field; tests/unit/test_python_capi.py compiles a C
program that prints every field's offset and every constant from the header and compares them
with these definitions, and checks each prototype below against the header's, so a change of the
header that is not made here fails the tests.

The library is found in this order: $MELD_LIBRARY (a path to libmeld.so), the build tree next to
this package (build/lib/libmeld.so of the repository), then the system's library path.
"""
import ctypes
import os

c_void_p = ctypes.c_void_p
c_int = ctypes.c_int
c_int32 = ctypes.c_int32
c_int64 = ctypes.c_int64
c_size_t = ctypes.c_size_t
c_float = ctypes.c_float
c_char_p = ctypes.c_char_p

# meld_result_t
OK = 0
ERR_INVALID_ARG = 1
ERR_CUDA = 2
ERR_SYSTEM = 3
ERR_TIMEOUT = 4
ERR_ABORTED = 5
ERR_UNSUPPORTED = 6
ERR_OUT_OF_MEMORY = 7
ERR_INTERNAL = 8
NUM_RESULTS = 9

CONFIG_VERSION = 1
UNIQUE_ID_BYTES = 128
B_NK = 0
B_KN = 1
BF16 = 0
FP32 = 1
GEMM_RS_AUTO = 0
GEMM_RS_FUSED = 1
GEMM_RS_UNFUSED = 2
MOE_ACT_NONE = 0
MOE_ACT_SWIGLU = 1
SPLIT_NOCOLOR = -1
FP8_PER_TENSOR = 0
FP8_ROWWISE_A = 1
FP8_ROWWISE_B = 2
FP8_ROWWISE = 3

# The header's constants the layout test compares (name in meld.h -> value here).
CONSTANTS = {
    "MELD_OK": OK, "MELD_ERR_INVALID_ARG": ERR_INVALID_ARG, "MELD_ERR_CUDA": ERR_CUDA,
    "MELD_ERR_SYSTEM": ERR_SYSTEM, "MELD_ERR_TIMEOUT": ERR_TIMEOUT, "MELD_ERR_ABORTED": ERR_ABORTED,
    "MELD_ERR_UNSUPPORTED": ERR_UNSUPPORTED, "MELD_ERR_OUT_OF_MEMORY": ERR_OUT_OF_MEMORY,
    "MELD_ERR_INTERNAL": ERR_INTERNAL, "MELD_NUM_RESULTS": NUM_RESULTS,
    "MELD_CONFIG_VERSION": CONFIG_VERSION, "MELD_UNIQUE_ID_BYTES": UNIQUE_ID_BYTES,
    "MELD_B_NK": B_NK, "MELD_B_KN": B_KN, "MELD_BF16": BF16, "MELD_FP32": FP32,
    "MELD_GEMM_RS_AUTO": GEMM_RS_AUTO, "MELD_GEMM_RS_FUSED": GEMM_RS_FUSED,
    "MELD_GEMM_RS_UNFUSED": GEMM_RS_UNFUSED, "MELD_MOE_ACT_NONE": MOE_ACT_NONE,
    "MELD_MOE_ACT_SWIGLU": MOE_ACT_SWIGLU, "MELD_SPLIT_NOCOLOR": SPLIT_NOCOLOR,
    "MELD_FP8_PER_TENSOR": FP8_PER_TENSOR, "MELD_FP8_ROWWISE_A": FP8_ROWWISE_A,
    "MELD_FP8_ROWWISE_B": FP8_ROWWISE_B, "MELD_FP8_ROWWISE": FP8_ROWWISE,
}


class Config(ctypes.Structure):
    _fields_ = [("size", c_size_t), ("version", ctypes.c_uint), ("workspace_bytes", c_size_t),
                ("timeout_ms", c_int64), ("bootstrap_timeout_ms", c_int64), ("port", c_int),
                ("node_id", c_int), ("trace_path", c_char_p)]


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * UNIQUE_ID_BYTES)]


class CommInfo(ctypes.Structure):
    _fields_ = [("rank", c_int), ("nranks", c_int), ("local_rank", c_int), ("local_size", c_int),
                ("node", c_int), ("nnodes", c_int), ("device", c_int), ("sm_count", c_int),
                ("workspace_bytes", c_size_t), ("net_transport", ctypes.c_char * 8)]


class GemmArgs(ctypes.Structure):
    _fields_ = [("a", c_void_p), ("lda", c_int64), ("b", c_void_p), ("ldb", c_int64),
                ("b_layout", c_int), ("c", c_void_p), ("ldc", c_int64), ("m", c_int64),
                ("n", c_int64), ("k", c_int64), ("sm_count", c_int)]


class GemmFp8Args(ctypes.Structure):
    _fields_ = [("a", c_void_p), ("lda", c_int64), ("b", c_void_p), ("ldb", c_int64),
                ("scale_a", c_void_p), ("scale_b", c_void_p), ("scaling", c_int), ("c", c_void_p),
                ("ldc", c_int64),
                ("m", c_int64), ("n", c_int64), ("k", c_int64), ("sm_count", c_int)]


class Fp8QuantizeArgs(ctypes.Structure):
    _fields_ = [("x", c_void_p), ("ldx", c_int64), ("out", c_void_p), ("ldo", c_int64),
                ("scale", c_void_p), ("rows", c_int64), ("cols", c_int64), ("rowwise", c_int)]


class AttentionArgs(ctypes.Structure):
    _fields_ = [("q", c_void_p), ("k", c_void_p), ("v", c_void_p), ("o", c_void_p),
                ("lse", c_void_p), ("stride_q", c_int64), ("stride_k", c_int64),
                ("stride_v", c_int64), ("stride_o", c_int64), ("batch", c_int64),
                ("seq_q", c_int64), ("seq_kv", c_int64), ("heads", c_int64), ("heads_kv", c_int64),
                ("head_dim", c_int64), ("causal", c_int), ("scale", c_float), ("q_pos0", c_int64),
                ("kv_pos0", c_int64), ("zigzag", c_int)]


class GemmRsArgs(ctypes.Structure):
    _fields_ = [("a", c_void_p), ("lda", c_int64), ("b", c_void_p), ("ldb", c_int64),
                ("b_layout", c_int), ("c", c_void_p), ("ldc", c_int64), ("m", c_int64),
                ("n", c_int64), ("k", c_int64), ("algo", c_int)]


class AgGemmArgs(ctypes.Structure):
    _fields_ = [("a_shard", c_void_p), ("lda", c_int64), ("b", c_void_p), ("ldb", c_int64),
                ("b_layout", c_int), ("c", c_void_p), ("ldc", c_int64), ("a_gathered", c_void_p),
                ("ld_gathered", c_int64), ("m_loc", c_int64), ("n_loc", c_int64), ("k", c_int64)]


class GemmRsFp8Args(ctypes.Structure):
    _fields_ = [("a", c_void_p), ("lda", c_int64), ("b", c_void_p), ("ldb", c_int64),
                ("scale_a", c_void_p), ("scale_b", c_void_p), ("scaling", c_int), ("c", c_void_p),
                ("ldc", c_int64),
                ("m", c_int64), ("n", c_int64), ("k", c_int64), ("algo", c_int)]


class AgGemmFp8Args(ctypes.Structure):
    _fields_ = [("a_shard", c_void_p), ("lda", c_int64), ("b", c_void_p), ("ldb", c_int64),
                ("scale_a", c_void_p), ("scale_b", c_void_p), ("scaling", c_int), ("c", c_void_p),
                ("ldc", c_int64),
                ("a_gathered", c_void_p), ("ld_gathered", c_int64), ("m_loc", c_int64),
                ("n_loc", c_int64), ("k", c_int64)]


class MoeArgs(ctypes.Structure):
    _fields_ = [("x", c_void_p), ("ldx", c_int64), ("topk_ids", c_void_p), ("tokens", c_int64),
                ("topk", c_int32), ("experts", c_int32), ("hidden", c_int64), ("w", c_void_p),
                ("n", c_int64), ("y", c_void_p), ("capacity", c_int64),
                ("expert_offsets", c_void_p), ("expert_counts", c_void_p),
                ("row_origin", c_void_p), ("activation", c_int32)]


class MoeGemmArgs(ctypes.Structure):
    _fields_ = [("dispatch", ctypes.POINTER(MoeArgs)), ("a", c_void_p), ("k", c_int64),
                ("w", c_void_p), ("n", c_int64), ("c", c_void_p)]


class MoeCombineArgs(ctypes.Structure):
    _fields_ = [("dispatch", ctypes.POINTER(MoeArgs)), ("y2", c_void_p),
                ("topk_weights", c_void_p), ("out", c_void_p), ("ldo", c_int64)]


class MoeFfnArgs(ctypes.Structure):
    _fields_ = [("x", c_void_p), ("ldx", c_int64), ("topk_ids", c_void_p),
                ("topk_weights", c_void_p), ("tokens", c_int64), ("topk", c_int32),
                ("experts", c_int32), ("hidden", c_int64), ("w1", c_void_p), ("w2", c_void_p),
                ("ffn", c_int64), ("out", c_void_p), ("ldo", c_int64), ("capacity", c_int64),
                ("scratch", c_void_p), ("expert_counts", c_void_p)]


# The header's struct name of each class (the layout test's table).
STRUCTS = {
    "meld_config_t": Config, "meld_unique_id": UniqueId, "meld_comm_info_t": CommInfo,
    "meld_gemm_args_t": GemmArgs, "meld_gemm_fp8_args_t": GemmFp8Args,
    "meld_fp8_quantize_args_t": Fp8QuantizeArgs,
    "meld_attention_args_t": AttentionArgs,
    "meld_gemm_rs_args_t": GemmRsArgs, "meld_ag_gemm_args_t": AgGemmArgs,
    "meld_gemm_rs_fp8_args_t": GemmRsFp8Args, "meld_ag_gemm_fp8_args_t": AgGemmFp8Args,
    "meld_moe_args_t": MoeArgs, "meld_moe_gemm_args_t": MoeGemmArgs,
    "meld_moe_combine_args_t": MoeCombineArgs, "meld_moe_ffn_args_t": MoeFfnArgs,
}

_R = c_int  # meld_result_t
_P = ctypes.POINTER

# Every function of meld.h: (result type, argument types). The prototype test parses the header
# and checks that each one is here with these types (and that nothing here is missing there).
FUNCTIONS = {
    "meld_strerror": (c_char_p, [c_int]),
    "meld_last_error": (c_char_p, []),
    "meld_version": (c_int, []),
    "meld_get_unique_id": (_R, [_P(UniqueId)]),
    "meld_comm_init": (_R, [_P(c_void_p), c_int, UniqueId, c_int, _P(Config)]),
    "meld_comm_init_env": (_R, [_P(c_void_p), _P(Config)]),
    "meld_comm_split": (_R, [c_void_p, c_int, c_int, _P(Config), _P(c_void_p)]),
    "meld_comm_destroy": (_R, [c_void_p]),
    "meld_comm_abort": (_R, [c_void_p]),
    "meld_comm_check": (_R, [c_void_p]),
    "meld_comm_info": (_R, [c_void_p, _P(CommInfo)]),
    "meld_mem_alloc": (_R, [c_void_p, c_size_t, _P(c_void_p)]),
    "meld_mem_free": (_R, [c_void_p, c_void_p]),
    "meld_mem_register": (_R, [c_void_p, c_void_p, c_size_t]),
    "meld_mem_deregister": (_R, [c_void_p, c_void_p]),
    "meld_mem_peer_ptr": (_R, [c_void_p, c_void_p, c_int, _P(c_void_p)]),
    "meld_gemm": (_R, [_P(GemmArgs), c_void_p]),
    "meld_gemm_fp8": (_R, [_P(GemmFp8Args), c_void_p]),
    "meld_fp8_quantize": (_R, [_P(Fp8QuantizeArgs), c_void_p]),
    "meld_attention": (_R, [_P(AttentionArgs), c_void_p]),
    "meld_ring_attention": (_R, [c_void_p, _P(AttentionArgs), c_void_p]),
    "meld_all_gather": (_R, [c_void_p, c_void_p, c_void_p, c_size_t, c_int, c_void_p]),
    "meld_reduce_scatter": (_R, [c_void_p, c_void_p, c_void_p, c_size_t, c_int, c_void_p]),
    "meld_all_reduce": (_R, [c_void_p, c_void_p, c_void_p, c_size_t, c_int, c_void_p]),
    "meld_all_to_all": (_R, [c_void_p, c_void_p, c_void_p, c_size_t, c_int, c_void_p]),
    "meld_all_to_allv": (_R, [c_void_p, c_void_p, _P(c_size_t), _P(c_size_t), c_void_p,
                              _P(c_size_t), _P(c_size_t), c_int, c_void_p]),
    "meld_gemm_rs_rows": (_R, [c_int64, c_int, c_int, _P(c_int64), _P(c_int64)]),
    "meld_gemm_rs": (_R, [c_void_p, _P(GemmRsArgs), c_void_p]),
    "meld_gemm_ar": (_R, [c_void_p, _P(GemmRsArgs), c_void_p]),
    "meld_gemm_rs_fp8": (_R, [c_void_p, _P(GemmRsFp8Args), c_void_p]),
    "meld_gemm_ar_fp8": (_R, [c_void_p, _P(GemmRsFp8Args), c_void_p]),
    "meld_ag_gemm": (_R, [c_void_p, _P(AgGemmArgs), c_void_p]),
    "meld_ag_gemm_fp8": (_R, [c_void_p, _P(AgGemmFp8Args), c_void_p]),
    "meld_moe_dispatch_gemm": (_R, [c_void_p, _P(MoeArgs), c_void_p]),
    "meld_moe_grouped_gemm": (_R, [c_void_p, _P(MoeGemmArgs), c_void_p]),
    "meld_moe_combine": (_R, [c_void_p, _P(MoeCombineArgs), c_void_p]),
    "meld_moe_workspace_bytes": (c_size_t, [c_int, c_int64, c_int32, c_int32, c_int64, c_int64]),
    "meld_moe_ffn": (_R, [c_void_p, _P(MoeFfnArgs), c_void_p]),
    "meld_moe_ffn_scratch_bytes": (c_size_t, [c_int, c_int32, c_int64, c_int64, c_int64]),
}


def _find_library():
    tried = []
    path = os.environ.get("MELD_LIBRARY")
    if path:
        return path, tried
    here = os.path.dirname(os.path.abspath(__file__))
    candidate = os.path.normpath(os.path.join(here, "..", "..", "build", "lib", "libmeld.so"))
    tried.append(candidate)
    if os.path.exists(candidate):
        return candidate, tried
    import ctypes.util
    found = ctypes.util.find_library("meld")
    tried.append("the system library path (libmeld.so)")
    return found or "libmeld.so", tried


def _load():
    path, tried = _find_library()
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise ImportError(
            f"meld: cannot load the C library ({e}); looked at {', '.join(tried) or path}. Build it "
            "with `make lib` in the repository, `make install`, or set MELD_LIBRARY to the path "
            "of libmeld.so") from None
    for name, (res, args) in FUNCTIONS.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args
    # The CUDA runtime meld itself uses (looked up through libmeld's own dependencies), for
    # the current device of the calling thread: meld's ops run on that device.
    for name, args in (("cudaGetDevice", [_P(c_int)]), ("cudaSetDevice", [c_int])):
        fn = getattr(lib, name)
        fn.restype = c_int
        fn.argtypes = args
    return lib, path


lib, library_path = _load()


class MeldError(RuntimeError):
    """A meld call failed: .code is the meld_result_t, .name its short name, and the message is
    the library's sentence (meld_last_error)."""

    def __init__(self, code, message):
        self.code = code
        self.name = lib.meld_strerror(code).decode()
        super().__init__(f"{message} [{self.name}]" if message else self.name)


class MeldArgumentError(MeldError, ValueError):
    """MELD_ERR_INVALID_ARG: a bad argument (also a ValueError)."""


class MeldTimeoutError(MeldError, TimeoutError):
    """MELD_ERR_TIMEOUT: a wait passed its deadline (a peer did not take part)."""


class MeldAbortedError(MeldError):
    """MELD_ERR_ABORTED: the communicator was aborted (by a peer, the user or a failed call)."""


class MeldUnsupportedError(MeldError, NotImplementedError):
    """MELD_ERR_UNSUPPORTED: valid, but not supported on this configuration."""


class MeldOutOfMemoryError(MeldError, MemoryError):
    """MELD_ERR_OUT_OF_MEMORY: an allocation failed, or the workspace is too small."""


_CLASSES = {ERR_INVALID_ARG: MeldArgumentError, ERR_TIMEOUT: MeldTimeoutError,
            ERR_ABORTED: MeldAbortedError, ERR_UNSUPPORTED: MeldUnsupportedError,
            ERR_OUT_OF_MEMORY: MeldOutOfMemoryError}


def error(code, message):
    """The exception for result `code` with `message`."""
    return _CLASSES.get(code, MeldError)(code, message)


def check(code):
    """Raises the exception of a failed call (its sentence read on this thread, right after)."""
    if code != OK:
        raise error(code, lib.meld_last_error().decode(errors="replace"))


def strerror(code):
    return lib.meld_strerror(code).decode()


def version():
    """The library's version code (major * 10000 + minor * 100 + patch)."""
    return lib.meld_version()


def current_device():
    d = c_int(-1)
    if lib.cudaGetDevice(ctypes.byref(d)) != 0:
        return -1
    return d.value


def set_device(device):
    e = lib.cudaSetDevice(device)
    if e != 0:
        raise error(ERR_CUDA, f"cudaSetDevice({device}) failed (CUDA error {e})")
