"""Accelerator schedules in tensorir (VTA's): tagged scopes such as ``local.acc_buffer``, the
pragmas ``dma_copy`` / ``alu`` / ``gemm`` on loops, and compute_at into a stage whose attached
consumer reads the producer (a GEMM and its ALU epilogue both at the output's tile loop)."""

import numpy as np
import pytest

from tensorir import ComputeDAG, te
from tensorir.loop_interp import run_program
from tensorir.loops import Allocate, For, walk_stmts
from tensorir.lower import lower
from tensorir.schedule import ScheduleError, State

RNG = np.random.default_rng(7)


@pytest.fixture
def chain():
    """A -> B (x2) -> C (+1) -> out (copy): B and C both computed at out's tile loop."""
    A = te.placeholder((8, 16), "int32", name="A")
    B = te.compute((8, 16), lambda i, j: A[i, j] * 2, name="B")
    C = te.compute((8, 16), lambda i, j: B[i, j] + 1, name="C")
    out = te.compute((8, 16), lambda i, j: C[i, j], name="out")
    return State(ComputeDAG([A, out]))


def _tiled(s):
    io, _ = s.split("out", "i", [4])
    s.cache_read("A", "local.inp_buffer", ["B"])
    s.compute_at("C", "out", io)
    s.compute_at("B", "out", io)  # out reads B only through C, which is attached at io
    s.compute_at("A.local.inp_buffer", "B", s["B"].iters[0])
    s.pragma("A.local.inp_buffer", s["A.local.inp_buffer"].iters[0], "dma_copy")
    s.pragma("C", s["C"].iters[0], "alu")
    return s


def test_tagged_scopes_pragmas_and_compute_at_through_an_attached_consumer(chain):
    s = _tiled(chain)
    prog = lower(s)
    scopes = {x.buffer.name: x.buffer.scope for x in walk_stmts(prog.body)
              if isinstance(x, Allocate)}  # fmt: skip
    assert scopes["A_local_inp_buffer"] == "local.inp_buffer"
    pragmas = [dict(x.annotations).get("pragma") for x in walk_stmts(prog.body)
               if isinstance(x, For)]  # fmt: skip
    assert pragmas.count("dma_copy") == 1 and pragmas.count("alu") == 1
    a = RNG.integers(-1000, 1000, (8, 16)).astype(np.int32)
    out = np.zeros((8, 16), np.int32)
    run_program(prog, [a, out])
    np.testing.assert_array_equal(out, a * 2 + 1)
    assert "pragma(dma_copy)" in str(s) and "pragma(alu)" in str(s)
    # the steps (tagged scopes, pragmas) survive the JSON round trip
    assert str(State.from_json(s.dag, s.to_json())) == str(s)


def test_a_pragma_on_a_loop_of_extent_one_moves_inside(chain):
    s = chain
    io, ii = s.split("out", "i", [1])
    s.pragma("out", ii, "dma_copy")
    assert "for i.1 (0,1) pragma(dma_copy)" in str(s)  # printed although trivial: it is marked
    out_nest = lower(s).body.stmts[-1]  # B and C are computed at the root before it
    loops = [x for x in walk_stmts(out_nest) if isinstance(x, For)]
    assert [(lp.extent, dict(lp.annotations).get("pragma")) for lp in loops] == [
        (8, None), (16, "dma_copy"),
    ]  # fmt: skip


@pytest.mark.parametrize("scope", ["locall", "global.inp_buffer", "local.", ""])
def test_an_unknown_scope_is_refused(chain, scope):
    with pytest.raises(ScheduleError, match=r"cache_read of 'A': (unknown )?scope"):
        chain.cache_read("A", scope, ["B"])


def test_an_unknown_pragma_lists_the_accelerator_ones(chain):
    with pytest.raises(
        ScheduleError,
        match=r"unknown pragma 'dma'; .*\['dma_copy', 'alu', 'gemm', 'tensor_core', "
        r"'double_buffer', 'software_pipeline_3', 'software_pipeline_4'\]",
    ):
        chain.pragma("out", "i", "dma")


def test_compute_at_still_needs_a_consumer_inside_the_target(chain):
    # C is not attached to out yet: out does not read B inside its loops.
    with pytest.raises(ScheduleError, match=r"'out' does not consume 'B'; attach it to one of its "
                       r"consumers \['C'\]"):  # fmt: skip
        chain.compute_at("B", "out", "i")


@pytest.mark.parametrize("step", ["split", "fuse"])
def test_splitting_or_fusing_a_marked_loop_is_refused(chain, step):
    chain.pragma("out", "i", "dma_copy")
    args = ("out", "i", [2]) if step == "split" else ("out", ["i", "j"])
    with pytest.raises(ScheduleError, match=rf"{step} of out\.i: the loop carries pragma "
                       r"'dma_copy', which would be lost; apply pragmas after"):  # fmt: skip
        getattr(chain, step)(*args)
