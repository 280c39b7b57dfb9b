"""The Python package (python/splat) without PyTorch or a GPU: pattern handling, cache keys,
splatc emit through the cache, manifest parsing and error messages. SPLATC names the built splatc."""

import importlib.util
import json
import os
import shutil
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import splat  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
WINDOW = {"window": {"left": 32, "right": 32}}
SIZES = dict(dtype="bf16", head_dim=64, batch=1, heads=2, seq_len=256)


class ProblemTest(unittest.TestCase):
    def test_a_term_is_wrapped_and_the_input_is_not_modified(self):
        term = {"window": {"left": 1, "right": 2}}
        doc = splat.problem_from(term, seq_len=10, head_dim=8)
        self.assertEqual(doc, {"name": "splat", "pattern": {"window": {"left": 1, "right": 2}},
                               "seq_len": 10, "head_dim": 8})
        doc["pattern"]["window"]["left"] = 5
        self.assertEqual(term["window"]["left"], 1)

    def test_a_document_keeps_its_fields_and_keywords_override_them(self):
        doc = splat.problem_from({"name": "x", "seq_len": 4, "head_dim": 8, "pattern": WINDOW}, seq_len=16,
                                 dtype="torch.bfloat16", causal=True, scale=0.5)
        self.assertEqual((doc["name"], doc["seq_len"], doc["dtype"], doc["causal"], doc["scale"]),
                         ("x", 16, "bf16", True, 0.5))

    def test_a_file_is_read_and_named_by_its_stem(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "mine.json")
            with open(p, "w") as f:
                json.dump({"seq_len": 8, "head_dim": 8, "pattern": WINDOW}, f)
            self.assertEqual(splat.problem_from(p)["name"], "mine")
            with open(p, "w") as f:
                f.write('{"seq_len": 8,\n  "head_dim": }')
            with self.assertRaisesRegex(splat.PatternError, r"mine\.json:2:\d+: Expecting value"):
                splat.problem_from(p)
            with open(p, "wb") as f:
                f.write(b"\xff\xfe")
            with self.assertRaisesRegex(splat.PatternError, "not UTF-8"):
                splat.problem_from(p)
            with self.assertRaisesRegex(splat.PatternError, "No such file"):
                splat.problem_from(os.path.join(d, "absent.json"))

    def test_bad_arguments_name_the_argument(self):
        with self.assertRaisesRegex(TypeError, "argument 'head_dim' must be an int, got str"):
            splat.problem_from(WINDOW, seq_len=8, head_dim="64")
        with self.assertRaisesRegex(TypeError, "argument 'seq_len' must be an int, got bool"):
            splat.problem_from(WINDOW, seq_len=True, head_dim=8)
        with self.assertRaisesRegex(splat.PatternError, "argument 'heads' must be at least 1, got 0"):
            splat.problem_from(WINDOW, seq_len=8, head_dim=8, heads=0)
        with self.assertRaisesRegex(splat.PatternError, "argument 'dtype': expected one of fp32, tf32, fp16, bf16"):
            splat.problem_from(WINDOW, seq_len=8, head_dim=8, dtype="int8")
        with self.assertRaisesRegex(TypeError, "argument 'causal' must be a bool"):
            splat.problem_from(WINDOW, seq_len=8, head_dim=8, causal=1)
        with self.assertRaisesRegex(splat.PatternError, "argument 'scale' must be a positive number"):
            splat.problem_from(WINDOW, seq_len=8, head_dim=8, scale=float("nan"))
        with self.assertRaisesRegex(splat.PatternError, "the problem has no 'seq_len'"):
            splat.problem_from(WINDOW, head_dim=8)
        with self.assertRaisesRegex(splat.PatternError, r"argument 'pattern': expected a problem document.*\['left'\]"):
            splat.problem_from({"left": 3})
        with self.assertRaisesRegex(TypeError, "argument 'pattern' must be a dict, a path or a compiled pattern, got int"):
            splat.problem_from(3)


