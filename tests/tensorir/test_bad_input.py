"""Bad input to the te front end, ComputeDAG and the model zoo: one clear error each (issue 14)."""

import numpy as np
import pytest

from tensorir import te
from tensorir.dag import ComputeDAG
from tensorir.dtype import promote
from tensorir.graph import get_network
from tensorir.interp import eval_dag
from tensorir.tensor import TensorError


@pytest.mark.parametrize("shape", ["abc", "4", ("4", 2), (2.5, 2), b"ab"])
def test_placeholder_rejects_a_shape_that_is_not_ints(shape):
    with pytest.raises(TensorError, match="placeholder 'X': .*shape|placeholder 'X': every dim"):
        te.placeholder(shape, name="X")


def test_placeholder_accepts_integral_numbers():
    assert te.placeholder((np.int64(3), 2.0), name="X").shape == (3, 2)


@pytest.mark.parametrize("dom", [(0, 2.5), (0.5, 3), ("0", 3)])
def test_reduce_axis_rejects_a_range_that_is_not_ints(dom):
    with pytest.raises(TensorError, match=r"reduce_axis 'k': dom must be two ints"):
        te.reduce_axis(dom, name="k")


def test_compute_dag_rejects_an_output_listed_before_its_input():
    A = te.placeholder((4,), name="A")
    B = te.compute((4,), lambda i: A[i] * 2.0, name="B")
    with pytest.raises(TensorError, match="input 'A' is listed after output 'B'; list the inputs"):
        ComputeDAG([B, A])
    assert [t.name for t in ComputeDAG([A, B]).tensors] == ["A", "B"]


@pytest.mark.parametrize("batch_size", [0, -1, 1.5, "2", True, None])
def test_get_network_rejects_a_batch_size_that_is_not_a_positive_int(batch_size):
    with pytest.raises(ValueError, match="get_network\\('resnet-18'\\): batch_size must be a pos"):
        get_network("resnet-18", batch_size=batch_size)


@pytest.mark.parametrize(
    "a,b", [("uint8", "int8"), ("int8", "uint8"), ("uint32", "int32"), ("uint8", "int16")]
)
def test_signed_unsigned_promotion_follows_numpy(a, b):
    assert promote(a, b) == str(np.result_type(a, b))


def test_uint8_plus_int8_kernel_matches_numpy():
    import autosched as ansor

    rng = np.random.default_rng(3)
    U = te.placeholder((64,), name="U", dtype="uint8")
    S = te.placeholder((64,), name="S", dtype="int8")
    C = te.compute((64,), lambda i: U[i] + S[i], name="C")
    u = rng.integers(0, 256, 64).astype("uint8")
    s = rng.integers(-128, 128, 64).astype("int8")
    ref = u + s
    assert C.dtype == str(ref.dtype) == "int16"
    dag = ComputeDAG([U, S, C])
    (interp,) = eval_dag(dag, [u, s])
    np.testing.assert_array_equal(interp, ref)
    out = np.full(64, -777, "int16")
    ansor.build(dag.get_init_state(), target="llvm")(u, s, out)
    np.testing.assert_array_equal(out, ref)
    assert (ref > 127).any() and (ref < 0).any()  # values neither int8 nor uint8 holds


# ---------------------------------------------------------------- issue 27: accepted silently


@pytest.mark.parametrize("dim", [True, False, np.bool_(True)])
def test_a_bool_is_not_a_dimension(dim):
    # True == 1, so (True, 3) used to be a (1, 3) tensor.
    with pytest.raises(TensorError, match=r"placeholder 'X': every dimension must be a positive"):
        te.placeholder((dim, 3), name="X")
    with pytest.raises(TensorError, match=r"compute 'C': every dimension must be a positive"):
        te.compute((3, dim), lambda i, j: 1.0, name="C")
    with pytest.raises(TensorError, match=r"reduce_axis 'k': dom must be two ints"):
        te.reduce_axis((0, dim), name="k")


@pytest.mark.parametrize("name", [5, None, ("A",), b"A"])
def test_a_tensor_name_must_be_a_string(name):
    match = rf"name must be a string, got {type(name).__name__}"
    with pytest.raises(TensorError, match=rf"placeholder: {match}"):
        te.placeholder((2, 3), name=name)
    A = te.placeholder((2, 3), name="A")
    with pytest.raises(TensorError, match=rf"compute: {match}"):
        te.compute((2, 3), lambda i, j: A[i, j], name=name)
    with pytest.raises(TensorError, match=rf"reduce_axis: {match}"):
        te.reduce_axis((0, 3), name=name)
