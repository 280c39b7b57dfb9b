"""splat.attention: splatc's kernels as a PyTorch operator with autograd.

Two custom operators, `splat::attention_forward` and `splat::attention_backward`, launch a cache
entry's kernels (named by the entry's directory, so that a traced graph carries only a string) on
PyTorch's current stream; fake implementations give their output shapes to torch.compile, and
register_autograd connects the forward to the backward kernels.
"""

import dataclasses
import json
import os
import threading
from collections import OrderedDict
from typing import Dict, Optional, Tuple

import torch

from . import _launch
from ._compile import Compiled, compile as _compile
from ._driver import driver
from ._errors import PatternError, SplatError
from ._manifest import Manifest, Module, load_manifest
from ._problem import problem_from

_DTYPES = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}
_NAMES = ("q", "k", "v")


# ---------------------------------------------------------------------------------------------
# Argument checks: every message names the argument.

def check_tensor(name, t, layout):
    """One of q, k, v: a CUDA tensor of a dtype the kernels take, with the dimensions layout names."""
    if not isinstance(t, torch.Tensor):
        raise TypeError("argument '%s' must be a torch.Tensor, got %s" % (name, type(t).__name__))
    if t.dim() != layout.count(",") + 1:
        raise PatternError("argument '%s' must have %d dimensions [%s], got shape %s"
                           % (name, layout.count(",") + 1, layout, tuple(t.shape)))
    if t.device.type != "cuda":
        raise PatternError("argument '%s' must be on a CUDA device, got %s" % (name, t.device))
    if t.dtype not in _DTYPES:
        raise PatternError("argument '%s' must be bfloat16, float16 or float32, got %s" % (name, t.dtype))


def check_inputs(q, k, v):
    """q [batch, heads, seq_len, head_dim]; k, v [batch, kv_heads, kv_len, head_dim]; one CUDA
    device, one dtype (bf16, fp16, fp32), contiguous. Returns (batch, heads, seq_len, head_dim,
    kv_heads, kv_len, dtype name)."""
    for name, t in zip(_NAMES, (q, k, v)):
        check_tensor(name, t, "batch, %s, head_dim" % ("heads, seq_len" if name == "q" else "kv_heads, kv_len"))
    for name, t in zip(_NAMES[1:], (k, v)):
        if t.device != q.device:
            raise PatternError("argument '%s' is on %s but q is on %s" % (name, t.device, q.device))
        if t.dtype != q.dtype:
            raise PatternError("argument '%s' is %s but q is %s" % (name, t.dtype, q.dtype))
    b, h, s, d = q.shape
    if k.shape != v.shape:
        raise PatternError("arguments 'k' and 'v' must have one shape, got %s and %s" % (tuple(k.shape), tuple(v.shape)))
    if k.shape[0] != b or k.shape[3] != d:
        raise PatternError("argument 'k' must be [batch=%d, kv_heads, kv_len, head_dim=%d], got %s" % (b, d, tuple(k.shape)))
    if k.shape[1] < 1 or h % k.shape[1] != 0:
        raise PatternError("argument 'k': kv_heads %d must divide the %d heads of q" % (k.shape[1], h))
    for name, t in zip(_NAMES, (q, k, v)):
        if not t.is_contiguous():
            raise PatternError("argument '%s' must be contiguous (row-major %s); call .contiguous() first"
                               % (name, "[batch, heads, seq_len, head_dim]" if name == "q" else "[batch, kv_heads, kv_len, head_dim]"))
    return b, h, s, d, k.shape[1], k.shape[2], _DTYPES[q.dtype]


def _check_aligned(**tensors):
    """The kernels move rows in 16-byte chunks: each tensor must start 16-byte aligned (a view with a
    storage offset may not). Real tensors only (a fake one has no address)."""
    for name, t in tensors.items():
        if t.data_ptr() % 16:
            raise PatternError("argument '%s' must start at a 16-byte aligned address, got %#x (a view with a storage "
                               "offset? pass .clone())" % (name, t.data_ptr()))


