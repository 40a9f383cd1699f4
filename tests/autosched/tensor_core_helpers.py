"""What the tensor-core tests share (tests/autosched/test_tensor_core*.py without a GPU,
tests/gpu/test_tensor_core*.py on one): the GEMM and implicit-GEMM conv tasks they build, the
states they sample from the tensor-core sketch, the records round trip, numpy references and the
nvcc compile to PTX. Not a test module (no ``test_`` prefix): pytest collects nothing here."""

from __future__ import annotations

import random
import shutil
import subprocess
from itertools import islice

import numpy as np
import pytest

from autosched.hardware import HardwareParams
from autosched.measure import MeasureErrorNo, MeasureInput, MeasureResult
from autosched.measure.records import load_records, save_records
from autosched.search.annotate_gpu import gpu_context, sample_state_gpu
from autosched.search.params import SearchParams
from autosched.search.sketch import generate_sketches
from autosched.task import SearchTask
from tensorir import te
from tensorir.dag import ComputeDAG
from tensorir.loops import Allocate, walk_stmts
from tensorir.ops import NameScope, compute_op
from tensorir.ops.conv2d_gemm import conv2d_implicit_gemm
from tensorir.ops.dense import batch_matmul, dense
from tensorir.passes.tensor_core import fragment_plan
from tensorir.passes.verify_gpu import kernels

NVCC = shutil.which("nvcc") or shutil.which("nvcc", path="/usr/local/cuda/bin")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not found")
# The device the CPU-only tests schedule for: one SM, 48 KiB of shared memory per block.
GPU_HW = HardwareParams(num_cores=1, max_shared_memory_per_block=49152)


# --- tasks -----------------------------------------------------------------------------------


def gpu_task(dag, target="cuda", hardware_params: HardwareParams = GPU_HW) -> SearchTask:
    """A search task for ``dag`` (a ComputeDAG or its tensors) on ``target``."""
    if not isinstance(dag, ComputeDAG):
        dag = ComputeDAG(dag)
    return SearchTask(dag, target=target, hardware_params=hardware_params)


def float32_dense(m=32, n=48, k=64) -> SearchTask:
    """A float32 dense on plain cuda: no tensor cores (TF32 is off), the SIMT sketch."""
    return gpu_task(dense_tensors(m, n, k, dtype="float32", out_dtype="float32"))


def shared_allocations(prog) -> dict:
    """Name -> Buffer of every ``shared`` allocation of a lowered program."""
    return {x.buffer.name: x.buffer for x in walk_stmts(prog.body)
            if isinstance(x, Allocate) and x.buffer.scope == "shared"}  # fmt: skip


def dense_tensors(m, n, k, dtype="float16", out_dtype="float32", cast=None) -> list:
    """``A (m, k)``, ``B (n, k)`` and their dense; with ``cast``, a stage ``D`` casting it."""
    a = te.placeholder((m, k), dtype, name="A")
    b = te.placeholder((n, k), dtype, name="B")
    c = dense(a, b, out_dtype=out_dtype)
    if cast is None:
        return [a, b, c]
    return [a, b, te.compute(c.shape, lambda i, j: c[i, j].astype(cast), name="D")]


def bmm_tensors(batch, m, n, k, dtype="float16", out_dtype="float32", transpose_b=True,
                y_batch=None) -> list:  # fmt: skip
    """``X (batch, m, k)``, ``Y`` (``(y_batch, n, k)``, or ``(y_batch, k, n)`` not transposed;
    ``y_batch`` defaults to ``batch``) and their batch_matmul."""
    x = te.placeholder((batch, m, k), dtype, name="X")
    y_shape = (n, k) if transpose_b else (k, n)
    y = te.placeholder((y_batch or batch, *y_shape), dtype, name="Y")
    return [x, y, batch_matmul(x, y, out_dtype=out_dtype, transpose_b=transpose_b)]


