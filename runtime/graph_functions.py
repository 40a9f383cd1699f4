"""``GraphModule.module``: the graph executor seen as a TVM runtime module of named functions.

TVM's ``GraphModule`` wraps a runtime module whose functions (``run``, ``set_input``,
``get_output``, ...) are looked up by name; the seed tutorials time a network with
``module.module.time_evaluator("run", dev, repeat=3, min_repeat_ms=500)``. This is that
view over a :class:`runtime.graph_executor.GraphModule`, timing with :mod:`runtime.timer`.
"""

from __future__ import annotations

from collections.abc import Callable

from .device import device as make_device
from .timer import TimingResult, measure

FUNCTION_NAMES = ("run", "set_input", "get_input", "get_output", "get_num_outputs")


class GraphFunctions:
    """The named functions of a graph module (TVM's ``graph_module.module``).

    Parameters
    ----------
    graph : runtime.graph_executor.GraphModule
    """

    def __init__(self, graph):
        self._graph = graph

    def get_function(self, name: str) -> Callable:
        """The function ``name`` (one of ``FUNCTION_NAMES``)."""
        if name not in FUNCTION_NAMES:
            raise ValueError(
                f"graph module has no function {name!r}; it has {', '.join(FUNCTION_NAMES)}"
            )
        return getattr(self._graph, name)

    def __getitem__(self, name: str) -> Callable:
        return self.get_function(name)

    def time_evaluator(
        self,
        func_name: str,
        dev,
        number: int = 10,
        repeat: int = 1,
        min_repeat_ms: float = 0,
    ) -> Callable[[], TimingResult]:
        """A timer of ``func_name`` (only ``"run"``: the whole network) on ``dev``, as TVM's.

        Parameters
        ----------
        func_name : str
            ``"run"``.
        dev : Device or str
            Must be the graph module's device.
        number, repeat, min_repeat_ms
            As TVM's (and :func:`runtime.timer.measure`): ``repeat`` results, each the mean of
            ``number`` runs, ``number`` raised until a repeat lasts ``min_repeat_ms``.

        Returns
        -------
        callable
            ``ftimer() -> TimingResult`` (seconds: ``np.array(ftimer().results) * 1e3`` is ms).
        """
        if func_name != "run":
            raise ValueError(
                f"time_evaluator: only the graph's 'run' can be timed, not {func_name!r}"
            )
        graph = self._graph
        if make_device(dev) != graph.device:
            raise ValueError(f"time_evaluator on {dev}, but this module runs on {graph.device}")

        def evaluate() -> TimingResult:
            return measure(
                graph._backend.time_launches,
                graph._launch_all,
                number=number,
                repeat=repeat,
                min_repeat_ms=min_repeat_ms,
            )

        return evaluate
