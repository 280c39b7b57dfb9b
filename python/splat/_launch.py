"""What launching a module takes, computed from its manifest alone (no GPU, no PyTorch): the
kernels in launch order with their grids, the argument list in parameter order, the workspace
sizes and the tensor maps' encoding arguments. The driver layer (_driver.py) and the PyTorch
layer (_torch.py) only carry these out."""

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from ._errors import ManifestError
from ._manifest import Manifest, Module, TensorMap

#: The largest grid.y of one launch (CUDA's limit).
MAX_GRID_Y = 65535
#: sizeof(CUtensorMap) and its alignment.
TENSOR_MAP_BYTES = 128
TENSOR_MAP_ALIGN = 64
#: Dynamic shared memory above this needs the kernel's attribute raised first.
DEFAULT_DYNAMIC_SMEM = 48 * 1024


@dataclass(frozen=True)
class Step:
    """One launch: the entry point, its grid (resolved) and block, its dynamic shared memory, and
    whether it is a programmatic dependent launch (the manifest's `programmatic_launch`: the kernel
    waits for the previous launch itself, griddepcontrol.wait, so it may start as that one ends)."""
    name: str
    grid: Tuple[int, int, int]
    block: Tuple[int, int, int]
    smem: int
    programmatic: bool = False


def forward_module(manifest: Manifest) -> Module:
    """The module a forward runs: the fused kernels, else the pipeline (a head_dim no fused engine takes)."""
    if manifest.forward is not None and manifest.forward.kernels:
        return manifest.forward
    if manifest.pipeline is not None and manifest.pipeline.kernels:
        return manifest.pipeline
    raise ManifestError("%s: no forward kernels (neither kernels.fused nor kernels.pipeline has an entry)" % manifest.name)


def groups(manifest: Manifest) -> Tuple[Manifest, ...]:
    """The manifests to launch one after the other: the head groups, else the manifest itself."""
    return manifest.head_groups if manifest.head_groups else (manifest,)


def steps(module: Module, sizes: Dict[str, int]) -> List[Step]:
    """The module's launches in order, for sizes such as {"batch": 2, "heads": 16}."""
    out = []
    for k in module.kernels:
        grid = k.launch_grid(**sizes)
        if any(g <= 0 for g in grid):
            raise ManifestError("%s: grid %r resolves to %r" % (k.name, k.grid, grid))
        if grid[1] > MAX_GRID_Y:
            raise ManifestError("%s: grid.y %d is more than one launch takes (%d); use fewer batch*heads per call"
                                % (k.name, grid[1], MAX_GRID_Y))
        out.append(Step(k.name, grid, k.block, k.shared_memory_dynamic_bytes, k.programmatic_launch))
    return out


def workspace_floats(module: Module, grid_y: int) -> int:
    """Floats of `ws` a launch over grid_y blocks along y needs (0: pass null)."""
    return grid_y * module.workspace_floats_per_bh


def scores_floats(module: Module, grid_y: int) -> int:
    """Floats of `scores` (the pipeline's compressed scores; 0 for the fused kernels: pass null)."""
    return grid_y * module.scores_floats_per_bh if module.kind == "pipeline" else 0


def arguments(module: Module, values: Dict[str, Optional[int]]) -> Tuple[int, ...]:
    """The kernel arguments in the module's parameter order, each a pointer (an int; None or 0 = null).

    Every parameter the manifest lists must have a value; a value for a parameter the module does
    not take (lse in a module emitted without it) is dropped. A parameter that is not a pointer is
    an error: the loader would pass it wrongly."""
    params = sorted(module.parameters, key=lambda p: p.index)
    if [p.index for p in params] != list(range(len(params))):
        raise ManifestError("%s: parameter indices %r are not 0..%d" % (module.name or module.kind,
                                                                      [p.index for p in params], len(params) - 1))
    out = []
    for p in params:
        if not p.type.endswith("*"):
            raise ManifestError("parameter %d '%s' has type %r; this loader passes pointers only" % (p.index, p.name, p.type))
        if p.name not in values:
            raise ManifestError("parameter %d '%s' (%s) has no value: a module of a newer splatc?" % (p.index, p.name, p.type))
        out.append(int(values[p.name] or 0))
    return tuple(out)


def grid_sizes(manifest: Manifest, batch: int, heads: int) -> Dict[str, int]:
    """The names a grid entry may use, for one manifest (a head group's serves its group_heads);
    batch: the batch entries, or a packed batch's sequences (grids of varlen modules say "sequences")."""
    group_heads = manifest.problem.get("group_heads")
    served = len(group_heads) if isinstance(group_heads, list) else heads
    return {"batch": batch, "sequences": batch, "heads": heads, "group_heads": served}


@dataclass(frozen=True)
class MapArgs:
    """cuTensorMapEncodeTiled's arguments for one tensor map (element strides 1, 16-bit elements)."""
    tensor: str
    dims: Tuple[int, ...]
    strides_bytes: Tuple[int, ...]
    box: Tuple[int, ...]


def map_arguments(tmap: TensorMap, address: int) -> MapArgs:
    """Checks one manifest tensor map as the driver would (its own errors are only a code) and
    against the base address it is encoded for."""
    rank = len(tmap.dims)
    if tmap.tensor not in ("k", "v"):
        raise ManifestError("tensor map of %r: the kernels map only k and v" % tmap.tensor)
    if not 2 <= rank <= 5 or len(tmap.strides_bytes) != rank - 1 or len(tmap.box) != rank:
        raise ManifestError("tensor map of %s: rank %d with %d strides and a box of rank %d (rank 2..5, rank - 1 strides)"
                            % (tmap.tensor, rank, len(tmap.strides_bytes), len(tmap.box)))
    if any(not 1 <= d <= 1 << 32 for d in tmap.dims) or any(not 1 <= b <= 256 for b in tmap.box):
        raise ManifestError("tensor map of %s: dims %r or box %r out of range" % (tmap.tensor, tmap.dims, tmap.box))
    if any(s % 16 or s >= 1 << 40 for s in tmap.strides_bytes):
        raise ManifestError("tensor map of %s: strides %r are not multiples of 16 below 2^40" % (tmap.tensor, tmap.strides_bytes))
    if tmap.element not in ("", "bf16", "fp16") or tmap.swizzle != "128B" or tmap.interleave != "none" \
            or tmap.oob_fill != "zero" or tmap.box[0] * 2 > 128:
        raise ManifestError("tensor map of %s: element %r, swizzle %r, interleave %r, fill %r, inner box %d: this loader "
                            "encodes 16-bit elements, 128B swizzle within 128 bytes, no interleave, zero fill"
                            % (tmap.tensor, tmap.element, tmap.swizzle, tmap.interleave, tmap.oob_fill, tmap.box[0]))
    if address % 16:
        raise ManifestError("tensor map of %s: the tensor's address %#x is not 16-byte aligned" % (tmap.tensor, address))
    return MapArgs(tmap.tensor, tmap.dims, tmap.strides_bytes, tmap.box)


def map_span_bytes(tmap: TensorMap) -> int:
    """Bytes from the base address to the end of the last element a map covers (16-bit elements)."""
    end = (tmap.dims[0] - 1) * 2
    for d, s in zip(tmap.dims[1:], tmap.strides_bytes):
        end += (d - 1) * s
    return end + 2
