"""One table per backend: codegen.target.BACKENDS (target kind -> renderer, is_gpu, limits
source ...) and runtime.device.DEVICE_KINDS (device kind -> loader, attributes, type code ...).

Every place that treats backends differently reads these tables; an unknown kind is a one-line
error at each layer's entry point; the two tables agree; and no module outside them compares a
kind or language name except the few listed in ALLOWED_COMPARISONS (docs/contributing.md,
"Recipe: a new backend").
"""

import ast
import re
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("tensorir", "codegen", "runtime", "autosched")
TABLES = ("codegen/target.py", "runtime/device.py")
# Target kinds, source languages, device kinds and their aliases.
NAMES = {"llvm", "cuda", "opencl", "ext_dev", "cpu", "c", "gpu", "nvidia", "cl"}

# What is left outside the tables: each compares one kind for a feature only that kind has.
# (file, the comparison as ast.unparse writes it) -> why it stays.
ALLOWED_COMPARISONS = {
    ("autosched/hardware.py", "target.kind != 'cuda'"): "-arch is an option of CUDA only",
    ("autosched/measure/worker.py", "src['lang'] == 'llvm'"): "builder-side object code (1)",
    ("autosched/measure/worker.py", "src['lang'] == 'cuda'"): "builder-side nvcc/NVRTC (2)",
    ("autosched/network/build.py", "dev.kind != 'cuda'"): "nvcc runs in threads (CUDA only)",
    ("autosched/network/partition.py", "target.kind != 'cuda'"): "wmma tensor cores: CUDA only",
    ("autosched/search/tensor_core_default.py", "task.target.kind != 'cuda'"): "wmma: CUDA only",
    ("autosched/autotvm/measure.py", "getattr(target, 'kind', None) != 'ext_dev'"): "VTA (3)",
    ("runtime/graph_executor.py", "self.device.kind == 'cuda'"): "CUDA graphs are CUDA's own",
    ("runtime/module.py", "self.device.kind == 'cuda'"): "CUDA graphs time short runs",
    ("tensorir/ops/winograd.py", "device_kind == 'cpu'"): "tensorir sits below the tables",
}
# Per-language data that is not a kind: (file, the dict as ast.unparse writes it) -> why.
ALLOWED_MAPS = {
    ("runtime/display.py", "{'llvm': 'llvm', 'cuda': 'cuda', 'opencl': 'c', 'c': 'c'}"): "lexers",
}
# (1), (2): the builder's ahead-of-time compile step, left as it is while the NVRTC compile
# path changes it; (3) the accelerator test of AutoTVM's measure (EXT_KINDS would do).


def _sources():
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel not in TABLES:
                yield rel, ast.parse(path.read_text(), filename=rel)


def _names_in(node) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value} & NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_names_in(e) for e in node.elts)) if node.elts else set()
    return set()


def kind_comparisons(tree) -> list[str]:
    """``x == "cuda"``, ``kind in ("cuda", "opencl")``, ``lang != "llvm"`` ... in ``tree``
    (a name on the right of ``==``/``!=``/``in``, or on the left of ``==``/``!=``)."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        left = node.left
        for op, right in zip(node.ops, node.comparators):
            eq = isinstance(op, (ast.Eq, ast.NotEq))
            if _names_in(right) and isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)):
                out.append(ast.unparse(node))
                break
            if eq and _names_in(left):
                out.append(ast.unparse(node))
                break
            left = right
    return out


def kind_maps(tree) -> list[str]:
    """Dict literals mapping kind/language names to kind/language names (an alias or a
    language -> device map written out by hand)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict) and len(node.keys) >= 2:
            pairs = list(zip(node.keys, node.values))
            if all(k is not None and _names_in(k) and _names_in(v) for k, v in pairs):
                out.append(ast.unparse(node))
    return out


def test_no_kind_comparisons_outside_the_tables():
    found = {(rel, text) for rel, tree in _sources() for text in kind_comparisons(tree)}
    extra = sorted(found - set(ALLOWED_COMPARISONS))
    stale = sorted(set(ALLOWED_COMPARISONS) - found)
    assert not extra, (
        "compare kinds through codegen.target / runtime.device's tables:\n"
        + "\n".join(f"{rel}: {text}" for rel, text in extra)
    )
    assert not stale, f"ALLOWED_COMPARISONS lists comparisons that are gone: {stale}"


