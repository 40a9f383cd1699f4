"""codegen: loop IR in, source text out (a Source of plain values for the runtime)."""

from .llvm import build_llvm
from .source import BufferSpec, Launch, Source

__all__ = ["BufferSpec", "Launch", "Source", "build_llvm"]
