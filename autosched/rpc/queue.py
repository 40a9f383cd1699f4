"""The tracker's queue table, as TVM's ``query_rpc_tracker`` prints it."""

from __future__ import annotations


def queue_state(dask_scheduler) -> dict:
    """Run on the tracker (``client.run_on_scheduler``): per device key, how many servers
    are free and how many requests wait (assigned to a busy server, or to none yet)."""
    queue: dict[str, dict] = {}
    for ws in dask_scheduler.workers.values():
        for key in ws.resources:
            entry = queue.setdefault(key, {"free": 0, "pending": 0})
            busy = len(ws.processing)
            entry["free"] += busy == 0
            entry["pending"] += max(0, busy - 1)  # one runs; the rest wait for the device
    for ts in dask_scheduler.tasks.values():
        if ts.state == "no-worker" and ts.resource_restrictions:
            for key in ts.resource_restrictions:
                queue.setdefault(key, {"free": 0, "pending": 0})["pending"] += 1
    return queue


def text_summary(server_info: list, queue_info: dict) -> str:
    """TVM's tracker summary: the server list, then per key total / free / pending.

    ``server_info``: ``[{"addr": "host:port", "key": "server:KEY"}]``; ``queue_info``:
    ``{KEY: {"free": n, "pending": n}}``.
    """
    total: dict[str, int] = {}
    lines = ["Server List", "-" * 30, "server-address           key", "-" * 30]
    for item in sorted(server_info, key=lambda x: x["key"]):
        lines.append(f"{item['addr']:>21}    {item['key']}")
        key = item["key"].split(":", 1)[1]
        total[key] = total.get(key, 0) + 1
    lines += ["-" * 30, ""]
    keys = sorted(queue_info)
    width = max((len(k) for k in keys), default=0)
    title = f"{'key':<{width}}   total  free  pending"
    lines += ["Queue Status", "-" * len(title), title, "-" * len(title)]
    for k in keys:
        free, pending = queue_info[k]["free"], queue_info[k]["pending"]
        if total.get(k, 0) or pending:
            lines.append(f"{k:<{width}}   {total.get(k, 0):<5d}  {free:<4d}  {pending:<7d}")
    lines.append("-" * len(title))
    return "\n".join(lines) + "\n"


def task_error(dask_scheduler, key: str) -> str:
    """Run on the tracker (``client.run_on_scheduler``): the text of a failed task's error as
    the tracker keeps it (a string, so a client never unpickles what a server raised)."""
    ts = dask_scheduler.tasks.get(key)
    if ts is None:
        return "the tracker no longer knows the task"
    text = getattr(ts, "exception_text", None) or ""
    return str(text)[:400] or "the server raised an error the tracker did not describe"


def request_state(dask_scheduler, key: str) -> dict:
    """Run on the tracker: whether the request ``key`` has started on its server
    (``started``), and seconds since that server's last heartbeat (``silent_s``)."""
    from time import time

    ts = dask_scheduler.tasks.get(key)
    ws = getattr(ts, "processing_on", None)
    if ws is None:
        return {"started": False, "silent_s": 0.0}
    return {"started": ts in ws.executing, "silent_s": float(time() - ws.last_seen)}
