"""splat.attention_varlen, the packed-batch operator (python/splat/_varlen.py).
Without a GPU (PyTorch installed): argument errors, the fake implementations, the entry it compiles
(a varlen problem of max_seqlen rows, max_total_tokens bucketed, the backward's cu_seqlens), the
export trace. With a GPU: packed sequences (empty, one token, tile edges) against float64 attention
of each sequence alone, gradients included, and zeros past the last sequence. Skipped without
PyTorch; the GPU class without CUDA. SPLATC names the built splatc."""

import glob
import json
import os
import sys
import tempfile
import unittest

try:
    import torch
except ImportError:  # CI has no PyTorch
    raise unittest.SkipTest("PyTorch is not installed")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import splat  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

WINDOW = {"window": {"left": 32, "right": 0}}
HAVE_SPLATC = bool(os.environ.get("SPLATC"))
HAVE_GPU = torch.cuda.is_available()


def fake_packed(total=700, h=4, kvh=2, d=64, sequences=3, dtype=torch.bfloat16):
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        q = torch.empty(total, h, d, device="cuda", dtype=dtype)
        k = torch.empty(total, kvh, d, device="cuda", dtype=dtype)
        v = torch.empty_like(k)
        cu = torch.empty(sequences + 1, device="cuda", dtype=torch.int32)
    return mode, q, k, v, cu


def entries(cache):
    return sorted(e for e in os.listdir(cache) if not e.startswith("."))


