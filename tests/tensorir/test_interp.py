"""The numpy reference interpreter against hand-written numpy, and its C-like semantics."""

import math
import time

import numpy as np
import pytest

from autosched import workloads as W
from tensorir import interp as interp_mod
from tensorir import te
from tensorir.dag import ComputeDAG
from tensorir.interp import eval_all, eval_dag


def _rand(dag, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(t.shape).astype(t.dtype) for t in dag.input_tensors]


def _conv_nhwc_ref(x, k, stride, pad):
    x = np.pad(x.astype(np.float64), ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    kh, kw = k.shape[:2]
    oh = (x.shape[1] - kh) // stride + 1
    ow = (x.shape[2] - kw) // stride + 1
    out = np.zeros((x.shape[0], oh, ow, k.shape[3]))
    for a in range(kh):
        for b in range(kw):
            win = x[:, a : a + stride * oh : stride, b : b + stride * ow : stride, :]
            out += np.einsum("nhwc,cf->nhwf", win, k[a, b].astype(np.float64))
    return out


def test_matmul_and_relu():
    dag = ComputeDAG(W.matmul_relu(17, 13, 11))
    a, b = _rand(dag)
    (out,) = eval_dag(dag, [a, b])
    assert out.dtype == np.float32 and out.shape == (17, 13)
    np.testing.assert_allclose(out, np.maximum(a @ b, 0), rtol=1e-5, atol=1e-5)
    assert (out == 0).any() and (out > 0).any()  # relu really clipped something


def test_dense_bias():
    dag = ComputeDAG(W.dense_bias(3, 20, 7))
    x, w, bias = _rand(dag)
    (out,) = eval_dag(dag, [x, w, bias])
    np.testing.assert_allclose(out, x @ w.T + bias, rtol=1e-5, atol=1e-5)


def test_softmax_all_stages():
    dag = ComputeDAG(W.softmax(5, 33))
    (x,) = _rand(dag)
    vals = eval_all(dag, [x])
    np.testing.assert_allclose(vals["T_softmax_maxelem"], x.max(axis=1))
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(vals["T_softmax_expsum"], e.sum(axis=1), rtol=1e-5)
    np.testing.assert_allclose(vals["T_softmax_norm"], e / e.sum(axis=1, keepdims=True), rtol=1e-5)
    assert set(vals) == {op.name for op in dag.ops}


def test_max_pool_bias_relu():
    dag = ComputeDAG(W.max_pool_bias_relu(2, 11, 9, 3, kernel=3, stride=2, pad=1))
    x, bias = _rand(dag)
    (out,) = eval_dag(dag, [x, bias])
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)), constant_values=-np.inf)
    ref = np.full((2, 6, 5, 3), -np.inf, np.float32)
    for a in range(3):
        for b in range(3):
            ref = np.maximum(ref, xp[:, a : a + 12 : 2, b : b + 10 : 2, :])
    np.testing.assert_allclose(out, np.maximum(ref + bias, 0), rtol=1e-6)