def layouts(layout):
    """``(data_layout, kernel_layout)`` of a test's layout: "NHWC" (HWIO), "NCHW" (OIHW) or
    "NHWC:OHWI" (the K-major weight the graph stores for tensor cores)."""
    data, _, kernel = layout.partition(":")
    return data, kernel or {"NHWC": "HWIO", "NCHW": "OIHW"}[data]


def conv_shapes(layout, n, ci, h, co, k):
    """The data and weight shapes of a square conv2d: NHWC / HWIO, NHWC:OHWI or NCHW / OIHW."""
    data, kernel = layouts(layout)
    xs = (n, h, h, ci) if data == "NHWC" else (n, ci, h, h)
    dims = {"O": co, "I": ci, "H": k, "W": k}
    return xs, tuple(dims[c] for c in kernel)


def conv_dag(layout, n, ci, h, co, k, stride, pad, dilation=1, epilogue=False, dtype="float16",
             split_k=1, residual=False, warpgroup=False):  # fmt: skip
    """The implicit-GEMM conv2d (``dtype`` operands, fp32 accumulation; its GEMM in
    ``split_k`` slices of K, its rows padded for sm_90 with ``warpgroup``), maybe with the
    epilogue of a to_mixed_precision network: cast to ``dtype``, bias, with ``residual`` the
    add of a tensor of the output's shape (the last input), relu (float32: no cast)."""
    scope = NameScope()
    xs, ws = conv_shapes(layout, n, ci, h, co, k)
    x, w = scope.placeholder(xs, dtype), scope.placeholder(ws, dtype)
    with scope:
        data_layout, kernel_layout = layouts(layout)
        out = conv2d_implicit_gemm(
            x, w, stride, pad, dilation, data_layout, "float32", split_k, kernel_layout, warpgroup
        )
    ins = [x, w]
    if epilogue:
        b = scope.placeholder((co,), dtype)
        ins.append(b)
        if dtype != "float32":
            out = compute_op("cast", [out], {"dtype": dtype}, name_scope=scope)
        out = compute_op(
            "nn.bias_add", [out, b], {"axis": data_layout.index("C")}, name_scope=scope
        )
        if residual:
            r = scope.placeholder(tuple(out.shape), dtype)
            ins.append(r)
            out = compute_op("add", [out, r], {}, name_scope=scope)
        out = compute_op("nn.relu", [out], {}, name_scope=scope)
    return ComputeDAG([*ins, out])


def small_resnet_block(rng):
    """conv 3x3 + bias + relu, then conv 1x1 s2 + bias: NHWC, 16 channels, 8x8."""
    from tensorir.graph import ir as gir
    from tensorir.graph import nn, op

    data = op.var("data", (1, 8, 8, 16))
    params = {
        "w1": rng.normal(0, 0.2, (3, 3, 16, 32)).astype("float32"),
        "b1": rng.normal(0, 0.2, (32,)).astype("float32"),
        "w2": rng.normal(0, 0.2, (1, 1, 32, 16)).astype("float32"),
    }
    w1, b1, w2 = (op.var(k, v.shape) for k, v in params.items())
    nhwc = {"data_layout": "NHWC", "kernel_layout": "HWIO"}
    x = nn.relu(nn.bias_add(nn.conv2d(data, w1, padding=1, **nhwc), b1, axis=3))
    x = nn.conv2d(x, w2, strides=2, **nhwc)
    return gir.Module({"main": gir.Function((data, w1, b1, w2), x)}), params


# --- states ----------------------------------------------------------------------------------


def has_pragma(state, pragma="tensor_core") -> bool:
    """Whether a stage of ``state`` carries ``pragma``."""
    return any(p == pragma for s in state.stages for _, p in s.pragmas)


def has_tc(state) -> bool:
    """Whether ``state`` has a tensor-core (wmma fragment) stage."""
    return has_pragma(state, "tensor_core")


