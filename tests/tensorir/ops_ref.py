"""Plain numpy references for the operator tests, written from the ops' definitions (not
from tensorir/ops), plus helpers to run an op through the interpreter."""

from __future__ import annotations

import numpy as np

from tensorir import te
from tensorir.dag import ComputeDAG
from tensorir.interp import eval_dag
from tensorir.ops import NameScope, compute_op


def rand(shape, dtype="float32", rng=None, lo=-1.0, hi=1.0):
    rng = rng or np.random.default_rng(0)
    if dtype.startswith("int") or dtype.startswith("uint"):
        return rng.integers(-8 if dtype.startswith("int") else 0, 8, size=shape).astype(dtype)
    return rng.uniform(lo, hi, size=shape).astype(dtype)


def run_op(op, arrays, attrs=None):
    """Build ``op`` on placeholders shaped like ``arrays`` and evaluate it; returns (out, dag)."""
    scope = NameScope()
    ins = [scope.placeholder(a.shape, str(a.dtype)) for a in arrays]
    out = compute_op(op, ins, attrs or {}, name_scope=scope)
    dag = ComputeDAG([*ins, out])
    return eval_dag(dag, list(arrays))[0], dag


def conv_nd_ncx(x, w, strides, pad_before, pad_after, dilation, groups):
    """Channels-first N-d convolution: x (N, C, *S), w (CO, C/groups, *K); float64."""
    x = x.astype(np.float64)
    w = w.astype(np.float64)
    nsp = x.ndim - 2
    x = np.pad(x, [(0, 0), (0, 0)] + list(zip(pad_before, pad_after)))
    n, c = x.shape[:2]
    co, cig = w.shape[:2]
    ks = w.shape[2:]
    out_sp = [
        (x.shape[2 + d] - (ks[d] - 1) * dilation[d] - 1) // strides[d] + 1 for d in range(nsp)
    ]
    out = np.zeros((n, co, *out_sp))
    cog = co // groups
    for g in range(groups):
        xg = x[:, g * cig : (g + 1) * cig]
        wg = w[g * cog : (g + 1) * cog]
        for tap in np.ndindex(*ks):
            sl = tuple(
                slice(
                    tap[d] * dilation[d], tap[d] * dilation[d] + strides[d] * out_sp[d], strides[d]
                )
                for d in range(nsp)
            )
            win = xg[(slice(None), slice(None)) + sl]
            out[:, g * cog : (g + 1) * cog] += np.einsum("nc...,oc->no...", win, wg[(...,) + tap])
    return out


def pool_ref(x, kind, ks, strides, pb, pa, dilation, ceil_mode, count_include_pad):
    """Channels-first pooling with explicit window loops (Relay's output-size rule)."""
    nsp = len(ks)
    sizes = x.shape[2:]
    out_sp = []
    for d in range(nsp):
        extra = strides[d] - 1 if ceil_mode else 0
        out_sp.append(
            (sizes[d] + pb[d] + pa[d] + extra - (ks[d] - 1) * dilation[d] - 1) // strides[d] + 1
        )
    out = np.zeros(x.shape[:2] + tuple(out_sp))
    for o in np.ndindex(*out_sp):
        taps = [
            [o[d] * strides[d] - pb[d] + t * dilation[d] for t in range(ks[d])] for d in range(nsp)
        ]
        valid = [[p for p in taps[d] if 0 <= p < sizes[d]] for d in range(nsp)]
        vals = x[(slice(None), slice(None)) + np.ix_(*valid)].astype(np.float64)
        vals = vals.reshape(x.shape[:2] + (-1,))
        if kind == "max":
            out[(slice(None), slice(None)) + o] = vals.max(-1)
            continue
        if count_include_pad:
            cnt = np.prod(
                [sum(-pb[d] <= p < sizes[d] + pa[d] for p in taps[d]) for d in range(nsp)]
            )
        else:
            cnt = vals.shape[-1]
        out[(slice(None), slice(None)) + o] = vals.sum(-1) / cnt
    return out


def placeholder(shape, dtype="float32", name="x"):
    return te.placeholder(shape, dtype, name=name)
