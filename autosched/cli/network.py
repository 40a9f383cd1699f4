"""``python -m autosched tune|compile|run|benchmark``: the whole-network workflow of the seeds.

``tune`` extracts the tasks of a zoo network (or an ONNX file), tunes them with the gradient task
scheduler (resuming from ``--log`` when it exists: a killed run loses at most the batch in
flight), then compiles the network with the history best, checks every output against the numpy
reference and benchmarks it. ``compile`` writes the compiled network to a file, ``run`` and
``benchmark`` load such a file (or compile from the log) and run it.
"""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path

import numpy as np

from runtime.environment import cpu_count

from ..precision import PRECISIONS

# Trials of `tune` without --trials and --max-seconds: the README's main job, a few minutes on a
# 2-core CPU (one round of 2 per resnet-18 task: its default schedule and one searched state).
DEFAULT_TRIALS = 48


def add_network_commands(sub) -> None:
    """Register the network subcommands on an argparse subparsers object."""
    for name, text in (
        ("tune", "tune a network's tasks, then compile, check and benchmark it"),
        ("compile", "compile a network with the best records of a log"),
        ("run", "compile (or load) a network, run it once and check it against numpy"),
        ("benchmark", "compile (or load) a network and time it"),
    ):
        p = sub.add_parser(name, help=text, description=text)
        p.add_argument("--network", default="resnet-18", help="zoo name (default resnet-18)")
        p.add_argument("--onnx", help="an ONNX file instead of a zoo network")
        p.add_argument(
            "--input-shape",
            help="ONNX input shape, e.g. 1,3,224,224 (the first input, and other inputs of that "
            "rank with dynamic dims, such as a BERT's attention_mask), or per input: "
            "'input_ids=1,128;attention_mask=1,128'",
        )
        p.add_argument("--batch-size", type=int, default=1)
        p.add_argument("--layout", default="NHWC", choices=["NHWC", "NCHW"])
        p.add_argument("--target", default="llvm")
        p.add_argument("--log", help="records (default <network>-<layout>-B<n>-<target>.json)")
        p.add_argument("--no-winograd", action="store_true", help="direct conv2d for 3x3 convs")
        p.add_argument(
            "--precision", default="float32", choices=PRECISIONS,
            help="float16 / bfloat16: to_mixed_precision (convolutions and matmuls in 16 bits "
            "accumulating in float32) and an accuracy report against float32 (docs/gpu.md)",
        )  # fmt: skip
        if name != "compile":
            p.add_argument(
                "--accuracy-inputs", type=int, default=50,
                help="random inputs of the accuracy report of a 16-bit --precision (default 50; "
                "each runs the float32 numpy reference once; 0 skips the report)",
            )  # fmt: skip
        if name == "tune":
            p.add_argument(
                "--trials", type=int,
                help=f"measurement trials in total (default {DEFAULT_TRIALS}; with --max-seconds "
                "no limit: the time budget alone ends tuning)",
            )  # fmt: skip
            p.add_argument(
                "--per-round", type=int,
                help="measurements per round (default: automatic, so that the first pass over "
                "all tasks takes at most 1/4 of the budget; TVM: 64)",
            )  # fmt: skip
            p.add_argument(
                "--population", type=int,
                help="evolutionary search population (default: automatic, 16 states per "
                "measurement; TVM: 2048; smaller = faster rounds)",
            )  # fmt: skip
            p.add_argument(
                "--generations", type=int,
                help="evolution iterations (default: automatic, 1 up to a population of 512; "
                "TVM: 4)",
            )  # fmt: skip
            p.add_argument("--no-resume", action="store_true", help="ignore an existing log")
            p.add_argument(
                "--warm-caches", action="store_true",
                help="CPU: time candidates with warm caches (default: cold, as each kernel of a "
                "network finds its weights evicted by the previous one; TVM's CPU advice)",
            )  # fmt: skip
            p.add_argument(
                "--max-seconds", type=float,
                help="wall-time budget: start no search round after this many seconds",
            )  # fmt: skip
        if name == "compile":
            p.add_argument("-o", "--output", required=True, help="where to write the library")
        if name in ("run", "benchmark"):
            p.add_argument("--lib", help="a library written by `compile` (else compile now)")
        p.add_argument("--repeat", type=int, default=3)
        p.add_argument("--min-repeat-ms", type=float, default=200)


class CLIError(Exception):
    """A mistake on the command line: ``cli.main`` prints it as one line and exits with 2."""


