"""How a CUDA kernel declares its shared arrays: static or opted-in dynamic shared memory.

A block's static ``__shared__`` arrays may take 48 KB in all. Beyond that a kernel must opt in:
its shared memory is one ``extern __shared__`` buffer, sized at launch, up to the device's
``MAX_SHARED_MEMORY_PER_BLOCK_OPTIN`` (227 KB on sm_90). Only a software-pipelined kernel gets
there (the verifier allows the opt-in for it alone): N copies of its staged tiles, or bigger
tiles, let it keep more of global memory's latency in flight (docs/gpu.md, "past 48 KiB").

Such a kernel's arrays keep their names, as pointers at 128-byte aligned offsets into the
buffer, so the rest of the kernel is the same code. Its module also defines
``__device__ unsigned int <kernel>__dynamic_shared_bytes`` (C linkage): the runtime reads it
when it loads the module, opts the kernel in and passes the bytes at every launch
(``runtime.cuda.DYNAMIC_SHARED_SUFFIX``; the runtime imports nothing from here, so the suffix is
spelled in both places and a test holds them equal).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "DYNAMIC_SHARED_SUFFIX",
    "STATIC_SHARED_BYTES",
    "SharedArray",
    "shared_declarations",
]

STATIC_SHARED_BYTES = 48 * 1024
"""The most static ``__shared__`` memory a CUDA block may declare."""

DYNAMIC_SHARED_SUFFIX = "__dynamic_shared_bytes"
"""Suffix of the global that tells the runtime a kernel's dynamic shared bytes."""

_BUFFER = "autosched_dynamic_shared"
_ALIGN = 128  # every array's offset: covers wmma's 32 bytes and cp.async's 16


@dataclass(frozen=True)
class SharedArray:
    """One shared array of a kernel: C name, element type, elements, bytes an element, and the
    ``__align__`` its static declaration needs (0: none)."""

    name: str
    ctype: str
    size: int
    itemsize: int
    align: int = 0

    @property
    def nbytes(self) -> int:
        return self.size * self.itemsize


def _offsets(arrays) -> tuple[list[int], int]:
    offsets, end = [], 0
    for a in arrays:
        align = max(_ALIGN, a.align)  # wgmma's swizzled operand tiles: 1024 bytes
        end = -(-end // align) * align
        offsets.append(end)
        end += -(-a.nbytes // _ALIGN) * _ALIGN
    return offsets, end


def shared_declarations(arrays, kernel: str) -> tuple[list[str], list[str]]:
    """``(body lines, lines before the kernel)`` declaring ``arrays`` in kernel ``kernel``.

    Arrays of at most :data:`STATIC_SHARED_BYTES` in all are static ``__shared__`` arrays, as
    always. More are carved out of one dynamic buffer, and a global before the kernel tells the
    runtime its size (:data:`DYNAMIC_SHARED_SUFFIX`)."""
    arrays = list(arrays)
    if sum(a.nbytes for a in arrays) <= STATIC_SHARED_BYTES:
        body = []
        for a in arrays:
            align = f"__align__({a.align}) " if a.align else ""
            body.append(f"__shared__ {align}{a.ctype} {a.name}[{a.size}];")
        return body, []
    offsets, total = _offsets(arrays)
    align = max([_ALIGN, *(a.align for a in arrays)])
    body = [f"extern __shared__ __align__({align}) unsigned char {_BUFFER}[];"]
    for a, off in zip(arrays, offsets):
        body.append(f"{a.ctype}* {a.name} = reinterpret_cast<{a.ctype}*>({_BUFFER} + {off});")
    before = [
        f'extern "C" {{ __device__ unsigned int {kernel}{DYNAMIC_SHARED_SUFFIX} = {total}; }}'
    ]
    return body, before
