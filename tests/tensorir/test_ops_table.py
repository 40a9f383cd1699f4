"""The one operator table (tensorir/ops/registry.py): every op has every part, and the graph
layer, the operator library and the reference evaluator use the same entry."""

import numpy as np
import pytest

from tensorir import graph, ops
from tensorir.graph import make_call, op, reference, shapes
from tensorir.ops import registry, shape_rules
from tensorir.ops.registry import OPS, OpAttrError, OpEntry

PATTERNS = {
    shape_rules.ELEMWISE,
    shape_rules.BROADCAST,
    shape_rules.INJECTIVE,
    shape_rules.COMM_REDUCE,
    shape_rules.OUT_ELEMWISE_FUSABLE,
    shape_rules.TUPLE,
    shape_rules.OPAQUE,
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_every_entry_has_every_part(name):
    entry = OPS[name]
    assert isinstance(entry, OpEntry) and entry.name == name
    assert entry.inputs and all(isinstance(i, str) for i in entry.inputs)
    assert entry.arity is None or entry.arity == len(entry.inputs) >= 1
    assert all(isinstance(k, str) for k in entry.attrs)
    assert entry.pattern in PATTERNS
    for part in ("shape_rule", "compute", "reference"):
        assert callable(getattr(entry, part)), f"{name} has no {part}"
    with pytest.raises(TypeError):
        entry.attrs["made_up"] = 1  # read-only: nobody edits the table at run time


def test_graph_and_ops_see_the_same_entry_objects():
    assert tuple(sorted(OPS)) == ops.SUPPORTED_OPS
    assert shapes.OPS is OPS and graph.OPS is OPS
    assert shapes.OpDef is OpEntry
    for name in OPS:
        assert shapes.get_op(name) is registry.get_entry(name) is OPS[name]


def test_make_call_compute_op_and_evaluate_use_the_entry(monkeypatch):
    # Swap one part of one entry: each layer must pick up the swap, so none has its own copy.
    import dataclasses

    calls = []
    entry = OPS["nn.relu"]

    def spy(part):
        real = getattr(entry, part)

        def wrapped(*args):
            calls.append(part)
            return real(*args)

        return wrapped

    spied = dataclasses.replace(
        entry, **{p: spy(p) for p in ("shape_rule", "compute", "reference")}
    )
    monkeypatch.setattr(registry, "OPS", {**OPS, "nn.relu": spied})
    monkeypatch.setattr(shapes, "OPS", registry.OPS)
    x = op.var("x", (2, 3))
    call = make_call("nn.relu", (x,))
    ops.compute_op("nn.relu", [ops.NameScope().placeholder((2, 3))])
    data = np.random.default_rng(0).standard_normal((2, 3)).astype("float32")
    got = reference.evaluate(graph.Function((x,), call), {"x": data})
    np.testing.assert_array_equal(got, np.maximum(data, 0))
    assert calls == ["shape_rule", "compute", "reference"]


def test_compute_op_canonicalises_attributes_as_make_call_does():
    # One validation path: a layout the op does not take fails the same way in both layers.
    t = ops.NameScope().placeholder((1, 3, 8, 8))
    with pytest.raises(OpAttrError, match="nn.global_avg_pool2d: layout must be one of") as ops_err:
        ops.compute_op("nn.global_avg_pool2d", [t], {"layout": "HWCN"})
    with pytest.raises(
        OpAttrError, match="nn.global_avg_pool2d: layout must be one of"
    ) as graph_err:
        make_call("nn.global_avg_pool2d", (op.var("x", (1, 3, 8, 8)),), {"layout": "HWCN"})
    assert str(ops_err.value) == str(graph_err.value)


def test_adaptive_pool_output_size_with_none_in_the_graph():
    # make_call's canonicaliser used to crash on Relay's None entry: int(None) in ntuple.
    x = op.var("x", (1, 2, 6, 8))
    call = make_call("nn.adaptive_avg_pool2d", (x,), {"output_size": (None, 2)})
    assert call.shape == (1, 2, 6, 2)
    data = np.random.default_rng(1).standard_normal((1, 2, 6, 8)).astype("float32")
    got = reference.evaluate(graph.Function((x,), call), {"x": data})
    want = data.reshape(1, 2, 6, 2, 4).mean(axis=-1)
    np.testing.assert_allclose(got, want, rtol=1e-6)
