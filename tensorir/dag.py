"""ComputeDAG: the ops of a computation in topological order, and what is known about them."""

from __future__ import annotations

from .tensor import ComputeOp, PlaceholderOp, Tensor, TensorError


class ComputeDAG:
    """A computation given by its I/O tensors (inputs first, then outputs).

    ``ops`` lists every op reachable from the outputs, producers before consumers,
    placeholders included; stage ids in schedules index this list.
    """

    def __init__(self, tensors):
        tensors = list(tensors)
        if not tensors:
            raise TensorError("ComputeDAG needs its tensors: inputs first, then outputs")
        for t in tensors:
            if not isinstance(t, Tensor):
                raise TensorError(f"ComputeDAG takes tensors, got {t!r} ({type(t).__name__})")
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
