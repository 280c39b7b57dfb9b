"""splat.attention, the PyTorch operator (python/splat/_torch.py).

Without a GPU (PyTorch installed): argument errors, the fake implementations (output shapes for
torch.compile), a full-graph torch.export trace, autograd wiring under fake tensors.
With a GPU: every non-packed problem of tests/gpu through splat.attention against float64 (dense
mask from `splatc analyze --coo`), gradients against float64 autograd where splatc's backward takes the
problem (fp32 within 1e-5), CUDA graph
capture and replay, torch.compile, grouped heads, handles. Skipped without PyTorch; the GPU class
is skipped without CUDA. SPLATC names the built splatc."""

import glob
import json
import os
import subprocess
import sys
import tempfile
import unittest

try:
    import torch
except ImportError:  # CI has no PyTorch: the package's own tests (test_splat.py) still run
    raise unittest.SkipTest("PyTorch is not installed")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import splat  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
WINDOW = {"window": {"left": 64, "right": 64}}
HAVE_SPLATC = bool(os.environ.get("SPLATC"))
HAVE_GPU = torch.cuda.is_available()


def fake_qkv(b=1, h=4, s=512, d=64, kvh=2, kvl=None, dtype=torch.bfloat16):
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        q = torch.empty(b, h, s, d, device="cuda", dtype=dtype)
        k = torch.empty(b, kvh, kvl or s, d, device="cuda", dtype=dtype)
        v = torch.empty_like(k)
    return mode, q, k, v


@unittest.skipUnless(HAVE_SPLATC, "SPLATC (the built splatc) is not set")
class WithoutGpuTest(unittest.TestCase):
    def setUp(self):
        self.cache = tempfile.mkdtemp(prefix="splat-torch-")

    def attend(self, q, k, v, pattern=WINDOW, **kw):
        return splat.attention(q, k, v, pattern, arch="sm_90a", cache_dir=self.cache, **kw)

    def test_the_fake_forward_has_the_output_shape(self):
        mode, q, k, v = fake_qkv()
        with mode:
            o = self.attend(q, k, v)
            out, lse = torch.ops.splat.attention_forward(q, k, v, os.path.join(self.cache, "x"), True)
        self.assertEqual((tuple(o.shape), o.dtype, o.device.type), ((1, 4, 512, 64), torch.bfloat16, "cuda"))
        self.assertEqual((tuple(lse.shape), lse.dtype), ((1, 4, 512), torch.float32))

    def test_the_fake_backward_has_the_gradient_shapes(self):
        mode, q, k, v = fake_qkv(kvl=700)
        with mode:
            o = torch.empty_like(q)
            lse = torch.empty(q.shape[:3], device="cuda")
            dq, dk, dv = torch.ops.splat.attention_backward(q, k, v, o, o, lse, "unused")
        self.assertEqual([tuple(t.shape) for t in (dq, dk, dv)], [(1, 4, 512, 64), (1, 2, 700, 64), (1, 2, 700, 64)])

    def test_inputs_that_need_gradients_get_a_backward_entry_and_a_grad_fn(self):
        mode, q, k, v = fake_qkv()
        with mode:
            q.requires_grad_()
            o = self.attend(q, k, v)
        self.assertIsNotNone(o.grad_fn)
        entries = [e for e in os.listdir(self.cache) if not e.startswith(".")]
        self.assertEqual(len(entries), 1)
        self.assertIsNotNone(splat.load_manifest(os.path.join(self.cache, entries[0])).backward)
        with mode, torch.no_grad():
            self.attend(q, k, v)
        self.assertEqual(len([e for e in os.listdir(self.cache) if not e.startswith(".")]), 2)  # forward only

    def test_export_traces_one_graph_with_the_operator(self):
        cache = self.cache

        class Model(torch.nn.Module):
            def forward(self, q, k, v):
                return splat.attention(q, k, v, WINDOW, arch="sm_90a", cache_dir=cache) * 2

        _, q, k, v = fake_qkv()
        graph = str(torch.export.export(Model(), (q, k, v)).graph)
        self.assertEqual(graph.count("torch.ops.splat.attention_forward.default"), 1, graph)

    def test_bad_inputs_name_the_argument(self):
        mode, q, k, v = fake_qkv()
        cases = [
            (lambda: (q.cpu(), k, v), "argument 'q' must be on a CUDA device, got cpu"),
            (lambda: (q, k.to(torch.float16), v), "argument 'k' is torch.float16 but q is torch.bfloat16"),
            (lambda: (q.to(torch.int32), k, v), "argument 'q' must be bfloat16, float16 or float32"),
            (lambda: (q[0], k, v), r"argument 'q' must have 4 dimensions \[batch, heads, seq_len, head_dim\]"),
            (lambda: (q, k, v[:, :, :100]), "arguments 'k' and 'v' must have one shape"),
            (lambda: (q, k[:, :, :, :32].contiguous(), v[:, :, :, :32].contiguous()), "head_dim=64"),
            (lambda: (q[:, :3].contiguous(), k, v), "kv_heads 2 must divide the 3 heads of q"),
            (lambda: (q.transpose(1, 2), k, v), "argument 'q' must be contiguous"),
        ]
        with mode:
            for make, message in cases:
                with self.subTest(message=message):
                    with self.assertRaisesRegex(splat.PatternError, message):
                        self.attend(*make())
            with self.assertRaisesRegex(TypeError, "argument 'v' must be a torch.Tensor, got list"):
                self.attend(q, k, [1])
            with self.assertRaisesRegex(TypeError, "argument 'pattern' must be a dict, a path or a compiled pattern"):
                self.attend(q, k, v, 3)

    def test_a_handle_must_match_the_tensors(self):
        c = splat.compile(WINDOW, dtype="bf16", head_dim=64, batch=1, heads=4, kv_heads=2, seq_len=256,
                          cache_dir=self.cache)
        mode, q, k, v = fake_qkv()
        with mode:
            with self.assertRaisesRegex(splat.PatternError, "the tensors have seq_len 512 but the compiled pattern was built for seq_len 256"):
                splat.attention(q, k, v, c)
        mode, q, k, v = fake_qkv(s=256, dtype=torch.float16)
        with mode:
            with self.assertRaisesRegex(splat.PatternError, "the tensors are fp16 but the compiled pattern was built for bf16"):
                splat.attention(q, k, v, c)
        mode, q, k, v = fake_qkv(s=256)
        with mode:
            self.assertEqual(tuple(splat.attention(q, k, v, c).shape), (1, 4, 256, 64))
            with self.assertRaisesRegex(splat.PatternError, "argument 'scale' cannot change a compiled pattern"):
                splat.attention(q, k, v, c, scale=0.5)

    def test_the_training_demo_runs_its_dense_backend_on_the_cpu(self):
        with tempfile.TemporaryDirectory() as out:
            run = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "train_long_context.py"), "--device", "cpu",
                                  "--backends", "sdpa", "--seq", "256", "--window", "64", "--lag", "20", "--steps", "4",
                                  "--layers", "1", "--heads", "2", "--out", out], capture_output=True, text=True, timeout=300)
            self.assertEqual(run.returncode, 0, run.stderr[-2000:])
            self.assertRegex(run.stdout, r"\| sdpa \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|")
            with open(os.path.join(out, "losses.json")) as f:
                self.assertEqual(len(json.load(f)["results"]["sdpa"]["loss"]), 4)

    def test_a_refused_problem_is_a_pattern_error(self):
        mode, q, k, v = fake_qkv()
        with mode:
            with self.assertRaisesRegex(splat.PatternError, "window.left"):
                self.attend(q, k, v, {"window": {"left": -1, "right": 2}})


