"""autosched.autotvm: config spaces, templates, tasks and the fallback (no measurement)."""

import math
import warnings

import numpy as np
import pytest

import autosched as ansor
from autosched import autotvm
from autosched.autotvm.space import SplitSpace
from tensorir.interp import eval_dag

CONV_ARGS = (
    ("TENSOR", (1, 16, 14, 14), "float32"),
    ("TENSOR", (32, 16, 3, 3), "float32"),
    (1, 1),
    (1, 1, 1, 1),
    (1, 1),
    "float32",
)


def _matmul_template(name):
    @autotvm.template(name)
    def matmul(n, red, m, dtype):
        A = ansor.te.placeholder((n, red), name="A", dtype=dtype)
        B = ansor.te.placeholder((red, m), name="B", dtype=dtype)
        k = ansor.te.reduce_axis((0, red), name="k")
        C = ansor.te.compute((n, m), lambda i, j: ansor.te.sum(A[i, k] * B[k, j], axis=k), "C")
        s = ansor.ComputeDAG([A, B, C]).get_init_state()
        cfg = autotvm.get_config()
        y, x, kk = s[C].iters
        cfg.define_split("tile_y", y, num_outputs=2)
        cfg.define_split("tile_x", x, num_outputs=2)
        cfg.define_knob("vec", [True, False])
        yo, yi = cfg["tile_y"].apply(s, C, y)
        xo, xi = cfg["tile_x"].apply(s, C, x)
        s.reorder(C, [yo, xo, kk, yi, xi])
        if cfg["vec"].val:
            s.vectorize(C, xi)
        return s, [A, B, C]

    return matmul


MATMUL = _matmul_template("test/matmul")


def test_split_space_sizes_follow_the_policy():
    assert len(SplitSpace(64, 2, "factors")) == 7  # 1 2 4 8 16 32 64
    assert len(SplitSpace(48, 2, "factors")) == 10
    assert len(SplitSpace(48, 2, "power2")) == 6  # 1 2 4 8 16 32
    assert len(SplitSpace(48, 2, "verbose")) == 11  # the divisors and 32
    # three parts of 16: ordered pairs of divisors whose product divides 16
    three = SplitSpace(16, 3, "factors")
    assert len(three) == 15
    assert all(16 % math.prod(e.size[1:]) == 0 for e in three.entities)
    assert len(SplitSpace(64, 2, "factors", max_factor=8)) == 4
    assert [e.size for e in SplitSpace(8, 2).entities] == [[-1, 1], [-1, 2], [-1, 4], [-1, 8]]


def test_task_space_size_and_printing():
    task = autotvm.task.create("test/matmul", (64, 32, 48, "float32"), target="llvm")
    space = task.config_space
    assert len(space) == 7 * 10 * 2
    text = str(space)
    assert text.splitlines()[0] == "ConfigSpace (len=140, space_map="
    assert "   0 tile_y: Split(policy=factors, product=64, num_outputs=2) len=7" in text
    assert "   1 tile_x: Split(policy=factors, product=48, num_outputs=2) len=10" in text
    assert "   2 vec: OtherOption([True, False]) len=2" in text
    assert task.flop == 2 * 64 * 32 * 48
    assert task.workload == ("test/matmul", 64, 32, 48, "float32")


def test_config_index_is_mixed_radix_first_knob_fastest():
    space = autotvm.task.create("test/matmul", (64, 32, 48, "float32"), "llvm").config_space
    cfg = space.get(7 * 3 + 2)  # tile_y entity 2, tile_x entity 3, vec entity 0
    assert cfg["tile_y"].size == [-1, 4]
    assert cfg["tile_x"].size == [-1, 4]
    assert cfg["vec"].val is True
    assert space.index_of(space.knob_indices(123)) == 123
    assert str(cfg) == "tile_y: sp[-1, 4], tile_x: sp[-1, 4], vec: True,None,23"
    with pytest.raises(IndexError, match="out of range"):
        space.get(140)


def test_config_round_trips_through_json():
    space = autotvm.task.create("test/matmul", (64, 32, 48, "float32"), "llvm").config_space
    cfg = space.get(77)
    back = autotvm.ConfigEntity.from_json_dict(cfg.to_json_dict())
    assert back == cfg and back.index == 77


@pytest.mark.parametrize("index", [0, 55, 139])
def test_template_state_builds_and_matches_numpy(index):
    task = autotvm.task.create("test/matmul", (64, 32, 48, "float32"), "llvm")
    state, tensors = task.instantiate(task.config_space.get(index))
    rng = np.random.default_rng(index)
    a, b = (rng.uniform(-1, 1, t.shape).astype("float32") for t in tensors[:2])
    c = np.full(tensors[2].shape, np.nan, "float32")
    ansor.build(state, "llvm")(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_builtin_conv2d_template_int8_is_bit_exact():
    args = (("TENSOR", (1, 8, 9, 9), "int8"), ("TENSOR", (16, 8, 3, 3), "int8")) + CONV_ARGS[2:5]
    task = autotvm.task.create("conv2d_nchw.x86", args + ("int32",), "llvm")
    assert [n for n in task.config_space.space_map] == [
        "tile_oc", "tile_oh", "tile_ow", "tile_ic", "unroll_kw",
    ]  # fmt: skip
    state, tensors = task.instantiate(task.config_space.get(len(task.config_space) // 3))
    rng = np.random.default_rng(1)
    data = rng.integers(-128, 128, (1, 8, 9, 9)).astype("int8")
    kernel = rng.integers(-128, 128, (16, 8, 3, 3)).astype("int8")
    out = np.zeros(tensors[2].shape, "int32")
    ansor.build(state, "llvm")(data, kernel, out)
    np.testing.assert_array_equal(out, eval_dag(state.dag, [data, kernel])[0])
    assert out.dtype == np.int32 and np.abs(out).max() > 127 * 127  # really accumulates in int32


def test_fallback_config_warns_once_per_workload():
    with ansor.Target("llvm"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s1, _ = MATMUL(96, 16, 40, "float32")
        s2, _ = MATMUL(96, 16, 40, "float32")
    msgs = [str(w.message) for w in caught if "fallback" in str(w.message)]
    assert len(msgs) == 1 and "test/matmul" in msgs[0]
    assert [st.to_json() for st in (s1, s2)] == [s1.to_json()] * 2
    # the default split keeps small inner tiles (<= 4), not the first entity (1)
    yi = next(it for it in s1["C"].iters if it.name == "i.1")
    assert yi.extent == 4


def test_template_errors_name_the_problem():
    with pytest.raises(ValueError, match="no template registered as 'nope'"):
        autotvm.task.create("nope", (), "llvm")
    with pytest.raises(TypeError, match="pass arguments by position"):
        MATMUL(n=4, red=4, m=4, dtype="float32")
    with pytest.raises(ValueError, match="defined twice"):
        space = autotvm.ConfigSpace()
        space.define_knob("a", [1])
        space.define_knob("a", [2])
    with pytest.raises(TypeError, match="knob 'k'"):
        autotvm.ConfigSpace().define_split("k", "y")


def test_target_scope():
    assert ansor.Target.current() is None
    with ansor.Target("llvm") as t:
        assert ansor.Target.current() is t
        with ansor.Target("opencl"):
            assert str(ansor.Target.current()) == "opencl"
        assert ansor.Target.current() is t
    assert ansor.Target.current() is None
