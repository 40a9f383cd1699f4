"""Binary ops with numpy broadcasting (``T_add`` ...), bias_add and inference batch_norm."""

from __future__ import annotations

from .. import te
from ..dtype import is_float
from ..tensor import Tensor, TensorError
from ._util import compute

__all__ = [
    "add",
    "batch_norm",
    "bias_add",
    "broadcast_shape",
    "divide",
    "equal",
    "greater",
    "greater_equal",
    "less",
    "less_equal",
    "logical_and",
    "logical_or",
    "not_equal",
    "power",
    "left_shift",
    "maximum",
    "minimum",
    "multiply",
    "right_shift",
    "subtract",
    "where",
]


def broadcast_shape(a: tuple[int, ...], b: tuple[int, ...], op: str = "broadcast") -> tuple:
    """numpy's broadcast rule: align on the right; a dim of 1 stretches to the other."""
    n = max(len(a), len(b))
    a1 = (1,) * (n - len(a)) + tuple(a)
    b1 = (1,) * (n - len(b)) + tuple(b)
    out = []
    for k, (x, y) in enumerate(zip(a1, b1)):
        if x != y and 1 not in (x, y):
            raise TensorError(f"{op}: shapes {list(a)} and {list(b)} do not broadcast (dim {k})")
        out.append(max(x, y))
    return tuple(out)


def _reader(x, out_shape):
    """A function from output indices to ``x``'s value: a size-1 dim that was stretched is
    indexed with 0 (topi prints ``placeholder[ax0, 0, 0, ax3]``); python scalars are consts."""
    if not isinstance(x, Tensor):
        return lambda idx: x
    skip = len(out_shape) - len(x.shape)

    def read(idx):
        sub = idx[skip:]
        return x[
            tuple(0 if d == 1 and o != 1 else i for i, d, o in zip(sub, x.shape, out_shape[skip:]))
        ]

    return read


def _binary(a, b, f, name: str) -> Tensor:
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        raise TensorError(f"{name}: at least one operand must be a tensor")
    sa = a.shape if isinstance(a, Tensor) else ()
    sb = b.shape if isinstance(b, Tensor) else ()
    shape = broadcast_shape(sa, sb, name)
    if not shape:
        raise TensorError(f"{name}: 0-d tensors are not supported; reshape to (1,)")
    ra, rb = _reader(a, shape), _reader(b, shape)
    return compute(shape, lambda *i: f(ra(i), rb(i)), name, "ax", tag="broadcast")


def add(a, b) -> Tensor:
    """``T_add = a + b`` with numpy broadcasting."""
    return _binary(a, b, lambda x, y: x + y, "T_add")


def subtract(a, b) -> Tensor:
    """``T_subtract = a - b`` with numpy broadcasting."""
    return _binary(a, b, lambda x, y: x - y, "T_subtract")


def multiply(a, b) -> Tensor:
    """``T_multiply = a * b`` with numpy broadcasting."""
    return _binary(a, b, lambda x, y: x * y, "T_multiply")


def divide(a, b) -> Tensor:
    """``T_divide = a / b``; integer operands use floor division (as expr's ``/``)."""
    return _binary(a, b, lambda x, y: x / y, "T_divide")


def maximum(a, b) -> Tensor:
    """``T_maximum = max(a, b)`` with numpy broadcasting."""
    return _binary(a, b, te.max, "T_maximum")


def minimum(a, b) -> Tensor:
    """``T_minimum = min(a, b)`` with numpy broadcasting."""
    return _binary(a, b, te.min, "T_minimum")


def right_shift(a, b) -> Tensor:
    """``T_right_shift = a >> b`` on integers (arithmetic for signed, logical for unsigned)."""
    return _binary(a, b, te.right_shift, "T_right_shift")


def left_shift(a, b) -> Tensor:
    """``T_left_shift = a << b`` on integers (wraps in the dtype)."""
    return _binary(a, b, te.left_shift, "T_left_shift")


def _axis(axis: int, ndim: int, op: str) -> int:
    if not -ndim <= axis < ndim:
        raise TensorError(f"{op}: attribute 'axis' = {axis} is out of range for {ndim} dims")
    return axis % ndim


