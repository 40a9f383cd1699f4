"""Loads whose index is data (``A[B[i], j]``, embedding lookups, GatherElements): lowering
wraps the index in a CheckedIndex; compiled LLVM kernels report an out-of-range index as an
IndexOutOfRangeError naming the value and the tensor (issue 27 section 2), never read outside
the table, and drop the check under AUTOSCHED_CHECK_INDICES=0; CUDA / OpenCL C clamp it."""

import numpy as np
import pytest

import autosched as ansor
from codegen.cuda import build_cuda
from codegen.opencl import build_opencl
from runtime.errors import IndexOutOfRangeError
from tensorir import te
from tensorir.dag import ComputeDAG
from tensorir.loop_interp import run_program
from tensorir.loops import CheckedIndex
from tensorir.lower import lower
from tensorir.ops.indexing import gather

RNG = np.random.default_rng(27)
ROWS, COLS, N = 10, 4, 3


def lookup_dag(index_dtype="int64"):
    A = te.placeholder((ROWS, COLS), name="table")
    B = te.placeholder((N,), name="ids", dtype=index_dtype)
    C = te.compute((N, COLS), lambda i, j: A[B[i], j] * 2.0, name="C")
    return ComputeDAG([A, B, C])


def arrays(ids, dtype="int64"):
    a = RNG.standard_normal((ROWS, COLS)).astype(np.float32)
    return a, np.asarray(ids, dtype=dtype), np.zeros((N, COLS), np.float32)


def test_lowering_checks_only_the_data_dependent_index():
    prog = lower(lookup_dag())
    checks = [n for n in _exprs(prog) if isinstance(n, CheckedIndex)]
    assert [(c.tensor, c.axis, c.extent) for c in checks] == [("table", 0, ROWS)]


def _exprs(prog):
    from tensorir.expr import walk
    from tensorir.loops import Store, walk_stmts

    for s in walk_stmts(prog.body):
        if isinstance(s, Store):
            yield from walk(s.value)


@pytest.mark.parametrize("index_dtype", ["int64", "int32"])
def test_llvm_kernel_reports_out_of_range_ids(index_dtype):
    m = ansor.build(lookup_dag(index_dtype).get_init_state(), "llvm")
    good = RNG.integers(0, ROWS, N)
    a, b, c = arrays(good, index_dtype)
    m(a, b, c)
    np.testing.assert_allclose(c, a[good] * 2.0)
    big = [ROWS, -1, 2**31 - 1, -(2**31)] + ([2**40, -(2**63)] if index_dtype == "int64" else [])
    for bad in big:
        ids = good.copy()
        ids[1] = bad
        with pytest.raises(IndexOutOfRangeError, match=rf"index {bad} is out of range for axis "
                           rf"0 of tensor 'table' \(size {ROWS}"):  # fmt: skip
            m(a, np.asarray(ids, index_dtype), c)
    m(a, b, c)  # the error was cleared: a valid run passes again
    np.testing.assert_allclose(c, a[good] * 2.0)


def test_parallel_vectorized_gather_checks_every_lane():
    A = te.placeholder((4, 64), name="A")
    idx = te.placeholder((4, 64), name="idx", dtype="int64")
    C = gather(A, 1, idx)
    dag = ComputeDAG([A, idx, C])
    s = dag.get_init_state()
    s.parallel(C, s[C].iters[0])
    s.vectorize(C, s[C].iters[1])
    m = ansor.build(s, "llvm")
    a = RNG.standard_normal((4, 64)).astype(np.float32)
    k = RNG.integers(-64, 64, (4, 64)).astype(np.int64)
    c = np.zeros((4, 64), np.float32)
    m(a, k, c)
    np.testing.assert_allclose(c, np.take_along_axis(a, np.where(k < 0, k + 64, k), 1))
    k[2, 37] = 64
    with pytest.raises(
        IndexOutOfRangeError, match="index 64 is out of range for axis 1 of tensor 'A'"
    ):
        m(a, k, c)


