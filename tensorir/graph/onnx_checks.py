"""What ``from_onnx`` checks at the edges of a graph: initializer data, inputs, outputs.

The converters trust their inputs' shapes, so a model that contradicts itself is refused (or,
where ONNX allows it, imported with a warning) here, naming the tensor:

- an initializer whose data do not fill its shape (a truncated or damaged file): an error,
  where numpy said "buffer size must be a multiple of element size";
- a graph input with a zero-size dimension: an error (compiled tensors have at least one
  element; the op lowering used to refuse it later, naming no input);
- a graph input that also has an initializer: ONNX's way of giving an input a default. It is
  imported as a weight holding that default (``params[name]``), not as an input, with a
  warning; remove the initializer from the model to feed the input at run time;
- a graph output whose declared shape is not the computed one: an error, or a warning when
  ``shape=`` changed the inputs (the declared shapes then are expectedly stale);
- a graph output listed more than once: each listing is returned (as onnxruntime does), with a
  warning.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from .onnx_ops import OnnxImportError

_EXTERNAL = 1  # TensorProto.DataLocation.EXTERNAL: the data live in another file
_TYPED_FIELDS = ("float_data", "int32_data", "int64_data", "double_data", "uint64_data")


def initializer_array(onnx, tensor) -> np.ndarray:
    """The value of an initializer ``TensorProto``, refusing data that do not fit its shape."""
    dims = tuple(int(d) for d in tensor.dims)
    try:
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type))
    except (KeyError, TypeError, ValueError):
        dtype = None  # an unknown data type: to_array below says so
    # 4-bit types pack two elements a byte and complex ones take two typed numbers each:
    # their sizes are to_array's to check.
    packed = {getattr(onnx.TensorProto, n, -1) for n in ("INT4", "UINT4", "FLOAT4E2M1")}
    if (
        dtype is not None
        and dtype.kind not in "Oc"
        and tensor.data_type not in packed
        and tensor.data_location != _EXTERNAL
    ):
        need = math.prod(dims) * dtype.itemsize
        if tensor.raw_data:
            have = len(tensor.raw_data)
        else:
            # Typed fields hold one number per element (float16 and the 8-bit types too).
            have = sum(len(getattr(tensor, f)) for f in _TYPED_FIELDS) * dtype.itemsize
        if have != need:
            raise OnnxImportError(
                f"initializer {tensor.name!r}: its data holds {have} bytes but shape {dims} of "
                f"{dtype} needs {need}; the model file is truncated or damaged"
            )
    try:
        return onnx.numpy_helper.to_array(tensor)
    except (ValueError, TypeError) as e:
        raise OnnxImportError(f"initializer {tensor.name!r}: unreadable data ({e})") from e


def check_input_shape(name: str, dims: tuple[int, ...]) -> None:
    """Refuse a graph input with a zero-size dimension."""
    if any(d == 0 for d in dims):
        raise OnnxImportError(
            f"input {name!r} has a zero-size dimension {dims}; compiled tensors have at least "
            f"one element: give a positive shape with shape={{{name!r}: (...)}}"
        )


def warn_inputs_with_initializers(graph, inits) -> None:
    """Warn for each graph input that also has an initializer (imported as a weight)."""
    for i in graph.input:
        if i.name in inits:
            warnings.warn(
                f"graph input {i.name!r} also has an initializer: imported as a weight with "
                "the initializer's value (ONNX's default for the input), not as an input; "
                "remove the initializer from the model to feed it at run time",
                stacklevel=3,
            )


def check_outputs(graph, outs, shape_overridden: bool) -> None:
    """Compare each graph output's declared shape with the computed one ``outs[k].shape``;
    warn about outputs listed more than once."""
    names = [o.name for o in graph.output]
    for name in dict.fromkeys(n for n in names if names.count(n) > 1):
        warnings.warn(
            f"graph output {name!r} is listed {names.count(name)} times; each is returned "
            "(as onnxruntime does)",
            stacklevel=3,
        )
    for o, expr in zip(graph.output, outs, strict=True):
        t = o.type.tensor_type
        if not t.HasField("shape"):
            continue
        dims = list(t.shape.dim)
        computed = tuple(expr.shape)
        shown = tuple(d.dim_value if d.HasField("dim_value") else d.dim_param or "?" for d in dims)
        fits = len(dims) == len(computed) and all(
            not d.HasField("dim_value") or d.dim_value == c for d, c in zip(dims, computed)
        )
        if fits:
            continue
        msg = (
            f"graph output {o.name!r}: the model declares shape {shown} but the graph "
            f"computes {computed}"
        )
        if shape_overridden:
            warnings.warn(f"{msg} (after the shape= override)", stacklevel=3)
        else:
            raise OnnxImportError(f"{msg}; the model is inconsistent (fix its output's shape)")
