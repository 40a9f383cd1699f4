"""Per-store features of a lowered loop program: Ansor's 164-float rows, plus 6 for tensor cores.

One row per distinct buffer that the program stores to (``feature.cc`` in TVM). The layout is
:data:`FEATURE_NAMES` (ansor-notes section 6.2): 57 computation values, 5 buffer-access groups of
18, a 10-point arithmetic-intensity curve, 4 allocation values and 3 outer-scope values. All
values but one-hot entries, ``is_gpu`` and the intensity curve (already a ratio of log2 values
in TVM) are scaled by ``slog(x) = sign(x) * log2(|x| + 1)``. Four columns after TVM's 164 describe
tensor-core (wmma) nests: ``tensor_core`` (1 for a store inside a loop marked
``("pragma", "tensor_core")``), the fragment's M*N*K (4096 for fp16 / bf16, 2048 for float32
as TF32: the precision the cost model sees), the accumulator's 16x16 fragments per warp and the
warps per block; they are 0 for every other store. Two more describe the software pipeline
(:mod:`tensorir.passes.double_buffer`) around a store: ``pipeline_stages`` (N, of the pipelined
k-tile loop or its prologue, 0 outside one) and ``pipeline_shared_bytes`` (the bytes of the
shared buffers allocated around it, N copies of each staged tile: what bounds the blocks per
SM and so the occupancy that deeper pipelines trade for latency).

The rows are computed in one walk over the loop nest. Each loop pushes a frame with its
variable, extent and kind; each store linearizes its indices once
(:mod:`autosched.cost_model.feature_index`) and derives strides and touched regions from the
coefficients, without simplifying or substituting expressions.

Deviations from TVM, and why
----------------------------
- Indices are flat, so strides are the flat coefficient of a loop variable (TVM multiplies a
  per-dimension coefficient by the shape stride, which gives the same number for row-major
  buffers). Touched regions merge variables of equal stride and are capped by the index hull
  and the buffer size, instead of per-dimension interval products (a hull alone would count
  ``A[i*64 + k]`` for 8x4 iterations as 452 elements instead of 32).
- ``unique_lines`` divides by the contiguous run of the region (stride-1 variable, then
  strides that continue the run) instead of TVM's "innermost dimension covered in full".
- ``reduce_ratio`` in ``lines`` multiplies the extents of the skipped inner loops; TVM
  multiplies the innermost extent once per skipped loop (a bug).
- ``alloc_inner_prod`` is the store's ``outer_prod`` over the allocation's (TVM reads the
  store's value before any store is seen, so it is always 0 there).
- Loops that our lowering's ``auto_unroll_max_step`` pass marked "unrolled" count as unrolled
  (TVM extracts features before that pass, so only explicit unrolls count).
- ``IfThenElse`` expressions (guarded loads) count as ``select_op``; TVM counts the
  ``if_then_else`` intrinsic as a pure call (a math function).
- Thread-bound loops (blockIdx/threadIdx) and vthreads are loops of the nest, as TVM's fake
  For nodes are; they set the GPU lengths and are not parallel loops.
"""

from __future__ import annotations

import math

import numpy as np

from tensorir.dtype import is_float, itemsize
from tensorir.expr import Binary, Call, Cast, Const, IfThenElse, Not, Select, Var
from tensorir.loops import Allocate, CheckedIndex, For, If, Load, Program, Seq, Store
from tensorir.passes.double_buffer import PIPELINE_PROLOGUE, pipeline_stages
from tensorir.passes.tensor_core import FRAGMENT_SHAPES

from ..suppressed import suppressed
from .feature_index import contiguous_elems, linearize, region_size

__all__ = [
    "FEATURE_NAMES",
    "N_FEATURES",
    "lowered_features",
    "program_features",
    "state_features",
]

_POS = ("kPosNone", "kPosInnerSpatial", "kPosMiddleSpatial", "kPosOuterSpatial",
        "kPosInnerReduce", "kPosMiddleReduce", "kPosOuterReduce", "kPosMixed")  # fmt: skip
