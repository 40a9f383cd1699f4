"""TVM MetaSchedule baseline for the autosched benchmark operators.

Tunes each operator with TVM MetaSchedule (``tvm.s_tir.meta_schedule.tune_tir``) on the host
CPU, compiles the best schedule found, checks it against numpy and times it. Prints one JSON
line per operator on stdout (tuning logs go to stderr) and optionally writes the list to a file.

This script is standalone: it must run under TVM's own virtualenv and imports nothing from
autosched::

    /work/tvm-venv/bin/python benchmarks/tvm_baseline.py \\
        --ops matmul,dense,conv2d,conv2d_s2,depthwise,softmax \\
        --trials 200 --work-dir /tmp/tvm-ms --out results.json

Operators (float32, NHWC), written in TE the same way as ours:

=========  ================================================  ===========================
op         shape                                             FLOPs counted
=========  ================================================  ===========================
matmul     C[512,512] = A[512,512] @ B[512,512]              2*512^3
dense      [1,512] x weight[1000,512]^T + bias[1000]         2*512*1000 (bias add ignored)
conv2d     1x56x56x64, HWIO 3x3x64x64, s1 p1, +bias, relu    2*56*56*64*3*3*64 (bias/relu
                                                             ignored)
conv2d_s2  1x14x14x256, HWIO 3x3x256x512, s2 p1 -> 1x7x7x512  2*7*7*512*3*3*256
depthwise  1x112x112x32, HWC(M=1) 3x3x32x1, s1 p1            2*112*112*32*9
softmax    1x1000 over the last axis (topi.nn.softmax)       4*1000 (max, exp, sum, divide
                                                             per element)
=========  ================================================  ===========================

``--trials 0`` (or ``--untuned``) skips tuning and builds TVM's default, unscheduled lowering
(naive single-threaded loops) of each workload.

Known TVM 0.27 quirks handled here:

* MetaSchedule's default build function imports ``tvm.s_tir.tensor_intrin`` in every build
  worker (~43 s, mostly CUDA intrinsics), so every build hits the 30 s timeout. We pass
  ``LocalBuilder(f_build=_build_without_tensor_intrin)`` instead (no tensor intrinsics apply to
  fp32 on x86).
* Targets must be dicts (``{"kind": "llvm", "mcpu": ..., "num-cores": ...}``).
* Tuning also needs ``psutil``, ``cloudpickle`` and ``xgboost`` (+ ``scipy``), which the
  apache-tvm wheel does not pull in; the script checks for them up front. Either install them
  into TVM's venv or ``pip install --target DIR --no-deps psutil cloudpickle xgboost scipy`` and
  run with ``PYTHONPATH=DIR`` (the build/run worker processes inherit it).
* Tiny ops (softmax, dense) can come out slower tuned than untuned with few trials: the
  sampled schedules parallelise a 1-row problem. Compare with ``--trials 0``.
* ``apache-tvm-ffi`` must be pinned to 0.1.14.post0 (0.1.15 segfaults in ``tvm.ir.save_json``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

try:
    import tvm
    from tvm import te, topi
    from tvm.s_tir import meta_schedule as ms
except ImportError as _exc:  # pragma: no cover - depends on the interpreter used
    sys.stderr.write(
        f"error: TVM not importable ({_exc}).\n"
        "Run this script with TVM's venv: /work/tvm-venv/bin/python benchmarks/tvm_baseline.py\n"
    )
    sys.exit(2)

ALL_OPS = ("matmul", "dense", "conv2d", "conv2d_s2", "depthwise", "softmax")


# --------------------------------------------------------------------------------------------
# Workloads
# --------------------------------------------------------------------------------------------


@dataclass
class Workload:
    """A TE workload, its FLOP count and a numpy reference."""

    name: str
    tensors: list  # TE tensors: inputs first, the output last
    flops: float
    reference: Callable[[list[np.ndarray]], np.ndarray]


def _pad_nhwc(x: te.Tensor, pad: int, name: str = "PaddedInput") -> te.Tensor:
    n, h, w, c = (int(s) for s in x.shape)
    return te.compute(
        (n, h + 2 * pad, w + 2 * pad, c),
        lambda nn, hh, ww, cc: tvm.tirx.if_then_else(
            tvm.tirx.all(hh >= pad, hh < h + pad, ww >= pad, ww < w + pad),
            x[nn, hh - pad, ww - pad, cc],
            tvm.tirx.const(0.0, "float32"),
        ),
        name=name,
    )


def _np_conv2d_nhwc(x: np.ndarray, w: np.ndarray, stride: int, pad: int) -> np.ndarray:
    kh, kw, _, co = w.shape
    n, h, wd, _ = x.shape
    oh = (h + 2 * pad - kh) // stride + 1
    ow = (wd + 2 * pad - kw) // stride + 1
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0))).astype(np.float64)
    out = np.zeros((n, oh, ow, co), dtype=np.float64)
    for rh in range(kh):
        for rw in range(kw):
            win = xp[:, rh : rh + stride * oh : stride, rw : rw + stride * ow : stride, :]
            out += np.einsum("nhwc,co->nhwo", win, w[rh, rw].astype(np.float64))
    return out


def _np_depthwise_nhwc(x: np.ndarray, w: np.ndarray, pad: int) -> np.ndarray:
    kh, kw, _, _ = w.shape
    n, h, wd, c = x.shape
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0))).astype(np.float64)
    out = np.zeros((n, h, wd, c), dtype=np.float64)
    for rh in range(kh):
        for rw in range(kw):
            out += xp[:, rh : rh + h, rw : rw + wd, :] * w[rh, rw, :, 0].astype(np.float64)
    return out


def wl_matmul() -> Workload:
    n = 512
    a = te.placeholder((n, n), name="A")
    b = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return Workload(
        "matmul",
        [a, b, c],
        2.0 * n**3,
        lambda ins: ins[0].astype(np.float64) @ ins[1].astype(np.float64),
    )


def wl_dense() -> Workload:
    batch, in_dim, out_dim = 1, 512, 1000
    data = te.placeholder((batch, in_dim), name="data")
    weight = te.placeholder((out_dim, in_dim), name="weight")
    bias = te.placeholder((out_dim,), name="bias")
    k = te.reduce_axis((0, in_dim), name="k")
    dense = te.compute(
        (batch, out_dim),
        lambda i, j: te.sum(data[i, k] * weight[j, k], axis=k),
        name="T_dense",
    )
    out = te.compute((batch, out_dim), lambda i, j: dense[i, j] + bias[j], name="T_add")
    return Workload(
        "dense",
        [data, weight, bias, out],
        2.0 * batch * in_dim * out_dim,  # the bias add (1000 FLOPs) is not counted
        lambda ins: ins[0].astype(np.float64) @ ins[1].astype(np.float64).T + ins[2],
    )


def _conv2d_nhwc(x: te.Tensor, w: te.Tensor, stride: int, pad: int) -> te.Tensor:
    n, h, wd, ci = (int(s) for s in x.shape)
    kh, kw, _, co = (int(s) for s in w.shape)
    oh = (h + 2 * pad - kh) // stride + 1
    ow = (wd + 2 * pad - kw) // stride + 1
    xp = _pad_nhwc(x, pad)
    rh = te.reduce_axis((0, kh), name="rh")
    rw = te.reduce_axis((0, kw), name="rw")
    rc = te.reduce_axis((0, ci), name="rc")
    return te.compute(
        (n, oh, ow, co),
        lambda nn, yy, xx, ff: te.sum(
            xp[nn, yy * stride + rh, xx * stride + rw, rc] * w[rh, rw, rc, ff],
            axis=[rh, rw, rc],
        ),
        name="Conv2dOutput",
    )


def wl_conv2d() -> Workload:
    x = te.placeholder((1, 56, 56, 64), name="data")
    w = te.placeholder((3, 3, 64, 64), name="kernel")
    bias = te.placeholder((1, 1, 1, 64), name="bias")
    conv = _conv2d_nhwc(x, w, stride=1, pad=1)
    add = te.compute(
        conv.shape, lambda n, h, wd, c: conv[n, h, wd, c] + bias[0, 0, 0, c], name="T_add"
    )
    relu = te.compute(
        conv.shape,
        lambda n, h, wd, c: te.max(add[n, h, wd, c], tvm.tirx.const(0.0, "float32")),
        name="T_relu",
    )
    return Workload(
        "conv2d",
        [x, w, bias, relu],
        2.0 * 56 * 56 * 64 * 3 * 3 * 64,  # bias add and relu are not counted
        lambda ins: np.maximum(_np_conv2d_nhwc(ins[0], ins[1], 1, 1) + ins[2], 0.0),
    )


def wl_conv2d_s2() -> Workload:
    x = te.placeholder((1, 14, 14, 256), name="data")
    w = te.placeholder((3, 3, 256, 512), name="kernel")
    conv = _conv2d_nhwc(x, w, stride=2, pad=1)
    return Workload(
        "conv2d_s2",
        [x, w, conv],
        2.0 * 7 * 7 * 512 * 3 * 3 * 256,
        lambda ins: _np_conv2d_nhwc(ins[0], ins[1], 2, 1),
    )


def wl_depthwise() -> Workload:
    x = te.placeholder((1, 112, 112, 32), name="data")
    w = te.placeholder((3, 3, 32, 1), name="kernel")
    xp = _pad_nhwc(x, 1)
    rh = te.reduce_axis((0, 3), name="rh")
    rw = te.reduce_axis((0, 3), name="rw")
    out = te.compute(
        (1, 112, 112, 32),
        lambda n, h, wd, c: te.sum(xp[n, h + rh, wd + rw, c] * w[rh, rw, c, 0], axis=[rh, rw]),
        name="DepthwiseConv2d",
    )
    return Workload(
        "depthwise",
        [x, w, out],
        2.0 * 112 * 112 * 32 * 9,
        lambda ins: _np_depthwise_nhwc(ins[0], ins[1], 1),
    )


def _np_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def wl_softmax() -> Workload:
    x = te.placeholder((1, 1000), name="data")
    out = topi.nn.softmax(x, axis=-1)
    return Workload(
        "softmax",
        [x, out],
        4.0 * 1000,  # ~4 FLOPs per element: max, exp, sum, divide
        lambda ins: _np_softmax(ins[0]),
    )


WORKLOADS: dict[str, Callable[[], Workload]] = {
    "matmul": wl_matmul,
    "dense": wl_dense,
    "conv2d": wl_conv2d,
    "conv2d_s2": wl_conv2d_s2,
    "depthwise": wl_depthwise,
    "softmax": wl_softmax,
}


# --------------------------------------------------------------------------------------------
# Tuning, building, checking, timing
# --------------------------------------------------------------------------------------------


def _build_without_tensor_intrin(mod, target, _params):
    """MetaSchedule build function that skips ``import tvm.s_tir.tensor_intrin``.

    Same as ``s_tir.meta_schedule.builder.default_build`` minus that import, which takes ~43 s
    in every (per-batch, freshly spawned) build worker and makes all builds time out.
    """
    from tvm.driver import build as tvm_build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    return tvm_build(mod, target=target)


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Send everything written to fd 1 (Python, C++ and child processes) to stderr."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


# MetaSchedule's local tuning needs these, but the apache-tvm wheel does not depend on them.
TUNING_DEPS = {
    "psutil": "CPU counts (builder workers, tuning threads)",
    "cloudpickle": "the popen worker pool that builds and runs candidates",
    "xgboost": "the default ('xgb') cost model",
}


def check_tuning_deps() -> None:
    import importlib.util

    missing = [m for m in TUNING_DEPS if importlib.util.find_spec(m) is None]
    if missing:
        why = "; ".join(f"{m}: {TUNING_DEPS[m]}" for m in missing)
        raise SystemExit(
            f"error: MetaSchedule tuning needs {', '.join(missing)} ({why}), not importable "
            f"from {sys.executable}.\nInstall them into TVM's venv "
            f"({sys.executable} -m pip install {' '.join(missing)}), put a directory holding "
            "them on PYTHONPATH, or run with --trials 0 for untuned builds only."
        )


def host_cpu() -> str:
    return str(tvm.target.codegen.llvm_get_system_cpu())


def target_config(mcpu: str, num_cores: int) -> dict:
    return {"kind": "llvm", "mcpu": mcpu, "num-cores": num_cores}


def run_op(wl: Workload, target_cfg: dict, args: argparse.Namespace) -> dict:
    target = tvm.target.Target(target_cfg)
    func = te.create_prim_func(wl.tensors)
    mod = tvm.IRModule({"main": func})
    trials = 0 if args.untuned else args.trials
    tune_seconds = 0.0
    if trials > 0:
        os.makedirs(args.work_dir, exist_ok=True)
        # A fresh directory per run: a JSON database left over from an earlier run would be
        # reloaded and mixed into this one's results.
        op_dir = tempfile.mkdtemp(prefix=f"{wl.name}-", dir=args.work_dir)
        builder = ms.builder.LocalBuilder(
            f_build=_build_without_tensor_intrin, timeout_sec=args.build_timeout
        )
        runner = ms.runner.LocalRunner(timeout_sec=args.run_timeout)
        with _stdout_to_stderr():
            t0 = time.perf_counter()
            database = ms.tune_tir(
                mod,
                target,
                op_dir,
                max_trials_global=trials,
                num_trials_per_iter=args.trials_per_iter,
                builder=builder,
                runner=runner,
                seed=args.seed,
            )
            tune_seconds = time.perf_counter() - t0
            sch = ms.tir_integration.compile_tir(database, mod, target)
        if sch is None:
            raise RuntimeError(
                f"MetaSchedule found no valid schedule for {wl.name} in {trials} trials "
                f"(all builds/runs failed?); see the logs under {op_dir}/logs"
            )
        n_records = len(database.get_all_tuning_records())
        mod = sch.mod
    else:
        n_records = 0

    with _stdout_to_stderr():
        exe = tvm.compile(mod, target=target)
    dev = tvm.cpu(0)
    rng = np.random.default_rng(args.seed if args.seed is not None else 0)
    np_ins = [
        rng.uniform(-1.0, 1.0, size=[int(s) for s in t.shape]).astype(np.float32)
        for t in wl.tensors[:-1]
    ]
    out_t = wl.tensors[-1]
    out_shape = [int(s) for s in out_t.shape]
    tvm_args = [tvm.runtime.tensor(a, dev) for a in np_ins]
    tvm_out = tvm.runtime.empty(out_shape, "float32", dev)
    exe.mod["main"](*tvm_args, tvm_out)
    ref = wl.reference(np_ins)
    got = tvm_out.numpy()
    try:
        np.testing.assert_allclose(got, ref, rtol=args.rtol, atol=args.atol)
    except AssertionError as exc:
        raise RuntimeError(f"{wl.name}: TVM output does not match numpy:\n{exc}") from exc

    evaluator = exe.mod.time_evaluator(
        "main", dev, number=args.number, repeat=args.repeat, min_repeat_ms=args.min_repeat_ms
    )
    results = evaluator(*tvm_args, tvm_out).results  # seconds per run, one per repeat
    ms_median = float(np.median(results)) * 1e3
    return {
        "op": wl.name,
        "ms": round(ms_median, 6),
        "gflops": round(wl.flops / (ms_median * 1e-3) / 1e9, 3),
        "tune_seconds": round(tune_seconds, 3),
        "trials": trials,
        "measured_records": n_records,
        "tvm_version": tvm.__version__,
        "target": target_cfg,
        "correct": True,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ops", default=",".join(ALL_OPS), help=f"comma list of {','.join(ALL_OPS)}")
    p.add_argument("--trials", type=int, default=200, help="max_trials_global per op (0: untuned)")
    p.add_argument("--untuned", action="store_true", help="same as --trials 0")
    p.add_argument("--trials-per-iter", type=int, default=64, help="num_trials_per_iter")
    p.add_argument("--work-dir", default="/tmp/tvm-ms", help="MetaSchedule work directory root")
    p.add_argument("--out", default=None, help="also write the JSON list to this file")
    p.add_argument("--mcpu", default=None, help="LLVM CPU name (default: the host's)")
    p.add_argument("--num-cores", type=int, default=os.cpu_count() or 1)
    p.add_argument("--seed", type=int, default=None, help="tuning seed (and input data seed)")
    p.add_argument("--build-timeout", type=float, default=30.0)
    p.add_argument("--run-timeout", type=float, default=30.0)
    p.add_argument("--number", type=int, default=1, help="time_evaluator number")
    p.add_argument("--repeat", type=int, default=30, help="time_evaluator repeat")
    p.add_argument("--min-repeat-ms", type=int, default=20, help="time_evaluator min_repeat_ms")
    p.add_argument("--rtol", type=float, default=1e-3)
    p.add_argument("--atol", type=float, default=1e-4)
    args = p.parse_args(argv)
    ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    bad = [o for o in ops if o not in WORKLOADS]
    if bad:
        p.error(f"unknown op(s) {bad}; choose from {','.join(ALL_OPS)}")
    if args.trials < 0:
        p.error("--trials must be >= 0")
    args.ops = ops
    if args.trials == 0:
        args.untuned = True
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.untuned:
        check_tuning_deps()
    target_cfg = target_config(args.mcpu or host_cpu(), args.num_cores)
    results = []
    failed = False
    for op in args.ops:
        try:
            res = run_op(WORKLOADS[op](), target_cfg, args)
        except Exception as exc:  # report and go on with the other ops
            failed = True
            sys.stderr.write(f"error: {op}: {type(exc).__name__}: {exc}\n")
            res = {"op": op, "error": f"{type(exc).__name__}: {exc}", "target": target_cfg}
        results.append(res)
        print(json.dumps(res), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=2)
            f.write("\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
