"""Exported networks: checksummed files; edited IR / params / plan / object code is refused
naming the file; a plan that does not fit its kernels is an error before anything runs."""

import json
import re
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
from test_network import small_net

import autosched as ansor
from runtime.plan_file import checksum, sha256_text
from tensorir.graph import evaluate


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    rng = np.random.default_rng(21)
    func, params = small_net(rng, n_blocks=1)
    data = rng.uniform(-1, 1, (1, 8, 8, 3)).astype("float32")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no tuning records: default schedules
        lib = ansor.build(func, "llvm", params=params)
    path = tmp_path_factory.mktemp("net") / "net.json"
    lib.export_library(path)
    expected = evaluate(func, {"data": data}, params)
    return path, data, expected


def _copy(exported, tmp_path):
    """A fresh copy of the exported files: (json path, meta, arrays)."""
    src = exported[0]
    path = tmp_path / "edited.json"
    meta = json.loads(src.read_text())
    with np.load(f"{src}.params.npz") as z:
        arrays = {k: z[k] for k in z.files}
    return path, meta, arrays


def _write(path, meta, arrays, resign=False):
    if resign:  # what a tool rewriting the file consistently would do
        meta = dict(meta, checksum={"sha256": checksum(meta, arrays)})
    path.write_text(json.dumps(meta))
    np.savez(f"{path}.params.npz", **arrays)
    return path


def _run(lib, data):
    module = ansor.GraphModule(lib)
    module.set_input("data", data)
    module.run()
    return module.get_output(0).numpy()


def test_round_trip_links_object_code_and_matches_reference(exported):
    path, data, expected = exported
    lib = ansor.load_module(path)
    assert all(isinstance(k.get("binary"), bytes) for k in lib.plan.kernels)
    np.testing.assert_allclose(_run(lib, data), expected, rtol=1e-4, atol=1e-6)


def _edit_code(meta, arrays):
    k = meta["kernels"][0]
    k["code"] = k["code"].replace("fadd", "fsub", 1)


def _edit_param(meta, arrays):
    sid = sorted(k for k in arrays if k.isdigit())[0]
    arrays[sid] = arrays[sid] * 2


def _edit_plan(meta, arrays):
    meta["storages"][-1][1] = 1


def _edit_binary(meta, arrays):
    name = meta["kernels"][0]["binary"]["member"]
    blob = arrays[name].copy()
    blob[len(blob) // 2] ^= 0xFF
    arrays[name] = blob


@pytest.mark.parametrize("edit", [_edit_code, _edit_param, _edit_plan, _edit_binary])
def test_edited_file_is_refused_naming_it(exported, tmp_path, edit):
    path, meta, arrays = _copy(exported, tmp_path)
    edit(meta, arrays)
    _write(path, meta, arrays)
    with pytest.raises(ValueError, match=r"edited\.json: checksum mismatch"):
        ansor.load_module(path)


def test_object_code_of_other_ir_is_refused_even_with_a_valid_checksum(exported, tmp_path):
    path, meta, arrays = _copy(exported, tmp_path)
    _edit_code(meta, arrays)  # the IR changed, the object code did not
    _write(path, meta, arrays, resign=True)
    with pytest.raises(ValueError, match=r"edited\.json: kernel 0: its object code was not"):
        ansor.load_module(path)
    # Claiming the object code came from the new IR is caught by the checksum.
    meta["kernels"][0]["binary"]["code_sha256"] = sha256_text(meta["kernels"][0]["code"])
    _write(path, meta, arrays)
    with pytest.raises(ValueError, match="checksum"):
        ansor.load_module(path)


def test_object_code_for_another_host_is_ignored_and_code_compiled(exported, tmp_path):
    _, data, expected = exported
    path, meta, arrays = _copy(exported, tmp_path)
    for k in meta["kernels"]:
        k["binary"]["host"] = "x86_64-unknown-linux-gnu some-other-cpu +avx512f"
    _write(path, meta, arrays, resign=True)
    lib = ansor.load_module(path)
    assert not any("binary" in k for k in lib.plan.kernels)
    np.testing.assert_allclose(_run(lib, data), expected, rtol=1e-4, atol=1e-6)


def _storage_too_small(meta):
    _, args = meta["calls"][0]
    meta["storages"][args[-1]][1] = 1  # the first kernel's output


def _storage_out_of_range(meta):
    meta["calls"][1][1][0] = len(meta["storages"]) + 5


def _kernel_out_of_range(meta):
    meta["calls"][0][0] = len(meta["kernels"])


def _wrong_arg_count(meta):
    meta["calls"][0][1].pop()


def _dtype_mismatch(meta):
    _, args = meta["calls"][0]
    meta["storages"][args[0]][0] = "float64"


def _input_too_large(meta):
    meta["inputs"]["data"][1] = [1, 64, 64, 3]


EDITS = {
    "storage": (_storage_too_small, r"param '\w+' needs \d+ elements but storage \d+ has 1"),
    "sid": (_storage_out_of_range, r"uses storage \d+, but storage ids are 0\.\.\d+"),
    "kernel": (_kernel_out_of_range, r"runs kernel \d+, but there are \d+"),
    "args": (_wrong_arg_count, r"passes \d+ buffers to kernel 0, which takes \d+"),
    "dtype": (_dtype_mismatch, r"is float32 but storage \d+ holds float64"),
    "input": (_input_too_large, r"input 'data' needs 12288 elements but storage 0 has 192"),
}


@pytest.mark.parametrize("case", sorted(EDITS))
def test_edited_plan_with_valid_checksum_is_an_error_not_a_crash(exported, tmp_path, case):
    """Run in a subprocess: before the checks these plans wrote past buffers (a segfault
    would end pytest)."""
    edit, message = EDITS[case]
    path, meta, arrays = _copy(exported, tmp_path)
    edit(meta)
    _write(path, meta, arrays, resign=True)
    script = textwrap.dedent(
        f"""
        import numpy as np, autosched as ansor
        try:
            lib = ansor.load_module({str(path)!r})
            module = ansor.GraphModule(lib)
            module.set_input("data", np.random.default_rng(0).random((1, 8, 8, 3), "float32"))
            module.run()
        except ValueError as e:
            print("ERROR", e)
        else:
            print("RAN")
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = proc.stdout.strip().splitlines()[-1]
    assert line.startswith(f"ERROR {path}: invalid plan: ")
    assert re.search(message, line), line


def test_graph_module_refuses_an_inconsistent_plan_in_memory(exported):
    from dataclasses import replace

    plan = ansor.load_module(exported[0]).plan
    kernel, args = plan.calls[0]
    bad = replace(plan, calls=((kernel, args[:-1]), *plan.calls[1:]))
    with pytest.raises(ValueError, match=r"^plan: invalid plan: call 0 .* passes"):
        ansor.GraphModule(bad)


def test_graph_module_refuses_modules_that_do_not_match_the_plan(exported):
    lib = ansor.load_module(exported[0])
    swapped = type(lib)(lib.plan, lib.modules[::-1], lib.target)
    with pytest.raises(ValueError, match="modules' parameters differ from the plan"):
        ansor.GraphModule(swapped)
