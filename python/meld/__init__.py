"""meld for Python: the C library's operations on torch tensors, through ctypes (no build step).

    import sys; sys.path.insert(0, "<repo>/python")      # or PYTHONPATH=<repo>/python
    import torch, meld
    comm = meld.Comm.from_env()                          # under torchrun: one rank a process
    y = comm.ag_gemm(x_shard, w_col)                     # AllGather + GEMM, one kernel
    z = comm.gemm_rs(y_act, w_row)                       # GEMM + ReduceScatter, one kernel
    o = comm.ring_attention(q, k, v, causal=True, zigzag=True)
    out = comm.moe_ffn(x, topk_ids, topk_weights, w1, w2, experts=256)
    comm.destroy()

Single-GPU ops need no communicator: meld.gemm(a, w), meld.gemm_fp8(a8, w8, scale_a, scale_b)
(float8_e4m3fn in, bf16 out, per-tensor or rowwise scales as torch._scaled_mm's: one element, or
[M, 1] / [1, N]; meld.fp8_quantize(x) makes them), meld.attention(q, k, v). The fused
tensor-parallel GEMMs have fp8 forms too: comm.ag_gemm_fp8, comm.gemm_rs_fp8, comm.gemm_ar_fp8
(the arguments of meld.gemm_fp8, weights [N, K] only). Everything runs on torch's current stream
and returns at once; failures raise MeldError (subclasses per result code, e.g.
MeldArgumentError is also a ValueError) carrying the library's sentence. The library is
libmeld.so of the repository's build tree, or $MELD_LIBRARY. torch is needed for the ops, not for
importing the module.
"""
from ._capi import (MeldAbortedError, MeldArgumentError, MeldError, MeldOutOfMemoryError,
                    MeldTimeoutError, MeldUnsupportedError, library_path, strerror, version)
from ._ops import Comm, MoeDispatch, attention, fp8_quantize, gemm, gemm_fp8, get_unique_id

try:  # the ops as torch.ops.meld.* for torch.compile, where torch is installed
    import torch as _torch  # noqa: F401
except ImportError:
    _torch = None
if _torch is not None:
    from . import _ops as _ops_mod
    _ops_mod._torch_mod = _torch
    from . import _compile  # noqa: F401

__all__ = ["Comm", "MoeDispatch", "attention", "fp8_quantize", "gemm", "gemm_fp8", "get_unique_id",
           "version", "strerror", "library_path", "MeldError", "MeldArgumentError", "MeldTimeoutError",
           "MeldAbortedError", "MeldUnsupportedError", "MeldOutOfMemoryError"]