_OPS = ("float_mad", "float_addsub", "float_mul", "float_divmod", "float_cmp", "float_mathfunc",
        "float_otherfunc", "int_mad", "int_addsub", "int_mul", "int_divmod", "int_cmp",
        "int_mathfunc", "int_otherfunc", "bool_op", "select_op")  # fmt: skip
_BUF = ("acc_type.kRead", "acc_type.kWrite", "acc_type.kReadWrite", "bytes", "unique_bytes",
        "lines", "unique_lines", "reuse_type.kLoopMultipleRead",
        "reuse_type.kSerialMultipleReadWrite", "reuse_type.kNoReuse", "reuse_dis_iter",
        "reuse_dis_bytes", "reuse_ct", "bytes_d_reuse_ct", "unique_bytes_d_reuse_ct",
        "lines_d_reuse_ct", "unique_lines_d_reuse_ct", "stride")  # fmt: skip
N_BUFFERS = 5
N_CURVE = 10


def _names() -> tuple[list[str], np.ndarray]:
    names: list[str] = list(_OPS)
    raw = [False] * len(_OPS)  # True: not slog-scaled
    for ann in ("vec", "unroll", "parallel"):
        names += [f"{ann}_num", f"{ann}_prod", f"{ann}_len"]
        names += [f"{ann}_type.{p}" for p in _POS]
        raw += [False] * 3 + [True] * 8
    names += ["is_gpu", "blockIdx_x_len", "blockIdx_y_len", "blockIdx_z_len", "threadIdx_x_len",
              "threadIdx_y_len", "threadIdx_z_len", "vthread_len"]  # fmt: skip
    raw += [True] + [False] * 7
    for b in range(N_BUFFERS):
        names += [f"B{b}.{n}" for n in _BUF]
        raw += [n.startswith(("acc_type", "reuse_type")) for n in _BUF]
    names += [f"arith_intensity_curve_{i}" for i in range(N_CURVE)]
    raw += [True] * N_CURVE
    names += ["alloc_size", "alloc_prod", "alloc_outer_prod", "alloc_inner_prod"]
    names += ["outer_prod", "num_loops", "auto_unroll_max_step"]
    raw += [False] * 7
    # Tensor cores (not in TVM's 164): zero for every store outside a tensor_core nest.
    names += ["tensor_core", "tc_fragment_mnk", "tc_accumulators", "tc_warps"]
    raw += [True, False, False, False]
    # Software pipelines (double_buffer pass): zero for every store outside one.
    names += ["pipeline_stages", "pipeline_shared_bytes"]
    raw += [False, False]
    return names, np.array(raw)


FEATURE_NAMES, _RAW_MASK = _names()
FEATURE_NAMES = tuple(FEATURE_NAMES)
N_FEATURES = len(FEATURE_NAMES)
_SLOG_COLS = np.flatnonzero(~_RAW_MASK)
_IDX = {n: i for i, n in enumerate(FEATURE_NAMES)}
_COMP = 57  # start of the buffer groups
_CURVE = _COMP + N_BUFFERS * len(_BUF)
_ALLOC = _CURVE + N_CURVE
_TC = _ALLOC + 7  # the tensor-core columns
_PIPE = _TC + 4  # the software-pipeline columns
_THREAD_COL = {t: _IDX[t.replace(".", "_") + "_len"] for t in
               ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y",
                "threadIdx.z")}  # fmt: skip

# Access types and reuse types (indices into the one-hots).
_READ, _WRITE, _READ_WRITE = 0, 1, 2
_LOOP_READ, _SERIAL_RW, _NO_REUSE = 0, 1, 2

_ARITH_OP = {"+": 1, "-": 1, "*": 2, "/": 3, "floordiv": 3, "floormod": 3, "min": 4, "max": 4}
_CMP_OPS = {"<", "<=", ">", ">=", "==", "!="}


def slog(x):
    """``sign(x) * log2(|x| + 1)``, the scaling of every non-one-hot feature."""
    return np.sign(x) * np.log2(np.abs(x) + 1)


# --------------------------------------------------------------------------- op counting


