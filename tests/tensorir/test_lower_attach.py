"""Lowering of attached and inlined stages (compute_at at each level, bound inference,
attachment errors, inlined padding and chains), checked by running loop_interp vs the
reference."""

import pytest
from lower_workloads import _fors, check, conv2d_nhwc, elementwise_chain, matmul_relu, softmax

from tensorir.loops import Allocate, walk_stmts
from tensorir.lower import LowerError, infer_bound, lower
from tensorir.schedule import State

# ----------------------------------------------------------------------------- compute_at


@pytest.mark.parametrize("level", [0, 1, 2])
def test_compute_at_each_level_of_tiled_consumer(level):
    dag = matmul_relu()
    s = State(dag)
    io, ii = s.split("D", "i", [4])
    jo, ji = s.split("D", "j", [5])
    s.reorder("D", [io, jo, ii, ji])
    target = [io, jo, ii][level]
    s.compute_at("C", "D", target)
    prog = check(s)
    allocs = [x for x in walk_stmts(prog.body) if isinstance(x, Allocate)]
    assert len(allocs) == 1
    assert allocs[0].buffer.size == [4 * 12, 4 * 5, 5][level]
    assert not prog.workspaces


def test_compute_at_with_tiled_producer_and_tail():
    dag = matmul_relu(10, 12, 10)
    s = State(dag)
    io, ii = s.split("D", "i", [3])  # non-divisible consumer tiles
    s.compute_at("C", "D", io)
    s.split("C", "k", [4])  # non-divisible producer reduce split
    s.split("C", "j", [5])
    check(s)
    bounds = {x.name: x for x in infer_bound(s)}
    assert [it.extent for it in bounds["C"].root_iters] == [3, 12, 10]


def test_compute_at_chain_elementwise():
    dag = elementwise_chain()
    s = State(dag)
    io, ii = s.split("D", "i", [4])
    s.compute_at("C", "D", io)
    s.compute_at("B", "C", "j")
    prog = check(s)
    sizes = sorted(x.buffer.size for x in walk_stmts(prog.body) if isinstance(x, Allocate))
    assert sizes == [1, 24]


def test_infer_bound_fills_extents_of_attached_stages():
    dag = matmul_relu()
    s = State(dag)
    io, ii = s.split("D", "i", [4])
    s.compute_at("C", "D", io)
    stages = {x.name: x for x in infer_bound(s)}
    assert [it.extent for it in stages["C"].iters] == [4, 12, 10]
    assert all(it.extent is not None for st in stages.values() for it in st.iters)


def test_attach_outside_a_consumer_is_an_error():
    dag = elementwise_chain()
    s = State(dag)
    # B is read by C only; attaching B to D's loop while C runs at the root is invalid.
    stages = list(s.stages)
    k = [x.name for x in stages].index("B")
    stages[k] = stages[k].with_(compute_at="iter", attach=("D", "i"))
    with pytest.raises(LowerError, match="consumer 'C'"):
        lower((tuple(stages), dag))


def test_attach_to_an_inlined_stage_is_an_error():
    dag = elementwise_chain()
    stages = list(State(dag).stages)
    names = [x.name for x in stages]
    stages[names.index("B")] = stages[names.index("B")].with_(compute_at="iter", attach=("C", "i"))
    stages[names.index("C")] = stages[names.index("C")].with_(compute_at="inline")
    with pytest.raises(LowerError, match="no loops"):
        lower((tuple(stages), dag))


# ----------------------------------------------------------------------------- inline


def test_inline_padding_of_conv2d():
    dag = conv2d_nhwc()
    s = State(dag)
    s.compute_inline("pad")
    prog = check(s)
    assert not prog.workspaces
    assert "pad" not in str(prog)


def test_inline_chain_and_compute_root():
    dag = elementwise_chain()
    s = State(dag)
    s.compute_inline("B")
    s.compute_inline("C")
    prog = check(s)
    assert len(_fors(prog)) == 2
    s.compute_root("C")
    prog = check(s)
    assert [b.name for b in prog.workspaces] == ["C"]


def test_conv2d_tiled_with_pad_attached():
    dag = conv2d_nhwc(h=7, w=7)
    s = State(dag)
    b, y, x, f = s["conv"].iters[:4]
    yo, yi = s.split("conv", y, [3])
    xo, xi = s.split("conv", x, [2])
    s.reorder("conv", [b, yo, xo, f, yi, xi, "ry", "rx", "rc"])
    s.compute_at("pad", "conv", xo)
    prog = check(s)
    alloc = next(x for x in walk_stmts(prog.body) if isinstance(x, Allocate))
    assert alloc.buffer.shape == (1, 5, 4, 3)  # (3-1)+3 rows, (2-1)+3 cols


def test_softmax_scheduled():
    dag = softmax()
    s = State(dag)
    s.compute_inline("e")
    s.compute_at("mx", "out", "i")
    s.compute_at("s", "out", "i")
    s.split("out", "j", [4])
    prog = check(s)
    assert len([x for x in walk_stmts(prog.body) if isinstance(x, Allocate)]) == 2
