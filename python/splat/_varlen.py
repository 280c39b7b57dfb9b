"""splat.attention_varlen: a packed variable-length batch (document masking) as a PyTorch operator.

The sequences of a batch are packed into q [total_tokens, heads, head_dim] and k, v [total_tokens,
kv_heads, head_dim]; cu_seqlens (int32, [sequences + 1], on the tensors' device) gives where each
starts, as FlashAttention's varlen API does. The pattern applies within each sequence and never
across. One compiled entry serves every set of lengths up to its max_seqlen and max_total_tokens,
so batches of new lengths compile nothing. `splat::attention_varlen_forward` and
`splat::attention_varlen_backward` launch splatc's varlen modules (docs/splatc-kernels.md,
"Packed variable-length batches"); they follow splat.attention's operators (_torch.py).
"""

import os
from typing import Tuple

import torch

from ._compile import compile as _compile
from ._errors import PatternError, SplatError
from ._problem import problem_from
from ._torch import _DTYPES, Resolved, _arch_of, _check_aligned, _pattern_token, check_tensor, entry

_NAMES = ("q", "k", "v")


def check_varlen_inputs(q, k, v, cu_seqlens):
    """q [total_tokens, heads, head_dim]; k, v [total_tokens, kv_heads, head_dim]; cu_seqlens int32
    [sequences + 1] on their device; one dtype (bf16, fp16, fp32), contiguous. Returns (total_tokens,
    heads, head_dim, kv_heads, dtype name). cu_seqlens's values are not read here (that would wait
    for the GPU): they must start at 0, not decrease and end at most at total_tokens."""
    for name, t in zip(_NAMES, (q, k, v)):
        check_tensor(name, t, "total_tokens, %s, head_dim" % ("heads" if name == "q" else "kv_heads"))
        if t.device != q.device or t.dtype != q.dtype:
            raise PatternError("argument '%s' is %s on %s but q is %s on %s" % (name, t.dtype, t.device, q.dtype, q.device))
        if not t.is_contiguous():
            raise PatternError("argument '%s' must be contiguous; call .contiguous() first" % name)
    total, h, d = q.shape
    if k.shape != v.shape:
        raise PatternError("arguments 'k' and 'v' must have one shape, got %s and %s" % (tuple(k.shape), tuple(v.shape)))
    if k.shape[0] != total or k.shape[2] != d:
        raise PatternError("argument 'k' must be [total_tokens=%d, kv_heads, head_dim=%d], got %s" % (total, d, tuple(k.shape)))
    if k.shape[1] < 1 or h % k.shape[1] != 0:
        raise PatternError("argument 'k': kv_heads %d must divide the %d heads of q" % (k.shape[1], h))
    if not isinstance(cu_seqlens, torch.Tensor):
        raise TypeError("argument 'cu_seqlens' must be a torch.Tensor, got %s" % type(cu_seqlens).__name__)
    if cu_seqlens.dtype != torch.int32 or cu_seqlens.dim() != 1 or cu_seqlens.numel() < 1:
        raise PatternError("argument 'cu_seqlens' must be a 1-dimensional int32 tensor of sequences + 1 starts, got "
                           "%s of shape %s" % (cu_seqlens.dtype, tuple(cu_seqlens.shape)))
    if cu_seqlens.device != q.device or not cu_seqlens.is_contiguous():
        raise PatternError("argument 'cu_seqlens' must be contiguous on %s, got %s" % (q.device, cu_seqlens.device))
    return total, h, d, k.shape[1], _DTYPES[q.dtype]


