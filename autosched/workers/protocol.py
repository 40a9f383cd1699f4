"""What travels between the tuning process and a worker, and which functions a worker may run.

A request is ``("call", module, function, args)``, answered by ``("ok", result)`` or
``("error", exception)``; ``("serve", module, function)`` hands the worker's pipe to
``function(conn)`` for its own long-lived protocol (the measuring process); None asks the
worker to exit. Functions are named, not pickled, so that a worker only ever imports our
packages: never the user's ``__main__`` (a plain script, ``python -c``, stdin or a notebook).
"""

from __future__ import annotations

import importlib
import traceback
from collections.abc import Callable

__all__ = ["ALLOWED_PACKAGES", "function_ref", "resolve", "picklable_error"]

# A worker runs functions of these packages only (a request is code to run, so it is checked).
ALLOWED_PACKAGES = ("autosched", "tensorir", "codegen", "runtime")


def function_ref(func: Callable) -> tuple[str, str]:
    """``(module, qualified name)`` of a module-level function of our packages.

    Raises
    ------
    ValueError
        For a function outside :data:`ALLOWED_PACKAGES`, a lambda or a nested function.
    """
    module, name = getattr(func, "__module__", None), getattr(func, "__qualname__", "")
    if not module or module.split(".")[0] not in ALLOWED_PACKAGES or "<" in name or "." in name:
        raise ValueError(
            f"a worker process can only run module-level functions of {ALLOWED_PACKAGES}, "
            f"not {module}.{name}"
        )
    return module, name


def resolve(module: str, name: str) -> Callable:
    """The function ``module.name``; refuses modules outside :data:`ALLOWED_PACKAGES`."""
    if module.split(".")[0] not in ALLOWED_PACKAGES:
        raise PermissionError(
            f"worker refuses to run {module}.{name}: only functions of {ALLOWED_PACKAGES} run here"
        )
    func = getattr(importlib.import_module(module), name, None)
    if not callable(func):
        raise AttributeError(f"worker found no function {name!r} in {module}")
    return func


def picklable_error(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling, else a RuntimeError with its type, message and trace."""
    import pickle

    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        return RuntimeError(f"{type(exc).__name__}: {exc}\n{text}")
