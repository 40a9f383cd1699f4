"""What travels to a VTA simulator server, and what the server does with it.

A VTA measurement job is plain data built on the client from its configuration: the program
(its instructions as zlib-compressed JSON in the ISA's field names, the form of
:func:`runtime.vta.to_dict`, and the micro-op table as ``.npy`` bytes), the packed shapes of
the DRAM tensors, the ``vta_config`` fields and the timing model it was compiled for, and the
seed of the random int8 inputs. No pickle: the server inflates the JSON (up to a limit), parses
it (nesting deeper than Python's parser is refused), reads the table with
``allow_pickle=False`` after checking its header against its bytes, bounds the timing fields
and checks every instruction (:func:`decode_job`); anything that is not a well-formed
instruction stream is refused with one line. Before anything runs, the memory the job needs
(its DRAM tensors plus :meth:`runtime.vta.Simulator.peak_bytes` of its program) is checked
against the server's limit (:func:`memory_limit`: ``AUTOSCHED_VTA_MAX_MEMORY``, default 4 GiB)
and a job over it is refused with one line. :func:`run_job` makes the seeded inputs
(:func:`seeded_inputs`, the same ones ``vta.SimulatorRunner`` uses), runs the simulator and
returns the cycles, the seed's counters and the simulated seconds.
"""

from __future__ import annotations

import io
import json
import math
import os
import zlib
from dataclasses import asdict, dataclass, fields

import numpy as np

from runtime.vta import Deps, Program, Simulator, TimingModel, VTAError, VTASpec, encode, from_dict
from runtime.vta.spec import DEFAULT_CONFIG

JOB_FORMAT = "autosched-vta-program"
JOB_VERSION = 1
#: Ceilings that keep a hostile job from exhausting the server (the largest resnet-18
#: conv2d programs have a few thousand instructions and DRAM tensors of a few MiB).
MAX_INSNS = 1_000_000
MAX_INSNS_JSON_BYTES = 256 << 20
MAX_DRAM_BYTES = 1 << 30
MAX_LOG_FIELD = 24
#: Micro-op iterations one GEMM / ALU instruction may ask for: the simulator builds index arrays
#: of that length, so a well-formed but huge loop could take the device process's memory (the
#: default uop buffer holds 8192 micro-ops, so a 3x3 convolution's GEMM runs at most 73728).
MAX_LOOP_ITERATIONS = 1 << 24
#: The memory a server lets one job take (DRAM tensors plus the simulator's working arrays),
#: unless ``AUTOSCHED_VTA_MAX_MEMORY`` (bytes, or with a K / M / G suffix) says otherwise.
DEFAULT_MAX_MEMORY = 4 << 30
MEMORY_ENV = "AUTOSCHED_VTA_MAX_MEMORY"
#: Timing model fields a job may set: cycle counts up to 2**20 (an int each), a clock up to
#: 100 GHz; beyond, cycle sums of a few million instructions stop being exact.
MAX_TIMING_CYCLES = 1 << 20
MAX_CLOCK_MHZ = 1e5

_BOOL_FIELDS = {"reset", "use_imm", "pop_prev", "pop_next", "push_prev", "push_next"}
_STR_FIELDS = {"opcode", "memory_type", "alu_opcode"}
_DRAM = {"inp": np.int8, "wgt": np.int8, "out": np.int8}


@dataclass(frozen=True)
class VTAJob:
    """A decoded, checked job: the program, the machine and the inputs' recipe."""

    program: Program
    spec: VTASpec
    timing: TimingModel
    shapes: dict
    seed: int
    expected: np.ndarray | None


# ----------------------------------------------------------------------------- inputs


