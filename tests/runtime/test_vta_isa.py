"""The simulated VTA: each instruction against numpy, the encoding, buffer overflow, deadlock."""

import numpy as np
import pytest

from runtime.vta import (
    AluInsn,
    Deps,
    FinishInsn,
    GemmInsn,
    MemInsn,
    Program,
    Simulator,
    TimingModel,
    VTAError,
    VTASpec,
    decode_program,
    encode_program,
    from_dict,
    to_dict,
)

SPEC = VTASpec()
RNG = np.random.default_rng(0)
NO_DEPS = Deps()
NO_UOPS = np.zeros((0, 3), np.int32)


def _int8(*shape):
    return RNG.integers(-128, 128, size=shape, dtype=np.int8)


def _load(kind, sram, dram, y, x, stride, pads=(0, 0, 0, 0), deps=NO_DEPS):
    return MemInsn("LOAD", kind, sram, dram, y, x, stride, *pads, deps=deps)


def _uops(rows):
    n = len(rows)
    return _load("uop", 0, 0, 1, n, n), np.array(rows, np.int32)


def _run(insns, uops=NO_UOPS, **dram):
    sim = Simulator(SPEC)
    stats = sim.run(Program((*insns, FinishInsn()), uops), dram)
    return sim, stats


def test_load_2d_strided_with_padding_then_store():
    data = _int8(40, 1, 16)
    # 3 rows of 4 entries, stride 10, from entry 2; one pad row above, one pad column each side.
    load = _load("inp", 5, 2, 3, 4, 10, pads=(1, 0, 1, 1))
    sim, stats = _run([load], inp=data)
    got = sim.buffers["inp"][5 : 5 + 4 * 6].reshape(4, 6, 1, 16)
    want = np.zeros((4, 6, 1, 16), np.int8)
    want[1:, 1:5] = data[2 + np.arange(3)[:, None] * 10 + np.arange(4)[None, :]]
    np.testing.assert_array_equal(got, want)
    assert stats.inp_load_nbytes == 3 * 4 * 16
    t = TimingModel()
    # FINISH (compute) runs beside the load: nothing orders them.
    assert stats.cycles == t.dma_cycles(3 * 4 * 16, 4 * 6 - 12)


def test_gemm_loops_against_numpy_and_reset():
    inp, wgt, bias = (
        _int8(8, 1, 16),
        _int8(6, 16, 16),
        RNG.integers(-1000, 1000, (4, 1, 16), np.int32),
    )
    uop_load, uops = _uops([[0, 0, 0], [1, 2, 1]])
    insns = [
        _load("inp", 0, 0, 1, 8, 8),
        _load("wgt", 0, 0, 1, 6, 6),
        uop_load,
        _load("acc", 0, 0, 1, 4, 4),
        # i < 2, j < 2: dst = u.dst + 2i, src = u.src + 4i + j, wgt = u.wgt + 3i + 2j... wgt<=5
        GemmInsn(False, 0, 2, 2, 2, 2, 0, 4, 1, 3, 1),
    ]
    sim, stats = _run(insns, uops, inp=inp, wgt=wgt, acc=bias)
    want = bias.copy()
    for i in range(2):
        for j in range(2):
            for d, s, w in uops:
                want[d + 2 * i] += inp[s + 4 * i + j].astype(np.int32) @ wgt[
                    w + 3 * i + j
                ].T.astype(np.int32)
    np.testing.assert_array_equal(sim.buffers["acc"][:4], want)
    assert stats.gemm_counter == 8
    assert stats.acc_load_nbytes == 4 * 64 and stats.uop_load_nbytes == 2 * 4

    sim, _ = _run(
        [*insns, GemmInsn(True, 0, 2, 2, 1, 2, 0, 0, 0)], uops, inp=inp, wgt=wgt, acc=bias
    )
    np.testing.assert_array_equal(sim.buffers["acc"][:4], 0)


