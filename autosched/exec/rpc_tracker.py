"""``python -m autosched.exec.rpc_tracker --host 127.0.0.1 --port 9190``: the RPC tracker.

A dask scheduler: device servers register with it under their key, clients (``RPCRunner``,
``autosched.rpc.connect_tracker``) send it requests, which it hands to a free server of the
key, higher priority first. It binds 127.0.0.1 unless ``--host`` says otherwise: anyone who
can reach it can run code on every server (docs/remote.md); use the TLS options beyond this
machine. With TLS the tracker serves no dashboard and its HTTP port answers health checks
only: dask's dashboard and info pages (workers' identity, logs, call stacks) are plain HTTP
without authentication.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from ..rpc.cluster import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    add_tls_arguments,
    distributed,
    plain_http_routes,
    security_from_args,
)
from . import description


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m autosched.exec.rpc_tracker", description=description(__doc__)
    )
    parser.add_argument("--host", default=DEFAULT_HOST, help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="port (default 9190)")
    parser.add_argument(
        "--dashboard", metavar="PORT", type=int, default=None, help="serve dask's dashboard on PORT"
    )
    add_tls_arguments(parser)
    return parser.parse_args(argv)


async def serve(host: str, port: int, security=None, dashboard: int | None = None) -> None:
    dd = distributed()
    if security is not None and dashboard is not None:
        raise ValueError(
            "--dashboard serves the workers' identity, logs and call stacks over plain HTTP "
            "without authentication: it is not served with TLS; drop --dashboard"
        )
    with plain_http_routes(security, "scheduler"):
        await _serve(dd, host, port, security, dashboard)


async def _serve(dd, host, port, security, dashboard) -> None:
    async with dd.Scheduler(
        host=host,
        port=port,
        protocol="tls" if security is not None else "tcp",
        security=security,
        dashboard=dashboard is not None,
        # Without a dashboard, dask's small HTTP server (health checks) takes any free port.
        dashboard_address=f"{host}:{dashboard if dashboard is not None else 0}",
    ) as scheduler:
        print(f"rpc_tracker: listening on {scheduler.address}", flush=True)
        await scheduler.finished()


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        security = security_from_args(args)
        asyncio.run(serve(args.host, args.port, security, args.dashboard))
    except KeyboardInterrupt:
        return 0
    except (ValueError, ImportError, OSError) as e:
        print(f"rpc_tracker: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
