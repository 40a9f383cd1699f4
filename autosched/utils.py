"""The helpers seed tutorials import from ``tvm.auto_scheduler.utils`` / ``tvm.contrib.utils``.

``request_remote(device_key, host, port)`` opens a session on a server of the device key
(:func:`autosched.autotvm.measure.request_remote`, over :mod:`autosched.rpc`), and
``tempdir()`` a temporary directory whose ``relpath(name)`` names files in it (TVM's
``utils.tempdir()``)::

    from autosched.utils import request_remote, tempdir

    remote = request_remote("rk3399", "127.0.0.1", 9190)
    temp = tempdir()
    lib.export_library(temp.relpath("deploy_lib.so"), ndk.create_shared)
"""

from __future__ import annotations

from .autotvm.measure import request_remote
from .contrib.utils import TempDirectory, tempdir

__all__ = ["TempDirectory", "request_remote", "tempdir"]
