"""_ops.py: the communicator and the operations on torch tensors.

Every op enqueues on torch's current stream of the tensors' device and returns at once (as the C
calls do); outputs are allocated by torch's caching allocator unless `out=` is given. Ops are
CUDA-graph capturable (torch.cuda.graph) as the C API documents. Arguments are checked here for
what only Python knows (a tensor's dtype, device, layout) with sentences that name the argument;
everything else is checked by the library, whose sentence the exception carries.
"""
import ctypes
import itertools
import weakref

from . import _capi as C


_torch_mod = None
_devices = {}


def _torch():
    global _torch_mod
    if _torch_mod is None:
        import torch
        _torch_mod = torch
    return _torch_mod


def _compiling():
    """True while torch.compile traces (then the ops are torch.ops.meld.*: meld/_compile.py)."""
    t = _torch_mod  # (set by meld/__init__.py where torch is installed)
    return t is not None and t.compiler.is_compiling()


def _no_out(**kw):
    for k, v in kw.items():
        if v is not None and v is not False:
            raise _err(f"{k}=: not supported inside torch.compile (use the functional form)")


_comms = weakref.WeakValueDictionary()  # Comm.id -> Comm (the custom operators' comm argument)
_next_id = itertools.count(1)


def _dev(index):
    """torch.device("cuda:index"), made once."""
    d = _devices.get(index)
    if d is None:
        d = _devices[index] = _torch().device("cuda", index)
    return d


def _err(msg):
    return C.error(C.ERR_INVALID_ARG, msg)


def _config(workspace_bytes=0, timeout_ms=0, bootstrap_timeout_ms=0, port=0, node_id=-1,
            trace_path=None):
    """A meld_config_t as MELD_CONFIG_INIT sets it, with the given fields (0 / -1 / None: the
    MELD_* environment variable, else the default)."""
    cfg = C.Config(ctypes.sizeof(C.Config), C.CONFIG_VERSION, int(workspace_bytes),
                   int(timeout_ms), int(bootstrap_timeout_ms), int(port), int(node_id),
                   trace_path.encode() if trace_path else None)
    return cfg


def _call(device, fn, *args):
    """Runs a C call with `device` current in meld's CUDA runtime (restored after)."""
    prev = C.current_device()
    if prev != device:
        C.set_device(device)
    try:
        C.check(fn(*args))
    finally:
        if prev != device and prev >= 0:
            C.set_device(prev)


