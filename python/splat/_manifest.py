"""manifest.json as splatc emit writes it (docs/splatc-kernels.md, "splatc emit"), read into
typed records: what a loader needs to launch the kernels (entry points in launch order, grid,
block, shared memory, parameters, workspace, tables, tensor maps)."""

import json
import os
import re
from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple, Union

from ._errors import ManifestError

GridEntry = Union[int, str]
_PRODUCT = re.compile(r"[a-z_]+(\*[a-z_]+)*")


@dataclass(frozen=True)
class Kernel:
    """One entry point. grid entries are ints or products of names ("batch*heads")."""
    name: str
    role: str
    grid: Tuple[GridEntry, GridEntry, GridEntry]
    block: Tuple[int, int, int]
    shared_memory_dynamic_bytes: int
    programmatic_launch: bool = False

    def launch_grid(self, **sizes):
        """The grid with its symbolic entries evaluated, e.g. launch_grid(batch=2, heads=16)."""
        return tuple(resolve_grid_entry(e, sizes, self.name) for e in self.grid)


@dataclass(frozen=True)
class Parameter:
    index: int
    name: str
    type: str
    description: str = ""


@dataclass(frozen=True)
class TensorMap:
    """A TMA tensor map the `tmaps` parameter points to (encode with cuTensorMapEncodeTiled)."""
    tensor: str
    dims: Tuple[int, ...]
    strides_bytes: Tuple[int, ...]
    box: Tuple[int, ...]
    element: str = ""          # "bf16" or "fp16": 16-bit elements
    swizzle: str = "128B"
    interleave: str = "none"
    oob_fill: str = "zero"


@dataclass(frozen=True)
class Module:
    """One compiled module (a file of PTX and its launch facts)."""
    name: str
    files: Tuple[str, ...]
    parameters: Tuple[Parameter, ...]
    kernels: Tuple[Kernel, ...]          # in launch order
    workspace_floats_per_bh: int = 0
    table_file: Optional[str] = None
    table_words: int = 0
    tensor_maps: Tuple[TensorMap, ...] = ()
    engine: str = ""
    scores_floats_per_bh: int = 0        # the pipeline's compressed scores
    kind: str = "fused"                  # "fused", "pipeline" or "backward"
    workspace_shared: bool = False       # backward, per-head patterns over grouped K/V heads: one ws for all groups


@dataclass(frozen=True)
class Manifest:
    name: str
    arch: str
    target: str
    problem: Dict
    pattern_hash: str = ""
    forward: Optional[Module] = None         # the fused kernels (None for head groups)
    pipeline: Optional[Module] = None        # the pipeline kernels, when emitted
    backward: Optional[Module] = None        # --pass backward|both
    head_groups: Tuple["Manifest", ...] = field(default=())  # per-head patterns: one per group


def resolve_grid_entry(entry, sizes, kernel="kernel"):
    """An int, or a product of names looked up in `sizes` ("batch*heads")."""
    if isinstance(entry, int) and not isinstance(entry, bool):
        return entry
    if not isinstance(entry, str) or not entry:
        raise ManifestError("%s: grid entry %r is neither an int nor a product of names" % (kernel, entry))
    value = 1
    for name in entry.split("*"):
        name = name.strip()
        if name not in sizes:
            raise ManifestError("%s: the grid needs '%s' (%s); give it as %s=" % (kernel, name, entry, name))
        value *= int(sizes[name])
    return value


class _Reader:
    """Typed access to one JSON object, with the path in every error message."""

    def __init__(self, obj, where):
        if not isinstance(obj, dict):
            raise ManifestError("%s: expected an object, got %s" % (where, type(obj).__name__))
        self.obj, self.where = obj, where

    def get(self, key, kind, default=None, required=True):
        if key not in self.obj:
            if required:
                raise ManifestError("%s: missing '%s'" % (self.where, key))
            return default
        value = self.obj[key]
        ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
        if not ok:
            raise ManifestError("%s.%s: expected %s, got %r" % (self.where, key, getattr(kind, "__name__", kind), value))
        return value

    def ints(self, key, n=None, required=True):
        xs = self.get(key, list, [], required)
        if (n is not None and len(xs) != n) or not all(isinstance(x, int) and not isinstance(x, bool) for x in xs):
            raise ManifestError("%s.%s: expected %s integers, got %r" % (self.where, key, n or "a list of", xs))
        return tuple(xs)


