"""Hand-built GPU programs of tests/gpu/programs.py that check arithmetic: every math call and
float operator (``ROWS``), integer division and modulo, bitwise ops and casts, float16."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from tensorir.expr import Const, Not, Var, call, cast, const, floordiv, floormod, max_, min_, select
from tensorir.loops import Buffer, Program, Store, seq

from .kernel_kit import Case, f32, ld, thread

# ----------------------------------------------------------------------------- math


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


ROWS: list[tuple[str, Callable, Callable]] = [
    ("exp", lambda x, y: call("exp", x), lambda x, y: np.exp(x)),
    ("log", lambda x, y: call("log", call("fabs", x) + 0.5), lambda x, y: np.log(abs(x) + 0.5)),
    ("sqrt", lambda x, y: call("sqrt", call("fabs", x) + 0.5), lambda x, y: np.sqrt(abs(x) + 0.5)),
    (
        "rsqrt",
        lambda x, y: call("rsqrt", call("fabs", x) + 0.5),
        lambda x, y: 1 / np.sqrt(abs(x) + 0.5),
    ),
    ("tanh", lambda x, y: call("tanh", x), lambda x, y: np.tanh(x)),
    ("sigmoid", lambda x, y: call("sigmoid", x), lambda x, y: 1 / (1 + np.exp(-x))),
    ("erf", lambda x, y: call("erf", x), lambda x, y: _erf(x)),
    ("pow", lambda x, y: call("pow", call("fabs", x) + 0.5, y), lambda x, y: (abs(x) + 0.5) ** y),
    ("fabs", lambda x, y: call("fabs", x), lambda x, y: abs(x)),
    ("floor", lambda x, y: call("floor", x * 3.0), lambda x, y: np.floor(x * 3)),
    ("ceil", lambda x, y: call("ceil", x * 3.0), lambda x, y: np.ceil(x * 3)),
    ("round", lambda x, y: call("round", x * 3.0), lambda x, y: np.round(x * 3)),
    ("sin", lambda x, y: call("sin", x), lambda x, y: np.sin(x)),
    ("cos", lambda x, y: call("cos", x), lambda x, y: np.cos(x)),
    ("min", lambda x, y: min_(x, y), lambda x, y: np.minimum(x, y)),
    ("max_inf", lambda x, y: max_(x, const(-math.inf)), lambda x, y: x),
    ("min_inf", lambda x, y: min_(x, const(math.inf)), lambda x, y: x),
    ("div", lambda x, y: x / (call("fabs", y) + 1.0), lambda x, y: x / (abs(y) + 1)),
    ("fdiv", lambda x, y: floordiv(x, 0.7), lambda x, y: np.floor_divide(x, np.float32(0.7))),
    ("fmod", lambda x, y: floormod(x, 0.7), lambda x, y: np.mod(x, np.float32(0.7))),
    ("select", lambda x, y: select(x > 0.0, x, y * 2.0), lambda x, y: np.where(x > 0, x, 2 * y)),
    (
        "logic",
        lambda x, y: select(Not(x > 0.0) & (y > 0.0), 1.0, -1.0),
        lambda x, y: np.where(~(x > 0) & (y > 0), 1.0, -1.0),
    ),
    (
        "to_int",
        lambda x, y: cast("float32", cast("int32", x * 10.0)),
        lambda x, y: np.trunc(x * 10),
    ),
    ("neg_const", lambda x, y: x * -2.5, lambda x, y: x * -2.5),
]


def math_case(n: int = 256) -> Case:
    """Out[r, i] = f_r(A[i], B[i]) for every math call and float operator (one kernel)."""
    a, b = Buffer("A", (n,), "float32"), Buffer("B", (n,), "float32")
    o = Buffer("Out", (len(ROWS), n), "float32")
    bx, tx = Var("bx"), Var("tx")
    i = bx * 64 + tx
    x, y = ld(a, i), ld(b, i)
    stores = [Store(o, r * n + i, cast("float32", f(x, y))) for r, (_, f, _) in enumerate(ROWS)]
    body = thread(bx, n // 64, "blockIdx.x", thread(tx, 64, "threadIdx.x", seq(*stores)))

    def ref(d):
        x64, y64 = d["A"].astype(np.float64), d["B"].astype(np.float64)
        rows = [g(x64, y64) for _, _, g in ROWS]
        # floor-division rows are checked in float32, as the kernel computes them
        rows[[r for r, _, _ in ROWS].index("fdiv")] = np.floor_divide(d["A"], np.float32(0.7))
        rows[[r for r, _, _ in ROWS].index("fmod")] = np.mod(d["A"], np.float32(0.7))
        return {"Out": np.stack(rows).astype(np.float32)}

    def inputs(rng):
        # keep x*3 and x/0.7 away from integers so floor/ceil/round/fdiv are not at a knife edge
        return {"A": f32(rng, n), "B": f32(rng, n)}

    return Case("math", Program("math", (a, b, o), (), body), inputs, ref, rtol=2e-5, atol=2e-5)


# ----------------------------------------------------------------------------- integers


def int_case(n: int = 256) -> Case:
    """Floor division/modulo of signed ints (negative operands), min/max, int64 and int8."""
    a, b = Buffer("A", (n,), "int32"), Buffer("B", (n,), "int32")
    o = Buffer("Out", (6, n), "int32")
    o64 = Buffer("Out64", (n,), "int64")
    a8, b8 = Buffer("A8", (n,), "int8"), Buffer("B8", (n,), "int8")
    o8 = Buffer("Out8", (4, n), "int8")
    o8w = Buffer("Out8w", (n,), "int32")
    bx, tx = Var("bx"), Var("tx")
    i = bx * 64 + tx
    x, y, x8, y8 = ld(a, i), ld(b, i), ld(a8, i), ld(b8, i)
    rows = [floordiv(x, y), floormod(x, y), floordiv(x, 4), floormod(x, 4), min_(x, y), max_(x, y)]
    rows8 = [x8 * y8 + x8, max_(x8, y8), floordiv(x8, Const(3, "int8")), x8 - y8]
    stores = [Store(o, r * n + i, e) for r, e in enumerate(rows)]
    stores += [Store(o8, r * n + i, e) for r, e in enumerate(rows8)]
    big = cast("int64", x) * Const(3_000_000_000, "int64")
    stores.append(Store(o64, i, floordiv(big, Const(-7, "int64"))))
    stores.append(Store(o8w, i, cast("int32", x8) * cast("int32", y8)))
    body = thread(bx, n // 64, "blockIdx.x", thread(tx, 64, "threadIdx.x", seq(*stores)))

    def inputs(rng):
        bb = rng.integers(1, 8, n) * rng.choice([-1, 1], n)
        return {
            "A": rng.integers(-50, 50, n).astype(np.int32),
            "B": bb.astype(np.int32),
            "A8": rng.integers(-128, 128, n).astype(np.int8),
            "B8": rng.integers(-128, 128, n).astype(np.int8),
        }

    def ref(d):
        x, y, x8, y8 = d["A"], d["B"], d["A8"], d["B8"]
        with np.errstate(over="ignore"):
            r8 = [x8 * y8 + x8, np.maximum(x8, y8), x8 // np.int8(3), x8 - y8]
        return {
            "Out": np.stack([x // y, x % y, x // 4, x % 4, np.minimum(x, y), np.maximum(x, y)]),
            "Out64": (x.astype(np.int64) * 3_000_000_000) // -7,
            "Out8": np.stack(r8).astype(np.int8),
            "Out8w": x8.astype(np.int32) * y8.astype(np.int32),
        }

    prog = Program("ints", (a, b, a8, b8, o, o64, o8, o8w), (), body)
    return Case("ints", prog, inputs, ref, rtol=0, atol=0)


def half_case(n: int = 256) -> Case:
    """float16 arithmetic, a float16 math call, and half <-> float casts."""
    a, b = Buffer("A", (n,), "float16"), Buffer("B", (n,), "float16")
    c, e, g = (
        Buffer("C", (n,), "float16"),
        Buffer("E", (n,), "float16"),
        Buffer("G", (n,), "float16"),
    )
    f = Buffer("F", (n,), "float32")
    bx, tx = Var("bx"), Var("tx")
    i = bx * 64 + tx
    x, y = ld(a, i), ld(b, i)
    stores = seq(
        Store(c, i, x * y + x),
        Store(e, i, call("exp", x)),
        Store(f, i, cast("float32", x) * 2.0),
        Store(g, i, max_(x, y)),
    )
    body = thread(bx, n // 64, "blockIdx.x", thread(tx, 64, "threadIdx.x", stores))

    def ref(d):
        x, y = d["A"], d["B"]
        return {
            "C": x * y + x,
            "E": np.exp(x.astype(np.float32)).astype(np.float16),
            "F": x.astype(np.float32) * 2,
            "G": np.maximum(x, y),
        }

    def inputs(rng):
        return {"A": f32(rng, n).astype(np.float16), "B": f32(rng, n).astype(np.float16)}

    prog = Program("halfs", (a, b, c, e, f, g), (), body)
    return Case("halfs", prog, inputs, ref, rtol=1e-2, atol=1e-2, needs=("float16",))
