"""The model zoo: shapes, parameter counts, names, weights, and whole-network evaluation.

Evaluating the big networks takes seconds each; those tests are marked slow
(run them with ``-m slow``).
"""

import collections

import numpy as np
import pytest

from tensorir.graph import Module, calls, evaluate
from tensorir.graph.zoo import NETWORKS, get_network

# Published parameter counts (weights + biases; our counts add BN's 4 vectors per layer,
# well inside the 5%):
#   resnet-18/34/50/101/152: He et al. 2016 / torchvision (11.69M, 21.80M, 25.56M, 44.55M,
#   60.19M); mobilenet v1 1.0-224: Howard et al. 2017, Table 4 (4.2M); squeezenet 1.1:
#   torchvision (1.235M); inception v3 without the aux head: torchvision / Keras (23.85M);
#   3-D resnet-18: Hara et al. 2018, Table 1 (33.2M).
PARAM_COUNTS = {
    "resnet-18": 11.69e6,
    "resnet-34": 21.80e6,
    "resnet-50": 25.56e6,
    "resnet-101": 44.55e6,
    "resnet-152": 60.19e6,
    "mobilenet": 4.2e6,
    "squeezenet_v1.1": 1.235e6,
    "inception_v3": 23.85e6,
    "resnet3d-18": 33.2e6,
}
SLOW_BUILD = {"resnet-101", "resnet-152", "resnet3d-18"}


@pytest.fixture(autouse=True)
def _skip_slow_unless_asked(request):
    # The project has no global slow switch; here slow tests run only under `-m slow`.
    if request.node.get_closest_marker("slow") and "slow" not in request.config.option.markexpr:
        pytest.skip("slow: run with -m slow")


def layout_for(name):
    return "NCHW" if name.startswith("squeezenet") else "NHWC"


def build_cases():
    for name in PARAM_COUNTS:
        marks = [pytest.mark.slow] if name in SLOW_BUILD else []
        yield pytest.param(name, marks=marks, id=name)


@pytest.mark.parametrize("name", list(build_cases()))
def test_network_builds_with_expected_shapes_and_param_count(name):
    layout = layout_for(name)
    mod, params, input_shape, output_shape = get_network(name, batch_size=1, layout=layout)
    func = mod["main"]
    assert isinstance(mod, Module)
    assert output_shape == (1, 1000) and func.body.shape == output_shape
    assert func.params[0].name == "data" and func.params[0].shape == input_shape
    side = {"inception_v3": 299}.get(name, 224)
    if name.startswith("resnet3d"):
        assert input_shape == (1, 16, 112, 112, 3)
    elif layout == "NHWC":
        assert input_shape == (1, side, side, 3)
    else:
        assert input_shape == (1, 3, side, side)
    # every weight has a value of its Var's shape and dtype, and nothing else is in params
    weights = func.params[1:]
    assert sorted(v.name for v in weights) == sorted(params)
    for v in weights:
        assert params[v.name].shape == v.shape and params[v.name].dtype == np.dtype(v.dtype)
    total = sum(a.size for a in params.values())
    assert abs(total - PARAM_COUNTS[name]) / PARAM_COUNTS[name] < 0.05, total
    assert func.body.op == "nn.softmax"


def test_resnet18_structure_matches_relay_testing():
    mod, params, _, _ = get_network("resnet-18", layout="NHWC")
    ops = collections.Counter(c.op for c in calls(mod["main"]))
    # conv0 + 2 convs in each of 8 units + a 1x1 shortcut conv opening each of 4 stages
    assert ops["nn.conv2d"] == 1 + 8 * 2 + 4
    # bn_data, bn0, 2 per unit, bn1
    assert ops["nn.batch_norm"] == 2 + 8 * 2 + 1
    assert ops["add"] == 8 and ops["nn.max_pool2d"] == 1 and ops["nn.dense"] == 1
    for name in ("conv0_weight", "bn_data_gamma", "stage1_unit1_bn1_gamma",
                 "stage1_unit1_sc_weight", "stage4_unit2_conv2_weight", "bn1_moving_var",
                 "fc1_weight", "fc1_bias"):  # fmt: skip
        assert name in params
    assert params["conv0_weight"].shape == (7, 7, 3, 64)  # HWIO
    assert params["stage2_unit1_sc_weight"].shape == (1, 1, 64, 128)
    convs = [c for c in calls(mod["main"]) if c.op == "nn.conv2d"]
    assert {c.attrs["data_layout"] for c in convs} == {"NHWC"}
    assert {c.attrs["kernel_layout"] for c in convs} == {"HWIO"}
    bns = [c for c in calls(mod["main"]) if c.op == "nn.batch_norm"]
    assert {c.attrs["axis"] for c in bns} == {3} and bns[0].attrs["scale"] is False


def test_mobilenet_depthwise_layouts():
    for layout, klayout, wshape in (
        ("NHWC", "HWOI", (3, 3, 32, 1)),
        ("NCHW", "OIHW", (32, 1, 3, 3)),
    ):
        mod, params, _, _ = get_network("mobilenet", layout=layout)
        dw = [c for c in calls(mod["main"]) if c.op == "nn.conv2d" and c.attrs["groups"] > 1]
        assert len(dw) == 13
        assert {c.attrs["kernel_layout"] for c in dw} == {klayout}
        assert params["separable_conv_block_1_weight"].shape == wshape


def test_printed_network_has_relay_lines():
    mod, _, _, _ = get_network("resnet-18", layout="NHWC")
    text = str(mod["main"])
    assert (
        ", %conv0_weight, strides=[2, 2], padding=[3, 3, 3, 3], channels=64, "
        'kernel_size=[7, 7], data_layout="NHWC", kernel_layout="HWIO") '
        "/* ty=Tensor[(1, 112, 112, 64), float32] */"
    ) in text
    assert text.startswith("fn (%data: Tensor[(1, 224, 224, 3), float32], %bn_data_gamma")
    assert "nn.softmax(" in text.splitlines()[-3]


