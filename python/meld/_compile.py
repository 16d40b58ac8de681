"""_compile.py: meld's ops as torch custom operators (torch.ops.meld.*), so that torch.compile
traces them (fullgraph, no graph break) as opaque calls with known output shapes.

The methods of Comm and the module functions switch to these operators while torch.compile traces
(torch.compiler.is_compiling()); eagerly they call the library directly (a custom operator's
dispatch would add host time). A communicator enters an operator as its integer id (Comm.id), an
input of the graph's constant kind, and whatever of it decides an output's shape (the rank count;
gemm_rs's row count) enters as an argument too: torch's compiled-graph caches key on the graph,
not on a communicator's state (a fake kernel that read the rank count from the comm made a
2-rank process reuse a 1-rank graph's compiled shape checks: session 36). Inside a compiled region the functional forms are supported:
no out=, no in-place all_reduce, and ag_gemm's (ag_gemm_fp8's) gathered=True only as its own
operator.
"""
from typing import List, Optional

import torch
from torch import Tensor

from . import _ops

def _comm(cid, nranks=None):
    c = _ops._comms.get(cid)
    if c is None:
        raise _ops._err(f"meld comm id {cid}: no such communicator (destroyed?)")
    if nranks is not None and c.nranks != nranks:
        raise _ops._err(f"meld comm id {cid}: traced for {nranks} ranks, the comm has {c.nranks}")
    return c


_LAYOUTS = ("nk", "kn")


@torch.library.custom_op("meld::gemm", mutates_args=())
def gemm(a: Tensor, b: Tensor, kn: bool) -> Tensor:
    return _ops.gemm(a, b, b_layout=_LAYOUTS[kn])


@gemm.register_fake
def _(a, b, kn):
    return a.new_empty((a.size(0), b.size(1) if kn else b.size(0)))


@torch.library.custom_op("meld::gemm_fp8", mutates_args=())
def gemm_fp8(a: Tensor, b: Tensor, scale_a: Optional[Tensor], scale_b: Optional[Tensor],
             sm_count: int) -> Tensor:
    return _ops.gemm_fp8(a, b, scale_a, scale_b, sm_count=sm_count)


@gemm_fp8.register_fake
def _(a, b, scale_a, scale_b, sm_count):
    return a.new_empty((a.size(0), b.size(0)), dtype=torch.bfloat16)


@torch.library.custom_op("meld::attention", mutates_args=())
def attention(q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: float, q_pos0: int,
              kv_pos0: int) -> tuple[Tensor, Tensor]:
    return _ops.attention(q, k, v, causal=causal, scale=scale, q_pos0=q_pos0, kv_pos0=kv_pos0,
                          return_lse=True)


@attention.register_fake
def _(q, k, v, causal, scale, q_pos0, kv_pos0):
    b, s, h, _d = q.shape
    return q.new_empty(q.shape), q.new_empty((b, h, s), dtype=torch.float32)


@torch.library.custom_op("meld::all_gather", mutates_args=())
def all_gather(cid: int, nranks: int, x: Tensor) -> Tensor:
    return _comm(cid, nranks).all_gather(x)


@all_gather.register_fake
def _(cid, nranks, x):
    return x.new_empty((nranks * x.size(0),) + tuple(x.shape[1:]))


@torch.library.custom_op("meld::reduce_scatter", mutates_args=())
def reduce_scatter(cid: int, nranks: int, x: Tensor) -> Tensor:
    return _comm(cid, nranks).reduce_scatter(x)