def _count_ops(e, counts: list, loads: list) -> None:
    """Add the ops of ``e`` to ``counts`` (16 slots, _OPS order) and collect its Loads.

    As TVM's MathOpCounter: float vs int by the left operand's dtype, index arithmetic inside
    loads included, casts free.
    """
    stack = [e]
    while stack:
        node = stack.pop()
        if isinstance(node, Binary):
            op = node.op
            fl = is_float(node.a.dtype)
            if op in _ARITH_OP:
                counts[_ARITH_OP[op] + (0 if fl else 7)] += 1
            elif op in _CMP_OPS:
                counts[4 if fl else 11] += 1
            else:  # && ||
                counts[14] += 1
            stack.append(node.a)
            stack.append(node.b)
        elif isinstance(node, Load):
            loads.append(node)
            stack.append(node.index)
        elif isinstance(node, Var | Const):
            pass
        elif isinstance(node, Cast):
            stack.append(node.value)
        elif isinstance(node, Select | IfThenElse):
            counts[15] += 1
            stack += (node.cond, node.t, node.f)
        elif isinstance(node, Call):
            counts[5 if is_float(node.dtype) else 12] += 1
            stack.extend(node.args)
        elif isinstance(node, Not):
            counts[14] += 1
            stack.append(node.a)
        elif isinstance(node, CheckedIndex):  # one unsigned compare against the extent
            counts[11] += 1
            stack.append(node.index)


# --------------------------------------------------------------------------- the walk


class _Loop:
    __slots__ = ("extent", "kind", "tag", "touch", "touch_bytes", "var")

    def __init__(self, f: For):
        self.var = f.var
        self.extent = f.extent
        self.kind = f.kind
        self.tag = f.thread_tag
        # TVM's for_touch_regions: buffer -> one touched-bytes entry per store under this loop
        self.touch: dict = {}
        self.touch_bytes = 0.0


