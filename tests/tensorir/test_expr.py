"""Expression and tensor construction: dtype promotion and the errors users hit first."""

import pytest

from tensorir import te
from tensorir.expr import Binary, Cast, Const, IterVar, Var, call, const, walk
from tensorir.tensor import TensorError


def test_dtype_promotion_inserts_casts():
    i = Var("i")
    f = Var("f", "float32")
    e = i + f
    assert isinstance(e, Binary) and e.dtype == "float32"
    assert isinstance(e.a, Cast) and e.a.dtype == "float32" and e.a.value is i
    assert (Var("a", "int64") * Var("b", "int32")).dtype == "int64"
    assert (Var("h", "float16") + Var("d", "float64")).dtype == "float64"
    assert (i + 1).dtype == "int32" and (f + 1).dtype == "float32"
    assert isinstance((f + 1).b, Const) and (f + 1).b.dtype == "float32"  # scalar takes a hint
    assert (i + 1.5).dtype == "float32"  # a float literal never truncates to int
    assert (i < 3).dtype == "bool" and te.all(i < 3, i > 0).dtype == "bool"


def test_integer_division_is_floordiv():
    i = Var("i")
    assert (i / 4).op == "floordiv" and (i // 4).op == "floordiv" and (i % 4).op == "floormod"
    assert (Var("f", "float32") / 4).op == "/"


def test_python_equality_is_structural_and_bool_is_refused():
    i = Var("i")
    assert (i + 1) == (i + 1) and (i + 1) != (Var("i") + 1)  # vars compare by identity
    assert te.equal(i, 1).op == "=="
    with pytest.raises(TypeError, match="cannot use the symbolic expression"):
        if i < 3:
            pass


def test_constants_and_calls():
    assert const(3).dtype == "int32" and const(3.0).dtype == "float32"
    assert const(True).dtype == "bool"
    with pytest.raises(ValueError, match="unsupported dtype 'float8'"):
        const(1, "float8")
    with pytest.raises(TypeError, match="cannot make a constant"):
        const("3")
    assert call("exp", Var("i")).dtype == "float32"  # ints are promoted for math calls
    with pytest.raises(ValueError, match="unknown math function 'expp'"):
        call("expp", 1.0)


def test_bad_index_arity_names_the_tensor():
    A = te.placeholder((4, 5), name="A")
    with pytest.raises(TensorError, match="tensor 'A' has 2 dimensions \\[4, 5\\] but was indexed"):
        te.compute((4,), lambda i: A[i], name="B")


def test_float_index_is_rejected():
    A = te.placeholder((4,), name="A")
    F = te.placeholder((4,), name="F")
    with pytest.raises(TensorError, match="index 0 of tensor 'A' has float dtype float32"):
        te.compute((4,), lambda i: A[F[i]], name="B")
    with pytest.raises(TensorError, match="float dtype"):
        te.compute((4,), lambda i: A[i * 0.5], name="C")


def test_misplaced_reductions():
    A = te.placeholder((4, 4), name="A")
    k = te.reduce_axis((0, 4), name="k")
    with pytest.raises(TensorError, match="a reduction must be the whole body"):
        te.compute((4,), lambda i: te.sum(A[i, k], axis=k) + 1.0, name="B")
    with pytest.raises(TensorError, match="must be reduce axes made with te.reduce_axis"):
        te.compute((4, 4), lambda i, j: te.sum(A[i, j], axis=IterVar(Var("x"), 0, 4)), name="C")
    k2 = te.reduce_axis((0, 4), name="i")
    with pytest.raises(TensorError, match="must be unique and differ from the spatial axes"):
        te.compute((4,), lambda i: te.sum(A[i, k2], axis=k2), name="D")
    with pytest.raises(TensorError, match="empty range"):
        te.reduce_axis((3, 3), name="r")


def test_compute_and_placeholder_shape_errors():
    A = te.placeholder((4,), name="A")
    with pytest.raises(TensorError, match="fcompute takes 1 indices but the shape \\[4, 4\\]"):
        te.compute((4, 4), lambda i: A[i], name="B")
    with pytest.raises(TensorError, match="every dimension must be a positive int"):
        te.placeholder((4, 0), name="Z")
    with pytest.raises(TensorError, match="fcompute returned a tensor"):
        te.compute((4,), lambda i: A, name="C")
    with pytest.raises(TypeError, match="a tensor must be indexed"):
        te.compute((4,), lambda i: te.exp(A), name="D")


def test_compute_axis_names_come_from_the_lambda():
    A = te.placeholder((2, 3), name="A")
    B = te.compute((2, 3), lambda row, col: A[row, col] * 2.0, name="B")
    C = te.compute((2, 3), lambda *ax: A[ax] + 1.0, name="C")
    assert [ax.name for ax in B.op.axes] == ["row", "col"]
    assert [ax.name for ax in C.op.axes] == ["ax0", "ax1"]
    reads = [n for n in walk(B.op.body) if hasattr(n, "tensor")]
    assert reads[0].tensor is A and reads[0].indices[0] is B.op.axes[0].var