# ---------------------------------------------------------------------------------------------
# On a GPU.

def dense_mask(problem_path, problem):
    """[heads, seq_len, kv_len] bool from splatc analyze --coo (one term per head group)."""
    heads, s = problem.get("heads", 1), problem["seq_len"]
    kvl = problem.get("kv_len", s)
    per_head = "head_patterns" in problem
    mask = torch.zeros(heads, s, kvl, dtype=torch.bool)
    with tempfile.TemporaryDirectory() as d:
        for h in range(heads if per_head else 1):
            coo = os.path.join(d, "coo")
            cmd = [os.environ["SPLATC"], "-q", "analyze", problem_path, "--coo", coo] + (["--head", str(h)] if per_head else [])
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            with open(coo) as f:
                ij = torch.tensor([int(x) for x in f.read().split()], dtype=torch.int64).view(-1, 2)
            target = mask[h] if per_head else mask[0]
            target[ij[:, 0], ij[:, 1]] = True
    if not per_head:
        mask[1:] = mask[0]
    return mask


def reference(q, k, v, mask, scale):
    """float64 attention over the kept keys; a row that keeps none gives zeros (as the kernels)."""
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    m = mask.to(q.device)[None]
    s = (q @ k.transpose(-1, -2)) * scale
    s = s.masked_fill(~m, float("-inf"))
    empty = ~m.any(-1, keepdim=True)
    top = s.amax(-1, keepdim=True).detach().masked_fill(empty, 0)
    p = torch.exp(s - top)
    p = p / p.sum(-1, keepdim=True).masked_fill(empty, 1)
    return p @ v


def rel_err(x, ref):
    x, ref = x.double(), ref.double()
    if not torch.isfinite(x).all():
        return float("nan")
    top = ref.abs().max().item()
    return (x - ref).abs().max().item() / (top if top > 0 else 1)


TORCH_DTYPE = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "tf32": torch.float32}


