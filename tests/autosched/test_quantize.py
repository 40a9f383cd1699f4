"""autosched.quantize: qconfig, the int8 rewrite (its numbers equal tensorir.ops.quantized's
integer references step by step), calibration, and quantized resnet-18 built, run and agreeing
with the float network."""

import random
import warnings

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

import autosched as ansor
from autosched import quantize as aq
from autosched.search.annotate import sample_init_population
from autosched.search.sketch import generate_sketches
from codegen.llvm_dot import dot_product_width
from runtime.cpu import host_cpu_features
from tensorir.graph import ir as gir
from tensorir.graph import nn, op
from tensorir.graph.passes import fold_scale_axis, optimize
from tensorir.graph.passes.quantize import power2_scale
from tensorir.graph.reference import evaluate
from tensorir.graph.zoo import NetBuilder, resnet
from tensorir.interp import eval_dag
from tensorir.ops import quantized as q


def tiny_net():
    """conv -> bias -> relu -> conv -> + residual -> * per-channel scale -> global pool ->
    dense -> bias (NCHW)."""
    rng = np.random.default_rng(3)
    data = op.var("data", (2, 4, 8, 8))
    w1 = rng.normal(0, 0.1, (8, 4, 3, 3)).astype("float32")
    w2 = rng.normal(0, 0.1, (8, 8, 3, 3)).astype("float32")
    b1 = rng.normal(0, 0.5, (8,)).astype("float32")
    wd = rng.normal(0, 0.3, (10, 8)).astype("float32")
    bd = rng.normal(0, 0.1, (10,)).astype("float32")
    c1 = nn.relu(nn.bias_add(nn.conv2d(data, op.const(w1), padding=1), op.const(b1)))
    cs = rng.normal(0, 1, (8, 1, 1)).astype("float32")  # mixed signs: it cannot fold away
    c2 = op.multiply(op.add(nn.conv2d(c1, op.const(w2), padding=1), c1), op.const(cs))
    pooled = nn.batch_flatten(nn.global_avg_pool2d(c2))
    out = nn.bias_add(nn.dense(pooled, op.const(wd)), op.const(bd))
    func = gir.Function((data,), out)
    x = rng.normal(0, 1.0, (2, 4, 8, 8)).astype("float32")
    return func, (w1, b1, w2, cs, wd, bd), x


def test_quantized_graph_equals_the_integer_reference_step_by_step():
    func, (w1, b1, w2, cs, wd, bd), x = tiny_net()
    cfg = aq.QConfig(global_scale=4.0, skip_conv_layers=[], skip_dense_layer=False)
    qmod = aq.quantize(func, config=cfg)
    got = evaluate(qmod, {"data": x})

    s_a = 4.0 / 128  # every activation: global_scale / 128

    def weight(w):
        s = power2_scale(float(np.abs(w).max()))
        return q.quantize_ref(w, s), s

    def shift(to, frm):
        return int(round(np.log2(to / frm)))

    (w1q, s1), (w2q, s2), (csq, sc), (wdq, sd) = weight(w1), weight(w2), weight(cs), weight(wd)
    acc1 = q.conv2d_int8_ref(q.quantize_ref(x, s_a), w1q, padding=1)
    acc1 = np.maximum(acc1 + np.floor(b1 / (s_a * s1) + 0.5).astype(np.int32)[:, None, None], 0)
    a1 = q.requantize_ref(acc1, shift(s_a, s_a * s1))
    acc2 = q.conv2d_int8_ref(a1, w2q, padding=1)
    # The residual sum is taken at the coarser of the two scales (a rounding right shift).
    coarse = max(s_a * s1, s_a * s2)
    res = q.requantize_ref(acc2, shift(coarse, s_a * s2), "int32") + q.requantize_ref(
        acc1, shift(coarse, s_a * s1), "int32"
    )
    # The per-channel scale: the value at 16 bits (256 times finer than an activation) times
    # the int8 constant.
    s16 = s_a / 256
    prod = q.requantize_ref(res, shift(s16, coarse), "int16").astype(np.int32) * csq
    pooled = q.dequantize_ref(prod, s16 * sc).mean(axis=(2, 3))
    accd = q.dense_int8_ref(q.quantize_ref(pooled, s_a), wdq)
    accd = accd + np.floor(bd / (s_a * sd) + 0.5).astype(np.int32)
    want = q.dequantize_ref(accd, s_a * sd)
    np.testing.assert_array_equal(got, want)
    float_out = evaluate(func, {"data": x})
    assert np.abs(got - float_out).max() < 0.1 * np.abs(float_out).max()  # and close to float


