"""ComputeDAG: the ops of a computation in topological order, and what is known about them.

Besides the op list the DAG answers the static facts the search needs (Ansor notes 1.2-1.5):
the printed form (``str(dag)``, TVM's ``PrintDAG``), the FLOP estimate, the workload key and
the access analysis (``is_simple_access``, ``is_strictly_inlinable``,
``needs_multi_level_tiling``, ``is_output``, read maps, common outer iterators, elementwise
matches). Analyses are computed lazily on first use and cached in the instance. The work
behind them lives by job in :mod:`tensorir.dag_access` (the access analysis),
:mod:`tensorir.dag_flops` (the FLOP estimate) and :mod:`tensorir.dag_printer` (the printed
form); this module keeps the DAG, its construction checks and the workload key, and
re-exports ``dag_expr_str``, ``MAX_LINE_WIDTH`` and ``SIMPLIFY_CONST_TENSOR_INDICES``.
"""

from __future__ import annotations

import hashlib
import json

from .dag_access import (  # noqa: F401  (re-exported: winograd and the sketch rules use it)
    SIMPLIFY_CONST_TENSOR_INDICES,
    _Analysis,
)
from .dag_flops import _flop_count
from .dag_printer import _COMBINER_SIGN, MAX_LINE_WIDTH, _shape_str, dag_expr_str
from .dag_structure import canonical_text, structurally_equal
from .expr import Call, Expr, IfThenElse, Reduce
from .tensor import ComputeOp, PlaceholderOp, Tensor, TensorError

# The scheme of ``workload_key``. Version 1 hashed the simple-mode print, which drops call and
# if_then_else arguments and rounds constants, so different computations shared a key; version 2
# hashes ``canonical_text``. The version is part of the key, so records of an older scheme match
# no task.
WORKLOAD_KEY_VERSION = 2


def _check_inputs_first(tensors) -> None:
    """The tensors' order is the built function's argument order, and every consumer (records,
    builds, the measurement worker) takes inputs first: an input after an output is a mistake."""
    first_output = next((t for t in tensors if isinstance(t.op, ComputeOp)), None)
    if first_output is None:
        return
    late = [
        t.name for t in tensors[tensors.index(first_output) :] if isinstance(t.op, PlaceholderOp)
    ]
    if late:
        raise TensorError(
            f"ComputeDAG: input {late[0]!r} is listed after output {first_output.name!r}; "
            "list the inputs first, then the outputs, e.g. ComputeDAG([A, B, C])"
        )