def _input_shape(text: str) -> tuple[int, ...]:
    """``--input-shape``'s dims: one shape, or ``NAME=dims`` parts separated by ``;``."""
    parts = [p.partition("=")[2] if "=" in p else p for p in text.split(";")]
    shapes = []
    for part in parts:
        dims = [d.strip() for d in part.split(",")]
        if not part.strip() or not all(d.isdigit() and int(d) > 0 for d in dims):
            raise CLIError(
                f"--input-shape {text!r}: give positive ints separated by commas, e.g. "
                "1,3,224,224, or NAME=dims per input separated by ';', e.g. "
                "'input_ids=1,128;attention_mask=1,128'"
            )
        shapes.append(tuple(int(d) for d in dims))
    return shapes[0]


def _input_shapes(text: str, model) -> dict[str, tuple[int, ...]]:
    """The ``shape=`` of ``from_onnx`` for ``--input-shape``: ``NAME=dims;NAME=dims``, or one
    shape for the first graph input and for every other input of the same rank whose
    declared dims are not all fixed (a BERT export's ``attention_mask`` beside its
    ``input_ids``: one ``--input-shape 1,128`` sets the sequence length of both)."""
    inits = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in inits]
    if "=" in text:
        shapes = {}
        names = [i.name for i in inputs]
        for part in text.split(";"):
            name, _, dims = part.partition("=")
            name = name.strip()
            if name not in names:
                raise CLIError(f"--input-shape {text!r}: the model has no input {name!r}; its "
                               f"inputs are {names}")  # fmt: skip
            shapes[name] = _input_shape(dims)
        return shapes
    shape = _input_shape(text)
    shapes = {inputs[0].name: shape}
    for inp in inputs[1:]:
        dims = inp.type.tensor_type.shape.dim
        fixed = all(d.HasField("dim_value") and d.dim_value > 0 for d in dims)
        if len(dims) == len(shape) and not fixed:
            shapes[inp.name] = shape
    return shapes


def _check_log_path(log: Path, command: str) -> None:
    if log.is_dir():
        raise CLIError(f"--log {log} is a directory; give a file, e.g. {log / 'records.json'}")
    if command == "tune" and not log.parent.is_dir():
        raise CLIError(f"--log {log}: the directory {log.parent} does not exist; create it first")


def _tunes_cold(args) -> bool:
    """Whether ``tune`` times CPU candidates with cold caches: the default, because inside a
    network each kernel's weights and inputs were evicted by the kernels before it; tuned
    warm, the picks are fast alone and slow in the network."""
    from codegen.target import Target

    return Target(args.target).backend.on_host and not args.warm_caches


def _cli_runner(args):
    """The runner of ``tune``: ten cold runs per candidate where :func:`_tunes_cold`."""
    import autosched as ansor

    if _tunes_cold(args):
        return ansor.LocalRunner(repeat=10, enable_cpu_cache_flush=True)
    return "local"