def seeded_inputs(data_shape, kernel_shape, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The random int8 data and kernel every measurement of a workload sees (the same on the
    client, in ``vta.SimulatorRunner``, and on a server)."""
    rng = np.random.default_rng(int(seed))
    data = rng.integers(-128, 128, tuple(data_shape), dtype=np.int8)
    kernel = rng.integers(-128, 128, tuple(kernel_shape), dtype=np.int8)
    return data, kernel


# ----------------------------------------------------------------------------- client side

_DEP_FLAGS = tuple(f.name for f in fields(Deps))
_FIELD_NAMES: dict = {}


def _insn_dict(insn) -> dict:
    """``runtime.vta.to_dict(insn)``, without ``asdict``'s deep copies (a program of a large
    tile-1 configuration has 10**5 instructions)."""
    names = _FIELD_NAMES.get(type(insn))
    if names is None:
        names = _FIELD_NAMES[type(insn)] = tuple(f.name for f in fields(insn) if f.name != "deps")
    d = {n: getattr(insn, n) for n in names}
    for flag in _DEP_FLAGS:
        d[flag] = getattr(insn.deps, flag)
    return d


def insns_to_bytes(insns: list) -> bytes:
    """Instruction dicts as a job carries them: compact JSON, zlib-compressed (a program's
    instructions repeat, so it shrinks by ~100x)."""
    return zlib.compress(json.dumps(insns, separators=(",", ":")).encode(), 6)


def insns_from_bytes(data) -> list:
    """The instruction dicts of :func:`insns_to_bytes`'s bytes (ValueError with one line)."""
    if not isinstance(data, bytes):
        raise ValueError(f"insns must be zlib-compressed JSON bytes, got {type(data).__name__}")
    inflate = zlib.decompressobj()
    try:
        text = inflate.decompress(data, MAX_INSNS_JSON_BYTES)
    except zlib.error as e:
        raise ValueError(f"insns is not zlib-compressed data ({e})") from None
    if inflate.unconsumed_tail:
        raise ValueError(f"insns inflates to more than {MAX_INSNS_JSON_BYTES} bytes of JSON")
    try:
        return json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"insns is not valid JSON ({e})") from None
    except RecursionError:
        raise ValueError("insns nests JSON deeper than Python parses (not instructions)") from None


def _npy_bytes(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(array), allow_pickle=False)
    return buf.getvalue()


def encode_job(
    program: Program,
    shapes: dict,
    vta_config: dict,
    timing: TimingModel,
    seed: int,
    expected: np.ndarray | None = None,
) -> dict:
    """The plain-data job of ``program`` (see the module docstring).

    Parameters
    ----------
    program : runtime.vta.Program
        What ``vta.top.build(...).program`` returns.
    shapes : dict
        ``{"inp": data shape, "wgt": kernel shape, "out": output shape}`` (packed, int8).
    vta_config : dict
        The environment's ``vta_config.json`` fields (``env.config``).
    timing : TimingModel
    seed : int
        Seed of the random inputs.
    expected : numpy.ndarray, optional
        The output the program must produce on those inputs (checked on the server).
    """
    job = {
        "format": JOB_FORMAT,
        "format_version": JOB_VERSION,
        "insns": insns_to_bytes([_insn_dict(i) for i in program.insns]),
        "uops": _npy_bytes(np.asarray(program.uops, np.int32)),
        "shapes": {k: [int(x) for x in v] for k, v in shapes.items()},
        "vta_config": dict(vta_config),
        "timing": asdict(timing),
        "seed": int(seed),
        "expected": None if expected is None else _npy_bytes(expected),
    }
    return job


# ----------------------------------------------------------------------------- server side