class ComputeDAG:
    """A computation given by its I/O tensors (inputs first, then outputs).

    ``ops`` lists every op reachable from the outputs, producers before consumers,
    placeholders included; stage ids in schedules index this list.

    Analysis methods take an op, its Tensor or its name (op names are unique in a DAG).

    ``layout_free_placeholders`` names inputs that are constant weights (set by the network
    partition on CPU targets): ``lower(state, layout_rewrite=True)`` may store them in the
    order the kernel's loops read them (:mod:`tensorir.passes.layout_rewrite`).
    """

    def __init__(self, tensors, layout_free_placeholders=()):
        tensors = list(tensors)
        if not tensors:
            raise TensorError("ComputeDAG needs its tensors: inputs first, then outputs")
        for t in tensors:
            if not isinstance(t, Tensor):
                raise TensorError(f"ComputeDAG takes tensors, got {t!r} ({type(t).__name__})")
        _check_inputs_first(tensors)
        self.tensors: tuple[Tensor, ...] = tuple(tensors)
        self.ops: tuple[PlaceholderOp | ComputeOp, ...] = _topo_order(self.tensors)
        names = [op.name for op in self.ops]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise TensorError(f"ComputeDAG: op names {dup} are used more than once; rename them")
        reachable_inputs = {id(op) for op in self.ops if isinstance(op, PlaceholderOp)}
        for t in self.tensors:
            if isinstance(t.op, PlaceholderOp) and id(t.op) not in reachable_inputs:
                raise TensorError(f"ComputeDAG: input {t.name!r} is not used by any output")
        missing = [
            op.name
            for op in self.ops
            if isinstance(op, PlaceholderOp) and all(t.op is not op for t in self.tensors)
        ]
        if missing:
            raise TensorError(
                f"ComputeDAG: placeholders {missing} are read but not listed in the tensors; "
                "pass every input tensor"
            )
        inputs = {t.name for t in self.tensors if isinstance(t.op, PlaceholderOp)}
        unknown = sorted(set(layout_free_placeholders) - inputs)
        if unknown:
            raise TensorError(
                f"ComputeDAG: layout_free_placeholders {unknown} are not inputs of this DAG; "
                f"its inputs are {sorted(inputs)}"
            )
        # Constant weights the CPU build may store in the kernel's loop order (layout rewrite).
        self.layout_free_placeholders: tuple[str, ...] = tuple(layout_free_placeholders)
        self._flop_ct: float | None = None
        self._key: str | None = None
        self._analysis: _Analysis | None = None

    @property
    def input_tensors(self) -> tuple[Tensor, ...]:
        return tuple(t for t in self.tensors if isinstance(t.op, PlaceholderOp))

    @property
    def output_tensors(self) -> tuple[Tensor, ...]:
        return tuple(t for t in self.tensors if isinstance(t.op, ComputeOp))

    @property
    def compute_ops(self) -> tuple[ComputeOp, ...]:
        return tuple(op for op in self.ops if isinstance(op, ComputeOp))

    def op_index(self, name: str) -> int:
        for k, op in enumerate(self.ops):
            if op.name == name:
                return k
        raise KeyError(f"no stage named {name!r}; stages are {[op.name for op in self.ops]}")

    def tensor_of(self, op) -> Tensor:
        """The Tensor object whose op is ``op`` (as read in bodies or given by the user)."""
        for t in self.tensors:
            if t.op is op:
                return t
        for c in self.compute_ops:
            for t in c.input_tensors:
                if t.op is op:
                    return t
        raise KeyError(op.name)

    def get_init_state(self):
        """A State with one stage per op and no steps."""
        from .schedule import State  # schedule imports dag: import here, not at module level

        return State(self)

    # ------------------------------------------------------------------------- printing

    def print_dag(self, simple_mode: bool = False) -> str:
        """TVM's ``PrintDAG``: one line per op (newline-terminated), nothing shortened.

        In simple mode placeholders omit their shape and a body that is a call prints as its
        callee only (``Op(tir.exp)``). Neither form is exact (no dtypes, rounded constants):
        the workload key and :meth:`structurally_equal` use
        :func:`tensorir.dag_structure.canonical_text`.
        """
        lines = []
        for op in self.ops:
            if isinstance(op, PlaceholderOp):
                shape = "" if simple_mode else _shape_str(op.shape)
                lines.append(f"{op.name} = PLACEHOLDER {shape}")
                continue
            head = f"{op.name}({', '.join(ax.name for ax in op.axes)})"
            body = op.body
            if isinstance(body, Reduce):
                line = head + _COMBINER_SIGN[body.combiner] + dag_expr_str(body.source)
                if body.condition is not None:  # TVM drops it; keep keys distinct
                    line += f" where {dag_expr_str(body.condition)}"
            elif simple_mode and isinstance(body, Call | IfThenElse):
                callee = "if_then_else" if isinstance(body, IfThenElse) else body.name
                line = f"{head} = Op(tir.{callee})"
            else:
                line = f"{head} = {dag_expr_str(body)}"
            lines.append(line)
        return "".join(line + "\n" for line in lines)

    def __str__(self) -> str:
        out = []
        for line in self.print_dag().split("\n"):
            if len(line) > MAX_LINE_WIDTH:
                half = MAX_LINE_WIDTH // 2
                line = line[:half] + " ..(OMITTED).. " + line[-half:]
            out.append(line)
        return "\n".join(out)

    def __repr__(self) -> str:
        return f"ComputeDAG({[op.name for op in self.ops]})"

    def stage_rows(self) -> list[dict]:
        """One row per op (stage order): name, kind (placeholder / compute / reduce), shape,
        dtype, FLOPs of one run (-1.0 when unknown) and its printed expression."""
        rows = []
        for op, line in zip(self.ops, self.print_dag().splitlines()):
            if isinstance(op, PlaceholderOp):
                kind, flops, expression = "placeholder", 0.0, ""
            else:
                kind = "reduce" if isinstance(op.body, Reduce) else "compute"
                flops, expression = _flop_count([op]), line
            rows.append(
                {"name": op.name, "kind": kind, "shape": tuple(op.shape), "dtype": op.dtype,
                 "flops": flops, "expression": expression}
            )  # fmt: skip
        return rows

    def _repr_html_(self) -> str:
        """The stages as a table with shapes and FLOPs (what a notebook shows)."""
        from .display import stage_table_html

        title = f"ComputeDAG of {len(self.compute_ops)} compute stages"
        return stage_table_html(title, self.stage_rows(), self.flop_count())

    # ------------------------------------------------------------------------- flops, key

    def flop_count(self) -> float:
        """Estimated floating-point operations of one run (notes 1.3); -1.0 if unknown."""
        if self._flop_ct is None:
            self._flop_ct = _flop_count(self.compute_ops)
        return self._flop_ct

    @property
    def flop_ct(self) -> float:
        return self.flop_count()

    @property
    def workload_key(self) -> str:
        """``["v2:<md5 of the canonical text>", shape0, shape1, ...]`` as a JSON string.

        The canonical text (:func:`tensorir.dag_structure.canonical_text`) holds every
        expression, constant, dtype, shape and attribute, so different computations get
        different keys; ``v2`` is :data:`WORKLOAD_KEY_VERSION`.
        """
        if self._key is None:
            digest = hashlib.md5(canonical_text(self).encode("utf-8")).hexdigest()
            head = f"v{WORKLOAD_KEY_VERSION}:{digest}"
            self._key = json.dumps([head] + [list(t.shape) for t in self.tensors])
        return self._key

    def structurally_equal(self, other: ComputeDAG) -> bool:
        """Whether ``other`` computes the same thing with the same kernel signature (equal
        canonical texts); what must hold before two DAGs share one compiled kernel."""
        return structurally_equal(self, other)

    # ------------------------------------------------------------------------- access analysis

    @property
    def _an(self) -> _Analysis:
        if self._analysis is None:
            self._analysis = _Analysis(self)
        return self._analysis

    def _op(self, op) -> PlaceholderOp | ComputeOp:
        if isinstance(op, str):
            return self.ops[self.op_index(op)]
        if isinstance(op, Tensor):
            op = op.op
        if isinstance(op, PlaceholderOp | ComputeOp) and any(o is op for o in self.ops):
            return op
        raise KeyError(f"{op!r} is not an op of this DAG; pass one of {[o.name for o in self.ops]}")

    def read_from(self, op) -> dict[str, list[tuple[Expr, ...]]]:
        """Producer name -> the index tuples with which ``op`` reads it (textual order)."""
        return {p.name: list(v) for p, v in self._an.read_from[self._op(op)].items()}

    def read_by(self, op) -> dict[str, list[tuple[Expr, ...]]]:
        """Consumer name -> the index tuples with which it reads ``op`` (consumers in op order)."""
        return {c.name: list(v) for c, v in self._an.read_by[self._op(op)].items()}

    def producers(self, op, inlined=()) -> tuple:
        """The ops ``op`` reads, in op order; looks through the ops named in ``inlined``
        (op names or ops: stages currently inlined in a state) to their producers."""
        return self._an.follow(self._op(op), self._an.read_from, self._inlined(inlined))

    def consumers(self, op, inlined=()) -> tuple:
        """The ops reading ``op``, in op order; looks through ``inlined`` ops transitively."""
        return self._an.follow(self._op(op), self._an.read_by, self._inlined(inlined))

    def _inlined(self, inlined) -> frozenset:
        return frozenset(id(self._op(x)) for x in inlined)

    def is_simple_access(self, op) -> bool:
        """Every read index is a constant or ``spatial_axis (+/- const)`` of ``op``."""
        return self._an.simple[self._op(op)]

    def is_strictly_inlinable(self, op) -> bool:
        """Simple access, no transposed/duplicated axes, no exp, no branch (or reads nothing)."""
        return self._an.strict_inline[self._op(op)]

    is_strictly_inlineable = is_strictly_inlinable  # TVM's spelling

    def needs_multi_level_tiling(self, op) -> bool:
        """True for data-reuse ops (matmul, conv2d...): see notes 1.2."""
        return self._an.tiling[self._op(op)]

    def is_output(self, op) -> bool:
        """A compute op that no other op reads (placeholders: False)."""
        return self._an.output[self._op(op)]

    def has_branch(self, op) -> bool:
        """The body contains ``select`` or ``if_then_else``."""
        return self._an.branch[self._op(op)]

    def num_common_outer_iterators(self, op, other) -> int:
        """How many outer loops ``op`` and ``other`` can share (notes 1.2).

        Along every consumer path between them (either direction) the pairwise counts are
        minimised; 0 if neither reaches the other. An op shares all its dims with itself.
        """
        a, b = self._op(op), self._op(other)
        n = self._an.common_along_paths(a, b)
        if n is None:
            n = self._an.common_along_paths(b, a)
        return 0 if n is None else n

    def elementwise_match(self, op, target) -> bool:
        """The single-consumer chain from ``op`` reaches ``target`` through same-shape,
        same-order, elementwise reads only."""
        return self._an.elementwise_match(self._op(op), self._op(target))


def _topo_order(tensors) -> tuple:
    """DFS post-order from the outputs: producers before consumers, deterministic."""
    order: list = []
    seen: set[int] = set()

    def visit(op) -> None:
        if id(op) in seen:
            return
        seen.add(id(op))
        for t in op.input_tensors:
            visit(t.op)
        order.append(op)

    for t in tensors:
        if isinstance(t.op, ComputeOp):
            visit(t.op)
    for t in tensors:  # unused inputs still get a stage so errors can name them
        visit(t.op)
    return tuple(order)