@reduce_scatter.register_fake
def _(cid, nranks, x):
    return x.new_empty((x.size(0) // nranks,) + tuple(x.shape[1:]))


@torch.library.custom_op("meld::all_reduce", mutates_args=())
def all_reduce(cid: int, x: Tensor) -> Tensor:
    return _comm(cid).all_reduce(x)


@all_reduce.register_fake
def _(cid, x):
    return torch.empty_like(x)


@torch.library.custom_op("meld::all_to_all", mutates_args=())
def all_to_all(cid: int, x: Tensor) -> Tensor:
    return _comm(cid).all_to_all(x)


@all_to_all.register_fake
def _(cid, x):
    return torch.empty_like(x)


@torch.library.custom_op("meld::all_to_allv", mutates_args=())
def all_to_allv(cid: int, x: Tensor, send_counts: List[int], recv_counts: List[int]) -> Tensor:
    return _comm(cid, len(send_counts)).all_to_allv(x, send_counts, recv_counts)


@all_to_allv.register_fake
def _(cid, x, send_counts, recv_counts):
    return x.new_empty((sum(recv_counts),) + tuple(x.shape[1:]))


@torch.library.custom_op("meld::ag_gemm", mutates_args=())
def ag_gemm(cid: int, nranks: int, a: Tensor, w: Tensor, kn: bool) -> Tensor:
    return _comm(cid, nranks).ag_gemm(a, w, b_layout=_LAYOUTS[kn])


@ag_gemm.register_fake
def _(cid, nranks, a, w, kn):
    return a.new_empty((nranks * a.size(0), w.size(1) if kn else w.size(0)))


@torch.library.custom_op("meld::ag_gemm_gathered", mutates_args=())
def ag_gemm_gathered(cid: int, nranks: int, a: Tensor, w: Tensor, kn: bool) -> tuple[Tensor, Tensor]:
    return _comm(cid, nranks).ag_gemm(a, w, b_layout=_LAYOUTS[kn], gathered=True)


@ag_gemm_gathered.register_fake
def _(cid, nranks, a, w, kn):
    p = nranks
    return (a.new_empty((p * a.size(0), w.size(1) if kn else w.size(0))),
            a.new_empty((p * a.size(0), a.size(1))))


@torch.library.custom_op("meld::gemm_rs", mutates_args=())
def gemm_rs(cid: int, rows: int, a: Tensor, w: Tensor, kn: bool, algo: str) -> Tensor:
    out = _comm(cid).gemm_rs(a, w, b_layout=_LAYOUTS[kn], algo=algo)
    if out.size(0) != rows:
        raise _ops._err(f"meld::gemm_rs: traced for {rows} output rows, this rank gets {out.size(0)}")
    return out


@gemm_rs.register_fake
def _(cid, rows, a, w, kn, algo):
    return a.new_empty((rows, w.size(1) if kn else w.size(0)))


@torch.library.custom_op("meld::gemm_ar", mutates_args=())
def gemm_ar(cid: int, a: Tensor, w: Tensor, kn: bool, algo: str) -> Tensor:
    return _comm(cid).gemm_ar(a, w, b_layout=_LAYOUTS[kn], algo=algo)


@gemm_ar.register_fake
def _(cid, a, w, kn, algo):
    return a.new_empty((a.size(0), w.size(1) if kn else w.size(0)))


@torch.library.custom_op("meld::ag_gemm_fp8", mutates_args=())
def ag_gemm_fp8(cid: int, nranks: int, a: Tensor, w: Tensor, scale_a: Optional[Tensor],
                scale_b: Optional[Tensor]) -> Tensor:
    return _comm(cid, nranks).ag_gemm_fp8(a, w, scale_a, scale_b)


@ag_gemm_fp8.register_fake
def _(cid, nranks, a, w, scale_a, scale_b):
    return a.new_empty((nranks * a.size(0), w.size(0)), dtype=torch.bfloat16)


@torch.library.custom_op("meld::ag_gemm_fp8_gathered", mutates_args=())
def ag_gemm_fp8_gathered(cid: int, nranks: int, a: Tensor, w: Tensor, scale_a: Optional[Tensor],
                         scale_b: Optional[Tensor]) -> tuple[Tensor, Tensor]:
    return _comm(cid, nranks).ag_gemm_fp8(a, w, scale_a, scale_b, gathered=True)


@ag_gemm_fp8_gathered.register_fake
def _(cid, nranks, a, w, scale_a, scale_b):
    p = nranks
    return (a.new_empty((p * a.size(0), w.size(0)), dtype=torch.bfloat16),
            a.new_empty((p * a.size(0), a.size(1))))


@torch.library.custom_op("meld::gemm_rs_fp8", mutates_args=())
def gemm_rs_fp8(cid: int, rows: int, a: Tensor, w: Tensor, scale_a: Optional[Tensor],
                scale_b: Optional[Tensor], algo: str) -> Tensor:
    out = _comm(cid).gemm_rs_fp8(a, w, scale_a, scale_b, algo=algo)
    if out.size(0) != rows:
        raise _ops._err(f"meld::gemm_rs_fp8: traced for {rows} output rows, this rank gets "
                        f"{out.size(0)}")
    return out


@gemm_rs_fp8.register_fake
def _(cid, rows, a, w, scale_a, scale_b, algo):
    return a.new_empty((rows, w.size(0)), dtype=torch.bfloat16)


@torch.library.custom_op("meld::gemm_ar_fp8", mutates_args=())
def gemm_ar_fp8(cid: int, a: Tensor, w: Tensor, scale_a: Optional[Tensor],
                scale_b: Optional[Tensor], algo: str) -> Tensor:
    return _comm(cid).gemm_ar_fp8(a, w, scale_a, scale_b, algo=algo)


@gemm_ar_fp8.register_fake
def _(cid, a, w, scale_a, scale_b, algo):
    return a.new_empty((a.size(0), w.size(0)), dtype=torch.bfloat16)


@torch.library.custom_op("meld::ring_attention", mutates_args=())
def ring_attention(cid: int, q: Tensor, k: Tensor, v: Tensor, causal: bool, zigzag: bool,
                   scale: float) -> tuple[Tensor, Tensor]:
    return _comm(cid).ring_attention(q, k, v, causal=causal, zigzag=zigzag, scale=scale,
                                     return_lse=True)


@ring_attention.register_fake
def _(cid, q, k, v, causal, zigzag, scale):
    b, s, h, _d = q.shape
    return q.new_empty(q.shape), q.new_empty((b, h, s), dtype=torch.float32)


@torch.library.custom_op("meld::moe_ffn", mutates_args=())
def moe_ffn(cid: int, x: Tensor, topk_ids: Tensor, topk_weights: Tensor, w1: Tensor, w2: Tensor,
            experts: int, capacity: int) -> Tensor:
    return _comm(cid).moe_ffn(x, topk_ids, topk_weights, w1, w2, experts=experts,
                              capacity=capacity if capacity > 0 else None)


@moe_ffn.register_fake
def _(cid, x, topk_ids, topk_weights, w1, w2, experts, capacity):
    return torch.empty_like(x)
