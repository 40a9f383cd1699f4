"""verify_gpu: one test per limit, each asserting the message names the kernel and the fix."""

import sys
from pathlib import Path

import pytest

from tensorir.expr import Var, const
from tensorir.kernels import kernels
from tensorir.loops import Allocate, Buffer, For, Program, Store, seq
from tensorir.passes.verify_gpu import GPUVerifyError, gpu_program_errors, verify_gpu_program

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gpu.programs import add_case, bind, matmul_case, two_stage_case  # noqa: E402

H100 = {
    "max_threads_per_block": 1024,
    "max_shared_memory_per_block": 48 * 1024,
    "max_local_memory_per_block": 2**31 - 1,
    "max_vthread_extent": 8,
    "warp_size": 32,
    "max_thread_x": 1024,
    "max_thread_y": 1024,
    "max_thread_z": 64,
}


def test_valid_programs_pass():
    for case in (add_case(), matmul_case(), matmul_case(tx_extent=4), two_stage_case()):
        assert gpu_program_errors(case.program, H100) == []
        verify_gpu_program(case.program, H100)


def test_launch_dims_use_the_largest_extent_per_tag():
    (info,) = kernels(matmul_case(m=64, n=32, tx_extent=4).program)
    assert info.grid == (2, 4, 1)
    assert info.block == (8, 4, 1)  # the fetch loops use 8 threadIdx.x, the compute only 4
    assert info.outputs == ("C_local", "A_shared", "B_shared", "C")


def test_max_threads_per_block():
    p = matmul_case().program  # 8 x 4 = 32 threads
    errs = gpu_program_errors(p, {"max_threads_per_block": 16})
    assert len(errs) == 1
    assert "32 threads per block" in errs[0] and "max_threads_per_block=16" in errs[0]
    assert "matmul_kernel0" in errs[0]


def test_max_thread_x_y_z():
    p = matmul_case().program
    errs = gpu_program_errors(p, {"max_thread_x": 4, "max_thread_y": 4, "max_thread_z": 1})
    assert errs == [
        "kernel matmul_kernel0 (stage writing C_local, A_shared, B_shared, C): threadIdx.x "
        "extent 8 exceeds max_thread_x=4; split the loop bound to threadIdx.x further"
    ]


def test_max_grid_x_y_z():
    p = matmul_case(m=64, n=32).program  # grid (2, 4, 1)
    assert gpu_program_errors(p, {"max_grid_x": 2, "max_grid_y": 4, "max_grid_z": 1}) == []
    (err,) = gpu_program_errors(p, {"max_grid_y": 3})
    assert "blockIdx.y extent 4 exceeds max_grid_y=3" in err


def test_max_shared_memory_per_block():
    p = matmul_case().program  # two 128-float shared tiles = 1024 bytes
    assert gpu_program_errors(p, {"max_shared_memory_per_block": 1024}) == []
    (err,) = gpu_program_errors(p, {"max_shared_memory_per_block": 1000})
    assert "1024 bytes of shared memory exceed max_shared_memory_per_block=1000" in err


def test_max_local_memory_per_block():
    p = matmul_case().program  # C_local: 8 floats = 32 bytes
    assert gpu_program_errors(p, {"max_local_memory_per_block": 32}) == []
    (err,) = gpu_program_errors(p, {"max_local_memory_per_block": 16})
    assert "32 bytes of local memory exceed max_local_memory_per_block=16" in err


def test_max_vthread_extent_counts_nested_vthreads():
    a = Buffer("A", (64,), "float32")
    bx, v0, v1 = Var("bx"), Var("v0"), Var("v1")
    st = Store(a, bx * 16 + v0 * 4 + v1, const(1.0))
    body = bind([(bx, 4, "threadIdx.x")], For(v0, 4, For(v1, 4, st, "vthread"), "vthread"))
    p = Program("vt", (a,), (), body)
    assert gpu_program_errors(p, {"max_vthread_extent": 16}) == []
    (err,) = gpu_program_errors(p, {"max_vthread_extent": 8})
    assert "16 virtual threads exceed max_vthread_extent=8" in err


def test_warp_size_checked_only_when_enforced():
    p = add_case(n=96, block=48).program
    assert gpu_program_errors(p, {"warp_size": 32}) == []
    (err,) = gpu_program_errors(p, {"warp_size": 32, "enforce_warp_multiple": True})
    assert "48 threads per block is not a multiple of warp_size=32" in err


def test_unbound_stage_is_an_error():
    a = Buffer("A", (4,), "float32")
    i = Var("i")
    p = Program("unbound", (a,), (), For(i, 4, Store(a, i, const(1.0))))
    (err,) = gpu_program_errors(p, {})
    assert err.startswith("stage A (kernel unbound_kernel0 (stage writing A)) is not bound to GPU")
    assert "bind its outer loops to blockIdx.x/threadIdx.x" in err


def test_parallel_loop_and_global_allocate_are_errors():
    a = Buffer("A", (16,), "float32")
    t = Buffer("T", (4,), "float32", "global")
    tx, j = Var("tx"), Var("j")
    inner = Allocate(t, seq(Store(t, j, const(2.0)), Store(a, tx * 4 + j, const(1.0))))
    body = bind([(tx, 4, "threadIdx.x")], For(j, 4, inner, "parallel"))
    errs = gpu_program_errors(Program("bad", (a,), (), body), {})
    assert any("loop j is 'parallel'" in e for e in errs)
    assert any("buffer T is allocated in global memory inside the kernel" in e for e in errs)


def test_verify_raises_value_error_listing_every_problem():
    p = matmul_case().program
    with pytest.raises(GPUVerifyError) as info:
        verify_gpu_program(p, {"max_threads_per_block": 16, "max_shared_memory_per_block": 64})
    assert isinstance(info.value, ValueError)
    msg = str(info.value)
    assert "max_threads_per_block=16" in msg and "max_shared_memory_per_block=64" in msg
