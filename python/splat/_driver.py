"""The few CUDA driver calls the loader makes, through ctypes (no compiler, no extra package).

Modules are loaded as context-independent libraries (cuLibraryLoadData, CUDA 12.0+ drivers): one
load serves every device and context, and a kernel handle launches with cuLaunchKernel in the
caller's current context, which PyTorch's `torch.cuda.device(...)` makes the device's primary one.
"""

import ctypes
import sys
import threading
from typing import Sequence

from ._errors import SplatError
from ._launch import MapArgs, TENSOR_MAP_ALIGN, TENSOR_MAP_BYTES


class DriverError(SplatError, RuntimeError):
    """A CUDA driver call failed (the message names the call and the driver's error)."""


# cuda.h's values of the enums used here.
_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
_CU_JIT_ERROR_LOG_BUFFER = 5
_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6
_CU_TENSOR_MAP_DATA_TYPE_UINT16 = 1
_CU_TENSOR_MAP_INTERLEAVE_NONE = 0
_CU_TENSOR_MAP_SWIZZLE_128B = 3
_CU_TENSOR_MAP_L2_PROMOTION_L2_256B = 3
_CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0
_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6


class LaunchAttribute(ctypes.Structure):
    """CUlaunchAttribute: an id (4 bytes, padded to 8) and a 64-byte value union (here an int)."""
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_int), ("value_pad", ctypes.c_char * 60)]


class LaunchConfig(ctypes.Structure):
    """CUlaunchConfig: grid, block, dynamic shared memory, stream and the attributes."""
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("smem", ctypes.c_uint),
                ("stream", ctypes.c_void_p), ("attrs", ctypes.POINTER(LaunchAttribute)), ("num_attrs", ctypes.c_uint)]

_p = ctypes.c_void_p
_u32 = ctypes.c_uint
_SIGNATURES = {
    "cuInit": [_u32],
    "cuGetErrorName": [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)],
    "cuGetErrorString": [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)],
    "cuLibraryLoadData": [ctypes.POINTER(_p), ctypes.c_char_p, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(_p), _u32,
                          _p, _p, _u32],
    "cuLibraryUnload": [_p],
    "cuLibraryGetKernel": [ctypes.POINTER(_p), _p, ctypes.c_char_p],
    "cuKernelSetAttribute": [ctypes.c_int, ctypes.c_int, _p, ctypes.c_int],
    "cuLaunchKernel": [_p, _u32, _u32, _u32, _u32, _u32, _u32, _u32, _p, ctypes.POINTER(_p), ctypes.POINTER(_p)],
    "cuLaunchKernelEx": [ctypes.POINTER(LaunchConfig), _p, ctypes.POINTER(_p), ctypes.POINTER(_p)],
    "cuTensorMapEncodeTiled": [_p, ctypes.c_int, _u32, _p, ctypes.POINTER(ctypes.c_uint64),
                               ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(_u32), ctypes.POINTER(_u32),
                               ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int],
}


