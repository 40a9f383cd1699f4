"""Held-out real models, exported as people export them today, against onnxruntime.

    # 1. export (needs torch, torchvision, transformers, onnx, onnxscript: keep them in their own
    #    virtualenv, not the project's), both exporters, small configs:
    /path/to/torch-venv/bin/python benchmarks/bench_models.py export --out models/
    # 2. import, build, compare with onnxruntime, time (the project's virtualenv):
    python benchmarks/bench_models.py evaluate models/ [--models bert,gpt2] [--tune-seconds 120]
    python benchmarks/bench_models.py evaluate models/ --import-only       # just the import table
    # a model tuned by the CLI (`python -m autosched tune --onnx m.onnx --log W/<stem>.json`):
    python benchmarks/bench_models.py evaluate models/ --models bert --apply-logs --work-dir W

Every model has random weights (no model hub is reachable here) and is exported twice: with the
legacy TorchScript exporter (``dynamo=False``, opset 17) and with PyTorch's current default,
``dynamo=True`` (which writes opset 18 for most models). ``--config full`` exports the full-size
transformers (bert-base, gpt2 with 12 layers, ...); ``small`` (default) keeps their architecture
with few layers and narrow widths so that the whole table builds in minutes on 2 cores. CNNs are
always full size at 224x224.

``evaluate`` prints, per file: whether it imports (else the one-line error), the number of tuning
tasks, the largest error against onnxruntime relative to the output's scale (the numpy
reference of our graph, and the compiled network untuned, and tuned if ``--tune-seconds`` is
given), and ours vs onnxruntime latency with 2 threads each, timed in this process in turns.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

import numpy as np

# --------------------------------------------------------------------------------------------
# export (runs where torch is installed)
# --------------------------------------------------------------------------------------------

CNNS = [
    "resnet18", "resnet50", "resnext50_32x4d", "mobilenet_v2", "mobilenet_v3_large",
    "mobilenet_v3_small", "efficientnet_b0", "densenet121", "vgg11", "squeezenet1_1",
    "regnet_y_400mf", "alexnet", "googlenet", "shufflenet_v2_x1_0", "convnext_tiny", "vit_b_16",
]  # fmt: skip
TRANSFORMERS = ["bert", "distilbert", "gpt2", "t5-encoder", "vit"]
OTHERS = ["lstm", "gru", "unet", "unet-resize"]
MODELS = CNNS + TRANSFORMERS + OTHERS


def _torchvision_model(name: str):
    import torchvision

    kwargs = {"weights": None}
    if name == "googlenet":
        kwargs.update(aux_logits=False, init_weights=True)
    return getattr(torchvision.models, name)(**kwargs)


def _transformer_model(name: str, full: bool):
    """A transformers model behind a forward of plain tensors that returns the last hidden
    state (as users wrap them for export: the legacy exporter trips on the models' keyword
    arguments, and the dynamo exporter on GPT-2's cache objects)."""
    import torch

    class LastHidden(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model, self.config = model, model.config

        def forward(self, *inputs):
            names = ["pixel_values"] if name == "vit" else ["input_ids", "attention_mask"]
            kwargs = dict(zip(names, inputs))
            if name == "gpt2":
                kwargs["use_cache"] = False
            return self.model(**kwargs).last_hidden_state

    return LastHidden(_transformer_config_model(name, full))


def _transformer_config_model(name: str, full: bool):
    import transformers as tf

    small = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128)
    if name == "bert":
        return tf.BertModel(tf.BertConfig(**({} if full else small)))
    if name == "distilbert":
        cfg = {} if full else dict(n_layers=2, dim=64, n_heads=4, hidden_dim=128)
        return tf.DistilBertModel(tf.DistilBertConfig(**cfg))
    if name == "gpt2":
        cfg = {} if full else dict(n_layer=2, n_embd=64, n_head=4)
        # eager attention: the default (sdpa) mask code uses aten::diff, which the legacy
        # exporter cannot write
        return tf.GPT2Model(tf.GPT2Config(**cfg, attn_implementation="eager"))
    if name == "t5-encoder":
        cfg = {} if full else dict(num_layers=2, d_model=64, num_heads=4, d_ff=128, d_kv=16)
        return tf.T5EncoderModel(tf.T5Config(**cfg))
    if name == "vit":
        cfg = {} if full else dict(small, image_size=32, patch_size=8)
        return tf.ViTModel(tf.ViTConfig(**cfg))
    raise KeyError(name)


def _other_model(name: str):
    import torch
    from torch import nn

    class RNN(nn.Module):
        def __init__(self, cell):
            super().__init__()
            self.rnn = cell(32, 64, num_layers=2, batch_first=True, bidirectional=True)
            self.head = nn.Linear(128, 10)

        def forward(self, x):
            y = self.rnn(x)[0]
            return self.head(y[:, -1])

    def block(cin, cout, norm):
        return nn.Sequential(
            nn.Conv2d(cin, cout, 3, padding=1), norm(cout), nn.ReLU(),
            nn.Conv2d(cout, cout, 3, padding=1), norm(cout), nn.ReLU(),
        )  # fmt: skip

    class UNet(nn.Module):
        """Ronneberger's U-Net, small: max-pool down, ConvTranspose (or bilinear Resize) up."""

        def __init__(self, resize: bool):
            super().__init__()
            norm = (lambda c: nn.GroupNorm(4, c)) if resize else nn.BatchNorm2d
            w = [16, 32, 64, 128]
            self.downs = nn.ModuleList(
                [block(3 if i == 0 else w[i - 1], w[i], norm) for i in range(4)]
            )
            self.ups = nn.ModuleList()
            self.convs = nn.ModuleList()
            for i in range(3, 0, -1):
                self.ups.append(
                    nn.Sequential(
                        nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False),
                        nn.Conv2d(w[i], w[i - 1], 1),
                    )
                    if resize
                    else nn.ConvTranspose2d(w[i], w[i - 1], 2, stride=2)
                )
                self.convs.append(block(2 * w[i - 1], w[i - 1], norm))
            self.out = nn.Conv2d(w[0], 2, 1)

        def forward(self, x):
            skips = []
            for i, down in enumerate(self.downs):
                x = down(x)
                if i < 3:
                    skips.append(x)
                    x = torch.nn.functional.max_pool2d(x, 2)
            for up, conv in zip(self.ups, self.convs):
                x = conv(torch.cat([up(x), skips.pop()], dim=1))
            return self.out(x)

    return {
        "lstm": lambda: RNN(nn.LSTM),
        "gru": lambda: RNN(nn.GRU),
        "unet": lambda: UNet(resize=False),
        "unet-resize": lambda: UNet(resize=True),
    }[name]()


