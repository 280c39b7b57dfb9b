#!/usr/bin/env python3
"""Train one small long-context transformer three times, with the same weights and data, and
attention computed by splat (splatc's kernels), FlexAttention (Triton) and dense SDPA with a
boolean mask; print and plot the loss curves and step times.

    SPLATC=build/apps/splatc python3 examples/train_long_context.py [--steps 300] [--out DIR]

The data is made here: random tokens in which each position copies the token `lag` positions
back with probability `copy`, so the loss can only fall below ln(vocab) by attending `lag` keys
back. The attention pattern is a causal window plus the first `sinks` tokens ("attention
sinks"), the same for every backend: splat's from the pattern contract, FlexAttention's as a
mask_mod, SDPA's as the dense mask; the script checks that FlexAttention's mask_mod and the dense
mask equal splatc's own mask before training. Needs a CUDA GPU (`--device cpu --backends sdpa` runs
the model alone, for a quick check of the script). Writes DIR/losses.json, DIR/loss.png (with
matplotlib; without it, the JSON only) and prints a table.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))


def pattern(args):
    """The contract's problem document of the pattern (sizes added by splat.attention)."""
    return {"name": "train-window-sinks", "causal": True,
            "pattern": {"union": [{"window": {"left": args.window - 1, "right": 0}},
                                  {"global": {"tokens": list(range(args.sinks))}}]}}


def window_sinks(q, kv, window, sinks):
    """The same pattern as a formula (FlexAttention's mask_mod, the dense mask)."""
    return (kv <= q) & ((q - kv < window) | (kv < sinks))


def dense_mask(args, device):
    i = torch.arange(args.seq, device=device)
    return window_sinks(i[:, None], i[None, :], args.window, args.sinks)


def check_mask_against_splatc(args):
    """The formula against `splatc analyze --coo` of the pattern: the backends attend the same keys."""
    splatc = os.environ.get("SPLATC", "splatc")
    doc = dict(pattern(args), seq_len=args.seq, head_dim=args.head_dim, heads=args.heads, dtype="bf16")
    with tempfile.TemporaryDirectory() as d:
        p, coo = os.path.join(d, "p.json"), os.path.join(d, "coo")
        with open(p, "w") as f:
            json.dump(doc, f)
        subprocess.run([splatc, "-q", "analyze", p, "--coo", coo], check=True, stdout=subprocess.DEVNULL)
        with open(coo) as f:
            text = f.read()
        try:
            import numpy
            ij = torch.from_numpy(numpy.fromstring(text, dtype=numpy.int64, sep=" ")).view(-1, 2)
        except ImportError:
            ij = torch.tensor([int(x) for x in text.split()], dtype=torch.int64).view(-1, 2)
    mask = torch.zeros(args.seq, args.seq, dtype=torch.bool)
    mask[ij[:, 0], ij[:, 1]] = True
    if not torch.equal(mask, dense_mask(args, "cpu")):
        raise SystemExit("the formula's mask differs from splatc's: the comparison would not be fair")
    return int(mask.sum())


def make_attention(name, args, device):
    """attend(q, k, v) for [batch, heads, seq, head_dim] bf16 tensors."""
    if name == "splat":
        import splat
        pat = pattern(args)
        mode = args.splat_backward
        return lambda q, k, v: splat.attention(q.contiguous(), k.contiguous(), v.contiguous(), pat, backward_mode=mode)
    if name == "flex":
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        w, s = args.window, args.sinks
        block = create_block_mask(lambda b, h, q, kv: window_sinks(q, kv, w, s), None, None, args.seq, args.seq,
                                  device=device)
        flex = torch.compile(flex_attention)
        return lambda q, k, v: flex(q, k, v, block_mask=block)
    if name == "sdpa":
        mask = dense_mask(args, device)
        return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    raise SystemExit("unknown backend %r" % name)


def rope(x, base=10000.0):
    """Rotary position embedding over the last dimension of [batch, heads, seq, head_dim]."""
    d = x.shape[-1]
    pos = torch.arange(x.shape[-2], device=x.device, dtype=torch.float32)
    freq = base ** (-torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d)
    ang = pos[:, None] * freq[None, :]
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


