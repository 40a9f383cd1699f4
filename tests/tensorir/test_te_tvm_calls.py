"""te as TVM and TOPI write it: tensors called like functions (``Y(*i)``), te.max / te.min of
two values (elementwise, scalars included). Checked with the interpreter and an LLVM build on
random inputs."""

import numpy as np
import pytest

import autosched as ansor
from tensorir import te
from tensorir.interp import eval_dag
from tensorir.tensor import TensorError


def _rand(shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype("float32")


def test_topi_relu_with_a_called_tensor_and_star_indices():
    # TOPI's relu: te.compute(x.shape, lambda *i: te.max(x(*i), 0.0)); a TypeError before.
    Y = te.placeholder((3, 4, 5), name="Y")
    R = te.compute(Y.shape, lambda *i: te.max(Y(*i), 0.0), name="R")
    y = _rand(Y.shape)
    dag = ansor.ComputeDAG([Y, R])
    (out,) = eval_dag(dag, [y])
    np.testing.assert_array_equal(out, np.maximum(y, 0))
    func = ansor.build(dag.get_init_state(), "llvm")
    got = np.full(y.shape, np.nan, "float32")
    func(y, got)
    np.testing.assert_array_equal(got, np.maximum(y, 0))


def test_called_tensor_is_its_index_and_checks_arity():
    A = te.placeholder((4, 6), name="A")
    B = te.placeholder((4, 6), name="B")
    C = te.compute((4, 6), lambda i, j: te.min(A(i, j), B[i, j]) + A(i, 5 - j), name="C")
    a, b = _rand(A.shape, 1), _rand(B.shape, 2)
    (out,) = eval_dag(ansor.ComputeDAG([A, B, C]), [a, b])
    np.testing.assert_allclose(out, np.minimum(a, b) + a[:, ::-1], rtol=1e-6)
    with pytest.raises(TensorError, match="2 dimensions .* indexed with 1 indices"):
        A(1)


@pytest.mark.parametrize("a, b", [(1.5, -2.25), (3, 7), (-4, 2.5)])
def test_te_max_min_of_two_scalars(a, b):
    # As TVM: te.max(a, b) / te.min(a, b) on plain numbers is their max / min, inside a body.
    A = te.placeholder((2,), name="A")
    C = te.compute((2,), lambda i: A[i] * 0.0 + te.max(a, b) - te.min(a, b), name="C")
    (out,) = eval_dag(ansor.ComputeDAG([A, C]), [_rand((2,), 3)])
    np.testing.assert_allclose(out, [max(a, b) - min(a, b)] * 2, rtol=1e-6)
