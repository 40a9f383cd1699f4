"""The tensor-core sketch's double-buffered shared staging (``double_buffer`` pragma, cp.async)
without a GPU: the lowered loops hold two buffers, a parity index and a prologue; read as
scalar SIMT loops they compute the GEMM (and stop doing so when a barrier is dropped, so the
check can see a race); the validity check counts the doubled bytes; nvcc compiles cp.async
for sm_80 / sm_90 and none for sm_75."""

import json
import random

import numpy as np
import pytest

from autosched.hardware import HardwareParams
from autosched.search import state_utils as su
from autosched.search.annotate_gpu import gpu_context, sample_state_gpu
from autosched.search.annotate_gpu import gpu_state_errors as ag_errors
from autosched.search.params import SearchParams
from autosched.search.sketch import generate_sketches
from codegen.cuda import build_cuda
from tensorir import steps as st
from tensorir.expr import Binary, walk
from tensorir.loop_interp import run_program
from tensorir.loops import Allocate, Barrier, For, If, Load, Seq, Store, walk_stmts
from tensorir.lower import lower
from tensorir.passes.double_buffer import (
    DOUBLE_BUFFER,
    PIPELINE_PRAGMAS,
    PIPELINE_PROLOGUE,
    double_buffer_loop,
    is_double_buffered,
    pipeline_stages,
)
from tensorir.passes.tensor_core import fragment_plan
from tensorir.passes.verify_gpu import gpu_program_errors, kernels
from tensorir.schedule import replay
from tests.autosched.tensor_core_helpers import (
    GPU_HW,
    NVCC,
    bmm_tensors,
    conv_dag,
    conv_ref,
    dense_tensors,
    first_states,
    gemm_reference,
    gpu_task,
    needs_nvcc,
    nvcc_ptx,
    random_args,
    sampled_states,
    shared_allocations,
)


def dense_task(m=32, n=48, k=96, target="cuda"):
    return gpu_task(dense_tensors(m, n, k), target)


def bmm_task():
    return gpu_task(bmm_tensors(2, 32, 32, 64))


def pipelined(prog) -> list:
    return [s for s in walk_stmts(prog.body) if is_double_buffered(s)]


def has_pragma(state) -> bool:
    return any(p in PIPELINE_PRAGMAS for s in state.stages for _, p in s.pragmas)


def pipelined_states(task, n=2, seed=0, params=None):
    """Sampled states whose k-tile loop runs at least twice (so there is a pipeline), double
    buffered unless ``params`` allow deeper pipelines."""
    params = params or SearchParams(gpu_tensor_core_pipeline=2)
    (sketch,) = generate_sketches(task, params=params)
    states = sampled_states(task, sketch, seed, tries=300, params=params)
    return first_states((s for s in states if pipelined(lower(s))), n,
                        "sampled states with a k-tile loop of extent >= 2")  # fmt: skip


def single_buffered(state):
    """The same schedule without the double_buffer pragma."""
    out = su.single_buffered(state)
    assert out is not None and len(out.steps) == len(state.steps) - 1
    return out


def test_the_rule_pipelines_by_default_and_the_switch_and_old_archs_turn_it_off():
    assert all(has_pragma(s) for s in generate_sketches(dense_task()))
    for sk in generate_sketches(dense_task(target="cuda -arch=sm_90")):
        assert has_pragma(sk)
    for sk in generate_sketches(dense_task(target="cuda -arch=sm_75")):  # no cp.async
        assert not has_pragma(sk)
    off = SearchParams(gpu_tensor_core_pipeline=1)
    assert not any(has_pragma(s) for s in generate_sketches(dense_task(), params=off))
    for bad in (0, 5, 2.5, True):
        with pytest.raises(ValueError, match=f"gpu_tensor_core_pipeline={bad}.*from 1 .* to 4"):
            generate_sketches(dense_task(), params=SearchParams(gpu_tensor_core_pipeline=bad))


