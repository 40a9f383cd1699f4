"""What the modern-ONNX-op tests share (test_onnx_ops_modern.py, test_onnx_modern_models.py):
a ``Case`` (one small onnx.helper graph), node and constant builders, merging cases into one
model, random feeds, onnxruntime's outputs and the comparison with ours.

Import it after ``pytest.importorskip("onnx")`` / ``("onnxruntime")``: it needs both.
"""

import dataclasses

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

INT64_MAX, INT64_MIN = 2**63 - 1, -(2**63)
_ELEM = {"float32": TensorProto.FLOAT, "bool": TensorProto.BOOL, "int64": TensorProto.INT64}


@dataclasses.dataclass
class Case:
    """One graph: ``inputs`` {name: (shape, dtype)}, ``outputs`` names, ``inits`` arrays."""

    name: str
    opset: int
    nodes: list
    inputs: dict
    outputs: list
    inits: dict = dataclasses.field(default_factory=dict)
    ops: tuple = ()  # graph ops the import must produce (and, with no_ops, must not)
    no_ops: tuple = ()


def node(op_type, inputs, outputs, **attrs):
    return helper.make_node(op_type, inputs, outputs, **attrs)


def const(name, value):
    """A Constant node, as both exporters write scalars and shapes."""
    return node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value), name))


def f32(*shape):
    return (shape, "float32")


def model_of(cases, opset):
    """One model of every case, value names prefixed with the case's name."""

    def p(c, n):
        return f"{c.name}.{n}" if n else ""

    nodes, inputs, outputs, inits = [], [], [], []
    for c in cases:
        for nd in c.nodes:
            ins, outs = [p(c, i) for i in nd.input], [p(c, o) for o in nd.output]
            new = helper.make_node(nd.op_type, ins, outs, name=nd.name, domain=nd.domain)
            new.attribute.extend(nd.attribute)
            nodes.append(new)
        for n, (shape, dtype) in c.inputs.items():
            inputs.append(helper.make_tensor_value_info(p(c, n), _ELEM[dtype], shape))
        outputs += [onnx.ValueInfoProto(name=p(c, o)) for o in c.outputs]  # types inferred
        inits += [numpy_helper.from_array(np.asarray(v), p(c, k)) for k, v in c.inits.items()]
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8  # onnxruntime reads ir_version <= 13 only
    return model


def feeds_of(model, seed=0):
    rng = np.random.default_rng(seed)
    out = {}
    for i in model.graph.input:
        shape = [d.dim_value for d in i.type.tensor_type.shape.dim]
        elem = i.type.tensor_type.elem_type
        if elem == TensorProto.BOOL:
            out[i.name] = rng.random(shape) > 0.5
        elif elem == TensorProto.INT64:
            out[i.name] = rng.integers(-4, 5, shape).astype(np.int64)
        else:
            out[i.name] = rng.standard_normal(shape).astype(np.float32)
    return out


def run_ort(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def assert_close(ours, want, what):
    if want.shape == () and ours.shape == (1,):
        ours = ours.reshape(())  # a full reduction gives (1,): our tensors are never 0-d
    assert ours.shape == want.shape, f"{what}: shape {ours.shape} != {want.shape}"
    assert ours.dtype == want.dtype, f"{what}: dtype {ours.dtype} != {want.dtype}"
    if want.dtype.kind == "f":
        np.testing.assert_allclose(ours, want, rtol=1e-5, atol=1e-5, err_msg=what)
    else:
        np.testing.assert_array_equal(ours, want, err_msg=what)