class Block(torch.nn.Module):
    def __init__(self, dim, heads, attend):
        super().__init__()
        self.heads, self.attend = heads, attend
        self.n1, self.n2 = torch.nn.RMSNorm(dim), torch.nn.RMSNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim, bias=False)
        self.proj = torch.nn.Linear(dim, dim, bias=False)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim, bias=False), torch.nn.GELU(),
                                       torch.nn.Linear(4 * dim, dim, bias=False))

    def forward(self, x):
        b, s, dim = x.shape
        q, k, v = self.qkv(self.n1(x)).view(b, s, 3, self.heads, dim // self.heads).permute(2, 0, 3, 1, 4)
        y = self.attend(rope(q), rope(k), v)
        x = x + self.proj(y.transpose(1, 2).reshape(b, s, dim))
        return x + self.mlp(self.n2(x))


class Model(torch.nn.Module):
    def __init__(self, args, attend):
        super().__init__()
        dim = args.heads * args.head_dim
        self.embed = torch.nn.Embedding(args.vocab, dim)
        self.blocks = torch.nn.ModuleList(Block(dim, args.heads, attend) for _ in range(args.layers))
        self.norm = torch.nn.RMSNorm(dim)
        self.head = torch.nn.Linear(dim, args.vocab, bias=False)

    def forward(self, tokens):
        x = self.embed(tokens)
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x))


def batches(args, device):
    """The same token batches for every backend: random tokens, each copying the one `lag` back w.p. `copy`."""
    gen = torch.Generator(device="cpu").manual_seed(args.seed + 1)
    for _ in range(args.steps):
        x = torch.randint(0, args.vocab, (args.batch, args.seq + 1), generator=gen)
        copy = torch.rand(args.batch, args.seq + 1, generator=gen) < args.copy
        for t in range(args.lag, args.seq + 1, args.lag):  # in chunks of lag, so a copy may copy a copy
            end = min(t + args.lag, args.seq + 1)
            x[:, t:end] = torch.where(copy[:, t:end], x[:, t - args.lag:end - args.lag], x[:, t:end])
        yield x[:, :-1].to(device), x[:, 1:].to(device)


def train(name, args, device):
    torch.manual_seed(args.seed)
    model = Model(args, make_attention(name, args, device)).to(device=device, dtype=torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 20))
    losses, times = [], []
    cuda = device.type == "cuda"
    for step, (x, y) in enumerate(batches(args, device)):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss = F.cross_entropy(model(x).float().view(-1, args.vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
        if step % max(1, args.steps // 10) == 0:
            print("  %-5s step %4d  loss %.4f  %.1f ms" % (name, step, losses[-1], 1e3 * times[-1]), flush=True)
    return losses, times


def plot(results, args, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no %s (the curves are in losses.json)" % path)
        return
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for name, r in results.items():
        a.plot(r["loss"], label=name, linewidth=1)
        b.plot([1e3 * t for t in r["step_s"]], label=name, linewidth=1)
    a.axhline(math.log(args.vocab), color="gray", linestyle=":", linewidth=1)
    a.set(xlabel="step", ylabel="training loss (nats)", title="loss: seq %d, window %d + %d sinks" % (args.seq, args.window, args.sinks))
    b.set(xlabel="step", ylabel="step time (ms)", yscale="log", title="step time")
    a.legend()
    b.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print("wrote", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backends", default="splat,flex,sdpa")
    ap.add_argument("--splat-backward", default="deterministic", choices=("deterministic", "fast"),
                    help="splat's backward mode (docs/python.md)")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--seq", type=int, default=16384)
    ap.add_argument("--window", type=int, default=1024)
    ap.add_argument("--sinks", type=int, default=16)
    ap.add_argument("--lag", type=int, default=200)
    ap.add_argument("--copy", type=float, default=0.7)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default="train-out")
    args = ap.parse_args()
    if not 0 < args.lag < args.window:
        raise SystemExit("--lag must be inside the window (0 < lag < window)")
    device = torch.device(args.device)
    nnz = check_mask_against_splatc(args)
    print("seq %d, window %d + %d sinks: %d kept of %d (%.2f%%); %d layers x %d heads x d %d, batch %d"
          % (args.seq, args.window, args.sinks, nnz, args.seq ** 2, 100 * nnz / args.seq ** 2, args.layers, args.heads,
             args.head_dim, args.batch))
    results = {}
    for name in args.backends.split(","):
        losses, times = train(name, args, device)
        results[name] = {"loss": losses, "step_s": times}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "losses.json"), "w") as f:
        json.dump({"args": vars(args), "results": results}, f)
    plot(results, args, os.path.join(args.out, "loss.png"))
    skip = min(10, args.steps // 2)  # compile and warm-up steps
    last = max(1, args.steps // 10)
    print("\n| backend | median step (ms) | loss, mean of the last %d steps | first loss |" % last)
    print("|---|---|---|---|")
    for name, r in results.items():
        t = sorted(r["step_s"][skip:]) or r["step_s"]
        print("| %s | %.1f | %.4f | %.4f |" % (name, 1e3 * t[len(t) // 2], sum(r["loss"][-last:]) / last, r["loss"][0]))


if __name__ == "__main__":
    main()
