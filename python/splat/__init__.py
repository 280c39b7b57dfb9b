"""splat: sparse attention kernels specialised to the pattern, from Python.

    import splat
    o = splat.attention(q, k, v, {"window": {"left": 256, "right": 256}})   # PyTorch tensors
    o = splat.attention_varlen(q, k, v, cu_seqlens, 8192, {"window": {"left": 256, "right": 0}})  # packed

    c = splat.compile({"window": {"left": 256, "right": 256}}, dtype="bf16", head_dim=64,
                      batch=1, heads=16, seq_len=4096)
    c.manifest.forward.kernels      # entry points in launch order
    c.ptx(c.manifest.forward)       # the PTX text

splat.compile runs the splatc executable (PATH, $SPLATC or splatc=) and caches its output by a
key of everything that determines it (docs/python.md).
"""

from ._compile import CACHE_FORMAT, Compiled, cache_key, cache_root, compile, find_splatc, splatc_version
from ._driver import DriverError
from ._errors import CompileError, ManifestError, PatternError, SplatError
from ._manifest import Kernel, Manifest, Module, Parameter, TensorMap, load_manifest, parse_manifest
from ._problem import DTYPES, TERMS, canonical, dtype_name, problem_from

__version__ = "0.1.0"

# PyTorch is needed only for these; `import splat` works without it.
_TORCH_NAMES = ("attention", "check_inputs")
_VARLEN_NAMES = ("attention_varlen", "check_varlen_inputs")


def __getattr__(name):
    if name in _TORCH_NAMES or name in _VARLEN_NAMES:
        try:
            from . import _torch, _varlen
        except ModuleNotFoundError as e:
            if e.name != "torch":
                raise
            raise ImportError("splat.%s needs PyTorch (pip install torch); splat.compile works without it" % name) from None
        return getattr(_torch if name in _TORCH_NAMES else _varlen, name)
    raise AttributeError("module 'splat' has no attribute %r" % name)


__all__ = [
    "CACHE_FORMAT", "Compiled", "CompileError", "DriverError", "DTYPES", "Kernel", "Manifest", "ManifestError", "Module",
    "Parameter", "PatternError", "SplatError", "TERMS", "TensorMap", "cache_key", "cache_root", "canonical",
    "compile", "dtype_name", "find_splatc", "load_manifest", "parse_manifest", "problem_from", "splatc_version",
]
