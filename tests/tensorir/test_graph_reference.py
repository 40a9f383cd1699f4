"""The numpy reference evaluator, op by op, against plain loop implementations.

The loops below index one output element at a time, so they share nothing with the
evaluator's im2col / sliding-window code paths.
"""

import itertools

import numpy as np
import pytest

from tensorir.graph import Function, evaluate, free_vars, nn, op
from tensorir.graph.winograd import winograd_matrices

RNG = np.random.default_rng(1234)


def rand(*shape):
    return RNG.standard_normal(shape).astype("float32")


def run(expr, **values):
    params = tuple(free_vars(expr))
    return evaluate(Function(params, expr), values)


def V(name, arr):
    return op.var(name, arr.shape, str(arr.dtype))


# --- loop implementations (NCHW / OIHW, NCDHW / OIDHW) ---------------------------------------


def loop_conv(x, w, strides, pads, dil, groups):
    """x (N, C, *S), w (O, C/g, *K); pads = (before..., after...)."""
    nd = x.ndim - 2
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    ks = w.shape[2:]
    outs = [
        (x.shape[2 + j] + pads[j] + pads[j + nd] - (ks[j] - 1) * dil[j] - 1) // strides[j] + 1
        for j in range(nd)
    ]
    out = np.zeros((n, o, *outs))
    og = o // groups
    for b, oc in itertools.product(range(n), range(o)):
        g = oc // og
        for pos in itertools.product(*(range(s) for s in outs)):
            acc = 0.0
            for kpos in itertools.product(*(range(k) for k in ks)):
                idx = [pos[j] * strides[j] - pads[j] + kpos[j] * dil[j] for j in range(nd)]
                if all(0 <= idx[j] < x.shape[2 + j] for j in range(nd)):
                    xs = x[(b, slice(g * cg, (g + 1) * cg), *idx)]
                    acc += float(np.dot(xs, w[(oc, slice(None), *kpos)]))
            out[(b, oc, *pos)] = acc
    return out