@unittest.skipUnless(HAVE_SPLATC, "SPLATC (the built splatc) is not set")
class WithoutGpuTest(unittest.TestCase):
    def setUp(self):
        self.cache = tempfile.mkdtemp(prefix="splat-varlen-")

    def attend(self, q, k, v, cu, max_seqlen=512, pattern=WINDOW, **kw):
        return splat.attention_varlen(q, k, v, cu, max_seqlen, pattern, arch="sm_90a", causal=True,
                                      cache_dir=self.cache, **kw)

    def test_the_fake_operators_have_the_shapes(self):
        mode, q, k, v, cu = fake_packed()
        with mode:
            o = self.attend(q, k, v, cu)
            out, lse = torch.ops.splat.attention_varlen_forward(q, k, v, cu, "unused", True)
            dq, dk, dv = torch.ops.splat.attention_varlen_backward(q, k, v, cu, out, out, lse, "unused")
        self.assertEqual((tuple(o.shape), o.dtype), ((700, 4, 64), torch.bfloat16))
        self.assertEqual(tuple(lse.shape), (700, 4))
        self.assertEqual([tuple(t.shape) for t in (dq, dk, dv)], [(700, 4, 64), (700, 2, 64), (700, 2, 64)])

    def test_the_entry_is_a_varlen_problem_that_new_lengths_share(self):
        mode, q, k, v, cu = fake_packed(total=700)
        with mode:
            q.requires_grad_()
            o = self.attend(q, k, v, cu)
        self.assertIsNotNone(o.grad_fn)
        (e,) = entries(self.cache)
        m = splat.load_manifest(os.path.join(self.cache, e))
        self.assertEqual(m.problem["seq_len"], 512)
        self.assertEqual(m.problem["varlen"], {"max_total_tokens": 1024})
        self.assertEqual(m.forward.parameters[8].name, "cu_seqlens")
        self.assertEqual([p.name for p in m.backward.parameters][-1], "cu_seqlens")
        self.assertEqual(m.backward.kernels[1].grid[1], "sequences*heads")
        # Other totals in the bucket and other sequence counts: the same entry; a larger total: a new one.
        for total, sequences in ((1000, 7), (1024, 1)):
            mode, q, k, v, cu = fake_packed(total=total, sequences=sequences)
            with mode:
                q.requires_grad_()
                self.attend(q, k, v, cu)
        self.assertEqual(len(entries(self.cache)), 1)
        mode, q, k, v, cu = fake_packed(total=1025)
        with mode:
            q.requires_grad_()
            self.attend(q, k, v, cu)
        self.assertEqual(len(entries(self.cache)), 2)
        self.assertEqual(splat._varlen.token_bucket(1025), 2048)

    def test_per_head_patterns_over_grouped_heads_share_the_backward_workspace(self):
        doc = {"seq_len": 256, "head_dim": 64, "causal": True,
               "head_patterns": [{"window": {"left": 8, "right": 0}}, {"window": {"left": 32, "right": 0}},
                                 {"window": {"left": 8, "right": 0}}, {"window": {"left": 64, "right": 0}}]}
        mode, q, k, v, cu = fake_packed()
        with mode:
            q.requires_grad_()
            self.assertEqual(tuple(self.attend(q, k, v, cu, pattern=doc).shape), (700, 4, 64))
        (e,) = entries(self.cache)
        m = splat.load_manifest(os.path.join(self.cache, e))
        self.assertEqual(m.problem["varlen"], {"max_total_tokens": 1024})
        self.assertEqual(len(m.head_groups), 3)
        self.assertTrue(all(g.backward.workspace_shared for g in m.head_groups))
        self.assertEqual([g.backward.kernels[-1].name for g in m.head_groups][-1], "splat_bwd_reduce")

    def test_export_traces_one_graph_with_the_operator(self):
        cache = self.cache

        class Model(torch.nn.Module):
            def forward(self, q, k, v, cu):
                return splat.attention_varlen(q, k, v, cu, 512, WINDOW, arch="sm_90a", cache_dir=cache) * 2

        _, q, k, v, cu = fake_packed()
        graph = str(torch.export.export(Model(), (q, k, v, cu)).graph)
        self.assertEqual(graph.count("torch.ops.splat.attention_varlen_forward.default"), 1, graph)

    def test_bad_inputs_name_the_argument(self):
        mode, q, k, v, cu = fake_packed()
        cases = [
            (lambda: (q.cpu(), k, v, cu), "argument 'q' must be on a CUDA device, got cpu"),
            (lambda: (q[None], k, v, cu), r"argument 'q' must have 3 dimensions \[total_tokens, heads, head_dim\]"),
            (lambda: (q, k.to(torch.float16), v, cu), "argument 'k' is torch.float16 on cuda:0 but q is torch.bfloat16"),
            (lambda: (q, k[:600].contiguous(), v[:600].contiguous(), cu), r"argument 'k' must be \[total_tokens=700"),
            (lambda: (q[:, :3].contiguous(), k, v, cu), "kv_heads 2 must divide the 3 heads of q"),
            (lambda: (q, k, v, cu.long()), "argument 'cu_seqlens' must be a 1-dimensional int32 tensor"),
            (lambda: (q, k, v, cu.cpu()), "argument 'cu_seqlens' must be contiguous on cuda:0, got cpu"),
            (lambda: (q.transpose(0, 1).contiguous().transpose(0, 1), k, v, cu), "argument 'q' must be contiguous"),
        ]
        with mode:
            for make, message in cases:
                with self.subTest(message=message):
                    with self.assertRaisesRegex(splat.PatternError, message):
                        self.attend(*make())
            with self.assertRaisesRegex(splat.PatternError, "'max_seqlen' must be a positive int, got 0"):
                self.attend(q, k, v, cu, max_seqlen=0)
            with self.assertRaisesRegex(splat.PatternError, "'max_total_tokens' must be an int of at least the 700 tokens"):
                self.attend(q, k, v, cu, max_total_tokens=699)
            with self.assertRaisesRegex(TypeError, "argument 'cu_seqlens' must be a torch.Tensor, got list"):
                self.attend(q, k, v, [0, 700])


