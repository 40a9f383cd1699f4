"""The command line of ``python -m autosched tune|compile|run|benchmark`` (cli/network.py): the
subcommands' arguments, their checks (each bad value a :class:`CLIError` naming the flag), and
the names and flags derived from them (log path, graph name, the flags of the next command).
"""

from __future__ import annotations

import shlex
from pathlib import Path

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
                "measurement, 8 on the local CPU; TVM: 2048; smaller = faster rounds)",
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
