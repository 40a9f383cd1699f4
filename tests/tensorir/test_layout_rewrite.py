"""Layout rewrite: constant weights stored in the order the kernel's loops read them."""

import numpy as np
import pytest

from autosched import workloads
from tensorir.dag import ComputeDAG
from tensorir.interp import eval_dag
from tensorir.loop_interp import run_program
from tensorir.lower import lower
from tensorir.passes.layout_rewrite import ParamLayout
from tensorir.passes.simplify_loops import simplify_program
from tensorir.passes.unroll import unroll_loops
from tensorir.tensor import TensorError


def _conv_dag(layout_free=("kernel",), co=16):
    return ComputeDAG(workloads.conv2d_nhwc_bias_relu(1, 6, 6, 8, co), layout_free)


def _tiled_conv(dag, f_outer=2, rc_inner=4):
    """A register-tiled conv whose kernel reads ``w[ry, rx, rc, ff]`` with ``ff`` split over
    the parallel loop and ``rc`` split around the spatial loops (not row-major order)."""
    s = dag.get_init_state()
    s.compute_inline("T_add")
    n, y, x, f = s["T_relu"].iters
    fo, fi = s.split("T_relu", f, [dag.tensors[-1].shape[3] // f_outer])
    s.reorder("T_relu", [fo, n, y, x, fi])
    s.parallel("T_relu", fo)
    s.compute_at("Conv2dOutput", "T_relu", s["T_relu"].iters[0])
    cn, cy, cx, cf, ry, rx, rc = s["Conv2dOutput"].iters
    rco, rci = s.split("Conv2dOutput", rc, [rc_inner])
    s.reorder("Conv2dOutput", [cn, rco, cy, ry, rx, rci, cx, cf])
    return s


def _inputs(dag, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, [int(d) for d in t.shape]).astype("float32")
            for t in dag.input_tensors]  # fmt: skip


def _run(program, dag, inputs):
    layouts = {lay.param: lay for lay in program.param_layouts}
    arrays = {t.name: (layouts[t.name].transform(a) if t.name in layouts else a)
              for t, a in zip(dag.input_tensors, inputs)}  # fmt: skip
    out = dag.output_tensors[0]
    arrays[out.name] = np.full([int(d) for d in out.shape], np.nan, "float32")
    run_program(program, arrays)
    return arrays[out.name]


def test_rewritten_kernel_reads_its_weight_in_loop_order_and_computes_the_same():
    dag = _conv_dag()
    prog = lower(_tiled_conv(dag), layout_rewrite=True)
    (layout,) = prog.param_layouts
    assert layout.param == "kernel"
    # One dimension per loop that indexes the weight, outermost first: f.outer, rc.outer,
    # ry, rx, rc.inner, then the 8 output channels of a chunk innermost (stride 1).
    assert layout.shape == (2, 2, 3, 3, 4, 8)
    assert layout.coefs == (8, 64, 3 * 8 * 16, 8 * 16, 16, 1)
    kernel = next(b for b in prog.params if b.name == "kernel")
    assert kernel.shape == layout.shape
    # Later loop passes keep the layouts with the program.
    assert simplify_program(prog).param_layouts == prog.param_layouts
    assert unroll_loops(prog).param_layouts == prog.param_layouts
    inputs = _inputs(dag)
    np.testing.assert_allclose(_run(prog, dag, inputs), eval_dag(dag, inputs)[0],
                               rtol=1e-5, atol=1e-5)  # fmt: skip


def test_without_the_flag_or_for_other_placeholders_nothing_changes():
    dag = _conv_dag()
    state = _tiled_conv(dag)
    assert lower(state).param_layouts == ()
    assert str(lower(state)) == str(lower(state, layout_rewrite=False))
    # Only the DAG's layout-free placeholders move: the data and bias keep their shapes.
    prog = lower(state, layout_rewrite=True)
    shapes = {b.name: b.shape for b in prog.params}
    assert shapes["data"] == (1, 6, 6, 8) and shapes["bias"] == (1, 1, 1, 16)
    # A DAG that marks nothing is never rewritten.
    plain = ComputeDAG(workloads.conv2d_nhwc_bias_relu(1, 6, 6, 8, 16))
    assert lower(_tiled_conv(plain), layout_rewrite=True).param_layouts == ()


def test_a_kernel_that_already_reads_row_major_order_keeps_its_layout():
    dag = _conv_dag()
    s = dag.get_init_state()  # loops n, y, x, f, ry, rx, rc: w is read with stride 16 in rc
    prog = lower(s, layout_rewrite=True)
    assert prog.param_layouts, "the naive conv reads the weight out of order"
    # The naive dense reads weight[j, k] with k innermost: already in loop order.
    dense = ComputeDAG(workloads.dense_bias(2, 8, 4), ("weight",))
    assert lower(dense.get_init_state(), layout_rewrite=True).param_layouts == ()


def test_non_divisible_split_pads_the_new_layout_with_zeros_and_stays_correct():
    dag = _conv_dag(co=12)
    prog = lower(_tiled_conv(dag, f_outer=2, rc_inner=3), layout_rewrite=True)
    (layout,) = prog.param_layouts
    assert layout.size > layout.orig_size  # rc = 8 split by 3 -> 3 x 3 with a guarded tail
    inputs = _inputs(dag, seed=1)
    np.testing.assert_allclose(_run(prog, dag, inputs), eval_dag(dag, inputs)[0],
                               rtol=1e-5, atol=1e-5)  # fmt: skip


def test_param_layout_transform_is_a_gather_and_checks_the_size():
    lay = ParamLayout("w", 6, 0, (1, 3), (3, 2))  # the transpose of a 2x3 array
    w = np.arange(6, dtype="float32").reshape(2, 3) + 0.5
    np.testing.assert_array_equal(lay.transform(w), w.T)
    assert ParamLayout.from_tuple(lay.as_tuple()) == lay
    with pytest.raises(ValueError, match="w: expected 6 elements, got 4"):
        lay.transform(np.zeros(4, "float32"))


def test_layout_free_names_must_be_inputs():
    with pytest.raises(TensorError, match=r"layout_free_placeholders \['nope'\]"):
        _conv_dag(layout_free=("nope",))
