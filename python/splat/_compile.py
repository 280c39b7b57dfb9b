"""splat.compile: run `splatc emit` once per distinct problem and keep its output in a cache.

The cache holds one directory per key, the SHA-256 of everything that determines the emitted
files: the canonical problem JSON, the architecture, the passes, the tuning and splatc's version.
A directory appears atomically (emitted into a temporary sibling, then renamed), so concurrent
processes compiling the same pattern never see a half-written entry; the first rename wins.
"""

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Dict, Optional

from ._errors import CompileError, PatternError
from ._manifest import Manifest, load_manifest
from ._problem import canonical, problem_from

#: Bumped when the layout of a cache entry changes (old entries are then simply not found).
CACHE_FORMAT = 1
_versions: Dict[tuple, str] = {}


def find_splatc(splatc=None):
    """The splatc executable: the argument, else $SPLATC, else `splatc` on PATH."""
    candidate = splatc or os.environ.get("SPLATC") or shutil.which("splatc")
    if not candidate:
        raise CompileError("splatc not found: put it on PATH, set $SPLATC, or pass splatc=")
    path = shutil.which(candidate) if os.sep not in candidate else candidate
    if not path or not os.path.isfile(path) or not os.access(path, os.X_OK):
        raise CompileError("splatc not found or not executable: %s" % candidate)
    return os.path.abspath(path)


def splatc_version(exe):
    """`splatc --version`, remembered per executable and modification time."""
    st = os.stat(exe)
    key = (exe, st.st_mtime_ns, st.st_size)
    if key not in _versions:
        try:
            out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise CompileError("%s --version: %s" % (exe, e)) from None
        if out.returncode != 0:
            raise CompileError("%s --version exited with %d: %s" % (exe, out.returncode, out.stderr.strip()))
        _versions[key] = out.stdout.strip()
    return _versions[key]


def cache_root(cache_dir=None):
    """The argument, else $SPLAT_CACHE_DIR, else $XDG_CACHE_HOME/splat, else ~/.cache/splat."""
    if cache_dir:
        return os.fspath(cache_dir)
    if os.environ.get("SPLAT_CACHE_DIR"):
        return os.environ["SPLAT_CACHE_DIR"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "splat")


def cache_key(problem, arch, passes, tune, version, backward_mode="deterministic"):
    """Hex SHA-256 of the inputs that determine splatc's output (the problem in canonical form)."""
    fields = {"format": CACHE_FORMAT, "problem": problem, "arch": arch, "pass": passes, "tune": tune or "",
              "splatc": version}
    if backward_mode != "deterministic":  # the default leaves the keys as they were
        fields["backward_mode"] = backward_mode
    try:
        text = canonical(fields)
    except ValueError as e:  # NaN or inf in the problem
        raise PatternError("the problem is not valid JSON: %s" % e) from None
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Compiled:
    """A compiled pattern: the cache entry's directory, its problem and its manifest."""
    key: str
    path: str
    problem: dict
    manifest: Manifest
    from_cache: bool

    def file(self, name):
        """The path of one of the entry's files (a name from the manifest's `files`)."""
        p = os.path.join(self.path, name)
        if os.path.basename(name) != name or not os.path.isfile(p):
            raise CompileError("cache entry %s has no file %r" % (self.path, name))
        return p

    def ptx(self, module):
        """The PTX text of a module of the manifest (e.g. c.ptx(c.manifest.forward))."""
        name = next((f for f in module.files if f.endswith(".ptx")), None)
        if name is None:
            raise CompileError("module %s has no PTX file (files: %s)" % (module.name, ", ".join(module.files)))
        with open(self.file(name), "r", encoding="utf-8") as f:
            return f.read()

    def table(self, module):
        """The device table's bytes (int32 words, little-endian), or None when the module has none."""
        if not module.table_file or module.table_words == 0:
            return None
        with open(self.file(module.table_file), "rb") as f:
            data = f.read()
        if len(data) != 4 * module.table_words:
            raise CompileError("%s: %d bytes, the manifest says %d words" % (module.table_file, len(data), module.table_words))
        return data