def _check_entry(manifest: Manifest, sizes, what="the compiled pattern"):
    """The tensors' sizes against the sizes the entry was compiled for."""
    b, h, s, d, kvh, kvl, dtype = sizes
    p = manifest.problem
    want = {"batch": b, "heads": h, "seq_len": s, "head_dim": d, "kv_heads": kvh, "kv_len": kvl}
    for field, value in want.items():
        if field in p and p[field] != value:
            raise PatternError("the tensors have %s %d but %s was built for %s %d" % (field, value, what, field, p[field]))
    if p.get("dtype") not in (dtype, "tf32" if dtype == "fp32" else None):
        raise PatternError("the tensors are %s but %s was built for %s" % (dtype, what, p.get("dtype")))
    if p.get("varlen"):
        raise PatternError("%s is a packed variable-length batch; splat.attention takes [batch, heads, seq_len, head_dim] "
                           "tensors (splat.attention_varlen takes packed ones)" % what)


# ---------------------------------------------------------------------------------------------
# Loaded modules.

class _Loaded:
    """One module of a cache entry, loaded with the driver: its kernels, the per-device state (the
    dynamic shared memory attribute, the device table) and the tensor maps of recent k/v pairs."""

    MAPS_KEPT = 16

    def __init__(self, path: str, manifest: Manifest, module: Module):
        self.manifest, self.module = manifest, module
        ptx = next((f for f in module.files if f.endswith(".ptx")), None)
        if ptx is None:
            raise SplatError("%s: module %s has no PTX file" % (path, module.name or module.kind))
        with open(os.path.join(path, ptx), "rb") as f:
            image = f.read()
        drv = driver()
        self.library = drv.load_library(image, ptx)
        self.kernels = {k.name: drv.kernel(self.library, k.name) for k in module.kernels}
        self.table_bytes = None
        if module.table_file and module.table_words:
            with open(os.path.join(path, module.table_file), "rb") as f:
                self.table_bytes = f.read()
            if len(self.table_bytes) != 4 * module.table_words:
                raise SplatError("%s: %s has %d bytes, the manifest says %d words"
                                 % (path, module.table_file, len(self.table_bytes), module.table_words))
        self.map_args = [m for m in module.tensor_maps]
        self.devices: Dict[int, Optional[torch.Tensor]] = {}  # device -> its table (None: no table)
        # (device, k, v) -> (pinned host copy, device copy, ids of the streams that read it)
        self.maps: "OrderedDict[tuple, Tuple[torch.Tensor, torch.Tensor, set]]" = OrderedDict()
        self.captured_maps = []  # maps copied in a graph capture: the graph reads them, kept for its life
        self.plans: Dict[tuple, list] = {}  # sizes -> the launches (_launch.steps)
        self.lock = threading.Lock()

    def prepare(self, device: torch.device):
        """Per device, once, before any capture: the shared memory attribute and the table upload."""
        index = device.index
        if index in self.devices:
            return self.devices[index]
        if torch.cuda.is_current_stream_capturing():
            raise SplatError("splat: the first launch of a pattern on %s must not be inside a CUDA graph capture: "
                             "run it once before capturing (a warm-up step)" % device)
        with self.lock:
            drv = driver()
            for k in self.module.kernels:
                if k.shared_memory_dynamic_bytes > _launch.DEFAULT_DYNAMIC_SMEM:
                    drv.set_max_dynamic_smem(self.kernels[k.name], k.shared_memory_dynamic_bytes, index, k.name)
            table = None
            if self.table_bytes is not None:
                table = torch.frombuffer(bytearray(self.table_bytes), dtype=torch.int32).to(device)
            self.devices[index] = table
        return table

    def tensor_maps(self, k: torch.Tensor, v: torch.Tensor) -> int:
        """The device address of the module's tensor maps for these k and v (0 when it has none)."""
        if not self.map_args:
            return 0
        tensors = {"k": k, "v": v}
        packed = bool(self.manifest.problem.get("varlen"))
        # A packed batch's maps span its tensors' tokens: the same addresses with another token
        # count are other maps.
        key = (k.device.index, k.data_ptr(), v.data_ptr()) + ((k.shape[0], v.shape[0]) if packed else ())
        capturing = torch.cuda.is_current_stream_capturing()
        stream = torch.cuda.current_stream(k.device)
        with self.lock:
            hit = self.maps.get(key)
            if hit is not None:
                self.maps.move_to_end(key)
                if capturing:
                    self.captured_maps.append(hit)  # a graph reads it: never evicted
                elif stream.stream_id not in hit[2]:
                    # Read on a stream other than the one it was allocated on: its memory must not be
                    # reused (after an eviction) before this stream's kernels are done with it.
                    hit[1].record_stream(stream)
                    hit[2].add(stream.stream_id)
                return hit[1].data_ptr()
        args = []
        for m in self.map_args:
            t = tensors[m.tensor]
            if packed:
                # [max_total_tokens][kv_heads][head_dim]: the kernels read no token past the batch's
                # own, so the map spans the tensor's tokens (docs/splatc-kernels.md, the manifest).
                m = dataclasses.replace(m, dims=tuple(m.dims[:-1]) + (max(1, t.shape[0]),))
            if _launch.map_span_bytes(m) > t.numel() * t.element_size():
                raise PatternError("argument '%s' has %d bytes but the kernels' tensor map spans %d"
                                   % (m.tensor, t.numel() * t.element_size(), _launch.map_span_bytes(m)))
            args.append(_launch.map_arguments(m, t.data_ptr()))
        raw = driver().encode_tensor_maps(args, [tensors[m.tensor].data_ptr() for m in self.map_args])
        host = torch.frombuffer(bytearray(raw), dtype=torch.uint8).pin_memory()
        dev = torch.empty(len(raw), dtype=torch.uint8, device=k.device)
        dev.copy_(host, non_blocking=True)  # stream-ordered; captured as a copy node in a graph
        with self.lock:
            if capturing:
                self.captured_maps.append((host, dev, set()))
            else:
                self.maps[key] = (host, dev, {stream.stream_id})
                while len(self.maps) > self.MAPS_KEPT:
                    self.maps.popitem(last=False)
        return dev.data_ptr()

    def run(self, sizes: Dict[str, int], grid_y: int, values: Dict[str, int], device: torch.device,
            ws: Optional[torch.Tensor] = None):
        """Launches every kernel in order on the current stream; values maps parameter names to pointers
        (ws, scores and table are filled in here; ws given: that workspace, of at least the module's size)."""
        table = self.prepare(device)
        ws_n = _launch.workspace_floats(self.module, grid_y)
        sc_n = _launch.scores_floats(self.module, grid_y)
        if ws is None:
            ws = torch.empty(ws_n, dtype=torch.float32, device=device) if ws_n else None
        elif ws.numel() < ws_n:
            raise SplatError("module %s: a shared workspace of %d floats, not %d" % (self.module.name, ws.numel(), ws_n))
        sc = torch.empty(sc_n, dtype=torch.float32, device=device) if sc_n else None
        values = dict(values, ws=ws.data_ptr() if ws is not None else 0, scores=sc.data_ptr() if sc is not None else 0,
                      table=table.data_ptr() if table is not None else 0)
        args = _launch.arguments(self.module, values)
        stream = torch.cuda.current_stream(device).cuda_stream
        drv = driver()
        key = tuple(sorted(sizes.items()))
        plan = self.plans.get(key)
        if plan is None:  # the grids evaluated once per shape (the manifest's expressions)
            plan = self.plans[key] = _launch.steps(self.module, sizes)
        for st in plan:
            drv.launch(self.kernels[st.name], st.grid, st.block, st.smem, stream, args, st.name, st.programmatic)
        return ws, sc  # the caller keeps them alive until the launches are queued


