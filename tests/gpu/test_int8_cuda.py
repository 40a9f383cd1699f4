"""int8 on CUDA: conv2d (NCHW, NHWC) and dense with int32 accumulation and a fused requantize,
under schedules the GPU sketches sample, equal bit for bit to tensorir.ops.quantized's integer
references; quantized resnet-18 built for CUDA agrees with the numpy evaluation of its graph;
kernels whose innermost reduction runs as ``__dp4a`` (codegen/cuda.py) are bit-exact too."""

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
from .programs import int8_conv_ohwi_dag, int8_dense_dag, int8_gpu_state

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


def _dp4a_case(kind: str):
    """The DAG, random full-range inputs and the numpy integer reference of a dp4a kernel."""
    rng = np.random.default_rng(3)

    def ints(dtype, shape):
        lo = 0 if dtype == "uint8" else -128
        return rng.integers(lo, lo + 256, shape).astype(dtype)

    if kind == "conv2d_ohwi":
        x, w = ints("int8", (1, 6, 6, 16)), ints("int8", (8, 3, 3, 16))
        hwio = w.transpose(1, 2, 3, 0)
        return int8_conv_ohwi_dag(16), (x, w), q.conv2d_int8_ref(x, hwio, 1, 0, data_layout="NHWC")
    byte = {"u8": "uint8", "s8": "int8"}
    a_dtype, w_dtype = byte[kind[-4:-2]], byte[kind[-2:]]
    a, w = ints(a_dtype, (4, 64)), ints(w_dtype, (32, 64))
    return int8_dense_dag(64, a_dtype, w_dtype), (a, w), q.dense_int8_ref(a, w)


@pytest.mark.parametrize("arch", ["device_arch", "no_arch"])
@pytest.mark.parametrize(
    "kind, unroll, shared_a",
    [("dense_s8s8", False, False), ("dense_u8s8", True, False), ("dense_s8u8", False, True),
     ("dense_u8u8", False, False), ("conv2d_ohwi", False, False)],
)  # fmt: skip
def test_dp4a_kernels_are_bit_exact(kind, unroll, shared_a, arch):
    dev = device("cuda")
    # With the device's -arch the kernel holds only the dp4a loop; without one it holds both
    # forms and nvcc picks by __CUDA_ARCH__ (the dp4a one on any GPU of sm_61 or newer).
    target = f"cuda -arch={dev.properties['arch']}" if arch == "device_arch" else "cuda"
    dag, inputs, want = _dp4a_case(kind)
    state = int8_gpu_state(dag, unroll=unroll, shared_a=shared_a)
    code = ansor.generate_source(state, target).code
    assert "dp4a" in code and ("#if" not in code) == (arch == "device_arch")
    got = np.full(want.shape, 7, "int32")
    ansor.build(state, target=target)(*inputs, got)
    np.testing.assert_array_equal(got, want)
