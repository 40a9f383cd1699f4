"""Export an NCHW graph to ONNX, so other runtimes (onnxruntime) can run the very same network.

Covers the ops the zoo's 2-D CNNs use (conv2d, batch_norm, relu, clip, add, multiply, pools,
global pools, batch_flatten, dense, bias_add, softmax, concatenate). Weights become
initializers. The ``onnx`` package is imported lazily.
"""

from __future__ import annotations

import numpy as np

from .ir import Constant, Function, Module, calls

_ELEMENTWISE = {
    "nn.relu": "Relu",
    "sigmoid": "Sigmoid",
    "tanh": "Tanh",
    "exp": "Exp",
    "sqrt": "Sqrt",
    "negative": "Neg",
    "add": "Add",
    "subtract": "Sub",
    "multiply": "Mul",
    "divide": "Div",
    "maximum": "Max",
    "minimum": "Min",
}


def to_onnx(mod, params: dict, opset: int = 17, name: str = "autosched"):
    """An ``onnx.ModelProto`` computing ``mod`` (NCHW layouts only) with ``params`` as weights.

    Raises
    ------
    ValueError
        For an op or layout the exporter does not cover, naming it.
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    func = mod["main"] if isinstance(mod, Module) else mod
    if not isinstance(func, Function):
        raise TypeError(f"to_onnx takes a Module or Function, got {type(func).__name__}")
    names: dict = {}
    nodes, inits = [], []
    inputs = []
    for v in func.params:
        names[v] = v.name
        if v.name in params:
            inits.append(numpy_helper.from_array(np.asarray(params[v.name]), v.name))
        else:
            inputs.append(helper.make_tensor_value_info(v.name, TensorProto.FLOAT, list(v.shape)))
    counter = [0]

    def const(value, hint="c"):
        counter[0] += 1
        cname = f"{hint}_{counter[0]}"
        inits.append(numpy_helper.from_array(np.asarray(value), cname))
        return cname

    def name_of(e):
        if isinstance(e, Constant):
            if e not in names:
                names[e] = const(e.value, "const")
            return names[e]
        return names[e]

    for i, c in enumerate(calls(func)):
        out = f"t{i}"
        a = c.attrs
        ins = [name_of(x) for x in c.args]
        layout = a.get("data_layout", a.get("layout", "NCHW"))
        if layout not in ("NCHW", "NCDHW", None):
            raise ValueError(f"to_onnx: {c.op} has layout {layout}; export the NCHW network")
        if c.op == "nn.conv2d":
            top, left, bottom, right = a["padding"]
            nodes.append(
                helper.make_node(
                    "Conv", ins, [out], strides=list(a["strides"]),
                    pads=[top, left, bottom, right], dilations=list(a["dilation"]),
                    group=a["groups"], kernel_shape=list(c.args[1].shape[2:]),
                )
            )  # fmt: skip
        elif c.op == "nn.batch_norm":
            # Relay ignores gamma when scale=False and beta when center=False (bn_data has
            # scale=False); ONNX always applies both, so pass ones / zeros instead.
            channels = c.args[1].shape
            if not a["scale"]:
                ins[1] = const(np.ones(channels, c.dtype), "ones")
            if not a["center"]:
                ins[2] = const(np.zeros(channels, c.dtype), "zeros")
            nodes.append(helper.make_node("BatchNormalization", ins, [out], epsilon=a["epsilon"]))
        elif c.op in _ELEMENTWISE:
            nodes.append(helper.make_node(_ELEMENTWISE[c.op], ins, [out]))
        elif c.op == "clip":
            lo, hi = const(np.float32(a["a_min"])), const(np.float32(a["a_max"]))
            nodes.append(helper.make_node("Clip", [ins[0], lo, hi], [out]))
        elif c.op in ("nn.max_pool2d", "nn.avg_pool2d"):
            top, left, bottom, right = a["padding"]
            kw = dict(
                kernel_shape=list(a["pool_size"]), strides=list(a["strides"]),
                pads=[top, left, bottom, right], ceil_mode=int(a["ceil_mode"]),
            )  # fmt: skip
            if c.op == "nn.avg_pool2d":
                kw["count_include_pad"] = int(a["count_include_pad"])
            kind = "MaxPool" if c.op == "nn.max_pool2d" else "AveragePool"
            nodes.append(helper.make_node(kind, ins, [out], **kw))
        elif c.op == "nn.global_avg_pool2d":
            nodes.append(helper.make_node("GlobalAveragePool", ins, [out]))
        elif c.op == "nn.global_max_pool2d":
            nodes.append(helper.make_node("GlobalMaxPool", ins, [out]))
        elif c.op == "nn.batch_flatten":
            nodes.append(helper.make_node("Flatten", ins, [out], axis=1))
        elif c.op == "nn.dense":
            nodes.append(helper.make_node("Gemm", ins, [out], transB=1))
        elif c.op == "nn.bias_add":
            shape = [1] * len(c.shape)
            shape[a["axis"] % len(c.shape)] = -1
            b = f"{out}_bias"
            nodes.append(
                helper.make_node("Reshape", [ins[1], const(np.array(shape, "int64"))], [b])
            )
            nodes.append(helper.make_node("Add", [ins[0], b], [out]))
        elif c.op == "nn.softmax":
            nodes.append(helper.make_node("Softmax", ins, [out], axis=a["axis"]))
        elif c.op == "concatenate":
            nodes.append(helper.make_node("Concat", ins, [out], axis=a["axis"]))
        else:
            raise ValueError(f"to_onnx: op {c.op} is not covered by the exporter")
        names[c] = out
    outputs = [
        helper.make_tensor_value_info(names[o], TensorProto.FLOAT, list(o.shape))
        for o in func.outputs
    ]
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 9)
    onnx.checker.check_model(model)
    return model


__all__ = ["to_onnx"]
