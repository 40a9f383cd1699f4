"""The model zoo of the seed tutorials: ``networks.get_network(name, batch_size, layout)``.

Returns ``(mod, params, input_shape, output_shape)`` like the tutorials' ``get_network``; see
``tensorir.graph.zoo`` for the networks (resnet-N, resnet3d-N, mobilenet, squeezenet_v1.1,
inception_v3, and the transformers bert-tiny, bert-base, gpt2 (int64 ``input_ids``, ``seq_len=``)
and vit-b16) and how their deterministic random weights are drawn.

The networks themselves, not what is done with them: tuning and building a network (partition,
``extract_tasks``, the task scheduler, ``build``) is the :mod:`autosched.network` package. The
name is the one the docs and the tutorials use (``from autosched import networks``).
"""

from tensorir.graph.zoo import NETWORKS, get_network

__all__ = ["NETWORKS", "get_network", "from_onnx"]


def from_onnx(model, shape=None, dtype: str = "float32"):
    """Import an ONNX model (a ModelProto, its serialized bytes or a path) as ``(mod, params)``;
    needs ``onnx``."""
    from tensorir.graph.onnx_frontend import from_onnx as _from_onnx

    return _from_onnx(model, shape=shape, dtype=dtype)