@pytest.mark.parametrize("op", ["MIN", "MAX", "ADD", "SHR"])
@pytest.mark.parametrize("use_imm", [True, False])
def test_alu_against_numpy(op, use_imm):
    acc = RNG.integers(-(2**20), 2**20, (8, 1, 16), np.int32)
    uop_load, uops = _uops([[i, 4 + i, 0] for i in range(4)])  # dst i, src 4 + i
    imm = 3 if op == "SHR" else -77
    if op == "SHR" and not use_imm:
        acc[4:] = RNG.integers(-4, 9, (4, 1, 16))  # per-element shift amounts, negatives shift left
    insns = [
        _load("acc", 0, 0, 1, 8, 8),
        uop_load,
        AluInsn(op, use_imm, imm, 0, 4, 1, 1, 0, 0, 0, 0),
    ]
    sim, stats = _run(insns, uops, acc=acc)
    a, b = acc[:4].astype(np.int64), (imm if use_imm else acc[4:].astype(np.int64))
    want = {
        "MIN": np.minimum(a, b),
        "MAX": np.maximum(a, b),
        "ADD": a + b,
        "SHR": np.where(
            np.asarray(b) >= 0, a >> np.clip(b, 0, 31), a << np.clip(-np.asarray(b), 0, 31)
        ),
    }[op]
    np.testing.assert_array_equal(sim.buffers["acc"][:4], want.astype(np.int32))
    np.testing.assert_array_equal(sim.buffers["acc"][4:8], acc[4:])
    assert stats.alu_counter == 4


def test_alu_clip_is_max_then_min_and_store_narrows_to_int8():
    acc = RNG.integers(-5000, 5000, (6, 1, 16), np.int32)
    uop_load, uops = _uops([[i, i, 0] for i in range(6)])
    out = np.zeros((6, 1, 16), np.int8)
    insns = [
        _load("acc", 0, 0, 1, 6, 6),
        uop_load,
        AluInsn("SHR", True, 4, 0, 6, 1, 1, 0, 0, 0, 0),
        AluInsn("MAX", True, -127, 0, 6, 1, 1, 0, 0, 0, 0),
        AluInsn("MIN", True, 127, 0, 6, 1, 1, 0, 0, 0, 0, deps=Deps(push_next=True)),
        # two rows of three, written with DRAM stride 3 in reverse row order
        MemInsn("STORE", "out", 0, 3, 1, 3, 3, deps=Deps(pop_prev=True)),
        MemInsn("STORE", "out", 3, 0, 1, 3, 3),
    ]
    _, stats = _run(insns, uops, acc=acc, out=out)
    want = np.clip(acc >> 4, -127, 127).astype(np.int8)
    np.testing.assert_array_equal(out[3:], want[:3])
    np.testing.assert_array_equal(out[:3], want[3:])
    assert stats.out_store_nbytes == 6 * 16 and stats.alu_counter == 18


def test_alu_with_a_carried_dependence_runs_in_order():
    # acc[i] += acc[i - 1] for i = 1..4: a prefix sum, wrong if the iterations ran at once.
    acc = RNG.integers(-100, 100, (5, 1, 16), np.int32)
    uop_load, uops = _uops([[1, 0, 0]])
    insns = [
        _load("acc", 0, 0, 1, 5, 5),
        uop_load,
        AluInsn("ADD", False, 0, 0, 1, 4, 1, 1, 0, 1, 0),
    ]
    sim, _ = _run(insns, uops, acc=acc)
    np.testing.assert_array_equal(sim.buffers["acc"][:5], np.cumsum(acc, axis=0))


