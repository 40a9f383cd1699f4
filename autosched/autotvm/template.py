"""``@autotvm.template(name)``: the registry of templates and ``get_config()``.

A template is a function of a workload's arguments that builds te tensors, takes
``s = ComputeDAG([...]).get_init_state()``, defines knobs on ``cfg = autotvm.get_config()``,
applies them with State steps and returns ``(s, [tensors])``::

    @autotvm.template("tutorial/matmul")
    def matmul(N, L, M, dtype):
        A = te.placeholder((N, L), name="A", dtype=dtype)
        ...
        s = ComputeDAG([A, B, C]).get_init_state()
        cfg = autotvm.get_config()
        y, x, k = s[C].iters
        cfg.define_split("tile_y", y, num_outputs=2)
        yo, yi = cfg["tile_y"].apply(s, C, y)
        ...
        return s, [A, B, C]

Calling the decorated function asks the current dispatch context for the configuration of
the workload ``(name, *args)`` on the current target (``with Target(...)``): the tuned best
under ``apply_history_best(log)``, a fallback (with one warning) otherwise.

Arguments that are te tensors are recorded in workloads as ``("TENSOR", shape, dtype)``, as
TVM does; a template called with such tuples (from ``task.create`` or a record) receives
placeholders of those shapes and dtypes.
"""

from __future__ import annotations

import functools

from codegen.target import Target
from tensorir import te
from tensorir.tensor import Tensor

from .context import ApplyConfig, DispatchContext

__all__ = [
    "TEMPLATES",
    "args_to_workload",
    "deserialize_args",
    "get_config",
    "serialize_args",
    "template",
]

TEMPLATES: dict[str, object] = {}  # name -> the undecorated template function


def serialize_args(args) -> tuple:
    """Workload form of arguments: tensors as ``("TENSOR", shape, dtype)``, lists as tuples."""

    def one(x):
        if isinstance(x, Tensor):
            return ("TENSOR", tuple(int(d) for d in x.shape), x.dtype)
        if isinstance(x, list | tuple):
            return tuple(one(v) for v in x)
        if isinstance(x, bool | int | float | str) or x is None:
            return x
        if hasattr(x, "item"):  # numpy scalars
            return x.item()
        raise TypeError(
            f"template argument {x!r} ({type(x).__name__}) cannot be part of a workload; "
            "use ints, floats, strings, tuples or te tensors"
        )

    return tuple(one(a) for a in args)


def deserialize_args(args) -> list:
    """The arguments a template receives: ``("TENSOR", shape, dtype)`` as placeholders."""
    out = []
    for k, x in enumerate(args):
        if isinstance(x, tuple) and len(x) == 3 and x[0] == "TENSOR":
            out.append(te.placeholder(tuple(x[1]), name=f"placeholder{'_' + str(k) if k else ''}",
                                      dtype=x[2]))  # fmt: skip
        else:
            out.append(x)
    return out


def args_to_workload(args, task_name: str) -> tuple:
    """``(task_name, *serialized args)``: how records and contexts name a workload."""
    return (task_name, *serialize_args(args))


def template(task_name: str, func=None):
    """Register ``func`` as the template ``task_name`` (usable as a decorator).

    Parameters
    ----------
    task_name : str
        A unique name, e.g. ``"conv2d_nchw.x86"``.
    func : callable, optional
        The template; returns ``(state, [tensors])``.

    Returns
    -------
    callable
        ``func`` wrapped so that calling it gives it the configuration of the current dispatch
        context (and the current target).
    """

    def decorate(f):
        if task_name in TEMPLATES and TEMPLATES[task_name] is not f:
            old = TEMPLATES[task_name]
            # Re-running a notebook cell redefines the same function: allow it by name.
            if getattr(old, "__qualname__", None) != getattr(f, "__qualname__", None):
                raise ValueError(
                    f"template {task_name!r} is already registered by {old!r}; choose another name"
                )

        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            if kwargs:
                raise TypeError(
                    f"template {task_name!r}: pass arguments by position (they form the "
                    f"workload), got keyword arguments {sorted(kwargs)}"
                )
            workload = args_to_workload(args, task_name)
            cfg = DispatchContext.current.query(Target.current(), workload)
            call_args = deserialize_args(args) if _has_tensor_tuples(args) else args
            with ApplyConfig(cfg):
                return f(*call_args)

        wrapper.template_name = task_name
        TEMPLATES[task_name] = f
        return wrapper

    return decorate(func) if func is not None else decorate


def _has_tensor_tuples(args) -> bool:
    return any(isinstance(a, tuple) and len(a) == 3 and a[0] == "TENSOR" for a in args)


def get_config():
    """The configuration of the template being called (inside a template function)."""
    return DispatchContext.current.query(Target.current(), None)