def test_rewrite_makes_int8_layers_with_int32_accumulation():
    func, _, _ = tiny_net()
    for skip, n_float in (([0], 1), ([], 0)):
        cfg = aq.QConfig(skip_conv_layers=skip, skip_dense_layer=False)
        qfunc = aq.quantize(func, config=cfg)["main"]
        anchors = [c for c in gir.calls(qfunc) if c.op in ("nn.conv2d", "nn.dense")]
        quant = [c for c in anchors if c.dtype == "int32"]
        assert len(anchors) == 3 and len(anchors) - len(quant) == n_float
        for c in quant:
            assert c.args[0].dtype in ("int8", "uint8") and c.args[1].dtype == "int8"
            assert c.attrs["out_dtype"] == "int32" and isinstance(c.args[1], gir.Constant)
        # conv2 reads relu(conv1): non-negative, so uint8 (the operand vpdpbusd wants).
        assert quant[-2 if not skip else 0].args[0].dtype == "uint8"
        ops = {c.op for c in gir.calls(qfunc)}
        assert {"clip", "cast", "floor"} <= ops  # quantize at the first int8 layer's input
        assert ("right_shift" in ops) == (not skip)  # requantize between int8 layers
        assert qfunc.body.dtype == "float32" and qfunc.params[0].dtype == "float32"
    # relay's default keeps the classifier float.
    qfunc = aq.quantize(func)["main"]
    assert [c.dtype for c in gir.calls(qfunc) if c.op == "nn.dense"] == ["float32"]


def test_qconfig_is_a_nested_context_and_quantize_accepts_it_positionally():
    assert aq.current_qconfig() == aq.QConfig()
    with aq.qconfig(global_scale=2.0, skip_conv_layers=[0, 1]) as outer:
        assert aq.current_qconfig() is outer and outer.skip_conv_layers == (0, 1)
        with aq.qconfig(calibrate_mode="kl_divergence") as inner:
            assert inner.global_scale == 2.0 and aq.current_qconfig() is inner
        assert aq.current_qconfig() is outer
    assert aq.current_qconfig() == aq.QConfig()
    func, _, x = tiny_net()
    cfg = aq.qconfig(global_scale=4.0, skip_conv_layers=[])
    with cfg:
        by_context = evaluate(aq.quantize(func), {"data": x})
    np.testing.assert_array_equal(by_context, evaluate(aq.quantize(func, None, cfg), {"data": x}))


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"nbit_input": 4}, r"qconfig: nbit_input=4 is not supported; use 8"),
        ({"calibrate_mode": "percentile"}, r"qconfig: calibrate_mode='percentile'; use one of"),
        ({"global_scale": 0.0}, r"qconfig: global_scale=0.0 must be a positive finite number"),
    ],
)
def test_bad_qconfig_is_one_line(kwargs, match):
    with pytest.raises(ValueError, match=match):
        aq.qconfig(**kwargs)


def test_kl_divergence_needs_a_dataset_and_clips_outliers():
    func, _, x = tiny_net()
    with aq.qconfig(calibrate_mode="kl_divergence"), pytest.raises(ValueError, match="dataset"):
        aq.quantize(func)
    rng = np.random.default_rng(0)
    values = np.abs(np.concatenate([rng.normal(0, 1, 100_000), [400.0]]))
    threshold = aq.kl_divergence_threshold(values)
    assert 2.0 < threshold < 50.0  # well inside the max (400), well outside the bulk
    with aq.qconfig(calibrate_mode="kl_divergence", skip_conv_layers=[]):
        qmod = aq.quantize(func, dataset=[{"data": x}, {"data": x * 0.5}])
    got, want = evaluate(qmod, {"data": x}), evaluate(func, {"data": x})
    assert np.abs(got - want).max() < 0.1 * np.abs(want).max()