def check_network_args(args) -> None:
    """Refuse argument values a run would choke on later (or silently misuse), naming the
    argument: raises :class:`CLIError`."""
    from codegen.target import KINDS, Target, check_host_cpu
    from tensorir.graph.zoo import NETWORKS

    kind = args.target.split()[0] if args.target.strip() else ""
    if kind and kind not in KINDS:
        # Target() takes aliases ("gpu" is cuda), but a command line should say what it means.
        raise CLIError(
            f"--target {args.target!r}: name the target kind, one of {', '.join(KINDS)} "
            "(a GPU is cuda for NVIDIA or opencl for others)"
        )
    if not args.onnx and args.network not in NETWORKS:
        raise CLIError(
            f"--network {args.network!r} is not a zoo network; use one of "
            f"{', '.join(NETWORKS)}, or give --onnx FILE"
        )
    if not args.onnx and args.network.startswith("squeezenet") and args.layout != "NCHW":
        # relay.testing's squeezenet concatenates its fire modules on axis 1: NCHW only.
        raise CLIError(
            f"--network {args.network} exists in the NCHW layout only (as TVM's); add --layout NCHW"
        )
    if args.onnx:
        if not Path(args.onnx).is_file():
            raise CLIError(f"--onnx {args.onnx}: from_onnx: no such ONNX file; fix the path")
        try:
            import onnx  # noqa: F401 - optional: only ONNX models need it
        except ImportError:
            raise CLIError(
                f"--onnx {args.onnx}: reading ONNX models needs the onnx package: "
                "pip install onnx (or autosched's 'onnx' extra)"
            ) from None
    lib = getattr(args, "lib", None)
    # A directory used to be reported as "does not exist": it does, as a directory.
    if lib and Path(lib).is_dir():
        raise CLIError(f"--lib {lib} is a directory; give the file `compile -o FILE` wrote")
    if args.log and Path(args.log).is_dir():
        _check_log_path(Path(args.log), args.command)
    if lib and not Path(lib).is_file():
        raise CLIError(f"--lib {lib} does not exist; write it with `python -m autosched compile`")
    if args.log and args.command != "tune" and not lib and not Path(args.log).is_file():
        raise CLIError(
            f"--log {args.log} does not exist; tune first (`python -m autosched tune "
            f"--log {args.log} ...`) or fix the path"
        )
    try:
        check_host_cpu(Target(args.target))
    except ValueError as e:
        raise CLIError(f"--target {args.target!r}: {e}") from None
    if args.input_shape is not None:
        if not args.onnx:
            raise CLIError("--input-shape only applies to --onnx models; drop it or add --onnx")
        _input_shape(args.input_shape)
    minimum = {"batch_size": 1, "repeat": 1, "min_repeat_ms": 0, "trials": 1, "per_round": 1,
               "population": 1, "generations": 0, "accuracy_inputs": 0}  # fmt: skip
    for name, low in minimum.items():
        value = getattr(args, name, None)
        if value is not None and value < low:
            flag = "--" + name.replace("_", "-")
            raise CLIError(f"{flag} must be >= {low}, got {value}")
    if getattr(args, "max_seconds", None) is not None and not args.max_seconds > 0:
        raise CLIError(f"--max-seconds must be > 0, got {args.max_seconds}")
    if args.log:
        _check_log_path(Path(args.log), args.command)
    if args.command == "tune":
        _require_device(args)  # before the task list: a page of DAGs would hide the reason


def _require_device(args) -> None:
    """``tune`` for a GPU target measures on this machine: refuse at once without the device."""
    from codegen.target import Target

    from ..tuning import missing_device_reason

    target = Target(args.target)
    reason = missing_device_reason(target.kind) if target.is_gpu else None
    if reason is not None:
        raise CLIError(
            f"--target {args.target!r}: cannot tune: no usable {target.kind} device 0 on this "
            f"machine ({reason}); tune on a machine with one"
        )


def _load_network(args):
    from tensorir.graph import get_network

    if args.onnx:
        from tensorir.graph.onnx_frontend import OnnxImportError, from_onnx, load_model

        try:
            model = load_model(args.onnx)
            shape = None
            if args.input_shape:
                shape = _input_shapes(args.input_shape, model)
            mod, params = from_onnx(model, shape=shape)
        except (OnnxImportError, FileNotFoundError) as e:
            raise CLIError(f"--onnx {args.onnx}: {e}") from None
        func = mod["main"]
        data = next(v for v in func.params if v.name not in params)
        return mod, params, tuple(data.shape), data.name, Path(args.onnx).stem
    mod, params, input_shape, _ = get_network(
        args.network, batch_size=args.batch_size, layout=args.layout
    )
    # "data", or the int64 "input_ids" of the zoo's bert-* / gpt2
    name = mod["main"].params[0].name
    return mod, params, tuple(input_shape), name, args.network


def _log_path(args, name: str) -> Path:
    if args.log:
        return Path(args.log)
    kind = args.target.split()[0]
    precision = "" if args.precision == "float32" else f"-{args.precision}"
    return Path(f"{name}-{args.layout}-B{args.batch_size}-{kind}{precision}.json")


def _graph_flags(args) -> str:
    """The command-line flags that pick this graph and target (for the next command to run)."""
    if args.onnx:
        flags = ["--onnx", args.onnx]
        flags += ["--input-shape", args.input_shape] if args.input_shape else []
    else:
        flags = ["--network", args.network, "--layout", args.layout]
        flags += ["--batch-size", str(args.batch_size)]
    flags += ["--target", args.target] + (["--no-winograd"] if args.no_winograd else [])
    flags += ["--precision", args.precision] if args.precision != "float32" else []
    return " ".join(shlex.quote(f) for f in flags)