class _Extractor:
    def __init__(self, program: Program, cache_line_bytes: int):
        self.line = cache_line_bytes
        self.loops: list[_Loop] = []
        self.outer_prod = 1
        self.unroll_step = 0
        self.is_gpu = False
        self.threads = {}  # thread tag -> extent of the enclosing bound loop
        self.vthread = 1
        self.tensor_core = False  # inside a loop marked ("pragma", "tensor_core")
        self.fragment_mnk = 16 * 16 * 16  # of the last mma nest (its operand dtype's shape)
        self.stages = 0  # of the enclosing pipelined loop or prologue (0: none)
        self.shared_bytes = 0  # of the shared buffers allocated around the statement
        self.rows: dict = {}  # buffer -> row of N_FEATURES raw floats; insertion = first store
        self.alloc: dict = {}  # buffer -> (size bytes, elements, outer_prod at allocation)
        for b in program.workspaces:  # global intermediates live at the root (TVM realizes them)
            self.alloc[b] = (b.nbytes, b.size, 1)

    def visit(self, s) -> None:
        if isinstance(s, Store):
            self.store(s)
        elif isinstance(s, For):
            self.visit_for(s)
        elif isinstance(s, Seq):
            for x in s.stmts:
                self.visit(x)
        elif isinstance(s, Allocate):
            self.alloc[s.buffer] = (s.buffer.nbytes, s.buffer.size, self.outer_prod)
            shared = s.buffer.nbytes if s.buffer.scope == "shared" else 0
            self.shared_bytes += shared
            self.visit(s.body)
            self.shared_bytes -= shared
        elif isinstance(s, If):
            self.visit(s.then)
            if s.else_ is not None:
                self.visit(s.else_)

    def visit_for(self, f: For) -> None:
        old_step, old_threads, old_vthread = self.unroll_step, self.threads, self.vthread
        old_tc, old_stages = self.tensor_core, self.stages
        for key, val in f.annotations:
            if key == "auto_unroll_max_step":
                self.unroll_step = val
            elif key == "pragma" and val == "tensor_core":
                self.tensor_core = True
            elif key == PIPELINE_PROLOGUE:
                self.stages = val
        self.stages = pipeline_stages(f) or self.stages
        if f.kind == "thread":
            self.is_gpu = True
            self.threads = {**self.threads, f.thread_tag: f.extent}
        elif f.kind == "vthread":
            self.is_gpu = True
            self.vthread *= f.extent
        self.loops.append(_Loop(f))
        self.outer_prod *= f.extent
        self.visit(f.body)
        self.outer_prod //= f.extent
        self.loops.pop()
        self.unroll_step, self.threads, self.vthread = old_step, old_threads, old_vthread
        self.tensor_core, self.stages = old_tc, old_stages

    # ----------------------------------------------------------------------- one store

    def store(self, st: Store) -> None:
        buf = st.buffer
        row = self.rows.get(buf)
        if row is None:
            row = self.rows[buf] = [0.0] * N_FEATURES
        counts = [0] * 16
        loads: list = []
        _count_ops(st.value, counts, loads)
        op = self.outer_prod
        for i, c in enumerate(counts):  # op counts accumulate over the stores of a buffer
            row[i] += c * op
        self.annotation_features(row)
        # accesses: buffer -> [access type, [linear forms]], write first
        acc: dict = {buf: [_WRITE, [linearize(st.index)]]}
        for ld in loads:
            entry = acc.get(ld.buffer)
            if entry is None:
                acc[ld.buffer] = [_READ, [linearize(ld.index)]]
            else:
                if ld.buffer is buf:
                    entry[0] = _READ_WRITE
                lf = linearize(ld.index)
                if not any(_same(lf, x) for x in entry[1]):
                    entry[1].append(lf)
        float_ops = sum(counts[:7])
        self.access_features(row, acc, float_ops)
        a = self.alloc.get(buf)
        if a is not None:
            size_bytes, elems, outer = a
            row[_ALLOC:_ALLOC + 4] = [size_bytes, elems * outer, outer, op / outer]  # fmt: skip
        row[_ALLOC + 4:_ALLOC + 7] = [op, len(self.loops), self.unroll_step]  # fmt: skip
        if self.tensor_core:
            # The accumulator: the local buffer stored (mma) or read (fragment store).
            accs = [b for b in (buf, *(ld.buffer for ld in loads)) if b.scope == "local"]
            frags = accs[0].size // 256 if accs else 0
            warps = self.threads.get("threadIdx.y", 1) * self.threads.get("threadIdx.z", 1)
            mnk = self.tensor_core_mnk(buf, loads)
            row[_TC:_TC + 4] = [1.0, mnk, frags, warps]  # fmt: skip
        if self.stages:
            row[_PIPE:_PIPE + 2] = [self.stages, self.shared_bytes]  # fmt: skip

    def tensor_core_mnk(self, buf, loads: list) -> int:
        """The fragment's M*N*K: the mma nest (a local accumulator updated from itself) reads it
        off its operands' dtype (FRAGMENT_SHAPES); the store nest after it keeps that value."""
        if buf.scope == "local" and any(ld.buffer is buf for ld in loads):
            operands = [ld.buffer.dtype for ld in loads if ld.buffer.scope != "local"]
            shape = FRAGMENT_SHAPES.get(operands[0]) if operands else None
            if shape is not None:
                self.fragment_mnk = shape.m * shape.n * shape.k
        return self.fragment_mnk

    def annotation_features(self, row: list) -> None:
        base = 16
        for kind in ("vectorized", "unrolled", "parallel"):
            exts = [lp.extent for lp in self.loops if lp.kind == kind]
            row[base:base + 11] = [0.0] * 11  # fmt: skip
            if exts:
                row[base] = len(exts)
                row[base + 1] = math.prod(exts)
                row[base + 2] = exts[-1]
                row[base + 3 + 7] = 1.0  # kPosMixed: positions are not classified (as TVM)
            else:
                row[base + 3] = 1.0  # kPosNone
            base += 11
        row[base] = 1.0 if self.is_gpu else 0.0
        for tag, col in _THREAD_COL.items():
            row[col] = self.threads.get(tag, 1)
        row[base + 7] = self.vthread

    def access_features(self, row: list, acc: dict, float_ops: int) -> None:
        loops = self.loops
        n = len(loops)
        outer_prod = self.outer_prod
        # Touched elements per buffer at every loop level, innermost level first.
        free: dict = {}
        sizes = {b: [] for b in acc}
        groups_outer: dict = {}
        mem_list, ops_list = [], []
        cur_ops = float(float_ops)
        for lvl in range(n - 1, -1, -1):
            lp = loops[lvl]
            free[lp.var] = lp.extent - 1
            mem = 0.0
            for b, (_, lfs) in acc.items():
                size, groups = _buffer_region(lfs, free, b.size)
                eb = itemsize(b.dtype)
                sizes[b].append(size)
                lp.touch.setdefault(b, []).append(size * eb)
                lp.touch_bytes += size * eb
                mem += size * eb
                if lvl == 0:
                    groups_outer[b] = groups
            mem_list.append(math.log2(mem))
            cur_ops *= lp.extent
            ops_list.append(math.log2(cur_ops) if cur_ops > 0 else -math.inf)

        feats = []
        for b, (acc_type, lfs) in acc.items():
            eb = itemsize(b.dtype)
            bytes_ = outer_prod * eb
            if n == 0:
                unique_bytes, stride, lines, unique_lines = eb, 0, 1.0, 1.0
            else:
                unique_bytes = sizes[b][-1] * eb
                stride, reduce_ratio, i = 0, 1, n - 1
                while i >= 0:
                    stride = _min_nonzero(lfs, loops[i].var)
                    if stride:
                        break
                    reduce_ratio *= loops[i].extent
                    i -= 1
                lines = max(1.0, outer_prod / reduce_ratio * min(1.0, stride * eb / self.line))
                if i != n - 1:
                    stride = 0  # the innermost loop does not move through this buffer
                n_cont = contiguous_elems(groups_outer[b]) * eb
                unique_lines = max(1.0, unique_bytes / min(n_cont, self.line))
            rtype, dis_iter, dis_bytes, reuse_ct = self.reuse(b, lfs)
            if reuse_ct > 0.5:
                dr = [bytes_ / reuse_ct, unique_bytes / reuse_ct, lines / reuse_ct,
                      unique_lines / reuse_ct]  # fmt: skip
            else:  # no reuse: TVM's magic factor 2
                dr = [bytes_ * 2, unique_bytes * 2, lines * 2, unique_lines * 2]
            f = [0.0] * 18
            f[acc_type] = 1.0
            f[3:7] = [bytes_, unique_bytes, lines, unique_lines]
            f[7 + rtype] = 1.0
            f[10:13] = [dis_iter, dis_bytes, reuse_ct]
            f[13:17] = dr
            f[17] = stride
            feats.append((lines, bytes_, b.name, f))
        feats.sort(key=lambda t: (-t[0], -t[1], t[2]))
        flat = [0.0] * (N_BUFFERS * 18)
        for k, (_, _, _, f) in enumerate(feats[:N_BUFFERS]):
            flat[k * 18:(k + 1) * 18] = f  # fmt: skip
        row[_COMP:_CURVE] = flat
        row[_CURVE:_ALLOC] = _intensity_curve(ops_list, mem_list, cur_ops)

    def reuse(self, b, lfs) -> tuple[int, float, float, float]:
        """TVM's ComputeReuse: walk loops inside out while they move through ``b``."""
        dis_iter, dis_bytes = 1.0, 0.0
        for lvl in range(len(self.loops) - 1, -1, -1):
            lp = self.loops[lvl]
            if any(lf.touches(lp.var) for lf in lfs):
                dis_iter *= lp.extent
                dis_bytes = lp.touch_bytes
            else:
                if dis_bytes == 0:  # reuse at the innermost loop: one iteration of its body
                    dis_bytes = lp.touch_bytes / lp.extent
                return _LOOP_READ, dis_iter, dis_bytes, float(lp.extent)
            serial = len(lp.touch[b]) - 1
            if serial > 0:  # several stores under this loop access b
                dis = min(lp.touch[b]) / itemsize(b.dtype)
                return _SERIAL_RW, dis / lp.extent, lp.touch_bytes / lp.extent, float(serial)
        return _NO_REUSE, 0.0, 0.0, 0.0


