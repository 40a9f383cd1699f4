"""CUDA code generation: the text's structure, and nvcc accepts it for sm_90 (no GPU needed)."""

import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from codegen.cuda import build_cuda
from tensorir.expr import Const, Var, const
from tensorir.loops import Allocate, Buffer, For, Program, Store

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gpu.programs import (  # noqa: E402
    add_case,
    all_cases,
    bind,
    lowered_cases,
    matmul_case,
    two_stage_case,
)

NVCC = shutil.which("nvcc")


@pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize("case", all_cases() + lowered_cases(), ids=lambda c: c.name)
def test_nvcc_compiles_for_sm90(case, tmp_path):
    src = tmp_path / f"{case.name}.cu"
    src.write_text(build_cuda(case.program).code)
    ptx = tmp_path / f"{case.name}.ptx"
    r = subprocess.run(
        [NVCC, "-arch=sm_90", "--ptx", "-O3", str(src), "-o", str(ptx)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    text = ptx.read_text()
    assert f".entry {case.program.name}_kernel0(" in text  # extern "C": no name mangling


def test_launches_params_and_signature():
    src = build_cuda(add_case(1000, 128).program)
    assert src.lang == "cuda"
    assert [p.name for p in src.params] == ["A", "B", "C"]
    assert [(p.dtype, p.size) for p in src.params] == [("float32", 1000)] * 3
    (launch,) = src.launches
    assert launch.name == "add_tail_kernel0"
    assert launch.args == ("A", "B", "C")
    assert launch.grid == (8, 1, 1) and launch.block == (128, 1, 1)
    sig = next(line for line in src.code.splitlines() if "__global__" in line)
    assert sig.startswith('extern "C" __global__ void __launch_bounds__(128) add_tail_kernel0(')
    # inputs are const (read-only), the output is not; none alias
    assert "const float* __restrict__ A" in sig and "const float* __restrict__ B" in sig
    assert "float* __restrict__ C" in sig and "const float* __restrict__ C" not in sig
    assert "int bx = blockIdx.x;" in src.code and "int tx = threadIdx.x;" in src.code
    assert "if ((((bx * 128) + tx) < 1000))" in src.code


def test_two_kernels_and_a_workspace():
    src = build_cuda(two_stage_case().program)
    assert [w.name for w in src.workspaces] == ["T"]
    k0, k1 = src.launches
    assert (k0.name, k0.args, k0.grid, k0.block) == ("two_stage_kernel0", ("A", "T"), (10, 1, 1),
                                                       (32, 1, 1))  # fmt: skip
    assert (k1.args, k1.grid, k1.block) == (("A", "B", "C", "T"), (3, 1, 1), (128, 1, 1))
    assert "unsigned char* __restrict__ T" in src.code  # bools are stored as bytes


def _enclosing_ifs(code: str, needle: str) -> list[list[str]]:
    """For each line containing ``needle``, the `if (...)` headers of the blocks around it."""
    stack, out = [], []
    for line in code.splitlines():
        s = line.strip()
        if needle in s:
            out.append([h for h in stack if h.startswith("if")])
        if s.endswith("{"):
            stack.append(s)
        if s == "}":
            stack.pop()
    return out


def test_matmul_shared_barriers_vthread_unroll():
    code = build_cuda(matmul_case().program).code
    assert "__shared__ float A_shared[128];" in code
    assert "__shared__ float B_shared[128];" in code
    assert "float C_local[8];" in code
    assert code.count("__syncthreads();") == 2
    assert "#pragma unroll" in code
    assert "int by = blockIdx.y;" in code and "int ty = threadIdx.y;" in code
    # shared buffers are declared once, at the kernel's top, before any statement
    body = code.split("{", 1)[1].strip().splitlines()
    assert body[0].strip().startswith("__shared__") and body[1].strip().startswith("__shared__")


def test_guards_never_enclose_barriers():
    # compute uses 4 threadIdx.x values, the cooperative fetch all 8: the compute is guarded,
    # the fetch and both barriers are not.
    code = build_cuda(matmul_case(tx_extent=4).program).code
    assert "if (tx < 4)" in code
    for ifs in _enclosing_ifs(code, "__syncthreads();"):
        assert ifs == []
    for ifs in _enclosing_ifs(code, "A_shared[(((A_fo * 32)"):
        assert ifs == []
    for ifs in _enclosing_ifs(code, "C[("):
        assert ifs == ["if (tx < 4) {"]


def test_constants_are_c_literals():
    out = Buffer("O", (8,), "float32")
    o64 = Buffer("L", (2,), "int64")
    tx = Var("tx")
    vals = [const(1.5), const(-2.0), const(math.inf), const(-math.inf), const(math.nan),
            const(1e-7), const(3), const(-2**31)]  # fmt: skip
    stores = [Store(out, const(k), v.astype("float32")) for k, v in enumerate(vals)]
    stores += [Store(o64, const(0), Const(-5, "int64")), Store(o64, const(1), Const(7, "int64"))]
    from tensorir.loops import seq

    code = build_cuda(Program("c", (out, o64), (), bind([(tx, 1, "threadIdx.x")], seq(*stores))))
    text = code.code
    for lit in ("= 1.5f;", "= (-2.0f);", "= __int_as_float(0x7f800000);",
                "= (-__int_as_float(0x7f800000));", "= __int_as_float(0x7fc00000);", "= 1e-07f;",
                "((float)(3))", "((float)((-2147483647 - 1)))", "= (-5LL);", "= 7LL;"):  # fmt: skip
        assert lit in text, lit


def test_half_header_only_when_used():
    assert "#include <cuda_fp16.h>" not in build_cuda(add_case().program).code
    from gpu.programs import half_case

    code = build_cuda(half_case().program).code
    assert code.startswith("#include <cuda_fp16.h>")
    assert "__float2half((float)(expf(__half2float(" in code  # half math goes through float


def test_floor_division_helpers_only_where_signs_are_unknown():
    from gpu.programs import box3x3_case, int_case

    box = build_cuda(box3x3_case().program).code
    assert "floordiv_i32" not in box  # loop-var indices are non-negative: plain / and %
    assert re.search(r"\(\(bx \* 64\) \+ tx\) / 20\)", box)
    ints = build_cuda(int_case().program).code
    assert "floordiv_i32(A[" in ints and "floormod_i32(A[" in ints and "floordiv_i64(" in ints


def test_unbound_stage_is_rejected():
    a = Buffer("A", (4,), "float32")
    i = Var("i")
    with pytest.raises(ValueError, match="stage A .* is not bound to GPU threads; bind its outer"):
        build_cuda(Program("p", (a,), (), For(i, 4, Store(a, i, const(0.0)))))


def test_parallel_and_global_allocate_are_rejected():
    a = Buffer("A", (4,), "float32")
    t = Buffer("T", (4,), "float32")
    tx, j = Var("tx"), Var("j")
    par = bind([(tx, 4, "threadIdx.x")], For(j, 1, Store(a, tx, const(0.0)), "parallel"))
    with pytest.raises(ValueError, match="loop j is 'parallel'"):
        build_cuda(Program("p", (a,), (), par))
    glob = bind([(tx, 4, "threadIdx.x")], Allocate(t, Store(a, tx, const(0.0))))
    with pytest.raises(ValueError, match="buffer T is allocated in global memory"):
        build_cuda(Program("g", (a,), (), glob))


def test_unknown_buffer_is_rejected():
    a, t = Buffer("A", (4,), "float32"), Buffer("T", (4,), "float32")
    tx = Var("tx")
    from gpu.programs import ld

    body = bind([(tx, 4, "threadIdx.x")], Store(a, tx, ld(t, tx)))
    with pytest.raises(ValueError, match=r"uses buffers \['T'\]"):
        build_cuda(Program("u", (a,), (), body))


# ----------------------------------------------------------------------------- virtual threads


def _loops_around(stmt, pred):
    """For each statement matching ``pred``: the vars of the For loops enclosing it."""
    from tensorir.loops import stmt_children

    out = []

    def visit(s, loops):
        if pred(s):
            out.append(loops)
        inner = (*loops, s.var) if isinstance(s, For) else loops
        for c in stmt_children(s):
            visit(c, inner)

    visit(stmt, ())
    return out


def test_vthread_injection_runs_fetches_once_and_splits_the_accumulator():
    from tensorir.loops import Barrier, walk_stmts
    from tensorir.passes.inject_vthread import inject_virtual_threads

    prog = lowered_cases()[0].program  # blockIdx / vthread(4) / threadIdx, shared A and B
    (vt,) = [s for s in walk_stmts(prog.body) if isinstance(s, For) and s.kind == "vthread"]
    new = inject_virtual_threads(prog.body)
    assert not any(isinstance(s, For) and s.kind == "vthread" for s in walk_stmts(new))
    shared_stores = _loops_around(
        new, lambda s: isinstance(s, Store) and s.buffer.scope == "shared"
    )
    assert shared_stores and all(vt.var not in loops for loops in shared_stores)
    # every other store still runs once per virtual thread, innermost
    others = _loops_around(new, lambda s: isinstance(s, Store) and s.buffer.scope != "shared")
    assert others and all(loops[-1] is vt.var for loops in others)
    local = [
        s.buffer for s in walk_stmts(new) if isinstance(s, Allocate) and s.buffer.scope == "local"
    ]
    assert [b.size for b in local] == [4 * 4]  # one 2x2 register tile per virtual thread
    count = lambda body: sum(isinstance(s, Barrier) for s in walk_stmts(body))  # noqa: E731
    assert count(new) == count(prog.body) == 2
    code = build_cuda(prog).code
    assert code.count("__syncthreads();") == 2 and "float C_local[16];" in code


def test_vthread_injection_is_a_program_pass_of_tensorir():
    from tensorir.loops import walk_stmts
    from tensorir.passes.inject_vthread import inject_virtual_threads_program

    prog = lowered_cases()[0].program
    new = inject_virtual_threads_program(prog)
    assert not any(isinstance(s, For) and s.kind == "vthread" for s in walk_stmts(new.body))
    assert new.params == prog.params and new.name == prog.name
    assert build_cuda(new, inject_vthreads=False).code == build_cuda(prog).code
    assert inject_virtual_threads_program(new) is new  # nothing left to inject


def test_vthread_injection_stops_at_conditions_on_the_vthread():
    from tensorir.loops import If, walk_stmts
    from tensorir.passes.inject_vthread import inject_virtual_threads

    a = Buffer("A", (64,), "float32")
    tx, v = Var("tx"), Var("v")
    st = If(v < 3, Store(a, tx * 4 + v, const(1.0)))
    body = bind([(tx, 16, "threadIdx.x")], For(v, 4, st, "vthread"))
    new = inject_virtual_threads(body)
    (loop,) = [s for s in walk_stmts(new) if isinstance(s, For) and s.var is v]
    assert loop.kind == "unrolled" and isinstance(loop.body, If)


def test_verify_counts_local_memory_per_virtual_thread():
    from tensorir.passes.verify_gpu import gpu_program_errors

    prog = lowered_cases()[0].program  # C_local: 4 floats under a vthread of 4
    assert gpu_program_errors(prog, {"max_local_memory_per_block": 64}) == []
    (err,) = gpu_program_errors(prog, {"max_local_memory_per_block": 63})
    assert "64 bytes of local memory" in err


@pytest.mark.parametrize("arch", ["sm_90", None, "sm_80"])
def test_every_kernel_waits_on_its_grid_dependency_first_from_sm90(arch):
    """Programmatic dependent launch: each kernel's first lines wait for the kernels before it
    (sm_90 on; guarded by __CUDA_ARCH__ for an unknown arch; absent below sm_90)."""
    src = build_cuda(two_stage_case().program, arch=arch)
    lines = src.code.splitlines()
    kernels = [i for i, line in enumerate(lines) if "__global__" in line]
    assert len(kernels) == 2
    for start in kernels:
        body = lines[start + 1 :]
        first_access = next(i for i, line in enumerate(body) if re.search(r"\b[ABCT]\[", line))
        head = body[:first_access]
        waits = [line.strip() for line in head if "griddepcontrol" in line]
        if arch == "sm_80":
            assert waits == []
            continue
        assert waits == ['asm volatile("griddepcontrol.wait;" ::: "memory");']
        guards = [line.strip() for line in head if line.startswith("#if")]
        assert guards == ([] if arch else ["#if __CUDA_ARCH__ >= 900"])
    assert ("griddepcontrol" in src.code) == (arch != "sm_80")
