"""What the tracker, the servers and the clients share: the lazy dask import, addresses and
TLS security.

Remote measurement runs on dask.distributed (an optional extra): the tracker is a dask
scheduler, each device server a dask worker holding the resource ``{key: 1}``, and clients
submit one fixed server-side function (:func:`autosched.rpc.server.device_call`) with plain
data. dask runs whatever a connected client submits, so who may connect is the security
boundary: everything binds to 127.0.0.1 unless told otherwise, and TLS certificates
(:func:`make_security`) restrict connections to holders of them.
"""

from __future__ import annotations

import contextlib
import logging

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9190
EXTRA_HINT = 'pip install "autosched[distributed]"'


def distributed():
    """The ``distributed`` module, or an ImportError naming the extra to install."""
    try:
        import distributed as dd
    except ImportError:
        raise ImportError(
            f"remote devices (RPC tracker, servers, RPCRunner) need dask.distributed: {EXTRA_HINT}"
        ) from None
    return dd


def make_security(tls_ca_file=None, tls_cert=None, tls_key=None):
    """dask ``Security`` requiring TLS with these files, or None when none is given.

    Parameters
    ----------
    tls_ca_file : str
        The certificate authority that signed every peer's certificate.
    tls_cert, tls_key : str
        This process's certificate and private key (the key may be inside ``tls_cert``).
    """
    given = [x for x in (tls_ca_file, tls_cert, tls_key) if x]
    if not given:
        return None
    if not tls_ca_file or not tls_cert:
        raise ValueError(
            "TLS needs --tls-ca-file and --tls-cert (and --tls-key unless the key is in the "
            "certificate file)"
        )
    dd = distributed()
    return dd.Security(
        tls_ca_file=str(tls_ca_file),
        tls_client_cert=str(tls_cert),
        tls_client_key=str(tls_key) if tls_key else None,
        tls_scheduler_cert=str(tls_cert),
        tls_scheduler_key=str(tls_key) if tls_key else None,
        tls_worker_cert=str(tls_cert),
        tls_worker_key=str(tls_key) if tls_key else None,
        require_encryption=True,
    )


def tracker_address(host: str, port: int, security=None) -> str:
    """The dask address of the tracker at ``host:port`` (``tls://`` when secured)."""
    return f"{'tls' if security is not None else 'tcp'}://{host}:{int(port)}"


def split_host_port(text: str, what: str = "--tracker") -> tuple[str, int]:
    """``"HOST:PORT"`` -> ``(host, port)``, or a ValueError naming ``what``."""
    host, sep, port = str(text).rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"{what} must look like HOST:PORT (e.g. 127.0.0.1:9190), got {text!r}")
    return host, int(port)


def add_tls_arguments(parser) -> None:
    """The TLS options every command takes (dask's ``Security``)."""
    group = parser.add_argument_group("TLS (only holders of certificates from the CA connect)")
    group.add_argument("--tls-ca-file", help="certificate authority (PEM)")
    group.add_argument("--tls-cert", help="this process's certificate (PEM)")
    group.add_argument("--tls-key", help="this process's private key (PEM)")


def security_from_args(args):
    return make_security(args.tls_ca_file, args.tls_cert, args.tls_key)


def plain_http_routes(security, role: str):
    """A context in which a dask ``role`` ("scheduler" or "worker") made with TLS serves only
    health checks on its plain-HTTP port (dask's pages there show identity, logs and call
    stacks to anyone, unauthenticated); without TLS nothing changes."""
    if security is None:
        return contextlib.nullcontext()
    import dask

    return dask.config.set({f"distributed.{role}.http.routes": ["distributed.http.health"]})


# dask's client-side loggers, whose tracebacks when the tracker goes away (a restart prints
# two chained ones) are not the user's business.
_DASK_CLIENT_LOGGERS = (
    "distributed.client",
    "distributed.core",
    "distributed.batched",
    "distributed.comm",
    "distributed.comm.tcp",
    "distributed.utils",
    "distributed.protocol.core",
)


def _root_cause(exc: BaseException) -> BaseException:
    seen = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        nxt = exc.__cause__ or exc.__context__
        if nxt is None:
            break
        exc = nxt
    return exc


class _OneLine(logging.Filter):
    """Turns a dask client-side record with a traceback into one line naming its root cause
    (``dask (distributed.client): ConnectionRefusedError: ... (the RPC tracker went away or
    restarted?)``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            root = _root_cause(record.exc_info[1])
            text = " ".join(str(root).split())[:200]
            what = " ".join(record.getMessage().split())[:200]
            lost = isinstance(root, OSError | TimeoutError) or "Comm" in type(root).__name__
            record.msg = (
                f"dask ({record.name}): {what + '; ' if what else ''}"
                f"{type(root).__name__}{': ' + text if text else ''}"
                f"{' (the RPC tracker went away or restarted?)' if lost else ''}"
            )
            record.args = ()
            record.exc_info = None
            record.exc_text = None
            record.stack_info = None
        return True


def quiet_dask_logs() -> None:
    """Keep dask's client-side tracebacks out of the tuning output: each such record becomes
    one line naming its root cause. Installed by :class:`autosched.rpc.TrackerSession`."""
    for name in _DASK_CLIENT_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _OneLine) for f in logger.filters):
            logger.addFilter(_OneLine())
