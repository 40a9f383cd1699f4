"""``python -m autosched.exec.rpc_server --tracker HOST:9190 --key KEY``: a device server.

``--key sim`` (the VTA environment's TARGET) serves the simulated VTA: it runs the VTA programs
``autotvm.RPCRunner("sim", ...)`` sends (docs/vta.md); other keys serve the CPU unless
``--device`` says otherwise.

A dask worker holding the resource ``{KEY: 1}`` (one request at a time), registered with the
tracker. Its device belongs to a long-lived device process, replaced after a crash or a
measurement past its timeout (:mod:`autosched.rpc.server`). When the tracker goes away the
server waits for it and registers again. The worker listens on 127.0.0.1 unless ``--host``
says otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import sys

from ..rpc import server
from ..rpc.cluster import (
    DEFAULT_HOST,
    add_tls_arguments,
    distributed,
    log,
    plain_http_routes,
    security_from_args,
    split_host_port,
    tracker_address,
)
from . import description

RECONNECT_S = 2.0


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m autosched.exec.rpc_server", description=description(__doc__)
    )
    parser.add_argument("--tracker", required=True, help="the tracker's HOST:PORT")
    parser.add_argument("--key", required=True, help="the device key clients ask for")
    parser.add_argument("--host", default=DEFAULT_HOST, help="address to listen on (127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (0: any free)")
    parser.add_argument(
        "--device",
        action="append",
        choices=server.DEVICE_KINDS,
        help="device kind this server measures on (repeatable; default vta for --key sim, "
        "else cpu)",
    )
    add_tls_arguments(parser)
    return parser.parse_args(argv)


async def serve(args, security) -> None:
    dd = distributed()
    host, port = split_host_port(args.tracker)
    address = tracker_address(host, port, security)
    name = f"server:{args.key}:{socket.gethostname()}:{os.getpid()}"
    while True:
        try:
            with plain_http_routes(security, "worker"):
                worker = dd.Worker(
                    address,
                    nthreads=1,
                    resources={args.key: 1},
                    name=name,
                    host=args.host,
                    port=args.port or None,
                    security=security,
                    protocol="tls" if security is not None else "tcp",
                    death_timeout=None,
                    memory_limit=0,
                )
            async with worker:
                print(f"rpc_server: key {args.key!r} serving at {worker.address}", flush=True)
                await worker.finished()
        except (OSError, TimeoutError) as e:
            log.info("rpc_server: tracker %s unreachable (%s)", address, e)
        print(f"rpc_server: lost the tracker at {address}; registering again", flush=True)
        await asyncio.sleep(RECONNECT_S)


def main(argv=None) -> int:
    args = parse_args(argv)
    # SIGTERM ends the server like Ctrl-C, so that its device process is stopped too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        security = security_from_args(args)
        server.configure(args.key, tuple(args.device or server.default_devices(args.key)))
        server.start_device_process()
        asyncio.run(serve(args, security))
    except KeyboardInterrupt:
        return 0
    except (ValueError, ImportError) as e:
        print(f"rpc_server: {e}", file=sys.stderr)
        return 2
    finally:
        server.stop_device_process()
    return 0


if __name__ == "__main__":
    sys.exit(main())
