"""What a backend emits: source text plus everything needed to launch it, as plain values.

The runtime package must not import codegen, so a Source is handed over as ``source.as_dict()``
(only str / int / tuple values) to ``runtime.load_module(**source.as_dict(), device=...)``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class BufferSpec:
    """A buffer argument: ``size`` is the element count (arrays are passed flat)."""

    name: str
    dtype: str
    size: int


@dataclass(frozen=True)
class Launch:
    """One kernel launch, in program order.

    For "llvm" there is one launch of the entry function with ``grid``/``block`` all ones. For GPU
    languages ``grid`` counts blocks (work-groups) and ``block`` threads per block, each (x, y, z).
    ``args`` names the buffers passed, in the kernel's parameter order.
    """

    name: str
    args: tuple[str, ...]
    grid: tuple[int, int, int] = (1, 1, 1)
    block: tuple[int, int, int] = (1, 1, 1)


@dataclass(frozen=True)
class Source:
    """Generated code. ``lang`` is "llvm" (LLVM IR text), "cuda" or "opencl" (C source).

    ``params`` are the user-visible tensors (inputs then outputs); ``workspaces`` are
    intermediate global buffers that the runtime allocates once per loaded module.
    ``layouts`` lists the params stored in a rewritten layout, as
    ``ParamLayout.as_tuple()`` values ``(name, orig_size, offset, coefs, shape)``: callers pass
    them transformed (``tensorir.passes.layout_rewrite.ParamLayout.transform``).
    """

    lang: str
    code: str
    params: tuple[BufferSpec, ...]
    workspaces: tuple[BufferSpec, ...]
    launches: tuple[Launch, ...]
    layouts: tuple = ()

    def as_dict(self) -> dict:
        d = asdict(self)
        d["params"] = tuple(tuple(p.values()) for p in d["params"])
        d["workspaces"] = tuple(tuple(w.values()) for w in d["workspaces"])
        d["launches"] = tuple(
            (la["name"], tuple(la["args"]), tuple(la["grid"]), tuple(la["block"]))
            for la in d["launches"]
        )
        d["layouts"] = tuple(self.layouts)
        return d

    def _repr_html_(self) -> str:
        """The code, highlighted for its language (what a notebook shows)."""
        from tensorir.display import code_html

        return code_html(self.code, {"opencl": "c"}.get(self.lang, self.lang))
