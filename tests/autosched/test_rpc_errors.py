"""Remote-device mistakes that need no cluster: a missing extra, a tracker that is not there,
bad command options; TVM's queue table layout; replies that are not plain data."""

import socket
import sys

import pytest

from autosched import rpc
from autosched.rpc.cluster import split_host_port
from autosched.rpc.queue import text_summary


def test_missing_distributed_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if not installed
    with pytest.raises(ImportError, match=r'pip install "autosched\[distributed\]"'):
        rpc.connect_tracker("127.0.0.1", 9190)


def test_no_tracker_is_a_clear_connection_error():
    pytest.importorskip("distributed")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once the socket closes
    with pytest.raises(ConnectionError, match=rf"RPC tracker at 127.0.0.1:{port}.*rpc_tracker"):
        rpc.connect_tracker("127.0.0.1", port, timeout=1)


def test_a_tracker_gone_since_the_last_call_is_a_connection_error_naming_it():
    """dask's client answers scheduler_info from its cache, without the workers, once its
    connection to the tracker closed; servers() says the tracker is gone (a race the restart
    test hit between the runner's check of the connection and its next call)."""

    class ClosedClient:
        def scheduler_info(self, n_workers=None):
            return {}

    session = object.__new__(rpc.client.TrackerSession)
    session.client, session.address = ClosedClient(), "tcp://127.0.0.1:9190"
    with pytest.raises(ConnectionError, match=r"RPC tracker at tcp://127.0.0.1:9190"):
        session.servers()


def test_option_mistakes_are_one_line_errors():
    with pytest.raises(ValueError, match="--tracker must look like HOST:PORT"):
        split_host_port("localhost")
    with pytest.raises(ValueError, match="TLS needs --tls-ca-file and --tls-cert"):
        rpc.make_security(tls_ca_file="ca.pem")
    with pytest.raises(ValueError, match="n_parallel >= 1"):
        rpc.RPCRunner("k", n_parallel=0)


def test_queue_table_has_tvm_layout():
    servers = [
        {"addr": "127.0.0.1:40001", "key": "server:rasp4"},
        {"addr": "127.0.0.1:40002", "key": "server:rasp4"},
        {"addr": "127.0.0.1:40003", "key": "server:v100"},
    ]
    queue = {"rasp4": {"free": 1, "pending": 3}, "v100": {"free": 0, "pending": 0}}
    assert text_summary(servers, queue) == (
        "Server List\n"
        "------------------------------\n"
        "server-address           key\n"
        "------------------------------\n"
        "      127.0.0.1:40001    server:rasp4\n"
        "      127.0.0.1:40002    server:rasp4\n"
        "      127.0.0.1:40003    server:v100\n"
        "------------------------------\n"
        "\n"
        "Queue Status\n"
        "----------------------------\n"
        "key     total  free  pending\n"
        "----------------------------\n"
        "rasp4   2      1     3      \n"
        "v100    1      0     0      \n"
        "----------------------------\n"
    )


def test_replies_decode_strictly():
    import io

    import numpy as np

    from autosched.rpc.wire import _LEN, MAGIC, BadReply, decode_reply, encode_reply

    value = {"ok": {"costs": [1e-3, 2e-3], "out": [np.arange(6, dtype="float32").reshape(2, 3)]}}
    back = decode_reply(encode_reply(value), "srv")
    np.testing.assert_array_equal(back["ok"]["out"][0], value["ok"]["out"][0])
    assert back["ok"]["costs"] == [1e-3, 2e-3]
    good = encode_reply({"ok": np.ones(2)})
    pickled = io.BytesIO()
    np.save(pickled, np.array([None, 1], dtype=object), allow_pickle=True)
    head, _, _ = good.partition(b"\x93NUMPY")  # the document, then a pickled array instead
    deep = b'{"value": ' + b"[" * 100_000 + b"]" * 100_000 + b', "arrays": []}'
    cases = {
        "not bytes": [1, 2],
        "no header": b"pickle",
        "cut short": good[:-3],
        "pickled array": head + pickled.getvalue(),
        "deep": MAGIC + _LEN.pack(len(deep)) + deep,
    }
    for what, data in cases.items():
        with pytest.raises(BadReply, match="malformed reply from srv") as info:
            decode_reply(data, "srv")
        assert "\n" not in str(info.value), what
    with pytest.raises(TypeError):
        encode_reply({"x": object()})


def test_gpu_cache_flush_travels_to_the_server_as_one_cold_run_per_repeat():
    """``enable_gpu_cache_flush`` is sent as ``flush_device``; like the CPU flush it makes each
    repeat a single run (number 1, no minimum duration). No tracker is needed to build the
    request."""
    from autosched import workloads
    from autosched.measure import MeasureInput
    from autosched.task import SearchTask
    from tensorir.dag import ComputeDAG

    task = SearchTask(ComputeDAG(workloads.matmul(8, 8, 8)), target="cuda")
    inp = MeasureInput(task, task.compute_dag.get_init_state())
    plain = rpc.RPCRunner("gpu", number=5, min_repeat_ms=50)._payload(inp)
    cold = rpc.RPCRunner("gpu", number=5, min_repeat_ms=50, enable_gpu_cache_flush=True)
    payload = cold._payload(inp)
    assert (plain["number"], plain["min_repeat_ms"], plain["flush_device"]) == (5, 50.0, False)
    assert (payload["number"], payload["min_repeat_ms"], payload["flush_device"]) == (1, 0.0, True)
    assert payload["flush"] is False  # the host's cache is not the one that matters here