def test_no_hand_written_kind_maps_outside_the_tables():
    found = {(rel, text) for rel, tree in _sources() for text in kind_maps(tree)}
    extra = sorted(found - set(ALLOWED_MAPS))
    assert not extra, "derive these from the backend tables:\n" + "\n".join(map(str, extra))
    assert set(ALLOWED_MAPS) <= found, "ALLOWED_MAPS lists maps that are gone"


def test_the_checks_see_a_comparison_and_a_map():
    # The scanners must flag what they are for, or the tests above prove nothing.
    tree = ast.parse(
        'a = t.kind == "cuda"\nb = lang in ("llvm", "x")\nc = "gpu" != k\nd = "cl" in s\n'
        'm = {"llvm": "cpu", "cuda": "cuda"}\nn = {"llvm": "LLVM IR", "cuda": "CUDA"}\n'
    )
    assert kind_comparisons(tree) == [
        "t.kind == 'cuda'",
        "lang in ('llvm', 'x')",
        "'gpu' != k",
    ]
    assert kind_maps(tree) == ["{'llvm': 'cpu', 'cuda': 'cuda'}"]


# ----------------------------------------------------------------------------- the tables


def test_the_two_tables_agree():
    from codegen.target import BACKENDS, KINDS
    from runtime.device import DEVICE_KINDS, normalize_kind

    renderable = {k: b for k, b in BACKENDS.items() if b.renderer is not None}
    assert set(renderable) == set(KINDS)
    # Every runtime device runs one code-generation backend's code, and the reverse.
    assert {b.device_kind for b in renderable.values()} == set(DEVICE_KINDS)
    for kind, b in renderable.items():
        dev = DEVICE_KINDS[b.device_kind]
        assert dev.lang == b.lang, kind
        assert dev.on_host == b.on_host, kind
        # A target's name and its aliases name its device in the runtime too.
        for name in (kind, *b.aliases):
            assert normalize_kind(name) == b.device_kind, name
    for kind, b in BACKENDS.items():
        assert b.limits in ("host", "device", "accelerator"), kind
        assert (b.lang is None) == (b.renderer is None), kind
        assert not (b.on_host and b.is_gpu), kind


def test_every_table_entry_names_code_that_exists():
    import importlib

    from codegen.target import BACKENDS
    from runtime.device import DEVICE_KINDS

    for b in BACKENDS.values():
        if b.renderer is not None:
            module, _, name = b.renderer.partition(":")
            assert callable(getattr(importlib.import_module(module), name)), b.renderer
    for k in DEVICE_KINDS.values():
        # Importing a backend module loads no driver (pycuda, pyopencl are imported lazily).
        assert isinstance(k.load(k.loader), type), k.loader
        if k.query is not None:
            assert callable(k.load(k.query)), k.query
        assert callable(k.attributes) and k.install_hint.endswith("."), k.name
    codes = [k.type_code for k in DEVICE_KINDS.values()]
    assert len(set(codes)) == len(codes)


def _matmul_state(target):
    from autosched import manual, testing
    from codegen.target import Target
    from tensorir.dag import ComputeDAG

    dag = ComputeDAG(testing.matmul(32, 32, 16))
    gpu = Target(target).is_gpu
    return dag, manual.matmul_gpu(dag, block=16) if gpu else manual.matmul_cpu(dag)


