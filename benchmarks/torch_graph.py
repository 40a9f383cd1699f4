"""Run a zoo network (our graph IR, NCHW) with PyTorch ops, for side-by-side benchmarks.

There is no torchvision on the GPU machine and torch cannot import ONNX, so the benchmarks
translate the graph node by node into ``torch.nn.functional`` calls on the same weights. Only
the ops of the CNN zoo are mapped; anything else raises naming the op.

    fn = torch_function(mod, params, device="cuda")      # fn(x) -> tensor
"""

from __future__ import annotations

import numpy as np


def _bn(F, node, x, gamma, beta, mean, var):
    a = node.attrs
    if a.get("axis", 1) % x.dim() != 1:
        raise NotImplementedError(f"nn.batch_norm on axis {a['axis']}: only NCHW is mapped")
    weight = gamma if a.get("scale", True) else None
    bias = beta if a.get("center", True) else None
    return F.batch_norm(x, mean, var, weight, bias, training=False, eps=a["epsilon"])


def _pads(p):
    # Relay (top, left, bottom, right); torch takes symmetric padding only.
    top, left, bottom, right = p
    if (top, left) != (bottom, right):
        raise NotImplementedError(f"asymmetric padding {p} is not mapped")
    return (top, left)


def _ops(F, torch):
    return {
        "nn.conv2d": lambda n, x, w: F.conv2d(
            x,
            w,
            None,
            n.attrs["strides"],
            _pads(n.attrs["padding"]),
            n.attrs["dilation"],
            n.attrs["groups"],
        ),  # fmt: skip
        "nn.batch_norm": lambda n, *a: _bn(F, n, *a),
        "nn.relu": lambda n, x: F.relu(x),
        "add": lambda n, a, b: a + b,
        "multiply": lambda n, a, b: a * b,
        "nn.max_pool2d": lambda n, x: F.max_pool2d(
            x,
            n.attrs["pool_size"],
            n.attrs["strides"],
            _pads(n.attrs["padding"]),
            ceil_mode=n.attrs["ceil_mode"],
        ),  # fmt: skip
        "nn.avg_pool2d": lambda n, x: F.avg_pool2d(
            x,
            n.attrs["pool_size"],
            n.attrs["strides"],
            _pads(n.attrs["padding"]),
            ceil_mode=n.attrs["ceil_mode"],
            count_include_pad=n.attrs.get("count_include_pad", False),
        ),  # fmt: skip
        "nn.global_avg_pool2d": lambda n, x: F.adaptive_avg_pool2d(x, 1),
        "nn.batch_flatten": lambda n, x: torch.flatten(x, 1),
        "nn.dense": lambda n, x, w: F.linear(x, w),
        "nn.bias_add": lambda n, x, b: (
            x + b.reshape([-1 if i == n.attrs["axis"] % x.dim() else 1 for i in range(x.dim())])
        ),  # fmt: skip
        "nn.softmax": lambda n, x: F.softmax(x, dim=n.attrs["axis"]),
        "clip": lambda n, x: torch.clamp(x, n.attrs["a_min"], n.attrs["a_max"]),
        "concatenate": lambda n, *xs: torch.cat(xs, dim=n.attrs["axis"]),
    }


def torch_function(mod, params: dict, device: str = "cuda", channels_last: bool = True, dtype=None):
    """A callable ``fn(x: torch.Tensor) -> torch.Tensor`` running ``mod`` (NCHW) in PyTorch.

    Weights are uploaded once; ``channels_last`` puts 4-d tensors in NHWC memory order, which
    cuDNN prefers for fp32 convolutions on recent GPUs. ``dtype`` (e.g. ``torch.float16``)
    casts the floating-point weights, as ``model.half()`` does; ``x`` must then have it too.
    """
    import torch
    import torch.nn.functional as F

    from tensorir.graph.ir import Call, Constant, Var
    from tensorir.graph.reference import post_order

    func = mod["main"]
    ops = _ops(F, torch)
    order = post_order(func)
    unknown = sorted({n.op for n in order if isinstance(n, Call) and n.op not in ops})
    if unknown:
        raise NotImplementedError(f"torch_function: no PyTorch mapping for op(s) {unknown}")
    fmt = torch.channels_last if channels_last else torch.contiguous_format

    def upload(arr):
        t = torch.from_numpy(np.ascontiguousarray(arr)).to(device)
        if dtype is not None and t.is_floating_point():
            t = t.to(dtype)
        return t.to(memory_format=fmt) if t.dim() == 4 else t

    consts = {id(v): upload(params[v.name]) for v in func.params if v.name in params}
    consts.update({id(n): upload(n.value) for n in order if isinstance(n, Constant)})
    inputs = [v for v in func.params if v.name not in params]
    if len(inputs) != 1:
        raise ValueError(f"torch_function: expected one data input, got {[v.name for v in inputs]}")
    data_id = id(inputs[0])

    def run(x):
        env = dict(consts)
        env[data_id] = x.to(memory_format=fmt) if x.dim() == 4 else x
        for node in order:
            if isinstance(node, Var | Constant):
                continue
            env[id(node)] = ops[node.op](node, *[env[id(a)] for a in node.args])
        return env[id(func.outputs[0])]

    return run
