"""Load a script of ``benchmarks/`` as a module, for the benchmark tests.

The scripts import their neighbours (``torch_timing``, ``bench_transformer_gpu`` ...) as
top-level modules, as they do when run from ``benchmarks/``: that folder is on ``sys.path``
while one loads (and after, with ``keep_path``, for a script that imports a neighbour only
when a function runs)."""

from __future__ import annotations

import importlib.util
import pathlib
import sys
from types import ModuleType

BENCHMARKS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"


def load_bench(name: str, keep_path: bool = False) -> ModuleType:
    """``benchmarks/<name>.py`` as module ``name`` (registered in ``sys.modules``: a
    dataclass defined there looks its module up)."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    folder = str(BENCHMARKS)
    sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    finally:
        if not keep_path:
            sys.path.remove(folder)
    return module
