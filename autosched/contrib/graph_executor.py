"""``tvm.contrib.graph_executor``: ``GraphModule(lib["default"](dev))`` runs a compiled network
(:class:`runtime.graph_executor.GraphModule`; a library loaded over RPC runs on its server)."""

from runtime.graph_executor import GraphModule

__all__ = ["GraphModule"]
