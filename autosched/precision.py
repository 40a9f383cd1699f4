"""Precision as the user chooses it: ``to_mixed_precision(mod, "float16", params)`` and the
accuracy report that says what the 16 bits cost (docs/gpu.md).

::

    mod16 = autosched.to_mixed_precision(mod, "float16", params)   # weights bound, in fp16
    lib = autosched.build(mod16, target="cuda")
    print(autosched.accuracy_report(mod, params, mod16))           # top-1 agreement, error

The rewrite is :mod:`tensorir.graph.passes.mixed_precision` (Relay's ToMixedPrecision); this
module adds what a user needs around it: batch norm folded into the convolutions first (as
``quantize`` does), so the 16-bit kernels keep their fused epilogues, and the comparison with
the float32 network. Imports tensorir only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from tensorir.dtype import LOW_PRECISION
from tensorir.graph import ir as gir
from tensorir.graph.passes import optimize
from tensorir.graph.passes.mixed_precision import to_mixed_precision as _rewrite
from tensorir.graph.reference import evaluate

__all__ = ["PRECISIONS", "AccuracyReport", "accuracy_report", "to_mixed_precision"]

PRECISIONS = ("float32", *LOW_PRECISION)
"""What ``--precision`` accepts."""


def _layout(func: gir.Function) -> str:
    convs = [c for c in gir.calls(func) if c.op == "nn.conv2d"]
    return "NHWC" if any(c.attrs["data_layout"] == "NHWC" for c in convs) else "NCHW"


def to_mixed_precision(mod, dtype: str = "float16", params: Mapping | None = None) -> gir.Module:
    """The network with convolutions, dense and batch_matmul in ``dtype`` (float32 accumulation),
    softmax / normalisations / sums in float32, float32 inputs and outputs.

    Parameters
    ----------
    mod : tensorir.graph Module or Function
        A float32 network (``networks.get_network``, ``from_onnx``).
    dtype : "float16" or "bfloat16"
    params : dict name -> array, optional
        The weights. Given, they are bound and batch norm is folded into the convolutions before
        the rewrite (the result holds 16-bit constant weights; build it without params).
        Without them, the weights stay parameters behind a ``cast`` that the build folds when
        it binds them (batch norm then stays a float32 multiply/add of its own).

    Returns
    -------
    Module
    """
    func = gir.main_function(mod, "to_mixed_precision")
    if dtype not in LOW_PRECISION:
        raise ValueError(
            f"to_mixed_precision: dtype={dtype!r}; use one of {list(LOW_PRECISION)} "
            "(float32 networks need no conversion)"
        )
    if params:
        func = optimize(func, params, layout=_layout(func), use_winograd=False)
    return gir.Module.from_function(_rewrite(func, dtype))


@dataclass(frozen=True)
class AccuracyReport:
    """How a low-precision network's outputs compare with the float32 network's.

    Attributes
    ----------
    n : int
        Random inputs compared.
    top1_agreement : float
        Fraction of output rows (one per batch item and input) whose argmax is the same.
    max_rel_error : float
        The largest ``max|low - ref| / max|ref|`` over the inputs (the error relative to the
        output's scale: an elementwise ratio explodes where a logit is near 0).
    dtype : str
        The low-precision network's label, for printing.
    """

    n: int
    top1_agreement: float
    max_rel_error: float
    dtype: str = "low precision"

    def __str__(self) -> str:
        return (
            f"{self.dtype} vs float32 on {self.n} random inputs: top-1 agreement "
            f"{self.top1_agreement:.1%}, max relative error {self.max_rel_error:.2e}"
        )


def accuracy_report(
    mod,
    params: Mapping | None,
    lowp_mod,
    n: int = 50,
    *,
    lowp_params: Mapping | None = None,
    run: Callable[[np.ndarray], np.ndarray] | None = None,
    lowp_run: Callable[[np.ndarray], np.ndarray] | None = None,
    dtype: str | None = None,
    seed: int = 0,
) -> AccuracyReport:
    """Top-1 agreement and max relative error of ``lowp_mod`` against ``mod`` on ``n`` random
    normal inputs.

    Parameters
    ----------
    mod, params : the float32 network and its weights
    lowp_mod : the low-precision network (``to_mixed_precision``), ``lowp_params`` its weights
        (None: the ones it needs from ``params``).
    n : int
        How many inputs (50 by default).
    run, lowp_run : callable, optional
        ``f(x) -> output`` to use instead of the numpy reference (e.g. the built modules: much
        faster on big networks).
    dtype : str, optional
        The label printed; by default the dtype of the low-precision network's first
        convolution or dense.
    seed : int

    Raises
    ------
    ValueError
        The network has no single float input (the one parameter not in ``params``).
    """
    func = gir.main_function(mod, "accuracy_report")
    low = gir.main_function(lowp_mod, "accuracy_report")
    params = dict(params or {})
    inputs = [v for v in func.params if v.name not in params]
    if len(inputs) != 1:
        raise ValueError(
            f"accuracy_report: the network must have one input besides its params, it has "
            f"{[v.name for v in inputs]}; pass the weights as params"
        )
    data = inputs[0]
    lowp_params = {v.name: params[v.name] for v in low.params if v.name in params} | dict(
        lowp_params or {}
    )
    run = run or (lambda x: evaluate(func, {data.name: x}, params))
    lowp_run = lowp_run or (lambda x: evaluate(low, {data.name: x}, lowp_params))
    rng = np.random.default_rng(seed)
    agree = rows = 0
    worst = 0.0
    for _ in range(int(n)):
        x = rng.standard_normal(data.shape).astype(np.float32)
        ref = np.asarray(_first(run(x)), dtype=np.float32)
        got = np.asarray(_first(lowp_run(x)), dtype=np.float32)
        scale = float(np.abs(ref).max()) or 1.0
        worst = max(worst, float(np.abs(got - ref).max()) / scale)
        r2, g2 = ref.reshape(ref.shape[0], -1), got.reshape(got.shape[0], -1)
        agree += int((r2.argmax(axis=1) == g2.argmax(axis=1)).sum())
        rows += r2.shape[0]
    label = dtype or _low_dtype(low)
    return AccuracyReport(int(n), agree / max(rows, 1), worst, label)


def _first(out):
    return out[0] if isinstance(out, list | tuple) else out


def _low_dtype(func: gir.Function) -> str:
    for c in gir.calls(func):
        if c.attrs.get("out_dtype") == "float32" and c.args[0].dtype in LOW_PRECISION:
            return c.args[0].dtype
    return "low precision"
