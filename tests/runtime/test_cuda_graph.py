"""CUDAGraphRunner's control flow without a GPU: stand-ins for pycuda (with and without its
graph API) and for the CUDA driver library that the ctypes path (DriverGraphs) calls."""

from __future__ import annotations

import contextlib
import logging

import pytest

import runtime.cuda_graph as cg
from runtime.cuda_graph import (
    CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
    CU_STREAM_LEGACY,
    ENV,
    CUDAGraphRunner,
    DriverGraphs,
)


class _FakeCuda:
    """Just enough of pycuda.driver for CUDAGraphRunner. With ``with_graphs`` its Stream has
    pycuda's graph API; without, kernels are captured through ``driver`` (a _FakeLib)."""

    def __init__(self, with_graphs=True, driver=None):
        fake = self
        self.replayed = []
        self.direct = []
        self.driver = driver
        self.streams = 0

        class Stream:
            def __init__(self):
                fake.streams += 1
                self.handle = 0x5000 + fake.streams
                self.capturing = None

            def begin_capture(self):
                self.capturing = []

            def end_capture(self):
                ops, self.capturing = self.capturing, None
                return Graph(ops)

        class Graph:
            def __init__(self, ops):
                self.ops = ops

            def instantiate(self):
                ops = list(self.ops)
                return type("Exec", (), {"launch": lambda _self: fake.replayed.extend(ops)})()

        if with_graphs:
            self.Stream, self.Graph = Stream, Graph
        else:
            self.Stream = type("Stream", (), {"__init__": Stream.__init__})

    def function(self, name, error=None):
        def fn(*handles, grid, block, stream=None):
            if error is not None:
                raise error
            op = (name, tuple(handles))
            if stream is not None and getattr(stream, "capturing", None) is not None:
                stream.capturing.append(op)
            elif stream is not None and self.driver and stream.handle in self.driver.capturing:
                self.driver.capturing[stream.handle].append(op)
            else:
                self.direct.append(op)

        return fn


class _FakeLib:
    """The driver functions DriverGraphs calls, writing out-parameters through the
    ``ctypes.pointer`` it passes; ``fail`` maps a function name to the CUresult it returns."""

    _SHORT = {
        "cuStreamBeginCapture_v2": "begin",
        "cuStreamEndCapture": "end",
        "cuGraphInstantiateWithFlags": "instantiate",
        "cuGraphLaunch": "launch",
    }

    def __init__(self, fail=None):
        self.calls = []
        self.capturing = {}  # stream handle -> captured ops
        self.graphs = {}  # graph handle -> ops
        self.execs = {}  # exec handle -> ops
        self.replayed = []
        self.fail = {self._SHORT[k]: v for k, v in (fail or {}).items()}
        self._next = 0x100

    def _new(self) -> int:
        self._next += 1
        return self._next

    def _result(self, name, *args):
        self.calls.append((name, *args))
        return self.fail.get(name, 0)

    def cuStreamBeginCapture_v2(self, stream, mode):
        code = self._result("begin", stream, mode)
        if code == 0:
            self.capturing[stream] = []
        return code

    def cuStreamEndCapture(self, stream, out):
        ops = self.capturing.pop(stream)  # KeyError: ended a stream that was not capturing
        code = self._result("end", stream)
        if code == 0:
            handle = self._new()
            self.graphs[handle] = ops
            out.contents.value = handle
        return code

    def cuGraphInstantiateWithFlags(self, out, graph, flags):
        code = self._result("instantiate", graph, flags)
        if code == 0:
            handle = self._new()
            self.execs[handle] = list(self.graphs[graph])
            out.contents.value = handle
        return code

    def cuGraphLaunch(self, graph_exec, stream):
        code = self._result("launch", graph_exec, stream)
        if code == 0:
            self.replayed.extend(self.execs[graph_exec])
        return code

    def cuGraphExecDestroy(self, graph_exec):
        self.execs.pop(graph_exec)
        return self._result("exec_destroy", graph_exec)

    def cuGraphDestroy(self, graph):
        self.graphs.pop(graph)
        return self._result("graph_destroy", graph)

    def cuGetErrorName(self, code, out):
        out.contents.value = {700: b"CUDA_ERROR_ILLEGAL_ADDRESS"}.get(code, b"CUDA_ERROR_UNKNOWN")
        return 0


