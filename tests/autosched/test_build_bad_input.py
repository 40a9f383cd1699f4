"""Calling a built function with bad arrays: one clear error naming the argument (issue 14)."""

import numpy as np
import pytest

import autosched as ansor
from autosched import te


@pytest.fixture(scope="module")
def add_one():
    A = te.placeholder((4, 6), name="A")
    B = te.compute((4, 6), lambda i, j: A[i, j] + 1.0, name="B")
    dag = ansor.ComputeDAG([A, B])
    return ansor.build(dag.get_init_state(), target="llvm")


def test_a_read_only_output_is_refused(add_one):
    a = np.random.default_rng(0).uniform(-1, 1, (4, 6)).astype("float32")
    out = np.zeros((4, 6), "float32")
    out.flags.writeable = False
    with pytest.raises(ValueError, match="param 'B' is an output but its array is read-only"):
        add_one(a, out)
    a.flags.writeable = False  # a read-only input is fine
    out = np.zeros((4, 6), "float32")
    add_one(a, out)
    np.testing.assert_allclose(out, a + 1.0)


@pytest.mark.parametrize("which", ["A", "B"])
def test_an_array_of_the_same_size_but_another_shape_is_refused(add_one, which):
    a = np.random.default_rng(1).uniform(-1, 1, (4, 6)).astype("float32")
    out = np.zeros((4, 6), "float32")
    args = {"A": a, "B": out}
    args[which] = args[which].reshape(6, 4)
    with pytest.raises(
        ValueError, match=rf"param '{which}': expected shape \(4, 6\), got \(6, 4\)"
    ):
        add_one(args["A"], args["B"])


def test_an_output_sharing_memory_with_an_input_is_refused(add_one):
    # Kernels read inputs while writing outputs: the same buffer for both gave wrong results.
    a = np.random.default_rng(2).uniform(-1, 1, (4, 6)).astype("float32")
    with pytest.raises(ValueError, match="param 'B' is an output but its array shares memory"):
        add_one(a, a)
    with pytest.raises(ValueError, match="shares memory with param 'A'"):
        add_one(a, a.reshape(-1).reshape(4, 6))  # a view of the same buffer
    out = np.empty((4, 6), "float32")
    add_one(a, out)  # separate arrays: fine
    np.testing.assert_allclose(out, a + 1.0)
