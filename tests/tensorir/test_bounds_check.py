"""Definition-time validation of compute bodies (tensorir/bounds_check.py, te.compute) and the
interpreter's out-of-range reads: provable errors are raised by ``compute``, valid guarded
reads are accepted, and the interpreter raises only for reads that are actually selected."""

import numpy as np
import pytest

from tensorir import te
from tensorir.dag import ComputeDAG
from tensorir.interp import eval_dag
from tensorir.tensor import TensorError

A = te.placeholder((4, 4), name="A")


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype("float32")


# ----------------------------------------------------------------------------- provable reads


@pytest.mark.parametrize(
    "fcompute, index, values",
    [
        (lambda i, j: A[i, 10], "10", "[10, 10]"),
        (lambda i, j: A[i, 100000000], "100000000", "[100000000, 100000000]"),
        (lambda i, j: A[-1, j], "-1", "[-1, -1]"),
        (lambda i, j: A[i + 1, j], "(i+1)", "[1, 4]"),
        (lambda i, j: A[i, 3 - j - 1], "", "[-1, 2]"),
        (lambda i, j: A[i, (i * 4 + j) // 3], "", "[0, 5]"),
    ],
)
def test_provably_out_of_range_read_is_rejected_by_compute(fcompute, index, values):
    with pytest.raises(TensorError) as info:
        te.compute((4, 4), fcompute, name="C")
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith("compute 'C': read of tensor 'A' out of range")
    assert f"index {index}" in msg and f"takes values {values}" in msg
    assert "extent 4" in msg and "te.if_then_else" in msg and "pad" in msg


def test_reduce_axis_range_is_checked():
    k = te.reduce_axis((0, 5), name="k")
    with pytest.raises(
        TensorError, match=r"compute 'C'.*index k of dimension 1 takes values \[0, 4\]"
    ):
        te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="C")


def test_guard_that_does_not_exclude_the_bad_rows_is_rejected():
    with pytest.raises(TensorError, match="takes values \\[1, 4\\]"):
        te.compute((4, 4), lambda i, j: te.if_then_else(i < 4, A[i + 1, j], 0.0), name="C")
    # The else branch of `i >= 5` runs for i in [0, 4]; A has 4 rows.
    with pytest.raises(TensorError, match="takes values \\[0, 4\\]"):
        te.compute((6, 4), lambda i, j: te.if_then_else(i >= 5, 0.0, A[i, j]), name="C")


@pytest.mark.parametrize(
    "shape, fcompute",
    [
        # padding with a conjunction of bounds, the read in the then-branch
        (
            (6, 6),
            lambda i, j: te.if_then_else(
                te.all(i >= 1, i < 5, j >= 1, j < 5), A[i - 1, j - 1], 0.0
            ),
        ),
        # the read in the else-branch of a single bound; select guards too
        ((5, 4), lambda i, j: te.if_then_else(i >= 4, 0.0, A[i, j])),
        ((5, 4), lambda i, j: te.select(i <= 3, A[i, j], 0.0)),
        # a complex guard: the read may be masked off, so it is not judged
        ((8, 4), lambda i, j: te.if_then_else(i * i < 16, A[i, j], 0.0)),
        # && evaluates its right operand only where the left one holds
        ((5, 4), lambda i, j: te.if_then_else(te.all(i < 4, A[i, j] > 0), 1.0, 0.0)),
        # non-linear and data-dependent indices are not judged at definition time
        ((4, 4), lambda i, j: A[(i * j) % 4, j]),
        # a guard that never holds: its branch is never evaluated
        ((4, 4), lambda i, j: te.if_then_else(i > 10, A[i + 7, j], A[i, j])),
    ],
)
def test_valid_guarded_reads_are_accepted(shape, fcompute):
    te.compute(shape, fcompute, name="C")


def test_reducer_where_guards_its_source():
    k = te.reduce_axis((0, 6), name="k")
    C = te.compute((4,), lambda i: te.sum(A[i, k], axis=k, where=k < 4), name="C")
    a = _rand(4, 4)
    (out,) = eval_dag(ComputeDAG([A, C]), [a])
    np.testing.assert_allclose(out, a.sum(axis=1), rtol=1e-5)


# ----------------------------------------------------------------------------- variables


def test_unbound_var_is_rejected_by_compute():
    n = te.var("n")
    with pytest.raises(TensorError, match=r"^compute 'C': variable 'n' is not bound"):
        te.compute((4, 4), lambda i, j: A[i, n], name="C")


def test_axis_of_another_compute_is_rejected_by_compute():
    B = te.compute((4, 4), lambda p, q: A[p, q] * 2.0, name="B")
    q = B.op.axes[1].var
    with pytest.raises(TensorError, match=r"^compute 'C': variable 'q' is an axis of compute 'B'"):
        te.compute((4, 4), lambda i, j: A[i, q], name="C")


def test_reduce_axis_outside_a_reducer_is_rejected_by_compute():
    k = te.reduce_axis((0, 4), name="k")
    with pytest.raises(
        TensorError, match=r"^compute 'C': reduce axis 'k' is used outside a reducer"
    ):
        te.compute((4,), lambda i: A[i, k], name="C")
    k2 = te.reduce_axis((0, 4), name="k2")
    with pytest.raises(TensorError, match=r"reduce axis 'k2' is used outside a reducer .*\['k'\]"):
        te.compute((4,), lambda i: te.sum(A[i, k] * A[k2, k], axis=k), name="C")


# ----------------------------------------------------------------------------- interpreter


def test_interpreter_raises_on_a_selected_out_of_range_read():
    V = te.placeholder((4,), name="V")
    C = te.compute((4,), lambda i: V[i * i], name="C")  # non-linear: only the data tells
    with pytest.raises(TensorError, match=r"stage 'C'.*tensor 'V'.*is 4 at i=2"):
        eval_dag(ComputeDAG([V, C]), [_rand(4)])


def test_interpreter_computes_masked_off_out_of_range_reads():
    V = te.placeholder((4,), name="V")
    C = te.compute((4,), lambda i: te.if_then_else(i * i < 4, V[i * i], -1.0), name="C")
    v = _rand(4)
    (out,) = eval_dag(ComputeDAG([V, C]), [v])
    np.testing.assert_array_equal(out, [v[0], v[1], -1.0, -1.0])


def test_interpreter_checks_a_shared_read_where_it_is_selected():
    V = te.placeholder((4,), name="V")
    r = None

    def body(i):
        nonlocal r
        r = V[i * i]  # the same node, masked off in one place and selected in another
        return te.if_then_else(i * i < 4, r, 0.0) + r

    C = te.compute((4,), body, name="C")
    with pytest.raises(TensorError, match="stage 'C'"):
        eval_dag(ComputeDAG([V, C]), [_rand(4)])


def test_interpreter_gather_with_data_dependent_index():
    V = te.placeholder((4,), name="V")
    idx = te.placeholder((3,), dtype="int32", name="idx")
    C = te.compute((3,), lambda i: V[idx[i]], name="C")
    dag = ComputeDAG([V, idx, C])
    v = _rand(4)
    (out,) = eval_dag(dag, [v, np.array([3, 0, 2], "int32")])
    np.testing.assert_array_equal(out, v[[3, 0, 2]])
    with pytest.raises(TensorError, match=r"tensor 'V'.*is 7 at i=1"):
        eval_dag(dag, [v, np.array([3, 7, 2], "int32")])
