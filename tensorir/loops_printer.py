"""Readable, deterministic text for loop IR (Halide-style nesting by two spaces)."""

from __future__ import annotations

from .loops import Allocate, Barrier, For, If, Program, Seq, Stmt, Store
from .printer import expr_str


def stmt_str(s: Stmt, indent: int = 0) -> str:
    return "\n".join(_lines(s, indent))


def _lines(s: Stmt, ind: int) -> list[str]:
    pad = "  " * ind
    if isinstance(s, For):
        kind = s.thread_tag if s.kind == "thread" else s.kind
        ann = "".join(f" {k}={v}" for k, v in s.annotations)
        head = f"{pad}for {s.var.name} in range({s.extent})  # {kind}{ann}"
        return [head, *_lines(s.body, ind + 1)]
    if isinstance(s, Store):
        return [f"{pad}{s.buffer.name}[{expr_str(s.index)}] = {expr_str(s.value)}"]
    if isinstance(s, Allocate):
        b = s.buffer
        head = f"{pad}allocate {b.name}[{b.size}] {b.dtype} {b.scope}"
        return [head, *_lines(s.body, ind)]
    if isinstance(s, Seq):
        return [line for st in s.stmts for line in _lines(st, ind)]
    if isinstance(s, If):
        out = [f"{pad}if {expr_str(s.cond)}:", *_lines(s.then, ind + 1)]
        if s.else_ is not None:
            out += [f"{pad}else:", *_lines(s.else_, ind + 1)]
        return out
    if isinstance(s, Barrier):
        return [f"{pad}barrier()"]
    raise TypeError(f"cannot print statement {type(s).__name__}")


def program_str(p: Program) -> str:
    def sig(b):
        return f"{b.name}: {b.dtype}{list(b.shape)}"

    head = [f"program {p.name}({', '.join(sig(b) for b in p.params)})"]
    head += [f"  workspace {sig(b)}" for b in p.workspaces]
    return "\n".join([*head, stmt_str(p.body, 1)])
