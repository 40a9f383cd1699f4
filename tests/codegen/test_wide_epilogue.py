"""Fragment epilogues written 16 bytes a lane (codegen.wide_epilogue): which store nests take
words, the code they get, that nvcc compiles it to vector loads and stores, and where they keep
one element per lane. Their values on a GPU: tests/gpu/test_tensor_core_conv_cuda.py."""

import pytest

from codegen import wide_epilogue
from codegen.cuda import build_cuda
from codegen.wide_epilogue import wide_store
from tensorir.expr import Binary, Const, Var
from tensorir.loops import Buffer, Load, Store
from tensorir.lower import lower
from tests.autosched.tensor_core_helpers import (
    conv_dag,
    gpu_task,
    needs_nvcc,
    nvcc_ptx,
    valid_states,
)

TF32 = "cuda -arch=sm_80 -allow_tf32=1"


@pytest.fixture(autouse=True)
def words_on(monkeypatch):
    """Words are off by default (WIDE_EPILOGUE); these tests turn them on."""
    monkeypatch.setattr(wide_epilogue, "WIDE_EPILOGUE", True)


def _code(dag, target="cuda", seed=3, **kw):
    (state,) = valid_states(gpu_task(dag, target), 1, seed=seed)
    return build_cuda(lower(state), arch="sm_90", **kw).code


def _epilogue(code):
    return code[code.index("store_matrix_sync") :]


@needs_nvcc
def test_a_conv_epilogue_reads_and_writes_words_and_compiles_to_vector_accesses(tmp_path):
    """conv + cast + bias + residual + relu: the bias and the residual come in as one word each,
    the relu'd halves go out as one, 8 columns a lane."""
    dag = conv_dag("NHWC", 2, 16, 8, 32, 1, 1, 0, 1, True, residual=True)
    code = _code(dag)
    tail = _epilogue(code)
    assert (
        "wmma_w < 1; ++wmma_w)" in tail and "int wmma_e = (wmma_w * 32 + threadIdx.x) * 8;" in tail
    )
    assert "*(uint4*)&wmma_in0[0] = *(const uint4*)(&placeholder_2[" in tail  # the bias
    assert "*(uint4*)&wmma_in1[0] = *(const uint4*)(&placeholder_3[" in tail  # the residual
    assert "*(uint4*)&T_relu[" in tail and "= *(const uint4*)wmma_out;" in tail
    ptx = nvcc_ptx(code, "sm_90", tmp_path)
    assert "st.global.v4" in ptx and "ld.global.nc.v4" in ptx and "wmma.mma.sync" in ptx


def test_a_float32_output_takes_four_columns_a_lane():
    dag = conv_dag("NHWC", 1, 16, 8, 16, 3, 1, 1, 1, True, dtype="float32")
    tail = _epilogue(_code(dag, TF32, allow_tf32=True))
    assert "wmma_w < 2; ++wmma_w)" in tail and "(wmma_w * 32 + threadIdx.x) * 4;" in tail
    assert "__align__(16) float wmma_out[4];" in tail


def test_padded_columns_keep_one_element_a_lane():
    """24 output channels are 32 GEMM columns: the guard on the real ones depends on the
    column, so a word could straddle the last real column."""
    tail = _epilogue(_code(conv_dag("NHWC", 1, 16, 4, 24, 3, 1, 1, 1, True)))
    assert "wmma_e = threadIdx.x; wmma_e < 256; wmma_e += 32)" in tail
    assert "wmma_out" not in tail


def test_the_switch_keeps_one_element_a_lane(monkeypatch):
    monkeypatch.setattr(wide_epilogue, "WIDE_EPILOGUE", False)  # the default
    tail = _epilogue(_code(conv_dag("NHWC", 2, 16, 8, 32, 1, 1, 0, 1, True, residual=True)))
    assert "wmma_e = threadIdx.x; wmma_e < 256; wmma_e += 32)" in tail
    assert "wmma_out" not in tail


def _store(index, value_index, dtype="float16"):
    out, res = Buffer("out", (4096,), dtype, "global"), Buffer("res", (4096,), dtype, "global")
    acc = Buffer("acc", (256,), "float32", "local")
    term = Load(acc, Const(0, "int32"), "float32")
    value = Binary("+", term, Load(res, value_index, dtype), dtype)
    return Store(out, index, value), res


@pytest.mark.parametrize("row_stride, word", [(32, True), (24, True), (20, False), (12, False)])
def test_only_rows_that_start_on_a_word_are_written_in_words(row_stride, word):
    i, j = Var("i"), Var("j")
    index = Binary("+", Binary("*", i, Const(row_stride, "int32"), "int32"), j, "int32")
    store, res = _store(index, index)
    plan = wide_store(store, j, None, "float32")
    assert (plan is not None) == word
    if word:
        assert plan.lanes == 8 and [x.buffer for x in plan.word_loads] == [res]


def test_an_input_read_at_another_column_stays_one_element_a_lane():
    i, j = Var("i"), Var("j")
    index = Binary("+", Binary("*", i, Const(32, "int32"), "int32"), j, "int32")
    shifted = Binary("+", index, Const(3, "int32"), "int32")  # not word-aligned
    store, _ = _store(index, shifted)
    plan = wide_store(store, j, None, "float32")
    assert plan is not None and plan.word_loads == ()


def test_a_guard_on_the_column_keeps_one_element_a_lane():
    i, j = Var("i"), Var("j")
    index = Binary("+", Binary("*", i, Const(32, "int32"), "int32"), j, "int32")
    store, _ = _store(index, index)
    assert wide_store(store, j, Binary("<", i, Const(7, "int32"), "bool"), "float32") is not None
    assert wide_store(store, j, Binary("<", j, Const(7, "int32"), "bool"), "float32") is None
