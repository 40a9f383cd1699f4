"""Real shared libraries: export_library("x.so") links object code with cc (or a given
fcompile), load_module loads it with ctypes; cross targets emit object code for their triple,
and a library for another architecture is refused in one line."""

import shutil
from pathlib import Path

import numpy as np
import pytest

import autosched as ansor
import runtime
from autosched import testing
from runtime.shared_library import elf_machine, host_arch

EM_AARCH64 = 183
HOST_EM = {"x86_64": 62, "aarch64": EM_AARCH64}
needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler to link with")


def _parallel_matmul(n=48):
    dag = ansor.ComputeDAG(testing.matmul(n, n, n))
    state = dag.get_init_state()
    state.parallel(2, state.stages[2].iters[0])  # the library must carry the launcher
    return state


def _inputs(n=48, seed=3):
    rng = np.random.default_rng(seed)
    a, b = (rng.uniform(-1, 1, (n, n)).astype("float32") for _ in range(2))
    return a, b


@needs_cc
def test_kernel_exports_as_shared_library_and_loads(tmp_path):
    mod = ansor.build(_parallel_matmul(), "llvm")
    path = tmp_path / "matmul.so"
    mod.export_library(path)
    data = path.read_bytes()
    assert elf_machine(data) == HOST_EM[host_arch()]
    assert data[16] == 3  # e_type ET_DYN: a shared library, not an object file
    loaded = runtime.load_module(path)
    a, b = _inputs()
    c = np.empty((48, 48), "float32")
    loaded(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-5)
    assert ansor.load_module(path).params == mod.params  # the autosched front door too
    with pytest.raises(ValueError, match="shape"):  # the DAG's shapes travel with it
        loaded(a.reshape(-1), b, c)


def test_cross_target_emits_aarch64_object_code():
    state = _parallel_matmul()
    for target in (
        ansor.Target("llvm -mtriple=aarch64-linux-gnu"),
        ansor.Target("llvm", host="llvm -mtriple=aarch64-linux-gnu"),
    ):
        mod = ansor.build(state, target)
        obj = mod.object_code()
        assert obj[:4] == b"\x7fELF" and elf_machine(obj) == EM_AARCH64, str(target)
        with pytest.raises(RuntimeError, match="aarch64-linux-gnu"):
            mod(*_inputs(), np.empty((48, 48), "float32"))


def test_cross_library_uses_fcompile_and_is_refused_here(tmp_path):
    if host_arch() == "aarch64":
        pytest.skip("this machine is aarch64")
    calls = []

    def fcompile(output, objects, options):  # stands in for an NDK's create_shared
        calls.append((output, list(objects), list(options)))
        machines = {elf_machine(Path(o).read_bytes()) for o in objects}
        assert machines == {EM_AARCH64}
        shutil.copyfile(objects[0], output)  # not linked, but an aarch64 ELF file

    mod = ansor.build(_parallel_matmul(), "llvm -mtriple=aarch64-linux-gnu")
    path = tmp_path / "matmul_arm.so"
    mod.export_library(path, fcompile=fcompile)
    assert len(calls) == 1 and calls[0][0] == str(path) and "-lgomp" in calls[0][2]
    with pytest.raises(ValueError, match=r"matmul_arm.so: a shared library for aarch64 cannot "):
        runtime.load_module(path)


def test_not_a_library_is_one_line_error(tmp_path):
    path = tmp_path / "junk.so"
    path.write_text("hello")
    with pytest.raises(ValueError, match=r"junk.so: not a shared library"):
        runtime.load_module(path)
