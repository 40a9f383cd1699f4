"""``python -m autosched tune|compile|run|benchmark``: the whole-network workflow of the seeds.

``tune`` extracts the tasks of a zoo network (or an ONNX file), tunes them with the gradient task
scheduler (resuming from ``--log`` when it exists: a killed run loses at most the batch in
flight), then compiles the network with the history best, checks every output against the numpy
reference and benchmarks it. ``compile`` writes the compiled network to a file, ``run`` and
``benchmark`` load such a file (or compile from the log) and run it.

This module runs the commands; their arguments and checks are in ``network_args.py``, the
output check and latency report they print in ``network_report.py``.
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path

import numpy as np

from runtime.environment import cpu_count

from .network_args import (  # noqa: F401  (re-exported: cli/__init__ and tests import them here)
    DEFAULT_TRIALS,
    CLIError,
    _graph_flags,
    _graph_name,
    _input_shapes,
    _log_path,
    add_network_commands,
    check_network_args,
)
from .network_report import check_outputs, latency_comparison, machine_busy


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
