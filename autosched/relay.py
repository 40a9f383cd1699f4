"""``from autosched import relay``: the Relay names the seed tutorials use, as aliases.

=====================================  =============================================
seed (``tvm.relay``)                   autosched
=====================================  =============================================
``relay.build(mod, target, params)``   :func:`autosched.build`
``relay.op.get("nn.conv2d")``          :func:`tensorir.graph.shapes.get_op` (the op's
                                       entry; ``extract_from_program(ops=...)`` takes it)
``relay.op``, ``relay.nn``             :mod:`tensorir.graph.op`, its ``nn``
``relay.Function``                     :class:`tensorir.graph.ir.Function`
``relay.quantize.qconfig/quantize``    :mod:`autosched.quantize`
=====================================  =============================================
"""

from tensorir.graph import op
from tensorir.graph.ir import Function
from tensorir.graph.ir import Module as IRModule

from . import quantize
from .build_module import build

nn = op.nn

__all__ = ["Function", "IRModule", "build", "nn", "op", "quantize"]