def _tensor(t, name, device, dtypes, ndim=None):
    torch = _torch()
    if not isinstance(t, torch.Tensor):
        raise _err(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.device.type != "cuda":
        raise _err(f"{name}: a tensor on {t.device}; meld needs CUDA tensors")
    if device is not None and t.device.index != device:
        raise _err(f"{name}: on cuda:{t.device.index}, but this call runs on cuda:{device}")
    if t.dtype not in dtypes:
        names = " or ".join(str(d).replace("torch.", "") for d in dtypes)
        raise _err(f"{name}: dtype {str(t.dtype).replace('torch.', '')}; expected {names}")
    if ndim is not None and t.dim() != ndim:
        raise _err(f"{name}: {t.dim()}-D tensor of shape {tuple(t.shape)}; expected {ndim}-D")
    return t


def _rows(t, name):
    """Leading dimension of a 2-D tensor whose rows are contiguous."""
    if t.size(1) > 1 and t.stride(1) != 1:
        raise _err(f"{name}: its rows are not contiguous (strides {tuple(t.stride())}); "
                   "pass .contiguous()")
    return max(t.stride(0), t.size(1)) if t.size(0) > 1 else t.size(1)


def _dense(t, name):
    if not t.is_contiguous():
        raise _err(f"{name}: not contiguous (shape {tuple(t.shape)}, strides "
                   f"{tuple(t.stride())}); pass .contiguous()")
    return t


def _out(out, shape, dtype, device, name="out"):
    torch = _torch()
    if out is None:
        return torch.empty(shape, dtype=dtype, device=_dev(device))
    _tensor(out, name, device, (dtype,))
    if tuple(out.shape) != tuple(shape):
        raise _err(f"{name}: shape {tuple(out.shape)}; expected {tuple(shape)}")
    return out


def _stream(device):
    """torch's current stream on `device`, as the cudaStream_t value."""
    torch = _torch()
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # (no Stream object: ~1 us less)
    return raw(device) if raw is not None else torch.cuda.current_stream(device).cuda_stream


def _layout(b_layout):
    if b_layout in ("nk", C.B_NK):
        return C.B_NK
    if b_layout in ("kn", C.B_KN):
        return C.B_KN
    raise _err(f"b_layout: {b_layout!r}; expected 'nk' ([N, K], nn.Linear's weight) or 'kn'")


def _bf16():
    return (_torch().bfloat16,)


def _weight(b, name, device, layout, k):
    """(n, ldb) of a 2-D bf16 weight in `layout`, checked against k."""
    _tensor(b, name, device, _bf16(), 2)
    kb = b.size(1) if layout == C.B_NK else b.size(0)
    if kb != k:
        raise _err(f"{name}: shape {tuple(b.shape)} does not match k = {k} "
                   f"({'[N, K]' if layout == C.B_NK else '[K, N]'})")
    return (b.size(0) if layout == C.B_NK else b.size(1)), _rows(b, name)


def _device_of(t):
    return t.device.index if t.device.index is not None else _torch().cuda.current_device()


def gemm(a, b, *, out=None, b_layout="nk", sm_count=0):
    """C = a x b^T (b [N, K], nn.Linear's weight; b_layout='kn': b [K, N], C = a x b), bf16 in
    and out, fp32 accumulation, by meld's persistent Hopper GEMM. a [M, K] with contiguous rows."""
    if _compiling():
        _no_out(out=out)
        return _torch().ops.meld.gemm(a, b, _layout(b_layout) == C.B_KN)
    dev = _device_of(_tensor(a, "a", None, _bf16(), 2))
    layout = _layout(b_layout)
    n, ldb = _weight(b, "b", dev, layout, a.size(1))
    c = _out(out, (a.size(0), n), a.dtype, dev)
    args = C.GemmArgs(a.data_ptr(), _rows(a, "a"), b.data_ptr(), ldb, layout, c.data_ptr(),
                      _rows(c, "out"), a.size(0), n, a.size(1), int(sm_count))
    _call(dev, C.lib.meld_gemm, ctypes.byref(args), _stream(dev))
    return c


def _fp8(what="gemm_fp8"):
    """(torch.float8_e4m3fn,), or MeldUnsupportedError where this torch has no fp8 dtype."""
    t = getattr(_torch(), "float8_e4m3fn", None)
    if t is None:
        raise C.error(C.ERR_UNSUPPORTED, f"{what}: torch {_torch().__version__} has no "
                      "float8_e4m3fn dtype (torch >= 2.1 needed)")
    return (t,)


def _ld16(t, name):
    """The leading dimension of an fp8 tensor (rows contiguous), a multiple of 16 (16-byte rows)."""
    ld = _rows(t, name)
    if ld % 16:
        raise _err(f"{name}: row stride {ld} is not a multiple of 16 (16-byte rows needed); "
                   "pass .contiguous()")
    return ld


def _fp8_operands(a, an, b, bn, device, what):
    """(device, lda, ldb) of the fp8 operands of meld's fp8 GEMMs: a [M, K] and b [N, K] (both
    K-major), float8_e4m3fn with contiguous rows, K and the row strides multiples of 16. device
    None: a's device (b must be on it)."""
    f8 = _fp8(what)
    _tensor(a, an, device, f8, 2)
    dev = _device_of(a) if device is None else device
    _tensor(b, bn, dev, f8, 2)
    k = a.size(1)
    if b.size(1) != k:
        raise _err(f"{bn}: shape {tuple(b.shape)} does not match k = {k} ([N, K]; {an} is "
                   f"{tuple(a.shape)})")
    if k % 16:
        raise _err(f"{an}: k = {k} is not a multiple of 16 (fp8 rows are read in 16-byte units; "
                   "pad K with zeros)")
    return dev, _ld16(a, an), _ld16(b, bn)


def _scale(s, name, device, rows):
    """(device pointer, rowwise) of a scale: one element (per tensor; None: 1) or `rows`
    elements, one per row of the operand (torch._scaled_mm's rowwise scales, [rows, 1] or
    [1, rows], contiguous)."""
    if s is None:
        return None, 0
    _tensor(s, name, device, (_torch().float32,))
    # (rows first: with one row both readings agree on one GPU, but meld_ag_gemm_fp8 applies a
    # per-tensor scale_a of each rank to every gathered row, a rowwise one to its own rows)
    if s.numel() == rows and s.is_contiguous():
        return s.data_ptr(), 1
    if s.numel() == 1:
        return s.data_ptr(), 0
    raise _err(f"{name}: shape {tuple(s.shape)}; expected one element (per tensor) or {rows} "
               "contiguous elements (one per row, as torch._scaled_mm's rowwise scales)")


def _scales(scale_a, m, scale_b, n, device):
    """(scale_a pointer, scale_b pointer, meld_fp8_scaling_t)."""
    sa, ra = _scale(scale_a, "scale_a", device, m)
    sb, rb = _scale(scale_b, "scale_b", device, n)
    return sa, sb, ra * C.FP8_ROWWISE_A | rb * C.FP8_ROWWISE_B


def gemm_fp8(a, b, scale_a=None, scale_b=None, *, out=None, sm_count=0):
    """C = scale_a * scale_b * a x b^T in bf16: a [M, K] and b [N, K] (nn.Linear's weight layout)
    float8_e4m3fn with contiguous rows, K and the row strides multiples of 16; scale_a, scale_b
    float32 tensors on the device, read when the kernel runs: one element each (per tensor) or,
    rowwise, M for scale_a ([M, 1]) and N for scale_b ([1, N]) as torch._scaled_mm's (each
    operand on its own), or None (1). fp32 accumulation in the tensor cores' FP8 mode, as
    torch._scaled_mm(a, b.t(), scale_a, scale_b, out_dtype=torch.bfloat16, use_fast_accum=True)."""
    if _compiling():
        _no_out(out=out)
        return _torch().ops.meld.gemm_fp8(a, b, scale_a, scale_b, int(sm_count))
    dev, lda, ldb = _fp8_operands(a, "a", b, "b", None, "gemm_fp8")
    m, k = a.shape
    n = b.size(0)
    sa, sb, scaling = _scales(scale_a, m, scale_b, n, dev)
    c = _out(out, (m, n), _torch().bfloat16, dev)
    args = C.GemmFp8Args(a.data_ptr(), lda, b.data_ptr(), ldb, sa, sb, scaling, c.data_ptr(),
                         _rows(c, "out"), m, n, k, int(sm_count))
    _call(dev, C.lib.meld_gemm_fp8, ctypes.byref(args), _stream(dev))
    return c


def fp8_quantize(x, *, rowwise=True):
    """(q, scale): x (bf16 [rows, cols], contiguous rows) quantized to float8_e4m3fn with
    scale = amax / 448 per row ([rows, 1] float32, gemm_fp8's rowwise scale_a / scale_b) or of
    the whole tensor (rowwise=False: one element), q = x / scale rounded to the nearest e4m3
    (saturating), so scale * q reproduces x within e4m3's precision."""
    torch = _torch()
    _tensor(x, "x", None, _bf16(), 2)
    dev = x.device.index
    if x.stride(1) != 1:
        raise _err("x: rows must be contiguous (stride(1) == 1); pass .contiguous()")
    rows, cols = x.shape
    ldx = x.stride(0) if rows > 1 else cols
    if ldx < cols:
        raise _err(f"x: row stride {ldx} < {cols} columns (overlapping rows); pass .contiguous()")
    q = torch.empty((rows, cols), dtype=torch.float8_e4m3fn, device=x.device)
    scale = torch.empty((rows, 1) if rowwise else (1,), dtype=torch.float32, device=x.device)
    args = C.Fp8QuantizeArgs(x.data_ptr(), ldx, q.data_ptr(), cols, scale.data_ptr(),
                             rows, cols, 1 if rowwise else 0)
    _call(dev, C.lib.meld_fp8_quantize, ctypes.byref(args), _stream(dev))
    return q, scale


def _attn_args(q, k, v, dev, causal, scale, q_pos0, kv_pos0, out, return_lse, zigzag=0):
    torch = _torch()
    for name, t in (("q", q), ("k", k), ("v", v)):
        _tensor(t, name, dev, _bf16(), 4)
        if t.stride(3) != 1 or t.stride(2) != t.size(3) or (
                t.size(0) > 1 and t.stride(0) != t.size(1) * t.stride(1)):
            raise _err(f"{name}: layout [batch, seq, heads, head_dim] with head_dim contiguous, "
                       f"heads adjacent and batches seq tokens apart expected (strides "
                       f"{tuple(t.stride())}); pass .contiguous()")
    if k.shape != v.shape:
        raise _err(f"k and v: shapes {tuple(k.shape)} and {tuple(v.shape)} differ")
    b, sq, h, d = q.shape
    o = _out(out, (b, sq, h, d), q.dtype, dev)
    if o.stride(3) != 1 or o.stride(2) != d or (b > 1 and o.stride(0) != sq * o.stride(1)):
        raise _err("out: layout [batch, seq, heads, head_dim] expected; pass a contiguous tensor")
    lse = torch.empty((b, h, sq), dtype=torch.float32, device=_dev(dev)) if return_lse else None
    args = C.AttentionArgs(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(),
                           lse.data_ptr() if lse is not None else None, q.stride(1), k.stride(1),
                           v.stride(1), o.stride(1), b, sq, k.size(1), h, k.size(2), d,
                           1 if causal else 0, float(scale or 0.0), int(q_pos0), int(kv_pos0),
                           int(zigzag))
    return args, o, lse


def attention(q, k, v, *, causal=False, scale=None, q_pos0=0, kv_pos0=0, return_lse=False,
              out=None):
    """Flash-attention forward (one GPU): q [B, Sq, H, D], k and v [B, Skv, Hkv, D] (H a multiple
    of Hkv: grouped-query attention), D 64 or 128, bf16. causal compares positions q_pos0 + i and
    kv_pos0 + j. Returns o [B, Sq, H, D], and with return_lse also the fp32 log-sum-exp
    [B, H, Sq] (natural log, scaled domain)."""
    if _compiling():
        _no_out(out=out)
        o, lse = _torch().ops.meld.attention(q, k, v, bool(causal), float(scale or 0.0),
                                             int(q_pos0), int(kv_pos0))
        return (o, lse) if return_lse else o
    dev = _device_of(_tensor(q, "q", None, _bf16(), 4))
    args, o, lse = _attn_args(q, k, v, dev, causal, scale, q_pos0, kv_pos0, out, return_lse)
    _call(dev, C.lib.meld_attention, ctypes.byref(args), _stream(dev))
    return (o, lse) if return_lse else o


def get_unique_id():
    """A new rendezvous id (bytes); make it on one process and pass it to every rank's Comm.
    Opens the root's listening socket on this host."""
    uid = C.UniqueId()
    C.check(C.lib.meld_get_unique_id(ctypes.byref(uid)))
    return bytes(uid)  # (all 128 bytes: .internal would stop at the first zero byte)


class _Symmetric:
    """Keeps the CUDA array interface of one meld_mem_alloc buffer (torch.as_tensor reads it)."""

    def __init__(self, ptr, nbytes):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1",
                                         "data": (ptr, False), "version": 3, "strides": None}