class _FakeBackend:
    def __init__(self, cuda):
        self._cuda = cuda
        self.depth = 0  # the context must be current around every driver call
        self.max_depth = 0

    @contextlib.contextmanager
    def _current(self):
        self.depth += 1
        self.max_depth = max(self.max_depth, self.depth)
        try:
            yield
        finally:
            self.depth -= 1


class _CheckedLib(_FakeLib):
    """A _FakeLib that fails the test when a driver call runs without the context current."""

    def __init__(self, backend_ref, **kw):
        super().__init__(**kw)
        self.backend_ref = backend_ref

    def _result(self, name, *args):
        assert self.backend_ref[0].depth > 0, f"{name} ran without the context current"
        return super()._result(name, *args)


def _driver_runner(launches_of, fail=None):
    ref = []
    lib = _CheckedLib(ref, fail=fail)
    cuda = _FakeCuda(with_graphs=False, driver=lib)
    backend = _FakeBackend(cuda)
    ref.append(backend)
    runner = CUDAGraphRunner(backend, launches_of(cuda), driver=lambda: DriverGraphs(lib))
    return runner, cuda, lib


def _two_kernels(cuda):
    return [(cuda.function("k0"), (1, 1, 1), (32, 1, 1), ["a", "b"]),
            (cuda.function("k1"), (2, 1, 1), (32, 1, 1), ["b", "c"])]  # fmt: skip


def _no_driver():
    raise OSError("libcuda.so.1: cannot open shared object file")


# ------------------------------------------------------------------ pycuda's own graph API
def test_pycuda_api_captures_once_and_recaptures_on_new_buffers():
    cuda = _FakeCuda()
    runner = CUDAGraphRunner(_FakeBackend(cuda), _two_kernels(cuda), driver=_no_driver)
    assert runner.enabled and runner.api == "pycuda"  # the first choice when pycuda has it
    assert runner.launch() and runner.launch()
    assert runner.captures == 1 and runner.replays == 2 and cuda.direct == []
    assert cuda.replayed == [("k0", ("a", "b")), ("k1", ("b", "c"))] * 2
    runner.set_launches([(cuda.function("k0"), (1, 1, 1), (32, 1, 1), ["x", "b"])])
    assert runner.launch() and runner.captures == 2
    assert cuda.replayed[-1] == ("k0", ("x", "b"))


def test_no_graph_api_anywhere_falls_back_with_both_reasons(monkeypatch, caplog):
    monkeypatch.setattr(cg, "_logged", set())
    with caplog.at_level(logging.INFO, logger="autosched.runtime.cuda_graph"):
        runner = CUDAGraphRunner(_FakeBackend(_FakeCuda(with_graphs=False)), [], _no_driver)
        CUDAGraphRunner(_FakeBackend(_FakeCuda(with_graphs=False)), [], _no_driver)
    assert not runner.enabled and not runner.launch() and runner.api is None
    assert "begin_capture" in runner.reason and "libcuda.so.1" in runner.reason
    assert [r.getMessage() for r in caplog.records].count(
        f"{runner.reason}; kernels are launched one by one"
    ) == 1  # once per process, not per module
    assert "off: " in repr(runner)
    monkeypatch.setenv(ENV, "0")
    runner = CUDAGraphRunner(_FakeBackend(_FakeCuda()), [])
    assert not runner.launch() and ENV in runner.reason