def sampled_states(task, sketch, seed=0, tries=300, params=None):
    """The valid states of ``tries`` seeded draws from ``sketch``, one at a time (a draw the
    GPU check refuses is None: skipped), so that a caller stopping early draws no more."""
    ctx, rng = gpu_context(task, params or SearchParams()), random.Random(seed)
    for _ in range(tries):
        s = sample_state_gpu(ctx, sketch, rng, task)
        if s is not None:
            yield s


def first_states(states, n, what="valid states") -> list:
    """The first ``n`` of ``states``; fails when there are fewer."""
    out = list(islice(states, n))
    assert len(out) == n, f"{len(out)} {what}, not {n}"
    return out


def wmma_sketches(task, params=None) -> list:
    """The task's sketches without the warpgroup (wgmma) one, which only a GPU of sm_90 (the
    target's ``-arch`` or the device's) adds: the wmma tests pin the wmma sketch."""
    from autosched.search.sketch_rules_warpgroup import is_warpgroup_state

    return [s for s in generate_sketches(task, params=params) if not is_warpgroup_state(s)]


def valid_states(task, n=3, seed=0, tries=200) -> list:
    """``n`` valid states sampled from the task's one sketch, a tensor-core one."""
    (sketch,) = wmma_sketches(task)
    assert has_tc(sketch), sketch
    return first_states(sampled_states(task, sketch, seed, tries), n)


def split_steps_of_lengths(state, lengths) -> list[int]:
    """The indices of the state's SplitSteps whose factors are one of ``lengths``."""
    from tensorir import steps as st

    return [k for k, step in enumerate(state.steps)
            if isinstance(step, st.SplitStep) and tuple(step.lengths) in lengths]  # fmt: skip


def tile_size_mutations(task, state, seed, tries=60) -> list:
    """What ``mutate_tile_size`` makes of ``state`` in ``tries`` seeded draws (the draws it
    declines dropped)."""
    from autosched.search.mutation import mutate_tile_size

    ctx, rng = gpu_context(task, SearchParams()), random.Random(seed)
    return [m for m in (mutate_tile_size(ctx, state, rng) for _ in range(tries)) if m is not None]


def two_layer_mlp(batch, n_in, hidden, n_out, rng, scale):
    """A float32 two-layer perceptron (dense + bias + relu, dense) as a graph Function, and its
    weights drawn from ``rng`` (normal, standard deviation ``scale``)."""
    from tensorir.graph import ir as gir
    from tensorir.graph import nn, op

    shapes = {"w1": (hidden, n_in), "b1": (hidden,), "w2": (n_out, hidden)}
    data, *ws = [op.var("data", (batch, n_in)), *(op.var(k, s) for k, s in shapes.items())]
    out = nn.dense(nn.relu(nn.bias_add(nn.dense(data, ws[0]), ws[1])), ws[2])
    params = {k: rng.normal(0, scale, s).astype("float32") for k, s in shapes.items()}
    return gir.Function((data, *ws), out), params


def check_sampled_kernels(task, sketch, args, want, n, seed, rtol, atol, source_has=()) -> None:
    """On the GPU (tests/gpu): ``n`` states sampled from ``sketch`` each build to a wmma kernel
    (whose source contains each of ``source_has``) and whose output on ``args`` is within
    ``rtol`` / ``atol`` of ``want`` (compared in its dtype)."""
    import autosched as ansor
    from runtime import device

    out_t = task.compute_dag.output_tensors[0]
    checked = 0
    for s in islice(sampled_states(task, sketch, seed), n):
        func = ansor.build(s, "cuda", device=device("cuda"))
        source = func.get_source()
        assert "wmma::mma_sync" in source and all(x in source for x in source_has), source_has
        out = np.full(out_t.shape, np.nan, out_t.dtype)
        func(*args, out)
        np.testing.assert_allclose(out.astype(want.dtype), want, rtol=rtol, atol=atol,
                                   err_msg=str(s))  # fmt: skip
        checked += 1
    assert checked == n


