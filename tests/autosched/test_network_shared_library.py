"""A network exported as a shared library (``net.so`` + ``net.so.params.npz``) loads and
computes what the JSON form does; edited weights are refused."""

import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
from test_network import small_net

import autosched as ansor
from runtime.shared_library import elf_machine
from tensorir.graph import evaluate

EM_AARCH64 = 183

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler to link with")


def test_network_shared_library_round_trip(tmp_path):
    rng = np.random.default_rng(5)
    func, params = small_net(rng, n_blocks=1)
    data = rng.uniform(-1, 1, (1, 8, 8, 3)).astype("float32")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no tuning records: default schedules
        lib = ansor.build(func, "llvm", params=params)
    path = tmp_path / "net.so"
    lib.export_library(path, graph_name="small")
    assert path.read_bytes()[:4] == b"\x7fELF"
    loaded = ansor.load_module(path)
    assert loaded.plan.graph["name"] == "small"
    module = ansor.GraphModule(loaded)
    module.set_input("data", data)
    module.run()
    expected = evaluate(func, {"data": data}, params)
    np.testing.assert_allclose(module.get_output(0).numpy(), expected, rtol=1e-4, atol=1e-5)

    npz = tmp_path / "net.so.params.npz"
    with np.load(npz) as z:
        arrays = {k: z[k] for k in z.files}
    first = sorted(arrays)[0]
    arrays[first] = arrays[first] + 1
    np.savez(npz, **arrays)
    with pytest.raises(ValueError, match=r"net.so: net.so.params.npz was changed"):
        ansor.load_module(path)

    cut = tmp_path / "cut.so"  # a partial copy: was SIGBUS inside dlopen
    cut.write_bytes(path.read_bytes()[: path.stat().st_size * 2 // 3])
    with pytest.raises(ValueError, match=r"cut.so: truncated or damaged shared library"):
        ansor.load_module(cut)


def test_network_for_aarch64_exports_aarch64_objects_and_does_not_run_here(tmp_path):
    rng = np.random.default_rng(6)
    func, params = small_net(rng, n_blocks=1)
    target = ansor.Target("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no tuning records: default schedules
        lib = ansor.build(func, target, params=params)
    with pytest.raises(RuntimeError, match="compiled for aarch64-linux-gnu"):
        ansor.GraphModule(lib)
    with pytest.raises(ValueError, match=r"give a path ending in .so"):
        lib.export_library(tmp_path / "net.json")
    linked = []

    def fcompile(output, objects, options):  # stands in for a cross toolchain
        linked.extend(elf_machine(Path(o).read_bytes()) for o in objects)
        Path(output).write_bytes(Path(objects[0]).read_bytes())

    lib.export_library(tmp_path / "net_arm.so", fcompile=fcompile)
    assert linked and set(linked) == {EM_AARCH64}
    assert (tmp_path / "net_arm.so.params.npz").exists()
