"""The pieces of the hand-built GPU programs (tests/gpu/programs.py): a ``Case`` (a Program, its
random inputs and numpy reference) and the loop-IR builders (loads, thread and serial loops)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tensorir.expr import Expr, Var, const
from tensorir.loops import Buffer, For, Load, Program, Stmt


@dataclass(frozen=True)
class Case:
    """A Program and how to check it: ``reference(inputs)`` returns the outputs by name."""

    name: str
    program: Program
    inputs: Callable[[np.random.Generator], dict]
    reference: Callable[[dict], dict]
    rtol: float = 1e-5
    atol: float = 1e-5
    needs: tuple[str, ...] = ()  # device features, e.g. ("float16",)


def ld(buf: Buffer, index) -> Load:
    return Load(buf, index if isinstance(index, Expr) else const(index), buf.dtype)


def thread(var: Var, extent: int, tag: str, body: Stmt) -> For:
    return For(var, extent, body, "thread", tag)


def bind(loops: list[tuple[Var, int, str]], body: Stmt) -> Stmt:
    """Nest thread loops, outermost first: ``[(var, extent, tag), ...]``."""
    for var, extent, tag in reversed(loops):
        body = thread(var, extent, tag, body)
    return body


def loop(var: Var, extent: int, body: Stmt, kind: str = "serial") -> For:
    return For(var, extent, body, kind)


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)