class Entry:
    """A cache entry ready to launch (its manifest; its modules loaded on first use)."""

    def __init__(self, path: str):
        self.path = path
        self.manifest = load_manifest(path)
        self._loaded: Dict[tuple, _Loaded] = {}
        self._lock = threading.Lock()

    def _module(self, group: int, kind: str) -> _Loaded:
        with self._lock:
            key = (group, kind)
            if key not in self._loaded:
                m = _launch.groups(self.manifest)[group]
                module = m.backward if kind == "backward" else _launch.forward_module(m)
                if module is None:
                    raise SplatError("%s has no backward kernels (compile with backward=True)" % self.path)
                self._loaded[key] = _Loaded(self.path, m, module)
            return self._loaded[key]

    def forward(self, q, k, v, out, lse, cu_seqlens=None):
        """q [batch, heads, ...] or, with cu_seqlens (a packed batch), [total_tokens, heads, ...]."""
        b, h = (cu_seqlens.numel() - 1 if cu_seqlens is not None else q.shape[0]), q.shape[1]
        if b == 0:
            return
        with torch.cuda.device(q.device):
            for g, m in enumerate(_launch.groups(self.manifest)):
                mod = self._module(g, "forward")
                sizes = _launch.grid_sizes(m, b, h)
                values = dict(q=q.data_ptr(), k=k.data_ptr(), v=v.data_ptr(), o=out.data_ptr(),
                              tmaps=mod.tensor_maps(k, v), lse=lse.data_ptr() if lse is not None else 0,
                              cu_seqlens=cu_seqlens.data_ptr() if cu_seqlens is not None else 0)
                mod.run(sizes, b * sizes["group_heads"], values, q.device)

    def backward(self, q, k, v, out, dout, lse, dq, dk, dv, cu_seqlens=None):
        b, h = (cu_seqlens.numel() - 1 if cu_seqlens is not None else q.shape[0]), q.shape[1]
        if b == 0:
            return
        values = dict(q=q.data_ptr(), k=k.data_ptr(), v=v.data_ptr(), o=out.data_ptr(), dout=dout.data_ptr(),
                      lse=lse.data_ptr(), dq=dq.data_ptr(), dk=dk.data_ptr(), dv=dv.data_ptr(),
                      cu_seqlens=cu_seqlens.data_ptr() if cu_seqlens is not None else 0)
        with torch.cuda.device(q.device):
            groups = [(self._module(g, "backward"), _launch.grid_sizes(m, b, h))
                      for g, m in enumerate(_launch.groups(self.manifest))]
            ws = None
            if any(mod.module.workspace_shared for mod, _ in groups):
                # Per-head patterns over grouped K/V heads: one workspace for every group (its first
                # region holds all query heads' dK/dV; the last group's kernels write dk and dv).
                n = max(_launch.workspace_floats(mod.module, b * s["group_heads"]) for mod, s in groups)
                ws = torch.empty(n, dtype=torch.float32, device=q.device)
            for mod, sizes in groups:  # the groups write disjoint heads of dq (and of dk, dv without a shared ws)
                mod.run(sizes, b * sizes["group_heads"], values, q.device, ws)


