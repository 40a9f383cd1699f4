"""Sketch generation: counts and structure from TVM's test_auto_scheduler_sketch_generation.py
(notes 3.4), plus golden printouts of the matmul and conv2d sketches."""

import os
from pathlib import Path

import pytest

from autosched import workloads as W
from autosched.hardware import HardwareParams
from autosched.search.sketch import generate_sketches
from autosched.search.sketch_rules import (
    APPLY_AND_SKIP_REST,
    SKIP,
    CustomSketchRule,
    cpu_rules,
)
from autosched.task import SearchTask
from tensorir import steps as st
from tensorir.dag import ComputeDAG

GOLDEN = Path(__file__).parent / "golden" / "sketch"


def make_task(tensors, cores=4):
    hw = HardwareParams(num_cores=cores)
    return SearchTask(ComputeDAG(tensors), target="llvm", hardware_params=hw)


def check_golden(name: str, text: str) -> None:
    """Compare with golden/sketch/<name>.txt (written when missing or with
    AUTOSCHED_UPDATE_GOLDEN=1, for review)."""
    path = GOLDEN / f"{name}.txt"
    if not path.exists() or os.environ.get("AUTOSCHED_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f"{name}: printout differs from {path}"


def names(stage):
    return [it.name for it in stage.iters]


def has_rfactor(state):
    return any(isinstance(s, st.RfactorStep) for s in state.steps)


def has_cache_write(state):
    return any(isinstance(s, st.CacheWriteStep) for s in state.steps)


def test_matmul_512_three_sketches():
    sk = generate_sketches(make_task(W.matmul(512, 512, 512)))
    assert len(sk) == 3
    plain, fused1, fused2 = sk
    # plain SSRSRS tiling
    assert names(plain["C"]) == ["i.0", "j.0", "i.1", "j.1", "k.0", "i.2", "j.2", "k.1",
                                 "i.3", "j.3"]  # fmt: skip
    assert not has_cache_write(plain)
    for level, s in ((1, fused1), (2, fused2)):
        assert has_cache_write(s)
        local, out = s["C.local"], s["C"]
        assert names(local) == ["i.c.0", "j.c.0", "i.c.1", "j.c.1", "k.0", "i.c.2", "j.c.2",
                                "k.1", "i.c.3", "j.c.3"]  # fmt: skip
        # the consumer follows the first `level` tile levels, then the remainder
        assert len(out.iters) == 2 * (level + 1)
        assert local.compute_at == "iter"
        assert local.attach == ("C", f"j.{level - 1}")
    for s in sk:
        assert not s.concrete
        assert all(it.kind == "spatial" for it in s["C"].iters[:2])


def test_matmul_small_spatial_gets_rfactor():
    sk = generate_sketches(make_task(W.matmul(8, 8, 512)))
    assert len(sk) == 5
    rf = [s for s in sk if has_rfactor(s)]
    assert len(rf) == 2
    # the split feeding rfactor is left undefined for sampling
    for s in rf:
        k = next(i for i, x in enumerate(s.steps) if isinstance(x, st.RfactorStep))
        assert s.steps[k - 1].lengths == (None,)
        assert "C.rf" in [x.name for x in s.stages]
    # the inner variant puts the factored (spatial) axis innermost for vectorization
    inner = rf[1]["C.rf"]
    assert inner.iters[-1].kind == "spatial"
    assert inner.iters[-2].kind == "reduce"
    assert rf[0]["C.rf"].iters[-1].kind == "reduce"
    assert sum(has_cache_write(s) for s in sk) == 2


def test_matmul_relu_fuses_into_relu():
    sk = generate_sketches(make_task(W.matmul_relu(512, 512, 512)))
    # the relu is a fusible elementwise consumer: fused at level 1, 2, and unfused
    assert len(sk) == 3
    assert not any(has_cache_write(s) for s in sk)
    assert [s["C"].compute_at for s in sk] == ["iter", "iter", "root"]
    assert sk[0]["C"].attach == ("T_relu", "ax1.0")
    assert sk[1]["C"].attach == ("T_relu", "ax1.1")
    assert len(sk[2]["T_relu"].iters) == 2  # unfused: the consumer is left alone


def test_conv2d_bias_relu_three_sketches():
    dag = W.conv2d_nhwc_bias_relu(1, 56, 56, 64, 64, KH=3, KW=3, stride=1, pad=1)
    sk = generate_sketches(make_task(dag))
    assert len(sk) == 3
    for s in sk:
        assert s["T_add"].compute_at == "inline"  # strictly inlinable bias add
        assert s["PaddedInput"].compute_at == "root"  # padding: location sampled later
        conv = s["Conv2dOutput"]
        # 4 spatial axes x 4 levels + 3 reduce axes x 2 levels
        assert len(conv.iters) == 4 * 4 + 3 * 2
        assert [it.kind for it in conv.iters[8:11]] == ["reduce"] * 3
    assert sk[0]["Conv2dOutput"].attach == ("T_relu", "ax3.0")
    assert sk[1]["Conv2dOutput"].attach == ("T_relu", "ax3.1")
    assert sk[2]["Conv2dOutput"].compute_at == "root"


def test_softmax_nine_sketches():
    # TVM: two reductions, each rfactor(outer) / rfactor(inner) / untouched -> 3 x 3
    sk = generate_sketches(make_task(W.softmax(1, 1024)))
    assert len(sk) == 9
    n_rf = [sum(isinstance(x, st.RfactorStep) for x in s.steps) for s in sk]
    assert n_rf == [2, 2, 1, 2, 2, 1, 1, 1, 0]
    assert len(sk[8].steps) == 0
    # exp is not strictly inlinable: it stays at the root in every sketch
    assert all(s["T_softmax_exp"].compute_at == "root" for s in sk)


def test_max_pool_one_sketch_without_steps():
    # TVM's CPU max_pool2d test uses a 1x1 window: nothing to tile, nothing to rfactor
    sk = generate_sketches(make_task(W.max_pool_bias_relu(1, 56, 56, 512, kernel=1, pad=0)))
    assert len(sk) == 1
    assert all(isinstance(x, st.ComputeInlineStep) for x in sk[0].steps)
    # a 3x3 window (reduce length 9 > 4 cores) is a reduction worth an rfactor
    sk3 = generate_sketches(make_task(W.max_pool_bias_relu(1, 56, 56, 512)))
    assert len(sk3) == 3 and sum(map(has_rfactor, sk3)) == 2


def test_rfactor_threshold_follows_cores():
    # space 64 <= reduce 512 and 64 <= 16 * cores: rfactor; with 2 cores 64 > 32: none
    assert len(generate_sketches(make_task(W.matmul(8, 8, 512), cores=4))) == 5
    assert len(generate_sketches(make_task(W.matmul(8, 8, 512), cores=2))) == 3


def test_dense_bias_and_depthwise():
    sk = generate_sketches(make_task(W.dense_bias(1, 64, 100)))
    assert len(sk) == 3
    sk = generate_sketches(make_task(W.depthwise_conv2d_nhwc(1, 14, 14, 32)))
    # depthwise has data reuse (the kernel ignores the batch/spatial axes)
    assert len(sk) == 3
    assert sum(map(has_cache_write, sk)) == 2


def test_winograd_const_tensor_rule():
    sk = generate_sketches(make_task(W.winograd_conv2d_nhwc_3x3(1, 14, 14, 32, 32)))
    assert len(sk) >= 1
    for s in sk:
        for name in ("data_pack", "inverse"):
            stage = s[name]
            unrolled = [it.name for it in stage.iters if it.annotation == "unroll"]
            assert len(unrolled) == 4  # eps/nu (vh/vw) and r_a, r_b innermost
            assert names(stage)[-4:] == unrolled
            assert [n[-2:] for n in names(stage)[:4]] == [".0", ".0", ".1", ".1"]
        assert s["A"].compute_at == "inline" and s["B"].compute_at == "inline"


def test_custom_rule_runs_first():
    calls = []

    def cond(ctx, state, sid):
        return APPLY_AND_SKIP_REST if state.stages[sid].name == "C" else SKIP

    def apply(ctx, state, sid):
        calls.append(sid)
        s = state.copy()
        s.split(sid, "i", [4])
        return [(s, sid - 1)]

    rules = [CustomSketchRule(cond, apply, "split_i")] + cpu_rules()
    sk = generate_sketches(make_task(W.matmul(64, 64, 64)), rules=rules)
    assert len(sk) == 1 and calls == [2]
    assert names(sk[0]["C"]) == ["i.0", "i.1", "j", "k"]


@pytest.mark.parametrize(
    "name,tensors",
    [
        ("matmul_512", lambda: W.matmul(512, 512, 512)),
        ("conv2d_nhwc_bias_relu", lambda: W.conv2d_nhwc_bias_relu(1, 56, 56, 64, 64, 3, 3, 1, 1)),
    ],
)
def test_golden_sketch_printouts(name, tensors):
    sk = generate_sketches(make_task(tensors()))
    text = "".join(f"# sketch {k}\n{s}\n" for k, s in enumerate(sk))
    check_golden(name, text)
