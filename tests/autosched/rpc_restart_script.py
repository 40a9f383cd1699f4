"""A tracker restart during tuning, as a user's script sees it (run by test_rpc_restart.py in
a process of its own, so that its whole output is what dask's loggers print there).

Exits 0 when: the runner measures, fails the round with an error naming the tracker while
it is gone (a ConnectionError, or every candidate's error), and measures again once a new
tracker is up and the server has registered again.
"""

import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_rpc import Processes, _built, _connect, _free_port, _server_args, _wait_for_servers

import autosched as ansor
from autosched import rpc, workloads
from autosched.measure import MeasureErrorNo


def main() -> int:
    task = ansor.SearchTask(compute_dag=ansor.ComputeDAG(workloads.matmul(16, 16, 16)),
                            target="llvm")  # fmt: skip
    procs = Processes(Path(tempfile.mkdtemp(prefix="rpc-restart-")))
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
            # Whether the runner's client has noticed the kill yet is a race: either the
            # round cannot connect (ConnectionError), or it connected on the dying client
            # and every candidate fails with the same message. Both name the tracker.
            named = rf"RPC tracker at 127.0.0.1:{port}"
            try:
                lost = runner.run(inputs, built)
            except ConnectionError as exc:
                assert re.search(named, str(exc)), exc
            else:
                assert all(r.error_no == MeasureErrorNo.RUNTIME_DEVICE for r in lost), lost
                assert all(re.search(named, r.error_msg) for r in lost), lost
            tracker_proc = procs.start(
                "tracker2", "autosched.exec.rpc_tracker", "--port", str(port)
            )
            with _connect(port, tracker_proc) as tracker:
                _wait_for_servers(tracker, {"back": 1}, [server])  # the server registered again
            results = runner.run(inputs, built)
            assert all(r.error_no == MeasureErrorNo.NO_ERROR for r in results), results
    finally:
        procs.close()
    print("rpc_restart_script: ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
