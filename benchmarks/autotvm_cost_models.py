"""Part 4 of ``bench_autotvm.py``: cost-model quality. Random configurations of resnet-18 and
mobilenet conv2d tasks measured (kept as AutoTVM logs, reloaded on resume), the models trained
on some tasks and scored on how they rank the held-out ones (top-1, top-5, NDCG)."""

from __future__ import annotations

import dataclasses
import os
import time

import numpy as np
from autotvm_bench_setup import conv2d_tasks

import autosched as ansor
from autosched import autotvm
from autosched.autotvm.tuner import RandomTuner
from autosched.autotvm.tuner.cost_model import LGBCostModel
from autosched.autotvm.tuner.features import config_features
from autosched.measure.data import MeasureInput as StateInput


def _records_path(log_dir: str, name: str) -> str:
    return os.path.join(log_dir, f"model-records-{name}.log")


def _load_records(path: str, task, n: int, partial_ok: bool = False) -> list | None:
    """The first ``n`` records of ``path`` bound to ``task`` (states rebuilt), or None when
    the file is missing or holds fewer (a killed sampling run: measured again) unless
    ``partial_ok``."""
    if not os.path.exists(path):
        return None
    pairs = []
    for inp, res in autotvm.record.load_from_file(path):
        state = None
        if inp.record_state is not None:
            state = inp.record_state.to_state(task.compute_dag)
        config = task.config_space.get(inp.config.index)
        pairs.append((dataclasses.replace(inp, task=task, config=config, state=state), res))
    return pairs[:n] if len(pairs) >= n or (partial_ok and pairs) else None


def sample_records(named_tasks, n, option, seed, log_dir, reuse: bool, measure=True) -> dict:
    """``{name: [(input, result), ...]}`` of ``n`` random measured configurations each, kept
    as an AutoTVM log per task in ``log_dir`` and, with ``reuse``, reloaded from there when
    complete. Without ``measure``, only what the logs hold (a task without records is left
    out)."""
    data = {}
    for name, task in named_tasks:
        n_task = min(n, len(task.config_space))
        path = _records_path(log_dir, name)
        got = _load_records(path, task, n_task, partial_ok=not measure) if reuse else None
        if got is None and not measure:
            print(f"[records {name}] no records in {path}: left out")
            continue
        if got is None:
            if os.path.exists(path):
                os.remove(path)
            got = []

            def keep(_tuner, inputs, results, got=got):
                got.extend(zip(inputs, results, strict=True))

            bar = autotvm.callback.progress_bar(n_task, prefix=f"[records {name}] ")
            RandomTuner(task, seed=seed).tune(
                n_task, measure_option=option,
                callbacks=[bar, keep, autotvm.callback.log_to_file(path)],
            )  # fmt: skip
        data[name] = got
    return data


def ranking_scores(y: np.ndarray, pred: np.ndarray) -> dict:
    from sklearn.metrics import ndcg_score

    order = np.argsort(-pred, kind="stable")
    best = y.max()
    out = {f"top{k}": float(y[order[:k]].max() / best) for k in (1, 5)}
    out["ndcg"] = float(ndcg_score(y[None, :], pred[None, :]))
    return out


def _throughputs(task, pairs) -> np.ndarray:
    return np.array([task.flop / r.mean_cost if r.error_no == 0 else 0.0 for _, r in pairs])


def _predict_ansor(train, test, tasks, seed) -> dict:
    model = ansor.LGBModel(seed=seed, num_warmup_sample=0)
    inputs, results = [], []
    for k in train:
        stask = tasks[k].search_task
        for inp, res in train[k]:
            if inp.state is not None:
                inputs.append(StateInput(stask, inp.state))
                results.append(res)
    model.update(inputs, results)
    preds = {}
    for k, pairs in test.items():
        states = [inp.state for inp, _ in pairs]
        ok = [s is not None for s in states]
        p = np.full(len(pairs), -np.inf)
        p[ok] = model.predict(tasks[k].search_task, [s for s in states if s is not None])
        preds[k] = p
    return preds


