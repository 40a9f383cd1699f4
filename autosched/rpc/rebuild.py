"""Loading an uploaded library on a server without running any code it holds.

``remote.load_module(name)`` without ``trust=True`` (seed 001's line) must not link, load or
JIT what the client sent. An exported network records, for each kernel, the state it was built
from as plain data (``GraphPlan.states``: the state as a measure request carries it,
:func:`autosched.measure.data.state_data`, with the kernel's name and ``layout_rewrite``).
The server:

1. reads the library as data: the size + sha256 trailer and the ELF structure
   (:func:`runtime.library_file.check_library_file`), then the embedded description
   (:func:`runtime.shared_library.read_meta`, no ``dlopen``); a JSON network through
   :func:`runtime.plan_file.read_plan` (its object code is ignored);
2. checks every recorded state (:func:`recorded_states`) and, in the server process, that each
   target is one it serves (``server.target_problem``);
3. rebuilds every kernel from its state with its own lowering, code generator and compiler,
   the path of a measure request (``DeviceState.build``), and compares what it generated with
   what the file carries: the kernel's source (OpenCL / CUDA C, LLVM IR for CPU kernels), its
   buffers, launches and weight layouts (:func:`rebuilt_kernel`);
4. when every kernel rebuilds identically, runs the server's own builds with the file's plan
   and weights (data, checked as for a local load); otherwise refuses in one line naming the
   kernel and the reason, and saying to pass ``trust=True`` for a library one built oneself.

A file's object code is never used: a CPU kernel runs the object code the server compiled.
"""

from __future__ import annotations

import json
from pathlib import Path

#: Seconds the server may take to rebuild one kernel.
REBUILD_TIMEOUT_S = 300.0
TRUST_HINT = "pass load_module(name, trust=True) for a library you built yourself"
STATE_KEYS = frozenset({"dag", "steps", "target", "name", "layout_rewrite"})
# What must be equal between a kernel in the file and the one rebuilt from its state.
COMPARED = ("lang", "code", "params", "workspaces", "launches", "layouts")
_SOURCE = {"opencl": "OpenCL source", "cuda": "CUDA source", "llvm": "LLVM IR"}


def _refuse(path: Path, what: str) -> ValueError:
    return ValueError(f"{path.name}: {what}; the server refuses it without trust: {TRUST_HINT}")


def read_description(path) -> tuple[dict, dict | None]:
    """``(meta, constants or None)`` of the library or JSON network at ``path``, read as data
    (nothing loaded). ``constants`` is None for a shared library (its weights are read by
    :func:`runtime.shared_library.read_constants`). ValueError, one line, naming the file."""
    from runtime.library_file import check_library_file
    from runtime.plan_file import read_plan
    from runtime.shared_library import is_elf, read_meta

    path = Path(path)
    if is_elf(path):
        check_library_file(path)  # size, sha256 and ELF structure, before reading any of it
        meta, constants = read_meta(path), None
    else:
        meta, constants = read_plan(path)  # checksum; object code attached, never used here
    if not isinstance(meta.get("kernels"), list) or not all(
        isinstance(k, dict) for k in meta["kernels"]
    ):
        raise ValueError(f"{path.name}: its description has no list of kernels")
    if meta.get("kind", "network") not in ("network", "kernel"):
        raise ValueError(f"{path.name}: a library of kind {meta.get('kind')!r}")
    return meta, constants


def kernel_label(index: int, kernel: dict, state) -> str:
    """``kernel 3 (fused_conv2d_add_relu)``: a kernel of a library, for messages."""
    name = state.get("name") if isinstance(state, dict) else None
    if not isinstance(name, str):
        launches = kernel.get("launches")
        first = launches[0] if isinstance(launches, list) and launches else None
        name = first[0] if isinstance(first, list) and first else None
    return f"kernel {index}" + (f" ({str(name)[:80]})" if isinstance(name, str) else "")


def recorded_states(path, meta: dict) -> list[dict]:
    """The states ``meta`` records, one per kernel, each checked to be plain data of the
    expected shape (the DAG and steps are decoded strictly when built). ValueError, one line,
    naming the kernel, when one is missing or malformed."""
    path = Path(path)
    kernels, states = meta["kernels"], meta.get("states")
    if not kernels:
        raise _refuse(path, "it holds no kernels")
    if states is None:
        raise _refuse(
            path,
            "it records no state its kernels were built from (exported by an older autosched), "
            "so they cannot be rebuilt here",
        )
    if not isinstance(states, list) or len(states) != len(kernels):
        raise _refuse(path, "its recorded states do not match its kernels")
    for i, (kernel, state) in enumerate(zip(kernels, states)):
        where = kernel_label(i, kernel, state)
        if state is None:
            raise _refuse(path, f"{where} records no state it was built from")
        if not isinstance(state, dict) or set(state) != STATE_KEYS:
            raise _refuse(path, f"{where}: its recorded state is malformed")
        ok = (
            isinstance(state["dag"], dict)
            and isinstance(state["steps"], list)
            and isinstance(state["target"], str)
            and isinstance(state["name"], str)
            and isinstance(state["layout_rewrite"], bool)
        )
        if not ok:
            raise _refuse(path, f"{where}: its recorded state is malformed")
    return states


def _plain(value):
    """``value`` as JSON would give it back (tuples as lists), for comparisons."""
    return json.loads(json.dumps(value))


def rebuilt_kernel(path, index: int, kernel: dict, state: dict, build) -> dict:
    """Kernel ``index`` built here from ``state`` by ``build(job, timeout) -> (source or None,
    error_no, error_msg)``, checked to be the kernel the file carries; ValueError otherwise."""
    path = Path(path)
    where = kernel_label(index, kernel, state)
    src, _, msg = build(state, REBUILD_TIMEOUT_S)
    if src is None:
        reason = " ".join(str(msg).split())[:300]
        raise _refuse(path, f"{where} does not rebuild from its recorded state ({reason})")
    for key in COMPARED:
        if _plain(src.get(key)) != _plain(kernel.get(key)):
            what = _SOURCE.get(src.get("lang"), "code") if key == "code" else key
            raise _refuse(
                path,
                f"{where}: its {what} differs from the one rebuilt from its recorded state "
                "(edited after export, or built by another autosched version or for another CPU)",
            )
    return src


def load_rebuilt(path, dev, build):
    """The library at ``path`` with every kernel rebuilt here (see the module doc): a
    ``NetworkLib`` on ``dev`` (default: its kernels' device) or, for one kernel, a runtime
    ``Module``. ValueError, one line, when it is refused."""
    from runtime import load_module as load_kernel
    from runtime.graph_executor import GraphPlan
    from runtime.plan_file import BFLOAT16_KEY
    from runtime.shared_library import read_constants

    from ..network.build import network_from_plan

    path = Path(path)
    meta, constants = read_description(path)
    states = recorded_states(path, meta)
    kernels = [
        rebuilt_kernel(path, i, kernel, state, build)
        for i, (kernel, state) in enumerate(zip(meta["kernels"], states))
    ]
    if meta.get("kind") == "kernel":
        if len(kernels) != 1:
            raise ValueError(f"{path.name}: a kernel library holds {len(kernels)} kernels")
        return load_kernel(**kernels[0], device=dev if dev is not None else "cpu",
                           shapes=meta.get("shapes"), outputs=meta.get("outputs", ()))  # fmt: skip
    if constants is None:
        constants = read_constants(path, meta.get("params_sha256"), meta.get(BFLOAT16_KEY))
    plan = GraphPlan.from_meta({**meta, "kernels": kernels}, constants, str(path))
    return network_from_plan(plan, path, dev)
