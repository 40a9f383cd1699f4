"""``tvm.target``: ``tvm.target.Target("opencl -device=mali", host="llvm -mtriple=...")`` is
:class:`codegen.target.Target` (also ``autosched.Target``)."""

from codegen.target import Target

__all__ = ["Target"]
