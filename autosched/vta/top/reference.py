"""int8 numpy references of the packed operators (the ground truth the simulator must match)."""

from __future__ import annotations

import numpy as np


def pack_nchw(x: np.ndarray, batch: int, block: int) -> np.ndarray:
    """``(N, C, H, W)`` -> ``(N//batch, C//block, H, W, batch, block)`` (NCHW1n16c)."""
    n, c, h, w = x.shape
    return x.reshape(n // batch, batch, c // block, block, h, w).transpose(0, 2, 4, 5, 1, 3).copy()


def unpack_nchw(x: np.ndarray) -> np.ndarray:
    """Inverse of ``pack_nchw``."""
    nb, cb, h, w, batch, block = x.shape
    return x.transpose(0, 4, 1, 5, 2, 3).reshape(nb * batch, cb * block, h, w)


def pack_oihw(w: np.ndarray, block_out: int, block_in: int) -> np.ndarray:
    """``(O, I, KH, KW)`` -> ``(O//bo, I//bi, KH, KW, bo, bi)``."""
    o, i, kh, kw = w.shape
    w = w.reshape(o // block_out, block_out, i // block_in, block_in, kh, kw)
    return w.transpose(0, 2, 4, 5, 1, 3).copy()


def requantize(acc: np.ndarray, shift: int, clip_min: int, clip_max: int) -> np.ndarray:
    """``clip(acc >> shift, clip_min, clip_max)`` as int8 (what the ALU epilogue computes)."""
    return np.clip(acc.astype(np.int64) >> shift, clip_min, clip_max).astype(np.int8)


def conv2d_nchw_int(data, weight, stride=(1, 1), padding=(0, 0)) -> np.ndarray:
    """Integer conv2d, NCHW x OIHW -> int64 NCHW (exact)."""
    sh, sw = stride
    ph, pw = padding
    n, c, h, w = data.shape
    o, _, kh, kw = weight.shape
    x = np.pad(data.astype(np.int64), ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    oh, ow = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
    out = np.zeros((n, o, oh, ow), np.int64)
    wt = weight.astype(np.int64)
    for r in range(kh):
        for s in range(kw):
            patch = x[:, :, r : r + sh * (oh - 1) + 1 : sh, s : s + sw * (ow - 1) + 1 : sw]
            out += np.einsum("nchw,oc->nohw", patch, wt[:, :, r, s])
    return out


def conv2d_packed_reference(data, kernel, stride, padding, shift, clip_min, clip_max):
    """The packed conv2d with requantization: packed int8 in, packed int8 out."""
    nb, cb, h, w, batch, bi = data.shape
    ob, _, kh, kw, bo, _ = kernel.shape
    x = unpack_nchw(data)
    wt = kernel.transpose(0, 4, 1, 5, 2, 3).reshape(ob * bo, cb * bi, kh, kw)
    acc = conv2d_nchw_int(x, wt, stride, padding)
    # wrap to int32 as the accumulator does, then requantize
    return pack_nchw(requantize(acc.astype(np.int32), shift, clip_min, clip_max), batch, bo)
