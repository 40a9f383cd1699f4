"""How a float32 network's error against float32 depends on how its conv operands become TF32,
simulated with numpy on the CPU (no GPU): every conv2d's data and weight are cut to TF32's 10
mantissa bits before the float32 reference conv, either truncated (what Hopper's ``wgmma``
reads of a float32 operand in shared memory) or rounded to nearest (what wmma's
``__float_to_tf32`` does; ``tensorir.dtype`` has both).

    python benchmarks/tf32_rounding_error.py --network resnet-18

Prints the max error relative to the largest output, for: both truncated, data truncated and
weights rounded (the weights are constants: they could be rounded once on the host), both
rounded. Session 26 (benchmarks/RESULTS.md) read it to see what rounding only the weights
would buy.
"""

from __future__ import annotations

import argparse
import contextlib
import json

import numpy as np

from tensorir.dtype import round_to_tf32, truncate_to_tf32
from tensorir.graph import get_network
from tensorir.graph.reference import evaluate
from tensorir.graph.shapes import get_op


@contextlib.contextmanager
def conv_operands(data_fn, weight_fn):
    """conv2d's numpy reference sees its data and weight through these while inside (the op
    table entry is frozen; it is swapped for the study and restored)."""
    entry = get_op("nn.conv2d")
    original = entry.reference

    def cut(attrs, shape, data, weight, *rest):
        return original(attrs, shape, data_fn(data), weight_fn(weight), *rest)

    object.__setattr__(entry, "reference", cut)
    try:
        yield
    finally:
        object.__setattr__(entry, "reference", original)


CASES = {
    "both truncated": (truncate_to_tf32, truncate_to_tf32),
    "data truncated, weights rounded": (truncate_to_tf32, round_to_tf32),
    "both rounded": (round_to_tf32, round_to_tf32),
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--network", default="resnet-18")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    mod, params, shape, _ = get_network(args.network, batch_size=1, layout="NHWC")
    x = np.random.default_rng(args.seed).uniform(-1, 1, shape).astype(np.float32)
    want = evaluate(mod, {"data": x}, params)
    errors = {}
    for name, (data_fn, weight_fn) in CASES.items():
        with conv_operands(data_fn, weight_fn):
            got = evaluate(mod, {"data": x}, params)
        errors[name] = float(np.abs(got - want).max() / np.abs(want).max())
        print(f"{args.network}: {name:32s} max relative error {errors[name]:.2e}")
    print(json.dumps(errors))


if __name__ == "__main__":
    main()
