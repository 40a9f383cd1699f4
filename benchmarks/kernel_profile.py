"""Per-kernel times of a built GPU network: each call of the graph captured alone as a CUDA
graph, so the sum can be set beside the network's own time (what the launches between kernels
cost). Used by ``bench_transformer_gpu.py --profile`` and ``bench_gpu.py --profile``."""

from __future__ import annotations


def kernel_profile(module, number: int = 50) -> list[dict]:
    """Each network call's kernel time in microseconds: ``graph_us`` with its launches captured
    ``number`` times into one CUDA graph (no launch cost; None if capturing fails), ``loop_us``
    launched ``number`` times back to back from Python (at least the launch rate, a few us)."""
    from runtime.cuda_graph import CUDAGraphRunner, cuda_launches

    backend = module._backend
    buffers = [b.handle for b in module._buffers]
    rows = []
    for k, call in enumerate(module.plan.calls):
        fn = module._run_fns[k]
        fn()
        backend.synchronize()
        loop_us = min(backend.time_launches(fn, number) for _ in range(3)) * 1e6
        launches = cuda_launches(module.modules, [call], buffers)
        runner = CUDAGraphRunner(backend, launches * number)
        graph_us, reason = None, None
        if runner.launch():
            backend.synchronize()
            graph_us = min(backend.time_launches(runner.launch, 3) for _ in range(3))
            graph_us *= 1e6 / number
        else:
            reason = runner.reason
        runner.close()
        name = module.plan.names[k] if k < len(module.plan.names) else f"call{k}"
        grids = [(tuple(g), tuple(b)) for _, g, b, _ in launches]
        us = graph_us if graph_us is not None else loop_us
        rows.append({"call": k, "name": name, "kernels": len(launches), "us": us,
                     "loop_us": loop_us, "graph_us": graph_us, "graph_failed": reason,
                     "launch": grids})  # fmt: skip
    failed = {r["graph_failed"] for r in rows if r["graph_failed"]}
    if failed:
        print("per-kernel CUDA graphs failed (loop times instead):", *failed, flush=True)
    return rows


def print_profile(rows: list[dict]) -> dict:
    """Per-call table and the sum by function name (layer number stripped)."""
    import re

    by: dict[str, list] = {}
    for r in rows:
        key = re.sub(r"\d+", "#", r["name"])
        by.setdefault(key, [0, 0.0, r["launch"]])
        by[key][0] += 1
        by[key][1] += r["us"]
    total = sum(r["us"] for r in rows)
    print(f"per-kernel profile: {len(rows)} calls, {sum(r['kernels'] for r in rows)} kernels, "
          f"sum {total / 1e3:.3f} ms")  # fmt: skip
    for key, (n, us, launch) in sorted(by.items(), key=lambda kv: -kv[1][1]):
        print(f"  {us / 1e3:7.3f} ms {100 * us / total:5.1f}%  x{n:3d} {us / n:8.1f} us  {key}  "
              f"{launch}")  # fmt: skip
    return {k: {"calls": v[0], "ms": v[1] / 1e3} for k, v in by.items()}
