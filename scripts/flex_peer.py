#!/usr/bin/env python3
"""Peer measurement for `splatc bench`: FlexAttention and dense SDPA on the same problems.

Reads splatc pattern files (docs: shared spec splatc-patterns.md), builds the same mask as a
FlexAttention mask_mod (every term evaluated on index tensors, random_blocks with the same
splitmix64 generator as libsplat), and times
  flex  = torch.compile(flex_attention) with create_block_mask (128x128 blocks, Triton backend),
  dense = F.scaled_dot_product_attention without a mask (ignores the sparsity),
with triton.testing.do_bench (median, warm-up 50 ms, 300 ms of repeats; it flushes L2 between
runs). fp32 runs with TF32 disabled. The flex error is checked against a float64 masked SDPA on
problems of at most 4096 rows. Grouped-query heads (kv_heads) run with enable_gqa=True (K and V
not repeated); q_offset shifts the query positions the mask sees; a packed variable-length batch
("varlen") runs as document masking over all its tokens ([1, H, total, D]; no dense SDPA); per-head
patterns ("head_patterns") as one mask_mod that selects each head's term by a table indexed by h,
with a block mask per head. --backward also times FlexAttention's backward (torch.autograd). Prints
one JSON line per problem and writes them all to --out.
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F
import triton
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
import torch._dynamo  # noqa: E402

torch._dynamo.config.recompile_limit = 1000
torch._dynamo.config.cache_size_limit = 1000
flex = torch.compile(flex_attention, dynamic=False)
DEV = "cuda"
M64 = (1 << 64) - 1
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "tf32": torch.float32}


def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & M64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return state, z ^ (z >> 31)


def random_key_blocks(seed, per_row, rb, nkb):
    r = min(per_row, nkb)
    state = (seed ^ ((rb * 0xD1B54A32D192ED03) & M64)) & M64
    out = []
    while len(out) < r:
        state, z = splitmix64(state)
        k = z % nkb
        if k not in out:
            out.append(k)
    return sorted(out)


def term_mask(t, L, KV):
    """Returns f(q, k) -> bool tensor for one term (q, k broadcastable int64 tensors)."""
    (kind, a), = t.items()
    if kind == "window":
        left, right = a["left"], a["right"]
        return lambda q, k: (k >= q - left) & (k <= q + right)
    if kind == "dilated":
        left, right, dil = a["left"], a["right"], a["dilation"]
        # Bounds on k - q itself, not on (k - q) // dil: the same mask, and FlexAttention evaluates
        # mask_mod on every partial block, where Python's floor division costs (H200, dilated-4k
        # bf16: 120 us with //, 89 us without; 16k: 451 / 318).
        if left == right:  # the team's reference peer script's form
            return lambda q, k: ((k - q).abs() <= left * dil) & ((k - q) % dil == 0)
        return lambda q, k: ((k - q) % dil == 0) & (k - q >= -left * dil) & (k - q <= right * dil)
    if kind == "strided":
        s, o = a["stride"], a.get("offset", 0)
        return lambda q, k: (q - k) % s == o
    if kind == "fixed":
        b, c = a["block"], a["summary"]
        return lambda q, k: (q // b == k // b) | (k % b >= b - c)
    if kind == "blocked":
        b = a["block"]
        return lambda q, k: q // b == k // b
    if kind == "block_window":
        b, left, right = a["block"], a["left"], a["right"]
        return lambda q, k: ((k // b - q // b) >= -left) & ((k // b - q // b) <= right)
    if kind == "global":
        toks = sorted(a["tokens"])
        if toks and toks[-1] - toks[0] + 1 == len(toks):  # a contiguous range: plain comparisons
            lo, hi = toks[0], toks[-1]
            if lo == 0:  # leading tokens (Longformer): one comparison each, as a hand-written mask_mod has
                return lambda q, k: (q <= hi) | (k <= hi)
            return lambda q, k: ((q >= lo) & (q <= hi)) | ((k >= lo) & (k <= hi))
        g = torch.zeros(max(L, KV), dtype=torch.bool, device=DEV)
        g[torch.tensor(a["tokens"], dtype=torch.long, device=DEV)] = True
        return lambda q, k: g[q] | g[k]
    if kind == "random_blocks":
        b, r, seed = a["block"], a["per_row"], a["seed"]
        nrb, nkb = (L + b - 1) // b, (KV + b - 1) // b
        tab = torch.tensor([random_key_blocks(seed, r, rb, nkb) for rb in range(nrb)], dtype=torch.long, device=DEV)
        def f(q, k):
            hit = tab[q // b, 0] == k // b
            for c in range(1, tab.shape[1]):
                hit = hit | (tab[q // b, c] == k // b)
            return hit
        return f
    if kind == "affine":
        p, o, s, n = a["slope"], a["offset"], a["stride"], a["count"]
        # d // s < n is d < n * s for d >= 0 (no floor division, as for dilated).
        return lambda q, k: ((k - (p * q + o)) >= 0) & ((k - (p * q + o)) % s == 0) & ((k - (p * q + o)) < n * s)
    if kind in ("union", "intersect"):
        fs = [term_mask(c, L, KV) for c in a]
        if kind == "union":
            def f(q, k):
                m = fs[0](q, k)
                for g in fs[1:]:
                    m = m | g(q, k)
                return m
        else:
            def f(q, k):
                m = fs[0](q, k)
                for g in fs[1:]:
                    m = m & g(q, k)
                return m
        return f
    raise SystemExit(f"flex_peer: pattern term '{kind}' is not supported here")


def head_mask(doc, L, KV):
    """f(h, q, k): the pattern of head h. Per-head patterns ("head_patterns": n terms, head h has term
    h // (heads // n)) as a FlexAttention user writes them: each distinct term's mask where a table of
    the heads' groups (indexed by h) selects it."""
    if "head_patterns" not in doc:
        f = term_mask(doc["pattern"], L, KV)
        return lambda h, q, k: f(q, k)
    terms, H = doc["head_patterns"], doc.get("heads", 1)
    keys = [json.dumps(t, sort_keys=True) for t in terms]
    distinct = list(dict.fromkeys(keys))
    fs = [term_mask(json.loads(key), L, KV) for key in distinct]
    gid = torch.tensor([distinct.index(keys[h // (H // len(terms))]) for h in range(H)], device=DEV)

    def f(h, q, k):
        g = gid[h]
        m = fs[0](q, k) & (g == 0)
        for x in range(1, len(fs)):
            m = m | (fs[x](q, k) & (g == x))
        return m
    return f


def problem_mask(doc):
    L = doc["seq_len"]
    KV = doc.get("kv_len", L)
    off = doc.get("q_offset", 0)  # query row q sits at position q + off
    f = head_mask(doc, L + off, KV)
    causal = doc.get("causal", False)

    def mask_mod(b, h, q, k):
        p = q + off if off else q
        m = f(h, p, k)
        return (m & (k <= p)) if causal else m
    if "varlen" not in doc:
        return mask_mod
    # A packed variable-length batch as FlexAttention's document masking: one sequence of all the
    # tokens ([1, H, total, D]); a pair is kept when both tokens are of one document and the pattern
    # keeps their positions within it.
    lengths = doc["varlen"]["lengths"]
    doc_id = torch.repeat_interleave(torch.arange(len(lengths), device=DEV), torch.tensor(lengths, device=DEV))
    starts = torch.tensor([0] + lengths[:-1], device=DEV).cumsum(0)
    pos = torch.arange(int(sum(lengths)), device=DEV) - starts[doc_id]

    def varlen_mask(b, h, q, k):
        return (doc_id[q] == doc_id[k]) & mask_mod(b, h, pos[q], pos[k])
    return varlen_mask


def bench(fn):
    return triton.testing.do_bench(fn, warmup=50, rep=300, return_mode="median")


def backward_times(row, q, k, v, bm, scale, gqa):
    """FlexAttention's backward through torch.autograd (its Triton backward kernels): the gradients of
    Q, K and V for a random dO, alone (the forward's graph kept) and after the forward."""
    qg, kg, vg = (t.detach().requires_grad_(True) for t in (q, k, v))
    o = flex(qg, kg, vg, block_mask=bm, scale=scale, **gqa)
    do = torch.randn_like(o)
    row["flex_bwd_ms"] = bench(lambda: torch.autograd.grad(o, (qg, kg, vg), do, retain_graph=True))

    def step():
        out = flex(qg, kg, vg, block_mask=bm, scale=scale, **gqa)
        torch.autograd.grad(out, (qg, kg, vg), do)
    row["flex_fwdbwd_ms"] = bench(step)
    del o, do, qg, kg, vg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("patterns", nargs="+")
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "flex_peer.json"))
    ap.add_argument("--check-max-len", type=int, default=4096)
    ap.add_argument("--backward", action="store_true",
                    help="also time FlexAttention's backward (torch.autograd: flex_bwd_ms) and forward + backward "
                         "(flex_fwdbwd_ms)")
    args = ap.parse_args()
    rows = []
    for path in args.patterns:
        doc = json.load(open(path))
        name = doc.get("name", os.path.splitext(os.path.basename(path))[0])
        L = doc["seq_len"]
        KV = doc.get("kv_len", L)
        if "varlen" in doc:  # all the tokens as one sequence (document masking)
            L = KV = int(sum(doc["varlen"]["lengths"]))
        D = doc["head_dim"]
        B, H = doc.get("batch", 1), doc.get("heads", 1)
        KVH = doc.get("kv_heads", H)
        gqa = {"enable_gqa": True} if KVH != H else {}
        dt = DTYPES[doc.get("dtype", "fp32")]
        scale = doc.get("scale", 1.0 / math.sqrt(D))
        mask_mod = problem_mask(doc)
        row = {"name": name, "file": path, "L": L, "head_dim": D, "dtype": doc.get("dtype", "fp32")}
        t0 = time.time()
        try:
            torch.manual_seed(0)
            q = torch.randn(B, H, L, D, device=DEV, dtype=dt)
            k = torch.randn(B, KVH, KV, D, device=DEV, dtype=dt)
            v = torch.randn(B, KVH, KV, D, device=DEV, dtype=dt)
            # Compiled mask evaluation past 2^31 cells: the eager one materialises the whole mask.
            big = {"_compile": True} if L * KV > 2**31 else {}
            per_head = "head_patterns" in doc  # a block mask per head
            bm = create_block_mask(mask_mod, B=None, H=H if per_head else None, Q_LEN=L, KV_LEN=KV, device=DEV, **big)
            row["block_density"] = round(1 - bm.sparsity() / 100, 4)
            o = flex(q, k, v, block_mask=bm, scale=scale, **gqa)
            if L <= args.check_max_len:
                qi = torch.arange(L, device=DEV)[:, None]
                ki = torch.arange(KV, device=DEV)[None, :]
                hi = torch.arange(H, device=DEV)[:, None, None] if per_head else 0
                m = mask_mod(0, hi, qi, ki)  # [H, L, KV] per head, else [L, KV]
                row["density"] = m.float().mean().item()
                ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=m, scale=scale, **gqa)
                ref = torch.nan_to_num(ref)  # empty rows
                row["flex_rel_err"] = ((o.double() - ref).abs().max() / ref.abs().max()).item()
                del ref, m
            row["flex_ms"] = bench(lambda: flex(q, k, v, block_mask=bm, scale=scale, **gqa))
            if args.backward:
                backward_times(row, q, k, v, bm, scale, gqa)
        except Exception as e:  # keep going: one failing case must not lose the others
            row["flex_error"] = repr(e)[:300]
        try:
            if "varlen" in doc:
                raise RuntimeError("not run for a packed batch (dense over all its tokens)")
            row["dense_ms"] = bench(lambda: F.scaled_dot_product_attention(q, k, v, scale=scale, **gqa))
        except Exception as e:
            row["dense_error"] = repr(e)[:300]
        row["seconds"] = round(time.time() - t0, 1)
        print(json.dumps(row), flush=True)
        rows.append(row)
        with open(args.out, "w") as f:
            json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
        del q, k, v
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