def _same(a, b) -> bool:
    return a.same_shape(b) and a.const == b.const


def _min_nonzero(lfs, var) -> int:
    best = 0
    for lf in lfs:
        s = lf.stride(var)
        if s and (best == 0 or s < best):
            best = s
    return best


def _buffer_region(lfs, free: dict, limit: int) -> tuple[int, dict]:
    """Elements of one buffer touched by all its accesses in a store (a union estimate)."""
    size, lo, hi, groups = region_size(lfs[0], free, limit)
    if len(lfs) == 1:
        return size, groups
    total, glo, ghi, shifted = size, lo, hi, True
    for lf in lfs[1:]:
        s, l2, h2, _ = region_size(lf, free, limit)
        glo, ghi = min(glo, l2), max(ghi, h2)
        total += s
        shifted = shifted and lf.same_shape(lfs[0])
    if shifted:  # the same pattern at constant offsets (stencils): the region slides
        consts = [lf.const for lf in lfs]
        total = size + max(consts) - min(consts)
    return min(total, ghi - glo + 1, limit), groups


def _intensity_curve(ops_list, mem_list, total_ops) -> list:
    """TVM's 10-point piecewise-linear curve of log2(ops) / log2(bytes) over log2(ops)."""
    if total_ops <= 0 or not ops_list:
        return [0.0] * N_CURVE
    out, pt = [], 0
    last = ops_list[-1]
    for i in range(N_CURVE):
        x = last * (i + 1) / N_CURVE
        while ops_list[pt] < x - 1e-4:
            pt += 1
        cur = ops_list[pt] / mem_list[pt] if mem_list[pt] else 0.0
        if pt == 0:
            out.append(cur)
        else:
            prev = ops_list[pt - 1] / mem_list[pt - 1] if mem_list[pt - 1] else 0.0
            slope = (cur - prev) / (ops_list[pt] - ops_list[pt - 1])
            out.append(prev + slope * (x - ops_list[pt - 1]))
    return out


