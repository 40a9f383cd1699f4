"""The cache of inlined stage bodies across states (tensorir/bounds.py, issue 29): the same
programs as a cold lowering, and a bounded size."""

import numpy as np

from autosched import testing
from tensorir import bounds
from tensorir.dag import ComputeDAG
from tensorir.loop_interp import run_program
from tensorir.lower import lower


def _states(dag):
    s0 = dag.get_init_state()
    s1 = s0.copy()
    out = s1.stages[-1]
    s1.split(out.name, out.iters[1], [4])
    return [s0, s1]


def test_cached_bodies_lower_to_the_cold_programs(monkeypatch):
    dag = ComputeDAG(testing.conv2d_nhwc_bias_relu(1, 10, 10, 4, 8, 3, 3, 1, 1))
    states = _states(dag)
    monkeypatch.setattr(bounds, "_EXPANDED", type(bounds._EXPANDED)())
    cold = []
    for s in states:
        bounds._EXPANDED.clear()  # each lowered with nothing cached
        cold.append(str(lower(s)))
    warm = [str(lower(s)) for s in states] + [str(lower(s)) for s in states]
    assert warm == cold + cold
    assert len(bounds._EXPANDED) == 1  # both states inline the same bodies: one entry
    # and the cached lowering computes the convolution (random inputs, numpy reference)
    rng = np.random.default_rng(3)
    data = rng.standard_normal((1, 10, 10, 4)).astype(np.float32)
    kernel = rng.standard_normal((3, 3, 4, 8)).astype(np.float32)
    bias = rng.standard_normal((1, 1, 1, 8)).astype(np.float32)
    padded = np.pad(data, ((0, 0), (1, 1), (1, 1), (0, 0)))
    ref = np.zeros((1, 10, 10, 8), np.float32)
    for dh in range(3):
        for dw in range(3):
            ref += padded[:, dh : dh + 10, dw : dw + 10, :] @ kernel[dh, dw]
    ref = np.maximum(ref + bias, 0)
    for s in states:
        out = np.zeros_like(ref)
        run_program(lower(s), [data, kernel, bias, out])
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_the_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(bounds, "_EXPANDED", type(bounds._EXPANDED)(2))
    for n in (8, 12, 16, 20):
        dag = ComputeDAG(testing.conv2d_nhwc_bias_relu(1, n, n, 4, 4, 3, 3, 1, 1))
        lower(dag.get_init_state())
        assert len(bounds._EXPANDED) <= 2
    assert len(bounds._EXPANDED) == 2


def _cached_states(dag):
    """Two states of one sketch (cache_write, cache_read, then different tile sizes)."""
    out = []
    for factor in (2, 4):
        s = dag.get_init_state()
        s.cache_write("Conv2dOutput", "local")
        s.cache_read("kernel", "shared", ["Conv2dOutput.local"])
        last = s.stages[-1]
        s.split(last.name, last.iters[-1], [factor])
        out.append(s)
    return out


def test_replayed_cache_steps_share_their_ops_and_lower_as_fresh_ones(monkeypatch):
    from tensorir import dag_rewrite

    def local(state):
        return next(st.op for st in state.stages if st.name == "Conv2dOutput.local")

    dag = ComputeDAG(testing.conv2d_nhwc_bias_relu(1, 8, 8, 4, 8, 3, 3, 1, 1))
    monkeypatch.setattr(dag_rewrite, "_MEMO", type(dag_rewrite._MEMO)())
    monkeypatch.setattr(dag_rewrite._MEMO, "max_entries", 0)  # nothing kept: every rewrite fresh
    c, d = _cached_states(dag)
    assert local(c) is not local(d)
    fresh = [str(lower(s)) for s in (c, d)]
    monkeypatch.setattr(dag_rewrite._MEMO, "max_entries", 256)
    a, b = _cached_states(dag)
    assert [id(s.op) for s in a.stages] == [id(s.op) for s in b.stages]  # one set of ops
    assert len(dag_rewrite._MEMO) == 2  # one cache_write, one cache_read
    assert [str(lower(s)) for s in (a, b)] == fresh