def _int(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValueError(f"{what} must be an int, got {type(value).__name__} {value!r:.40}")
    return int(value)


def _read_npy(data, what: str) -> np.ndarray:
    """A ``.npy`` array of numbers whose header agrees with the bytes that follow it (a header
    may claim any shape: it is checked before numpy allocates the array)."""
    if not isinstance(data, bytes):
        raise ValueError(f"{what} must be .npy bytes, got {type(data).__name__}")
    buf = io.BytesIO(data)
    fmt = np.lib.format
    try:
        version = fmt.read_magic(buf)
        if version == (1, 0):
            shape, _, dtype = fmt.read_array_header_1_0(buf)
        elif version == (2, 0):
            shape, _, dtype = fmt.read_array_header_2_0(buf)
        else:
            raise ValueError(f"format version {version} (1.0 or 2.0 expected)")
    except (ValueError, OSError, EOFError, TypeError) as e:
        raise ValueError(f"{what} is not a .npy array of numbers ({e})") from None
    if dtype.hasobject:
        raise ValueError(f"{what} is not a .npy array of numbers (dtype {dtype})")
    claimed = math.prod(shape) * dtype.itemsize
    if claimed != len(data) - buf.tell():
        raise ValueError(
            f"{what}: its .npy header claims shape {shape} of {dtype} ({claimed} bytes) but "
            f"{len(data) - buf.tell()} bytes follow it"
        )
    try:
        return np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        raise ValueError(f"{what} is not a .npy array of numbers ({e})") from None


def _instruction(k: int, d) -> object:
    if not isinstance(d, dict):
        raise ValueError(f"instruction #{k} must be a JSON object, got {type(d).__name__}")
    for name, value in d.items():
        if name in _BOOL_FIELDS:
            if not isinstance(value, bool):
                raise ValueError(f"instruction #{k}: field {name} must be true/false")
        elif name in _STR_FIELDS:
            if not isinstance(value, str):
                raise ValueError(f"instruction #{k}: field {name} must be a string")
        else:
            _int(value, f"instruction #{k}: field {name}")
    try:
        insn = from_dict(d)
        encode(insn)  # every field fits its bits in the 128-bit word
    except (VTAError, TypeError) as e:
        raise ValueError(f"instruction #{k}: {e}") from None
    if insn.opcode in ("GEMM", "ALU"):
        n = insn.iter_out * insn.iter_in * max(0, insn.uop_end - insn.uop_bgn)
        if n > MAX_LOOP_ITERATIONS:
            raise ValueError(
                f"instruction #{k} ({insn.opcode}): {n} micro-op iterations, over the "
                f"{MAX_LOOP_ITERATIONS} a server runs; split the loop"
            )
    return insn


def _machine(job: dict) -> tuple[VTASpec, TimingModel]:
    config = job.get("vta_config")
    if not isinstance(config, dict) or set(config) - set(DEFAULT_CONFIG):
        raise ValueError(f"vta_config must hold vta_config.json fields ({sorted(DEFAULT_CONFIG)})")
    log_fields = {k: _int(v, f"vta_config {k}") for k, v in config.items() if k.startswith("LOG_")}
    if any(not 0 <= v <= MAX_LOG_FIELD for v in log_fields.values()):
        raise ValueError(f"vta_config LOG_* fields must lie in [0, {MAX_LOG_FIELD}]: {log_fields}")
    timing = job.get("timing")
    names = {f.name for f in fields(TimingModel)}
    if not isinstance(timing, dict) or set(timing) != names:
        raise ValueError(f"timing must hold the timing model's fields {sorted(names)}")
    for k, v in timing.items():
        if k == "clock_mhz":
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v <= MAX_CLOCK_MHZ:
                raise ValueError(
                    f"timing clock_mhz must lie in (0, {MAX_CLOCK_MHZ:g}], got {v!r:.40}"
                )
        elif isinstance(v, bool) or not isinstance(v, int) or not 0 < v <= MAX_TIMING_CYCLES:
            raise ValueError(
                f"timing {k} must be an int in [1, {MAX_TIMING_CYCLES}], got {v!r:.40}"
            )
    return VTASpec.from_config(log_fields), TimingModel(**timing)


def memory_limit() -> int:
    """The bytes one job may take on this server: ``AUTOSCHED_VTA_MAX_MEMORY`` (an int, or
    with a K / M / G suffix), else :data:`DEFAULT_MAX_MEMORY`."""
    text = os.environ.get(MEMORY_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_MEMORY
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1].upper(), 1)
    try:
        value = int(float(text[:-1] if scale > 1 else text) * scale)
    except ValueError:
        raise ValueError(f"{MEMORY_ENV}={text!r}: use bytes, or a number with K, M or G") from None
    if value <= 0:
        raise ValueError(f"{MEMORY_ENV}={text!r} must be positive")
    return value


def job_memory(program: Program, spec: VTASpec, timing: TimingModel, shapes: dict,
               expected_bytes: int = 0) -> int:  # fmt: skip
    """An upper bound of the bytes :func:`run_job` takes: the DRAM tensors (the random
    inputs twice: numpy draws then copies them), the expected output, and the simulator's
    :meth:`~runtime.vta.Simulator.peak_bytes`."""
    dram = {k: math.prod(v) for k, v in shapes.items()}
    return (
        2 * (dram["inp"] + dram["wgt"])
        + dram["out"]
        + expected_bytes
        + Simulator(spec, timing).peak_bytes(program)
    )