def test_table_computed_at_the_lookup_loop_is_never_read_outside():
    # Bound inference sizes T's buffer to the one row the lookup reads, clamping the id; the
    # checked index clamps the same way, so a bad id stays inside that one-row buffer.
    A = te.placeholder((ROWS, COLS), name="A")
    B = te.placeholder((N,), name="ids", dtype="int64")
    T = te.compute((ROWS, COLS), lambda r, c: A[r, c] * 2.0, name="T")
    C = te.compute((N, COLS), lambda i, j: T[B[i], j], name="C")
    s = ComputeDAG([A, B, C]).get_init_state()
    s.compute_at(T, C, s[C].iters[0])
    m = ansor.build(s, "llvm")
    good = RNG.integers(0, ROWS, N)
    a, b, c = arrays(good)
    m(a, b, c)
    np.testing.assert_allclose(c, a[good] * 2.0)
    for bad in (ROWS, 2**31 - 1, -(2**40)):
        with pytest.raises(IndexOutOfRangeError, match=f"index {bad} is out of range"):
            m(a, np.array([1, bad, 2], np.int64), c)
    prog = str(lower(s))
    assert "allocate T[4]" in prog  # one row: an unclamped fallback would read outside it


def test_switch_drops_the_check(monkeypatch):
    from autosched.kernel import generate_source

    state = lookup_dag().get_init_state()
    assert "__index_error" in generate_source(state, "llvm").code
    monkeypatch.setenv("AUTOSCHED_CHECK_INDICES", "0")
    src = generate_source(state, "llvm")
    assert "__index_error" not in src.code
    m = ansor.build(state, "llvm")
    good = RNG.integers(0, ROWS, N)
    a, b, c = arrays(good)
    m(a, b, c)
    np.testing.assert_allclose(c, a[good] * 2.0)
    monkeypatch.setenv("AUTOSCHED_CHECK_INDICES", "maybe")
    with pytest.raises(ValueError, match="AUTOSCHED_CHECK_INDICES='maybe' is invalid"):
        generate_source(state, "llvm")


def test_loop_interpreter_raises_index_error():
    prog = lower(lookup_dag())
    a, b, c = arrays([1, 12, 2])
    with pytest.raises(IndexError, match="index 12 is out of range for axis 0 of tensor 'table'"):
        run_program(prog, [a, b, c])


def _gpu_state():
    dag = lookup_dag()
    s = dag.get_init_state()
    C = dag.compute_ops[-1]
    s.bind(C, s[C].iters[0], "blockIdx.x")
    s.bind(C, s[C].iters[1], "threadIdx.x")
    return s


def test_cuda_and_opencl_emit_int64_index_arithmetic_with_a_clamp():
    prog = lower(_gpu_state())
    cuda = build_cuda(prog).code
    assert "long long checked_index_i64(long long x, long long n)" in cuda
    assert "checked_index_i64(ids[i], 10LL)" in cuda
    ocl = build_opencl(prog).code
    assert "long checked_index_i64(long x, long n)" in ocl and "(ulong)x < (ulong)n" in ocl


def test_opencl_kernel_never_reads_outside_the_table():
    cl = pytest.importorskip("pyopencl")  # noqa: F841
    from runtime.opencl import OpenCLBackend

    try:
        backend = OpenCLBackend(0)
    except RuntimeError as err:
        pytest.skip(f"no OpenCL device: {err}")
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from gpu.programs import run_on_backend

    src = build_opencl(lower(_gpu_state())).as_dict()
    a, b, _ = arrays([3, 2**31 - 1, -5])
    out = run_on_backend(backend, src, {"table": a, "ids": b})["C"].reshape(N, COLS)
    # out-of-range ids read the nearest row (no error reporting on GPUs yet), never past it
    np.testing.assert_allclose(out, np.stack([a[3], a[ROWS - 1], a[0]]) * 2.0)


def test_measurement_inputs_keep_ids_inside_the_table():
    from autosched.measure.worker import random_inputs
    from tensorir.ops.indexing import take

    table = te.placeholder((3, 4), name="types")
    ids = te.placeholder((2, 50), name="token_type_ids", dtype="int64")
    other = te.placeholder((5,), name="n", dtype="int32")
    out = take(table, ids, 0, "fast")
    plus = te.compute((2, 50, 4), lambda i, j, k: out[i, j, k] + other[k % 5].astype("float32"))
    dag = ComputeDAG([table, ids, other, plus])
    arrs = dict(zip([t.name for t in dag.input_tensors], random_inputs(dag)))
    assert arrs["token_type_ids"].min() >= 0 and arrs["token_type_ids"].max() == 2
    assert arrs["n"].min() >= 1  # other integer inputs keep their rule
    m = ansor.build(dag.get_init_state(), "llvm")
    res = np.zeros((2, 50, 4), np.float32)
    m(*[arrs[t.name] for t in dag.input_tensors], res)  # no IndexOutOfRangeError
    want = arrs["types"][arrs["token_type_ids"]] + arrs["n"][np.arange(4) % 5]
    np.testing.assert_allclose(res, want)