def test_weights_are_deterministic_random_and_sane():
    _, p0, _, _ = get_network("squeezenet_v1.1", layout="NCHW")
    _, p1, _, _ = get_network("squeezenet_v1.1", layout="NCHW")
    _, p2, _, _ = get_network("squeezenet_v1.1", layout="NCHW", seed=1)
    for k in p0:
        np.testing.assert_array_equal(p0[k], p1[k])
        assert not np.array_equal(p0[k], p2[k])
        assert np.all(p0[k] != 0) and not np.allclose(p0[k], 1.0)
    _, p, _, _ = get_network("resnet-18", layout="NCHW")
    assert all(np.all(v > 0) for k, v in p.items() if k.endswith("_moving_var"))
    assert all(np.all(v != 0) for v in p.values())
    w = p["stage3_unit1_conv1_weight"]  # He init: std ~ sqrt(2 / fan_in)
    assert 0.8 < w.std() / np.sqrt(2.0 / (w.shape[1] * 9)) < 1.2


def test_batch_size_and_layout_errors():
    _, _, ishape, oshape = get_network("mobilenet", batch_size=3, layout="NCHW")
    assert ishape == (3, 3, 224, 224) and oshape == (3, 1000)
    _, _, ishape, _ = get_network("resnet3d-18", layout="NCHW")
    assert ishape == (1, 3, 16, 112, 112)
    with pytest.raises(ValueError, match="squeezenet_v1.1 only supports NCHW"):
        get_network("squeezenet_v1.1", layout="NHWC")
    with pytest.raises(ValueError, match="unknown network 'resnet-19'.*resnet-18.*mobilenet"):
        get_network("resnet-19")
    with pytest.raises(ValueError, match="layout must be"):
        get_network("resnet-18", layout="HWCN")
    assert "inception_v3" in NETWORKS and "squeezenet_v1.1" in NETWORKS


def check_softmax_output(out, batch):
    assert out.shape == (batch, 1000) and np.all(np.isfinite(out))
    np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=1e-4)
    assert np.all(out >= 0)
    # non-degenerate: the classes differ, and no single class takes everything
    assert out.std(axis=1).min() > 1e-5 and out.max() < 0.999


def run_network(name, layout, batch=1, seed=0):
    mod, params, ishape, _ = get_network(name, batch_size=batch, layout=layout)
    x = np.random.default_rng(seed).standard_normal(ishape).astype("float32")
    return evaluate(mod, {"data": x}, params), x


@pytest.mark.parametrize("name", ["resnet-18", "mobilenet", "squeezenet_v1.1"])
def test_cheap_networks_evaluate(name):
    out, _ = run_network(name, layout_for(name))
    check_softmax_output(out, 1)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, batch",
    [("resnet-50", 1), ("resnet-34", 2), ("resnet-152", 1), ("inception_v3", 1),
     ("resnet3d-18", 1), ("mobilenet", 4)],
)  # fmt: skip
def test_big_networks_evaluate(name, batch):
    out, _ = run_network(name, layout_for(name), batch)
    check_softmax_output(out, batch)


def to_nhwc_params(nchw_params):
    out = {}
    for k, v in nchw_params.items():
        out[k] = v.transpose(2, 3, 1, 0) if v.ndim == 4 else v  # OIHW -> HWIO
    return out


def test_resnet18_nhwc_equals_nchw():
    mod_c, params_c, ishape, _ = get_network("resnet-18", layout="NCHW")
    mod_h, params_h, _, _ = get_network("resnet-18", layout="NHWC")
    # the NHWC weights are the NCHW ones transposed (same names, same numbers)
    for k, v in to_nhwc_params(params_c).items():
        np.testing.assert_array_equal(params_h[k], v)
    x = np.random.default_rng(5).standard_normal(ishape).astype("float32")
    # evaluate the NHWC net on weights transposed here, not on its own, to cross-check layouts
    out_c = evaluate(mod_c, {"data": x}, params_c)
    out_h = evaluate(mod_h, {"data": x.transpose(0, 2, 3, 1)}, to_nhwc_params(params_c))
    np.testing.assert_allclose(out_h, out_c, rtol=1e-3, atol=1e-6)
    assert np.abs(out_c - out_c.mean()).max() > 1e-4


def test_mobilenet_nhwc_equals_nchw():
    mod_c, params_c, ishape, _ = get_network("mobilenet", layout="NCHW")
    mod_h, params_h, _, _ = get_network("mobilenet", layout="NHWC")
    x = np.random.default_rng(6).standard_normal(ishape).astype("float32")
    out_c = evaluate(mod_c, {"data": x}, params_c)
    out_h = evaluate(mod_h, {"data": x.transpose(0, 2, 3, 1)}, params_h)
    np.testing.assert_allclose(out_h, out_c, rtol=1e-3, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["inception_v3", "resnet3d-18"])
def test_big_networks_nhwc_equals_nchw(name):
    mod_c, params_c, ishape, _ = get_network(name, layout="NCHW")
    mod_h, params_h, _, _ = get_network(name, layout="NHWC")
    x = np.random.default_rng(7).standard_normal(ishape).astype("float32")
    out_c = evaluate(mod_c, {"data": x}, params_c)
    out_h = evaluate(mod_h, {"data": np.moveaxis(x, 1, -1)}, params_h)
    np.testing.assert_allclose(out_h, out_c, rtol=1e-3, atol=1e-6)
