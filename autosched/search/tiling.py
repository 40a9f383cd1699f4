"""What the CPU and GPU annotators and the mutation rules share: the annotation context, the
exact tile factorizations of an extent, and the one way to accept a random source."""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache

from .params import SearchParams

__all__ = ["AnnotateContext", "as_random", "divisors", "factorization_schemes"]


@dataclass(frozen=True)
class AnnotateContext:
    """The task facts and knobs the rules read."""

    dag: object
    num_cores: int
    params: SearchParams

    @property
    def unroll_configs(self) -> tuple[int, ...]:
        """Candidates of the ``auto_unroll_max_step`` pragma on this target."""
        return self.params.auto_unroll_configs_cpu


@lru_cache(maxsize=4096)
def divisors(n: int) -> tuple[int, ...]:
    """The divisors of ``n`` in increasing order (memoized: called thousands of times)."""
    small, large = [], []
    step = 2 if n % 2 else 1  # odd numbers have only odd divisors
    i = 1
    while i * i <= n:
        if n % i == 0:
            small.append(i)
            if i * i != n:
                large.append(n // i)
        i += step
    return tuple(small + large[::-1])


@lru_cache(maxsize=4096)
def factorization_schemes(extent: int, n_lengths: int, max_innermost: int) -> tuple:
    """All ``(l1, ..., ln)`` whose product divides ``extent`` with ``ln <= max_innermost``.

    These are the inner tile lengths of a split; the outermost part takes the quotient, so
    tiles always divide the extent (TVM SplitFactorizationMemo)."""
    out = []

    def dfs(remaining: int, prefix: tuple) -> None:
        if len(prefix) == n_lengths - 1:
            out.extend(prefix + (d,) for d in divisors(remaining) if d <= max_innermost)
            return
        for d in divisors(remaining):
            dfs(remaining // d, prefix + (d,))

    dfs(extent, ())
    return tuple(out)


def as_random(rng) -> random.Random:
    """``rng`` as a ``random.Random``: itself, seeded from an int, or from a numpy Generator."""
    if isinstance(rng, random.Random):
        return rng
    if isinstance(rng, int):
        return random.Random(rng)
    if hasattr(rng, "integers"):  # numpy Generator
        return random.Random(int(rng.integers(2**63)))
    raise TypeError(f"rng must be a random.Random, an int seed or a numpy Generator, got {rng!r}")