@unittest.skipUnless(HAVE_GPU and HAVE_SPLATC, "needs a CUDA GPU and SPLATC")
class GpuTest(unittest.TestCase):
    def setUp(self):
        self.cache = tempfile.mkdtemp(prefix="splat-varlen-gpu-")

    def check(self, dtype, tol, lengths=(300, 0, 1, 64, 129, 500), extra=7, backward_mode="deterministic",
              windows=(32, 32, 32, 32)):
        """Each sequence against float64 attention of that sequence alone (head h's causal window of
        windows[h] keys back; one pattern when they are equal, else per-head patterns); the `extra`
        tokens after the last sequence get zeros."""
        gen = torch.Generator(device="cuda").manual_seed(3)
        total = sum(lengths) + extra
        make = lambda *sh: torch.randn(*sh, device="cuda", generator=gen).to(dtype).requires_grad_()
        q, k, v = make(total, 4, 64), make(total, 2, 64), make(total, 2, 64)
        dout = torch.randn(total, 4, 64, device="cuda", generator=gen).to(dtype)
        starts = [0]
        for n in lengths:
            starts.append(starts[-1] + n)
        cu = torch.tensor(starts, dtype=torch.int32, device="cuda")
        pattern = ({"window": {"left": windows[0], "right": 0}} if len(set(windows)) == 1 else
                   {"seq_len": 512, "head_dim": 64, "head_patterns": [{"window": {"left": w, "right": 0}} for w in windows]})
        out = splat.attention_varlen(q, k, v, cu, 512, pattern, causal=True, cache_dir=self.cache,
                                     backward_mode=backward_mode)
        out.backward(dout)
        for b, n in enumerate(lengths):
            if n == 0:
                continue
            a = starts[b]
            q64, k64, v64 = (t.detach()[a:a + n].double().transpose(0, 1).requires_grad_() for t in (q, k, v))
            g = 2  # query heads per K/V head
            kk, vv = k64.repeat_interleave(g, 0), v64.repeat_interleave(g, 0)
            i = torch.arange(n, device="cuda")
            lag = i[:, None] - i[None, :]
            keep = torch.stack([(lag >= 0) & (lag <= w) for w in windows])  # [heads, n, n]
            s = (q64 @ kk.transpose(-1, -2)) * 64 ** -0.5
            ref = torch.softmax(s.masked_fill(~keep, float("-inf")), -1) @ vv
            ref.backward(dout[a:a + n].double().transpose(0, 1))
            got = out[a:a + n].transpose(0, 1)
            for name, x, y in (("out", got, ref), ("dq", q.grad[a:a + n].transpose(0, 1), q64.grad),
                               ("dk", k.grad[a:a + n].transpose(0, 1), k64.grad),
                               ("dv", v.grad[a:a + n].transpose(0, 1), v64.grad)):
                # Relative to the reference's largest element, absolute where that is 0: a one-token
                # sequence's dQ and dK are exactly 0 in float64 (one key: P = 1, dS = 0) and fp32
                # rounding of dP - D in the kernels (about 1e-7).
                top = y.abs().max().item()
                err = (x.double() - y).abs().max().item() / (top if top > 0 else 1.0)
                self.assertLessEqual(err, tol, "sequence %d (%d tokens): %s" % (b, n, name))
        tail = slice(starts[-1], total)
        for t in (out, q.grad, k.grad, v.grad):
            self.assertTrue(torch.all(t[tail] == 0).item())

    def test_every_varlen_gpu_problem_against_float64(self):
        """Every packed problem of tests/gpu at its own lengths: each sequence against float64 attention over
        its part of the pattern (splatc analyze --coo of the longest sequence, cut to the sequence's length)."""
        sys.path.insert(0, os.path.dirname(__file__))
        from test_torch import ROOT, TORCH_DTYPE, dense_mask, reference, rel_err
        bad = []
        for path in sorted(glob.glob(os.path.join(ROOT, "tests", "gpu", "*.json"))):
            with open(path) as f:
                problem = json.load(f)
            if "varlen" not in problem:
                continue
            lengths, dtype = problem["varlen"]["lengths"], problem.get("dtype", "fp32")
            h, d, s = problem.get("heads", 1), problem["head_dim"], problem["seq_len"]
            kvh = problem.get("kv_heads", h)
            tol = 1e-5 if dtype == "fp32" else 2e-2
            wide = TORCH_DTYPE[dtype] != torch.float32
            if d > (256 if wide else 128) or d % (8 if wide else 4):
                continue  # the backward does not take it
            gen = torch.Generator(device="cuda").manual_seed(5)
            total = sum(lengths)
            make = lambda *sh: torch.randn(*sh, device="cuda", generator=gen).to(TORCH_DTYPE[dtype]).requires_grad_()
            q, k, v = make(total, h, d), make(total, kvh, d), make(total, kvh, d)
            dout = torch.randn(total, h, d, device="cuda", generator=gen).to(TORCH_DTYPE[dtype])
            cu = torch.tensor([0] + [sum(lengths[:b + 1]) for b in range(len(lengths))], dtype=torch.int32, device="cuda")
            out = splat.attention_varlen(q, k, v, cu, s, path, cache_dir=self.cache)
            out.backward(dout)
            mask, scale, start = dense_mask(path, problem), problem.get("scale", d ** -0.5), 0
            for n in lengths:
                if n:
                    part = lambda t: t.detach()[start:start + n].double().transpose(0, 1)[None].requires_grad_()
                    q64, k64, v64 = part(q), part(k), part(v)
                    ref = reference(q64, k64, v64, mask[:, :n, :n], scale)
                    ref.backward(dout[start:start + n].double().transpose(0, 1)[None])
                    got = [out, q.grad, k.grad, v.grad]
                    for x, y in zip(got, (ref, q64.grad, k64.grad, v64.grad)):
                        err = rel_err(x[start:start + n].transpose(0, 1)[None], y)
                        if not err <= tol:
                            bad.append("%s sequence at %d (%d tokens): %.2e" % (os.path.basename(path), start, n, err))
                start += n
        self.assertEqual(bad, [])

    def test_the_tensor_maps_follow_the_token_count(self):
        """Two packed batches in the same storage (the same k and v addresses), the second with more
        tokens, one compiled entry: a window's band kernel reads K and V through tensor maps over the
        batch's tokens, so maps kept from the first batch would read the second's later tokens as
        zeros."""
        gen = torch.Generator(device="cuda").manual_seed(7)
        make = lambda h: torch.randn(1200, h, 64, device="cuda", generator=gen).to(torch.bfloat16)
        qb, kb, vb = make(4), make(2), make(2)
        for lengths in ((100, 37), (100, 37, 700, 163)):  # both compile for 1024 tokens: one entry
            total, starts = sum(lengths), [0]
            for n in lengths:
                starts.append(starts[-1] + n)
            q, k, v = qb[:total], kb[:total], vb[:total]
            self.assertEqual(k.data_ptr(), kb.data_ptr())
            cu = torch.tensor(starts, dtype=torch.int32, device="cuda")
            with torch.no_grad():
                out = splat.attention_varlen(q, k, v, cu, 1024, WINDOW, causal=True, cache_dir=self.cache)
            for a, n in zip(starts, lengths):
                q64, k64, v64 = (t[a:a + n].double().transpose(0, 1) for t in (q, k, v))
                kk, vv = k64.repeat_interleave(2, 0), v64.repeat_interleave(2, 0)
                i = torch.arange(n, device="cuda")
                lag = i[:, None] - i[None, :]
                s = (q64 @ kk.transpose(-1, -2)) * 64 ** -0.5
                ref = torch.softmax(s.masked_fill(~((lag >= 0) & (lag <= 32)), float("-inf")), -1) @ vv
                err = (out[a:a + n].transpose(0, 1).double() - ref).abs().max().item() / ref.abs().max().item()
                self.assertLessEqual(err, 2e-2, "%d tokens in all, the sequence at %d (%d tokens)" % (total, a, n))

    def test_bf16_against_float64(self):
        self.check(torch.bfloat16, 2e-2)

    def test_fp32_against_float64(self):
        self.check(torch.float32, 1e-5)

    def test_the_fast_backward_against_float64(self):
        self.check(torch.bfloat16, 2e-2, backward_mode="fast")

    def test_per_head_windows_over_grouped_heads_against_float64(self):
        self.check(torch.bfloat16, 2e-2, windows=(8, 32, 8, 64))