class CacheKeyTest(unittest.TestCase):
    def test_the_key_is_canonical_and_covers_every_input(self):
        p = splat.problem_from(WINDOW, **SIZES)
        q = json.loads(json.dumps(p))
        q = dict(reversed(list(q.items())))  # another key order
        base = splat.cache_key(p, "sm_90a", "forward", None, "splatc 0.1.0")
        self.assertEqual(base, splat.cache_key(q, "sm_90a", "forward", "", "splatc 0.1.0"))
        others = [
            splat.cache_key(splat.problem_from(WINDOW, **dict(SIZES, seq_len=257)), "sm_90a", "forward", None, "splatc 0.1.0"),
            splat.cache_key(p, "sm_80", "forward", None, "splatc 0.1.0"),
            splat.cache_key(p, "sm_90a", "both", None, "splatc 0.1.0"),
            splat.cache_key(p, "sm_90a", "forward", "stages=3", "splatc 0.1.0"),
            splat.cache_key(p, "sm_90a", "forward", None, "splatc 0.2.0"),
            splat.cache_key(p, "sm_90a", "both", None, "splatc 0.1.0", "fast"),
        ]
        self.assertEqual(len(set(others + [base])), 7)
        # The default mode keeps the keys entries had before the mode existed.
        self.assertEqual(splat.cache_key(p, "sm_90a", "both", None, "splatc 0.1.0", "deterministic"), others[2])
        self.assertRegex(base, "^[0-9a-f]{64}$")

    def test_a_non_finite_number_is_refused(self):
        with self.assertRaisesRegex(splat.PatternError, "not valid JSON"):
            splat.cache_key({"x": float("inf")}, "sm_90a", "forward", None, "v")


@unittest.skipUnless(os.environ.get("SPLATC"), "SPLATC (the built splatc) is not set")
class CompileTest(unittest.TestCase):
    def setUp(self):
        self.cache = tempfile.mkdtemp(prefix="splat-cache-")

    def tearDown(self):
        shutil.rmtree(self.cache, ignore_errors=True)

    def entries(self):
        return sorted(os.listdir(self.cache))

    def test_compile_emits_once_then_reads_the_cache(self):
        c = splat.compile(WINDOW, **SIZES, backward=True, cache_dir=self.cache)
        self.assertFalse(c.from_cache)
        self.assertEqual(self.entries(), [c.key])
        m = c.manifest
        self.assertEqual((m.arch, m.target, m.problem["seq_len"], m.problem["dtype"]), ("sm_90a", "ptx", 256, "bf16"))
        fwd = m.forward.kernels
        self.assertTrue(fwd and all(k.name.startswith("splat_") for k in fwd))
        self.assertEqual(fwd[0].launch_grid(batch=1, heads=2)[1], 2)
        self.assertEqual([p.name for p in m.forward.parameters[:4]], ["q", "k", "v", "o"])
        self.assertIn(".entry " + fwd[0].name, c.ptx(m.forward))
        self.assertEqual([k.name for k in m.backward.kernels][0], "splat_bwd_delta")
        self.assertIn(".entry splat_bwd_delta", c.ptx(m.backward))
        with open(os.path.join(c.path, "problem.json")) as f:
            self.assertEqual(json.load(f), c.problem)
        mtime = os.stat(os.path.join(c.path, "manifest.json")).st_mtime_ns
        again = splat.compile(dict(WINDOW), **SIZES, backward=True, cache_dir=self.cache)
        self.assertTrue(again.from_cache)
        self.assertEqual((again.key, again.path), (c.key, c.path))
        self.assertEqual(os.stat(os.path.join(c.path, "manifest.json")).st_mtime_ns, mtime)
        self.assertIs(splat.compile(c), c)
        other = splat.compile(WINDOW, **dict(SIZES, seq_len=320), cache_dir=self.cache)
        self.assertNotEqual(other.key, c.key)
        self.assertEqual(len(self.entries()), 2)

    def test_a_refused_problem_is_a_pattern_error_with_its_json_path_and_leaves_nothing(self):
        with self.assertRaisesRegex(splat.PatternError, r"pattern\.window\.left: expected a non-negative integer"):
            splat.compile({"window": {"left": -1, "right": 2}}, **SIZES, cache_dir=self.cache)
        with self.assertRaisesRegex(splat.PatternError, r"head_dim a multiple of 8 \(fp16\)"):
            splat.compile(WINDOW, **dict(SIZES, dtype="fp16", head_dim=36), backward=True, cache_dir=self.cache)
        self.assertEqual(self.entries(), [])

    def test_concurrent_compiles_of_one_pattern_share_one_entry(self):
        results, errors = [], []

        def work():
            try:
                results.append(splat.compile(WINDOW, **SIZES, cache_dir=self.cache))
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=work) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(len({r.key for r in results}), 1)
        self.assertEqual(self.entries(), [results[0].key])

    def test_per_head_patterns_give_one_module_per_head_group(self):
        doc = {"seq_len": 256, "head_dim": 64, "heads": 4, "dtype": "bf16",
               "head_patterns": [{"window": {"left": 8, "right": 8}}, {"window": {"left": 8, "right": 8}},
                                 {"window": {"left": 64, "right": 0}}, {"window": {"left": 64, "right": 0}}]}
        m = splat.compile(doc, cache_dir=self.cache).manifest
        self.assertIsNone(m.forward)
        self.assertEqual(len(m.head_groups), 2)
        self.assertEqual(m.head_groups[1].forward.kernels[0].launch_grid(batch=1, group_heads=2)[1], 2)
        b = splat.compile(doc, backward=True, cache_dir=self.cache).manifest  # a backward module per group
        self.assertIsNone(b.backward)
        self.assertEqual([g.backward.kernels[0].name for g in b.head_groups], ["splat_bwd_delta"] * 2)
        self.assertEqual(b.head_groups[1].backward.kernels[1].grid[1], "batch*group_heads")
        self.assertEqual([p.name for p in b.head_groups[0].forward.parameters][-1], "lse")
        self.assertFalse(any(g.backward.workspace_shared for g in b.head_groups))
        self.assertTrue(all(x.backward.kernels[-1].name == "splat_bwd_p0" for x in b.head_groups))  # dQ and dK/dV in one launch
        # The fast mode: dQ from the dK/dV kernels' atomics, no dQ kernel; a mode of another name is refused.
        f = splat.compile(doc, backward=True, backward_mode="fast", cache_dir=self.cache)
        self.assertNotEqual(f.key, splat.compile(doc, backward=True, cache_dir=self.cache).key)
        self.assertEqual([k.name for k in f.manifest.head_groups[0].backward.kernels],
                         ["splat_bwd_delta", "splat_bwd_dkv_p0", "splat_bwd_dq_store"])
        with self.assertRaisesRegex(splat.PatternError, "'backward_mode' must be 'deterministic' or 'fast', got 'quick'"):
            splat.compile(doc, backward=True, backward_mode="quick", cache_dir=self.cache)
        # Over grouped K/V heads the groups share one workspace; the last group's module reduces dk, dv.
        g = splat.compile(doc, kv_heads=2, backward=True, cache_dir=self.cache).manifest
        self.assertTrue(all(x.backward.workspace_shared for x in g.head_groups))
        self.assertEqual([x.backward.kernels[-1].name == "splat_bwd_reduce" for x in g.head_groups], [False, True])

    def test_a_missing_splatc_is_a_compile_error(self):
        with self.assertRaisesRegex(splat.CompileError, "splatc not found"):
            splat.compile(WINDOW, **SIZES, splatc=os.path.join(self.cache, "nope", "splatc"), cache_dir=self.cache)