def _graph_name(args) -> str:
    """How an exported network names the graph it was compiled from."""
    if args.onnx:
        shape = f" input {args.input_shape}" if args.input_shape else ""
        name = f"ONNX {args.onnx}{shape}"
    else:
        name = f"{args.network} {args.layout} B{args.batch_size}"
    name += " no-winograd" if args.no_winograd else ""
    return name + ("" if args.precision == "float32" else f" {args.precision}")


def _load_lib(args, mod, params):
    """Load ``--lib`` and refuse it when it was compiled from another graph than the one the
    arguments name (a fingerprint of the optimised graph; files without one are not checked)."""
    import autosched as ansor

    from ..network.partition import network_fingerprint

    try:
        lib = ansor.load_module(args.lib)
    except ValueError as e:
        raise CLIError(f"--lib {args.lib}: {e}") from None
    recorded = lib.plan.graph.get("fingerprint")
    use_winograd = False if args.no_winograd else None
    expected = network_fingerprint(mod, params, args.target, use_winograd)
    if recorded is not None and recorded != expected:
        built_from = lib.plan.graph.get("name", "another graph")
        raise CLIError(
            f"--lib {args.lib} was compiled from {built_from} (graph {recorded}), not from "
            f"{_graph_name(args)} (graph {expected}); compile it again: python -m autosched "
            f"compile {_graph_flags(args)} -o {shlex.quote(args.lib)}"
        )
    return lib


def _compile(args, mod, params, log: Path):
    import autosched as ansor

    from ..network.build import build_network

    use_winograd = False if args.no_winograd else None
    if not log.exists():
        print(f"Compile: no log {log}; every kernel uses the default schedule")
        return build_network(mod, args.target, params, use_winograd=use_winograd)
    t0 = time.perf_counter()
    with ansor.ApplyHistoryBest(str(log)) as ctx:
        lib = build_network(mod, args.target, params, use_winograd=use_winograd)
    print(f"Compile: {ctx.summary()} ({time.perf_counter() - t0:.1f} s)")
    return lib


def _run_and_check(
    args, lib, mod, params, input_shape, input_name, estimated_ms=None, coverage=None
) -> int:
    import autosched as ansor
    from tensorir.dtype import tolerance
    from tensorir.graph import evaluate

    dev = ansor.device(lib.target.device_kind, 0)
    module = ansor.GraphModule(lib, dev)
    rng = np.random.default_rng(0)
    feeds = {}
    for var in mod["main"].params:  # every graph input (an ONNX BERT has three)
        if var.name in params:
            continue
        if np.issubdtype(np.dtype(var.dtype), np.integer):
            # ids, token types, masks: 0 and 1 are valid for any embedding table or mask
            feeds[var.name] = rng.integers(0, 2, var.shape).astype(var.dtype)
        else:
            feeds[var.name] = rng.uniform(-1, 1, var.shape).astype(var.dtype)
    module.set_input(**feeds)
    module.run()
    refs = evaluate(mod, feeds, params)
    refs = refs if isinstance(refs, list) else [refs]
    outs = [module.get_output(k).numpy() for k in range(module.get_num_outputs())]
    # A 16-bit network against its own numpy reference: the roundings of the 16-bit
    # intermediates differ in order, so the 16-bit tolerance.
    low = args.precision != "float32"
    tol = dict(zip(("rtol", "atol"), tolerance(args.precision))) if low else {}
    ok, lines = check_outputs(outs, refs, **tol)
    for line in lines:
        print(line)
    if args.command in ("tune", "benchmark", "run"):
        res = module.benchmark(dev, repeat=args.repeat, min_repeat_ms=args.min_repeat_ms)
        times = np.array(res.results) * 1e3
        print(
            f"Execution time summary: mean {times.mean():.3f} ms, median "
            f"{np.median(times):.3f} ms, std {times.std():.3f} ms ({len(times)} repeats)"
        )
        if args.command == "tune":
            busy = None if lib.target.is_gpu else machine_busy(cpu_count())
            measured_ms = float(np.median(times))
            gpu, cold = lib.target.is_gpu, _tunes_cold(args)
            print(latency_comparison(estimated_ms, measured_ms, gpu, cold, busy, coverage))
    return 0 if ok else 1


