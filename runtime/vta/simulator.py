"""A numpy simulator of VTA: runs a ``Program`` on host arrays and counts cycles.

``Simulator(spec).run(program, dram)`` executes the instructions on the on-chip buffers (input,
weight, accumulator, uop) and DRAM tensors bound by memory type:

==========  ===============================================  ==========================
``dram``    what it is                                       viewed as entries of
==========  ===============================================  ==========================
``"inp"``   the int8 input (e.g. NCHW1n16c data)             BATCH x BLOCK_IN int8
``"wgt"``   the int8 weights (e.g. OIHW16o16i)               BLOCK_OUT x BLOCK_IN int8
``"acc"``   optional int32 values LOAD acc reads (a bias)    BATCH x BLOCK_OUT int32
``"out"``   the int8 result STORE writes, in place           BATCH x BLOCK_OUT int8
==========  ===============================================  ==========================

The three modules are simulated as an event loop (timing.py): of the modules whose next
instruction may start (its tokens are there), the one that can start earliest runs next. With
correct tokens this is also a legal execution order for the data, so results and cycles come from
the same run. No module able to start while instructions remain is a deadlock, reported with
what each module waits for.

Memory: a GEMM / ALU instruction's iterations run in chunks of at most :data:`CHUNK_BYTES` of
working arrays, its index arrays (8 bytes per iteration and operand) are kept in an LRU cache
of at most ``index_cache_bytes``, and :meth:`Simulator.peak_bytes` bounds what a program needs
before it runs (a server refuses a job over its limit up front: ``autosched.rpc.vta_job``).
"""

from __future__ import annotations

import logging
from collections import OrderedDict, deque
from dataclasses import dataclass, field

import numpy as np

from .isa import AluInsn, FinishInsn, GemmInsn, MemInsn, Program, VTAError, module_of
from .spec import UOP_BYTES, VTASpec
from .timing import TimingModel

logger = logging.getLogger(f"autosched.{__name__}")

MODULES = ("load", "compute", "store")
_PREV = {"load": None, "compute": "load", "store": "compute"}
_NEXT = {"load": "compute", "compute": "store", "store": None}
_LOG_NAME = {"uop": "UOP", "inp": "INP", "wgt": "WGT", "acc": "ACC"}

#: Working memory (bytes) of one chunk of a GEMM / ALU instruction's iterations.
CHUNK_BYTES = 32 << 20
#: Default bound (bytes) of the cache of GEMM / ALU index arrays (least recently used go first).
INDEX_CACHE_BYTES = 256 << 20
_OVERHEAD = 1 << 20  # the Python objects of a run (statistics, token queues, plans)


@dataclass
class SimStats:
    """What a run did: the seed's counters, the cycle count and each module's busy cycles."""

    cycles: int = 0
    inp_load_nbytes: int = 0
    wgt_load_nbytes: int = 0
    acc_load_nbytes: int = 0
    uop_load_nbytes: int = 0
    out_store_nbytes: int = 0
    gemm_counter: int = 0
    alu_counter: int = 0
    busy: dict = field(default_factory=lambda: dict.fromkeys(MODULES, 0))

    def counters(self) -> dict:
        """The seed's counters and cycles as a plain dict."""
        names = ("inp_load_nbytes", "wgt_load_nbytes", "acc_load_nbytes", "uop_load_nbytes")
        names += ("out_store_nbytes", "gemm_counter", "alu_counter", "cycles")
        return {n: getattr(self, n) for n in names}


