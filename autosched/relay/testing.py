"""``relay.testing``: the model zoo under the names seed 001's ``get_network`` calls::

    mod, params = relay.testing.mobilenet.get_workload(
        batch_size=batch_size, layout=layout, dtype=dtype, image_shape=image_shape
    )

Each ``get_workload`` is :func:`autosched.networks.get_network` of that network (the same
graphs as relay.testing's, with deterministic random weights) and returns ``(mod, params)``.
The zoo's image sizes are fixed (224, inception_v3 299): another ``image_shape`` is an error.
"""

from __future__ import annotations

from types import SimpleNamespace

from tensorir.graph.zoo import get_network


def _workload(name: str, batch_size: int, layout: str, dtype: str, image_shape) -> tuple:
    mod, params, input_shape, _ = get_network(name, batch_size, layout, dtype)
    if image_shape is not None and tuple(image_shape) != tuple(input_shape[1:]):
        raise ValueError(
            f"relay.testing: {name} takes images of shape {tuple(input_shape[1:])} ({layout}); "
            f"got image_shape={tuple(image_shape)}"
        )
    return mod, params


def _resnet(num_layers=18, batch_size=1, layout="NCHW", dtype="float32", image_shape=None):
    return _workload(f"resnet-{num_layers}", batch_size, layout, dtype, image_shape)


def _resnet3d(num_layers=18, batch_size=1, layout="NCDHW", dtype="float32", image_shape=None):
    return _workload(f"resnet3d-{num_layers}", batch_size, layout, dtype, image_shape)


def _mobilenet(batch_size=1, layout="NCHW", dtype="float32", image_shape=None):
    return _workload("mobilenet", batch_size, layout, dtype, image_shape)


def _squeezenet(version="1.0", batch_size=1, dtype="float32", image_shape=None):
    return _workload(f"squeezenet_v{version}", batch_size, "NCHW", dtype, image_shape)


def _inception_v3(batch_size=1, dtype="float32", image_shape=None):
    return _workload("inception_v3", batch_size, "NCHW", dtype, image_shape)


resnet = SimpleNamespace(get_workload=_resnet)
resnet_3d = SimpleNamespace(get_workload=_resnet3d)
mobilenet = SimpleNamespace(get_workload=_mobilenet)
squeezenet = SimpleNamespace(get_workload=_squeezenet)
inception_v3 = SimpleNamespace(get_workload=_inception_v3)

__all__ = ["inception_v3", "mobilenet", "resnet", "resnet_3d", "squeezenet"]
