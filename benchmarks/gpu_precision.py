"""How the GPU network benchmarks set up a ``--precision``, in one place (``bench_gpu.py`` for
CNNs, ``bench_transformer_gpu.py`` for transformers): our module and target, the log's suffix,
and PyTorch's dtype and TF32 switches for the same arithmetic.

* ``float32``: both sides exact float32 (TF32 off);
* ``tf32``: float32 networks, ours for ``cuda -allow_tf32=1``, PyTorch's TF32 switches on;
* ``float16`` / ``bfloat16``: ours through ``autosched.to_mixed_precision`` (the weights bound
  and cast into the module: build it without params), PyTorch's model cast to the dtype.

torch is optional: it is imported only by the functions that take it.
"""

from __future__ import annotations

import autosched as ansor

PRECISIONS = ("float32", "tf32", "float16", "bfloat16")
LOW_PRECISIONS = ("float16", "bfloat16")


def target_for(precision: str) -> str:
    """The target our side tunes and builds for."""
    return "cuda -allow_tf32=1" if precision == "tf32" else "cuda"


def log_suffix(precision: str) -> str:
    """What each precision's log name ends with before ``.json`` (one log per precision)."""
    return "" if precision == "float32" else f"-{precision}"


def our_module(mod32, params32, precision: str) -> tuple:
    """``(mod, params)`` of the float32 network ``mod32`` in ``precision``."""
    if precision in LOW_PRECISIONS:
        return ansor.to_mixed_precision(mod32, precision, params32), {}
    return mod32, params32


def set_torch_tf32(torch, precision: str) -> None:
    """PyTorch's TF32 switches (matmuls and cuDNN) on for ``tf32``, off otherwise."""
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    torch.backends.cudnn.allow_tf32 = precision == "tf32"


def torch_dtype(torch, precision: str):
    """The dtype PyTorch's model and input are cast to, or None (float32)."""
    return {"float16": torch.float16, "bfloat16": torch.bfloat16}.get(precision)