@pytest.mark.parametrize("stride,pad", [(1, 1), (2, 1), (1, 0), (2, 3)])
def test_conv2d_nhwc_bias_relu(stride, pad):
    dag = ComputeDAG(W.conv2d_nhwc_bias_relu(2, 9, 8, 5, 6, 3, 3, stride, pad))
    x, k, bias = _rand(dag)
    (out,) = eval_dag(dag, [x, k, bias])
    ref = np.maximum(_conv_nhwc_ref(x, k, stride, pad) + bias, 0)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_depthwise_conv2d_nhwc():
    dag = ComputeDAG(W.depthwise_conv2d_nhwc(1, 10, 7, 4, 3, 3, 2, 1))
    x, k = _rand(dag)
    (out,) = eval_dag(dag, [x, k])
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    ref = np.zeros(out.shape)
    oh, ow = out.shape[1:3]
    for a in range(3):
        for b in range(3):
            ref += xp[:, a : a + 2 * oh : 2, b : b + 2 * ow : 2, :] * k[a, b, :, 0]
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_conv2d_nchw():
    dag = ComputeDAG(W.conv2d_nchw(2, 3, 7, 6, 4, 3, 3, 1, 1))
    x, k = _rand(dag)
    (out,) = eval_dag(dag, [x, k])
    ref = _conv_nhwc_ref(x.transpose(0, 2, 3, 1), k.transpose(2, 3, 1, 0), 1, 1)
    np.testing.assert_allclose(out, ref.transpose(0, 3, 1, 2), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("tile", [2, 4])
@pytest.mark.parametrize("hw", [(7, 7), (8, 6)])
def test_winograd_equals_direct_conv(tile, hw):
    H, W_ = hw
    dag = ComputeDAG(W.winograd_conv2d_nhwc_3x3(1, H, W_, 5, 6, pad=1, tile_size=tile))
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, H, W_, 5)).astype(np.float32)
    k = rng.standard_normal((3, 3, 5, 6)).astype(np.float32)
    bias = rng.standard_normal((1, 1, 1, 6)).astype(np.float32)
    (out,) = eval_dag(dag, [x, W.winograd_kernel_pack(k, tile), bias])
    ref = np.maximum(_conv_nhwc_ref(x, k, 1, 1) + bias, 0)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_winograd_with_kernel_transform_stage():
    dag = ComputeDAG(W.winograd_conv2d_nhwc_3x3(2, 6, 6, 3, 4, bias_relu=False, pre_computed=False))
    x, k = _rand(dag, seed=3)
    assert k.shape == (3, 3, 3, 4)
    (out,) = eval_dag(dag, [x, k])
    np.testing.assert_allclose(out, _conv_nhwc_ref(x, k, 1, 1), rtol=1e-4, atol=1e-4)