def bias_add(data: Tensor, bias: Tensor, axis: int = 1) -> Tensor:
    """``T_add = data + bias`` with the 1-D ``bias`` along ``axis`` (Relay's nn.bias_add)."""
    ax = _axis(axis, data.ndim, "nn.bias_add")
    if bias.shape != (data.shape[ax],):
        raise TensorError(
            f"nn.bias_add: bias shape {list(bias.shape)} must be [{data.shape[ax]}] "
            f"(data dim {ax} of {list(data.shape)})"
        )
    return compute(data.shape, lambda *i: data[i] + bias[i[ax]], "T_add", "ax", tag="broadcast")


def batch_norm(
    data,
    gamma,
    beta,
    moving_mean,
    moving_var,
    axis: int = 1,
    epsilon: float = 1e-5,
    center: bool = True,
    scale: bool = True,
) -> Tensor:
    """Inference batch norm ``(x - mean) / sqrt(var + eps) * gamma + beta`` as one stage.

    The graph layer normally folds it into multiply/add (Relay's SimplifyInference); this
    compute exists so an unfolded graph still runs.
    """
    ax = _axis(axis, data.ndim, "nn.batch_norm")
    c = data.shape[ax]
    for t, n in (
        (gamma, "gamma"),
        (beta, "beta"),
        (moving_mean, "moving_mean"),
        (moving_var, "moving_var"),
    ):
        if t.shape != (c,):
            raise TensorError(f"nn.batch_norm: {n} shape {list(t.shape)} must be [{c}]")
    if not is_float(data.dtype):
        raise TensorError(f"nn.batch_norm: data dtype {data.dtype} must be a float type")
    eps = te.const(float(epsilon), data.dtype)

    def f(*i):
        ch = i[ax]
        v = (data[i] - moving_mean[ch]) / te.sqrt(moving_var[ch] + eps)
        if scale:
            v = v * gamma[ch]
        if center:
            v = v + beta[ch]
        return v

    return compute(data.shape, f, "T_batch_norm", "ax", tag="injective")


# --- ONNX import: math and logic (issue 26) ---


def power(a, b) -> Tensor:
    """``T_power = a ** b`` (float operands; the math library's pow)."""
    return _binary(a, b, te.power, "T_power")


def equal(a, b) -> Tensor:
    """``T_equal``: bool ``a == b`` with numpy broadcasting."""
    return _binary(a, b, te.equal, "T_equal")


def not_equal(a, b) -> Tensor:
    """``T_not_equal``: bool ``a != b``."""
    return _binary(a, b, te.not_equal, "T_not_equal")


def less(a, b) -> Tensor:
    """``T_less``: bool ``a < b``."""
    return _binary(a, b, lambda x, y: x < y, "T_less")


def less_equal(a, b) -> Tensor:
    """``T_less_equal``: bool ``a <= b``."""
    return _binary(a, b, lambda x, y: x <= y, "T_less_equal")


def greater(a, b) -> Tensor:
    """``T_greater``: bool ``a > b``."""
    return _binary(a, b, lambda x, y: x > y, "T_greater")


def greater_equal(a, b) -> Tensor:
    """``T_greater_equal``: bool ``a >= b``."""
    return _binary(a, b, lambda x, y: x >= y, "T_greater_equal")


def logical_and(a, b) -> Tensor:
    """``T_logical_and``: bool ``a && b`` (non-bool operands are compared with 0)."""
    return _binary(a, b, te.all, "T_logical_and")


def logical_or(a, b) -> Tensor:
    """``T_logical_or``: bool ``a || b``."""
    return _binary(a, b, te.any, "T_logical_or")


def where(cond: Tensor, x: Tensor, y: Tensor) -> Tensor:
    """``T_where = cond ? x : y`` with the three shapes broadcast together (Relay's where)."""
    shape = broadcast_shape(broadcast_shape(cond.shape, x.shape, "where"), y.shape, "where")
    if not shape:
        raise TensorError("where: 0-d tensors are not supported; reshape to (1,)")
    rc, rx, ry = _reader(cond, shape), _reader(x, shape), _reader(y, shape)
    return compute(
        shape, lambda *i: te.select(rc(i), rx(i), ry(i)), "T_where", "ax", tag="broadcast"
    )
