"""The device process of an RPC server: the long-lived process that owns the device.

The server (a dask worker, :mod:`autosched.rpc.server`) starts it with
:class:`autosched.workers.WorkerProcess` and hands it each request; a kernel that crashes
kills this process, not the server, which starts a new one. Requests are plain data
``(op, args)`` naming one of :data:`OPS`; replies are ``("ok", value)`` or
``("error", message)``. The process keeps what sessions loaded (libraries, graph modules)
under handles the client chose.
"""

from __future__ import annotations

import re
import time
import traceback

import numpy as np

from ..measure.data import MeasureErrorNo
from ..measure.worker import CandidateRunner, check_output, device_usable, param_array, short_error

NO_ERROR = int(MeasureErrorNo.NO_ERROR)
INSTANTIATION_ERROR = int(MeasureErrorNo.INSTANTIATION_ERROR)
COMPILE_DEVICE = int(MeasureErrorNo.COMPILE_DEVICE)
RUNTIME_DEVICE = int(MeasureErrorNo.RUNTIME_DEVICE)
WRONG_ANSWER = int(MeasureErrorNo.WRONG_ANSWER)
_KERNEL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,200}$")


class DeviceState:
    """What the process keeps between requests."""

    def __init__(self):
        import runtime

        self.runtime = runtime
        # The local runner's timing code (time_evaluator, cache flush).
        self.timer = CandidateRunner()
        self.libraries: dict[str, object] = {}
        # The measure request being served: (its kernel built here, the request).
        self.candidate: tuple | None = None
        self.graphs: dict[str, object] = {}

    # ------------------------------------------------------------------ device facts
    def attributes(self, kind: str, index: int) -> dict:
        dev = self.runtime.device(kind, int(index))
        attrs = dict(dev._attributes())
        attrs["exist"] = bool(dev.exist)
        if attrs["exist"] and dev.on_host:
            props = dev.properties
            attrs["target_triple"] = props.get("target_triple")
            attrs["vector_unit_bytes"] = props.get("vector_unit_bytes")
            attrs["cache_line_bytes"] = props.get("cache_line_bytes")
        return attrs

    # ------------------------------------------------------------------ measurement
    # A measure request is two requests to this process, so that the server knows which
    # stage failed (a build that crashes or hangs this process is a build error, as in the
    # local builder) and what each took: build_candidate builds the state and keeps the
    # kernel and the request here, run_candidate then loads, checks and times it.

    def build_candidate(self, job: dict, timeout: float) -> dict:
        """Build the state of measure request ``job`` (see ``RPCRunner``'s payload) and keep
        it for :meth:`run_candidate`: ``{"error_no", "error_msg", "build_s", "phases"}``, the
        build's seconds and those of its ``lower`` / ``codegen`` / ``compile`` stages."""
        self.candidate = None
        src, code, msg, secs, phases = self.build_timed(job, timeout)
        if src is not None:
            self.candidate = (src, job)
        else:
            msg = f"building on the server: {msg}"
        return {"error_no": code, "error_msg": msg, "build_s": secs, "phases": phases}

    def run_candidate(self) -> tuple:
        """``(costs, error_no, error_msg, restart)`` of the kernel :meth:`build_candidate`
        built; ``restart`` asks the server to replace this process (its GPU context is broken,
        e.g. after a CUDA illegal address)."""
        if self.candidate is None:
            raise RuntimeError("no built candidate to run (build_candidate first)")
        (src, job), self.candidate = self.candidate, None
        costs, code, msg, dev = self._run(src, job)
        restart = code == RUNTIME_DEVICE and dev is not None and not dev.on_host
        return costs, code, msg, restart and not device_usable(dev)

    def build(self, job: dict, timeout: float) -> tuple:
        """``(source dict or None, error_no, error_msg)``: the request's state
        (:func:`autosched.measure.data.state_data`) built with this server's code generator and
        compiler (the DAG decoded strictly, never code). A library's kernel
        (:mod:`autosched.rpc.rebuild`) also names its kernel (``name``) and says whether its
        weights are stored in loop order (``layout_rewrite``)."""
        return self.build_timed(job, timeout)[:3]

    def build_timed(self, job: dict, timeout: float) -> tuple:
        """:meth:`build`'s ``(source or None, error_no, error_msg)`` plus the build's seconds
        and its stages' (``lower``, ``codegen``, ``compile``)."""
        from tensorir.dag_data import dag_from_data

        from ..hardware import with_device_arch
        from ..measure.worker import build_one

        try:
            dag = dag_from_data(job["dag"])
            target = str(with_device_arch(str(job["target"])))
            name, layout_rewrite = job.get("name", "main"), job.get("layout_rewrite", True)
            if not isinstance(name, str) or not _KERNEL_NAME.match(name):
                raise ValueError(f"kernel name {str(name)[:80]!r} is not an identifier")
            if not isinstance(layout_rewrite, bool):
                raise ValueError("layout_rewrite must be true or false")
        except Exception as exc:
            msg = f"the server refuses the state: {short_error(exc)}"
            return None, INSTANTIATION_ERROR, msg, 0.0, {}
        return build_one((dag, job["steps"], target, timeout), name, layout_rewrite)

    def _run(self, src: dict, job: dict) -> tuple:
        from runtime.module import LANG_DEVICE

        dev = self.runtime.device(LANG_DEVICE[src["lang"]])
        keys = ("lang", "code", "params", "workspaces", "launches", "layouts", "binary")
        try:
            mod = self.runtime.load_module(**{k: src[k] for k in keys if k in src}, device=dev)
        except Exception as exc:
            msg = f"loading the module on the server: {short_error(exc)}"
            return (), COMPILE_DEVICE, msg, dev
        inputs, refs = job["inputs"], job["outputs"]
        layouts = {str(lay[0]): lay for lay in src.get("layouts", ())}
        args = []
        for name, _, _ in mod.params:
            if name in refs:
                ref = refs[name]
                fill = np.nan if ref.dtype.kind == "f" else 0x5A
                args.append(np.full(ref.shape, fill, dtype=ref.dtype))
            elif name in inputs:
                # A fresh copy (kernels may scribble on inputs), in the layout the kernel
                # reads (pre-transformed weights).
                args.append(param_array(inputs[name], layouts.get(name)))
            else:
                msg = f"module param {name!r} has no input or output array"
                return (), COMPILE_DEVICE, msg, dev
        try:
            if job["check"]:
                mod(*args)
                for a, (name, _, _) in zip(args, mod.params):
                    if name in refs:
                        msg = check_output(name, a, refs[name])
                        if msg:
                            return (), WRONG_ANSWER, msg, dev
            costs = self.timer.time(mod, args, job)
        except Exception as exc:
            return (), RUNTIME_DEVICE, f"running the kernel: {short_error(exc)}", dev
        if job.get("cooldown_interval"):
            time.sleep(float(job["cooldown_interval"]))
        return tuple(float(c) for c in costs), NO_ERROR, "", dev

    def vta_measure(self, job: dict) -> dict:
        """One VTA program on the simulator (:mod:`autosched.rpc.vta_job`): ``error_no``,
        ``error_msg`` and, without error, ``cycles``, ``seconds`` and ``counters``."""
        from runtime.vta import VTAError

        from .vta_job import decode_job, run_job

        try:
            decoded = decode_job(job)
        except ValueError as exc:
            return {"error_no": COMPILE_DEVICE, "error_msg": f"refuses the VTA program: {exc}"}
        try:
            out = run_job(decoded)
        except (VTAError, ValueError) as exc:  # a deadlock, a buffer overflow, a bad DMA
            return {"error_no": RUNTIME_DEVICE, "error_msg": f"the simulator: {short_error(exc)}"}
        wrong = out.pop("wrong")
        if wrong:
            return {"error_no": WRONG_ANSWER, "error_msg": wrong}
        return {"error_no": NO_ERROR, "error_msg": "", **out}

    # ------------------------------------------------------------------ sessions
    def load(
        self, handle: str, path: str, kind: str | None, index: int, trust: bool = False
    ) -> dict:
        """Load the library at ``path`` on device ``(kind, index)``; ``kind`` None: the device
        its kernels are for (an OpenCL network on the OpenCL device). Without ``trust`` every
        kernel is rebuilt here from the state the library records and compared with the
        file's, and this process runs its own builds (:mod:`autosched.rpc.rebuild`); with
        ``trust`` the library is loaded as it is, running its code."""
        from ..network.build import load_module
        from .rebuild import load_rebuilt

        dev = self.runtime.device(kind, int(index)) if kind else None
        lib = load_module(path, dev) if trust is True else load_rebuilt(path, dev, self.build)
        self.libraries[handle] = lib
        plan = getattr(lib, "plan", None)
        if plan is None:  # one kernel
            return {"kind": "kernel", "params": [list(p) for p in lib.params]}
        dev = lib.modules[0].device if lib.modules else None
        return {
            "kind": "network",
            "device": [dev.kind, dev.index] if dev is not None else [kind, int(index)],
            "inputs": {k: [list(v.shape), v.dtype] for k, v in plan.inputs.items()},
            "outputs": [[list(v.shape), v.dtype] for v in plan.outputs],
        }

    def _library(self, handle: str):
        lib = self.libraries.get(handle)
        if lib is None:
            raise KeyError(
                f"module {handle!r} is not loaded on the server (was its device process "
                "restarted?); call remote.load_module again"
            )
        return lib

    def call(self, handle: str, args: list) -> list:
        mod = self._library(handle)
        arrays = [np.array(a) for a in args]
        mod(*arrays)
        return arrays

    def time(self, handle: str, args: list, number: int, repeat: int, min_repeat_ms: float):
        mod = self._library(handle)
        arrays = [np.array(a) for a in args]
        return list(mod.time_evaluator(number, repeat, min_repeat_ms)(*arrays).results)

    def graph_create(self, graph: str, handle: str, kind: str, index: int) -> None:
        from runtime.graph_executor import GraphModule

        lib = self._library(handle)
        self.graphs[graph] = GraphModule(lib, self.runtime.device(kind, int(index)))

    def _graph(self, graph: str):
        module = self.graphs.get(graph)
        if module is None:
            raise KeyError(
                f"graph module {graph!r} is gone from the server (its device process was "
                "restarted); load the library and create the GraphModule again"
            )
        return module

    def graph_run(self, graph: str, inputs: dict) -> list:
        module = self._graph(graph)
        if inputs:
            module.set_input(**inputs)
        module.run()
        return [module.get_output(i).numpy() for i in range(module.get_num_outputs())]

    def graph_benchmark(self, graph: str, repeat: int, number: int, min_repeat_ms: float):
        module = self._graph(graph)
        return list(module.benchmark(None, repeat, number, min_repeat_ms).results)

    def free(self, handles: list) -> None:
        for h in handles:
            self.libraries.pop(h, None)
            self.graphs.pop(h, None)


# The operations a request may name, and the DeviceState method each runs.
OPS = {
    "attributes": "attributes",
    "build_candidate": "build_candidate",
    "run_candidate": "run_candidate",
    "vta_measure": "vta_measure",
    "load": "load",
    "call": "call",
    "time": "time",
    "graph_create": "graph_create",
    "graph_run": "graph_run",
    "graph_benchmark": "graph_benchmark",
    "free": "free",
}


#: The two halves of a measure request, which the server sends itself (``server._measure``);
#: a client's ``"measure"`` goes through its checks, never straight to these.
MEASURE_OPS = ("build_candidate", "run_candidate")


def device_main(conn) -> None:
    """Serve ``(op, kwargs)`` requests on ``conn`` until None or EOF (see the module doc)."""
    try:
        state = DeviceState()
    except Exception:
        conn.send(("failed", traceback.format_exc()))
        return
    conn.send(("hello",))
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return
        if request is None:
            return
        op, kwargs = request
        try:
            reply = ("ok", getattr(state, OPS[op])(**kwargs))
        except Exception as exc:  # every failure goes back as one line
            reply = ("error", f"{op}: {short_error(exc)}")
        conn.send(reply)
