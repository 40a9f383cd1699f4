"""Kernel sharing between fused groups (only structurally equal DAGs share one), the output
check of ``python -m autosched run``, and records that do not replay in a network build."""

import json
import warnings

import numpy as np
import pytest

import autosched as ansor
from autosched.cli.network import check_outputs
from autosched.measure import MeasureInput, MeasureResult
from autosched.measure.records import save_records
from autosched.network.default_schedules import default_schedule
from autosched.network.partition import distinct_groups, partition
from tensorir.graph import evaluate, nn, op
from tensorir.graph import ir as gir

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

X_SHAPE = (1, 2, 4, 4)


def _model(nodes, outputs, inits):
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, X_SHAPE)],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _pads(h_begin, h_end):
    return np.array([0, 0, h_begin, 0, 0, 0, h_end, 0], np.int64)


def _two_pads_model():
    """Three Pads of x to the same shape (1, 2, 6, 4): (2, 0) and (1, 1) rows of zeros, and
    (2, 0) rows of 5.0: the same simple-mode print, three different computations."""
    nodes = [
        helper.make_node("Pad", ["x", "p20"], ["y0"]),
        helper.make_node("Pad", ["x", "p11"], ["y1"]),
        helper.make_node("Pad", ["x", "p20", "five"], ["y2"]),
    ]
    inits = {"p20": _pads(2, 0), "p11": _pads(1, 1), "five": np.array(5.0, np.float32)}
    return _model(nodes, ["y0", "y1", "y2"], inits)


def _pad_maxpool_model():
    """A Pad as an output, and a differently split Pad of the same shape feeding a MaxPool."""
    nodes = [
        helper.make_node("Pad", ["x", "p20"], ["y0"]),
        helper.make_node("Pad", ["x", "p11"], ["t"]),
        helper.make_node("MaxPool", ["t"], ["y1"], kernel_shape=[2, 2]),
    ]
    return _model(nodes, ["y0", "y1"], {"p20": _pads(2, 0), "p11": _pads(1, 1)})


@pytest.mark.parametrize("make_model", [_two_pads_model, _pad_maxpool_model])
def test_every_output_matches_onnxruntime_when_groups_look_alike(make_model):
    model = make_model()
    mod, params = ansor.from_onnx(model)
    x = np.random.default_rng(3).uniform(-1, 1, X_SHAPE).astype("float32")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "no tuning record": expected here
        lib = ansor.build(mod, "llvm", params=params)
    module = ansor.GraphModule(lib)
    module.set_input("x", x)
    module.run()
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    refs = sess.run(None, {"x": x})
    assert module.get_num_outputs() == len(refs)
    for k, ref in enumerate(refs):
        np.testing.assert_allclose(module.get_output(k).numpy(), ref, rtol=1e-6, err_msg=f"y{k}")


def test_only_structurally_equal_groups_share_a_kernel():
    mod, params = ansor.from_onnx(_two_pads_model())
    _, groups = partition(mod, params)
    distinct, index_of = distinct_groups(groups)
    assert len(distinct) == len(groups) == 3 and index_of == [0, 1, 2]
    # The same group twice shares.
    distinct, index_of = distinct_groups([groups[1], groups[0], groups[1]])
    assert [gd.dag for gd in distinct] == [groups[1].dag, groups[0].dag] and index_of == [0, 1, 0]


def test_equal_keys_alone_never_share_a_kernel_or_a_task(monkeypatch):
    """Were two different DAGs to hash alike, the build still gives each its own kernel, and
    task extraction refuses to give two computations one key."""
    from tensorir.dag import ComputeDAG

    model = _two_pads_model()
    mod, params = ansor.from_onnx(model)
    monkeypatch.setattr(ComputeDAG, "workload_key", property(lambda self: '["collision"]'))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        lib = ansor.build(mod, "llvm", params=params)
    assert len(lib.modules) == 3
    module = ansor.GraphModule(lib)
    x = np.random.default_rng(4).uniform(-1, 1, X_SHAPE).astype("float32")
    module.set_input("x", x)
    module.run()
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for k, ref in enumerate(sess.run(None, {"x": x})):
        np.testing.assert_allclose(module.get_output(k).numpy(), ref, rtol=1e-6, err_msg=f"y{k}")
    with pytest.raises(ValueError, match="same workload key"):
        ansor.extract_tasks(mod, params, "llvm", include_simple_tasks=True)


