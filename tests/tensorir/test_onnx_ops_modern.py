"""from_onnx on the ops today's exporters write (issue 26): reductions, LayerNormalization,
Erf / Gelu, activations, comparisons and logic, Where, Expand, Slice, Split, Trilu, CumSum,
ConstantOfShape, Range, MatMul with broadcast batch dims and the shape subgraphs torch writes.

Every case is a small onnx.helper graph written the way torch's legacy (TorchScript, opset
13-17) or dynamo (opset 18) exporter writes it. Each is imported and evaluated with the
numpy reference, and compared with onnxruntime on random inputs; then all cases of one opset
are merged into one model, built with ``autosched.build`` on llvm (one build per opset keeps
the file fast) and run in the graph executor, every output compared with onnxruntime again.

The graph builders are in onnx_case_kit.py, the cases in onnx_modern_cases.py and
onnx_modern_cases_movement.py; whole models (a CNN, a BERT layer) in test_onnx_modern_models.py.
"""

import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx_case_kit import Case, assert_close, f32, feeds_of, model_of, node, run_ort  # noqa: E402
from onnx_modern_cases import _activations, _logic, _norms_and_gelu, _reductions  # noqa: E402
from onnx_modern_cases_movement import _matmuls, _movement, _shape_subgraphs  # noqa: E402

import autosched  # noqa: E402
from tensorir.graph import OnnxImportError, calls, evaluate, from_onnx  # noqa: E402

CASES = (
    _reductions()
    + _norms_and_gelu()
    + _activations()
    + _logic()
    + _movement()
    + _matmuls()
    + _shape_subgraphs()
)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case_matches_onnxruntime(case):
    """Import, the numpy reference of every op, and onnxruntime agree; the ops are mapped as
    intended (global pools, folded shape arithmetic, ...)."""
    model = model_of([case], case.opset)
    feeds = feeds_of(model)
    mod, params = from_onnx(model)
    with np.errstate(divide="ignore", invalid="ignore"):  # log(x < 0), 1 / 0: NaN and inf
        ours = evaluate(mod, feeds, params)
    ours = ours if isinstance(ours, list) else [ours]
    for o, got, want in zip(case.outputs, ours, run_ort(model, feeds), strict=True):
        assert_close(got, want, f"{case.name}.{o}")
    used = {c.op for c in calls(mod["main"])}
    assert set(case.ops) <= used, f"{case.name}: expected ops {case.ops}, got {sorted(used)}"
    assert not set(case.no_ops) & used, f"{case.name}: {case.no_ops} should fold, got {used}"


_OPSETS = sorted({c.opset for c in CASES})


@pytest.mark.parametrize("opset", [o for o in _OPSETS if o >= 13])
def test_all_cases_build_on_llvm_and_match_onnxruntime(opset):
    """Every case of one opset in one model (older cases run under the newer opset only where
    their form is still valid, so the model is per opset): autosched.build on llvm, the graph
    executor, every output against onnxruntime."""
    cases = [c for c in CASES if c.opset == opset]
    model = model_of(cases, opset)
    feeds = feeds_of(model, seed=opset)
    mod, params = from_onnx(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "no tuning record: default schedule"
        lib = autosched.build(mod, "llvm", params=params)
    gm = autosched.GraphModule(lib)
    for k, v in feeds.items():
        if k in gm.plan.inputs:  # an input read only by Shape is no input of the network
            gm.set_input(k, v)
    gm.run()
    names = [o.name for o in model.graph.output]
    for i, (name, want) in enumerate(zip(names, run_ort(model, feeds), strict=True)):
        assert_close(gm.get_output(i).numpy(), want, name)


# --- errors ----------------------------------------------------------------------------------


def _import(case):
    return from_onnx(model_of([case], case.opset))


def test_unsupported_attribute_values_name_the_node():
    bad = [
        (node("Gelu", ["x"], ["y"], approximate="fast", name="g0"), r"'g0' \(Gelu\).*fast"),
        (
            node("IsInf", ["x"], ["y"], detect_negative=0, detect_positive=0, name="i0"),
            r"'i0' \(IsInf\).*detect_negative",
        ),
        (
            node("ReduceProd", ["x"], ["y"], axes=[1], name="p0"),
            r"'p0' \(ReduceProd\).*known at import time",
        ),
        (node("ReduceMean", ["x"], ["y"], axes=[3], name="r0"), r"'r0' \(ReduceMean\).*axes"),
        (
            node("Split", ["x"], ["a", "b"], axis=1, split=[1, 1], name="s0"),
            r"'s0' \(Split\).*summing to the dim 3",
        ),
    ]
    for nd, pattern in bad:
        with pytest.raises(OnnxImportError, match=pattern) as err:
            _import(
                Case(
                    "bad",
                    18 if nd.op_type != "Gelu" else 20,
                    [nd],
                    {"x": f32(2, 3)},
                    ["y"] if nd.op_type != "Split" else ["a", "b"],
                )
            )
        assert "\n" not in str(err.value)


def test_reading_an_unsupported_layer_norm_output_names_the_node():
    ln = node("LayerNormalization", ["x", "w"], ["y", "mu"], name="ln0")
    case = Case(
        "ln",
        17,
        [ln, node("Relu", ["mu"], ["z"])],
        {"x": f32(2, 4)},
        ["z"],
        {"w": np.ones(4, np.float32)},
    )
    with pytest.raises(OnnxImportError, match=r"'ln\.mu' is an output of node 'ln0'"):
        _import(case)


def test_the_ops_page_lists_exactly_the_supported_ops():
    """docs/onnx-ops.md is where the unsupported-op error sends users: keep it true."""
    from pathlib import Path

    from tensorir.graph.onnx_frontend import supported_ops

    page = Path(__file__).parents[2] / "docs" / "onnx-ops.md"
    listed = set()
    for line in page.read_text().splitlines():
        cells = line.split("|")
        if len(cells) > 2 and cells[1].strip() not in ("ONNX op", "---"):
            listed |= {name.strip() for name in cells[1].split(",")}
    assert listed == set(supported_ops())