def problem_sizes(problem):
    """(batch, heads, seq_len, head_dim, kv_heads, kv_len, dtype) as splat.attention sees the tensors."""
    h = problem.get("heads", 1)
    dtype = problem.get("dtype", "fp32")
    return (problem.get("batch", 1), h, problem["seq_len"], problem["head_dim"], problem.get("kv_heads", h),
            problem.get("kv_len", problem["seq_len"]), "fp32" if dtype == "tf32" else dtype)


def takes_gradients(problem):
    """The problems splatc's backward takes: whole 16-byte row chunks, head_dim up to 256 in bf16/fp16
    and up to 128 in fp32."""
    b, h, s, d, kvh, kvl, dtype = problem_sizes(problem)
    return d <= (128 if dtype == "fp32" else 256) and d % (4 if dtype == "fp32" else 8) == 0


def compile_all(paths, cache):
    """splatc emit for every problem at once (a process each, as many as cores), as splat.attention
    would on its first call: the checks that follow find their entries in memory."""
    from concurrent.futures import ThreadPoolExecutor
    from splat._torch import _arch_of, _resolve  # what splat.attention resolves its entry with
    arch = _arch_of(torch.device("cuda"))

    def one(path):
        with open(path) as f:
            problem = json.load(f)
        # splat.attention's options at its defaults: (scale, causal, q_offset, tf32, arch, tune, splatc,
        # cache_dir, backward_mode)
        options = (None, None, None, None, arch, None, None, cache, "deterministic")
        return _resolve(path, problem_sizes(problem), takes_gradients(problem), options)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 4) as pool:
        list(pool.map(one, paths))


def check_problem(path, cache):
    """(name, forward error, gradient error or None, tolerance) for one tests/gpu problem."""
    with open(path) as f:
        problem = json.load(f)
    dtype = problem.get("dtype", "fp32")
    b, h, s, d = problem.get("batch", 1), problem.get("heads", 1), problem["seq_len"], problem["head_dim"]
    kvh, kvl = problem.get("kv_heads", h), problem.get("kv_len", s)
    gen = torch.Generator(device="cuda").manual_seed(0)
    make = lambda *shape: torch.randn(*shape, device="cuda", generator=gen, dtype=torch.float32).to(TORCH_DTYPE[dtype])
    q, k, v, dout = make(b, h, s, d), make(b, kvh, kvl, d), make(b, kvh, kvl, d), make(b, h, s, d)
    mask = dense_mask(path, problem)
    scale = problem.get("scale", d ** -0.5)
    tol = 1e-5 if dtype == "fp32" else 2e-2
    grads = takes_gradients(problem)
    for t in (q, k, v):
        t.requires_grad_(grads)
    out = splat.attention(q, k, v, path, cache_dir=cache)
    q64, k64, v64 = (t.detach().double().requires_grad_(grads) for t in (q, k, v))
    ref = reference(q64, k64, v64, mask, scale)
    fwd = rel_err(out, ref)
    bwd = None
    if grads:
        out.backward(dout)
        ref.backward(dout.double())
        bwd = max(rel_err(a.grad, b.grad) for a, b in ((q, q64), (k, k64), (v, v64)))
    return os.path.basename(path), fwd, bwd, tol