@pytest.mark.parametrize(
    "insn, buffer",
    [
        (_load("inp", SPEC.inp_depth - 2, 0, 1, 4, 4), "inp"),
        (_load("wgt", 0, 0, 2, SPEC.wgt_depth // 2 + 1, 0), "wgt"),
        (_load("acc", SPEC.acc_depth, 0, 1, 1, 1), "acc"),
        (GemmInsn(False, 0, 1, 1, 3, 0, 0, 0, SPEC.inp_depth // 2), "inp"),
    ],
)
def test_buffer_overflow_is_an_error_naming_the_buffer(insn, buffer):
    uop_load, uops = _uops([[0, 0, 0]])
    dram = {
        "inp": _int8(4096, 1, 16),
        "wgt": _int8(2048, 16, 16),
        "acc": np.zeros((4, 1, 16), np.int32),
    }
    with pytest.raises(
        VTAError, match=rf"{buffer} buffer overflow.*LOG_{buffer.upper()}_BUFF_SIZE"
    ):
        _run([uop_load, insn], uops, **dram)


def test_token_deadlock_is_reported_with_what_each_module_waits_for():
    inp = _int8(4, 1, 16)
    # compute pops a token from load that load never pushes
    insns = [
        _load("inp", 0, 0, 1, 4, 4),
        GemmInsn(True, 0, 1, 1, 1, 0, 0, 0, 0, deps=Deps(pop_prev=True)),
    ]
    with pytest.raises(
        VTAError,
        match=r"deadlock: compute waits at instruction #1 \(GEMM reset\) for a token from load",
    ):
        _run(insns, inp=inp)
    # a store pop with no push from compute, and no module left to push it
    store = MemInsn("STORE", "out", 0, 0, 1, 1, 1, deps=Deps(pop_prev=True))
    with pytest.raises(VTAError, match=r"store waits at instruction #0 \(STORE out\)"):
        _run([store], out=np.zeros((1, 1, 16), np.int8))
    with pytest.raises(VTAError, match="load module has no previous module"):
        _run([_load("inp", 0, 0, 1, 1, 1, deps=Deps(push_prev=True))], inp=inp)


def test_tokens_let_modules_overlap_and_order_the_data():
    # load two input tiles; compute waits only for the first: its GEMM overlaps the second load.
    t = TimingModel()
    inp, wgt = _int8(64, 1, 16), _int8(1, 16, 16)
    uop_load, uops = _uops([[0, 0, 0], [0, 32, 0]])
    insns = [
        uop_load,
        _load("wgt", 0, 0, 1, 1, 1),
        _load("inp", 0, 0, 1, 32, 32, deps=Deps(push_next=True)),
        _load("inp", 32, 32, 1, 32, 32, deps=Deps(push_next=True)),
        GemmInsn(False, 0, 1, 32, 1, 1, 0, 1, 0, deps=Deps(pop_prev=True)),
        GemmInsn(False, 1, 2, 32, 1, 1, 0, 1, 0, deps=Deps(pop_prev=True)),
    ]
    sim, stats = _run(insns, uops, inp=inp, wgt=wgt)
    load1 = t.dma_cycles(256) + t.dma_cycles(512)
    load2 = load1 + t.dma_cycles(512)
    gemm = t.gemm_cycles(32)
    assert stats.cycles == max(load1 + gemm, load2) + gemm + 1
    want = inp[:, 0].astype(np.int32) @ wgt[0].T.astype(np.int32)
    np.testing.assert_array_equal(sim.buffers["acc"][:32, 0], want[:32] + want[32:])


def test_encoding_round_trips_and_refuses_fields_that_do_not_fit():
    insns = (
        _load("inp", 7, 123456, 3, 4, 10, pads=(1, 2, 3, 4), deps=Deps(push_next=True)),
        MemInsn("STORE", "out", 9, 77, 2, 3, 5, deps=Deps(pop_prev=True, push_prev=True)),
        GemmInsn(True, 1, 9, 3, 4, 5, 6, 7, 8, 9, 10, deps=Deps(pop_next=True)),
        AluInsn("SHR", True, -300, 2, 3, 4, 5, 6, 7, 8, 9),
        FinishInsn(),
    )
    program = Program(insns, np.arange(9).reshape(3, 3))
    back = decode_program(encode_program(program), program.uops)
    assert back.insns == insns
    assert from_dict(to_dict(insns[3])) == insns[3]
    with pytest.raises(VTAError, match="field imm=40000 does not fit its 16 bits"):
        encode_program(Program((AluInsn("ADD", True, 40000, 0, 1, 1, 1, 0, 0, 0, 0),), []))
    with pytest.raises(VTAError, match="unknown fields"):
        from_dict({"opcode": "GEMM", "reset": 1, "iters": 3})


def test_chunked_gemm_and_alu_give_the_same_bits(monkeypatch):
    # One iteration per chunk: a dst's products summed across chunks, ALU lanes chunk by chunk.
    from runtime.vta import simulator

    monkeypatch.setattr(simulator, "CHUNK_BYTES", 1)
    test_gemm_loops_against_numpy_and_reset()
    for op in ("ADD", "SHR"):
        test_alu_against_numpy(op, False)


def _wide_gemm(iter_out: int, iter_in: int, deps=NO_DEPS):
    """A GEMM of iter_out * iter_in iterations, all on entry 0 of each buffer."""
    return GemmInsn(False, 0, 1, iter_out, iter_in, 0, 0, 0, 0, 0, 0, deps=deps)


def _loaded_operands():
    """LOADs of entry 0 of inp and wgt (the wgt one tells compute) and of one micro-op."""
    inp, wgt = _int8(1, 1, 16), _int8(1, 16, 16)
    uop_load, uops = _uops([[0, 0, 0]])
    insns = [
        _load("inp", 0, 0, 1, 1, 1),
        _load("wgt", 0, 0, 1, 1, 1, deps=Deps(push_next=True)),
        uop_load,
    ]
    return insns, uops, {"inp": inp, "wgt": wgt}


def _traced_run(sim, program, dram):
    import tracemalloc

    tracemalloc.start()
    try:
        sim.run(program, dram)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_wide_gemm_runs_in_bounded_memory_that_peak_bytes_bounds(monkeypatch):
    from runtime.vta import simulator

    monkeypatch.setattr(simulator, "CHUNK_BYTES", 1 << 20)
    insns, uops, dram = _loaded_operands()
    program = Program((*insns, _wide_gemm(256, 256, Deps(pop_prev=True)), FinishInsn()), uops)
    sim = Simulator(SPEC)
    peak = _traced_run(sim, program, dram)
    inp, wgt = dram["inp"], dram["wgt"]
    # 65536 iterations: ~110 MB when every iteration's operands were gathered at once.
    assert peak <= sim.peak_bytes(program) <= 16 << 20, (peak, sim.peak_bytes(program))
    want = 65536 * (inp[0].astype(np.int64) @ wgt[0].T.astype(np.int64))
    np.testing.assert_array_equal(sim.buffers["acc"][0], want.astype(np.int32))


def test_the_index_cache_is_bounded_least_recently_used_first():
    insns, uops, dram = _loaded_operands()
    gemms = [_wide_gemm(64, 64 + k) for k in range(20)]  # 20 distinct loops, ~170 KB each
    gemms[0] = _wide_gemm(64, 64, Deps(pop_prev=True))
    program = Program((*insns, *gemms, gemms[-1], FinishInsn()), uops)
    small, unbounded = Simulator(SPEC, index_cache_bytes=1 << 20), Simulator(SPEC)
    peak = _traced_run(small, program, dram)
    unbounded.run(program, dram)
    assert small.buffers["acc"][0].any()
    np.testing.assert_array_equal(small.buffers["acc"], unbounded.buffers["acc"])
    assert 0 < small.index_cache_nbytes <= 1 << 20 < unbounded.index_cache_nbytes
    assert peak <= small.peak_bytes(program) < unbounded.peak_bytes(program)