def loop_pool(x, kind, ks, strides, pads, dil, ceil_mode, include_pad):
    """x (N, C, *S); topi semantics: ceil-mode cells are never counted."""
    nd = len(ks)
    sizes = x.shape[2:]
    outs = []
    for j in range(nd):
        total = sizes[j] + pads[j] + pads[j + nd] - (ks[j] - 1) * dil[j] - 1
        outs.append((total + (strides[j] - 1 if ceil_mode else 0)) // strides[j] + 1)
    out = np.zeros(x.shape[:2] + tuple(outs))
    for b, c in itertools.product(range(x.shape[0]), range(x.shape[1])):
        for pos in itertools.product(*(range(s) for s in outs)):
            vals, count = [], 0
            for kpos in itertools.product(*(range(k) for k in ks)):
                idx = [pos[j] * strides[j] - pads[j] + kpos[j] * dil[j] for j in range(nd)]
                inside = all(0 <= idx[j] < sizes[j] for j in range(nd))
                in_pad = all(-pads[j] <= idx[j] < sizes[j] + pads[j + nd] for j in range(nd))
                if inside:
                    vals.append(x[(b, c, *idx)])
                if inside or (include_pad and in_pad):
                    count += 1
            out[(b, c, *pos)] = max(vals) if kind == "max" else sum(vals) / count
    return out


def nhwc(a):
    return np.ascontiguousarray(np.moveaxis(a, 1, -1))


def nchw(a):
    return np.moveaxis(a, -1, 1)


# --- convolution ---------------------------------------------------------------------------

CONV_CASES = [
    # (N, C, H, W), (O, C/g, KH, KW), strides, padding (t, l, b, r), dilation, groups
    ((1, 3, 7, 7), (4, 3, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ((2, 4, 9, 8), (6, 4, 3, 2), (2, 1), (0, 1, 2, 0), (1, 1), 1),
    ((1, 4, 9, 9), (6, 2, 3, 3), (1, 2), (2, 2, 2, 2), (2, 2), 2),
    ((1, 5, 8, 8), (5, 1, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 5),  # depthwise
    ((1, 3, 8, 8), (4, 3, 1, 1), (2, 2), (0, 0, 0, 0), (1, 1), 1),
]


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d_nchw_and_nhwc_against_loops(case):
    xs, ws, s, p, d, g = case
    x, w = rand(*xs), rand(*ws)
    want = loop_conv(x.astype(np.float64), w.astype(np.float64), s, p, d, g)
    got = run(nn.conv2d(V("x", x), V("w", w), s, p, d, g), x=x, w=w)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    xh, wh = nhwc(x), np.ascontiguousarray(w.transpose(2, 3, 1, 0))  # HWIO
    got = run(nn.conv2d(V("x", xh), V("w", wh), s, p, d, g, data_layout="NHWC"), x=xh, w=wh)
    np.testing.assert_allclose(nchw(got), want, rtol=1e-4, atol=1e-4)
    if g == xs[1] and ws[1] == 1:  # depthwise, HWOI as mobilenet NHWC uses it
        wo = np.ascontiguousarray(w.transpose(2, 3, 0, 1))
        expr = nn.conv2d(V("x", xh), V("w", wo), s, p, d, g, data_layout="NHWC",
                         kernel_layout="HWOI")  # fmt: skip
        np.testing.assert_allclose(nchw(run(expr, x=xh, w=wo)), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
def test_conv3d_against_loops(layout):
    x, w = rand(1, 3, 4, 6, 5), rand(4, 3, 3, 3, 2)
    s, p, d = (1, 2, 1), (1, 1, 0, 1, 0, 1), (1, 1, 1)
    want = loop_conv(x.astype(np.float64), w.astype(np.float64), s, p, d, 1)
    if layout == "NDHWC":
        x, w = nhwc(x), np.ascontiguousarray(w.transpose(2, 3, 4, 1, 0))
    got = run(nn.conv3d(V("x", x), V("w", w), s, p, d, data_layout=layout), x=x, w=w)
    np.testing.assert_allclose(got if layout == "NCDHW" else nchw(got), want, rtol=1e-4, atol=1e-4)


def test_winograd_matrices_are_tvms():
    # topi's F(2, 3) matrices (winograd_util.py with points 0, -1, 1), as printed by TVM.
    A, B, G = winograd_matrices(2)
    np.testing.assert_array_equal(A, [[1, 0], [1, -1], [1, 1], [0, 1]])
    np.testing.assert_array_equal(B, [[1, 0, 0, 0], [0, -1, 1, -1], [-1, 1, 1, 0], [0, 0, 0, 1]])
    np.testing.assert_array_equal(G, [[1, 0, 0], [0.5, -0.5, 0.5], [0.5, 0.5, 0.5], [0, 0, 1]])


@pytest.mark.parametrize("tile", [2, 4])
def test_winograd_matrices_compute_1d_correlation(tile):
    A, B, G = winograd_matrices(tile)
    g, d = RNG.standard_normal(3), RNG.standard_normal(tile + 2)
    y = A.T @ ((G @ g) * (B.T @ d))
    np.testing.assert_allclose(y, [d[i : i + 3] @ g for i in range(tile)], atol=1e-12)


@pytest.mark.parametrize("tile, hw, pad", [(2, (7, 7), 1), (4, (9, 6), 1), (4, (8, 8), 0)])
def test_winograd_conv_equals_direct_conv(tile, hw, pad):
    x, w = rand(2, 3, *hw), rand(5, 3, 3, 3)
    want = loop_conv(x.astype(np.float64), w.astype(np.float64), (1, 1), (pad,) * 4, (1, 1), 1)
    xh, wh = nhwc(x), np.ascontiguousarray(w.transpose(2, 3, 1, 0))
    vx, vw = V("x", xh), V("w", wh)
    u = nn.contrib_conv2d_winograd_weight_transform(vw, tile)
    y = nn.contrib_conv2d_winograd_without_weight_transform(vx, u, tile, padding=pad, channels=5)
    np.testing.assert_allclose(nchw(run(y, x=xh, w=wh)), want, rtol=1e-3, atol=1e-3)
    # the transform alone: U[e, n] = sum G[e, h] g[h, w] G[n, w]
    _, _, G = winograd_matrices(tile)
    uval = run(u, w=wh)
    for e, n, ci, co in [(0, 0, 0, 0), (1, 2, 2, 4), (tile + 1, tile, 1, 3)]:
        ref = sum(G[e, h] * wh[h, k, ci, co] * G[n, k] for h in range(3) for k in range(3))
        assert uval[e, n, ci, co] == pytest.approx(ref, rel=1e-5, abs=1e-6)


# --- pooling -------------------------------------------------------------------------------

POOL_CASES = [
    # pool_size, strides, padding, dilation, ceil_mode, count_include_pad
    ((3, 3), (2, 2), (1, 1, 1, 1), (1, 1), False, False),
    ((3, 3), (2, 2), (1, 1, 1, 1), (1, 1), False, True),
    ((3, 3), (2, 2), (0, 0, 0, 0), (1, 1), True, False),
    ((3, 2), (2, 2), (1, 0, 0, 1), (1, 1), True, True),
    ((2, 2), (1, 2), (0, 1, 1, 0), (2, 1), False, True),
]


@pytest.mark.parametrize("case", POOL_CASES)
@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pool2d_against_loops(case, kind):
    k, s, p, d, ceil, inc = case
    x = rand(2, 3, 8, 7)
    want = loop_pool(x, kind, k, s, p, d, ceil, inc)
    for layout in ("NCHW", "NHWC"):
        xi = x if layout == "NCHW" else nhwc(x)
        extra = {"count_include_pad": inc} if kind == "avg" else {}
        fn = nn.max_pool2d if kind == "max" else nn.avg_pool2d
        got = run(fn(V("x", xi), k, s, p, d, layout, ceil, **extra), x=xi)
        got = got if layout == "NCHW" else nchw(got)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
def test_pool3d_against_loops(kind, layout):
    x = rand(1, 2, 4, 5, 5)
    k, s, p = (2, 3, 3), (2, 2, 2), (0, 1, 1, 1, 1, 0)
    want = loop_pool(x, kind, k, s, p, (1, 1, 1), False, True)
    xi = x if layout == "NCDHW" else nhwc(x)
    fn = nn.max_pool3d if kind == "max" else nn.avg_pool3d
    extra = {"count_include_pad": True} if kind == "avg" else {}
    got = run(fn(V("x", xi), k, s, p, layout=layout, **extra), x=xi)
    np.testing.assert_allclose(got if layout == "NCDHW" else nchw(got), want, rtol=1e-5)


@pytest.mark.parametrize("out_hw", [(1, 1), (3, 4), (7, 7)])
def test_adaptive_and_global_pools(out_hw):
    x = rand(2, 3, 7, 10)
    want = np.zeros((2, 3, *out_hw))
    for i, j in itertools.product(range(out_hw[0]), range(out_hw[1])):
        h0, h1 = int(np.floor(i * 7 / out_hw[0])), int(np.ceil((i + 1) * 7 / out_hw[0]))
        w0, w1 = int(np.floor(j * 10 / out_hw[1])), int(np.ceil((j + 1) * 10 / out_hw[1]))
        want[:, :, i, j] = x[:, :, h0:h1, w0:w1].mean(axis=(2, 3))
    got = run(nn.adaptive_avg_pool2d(V("x", x), out_hw), x=x)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    xh = nhwc(x)
    got = run(nn.adaptive_avg_pool2d(V("x", xh), out_hw, layout="NHWC"), x=xh)
    np.testing.assert_allclose(nchw(got), want, rtol=1e-5)
    gmean = run(nn.global_avg_pool2d(V("x", xh), layout="NHWC"), x=xh)
    np.testing.assert_allclose(gmean[:, 0, 0, :], x.mean(axis=(2, 3)), rtol=1e-5)
    gmax = run(nn.global_max_pool2d(V("x", x)), x=x)
    np.testing.assert_array_equal(gmax[:, :, 0, 0], x.max(axis=(2, 3)))


# --- everything else -------------------------------------------------------------------------


def test_dense_batch_matmul_bias_add():
    x, w, b = rand(3, 5), rand(4, 5), rand(4)
    want = np.array(
        [[sum(x[i, k] * w[j, k] for k in range(5)) for j in range(4)] for i in range(3)]
    )
    got = run(nn.bias_add(nn.dense(V("x", x), V("w", w)), V("b", b)), x=x, w=w, b=b)
    np.testing.assert_allclose(got, want + b, rtol=1e-5, atol=1e-6)
    p, q = rand(2, 3, 4), rand(2, 5, 4)
    got = run(nn.batch_matmul(V("p", p), V("q", q)), p=p, q=q)
    for bi, i, j in itertools.product(range(2), range(3), range(5)):
        assert got[bi, i, j] == pytest.approx(float(p[bi, i] @ q[bi, j]), rel=1e-5, abs=1e-6)
    y, c = rand(1, 2, 2, 3), rand(3)
    got = run(nn.bias_add(V("y", y), V("c", c), axis=-1), y=y, c=c)
    assert got[0, 1, 0, 2] == pytest.approx(y[0, 1, 0, 2] + c[2])


@pytest.mark.parametrize(
    "axis, center, scale", [(1, True, True), (3, False, True), (1, True, False)]
)
def test_batch_norm(axis, center, scale):
    x = rand(2, 3, 4, 3)
    c = x.shape[axis]
    g, b, m = rand(c), rand(c), rand(c)
    v = RNG.uniform(0.5, 2.0, c).astype("float32")
    expr = nn.batch_norm(V("x", x), V("g", g), V("b", b), V("m", m), V("v", v), axis, 1e-3,
                         center, scale)  # fmt: skip
    got = run(expr, x=x, g=g, b=b, m=m, v=v)
    for idx in [(0, 0, 0, 0), (1, 2, 3, 2), (0, 1, 2, 1)]:
        ch = idx[axis]
        want = (x[idx] - m[ch]) / np.sqrt(v[ch] + 1e-3) * (g[ch] if scale else 1)
        want += b[ch] if center else 0
        assert got[idx] == pytest.approx(want, rel=1e-5, abs=1e-6)


def test_elementwise_and_broadcast():
    x, y = rand(2, 3), rand(1, 3)
    vx, vy = V("x", x), V("y", y)
    pos = np.abs(x) + 0.1
    cases = {
        nn.relu(vx): np.where(x > 0, x, 0),
        op.sigmoid(vx): 1 / (1 + np.exp(-x)),
        op.tanh(vx): np.tanh(x),
        op.exp(vx): np.exp(x),
        op.negative(vx): -x,
        op.clip(vx, -0.5, 0.5): np.minimum(np.maximum(x, -0.5), 0.5),
        op.add(vx, vy): x + y,
        op.subtract(vx, vy): x - y,
        op.multiply(vx, vy): x * y,
        op.divide(vx, vy): x / y,
        op.maximum(vx, vy): np.where(x > y, x, y),
        op.minimum(vx, vy): np.where(x < y, x, y),
        op.cast(vx, "int32"): x.astype("int32"),
    }
    for expr, want in cases.items():
        got = run(expr, x=x, y=y) if "y" in [v.name for v in free_vars(expr)] else run(expr, x=x)
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=expr.op)
        assert got.dtype == np.dtype(expr.dtype)
    np.testing.assert_allclose(run(op.sqrt(V("p", pos)), p=pos), pos**0.5, rtol=1e-6)


def test_softmax():
    x = rand(2, 5, 3)
    for axis in (-1, 1):
        got = run(nn.softmax(V("x", x), axis), x=x)
        e = np.exp(x.astype(np.float64))
        np.testing.assert_allclose(got, e / e.sum(axis=axis, keepdims=True), rtol=1e-5)


def test_injective_ops():
    a, b, c = rand(1, 2, 3), rand(1, 4, 3), rand(1, 1, 3)
    got = run(op.concatenate([V("a", a), V("b", b), V("c", c)], axis=1), a=a, b=b, c=c)
    np.testing.assert_array_equal(got[:, :2], a)
    np.testing.assert_array_equal(got[:, 2:6], b)
    np.testing.assert_array_equal(got[:, 6:], c)
    x = rand(1, 2, 3, 4)
    got = run(nn.pad(V("x", x), ((0, 0), (1, 0), (0, 2), (1, 1)), 0.5), x=x)
    assert got.shape == (1, 3, 5, 6) and got[0, 0, 0, 0] == 0.5 and got[0, 1, 4, 5] == 0.5
    np.testing.assert_array_equal(got[:, 1:, :3, 1:5], x)
    flat = run(op.reshape(V("x", x), (0, -1)), x=x)
    assert flat.shape == (1, 24) and flat[0, 13] == x[0, 1, 0, 1]
    assert run(nn.batch_flatten(V("x", x)), x=x)[0, 23] == x[0, 1, 2, 3]
    t = run(op.transpose(V("x", x), (3, 1, 0, 2)), x=x)
    assert t.shape == (4, 2, 1, 3) and t[3, 1, 0, 2] == x[0, 1, 2, 3]
    s = run(op.squeeze(V("x", x), (0,)), x=x)
    assert s.shape == (2, 3, 4) and s[1, 2, 3] == x[0, 1, 2, 3]
    lt = run(op.layout_transform(V("x", x), "NCHW", "NHWC"), x=x)
    assert lt.shape == (1, 3, 4, 2) and lt[0, 2, 3, 1] == x[0, 1, 2, 3]
    back = op.layout_transform(op.layout_transform(V("x", x), "NCHW", "NHWC"), "NHWC", "NCHW")
    np.testing.assert_array_equal(run(back, x=x), x)


def test_evaluate_checks_inputs():
    x = rand(2, 3)
    vx = V("x", x)
    f = Function((vx,), nn.relu(vx))
    with pytest.raises(KeyError, match="no value for parameter"):
        evaluate(f, {})
    with pytest.raises(ValueError, match=r"%x must have shape \(2, 3\)"):
        evaluate(f, {"x": x[:1]})


def test_int8_accumulates_in_out_dtype():
    x = RNG.integers(-128, 128, (1, 6, 5, 5)).astype("int8")
    w = RNG.integers(-128, 128, (4, 6, 3, 3)).astype("int8")
    got = run(nn.conv2d(V("x", x), V("w", w), padding=1, out_dtype="int32"), x=x, w=w)
    want = loop_conv(x.astype(np.int64), w.astype(np.int64), (1, 1), (1,) * 4, (1, 1), 1)
    assert got.dtype == np.int32 and np.abs(want).max() > 127
    np.testing.assert_array_equal(got, want)
    a = RNG.integers(-128, 128, (2, 40)).astype("int8")
    b = RNG.integers(-128, 128, (3, 40)).astype("int8")
    got = run(nn.dense(V("a", a), V("b", b), out_dtype="int32"), a=a, b=b)
    want = [
        [sum(int(a[i, k]) * int(b[j, k]) for k in range(40)) for j in range(3)] for i in range(2)
    ]
    np.testing.assert_array_equal(got, want)


def test_every_op_has_a_reference_implementation():
    from tensorir.graph import OPS

    assert all(callable(entry.reference) for entry in OPS.values())


@pytest.mark.parametrize("transpose_b", [True, False])
def test_batch_matmul_reference_follows_transpose_b(transpose_b):
    # The reference used to transpose y always, so transpose_b=False gave (B, M, K) x (B, K, N)
    # a wrong answer (or a shape error) though make_call accepted it.
    from tensorir.graph import make_call

    x, y = rand(2, 4, 5), rand(*((2, 3, 5) if transpose_b else (2, 5, 3)))
    got = run(make_call("nn.batch_matmul", (V("x", x), V("y", y)), {"transpose_b": transpose_b}),
              x=x, y=y)  # fmt: skip
    want = np.einsum("bmk,bnk->bmn" if transpose_b else "bmk,bkn->bmn", x, y)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
