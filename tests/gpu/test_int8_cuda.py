"""int8 on CUDA: conv2d (NCHW, NHWC) and dense with int32 accumulation and a fused requantize,
under schedules the GPU sketches sample, equal bit for bit to tensorir.ops.quantized's integer
references; quantized resnet-18 built for CUDA agrees with the numpy evaluation of its graph."""

import random
import warnings

import numpy as np
import pytest

import autosched as ansor
from autosched import quantize as aq
from autosched.hardware import HardwareParams
from autosched.network.build import build_network
from autosched.search.annotate import sample_init_population
from autosched.search.sketch import generate_sketches
from autosched.task import SearchTask
from runtime import device
from tensorir import ops
from tensorir.graph import evaluate
from tensorir.graph import ir as gir
from tensorir.graph.zoo import NetBuilder, resnet
from tensorir.ops import quantized as q

from .conftest import CUDA_REASON

pytestmark = pytest.mark.skipif(bool(CUDA_REASON), reason=CUDA_REASON or "")

SHIFT = 7


def _case(kind: str):
    scope = ops.NameScope()
    if kind == "dense":
        x, w = scope.placeholder((8, 256), "int8"), scope.placeholder((64, 256), "int8")
        with scope:
            acc = q.dense_int8(x, w)
        ref = q.dense_int8_ref
    else:
        layout = kind[-4:].upper()
        if layout == "NCHW":
            xs, ws = (1, 32, 14, 14), (32, 32, 3, 3)
        else:
            xs, ws = (1, 14, 14, 32), (3, 3, 32, 32)
        x, w = scope.placeholder(xs, "int8"), scope.placeholder(ws, "int8")
        with scope:
            acc = q.conv2d_int8(x, w, 1, (1, 1, 1, 1), data_layout=layout)

        def ref(xa, wa):
            return q.conv2d_int8_ref(xa, wa, 1, (1, 1, 1, 1), data_layout=layout)

    with scope:
        out = q.requantize(acc, SHIFT)
    return x, w, out, lambda xa, wa: q.requantize_ref(ref(xa, wa), SHIFT)


@pytest.mark.parametrize("kind", ["dense", "conv2d_nchw", "conv2d_nhwc"])
def test_sampled_cuda_schedules_are_bit_exact(kind):
    x, w, out, ref = _case(kind)
    dag = ansor.ComputeDAG([x, w, out])
    task = SearchTask(dag, target="cuda", hardware_params=HardwareParams())
    states = sample_init_population(task, generate_sketches(task), 8, random.Random(0))
    assert states
    rng = np.random.default_rng(1)
    xa = rng.integers(-127, 128, x.shape).astype("int8")
    wa = rng.integers(-127, 128, w.shape).astype("int8")
    want = ref(xa, wa)
    for state in states[:3]:
        got = np.full(out.shape, 99, "int8")
        ansor.build(state, target="cuda")(xa, wa, got)
        np.testing.assert_array_equal(got, want)


def test_quantized_resnet18_on_cuda_matches_its_graph():
    b = NetBuilder("NCHW", "float32")
    func = gir.Function(tuple(gir.free_vars(o := resnet(b, (1, 3, 32, 32), 18))), o)
    qmod = aq.quantize(func, b.params(0), config=aq.QConfig(skip_conv_layers=()))
    dev = device("cuda")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lib = build_network(qmod, "cuda", {}, device=dev)
    x = np.random.default_rng(2).normal(0, 1, (1, 3, 32, 32)).astype("float32")
    module = ansor.GraphModule(lib, dev)
    module.set_input("data", x)
    module.run()
    np.testing.assert_allclose(
        module.get_output(0).numpy(), evaluate(qmod, {"data": x}), rtol=1e-4, atol=1e-6
    )
