"""Operator fusion: partition a network's calls into fused groups, as Relay's ``FuseOps``.

This follows Relay's graph partitioner (src/relay/transforms/fuse_ops.cc, opt_level 3):

1. Build the forward graph of calls. Each input edge carries the consumer's op pattern, except
   that a broadcast op whose input already has the output's shape sees an elemwise edge.
2. Build the post-dominator tree: a call's parent is the least common ancestor of its users;
   the node's ``pattern`` is the worst edge pattern met on the way there. Function outputs have
   no parent (their value must stay materialised).
3. Visit the calls in topological order, three times (phases), and fuse a call's group into
   its immediate post-dominator's group when the rule for the call's group pattern allows it
   and every node on every path between them satisfies a condition:

   - out-elemwise-fusable (conv, dense, pool, winograd; phase 0): the path to the
     post-dominator is elemwise and every node on it is at most broadcast;
   - elemwise/broadcast (any phase): the post-dominator path is at most injective or a
     reduction; intermediate nodes at most injective, the sink anything fusable but opaque;
   - injective (phase 1 on, so that conv groups finish first): every node on the path is
     injective or better;
   - reduction / opaque: never fused into anything.

   Relay's phase 2 fuses injective ops into Tuple nodes; our IR has no Tuple (concatenate takes
   its inputs directly, as an injective consumer), so an elemwise producer of a concatenate
   fuses into it in phase 0 instead of phase 2. The resulting groups are the same.

Because a call is only merged into a group that post-dominates it, and every node on the way
is merged too, a fused group has exactly one output: its last call.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir import Call, Constant, Expr, Function, Var, calls
from ..shapes import (
    BROADCAST,
    COMM_REDUCE,
    ELEMWISE,
    INJECTIVE,
    OPAQUE,
    OPS,
    OUT_ELEMWISE_FUSABLE,
)

MAX_FUSED_OPS = 256  # Relay's kMaxFusedOps: a group never grows past this many calls

__all__ = [
    "MAX_FUSED_OPS", "FusedGroup", "count_by_signature", "fuse_ops", "group_ops",
    "group_signature", "op_pattern", "print_groups",
]  # fmt: skip

_KNOWN_PATTERNS = (ELEMWISE, BROADCAST, INJECTIVE, COMM_REDUCE, OUT_ELEMWISE_FUSABLE, OPAQUE)
_PATTERN_NAMES = {
    ELEMWISE: "elemwise",
    BROADCAST: "broadcast",
    INJECTIVE: "injective",
    COMM_REDUCE: "comm-reduce",
    OUT_ELEMWISE_FUSABLE: "out-elemwise-fusable",
    OPAQUE: "opaque",
}


@dataclass(frozen=True, eq=False)
class FusedGroup:
    """One fused subgraph: what becomes one primitive function (one tuning task).

    Attributes
    ----------
    calls : tuple of Call
        The group's calls in topological order; ``calls[-1]`` is its only output.
    inputs : tuple of Expr
        External arguments in order of first use: Vars, Constants, or other groups' outputs.
    pattern : int
        The group's master pattern (Relay ``OpPattern``): the highest pattern of its calls.
    """

    calls: tuple[Call, ...]
    inputs: tuple[Expr, ...]
    pattern: int

    @property
    def output(self) -> Call:
        """The call whose value leaves the group."""
        return self.calls[-1]

    @property
    def anchor(self) -> Call | None:
        """The call that carries the group's reduction: the out-elemwise-fusable call (conv,
        dense, pool ...), else a comm-reduce or opaque call (softmax); None for groups of
        elemwise/broadcast/injective calls only."""
        best = None
        for c in self.calls:
            p = op_pattern(c)
            if p >= COMM_REDUCE and (best is None or p == OUT_ELEMWISE_FUSABLE):
                best = c
        return best


def op_pattern(call: Call) -> int:
    """The fusion pattern of ``call``'s op.

    Raises
    ------
    ValueError
        The op is not in the op table, or its pattern is not one fusion knows.
    """
    opdef = OPS.get(call.op)
    if opdef is None:
        raise ValueError(
            f"fuse_ops: op {call.op!r} has no fusion pattern (it is not in the op table; "
            f"add it to tensorir/ops/registry.py)"
        )
    if opdef.pattern not in _KNOWN_PATTERNS:
        raise ValueError(f"fuse_ops: op {call.op!r} has an unknown fusion pattern {opdef.pattern}")
    return opdef.pattern


class _Groups:
    """Union-find over call indices with Relay's group bookkeeping (root pattern)."""

    def __init__(self, patterns: list[int]):
        self.parent = list(range(len(patterns)))
        self.pattern = list(patterns)
        self.anchor = [p == OUT_ELEMWISE_FUSABLE for p in patterns]
        self.size = [1] * len(patterns)  # Relay's num_nodes, kept on the group objects

    def root(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def merge(self, child: int, parent: int) -> None:
        c, p = self.root(child), self.root(parent)
        if c == p:
            return
        self.parent[c] = p
        self.size[p] += self.size[c]
        # As Relay's MergeFromTo: the pattern only changes when the child brings an anchor.
        if self.anchor[c]:
            self.anchor[p] = True
            self.pattern[p] = max(self.pattern[p], self.pattern[c])


def _forward_graph(func: Function):
    order = calls(func)
    index = {c: i for i, c in enumerate(order)}
    patterns = [op_pattern(c) for c in order]
    outs: list[list[tuple[int, int]]] = [[] for _ in order]
    for j, c in enumerate(order):
        for a in c.args:
            if a in index:
                edge = patterns[j]
                if edge == BROADCAST and a.shape == c.shape:
                    edge = ELEMWISE
                outs[index[a]].append((j, edge))
    extern = {index[o] for o in func.outputs if o in index}
    return order, patterns, outs, extern


def _post_dominators(n, outs, extern):
    """parent, depth and path pattern of every node in the post-dominator tree."""
    parent: list[int | None] = [None] * n
    depth = [1] * n
    dpat = [OPAQUE] * n

    def lca(a, b, pat):
        while a != b:
            if a is None or b is None:
                return None, pat
            if depth[a] < depth[b]:
                pat = max(pat, dpat[b])
                b = parent[b]
            elif depth[b] < depth[a]:
                pat = max(pat, dpat[a])
                a = parent[a]
            else:
                pat = max(pat, dpat[a], dpat[b])
                a, b = parent[a], parent[b]
        return a, pat

    for i in range(n - 1, -1, -1):
        if i in extern or not outs[i]:
            continue
        pat = ELEMWISE
        node, pat = outs[i][0][0], max(pat, outs[i][0][1])
        for j, edge in outs[i][1:]:
            node, pat = lca(node, j, pat)
            pat = max(pat, edge)
        parent[i] = node
        dpat[i] = pat
        depth[i] = depth[node] + 1 if node is not None else 1
    return parent, dpat


def fuse_ops(func: Function) -> list[FusedGroup]:
    """Partition ``func``'s calls into fused groups, as Relay's FuseOps at opt_level 3.

    Parameters
    ----------
    func : Function
        Usually the output of ``optimize`` (batch norms removed, weights folded).

    Returns
    -------
    list of FusedGroup
        In topological order; every call of ``func`` is in exactly one group.

    Raises
    ------
    ValueError
        A call's op has no known fusion pattern (the message names the op).
    """
    order, patterns, outs, extern = _forward_graph(func)
    n = len(order)
    parent, dpat = _post_dominators(n, outs, extern)
    groups = _Groups(patterns)

    def check_path(src, sink, cond):
        seen = set()
        stack = [j for j, _ in outs[src]]
        while stack:
            k = stack.pop()
            if k in seen:
                continue
            seen.add(k)
            if not cond(groups.pattern[groups.root(k)], k == sink):
                return False
            if k != sink:
                stack.extend(j for j, _ in outs[k])
        return True

    def commit(src, sink):
        seen = set()
        stack = [src]
        while stack:
            k = stack.pop()
            if k == sink or k in seen:
                continue
            seen.add(k)
            groups.merge(k, sink)
            stack.extend(j for j, _ in outs[k])

    def ewise_cond(kind, is_sink):
        if not is_sink:
            return kind <= INJECTIVE
        return kind <= INJECTIVE or kind in (COMM_REDUCE, OUT_ELEMWISE_FUSABLE)

    for phase in (0, 1):
        for i in range(n):
            # Relay reads the pattern of the node's own group object (not its root's): it is
            # the merged pattern only if the node was a root when something merged into it.
            own = groups.pattern[i]
            sink = parent[i]
            if own == OPAQUE or sink is None:
                continue
            if groups.size[sink] + groups.size[i] > MAX_FUSED_OPS:
                continue
            if groups.root(i) == groups.root(sink):
                continue
            if own == OUT_ELEMWISE_FUSABLE:
                ok = phase == 0 and dpat[i] == ELEMWISE
                ok = ok and check_path(i, sink, lambda k, s: k <= BROADCAST)
            elif own <= BROADCAST:
                ok = dpat[i] <= INJECTIVE or dpat[i] == COMM_REDUCE
                ok = ok and check_path(i, sink, ewise_cond)
            elif own == INJECTIVE:
                ok = phase == 1 and check_path(i, sink, lambda k, s: k <= INJECTIVE)
            else:
                ok = False  # comm-reduce: Relay leaves it alone
            if ok:
                commit(i, sink)

    members: dict[int, list[int]] = {}
    for i in range(n):
        members.setdefault(groups.root(i), []).append(i)
    result = []
    for root in sorted(members, key=lambda r: max(members[r])):
        idx = members[root]
        group_calls = tuple(order[i] for i in idx)
        inside = set(group_calls)
        inputs: list[Expr] = []
        seen_in: set[Expr] = set()
        for c in group_calls:
            for a in c.args:
                if a not in inside and a not in seen_in:
                    seen_in.add(a)
                    inputs.append(a)
        pattern = max(patterns[i] for i in idx)
        result.append(FusedGroup(group_calls, tuple(inputs), pattern))
        if group_calls[-1] is not order[max(idx)]:  # pragma: no cover - an invariant
            raise AssertionError("fuse_ops: group output is not its last call")
    _check_single_output(func, result)
    return result


def _check_single_output(func: Function, groups: list[FusedGroup]) -> None:
    # The partitioner only merges into post-dominators, so this cannot fail; checking keeps
    # the promise the task extractor relies on explicit.
    where = {c: g for g in groups for c in g.calls}
    outputs = set(func.outputs)
    for g in groups:
        for c in g.calls[:-1]:
            if c in outputs:
                raise AssertionError(f"fuse_ops: {c.op} is a function output inside a group")
    for g in groups:
        for a in g.inputs:
            if isinstance(a, Call) and where[a].output is not a:
                raise AssertionError(f"fuse_ops: a group reads the inner value of {a.op}")


def _value_key(a: Expr) -> str:
    if isinstance(a, Constant) and a.value.ndim == 0:
        # Relay inlines scalar constants into the fused function, so their value matters.
        return f"scalar {a.dtype} {a.value.item()!r}"
    return f"{a.shape} {a.dtype}"


def group_signature(group: FusedGroup) -> str:
    """A structural key: two groups with equal keys compute the same function of their inputs.

    It lists, per call, the op, its attributes, its output type and where each argument comes
    from (an earlier call of the group, or the k-th distinct input), then each input's type.
    Weights' values are not part of it (they are runtime inputs of the fused function), scalar
    constants' are (Relay inlines them).
    """
    pos = {c: i for i, c in enumerate(group.calls)}
    inp = {a: k for k, a in enumerate(group.inputs)}
    parts = []
    for c in group.calls:
        args = ",".join(f"%{pos[a]}" if a in pos else f"in{inp[a]}" for a in c.args)
        attrs = ",".join(f"{k}={v!r}" for k, v in sorted(c.attrs.items()))
        parts.append(f"{c.op}({args};{attrs})->{c.shape} {c.dtype}")
    ins = ";".join(f"in{k}:{_value_key(a)}" for k, a in enumerate(group.inputs))
    return " | ".join(parts) + " || " + ins


def group_ops(group: FusedGroup) -> tuple[str, ...]:
    """The op names of the group's calls, in order (what the golden tests compare)."""
    return tuple(c.op for c in group.calls)


def _name(a: Expr, where: dict) -> str:
    if isinstance(a, Var):
        return f"%{a.name}"
    if isinstance(a, Constant):
        return f"const{a.shape}" if not a.name else f"const:{a.name}{a.shape}"
    return f"group{where[a]}"


def print_groups(groups: list[FusedGroup]) -> str:
    """Readable text: one block per group with its pattern, inputs and calls."""
    where = {g.output: i for i, g in enumerate(groups)}
    lines = []
    for i, g in enumerate(groups):
        pat = _PATTERN_NAMES.get(g.pattern, str(g.pattern))
        ins = ", ".join(_name(a, where) for a in g.inputs)
        lines.append(f"group{i} [{pat}] ({ins}) -> {g.output.shape} {g.output.dtype}")
        local = {c: k for k, c in enumerate(g.calls)}
        for k, c in enumerate(g.calls):
            args = ", ".join(f"%{local[a]}" if a in local else _name(a, where) for a in c.args)
            lines.append(f"  %{k} = {c.op}({args})  -> {c.shape}")
    return "\n".join(lines)


def count_by_signature(groups: list[FusedGroup], only_reductions: bool = True):
    """``[(group, count), ...]`` of distinct groups in first-occurrence order.

    With ``only_reductions`` only groups with an anchor are kept, as task extraction does
    without ``include_simple_tasks``.
    """
    out: dict[str, list] = {}
    for g in groups:
        if only_reductions and g.anchor is None:
            continue
        key = group_signature(g)
        if key in out:
            out[key][1] += 1
        else:
            out[key] = [g, 1]
    return [(g, c) for g, c in out.values()]
