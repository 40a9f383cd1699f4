"""The tensor-core sketch's double-buffered shared staging (``double_buffer`` pragma, cp.async)
without a GPU: the lowered loops hold two buffers, a parity index and a prologue; read as
scalar SIMT loops they compute the GEMM (and stop doing so when a barrier is dropped, so the
check can see a race); the validity check counts the doubled bytes; nvcc compiles cp.async
for sm_80 / sm_90 and none for sm_75."""

import random
import shutil
import subprocess

import numpy as np
import pytest

from autosched.hardware import HardwareParams
from autosched.search import state_utils as su
from autosched.search.annotate_gpu import gpu_context, sample_state_gpu
from autosched.search.params import SearchParams
from autosched.search.sketch import generate_sketches
from autosched.task import SearchTask
from codegen.cuda import build_cuda
from tensorir import steps as st
from tensorir import te
from tensorir.dag import ComputeDAG
from tensorir.expr import Binary, walk
from tensorir.loop_interp import run_program
from tensorir.loops import Allocate, Barrier, For, If, Load, Seq, Store, walk_stmts
from tensorir.lower import lower
from tensorir.ops.dense import batch_matmul, dense
from tensorir.passes.double_buffer import (
    DOUBLE_BUFFER,
    PIPELINE_PRAGMAS,
    double_buffer_loop,
    is_double_buffered,
)
from tensorir.passes.tensor_core import fragment_plan
from tensorir.passes.verify_gpu import gpu_program_errors, kernels
from tensorir.schedule import replay

NVCC = shutil.which("nvcc") or shutil.which("nvcc", path="/usr/local/cuda/bin")
HW = HardwareParams(num_cores=1, max_shared_memory_per_block=49152)


def dense_task(m=32, n=48, k=96, target="cuda"):
    a = te.placeholder((m, k), "float16", name="A")
    b = te.placeholder((n, k), "float16", name="B")
    return SearchTask(ComputeDAG([a, b, dense(a, b, out_dtype="float32")]), target=target,
                      hardware_params=HW)  # fmt: skip


def bmm_task():
    x = te.placeholder((2, 32, 64), "float16", name="X")
    y = te.placeholder((2, 32, 64), "float16", name="Y")
    out = batch_matmul(x, y, out_dtype="float32", transpose_b=True)
    return SearchTask(ComputeDAG([x, y, out]), target="cuda", hardware_params=HW)


def pipelined(prog) -> list:
    return [s for s in walk_stmts(prog.body) if is_double_buffered(s)]


def has_pragma(state) -> bool:
    return any(p in PIPELINE_PRAGMAS for s in state.stages for _, p in s.pragmas)


def pipelined_states(task, n=2, seed=0, params=None):
    """Sampled states whose k-tile loop runs at least twice (so there is a pipeline), double
    buffered unless ``params`` allow deeper pipelines."""
    params = params or SearchParams(gpu_tensor_core_pipeline=2)
    (sketch,) = generate_sketches(task, params=params)
    ctx, rng = gpu_context(task, params), random.Random(seed)
    out = []
    for _ in range(300):
        s = sample_state_gpu(ctx, sketch, rng, task)
        if s is not None and pipelined(lower(s)):
            out.append(s)
            if len(out) == n:
                return out
    raise AssertionError("no sampled state has a k-tile loop of extent >= 2")


def single_buffered(state):
    """The same schedule without the double_buffer pragma."""
    out = su.single_buffered(state)
    assert out is not None and len(out.steps) == len(state.steps) - 1
    return out


def shared_allocs(prog) -> dict:
    return {s.buffer.name: s.buffer for s in walk_stmts(prog.body)
            if isinstance(s, Allocate) and s.buffer.scope == "shared"}  # fmt: skip


def random_args(dag, seed=3):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, t.shape).astype(t.dtype) for t in dag.input_tensors]


