"""Targets: ``Target("llvm")``, ``Target("cuda")``, ``Target("opencl -device=mali")``."""

from __future__ import annotations

from dataclasses import dataclass, field

KINDS = ("llvm", "cuda", "opencl")
_ALIASES = {"cpu": "llvm", "c": "llvm", "gpu": "cuda", "nvidia": "cuda", "cl": "opencl"}


@dataclass(frozen=True)
class Target:
    """A code-generation target parsed from a TVM-style string.

    Parameters
    ----------
    spec : str
        ``"<kind> [-key=value] [-flag] ..."``, kind in ``llvm`` (alias ``cpu``), ``cuda``,
        ``opencl``. Options are kept as strings, e.g. ``Target("opencl -device=mali")``.
    """

    kind: str
    options: tuple[tuple[str, str], ...] = field(default=())

    def __init__(self, spec: str | Target):
        if isinstance(spec, Target):
            object.__setattr__(self, "kind", spec.kind)
            object.__setattr__(self, "options", spec.options)
            return
        if not isinstance(spec, str) or not spec.strip():
            raise ValueError(f"target must be a string such as 'llvm' or 'cuda', got {spec!r}")
        words = spec.split()
        kind = _ALIASES.get(words[0], words[0])
        if kind not in KINDS:
            raise ValueError(f"unknown target kind {words[0]!r} in {spec!r}; use one of {KINDS}")
        opts = []
        for w in words[1:]:
            if not w.startswith("-"):
                raise ValueError(f"target option {w!r} in {spec!r} must look like -key=value")
            key, _, value = w.lstrip("-").partition("=")
            opts.append((key, value or "1"))
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "options", tuple(opts))

    def get(self, key: str, default: str | None = None) -> str | None:
        for k, v in self.options:
            if k == key:
                return v
        return default

    def with_options(self, **options: str) -> Target:
        """This target with ``options`` set (replacing same-named ones), e.g.
        ``Target("cuda").with_options(arch="sm_90")`` is ``cuda -arch=sm_90``."""
        kept = [(k, v) for k, v in self.options if k not in options]
        return Target(
            " ".join([self.kind, *(f"-{k}={v}" for k, v in kept + list(options.items()))])
        )

    @property
    def device_kind(self) -> str:
        """The runtime device kind that runs this target's code."""
        return {"llvm": "cpu", "cuda": "cuda", "opencl": "opencl"}[self.kind]

    @property
    def is_gpu(self) -> bool:
        return self.kind in ("cuda", "opencl")

    def __str__(self) -> str:
        return " ".join([self.kind, *(f"-{k}={v}" for k, v in self.options)])


def check_host_cpu(target: Target) -> None:
    """Refuse an ``llvm -mcpu=...`` that is not this host's CPU.

    CPU kernels are JIT-compiled for and run on the host's CPU (``runtime.cpu``), so another
    ``-mcpu`` would be silently ignored (and LLVM itself only warns on a name it does not know,
    then may abort). ``-mcpu=native`` means the host. Called where code is compiled or tuned
    for this machine, not when a target string is only parsed (records of other hosts load).
    """
    target = Target(target)
    cpu = target.get("mcpu")
    if target.kind != "llvm" or cpu is None or cpu == "native":
        return
    import llvmlite.binding as llvm

    host = llvm.get_host_cpu_name()
    if cpu != host:
        raise ValueError(
            f"target {str(target)!r}: -mcpu={cpu} is not this host's CPU ({host}); CPU kernels "
            f"are compiled for and run on the host: drop -mcpu, or use -mcpu={host} or -mcpu=native"
        )
