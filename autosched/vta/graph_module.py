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

The seed's deployment lines work on the result as on TVM's library: ``export_library(
"graphlib.tar")`` (:mod:`autosched.vta.library`), ``remote.load_module`` of an
``rpc.LocalSession()``, ``graph_executor.GraphModule(lib["default"](ctx))`` and
``m.module.time_evaluator("run", ctx, number=4, repeat=3)``; every run adds its counters to
the process's totals, which ``vta.testing.simulator.stats()`` reads and ``clear_stats()``
zeroes, as TVM's simulator does.
"""

from __future__ import annotations

import contextlib
import logging
import time

import numpy as np

from tensorir.graph.ir import Call, Constant, Function, Module, Var, post_order
from tensorir.graph.shapes import get_op

from ..autotvm.context import DispatchContext
from ..autotvm.task import Task
from .env import Environment, get_env
from .library import read_library, save_library
from .top.build import VTAKernel, build, conv2d_workload
from .top.templates import tile_config, workload_of_call

_log = logging.getLogger(__name__)

COUNTERS = (
    "inp_load_nbytes", "wgt_load_nbytes", "acc_load_nbytes", "uop_load_nbytes",
    "out_store_nbytes", "gemm_counter", "alu_counter", "cycles",
)  # fmt: skip

# The simulator's counters summed over every run in this process since the last
# ``clear_stats()`` (TVM's simulator keeps such process-wide counters); see
# autosched.vta.testing.simulator.
_TOTALS: dict = dict.fromkeys(COUNTERS, 0)


def total_stats() -> dict:
    """The counters of every run since :func:`clear_total_stats` (a copy)."""
    return dict(_TOTALS)


def clear_total_stats() -> None:
    """Zero the process-wide counters."""
    for name in _TOTALS:
        _TOTALS[name] = 0


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
        """Set an input (a numpy array or an NDArray such as ``tvm.nd.array(...)``'s)."""
        names = [v.name for v in self.func.params]
        if name not in names:
            raise KeyError(f"set_input: no input {name!r}; the network's inputs are {names}")
        self._inputs[name] = value.numpy() if hasattr(value, "numpy") else np.asarray(value)

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
        for name, value in stats.items():
            _TOTALS[name] += value

    def get_output(self, index: int = 0) -> np.ndarray:
        return self._outputs[index]

    def simulated_seconds(self) -> float:
        """The VTA part's simulated time of the last run (its layers one after another)."""
        return self.env.timing.seconds(self.stats["cycles"])

    # -------------------------------------------------------------- TVM's library API
    def export_library(self, path) -> None:
        """Save the network, its weights and its compiled VTA programs as one file (a tar,
        e.g. ``"graphlib.tar"``; :mod:`autosched.vta.library`)."""
        save_library(self, path)

    def __getitem__(self, name: str):
        """``lib["default"]``: ``lib["default"](ctx)`` is what ``GraphModule(...)`` runs."""
        if name != "default":
            raise KeyError(f"a VTA network has one function, 'default'; got {name!r}")
        return lambda dev=None: _VTAFactory(self)

    @property
    def module(self) -> _VTAFunctions:
        """``m.module.time_evaluator("run", ctx, number, repeat)`` (TVM's graph module)."""
        return _VTAFunctions(self)


class _VTAFactory:
    """``lib["default"](ctx)``: ``GraphModule(...)`` of it is a fresh module of the network."""

    def __init__(self, lib: VTAGraphModule):
        self.lib = lib

    def graph_module(self, dev=None) -> VTAGraphModule:
        lib = self.lib
        return VTAGraphModule(lib.func, lib.kernels, lib.env, lib._params)


class _VTAFunctions:
    def __init__(self, graph: VTAGraphModule):
        self.graph = graph

    def time_evaluator(self, name: str, dev=None, number: int = 1, repeat: int = 1,
                       min_repeat_ms: float = 0, **_):  # fmt: skip
        """A timer of ``run``: one warm-up run, then ``repeat`` times ``number`` runs; each
        result is the mean wall-clock seconds of a run of one repeat (host ops and the
        simulator, as TVM's simulator build measures). The simulator's counters of all these
        runs (``number * repeat + 1``) add up in ``vta.testing.simulator.stats()``."""
        from runtime import TimingResult

        if name != "run":
            raise KeyError(f"a graph module times 'run', got {name!r}")
        if number < 1 or repeat < 1:
            raise ValueError(f"time_evaluator: number={number} and repeat={repeat} must be >= 1")
        graph = self.graph

        def evaluate() -> TimingResult:
            graph.run()  # warm-up, as TVM's time evaluator
            results = []
            for _ in range(repeat):
                runs, start = 0, time.perf_counter()
                while True:
                    for _ in range(number):
                        graph.run()
                    runs += number
                    elapsed = time.perf_counter() - start
                    if elapsed * 1e3 >= min_repeat_ms:
                        break
                results.append(elapsed / runs)
            return TimingResult(float(np.mean(results)), float(np.median(results)), tuple(results))

        return evaluate


def load_library(path, env: Environment | None = None) -> VTAGraphModule:
    """The network ``export_library`` saved at ``path`` (:mod:`autosched.vta.library`); a
    one-line ValueError naming the file if it is not one, or for another VTA configuration
    than ``env``'s (default ``vta.get_env()``)."""
    return VTAGraphModule(*read_library(path, env))


@contextlib.contextmanager
def build_config(opt_level: int = 3, disabled_pass=None, **_):
    """TVM's ``vta.build_config(opt_level=3, disabled_pass={"AlterOpLayout"})``: the context
    the seed compiles in. ``vta.build`` has no pass pipeline to configure (the network is
    already quantized and packed; every packed conv2d becomes a VTA program), so this only
    checks its arguments and keeps the seed's ``with`` block as written."""
    if not isinstance(opt_level, int) or not 0 <= opt_level <= 4:
        raise ValueError(f"vta.build_config: opt_level must be 0..4, got {opt_level!r}")
    yield


def build_network(
    func, target=None, params: dict | None = None, target_host=None, env: Environment | None = None
):
    """Compile the packed conv2d layers of ``func`` (Function or Module) for the simulated VTA
    under the current dispatch context; see the module docstring.

    ``target`` / ``target_host`` are the seed's ``relay.build(relay_prog, target=env.target,
    params=params, target_host=env.target_host)`` arguments: ``target`` must be VTA's
    (``ext_dev -device=vta``); the host part runs here.
    """
    from codegen.target import Target

    env = env or get_env()
    if target is not None and Target(target).get("device") != "vta":
        raise ValueError(
            f"vta.build: target {str(Target(target))!r} is not VTA's; pass env.target "
            f"({env.target}) or build CPU networks with autosched.build"
        )
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