def decode_job(job, max_memory: int | None = None) -> VTAJob:
    """Check a job and decode it; a ValueError with one line says what is wrong.

    ``max_memory``: the bytes the job may need to run (default :func:`memory_limit`).
    """
    if not isinstance(job, dict):
        raise ValueError(f"a VTA job must be a dict, got {type(job).__name__}")
    if job.get("format") != JOB_FORMAT or job.get("format_version") != JOB_VERSION:
        raise ValueError(
            f"job format {job.get('format')!r} version {job.get('format_version')!r} is not "
            f"{JOB_FORMAT!r} {JOB_VERSION}; use the same autosched version on both sides"
        )
    spec, timing = _machine(job)
    raw = insns_from_bytes(job.get("insns"))
    if not isinstance(raw, list) or not raw or len(raw) > MAX_INSNS:
        raise ValueError(f"insns must be a list of 1 to {MAX_INSNS} instructions")
    insns = tuple(_instruction(k, d) for k, d in enumerate(raw))
    if [i for i, insn in enumerate(insns) if insn.opcode == "FINISH"] != [len(insns) - 1]:
        raise ValueError("the program must end with exactly one FINISH instruction")
    uops = _read_npy(job.get("uops"), "uops")
    if uops.dtype != np.int32 or uops.ndim != 2 or uops.shape[1] != 3:
        raise ValueError(f"uops must be an (n, 3) int32 table, got {uops.dtype} {uops.shape}")
    shapes = job.get("shapes")
    if not isinstance(shapes, dict) or set(shapes) != set(_DRAM):
        raise ValueError(f"shapes must give the DRAM tensors {sorted(_DRAM)}")
    checked, total = {}, 0
    for name, shape in shapes.items():
        if not isinstance(shape, list | tuple) or not shape:
            raise ValueError(f"shapes[{name!r}] must be a list of positive ints")
        checked[name] = tuple(_int(x, f"shapes[{name!r}]") for x in shape)
        if min(checked[name]) < 1:
            raise ValueError(f"shapes[{name!r}] must be a list of positive ints")
        total += math.prod(checked[name])
    if total > MAX_DRAM_BYTES:
        raise ValueError(f"the DRAM tensors need {total} bytes, over the {MAX_DRAM_BYTES} limit")
    expected = job.get("expected")
    if expected is not None:
        expected = _read_npy(expected, "expected")
        if expected.dtype != np.int8 or expected.size != np.prod(checked["out"]):
            raise ValueError(f"expected must be int8 of shape {checked['out']}")
    program = Program(insns, uops)
    need = job_memory(program, spec, timing, checked, 0 if expected is None else expected.nbytes)
    limit = memory_limit() if max_memory is None else int(max_memory)
    if need > limit:
        raise ValueError(
            f"the job needs about {need / 2**20:.0f} MiB to simulate, over this server's limit "
            f"of {limit / 2**20:.0f} MiB ({MEMORY_ENV}); use smaller tiles or shorter GEMM / "
            "ALU loops"
        )
    return VTAJob(program, spec, timing, checked, _int(job.get("seed"), "seed"), expected)


def run_job(job: VTAJob) -> dict:
    """Simulate a decoded job on its seeded inputs.

    Returns
    -------
    dict
        ``cycles``, ``seconds`` (at the job's clock), ``counters`` (the seed's), and
        ``wrong`` (a one-line reason when the output differs from ``expected``, else "").
        The simulator's VTAError (a deadlock, a buffer overflow) propagates.
    """
    data, kernel = seeded_inputs(job.shapes["inp"], job.shapes["wgt"], job.seed)
    out = np.zeros(job.shapes["out"], np.int8)
    dram = {"inp": data, "wgt": kernel, "out": out}
    stats = Simulator(job.spec, job.timing).run(job.program, dram)
    wrong = ""
    if job.expected is not None:
        bad = int(np.count_nonzero(out.reshape(-1) != job.expected.reshape(-1)))
        if bad:
            wrong = f"the output differs from the reference in {bad} of {out.size} values"
    return {
        "cycles": int(stats.cycles),
        "seconds": float(job.timing.seconds(stats.cycles)),
        "counters": {k: int(v) for k, v in stats.counters().items()},
        "wrong": wrong,
    }