def test_lowering_doubles_the_buffers_and_adds_the_parity_index_and_the_prologue():
    (s,) = pipelined_states(dense_task(), 1)
    prog, flat = lower(s), lower(single_buffered(s))
    (loop,) = pipelined(prog)
    assert not pipelined(flat)
    two, one = shared_allocations(prog), shared_allocations(flat)
    assert sorted(two) == sorted(one) and len(two) == 2
    for name, b in two.items():
        assert b.shape == (2, *one[name].shape) and b.nbytes == 2 * one[name].nbytes
    # One barrier per k tile instead of two: the one that ends the iteration.
    body = loop.body.stmts
    assert isinstance(body[-1], Barrier)
    assert sum(isinstance(x, Barrier) for x in walk_stmts(loop.body)) == 1
    # The copies of tile k + 1 are guarded and go to half (k + 1) % 2 ...
    ahead = body[0]
    assert isinstance(ahead, If) and "(k_0_0+1)<" in str(ahead.cond).replace(" ", "")
    copies = [x for x in walk_stmts(ahead.then) if isinstance(x, Store)]
    assert {x.buffer.name for x in copies} == set(two)
    for x in copies:
        mods = [n for n in walk(x.index) if isinstance(n, Binary) and n.op == "floormod"]
        assert any(str(m.a).replace(" ", "") == "(k_0_0+1)" and str(m.b) == "2" for m in mods)
    # ... while the fragment nest reads half k % 2.
    mma = [x for x in walk_stmts(loop.body) if isinstance(x, Store) and x not in copies]
    reads = [n for x in mma for n in walk(x.value)
             if isinstance(n, Load) and n.buffer.scope == "shared"]  # fmt: skip
    assert {n.buffer.name for n in reads} == set(two)
    assert all("floormod(k_0_0, 2)" in str(n.index) for n in reads)
    # The prologue: tile 0 into half 0, fenced by barriers, before the loop.
    enclosing = next(x for x in walk_stmts(prog.body)
                     if isinstance(x, Seq) and any(y is loop for y in x.stmts))  # fmt: skip
    k = next(i for i, y in enumerate(enclosing.stmts) if y is loop)
    assert isinstance(enclosing.stmts[k - 1], Barrier) and isinstance(enclosing.stmts[0], Barrier)
    prologue = [x for y in enclosing.stmts[1 : k - 1] for x in walk_stmts(y)
                if isinstance(x, Store)]  # fmt: skip
    assert {x.buffer.name for x in prologue} == set(two)
    assert not any("k_0_0" in str(x.index) or "k_0_0" in str(x.value) for x in prologue)


@pytest.mark.parametrize("make", [dense_task, bmm_task])
def test_the_pipelined_loops_compute_the_gemm_as_simt_scalar_code(make):
    task = make()
    args = random_args(task.compute_dag, seed=3)
    want = gemm_reference(args)
    for s in pipelined_states(task, 2, seed=1):
        out = np.full(want.shape, np.nan, np.float32)
        run_program(lower(s), [*args, out], simt=True)  # threads interleave at barriers
        np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-3)


def _drop_loop_barrier(prog):
    """``prog`` with the barrier that ends each pipelined iteration removed (a race)."""
    (loop,) = pipelined(prog)

    def fix(s):
        if s is loop:
            body = Seq(tuple(x for x in loop.body.stmts if not isinstance(x, Barrier)))
            return For(s.var, s.extent, body, s.kind, s.thread_tag, s.annotations)
        if isinstance(s, For):
            return For(s.var, s.extent, fix(s.body), s.kind, s.thread_tag, s.annotations)
        if isinstance(s, Allocate):
            return Allocate(s.buffer, fix(s.body))
        if isinstance(s, Seq):
            return Seq(tuple(fix(x) for x in s.stmts))
        if isinstance(s, If):
            return If(s.cond, fix(s.then), None if s.else_ is None else fix(s.else_))
        return s

    return type(prog)(prog.name, prog.params, prog.workspaces, fix(prog.body))


def test_the_simt_check_sees_the_race_a_missing_barrier_makes():
    task = dense_task(k=128)
    args = random_args(task.compute_dag, seed=3)
    (s,) = pipelined_states(task, 1, seed=2)
    out = np.full((32, 48), np.nan, np.float32)
    run_program(_drop_loop_barrier(lower(s)), [*args, out], simt=True)
    assert not np.allclose(out, gemm_reference(args), rtol=1e-3, atol=1e-3)


