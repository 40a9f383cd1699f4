"""``python -m autosched.exec.query_rpc_tracker --host 127.0.0.1 --port 9190``: print the
tracker's servers and, per device key, how many servers there are, are free, and how many
requests wait (TVM's table)."""

from __future__ import annotations

import argparse
import sys

from ..rpc.cluster import DEFAULT_HOST, DEFAULT_PORT, add_tls_arguments, security_from_args
from . import description


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m autosched.exec.query_rpc_tracker", description=description(__doc__)
    )
    parser.add_argument("--host", default=DEFAULT_HOST, help="the tracker's host")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="the tracker's port")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds to connect")
    add_tls_arguments(parser)
    args = parser.parse_args(argv)
    from ..rpc.client import connect_tracker

    try:
        tracker = connect_tracker(
            args.host, args.port, security=security_from_args(args), timeout=args.timeout
        )
    except (ConnectionError, ValueError, ImportError) as e:
        print(f"query_rpc_tracker: {e}", file=sys.stderr)
        return 2
    try:
        print(f"Tracker address {args.host}:{args.port}\n")
        print(tracker.text_summary())
    finally:
        tracker.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