def test_chunked_reductions_match_unchunked(monkeypatch):
    # Force the chunked paths (both the einsum path and the generic path with a condition).
    A = te.placeholder((6, 40), name="A")
    B = te.placeholder((40, 5), name="B")
    k = te.reduce_axis((0, 40), name="k")
    C = te.compute((6, 5), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    k2 = te.reduce_axis((0, 40), name="k2")
    D = te.compute(
        (6,), lambda i: te.max(A[i, k2] * 2.0, axis=k2, where=te.not_equal(k2 % 3, 1)), name="D"
    )
    dag = ComputeDAG([A, B, C, D])
    ins = _rand(dag)
    full = eval_dag(dag, ins)
    monkeypatch.setattr(interp_mod, "CHUNK_ELEMENTS", 7)
    chunked = eval_dag(dag, ins)
    np.testing.assert_allclose(chunked[0], ins[0] @ ins[1], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(chunked[0], full[0], rtol=1e-6, atol=1e-6)
    mask = np.arange(40) % 3 != 1
    np.testing.assert_allclose(chunked[1], (ins[0][:, mask] * 2).max(axis=1))
    np.testing.assert_array_equal(chunked[1], full[1])


def test_multi_axis_reduction_chunking(monkeypatch):
    X = te.placeholder((4, 5, 6, 7), name="X")
    r1, r2, r3 = (te.reduce_axis((0, n), name=f"r{n}") for n in (5, 6, 7))
    S = te.compute((4,), lambda i: te.sum(te.exp(X[i, r1, r2, r3]), axis=[r1, r2, r3]), name="S")
    dag = ComputeDAG([X, S])
    (x,) = _rand(dag)
    monkeypatch.setattr(interp_mod, "CHUNK_ELEMENTS", 30)
    (out,) = eval_dag(dag, [x])
    np.testing.assert_allclose(out, np.exp(x).sum(axis=(1, 2, 3)), rtol=1e-5)


def test_reduce_with_offset_domain_and_unused_axis():
    A = te.placeholder((10,), name="A")
    k = te.reduce_axis((3, 8), name="k")
    j = te.reduce_axis((0, 4), name="j")  # not read: the sum counts it 4 times
    S = te.compute((2,), lambda i: te.sum(A[k] * A[k - 3 + i], axis=[k, j]), name="S")
    dag = ComputeDAG([A, S])
    (a,) = _rand(dag)
    (out,) = eval_dag(dag, [a])
    ref = [4 * sum(a[kk] * a[kk - 3 + i] for kk in range(3, 8)) for i in range(2)]
    np.testing.assert_allclose(out, ref, rtol=1e-5)


def test_integer_semantics_floor_wrap_truncate():
    X = te.placeholder((8,), "int32", name="X")
    F = te.placeholder((8,), "float32", name="F")
    outs = [
        te.compute((8,), lambda i: te.floordiv(X[i], 3), name="fdiv"),
        te.compute((8,), lambda i: te.floormod(X[i], 3), name="fmod"),
        te.compute((8,), lambda i: te.floordiv(X[i], -3), name="fdivn"),
        te.compute((8,), lambda i: te.floormod(X[i], -3), name="fmodn"),
        te.compute((8,), lambda i: X[i] * 1000000007, name="wrap"),
        te.compute((8,), lambda i: te.cast("int32", F[i]), name="trunc"),
        te.compute((8,), lambda i: te.cast("int8", X[i] * 50), name="narrow"),
    ]
    dag = ComputeDAG([X, F, *outs])
    x = np.array([-7, -6, -1, 0, 1, 5, 123456, -99999], np.int32)
    f = np.array([-2.7, -0.5, 0.5, 2.7, -3.0, 3.99, -1e3, 7.5], np.float32)
    fdiv, fmod, fdivn, fmodn, wrap, trunc, narrow = eval_dag(dag, [x, f])
    xs = [int(v) for v in x]
    assert fdiv.tolist() == [v // 3 for v in xs]
    assert fmod.tolist() == [v % 3 for v in xs]
    assert fdivn.tolist() == [v // -3 for v in xs]
    assert fmodn.tolist() == [v % -3 for v in xs]
    wrapped = [((v * 1000000007 + 2**31) % 2**32) - 2**31 for v in xs]
    assert wrap.tolist() == wrapped and wrap.dtype == np.int32
    assert trunc.tolist() == [math.trunc(float(v)) for v in f]
    assert narrow.tolist() == [((v * 50 + 128) % 256) - 128 for v in xs]


def test_math_functions():
    F = te.placeholder((9,), name="F")
    outs = [
        te.compute((9,), lambda i: te.sigmoid(F[i]), name="sig"),
        te.compute((9,), lambda i: te.erf(F[i]), name="erf"),
        te.compute((9,), lambda i: te.tanh(F[i]), name="tanh"),
        te.compute((9,), lambda i: te.call("round", F[i]), name="rnd"),
        te.compute((9,), lambda i: te.abs(F[i]) + te.sqrt(te.abs(F[i])), name="absq"),
        te.compute((9,), lambda i: te.power(te.abs(F[i]), 1.5), name="pw"),
    ]
    dag = ComputeDAG([F, *outs])
    f = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.3, -0.7, 3.2], np.float32)
    sig, erf, tanh, rnd, absq, pw = eval_dag(dag, [f])
    np.testing.assert_allclose(sig, 1 / (1 + np.exp(-f.astype(np.float64))), rtol=1e-6)
    np.testing.assert_allclose(erf, [math.erf(v) for v in f], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(tanh, np.tanh(f), rtol=1e-6)
    assert rnd.tolist() == [-3, -2, -1, 1, 2, 3, 0, -1, 3]  # halves away from zero, like C
    np.testing.assert_allclose(absq, np.abs(f) + np.sqrt(np.abs(f)), rtol=1e-6)
    np.testing.assert_allclose(pw, np.abs(f) ** 1.5, rtol=1e-6)
    assert all(o.dtype == np.float32 for o in (sig, erf, tanh, rnd, absq, pw))


def test_guarded_out_of_range_reads_are_masked():
    A = te.placeholder((5,), name="A")
    # i - 2 and i + 3 leave [0, 5) where the guard is false: must not raise, must be masked.
    P = te.compute((9,), lambda i: te.if_then_else(te.all(i >= 2, i < 7), A[i - 2], -1.0), name="P")
    Q = te.compute((9,), lambda i: te.select(i < 2, A[i + 3], P[i]), name="Q")
    dag = ComputeDAG([A, P, Q])
    (a,) = _rand(dag)
    p, q = eval_dag(dag, [a])
    ref = np.concatenate([[-1, -1], a, [-1, -1]]).astype(np.float32)
    np.testing.assert_array_equal(p, ref)
    np.testing.assert_array_equal(q, np.concatenate([a[3:5], ref[2:]]))


def test_float32_ops_compute_in_float32():
    A = te.placeholder((1,), name="A")
    S = te.compute((1,), lambda i: (A[i] + 1e-8) - A[i], name="S")
    (out,) = eval_dag(ComputeDAG([A, S]), [np.array([1.0], np.float32)])
    assert out[0] == 0.0  # in float64 this would be 1e-8


def test_input_validation_names_the_tensor():
    dag = ComputeDAG(W.dense_bias(2, 4, 3))
    x, w, b = _rand(dag)
    with pytest.raises(ValueError, match="expected 3 input arrays"):
        eval_dag(dag, [x, w])
    with pytest.raises(ValueError, match="'weight' must have shape \\[3, 4\\]"):
        eval_dag(dag, [x, w.T, b])
    with pytest.raises(ValueError, match="'bias' must have dtype float32, got float64"):
        eval_dag(dag, [x, w, b.astype(np.float64)])


@pytest.mark.slow
def test_conv2d_resnet_layer_speed_sanity():
    # Sanity check of the speed target (well under 1 s); loose bound for slow machines.
    dag = ComputeDAG(W.conv2d_nhwc_bias_relu(1, 56, 56, 64, 64, 3, 3, 1, 1))
    ins = _rand(dag)
    t0 = time.perf_counter()
    (out,) = eval_dag(dag, ins)
    dt = time.perf_counter() - t0
    print(f"eval_dag conv2d 1x56x56x64 3x3x64x64: {dt * 1e3:.1f} ms")
    assert dt < 3.0
    ref = np.maximum(_conv_nhwc_ref(ins[0][:, :8, :8], ins[1], 1, 1) + ins[2], 0)
    np.testing.assert_allclose(out[:, :7, :7], ref[:, :7, :7], rtol=1e-4, atol=1e-4)


def test_affine_views_with_negative_and_mixed_strides():
    A = te.placeholder((6, 5), name="A")
    R = te.compute((5, 6), lambda i, j: A[5 - j, 4 - i] * 1.0, name="R")  # reversed transpose
    D = te.compute((5,), lambda i: A[i, i] + A[i + 1, 3 - i // 2], name="D")  # diag + gather
    X = te.placeholder((7,), "int32", name="X")
    k = te.reduce_axis((0, 7), name="k")
    S = te.compute((2,), lambda i: te.sum(X[k] * (i + 1), axis=k), name="S")  # int sum
    dag = ComputeDAG([A, X, R, D, S])
    a = _rand(dag)[0]
    x = np.arange(7, dtype=np.int32) * 400000000  # the int32 sum wraps
    r, d, s = eval_dag(dag, [a, x])
    np.testing.assert_array_equal(r, a[::-1, ::-1].T)
    np.testing.assert_array_equal(d, [a[i, i] + a[i + 1, 3 - i // 2] for i in range(5)])
    want = [((int(x.astype(np.int64).sum()) * (i + 1) + 2**31) % 2**32) - 2**31 for i in (0, 1)]
    assert s.tolist() == want and s.dtype == np.int32