def _predict_autotvm(train, test, tasks, feature, seed) -> dict:
    test_templates = {tasks[k].name for k in test}
    rows, ys, groups = [], [], []
    for k, pairs in train.items():
        if feature == "knob" and tasks[k].name not in test_templates:
            continue
        x = [config_features(tasks[k], inp.config, feature) for inp, _ in pairs]
        keep = [i for i, v in enumerate(x) if v is not None]
        if not keep:
            continue
        rows += [x[i] for i in keep]
        ys += list(_throughputs(tasks[k], pairs)[keep])
        groups.append(len(keep))
    width = {len(r) for r in rows}
    if len(width) != 1:  # knob vectors of different templates: keep the test template's
        raise ValueError(f"{feature} features of different lengths {sorted(width)}")
    model = LGBCostModel("rank", seed=seed)
    model.fit(np.stack(rows), np.asarray(ys), groups=groups)
    preds = {}
    for k, pairs in test.items():
        x = [config_features(tasks[k], inp.config, feature) for inp, _ in pairs]
        p = np.full(len(pairs), -np.inf)
        ok = [i for i, v in enumerate(x) if v is not None]
        if ok:
            p[ok] = model.predict(np.stack([x[i] for i in ok]))
        preds[k] = p
    return preds


def run_cost_models(args, option) -> dict | None:
    """Sample (this shard's share of) the records; score the models unless sharded."""
    resnet = conv2d_tasks("resnet-18", args.target, args.model_tasks)
    mobilenet = conv2d_tasks("mobilenet", args.target, args.model_tasks)
    tasks = resnet + mobilenet
    names = [f"resnet-18-{i}" for i in range(len(resnet))]
    names += [f"mobilenet-{i}" for i in range(len(mobilenet))]
    shard, n_shards = args.model_shard
    mine = [k for k in range(len(tasks)) if k % n_shards == shard]
    by_name = sample_records([(names[k], tasks[k]) for k in mine], args.model_records, option,
                             args.seed, args.log_dir, args.resume,
                             measure=not args.score_only)  # fmt: skip
    if n_shards > 1:
        print(f"model records of {len(mine)} tasks in {args.log_dir}; score them with a piece "
              "without --model-shard")  # fmt: skip
        return None
    data = {k: by_name[names[k]] for k in range(len(tasks)) if names[k] in by_name}
    half = max(1, len(resnet) // 2)
    train_ids = [k for k in list(range(half)) + list(range(len(resnet), len(tasks))) if k in data]
    test_ids = [
        k for k in range(half, len(resnet))
        if k in data and _throughputs(tasks[k], data[k]).max() > 0
    ]  # fmt: skip
    if not test_ids:
        raise SystemExit("no held-out task has a successful measurement; raise --model-records")
    train = {k: data[k] for k in train_ids}
    test = {k: data[k] for k in test_ids}
    rng = np.random.default_rng(args.seed)
    models = {
        "lgb+ansor-features": lambda: _predict_ansor(train, test, tasks, args.seed),
        "lgb+knob": lambda: _predict_autotvm(train, test, tasks, "knob", args.seed),
        "lgb+itervar": lambda: _predict_autotvm(train, test, tasks, "itervar", args.seed),
        "lgb+curve": lambda: _predict_autotvm(train, test, tasks, "curve", args.seed),
        "random": lambda: {k: rng.random(len(v)) for k, v in test.items()},
    }
    out = {
        "train_tasks": len(train),
        "test_tasks": len(test),
        "records_per_task": args.model_records,
        "records": {names[k]: len(v) for k, v in data.items()},
        "models": {},
    }
    for name, predict in models.items():
        t0 = time.time()
        preds = predict()
        per_task = [ranking_scores(_throughputs(tasks[k], test[k]), preds[k]) for k in test]
        out["models"][name] = {
            m: round(float(np.mean([s[m] for s in per_task])), 4) for m in ("top1", "top5", "ndcg")
        }
        out["models"][name]["seconds"] = round(time.time() - t0, 1)
    return out
