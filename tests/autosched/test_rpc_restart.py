"""A tracker restart during tuning: a clear error while it is gone, and the runner and the
servers find it again once it is back."""

import pytest

pytest.importorskip("distributed")

from test_rpc import (  # noqa: E402
    Processes,
    _built,
    _connect,
    _free_port,
    _server_args,
    _wait_for_servers,
)

import autosched as ansor  # noqa: E402
from autosched import rpc, testing  # noqa: E402
from autosched.measure import MeasureErrorNo  # noqa: E402


@pytest.mark.slow
def test_tracker_restart_is_a_clear_error_then_survived(tmp_path):
    task = ansor.SearchTask(compute_dag=ansor.ComputeDAG(testing.matmul(16, 16, 16)), target="llvm")
    procs = Processes(tmp_path)
    port = _free_port()
    try:
        tracker_proc = procs.start("tracker", "autosched.exec.rpc_tracker", "--port", str(port))
        server = procs.start("server", *_server_args(port, "back"))
        with _connect(port, tracker_proc) as tracker:
            _wait_for_servers(tracker, {"back": 1}, [server])
        inputs, built = _built(task, 2)
        with rpc.RPCRunner("back", "127.0.0.1", port, timeout=3) as runner:
            assert all(r.error_no == MeasureErrorNo.NO_ERROR for r in runner.run(inputs, built))
            procs.kill(tracker_proc)
            with pytest.raises(ConnectionError, match=rf"RPC tracker at 127.0.0.1:{port}"):
                runner.run(inputs, built)
            tracker_proc = procs.start(
                "tracker2", "autosched.exec.rpc_tracker", "--port", str(port)
            )
            with _connect(port, tracker_proc) as tracker:
                _wait_for_servers(tracker, {"back": 1}, [server])  # the server registered again
            results = runner.run(inputs, built)
            assert all(r.error_no == MeasureErrorNo.NO_ERROR for r in results), results
    finally:
        procs.close()