def test_the_validity_check_counts_the_doubled_shared_memory():
    (s,) = pipelined_states(dense_task(), 1)
    prog, flat = lower(s), lower(single_buffered(s))
    staged = sum(b.nbytes for b in shared_allocations(flat).values())
    (info,) = kernels(flat)
    stores = fragment_plan(info.stmt, info.extents)[0].staging_bytes  # fragment store tiles
    # Room for one copy of the tiles (and the fragment store tiles), not for two.
    between = GPU_HW.as_limits() | {"max_shared_memory_per_block": stores + staged + staged // 2}
    assert gpu_program_errors(flat, between) == []
    errs = gpu_program_errors(prog, between)
    assert any("shared memory" in e for e in errs), errs
    # verify_gpu reads unsimplified programs: the same doubling there.
    assert gpu_program_errors(lower(s, simplify=False), between)


def test_a_k_loop_of_one_tile_is_left_alone():
    task = dense_task(k=32)
    (sketch,) = generate_sketches(task)
    seen = 0
    for s in sampled_states(task, sketch, seed=0, tries=100):
        if pipelined(lower(s)):
            continue
        assert has_pragma(s)  # the k tile is the whole K: nothing to overlap
        assert str(lower(s)) == str(lower(single_buffered(s)))
        seen += 1
        if seen == 2:
            break
    assert seen == 2


def test_a_loop_of_another_shape_keeps_its_code_and_loses_the_pragma():
    from tensorir.expr import Var
    from tensorir.loops import Buffer

    k = Var("k")
    out = Buffer("out", (4,), "float32", "global")
    loop = For(k, 4, Store(out, k, Load(out, k, "float32")), "serial", None, (DOUBLE_BUFFER,))
    got = double_buffer_loop(loop)
    assert isinstance(got, For) and got.body is loop.body and DOUBLE_BUFFER not in got.annotations
    # Nor is a loop whose iterations are threads, even with the right body.
    (s,) = pipelined_states(dense_task(), 1)
    (flat_loop,) = [x for x in walk_stmts(lower(single_buffered(s)).body)
                    if isinstance(x, For) and x.var.name == "k_0_0"]  # fmt: skip
    bound = For(flat_loop.var, flat_loop.extent, flat_loop.body, "thread", "threadIdx.z",
                (DOUBLE_BUFFER,))  # fmt: skip
    got = double_buffer_loop(bound)
    assert isinstance(got, For) and got.body is bound.body and DOUBLE_BUFFER not in got.annotations
    ok = double_buffer_loop(For(flat_loop.var, flat_loop.extent, flat_loop.body, "serial", None,
                                (DOUBLE_BUFFER,)))  # fmt: skip
    assert any(is_double_buffered(x) for x in walk_stmts(ok))  # sequential: pipelined


def _ptx(code, arch, tmp_path):
    return nvcc_ptx(code, arch, tmp_path, f"k_{arch}")


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90", None])
def test_nvcc_compiles_cp_async_for_sm80_and_newer(arch, tmp_path):
    (s,) = pipelined_states(dense_task(), 1)
    code = build_cuda(lower(s), arch=arch).code
    assert "cp_async16(&A_shared[" in code and "cp_async16(&B_shared[" in code
    assert code.count("cp_async_wait_all();") == code.count("__syncthreads();")
    text = _ptx(code, arch or "sm_80", tmp_path)
    assert "cp.async.cg.shared.global" in text and "cp.async.wait_all" in text
    assert "wmma.mma.sync" in text
    if arch is None:  # unknown arch: the helpers fall back to plain copies before sm_80
        old = _ptx(code, "sm_75", tmp_path)
        assert "cp.async" not in old and "wmma.mma.sync" in old


@needs_nvcc
def test_sm75_code_keeps_plain_copies(tmp_path):
    (s,) = pipelined_states(dense_task(), 1)
    code = build_cuda(lower(s), arch="sm_75").code
    assert "cp_async" not in code and "*(uint4*)&A_shared[" in code
    assert "cp.async" not in _ptx(code, "sm_75", tmp_path)


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_90", None])
def test_a_padded_conv_gathers_its_im2col_words_with_zero_filling_cp_async(arch, tmp_path):
    """A 3x3 conv's im2col word is 16 bytes of one pixel or zeros off the image: in a pipeline
    it is a cp.async whose source size is 0 off the image (a zero fill), so the next tile's
    gather is in flight during this tile's mma like a dense operand's copy."""
    task = gpu_task(conv_dag("NHWC", 1, 16, 8, 16, 3, 1, 1))
    (s,) = pipelined_states(task, 1)
    code = build_cuda(lower(s), arch=arch).code
    assert "cp_async16_zfill(&data_im2col_shared[" in code and "on_image ?" in code
    assert "make_uint4(0u, 0u, 0u, 0u))" not in code.split("cp_async16_zfill(void")[-1]
    text = _ptx(code, arch or "sm_80", tmp_path)
    assert "cp.async.cg.shared.global" in text and "wmma.mma.sync" in text
    if arch is None:  # before sm_80 the helper is the synchronous word or zeros
        assert "cp.async" not in _ptx(code, "sm_75", tmp_path)


def test_a_pipelined_conv_gathering_as_cp_async_computes_the_conv():
    """The loops those cp.async words come from, run as SIMT code (each tile lands where the
    pipeline issues it) against numpy: the words of zeros are the image's padding."""
    dag = conv_dag("NHWC", 1, 16, 8, 16, 3, 1, 1)
    (s,) = pipelined_states(gpu_task(dag), 1, seed=1)
    args = random_args(dag, seed=5)
    out = np.zeros(dag.output_tensors[0].shape, np.float32)
    run_program(lower(s), [*args, out], simt=True)
    np.testing.assert_allclose(out, conv_ref(*args, 1, 1, 1, "NHWC"), rtol=1e-3, atol=1e-3)


def test_single_buffered_kernels_keep_synchronous_copies():
    (s,) = pipelined_states(dense_task(), 1)
    code = build_cuda(lower(single_buffered(s)), arch="sm_80").code
    assert "cp_async" not in code and "*(uint4*)&A_shared[" in code


def test_tiles_whose_doubled_staging_does_not_fit_are_sampled_single_buffered():
    from autosched.search import annotate_gpu as ag

    hw = HardwareParams(num_cores=1, max_shared_memory_per_block=12 * 1024)
    task = gpu_task(dense_tensors(64, 64, 128), hardware_params=hw)
    (sketch,) = generate_sketches(task)
    kinds = set()
    for s in sampled_states(task, sketch, seed=0, tries=40):
        assert ag.gpu_state_errors(task, s) == []
        if not has_pragma(s):  # fell back: the same tiles double-buffered do not fit
            redo = [x for x in sketch.steps if isinstance(x, st.PragmaStep)
                    and x.pragma_type == "double_buffer"]  # fmt: skip
            assert len(redo) == 1
            again = replay(s.dag, [*s.steps, redo[0]])
            assert any("shared memory" in e for e in ag.gpu_state_errors(task, again))
        kinds.add(has_pragma(s))
    assert kinds == {True, False}


# ---------------------------------------------------------------- 3 and 4 stage pipelines


def _map(s, f):
    """``s`` with its statements passed through ``f`` top-down: ``f`` returns its argument (then
    its children are mapped), another statement (used as is) or None (dropped)."""
    new = f(s)
    if new is not s:
        return new
    if isinstance(s, For):
        return For(s.var, s.extent, _map(s.body, f), s.kind, s.thread_tag, s.annotations)
    if isinstance(s, Allocate):
        return Allocate(s.buffer, _map(s.body, f))
    if isinstance(s, Seq):
        return Seq(tuple(y for y in (_map(x, f) for x in s.stmts) if y is not None))
    if isinstance(s, If):
        return If(s.cond, _map(s.then, f), None if s.else_ is None else _map(s.else_, f))
    return s


def _shift(s, k, by):
    """``s`` with loop variable ``k`` replaced by ``k - by`` in every expression."""
    from tensorir.expr import Const
    from tensorir.transform import substitute

    def fix(e):
        return substitute(e, {k: k - Const(by, "int32")})

    def one(x):
        if isinstance(x, Store):
            return Store(x.buffer, fix(x.index), fix(x.value))
        if isinstance(x, If):
            return If(
                fix(x.cond), _map(x.then, one), None if x.else_ is None else _map(x.else_, one)
            )
        return x

    return _map(s, one)


def latest_landing(prog, wait: int):
    """``prog`` with every tile's copies landing as late as ``cp.async.wait_group wait``
    allows (the interpreter otherwise runs them where they are issued): before the barrier
    that ends iteration ``k`` of an N-stage loop, the ``N - 1 + k + 1`` tiles committed so far
    are done but for the newest ``wait``, so tile ``k + N - 1 - wait`` lands there, and the
    prologue's barrier only sees tiles ``0 .. N - 2 - wait``."""
    (loop,) = pipelined(prog)
    n, k = pipeline_stages(loop), loop.var
    ahead, *compute, bar = loop.body.stmts
    assert isinstance(ahead, If) and isinstance(bar, Barrier)
    landed = _shift(ahead, k, wait)  # tile k + N - 1 - wait, into its buffer, if < K
    body = Seq((*compute, landed, bar))

    def one(x):
        if x is loop:
            return For(k, loop.extent, body, loop.kind, loop.thread_tag, loop.annotations)
        if isinstance(x, For) and any(a[0] == PIPELINE_PROLOGUE for a in x.annotations):
            keep = n - 1 - wait
            return For(x.var, keep, x.body, x.kind, x.thread_tag, x.annotations) if keep else None
        return x

    return type(prog)(prog.name, prog.params, prog.workspaces, _map(prog.body, one))


def deep_states(task, stages, n=1, seed=0):
    """Double-buffered sampled states whose k loop has at least ``stages`` tiles (so that the
    loop issues copies), given ``stages`` stages."""
    params = SearchParams(gpu_tensor_core_pipeline=2)
    (sketch,) = generate_sketches(task, params=params)
    ctx, rng = gpu_context(task, params), random.Random(seed)
    out = []
    for _ in range(300):
        s = sample_state_gpu(ctx, sketch, rng, task)
        loops = pipelined(lower(s)) if s is not None else []
        if loops and loops[0].extent >= stages:
            out.append(su.with_pipeline_stages(s, stages))
            if len(out) == n:
                return out
    raise AssertionError(f"no sampled state has a k-tile loop of extent >= {stages}")


@pytest.mark.parametrize("stages", [3, 4])
def test_n_stage_lowering_has_n_buffers_a_prologue_loop_and_one_barrier(stages):
    (s,) = deep_states(dense_task(k=128), stages, seed=2)
    assert su.pipeline_stages(s) == stages
    prog, flat = lower(s), lower(single_buffered(s))
    (loop,) = pipelined(prog)
    assert pipeline_stages(loop) == stages and loop.extent >= 2
    many, one = shared_allocations(prog), shared_allocations(flat)
    assert sorted(many) == sorted(one) and len(many) == 2
    for name, b in many.items():
        assert b.shape == (stages, *one[name].shape)
    assert sum(isinstance(x, Barrier) for x in walk_stmts(loop.body)) == 1
    ahead = loop.body.stmts[0]
    assert isinstance(ahead, If) and f"(k_0_0+{stages - 1})<" in str(ahead.cond).replace(" ", "")
    for x in (x for x in walk_stmts(ahead.then) if isinstance(x, Store)):
        mods = [m for m in walk(x.index) if isinstance(m, Binary) and m.op == "floormod"]
        assert any(str(m.b) == str(stages) for m in mods)
    (pro,) = [x for x in walk_stmts(prog.body) if isinstance(x, For)
              and (PIPELINE_PROLOGUE, stages) in x.annotations]  # fmt: skip
    assert pro.extent == stages - 1
    assert {x.buffer.name for x in walk_stmts(pro.body) if isinstance(x, Store)} == set(many)


@pytest.mark.parametrize("make", [dense_task, bmm_task])
@pytest.mark.parametrize("stages", [3, 4])
def test_n_stage_loops_compute_the_gemm_however_late_the_wait_lets_tiles_land(make, stages):
    task = make()
    args = random_args(task.compute_dag)
    want = gemm_reference(args)
    for s in deep_states(task, stages, 2, seed=1):
        prog = lower(s)
        for model in (prog, latest_landing(prog, stages - 2)):  # issue time / wait time
            out = np.full(want.shape, np.nan, np.float32)
            run_program(model, [*args, out], simt=True)
            np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("stages", [3, 4])
def test_the_simt_check_sees_a_missing_barrier_and_a_too_loose_wait(stages):
    task = dense_task(k=128)
    args = random_args(task.compute_dag)
    (s,) = deep_states(task, stages, seed=2)
    prog = lower(s)
    for broken in (_drop_loop_barrier(prog), latest_landing(prog, stages - 1)):
        out = np.full((32, 48), np.nan, np.float32)
        run_program(broken, [*args, out], simt=True)
        assert not np.allclose(out, gemm_reference(args), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("stages", [3, 4])
def test_n_stage_cuda_commits_a_group_per_tile_and_waits_for_all_but_n_minus_2(stages, tmp_path):
    (s,) = deep_states(dense_task(k=128), stages, seed=2)
    code = build_cuda(lower(s), arch="sm_80").code
    # One commit in the prologue loop's body, one after the guarded copies of each iteration.
    assert code.count("cp_async_commit();") == 2
    wait = f"cp_async_wait_group{stages - 2}();"
    assert code.count(wait) == code.count("__syncthreads();") and "cp_async_wait_all" not in code
    loop = code[code.index("for (int k_0_0 = 0;") :]
    assert loop.index("cp_async16(&") < loop.index("cp_async_commit();") < loop.index("wmma::mma")
    assert "cp_async" not in build_cuda(lower(s), arch="sm_75").code
    if NVCC is not None:
        text = _ptx(code, "sm_80", tmp_path)
        assert "cp.async.commit_group" in text and f"cp.async.wait_group {stages - 2}" in text
        assert "cp.async.wait_all" not in text and "wmma.mma.sync" in text


def test_a_depth_3_state_round_trips_through_the_steps_json_and_the_records_log(tmp_path):
    from autosched.measure.data import MeasureInput, MeasureResult
    from autosched.measure.records import load_records, save_records

    task = dense_task()
    (s,) = deep_states(task, 3)
    data = json.loads(json.dumps(st.steps_to_json(s.steps)))
    assert ["PR", *data[su.pipeline_steps(s.steps)[0]][1:3], "software_pipeline_3"] in data
    again = replay(s.dag, st.steps_from_json(data))
    assert su.pipeline_stages(again) == 3 and str(lower(again)) == str(lower(s))
    assert str(again) == str(s)  # renaming the pragma is what replaying does
    log = tmp_path / "r.json"
    save_records(log, [MeasureInput(task, s)], [MeasureResult((1e-3,))])
    ((inp, _),) = load_records(log, dags={task.workload_key: task.compute_dag})
    back = inp.state.to_state(task.compute_dag)
    assert su.pipeline_stages(back) == 3 and str(lower(back)) == str(lower(s))


def test_mutation_changes_the_depth_among_those_that_fit():
    from autosched.search.mutation import mutate, mutate_pipeline_depth

    task = dense_task(k=128)
    params = SearchParams(gpu_tensor_core_pipeline=4)
    ctx = gpu_context(task, params)
    (s,) = pipelined_states(task, 1, seed=2)
    rng, seen = random.Random(0), set()
    for _ in range(12):
        t = mutate_pipeline_depth(ctx, s, rng)
        assert t is not None and su.pipeline_steps(t.steps) == su.pipeline_steps(s.steps)
        seen.add(su.pipeline_stages(t))
        assert lower(t) is not None and [x for x in t.steps if x not in s.steps]
    assert seen == {3, 4}  # never the depth it had (2)
    # The search's mutation offers the rule only where the depth is a choice.
    picked = {su.pipeline_stages(m) for m in (mutate(task, s, random.Random(i), params)
                                             for i in range(60)) if m is not None}  # fmt: skip
    assert {3, 4} & picked
    fixed = SearchParams(gpu_tensor_core_pipeline=2)
    assert mutate_pipeline_depth(gpu_context(task, fixed), s, rng) is None
    assert all(m is None or su.pipeline_stages(m) == 2
               for m in (mutate(task, s, random.Random(i), fixed) for i in range(30)))  # fmt: skip


def test_sampling_draws_only_depths_whose_staging_fits():
    from autosched.search.annotate_gpu import gpu_state_errors, pipeline_depth_choices

    task = dense_task(k=128)
    (s,) = pipelined_states(task, 1, seed=2)
    flat = lower(single_buffered(s))
    staged = sum(b.nbytes for b in shared_allocations(flat).values())
    (info,) = kernels(flat)
    stores = fragment_plan(info.stmt, info.extents)[0].staging_bytes
    # Room for 3 copies of the tiles but not 4: the validity check rejects depth 4 ...
    hw = HardwareParams(num_cores=1, max_shared_memory_per_block=stores + 3 * staged + staged // 2)
    small = gpu_task(task.compute_dag, hardware_params=hw)
    assert gpu_state_errors(small, su.with_pipeline_stages(s, 3)) == []
    errs = gpu_state_errors(small, su.with_pipeline_stages(s, 4))
    assert any("shared memory" in e for e in errs), errs
    # ... and the choices drawn from leave it out (the staging itself fits 3 times).
    ctx = gpu_context(small, SearchParams(gpu_tensor_core_pipeline=4))
    assert pipeline_depth_choices(ctx, s, staged) == [2, 3]
    assert pipeline_depth_choices(ctx, s, 2 * staged) == [2]
    assert pipeline_depth_choices(ctx, single_buffered(s), staged) == []


def test_sampled_depths_by_default_are_2_and_3_and_all_valid():
    task = dense_task(m=64, n=64, k=256)
    (sketch,) = generate_sketches(task)
    ctx, rng = gpu_context(task, SearchParams()), random.Random(0)
    depths = set()
    for _ in range(30):
        s = sample_state_gpu(ctx, sketch, rng, task)
        if s is not None:
            assert ag_errors(task, s) == []
            depths.add(su.pipeline_stages(s))
    assert {2, 3} <= depths and 4 not in depths


def test_no_deeper_pipeline_than_k_tiles_is_drawn():
    task = dense_task(k=96)  # k tiles of 16 or 32 elements: 6 or 3 of them (or 1: no loop)
    (sketch,) = generate_sketches(task)
    ctx, rng = gpu_context(task, SearchParams(gpu_tensor_core_pipeline=4)), random.Random(0)
    seen = set()
    for _ in range(40):
        s = sample_state_gpu(ctx, sketch, rng, task)
        loops = pipelined(lower(s)) if s is not None else []
        if loops:
            seen.add((loops[0].extent, su.pipeline_stages(s)))
            assert su.pipeline_stages(s) <= loops[0].extent
    assert (3, 3) in seen and (6, 4) in seen


def test_features_see_the_stages_and_their_shared_bytes():
    from autosched.cost_model.features import FEATURE_NAMES, slog, state_features

    task = dense_task(k=128)
    (two,) = pipelined_states(task, 1, seed=2)
    stages_col = FEATURE_NAMES.index("pipeline_stages")
    bytes_col = FEATURE_NAMES.index("pipeline_shared_bytes")
    staged = sum(b.nbytes for b in shared_allocations(lower(single_buffered(two))).values())
    for n in (2, 3, 4):
        s = two if n == 2 else su.with_pipeline_stages(two, n)
        x = state_features(task, s)
        inside = x[x[:, stages_col] != 0]
        # The shared copies and the mma's accumulator are inside the pipeline; the output not.
        assert 3 <= len(inside) < len(x)
        np.testing.assert_allclose(inside[:, stages_col], slog(n), rtol=1e-6)
        np.testing.assert_allclose(inside[:, bytes_col], slog(n * staged), rtol=1e-6)
    flat = state_features(task, single_buffered(two))
    assert not flat[:, stages_col].any() and not flat[:, bytes_col].any()