def _print_accuracy(args, lib, fp32_mod, fp32_params, mod, input_name) -> None:
    """The accuracy report of a 16-bit ``--precision``: the built network against the float32
    numpy reference on ``--accuracy-inputs`` random inputs."""
    import autosched as ansor

    if args.precision == "float32" or not args.accuracy_inputs:
        return
    module = ansor.GraphModule(lib, ansor.device(lib.target.device_kind, 0))

    def run(x):
        module.set_input(input_name, x)
        module.run()
        return module.get_output(0).numpy()

    t0 = time.perf_counter()
    report = ansor.accuracy_report(
        fp32_mod, fp32_params, mod, args.accuracy_inputs, lowp_run=run, dtype=args.precision
    )
    print(f"Accuracy: {report} ({time.perf_counter() - t0:.1f} s)")


def latency_comparison(
    estimated_ms: float | None,
    measured_ms: float,
    gpu: bool,
    cold_tuned: bool = False,
    busy: str | None = None,
    coverage: tuple[int, int] | None = None,
) -> str:
    """One line: the task scheduler's estimate beside the measured network latency, and why
    they differ (the reason depends on which one is larger).

    ``coverage`` is ``(tasks with a record, tasks)``: when some tasks have none, the estimate
    sums the others (:meth:`TaskScheduler.partial_latency_ms`) and the line says so.

    ``cold_tuned`` says the candidates were timed with cold caches, as the network runs them;
    ``busy`` (from :func:`machine_busy`) names other load on the cores, the likeliest reason for a
    network far slower than its kernels."""
    head = (
        f"Latency: estimated {'-' if estimated_ms is None else f'{estimated_ms:.3f} ms'} "
        f"(sum of weight x best kernel time), measured {measured_ms:.3f} ms (network median)."
    )
    if estimated_ms is None:
        return head + " No estimate: no task has a measured record yet."
    if coverage is not None and coverage[0] < coverage[1]:
        return head + (
            f" The estimate covers the {coverage[0]} of {coverage[1]} tasks that have a measured "
            "record; the others run their default schedules and are not in it, so the network "
            "is slower than the estimate (tune longer to measure every task)."
        )
    if abs(measured_ms - estimated_ms) <= 0.15 * estimated_ms:
        return head + " They agree within 15%."
    if measured_ms > estimated_ms:
        reasons = []
        if busy:
            reasons.append(f"{busy}, so kernels ran on shared cores (time it again when quiet)")
        if not cold_tuned:
            reasons.append(
                "tuning times each kernel alone with warm caches, while the network runs kernels "
                "back to back with cold caches"
            )
        if gpu:
            reasons.append("launch gaps between kernels")
        reasons.append("kernels without a reduction are not tuned, so not in the estimate")
        return head + " The network is slower: " + "; ".join(reasons) + "."
    return head + (
        " The network is faster: the estimate holds each task's best measurement so far, and "
        "early or noisy ones (a kernel timed while the machine was busy, or an untuned default) "
        "count in full until a better record replaces them; more tuning brings them together."
    )


