"""``quantize(mod, params)`` under ``with qconfig(...)``: int8 networks, as relay.quantize.

::

    from autosched import quantize as aq
    with aq.qconfig(nbit_input=8, nbit_weight=8, global_scale=8.0, skip_conv_layers=[0]):
        qmod = aq.quantize(mod, params)
    lib = autosched.build(qmod, target="llvm")          # the weights are constants of qmod

The float network is optimised (batch norm and scales folded, no winograd), its activation
scales are chosen (``calibrate_mode``), and ``tensorir.graph.passes.quantize`` rewrites it:
int8 conv2d / dense with int32 accumulation, requantization by shift / clip / cast, float at
the edges. Every scale is a power of two (relay's ``round_for_shift``), so rescaling is a shift.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

import numpy as np

from tensorir.graph import ir as gir
from tensorir.graph.passes import optimize
from tensorir.graph.passes.quantize import power2_scale, quantize_sites, realize_quantized
from tensorir.graph.reference import evaluate

__all__ = ["QConfig", "current_qconfig", "kl_divergence_threshold", "qconfig", "quantize"]

logger = logging.getLogger(__name__)

CALIBRATE_MODES = ("global_scale", "kl_divergence")


@dataclass(frozen=True)
class QConfig:
    """Quantization settings (relay's ``QConfig``); use it as a context manager.

    Parameters
    ----------
    nbit_input, nbit_weight : int
        Bits of the quantized activations and weights (8: int8, the only width supported).
    global_scale : float
        ``calibrate_mode="global_scale"``: every activation lies in ``[-global_scale,
        global_scale]``, i.e. its scale is ``global_scale / 128``.
    skip_conv_layers : tuple of int
        conv2d layers (counted in execution order from 0) that stay float; relay skips the
        first (``[0]``), whose 3 input channels gain little and lose accuracy.
    skip_dense_layer : bool
        Keep ``nn.dense`` float (relay's default, True: the classifier's few MACs do not pay
        for the accuracy its 8-bit input costs).
    calibrate_mode : "global_scale" or "kl_divergence"
        ``kl_divergence`` picks each activation's clipping threshold by the KL divergence of its
        quantized histogram on the calibration ``dataset`` (TensorRT's / relay's method).
    """

    nbit_input: int = 8
    nbit_weight: int = 8
    global_scale: float = 8.0
    skip_conv_layers: tuple[int, ...] = (0,)
    skip_dense_layer: bool = True
    calibrate_mode: str = "global_scale"

    def __post_init__(self):
        skip = () if self.skip_conv_layers is None else self.skip_conv_layers
        object.__setattr__(self, "skip_conv_layers", tuple(int(i) for i in skip))
        for name in ("nbit_input", "nbit_weight"):
            if getattr(self, name) != 8:
                raise ValueError(
                    f"qconfig: {name}={getattr(self, name)} is not supported; use 8 (int8)"
                )
        if self.calibrate_mode not in CALIBRATE_MODES:
            raise ValueError(
                f"qconfig: calibrate_mode={self.calibrate_mode!r}; use one of {CALIBRATE_MODES}"
            )
        if not 0 < float(self.global_scale) < float("inf"):
            raise ValueError(
                f"qconfig: global_scale={self.global_scale} must be a positive finite number"
            )

    def __enter__(self) -> QConfig:
        _stack().append(self)
        return self

    def __exit__(self, *exc) -> None:
        _stack().pop()


_local = threading.local()


def _stack() -> list:
    if not hasattr(_local, "stack"):
        _local.stack = []
    return _local.stack


def qconfig(**kwargs) -> QConfig:
    """A :class:`QConfig` from the current one with ``kwargs`` changed (relay's ``qconfig``)."""
    return replace(current_qconfig(), **kwargs)


def current_qconfig() -> QConfig:
    """The innermost ``with qconfig(...)`` in force, or the defaults."""
    stack = _stack()
    return stack[-1] if stack else QConfig()


def _layout(func: gir.Function) -> str:
    convs = [c for c in gir.calls(func) if c.op == "nn.conv2d"]
    return "NHWC" if any(c.attrs["data_layout"] == "NHWC" for c in convs) else "NCHW"


def quantize(mod, params: Mapping | None = None, dataset: Iterable | None = None, *, config=None):
    """Quantize a float network to int8 conv2d / dense with int32 accumulation.

    Parameters
    ----------
    mod : tensorir.graph Module or Function
    params : dict name -> array, optional
        Weights; they are bound as constants (quantized to int8 for the quantized layers).
    dataset : iterable of dict name -> array, optional
        Calibration inputs, needed by ``calibrate_mode="kl_divergence"`` (relay's ``dataset``).
        A :class:`QConfig` given here is taken as ``config`` (``quantize(mod, params,
        qconfig(...))``).
    config : QConfig, optional
        Default: :func:`current_qconfig`.

    Returns
    -------
    Module
        The quantized network; its inputs and outputs are float as before. A NaN input
        quantizes to +127 and +-inf to +-127 (int8 has no NaN; docs/quantize.md).

    Raises
    ------
    ValueError
        A quantized weight or constant holds NaN/inf, a constant does not fit int32 at its
        value's scale, or a calibration batch holds (or makes) NaN/inf.
    """
    if isinstance(dataset, QConfig):
        config, dataset = dataset, None
    cfg = config or current_qconfig()
    network = gir.main_function(mod, "quantize")
    func = optimize(network, params or {}, layout=_layout(network), use_winograd=False)
    sites = quantize_sites(func, cfg.skip_conv_layers, cfg.skip_dense_layer)
    if cfg.calibrate_mode == "global_scale":
        scale = power2_scale(float(cfg.global_scale))
        scales = dict.fromkeys(sites, scale)
    else:
        if dataset is None:
            raise ValueError(
                "quantize: calibrate_mode='kl_divergence' needs a calibration dataset "
                "(quantize(mod, params, dataset=[{'data': array}, ...]))"
            )
        scales = _kl_scales(func, sites, dataset)
    out = realize_quantized(func, scales, cfg.skip_conv_layers, cfg.skip_dense_layer)
    logger.info(
        "quantize: %d int8 layers, %d activation scales (%s)",
        sum(1 for c in gir.calls(out) if c.attrs.get("out_dtype") == "int32"),
        len(set(scales.values())),
        cfg.calibrate_mode,
    )
    return gir.Module.from_function(out)


# --- kl_divergence calibration ----------------------------------------------------------------

_MAX_SAMPLES = 1 << 20


def _kl_scales(func: gir.Function, sites, dataset) -> dict:
    probe = gir.Function(func.params, tuple(sites), func.name)
    samples: list[list[np.ndarray]] = [[] for _ in sites]
    count = 0
    for batch in dataset:
        if not isinstance(batch, Mapping):
            raise TypeError(
                f"quantize: dataset items must be dicts of input name -> array, got "
                f"{type(batch).__name__}"
            )
        for name, value in batch.items():
            if not np.isfinite(np.asarray(value, np.float64)).all():
                raise ValueError(
                    f"quantize: calibration batch {count}, input {name!r} holds NaN or inf; "
                    "calibrate on finite data"
                )
        for k, value in enumerate(evaluate(probe, batch)):
            value = np.abs(np.asarray(value, np.float32)).ravel()
            if not np.isfinite(value).all():
                raise ValueError(
                    f"quantize: calibration batch {count} makes {_site_name(sites[k])} NaN or "
                    "inf (the float network overflows on it); calibrate on data it "
                    "computes finitely"
                )
            samples[k].append(value)
        count += 1
    if not count:
        raise ValueError("quantize: the calibration dataset is empty")
    rng = np.random.default_rng(0)
    scales = {}
    for site, chunks in zip(sites, samples):
        values = np.concatenate(chunks)
        if values.size > _MAX_SAMPLES:
            values = rng.choice(values, _MAX_SAMPLES, replace=False)
        threshold = kl_divergence_threshold(values)
        if threshold <= 0:
            logger.warning(
                "quantize: the calibration data make %s all zero; its scale "
                "falls back to 1/128 (the range [-1, 1])",
                _site_name(site),
            )
        scales[site] = power2_scale(threshold)
    return scales


def _site_name(site: gir.Expr) -> str:
    """A calibration site as a user can find it: an input by name, else the op computing it."""
    if isinstance(site, gir.Var):
        return f"the network input {site.name!r}"
    return f"the output of {getattr(site, 'op', type(site).__name__)} {tuple(site.shape)}"


def kl_divergence_threshold(
    abs_values: np.ndarray, num_bins: int = 2048, num_quantized_bins: int = 128
) -> float:
    """The clipping threshold of ``|x|`` that minimises KL(P || Q), P the histogram clipped at
    the threshold (outliers in the last bin), Q its ``num_quantized_bins``-level quantization
    (TensorRT's int8 calibration, as relay's ``kl_divergence`` mode)."""
    values = np.asarray(abs_values, np.float64)
    top = float(values.max()) if values.size else 0.0
    if top <= 0:
        return 0.0
    hist, edges = np.histogram(values, bins=num_bins, range=(0.0, top))
    hist = hist.astype(np.float64)
    best, best_i = np.inf, num_bins
    for i in range(num_quantized_bins, num_bins + 1, max(1, num_bins // 256)):
        p = hist[:i].copy()
        p[-1] += hist[i:].sum()
        nonzero = p > 0
        # Merge the i bins into num_quantized_bins levels, then spread each level's mass over
        # its nonzero source bins.
        idx = (np.arange(i) * num_quantized_bins) // i
        merged = np.bincount(idx, weights=hist[:i], minlength=num_quantized_bins)
        width = np.bincount(idx, weights=nonzero, minlength=num_quantized_bins)
        q = np.where(nonzero, merged[idx] / np.maximum(width[idx], 1), 0.0)
        ps, qs = p.sum(), q.sum()
        if ps <= 0 or qs <= 0:
            continue
        p, q = p / ps, q / qs
        mask = p > 0
        kl = float(np.sum(p[mask] * np.log(p[mask] / np.maximum(q[mask], 1e-12))))
        if kl < best:
            best, best_i = kl, i
    return float(edges[min(best_i, num_bins)])