def _check_varlen_entry(manifest, sizes, what="the compiled pattern"):
    """The tensors' sizes against a varlen entry's."""
    total, h, d, kvh, dtype = sizes
    p = manifest.problem
    varlen = p.get("varlen")
    if not varlen:
        raise PatternError("%s is not a packed variable-length batch (use splat.attention)" % what)
    for field, value in (("heads", h), ("head_dim", d), ("kv_heads", kvh)):
        if field in p and p[field] != value:
            raise PatternError("the tensors have %s %d but %s was built for %s %d" % (field, value, what, field, p[field]))
    if p.get("dtype") not in (dtype, "tf32" if dtype == "fp32" else None):
        raise PatternError("the tensors are %s but %s was built for %s" % (dtype, what, p.get("dtype")))
    if total > varlen.get("max_total_tokens", 0):
        raise PatternError("the tensors have %d tokens but %s was built for at most %d (max_total_tokens)"
                           % (total, what, varlen.get("max_total_tokens", 0)))


# ---------------------------------------------------------------------------------------------
# The operators. Tokens from cu_seqlens[-1] on belong to no sequence: their outputs and gradients
# are zero (the buffers are zeroed first; the kernels do not write them).

@torch.library.custom_op("splat::attention_varlen_forward", mutates_args=(), device_types="cuda")
def attention_varlen_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor,
                             entry_path: str, save_lse: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    e = entry(entry_path)
    _check_varlen_entry(e.manifest, check_varlen_inputs(q, k, v, cu_seqlens), e.path)
    _check_aligned(q=q, k=k, v=v)
    out = torch.zeros_like(q)
    lse = q.new_full(q.shape[:2], float("-inf"), dtype=torch.float32) if save_lse else q.new_empty(0, dtype=torch.float32)
    e.forward(q, k, v, out, lse if save_lse else None, cu_seqlens)
    return out, lse


@attention_varlen_forward.register_fake
def _(q, k, v, cu_seqlens, entry_path, save_lse):
    return torch.empty_like(q), q.new_empty(q.shape[:2] if save_lse else (0,), dtype=torch.float32)


@torch.library.custom_op("splat::attention_varlen_backward", mutates_args=(), device_types="cuda")
def attention_varlen_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor,
                              out: torch.Tensor, dout: torch.Tensor, lse: torch.Tensor,
                              entry_path: str) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    e = entry(entry_path)
    _check_varlen_entry(e.manifest, check_varlen_inputs(q, k, v, cu_seqlens), e.path)
    if dout.shape != q.shape or dout.dtype != q.dtype or not dout.is_contiguous() or lse.shape != q.shape[:2]:
        raise SplatError("attention_varlen_backward: dout %s %s or lse %s do not match q %s"
                         % (tuple(dout.shape), dout.dtype, tuple(lse.shape), tuple(q.shape)))
    _check_aligned(q=q, k=k, v=v, out=out, dout=dout, lse=lse)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    e.backward(q, k, v, out, dout, lse, dq, dk, dv, cu_seqlens)
    return dq, dk, dv


@attention_varlen_backward.register_fake
def _(q, k, v, cu_seqlens, out, dout, lse, entry_path):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _setup_context(ctx, inputs, output):
    q, k, v, cu_seqlens, entry_path, save_lse = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, cu_seqlens, out, lse)
    ctx.entry_path, ctx.save_lse = entry_path, save_lse
    ctx.mark_non_differentiable(lse)


def _backward(ctx, dout, _dlse):
    if not ctx.save_lse:
        raise SplatError("splat.attention_varlen ran without gradients (no input required grad, or grad mode was "
                         "off), so its forward saved no softmax statistics to differentiate")
    q, k, v, cu_seqlens, out, lse = ctx.saved_tensors
    dq, dk, dv = torch.ops.splat.attention_varlen_backward(q, k, v, cu_seqlens, out, dout.contiguous(), lse,
                                                           ctx.entry_path)
    return dq, dk, dv, None, None, None


torch.library.register_autograd("splat::attention_varlen_forward", _backward, setup_context=_setup_context)


# ---------------------------------------------------------------------------------------------
# splat.attention_varlen.

_resolved = Resolved()


def token_bucket(total):
    """max_total_tokens when not given: total rounded up to a power of two (at least 1024), so that
    batches of similar sizes share one entry."""
    n = 1024
    while n < total:
        n *= 2
    return n


