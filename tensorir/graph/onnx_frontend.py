"""Import an ONNX model as a graph ``Module`` (like ``relay.frontend.from_onnx``).

The per-op converters are in ``onnx_ops.py``; this file walks the graph. onnx is an optional
dependency, imported only when ``from_onnx`` runs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np

from ..dtype import DTYPES
from . import onnx_ops_index, onnx_ops_math, onnx_ops_nn  # noqa: F401 - they register their converters
from .ir import Constant, Expr, Function, Module, Var
from .onnx_ops import CONVERTERS, MULTI_OUTPUT, Node, OnnxImportError, Value

__all__ = ["OnnxImportError", "from_onnx", "load_model", "supported_ops"]

OPS_PAGE = "docs/onnx-ops.md"  # the supported op types and attributes, for error messages

_MIN_OPSET = 7  # older opsets have the legacy "broadcast" attribute on binary ops


def supported_ops() -> list[str]:
    """The ONNX op types ``from_onnx`` converts (default domain)."""
    return sorted(CONVERTERS)


def _import_onnx():
    try:
        import onnx
        import onnx.numpy_helper  # noqa: F401
    except ImportError as e:
        raise ImportError(
            "from_onnx needs the onnx package: pip install onnx (or the 'onnx' extra)"
        ) from e
    return onnx


class _Importer:
    def __init__(self, onnx, graph, opset: int):
        self.onnx, self.graph, self.opset = onnx, graph, opset
        self.values: dict[str, Value] = {}
        self.params: dict[str, np.ndarray] = {}
        self.inputs: list[Var] = []
        self.weights: list[Var] = []  # in first-use order
        self._param_vars: dict[str, Var] = {}
        self._names: set[str] = set()
        self._derived: dict[tuple[str, str], Var] = {}
        self.dropped: dict[str, str] = {}  # an output no converter produces -> its node

    # --- values ---------------------------------------------------------------------------

    def expr(self, v: Value) -> Expr:
        """``v`` as a graph node: its expression, the Var of its initializer (created on
        first use), or a Constant."""
        if v.expr is not None:
            return v.expr
        if v.param is not None:
            var = self._param_vars.get(v.param)
            if var is None:
                var = self._new_param(v.param, v.static)
                self._param_vars[v.param] = var
            return var
        return Constant(v.static)

    def derived(self, v: Value, suffix: str, value: np.ndarray) -> Expr:
        """A value computed at import time from ``v``: a new parameter named after ``v``'s
        initializer plus ``suffix`` (a Constant if ``v`` is no initializer)."""
        if v.param is None:
            return Constant(value)
        done = self._derived.get((v.param, suffix))
        if done is not None and np.array_equal(self.params[done.name], value):
            return done  # the same weight folded the same way by another node
        name, k = v.param + suffix, 1
        while name in self._names:
            name, k = f"{v.param}{suffix}{k}", k + 1
        self._derived[v.param, suffix] = var = self._new_param(name, value)
        return var

    def _new_param(self, name: str, value: np.ndarray) -> Var:
        var = Var(name, value.shape, str(value.dtype))
        self._names.add(name)
        self.params[name] = value
        self.weights.append(var)
        return var

    def dtype_of(self, elem_type: int, node: Node | None = None) -> str:
        try:
            name = str(np.dtype(self.onnx.helper.tensor_dtype_to_np_dtype(elem_type)))
        except (KeyError, TypeError, ValueError):
            name = f"ONNX type {elem_type}"
        if name not in DTYPES:
            msg = f"data type {name} is not supported; supported: {sorted(DTYPES)}"
            if node is not None:
                node.fail(msg)
            raise OnnxImportError(msg)
        return name

    # --- nodes ----------------------------------------------------------------------------

    def attrs(self, proto) -> dict:
        out = {}
        for a in proto.attribute:
            val = self.onnx.helper.get_attribute_value(a)
            if isinstance(val, bytes):
                val = val.decode()
            elif isinstance(val, self.onnx.TensorProto):
                val = self.onnx.numpy_helper.to_array(val)
            elif isinstance(val, list):
                val = tuple(v.decode() if isinstance(v, bytes) else v for v in val)
            out[a.name] = val
        return out

    def convert(self, proto, index: int):
        node = Node(self, proto, index, self.attrs(proto), self.opset)
        if proto.domain not in ("", "ai.onnx"):
            node.fail(f"domain {proto.domain!r} is not supported; only the default ONNX domain")
        entry = CONVERTERS.get(proto.op_type)
        if entry is None:
            node.fail(
                f"op type {proto.op_type} is not supported (opset {self.opset}); the supported "
                f"op types are listed in {OPS_PAGE} and by supported_ops()"
            )
        fn, known = entry
        for name in node.attrs:
            if name not in known:
                node.fail(
                    f"attribute {name} is not supported; supported: {sorted(known) or 'none'}"
                )
        if proto.op_type in MULTI_OUTPUT:
            if not any(proto.output):  # LSTM may leave Y out and ask for Y_h alone
                node.fail("has no output")
        elif not proto.output or not proto.output[0]:
            node.fail("has no output")
        else:
            node.check_single_output()
        for i, name in enumerate(proto.input):
            if name in self.dropped:
                node.fail(
                    f"input {i} {name!r} is an output of {self.dropped[name]} that is not "
                    "supported (only its first output is)"
                )
            if name and name not in self.values:
                node.fail(f"input {i} {name!r} is not produced by any earlier node or input")
        try:
            out = fn(node)
        except OnnxImportError:
            raise
        except (ValueError, TypeError, KeyError) as e:
            raise OnnxImportError(f"{node.where}: {e}") from e
        outs = out if isinstance(out, list) else [out]
        for name, one in zip(proto.output, outs):
            if name:
                self.values[name] = self._result(one, proto, name)
        for name in proto.output[len(outs) :]:
            if name:
                self.dropped[name] = node.where

    def _result(self, out, proto, name: str) -> Value:
        if isinstance(out, Value):
            return out
        if isinstance(out, Expr):
            return Value(expr=out)
        # Folded from an initializer (a transposed weight, say): still a parameter, named
        # after the node's output; from Constants and shape arithmetic: a constant.
        derived = any(self.values[n].param for n in proto.input if n)
        return Value(static=np.asarray(out), param=name if derived else None)


def load_model(model_or_path):
    """A checked ModelProto from a ModelProto, its serialized bytes or a path.

    Raises OnnxImportError ("not an ONNX model: <file>") for what does not parse, or parses to
    no graph (an empty file parses to an empty ModelProto), FileNotFoundError for a missing
    file and TypeError for anything else.
    """
    onnx = _import_onnx()  # first: without onnx, google.protobuf is missing too
    from google.protobuf.message import DecodeError

    if isinstance(model_or_path, onnx.ModelProto):
        what, model = "<ModelProto>", model_or_path
    else:
        if isinstance(model_or_path, bytes | bytearray | memoryview):
            what, load = f"<{len(model_or_path)} bytes>", onnx.load_from_string
            data = bytes(model_or_path)
        elif isinstance(model_or_path, str | os.PathLike):
            what, load, data = os.fspath(model_or_path), onnx.load, model_or_path
            if not os.path.isfile(what):
                raise FileNotFoundError(f"from_onnx: no such ONNX file: {what}")
        else:
            raise TypeError(
                "from_onnx takes an onnx.ModelProto, its serialized bytes or a path to an .onnx "
                f"file, got {type(model_or_path).__name__}"
            )
        try:
            model = load(data)
        except DecodeError as e:
            raise OnnxImportError(f"not an ONNX model: {what} ({e})") from e
    if not model.HasField("graph") or not model.opset_import:
        raise OnnxImportError(
            f"not an ONNX model: {what} (it has no graph or no opset_import; empty or truncated?)"
        )
    return model


def _input_shape(onnx_input, shape: Mapping) -> tuple[int, ...]:
    name = onnx_input.name
    t = onnx_input.type.tensor_type
    dims = list(t.shape.dim) if t.HasField("shape") else None
    if name in shape:
        given = tuple(int(d) for d in shape[name])
        if dims is not None and len(dims) != len(given):
            model_shape = tuple(d.dim_value if d.HasField("dim_value") else d.dim_param or "?"
                                for d in dims)  # fmt: skip
            raise OnnxImportError(
                f"shape= gives input {name!r} the shape {given} ({len(given)}-D), but the "
                f"model's input is {len(dims)}-D {model_shape}; give a shape of the same rank"
            )
        return given
    if dims is None or any(not d.HasField("dim_value") for d in dims):
        shown = "unknown rank" if dims is None else tuple(
            d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in dims
        )  # fmt: skip
        raise OnnxImportError(
            f"input {name!r} has a dynamic shape ({shown}); pass its static shape with "
            f"shape={{{name!r}: (...)}}"
        )
    return tuple(int(d.dim_value) for d in dims)


def from_onnx(model_or_path, shape: Mapping[str, tuple] | None = None, dtype="float32"):
    """Convert an ONNX model into a graph ``Module`` and its parameters.

    Parameters
    ----------
    model_or_path : onnx.ModelProto or bytes or str or os.PathLike
        The model, its serialized bytes (``model.SerializeToString()``, as onnxruntime's
        ``InferenceSession`` also takes), or a path to an ``.onnx`` file.
    shape : dict name -> tuple of int, optional
        Static shapes of graph inputs; needed for inputs with dynamic dims, and overriding the
        model's shape otherwise.
    dtype : str or dict name -> str
        The dtype of inputs whose type the model leaves undefined; a dict gives it per input
        and overrides the model's type.

    Returns
    -------
    mod : Module
        ``mod["main"]`` takes the graph inputs, then one Var per initializer it uses (named
        after the initializer, in first-use order), and returns the graph outputs (a tuple
        body when there are several).
    params : dict name -> np.ndarray
        The initializer values. An initializer that an op needs transposed (Gemm's
        ``transB=0``, MatMul's right operand) or scaled (Gemm's ``beta``) is folded into a new
        parameter ``<name>_T`` / ``<name>_scaled``.

    Raises
    ------
    ImportError
        onnx is not installed.
    OnnxImportError (a ValueError)
        An unsupported op, attribute value or data type (one line naming the node and the op
        type; an op type that is not supported points at docs/onnx-ops.md, an attribute value
        or data type says what is supported), an input without a static shape, a ``shape=``
        of another rank than the model's input, or a file or bytes that are not an ONNX model.
    FileNotFoundError
        ``model_or_path`` names no file.
    TypeError
        ``model_or_path`` is none of the above.

    Notes
    -----
    Calls are NCHW (``data_layout`` "NCHW", kernels OIHW; NCDHW/OIDHW for 5-D tensors), as in
    ONNX. Shapes are static, so Shape and the arithmetic on its output (Gather, Unsqueeze,
    Concat, Cast, Add, ...) are evaluated at import time and feed Reshape as constants.
    ``supported_ops()`` lists the op types; docs/onnx-ops.md lists them with their
    attributes and the graph ops each becomes.
    """
    from . import onnx_checks  # what the model promises at its edges (issue 27)

    onnx = _import_onnx()
    model = load_model(model_or_path)
    opsets = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    opset = opsets[0] if opsets else 1
    if opset < _MIN_OPSET:
        raise OnnxImportError(f"opset {opset} is not supported; supported: {_MIN_OPSET} and newer")
    graph = model.graph
    shape = dict(shape or {})
    imp = _Importer(onnx, graph, opset)

    inits = {t.name: onnx_checks.initializer_array(onnx, t) for t in graph.initializer}
    onnx_checks.warn_inputs_with_initializers(graph, inits)
    for name, value in inits.items():
        imp.values[name] = Value(static=value, param=name)
    input_names = [i.name for i in graph.input if i.name not in inits]
    unknown = sorted(set(shape) - set(input_names))
    if unknown:
        raise OnnxImportError(
            f"shape= names {unknown}, which are not graph inputs; the inputs are {input_names}"
        )
    for i in graph.input:
        if i.name in inits:
            continue
        elem = i.type.tensor_type.elem_type
        if isinstance(dtype, Mapping) and i.name in dtype:
            dt = dtype[i.name]
        elif elem:
            dt = imp.dtype_of(elem)
        else:
            dt = dtype if isinstance(dtype, str) else "float32"
        var = Var(i.name, _input_shape(i, shape), dt)
        onnx_checks.check_input_shape(i.name, var.shape)
        imp._names.add(i.name)
        imp.inputs.append(var)
        imp.values[i.name] = Value(expr=var)

    for index, node in enumerate(graph.node):
        imp.convert(node, index)

    outs = []
    for o in graph.output:
        if o.name in imp.dropped:
            raise OnnxImportError(
                f"graph output {o.name!r} is an output of {imp.dropped[o.name]} that is not "
                "supported (only its first output is)"
            )
        if o.name not in imp.values:
            raise OnnxImportError(f"graph output {o.name!r} is not produced by any node")
        outs.append(imp.expr(imp.values[o.name]))
    onnx_checks.check_outputs(graph, outs, shape_overridden=bool(shape))
    body = outs[0] if len(outs) == 1 else tuple(outs)
    func = onnx_ops_nn.drop_reshape_round_trips(
        Function(tuple(imp.inputs) + tuple(imp.weights), body)
    )
    used = {v.name for v in imp.weights}
    params = {k: v for k, v in imp.params.items() if k in used}
    return Module.from_function(func), params