@unittest.skipUnless(HAVE_GPU and HAVE_SPLATC, "needs a CUDA GPU and SPLATC")
class GpuTest(unittest.TestCase):
    def setUp(self):
        self.cache = tempfile.mkdtemp(prefix="splat-torch-gpu-")

    def test_every_gpu_problem_against_float64(self):
        rows, bad = [], []
        paths = []
        for path in sorted(glob.glob(os.path.join(ROOT, "tests", "gpu", "*.json"))):
            with open(path) as f:
                if "varlen" not in json.load(f):
                    paths.append(path)
        compile_all(paths, self.cache)
        for path in paths:
            name, fwd, bwd, tol = check_problem(path, self.cache)
            ok = fwd <= tol and (bwd is None or bwd <= tol)
            rows.append("%-36s fwd %.2e  grad %s  tol %.0e  %s" % (name, fwd, "-" if bwd is None else "%.2e" % bwd, tol,
                                                                 "ok" if ok else "FAIL"))
            if not ok:
                bad.append(name)
        print("\n" + "\n".join(rows))
        self.assertEqual(bad, [])

    def qkv(self, dtype=torch.bfloat16, b=2, h=4, kvh=2, s=1000, d=64, grad=True):
        gen = torch.Generator(device="cuda").manual_seed(1)
        make = lambda *sh: torch.randn(*sh, device="cuda", generator=gen).to(dtype).requires_grad_(grad)
        return make(b, h, s, d), make(b, kvh, s, d), make(b, kvh, s, d)

    def test_cuda_graph_capture_replays_forward_and_backward(self):
        q, k, v = self.qkv()
        step = lambda: splat.attention(q, k, v, WINDOW, cache_dir=self.cache).float().square().sum()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up: compiles, loads, uploads tables
            for _ in range(2):
                q.grad = k.grad = v.grad = None
                step().backward()
        torch.cuda.current_stream().wait_stream(side)
        q.grad = k.grad = v.grad = None
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            loss = step()
            loss.backward()
        for trial in range(2):
            with torch.no_grad():
                for t in (q, k, v):
                    t.copy_(torch.randn_like(t))
            graph.replay()
            torch.cuda.synchronize()
            got = (loss.item(), q.grad.clone(), k.grad.clone(), v.grad.clone())
            q2, k2, v2 = (t.detach().clone().requires_grad_() for t in (q, k, v))
            want = splat.attention(q2, k2, v2, WINDOW, cache_dir=self.cache).float().square().sum()
            want.backward()
            self.assertAlmostEqual(got[0], want.item(), delta=1e-3 * abs(want.item()))
            for a, b in zip(got[1:], (q2.grad, k2.grad, v2.grad)):
                self.assertTrue(torch.equal(a, b), "trial %d: graph replay differs from eager" % trial)

    def test_the_fast_backward_matches_float64(self):
        q, k, v = self.qkv()  # grouped K/V heads, bf16, causal window
        mask = torch.zeros(1000, 1000, dtype=torch.bool, device="cuda")
        i = torch.arange(1000, device="cuda")
        mask[(i[:, None] - i[None, :] >= 0) & (i[:, None] - i[None, :] <= 32)] = True
        doc = {"seq_len": 1000, "head_dim": 64, "causal": True, "pattern": {"window": {"left": 32, "right": 0}}}
        dout = torch.randn_like(q)
        out = splat.attention(q, k, v, doc, backward_mode="fast", cache_dir=self.cache)
        out.backward(dout)
        q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
        ref = reference(q64, k64, v64, mask, 64 ** -0.5)
        ref.backward(dout.double())
        self.assertLessEqual(rel_err(out, ref), 2e-2)
        for a, b in ((q, q64), (k, k64), (v, v64)):
            self.assertLessEqual(rel_err(a.grad, b.grad), 2e-2)

    def test_torch_compile_matches_eager(self):
        q, k, v = self.qkv()
        f = lambda q, k, v: splat.attention(q, k, v, WINDOW, cache_dir=self.cache).float().sum(-1)
        g = torch.compile(f, fullgraph=True)
        got = g(q, k, v)
        got.sum().backward()
        gq = q.grad.clone()
        q.grad = None
        want = f(q, k, v)
        want.sum().backward()
        self.assertTrue(torch.allclose(got, want))
        self.assertTrue(torch.equal(gq, q.grad))

    def test_gradients_the_backward_does_not_take_are_refused_with_the_reason(self):
        q, k, v = self.qkv(torch.float16, d=36)
        with self.assertRaisesRegex(splat.PatternError, r"head_dim a multiple of 8 \(fp16\)"):
            splat.attention(q, k, v, WINDOW, cache_dir=self.cache)
        with torch.no_grad():
            self.assertEqual(splat.attention(q, k, v, WINDOW, cache_dir=self.cache).shape, q.shape)

    def test_a_misaligned_view_is_refused(self):
        q, k, v = self.qkv(grad=False)
        flat = torch.randn(q.numel() + 1, device="cuda").to(q.dtype)
        with self.assertRaisesRegex(splat.PatternError, "argument 'q' must start at a 16-byte aligned address"):
            splat.attention(flat[1:].view(q.shape), k, v, WINDOW, cache_dir=self.cache)

    def test_the_tensor_maps_follow_new_k_and_v(self):
        q, k, v = self.qkv(grad=False)
        outs = []
        for _ in range(20):  # more pairs than the map cache keeps
            k2, v2 = torch.randn_like(k), torch.randn_like(v)
            o = splat.attention(q, k2, v2, WINDOW, cache_dir=self.cache)
            outs.append((k2, v2, o))
        mask = torch.zeros(4, 1000, 1000, dtype=torch.bool)
        i = torch.arange(1000)
        mask[:, (i[:, None] - i[None, :]).abs() <= 64] = True
        # The last pair again, on a stream of its own: its kept map is read there too.
        k2, v2, o = outs[-1]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            o_side = splat.attention(q, k2, v2, WINDOW, cache_dir=self.cache)
        torch.cuda.current_stream().wait_stream(side)
        self.assertTrue(torch.equal(o_side, o))
        for k2, v2, o in outs[:3] + outs[-3:]:
            ref = reference(q.double(), k2.double(), v2.double(), mask, 64 ** -0.5)
            self.assertLess(rel_err(o, ref), 2e-2)


if __name__ == "__main__":
    unittest.main()
