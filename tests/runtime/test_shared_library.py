"""Real shared libraries: export_library("x.so") links object code with cc (or a given
fcompile), load_module loads it with ctypes; cross targets emit object code for their triple,
and a library for another architecture is refused in one line."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import autosched as ansor
import runtime
from autosched import workloads
from runtime.library_file import TRAILER_MAGIC, check_library_file, seal
from runtime.shared_library import elf_machine, host_arch

EM_AARCH64 = 183
HOST_EM = {"x86_64": 62, "aarch64": EM_AARCH64}
needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler to link with")


def _parallel_matmul(n=48):
    dag = ansor.ComputeDAG(workloads.matmul(n, n, n))
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


# ------------------------------------------------------------------ damaged library files
# dlopen maps a truncated library's segments past the end of the file and the first touch
# killed the process with SIGBUS; a truncated or damaged file is now a one-line ValueError.

TRUNCATE_AT = (0.9, 0.75, 0.5, 0.3, 0.1, 0.02)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    if shutil.which("cc") is None:
        pytest.skip("no C compiler to link with")
    path = tmp_path_factory.mktemp("lib") / "matmul.so"
    ansor.build(_parallel_matmul(), "llvm").export_library(path)
    return path.read_bytes()


def test_truncated_libraries_in_a_child_process_exit_cleanly(exported, tmp_path):
    # In a fresh process first: a regression kills that process, not the test run.
    paths = []
    for frac in TRUNCATE_AT:
        paths.append(tmp_path / f"cut{int(frac * 100)}.so")
        paths[-1].write_bytes(exported[: int(len(exported) * frac)])
    code = (
        "import sys, runtime\nfor p in sys.argv[1:]:\n    try:\n"
        "        runtime.load_module(p)\n        print('loaded')\n"
        "    except ValueError as e:\n        print('refused' if 'truncated' in str(e) else e)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run(
        [sys.executable, "-c", code, *map(str, paths)], capture_output=True, timeout=300, env=env
    )
    assert r.returncode == 0, f"exit {r.returncode}: {r.stderr.decode(errors='replace')[-300:]}"
    assert r.stdout.decode().split() == ["refused"] * len(paths)


@pytest.mark.parametrize("frac", TRUNCATE_AT)
def test_truncated_library_is_one_line_error_naming_the_file(exported, tmp_path, frac):
    path = tmp_path / "cut.so"
    path.write_bytes(exported[: int(len(exported) * frac)])
    with pytest.raises(ValueError, match=r"cut\.so: truncated or damaged shared library \(") as e:
        runtime.load_module(path)
    assert "\n" not in str(e.value) and "export it again" in str(e.value)


def test_changed_byte_is_refused_by_the_recorded_size_and_sha256(exported, tmp_path):
    data = bytearray(exported)
    # A letter of the kernel IR in the embedded description: the ELF structure is intact and
    # the library loads, with a description that no longer tells what its code is.
    data[data.index(b"define ") + 1] ^= 1
    path = tmp_path / "flipped.so"
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"flipped\.so: damaged shared library: its size or sha"):
        runtime.load_module(path)
    grown = tmp_path / "grown.so"  # bytes added after the trailer: no longer a sealed file,
    grown.write_bytes(exported + b"\0" * 8)  # but still a whole ELF library: it loads
    runtime.load_module(grown)


def test_unsealed_library_gets_the_structure_check_only(exported, tmp_path):
    unsealed = exported[: -len(TRAILER_MAGIC) - 40]  # as linked, before export sealed it
    assert unsealed[:4] == b"\x7fELF" and TRAILER_MAGIC not in unsealed[-200:]
    path = tmp_path / "plain.so"
    path.write_bytes(unsealed)
    loaded = runtime.load_module(path)
    a, b = _inputs()
    c = np.empty((48, 48), "float32")
    loaded(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-5)
    # Another file: truncating plain.so in place would cut the pages this process has mapped
    # (a SIGBUS when they are next touched, at exit at the latest).
    half = tmp_path / "half.so"
    half.write_bytes(unsealed[: len(unsealed) // 2])
    with pytest.raises(ValueError, match="truncated"):
        runtime.load_module(half)


def test_checksum_detects_accidents_not_attackers(exported, tmp_path):
    # What docs/remote.md says: the sha256 is unkeyed and in the same file, so whoever edits
    # the library can seal it again and it loads. Only trusted files may be loaded.
    data = bytearray(exported[: -len(TRAILER_MAGIC) - 40])
    data[data.index(b"autosched_library_meta")] ^= 1  # an edit of a symbol name's byte
    path = tmp_path / "edited.so"
    path.write_bytes(bytes(data))
    seal(path)
    check_library_file(path)  # passes: not a defence against a deliberate edit
