"""NDArray: an array living on a device, with explicit copies to and from numpy.

The data is one flat backend allocation (``handle``); ``shape`` and ``dtype`` only describe it.
On the CPU the handle is a 64-byte aligned numpy byte array, so :meth:`NDArray.view` gives a
zero-copy numpy view and ``__dlpack__`` goes through numpy.
"""

from __future__ import annotations

import numpy as np

from .device import Device, device


def np_dtype(dtype) -> np.dtype:
    """numpy dtype of a dtype name ("float32", "bool", ...) or numpy dtype.

    numpy has no bfloat16: ``"bfloat16"`` is ml_dtypes' (imported here, lazily, because it is
    optional); without ml_dtypes it is a ValueError saying so.
    """
    if isinstance(dtype, str) and dtype == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            raise ValueError(
                "bfloat16 arrays need the ml_dtypes package (pip install ml-dtypes)"
            ) from None
        return np.dtype(ml_dtypes.bfloat16)
    try:
        return np.dtype(dtype)
    except TypeError as err:
        raise ValueError(f"unknown dtype {dtype!r}") from err


def _shape(shape) -> tuple[int, ...]:
    if isinstance(shape, int | np.integer):
        shape = (int(shape),)
    shape = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"array shape must not be negative, got {shape}")
    return shape


class NDArray:
    """A device array.

    Attributes
    ----------
    shape : tuple of int
    dtype : str
        numpy-style name, e.g. "float32".
    device : Device
    handle : object
        The backend allocation (numpy byte array on CPU, DeviceAllocation on CUDA, cl.Buffer on
        OpenCL); it keeps the memory alive.
    """

    def __init__(self, shape, dtype, dev: Device, handle):
        self.shape = _shape(shape)
        self.dtype = str(np_dtype(dtype))
        self.device = dev
        self.handle = handle

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * np_dtype(self.dtype).itemsize

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def numpy(self) -> np.ndarray:
        """A new numpy array holding a copy of the data."""
        out = np.empty(self.shape, dtype=self.dtype)
        if self.size:
            self.device.backend.copy_to_host(self.handle, out)
        return out

    asnumpy = numpy

    def copyfrom(self, source) -> NDArray:
        """Copy a numpy array (or NDArray) of the same size into this array; returns self."""
        if isinstance(source, NDArray):
            source = source.numpy()
        src = np.asarray(source)
        if src.size != self.size:
            raise ValueError(
                f"copyfrom: source has shape {src.shape} ({src.size} elements) but this array "
                f"has shape {self.shape} ({self.size} elements)"
            )
        src = np.ascontiguousarray(src, dtype=self.dtype)
        if self.size:
            self.device.backend.copy_to_device(self.handle, src)
        return self

    def copyto(self, target) -> NDArray | np.ndarray:
        """Copy into a numpy array (in place) or to another Device (returns a new NDArray)."""
        if isinstance(target, np.ndarray):
            if target.size != self.size or not target.flags.c_contiguous:
                raise ValueError("copyto: target must be C-contiguous with the same size")
            if target.dtype != np_dtype(self.dtype):
                raise TypeError(f"copyto: target dtype {target.dtype} is not {self.dtype}")
            self.device.backend.copy_to_host(self.handle, target.reshape(-1))
            return target
        return array(self.numpy(), device(target))

    def view(self) -> np.ndarray:
        """Zero-copy numpy view (CPU only)."""
        if not self.device.on_host:
            raise RuntimeError(f"view() needs a CPU array, not one on {self.device}; use .numpy()")
        return self.handle[: self.nbytes].view(self.dtype).reshape(self.shape)

    def __dlpack__(self, *args, **kwargs):
        if not self.device.on_host:
            raise BufferError("__dlpack__ is only provided for CPU arrays")
        return self.view().__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        if not self.device.on_host:
            raise BufferError("__dlpack_device__ is only provided for CPU arrays")
        return self.view().__dlpack_device__()

    def __repr__(self) -> str:
        return f"NDArray(shape={self.shape}, dtype={self.dtype}, device={self.device})"


def empty(shape, dtype="float32", dev: Device | str = "cpu") -> NDArray:
    """An uninitialised array on ``dev``."""
    dev = device(dev)
    shape = _shape(shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * np_dtype(dtype).itemsize
    return NDArray(shape, dtype, dev, dev.backend.alloc(max(nbytes, 1)))


def array(source, dev: Device | str = "cpu", dtype=None) -> NDArray:
    """Copy a numpy array (or anything ``np.asarray`` accepts) to ``dev``."""
    src = np.asarray(source, dtype=dtype)
    out = empty(src.shape, src.dtype, dev)
    return out.copyfrom(src)