def _kernel(obj, where):
    r = _Reader(obj, where)
    grid = r.get("grid", list)
    if len(grid) != 3:
        raise ManifestError("%s.grid: expected 3 entries, got %r" % (where, grid))
    for e in grid:
        if not ((isinstance(e, int) and not isinstance(e, bool) and e > 0) or (isinstance(e, str) and _PRODUCT.fullmatch(e))):
            raise ManifestError("%s.grid: entry %r is neither a positive int nor a product of names" % (where, e))
    return Kernel(name=r.get("name", str), role=r.get("role", str, "", required=False), grid=tuple(grid),
                  block=r.ints("block", 3), shared_memory_dynamic_bytes=r.get("shared_memory_dynamic_bytes", int),
                  programmatic_launch=r.get("programmatic_launch", bool, False, required=False))


def _module(obj, where, kernels, kind):
    r = _Reader(obj, where)
    params = []
    for i, p in enumerate(r.get("parameters", list)):
        pr = _Reader(p, "%s.parameters[%d]" % (where, i))
        params.append(Parameter(index=pr.get("index", int), name=pr.get("name", str), type=pr.get("type", str),
                                description=pr.get("description", str, "", required=False)))
    maps = []
    for i, m in enumerate(r.get("tensor_maps", list, [], required=False)):
        mr = _Reader(m, "%s.tensor_maps[%d]" % (where, i))
        maps.append(TensorMap(tensor=mr.get("tensor", str), dims=mr.ints("dims"), strides_bytes=mr.ints("strides_bytes"),
                              box=mr.ints("box"), element=mr.get("element", str, "", required=False),
                              swizzle=mr.get("swizzle", str, "128B", required=False),
                              interleave=mr.get("interleave", str, "none", required=False),
                              oob_fill=mr.get("oob_fill", str, "zero", required=False)))
    return Module(name=r.get("name", str, "", required=False), files=tuple(r.get("files", list)), parameters=tuple(params),
                  kernels=tuple(_kernel(k, "%s[%d]" % (kernels[1], i)) for i, k in enumerate(kernels[0])),
                  workspace_floats_per_bh=r.get("workspace_floats_per_bh", int, 0, required=False),
                  table_file=r.get("table_file", (str, type(None)), None, required=False),
                  table_words=r.get("table_words", int, 0, required=False), tensor_maps=tuple(maps),
                  engine=r.get("engine", str, "", required=False),
                  scores_floats_per_bh=r.get("scores_floats_per_bh", int, 0, required=False), kind=kind,
                  workspace_shared=r.get("workspace_shared", bool, False, required=False))


def parse_manifest(obj, where="manifest.json"):
    """A Manifest from the decoded JSON object of a manifest.json."""
    r = _Reader(obj, where)
    groups = tuple(parse_manifest(g, "%s.head_groups[%d]" % (where, i))
                   for i, g in enumerate(r.get("head_groups", list, [], required=False)))
    forward = pipeline = backward = None
    if "kernels" in obj:
        kr = _Reader(r.get("kernels", dict), where + ".kernels")
        fused = kr.get("fused", list, [], required=False)
        forward = _module(obj, where, (fused, where + ".kernels.fused"), "fused")
        if "pipeline" in kr.obj:
            pipeline = _module(obj, where, (kr.get("pipeline", list), where + ".kernels.pipeline"), "pipeline")
    elif not groups and "backward" not in obj:
        raise ManifestError("%s: neither 'kernels', 'backward' nor 'head_groups'" % where)
    if "backward" in obj:
        b = r.get("backward", dict)
        backward = _module(b, where + ".backward", (_Reader(b, where + ".backward").get("kernels", list),
                                                     where + ".backward.kernels"), "backward")
    return Manifest(name=r.get("name", str), arch=r.get("arch", str), target=r.get("target", str),
                    problem=r.get("problem", dict), pattern_hash=r.get("pattern_hash", str, "", required=False),
                    forward=forward, pipeline=pipeline, backward=backward, head_groups=groups)


def load_manifest(path):
    """Parse the manifest.json at `path` (a file, or a directory that holds one)."""
    if os.path.isdir(path):
        path = os.path.join(path, "manifest.json")
    try:
        with open(path, "r", encoding="utf-8") as f:
            obj = json.load(f)
    except OSError as e:
        raise ManifestError("%s: %s" % (path, e.strerror or e)) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ManifestError("%s: not valid JSON: %s" % (path, e)) from None
    return parse_manifest(obj, os.path.basename(path))
