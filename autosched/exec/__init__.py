"""The seed tutorials' commands, as ``python -m autosched.exec.<command>``: ``rpc_tracker``,
``rpc_server`` and ``query_rpc_tracker`` (remote devices on dask.distributed; docs/remote.md)."""


def description(doc: str) -> str:
    """A command's ``--help`` description: its module docstring's whole first paragraph
    (argparse re-wraps it; the first line alone stops mid-sentence)."""
    return " ".join(doc.split("\n\n")[0].split()).replace("``", "")
