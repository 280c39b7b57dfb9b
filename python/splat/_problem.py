"""From what a user passes (a problem document, a JSON file, or a pattern term plus sizes) to the
one problem document splatc reads (the pattern contract, docs/splatc-patterns.md)."""

import copy
import json
import os

from ._errors import PatternError

#: splatc's dtypes, and the torch dtype names that map to them (tf32 has fp32 storage, so a
#: torch.float32 tensor is fp32 unless the pattern asks for tf32).
DTYPES = ("fp32", "tf32", "fp16", "bf16")
_TORCH_DTYPES = {"torch.float32": "fp32", "torch.float": "fp32", "torch.float16": "fp16",
                 "torch.half": "fp16", "torch.bfloat16": "bf16"}

#: The pattern terms of the contract: a dict with exactly one of these keys is a term.
TERMS = ("window", "dilated", "strided", "fixed", "blocked", "block_window", "global",
         "random_blocks", "affine", "coo", "union", "intersect")

# Keyword overrides: name -> (kind, smallest value). Sizes are ints, q_offset may be 0.
_INT_FIELDS = {"batch": 1, "heads": 1, "kv_heads": 1, "seq_len": 1, "kv_len": 1, "head_dim": 1,
               "q_offset": 0}


def dtype_name(value, argument="dtype"):
    """splatc's name of a dtype given as a splatc name or a torch dtype (or its str())."""
    text = str(value)
    if text in DTYPES:
        return text
    if text in _TORCH_DTYPES:
        return _TORCH_DTYPES[text]
    raise PatternError("argument '%s': expected one of %s or a torch dtype of them, got %r"
                       % (argument, ", ".join(DTYPES), value))


def _check_int(name, value, smallest):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("argument '%s' must be an int, got %s" % (name, type(value).__name__))
    if value < smallest:
        raise PatternError("argument '%s' must be at least %d, got %d" % (name, smallest, value))
    return value


def _load_file(path):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise PatternError("pattern file %s: %s" % (os.fspath(path), e.strerror or e)) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise PatternError("pattern file %s: not UTF-8 (byte %d)" % (os.fspath(path), e.start)) from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise PatternError("pattern file %s:%d:%d: %s" % (os.fspath(path), e.lineno, e.colno, e.msg)) from None
    if not isinstance(doc, dict):
        raise PatternError("pattern file %s: expected a JSON object, got %s" % (os.fspath(path), type(doc).__name__))
    return doc


def problem_from(pattern, **overrides):
    """The problem document for `pattern` with the keyword fields set (None leaves a field as is).

    pattern: a problem document (a dict with "pattern" or "head_patterns"), a pattern term (a dict
    with one key of TERMS, e.g. {"window": {"left": 256, "right": 256}}), or the path of a JSON
    problem file. The result is a new dict; `pattern` is not modified.
    """
    if isinstance(pattern, (str, os.PathLike)):
        doc = _load_file(pattern)
        doc.setdefault("name", os.path.splitext(os.path.basename(os.fspath(pattern)))[0])
    elif isinstance(pattern, dict):
        if "pattern" in pattern or "head_patterns" in pattern:
            doc = copy.deepcopy(pattern)
        elif len(pattern) == 1 and next(iter(pattern)) in TERMS:
            doc = {"pattern": copy.deepcopy(pattern)}
        else:
            raise PatternError("argument 'pattern': expected a problem document (with 'pattern') or one "
                               "pattern term (one of %s), got a dict with keys %s"
                               % (", ".join(TERMS), sorted(map(str, pattern))))
    else:
        raise TypeError("argument 'pattern' must be a dict, a path or a compiled pattern, got %s"
                        % type(pattern).__name__)
    doc.setdefault("name", "splat")
    for name, value in overrides.items():
        if value is None:
            continue
        if name in _INT_FIELDS:
            doc[name] = _check_int(name, value, _INT_FIELDS[name])
        elif name == "dtype":
            doc[name] = dtype_name(value)
        elif name == "causal":
            if not isinstance(value, bool):
                raise TypeError("argument 'causal' must be a bool, got %s" % type(value).__name__)
            doc[name] = value
        elif name == "scale":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise PatternError("argument 'scale' must be a positive number, got %r" % (value,))
            doc[name] = float(value)
        else:
            raise TypeError("unexpected argument '%s'" % name)
    for field in ("seq_len", "head_dim"):
        if field not in doc:
            raise PatternError("the problem has no '%s': give it in the pattern or as %s=" % (field, field))
    return doc


def canonical(doc):
    """The problem as canonical JSON text (sorted keys, no spaces): what the cache key hashes."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