@unittest.skipUnless(os.environ.get("SPLATC"), "SPLATC (the built splatc) is not set")
class LaunchPlanTest(unittest.TestCase):
    """splat._launch: what a loader launches, from real manifests (no GPU)."""

    def setUp(self):
        self.cache = tempfile.mkdtemp(prefix="splat-launch-")

    def tearDown(self):
        shutil.rmtree(self.cache, ignore_errors=True)

    def test_a_tma_module_binds_its_parameters_in_order_and_its_maps_span_k(self):
        from splat import _launch
        m = splat.compile(WINDOW, **dict(SIZES, heads=4, kv_heads=2, seq_len=1024), backward=True,
                          cache_dir=self.cache).manifest
        fwd = _launch.forward_module(m)
        self.assertIs(fwd, m.forward)
        names = ["q", "k", "v", "o", "ws", "scores", "table", "tmaps", "lse"]
        self.assertEqual([p.name for p in fwd.parameters], names)
        values = {n: 0x1000 * (i + 1) for i, n in enumerate(names)}
        self.assertEqual(_launch.arguments(fwd, dict(values, scores=None, extra=7)),
                         tuple(0 if n == "scores" else values[n] for n in names))
        with self.assertRaisesRegex(splat.ManifestError, "parameter 8 'lse' .* has no value"):
            _launch.arguments(fwd, {n: 1 for n in names[:-1]})
        steps = _launch.steps(fwd, _launch.grid_sizes(m, 3, 4))
        self.assertEqual([st.name for st in steps], [k.name for k in fwd.kernels])
        self.assertTrue(all(st.grid[1] == 12 and st.block == (128, 1, 1) for st in steps))
        k_bytes = 1 * 2 * 1024 * 64 * 2  # batch * kv_heads * kv_len * head_dim * 2 bytes
        self.assertTrue(fwd.tensor_maps)
        for tm in fwd.tensor_maps:
            self.assertEqual((tm.element, tm.swizzle), ("bf16", "128B"))
            self.assertEqual(_launch.map_span_bytes(tm), k_bytes)
            self.assertEqual(_launch.map_arguments(tm, 0x10000).dims, tm.dims)
            with self.assertRaisesRegex(splat.ManifestError, "not 16-byte aligned"):
                _launch.map_arguments(tm, 0x10008)
        bwd = m.backward
        self.assertEqual([p.name for p in bwd.parameters], ["q", "k", "v", "o", "dout", "lse", "dq", "dk", "dv", "ws", "table"])
        self.assertEqual(_launch.workspace_floats(bwd, 12), 12 * bwd.workspace_floats_per_bh)
        self.assertGreater(bwd.workspace_floats_per_bh, 0)
        # sm_90a: every backward launch after splat_bwd_delta is a programmatic dependent launch.
        self.assertFalse(any(st.programmatic for st in steps))
        bsteps = _launch.steps(bwd, _launch.grid_sizes(m, 3, 4))
        self.assertEqual([st.name for st in bsteps][0], "splat_bwd_delta")
        self.assertEqual([st.programmatic for st in bsteps], [False] + [True] * (len(bsteps) - 1))
        self.assertGreater(len(bsteps), 1)
        with self.assertRaisesRegex(splat.ManifestError, "grid.y 70000 is more than one launch takes"):
            _launch.steps(fwd, {"batch": 7000, "heads": 10})

    def test_a_programmatic_launch_config_has_the_driver_layout(self):
        import ctypes
        from splat import _driver
        # cuda.h (CUDA 12/13, 64-bit): CUlaunchAttribute 72 bytes, its value at 8; CUlaunchConfig 56
        # bytes, hStream at 32, attrs at 40, numAttrs at 48.
        self.assertEqual((ctypes.sizeof(_driver.LaunchAttribute), _driver.LaunchAttribute.value.offset), (72, 8))
        self.assertEqual((ctypes.sizeof(_driver.LaunchConfig), _driver.LaunchConfig.stream.offset,
                          _driver.LaunchConfig.attrs.offset, _driver.LaunchConfig.num_attrs.offset), (56, 32, 40, 48))
        config, attr = _driver.programmatic_launch_config((5, 12, 1), (128, 1, 1), 51200, 0x1234)
        self.assertEqual((tuple(config.grid), tuple(config.block), config.smem, config.stream, config.num_attrs),
                         ((5, 12, 1), (128, 1, 1), 51200, 0x1234, 1))
        self.assertEqual((config.attrs[0].id, config.attrs[0].value), (6, 1))  # programmatic stream serialization: on
        self.assertIsNotNone(attr)

    def test_a_packed_batch_launches_over_sequences_with_cu_seqlens(self):
        from splat import _launch
        doc = {"seq_len": 512, "head_dim": 64, "heads": 4, "kv_heads": 2, "dtype": "bf16", "causal": True,
               "varlen": {"max_total_tokens": 4096}, "pattern": {"window": {"left": 32, "right": 0}}}
        m = splat.compile(doc, backward=True, cache_dir=self.cache).manifest
        fwd, bwd = _launch.forward_module(m), m.backward
        self.assertEqual([p.name for p in fwd.parameters][8:], ["cu_seqlens", "lse"])
        self.assertEqual([p.name for p in bwd.parameters][-1], "cu_seqlens")
        sizes = _launch.grid_sizes(m, 5, 4)  # 5 sequences
        for mod in (fwd, bwd):
            self.assertTrue(all(st.grid[1] == 20 for st in _launch.steps(mod, sizes)))
        names = [p.name for p in bwd.parameters]
        values = {n: 0x1000 * (i + 1) for i, n in enumerate(names)}
        self.assertEqual(_launch.arguments(bwd, values)[-1], values["cu_seqlens"])
        self.assertEqual(_launch.workspace_floats(bwd, 20), 20 * bwd.workspace_floats_per_bh)

    def test_a_head_dim_without_a_fused_engine_runs_the_pipeline(self):
        from splat import _launch
        m = splat.compile(WINDOW, **dict(SIZES, dtype="fp32", head_dim=256), cache_dir=self.cache).manifest
        self.assertEqual(m.forward.kernels, ())
        mod = _launch.forward_module(m)
        self.assertEqual((mod.kind, [k.name for k in mod.kernels]), ("pipeline", ["splat_sddmm", "splat_softmax", "splat_spmm"]))
        self.assertEqual(_launch.scores_floats(mod, 2), 2 * mod.scores_floats_per_bh)
        self.assertEqual(_launch.scores_floats(m.forward, 2), 0)

    def test_a_backward_only_manifest_of_head_groups_loads(self):
        import subprocess
        out = os.path.join(self.cache, "bwd")
        subprocess.run([os.environ["SPLATC"], "-q", "emit", os.path.join(ROOT, "tests", "gpu", "head-bwd-ragged-bf16.json"),
                        "--pass", "backward", "--target", "ptx", "--arch", "sm_80", "--no-resources", "-o", out], check=True)
        m = splat.load_manifest(out)
        self.assertEqual((m.forward, m.backward, len(m.head_groups)), (None, None, 4))
        for g, group in enumerate(m.head_groups):
            self.assertIsNone(group.forward)
            self.assertEqual(group.backward.files, ("head-bwd-ragged-bf16.h%d.bwd.ptx" % g,))
            self.assertTrue(os.path.isfile(os.path.join(out, group.backward.files[0])))

    def test_head_groups_launch_over_their_own_heads(self):
        from splat import _launch
        doc = {"seq_len": 256, "head_dim": 64, "heads": 6, "dtype": "bf16",
               "head_patterns": [{"window": {"left": 8, "right": 8}}] * 2 + [{"window": {"left": 64, "right": 0}}] * 4}
        m = splat.compile(doc, cache_dir=self.cache).manifest
        groups = _launch.groups(m)
        self.assertEqual(len(groups), 2)
        self.assertEqual([_launch.grid_sizes(g, 2, 6)["group_heads"] for g in groups], [2, 4])
        self.assertEqual({st.grid[1] for st in _launch.steps(groups[1].forward, _launch.grid_sizes(groups[1], 2, 6))}, {8})