@torch._dynamo.assume_constant_result
def _resolve_varlen(pattern, sizes, max_seqlen: int, max_total_tokens: int, need_grad: bool, options: tuple) -> str:
    """The cache entry (its directory) for `pattern` over packed sequences of up to max_seqlen tokens."""
    memo = (_pattern_token(pattern), sizes, max_seqlen, max_total_tokens, need_grad, options)
    hit = _resolved.get(memo)
    if hit is not None:
        return hit
    total, h, d, kvh, dtype = sizes
    scale, causal, tf32, arch, tune, splatc, cache_dir, backward_mode = options
    doc = problem_from(pattern, seq_len=max_seqlen, head_dim=d)
    for field in ("batch", "kv_len", "q_offset"):  # a packed batch has none of them (the contract)
        doc.pop(field, None)
    doc["varlen"] = {"max_total_tokens": max_total_tokens}
    if dtype == "fp32" and (tf32 or (tf32 is None and doc.get("dtype") == "tf32")):
        dtype = "tf32"
    c = _compile(doc, dtype=dtype, heads=h, kv_heads=kvh, causal=causal, scale=scale, arch=arch, backward=need_grad,
                 tune=tune, splatc=splatc, cache_dir=cache_dir, backward_mode=backward_mode)
    _check_varlen_entry(c.manifest, sizes)
    return _resolved.put(memo, c.path)


def attention_varlen(q, k, v, cu_seqlens, max_seqlen, pattern, *, max_total_tokens=None, scale=None, causal=None,
                     tf32=None, arch=None, tune=None, splatc=None, cache_dir=None, backward_mode="deterministic"):
    """Sparse attention over a packed batch: sequence b is tokens cu_seqlens[b] .. cu_seqlens[b+1] - 1
    of q [total_tokens, heads, head_dim] and k, v [total_tokens, kv_heads, head_dim], and its queries
    see only its own keys, as `pattern` keeps them (positions counted from the sequence's start).

    cu_seqlens: int32 [sequences + 1] on the tensors' device, starting at 0, not decreasing; each
    length at most max_seqlen (an int: the entry is compiled for it; not checked on the GPU, so a
    longer sequence is cut at max_seqlen rows and keys). max_total_tokens (default: total_tokens
    rounded up to a power of two) is the most tokens the entry takes. Tokens from cu_seqlens[-1] on
    get zero outputs and gradients. The other keywords are splat.attention's; a compiled handle is
    not taken (give the pattern). Returns the output, shaped and typed as q; differentiable with
    respect to q, k and v (backward_mode as splat.attention's).
    """
    sizes = check_varlen_inputs(q, k, v, cu_seqlens)
    if isinstance(max_seqlen, bool) or not isinstance(max_seqlen, int) or max_seqlen < 1:
        raise PatternError("argument 'max_seqlen' must be a positive int, got %r" % (max_seqlen,))
    total = sizes[0]
    if max_total_tokens is None:
        max_total_tokens = token_bucket(total)
    elif isinstance(max_total_tokens, bool) or not isinstance(max_total_tokens, int) or max_total_tokens < total:
        raise PatternError("argument 'max_total_tokens' must be an int of at least the %d tokens, got %r"
                           % (total, max_total_tokens))
    if backward_mode not in ("deterministic", "fast"):
        raise PatternError("argument 'backward_mode' must be 'deterministic' or 'fast', got %r" % (backward_mode,))
    need_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    options = (scale, causal, None if tf32 is None else bool(tf32), arch or _arch_of(q.device), tune, splatc,
               None if cache_dir is None else os.fspath(cache_dir), backward_mode)
    path = _resolve_varlen(pattern, sizes, max_seqlen, max_total_tokens, need_grad, options)
    out, _ = torch.ops.splat.attention_varlen_forward(q, k, v, cu_seqlens, path, need_grad)
    return out