def _emit(exe, problem, arch, passes, tune, root, key, backward_mode="deterministic"):
    """Runs splatc emit into a temporary directory under root and renames it to root/key."""
    os.makedirs(root, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".tmp-", dir=root)
    try:
        src = os.path.join(tmp, "problem.json")
        with open(src, "w", encoding="utf-8") as f:
            json.dump(problem, f, indent=2, sort_keys=True)
        out = os.path.join(tmp, "entry")
        cmd = [exe, "emit", src, "--target", "ptx", "--arch", arch, "--pass", passes, "--no-cache",
               "--no-resources", "-o", out]
        if tune:
            cmd += ["--tune", tune]
        if passes != "forward":
            cmd += ["--backward-mode", backward_mode]
        try:
            run = subprocess.run(cmd, capture_output=True, text=True)
        except OSError as e:
            raise CompileError("could not run %s: %s" % (exe, e)) from None
        msg = run.stderr.strip().replace(src, "<problem>")
        if run.returncode == 2:
            raise PatternError(msg or "splatc rejected the problem")
        if run.returncode != 0:
            raise CompileError("splatc emit exited with %d: %s" % (run.returncode, msg))
        os.replace(src, os.path.join(out, "problem.json"))
        dest = os.path.join(root, key)
        try:
            os.rename(out, dest)
        except OSError:
            if not os.path.isfile(os.path.join(dest, "manifest.json")):
                raise
        return dest
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def compile(pattern, *, dtype=None, head_dim=None, batch=None, heads=None, kv_heads=None, seq_len=None,
            kv_len=None, q_offset=None, causal=None, scale=None, arch="sm_90a", backward=False,
            tune: Optional[str] = None, splatc=None, cache_dir=None, backward_mode="deterministic"):
    """Compile `pattern` for the given sizes into PTX and a manifest, or find it in the cache.

    pattern: a problem document (dict with "pattern"), a pattern term ({"window": {...}}) or a
    JSON file's path; a Compiled is returned as it is. The keyword fields override the problem's
    (docs/splatc-patterns.md). backward=True also emits the backward kernels (the forward then
    saves the log-sum-exp); backward_mode "fast" makes them add dQ by atomics instead
    of running a dQ kernel (dQ's bits then vary run to run; "deterministic", the default, does not).
    Raises PatternError for a problem splatc refuses (its message, with the JSON path of the
    offending value) and CompileError when splatc cannot run or fails.
    """
    if isinstance(pattern, Compiled):
        return pattern
    problem = problem_from(pattern, dtype=dtype, head_dim=head_dim, batch=batch, heads=heads, kv_heads=kv_heads,
                           seq_len=seq_len, kv_len=kv_len, q_offset=q_offset, causal=causal, scale=scale)
    if not isinstance(arch, str) or not arch.startswith("sm_"):
        raise PatternError("argument 'arch' must name an architecture such as 'sm_90a', got %r" % (arch,))
    if not isinstance(backward, bool):
        raise TypeError("argument 'backward' must be a bool, got %s" % type(backward).__name__)
    if tune is not None and not isinstance(tune, str):
        raise TypeError("argument 'tune' must be a str such as 'stages=3', got %s" % type(tune).__name__)
    if backward_mode not in ("deterministic", "fast"):
        raise PatternError("argument 'backward_mode' must be 'deterministic' or 'fast', got %r" % (backward_mode,))
    exe = find_splatc(splatc)
    passes = "both" if backward else "forward"
    mode = backward_mode if backward else "deterministic"
    root = cache_root(cache_dir)
    key = cache_key(problem, arch, passes, tune, splatc_version(exe), mode)
    path = os.path.join(root, key)
    from_cache = os.path.isfile(os.path.join(path, "manifest.json"))
    if not from_cache:
        path = _emit(exe, problem, arch, passes, tune, root, key, mode)
    return Compiled(key=key, path=path, problem=problem, manifest=load_manifest(path), from_cache=from_cache)