class Driver:
    """libcuda's entry points used by the loader; each failure raises DriverError."""

    def __init__(self, path=None):
        names = [path] if path else (["nvcuda.dll"] if sys.platform == "win32" else ["libcuda.so.1", "libcuda.so"])
        lib, errors = None, []
        for name in names:
            try:
                lib = ctypes.CDLL(name)
                break
            except OSError as e:
                errors.append(str(e))
        if lib is None:
            raise DriverError("the CUDA driver library could not be loaded (%s)" % "; ".join(errors))
        self._lib = lib
        for fn, argtypes in _SIGNATURES.items():
            try:
                f = getattr(lib, fn)
            except AttributeError:
                raise DriverError("the CUDA driver has no %s: splat needs a CUDA 12.0 or later driver" % fn) from None
            f.argtypes, f.restype = argtypes, ctypes.c_int
        self._check(lib.cuInit(0), "cuInit")

    def _error(self, code):
        name, text = ctypes.c_char_p(), ctypes.c_char_p()
        self._lib.cuGetErrorName(code, ctypes.byref(name))
        self._lib.cuGetErrorString(code, ctypes.byref(text))
        return "%s (%d): %s" % ((name.value or b"?").decode(), code, (text.value or b"").decode())

    def _check(self, code, call, log=None):
        if code != 0:
            extra = ""
            if log is not None and log.value:
                extra = "\n" + log.value.decode("utf-8", "replace").strip()
            raise DriverError("%s failed: %s%s" % (call, self._error(code), extra))

    def load_library(self, image: bytes, what: str):
        """A library from PTX text or a CUBIN image (the driver JIT-compiles PTX for the device)."""
        if not image.endswith(b"\0"):
            image += b"\0"
        log = ctypes.create_string_buffer(16384)
        opts = (ctypes.c_int * 2)(_CU_JIT_ERROR_LOG_BUFFER, _CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
        vals = (_p * 2)(ctypes.cast(log, _p), _p(len(log)))
        lib = _p()
        self._check(self._lib.cuLibraryLoadData(ctypes.byref(lib), image, opts, vals, 2, None, None, 0),
                    "cuLibraryLoadData (%s)" % what, log)
        return lib.value

    def unload_library(self, lib):
        self._lib.cuLibraryUnload(_p(lib))

    def kernel(self, lib, name: str):
        k = _p()
        self._check(self._lib.cuLibraryGetKernel(ctypes.byref(k), _p(lib), name.encode()), "cuLibraryGetKernel (%s)" % name)
        return k.value

    def set_max_dynamic_smem(self, kernel, nbytes: int, device: int, name: str):
        self._check(self._lib.cuKernelSetAttribute(_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes, _p(kernel), device),
                    "cuKernelSetAttribute (%s: %d bytes of dynamic shared memory)" % (name, nbytes))

    def launch(self, kernel, grid, block, smem: int, stream: int, args: Sequence[int], name: str, programmatic=False):
        """cuLaunchKernel with pointer arguments (ints; 0 = null) on stream (a CUstream handle).
        programmatic: cuLaunchKernelEx with programmatic stream serialization (the kernel may start
        while the previous launch on the stream ends; it waits for that one's results itself)."""
        n = max(1, len(args))
        values = (_p * n)(*[a or None for a in args])          # the arguments
        first = ctypes.addressof(values)
        params = (_p * n)(*[first + i * ctypes.sizeof(_p) for i in range(len(args))])  # a pointer to each
        if programmatic:
            config, _attr = programmatic_launch_config(grid, block, smem, stream)  # _attr: alive until the call
            self._check(self._lib.cuLaunchKernelEx(ctypes.byref(config), _p(kernel), params, None),
                        "cuLaunchKernelEx (%s, programmatic)" % name)
            return
        self._check(self._lib.cuLaunchKernel(_p(kernel), grid[0], grid[1], grid[2], block[0], block[1], block[2], smem,
                                             _p(stream or None), params, None), "cuLaunchKernel (%s)" % name)

    def encode_tensor_maps(self, maps: Sequence[MapArgs], addresses: Sequence[int]) -> bytes:
        """The CUtensorMap bytes (128 each) of the maps, in order, for the given base addresses."""
        out = bytearray()
        for m, address in zip(maps, addresses):
            rank = len(m.dims)
            buf = (ctypes.c_ubyte * (TENSOR_MAP_BYTES + TENSOR_MAP_ALIGN))()
            base = ctypes.addressof(buf)
            aligned = (base + TENSOR_MAP_ALIGN - 1) // TENSOR_MAP_ALIGN * TENSOR_MAP_ALIGN
            dims = (ctypes.c_uint64 * rank)(*m.dims)
            strides = (ctypes.c_uint64 * max(1, rank - 1))(*m.strides_bytes)
            box = (_u32 * rank)(*m.box)
            elem = (_u32 * rank)(*([1] * rank))
            self._check(self._lib.cuTensorMapEncodeTiled(_p(aligned), _CU_TENSOR_MAP_DATA_TYPE_UINT16, rank, _p(address),
                                                        dims, strides, box, elem, _CU_TENSOR_MAP_INTERLEAVE_NONE,
                                                        _CU_TENSOR_MAP_SWIZZLE_128B, _CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                                        _CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
                        "cuTensorMapEncodeTiled (%s: dims %r, box %r)" % (m.tensor, m.dims, m.box))
            out += ctypes.string_at(aligned, TENSOR_MAP_BYTES)
        return bytes(out)


def programmatic_launch_config(grid, block, smem: int, stream: int):
    """A CUlaunchConfig with programmatic stream serialization on (and the attribute array it points
    to, which the caller keeps alive)."""
    attr = (LaunchAttribute * 1)()
    attr[0].id = _CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    attr[0].value = 1
    config = LaunchConfig((ctypes.c_uint * 3)(*grid), (ctypes.c_uint * 3)(*block), smem, stream or None,
                          ctypes.cast(attr, ctypes.POINTER(LaunchAttribute)), 1)
    return config, attr


_driver = None
_driver_lock = threading.Lock()


def driver():
    """The process's Driver, loaded on first use."""
    global _driver
    with _driver_lock:
        if _driver is None:
            _driver = Driver()
        return _driver
