"""runtime.cpu: the llvmlite backend, its parallel launcher, threads and timing."""

from __future__ import annotations

import ctypes
import gc
import os
import signal
import subprocess
import sys
import threading
import time
import weakref

import numpy as np
import pytest

import runtime
import runtime.cpu as cpu
from codegen.llvm import build_llvm
from tensorir.expr import Call, Var
from tensorir.loops import Buffer, For, Load, Program, Store

RNG = np.random.default_rng(99)


def heavy_parallel(n: int, inner: int) -> Program:
    """``inner`` times B[i] = tanh(B[i] + A[i]) with a parallel outer loop: a dependent chain
    (nothing to hoist or vectorize), compute bound, no shared data."""
    a, b = Buffer("A", (n,), "float32"), Buffer("B", (n,), "float32")
    i, j = Var("i"), Var("j")
    term = Call("tanh", (Load(b, i, "float32") + Load(a, i, "float32"),), "float32")
    body = For(j, inner, Store(b, i, term))
    return Program("heavy", (a, b), (), For(i, n, body, "parallel"))


@pytest.fixture
def restore_threads():
    before = cpu.get_num_threads()
    yield
    cpu.set_num_threads(before)


def test_backend_properties_and_launcher():
    props = runtime.device("cpu").properties
    assert props["num_cores"] == cpu.get_num_threads() >= 1
    assert props["vector_bits"] in (128, 256, 512) and props["name"]
    assert cpu.parallel_launcher() == "threadpool"  # ours unless AUTOSCHED_PARALLEL_LAUNCHER


def test_default_threads_from_environment(monkeypatch):
    monkeypatch.setenv("AUTOSCHED_NUM_THREADS", "3")
    assert cpu.default_num_threads() == 3
    monkeypatch.setenv("AUTOSCHED_NUM_THREADS", "many")
    with pytest.raises(ValueError, match="AUTOSCHED_NUM_THREADS"):
        cpu.default_num_threads()
    monkeypatch.delenv("AUTOSCHED_NUM_THREADS")
    assert cpu.default_num_threads() >= 1
    with pytest.raises(ValueError, match="positive int"):
        cpu.set_num_threads(0)


def test_alloc_alignment_and_copies():
    be = runtime.device("cpu").backend
    h = be.alloc(100)
    assert h.ctypes.data % cpu.ALIGNMENT == 0 and h.nbytes == 100
    x = RNG.standard_normal(25).astype("float32")
    be.copy_to_device(h, x)
    y = np.empty(25, "float32")
    be.copy_to_host(h, y)
    np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("threads", [1, 2, 5])
def test_parallel_results_do_not_depend_on_thread_count(threads, restore_threads):
    cpu.set_num_threads(threads)
    mod = runtime.load_module(**build_llvm(heavy_parallel(37, 3)).as_dict())
    a, b = RNG.standard_normal(37).astype("float32"), np.zeros(37, "float32")
    mod(a, b)
    ref = np.zeros(37)
    for _ in range(3):
        ref = np.tanh(ref + a)
    np.testing.assert_allclose(b, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("extent", [1, 2, 5, 64, 100_003])
def test_parallel_for_covers_every_iteration_once(threads, extent, restore_threads):
    # Ranges handed out by the pool (per-thread ranges, halved claims, stolen halves, and units
    # of several iterations past 65535) must tile [0, extent) exactly.
    cpu.set_num_threads(threads)
    hits = np.zeros(extent, np.int64)
    lock = threading.Lock()

    def task(closure, begin, end):
        assert 0 <= begin < end <= extent, (begin, end)
        with lock:
            hits[begin:end] += 1
            time.sleep(0.0002)  # let other threads claim and steal meanwhile

    cb = cpu._TASK(task)
    for _ in range(3):
        cpu.parallel_for(ctypes.cast(cb, ctypes.c_void_p).value, None, extent)
    np.testing.assert_array_equal(hits, np.full(extent, 3))


def test_legacy_launch_runs_every_task(restore_threads):
    # Object code built before autosched_parallel_for calls autosched_parallel_launch.
    cpu.set_num_threads(3)
    seen, lock = [], threading.Lock()

    def task(closure, tid, n):
        with lock:
            seen.append((tid, n))

    cb = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32)(task)
    launch = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32)(
        cpu._state["engine"].get_function_address(cpu.PARALLEL_LAUNCH_SYMBOL)
    )
    launch(ctypes.cast(cb, ctypes.c_void_p).value, None, 0)
    assert sorted(seen) == [(0, 3), (1, 3), (2, 3)]
    seen.clear()
    launch(ctypes.cast(cb, ctypes.c_void_p).value, None, 2)  # capped by max_tasks
    assert sorted(seen) == [(0, 2), (1, 2)]