# ------------------------------------------------------------------ the driver API via ctypes
def test_driver_path_capture_instantiate_launch_sequence():
    runner, cuda, lib = _driver_runner(_two_kernels)
    assert runner.enabled and runner.api == "driver" and "on (driver)" in repr(runner)
    assert runner.launch() and runner.launch()
    assert runner.captures == 1 and runner.replays == 2 and cuda.direct == []
    stream = 0x5001
    graph, graph_exec = 0x101, 0x102
    assert lib.calls == [
        ("begin", stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
        ("end", stream),
        ("instantiate", graph, 0),
        ("launch", graph_exec, CU_STREAM_LEGACY),
        ("launch", graph_exec, CU_STREAM_LEGACY),
    ]
    assert lib.replayed == [("k0", ("a", "b")), ("k1", ("b", "c"))] * 2


def test_driver_path_invalidate_and_close_destroy_the_graph():
    runner, cuda, lib = _driver_runner(_two_kernels)
    assert runner.launch()
    runner.set_launches([(cuda.function("k0"), (1, 1, 1), (32, 1, 1), ["x", "b"])])
    assert lib.calls[-2:] == [("exec_destroy", 0x102), ("graph_destroy", 0x101)]
    assert lib.execs == {} and lib.graphs == {}
    assert runner.launch() and runner.captures == 2 and lib.replayed[-1] == ("k0", ("x", "b"))
    assert cuda.streams == 1  # one capture stream for the runner's life
    runner.close()
    assert lib.execs == {} and lib.graphs == {} and lib.calls[-1][0] == "graph_destroy"
    runner.invalidate()  # nothing left to free: no call
    assert lib.calls[-1][0] == "graph_destroy" and len(lib.calls) == 12


@pytest.mark.parametrize(
    "failing, code, name",
    [
        ("cuStreamBeginCapture_v2", 1, "CUDA_ERROR_UNKNOWN"),
        ("cuStreamEndCapture", 901, "CUDA_ERROR_UNKNOWN"),
        ("cuGraphInstantiateWithFlags", 700, "CUDA_ERROR_ILLEGAL_ADDRESS"),
    ],
)
def test_driver_error_code_falls_back_with_reason(failing, code, name, caplog):
    runner, cuda, lib = _driver_runner(_two_kernels, fail={failing: code})
    with caplog.at_level(logging.WARNING, logger="autosched.runtime.cuda_graph"):
        assert not runner.launch()
    assert not runner.enabled and runner.captures == 0 and runner.replays == 0
    assert failing in runner.reason and f"{name} ({code})" in runner.reason
    assert runner.reason in caplog.text
    assert lib.capturing == {}  # never left in capture mode
    assert lib.graphs == {} and lib.execs == {}  # a graph made before the failure is freed
    n = len(lib.calls)
    assert not runner.launch() and len(lib.calls) == n  # off for good: no more driver calls


def test_failing_launch_during_capture_names_the_launch_error():
    def launches(cuda):
        bad = cuda.function("k1", error=ValueError("bad handle for k1"))
        return [(cuda.function("k0"), (1, 1, 1), (32, 1, 1), ["a"]),
                (bad, (1, 1, 1), (32, 1, 1), ["b"])]  # fmt: skip

    runner, cuda, lib = _driver_runner(launches)
    assert not runner.launch()
    assert "ValueError: bad handle for k1" in runner.reason
    assert [c[0] for c in lib.calls] == ["begin", "end", "graph_destroy"]
    assert lib.capturing == {} and lib.graphs == {}


def test_failing_graph_launch_falls_back_and_frees():
    runner, cuda, lib = _driver_runner(_two_kernels, fail={"cuGraphLaunch": 700})
    assert not runner.launch()
    assert "cuGraphLaunch returned CUDA_ERROR_ILLEGAL_ADDRESS (700)" in runner.reason
    assert lib.execs == {} and lib.graphs == {} and runner.captures == 1 and runner.replays == 0


def test_driver_without_graph_symbols_gives_a_reason():
    class OldDriver:  # a driver library from before CUDA graphs
        def cuGetErrorName(self, code, out):
            return 0

    runner = CUDAGraphRunner(
        _FakeBackend(_FakeCuda(with_graphs=False)), [], driver=lambda: DriverGraphs(OldDriver())
    )
    assert not runner.enabled and "cuStreamBeginCapture_v2" in runner.reason


# ------------------------------------------------------------------ programmatic edges (sm_90)
class _EdgeLib(_CheckedLib):
    """A driver with CUDA 12.3's edge data: a captured graph is a chain of kernel nodes (one
    per op) whose edges carry (from_port, to_port, type); ``memcpy_ops`` names ops captured as
    copy nodes instead of kernels."""

    def __init__(self, backend_ref, memcpy_ops=(), edge_fail=None, **kw):
        super().__init__(backend_ref, **kw)
        self.memcpy_ops = set(memcpy_ops)
        self.edge_fail = dict(edge_fail or {})
        self.edges = {}  # graph -> {(from node, to node): (from_port, to_port, type)}
        self.node_kind = {}  # node -> CUgraphNodeType
        self.exec_edges = {}  # exec -> the edges its graph had when instantiated

    def cuStreamEndCapture(self, stream, out):
        ops = list(self.capturing.get(stream, []))
        code = super().cuStreamEndCapture(stream, out)
        if code == 0:
            nodes = [self._new() for _ in ops]
            for node, op in zip(nodes, ops):
                self.node_kind[node] = 1 if op[0] in self.memcpy_ops else 0
            self.edges[out.contents.value] = {(a, b): (0, 0, 0) for a, b in zip(nodes, nodes[1:])}
        return code

    def cuGraphInstantiateWithFlags(self, out, graph, flags):
        code = super().cuGraphInstantiateWithFlags(out, graph, flags)
        if code == 0:
            self.exec_edges[out.contents.value] = dict(self.edges[graph])
        return code

    def cuGraphNodeGetType(self, node, out):
        out.contents.value = self.node_kind[node]
        return self._result("node_type", node)

    def cuGraphGetEdges_v2(self, graph, sources, targets, data, count):
        edges = list(self.edges[graph].items())
        if sources is not None:
            assert len(sources) >= len(edges)
            for i, ((a, b), (fp, tp, kind)) in enumerate(edges):
                sources[i], targets[i] = a, b
                data[i].from_port, data[i].to_port, data[i].type = fp, tp, kind
        count.contents.value = len(edges)
        return self._result("get_edges", graph)

    def cuGraphRemoveDependencies_v2(self, graph, sources, targets, data, n):
        for i in range(n):
            key = (sources[i], targets[i])
            assert self.edges[graph][key] == (data[i].from_port, data[i].to_port, data[i].type)
            del self.edges[graph][key]
        return self._result("remove_edges", graph, n)

    def cuGraphAddDependencies_v2(self, graph, sources, targets, data, n):
        code = self.edge_fail.get("add", 0)
        if code == 0:
            for i in range(n):
                key = (sources[i], targets[i])
                self.edges[graph][key] = (data[i].from_port, data[i].to_port, data[i].type)
        self._result("add_edges", graph, n)
        return code


def _edge_runner(launches_of, programmatic=True, **lib_kw):
    ref = []
    lib = _EdgeLib(ref, **lib_kw)
    cuda = _FakeCuda(with_graphs=False, driver=lib)
    backend = _FakeBackend(cuda)
    ref.append(backend)
    runner = CUDAGraphRunner(
        backend, launches_of(cuda), driver=lambda: DriverGraphs(lib), programmatic=programmatic
    )
    return runner, cuda, lib


def _three_kernels(cuda):
    return [(cuda.function(f"k{i}"), (1, 1, 1), (32, 1, 1), [f"x{i}", f"x{i + 1}"])
            for i in range(3)]  # fmt: skip


PROGRAMMATIC = (
    cg.CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC,
    0,
    cg.CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC,
)


def test_programmatic_runner_turns_every_kernel_edge_programmatic_before_instantiating():
    runner, cuda, lib = _edge_runner(_three_kernels)
    assert runner.launch() and runner.launch()
    assert runner.programmatic_edges == 2 and runner.programmatic_reason is None
    (edges,) = lib.exec_edges.values()
    assert sorted(edges.values()) == [PROGRAMMATIC, PROGRAMMATIC]
    assert [c[0] for c in lib.calls if c[0] in ("add_edges", "instantiate")] == [
        "add_edges",
        "instantiate",
    ]  # edited before instantiation, once per capture
    assert lib.replayed == [(f"k{i}", (f"x{i}", f"x{i + 1}")) for i in range(3)] * 2
    assert "2 programmatic edges" in repr(runner)


def test_plain_runner_and_the_environment_switch_keep_full_dependencies(monkeypatch):
    runner, cuda, lib = _edge_runner(_three_kernels, programmatic=False)
    assert runner.launch() and runner.programmatic_edges == 0
    assert set(next(iter(lib.exec_edges.values())).values()) == {(0, 0, 0)}
    assert not any(c[0] == "get_edges" for c in lib.calls)
    monkeypatch.setenv(cg.PROGRAMMATIC_ENV, "0")
    runner, cuda, lib = _edge_runner(_three_kernels)
    assert runner.launch() and runner.programmatic_edges == 0
    assert cg.PROGRAMMATIC_ENV in runner.programmatic_reason
    assert set(next(iter(lib.exec_edges.values())).values()) == {(0, 0, 0)}


def test_only_kernel_to_kernel_edges_become_programmatic():
    runner, cuda, lib = _edge_runner(_three_kernels, memcpy_ops={"k1"})
    assert runner.launch() and runner.programmatic_edges == 0  # k0->copy, copy->k2
    assert set(next(iter(lib.exec_edges.values())).values()) == {(0, 0, 0)}


def test_a_driver_refusing_the_edges_recaptures_with_plain_ones():
    runner, cuda, lib = _edge_runner(_three_kernels, edge_fail={"add": 1})
    assert runner.launch() and runner.enabled and runner.captures == 1
    assert "cuGraphAddDependencies_v2" in runner.programmatic_reason
    assert runner.programmatic_edges == 0
    (edges,) = lib.exec_edges.values()
    assert set(edges.values()) == {(0, 0, 0)} and len(edges) == 2
    assert len(lib.graphs) == 1  # the half-edited graph was freed
    assert runner.launch() and [c[0] for c in lib.calls].count("get_edges") == 2  # not again
    assert lib.replayed == [(f"k{i}", (f"x{i}", f"x{i + 1}")) for i in range(3)] * 2


def test_a_driver_without_edge_data_keeps_plain_edges():
    lib = _FakeLib()  # no cuGraphGetEdges_v2
    cuda = _FakeCuda(with_graphs=False, driver=lib)
    runner = CUDAGraphRunner(
        _FakeBackend(cuda), _three_kernels(cuda), driver=lambda: DriverGraphs(lib),
        programmatic=True,
    )  # fmt: skip
    assert runner.launch() and runner.enabled and runner.programmatic_edges == 0
    assert "no cuGraphGetEdges_v2" in runner.programmatic_reason
    assert lib.replayed == [(f"k{i}", (f"x{i}", f"x{i + 1}")) for i in range(3)]


def test_pycuda_graph_api_says_why_it_has_no_programmatic_edges():
    cuda = _FakeCuda()
    runner = CUDAGraphRunner(_FakeBackend(cuda), _two_kernels(cuda), programmatic=True)
    assert runner.launch() and runner.programmatic_edges == 0
    assert "pycuda graph API" in runner.programmatic_reason


@pytest.mark.parametrize(
    "arch, codes, expected",
    [
        ("sm_90", ["a; griddepcontrol.wait; b", "griddepcontrol.wait;"], True),
        ("sm_100", ["griddepcontrol.wait;"], True),
        ("sm_90", ["griddepcontrol.wait;", "a kernel of an older build"], False),
        ("sm_80", ["griddepcontrol.wait;"], False),
        ("sm_90", [], False),
        ("", ["griddepcontrol.wait;"], False),
    ],
)
def test_programmatic_launch_needs_sm90_and_every_kernel_waiting(arch, codes, expected):
    assert cg.programmatic_launch_possible(arch, codes) is expected