def reference(args):
    x, y = (a.astype(np.float32) for a in args)
    return x @ np.swapaxes(y, -1, -2)


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
    two, one = shared_allocs(prog), shared_allocs(flat)
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
    args = random_args(task.compute_dag)
    want = reference(args)
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
    args = random_args(task.compute_dag)
    (s,) = pipelined_states(task, 1, seed=2)
    out = np.full((32, 48), np.nan, np.float32)
    run_program(_drop_loop_barrier(lower(s)), [*args, out], simt=True)
    assert not np.allclose(out, reference(args), rtol=1e-3, atol=1e-3)


def test_the_validity_check_counts_the_doubled_shared_memory():
    (s,) = pipelined_states(dense_task(), 1)
    prog, flat = lower(s), lower(single_buffered(s))
    staged = sum(b.nbytes for b in shared_allocs(flat).values())
    (info,) = kernels(flat)
    stores = fragment_plan(info.stmt, info.extents)[0].staging_bytes  # fragment store tiles
    # Room for one copy of the tiles (and the fragment store tiles), not for two.
    between = HW.as_limits() | {"max_shared_memory_per_block": stores + staged + staged // 2}
    assert gpu_program_errors(flat, between) == []
    errs = gpu_program_errors(prog, between)
    assert any("shared memory" in e for e in errs), errs
    # verify_gpu reads unsimplified programs: the same doubling there.
    assert gpu_program_errors(lower(s, simplify=False), between)


def test_a_k_loop_of_one_tile_is_left_alone():
    task = dense_task(k=32)
    (sketch,) = generate_sketches(task)
    ctx, rng = gpu_context(task, SearchParams()), random.Random(0)
    seen = 0
    for _ in range(100):
        s = sample_state_gpu(ctx, sketch, rng, task)
        if s is None or pipelined(lower(s)):
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
    src, ptx = tmp_path / f"k_{arch}.cu", tmp_path / f"k_{arch}.ptx"
    src.write_text(code)
    subprocess.run([NVCC, "-ptx", f"-arch={arch}", str(src), "-o", str(ptx)], check=True,
                   capture_output=True)  # fmt: skip
    return ptx.read_text()


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
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


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
def test_sm75_code_keeps_plain_copies(tmp_path):
    (s,) = pipelined_states(dense_task(), 1)
    code = build_cuda(lower(s), arch="sm_75").code
    assert "cp_async" not in code and "*(uint4*)&A_shared[" in code
    assert "cp.async" not in _ptx(code, "sm_75", tmp_path)


def test_single_buffered_kernels_keep_synchronous_copies():
    (s,) = pipelined_states(dense_task(), 1)
    code = build_cuda(lower(single_buffered(s)), arch="sm_80").code
    assert "cp_async" not in code and "*(uint4*)&A_shared[" in code


def test_tiles_whose_doubled_staging_does_not_fit_are_sampled_single_buffered():
    from autosched.search import annotate_gpu as ag

    hw = HardwareParams(num_cores=1, max_shared_memory_per_block=12 * 1024)
    a = te.placeholder((64, 128), "float16", name="A")
    b = te.placeholder((64, 128), "float16", name="B")
    task = SearchTask(ComputeDAG([a, b, dense(a, b, out_dtype="float32")]), target="cuda",
                      hardware_params=hw)  # fmt: skip
    (sketch,) = generate_sketches(task)
    ctx, rng = gpu_context(task, SearchParams()), random.Random(0)
    kinds = set()
    for _ in range(40):
        s = ag.sample_state_gpu(ctx, sketch, rng, task)
        if s is None:
            continue
        assert ag.gpu_state_errors(task, s) == []
        if not has_pragma(s):  # fell back: the same tiles double-buffered do not fit
            redo = [x for x in sketch.steps if isinstance(x, st.PragmaStep)
                    and x.pragma_type == "double_buffer"]  # fmt: skip
            assert len(redo) == 1
            again = replay(s.dag, [*s.steps, redo[0]])
            assert any("shared memory" in e for e in ag.gpu_state_errors(task, again))
        kinds.add(has_pragma(s))
    assert kinds == {True, False}