def test_check_outputs_looks_at_every_output():
    rng = np.random.default_rng(0)
    refs = [rng.standard_normal((2, 3)).astype("float32") for _ in range(2)]
    ok, lines = check_outputs([r.copy() for r in refs], refs)
    assert ok and len(lines) == 2 and all(line.endswith("(OK)") for line in lines)
    wrong_second = [refs[0].copy(), refs[1] + 3.0]
    ok, lines = check_outputs(wrong_second, refs)
    assert not ok and lines[0].endswith("(OK)") and lines[1].startswith("Output 1")
    assert lines[1].endswith("(WRONG)")
    ok, lines = check_outputs(refs[:1], refs)  # an output missing
    assert not ok and "1 outputs" in lines[0]


# ----------------------------------------------------------------------------- records


def _dense_net(rng):
    data = op.var("data", (4, 16))
    weight = op.var("w", (8, 16))
    out = nn.relu(nn.dense(data, weight))
    func = gir.Function(tuple(gir.free_vars(out)), out)
    return func, {"w": rng.standard_normal((8, 16)).astype("float32")}


def _record_line(task, steps, cost, error_no=0):
    return json.dumps(
        {
            "v": 1,
            "i": [[task.workload_key, str(task.target)], [[], steps]],
            "r": [[cost], error_no, 0.1, 1.0],
            "e": "",
        }
    )


def test_network_build_steps_over_records_that_do_not_replay(tmp_path):
    rng = np.random.default_rng(11)
    func, params = _dense_net(rng)
    tasks, _ = ansor.extract_tasks(func, params, "llvm")
    (task,) = tasks
    log = tmp_path / "log.json"
    good = default_schedule(task.compute_dag, "llvm")
    save_records(log, [MeasureInput(task, good)], [MeasureResult((2e-4,))])
    # Faster but broken: an iterator that does not exist; a string where a number belongs.
    broken = [
        _record_line(task, [["SP", 2, 99, 16, [4], 1]], 1e-5),
        _record_line(task, [["SP", "x", 0, 16, [4], 1]], 2e-5),
    ]
    # Costs that must never win: rejected on load with their line numbers.
    rejected = [_record_line(task, [], c) for c in ("NaN", "Infinity", 0.0, -1e-3)]
    text = log.read_text() + "\n".join(broken + rejected) + "\n"
    log.write_text(text.replace('"NaN"', "NaN").replace('"Infinity"', "Infinity"))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with ansor.ApplyHistoryBest(str(log)) as ctx:
            lib = ansor.build(func, "llvm", params=params)
    messages = [str(w.message) for w in caught]
    assert len(ctx.best) == 1 and next(iter(ctx.best.values()))[1].mean_cost == 1e-5
    [load] = [m for m in messages if "corrupt" in m]
    assert "4 corrupt" in load and "line 4, 5, 6, 7" in load and "cost nan" in load
    [skip] = [m for m in messages if "do not replay" in m]
    assert f"{log} line 2" in skip and "1 more" in skip
    assert lib.tuned == {"fused_dense_relu": True}
    module = ansor.GraphModule(lib)
    data = rng.uniform(-1, 1, (4, 16)).astype("float32")
    module.set_input("data", data)
    module.run()
    ref = evaluate(func, {"data": data}, params)
    np.testing.assert_allclose(module.get_output(0).numpy(), ref, rtol=1e-5, atol=1e-6)


def test_apply_best_steps_over_a_record_that_does_not_replay(tmp_path):
    from autosched.workloads import matmul

    task = ansor.SearchTask(compute_dag=ansor.ComputeDAG(matmul(16, 16, 16)), target="llvm")
    good = task.compute_dag.get_init_state()
    good.split(task.compute_dag.compute_ops[0].name, 0, [4])
    log = tmp_path / "log.json"
    save_records(log, [MeasureInput(task, good)], [MeasureResult((3e-4,))])
    with open(log, "a") as f:
        f.write(_record_line(task, [["SP", 2, 99, 16, [4], 1]], 1e-5) + "\n")
    with pytest.warns(UserWarning, match=rf"do not replay: {log} line 2 .*; using {log} line 1"):
        state = task.apply_best(log)
    assert str(state) == str(good)
    log.write_text(_record_line(task, [["RE", 2, [7, 0]]], 1e-5) + "\n")
    with pytest.raises(ValueError, match=r"none of the 1 records .* replays.*line 1"):
        task.apply_best(log)
