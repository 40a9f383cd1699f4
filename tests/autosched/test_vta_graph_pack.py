"""vta.top.graph_pack on a small int8 network: same values, packed convolutions in the region."""

import numpy as np
import pytest

from autosched import vta
from tensorir.graph import Function, nn, op
from tensorir.graph.ir import calls
from tensorir.graph.reference import evaluate

ENV = vta.get_env()


def _int8_net():
    x = op.var("data", (1, 16, 10, 10), "int8")
    w0 = op.var("w0", (32, 16, 3, 3), "int8")
    w1 = op.var("w1", (32, 32, 3, 3), "int8")
    b1 = op.var("b1", (32, 1, 1), "int32")
    w2 = op.var("w2", (48, 32, 1, 1), "int8")

    def requant(y):
        return op.cast(op.clip(y, -127.0, 127.0), "int8")

    y = requant(nn.conv2d(x, w0, padding=1, out_dtype="int32"))
    y = nn.max_pool2d(y, pool_size=2, strides=2)
    z = nn.relu(op.add(nn.conv2d(y, w1, padding=1, out_dtype="int32"), b1))
    z = requant(op.multiply(z, 3))
    r = op.add(nn.conv2d(z, w2, strides=2, out_dtype="int32"), 7)
    out = nn.global_avg_pool2d(op.cast(requant(r), "float32"))
    return Function((x, w0, w1, b1, w2), out)


def _values(func, rng):
    out = {}
    for p in func.params:
        hi = 1000 if p.dtype == "int32" else 128
        out[p.name] = rng.integers(-hi, hi, p.shape).astype(p.dtype)
    return out


def test_graph_pack_round_trip_is_bit_exact_and_packs_the_region():
    func = _int8_net()
    packed = vta.top.graph_pack(func, ENV.BATCH, ENV.BLOCK_OUT, ENV.WGT_WIDTH,
                                "nn.max_pool2d", "nn.global_avg_pool2d")  # fmt: skip
    convs = [c for c in calls(packed) if c.op == "nn.conv2d"]
    assert [c.attrs["data_layout"] for c in convs] == ["NCHW", "NCHW1n16c", "NCHW1n16c"]
    assert [c.attrs["kernel_layout"] for c in convs] == ["OIHW", "OIHW16o16i", "OIHW16o16i"]
    assert convs[1].args[0].shape == (1, 2, 5, 5, 1, 16)
    assert convs[2].shape == (1, 3, 3, 3, 1, 16)
    transforms = [c.attrs["src_layout"] + "->" + c.attrs["dst_layout"]
                  for c in calls(packed) if c.op == "layout_transform"]  # fmt: skip
    # data in, two weights, the bias, data out
    assert transforms.count("NCHW->NCHW1n16c") == 2 and transforms[-1] == "NCHW1n16c->NCHW"
    assert transforms.count("OIHW->OIHW16o16i") == 2
    values = _values(func, np.random.default_rng(3))
    want, got = evaluate(func, values), evaluate(packed, values)
    assert want.std() > 0
    np.testing.assert_array_equal(got, want)


def test_graph_pack_errors_name_the_missing_op():
    func = _int8_net()
    with pytest.raises(ValueError, match="no 'nn.avg_pool2d' call in the network"):
        vta.top.graph_pack(func, 1, 16, 8, "nn.avg_pool2d", "nn.global_avg_pool2d")
    with pytest.raises(ValueError, match="no 'nn.dense' call after the first 'nn.max_pool2d'"):
        vta.top.graph_pack(func, 1, 16, 8, "nn.max_pool2d", "nn.dense")


def test_extract_from_program_finds_the_packed_conv2d_tasks():
    from autosched import autotvm

    packed = vta.top.graph_pack(_int8_net(), 1, 16, 8, "nn.max_pool2d", "nn.global_avg_pool2d")
    tasks = autotvm.task.extract_from_program(packed, ops=("nn.conv2d",), target=ENV.target)
    assert [t.name for t in tasks] == ["conv2d_packed.vta"] * 2
    assert tasks[0].args[0] == ("TENSOR", (1, 2, 5, 5, 1, 16), "int8")
    assert tasks[1].args[2] == (2, 2) and tasks[1].args[5] == "NCHW1n16c"
    result = vta.SimulatorRunner(check_correctness=True).run(
        tasks[1], [tasks[1].config_space.get(0)]
    )
    assert result[0].error_no == 0, result[0].error_msg


def test_packed_network_runs_its_convolutions_on_the_simulator():
    import warnings

    func = _int8_net()
    packed = vta.top.graph_pack(func, 1, 16, 8, "nn.max_pool2d", "nn.global_avg_pool2d")
    values = _values(func, np.random.default_rng(4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # untuned workloads take the fallback config
        module = vta.build(packed, params={k: v for k, v in values.items() if k != "data"})
    assert len(module.kernels) == 2  # the two packed convolutions
    module.set_input("data", values["data"])
    module.run()
    np.testing.assert_array_equal(module.get_output(0), evaluate(func, values))
    stats = module.stats
    # conv1: 5x5 out, 2x2 blocks, 3x3 kernel; conv2: 3x3 out, 3x2 blocks, 1x1
    assert stats["gemm_counter"] == 25 * 4 * 9 + 9 * 6
    assert stats["out_store_nbytes"] == 4 * (25 * 32 + 9 * 48)  # int32 as four byte planes
    assert module.simulated_seconds() == stats["cycles"] / 100e6
