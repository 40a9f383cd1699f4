"""A TF32 network build stores the float32 weights its tensor-core kernels read rounded to
TF32 (autosched/network/tf32_weights.py): warpgroups would otherwise truncate them."""

from __future__ import annotations

import numpy as np
import pytest

from autosched.network import build as network_build
from autosched.network import tf32_weights
from autosched.network.default_schedules import default_gpu_state
from autosched.network.partition import partition
from autosched.network.tf32_weights import tf32_rounded_weights
from codegen.target import Target
from tensorir.dtype import round_to_tf32
from tensorir.graph import ir as gir
from tests.autosched.tensor_core_helpers import gpu_task, has_tc, small_resnet_block

TF32 = Target("cuda -arch=sm_90 -allow_tf32=1")


@pytest.fixture(scope="module")
def network():
    """The partitioned block and each group's untuned TF32 state (tensor cores for convs)."""
    mod, params = small_resnet_block(np.random.default_rng(3))
    func, groups = partition(mod, params, TF32)
    states = [default_gpu_state(gd.dag, 1024, 32, lambda s: None, gpu_task(gd.dag, str(TF32)))
              for gd in groups]  # fmt: skip
    return func, groups, states


def _constants(gd) -> dict:
    return {t.name: inp for t, inp in zip(gd.dag.input_tensors, gd.inputs, strict=True)
            if isinstance(inp, gir.Constant)}  # fmt: skip


def test_only_the_weights_the_gemm_reads_are_rounded(network):
    _, groups, states = network
    convs = 0
    for gd, state in zip(groups, states, strict=True):
        names = tf32_rounded_weights(gd.dag, gd.inputs, state, TF32)
        constants = _constants(gd)
        if not has_tc(state):
            assert names == frozenset()
            continue
        convs += 1
        # The conv weight (4-d, read through the GEMM's reshape), never the bias (1-d, added
        # in float32 in the epilogue).
        assert names and {constants[n].value.ndim for n in names} == {4}
        assert all(constants[n].value.ndim == 1 for n in set(constants) - names)
    assert convs == 2


def test_nothing_is_rounded_without_tf32_or_tensor_cores(network, monkeypatch):
    _, groups, states = network
    gd, state = next((g, s) for g, s in zip(groups, states, strict=True) if has_tc(s))
    plain = Target("cuda -arch=sm_90")
    assert tf32_rounded_weights(gd.dag, gd.inputs, state, plain) == frozenset()
    # The same group as scalar loops: exact float32, exact weights.
    assert tf32_rounded_weights(gd.dag, gd.inputs, gd.dag.get_init_state(), TF32) == frozenset()
    monkeypatch.setattr(tf32_weights, "TF32_ROUND_WEIGHTS", False)
    assert tf32_rounded_weights(gd.dag, gd.inputs, state, TF32) == frozenset()


def test_the_storage_plan_holds_rounded_weights_and_exact_biases(network):
    func, groups, states = network
    rounded = [tf32_rounded_weights(gd.dag, gd.inputs, s, TF32)
               for gd, s in zip(groups, states, strict=True)]  # fmt: skip
    kernels = [{"layouts": ()} for _ in groups]
    order = list(range(len(groups)))
    plan = network_build._plan(func, groups, kernels, order, rounded)
    exact = network_build._plan(func, groups, kernels, order)
    checked = 0
    for i, gd in enumerate(groups):
        # A call's args are its inputs' storages, then its output's.
        for t, inp, sid, sid_exact in zip(gd.dag.input_tensors, gd.inputs, plan.calls[i][1],
                                          exact.calls[i][1], strict=False):  # fmt: skip
            if not isinstance(inp, gir.Constant):
                continue
            got, before = plan.constants[sid], exact.constants[sid_exact]
            np.testing.assert_array_equal(before, inp.value)
            if t.name in rounded[i]:
                np.testing.assert_array_equal(got, round_to_tf32(inp.value))
                assert np.any(got != inp.value)
            else:
                np.testing.assert_array_equal(got, inp.value)
            checked += 1
    assert checked == 3  # two conv weights, one bias
