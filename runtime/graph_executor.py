"""Run a compiled network: a list of kernel calls over planned buffers.

The runtime knows nothing of graphs or schedules. A compiled network arrives as plain values
(:class:`GraphPlan`): the kernels' artifacts (what ``codegen`` emits, ``Source.as_dict()``), the
buffers (storage ids with dtype and element count; several tensors may share one storage when
their lifetimes do not overlap), the constants, the named inputs and the outputs, and the
ordered calls ``(kernel index, storage ids of its params)``. :class:`GraphModule` allocates the
storages once on the device, binds every call to its buffers up front and then ``run()`` only
launches, so the per-kernel overhead is one Python call, with no host synchronisation between
kernels.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .device import Device, device_kind_of_lang
from .device import device as make_device
from .errors import IndexOutOfRangeError
from .graph_functions import GraphFunctions
from .module import Module, cpu_threads, load_module
from .ndarray import NDArray, empty, np_dtype
from .plan_check import plan_problems
from .plan_file import read_plan, write_plan
from .timer import TimingResult, measure


@dataclass(frozen=True)
class TensorSpec:
    """A named graph tensor living in one storage: ``(storage id, shape, dtype)``."""

    storage: int
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class GraphPlan:
    """Everything needed to run a compiled network, as plain values.

    Attributes
    ----------
    kernels : tuple of dict
        Artifacts accepted by :func:`runtime.load_module` (``lang, code, params, workspaces,
        launches``), one per distinct kernel.
    storages : tuple of (dtype, size)
        Buffers to allocate, by storage id.
    inputs : dict of str to TensorSpec
        Network inputs by name.
    outputs : tuple of TensorSpec
        Network outputs in order.
    constants : dict of int to ndarray
        Storage id -> value copied once at load time (the network's weights).
    calls : tuple of (int, tuple of int)
        In execution order: kernel index and the storage ids of its params (inputs then output).
    names : tuple of str
        A name per call (the fused function's name), for profiling and errors.
    graph : dict
        Which graph the plan was compiled from (``fingerprint``, and ``name`` when known),
        so a caller can refuse to run it as another; empty in files saved before it existed.
    states : tuple of (dict or None)
        Per kernel, the state it was built from as plain data (``dag``, ``steps``, ``target``,
        ``name``, ``layout_rewrite``; :func:`autosched.measure.data.state_data`), so that an
        RPC server can rebuild the kernel with its own compiler instead of running the code
        it received; None where it is not known, and empty in files saved before it existed.
        Opaque here: nothing in the runtime reads it.
    """

    kernels: tuple
    storages: tuple
    inputs: dict
    outputs: tuple
    constants: dict
    calls: tuple
    names: tuple = ()
    graph: dict = field(default_factory=dict)
    states: tuple = ()

    # -------------------------------------------------------------- checks
    def problems(self) -> list[str]:
        """Inconsistencies that would let a kernel read or write past a buffer (see
        :mod:`runtime.plan_check`); empty for a plan that is safe to run."""
        return plan_problems(self)

    def validate(self, source: str = "plan") -> None:
        """Raise ``ValueError`` naming ``source`` and the first problem, if there is one."""
        found = self.problems()
        if found:
            more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
            raise ValueError(f"{source}: invalid plan: {found[0]}{more}; compile the network again")

    # -------------------------------------------------------------- persistence
    def save(self, path) -> None:
        """Write the plan to ``path`` (JSON) and ``path.params.npz`` (constants, and the
        object code of kernels that carry a ``binary``), with a sha256 checksum over both.

        A saved plan is code, like a shared library: load only files you trust.
        """
        write_plan(path, self.meta(), self.constants)

    def meta(self) -> dict:
        """The plan without its constants, as JSON-ready values (what :meth:`save` writes)."""
        meta = {
            "kernels": list(self.kernels),
            "storages": [list(s) for s in self.storages],
            "inputs": {k: [v.storage, list(v.shape), v.dtype] for k, v in self.inputs.items()},
            "outputs": [[v.storage, list(v.shape), v.dtype] for v in self.outputs],
            "calls": [[k, list(a)] for k, a in self.calls],
            "names": list(self.names),
            "graph": dict(self.graph),
        }
        if self.states:
            meta["states"] = list(self.states)
        return meta

    @classmethod
    def load(cls, path) -> GraphPlan:
        """Read a plan written by :meth:`save`, refusing (``ValueError`` naming the file) one
        whose checksum does not match, whose object code was compiled from other code than it
        holds, or whose parts do not fit together (:meth:`problems`)."""
        meta, constants = read_plan(path)
        return cls.from_meta(meta, constants, str(path))

    @classmethod
    def from_meta(cls, meta: dict, constants: dict, source: str = "plan") -> GraphPlan:
        """The plan of :meth:`meta` and its constants, checked (:meth:`validate`); errors
        name ``source``."""
        path = source
        try:
            plan = cls(
                kernels=tuple(meta["kernels"]),
                storages=tuple(tuple(s) for s in meta["storages"]),
                inputs={k: TensorSpec(s, tuple(sh), d) for k, (s, sh, d) in meta["inputs"].items()},
                outputs=tuple(TensorSpec(s, tuple(sh), d) for s, sh, d in meta["outputs"]),
                constants=constants,
                calls=tuple((k, tuple(a)) for k, a in meta["calls"]),
                names=tuple(str(n) for n in meta.get("names", ())),
                graph={str(k): str(v) for k, v in dict(meta.get("graph", {})).items()},
                states=tuple(meta.get("states") or ()),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ValueError(f"{path}: invalid plan: {type(e).__name__}: {e}") from e
        plan.validate(str(path))
        return plan


@dataclass(frozen=True)
class BoundLibrary:
    """A compiled network bound to a device: what ``lib["default"](dev)`` returns (TVM's graph
    executor factory call), so that ``GraphModule(lib["default"](dev))`` runs it on ``dev``."""

    lib: object
    device: object


class GraphModule:
    """Run a compiled network on a device.

    Parameters
    ----------
    lib : GraphPlan, an object with a ``plan`` attribute (what ``autosched.build`` returns), or
        ``lib["default"](dev)`` (a :class:`BoundLibrary`, as the TVM tutorials write it)
    dev : Device or str, optional
        Where to run; defaults to the bound device, else the device kind of the kernels.
    num_threads : int, optional
        CPU only: threads of the kernels' parallel loops in :meth:`run` and :meth:`benchmark`
        (onnxruntime's ``intra_op_num_threads``); default: the process-wide count
        (AUTOSCHED_NUM_THREADS, else the cores this process may use).

    Examples
    --------
    >>> module = GraphModule(lib, device("cpu"))
    >>> module.set_input("data", x)
    >>> module.run()
    >>> y = module.get_output(0).numpy()
    """

    def __new__(cls, lib=None, dev=None, use_cuda_graph: bool = True, num_threads=None):
        # A network loaded on a remote server (``rlib["default"](dev)`` of an RPC session)
        # makes its own module, which runs there.
        factory = getattr(lib, "graph_module", None)
        if factory is not None:
            return factory(dev)
        return super().__new__(cls)

    def __init__(self, lib, dev=None, use_cuda_graph: bool = True, num_threads=None):
        if isinstance(lib, BoundLibrary):
            lib, dev = lib.lib, (lib.device if dev is None else dev)
        cross = getattr(lib, "cross_triple", None)
        if cross:
            raise RuntimeError(
                f"this network is compiled for {cross}, not for this machine; export_library it "
                "(a .so path) and run it there, e.g. over RPC"
            )
        plan = lib if isinstance(lib, GraphPlan) else lib.plan
        plan.validate()  # kernels write through raw pointers: never bind a plan that lies
        self.plan = plan
        modules = getattr(lib, "modules", None)
        if dev is None:
            dev = modules[0].device if modules else Device(_kind_of(plan))
        self.device = make_device(dev) if not isinstance(dev, Device) else dev
        self._threads = cpu_threads(self.device, num_threads)
        if modules is None or any(m.device != self.device for m in modules):
            modules = [load_module(**k, device=self.device) for k in plan.kernels]
        # The plan was checked against its kernels' params; calls bind the modules' params.
        declared = [
            tuple((str(n), str(d), int(s)) for n, d, s in k["params"]) for k in plan.kernels
        ]
        if [m.params for m in modules] != declared:
            raise ValueError(
                "GraphModule: the loaded modules' parameters differ from the plan's kernels; "
                "pass the NetworkLib that build or load_module returned, unchanged"
            )
        self.modules: list[Module] = list(modules)
        # Every storage is allocated here, once; run() never allocates.
        self._buffers: list[NDArray] = [
            empty((max(1, size),), dtype, self.device) for dtype, size in plan.storages
        ]
        for sid, value in plan.constants.items():
            self._buffers[sid].copyfrom(np.ascontiguousarray(value).reshape(-1))
        self._backend = self.device.backend
        self._workspaces = _shared_workspaces(self.modules, self.device)
        self._cuda_graph = None
        if use_cuda_graph and self.device.kind == "cuda" and plan.calls:
            from .cuda_graph import CUDAGraphRunner

            # Whether the kernels may launch programmatically depends on the modules only,
            # decided once here, not at every rebind.
            self._cuda_graph = CUDAGraphRunner(
                self._backend, [], programmatic=self._programmatic_launch()
            )
        self._bind()

    def _bind(self) -> None:
        """Bind every call to the current buffers (again after a zero-copy input)."""
        self._run_fns = []
        for kernel, args in self.plan.calls:
            module = self.modules[kernel]
            handles = dict(self._workspaces[kernel] or module._workspace_handles)
            for (name, _, _), sid in zip(module.params, args):
                handles[name] = self._buffers[sid].handle
            self._run_fns.append(module._bound_run(handles))
        if self._cuda_graph is not None:
            try:
                launches = self._cuda_launches()
            except (AttributeError, KeyError) as err:  # a backend without pycuda functions
                self._cuda_graph.reason = f"no pycuda kernel functions to capture: {err!r}"
                launches = []
            self._cuda_graph.set_launches(launches)

    def _programmatic_launch(self) -> bool:
        """Whether every kernel may launch while the one before it finishes (sm_90 on)."""
        from .cuda_graph import programmatic_launch_possible

        arch = getattr(self._backend, "arch", "")
        return programmatic_launch_possible(
            arch, (self.modules[k].code for k, _ in self.plan.calls)
        )

    def _cuda_launches(self) -> list:
        from .cuda_graph import cuda_launches

        return cuda_launches(self.modules, self.plan.calls, [b.handle for b in self._buffers])

    def _launch_all(self) -> None:
        """Enqueue the whole network: one CUDA graph replay where possible, else each kernel."""
        if self._cuda_graph is not None and self._cuda_graph.launch():
            return
        for k, fn in enumerate(self._run_fns):
            try:
                fn()
            except IndexOutOfRangeError as e:
                raise self._in_network(e, k) from None

    def _in_network(self, err: IndexOutOfRangeError, k: int) -> IndexOutOfRangeError:
        """``err`` of call ``k`` with what its tensor is in the network (a kernel only knows
        its own parameter names, ``placeholder``...)."""
        kernel, args = self.plan.calls[k]
        names = [p[0] for p in self.modules[kernel].params]
        if err.tensor not in names:
            return err
        sid = args[names.index(err.tensor)]
        inputs = {spec.storage: name for name, spec in self.plan.inputs.items()}
        if sid in inputs:
            what = f"the network input {inputs[sid]!r}"
        elif sid in self.plan.constants:
            shape = tuple(np.shape(self.plan.constants[sid]))
            what = f"a network weight of shape {shape}"
        else:
            what = "an intermediate tensor"
        call = self.plan.names[k] if k < len(self.plan.names) else f"call {k}"
        return IndexOutOfRangeError(
            f"{err} [network call {k} ({call}): {err.tensor!r} is {what}]",
            err.tensor,
            err.axis,
            err.value,
        )

    def __repr__(self) -> str:
        graph = ""
        if self._cuda_graph is not None:  # why graphs are off is the first thing to know
            runner = self._cuda_graph
            state = f"on ({runner.api})" if runner.enabled else f"off: {runner.reason}"
            graph = f", cuda graph {state}"
        return f"GraphModule({self.device}, {len(self.plan.calls)} calls{graph})"

    @property
    def cuda_graph(self):
        """The :class:`runtime.cuda_graph.CUDAGraphRunner` (None off CUDA or when disabled);
        ``cuda_graph.reason`` says why graphs are not used when they are not."""
        return self._cuda_graph

    # -------------------------------------------------------------- graph I/O
    def set_input(self, key=None, value=None, **params) -> None:
        """Copy an input (numpy array or NDArray) into the network, by name. An integer input
        takes any integer array its dtype holds exactly (int32 ids for an int64 input)."""
        items = dict(params)
        if key is not None:
            items[key] = value
        for name, val in items.items():
            spec = self.plan.inputs.get(name)
            if spec is None:
                raise KeyError(f"no input named {name!r}; the inputs are {list(self.plan.inputs)}")
            arr = val.numpy() if isinstance(val, NDArray) else np.asarray(val)
            if tuple(arr.shape) != spec.shape:
                raise ValueError(f"input {name!r}: expected shape {spec.shape}, got {arr.shape}")
            want = np_dtype(spec.dtype)
            if arr.dtype != want:
                # int32 token ids into an int64 input: widened, as nothing is lost
                if arr.dtype.kind in "iu" and want.kind in "iu" and np.can_cast(arr.dtype, want):
                    arr = arr.astype(want)
                else:
                    raise TypeError(f"input {name!r}: expected dtype {spec.dtype}, got {arr.dtype}")
            self._buffers[spec.storage].copyfrom(np.ascontiguousarray(arr).reshape(-1))

    def set_input_zero_copy(self, name: str, value: NDArray) -> None:
        """Make input ``name`` read ``value`` (an NDArray on this device) in place, without a
        copy: later runs use its memory until another zero-copy call. Rebinds the kernels
        (and re-captures the CUDA graph on the next run)."""
        spec = self.plan.inputs.get(name)
        if spec is None:
            raise KeyError(f"no input named {name!r}; the inputs are {list(self.plan.inputs)}")
        if not isinstance(value, NDArray) or value.device != self.device:
            raise TypeError(
                f"input {name!r}: set_input_zero_copy takes an NDArray on {self.device}"
            )
        if tuple(value.shape) != spec.shape or np_dtype(value.dtype) != np_dtype(spec.dtype):
            raise ValueError(
                f"input {name!r}: expected {spec.dtype}{list(spec.shape)}, "
                f"got {value.dtype}{list(value.shape)}"
            )
        if self._buffers[spec.storage].handle is value.handle:
            return
        self._buffers[spec.storage] = value
        self._bind()

    def get_input(self, name: str) -> NDArray:
        spec = self.plan.inputs[name]
        return _view(self._buffers[spec.storage], spec, self.device)

    def run(self, **inputs) -> None:
        """Run every kernel once (after setting ``inputs``, if given) and wait for the end."""
        if inputs:
            self.set_input(**inputs)
        with self._threads():
            self._launch_all()
        self._backend.synchronize()

    def get_num_outputs(self) -> int:
        return len(self.plan.outputs)

    def get_output(self, index: int) -> NDArray:
        """Output ``index``: an NDArray on the module's device that shares the output's
        buffer (as in TVM, the next :meth:`run` overwrites it); ``.numpy()`` copies it back."""
        if not 0 <= index < len(self.plan.outputs):
            n = len(self.plan.outputs)
            raise IndexError(f"output {index} out of range: the network has {n}")
        spec = self.plan.outputs[index]
        return _view(self._buffers[spec.storage], spec, self.device)

    # -------------------------------------------------------------- timing
    @property
    def module(self) -> GraphFunctions:
        """This graph as TVM's runtime module of named functions, for
        ``module.module.time_evaluator("run", dev, repeat=3, min_repeat_ms=500)``."""
        return GraphFunctions(self)

    def benchmark(
        self, dev=None, repeat: int = 5, number: int = 5, min_repeat_ms: float = 0
    ) -> TimingResult:
        """Time :meth:`run` like TVM's ``module.benchmark``: ``repeat`` results, each the mean
        of ``number`` runs, ``number`` raised until a repeat lasts ``min_repeat_ms``.
        ``print()`` of the result is TVM's "Execution time summary" table."""
        if dev is not None and make_device(dev) != self.device:
            raise ValueError(f"benchmark on {dev}, but this module runs on {self.device}")
        with self._threads():
            return measure(
                self._backend.time_launches,
                self._launch_all,
                number=number,
                repeat=repeat,
                min_repeat_ms=min_repeat_ms,
            )


_WORKSPACE_ALIGN = 64  # bytes: a cache line, and enough for any vector load


def _shared_workspaces(modules, dev) -> list:
    """On the CPU, every kernel's scratch buffers (workspaces) as views of one arena.

    Kernels run one after another, so their workspaces can share memory, as they do in TVM's
    workspace pool. The point is the cache, not the memory: a kernel writes scratch that the
    previous kernel just touched, instead of scratch that has not been used since the last
    run of the network and has long left the cache. Returns, per module, the name -> handle
    map to use, or None to keep the module's own buffers (other devices).
    """
    if not dev.on_host:
        return [None] * len(modules)
    layouts, arena_bytes = [], 0
    for module in modules:
        offsets, end = {}, 0
        for name, dtype, size in module.workspaces:
            offsets[name] = (end, max(1, size * np_dtype(dtype).itemsize))
            end += -(-offsets[name][1] // _WORKSPACE_ALIGN) * _WORKSPACE_ALIGN
        layouts.append(offsets)
        arena_bytes = max(arena_bytes, end)
    if not arena_bytes:
        return [None] * len(modules)
    arena = dev.backend.alloc(arena_bytes)  # the CPU backend aligns it to a cache line
    return [
        {name: arena[off : off + n] for name, (off, n) in offsets.items()} or None
        for offsets in layouts
    ]


def _view(buf: NDArray, spec: TensorSpec, dev) -> NDArray:
    """``spec``'s tensor as an NDArray sharing the storage's memory (its leading elements):
    no allocation and no copy; ``.numpy()`` copies just that tensor to the host."""
    return NDArray(spec.shape, spec.dtype, dev, buf.handle)


def _kind_of(plan: GraphPlan) -> str:
    langs = {k["lang"] for k in plan.kernels}
    return device_kind_of_lang(langs.pop()).name if langs else "cpu"