def records_round_trip(task, states, path) -> list:
    """``states`` saved as measured records of ``task`` in ``path``, loaded back as
    ``(MeasureInput, MeasureResult)`` pairs."""
    ok = MeasureResult((1.0,), MeasureErrorNo.NO_ERROR, "", 0.1, 1.0)
    save_records(path, [MeasureInput(task, s) for s in states], [ok] * len(states))
    return list(load_records(path))


def fragment_plans(prog) -> list:
    """``(plan, why not)`` of each kernel of ``prog`` (tensorir.passes.tensor_core)."""
    return [fragment_plan(k.stmt, k.extents) for k in kernels(prog)]


# --- references and compilers ----------------------------------------------------------------


def random_args(dag, seed=0) -> list:
    """Uniform random values in [-1, 1] for each input of ``dag``, in its dtype."""
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, t.shape).astype(t.dtype) for t in dag.input_tensors]


def gemm_reference(args, transpose_b=True):
    """The float32 product of the two operands (``y`` read transposed, as dense reads it)."""
    x, y = (a.astype(np.float32) for a in args)
    return x @ (np.swapaxes(y, -1, -2) if transpose_b else y)


def conv_ref(x, w, stride, pad, dilation, layout):
    """float64 conv2d from its definition: x NCHW / NHWC, w OIHW / HWIO / OHWI (``layout`` as
    :func:`layouts` reads it)."""
    data_layout, kernel_layout = layouts(layout)
    w = w.transpose([kernel_layout.index(c) for c in "OIHW"])
    if data_layout == "NHWC":
        x = x.transpose(0, 3, 1, 2)
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    w = w.astype(np.float64)
    co, _, kh, kw = w.shape
    oh = (x.shape[2] - (kh - 1) * dilation - 1) // stride + 1
    ow = (x.shape[3] - (kw - 1) * dilation - 1) // stride + 1
    out = np.zeros((x.shape[0], co, oh, ow))
    for a in range(kh):
        for b in range(kw):
            win = x[:, :, a * dilation :: stride, b * dilation :: stride][:, :, :oh, :ow]
            out += np.einsum("nchw,oc->nohw", win, w[:, :, a, b])
    return out.transpose(0, 2, 3, 1) if data_layout == "NHWC" else out


def nvcc_ptx(code: str, arch: str, tmp_path, name="k") -> str:
    """The PTX nvcc compiles CUDA ``code`` to for ``arch`` (files ``name``.cu / .ptx in
    ``tmp_path``); a compile error raises CalledProcessError."""
    src, ptx = tmp_path / f"{name}.cu", tmp_path / f"{name}.ptx"
    src.write_text(code)
    subprocess.run([NVCC, "-ptx", f"-arch={arch}", str(src), "-o", str(ptx)],
                   check=True, capture_output=True)  # fmt: skip
    return ptx.read_text()


def run_groups_as_scalar_loops(func, groups, x, state_of) -> np.ndarray:
    """The output of a partitioned network (``partition``'s function and groups) on input
    ``x``, each group run as the scalar loops of ``state_of(group)`` (its GPU state, read as
    the interpreter reads marked nests), in order."""
    from tensorir.loop_interp import run_program
    from tensorir.lower import lower

    values = {id(func.params[0]): x}
    for gd in groups:
        args = [np.asarray(values[id(i)] if id(i) in values else i.value)  # noqa: SIM401
                for i in gd.inputs]  # fmt: skip
        out = np.zeros(gd.dag.output_tensors[0].shape, gd.dag.output_tensors[0].dtype)
        run_program(lower(state_of(gd)), [*args, out], simt=True)
        values[id(gd.group.output)] = out
    return values[id(groups[-1].group.output)]


def fetches_data_in_words(code: str) -> bool:
    """Whether CUDA ``code`` reads the conv's data (``placeholder``) to shared memory 16 bytes
    at a time: a word copy, or, in a pipelined loop on sm_80+, a cp.async word (zero-filled
    off the image)."""
    words = ("*(const uint4*)&placeholder[", "(const void*)&placeholder[", "cp_async16(&data")
    return any(w in code for w in words)
