"""Targets: ``Target("llvm")``, ``Target("cuda")``, ``Target("opencl -device=mali")``, and the
simulated accelerator ``Target("ext_dev -device=vta")`` (docs/vta.md)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Backend:
    """One code-generation backend: the entry of :data:`BACKENDS` for a target kind.

    Every place that treats target kinds differently reads this table (and runtime.device's
    ``DEVICE_KINDS`` for the device side); docs/contributing.md, "Recipe: a new backend".

    Attributes
    ----------
    kind : str
        The target kind (``Target("cuda").kind``).
    lang : str or None
        The language of the :class:`codegen.source.Source` its renderer emits; runtime.device's
        table maps it to the device that loads it. None: no Source (``ext_dev``).
    renderer : str or None
        ``"module:function"`` of ``render(program, target, options) -> Source`` (a lowered
        Program, the Target, :class:`RenderOptions`), imported on first use. None: the kind's
        code comes from its own code generator, not from the auto-scheduler (``ext_dev``:
        codegen/vta).
    is_gpu : bool
        Kernels run on thread blocks: the GPU sketch rules, cost features and verifier apply.
    on_host : bool
        Its code is CPU object code (this host's, or a ``-mtriple``'s): compiled ahead of time
        by LLVM, kept in exported libraries, weights stored in loop order (layout rewrite).
    device_kind : str
        The runtime device kind that runs its code (``runtime.device``'s table).
    limits : str
        Where the machine limits (autosched.hardware.HardwareParams) come from: ``"host"``
        (this machine's CPU, read through LLVM; its code is compiled for the host's features),
        ``"device"`` (the runtime device's properties, else ``hardware.GPU_DEFAULTS``) or
        ``"accelerator"`` (the accelerator's own configuration, autosched/vta).
    aliases : tuple of str
        Other names ``Target(...)`` accepts for this kind.
    """

    kind: str
    lang: str | None
    renderer: str | None
    is_gpu: bool
    on_host: bool
    device_kind: str
    limits: str
    aliases: tuple[str, ...] = ()

    def render(self, program, target: Target, options: RenderOptions):
        """The :class:`codegen.source.Source` of the lowered ``program`` for ``target``."""
        if self.renderer is None:
            raise ValueError(
                f"target {str(target)!r}: {self.kind} code comes from its own code generator, "
                f"not from a lowered program; render one of {sorted(KINDS)}"
            )
        module, _, name = self.renderer.partition(":")
        return getattr(importlib.import_module(module), name)(program, target, options)


@dataclass(frozen=True)
class RenderOptions:
    """What a renderer needs beyond the program and the target, found above codegen.

    Attributes
    ----------
    cpu_features : frozenset of str
        LLVM names of the CPU features host code may use (``limits == "host"`` backends).
    check_indices : bool
        Check data-dependent indices at run time (the CPU's code; GPU code clamps them).
    """

    cpu_features: frozenset[str] = frozenset()
    check_indices: bool = True


#: The code-generation backends, by target kind: the one table of what each kind is.
BACKENDS: dict[str, Backend] = {
    b.kind: b
    for b in (
        Backend("llvm", "llvm", "codegen.llvm:render", False, True, "cpu", "host", ("cpu", "c")),
        Backend(
            "cuda", "cuda", "codegen.cuda:render", True, False, "cuda", "device", ("gpu", "nvidia")
        ),
        Backend(
            "opencl", "opencl", "codegen.opencl:render", True, False, "opencl", "device", ("cl",)
        ),
        # TVM's ext_dev: the simulated VTA (docs/vta.md); its instruction streams come from
        # codegen/vta, not from the auto-scheduler.
        Backend("ext_dev", None, None, False, False, "ext_dev", "accelerator"),
    )
}  # fmt: skip
#: The kinds whose code the auto-scheduler generates (a renderer) ...
KINDS = tuple(k for k, b in BACKENDS.items() if b.renderer is not None)
#: ... and the external accelerators (TVM's ``ext_dev``), whose code comes from their own code
#: generator (codegen/vta), so they are not in ``KINDS``.
EXT_KINDS = tuple(k for k, b in BACKENDS.items() if b.renderer is None)
_ALIASES = {alias: b.kind for b in BACKENDS.values() for alias in b.aliases}


def backend(kind: str) -> Backend:
    """The :data:`BACKENDS` entry of target kind ``kind`` (an alias such as ``"cpu"`` too).

    Raises
    ------
    ValueError
        One line naming the kind and the known ones.
    """
    entry = BACKENDS.get(_ALIASES.get(kind, kind)) if isinstance(kind, str) else None
    if entry is None:
        raise ValueError(f"unknown target kind {kind!r}; use one of {sorted(BACKENDS)}")
    return entry


def backend_of_lang(lang: str) -> Backend:
    """The :data:`BACKENDS` entry whose renderer emits source language ``lang``."""
    for entry in BACKENDS.values():
        if entry.lang == lang:
            return entry
    langs = sorted(b.lang for b in BACKENDS.values() if b.lang is not None)
    raise ValueError(f"unknown source language {lang!r}; use one of {langs}")


class TargetKind(str):
    """A target's kind: the string ``"llvm"``, ``"cuda"`` or ``"opencl"``, with TVM's ``.name``.

    A ``str`` subclass so that ``target.kind == "llvm"`` and ``target.kind in (...)`` keep
    working, while the seed tutorials' ``target.kind.name`` works as in TVM.
    """

    __slots__ = ()

    @property
    def name(self) -> str:
        return str.__str__(self)


@dataclass(frozen=True)
class Target:
    """A code-generation target parsed from a TVM-style string.

    Parameters
    ----------
    spec : str or Target
        ``"<kind> [-key=value] [-flag] ..."``, kind in ``llvm`` (alias ``cpu``), ``cuda``,
        ``opencl``. Options are kept as strings, e.g. ``Target("opencl -device=mali")``.
    host : str or Target, optional
        The target of the host code that drives this one's kernels, as TVM's ``host=``
        (e.g. ``Target("opencl -device=mali", host="llvm -mtriple=aarch64-linux-gnu")``).
        An llvm target without its own ``-mtriple`` compiles for the host's triple
        (:func:`target_triple`); GPU host code is this process's Python. It is not part of
        ``str(target)``, so records written with or without a host match the same target.

    Attributes
    ----------
    kind : TargetKind
        ``"llvm"``, ``"cuda"`` or ``"opencl"`` (a str; ``kind.name`` as in TVM).
    host : Target or None
    """

    kind: TargetKind
    options: tuple[tuple[str, str], ...] = field(default=())
    host: Target | None = field(default=None)

    def __init__(self, spec: str | Target, host: str | Target | None = None):
        if host is not None:
            host = _host_target(host, spec)
        if isinstance(spec, Target):
            object.__setattr__(self, "kind", spec.kind)
            object.__setattr__(self, "options", spec.options)
            object.__setattr__(self, "host", host if host is not None else spec.host)
            return
        if not isinstance(spec, str) or not spec.strip():
            raise ValueError(f"target must be a string such as 'llvm' or 'cuda', got {spec!r}")
        words = spec.split()
        kind = _ALIASES.get(words[0], words[0])
        if kind not in KINDS + EXT_KINDS:
            raise ValueError(
                f"unknown target kind {words[0]!r} in {spec!r}; use one of {KINDS + EXT_KINDS}"
            )
        opts = []
        for w in words[1:]:
            if not w.startswith("-"):
                raise ValueError(f"target option {w!r} in {spec!r} must look like -key=value")
            key, eq, value = w.lstrip("-").partition("=")
            if not key or (eq and not value):
                # "-" or "-=x" named no option, and "-mcpu=" became "-mcpu=1" (a flag's value).
                empty = "key" if not key else "value"
                raise ValueError(
                    f"target {spec!r}: option {w!r} has an empty {empty}; write -key=value "
                    "(or -flag for a flag)"
                )
            opts.append((key, value or "1"))
        object.__setattr__(self, "kind", TargetKind(kind))
        object.__setattr__(self, "options", tuple(opts))
        object.__setattr__(self, "host", host)
        _check_tf32(self, spec)

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
            " ".join([self.kind, *(f"-{k}={v}" for k, v in kept + list(options.items()))]),
            host=self.host,
        )

    @property
    def device_kind(self) -> str:
        """The runtime device kind that runs this target's code."""
        return BACKENDS[self.kind].device_kind

    @property
    def device_name(self) -> str | None:
        """The ``-device=`` option (TVM's ``target.device_name``), e.g. ``"vta"`` or ``"mali"``."""
        return self.get("device")

    @property
    def allow_tf32(self) -> bool:
        """Whether float32 convolutions and matmuls may round their operands to TF32 (10-bit
        mantissa) to run on tensor cores: ``Target("cuda -allow_tf32=1")``. Off by default: a
        float32 network computes in float32 unless the user says otherwise (PyTorch's cuDNN
        convolutions use TF32 by default; docs/gpu.md). Read by the tensor-core sketch rule
        (float32 dense / batch_matmul / implicit-GEMM conv2d on TF32 fragments), the network
        partition (float32 conv2d as implicit GEMMs) and the CUDA backend."""
        return _TRUE_FALSE[self.get("allow_tf32", "0")]

    @property
    def backend(self) -> Backend:
        """This target kind's entry of the backend table (:data:`BACKENDS`)."""
        return BACKENDS[self.kind]

    @property
    def is_gpu(self) -> bool:
        return BACKENDS[self.kind].is_gpu

    def __str__(self) -> str:
        return " ".join([self.kind, *(f"-{k}={v}" for k, v in self.options)])

    def __enter__(self) -> Target:
        """``with Target("llvm"):`` makes this the :meth:`current` target (TVM's scope)."""
        _CURRENT.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _CURRENT.pop()

    @staticmethod
    def current(allow_none: bool = True) -> Target | None:
        """The target of the innermost ``with Target(...)`` block (None outside any)."""
        if not _CURRENT and not allow_none:
            raise ValueError('no current target: wrap the call in `with Target("llvm"):`')
        return _CURRENT[-1] if _CURRENT else None


_CURRENT: list[Target] = []  # the ``with Target(...)`` stack, innermost last
_TRUE_FALSE = {"1": True, "true": True, "True": True, "0": False, "false": False, "False": False}


def _check_tf32(target: Target, spec: str) -> None:
    """``-allow_tf32`` is a yes/no option of CUDA targets (TF32 is an NVIDIA tensor-core type)."""
    value = target.get("allow_tf32")
    if value is None:
        return
    if value not in _TRUE_FALSE:
        raise ValueError(f"target {spec!r}: -allow_tf32={value}; write -allow_tf32=1 or =0")
    if target.kind != "cuda":
        raise ValueError(
            f"target {spec!r}: -allow_tf32 is an option of cuda targets (TF32 runs on NVIDIA "
            f"tensor cores); drop it for {target.kind}"
        )


def _host_target(host, spec) -> Target:
    """``host`` as a CPU Target, or a ValueError naming the argument."""
    host = Target(host)
    if host.kind != "llvm":
        raise ValueError(
            f"target {str(spec)!r}: host={str(host)!r} must be an llvm (CPU) target, "
            "e.g. host='llvm' or host='llvm -mtriple=aarch64-linux-gnu'"
        )
    return host


def target_triple(target: Target) -> str | None:
    """The LLVM triple CPU code of ``target`` is compiled for: its ``-mtriple``, else its
    host's (``Target("llvm", host="llvm -mtriple=aarch64-linux-gnu")``); None means this
    machine's."""
    target = Target(target)
    triple = target.get("mtriple")
    if triple is None and target.host is not None:
        triple = target.host.get("mtriple")
    return triple


def cross_cpu(target: Target) -> tuple[str, str]:
    """The ``(-mcpu, -mattr)`` CPU code for another machine is compiled for: the target's own,
    else its host's; ``("generic", "")`` when neither names one."""
    target = Target(target)
    host = target.host or Target("llvm")
    cpu = target.get("mcpu") or host.get("mcpu") or "generic"
    return cpu, target.get("mattr") or host.get("mattr") or ""


def is_cross_target(target: Target) -> bool:
    """Whether ``target``'s CPU code is for another machine (a foreign ``-mtriple``)."""
    triple = target_triple(target)
    if triple is None or Target(target).kind != "llvm":
        return False
    import llvmlite.binding as llvm

    def arch_and_system(t: str) -> tuple:
        parts = t.lower().split("-")
        system = [p for p in parts[1:] if p not in ("unknown", "pc", "none")]
        return parts[0], system[:1]

    return arch_and_system(triple) != arch_and_system(llvm.get_default_triple())


def check_host_cpu(target: Target) -> None:
    """Refuse an ``llvm -mcpu=...`` that is not this host's CPU.

    CPU kernels are JIT-compiled for and run on the host's CPU (``runtime.cpu``), so another
    ``-mcpu`` would be silently ignored (and LLVM itself only warns on a name it does not know,
    then may abort). ``-mcpu=native`` means the host. Called where code is compiled or tuned
    for this machine, not when a target string is only parsed (records of other hosts load).
    """
    target = Target(target)
    cpu = target.get("mcpu")
    if target.kind != "llvm" or cpu is None or cpu == "native" or is_cross_target(target):
        return
    import llvmlite.binding as llvm

    host = llvm.get_host_cpu_name()
    if cpu != host:
        raise ValueError(
            f"target {str(target)!r}: -mcpu={cpu} is not this host's CPU ({host}); CPU kernels "
            f"are compiled for and run on the host: drop -mcpu, or use -mcpu={host} or -mcpu=native"
        )
