"""The access analysis of a ComputeDAG (TVM's AccessAnalyzer, Ansor notes 1.2-1.5).

Per op: who reads whom with which indices, whether every read is simple (a constant or
``axis (+/- const)``), whether it is strictly inlinable, needs multi-level tiling, is an output
or has a branch; per producer/consumer pair the common outer iterators; and the elementwise
chains. ``ComputeDAG`` computes :class:`_Analysis` once, on first use, and answers from it.
"""

from __future__ import annotations

from .expr import (
    Binary,
    Call,
    Const,
    Expr,
    IfThenElse,
    Select,
    TensorRead,
    Var,
    walk,
)
from .tensor import ComputeOp, PlaceholderOp

SIMPLIFY_CONST_TENSOR_INDICES = "auto_scheduler_simplify_const_tensor_indices"


def _var_shift(e: Expr) -> Var | None:
    """``v`` if ``e`` is ``v``, ``v + c``, ``c + v`` or ``v - c`` with an int constant c."""
    if isinstance(e, Var):
        return e
    if isinstance(e, Binary) and e.op in ("+", "-"):
        if isinstance(e.a, Var) and isinstance(e.b, Const):
            return e.a
        if e.op == "+" and isinstance(e.b, Var) and isinstance(e.a, Const):
            return e.b
    return None


def _simple_access(op: ComputeOp, indices) -> tuple[bool, bool, bool, bool]:
    """TVM's IsSimpleAccess: (simple, axis_missing, axis_duplicated, same_order)."""
    axes = [ax.var for ax in op.axes]
    order: list[int] = []
    count = [0] * len(axes)
    for ix in indices:
        if isinstance(ix, Const):
            continue
        v = _var_shift(ix)
        pos = next((k for k, a in enumerate(axes) if a is v), None) if v is not None else None
        if pos is None:
            return False, False, False, False
        order.append(pos)
        count[pos] += 1
    missing = any(c == 0 for c in count)
    duplicated = any(c > 1 for c in count)
    same_order = all(order[k] >= order[k - 1] for k in range(1, len(order)))
    return True, missing, duplicated, same_order


class _Analysis:
    """All per-op facts of one DAG, computed once (TVM's AccessAnalyzer)."""

    def __init__(self, dag):
        self.dag = dag
        ops = dag.ops
        self.index = {id(op): k for k, op in enumerate(ops)}
        self.read_from: dict = {op: {} for op in ops}
        self.read_by: dict = {op: {} for op in ops}
        self.branch: dict = {}
        for op in ops:
            self.branch[op] = False
            if isinstance(op, PlaceholderOp):
                continue
            for node in walk(op.body):
                if isinstance(node, TensorRead):
                    self.read_from[op].setdefault(node.tensor.op, []).append(node.indices)
                elif isinstance(node, Select | IfThenElse):
                    self.branch[op] = True
        for op in ops:  # consumers in op order
            for prod, accesses in self.read_from[op].items():
                self.read_by[prod][op] = accesses

        self.simple: dict = {}
        self.strict_inline: dict = {}
        self.tiling: dict = {}
        self.output: dict = {}
        for op in ops:
            if isinstance(op, PlaceholderOp):
                self.simple[op], self.strict_inline[op] = True, False
                self.tiling[op], self.output[op] = False, False
            else:
                self._classify(op)

        self.common: dict = {}
        for op in ops:
            for prod, accesses in self.read_from[op].items():
                n = self._common_outer(op, prod, accesses)
                self.common[(id(op), id(prod))] = n
                self.common[(id(prod), id(op))] = n

    def _classify(self, op: ComputeOp) -> None:
        simple, strict = True, True
        for accesses in self.read_from[op].values():
            for acc in accesses:
                ok, _, duplicated, same_order = _simple_access(op, acc)
                if not ok:
                    simple = strict = False
                    break
                if not same_order or duplicated:
                    strict = False  # do not strictly inline transposes
            if not simple:
                break
        has_exp = any(isinstance(n, Call) and n.name == "exp" for n in walk(op.body))
        if has_exp or self.branch[op]:
            strict = False
        if not self.read_from[op]:
            strict = True  # constant tensors (Winograd matrices) are always inlinable
        self.simple[op], self.strict_inline[op] = simple, strict

        tiling = False
        n_missing = 0
        for accesses in self.read_from[op].values():
            used = {id(v) for acc in accesses for ix in acc for v in walk(ix) if isinstance(v, Var)}
            if any(ax.extent > 1 and id(ax.var) not in used for ax in op.axes):
                n_missing += 1
            if n_missing >= 2 or (n_missing >= 1 and op.reduce_axes):
                tiling = True
                break
        if SIMPLIFY_CONST_TENSOR_INDICES in op.attrs:
            tiling = False  # "fake reductions" over constant matrices
        self.tiling[op] = tiling
        self.output[op] = not self.read_by[op]

    @staticmethod
    def _common_outer(op: ComputeOp, prod, accesses) -> int:
        """Leading dims of equal extent that every access reads as ``axis (+/- const)``."""
        limit = min(len(op.shape), len(prod.shape))
        n = 0
        while n < limit and op.shape[n] == prod.shape[n]:
            var = op.axes[n].var
            if not all(_var_shift(acc[n]) is var for acc in accesses):
                break
            n += 1
        return n

    def follow(self, op, edges: dict, inlined: frozenset) -> tuple:
        found: dict[int, object] = {}
        seen: set[int] = set()

        def collect(cur) -> None:
            for nxt in edges[cur]:
                if id(nxt) in inlined:
                    if id(nxt) not in seen:
                        seen.add(id(nxt))
                        collect(nxt)
                else:
                    found[id(nxt)] = nxt

        collect(op)
        return tuple(sorted(found.values(), key=lambda o: self.index[id(o)]))

    def common_along_paths(self, src, dst) -> int | None:
        """Min over consumer paths src -> dst of the smallest pairwise count; None if no path."""
        memo: dict[int, int | None] = {}

        def best(cur) -> int | None:
            if cur is dst:
                return len(dst.shape)
            if id(cur) in memo:
                return memo[id(cur)]
            out = None
            for nxt in self.read_by[cur]:
                sub = best(nxt)
                if sub is None:
                    continue
                val = min(self.common[(id(cur), id(nxt))], sub)
                out = val if out is None else min(out, val)
            memo[id(cur)] = out
            return out

        if src is dst:
            return len(src.shape)
        res = best(src)
        return None if res is None else min(res, len(src.shape))

    def elementwise_match(self, op, target) -> bool:
        cur = op
        while cur is not target:
            consumers = self.read_by[cur]
            if len(consumers) != 1:
                return False
            (nxt,) = consumers
            if not (isinstance(cur, ComputeOp) and isinstance(nxt, ComputeOp)):
                return False
            if tuple(cur.shape) != tuple(nxt.shape):
                return False
            for acc in consumers[nxt]:
                ok, missing, duplicated, same_order = _simple_access(nxt, acc)
                if not ok or missing or duplicated or not same_order:
                    return False
            cur = nxt
        return True
