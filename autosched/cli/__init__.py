"""``python -m autosched ...``: the command line."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autosched", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo_text = "run hand-scheduled matmul and conv2d on every available backend"
    demo = sub.add_parser(
        "demo", help=demo_text,
        description=f"{demo_text[0].upper()}{demo_text[1:]}: build each, check it against "
        "the reference interpreter on random inputs and time it (no tuning; a smoke test of "
        "the compilers and devices).",
    )  # fmt: skip
    demo.add_argument("--size", type=int, default=512, help="matmul size (default 512)")
    demo.add_argument(
        "--target", action="append", choices=["llvm", "opencl", "cuda"],
        help="backend to run (repeatable; default: all available)",
    )  # fmt: skip
    distill = sub.add_parser(
        "distill", help="keep the best record per workload and target",
        description="Keep the best record per workload and target of a tuning log (TVM's "
        "measure_record --mode distill): a smaller log that builds the same network.",
    )  # fmt: skip
    distill.add_argument("-i", "--i", "--input", dest="input", required=True, help="log to read")
    distill.add_argument(
        "-o", "--o", "--output", dest="output",
        help="file to write (default: <input stem>.best.json)",
    )  # fmt: skip
    from .network import CLIError, add_network_commands, run_network_command

    add_network_commands(sub)
    args = parser.parse_args(argv)
    if args.command in ("tune", "compile", "run", "benchmark"):
        try:
            return run_network_command(args)
        except CLIError as e:
            # One line, as argparse's own errors end: what is wrong and what to do.
            print(f"{parser.prog} {args.command}: error: {e}", file=sys.stderr)
            raise SystemExit(2) from None
    if args.command == "distill":
        from .records import main as records_main

        return records_main(
            ["--mode", "distill", "-i", args.input] + (["-o", args.output] if args.output else [])
        )
    if args.command == "demo":
        from codegen.target import Target

        from ..tuning import missing_device_reason
        from .demo import run_demo

        for target in dict.fromkeys(args.target or ()):
            reason = missing_device_reason(target) if Target(target).is_gpu else None
            if reason is not None:
                print(f"{parser.prog} demo: error: --target {target}: no usable {target} "
                      f"device 0 on this machine ({reason}); leave --target out to run on "
                      "every available backend", file=sys.stderr)  # fmt: skip
                raise SystemExit(2)

        rows = run_demo(size=args.size, targets=args.target)
        bad = [r for r in rows if not r["err"] < 1e-2]
        if bad:
            print(f"WRONG RESULTS: {bad}", file=sys.stderr)
            return 1
    return 0