def machine_busy(cores: int) -> str | None:
    """A phrase naming other load on this machine's cores (the 1-minute load average above the
    cores this process uses, less the one it is itself), or None when it looks quiet."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # not on every platform
        return None
    if load <= cores + 1:
        return None
    return f"the machine is busy (load average {load:.1f} on {cores} cores)"


def check_outputs(outs, refs, rtol=1e-3, atol=1e-5) -> tuple[bool, list[str]]:
    """Compare EVERY network output with its reference.

    Returns
    -------
    ok : bool
        True when there are as many outputs as references and each is close to its reference.
    lines : list of str
        One report line per output (``Output 1 (2, 5): ... (WRONG)``).
    """
    lines, ok = [], len(outs) == len(refs)
    if not ok:
        lines.append(f"The network gave {len(outs)} outputs, the reference {len(refs)} (WRONG)")
    for k, (out, ref) in enumerate(zip(outs, refs)):
        out, ref = np.asarray(out), np.asarray(ref)
        if out.shape != ref.shape:
            ok = False
            lines.append(f"Output {k}: shape {out.shape}, the reference's {ref.shape} (WRONG)")
            continue
        diff = np.abs(out.astype(np.float64) - ref.astype(np.float64))
        err = float(np.max(diff, initial=0.0) / (np.max(np.abs(ref), initial=0.0) + 1e-12))
        good = bool(np.allclose(out, ref, rtol=rtol, atol=atol))
        ok = ok and good
        lines.append(
            f"Output {k} {out.shape}: max relative error vs numpy reference {err:.2e} "
            f"({'OK' if good else 'WRONG'})"
        )
    return ok, lines


def run_network_command(args) -> int:
    """Run one of the network subcommands parsed by :func:`add_network_commands`."""
    import autosched as ansor

    check_network_args(args)
    mod, params, input_shape, input_name, name = _load_network(args)
    fp32_mod, fp32_params = mod, params
    if args.precision != "float32":
        # The weights are bound (in 16 bits) and batch norm folded: no params from here on.
        mod, params = ansor.to_mixed_precision(mod, args.precision, params), {}
    log = _log_path(args, name)
    estimated_ms, coverage = None, None
    if args.command == "tune":
        use_winograd = False if args.no_winograd else None
        print("Extract tasks...")
        tasks, weights = ansor.extract_tasks(mod, params, args.target, use_winograd=use_winograd)
        for i, (task, w) in enumerate(zip(tasks, weights)):
            key = task.workload_key
            print(f"========== Task {i}  (workload key: {key}, weight {w}) ==========")
            print(task.compute_dag)
        if args.no_resume and log.exists():
            log.unlink()
        resume = log.exists()
        from ..network.task_scheduler import LogEstimatedLatency, PrintTableInfo

        # The table (or a live bar on a terminal); this command ends with its own next step.
        callbacks = [PrintTableInfo(final_line=False),
                     LogEstimatedLatency(log.parent / "total_latency.tsv")]  # fmt: skip
        tuner = ansor.TaskScheduler(
            tasks, weights, load_log_file=str(log) if resume else None, callbacks=callbacks
        )
        # Unset flags stay None: the task scheduler and the search choose them from the budget.
        params_search = ansor.SearchParams(
            evolutionary_search_population=args.population,
            evolutionary_search_num_iters=args.generations,
        )
        trials = args.trials
        if trials is None:
            trials = 0 if args.max_seconds is not None else DEFAULT_TRIALS  # 0: no trial limit
        options = ansor.TuningOptions(
            num_measure_trials=trials,
            num_measures_per_round=args.per_round,
            runner=_cli_runner(args),
            measure_callbacks=[ansor.RecordToFile(str(log))],
            max_tuning_seconds=args.max_seconds,
        )
        if not resume and options.trial_limit is not None and trials < len(tasks):
            raise CLIError(
                f"--trials {trials} is below the {len(tasks)} tasks: every task needs a "
                f"round; use --trials >= {len(tasks)} (better >= {4 * len(tasks)})"
            )
        from ..tuning import require_measuring_devices

        try:
            require_measuring_devices(tasks, options)
        except RuntimeError as e:
            raise CLIError(f"--target {args.target!r}: {e}") from None
        from_log = f", resuming from {log}" if resume else ""
        budget = [f"{trials} trials"] if options.trial_limit else []
        budget += [f"{args.max_seconds:g} s"] if args.max_seconds is not None else []
        print(f"Begin tuning ({' and '.join(budget)}{from_log})...")
        # Stopped by Ctrl-C / SIGTERM: this very command resumes (the log is kept).
        again = f"python -m autosched tune {_graph_flags(args)} --log {shlex.quote(str(log))}"
        hint = f"run tune again with the same --log (it resumes from it): {again}"
        tuner.resume_hint = hint.replace("{", "{{").replace("}", "}}")
        tuner.tune(options, search_policy_params=params_search)
        # Whenever any task has a record: a partial estimate says how many it covers.
        estimated_ms, covered = tuner.partial_latency_ms()
        coverage = (covered, len(tasks))
    if args.command in ("run", "benchmark") and getattr(args, "lib", None):
        lib = _load_lib(args, mod, params)
    else:
        lib = _compile(args, mod, params, log)
    if args.command == "compile":
        lib.export_library(args.output, graph_name=_graph_name(args))
        lib_flag = f"--lib {shlex.quote(args.output)}"
        print(f"Wrote {args.output}. Next: python -m autosched run {_graph_flags(args)} {lib_flag}")
        return 0
    status = _run_and_check(
        args, lib, mod, params, input_shape, input_name,
        estimated_ms if args.command == "tune" else None,
        coverage if args.command == "tune" else None,
    )  # fmt: skip
    _print_accuracy(args, lib, fp32_mod, fp32_params, mod, input_name)
    if args.command == "tune":
        lib_path = shlex.quote(f"{log.stem}.lib")
        print(
            f"Records: {log}. Next: python -m autosched compile {_graph_flags(args)} "
            f"--log {shlex.quote(str(log))} -o {lib_path}"
        )
    return status
