"""The scalar loop-IR interpreter: loops, guards, allocation, bounds checks, deep nests."""

import math

import numpy as np
import pytest

from tensorir.expr import Const, Var, call, floordiv, floormod, if_then_else
from tensorir.loop_interp import LoopInterpError, compile_program, run_program
from tensorir.loops import Allocate, Barrier, Buffer, For, If, Load, Program, Store, seq


def _rng():
    return np.random.default_rng(0)


def test_elementwise_loop_and_dict_arguments():
    a = Buffer("a", (7,), "float32")
    b = Buffer("b", (7,), "float32")
    i = Var("i")
    body = For(i, 7, Store(b, i, call("exp", Load(a, i, "float32")) * 2.0))
    prog = Program("p", (a, b), (), body)
    x = _rng().standard_normal(7).astype("float32")
    y = np.zeros(7, "float32")
    run_program(prog, {"a": x, "b": y})
    np.testing.assert_allclose(y, np.exp(x) * 2, rtol=1e-6)


def test_guard_else_and_thread_loops_run_serially():
    a = Buffer("a", (10,), "int32")
    i, t = Var("i"), Var("t")
    idx = i * 4 + t
    body = For(
        i,
        3,
        For(t, 4, If(idx < 10, Store(a, idx, idx * idx), None), "thread", "threadIdx.x"),
        "vthread",
    )
    prog = Program("p", (a,), (), seq(body, Barrier()))
    out = np.full(10, -1, "int32")
    run_program(prog, [out])
    np.testing.assert_array_equal(out, np.arange(10) ** 2)


def test_out_of_bounds_store_is_reported():
    a = Buffer("a", (4,), "float32")
    i = Var("i")
    prog = Program("p", (a,), (), For(i, 5, Store(a, i, Const(1.0, "float32"))))
    with pytest.raises(LoopInterpError, match="out of bounds"):
        run_program(prog, [np.zeros(4, "float32")])


def test_negative_index_is_reported_not_wrapped():
    a = Buffer("a", (4,), "float32")
    i = Var("i")
    prog = Program("p", (a,), (), For(i, 4, Store(a, i, Load(a, i - 1, "float32"))))
    with pytest.raises(LoopInterpError, match="-1"):
        run_program(prog, [np.ones(4, "float32")])


def test_allocated_buffers_start_as_nan_so_missing_writes_show():
    a = Buffer("a", (4,), "float32")
    tmp = Buffer("tmp", (4,), "float32", "local")
    i = Var("i")
    # Only writes tmp[0..1] but reads tmp[0..3]: the result must contain NaN.
    body = Allocate(
        tmp,
        seq(
            For(Var("w"), 2, Store(tmp, Const(0, "int32"), Const(3.0, "float32"))),
            For(i, 4, Store(a, i, Load(tmp, i, "float32"))),
        ),
    )
    out = np.zeros(4, "float32")
    run_program(Program("p", (a,), (), body), [out])
    assert out[0] == 3.0 and math.isnan(out[3])


