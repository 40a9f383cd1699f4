"""The zoo's transformers (issue 26 section 2): bert-tiny through the seed flow (extract_tasks,
a tiny TaskScheduler tune, ApplyHistoryBest + build + GraphModule vs the graph's numpy
reference), the tasks a transformer yields, and the other zoo names' shapes."""

import warnings

import numpy as np
import pytest

import autosched as ansor
from runtime.errors import IndexOutOfRangeError
from tensorir.graph import calls, evaluate, free_vars
from tensorir.graph.zoo import NETWORKS, get_network

SEQ = 8


@pytest.fixture(scope="module")
def bert_tiny():
    mod, params, input_shape, output_shape = get_network("bert-tiny", 1, seq_len=SEQ)
    ids = np.random.default_rng(5).integers(0, 30522, input_shape).astype(np.int64)
    return mod, params, input_shape, output_shape, ids


def test_zoo_names_and_shapes():
    assert {"bert-tiny", "bert-base", "gpt2", "vit-b16"} <= set(NETWORKS)
    mod, params, ishape, oshape = get_network("bert-tiny", 2, seq_len=5)
    func = mod["main"]
    assert (ishape, oshape) == ((2, 5), (2, 5, 128))
    assert (func.params[0].name, func.params[0].dtype) == ("input_ids", "int64")
    assert {v.name for v in func.params[1:]} == set(params)
    ops = [c.op for c in calls(func)]
    # embedding lookup, 2 layers x (q, k, v, out, ffn1, ffn2) denses, 2 attention batch matmuls
    assert ops.count("take") == 1 and ops.count("nn.dense") == 12
    assert ops.count("nn.batch_matmul") == 4 and ops.count("nn.softmax") == 2
    # bert-tiny's published size is 4.4M parameters (with 512 positions)
    _, params512, _, _ = get_network("bert-tiny", 1, seq_len=512)
    assert sum(v.size for v in params512.values()) == pytest.approx(4.39e6, rel=0.01)


@pytest.mark.parametrize(
    "kw, msg",
    [
        (dict(name="bert-tiny", seq_len=0), "seq_len must be a positive int"),
        (dict(name="bert-tiny", seq_len=513), "exceeds its 512 positions"),
        (dict(name="vit-b16", seq_len=8), "seq_len does not apply"),
        (dict(name="resnet-18", seq_len=8), "seq_len only applies"),
    ],
)
def test_bad_seq_len_is_one_clear_error(kw, msg):
    with pytest.raises(ValueError, match=msg):
        get_network(batch_size=1, **kw)


def test_transformer_tasks_fuse_epilogues(bert_tiny):
    mod, params, *_ = bert_tiny
    tasks, weights = ansor.extract_tasks(mod, params, "llvm")
    found = dict(zip([t.desc for t in tasks], weights))
    gelu = "fused_dense_add_multiply_multiply_erf_add_multiply"  # BERT's exact (erf) gelu
    assert found[gelu] == 2  # dense + bias + gelu in one kernel, once per layer
    assert found["fused_dense_add"] == 6  # q, k, v
    assert found["fused_batch_matmul_multiply_add"] == 2  # q k^T, scale and mask fused
    assert found["fused_softmax"] == 2 and found["fused_batch_matmul"] == 2
    assert "fused_dense_add_add" in found  # the residual add fused into the output dense
    assert found["fused_layer_norm"] == 5  # one task per layer norm: embeddings, 2 per layer


def test_bert_tiny_seed_flow_tune_build_run(bert_tiny, tmp_path):
    mod, params, _, oshape, ids = bert_tiny
    tasks, weights = ansor.extract_tasks(mod, params, "llvm")
    log = tmp_path / "bert.json"
    search = ansor.SearchParams(evolutionary_search_population=8, evolutionary_search_num_iters=1)
    ansor.TaskScheduler(tasks, weights).tune(
        ansor.TuningOptions(
            num_measure_trials=len(tasks),
            num_measures_per_round=1,
            measure_callbacks=[ansor.RecordToFile(log)],
        ),
        search_policy="sketch.random",
        search_policy_params=search,
    )
    assert len(list(ansor.load_records(log))) >= len(tasks)
    with ansor.ApplyHistoryBest(log) as ctx, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the simple (injective) kernels
        lib = ansor.build(mod, "llvm", params=params)
    assert ctx.hit_keys == {t.workload_key for t in tasks}
    module = ansor.GraphModule(lib)
    module.set_input("input_ids", ids)
    module.run()
    out = module.get_output(0).numpy()
    assert out.shape == oshape
    ref = evaluate(mod, {"input_ids": ids}, params)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    bad = ids.copy()
    bad[0, 3] = 30522
    with pytest.raises(IndexOutOfRangeError, match="index 30522 is out of range") as err:
        module.run(input_ids=bad)
    assert "is a network weight of shape (30522, 128)" in str(err.value)
    assert (err.value.value, err.value.axis) == (30522, 0)
    # an int64 input takes int32 ids (widened exactly), not floats or uint64
    module.run(input_ids=ids.astype(np.int32))
    np.testing.assert_allclose(module.get_output(0).numpy(), ref, rtol=1e-4, atol=1e-4)
    with pytest.raises(TypeError, match="input 'input_ids': expected dtype int64, got float32"):
        module.set_input("input_ids", ids.astype(np.float32))
    with pytest.raises(TypeError, match="expected dtype int64, got uint64"):
        module.set_input("input_ids", ids.astype(np.uint64))


def test_gpt2_bert_base_and_vit_graphs():
    # The graphs only: drawing their ~100M random weights takes seconds each.
    from tensorir.graph.zoo.transformer import transformer

    for name, seq, ishape, oshape, n_params in [
        ("gpt2", 1024, (1, 1024), (1, 1024, 768), 124.4e6),  # published sizes (HF configs)
        ("bert-base", 512, (1, 512), (1, 512, 768), 108.9e6),  # without the pooler
        ("vit-b16", None, (1, 224, 224, 3), (1, 1000), 86.57e6),
    ]:
        out, _, i = transformer(name, 1, seq, "NHWC", "float32")
        assert (i, out.shape) == (ishape, oshape)
        weights = [v for v in free_vars(out) if v.name not in ("input_ids", "data")]
        count = sum(int(np.prod(v.shape)) for v in weights)
        assert count == pytest.approx(n_params, rel=0.01), name


def test_cli_compiles_and_runs_bert_tiny(tmp_path, capsys, monkeypatch):
    from autosched.cli import main

    monkeypatch.chdir(tmp_path)  # no default log: every kernel on its default schedule
    lib = tmp_path / "bert.json"
    with pytest.warns(UserWarning, match="default schedule"):
        assert main(["compile", "--network", "bert-tiny", "-o", str(lib)]) == 0
    assert main(["run", "--network", "bert-tiny", "--lib", str(lib), "--repeat", "1",
                 "--min-repeat-ms", "0"]) == 0  # fmt: skip
    assert "(1, 128, 128): max relative error" in capsys.readouterr().out