_entries: Dict[str, Entry] = {}
_entries_lock = threading.Lock()


def entry(path: str) -> Entry:
    """The Entry of a cache directory, read once per process."""
    with _entries_lock:
        e = _entries.get(path)
        if e is None:
            e = _entries[path] = Entry(path)
        return e


# ---------------------------------------------------------------------------------------------
# The operators.

@torch.library.custom_op("splat::attention_forward", mutates_args=(), device_types="cuda")
def attention_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, entry_path: str,
                      save_lse: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    e = entry(entry_path)
    _check_entry(e.manifest, check_inputs(q, k, v), e.path)
    _check_aligned(q=q, k=k, v=v)
    out = torch.empty_like(q)
    lse = torch.empty(q.shape[:3], dtype=torch.float32, device=q.device) if save_lse else q.new_empty(0, dtype=torch.float32)
    e.forward(q, k, v, out, lse if save_lse else None)
    return out, lse


@attention_forward.register_fake
def _(q, k, v, entry_path, save_lse):
    lse_shape = q.shape[:3] if save_lse else (0,)
    return torch.empty_like(q), q.new_empty(lse_shape, dtype=torch.float32)


@torch.library.custom_op("splat::attention_backward", mutates_args=(), device_types="cuda")
def attention_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, dout: torch.Tensor,
                       lse: torch.Tensor, entry_path: str) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    e = entry(entry_path)
    _check_entry(e.manifest, check_inputs(q, k, v), e.path)
    if dout.shape != q.shape or dout.dtype != q.dtype or not dout.is_contiguous() or lse.shape != q.shape[:3]:
        raise SplatError("attention_backward: dout %s %s or lse %s do not match q %s"
                         % (tuple(dout.shape), dout.dtype, tuple(lse.shape), tuple(q.shape)))
    _check_aligned(q=q, k=k, v=v, out=out, dout=dout, lse=lse)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    e.backward(q, k, v, out, dout, lse, dq, dk, dv)
    return dq, dk, dv