def test_floordiv_floormod_follow_floor_semantics_and_select():
    a = Buffer("a", (6,), "int32")
    i = Var("i")
    x = i - 3
    val = floordiv(x, 2) * 10 + floormod(x, 2)
    body = For(i, 6, Store(a, i, if_then_else(i < 5, val, Const(99, "int32"))))
    out = np.zeros(6, "int32")
    run_program(Program("p", (a,), (), body), [out])
    exp = [(v // 2) * 10 + v % 2 for v in range(-3, 2)] + [99]
    np.testing.assert_array_equal(out, exp)


def test_nest_deeper_than_python_block_limit():
    a = Buffer("a", (1,), "int32")
    vars_ = [Var(f"v{k}") for k in range(25)]
    stmt = Store(a, Const(0, "int32"), Load(a, Const(0, "int32"), "int32") + 1)
    for v in reversed(vars_):
        stmt = For(v, 2 if v is vars_[0] else 1, stmt)
    out = np.zeros(1, "int32")
    run_program(Program("deep", (a,), (), stmt), [out])
    assert out[0] == 2


def test_compile_is_cached_and_argument_errors_name_params():
    a = Buffer("a", (3,), "float32")
    i = Var("i")
    prog = Program("p", (a,), (), For(i, 3, Store(a, i, Const(1.0, "float32"))))
    f1, src = compile_program(prog)
    f2, _ = compile_program(prog)
    assert f1 is f2 and "for" in src
    with pytest.raises(LoopInterpError, match="'a'"):
        run_program(prog, {})
    with pytest.raises(LoopInterpError, match="elements"):
        run_program(prog, [np.zeros(4, "float32")])
    unbound = Program("q", (a,), (), For(i, 3, Store(a, Var("i"), Const(1.0, "float32"))))
    with pytest.raises(LoopInterpError, match="outside any loop"):
        run_program(unbound, [np.zeros(3, "float32")])
    unbound = Program("q", (a,), (), For(i, 3, Store(a, Var("i"), Const(1.0, "float32"))))
    with pytest.raises(LoopInterpError, match="outside any loop"):
        run_program(unbound, [np.zeros(3, "float32")])


def test_select_evaluates_both_branches_if_then_else_only_one():
    from tensorir.expr import select

    a = Buffer("a", (4,), "float32")
    i = Var("i")
    safe = if_then_else(i >= 1, Load(a, i - 1, "float32"), Const(0.0, "float32"))
    prog = Program("p", (a,), (), For(i, 4, Store(a, i, safe + 1.0)))
    out = np.arange(4, dtype="float32")
    run_program(prog, [out])
    np.testing.assert_array_equal(out, [1, 2, 3, 4])
    unsafe = select(i >= 1, Load(a, i - 1, "float32"), Const(0.0, "float32"))
    prog2 = Program("q", (a,), (), For(i, 4, Store(a, i, unsafe)))
    with pytest.raises(LoopInterpError, match="out of bounds"):
        run_program(prog2, [out])


def _coop_program(guard_barrier: bool):
    """One block of 4 threads: each loads one element into shared memory, then reads its
    neighbour's; correct only if the barrier separates the two phases block-wide."""
    a = Buffer("a", (4,), "float32")
    b = Buffer("b", (4,), "float32")
    sh = Buffer("sh", (4,), "float32", "shared")
    t1, t2 = Var("t1"), Var("t2")
    load = For(t1, 4, Store(sh, t1, Load(a, t1, "float32")), "thread", "threadIdx.x")
    bar = Barrier()
    if guard_barrier:
        bar = If(t2 < 2, Barrier())
    use = Store(b, t2, Load(sh, floormod(t2 + 1, 4), "float32"))
    body = For(t2, 4, seq(Allocate(sh, seq(load, bar, use))), "thread", "threadIdx.x")
    # the same tag on both loops: on a GPU t1 and t2 are the same thread index
    return Program("coop", (a, b), (), body)


def test_simt_mode_runs_threads_in_lockstep_between_barriers():
    prog = _coop_program(False)
    x = _rng().standard_normal(4).astype("float32")
    out = np.zeros(4, "float32")
    run_program(prog, [x, out], simt=True)
    np.testing.assert_allclose(out, np.roll(x, -1))
    out2 = np.zeros(4, "float32")
    run_program(prog, [x, out2])  # serial: thread loops are plain loops, same result here
    np.testing.assert_allclose(out2, np.roll(x, -1))


def test_simt_mode_reports_a_divergent_barrier():
    prog = _coop_program(True)
    x = np.ones(4, "float32")
    with pytest.raises(LoopInterpError, match="barrier"):
        run_program(prog, [x, np.zeros(4, "float32")], simt=True)


def test_simt_mode_without_barrier_exposes_missing_sync():
    # Without the barrier thread 0 reads sh[1] before thread 1 wrote it: NaN shows up.
    a = Buffer("a", (2,), "float32")
    b = Buffer("b", (2,), "float32")
    sh = Buffer("sh", (2,), "float32", "shared")
    t = Var("t")
    body = For(
        t,
        2,
        Allocate(
            sh,
            seq(
                Store(sh, t, Load(a, t, "float32")),
                Store(b, t, Load(sh, floormod(t + 1, 2), "float32")),
            ),
        ),
        "thread",
        "threadIdx.x",
    )
    out = np.zeros(2, "float32")
    run_program(Program("nosync", (a, b), (), body), [np.ones(2, "float32"), out], simt=True)
    assert math.isnan(out[0]) and out[1] == 1.0