class WithoutTorchTest(unittest.TestCase):
    @unittest.skipIf(importlib.util.find_spec("torch") is not None, "PyTorch is installed")
    def test_attention_without_pytorch_says_what_is_missing(self):
        with self.assertRaisesRegex(ImportError, "splat.attention needs PyTorch"):
            splat.attention  # noqa: B018 - the attribute access is the test


class ManifestTest(unittest.TestCase):
    KERNEL = {"name": "k0", "role": "r", "grid": [4, "batch*heads", 1], "block": [128, 1, 1],
              "shared_memory_dynamic_bytes": 1024}

    def manifest(self, **kernel):
        return {"name": "m", "arch": "sm_90a", "target": "ptx", "problem": {"seq_len": 8}, "files": ["m.ptx"],
                "parameters": [{"index": 0, "name": "q", "type": "const void*"}],
                "kernels": {"fused": [dict(self.KERNEL, **kernel)]}}

    def test_a_well_formed_manifest_parses(self):
        m = splat.parse_manifest(self.manifest())
        k = m.forward.kernels[0]
        self.assertEqual((k.name, k.block, k.shared_memory_dynamic_bytes, k.programmatic_launch), ("k0", (128, 1, 1), 1024, False))
        self.assertEqual(k.launch_grid(batch=3, heads=5), (4, 15, 1))
        with self.assertRaisesRegex(splat.ManifestError, r"k0: the grid needs 'heads' \(batch\*heads\); give it as heads="):
            k.launch_grid(batch=3)

    def test_errors_name_the_path(self):
        bad = self.manifest(grid=[4, "batch heads", 1])
        with self.assertRaisesRegex(splat.ManifestError, r"manifest.json\.kernels\.fused\[0\]\.grid: entry 'batch heads'"):
            splat.parse_manifest(bad)
        bad = self.manifest(block=[128, 1])
        with self.assertRaisesRegex(splat.ManifestError, r"kernels\.fused\[0\]\.block: expected 3 integers"):
            splat.parse_manifest(bad)
        bad = self.manifest()
        del bad["arch"]
        with self.assertRaisesRegex(splat.ManifestError, "manifest.json: missing 'arch'"):
            splat.parse_manifest(bad)
        bad = self.manifest()
        bad["parameters"][0]["index"] = "0"
        with self.assertRaisesRegex(splat.ManifestError, r"parameters\[0\]\.index: expected int"):
            splat.parse_manifest(bad)
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "manifest.json"), "w") as f:
                f.write("{")
            with self.assertRaisesRegex(splat.ManifestError, "not valid JSON"):
                splat.load_manifest(d)


if __name__ == "__main__":
    unittest.main()