@attention_backward.register_fake
def _(q, k, v, out, dout, lse, entry_path):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _setup_context(ctx, inputs, output):
    q, k, v, entry_path, save_lse = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse)
    ctx.entry_path, ctx.save_lse = entry_path, save_lse
    ctx.mark_non_differentiable(lse)


def _backward(ctx, dout, _dlse):
    if not ctx.save_lse:
        raise SplatError("splat.attention ran without gradients (no input required grad, or grad mode was off), "
                         "so its forward saved no softmax statistics to differentiate")
    q, k, v, out, lse = ctx.saved_tensors
    dq, dk, dv = torch.ops.splat.attention_backward(q, k, v, out, dout.contiguous(), lse, ctx.entry_path)
    return dq, dk, dv, None, None


torch.library.register_autograd("splat::attention_forward", _backward, setup_context=_setup_context)


# ---------------------------------------------------------------------------------------------
# splat.attention.

class Resolved:
    """The cache entries resolved so far (the last KEPT), by what they were resolved from: the lookup
    that makes a later call with the same pattern and sizes skip splat.compile."""

    KEPT = 256

    def __init__(self):
        self._paths: "OrderedDict[tuple, str]" = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple) -> Optional[str]:
        with self._lock:
            path = self._paths.get(key)
            if path is not None:
                self._paths.move_to_end(key)
            return path

    def put(self, key: tuple, path: str) -> str:
        with self._lock:
            self._paths[key] = path
            while len(self._paths) > self.KEPT:
                self._paths.popitem(last=False)
        return path


_resolved = Resolved()


def _arch_of(device):
    major, minor = torch.cuda.get_device_capability(device)
    return "sm_90a" if (major, minor) == (9, 0) else "sm_%d%d" % (major, minor)


def _pattern_token(pattern):
    """A hashable stand-in for the pattern, cheap to compute on every call."""
    if isinstance(pattern, Compiled):
        return ("compiled", pattern.path)
    if isinstance(pattern, (str, os.PathLike)):
        p = os.fspath(pattern)
        try:
            st = os.stat(p)
        except OSError:
            return ("file", p, None)  # compile reports it
        return ("file", os.path.abspath(p), st.st_mtime_ns, st.st_size)
    if isinstance(pattern, dict):
        try:
            return ("dict", json.dumps(pattern, sort_keys=True, allow_nan=False))
        except (TypeError, ValueError) as e:
            raise PatternError("argument 'pattern' is not a JSON document: %s" % e) from None
    raise TypeError("argument 'pattern' must be a dict, a path or a compiled pattern, got %s" % type(pattern).__name__)


