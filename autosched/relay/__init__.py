"""``from autosched import relay``: the Relay names the seed tutorials use, as aliases.

=====================================  =============================================
seed (``tvm.relay``)                   autosched
=====================================  =============================================
``relay.build(mod, target, params)``   :func:`autosched.build`; for VTA's target
                                       (``env.target``) :func:`autosched.vta.build`
``relay.op.get("nn.conv2d")``          :func:`tensorir.graph.shapes.get_op` (the op's
                                       entry; ``extract_from_program(ops=...)`` takes it)
``relay.op``, ``relay.nn``             :mod:`tensorir.graph.op`, its ``nn``
``relay.Function``                     :class:`tensorir.graph.ir.Function`
``relay.quantize.qconfig/quantize``    :mod:`autosched.quantize`
``relay.testing.X.get_workload``       :func:`autosched.networks.get_network`
                                       (:mod:`autosched.relay.testing`)
=====================================  =============================================
"""

from tensorir.graph import op
from tensorir.graph.ir import Function
from tensorir.graph.ir import Module as IRModule

from .. import build_module, quantize
from . import testing

nn = op.nn

__all__ = ["Function", "IRModule", "build", "nn", "op", "quantize", "testing"]


def build(mod, target=None, target_host=None, params=None, **kwargs):
    """``relay.build(mod, target, params=params)``: :func:`autosched.build` of a network, or
    :func:`autosched.vta.build` when ``target`` is VTA's (``ext_dev -device=vta``), as seed 004
    compiles inside ``vta.build_config()``."""
    from codegen.target import Target

    if target is not None and Target(target).get("device") == "vta":
        from .. import vta

        return vta.build(mod, target=target, params=params, target_host=target_host)
    return build_module.build(mod, target or "llvm", params=params, target_host=target_host,
                              **kwargs)  # fmt: skip