class Simulator:
    """Run VTA programs on numpy buffers.

    Parameters
    ----------
    spec : VTASpec
        The hardware's shapes and buffer sizes.
    timing : TimingModel, optional
    index_cache_bytes : int
        Bound of the cache of GEMM / ALU index arrays (an instruction whose arrays are larger
        recomputes them each time).
    """

    def __init__(
        self,
        spec: VTASpec | None = None,
        timing: TimingModel | None = None,
        index_cache_bytes: int = INDEX_CACHE_BYTES,
    ):
        self.spec = spec or VTASpec()
        self.timing = timing or TimingModel()
        self.index_cache_bytes = int(index_cache_bytes)
        self._index_cache: OrderedDict = OrderedDict()
        self.index_cache_nbytes = 0

    # ------------------------------------------------------------------ memory
    def _iteration_bytes(self, insn) -> int:
        """Working bytes of one iteration of a GEMM / ALU chunk (gathered operands, products
        and their int64 sums, chunk indices)."""
        s = self.spec
        if isinstance(insn, GemmInsn):
            if insn.reset:
                return 8
            return (
                5 * s.BATCH * s.BLOCK_IN
                + 5 * s.BLOCK_OUT * s.BLOCK_IN
                + 40 * s.BATCH * (s.BLOCK_OUT)
                + 48
            )
        return 40 * s.BATCH * s.BLOCK_OUT + 32

    def _chunk(self, insn) -> int:
        return max(1, CHUNK_BYTES // self._iteration_bytes(insn))

    @staticmethod
    def _iterations(insn) -> int:
        return insn.iter_out * insn.iter_in * max(0, insn.uop_end - insn.uop_bgn)

    @staticmethod
    def _index_bytes(insn) -> int:
        """Bytes of an instruction's cached index arrays."""
        n = Simulator._iterations(insn)
        if isinstance(insn, GemmInsn):
            return 8 * n if insn.reset else 8 * 3 * n + 16 * n  # + the summation order
        return 8 * (1 if insn.use_imm else 2) * n

    def instruction_bytes(self, insn) -> int:
        """An upper bound of the bytes executing ``insn`` allocates (0 for DMA / FINISH, whose
        arrays are views or bounded by the buffers)."""
        if not isinstance(insn, GemmInsn | AluInsn):
            return 0
        n = self._iterations(insn)
        # Besides the kept arrays: sorting them (the summation order, ALU's independence
        # test, ~6 words an iteration) or an ALU with a carried dependence (a Python int per
        # iteration), or one chunk of the work.
        transient = max(48 * n, min(n, self._chunk(insn)) * self._iteration_bytes(insn))
        return self._index_bytes(insn) + transient

    def peak_bytes(self, program: Program) -> int:
        """An upper bound of the memory :meth:`run` of ``program`` allocates, DRAM tensors
        excepted: the on-chip buffers, the micro-op table, a full index cache and the most
        demanding GEMM / ALU instruction."""
        s = self.spec
        buffers = s.uop_depth * 12 + s.inp_depth * s.BATCH * s.BLOCK_IN
        buffers += s.wgt_depth * s.BLOCK_OUT * s.BLOCK_IN + s.acc_depth * s.BATCH * s.BLOCK_OUT * 4
        kept = 0
        worst = 0
        for insn in program.insns:
            if isinstance(insn, GemmInsn | AluInsn):
                worst = max(worst, self.instruction_bytes(insn))
                kept += self._index_bytes(insn)
        uops = np.asarray(program.uops).nbytes
        return _OVERHEAD + buffers + uops + min(kept, self.index_cache_bytes) + worst

    # ------------------------------------------------------------------ public
    def run(self, program: Program, dram: dict) -> SimStats:
        """Execute ``program``; ``dram["out"]`` is written in place. Returns the statistics."""
        s = self.spec
        self._dram = self._bind(dram)
        self._program = program
        self.buffers = {
            "uop": np.zeros((s.uop_depth, 3), np.int32),
            "inp": np.zeros((s.inp_depth, s.BATCH, s.BLOCK_IN), np.int8),
            "wgt": np.zeros((s.wgt_depth, s.BLOCK_OUT, s.BLOCK_IN), np.int8),
            "acc": np.zeros((s.acc_depth, s.BATCH, s.BLOCK_OUT), np.int32),
        }
        self.stats = SimStats()
        # GEMM/ALU index arrays (and GEMM's accumulation order) by loop fields; a uop LOAD
        # changes what they mean, so it empties this cache.
        self._clear_index_cache()
        self._schedule(program.insns)
        return self.stats

    # ------------------------------------------------------------------ DRAM binding
    def _bind(self, dram: dict) -> dict:
        s = self.spec
        shapes = {
            "inp": (np.int8, (s.BATCH, s.BLOCK_IN)),
            "wgt": (np.int8, (s.BLOCK_OUT, s.BLOCK_IN)),
            "acc": (np.int32, (s.BATCH, s.BLOCK_OUT)),
            "out": (np.int8, (s.BATCH, s.BLOCK_OUT)),
        }
        bound = {}
        for name, array in dram.items():
            if name not in shapes:
                raise VTAError(f"dram: unknown memory type {name!r}; use {sorted(shapes)}")
            dtype, elem = shapes[name]
            array = np.asarray(array)
            if array.dtype != dtype or array.size % int(np.prod(elem)):
                raise VTAError(
                    f"dram[{name!r}]: need {np.dtype(dtype).name} with a multiple of "
                    f"{int(np.prod(elem))} values, got {array.dtype} of shape {array.shape}"
                )
            if name == "out" and not array.flags.c_contiguous:
                raise VTAError("dram['out'] must be C-contiguous: STORE writes it in place")
            bound[name] = array.reshape((-1, *elem))
        return bound

    # ------------------------------------------------------------------ the event loop
    def _schedule(self, insns) -> None:
        queues = {m: [] for m in MODULES}
        for index, insn in enumerate(insns):
            module = module_of(insn)
            deps = insn.deps
            for flag, side in (("pop_prev", _PREV), ("push_prev", _PREV)):
                if getattr(deps, flag) and side[module] is None:
                    raise VTAError(f"instruction #{index} ({_name(insn)}): the {module} module "
                                   f"has no previous module, so {flag} is not allowed")  # fmt: skip
            for flag in ("pop_next", "push_next"):
                if getattr(deps, flag) and _NEXT[module] is None:
                    raise VTAError(f"instruction #{index} ({_name(insn)}): the {module} module "
                                   f"has no next module, so {flag} is not allowed")  # fmt: skip
            queues[module].append((index, insn))
        finishes = [i for i, insn in enumerate(insns) if isinstance(insn, FinishInsn)]
        if finishes != [len(insns) - 1]:
            raise VTAError("program: it must end with exactly one FINISH instruction")

        tokens = {(a, b): deque() for a in MODULES for b in MODULES}
        # Per module: (index, insn, queue it pops from or None (x2), queue it pushes to or None
        # (x2)), so that the hot loop below does no lookups.
        plans = []
        for m in MODULES:
            plan = []
            for index, insn in queues[m]:
                d = insn.deps
                plan.append((
                    index, insn,
                    tokens[(_PREV[m], m)] if d.pop_prev else None,
                    tokens[(_NEXT[m], m)] if d.pop_next else None,
                    tokens[(m, _PREV[m])] if d.push_prev else None,
                    tokens[(m, _NEXT[m])] if d.push_next else None,
                ))  # fmt: skip
            plans.append(plan)
        pc = [0, 0, 0]
        t_free = [0, 0, 0]
        busy = [0, 0, 0]
        while True:
            best, best_start, best_module = None, 0, 0
            for m in (0, 1, 2):
                if pc[m] == len(plans[m]):
                    continue
                entry = plans[m][pc[m]]
                start = t_free[m]
                q = entry[2]
                if q is not None:
                    if not q:
                        continue
                    start = max(start, q[0])
                q = entry[3]
                if q is not None:
                    if not q:
                        continue
                    start = max(start, q[0])
                if best is None or start < best_start:
                    best, best_start, best_module = entry, start, m
            if best is None:
                if all(pc[m] == len(plans[m]) for m in (0, 1, 2)):
                    break
                raise VTAError("VTA deadlock: " + "; ".join(
                    self._waiting(m, *queues[m][pc[k]], tokens)
                    for k, m in enumerate(MODULES) if pc[k] < len(plans[k])
                ) + " (check the push/pop flags: every pop needs an earlier push)")  # fmt: skip
            index, insn, pop_a, pop_b, push_a, push_b = best
            if pop_a is not None:
                pop_a.popleft()
            if pop_b is not None:
                pop_b.popleft()
            try:
                cycles = self._execute(insn)
            except VTAError as e:
                raise VTAError(f"instruction #{index} ({_name(insn)}): {e}") from None
            end = best_start + cycles
            m = best_module
            t_free[m] = end
            busy[m] += cycles
            if push_a is not None:
                push_a.append(end)
            if push_b is not None:
                push_b.append(end)
            pc[m] += 1
        self.stats.busy = dict(zip(MODULES, busy, strict=True))
        self.stats.cycles = max(t_free)

    @staticmethod
    def _waiting(module, index, insn, tokens) -> str:
        wants = [
            f"a token from {other} ({flag})"
            for flag, other in (("pop_prev", _PREV[module]), ("pop_next", _NEXT[module]))
            if getattr(insn.deps, flag) and not tokens[(other, module)]
        ]
        return f"{module} waits at instruction #{index} ({_name(insn)}) for {' and '.join(wants)}"

    # ------------------------------------------------------------------ instruction semantics
    def _execute(self, insn) -> int:
        if isinstance(insn, MemInsn):
            return self._load(insn) if insn.opcode == "LOAD" else self._store(insn)
        if isinstance(insn, GemmInsn):
            return self._gemm(insn)
        if isinstance(insn, AluInsn):
            return self._alu(insn)
        return 1  # FINISH

    def _sram_range(self, buffer: str, base: int, n: int) -> slice:
        depth = len(self.buffers[buffer])
        if base < 0 or base + n > depth:
            raise VTAError(
                f"{buffer} buffer overflow: entries [{base}, {base + n}) but the {buffer} buffer "
                f"has {depth} (LOG_{_LOG_NAME[buffer]}_BUFF_SIZE); use smaller tiles"
            )
        return slice(base, base + n)

    def _dram_rows(self, insn: MemInsn, source: np.ndarray, name: str) -> np.ndarray:
        """A ``(y_size, x_size, ...)`` view of the DRAM entries ``insn`` reads or writes."""
        first, last = insn.dram_base, insn.dram_base + (insn.y_size - 1) * insn.x_stride
        last += insn.x_size - 1
        if insn.y_size < 1 or insn.x_size < 1 or insn.x_stride < 0:
            raise VTAError(f"empty or negative DMA: y_size={insn.y_size}, x_size={insn.x_size}")
        if first < 0 or last >= len(source):
            raise VTAError(
                f"DRAM {name!r} read/write of entries [{first}, {last}] outside its "
                f"{len(source)} entries"
            )
        if insn.y_size == 1 or insn.x_stride == insn.x_size:  # contiguous: a plain view
            n = insn.y_size * insn.x_size
            return source[first : first + n].reshape(insn.y_size, insn.x_size, *source.shape[1:])
        step = source.strides[0]
        return np.lib.stride_tricks.as_strided(
            source[first:], (insn.y_size, insn.x_size, *source.shape[1:]),
            (insn.x_stride * step, step, *source.strides[1:]), writeable=True,
        )  # fmt: skip

    def _load(self, insn: MemInsn) -> int:
        kind = insn.memory_type
        rows, cols = insn.sram_rows, insn.sram_cols
        where = self._sram_range(kind, insn.sram_base, rows * cols)
        if kind == "uop":
            source = self._program.uops
        elif kind in self._dram:
            source = self._dram[kind]
        else:
            raise VTAError(f"LOAD {kind}: no DRAM tensor bound to {kind!r}")
        rows_in = self._dram_rows(insn, source, kind)
        buf = self.buffers[kind]
        block = buf[where].reshape(rows, cols, *buf.shape[1:])
        if (rows, cols) != (insn.y_size, insn.x_size):
            block[...] = 0  # the padding
        y0, x0 = insn.y_pad_0, insn.x_pad_0
        block[y0 : y0 + insn.y_size, x0 : x0 + insn.x_size] = rows_in
        if kind == "uop":
            self._clear_index_cache()
        n = insn.y_size * insn.x_size
        entry_bytes = UOP_BYTES if kind == "uop" else getattr(self.spec, f"{kind}_elem_bytes")
        nbytes = n * entry_bytes
        counter = f"{kind}_load_nbytes"
        setattr(self.stats, counter, getattr(self.stats, counter) + nbytes)
        return self.timing.dma_cycles(nbytes, rows * cols - n)

    def _store(self, insn: MemInsn) -> int:
        if insn.y_pad_0 or insn.y_pad_1 or insn.x_pad_0 or insn.x_pad_1:
            raise VTAError("STORE cannot pad; set the pad fields to 0")
        if "out" not in self._dram:
            raise VTAError("STORE: no DRAM tensor bound to 'out'")
        n = insn.y_size * insn.x_size
        where = self._sram_range("acc", insn.sram_base, n)
        rows_out = self._dram_rows(insn, self._dram["out"], "out")
        # Keep the low 8 bits, as VTA's int8 copy of the accumulator does.
        rows_out[...] = self.buffers["acc"][where].astype(np.int8).reshape(rows_out.shape)
        nbytes = n * self.spec.out_elem_bytes
        self.stats.out_store_nbytes += nbytes
        return self.timing.dma_cycles(nbytes)

    def _clear_index_cache(self) -> None:
        self._index_cache.clear()
        self.index_cache_nbytes = 0

    def _indices(self, insn, columns, sum_order: bool = False):
        """(dst, src[, wgt]) buffer indices of every iteration of ``insn``'s loops, flat, plus
        (with ``sum_order``) :func:`_sum_order` of dst; cached, least recently used first out."""
        key = (insn.uop_bgn, insn.uop_end, insn.iter_out, insn.iter_in, tuple(columns))
        cache = self._index_cache
        entry = cache.get(key)
        if entry is not None:
            cache.move_to_end(key)
            return entry
        entry = self._compute_indices(insn, columns)
        if sum_order:
            entry.extend(_sum_order(entry[0]))
        nbytes = sum(a.nbytes for a in entry)
        if nbytes <= self.index_cache_bytes:
            while cache and self.index_cache_nbytes + nbytes > self.index_cache_bytes:
                _, old = cache.popitem(last=False)
                self.index_cache_nbytes -= sum(a.nbytes for a in old)
            cache[key] = entry
            self.index_cache_nbytes += nbytes
        return entry

    def _compute_indices(self, insn, columns):
        if not 0 <= insn.uop_bgn < insn.uop_end:
            raise VTAError(f"empty or negative uop range [{insn.uop_bgn}, {insn.uop_end})")
        uops = self.buffers["uop"][
            self._sram_range("uop", insn.uop_bgn, insn.uop_end - insn.uop_bgn)
        ]
        i = np.arange(insn.iter_out)[:, None, None]
        j = np.arange(insn.iter_in)[None, :, None]
        out = []
        for col, (name, f_out, f_in) in enumerate(columns):
            idx = (uops[None, None, :, col] + i * f_out + j * f_in).ravel()
            depth = len(self.buffers[name])
            if idx.size and (idx.min() < 0 or idx.max() >= depth):
                raise VTAError(
                    f"{name} buffer overflow: index {int(idx.max())} but the {name} buffer has "
                    f"{depth} entries (LOG_{_LOG_NAME[name]}_BUFF_SIZE)"
                )
            out.append(idx)
        return out

    def _gemm(self, insn: GemmInsn) -> int:
        acc = self.buffers["acc"]
        columns = [("acc", insn.dst_factor_out, insn.dst_factor_in)]
        if not insn.reset:
            columns += [
                ("inp", insn.src_factor_out, insn.src_factor_in),
                ("wgt", insn.wgt_factor_out, insn.wgt_factor_in),
            ]
        idx = self._indices(insn, columns, sum_order=not insn.reset)
        n = idx[0].size
        if insn.reset:
            acc[idx[0]] = 0
        else:
            _, src, wgt, order, dst_sorted = idx
            # In chunks of iterations taken in dst order; the int32 sums wrap, so adding a
            # dst's products over two chunks gives the same bits as over one.
            step = self._chunk(insn)
            for a in range(0, n, step):
                self._gemm_chunk(src, wgt, order[a : a + step], dst_sorted[a : a + step])
            self.stats.gemm_counter += n
        return self.timing.gemm_cycles(n)

    def _gemm_chunk(self, src, wgt, pos, d) -> None:
        """Add the products of iterations ``pos`` (their dst ``d``, sorted) into acc; a
        function of its own so that a chunk's arrays are freed before the next one's."""
        acc = self.buffers["acc"]
        # int8 x int8 summed over BLOCK_IN fits float32's 24-bit mantissa exactly.
        x = self.buffers["inp"][src[pos]].astype(np.float32)  # (n, BATCH, BLOCK_IN)
        w = self.buffers["wgt"][wgt[pos]].astype(np.float32)  # (n, BLOCK_OUT, BLOCK_IN)
        prod = np.einsum("nbi,noi->nbo", x, w).astype(np.int32)
        del x, w
        starts = np.flatnonzero(np.concatenate(([True], d[1:] != d[:-1])))
        sums = np.add.reduceat(prod, starts, axis=0, dtype=np.int64)
        del prod
        targets = d[starts]
        acc[targets] = (acc[targets].astype(np.int64) + sums).astype(np.int32)

    def _alu(self, insn: AluInsn) -> int:
        acc = self.buffers["acc"]
        columns = [("acc", insn.dst_factor_out, insn.dst_factor_in)]
        if not insn.use_imm:
            columns.append(("acc", insn.src_factor_out, insn.src_factor_in))
        idx = self._indices(insn, columns)
        dst = idx[0]
        n = dst.size
        if not _independent(dst, None if insn.use_imm else idx[1]):
            # An iteration reads what an earlier one wrote: run them in order, as the hardware.
            for k, d in enumerate(dst.tolist()):
                b = np.int32(insn.imm) if insn.use_imm else acc[idx[1][k]]
                acc[d] = _alu_op(insn.alu_opcode, acc[d], b)
        else:  # independent iterations: any grouping gives the same result
            step = self._chunk(insn)
            for a in range(0, n, step):
                d = dst[a : a + step]
                operand = np.int32(insn.imm) if insn.use_imm else acc[idx[1][a : a + step]]
                acc[d] = _alu_op(insn.alu_opcode, acc[d], operand)
                del operand  # before the next chunk's
        self.stats.alu_counter += n
        return self.timing.alu_cycles(n)


def _sum_order(dst: np.ndarray):
    """How to sum products into ``acc[dst]`` with repeated ``dst``: (the iterations in dst
    order, dst in that order)."""
    order = np.argsort(dst, kind="stable")
    return [order, dst[order]]


def _independent(dst: np.ndarray, src: np.ndarray | None) -> bool:
    """No iteration writes an entry another one reads or writes (so all may run at once)."""
    if len(np.unique(dst)) != len(dst):
        return False
    if src is None or np.array_equal(dst, src):
        return True
    return not np.intersect1d(dst, src).size


def _alu_op(op: str, a: np.ndarray, b) -> np.ndarray:
    if op == "MIN":
        return np.minimum(a, b)
    if op == "MAX":
        return np.maximum(a, b)
    if op == "ADD":
        return (a.astype(np.int64) + b).astype(np.int32)  # wraps like the 32-bit adder
    b = np.asarray(b, np.int32)
    shifted_right = np.right_shift(a, np.clip(b, 0, 31))
    shifted_left = np.left_shift(a, np.clip(-b, 0, 31))
    return np.where(b >= 0, shifted_right, shifted_left).astype(np.int32)


def _name(insn) -> str:
    if isinstance(insn, MemInsn):
        return f"{insn.opcode} {insn.memory_type}"
    if isinstance(insn, AluInsn):
        return f"ALU {insn.alu_opcode}"
    if isinstance(insn, GemmInsn):
        return "GEMM reset" if insn.reset else "GEMM"
    return insn.opcode