@torch._dynamo.assume_constant_result
def _resolve(pattern, sizes, need_grad: bool, options: tuple) -> str:
    """The cache entry (its directory) that runs `pattern` at these sizes, compiled on first use."""
    memo = (_pattern_token(pattern), sizes, need_grad, options)
    hit = _resolved.get(memo)
    if hit is not None:
        return hit
    b, h, s, d, kvh, kvl, dtype = sizes
    scale, causal, q_offset, tf32, arch, tune, splatc, cache_dir, backward_mode = options
    if isinstance(pattern, Compiled):
        _check_entry(pattern.manifest, sizes)
        c = pattern
        m = c.manifest.head_groups[0] if c.manifest.head_groups else c.manifest  # per-head: the groups' modules
        if need_grad and m.backward is None:  # the same problem with the backward kernels
            c = _compile(c.problem, arch=c.manifest.arch, backward=True, splatc=splatc, cache_dir=cache_dir,
                         backward_mode=backward_mode)
    else:
        doc = problem_from(pattern, seq_len=s, head_dim=d)
        if dtype == "fp32" and (tf32 or (tf32 is None and doc.get("dtype") == "tf32")):
            dtype = "tf32"  # fp32 storage; plain TF32 products instead of 3xTF32
        c = _compile(doc, dtype=dtype, head_dim=d, batch=b, heads=h, kv_heads=kvh, seq_len=s, kv_len=kvl,
                     q_offset=q_offset, causal=causal, scale=scale, arch=arch, backward=need_grad, tune=tune,
                     splatc=splatc, cache_dir=cache_dir, backward_mode=backward_mode)
        _check_entry(c.manifest, sizes)
    return _resolved.put(memo, c.path)


def attention(q, k, v, pattern, *, scale=None, causal=None, q_offset=None, tf32=None, arch=None, tune=None,
              splatc=None, cache_dir=None, backward_mode="deterministic"):
    """Sparse attention of q over k, v with the keys `pattern` keeps for each query.

    q [batch, heads, seq_len, head_dim]; k, v [batch, kv_heads, kv_len, head_dim] (kv_heads
    dividing heads: grouped-query attention without repeating K/V); contiguous CUDA tensors of
    one dtype: bfloat16, float16 or float32 (3xTF32 on tensor cores; tf32=True, or a problem
    document with "dtype": "tf32", for plain TF32 products).
    pattern: a pattern term ({"window": {...}}), a problem document, a JSON file's path, or a
    handle from splat.compile (whose sizes must match the tensors). The tensors give the sizes;
    scale (default 1/sqrt(head_dim)), causal and q_offset are the contract's fields. Returns the
    output, shaped and typed as q. Differentiable with respect to q, k and v (where splatc's
    backward takes the problem: head_dim up to 256 in bf16/fp16, 128 in fp32); backward_mode "fast" adds dQ by
    atomics in the dK/dV kernel (dQ's bits vary run to run; the default "deterministic" does not).
    The first call for a pattern and shape runs splatc (cached on disk, docs/python.md).
    """
    sizes = check_inputs(q, k, v)
    if isinstance(pattern, Compiled):
        given = [n for n, x in (("scale", scale), ("causal", causal), ("q_offset", q_offset), ("tf32", tf32), ("tune", tune))
                 if x is not None]
        if given:
            raise PatternError("argument '%s' cannot change a compiled pattern: give it to splat.compile" % given[0])
    need_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    if arch is None:
        arch = pattern.manifest.arch if isinstance(pattern, Compiled) else _arch_of(q.device)
    if backward_mode not in ("deterministic", "fast"):
        raise PatternError("argument 'backward_mode' must be 'deterministic' or 'fast', got %r" % (backward_mode,))
    options = (scale, causal, q_offset, None if tf32 is None else bool(tf32), arch, tune, splatc,
               None if cache_dir is None else os.fspath(cache_dir), backward_mode)
    path = _resolve(pattern, tuple(int(x) if not isinstance(x, str) else x for x in sizes), need_grad, options)
    out, _ = torch.ops.splat.attention_forward(q, k, v, path, need_grad)
    return out
