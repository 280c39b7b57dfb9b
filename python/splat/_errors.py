"""Exception types of the splat package.

User errors (a bad pattern, a bad argument) and failures of the toolchain (splatc missing or
crashing, a manifest that does not parse) are different types, so that callers can tell "fix your
input" from "report a bug".
"""


class SplatError(Exception):
    """Base class of every error this package raises on purpose."""


class PatternError(SplatError, ValueError):
    """The pattern or problem is invalid; the message names the offending field or argument."""


class CompileError(SplatError, RuntimeError):
    """splatc could not be run, or failed on input it accepted (an internal error of splatc)."""


class ManifestError(SplatError, RuntimeError):
    """A manifest.json does not have the form docs/splatc-kernels.md documents."""