def _model_and_inputs(name: str, full: bool):
    """(module in eval mode, {input name: example tensor})."""
    import torch

    g = torch.Generator().manual_seed(0)
    if name in CNNS:
        return _torchvision_model(name), {"input": torch.randn(1, 3, 224, 224, generator=g)}
    if name == "vit":
        m = _transformer_model(name, full)
        size = m.config.image_size
        return m, {"pixel_values": torch.randn(1, 3, size, size, generator=g)}
    if name in TRANSFORMERS:
        m = _transformer_model(name, full)
        seq = 128 if full else 16
        ids = torch.randint(0, m.config.vocab_size, (1, seq), generator=g)
        inputs = {"input_ids": ids}
        if name in ("bert", "distilbert", "gpt2"):
            inputs["attention_mask"] = torch.ones(1, seq, dtype=torch.int64)
        return m, inputs
    if name in ("lstm", "gru"):
        return _other_model(name), {"input": torch.randn(1, 12, 32, generator=g)}
    return _other_model(name), {"input": torch.randn(1, 3, 64, 64, generator=g)}


def export(args) -> int:
    import torch

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    names = args.models.split(",") if args.models else MODELS
    for name in names:
        torch.manual_seed(0)
        model, inputs = _model_and_inputs(name, args.config == "full")
        model.eval()
        for exporter in args.exporters.split(","):
            path = out / f"{name}-{exporter}.onnx"
            entry = {"model": name, "exporter": exporter, "config": args.config,
                     "inputs": {k: list(v.shape) for k, v in inputs.items()},
                     "input_dtypes": {k: str(v.dtype).replace("torch.", "")
                                      for k, v in inputs.items()}}  # fmt: skip
            t0 = time.perf_counter()
            try:
                with torch.no_grad():
                    torch.onnx.export(
                        model, tuple(inputs.values()), str(path),
                        input_names=list(inputs), opset_version=17,
                        dynamo=(exporter == "dynamo"),
                    )  # fmt: skip
                import onnx

                onnx.checker.check_model(str(path))
                entry["file"] = path.name
                entry["error"] = None
            except Exception as e:  # an exporter failure is a row of the table, not a crash
                # a file that fails onnx.checker is still evaluated (onnxruntime may load it)
                entry["file"] = path.name if path.exists() else None
                entry["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
            entry["export_s"] = round(time.perf_counter() - t0, 1)
            manifest[f"{name}-{exporter}"] = entry
            manifest_path.write_text(json.dumps(manifest, indent=1))
            status = "ok" if entry["error"] is None else entry["error"]
            print(f"{name:20s} {exporter:7s} {entry['export_s']:6.1f} s  {status}", flush=True)
    return 0


# --------------------------------------------------------------------------------------------
# evaluate (runs in the project's virtualenv)
# --------------------------------------------------------------------------------------------


def _random_inputs(model, entry: dict, rng) -> dict:
    """Random inputs for the graph's inputs (ids within the vocabulary, masks of 0 and 1)."""
    from onnx import TensorProto

    inits = {i.name for i in model.graph.initializer}
    feeds = {}
    for inp in model.graph.input:
        if inp.name in inits:
            continue
        tt = inp.type.tensor_type
        shape = entry.get("inputs", {}).get(inp.name) or [d.dim_value or 1 for d in tt.shape.dim]
        if tt.elem_type in (TensorProto.INT64, TensorProto.INT32):
            dtype = "int64" if tt.elem_type == TensorProto.INT64 else "int32"
            high = 2 if "mask" in inp.name else 100
            feeds[inp.name] = rng.integers(0, high, shape).astype(dtype)
            if "mask" in inp.name:
                feeds[inp.name][..., 0] = 1  # at least one position attended
        else:
            feeds[inp.name] = rng.standard_normal(shape).astype("float32")
    return feeds


def _rel_err(ours, theirs) -> float:
    """Largest error relative to the reference output's scale (random-init models can have
    outputs of 1e-9: an elementwise relative error would compare noise)."""
    ours, theirs = np.asarray(ours, "float64"), np.asarray(theirs, "float64")
    if ours.shape != theirs.shape:
        return float("inf")
    scale = max(np.abs(theirs).max(), 1e-30)
    return float(np.abs(ours - theirs).max() / scale)


def evaluate_one(path: Path, entry: dict, args) -> dict:
    import onnx
    import onnxruntime as ort
    from wall_timing import median_s  # run from benchmarks/

    import autosched as ansor
    from tensorir.graph import evaluate as graph_evaluate
    from tensorir.graph.onnx_frontend import from_onnx

    row = {"name": path.stem, "imports": False}
    model = onnx.load(str(path))
    rng = np.random.default_rng(0)
    feeds = _random_inputs(model, entry, rng)
    model.ir_version = min(model.ir_version, 8)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = 2, 1
    try:
        sess = ort.InferenceSession(model.SerializeToString(), opts)
    except Exception as e:  # a file the exporter wrote wrong: no reference to compare with
        row["imports"] = None
        row["error"] = f"onnxruntime cannot load it: {str(e).splitlines()[0][-120:]}"
        return row
    expected = sess.run(None, feeds)
    try:
        mod, params = from_onnx(str(path), shape={k: v.shape for k, v in feeds.items()})
    except Exception as e:
        row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
        return row
    row["imports"] = True
    if args.import_only:
        return row
    try:
        refs = graph_evaluate(mod, feeds, params)
        refs = refs if isinstance(refs, list) else [refs]
        row["ref_err"] = max(_rel_err(o, e) for o, e in zip(refs, expected))
        tasks, weights = ansor.extract_tasks(mod, params, "llvm")
        row["tasks"] = len(tasks)

        def compiled(log):
            with ansor.ApplyHistoryBest(log or []):
                lib = ansor.build(mod, target="llvm", params=params)
            m = ansor.GraphModule(lib["default"](ansor.device("llvm", 0)), num_threads=2)
            for k, v in feeds.items():
                m.set_input(k, v)
            m.run()
            outs = [m.get_output(i).numpy() for i in range(m.get_num_outputs())]
            return m, max(_rel_err(o, e) for o, e in zip(outs, expected))

        module, row["untuned_err"] = compiled(None)
        if args.tune_seconds:
            log = Path(args.work_dir) / f"{path.stem}.json"
            log.parent.mkdir(parents=True, exist_ok=True)
            tuner = ansor.TaskScheduler(
                tasks, weights, load_log_file=str(log) if log.exists() else None
            )
            tuner.tune(
                ansor.TuningOptions(
                    max_tuning_seconds=args.tune_seconds,
                    measure_callbacks=[ansor.RecordToFile(str(log))],
                )
            )
            module, row["tuned_err"] = compiled(str(log))
        elif args.apply_logs and (Path(args.work_dir) / f"{path.stem}.json").exists():
            # tuned elsewhere (e.g. `python -m autosched tune --onnx ... --log W/<stem>.json`)
            module, row["tuned_err"] = compiled(str(Path(args.work_dir) / f"{path.stem}.json"))
        ours, theirs = [], []
        for _ in range(args.rounds):  # in turns, so load on the machine hits both alike
            ours.append(median_s(module.run, 0.5, max_calls=None) * 1e3)
            theirs.append(median_s(lambda: sess.run(None, feeds), 0.5, max_calls=None) * 1e3)
        row["ours_ms"], row["ort_ms"] = float(np.median(ours)), float(np.median(theirs))
        row["speedup"] = float(np.median(np.array(theirs) / np.array(ours)))
    except Exception as e:
        row["error"] = f"after import: {type(e).__name__}: {str(e).splitlines()[0][:160]}"
        if args.verbose:
            traceback.print_exc()
    return row


def _fmt(v, spec):
    return "-" if v is None else format(v, spec)


def evaluate_all(args) -> int:
    folder = Path(args.folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    names = set(args.models.split(",")) if args.models else None
    rows = []
    for key, entry in manifest.items():
        if names and entry["model"] not in names:
            continue
        if not entry.get("file"):
            rows.append({"name": key, "imports": None, "error": f"export: {entry.get('error')}"})
        else:
            t0 = time.perf_counter()
            rows.append(evaluate_one(folder / entry["file"], entry, args))
            rows[-1]["seconds"] = time.perf_counter() - t0
        r = rows[-1]
        print(json.dumps(r), flush=True)
    cols = ["model", "exporter", "imports", "tasks", "err ref", "err untuned", "err tuned",
            "ours ms", "ORT ms", "ORT/ours", "note"]  # fmt: skip
    print("\n| " + " | ".join(cols) + " |\n" + "|---" * len(cols) + "|")
    for r in rows:
        model, _, exporter = r["name"].rpartition("-")
        imp = {True: "yes", False: "**no**", None: "export failed"}[r["imports"]]
        print(
            f"| {model} | {exporter} | {imp} | {_fmt(r.get('tasks'), 'd')} | "
            f"{_fmt(r.get('ref_err'), '.1e')} | {_fmt(r.get('untuned_err'), '.1e')} | "
            f"{_fmt(r.get('tuned_err'), '.1e')} | {_fmt(r.get('ours_ms'), '.2f')} | "
            f"{_fmt(r.get('ort_ms'), '.2f')} | {_fmt(r.get('speedup'), '.2f')} | "
            f"{r.get('error', '')} |"
        )
    for exporter in ("legacy", "dynamo"):
        mine = [r for r in rows if r["name"].endswith(exporter)]
        ok = sum(1 for r in mine if r["imports"])
        print(
            f"{exporter}: {ok} of {len(mine)} import "
            f"({sum(1 for r in mine if r['imports'] is None)} export failures)"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("export", help="export the models with torch (both exporters)")
    e.add_argument("--out", required=True)
    e.add_argument("--models", help="comma-separated subset of: " + ",".join(MODELS))
    e.add_argument("--exporters", default="legacy,dynamo")
    e.add_argument("--config", choices=("small", "full"), default="small")
    v = sub.add_parser("evaluate", help="import, build and compare with onnxruntime")
    v.add_argument("folder")
    v.add_argument("--models")
    v.add_argument("--import-only", action="store_true")
    v.add_argument("--tune-seconds", type=float, default=0)
    v.add_argument("--work-dir", default="bench-models")
    v.add_argument(
        "--apply-logs", action="store_true",
        help="build with the log <work-dir>/<file stem>.json where one exists, without tuning",
    )  # fmt: skip
    v.add_argument("--rounds", type=int, default=5)
    v.add_argument("--json", help="write the rows here")
    v.add_argument("--verbose", action="store_true")
    args = p.parse_args(argv)
    return export(args) if args.command == "export" else evaluate_all(args)


if __name__ == "__main__":
    sys.exit(main())
