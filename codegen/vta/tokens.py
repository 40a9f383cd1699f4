"""Dependence tokens of a VTA program: how the load, compute and store modules wait for each
other, and how virtual-thread contexts interleave (codegen/vta/lower.py emits each context's
instructions, tagged with ``_k``: load, reset, gemm, alu, store; ``_sealed`` ones carry their
own tokens)."""

from __future__ import annotations

from .config import VTALowerError


def _segments(stream: list) -> list:
    """One context's instructions cut into steps: a step ends after its GEMM and the ALU and
    STORE instructions that follow it; the next LOAD or reset starts a new one."""
    segs, cur, has_gemm = [], [], False
    for insn in stream:
        if has_gemm and insn["_k"] in ("load", "reset"):
            segs.append(cur)
            cur, has_gemm = [], False
        cur.append(insn)
        has_gemm |= insn["_k"] == "gemm"
    if cur:
        segs.append(cur)
    return segs


def interleave_with_tokens(streams: list) -> list:
    """Interleave the contexts' steps round-robin and set the dependence flags:

    * load -> compute: a step's last LOAD pushes, its GEMM pops (the data is there);
    * compute -> load: a step's GEMM pushes, the first LOAD of the context's next step pops
      (its part of the input / weight buffers is free again);
    * compute -> store: the compute instruction before a run of STOREs pushes, the first
      STORE pops (the accumulator tile is final);
    * store -> compute: the run's last STORE pushes, the context's next reset pops (its part
      of the accumulator is free again).

    Contexts alternate round-robin, so every queue's k-th pop meets its k-th push.
    """
    per_ctx = [_segments(s) for s in streams]
    n = {len(s) for s in per_ctx}
    if len(n) != 1:
        raise VTALowerError("virtual threads with different loop structures cannot interleave")
    for segs in per_ctx:
        loaded = []
        for seg in segs:
            loads = [i for i in seg if i["_k"] == "load"]
            gemms = [i for i in seg if i["_k"] == "gemm"]
            if loads and gemms:
                loads[-1]["push_next"] = True
                gemms[0]["pop_prev"] = True
                loaded.append((loads[0], gemms[-1]))
        for (_, gemm), (load, _) in zip(loaded, loaded[1:]):
            gemm["push_prev"] = True
            load["pop_next"] = True
        flat = [i for seg in segs for i in seg]
        pending_store, last_compute = None, None
        for k, insn in enumerate(flat):
            if insn.get("_sealed"):
                continue
            if insn["_k"] == "store" and (k == 0 or flat[k - 1]["_k"] != "store"):
                if last_compute is not None:
                    last_compute["push_next"] = True
                    insn["pop_prev"] = True
                end = k
                while end + 1 < len(flat) and flat[end + 1]["_k"] == "store":
                    end += 1
                pending_store = flat[end]
            elif insn["_k"] == "reset" and pending_store is not None:
                pending_store["push_prev"] = True
                insn["pop_next"] = True
                pending_store = None
            if insn["_k"] in ("alu", "gemm", "reset"):
                last_compute = insn
    out = []
    for k in range(n.pop()):
        for segs in per_ctx:
            out.extend(segs[k])
    for insn in out:  # the private tags go; the rest is the ISA's plain-dict form
        insn.pop("_k")
        insn.pop("_sealed", None)
    return out
