"""ComputeDAG: printing (golden files and seed lines), FLOPs, workload key, access analysis."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autosched import workloads as W
from tensorir import te
from tensorir.dag import ComputeDAG, dag_expr_str
from tensorir.tensor import TensorError

GOLDEN = Path(__file__).parent / "golden" / "dag"


def check_golden(name: str, text: str) -> None:
    """Compare ``text`` to golden/dag/<name>.txt; write the file when it does not exist yet
    (or when AUTOSCHED_UPDATE_GOLDEN=1) so a first run generates it for review."""
    path = GOLDEN / f"{name}.txt"
    if not path.exists() or os.environ.get("AUTOSCHED_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f"{name}: printout differs from {path}"


GOLDEN_CASES = {
    "softmax": lambda: W.softmax(1, 1000),
    "dense_bias": lambda: W.dense_bias(1, 512, 1000),
    "max_pool_bias_relu": lambda: W.max_pool_bias_relu(1, 112, 112, 64),
    "conv2d_nhwc_bias_relu": lambda: W.conv2d_nhwc_bias_relu(1, 14, 14, 256, 512, 3, 3, 2, 1),
    "conv2d_nhwc_1x1_nopad": lambda: W.conv2d_nhwc_bias_relu(1, 56, 56, 64, 64, 1, 1, 1, 0),
    "depthwise_conv2d_nhwc": lambda: W.depthwise_conv2d_nhwc(1, 28, 28, 256),
    "winograd_f2_bias_relu": lambda: W.winograd_conv2d_nhwc_3x3(1, 7, 7, 512, 512),
    "winograd_f4_bias_relu": lambda: W.winograd_conv2d_nhwc_3x3(1, 56, 56, 64, 64, 1, 4),
}


@pytest.mark.parametrize("name", sorted(GOLDEN_CASES))
def test_golden_printing(name):
    check_golden(name, str(ComputeDAG(GOLDEN_CASES[name]())))


def test_softmax_prints_exactly_like_the_seed():
    seed = (
        "placeholder = PLACEHOLDER [1, 1000]\n"
        "T_softmax_maxelem(i0) max= placeholder[i0, k]\n"
        "T_softmax_exp(i0, i1) = tir.exp((placeholder[i0, i1] - T_softmax_maxelem[i0]))\n"
        "T_softmax_expsum(i0) += T_softmax_exp[i0, k]\n"
        "T_softmax_norm(i0, i1) = (T_softmax_exp[i0, i1]/T_softmax_expsum[i0])\n"
    )
    assert str(ComputeDAG(W.softmax(1, 1000))) == seed


def test_seed_lines_padding_pool_winograd():
    lines = str(ComputeDAG(W.max_pool_bias_relu(1, 112, 112, 64))).split("\n")
    assert lines[1] == (
        "pad_temp(ax0, ax1, ax2, ax3) = tir.if_then_else(((((ax1 >= 1) && (ax1 < 113)) && "
        "(ax2 >= 1)) && (ax2 < 113)), data[ax0, (ax1 - 1), (ax2 - 1), ax3], -3.40282e+38f)"
    )
    assert lines[2] == (
        "tensor(ax0, ax1, ax2, ax3) max= pad_temp[ax0, ((ax1*2) + dh), ((ax2*2) + dw), ax3]"
    )
    wino = str(ComputeDAG(W.winograd_conv2d_nhwc_3x3(1, 7, 7, 512, 512))).split("\n")
    b_line = next(line for line in wino if line.startswith("B(i, j)"))
    # Lines over 256 characters keep 128 at each end around " ..(OMITTED).. ", as in TVM.
    assert b_line == (
        "B(i, j) = select(((floormod(i, 4) == 3) && (floormod(j, 4) == 3)), 1f, "
        "select(((floormod(i, 4) == 3) && (floormod(j, 4) == 2)),  ..(OMITTED).. "
        "ormod(i, 4) == 0) && (floormod(j, 4) == 1)), 0f, select(((floormod(i, 4) == 0) && "
        "(floormod(j, 4) == 0)), 1f, 0f))))))))))))))))"
    )
    assert (
        "conv2d_winograd(n, h, w, co) = inverse[floormod(h, 2), floormod(w, 2), "
        "((((n*4)*4) + (floordiv(h, 2)*4)) + floordiv(w, 2)), co]"
    ) in wino
    full = ComputeDAG(W.winograd_conv2d_nhwc_3x3(1, 7, 7, 512, 512)).print_dag()
    assert "..(OMITTED).." not in full and max(len(x) for x in full.split("\n")) > 256


def test_simple_mode_and_constants():
    dag = ComputeDAG(W.softmax(2, 8))
    simple = dag.print_dag(simple_mode=True).split("\n")
    assert simple[0] == "placeholder = PLACEHOLDER "
    assert simple[2] == "T_softmax_exp(i0, i1) = Op(tir.exp)"
    assert dag_expr_str(te.const(True)) == "(bool)1"
    assert dag_expr_str(te.const(5, "int64")) == "(int64)5"
    assert dag_expr_str(te.const(0.5, "float32")) == "0.5f"
    assert dag_expr_str(te.const(2.0, "float64")) == "2"


def test_reduce_condition_is_printed():
    A = te.placeholder((4, 6), name="A")
    k = te.reduce_axis((0, 6), name="k")
    S = te.compute((4,), lambda i: te.sum(A[i, k], axis=k, where=k < 3), name="S")
    assert str(ComputeDAG([A, S])).split("\n")[1] == "S(i) += A[i, k] where (k < 3)"


# ----------------------------------------------------------------------------- flops


def test_flop_counts():
    assert ComputeDAG(W.matmul(64, 32, 16)).flop_count() == 2 * 64 * 32 * 16
    assert ComputeDAG(W.matmul_relu(8, 8, 8)).flop_ct == 2 * 512 + 64
    assert ComputeDAG(W.dense_bias(2, 10, 3)).flop_ct == 2 * 2 * 10 * 3 + 2 * 3
    assert ComputeDAG(W.softmax(3, 7)).flop_ct == 4 * 3 * 7  # max, sub (exp is free), sum, div
    # conv: 2 flops per MAC; padding (int compares + a read) is free; bias add and relu 1 each.
    out = 1 * 7 * 7 * 512
    conv = ComputeDAG(W.conv2d_nhwc_bias_relu(1, 14, 14, 256, 512, 3, 3, 2, 1))
    assert conv.flop_ct == 2 * out * 9 * 256 + 2 * out
    # int index arithmetic inside a float op is not counted; float arithmetic is.
    A = te.placeholder((20,), name="A")
    B = te.compute((9,), lambda i: A[i * 2 + 1] * 2.0 + 1.0, name="B")
    assert ComputeDAG([A, B]).flop_ct == 9 * 2
    X = te.placeholder((5,), "int32", name="X")
    Y = te.compute((5,), lambda i: X[i] * 3 + i, name="Y")  # an int op: int ops count
    assert ComputeDAG([X, Y]).flop_ct == 5 * 2
    Z = te.compute((5,), lambda i: X[i] * 3, name="Z", attrs={"FLOP": 1234})
    assert ComputeDAG([X, Z]).flop_ct == 1234


def test_winograd_flops_ignore_constant_matrices():
    dag = ComputeDAG(W.winograd_conv2d_nhwc_3x3(1, 8, 8, 4, 4, bias_relu=False))
    P = 16
    expect = 16 * P * 4 * 16 * 3 + 16 * P * 4 * 4 * 2 + 4 * P * 4 * 16 * 3
    assert dag.flop_ct == expect


# ----------------------------------------------------------------------------- workload key

_KEY_SCRIPT = (
    "from autosched import workloads as W\n"
    "from tensorir.dag import ComputeDAG\n"
    "print(ComputeDAG(W.winograd_conv2d_nhwc_3x3(1, 7, 7, 64, 64)).workload_key)\n"
    "print(ComputeDAG(W.softmax(4, 10)).workload_key)\n"
)


def test_workload_key_is_stable_across_processes():
    keys = []
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        out = subprocess.run(
            [sys.executable, "-c", _KEY_SCRIPT], capture_output=True, text=True, env=env, check=True
        )
        keys.append(out.stdout)
    assert keys[0] == keys[1]
    here = ComputeDAG(W.winograd_conv2d_nhwc_3x3(1, 7, 7, 64, 64)).workload_key
    assert keys[0].split("\n")[0] == here
    parsed = json.loads(here)
    version, digest = parsed[0].split(":")
    assert version == "v2" and len(digest) == 32
    assert parsed[1:] == [[1, 7, 7, 64], [4, 4, 64, 64], [1, 1, 1, 64], [1, 7, 7, 64]]


def test_workload_key_distinguishes_dags():
    keys = {
        ComputeDAG(W.matmul(8, 8, 8)).workload_key,
        ComputeDAG(W.matmul(8, 8, 4)).workload_key,
        ComputeDAG(W.matmul_relu(8, 8, 8)).workload_key,
        ComputeDAG(W.conv2d_nhwc_bias_relu(1, 8, 8, 4, 4, stride=1)).workload_key,
        ComputeDAG(W.conv2d_nhwc_bias_relu(1, 8, 8, 4, 4, stride=2)).workload_key,
    }
    assert len(keys) == 5
    # Same computation built twice: same key (no ids or hash randomization inside).
    assert ComputeDAG(W.softmax(3, 5)).workload_key == ComputeDAG(W.softmax(3, 5)).workload_key


def _one_op(body, dtype="float32", name="B"):
    """``A`` (4, 6) of ``dtype`` and ``B[i, j] = body(A, i, j)``."""
    A = te.placeholder((4, 6), dtype, name="A")
    return ComputeDAG([A, te.compute((4, 6), lambda i, j: body(A, i, j), name=name)])


def test_workload_key_sees_call_and_if_then_else_arguments_constants_and_dtypes():
    # Each pair used to print the same simple-mode DAG, hence share one key (and one kernel).
    pairs = {
        "call arguments": (
            _one_op(lambda A, i, j: te.exp(A[i, j])),
            _one_op(lambda A, i, j: te.exp(A[i, 5 - j])),
        ),
        "if_then_else arguments": (
            _one_op(lambda A, i, j: te.if_then_else(i >= 1, A[i - 1, j], 0.0)),
            _one_op(lambda A, i, j: te.if_then_else(i >= 2, A[i - 2, j], 0.0)),
        ),
        "if_then_else pad value": (
            _one_op(lambda A, i, j: te.if_then_else(i >= 1, A[i - 1, j], 0.0)),
            _one_op(lambda A, i, j: te.if_then_else(i >= 1, A[i - 1, j], 5.0)),
        ),
        # 1.0000001 and 1.0 print alike with 6 significant digits ("1f")
        "constant": (
            _one_op(lambda A, i, j: A[i, j] * 1.0),
            _one_op(lambda A, i, j: A[i, j] * 1.0000001),
        ),
        "input dtype": (
            _one_op(lambda A, i, j: A[i, j] + A[i, j]),
            _one_op(lambda A, i, j: A[i, j] + A[i, j], dtype="float16"),
        ),
        "cast dtype": (
            _one_op(lambda A, i, j: A[i, j].astype("int32")),
            _one_op(lambda A, i, j: A[i, j].astype("int8")),
        ),
    }
    for what, (a, b) in pairs.items():
        assert a.workload_key != b.workload_key, what
        assert not a.structurally_equal(b), what
    # What does not change the computation does not change the key: loop variable names.
    A = te.placeholder((4, 6), name="A")
    B1 = te.compute((4, 6), lambda i, j: te.exp(A[i, j]), name="B")
    B2 = te.compute((4, 6), lambda x, y: te.exp(A[x, y]), name="B")
    same = ComputeDAG([A, B1]), ComputeDAG([A, B2])
    assert same[0].workload_key == same[1].workload_key and same[0].structurally_equal(same[1])


def test_workload_key_sees_reduce_ranges_attrs_and_layout_free_inputs():
    def reduction(lo, attrs=None):
        A = te.placeholder((4, 6), name="A")
        k = te.reduce_axis((lo, 6), name="k")
        return [A, te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="S", attrs=attrs)]

    keys = {
        ComputeDAG(reduction(0)).workload_key,
        ComputeDAG(reduction(1)).workload_key,
        ComputeDAG(reduction(0, {"axis": 1})).workload_key,
        ComputeDAG(reduction(0), layout_free_placeholders=["A"]).workload_key,
    }
    assert len(keys) == 4


# ----------------------------------------------------------------------------- access analysis


def _flags(dag, name):
    return (
        dag.is_simple_access(name),
        dag.is_strictly_inlinable(name),
        dag.needs_multi_level_tiling(name),
        dag.is_output(name),
    )


def test_access_flags_matmul_and_elementwise():
    dag = ComputeDAG(W.matmul_relu(16, 16, 16))
    assert _flags(dag, "A") == (True, False, False, False)
    assert _flags(dag, "C") == (False, False, True, False)
    assert _flags(dag, "T_relu") == (True, True, False, True)
    C = dag.ops[dag.op_index("C")]
    assert dag.needs_multi_level_tiling(C) and not dag.needs_multi_level_tiling(dag.tensors[2])
    assert [str(ix) for ix in dag.read_from("C")["A"][0]] == ["i", "k"]
    assert list(dag.read_by("C")) == ["T_relu"]
    assert list(dag.read_from("C")) == ["A", "B"]


def test_access_flags_conv2d():
    dag = ComputeDAG(W.conv2d_nhwc_bias_relu(1, 8, 8, 4, 8))
    assert _flags(dag, "PaddedInput") == (True, False, False, False)  # branch: not strict
    assert dag.has_branch("PaddedInput") and not dag.has_branch("Conv2dOutput")
    assert _flags(dag, "Conv2dOutput") == (False, False, True, False)
    assert _flags(dag, "T_add") == (True, True, False, False)
    assert _flags(dag, "T_relu") == (True, True, False, True)
    assert dag.num_common_outer_iterators("T_add", "Conv2dOutput") == 4
    assert dag.num_common_outer_iterators("Conv2dOutput", "T_relu") == 4  # through T_add
    assert dag.num_common_outer_iterators("Conv2dOutput", "PaddedInput") == 1  # H differs
    assert dag.num_common_outer_iterators("bias", "T_add") == 1  # bias[ax0, 0, 0, ax3]
    assert dag.num_common_outer_iterators("data", "kernel") == 0  # unrelated
    assert dag.elementwise_match("Conv2dOutput", "T_relu")
    assert not dag.elementwise_match("PaddedInput", "Conv2dOutput")
    names = lambda ops: [op.name for op in ops]  # noqa: E731
    assert names(dag.consumers("Conv2dOutput")) == ["T_add"]
    assert names(dag.consumers("Conv2dOutput", inlined={"T_add"})) == ["T_relu"]
    assert names(dag.producers("T_relu", inlined=["T_add"])) == ["Conv2dOutput", "bias"]
    assert names(dag.producers("Conv2dOutput")) == ["PaddedInput", "kernel"]


def test_access_flags_softmax():
    dag = ComputeDAG(W.softmax(4, 16))
    assert _flags(dag, "T_softmax_maxelem") == (False, False, False, False)
    assert _flags(dag, "T_softmax_exp") == (True, False, False, False)  # exp: not strict
    assert _flags(dag, "T_softmax_expsum") == (False, False, False, False)
    assert _flags(dag, "T_softmax_norm") == (True, True, False, True)
    assert not dag.elementwise_match("T_softmax_exp", "T_softmax_norm")  # two consumers
    # Min over all paths: exp -> norm directly shares 2, but exp -> expsum -> norm only 1.
    assert dag.num_common_outer_iterators("T_softmax_exp", "T_softmax_norm") == 1
    assert dag.num_common_outer_iterators("T_softmax_expsum", "T_softmax_norm") == 1
    assert dag.num_common_outer_iterators("placeholder", "T_softmax_exp") == 1  # via maxelem
    assert dag.num_common_outer_iterators("T_softmax_maxelem", "T_softmax_norm") == 1


def test_access_flags_winograd_constant_stages():
    dag = ComputeDAG(W.winograd_conv2d_nhwc_3x3(1, 8, 8, 4, 4))
    for const in ("A", "B"):
        assert dag.is_strictly_inlinable(const) and dag.has_branch(const)
        assert not dag.read_from(const)
    # The fake reductions over constant matrices are not tiled; the batched gemm is.
    assert not dag.needs_multi_level_tiling("data_pack")
    assert not dag.needs_multi_level_tiling("inverse")
    assert dag.needs_multi_level_tiling("bgemm")
    assert not dag.is_simple_access("input_tile")
    assert dag.is_output("T_relu") and not dag.is_output("conv2d_winograd")


def test_transpose_is_simple_but_not_strictly_inlinable():
    A = te.placeholder((4, 4), name="A")
    T = te.compute((4, 4), lambda i, j: A[j, i], name="T")
    D = te.compute((4, 4), lambda i, j: A[i, i] + 1.0, name="D")
    dag = ComputeDAG([A, T, D])
    assert dag.is_simple_access("T") and not dag.is_strictly_inlinable("T")
    assert dag.is_simple_access("D") and not dag.is_strictly_inlinable("D")


def test_analysis_accepts_ops_tensors_names_and_rejects_strangers():
    tensors = W.matmul(4, 4, 4)
    dag = ComputeDAG(tensors)
    assert dag.is_output(tensors[2]) and dag.is_output(tensors[2].op) and dag.is_output("C")
    other = te.placeholder((2,), name="Z")
    with pytest.raises(KeyError, match="not an op of this DAG"):
        dag.is_output(other)
    with pytest.raises(KeyError, match="no stage named 'nope'"):
        dag.is_output("nope")


def test_dag_construction_errors():
    A = te.placeholder((4,), name="A")
    B = te.compute((4,), lambda i: A[i] * 2.0, name="A")
    with pytest.raises(TensorError, match="used more than once"):
        ComputeDAG([A, B])
    C = te.compute((4,), lambda i: A[i] * 2.0, name="C")
    with pytest.raises(TensorError, match="not listed in the tensors"):
        ComputeDAG([C])


def test_get_init_state_has_one_stage_per_op():
    dag = ComputeDAG(W.matmul_relu(8, 8, 8))
    state = dag.get_init_state()
    assert len(state.stages) == len(dag.ops) == 4
    assert state.dag is dag
