"""The CPU backend's compiler half: LLVM IR text -> O3 (new pass manager) -> this host's (or
another triple's) machine code, object files and assembly, the target machines, and the check
that a kernel's required CPU features are present (re-exported by :mod:`runtime.cpu`, where
users import them)."""

from __future__ import annotations

import functools
import re

from .errors import CompileError

# The launcher, set up once per process (see runtime.cpu._init_parallel), and llvmlite's
# initialised targets: one dict for both, shared with runtime.cpu.
_state: dict = {}


def _llvm():
    """llvmlite.binding, with the native target initialised once (no llvm.initialize() in 0.50)."""
    import llvmlite.binding as llvm

    if "llvm" not in _state:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        _state["llvm"] = llvm
    return llvm


def _target_machine(
    triple: str | None = None, pic: bool = False, cpu: str | None = None, features: str = ""
):
    """This host's CPU, or CPU ``cpu`` (default generic) with ``features`` of ``triple``
    (cross-compiling: all LLVM targets are initialised on first use). ``pic`` makes
    position-independent code, which a shared library needs; the JIT takes LLVM's default."""
    llvm = _llvm()
    reloc = "pic" if pic else "default"
    if triple is None or same_triple(triple, llvm.get_default_triple()):
        target = llvm.Target.from_default_triple()
        return target.create_target_machine(
            cpu=llvm.get_host_cpu_name(),
            features=llvm.get_host_cpu_features().flatten(),
            opt=3,
            reloc=reloc,
            codemodel="default" if pic else "jitdefault",
        )
    if "all_targets" not in _state:
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        _state["all_targets"] = True
    try:
        target = llvm.Target.from_triple(triple)
    except RuntimeError as err:
        raise CompileError(f"LLVM cannot generate code for target triple {triple!r}") from err
    return target.create_target_machine(
        cpu=cpu or "generic", features=features or "", opt=3, reloc=reloc, codemodel="default"
    )


def triple_arch(triple: str) -> str:
    """The architecture part of a target triple (``aarch64-linux-gnu`` -> ``aarch64``)."""
    return triple.split("-", 1)[0].lower()


def same_triple(a: str, b: str) -> bool:
    """Whether code for triple ``a`` runs where ``b`` does: same architecture and system
    (vendor fields such as ``unknown`` / ``pc`` do not matter)."""
    pa, pb = a.lower().split("-"), b.lower().split("-")
    system = lambda parts: [p for p in parts[1:] if p not in ("unknown", "pc", "none")]  # noqa: E731
    return pa[0] == pb[0] and system(pa)[:1] == system(pb)[:1]


@functools.cache  # asked on every build and every load; the host's CPU does not change
def host_cpu_features() -> frozenset[str]:
    """LLVM's names of the features this host's CPU has (``avx512vnni``, ``avxvnni``, ...):
    what generated code may use, since it is compiled for and run on the host."""
    features = _llvm().get_host_cpu_features()
    return frozenset(name for name, on in features.items() if on)


_REQUIRES = "; autosched-requires-cpu-features: "  # codegen.llvm_dot.REQUIRES_HEADER


def _check_required_features(code: str) -> None:
    """Refuse IR that uses CPU instructions this host lacks (LLVM would abort the process)."""
    if not code.startswith(_REQUIRES):
        return
    needed = code[len(_REQUIRES) : code.index("\n")].strip()  # "a+b|c": a and b, or c
    have = host_cpu_features()
    if not any(set(alt.split("+")) <= have for alt in needed.split("|")):
        raise CompileError(
            f"this kernel uses CPU features {needed!r} that this host lacks (it was generated "
            "on another machine); rebuild it here"
        )


def host_signature() -> str:
    """What :func:`compile_object`'s machine code depends on: the target triple, the host CPU
    and its features. Object code made under another signature may not run here."""
    llvm = _llvm()
    cpu, features = llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()
    return f"{llvm.get_default_triple()} {cpu} {features}"


def _parse(code: str):
    llvm = _llvm()
    try:
        mod = llvm.parse_assembly(code)
        mod.verify()
    except RuntimeError as err:
        raise CompileError("LLVM rejected the generated IR", str(err)) from err
    return mod


def _text_arity(code: str, kernel_names) -> dict | None:
    """The kernels' parameter counts read from their ``define`` lines (llvmlite writes each on
    one line), without parsing the module; None where a line is not found or has aggregate
    parameters (then the module is parsed)."""
    nargs = {}
    for name in kernel_names:
        pattern = r'^define [^\n]*?@"?' + re.escape(name) + r'"?\(([^)\n]*)\)'
        m = re.search(pattern, code, re.MULTILINE)
        if m is None or any(c in m.group(1) for c in "{[<("):
            return None
        params = m.group(1).strip()
        nargs[name] = params.count(",") + 1 if params else 0
    return nargs


def _kernel_arity(mod, kernel_names) -> dict:
    nargs = {}
    for name in kernel_names:
        try:
            fn = mod.get_function(name)
        except NameError as err:
            raise CompileError(f"kernel {name!r} is not defined in the LLVM module") from err
        nargs[name] = len(list(fn.arguments))
    return nargs


def _optimize(mod, tm) -> None:
    llvm = _llvm()
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
    pb.getModulePassManager().run(mod, pb)


def compile_assembly(code: str) -> str:
    """LLVM IR text -> O3 -> this host's assembly text (what ``compile_object`` would encode):
    to see which instructions a kernel uses."""
    mod = _parse(code)
    tm = _target_machine()
    _optimize(mod, tm)
    try:
        return tm.emit_assembly(mod)
    except RuntimeError as err:
        raise CompileError("LLVM failed to generate assembly", str(err)) from err


def compile_object(
    code: str, triple: str | None = None, pic: bool = False, cpu: str | None = None,
    features: str = "",
) -> bytes:  # fmt: skip
    """LLVM IR text -> O3 -> a relocatable object file, as bytes: for this host, or for
    ``triple`` (e.g. ``"aarch64-linux-gnu"``, a generic CPU of that architecture).

    The expensive half of :meth:`CPUBackend.compile`, as a pure function so that tuning can run
    it in parallel builder processes and ship the bytes to the measuring process. ``pic``
    makes position-independent code, for linking into a shared library
    (:mod:`runtime.shared_library`); ``cpu`` / ``features`` (LLVM's ``-mcpu`` / ``-mattr``)
    choose the CPU of another triple.
    """
    return emit_object(_parse(code), triple, pic, cpu, features)


def emit_object(
    mod, triple: str | None = None, pic: bool = False, cpu: str | None = None, features: str = ""
) -> bytes:
    """An object file of the parsed llvmlite module ``mod`` (see :func:`compile_object`)."""
    tm = _target_machine(triple, pic, cpu, features)
    _optimize(mod, tm)
    try:
        return bytes(tm.emit_object(mod))
    except RuntimeError as err:
        raise CompileError("LLVM failed to generate machine code", str(err)) from err


def _jit(code: str):
    """JIT-compile a small module that stays loaded (the launchers); returns its engine."""
    llvm = _llvm()
    mod = llvm.parse_assembly(code)
    mod.verify()
    engine = llvm.create_mcjit_compiler(mod, _target_machine())
    engine.finalize_object()
    return engine
