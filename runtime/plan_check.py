"""Checks of a :class:`~runtime.graph_executor.GraphPlan` before anything runs.

Kernels write through raw pointers, so a plan whose buffers are smaller than what a kernel
reads or writes (an edited or damaged file, or a buggy producer) would write past a buffer.
:func:`plan_problems` compares every part of the plan with every other part (storage ids in
range, argument counts equal to each kernel's parameter list, every argument's storage at
least as large as the kernel parameter's buffer, dtypes equal, constants and graph tensors
fitting their storages); the graph executor refuses a plan with any problem.

What the checks cannot cover: the kernels themselves. Their code is run as it is, like a
shared library's, and is trusted to stay inside the buffers its parameter list declares.
"""

from __future__ import annotations

import numpy as np

from .module import LANG_DEVICE
from .ndarray import np_dtype

_KERNEL_KEYS = ("lang", "code", "params", "workspaces", "launches")


def _is_index(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool) and x >= 0


def _dtype(name) -> np.dtype | None:
    """The numeric numpy dtype ``name`` stands for, or None (objects and strings included)."""
    try:
        dtype = np_dtype(str(name))
    except (TypeError, ValueError, KeyError):
        return None
    # ml_dtypes' bfloat16 is a numpy "void" kind: numeric all the same.
    return dtype if dtype.kind in "biufc" or dtype.name == "bfloat16" else None


def _buffer_list_problems(where: str, entries) -> list[str]:
    """Problems of a kernel's ``params`` / ``workspaces``: (name, dtype, size) triples."""
    out = []
    if not isinstance(entries, (list, tuple)):
        return [f"{where} is not a list"]
    for j, entry in enumerate(entries):
        if not (isinstance(entry, (list, tuple)) and len(entry) == 3):
            out.append(f"{where}[{j}] is not (name, dtype, size)")
            continue
        name, dtype, size = entry
        if not isinstance(name, str) or _dtype(dtype) is None or not _is_index(size):
            out.append(f"{where}[{j}] = {list(entry)} needs a name, a dtype and a size >= 0")
    return out


def kernel_problems(index: int, kernel) -> list[str]:
    """Problems of one kernel artifact (``Source.as_dict()``)."""
    where = f"kernel {index}"
    if not isinstance(kernel, dict):
        return [f"{where} is not a kernel artifact (a dict)"]
    missing = [k for k in _KERNEL_KEYS if k not in kernel]
    if missing:
        return [f"{where} lacks {missing}"]
    out = []
    if kernel["lang"] not in LANG_DEVICE:
        out.append(f"{where}: unknown language {kernel['lang']!r}")
    if not isinstance(kernel["code"], str):
        out.append(f"{where}: code is not text")
    out += _buffer_list_problems(f"{where} params", kernel["params"])
    out += _buffer_list_problems(f"{where} workspaces", kernel["workspaces"])
    return out


def plan_problems(plan) -> list[str]:
    """Every inconsistency found in ``plan``, as one-line descriptions (empty: the plan is
    safe to bind and run, given kernels that keep to their declared buffers)."""
    out: list[str] = []
    kernels = list(plan.kernels)
    for i, kernel in enumerate(kernels):
        out += kernel_problems(i, kernel)
    if out:
        return out
    langs = {k["lang"] for k in kernels}
    if len(langs) > 1:
        out.append(f"kernels of several languages {sorted(langs)}: one device runs a plan")

    storages = []
    for sid, entry in enumerate(plan.storages):
        ok = isinstance(entry, (list, tuple)) and len(entry) == 2
        dtype = _dtype(entry[0]) if ok else None
        if dtype is None or not _is_index(entry[1]):
            out.append(f"storage {sid} = {entry!r} needs a dtype and a size >= 0")
            storages.append(None)
        else:
            storages.append((dtype, int(entry[1])))

    def storage_of(sid, where):
        if not _is_index(sid) or sid >= len(storages):
            out.append(f"{where} uses storage {sid!r}, but storage ids are 0..{len(storages) - 1}")
            return None
        return storages[sid]

    def fits(where, sid, dtype, n_elems):
        st = storage_of(sid, where)
        if st is None:
            return
        if _dtype(dtype) != st[0]:
            out.append(f"{where} is {dtype} but storage {sid} holds {st[0]}")
        elif n_elems > st[1]:
            out.append(f"{where} needs {n_elems} elements but storage {sid} has {st[1]}")

    for k, call in enumerate(plan.calls):
        name = plan.names[k] if k < len(plan.names) else f"call {k}"
        if not (isinstance(call, (list, tuple)) and len(call) == 2):
            out.append(f"call {k} ({name}) is not (kernel index, storage ids)")
            continue
        kernel_index, args = call
        if not _is_index(kernel_index) or kernel_index >= len(kernels):
            out.append(
                f"call {k} ({name}) runs kernel {kernel_index!r}, but there are {len(kernels)}"
            )
            continue
        params = kernels[kernel_index]["params"]
        if not isinstance(args, (list, tuple)):
            out.append(f"call {k} ({name}): its storage ids {args!r} are not a list")
        elif len(args) != len(params):
            out.append(
                f"call {k} ({name}) passes {len(args)} buffers to kernel {kernel_index}, "
                f"which takes {len(params)}"
            )
        else:
            for (pname, pdtype, psize), sid in zip(params, args, strict=True):
                fits(f"call {k} ({name}) param {pname!r}", sid, pdtype, int(psize))

    tensors = [(f"input {name!r}", spec) for name, spec in plan.inputs.items()]
    tensors += [(f"output {j}", spec) for j, spec in enumerate(plan.outputs)]
    for where, spec in tensors:
        if not all(_is_index(d) for d in spec.shape):
            out.append(f"{where} has shape {list(spec.shape)}; dims must be integers >= 0")
        else:
            fits(where, spec.storage, spec.dtype, int(np.prod(spec.shape, dtype=np.int64)))
    for sid, value in plan.constants.items():
        value = np.asarray(value)
        st = storage_of(sid, "a constant")
        if st is None:
            continue
        if value.dtype != st[0]:
            out.append(f"constant of storage {sid} is {value.dtype} but the storage holds {st[0]}")
        elif value.size != st[1]:
            out.append(f"constant of storage {sid} has {value.size} elements, storage {st[1]}")
    return out
