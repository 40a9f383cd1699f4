"""A hostile or broken RPC server for tests/autosched/test_rpc_trust.py (not a test module).

``python rpc_fake_server.py MODE RPC_SERVER_ARGS...`` starts a real ``rpc_server`` whose
:func:`autosched.rpc.server.device_call` is replaced (a dask worker finds the function a client
submits by its module and name, so it runs this one):

* ``hang``: never answers (stays connected; its heartbeats go on);
* ``control``: does what the file ``control`` in its working directory says, read per
  request: ``pickle`` answers an object whose unpickling writes the file named by
  ``$AUTOSCHED_TEST_MARKER``, ``raise`` raises an exception that does the same, ``warn``
  sends a dask warning event that does the same and ``type`` a result type that does the
  same (both answer garbage 0), ``garbage N``
  answers the N-th of :data:`GARBAGE` (a ``vta_measure`` request gets a reply without
  ``cycles``).
"""

import os
import sys
import time
from pathlib import Path

from autosched.exec import rpc_server
from autosched.rpc import server

try:  # the reply format: bytes of plain data ({"ok": value}), decoded strictly by the client
    from autosched.rpc.wire import encode_reply as _encode

    def encode_reply(value):
        return _encode({"ok": value})

except ImportError:  # the format before: any Python object
    encode_reply = None

MARKER = os.environ.get("AUTOSCHED_TEST_MARKER", "marker")
# Not in this process: dask's worker unpickles an exception once itself, to check it.
RUN_MARKER = (
    f"import os\nif os.getpid() != {os.getpid()}:\n"
    f"    open({MARKER!r}, 'w').write(f'code chosen by a server ran in process {{os.getpid()}}')"
)


class Evil:
    """Pickles as a call that writes the marker file where it is unpickled."""

    def __reduce__(self):
        return (exec, (RUN_MARKER,))


class EvilError(Exception):
    def __reduce__(self):
        return (exec, (RUN_MARKER,))


NAN = float("nan")
# (costs, error_no) of a measure reply, or a whole reply.
GARBAGE = [
    ((0.0,), 0),
    ((-1.0,), 0),
    ((NAN,), 0),
    ((), 0),
    (("fast",), 0),
    ((1e-3,), 99),
    ("whole", None),
    ("whole", "not a reply"),
]


def _measure_reply(costs, code, server_name):
    if encode_reply is None:
        return (costs, code, "", server_name)
    return encode_reply(
        {"costs": list(costs), "error_no": code, "error_msg": "", "server": server_name}
    )


def fake_device_call(op, args, timeout=None):
    name = f"fake@{os.getpid()}"
    if MODE == "hang":
        time.sleep(3600)
    what = Path("control").read_text().split()
    if what[0] == "pickle":
        return Evil()
    if what[0] == "raise":
        raise EvilError("no")
    if what[0] == "type":
        what = ["garbage", "0"]
    if what[0] == "warn":  # a dask "warn" event, which dask's client unpickles on arrival
        import pickle

        from distributed import get_worker

        get_worker().log_event("warn", {"message": pickle.dumps(Evil())})
        what = ["garbage", "0"]
    if op == "vta_measure":
        reply = {"error_no": 0, "error_msg": "", "server": name}  # no "cycles"
        return reply if encode_reply is None else encode_reply(reply)
    costs, code = GARBAGE[int(what[1])]
    if costs == "whole":
        return code if encode_reply is None else encode_reply(code)
    return _measure_reply(costs, code, name)


def _send_evil_exceptions() -> None:
    """Make this dask worker report an EvilError as the raw pickle of an Evil object (what
    a hostile worker can send in place of dask's own checked exception pickle)."""
    import pickle

    import distributed.worker as dask_worker
    from distributed.protocol import to_serialize

    original = dask_worker.error_message

    def error_message(e, status="error"):
        msg = original(e, status)
        if isinstance(e, EvilError):
            msg["exception"] = to_serialize(pickle.dumps(Evil()))
        return msg

    dask_worker.error_message = error_message

    # "type": the pickled type of a result that dask's client unpickles on arrival
    from distributed.worker_state_machine import WorkerState

    finished_msg = WorkerState._get_task_finished_msg

    def evil_finished_msg(self, *args, **kwargs):
        msg = finished_msg(self, *args, **kwargs)
        if Path("control").read_text().split()[0] == "type":
            msg.type = pickle.dumps(Evil())
        return msg

    WorkerState._get_task_finished_msg = evil_finished_msg


if __name__ == "__main__":
    MODE = sys.argv[1]
    server.device_call = fake_device_call
    _send_evil_exceptions()
    sys.exit(rpc_server.main(sys.argv[2:]))