def _resnet18(batch: int, seed: int = 0):
    b = NetBuilder("NCHW", "float32")
    out = resnet(b, (batch, 3, 32, 32), 18)
    return gir.Function(tuple(gir.free_vars(out)), out), b.params(seed)


def smoothed_noise(n: int, seed: int = 0) -> np.ndarray:
    """Natural-image-like inputs: white noise blurred three times by a 5-tap binomial filter
    (a spectrum falling with frequency), each image normalised to unit variance."""
    x = np.random.default_rng(seed).normal(0, 1, (n, 3, 32, 32))
    k = np.array([1, 4, 6, 4, 1], float) / 16
    for _ in range(3):
        for ax in (2, 3):
            pad = [(0, 0)] * 4
            pad[ax] = (2, 2)
            win = sliding_window_view(np.pad(x, pad, mode="reflect"), 5, axis=ax)
            x = np.tensordot(win, k, axes=([-1], [0]))
    return (x / x.std(axis=(1, 2, 3), keepdims=True)).astype("float32")


def test_quantized_resnet18_builds_and_runs_on_llvm():
    func, params = _resnet18(1)
    qmod = aq.quantize(func, params, config=aq.QConfig(skip_conv_layers=[0]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no tuning log: every kernel's default schedule
        lib = ansor.build(qmod, target="llvm")
    dev = ansor.device("cpu", 0)
    module = ansor.GraphModule(lib["default"](dev))
    x = smoothed_noise(1, seed=7)
    module.set_input("data", x)
    module.run()
    got = module.get_output(0).numpy()
    # conv0 stays float, so its sums may round differently from numpy's by an ulp.
    np.testing.assert_allclose(got, evaluate(qmod, {"data": x}), rtol=1e-4, atol=1e-6)
    int8_kernels = [n for n in lib.plan.names if "right_shift" in n]
    assert len(int8_kernels) >= 15, lib.plan.names
    if dot_product_width(host_cpu_features()):
        # relu outputs are uint8, so the int8 convs' reductions run on vpdpbusd (VNNI).
        assert lib.get_source().count('@"llvm.x86.avx512.vpdpbusd') >= 15


@pytest.mark.slow
def test_quantized_resnet18_top1_agrees_with_float_on_90_percent():
    # Weights of seed 1: the float network's top-1 varies with the input (6 classes, none
    # on more than half the inputs), so agreement is not won by a constant answer.
    func, params = _resnet18(50, seed=1)
    x = smoothed_noise(50)
    float_top1 = evaluate(func, {"data": x}, params).argmax(axis=1)
    with aq.qconfig(nbit_input=8, nbit_weight=8, global_scale=8.0, skip_conv_layers=[0]):
        qmod = aq.quantize(func, params)
    quant_top1 = evaluate(qmod, {"data": x}).argmax(axis=1)
    assert np.unique(float_top1, return_counts=True)[1].max() <= 25
    agree = int((float_top1 == quant_top1).sum())
    assert agree >= 45, f"top-1 agrees on {agree}/50"


def test_integer_convs_are_not_folded_or_made_winograd():
    # optimize runs again when a quantized network is partitioned: NHWC 3x3 int8 convs must
    # stay direct (winograd's transforms are fractional) and integer scales must stay put.
    func, params = _resnet18(1)
    qmod = aq.quantize(func, params)
    again = optimize(qmod["main"], {}, layout="NHWC", use_winograd=True, device_kind="gpu")
    calls = gir.calls(again)
    assert all(c.dtype == "float32" for c in calls if "winograd" in c.op)  # conv0 (skipped)
    convs = [c for c in calls if c.op == "nn.conv2d" and c.dtype == "int32"]
    # 21 convs (the stem, 16 in the units, 4 shortcuts): all but the skipped stem are int8.
    assert len(convs) == 20 and all(c.args[1].dtype == "int8" for c in convs)
    multiplies = [c for c in calls if c.op == "multiply" and c.dtype == "int32"]
    assert multiplies  # the unfolded batch-norm scales stay integer multiplies


def test_integer_multiply_after_an_int8_conv_is_not_folded_into_its_weight():
    data = op.var("data", (1, 4, 6, 6), "int8")
    w = op.const(np.random.default_rng(0).integers(-127, 128, (8, 4, 3, 3)), "int8")
    conv = nn.conv2d(data, w, padding=1, out_dtype="int32")
    scale = op.const(np.arange(1, 9).reshape(8, 1, 1), "int32")
    func = gir.Function((data,), op.multiply(conv, scale))
    folded = fold_scale_axis(func)
    assert folded.body.op == "multiply" and folded.body.args[0].args[1] is w


def test_quantized_resnet18_partitions_into_int8_tasks_the_search_can_schedule():
    func, params = _resnet18(1)
    qmod = aq.quantize(func, params)
    tasks, weights = ansor.extract_tasks(qmod, target="llvm")
    int8_tasks = [t for t in tasks if "conv2d" in t.desc and "right_shift" in t.desc]
    assert len(int8_tasks) >= 8 and sum(weights) >= 20
    assert all(t.compute_dag.input_tensors[1].dtype == "int8" for t in int8_tasks)
    task = int8_tasks[0]
    states = sample_init_population(task, generate_sketches(task), 4, random.Random(0))
    assert states
    args = [
        np.random.default_rng(k).integers(-127, 128, t.shape).astype(t.dtype)
        if t.dtype.startswith("int")
        else np.random.default_rng(k).normal(0, 1, t.shape).astype(t.dtype)
        for k, t in enumerate(task.compute_dag.input_tensors)
    ]
    out = [np.zeros(t.shape, t.dtype) for t in task.compute_dag.output_tensors]
    ansor.build(states[0], target="llvm")(*args, *out)
    for g, w in zip(out, eval_dag(task.compute_dag, args)):
        np.testing.assert_array_equal(g, w)


def _two_convs(weight_scale: float, bias: bool = False):
    rng = np.random.default_rng(11)
    data = op.var("data", (1, 4, 6, 6))
    w1 = (rng.normal(0, 0.1, (8, 4, 3, 3)) * weight_scale).astype("float32")
    w2 = (rng.normal(0, 0.1, (8, 8, 3, 3)) * weight_scale).astype("float32")
    c1 = nn.conv2d(data, op.const(w1, name="w1"), padding=1)
    if bias:
        c1 = nn.bias_add(c1, op.const(rng.normal(0, 0.5, (8,)).astype("float32"), name="b1"))
    c2 = nn.conv2d(nn.relu(c1), op.const(w2, name="w2"), padding=1)
    return gir.Function((data,), c2), rng.normal(0, 1, (1, 4, 6, 6)).astype("float32")


def _run_compiled(qmod, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lib = ansor.build(qmod, target="llvm")
    module = ansor.GraphModule(lib["default"](ansor.device("cpu", 0)))
    module.set_input("data", x)
    module.run()
    return module.get_output(0).numpy()


@pytest.mark.parametrize("weight_scale", [1e9, 1e12, 1e15, 1e-9])
def test_extreme_weight_scales_compile_to_the_exact_int8_network(weight_scale):
    # The requantize between the convs shifts left by 23 to 43 bits (1e9 .. 1e15: int32
    # wrapped, and 32 bits or more is undefined in LLVM but 0 in numpy) or right by 38 (1e-9:
    # its rounding constant did not fit int32). The exact answer, in Python-sized integers:
    func, x = _two_convs(weight_scale)
    qmod = aq.quantize(func, config=aq.QConfig(skip_conv_layers=[]))
    w1, w2 = func.body.args[0].args[0].args[1].value, func.body.args[1].value
    s_a, (s1, s2) = 8.0 / 128, (power2_scale(float(np.abs(w).max())) for w in (w1, w2))
    acc1 = q.conv2d_int8_ref(q.quantize_ref(x, s_a), q.quantize_ref(w1, s1), padding=1)
    a1 = np.clip(np.floor(np.maximum(acc1, 0) * s1 + 0.5), 0, 127).astype("uint8")  # exact
    acc2 = q.conv2d_int8_ref(a1, q.quantize_ref(w2, s2), padding=1)
    want = q.dequantize_ref(acc2, s_a * s2)
    np.testing.assert_array_equal(evaluate(qmod, {"data": x}), want)
    np.testing.assert_array_equal(_run_compiled(qmod, x), want)
    if weight_scale < 1:  # every activation of conv1 rounds to 0 at the int8 scale
        assert not want.any() and np.abs(evaluate(func, {"data": x})).max() < 1e-6


def test_a_bias_too_large_for_int32_at_the_weights_scale_is_refused():
    func, _ = _two_convs(1e-9, bias=True)
    with pytest.raises(ValueError, match=r"quantize: the constant 'b1' \(1, 8, 1, 1\) of add "
                       r"needs more than 30 bits"):  # fmt: skip
        aq.quantize(func, config=aq.QConfig(skip_conv_layers=[]))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_weights_are_refused_at_quantize_time(bad):
    func, _ = _two_convs(1.0)
    w2 = func.body.args[1].value.copy()
    w2[3, 1, 0, 2] = bad
    func = gir.Function(func.params, nn.conv2d(func.body.args[0], op.const(w2, name="w2")))
    match = r"the constant 'w2' \(8, 8, 3, 3\) of nn.conv2d holds 1 NaN/inf value\(s\) "
    match += r"\(first at \(3, 1, 0, 2\)"
    with pytest.raises(ValueError, match="quantize: " + match):
        aq.quantize(func, config=aq.QConfig(skip_conv_layers=[]))


def test_non_finite_inputs_quantize_as_documented_in_compiled_code_and_reference():
    # int8 has no NaN: NaN quantizes to +127 (clip's ordered compares), +-inf to +-127, the
    # same in compiled code and in the reference (docs/quantize.md).
    func, x = _two_convs(1.0)
    qmod = aq.quantize(func, config=aq.QConfig(skip_conv_layers=[]))
    x[0, :, 2, 2] = np.nan
    x[0, 1, 4, 4], x[0, 2, 1, 1] = np.inf, -np.inf
    want = evaluate(qmod, {"data": x})
    np.testing.assert_array_equal(_run_compiled(qmod, x), want)
    as_max = x.copy()
    as_max[0, :, 2, 2] = 1e30
    np.testing.assert_array_equal(want, evaluate(qmod, {"data": as_max}))


@pytest.mark.parametrize("value", [float("inf"), float("nan"), -1.0])
def test_global_scale_must_be_finite_and_positive(value):
    with pytest.raises(ValueError, match=r"qconfig: global_scale=.* must be a positive finite"):
        aq.qconfig(global_scale=value)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_calibration_data_name_the_batch_and_input(bad):
    func, x = _two_convs(1.0)
    y = x.copy()
    y[0, 0, 0, 0] = bad
    with (
        aq.qconfig(calibrate_mode="kl_divergence", skip_conv_layers=[]),
        pytest.raises(ValueError, match=r"calibration batch 1, input 'data' holds NaN"),
    ):
        aq.quantize(func, dataset=[{"data": x}, {"data": y}])


def test_all_zero_calibration_data_warn_and_fall_back_to_unit_range(caplog):
    func, x = _two_convs(1.0)
    with (
        aq.qconfig(calibrate_mode="kl_divergence", skip_conv_layers=[]),
        caplog.at_level("WARNING", "autosched.quantize"),
    ):
        zero = aq.quantize(func, dataset=[{"data": np.zeros_like(x)}])
    assert "make the network input 'data' all zero; its scale falls back to 1/128" in caplog.text
    unit = aq.quantize(func, config=aq.QConfig(global_scale=1.0, skip_conv_layers=[]))
    np.testing.assert_array_equal(evaluate(zero, {"data": x}), evaluate(unit, {"data": x}))
