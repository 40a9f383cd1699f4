"""tensorir.transform: rewrite's memo and substitute on shared sub-expressions (issue 29).

Lowering shares sub-expressions (a stage's loop values appear in every index); the memos walk
them once. The trees must be those of a walk that visits every occurrence."""

from tensorir.expr import Binary, Const, Var, floordiv, floormod, select, walk
from tensorir.transform import rewrite, substitute

I, J = Var("i"), Var("j")  # noqa: E741 - loop-variable names


def _shared_tree():
    idx = I * 8 + J  # one object, used four times
    return select(idx < 50, floordiv(idx, 4) * 16 + floormod(idx, 4), idx * 2 - idx)


def _copy(e):
    if isinstance(e, Binary):
        return Binary(e.op, _copy(e.a), _copy(e.b), e.dtype)
    if hasattr(e, "cond"):
        return type(e)(_copy(e.cond), _copy(e.t), _copy(e.f), e.dtype)
    return e


def test_substitute_shared_equals_unshared():
    a = Var("a")
    mapping = {I: a * 3 + 1, J: Const(2, "int32")}
    e = _shared_tree()
    got = substitute(e, mapping)
    want = substitute(_copy(e), mapping)
    assert got == want and str(got) == str(want)
    assert not {I, J} & set(walk(got))  # every occurrence replaced
    assert substitute(e, {}) is e


def test_rewrite_memo_equals_plain_rewrite_and_visits_shared_nodes_once():
    e = _shared_tree()
    seen: list = []

    def fn(node):
        seen.append(id(node))
        return Const(7, "int32") if node is J else None

    plain = rewrite(e, fn)
    n_plain = len(seen)
    seen.clear()
    memo = rewrite(e, fn, {})
    assert memo == plain and str(memo) == str(plain)
    assert len(seen) == len(set(seen)) < n_plain  # each node once, fewer visits
    assert rewrite(e, lambda n: None, {}) is e  # unchanged trees are returned as they are
