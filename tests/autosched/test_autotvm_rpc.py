"""AutoTVM tuning through autotvm.RPCRunner: a tracker and a server on 127.0.0.1 (slow)."""

import pytest

pytest.importorskip("distributed")
from test_rpc import Processes, _connect, _free_port, _server_args, _wait_for_servers  # noqa: E402

from autosched import autotvm  # noqa: E402
from autosched.measure import MeasureErrorNo  # noqa: E402

ARGS = (
    ("TENSOR", (1, 8, 10, 10), "float32"),
    ("TENSOR", (16, 8, 3, 3), "float32"),
    (1, 1),
    (1, 1, 1, 1),
    (1, 1),
    "float32",
)


@pytest.mark.slow
def test_tune_a_template_on_an_rpc_server(tmp_path):
    procs = Processes(tmp_path)
    port = _free_port()
    try:
        procs.start("tracker", "autosched.exec.rpc_tracker", "--port", str(port))
        server = procs.start("server", *_server_args(port, "board"))
        tracker = _connect(port, procs.procs[0])
        _wait_for_servers(tracker, {"board": 1}, [server])
        task = autotvm.task.create("conv2d_nchw.x86", ARGS, target="llvm")
        log = tmp_path / "rpc.log"
        runner = autotvm.RPCRunner("board", host="127.0.0.1", port=port, number=1, repeat=1,
                                   timeout=30)  # fmt: skip
        option = autotvm.measure_option(autotvm.LocalBuilder(n_parallel=1), runner)
        tuner = autotvm.tuner.RandomTuner(task, seed=2)
        tuner.tune(3, measure_option=option, callbacks=[autotvm.callback.log_to_file(log)])
        records = list(autotvm.record.load_from_file(log))
        assert len(records) == 3
        assert all(r.error_no == MeasureErrorNo.NO_ERROR for _, r in records), records
        assert tuner.best_flops > 0 and sum(runner.server_counts.values()) == 3
        session = autotvm.measure.request_remote("board", "127.0.0.1", port, timeout=30)
        assert session.cpu(0) is not None
        tracker.close()
    finally:
        procs.close()
