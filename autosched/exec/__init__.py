"""The seed tutorials' commands, as ``python -m autosched.exec.<command>``: ``rpc_tracker``,
``rpc_server`` and ``query_rpc_tracker`` (remote devices on dask.distributed; docs/remote.md)."""
