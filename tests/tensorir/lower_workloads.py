"""What the lowering tests share (test_lower*.py): small workloads as ComputeDAGs (matmul,
elementwise chains, conv2d NHWC with padding, softmax), random inputs, the numpy reference, and
``check``: lower a state, run it with loop_interp and compare."""

import numpy as np

from tensorir import te
from tensorir.dag import ComputeDAG
from tensorir.dtype import to_numpy
from tensorir.loop_interp import run_program
from tensorir.loops import For, walk_stmts
from tensorir.lower import lower


def matmul_relu(n=16, m=12, k=10):
    A = te.placeholder((n, k), name="A")
    B = te.placeholder((k, m), name="B")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    D = te.compute((n, m), lambda i, j: te.max(C[i, j], 0.0), name="D")
    return ComputeDAG([A, B, D])


def matmul(n=16, m=12, k=10):
    A = te.placeholder((n, k), name="A")
    B = te.placeholder((k, m), name="B")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return ComputeDAG([A, B, C])


def elementwise(n=1000):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    return ComputeDAG([A, B])


def elementwise_chain(n=10, m=6):
    A = te.placeholder((n, m), name="A")
    B = te.compute((n, m), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((n, m), lambda i, j: B[i, j] * 3.0, name="C")
    D = te.compute((n, m), lambda i, j: te.exp(C[i, j] * 0.1), name="D")
    return ComputeDAG([A, D])


def conv2d_nhwc(n=1, h=6, w=6, ci=3, co=4, kh=3, kw=3, pad=1, stride=1):
    X = te.placeholder((n, h, w, ci), name="X")
    W = te.placeholder((kh, kw, ci, co), name="W")
    hp, wp = h + 2 * pad, w + 2 * pad
    P = te.compute(
        (n, hp, wp, ci),
        lambda b, y, x, c: te.if_then_else(
            te.all(y >= pad, y < h + pad, x >= pad, x < w + pad),
            X[b, y - pad, x - pad, c],
            0.0,
        ),
        name="pad",
    )
    oh, ow = (hp - kh) // stride + 1, (wp - kw) // stride + 1
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    rc = te.reduce_axis((0, ci), name="rc")
    Y = te.compute(
        (n, oh, ow, co),
        lambda b, y, x, f: te.sum(
            P[b, y * stride + ry, x * stride + rx, rc] * W[ry, rx, rc, f], axis=[ry, rx, rc]
        ),
        name="conv",
    )
    return ComputeDAG([X, W, Y])


def softmax(n=4, m=10):
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), name="k")
    mx = te.compute((n,), lambda i: te.max(A[i, k], axis=k), name="mx")
    e = te.compute((n, m), lambda i, j: te.exp(A[i, j] - mx[i]), name="e")
    k2 = te.reduce_axis((0, m), name="k2")
    s = te.compute((n,), lambda i: te.sum(e[i, k2], axis=k2), name="s")
    out = te.compute((n, m), lambda i, j: e[i, j] / s[i], name="out")
    return ComputeDAG([A, out])


def random_inputs(dag, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(t.shape).astype(to_numpy(t.dtype)) for t in dag.input_tensors]


def reference(dag, inputs):
    """eval_dag when available, else the unscheduled lowering (itself checked vs numpy)."""
    try:
        from tensorir.interp import eval_dag
    except ImportError:  # pragma: no cover - until the numpy reference lands
        eval_dag = None
    if eval_dag is not None:
        return [np.asarray(o) for o in eval_dag(dag, inputs)]
    return run_lowered(lower(dag), dag, inputs)


def run_lowered(prog, dag, inputs, simt=False):
    outs = [np.zeros(t.shape, to_numpy(t.dtype)) for t in dag.output_tensors]
    run_program(prog, [*[np.array(x) for x in inputs], *outs], simt=simt)
    return outs


def check(state, dag=None, seed=0, rtol=1e-4, atol=1e-4, simt=False):
    """Lower ``state``, run it on random inputs and compare with the reference; returns the
    Program. With ``simt`` it also runs GPU-style (threads in lockstep, shared per block)."""
    dag = dag if dag is not None else getattr(state, "dag", state)
    prog = lower(state)
    inputs = random_inputs(dag, seed)
    want = reference(dag, inputs)
    for mode in (False, True) if simt else (False,):
        got = run_lowered(prog, dag, inputs, simt=mode)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"simt={mode}\n{prog}")
    return prog


def _fors(prog):
    return [x for x in walk_stmts(prog.body) if isinstance(x, For)]
