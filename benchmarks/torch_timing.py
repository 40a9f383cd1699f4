"""How the GPU benchmarks time PyTorch, in one place: CUDA events around back-to-back calls, and a
CUDA graph of a call for ``torch.cuda.CUDAGraph`` replays. torch is optional (the ``bench``
extra): it is imported when a function runs, so importing this module needs none."""

from __future__ import annotations

import numpy as np


def cuda_event_ms(fn, min_ms: float = 300.0, repeat: int = 5, warmup: int = 3,
                  number: int | None = None) -> float:  # fmt: skip
    """Milliseconds per call of ``fn`` on the GPU, timed with CUDA events.

    ``warmup`` calls first; then ``repeat`` windows of ``number`` back-to-back calls each, and
    the median over the windows of the mean time per call. ``number`` defaults to the first
    power of two whose window lasts ``min_ms`` (at most 65536 calls).
    """
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    if number is None:
        number = 1
        while True:  # find a call count that lasts min_ms
            start.record()
            for _ in range(number):
                fn()
            end.record()
            end.synchronize()
            if start.elapsed_time(end) >= min_ms or number >= 1 << 16:
                break
            number *= 2
    times = []
    for _ in range(repeat):
        start.record()
        for _ in range(number):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / number)
    return float(np.median(times))


def cuda_graph(fn, *static_args, warmup: int = 3):
    """A ``torch.cuda.CUDAGraph`` of ``fn(*static_args)`` (time its ``replay``): ``warmup``
    calls on a side stream first, as PyTorch asks before a capture. The graph reads the
    tensors of ``static_args`` where they are: the caller keeps them alive while it replays."""
    import torch

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warmup):
            fn(*static_args)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn(*static_args)
    return graph
