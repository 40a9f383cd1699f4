"""Standalone GPU smoke test: prints one PASS/FAIL/SKIP line per check, then a summary.

Run from anywhere on a machine with an NVIDIA GPU::

    python tests/gpu/smoke.py

It checks the CUDA backend (pycuda) and, when an OpenCL GPU platform is present, the OpenCL
backend, on every hand-built program of tests/gpu/programs.py against numpy; then load_module,
time_evaluator and the verifier against the device's own limits. Exit status 1 if any check
failed.
"""

from __future__ import annotations

import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1]), str(HERE.parent)]  # the repository, then gpu.programs

import numpy as np  # noqa: E402

from gpu.programs import (  # noqa: E402
    all_cases,
    check_outputs,
    lowered_cases,
    matmul_case,
    param_arrays,
    run_on_backend,
)

RESULTS = {"PASS": 0, "FAIL": 0, "SKIP": 0}


def report(status: str, name: str, detail: str = "") -> None:
    RESULTS[status] += 1
    print(f"{status} {name}{': ' + detail if detail else ''}", flush=True)


def check(name: str, fn) -> None:
    try:
        detail = fn()
    except Exception as err:  # one failing check must not stop the others
        tb = traceback.format_exc(limit=3)
        report("FAIL", name, f"{type(err).__name__}: {str(err)[:800]}\n{tb}")
    else:
        report("PASS", name, detail or "")


def cuda_checks() -> None:
    from codegen.cuda import build_cuda
    from runtime import device, load_module
    from runtime.cuda import CUDABackend
    from tensorir.passes.verify_gpu import gpu_program_errors

    try:
        backend = CUDABackend(0)
    except Exception as err:
        report("SKIP", "cuda", f"{type(err).__name__}: {err}")
        return
    props = backend.properties()
    report("PASS", "cuda.properties", f"{props['name']} sm_{props['compute_version']}, "
           f"{props['multi_processor_count']} SMs, warp {props['warp_size']}")  # fmt: skip
    for case in all_cases() + lowered_cases():

        def run(case=case):
            src = build_cuda(case.program).as_dict()
            inputs = case.inputs(np.random.default_rng(1))
            t0 = time.perf_counter()
            check_outputs(case, run_on_backend(backend, src, inputs), inputs)
            return f"{(time.perf_counter() - t0) * 1e3:.0f} ms incl. nvcc"

        check(f"cuda.run.{case.name}", run)

    def verify():
        errors = [e for c in all_cases() for e in gpu_program_errors(c.program, props)]
        assert not errors, errors
        return "every program fits the device's limits"

    check("cuda.verify_gpu", verify)

    def module_and_timing():
        case = matmul_case(m=1024, n=1024, k=1024)
        src = build_cuda(case.program).as_dict()
        mod = load_module(**src, device=device("cuda"))
        inputs = case.inputs(np.random.default_rng(2))
        arrays = param_arrays(src["params"], inputs)
        mod(*arrays)
        check_outputs(case, {"C": arrays[2]}, inputs)
        t = mod.time_evaluator(number=10, repeat=3)(*arrays)
        return f"1024^3 matmul {t.mean * 1e3:.3f} ms = {2 * 1024**3 / t.mean / 1e9:.0f} GFLOP/s"

    check("cuda.load_module.matmul1024", module_and_timing)

    def vthread_injection():
        from gpu.programs import lowered_matmul_case

        case = lowered_matmul_case(1024, 1024, 1024)
        inputs = case.inputs(np.random.default_rng(4))
        times = {}
        for inject in (False, True):
            src = build_cuda(case.program, inject).as_dict()
            mod = load_module(**src, device=device("cuda"))
            arrays = param_arrays(src["params"], inputs)
            mod(*arrays)
            check_outputs(case, {"C": arrays[2]}, inputs)
            times[inject] = mod.time_evaluator(number=10, repeat=3)(*arrays).median
        return (f"lowered 1024^3 sketch: {times[False] * 1e3:.3f} ms as loops, "
                f"{times[True] * 1e3:.3f} ms injected")  # fmt: skip

    check("cuda.vthread_injection", vthread_injection)

    def autosched_build():
        from autosched.build_module import build
        from gpu.programs import lowered_matmul_state

        dag, state = lowered_matmul_state(256, 256, 128)
        mod = build(state, "cuda")
        rng = np.random.default_rng(6)
        a = rng.standard_normal((256, 128)).astype(np.float32)
        b = rng.standard_normal((128, 256)).astype(np.float32)
        c = np.zeros((256, 256), np.float32)
        mod(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
        return "State -> lower -> verify -> CUDA -> load_module -> numpy matches"

    check("cuda.autosched_build", autosched_build)

    def threaded_compile():
        from concurrent.futures import ThreadPoolExecutor

        srcs = [build_cuda(matmul_case(16 * (i + 1), 64, 48).program).code for i in range(8)]
        srcs = [c.replace("matmul_kernel0", f"mm{i}_kernel0") for i, c in enumerate(srcs)]
        t0 = time.perf_counter()
        for i, c in enumerate(srcs):
            backend.compile(c + f"// serial {i}\n", (f"mm{i}_kernel0",))
        serial = time.perf_counter() - t0
        t0 = time.perf_counter()
        with ThreadPoolExecutor(8) as pool:
            mods = list(pool.map(lambda ic: backend.compile(ic[1] + f"// pool {ic[0]}\n",
                                                            (f"mm{ic[0]}_kernel0",)),
                                 enumerate(srcs)))  # fmt: skip
        pooled = time.perf_counter() - t0
        assert len(mods) == 8
        return f"8 nvcc compiles: {serial:.2f} s serial, {pooled:.2f} s from 8 threads"

    check("cuda.threaded_compile", threaded_compile)

    def compile_error():
        from runtime.errors import CompileError

        try:
            backend.compile('extern "C" __global__ void k(float* a) { a[0] = nope; }', ("k",))
        except CompileError as err:
            assert "nope" in err.log, err.log
            return "CompileError with the nvcc log"
        raise AssertionError("bad code compiled")

    check("cuda.compile_error", compile_error)


def opencl_checks() -> None:
    from codegen.opencl import build_opencl
    from runtime.opencl import OpenCLBackend

    try:
        backend = OpenCLBackend(0)
        props = backend.properties()
    except Exception as err:
        report("SKIP", "opencl", f"{type(err).__name__}: {err}")
        return
    if not props["is_gpu"]:
        report("SKIP", "opencl", f"first OpenCL device is not a GPU: {props['name']}")
        return
    report("PASS", "opencl.properties", f"{props['platform']} / {props['name']}")
    for case in all_cases() + lowered_cases():
        if "float16" in case.needs and "cl_khr_fp16" not in props["extensions"]:
            report("SKIP", f"opencl.run.{case.name}", "no cl_khr_fp16")
            continue

        def run(case=case):
            src = build_opencl(case.program).as_dict()
            inputs = case.inputs(np.random.default_rng(3))
            check_outputs(case, run_on_backend(backend, src, inputs), inputs)

        check(f"opencl.run.{case.name}", run)


def main() -> int:
    cuda_checks()
    opencl_checks()
    print(f"{RESULTS['PASS']} passed, {RESULTS['FAIL']} failed, {RESULTS['SKIP']} skipped")
    return 1 if RESULTS["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
