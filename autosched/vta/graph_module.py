"""Run a packed network with its conv2d layers on the simulated VTA (``vta.build``).

``vta.build(func)`` compiles every packed ``nn.conv2d`` (``NCHW1n16c``, from ``graph_pack``)
into a VTA program with the configuration the current AutoTVM dispatch context gives for its
``conv2d_packed.vta`` workload (``with autotvm.apply_history_best(log):``; untuned workloads
take the template's fallback). ``module.run()`` then walks the graph: those convolutions run on
the simulator, every other operator on the host with the numpy reference (the CPU part of the
seed's split). The module sums the simulator statistics over the run.

A graph's ``nn.conv2d`` keeps its int32 accumulator (the requantization is separate ops), so
its VTA program stores the result as four int8 byte planes (``Conv2dWorkload(requantize=
False)``): exact, at the price of four times the output traffic of a fused requantization.
"""

from __future__ import annotations

import logging

import numpy as np

from tensorir.graph.ir import Call, Constant, Function, Module, Var, post_order
from tensorir.graph.shapes import get_op

from ..autotvm.context import DispatchContext
from ..autotvm.task import Task
from .env import Environment, get_env
from .top.build import VTAKernel, build, conv2d_workload
from .top.templates import tile_config, workload_of_call

_log = logging.getLogger("autosched.vta")

COUNTERS = (
    "inp_load_nbytes", "wgt_load_nbytes", "acc_load_nbytes", "uop_load_nbytes",
    "out_store_nbytes", "gemm_counter", "alu_counter", "cycles",
)  # fmt: skip


class VTAGraphModule:
    """A network whose packed conv2d layers run on the simulated VTA (TVM's GraphModule API:
    ``set_input``, ``run``, ``get_output``), with the simulator's statistics of the last run."""

    def __init__(self, func: Function, kernels: dict, env: Environment, params: dict):
        self.func, self.kernels, self.env = func, kernels, env
        self._params = dict(params)
        self._inputs: dict = {}
        self._outputs: list = []
        self.stats: dict = dict.fromkeys(COUNTERS, 0)

    def set_input(self, name: str, value) -> None:
        names = [v.name for v in self.func.params]
        if name not in names:
            raise KeyError(f"set_input: no input {name!r}; the network's inputs are {names}")
        self._inputs[name] = np.asarray(value)

    def run(self) -> None:
        """Run the network once; conv2d layers on the simulator, the rest on the host."""
        env: dict[int, np.ndarray] = {}
        given = {**self._params, **self._inputs}
        stats = dict.fromkeys(COUNTERS, 0)
        for node in post_order(self.func):
            if isinstance(node, Var):
                if node.name not in given:
                    raise KeyError(f"run: no value for input {node.name!r}; call set_input")
                env[id(node)] = np.asarray(given[node.name]).astype(node.dtype, copy=False)
            elif isinstance(node, Constant):
                env[id(node)] = node.value
            elif id(node) in self.kernels:
                data, kernel = (env[id(a)] for a in node.args)
                out, run_stats = self.kernels[id(node)].run(data, kernel)
                for name, value in run_stats.counters().items():
                    stats[name] += value
                env[id(node)] = out
            else:
                args = [env[id(a)] for a in node.args]
                if node.attrs.get("out_dtype"):
                    args = [a.astype(node.dtype, copy=False) for a in args]
                out = get_op(node.op).reference(node.attrs, node.shape, *args)
                env[id(node)] = np.asarray(out).astype(node.dtype, copy=False)
        self._outputs = [env[id(o)] for o in self.func.outputs]
        self.stats = stats

    def get_output(self, index: int = 0) -> np.ndarray:
        return self._outputs[index]

    def simulated_seconds(self) -> float:
        """The VTA part's simulated time of the last run (its layers one after another)."""
        return self.env.timing.seconds(self.stats["cycles"])


def build_network(func, params: dict | None = None, env: Environment | None = None):
    """Compile the packed conv2d layers of ``func`` (Function or Module) for the simulated VTA
    under the current dispatch context; see the module docstring."""
    env = env or get_env()
    if isinstance(func, Module):
        func = func["main"]
    kernels: dict[int, VTAKernel] = {}
    cache: dict[tuple, VTAKernel] = {}
    for node in post_order(func):
        if not isinstance(node, Call):
            continue
        found = workload_of_call(node)
        if found is None:
            continue
        name, args = found
        workload = (name, *args)
        if workload not in cache:
            cfg = DispatchContext.current.query(env.target, workload)
            with env.target:
                Task(name, args, env.target).instantiate(cfg)  # defines a fallback's knobs
            wkl = conv2d_workload(args[0][1], args[1][1], args[2], args[3], requantize=False)
            cache[workload] = build(wkl, tile_config(cfg), env)
            _log.info("vta.build: %s with %s", name, tile_config(cfg))
        kernels[id(node)] = cache[workload]
    return VTAGraphModule(func, kernels, env, params or {})