def test_time_evaluator_positive_and_min_repeat_ms():
    mod = runtime.load_module(**build_llvm(heavy_parallel(8, 2)).as_dict())
    a, b = RNG.standard_normal(8).astype("float32"), np.zeros(8, "float32")
    res = mod.time_evaluator(number=1, repeat=2, min_repeat_ms=5)(a, b)
    assert len(res.results) == 2 and all(t > 0 for t in res.results)
    assert res.mean == pytest.approx(sum(res.results) / 2)


def test_two_threads_speed_up_a_parallel_loop(restore_threads):
    # Prints the speedup (the 2-core CI machine is shared, so no ratio is asserted).
    mod = runtime.load_module(**build_llvm(heavy_parallel(64, 2000)).as_dict())
    a, b = RNG.standard_normal(64).astype("float32"), np.zeros(64, "float32")
    times = {}
    for n in (1, 2):
        cpu.set_num_threads(n)
        times[n] = mod.time_evaluator(number=3, repeat=3)(a, b).median
    print(f"parallel loop: 1 thread {times[1] * 1e3:.2f} ms, 2 threads {times[2] * 1e3:.2f} ms, "
          f"speedup {times[1] / times[2]:.2f}x ({cpu.parallel_launcher()})")  # fmt: skip
    assert times[1] > 0 and times[2] > 0


def test_compiled_code_is_freed_with_its_module():
    mod = runtime.load_module(**build_llvm(heavy_parallel(4, 1)).as_dict())
    ref = weakref.ref(mod._compiled)
    del mod
    gc.collect()
    assert ref() is None  # the execution engine (and its machine code) went with it


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_parallel_code_works_in_a_forked_child(restore_threads):
    # Threads do not survive fork(): the child must start the pool's workers again, not hang.
    cpu.set_num_threads(2)
    mod = runtime.load_module(**build_llvm(heavy_parallel(16, 5)).as_dict())
    a, b = RNG.standard_normal(16).astype("float32"), np.zeros(16, "float32")
    mod(a, b)  # the parent has run a parallel region
    pid = os.fork()
    if pid == 0:  # child: exit code 0 only if the result is right
        b2 = np.zeros(16, "float32")
        try:
            mod(a, b2)
            os._exit(0 if np.allclose(b, b2) else 1)
        finally:
            os._exit(2)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    pytest.fail("a parallel loop hung in a forked child")


def test_openmp_launcher_end_to_end():
    # A fresh interpreter asking for libgomp (static ranges), kept for comparison.
    script = (
        "import numpy as np, runtime, runtime.cpu as cpu, sys\n"
        "sys.path.insert(0, 'tests/runtime')\n"
        "from test_cpu import heavy_parallel\n"
        "from codegen.llvm import build_llvm\n"
        "mod = runtime.load_module(**build_llvm(heavy_parallel(40, 2)).as_dict())\n"
        "a = np.linspace(-1, 1, 40, dtype='float32'); b = np.zeros(40, 'float32')\n"
        "mod(a, b)\n"
        "assert cpu.parallel_launcher() == 'openmp', cpu.parallel_launcher()\n"
        "assert np.allclose(b, np.tanh(np.tanh(a) + a), atol=1e-6)\n"
        "print('ok')\n"
    )
    env = dict(os.environ, AUTOSCHED_PARALLEL_LAUNCHER="openmp", AUTOSCHED_NUM_THREADS="3")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", script], env=env, cwd=root, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr


def test_pool_workers_stop_at_exit_and_loops_then_run_serially():
    # At exit the workers must leave the JIT-compiled loop before its code is freed.
    script = (
        "import numpy as np, runtime, runtime.cpu as cpu, sys, threading\n"
        "sys.path.insert(0, 'tests/runtime')\n"
        "from test_cpu import heavy_parallel\n"
        "from codegen.llvm import build_llvm\n"
        "cpu.set_num_threads(3)\n"
        "mod = runtime.load_module(**build_llvm(heavy_parallel(40, 2)).as_dict())\n"
        "a = np.linspace(-1, 1, 40, dtype='float32')\n"
        "for _ in range(2):\n"
        "    b = np.zeros(40, 'float32'); mod(a, b)\n"
        "    assert np.allclose(b, np.tanh(np.tanh(a) + a), atol=1e-6)\n"
        "    workers = [t for t in threading.enumerate() if t.name.startswith('autosched-cpu')]\n"
        "    print(len(workers), flush=True)\n"
        "    cpu._stop_workers()\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["2", "0"]  # 2 workers, then none (the loop ran serially)


def test_precompiled_object_runs_like_the_jit(restore_threads):
    # The tuner compiles in builder processes and ships object bytes to the measuring process:
    # linking those bytes must give the same function, parallel launcher and libm calls included.
    cpu.set_num_threads(2)
    src = build_llvm(heavy_parallel(41, 4)).as_dict()
    binary = cpu.compile_object(src["code"])
    assert isinstance(binary, bytes) and len(binary) > 0
    jit = runtime.load_module(**src)
    linked = runtime.load_module(**src, binary=binary)
    a = RNG.standard_normal(41).astype("float32")
    b1, b2 = RNG.standard_normal(41).astype("float32"), np.zeros(41, "float32")
    b2[:] = b1
    jit(a, b1)
    linked(a, b2)
    np.testing.assert_array_equal(b1, b2)


def test_loading_an_object_reads_the_arity_from_the_text():
    # With the object file the measuring process does not parse the IR: the kernel's arity
    # comes from its define line (the IR is parsed only where that line is unusual).
    src = build_llvm(heavy_parallel(8, 2)).as_dict()
    assert cpu._text_arity(src["code"], ("heavy",)) == {"heavy": 2}
    assert cpu._text_arity(src["code"], ("heav",)) is None  # a prefix is not the kernel
    assert cpu._text_arity('define i32 @"k"() {\n', ("k",)) == {"k": 0}
    assert cpu._text_arity("define void @k({ptr, i64} %s) {\n", ("k",)) is None
    binary = cpu.compile_object(src["code"])
    linked = runtime.load_module(**src, binary=binary)
    assert "define i32 @heavy(" in linked._compiled.ir  # parsed on demand
    a, b = RNG.standard_normal(8).astype("float32"), RNG.standard_normal(8).astype("float32")
    ref = b.copy()
    for _ in range(2):
        ref = np.tanh(ref + a)
    linked(a, b)
    np.testing.assert_allclose(b, ref, rtol=1e-5)
    with pytest.raises(runtime.errors.CompileError, match="'other' is not defined"):
        cpu.CPUBackend().compile(src["code"], ("other",), binary=binary)


def test_compile_object_rejects_bad_ir():
    with pytest.raises(runtime.errors.CompileError, match="LLVM rejected"):
        cpu.compile_object("define i32 @f( {")