@pytest.mark.parametrize("kind", ["llvm", "opencl"])
def test_a_rendered_kernel_runs_on_the_device_the_tables_name(kind):
    # codegen's table picks the renderer, runtime's table the device of its language.
    from autosched.kernel import generate_source
    from codegen.target import Target
    from runtime import device, load_module
    from runtime.device import device_kind_of_lang

    target = Target(kind)
    dev_kind = device_kind_of_lang(target.backend.lang).name
    assert dev_kind == target.device_kind
    if not device(dev_kind).exists:
        pytest.skip(f"no {dev_kind} device here")
    dag, state = _matmul_state(kind)
    src = generate_source(state, target, "mm").as_dict()
    assert src["lang"] == target.backend.lang
    mod = load_module(**src)
    assert mod.device.kind == dev_kind
    rng = np.random.default_rng(31)
    a = rng.standard_normal((32, 16)).astype(np.float32)
    b = rng.standard_normal((16, 32)).astype(np.float32)
    out = np.empty((32, 32), np.float32)
    args = {"A": a, "B": b, "C": out}
    mod(*[args[p[0]] for p in mod.params])
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)


# ----------------------------------------------------------------------------- unknown kinds


def _one_line_naming(exc_info, *words):
    msg = str(exc_info.value)
    assert "\n" not in msg, msg
    for w in words:
        assert w in msg, (w, msg)


def test_unknown_kind_in_codegen_is_one_line():
    from codegen.target import Target, backend, backend_of_lang

    with pytest.raises(ValueError) as e:
        backend("metal")
    _one_line_naming(e, "'metal'", "llvm", "cuda", "opencl")
    with pytest.raises(ValueError) as e:
        backend_of_lang("metal")
    _one_line_naming(e, "'metal'", "llvm", "cuda", "opencl")
    with pytest.raises(ValueError) as e:
        Target("metal")
    _one_line_naming(e, "'metal'", "llvm", "cuda", "opencl")
    assert backend("cpu") is backend("llvm") is Target("llvm").backend


def test_unknown_kind_in_runtime_is_one_line():
    from runtime import device, load_module
    from runtime.device import device_kind, device_kind_of_lang, query_properties

    for call in (
        lambda: device("metal"),
        lambda: device_kind("metal"),
        lambda: query_properties("metal"),
        lambda: device_kind_of_lang("metal"),
        lambda: load_module("metal", "", [], [], []),
    ):
        with pytest.raises(ValueError) as e:
            call()
        _one_line_naming(e, "'metal'", "cuda", "opencl")
    assert device_kind("llvm") is device_kind("cpu")


def test_unknown_kind_in_autosched_is_one_line_not_opencl():
    # These ended in an ``else`` that meant OpenCL: an unknown kind went to pyopencl silently.
    from autosched.hardware import device_properties
    from autosched.kernel import emit_source, lower_for
    from autosched.tuning import missing_device_reason
    from codegen.target import Target

    for call in (lambda: device_properties("metal"), lambda: missing_device_reason("metal")):
        with pytest.raises(ValueError) as e:
            call()
        _one_line_naming(e, "'metal'", "cuda", "opencl")
    dag, state = _matmul_state("llvm")
    program = lower_for(state, Target("llvm"), "mm")
    with pytest.raises(ValueError) as e:
        emit_source(program, Target("ext_dev -device=vta"))
    _one_line_naming(e, "ext_dev", "own code generator", "llvm", "opencl")


def test_the_backend_recipe_names_only_existing_paths():
    text = (ROOT / "docs" / "contributing.md").read_text()
    recipe = text.split("## Recipe: a new backend", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"(?<![\w<>/.])((?:[\w]+/)+(?:[\w]+\.\w+)?)", recipe))
    assert {"codegen/target.py", "runtime/device.py", "tensorir/kernels.py"} <= named
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert not missing, f"docs/contributing.md's backend recipe names missing paths: {missing}"


def test_an_accelerator_target_probes_no_device(monkeypatch):
    # ext_dev's limits come from the accelerator's configuration; it used to read OpenCL's.
    import autosched.hardware as hw
    from codegen.target import Target

    read = hw.device_properties
    monkeypatch.setattr(hw, "device_properties", lambda kind: pytest.fail(f"probed {kind}"))
    params = hw.HardwareParams.for_target(Target("ext_dev -device=vta"))
    assert params.max_threads_per_block == hw.GPU_DEFAULTS["max_threads_per_block"]
    with pytest.raises(ValueError) as e:
        read("ext_dev")
    _one_line_naming(e, "'ext_dev'", "cuda", "opencl")