class Comm:
    """A meld communicator: one rank of a group of GPUs (processes or threads).

    Comm(nranks, rank, unique_id)          every rank with the id of get_unique_id()
    Comm.from_env()                        the launcher's layout (torchrun, Open MPI, Slurm)
    Comm.from_process_group(group=None)    the ranks of a torch.distributed group
    Comm.single()                          one rank alone

    Keyword arguments set meld_config_t's fields: workspace_bytes, timeout_ms,
    bootstrap_timeout_ms, port, node_id, trace_path (0 / -1 / None: the MELD_* environment, else
    the default); device= picks the CUDA device (default: the current one). Collective calls
    must be made by every rank in the same order. Use as a context manager, or call destroy()."""

    def __init__(self, nranks, rank, unique_id, *, device=None, **config):
        if not isinstance(unique_id, (bytes, bytearray)) or len(unique_id) != C.UNIQUE_ID_BYTES:
            raise _err(f"unique_id: expected the {C.UNIQUE_ID_BYTES} bytes of get_unique_id()")
        uid = C.UniqueId.from_buffer_copy(bytes(unique_id))
        self._init(lambda h, cfg: C.lib.meld_comm_init(h, int(nranks), uid, int(rank), cfg),
                   device, config)

    @classmethod
    def from_env(cls, *, device=None, **config):
        self = cls.__new__(cls)
        self._init(lambda h, cfg: C.lib.meld_comm_init_env(h, cfg), device, config)
        return self

    @classmethod
    def single(cls, *, device=None, **config):
        return cls(1, 0, get_unique_id(), device=device, **config)

    @classmethod
    def from_process_group(cls, group=None, *, device=None, **config):
        """Every rank of `group` (default: the world) calls this; rank 0 of the group makes the
        id and torch.distributed broadcasts it."""
        import torch.distributed as dist
        rank, n = dist.get_rank(group), dist.get_world_size(group)
        box = [get_unique_id() if rank == 0 else None]
        src = dist.get_global_rank(group, 0) if group is not None else 0
        dist.broadcast_object_list(box, src=src, group=group)
        return cls(n, rank, box[0], device=device, **config)

    def split(self, color, key=0, **config):
        """meld_comm_split: every rank of this comm calls it; the ranks with the same color >= 0
        form a new Comm, ranked by key (then by rank here). color None (or SPLIT_NOCOLOR): this
        rank joins none and gets None. Keyword arguments: as Comm's (default: this comm's
        settings)."""
        color = C.SPLIT_NOCOLOR if color is None else int(color)
        h = ctypes.c_void_p()
        cfg = _config(**config) if config else None
        _call(self.device, C.lib.meld_comm_split, self._handle(), color, int(key),
              ctypes.byref(cfg) if cfg is not None else None, ctypes.byref(h))
        if not h.value:
            return None
        child = Comm.__new__(Comm)
        child._sym = {}
        child._adopt(h)
        return child

    def _init(self, init, device, config):
        self._h = None
        self._sym = {}
        cfg = _config(**config)
        prev = C.current_device()
        device = prev if device is None else int(device)  # (-1: no device; init says why)
        h = ctypes.c_void_p()
        if prev != device:
            C.set_device(device)
        try:
            C.check(init(ctypes.byref(h), ctypes.byref(cfg)))
        finally:
            if prev != device and prev >= 0:
                C.set_device(prev)
        self._adopt(h)

    def _adopt(self, h):
        self._h = h
        self.id = next(_next_id)
        _comms[self.id] = self
        info = C.CommInfo()
        C.check(C.lib.meld_comm_info(h, ctypes.byref(info)))
        self.rank, self.nranks = info.rank, info.nranks
        self.local_rank, self.local_size = info.local_rank, info.local_size
        self.node, self.nnodes = info.node, info.nnodes
        self.device, self.sm_count = info.device, info.sm_count
        self.workspace_bytes = info.workspace_bytes
        self.net_transport = info.net_transport.decode()  # "ibv", "tcp", or "" (one node)

    # -- lifetime ---------------------------------------------------------------------------
    def _handle(self):
        if not self._h:
            raise _err("this Comm was destroyed")
        return self._h

    def destroy(self):
        """Waits for the comm's work, frees its memory (symmetric tensors of alloc() too: they
        must not be used after). Not collective; every rank should destroy its comm."""
        if getattr(self, "_h", None):
            h, self._h = self._h, None
            self._sym.clear()
            C.check(C.lib.meld_comm_destroy(h))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.destroy()

    def __del__(self):
        try:
            self.destroy()
        except Exception:
            pass

    def abort(self):
        """Every device-side wait of every rank returns MELD_ERR_ABORTED; then destroy."""
        C.check(C.lib.meld_comm_abort(self._handle()))

    def check(self):
        """Raises the comm's asynchronous error (a timeout, an abort, a kernel's refusal)."""
        C.check(C.lib.meld_comm_check(self._handle()))

    def __repr__(self):
        return (f"meld.Comm(rank {self.rank}/{self.nranks}, node {self.node}/{self.nnodes}, "
                f"cuda:{self.device}, {self.sm_count} SMs)")

    # -- symmetric memory -------------------------------------------------------------------
    def alloc(self, shape, dtype=None):
        """A tensor in symmetric memory (meld_mem_alloc: same size on every rank, mapped by the
        same-node peers): ops take it zero copy. Collective. Free it with free() (collective)
        or let destroy() free it; the tensor must not be used after either."""
        torch = _torch()
        dtype = dtype or torch.bfloat16
        shape = tuple(shape) if not isinstance(shape, int) else (shape,)
        numel = 1
        for s in shape:
            numel *= int(s)
        nbytes = numel * torch.empty((), dtype=dtype).element_size()
        ptr = ctypes.c_void_p()
        _call(self.device, C.lib.meld_mem_alloc, self._handle(), max(nbytes, 1), ctypes.byref(ptr))
        holder = _Symmetric(ptr.value, max(nbytes, 1))
        self._sym[ptr.value] = holder
        t = torch.as_tensor(holder, device=_dev(self.device))
        return t[:nbytes].view(dtype).view(shape)

    def free(self, t):
        """Frees a tensor of alloc() (collective: every rank frees its own)."""
        ptr = t.data_ptr()
        if ptr not in self._sym:
            raise _err("free: not a tensor of this comm's alloc() (or freed already)")
        _call(self.device, C.lib.meld_mem_free, self._handle(), ptr)
        del self._sym[ptr]

    def register(self, t):
        """Registers an ordinary tensor's memory as symmetric (meld_mem_register; collective,
        host work: do it once, outside the step). Not for cudaMallocAsync or expandable
        segments (MeldUnsupportedError)."""
        _call(self.device, C.lib.meld_mem_register, self._handle(), t.data_ptr(),
              t.numel() * t.element_size())

    def deregister(self, t):
        _call(self.device, C.lib.meld_mem_deregister, self._handle(), t.data_ptr())

    # -- collectives ------------------------------------------------------------------------
    def _coll(self, fn, x, out_shape, out, count):
        torch = _torch()
        _dense(_tensor(x, "x", self.device, (torch.bfloat16, torch.float32)), "x")
        o = _out(out, out_shape, x.dtype, self.device)
        _dense(o, "out")
        dt = C.BF16 if x.dtype == torch.bfloat16 else C.FP32
        _call(self.device, fn, self._handle(), x.data_ptr(), o.data_ptr(), count, dt,
              _stream(self.device))
        return o

    def _split(self, x, what):
        if x.dim() == 0 or x.size(0) % self.nranks:
            raise _err(f"x: shape {tuple(x.shape)}: {what} needs dim 0 to be a multiple of "
                       f"the {self.nranks} ranks")
        return (x.size(0) // self.nranks,) + tuple(x.shape[1:])

    def all_gather(self, x, *, out=None):
        """out [P * x.shape[0], ...]: rank r's x at block r (bf16 or fp32; contiguous)."""
        if _compiling():
            _no_out(out=out)
            return _torch().ops.meld.all_gather(self.id, self.nranks, x)
        shape = (self.nranks * x.size(0),) + tuple(x.shape[1:]) if x.dim() else (self.nranks,)
        return self._coll(C.lib.meld_all_gather, x, shape, out, x.numel())

    def reduce_scatter(self, x, *, out=None):
        """out [x.shape[0] / P, ...] = block `rank` of the sum over ranks of x."""
        if _compiling():
            _no_out(out=out)
            return _torch().ops.meld.reduce_scatter(self.id, self.nranks, x)
        shape = self._split(x, "reduce_scatter")
        return self._coll(C.lib.meld_reduce_scatter, x, shape, out, x.numel() // self.nranks)

    def all_reduce(self, x, *, out=None):
        """The sum over ranks of x (out=x: in place)."""
        if _compiling():
            _no_out(out=out)
            return _torch().ops.meld.all_reduce(self.id, x)
        return self._coll(C.lib.meld_all_reduce, x, tuple(x.shape), out, x.numel())

    def all_to_all(self, x, *, out=None):
        """Block q of x (dim 0 cut in P) goes to rank q, landing at block `rank` of its out."""
        if _compiling():
            _no_out(out=out)
            return _torch().ops.meld.all_to_all(self.id, x)
        self._split(x, "all_to_all")
        return self._coll(C.lib.meld_all_to_all, x, tuple(x.shape), out, x.numel() // self.nranks)

    def all_to_allv(self, x, send_counts, recv_counts, *, out=None):
        """All-to-all with per-peer row counts: x holds send_counts[q] rows for rank q, rank by
        rank (dim 0); returns sum(recv_counts) rows, recv_counts[q] from rank q, rank by rank.
        Counts are host lists of ints; what rank r sends q must be what q expects from r."""
        P = self.nranks
        if len(send_counts) != P or len(recv_counts) != P:
            raise _err(f"send_counts / recv_counts: {len(send_counts)} / {len(recv_counts)} entries; "
                       f"expected one per rank ({P})")
        send_counts = [int(c) for c in send_counts]
        recv_counts = [int(c) for c in recv_counts]
        if min(send_counts + recv_counts) < 0:
            raise _err("send_counts / recv_counts: a negative count")
        if x.dim() == 0 or x.size(0) != sum(send_counts):
            raise _err(f"x: {x.size(0) if x.dim() else 0} rows; send_counts sum to {sum(send_counts)}")
        shape = (sum(recv_counts),) + tuple(x.shape[1:])
        if _compiling():
            _no_out(out=out)
            return _torch().ops.meld.all_to_allv(self.id, x, send_counts, recv_counts)
        torch = _torch()
        _dense(_tensor(x, "x", self.device, (torch.bfloat16, torch.float32)), "x")
        o = _out(out, shape, x.dtype, self.device)
        _dense(o, "out")
        row = 1
        for d in x.shape[1:]:
            row *= int(d)
        arr = ctypes.c_size_t * P
        sc, rc = arr(*(c * row for c in send_counts)), arr(*(c * row for c in recv_counts))
        so, ro = arr(), arr()
        for q in range(1, P):
            so[q] = so[q - 1] + sc[q - 1]
            ro[q] = ro[q - 1] + rc[q - 1]
        dt = C.BF16 if x.dtype == torch.bfloat16 else C.FP32
        _call(self.device, C.lib.meld_all_to_allv, self._handle(), x.data_ptr(), sc, so, o.data_ptr(), rc, ro,
              dt, _stream(self.device))
        return o

    # -- fused tensor-parallel GEMMs --------------------------------------------------------
    def ag_gemm(self, a_shard, w, *, out=None, gathered=None, b_layout="nk"):
        """C = AllGather(a_shard) x w^T in one kernel: a_shard [m_loc, K] (every rank the same
        m_loc and K), w [n_loc, K] (or [K, n_loc] with b_layout='kn'); C [P * m_loc, n_loc].
        gathered=True (or a [P * m_loc, K] tensor) also returns the gathered A: (C, A)."""
        if _compiling():
            _no_out(out=out, gathered=None if gathered is True else gathered)
            kn = _layout(b_layout) == C.B_KN
            if gathered is True:
                return _torch().ops.meld.ag_gemm_gathered(self.id, self.nranks, a_shard, w, kn)
            return _torch().ops.meld.ag_gemm(self.id, self.nranks, a_shard, w, kn)
        _tensor(a_shard, "a_shard", self.device, _bf16(), 2)
        layout = _layout(b_layout)
        m_loc, k = a_shard.shape
        n, ldb = _weight(w, "w", self.device, layout, k)
        c = _out(out, (self.nranks * m_loc, n), a_shard.dtype, self.device)
        g = None
        if gathered is True:
            g = _out(None, (self.nranks * m_loc, k), a_shard.dtype, self.device)
        elif gathered is not None and gathered is not False:
            g = _out(gathered, (self.nranks * m_loc, k), a_shard.dtype, self.device, "gathered")
        args = C.AgGemmArgs(a_shard.data_ptr(), _rows(a_shard, "a_shard"), w.data_ptr(), ldb,
                            layout, c.data_ptr(), _rows(c, "out"),
                            g.data_ptr() if g is not None else None,
                            _rows(g, "gathered") if g is not None else 0, m_loc, n, k)
        _call(self.device, C.lib.meld_ag_gemm, self._handle(), ctypes.byref(args),
              _stream(self.device))
        return (c, g) if g is not None else c

    def _gemm_rs(self, fn, a, w, out, algo, b_layout, rows):
        _tensor(a, "a", self.device, _bf16(), 2)
        layout = _layout(b_layout)
        n, ldb = _weight(w, "w", self.device, layout, a.size(1))
        algos = {"auto": C.GEMM_RS_AUTO, "fused": C.GEMM_RS_FUSED, "unfused": C.GEMM_RS_UNFUSED}
        if algo not in algos:
            raise _err(f"algo: {algo!r}; expected one of {', '.join(algos)}")
        c = _out(out, (rows, n), a.dtype, self.device)
        args = C.GemmRsArgs(a.data_ptr(), _rows(a, "a"), w.data_ptr(), ldb, layout, c.data_ptr(),
                            _rows(c, "out") if rows else n, a.size(0), n, a.size(1), algos[algo])
        _call(self.device, fn, self._handle(), ctypes.byref(args), _stream(self.device))
        return c

    def gemm_rs_rows(self, m):
        """(first row, row count) of this rank's part of gemm_rs's output for M rows."""
        first, count = ctypes.c_int64(), ctypes.c_int64()
        C.check(C.lib.meld_gemm_rs_rows(int(m), self.nranks, self.rank, ctypes.byref(first),
                                        ctypes.byref(count)))
        return first.value, count.value

    def gemm_rs(self, a, w, *, out=None, algo="auto", b_layout="nk"):
        """This rank's rows of sum over ranks (a x w^T): a [M, K_loc] (this rank's K-slice),
        w [N, K_loc]; returns [count, N] for (first, count) = gemm_rs_rows(M) (torch.chunk's
        split of the M rows)."""
        if _compiling():
            _no_out(out=out)
            m = a.size(0)
            r = -(-m // self.nranks)  # (torch.chunk's split, as meld_gemm_rs_rows)
            rows = max(0, min(r, m - self.rank * r))
            return _torch().ops.meld.gemm_rs(self.id, rows, a, w, _layout(b_layout) == C.B_KN, algo)
        _tensor(a, "a", self.device, _bf16(), 2)
        return self._gemm_rs(C.lib.meld_gemm_rs, a, w, out, algo, b_layout,
                             self.gemm_rs_rows(a.size(0))[1])

    def gemm_ar(self, a, w, *, out=None, algo="auto", b_layout="nk"):
        """sum over ranks (a x w^T) on every rank: [M, N] (out may be symmetric memory from
        alloc(): the zero-copy path)."""
        if _compiling():
            _no_out(out=out)
            return _torch().ops.meld.gemm_ar(self.id, a, w, _layout(b_layout) == C.B_KN, algo)
        _tensor(a, "a", self.device, _bf16(), 2)
        return self._gemm_rs(C.lib.meld_gemm_ar, a, w, out, algo, b_layout, a.size(0))

    # -- fused tensor-parallel GEMMs in fp8 (e4m3 in, per-tensor scales, bf16 out) ----------
    def ag_gemm_fp8(self, a_shard, w, scale_a=None, scale_b=None, *, out=None, gathered=None):
        """C = scale_a * scale_b * AllGather(a_shard) x w^T in one kernel, bf16: a_shard
        [m_loc, K] (every rank the same m_loc and K) and w [n_loc, K] (nn.Linear's layout only)
        float8_e4m3fn with contiguous rows, K and the row strides multiples of 16; scale_a,
        scale_b one-element float32 tensors on the device (read when the kernel runs) or None
        (1), or rowwise: scale_a m_loc elements (this rank's shard's rows; all-gathered by the
        call) and scale_b n_loc (this rank's columns). A per-tensor scale_a: every rank passes
        the same value (the gathered rows are one quantization of
        A; each rank's kernel applies its own). C [P * m_loc, n_loc]. The shard travels in fp8.
        gathered=True (or a float8_e4m3fn [P * m_loc, K] tensor) also returns the gathered A
        (fp8): (C, A)."""
        if _compiling():
            _no_out(out=out, gathered=None if gathered is True else gathered)
            ops = _torch().ops.meld
            if gathered is True:
                return ops.ag_gemm_fp8_gathered(self.id, self.nranks, a_shard, w, scale_a, scale_b)
            return ops.ag_gemm_fp8(self.id, self.nranks, a_shard, w, scale_a, scale_b)
        _, lda, ldb = _fp8_operands(a_shard, "a_shard", w, "w", self.device, "ag_gemm_fp8")
        m_loc, k = a_shard.shape
        n = w.size(0)
        sa, sb, scaling = _scales(scale_a, m_loc, scale_b, n, self.device)
        c = _out(out, (self.nranks * m_loc, n), _torch().bfloat16, self.device)
        g = None
        if gathered is True:
            g = _out(None, (self.nranks * m_loc, k), a_shard.dtype, self.device)
        elif gathered is not None and gathered is not False:
            g = _out(gathered, (self.nranks * m_loc, k), a_shard.dtype, self.device, "gathered")
        args = C.AgGemmFp8Args(a_shard.data_ptr(), lda, w.data_ptr(), ldb, sa, sb, scaling, c.data_ptr(),
                               _rows(c, "out"), g.data_ptr() if g is not None else None,
                               _ld16(g, "gathered") if g is not None else 0, m_loc, n, k)
        _call(self.device, C.lib.meld_ag_gemm_fp8, self._handle(), ctypes.byref(args),
              _stream(self.device))
        return (c, g) if g is not None else c

    def _gemm_rs_fp8(self, fn, what, a, w, scale_a, scale_b, out, algo, rows):
        _, lda, ldb = _fp8_operands(a, "a", w, "w", self.device, what)
        algos = {"auto": C.GEMM_RS_AUTO, "fused": C.GEMM_RS_FUSED, "unfused": C.GEMM_RS_UNFUSED}
        if algo not in algos:
            raise _err(f"algo: {algo!r}; expected one of {', '.join(algos)}")
        n = w.size(0)
        sa, sb, scaling = _scales(scale_a, a.size(0), scale_b, n, self.device)
        c = _out(out, (rows, n), _torch().bfloat16, self.device)
        args = C.GemmRsFp8Args(a.data_ptr(), lda, w.data_ptr(), ldb, sa, sb, scaling, c.data_ptr(),
                               _rows(c, "out") if rows else n, a.size(0), n, a.size(1),
                               algos[algo])
        _call(self.device, fn, self._handle(), ctypes.byref(args), _stream(self.device))
        return c

    def gemm_rs_fp8(self, a, w, scale_a=None, scale_b=None, *, out=None, algo="auto"):
        """This rank's rows of sum over ranks (scale_a * scale_b * a x w^T), bf16: a [M, K_loc]
        (this rank's K-slice) and w [N, K_loc] float8_e4m3fn as ag_gemm_fp8's; scale_a, scale_b
        this rank's float32 device tensors, per tensor or rowwise (M and N elements) as
        gemm_fp8's, or None (1); they may differ per rank
        (each rank's product is scaled before the sum). Returns [count, N] for (first, count) =
        gemm_rs_rows(M)."""
        if _compiling():
            _no_out(out=out)
            m = a.size(0)
            r = -(-m // self.nranks)  # (torch.chunk's split, as meld_gemm_rs_rows)
            rows = max(0, min(r, m - self.rank * r))
            return _torch().ops.meld.gemm_rs_fp8(self.id, rows, a, w, scale_a, scale_b, algo)
        _tensor(a, "a", self.device, _fp8("gemm_rs_fp8"), 2)
        return self._gemm_rs_fp8(C.lib.meld_gemm_rs_fp8, "gemm_rs_fp8", a, w, scale_a, scale_b,
                                 out, algo, self.gemm_rs_rows(a.size(0))[1])

    def gemm_ar_fp8(self, a, w, scale_a=None, scale_b=None, *, out=None, algo="auto"):
        """sum over ranks (scale_a * scale_b * a x w^T) on every rank, bf16 [M, N]; operands and
        scales as gemm_rs_fp8's (out may be symmetric memory from alloc(): the zero-copy path)."""
        if _compiling():
            _no_out(out=out)
            return _torch().ops.meld.gemm_ar_fp8(self.id, a, w, scale_a, scale_b, algo)
        _tensor(a, "a", self.device, _fp8("gemm_ar_fp8"), 2)
        return self._gemm_rs_fp8(C.lib.meld_gemm_ar_fp8, "gemm_ar_fp8", a, w, scale_a, scale_b,
                                 out, algo, a.size(0))

    # -- ring attention ---------------------------------------------------------------------
    def ring_attention(self, q, k, v, *, causal=False, zigzag=False, scale=None,
                       return_lse=False, out=None):
        """Attention of this rank's queries over every rank's keys: q, k, v [B, S_part, H(kv), D]
        are this rank's part of the sequence (part `rank` of P, or with zigzag the pieces rank
        and 2P - 1 - rank of 2P). Returns o (and the fp32 LSE with return_lse)."""
        if _compiling():
            _no_out(out=out)
            o, lse = _torch().ops.meld.ring_attention(self.id, q, k, v, bool(causal), bool(zigzag),
                                                      float(scale or 0.0))
            return (o, lse) if return_lse else o
        _tensor(q, "q", self.device, _bf16(), 4)
        args, o, lse = _attn_args(q, k, v, self.device, causal, scale, 0, 0, out, return_lse,
                                  1 if zigzag else 0)
        _call(self.device, C.lib.meld_ring_attention, self._handle(), ctypes.byref(args),
              _stream(self.device))
        return (o, lse) if return_lse else o

    # -- MoE ---------------------------------------------------------------------------------
    def moe_capacity(self, tokens, topk, experts):
        """The default capacity: every row that this rank's experts could receive if every rank
        had `tokens` tokens, each expert's segment padded to 128 rows (across N nodes also at
        least N x tokens x topk: the combine's rows land at their gathered slot)."""
        local = experts // self.nranks
        rows = self.nranks * int(tokens) * min(int(topk), max(local, 1)) + 127 * local
        if self.nnodes > 1:
            rows = max(rows, self.nnodes * int(tokens) * int(topk))
        return max(128, (rows + 127) // 128 * 128)

    def _moe_check(self, x, topk_ids, experts):
        torch = _torch()
        _tensor(x, "x", self.device, _bf16(), 2)
        _dense(_tensor(topk_ids, "topk_ids", self.device, (torch.int32,), 2), "topk_ids")
        if topk_ids.size(0) != x.size(0):
            raise _err(f"topk_ids: {topk_ids.size(0)} tokens, x has {x.size(0)}")
        if experts % self.nranks:
            raise _err(f"experts: {experts} is not a multiple of the {self.nranks} ranks")

    def moe_ffn(self, x, topk_ids, topk_weights, w1, w2, *, experts, capacity=None, out=None,
                expert_counts=None):
        """The expert-parallel SwiGLU MoE layer: out[t] = sum_j topk_weights[t, j] *
        W2_e(silu(W1gate_e x_t) * W1up_e x_t), e = topk_ids[t, j] (int32, -1 = none).
        x [T, H]; topk_weights fp32 [T, topk]; w1 [E/P, 2 ffn, H] (gate rows then up rows),
        w2 [E/P, H, ffn]: this rank's experts [rank E/P, (rank+1) E/P). capacity: rows this
        rank's experts may receive (default moe_capacity(T, topk, E); equal on every rank; the
        comm's workspace must hold meld_moe_workspace_bytes). Returns out [T, H]."""
        torch = _torch()
        if _compiling():
            _no_out(out=out, expert_counts=expert_counts)
            return torch.ops.meld.moe_ffn(self.id, x, topk_ids, topk_weights, w1, w2, int(experts),
                                          int(capacity or 0))
        self._moe_check(x, topk_ids, experts)
        _dense(_tensor(topk_weights, "topk_weights", self.device, (torch.float32,), 2),
               "topk_weights")
        if topk_weights.shape != topk_ids.shape:
            raise _err(f"topk_weights: shape {tuple(topk_weights.shape)}, topk_ids "
                       f"{tuple(topk_ids.shape)}")
        _dense(_tensor(w1, "w1", self.device, _bf16(), 3), "w1")
        _dense(_tensor(w2, "w2", self.device, _bf16(), 3), "w2")
        t, h = x.shape
        topk = topk_ids.size(1)
        ffn = w2.size(2)
        local = experts // self.nranks
        if tuple(w1.shape) != (local, 2 * ffn, h) or tuple(w2.shape) != (local, h, ffn):
            raise _err(f"w1 {tuple(w1.shape)} / w2 {tuple(w2.shape)}: expected "
                       f"({local}, {2 * ffn}, {h}) / ({local}, {h}, {ffn}) for {experts} experts "
                       f"on {self.nranks} ranks")
        cap = int(capacity) if capacity is not None else self.moe_capacity(t, topk, experts)
        o = _out(out, (t, h), x.dtype, self.device)
        scratch = torch.empty(C.lib.meld_moe_ffn_scratch_bytes(self.nranks, experts, h, ffn, cap),
                              dtype=torch.uint8, device=_dev(self.device))
        if expert_counts is not None:
            _tensor(expert_counts, "expert_counts", self.device, (torch.int32,), 1)
        args = C.MoeFfnArgs(x.data_ptr(), _rows(x, "x"), topk_ids.data_ptr(),
                            topk_weights.data_ptr(), t, topk, experts, h, w1.data_ptr(),
                            w2.data_ptr(), ffn, o.data_ptr(), _rows(o, "out"), cap,
                            scratch.data_ptr(),
                            expert_counts.data_ptr() if expert_counts is not None else None)
        _call(self.device, C.lib.meld_moe_ffn, self._handle(), ctypes.byref(args),
              _stream(self.device))
        return o

    def moe_dispatch(self, x, topk_ids, w, *, experts, capacity=None, swiglu=False,
                     row_origin=False):
        """The MoE layer's first half as one kernel: routes x's rows to their experts' ranks and
        runs the grouped GEMM y = rows x w_e^T (w [E/P, n, H]; swiglu=True: w_e = [gate; up] and
        y = silu(gate) * up, [capacity, n/2]). Returns a MoeDispatch: .y, .expert_offsets,
        .expert_counts (.row_origin with row_origin=True), and .grouped_gemm() / .combine() for
        the rest of the layer."""
        torch = _torch()
        self._moe_check(x, topk_ids, experts)
        _dense(_tensor(w, "w", self.device, _bf16(), 3), "w")
        t, h = x.shape
        local = experts // self.nranks
        if w.size(0) != local or w.size(2) != h:
            raise _err(f"w: shape {tuple(w.shape)}; expected ({local}, n, {h})")
        n = w.size(1)
        cap = int(capacity) if capacity is not None else self.moe_capacity(t, topk_ids.size(1),
                                                                          experts)
        dev = _dev(self.device)
        d = MoeDispatch(self)
        d.y = torch.empty((cap, n // 2 if swiglu else n), dtype=x.dtype, device=dev)
        d.expert_offsets = torch.empty(local + 1, dtype=torch.int32, device=dev)
        d.expert_counts = torch.empty(local, dtype=torch.int32, device=dev)
        d.row_origin = torch.empty((cap, 2), dtype=torch.int32, device=dev) if row_origin else None
        d._keep = (x, topk_ids, w)
        d.args = C.MoeArgs(x.data_ptr(), _rows(x, "x"), topk_ids.data_ptr(), t, topk_ids.size(1),
                           experts, h, w.data_ptr(), n, d.y.data_ptr(), cap,
                           d.expert_offsets.data_ptr(), d.expert_counts.data_ptr(),
                           d.row_origin.data_ptr() if row_origin else None,
                           C.MOE_ACT_SWIGLU if swiglu else C.MOE_ACT_NONE)
        _call(self.device, C.lib.meld_moe_dispatch_gemm, self._handle(), ctypes.byref(d.args),
              _stream(self.device))
        return d


class MoeDispatch:
    """What comm.moe_dispatch returns: the layout of one dispatch, for the calls that follow it
    (in stream order, before the comm's next dispatch)."""

    def __init__(self, comm):
        self.comm = comm

    def grouped_gemm(self, a, w, *, out=None):
        """c = a x w_e^T on each local expert e's rows (a [capacity, K], w [E/P, N, K])."""
        comm = self.comm
        _dense(_tensor(a, "a", comm.device, _bf16(), 2), "a")
        _dense(_tensor(w, "w", comm.device, _bf16(), 3), "w")
        c = _out(out, (self.args.capacity, w.size(1)), a.dtype, comm.device)
        _dense(c, "out")
        g = C.MoeGemmArgs(ctypes.pointer(self.args), a.data_ptr(), a.size(1), w.data_ptr(),
                          w.size(1), c.data_ptr())
        _call(comm.device, C.lib.meld_moe_grouped_gemm, comm._handle(), ctypes.byref(g),
              _stream(comm.device))
        return c

    def combine(self, y2, topk_weights, *, out=None):
        """out[t] = sum_j topk_weights[t, j] * the row of (t, j) in its expert rank's y2
        (y2 [capacity, H] on the dispatch's layout): [T, H]."""
        torch = _torch()
        comm = self.comm
        _dense(_tensor(y2, "y2", comm.device, _bf16(), 2), "y2")
        _dense(_tensor(topk_weights, "topk_weights", comm.device, (torch.float32,), 2),
               "topk_weights")
        o = _out(out, (self.args.tokens, y2.size(1)), y2.dtype, comm.device)
        cb = C.MoeCombineArgs(ctypes.pointer(self.args), y2.data_ptr(), topk_weights.data_ptr(),
                              o.data_ptr(), _rows(o, "out"))
        _call(comm.device, C.lib.meld_moe_combine, comm._handle(), ctypes.byref(cb),
              _stream(comm.device))
        return o