# --------------------------------------------------------------------------- public API


def program_features(program: Program, cache_line_bytes: int = 64) -> np.ndarray:
    """The feature rows of a lowered program.

    Parameters
    ----------
    program : tensorir.loops.Program
    cache_line_bytes : int
        Cache line size used by the ``lines`` features.

    Returns
    -------
    np.ndarray
        ``(n_stored_buffers, N_FEATURES)`` float32, one row per distinct stored buffer in order of
        first store; columns as :data:`FEATURE_NAMES`.
    """
    ex = _Extractor(program, cache_line_bytes)
    ex.visit(program.body)
    if not ex.rows:
        return np.zeros((0, N_FEATURES), np.float32)
    out = np.array(list(ex.rows.values()), dtype=np.float64)
    out[:, _SLOG_COLS] = slog(out[:, _SLOG_COLS])
    return out.astype(np.float32)


def state_features(task, state) -> np.ndarray:
    """Lower ``state`` for ``task`` and extract its feature rows.

    Returns
    -------
    np.ndarray
        ``(n, N_FEATURES)`` float32; empty when the state does not lower (or, on a GPU target,
        fails the GPU verifier), which the cost model scores as ``-inf``.
    """
    limits = task.hardware_params.as_limits() if task.target.is_gpu else None
    return lowered_features(state, limits, task.hardware_params.cache_line_bytes or 64)


def lowered_features(state, gpu_limits: dict | None, cache_line_bytes: int) -> np.ndarray:
    """Lower ``state``, verify it against ``gpu_limits`` (GPU targets; None on the CPU) and
    extract its rows; none when it does not lower or fails the verifier. The core of
    :func:`state_features`, also run by the parallel workers of
    :mod:`autosched.cost_model.feature_pool`."""
    from tensorir.lower import lower

    try:
        # Network tasks on the CPU are measured with their weights in loop order: so are the
        # features (no-op for DAGs without layout-free placeholders, e.g. every GPU task).
        program = lower(state, layout_rewrite=True)
        if gpu_limits is not None:
            from tensorir.passes.verify_gpu import verify_gpu_program

            verify_gpu_program(program, gpu_limits)
    except ValueError:  # an invalid state (LowerError, GPUVerifyError, ...) is scored -inf
        return np.zeros((0, N_FEATURES), np.float32)
    except Exception:  # noqa: BLE001 - a bug: scored -inf too, but counted (strict: raised)
        suppressed("cost-model features")
        return np.zeros((0, N_FEATURES), np.float32)
    return program_features(program, cache_line_bytes)
