"""The VTA schedule path (codegen/vta/schedule.py -> tensorir lowering -> codegen/vta/lower.py):
bit-exact on the simulator against the int8 numpy reference, in the cycles of the fixed-nest
generator it replaced (tests/codegen/vta_fixed_nest_oracle.py), and one-line errors for
schedules VTA cannot run."""

import dataclasses

import numpy as np
import pytest
from vta_fixed_nest_oracle import conv2d_program

from autosched import autotvm, vta
from autosched.vta import top
from codegen.vta import (
    Conv2dWorkload,
    TileConfig,
    VTALowerError,
    lower_to_vta,
    packed_program,
    packed_state,
)
from runtime.vta import Program, Simulator, from_dict
from tensorir import steps as st
from tensorir.lower import lower
from tensorir.schedule import replay

ENV = vta.get_env()
RNG = np.random.default_rng(2026)

# resnet-18-like packed conv2d layers, scaled down (channels in blocks of 16), and dense.
CASES = {
    "3x3 s1": (Conv2dWorkload(1, 4, 14, 14, 4, 3, 3, 1, 1, 1, 1), TileConfig(1, 7, 14, 2, 2)),
    "3x3 s1 threads 2x2": (
        Conv2dWorkload(1, 4, 14, 14, 4, 3, 3, 1, 1, 1, 1),
        TileConfig(1, 14, 7, 1, 4, h_threading=2, oc_threading=2),
    ),
    "3x3 s2": (
        Conv2dWorkload(1, 4, 14, 14, 8, 3, 3, 2, 2, 1, 1),
        TileConfig(1, 7, 7, 2, 4, oc_threading=2),
    ),
    "1x1 s2 threads 2x2": (
        Conv2dWorkload(1, 4, 16, 16, 8, 1, 1, 2, 2, 0, 0),
        TileConfig(1, 4, 8, 4, 4, h_threading=2, oc_threading=2),
    ),
    "batch 2, small tiles": (
        Conv2dWorkload(2, 2, 6, 6, 2, 3, 3, 1, 1, 1, 1),
        TileConfig(2, 2, 3, 1, 2, h_threading=2),
    ),
    # batch and channel blocks contiguous in DRAM: one LOAD covers several of them
    "1x1 batch 2, whole-image tiles": (
        Conv2dWorkload(2, 2, 4, 4, 2, 1, 1, 1, 1, 0, 0),
        TileConfig(2, 2, 2, 2, 2),
    ),
    "dense": (Conv2dWorkload(1, 8, 1, 1, 4), TileConfig(1, 1, 1, 2, 4, oc_threading=2)),
    "int32 out, threads 2x2": (
        Conv2dWorkload(1, 2, 8, 8, 2, 3, 3, 1, 1, 1, 1, requantize=False),
        TileConfig(1, 4, 8, 1, 2, h_threading=2, oc_threading=2),
    ),
}


def _inputs(wkl):
    data = RNG.integers(-128, 128, (wkl.batch_blocks, wkl.in_blocks, wkl.height, wkl.width,
                                    ENV.BATCH, ENV.BLOCK_IN), dtype=np.int8)  # fmt: skip
    kern = RNG.integers(-128, 128, (wkl.out_blocks, wkl.in_blocks, wkl.kernel_h, wkl.kernel_w,
                                    ENV.BLOCK_OUT, ENV.BLOCK_IN), dtype=np.int8)  # fmt: skip
    return data, kern


def _run(raw, wkl, data, kern):
    program = Program(tuple(from_dict(d) for d in raw["insns"]), raw["uops"])
    planes = 1 if wkl.requantize else 4
    out = np.zeros((planes, wkl.batch_blocks, wkl.out_blocks, wkl.out_height, wkl.out_width,
                    ENV.BATCH, ENV.BLOCK_OUT), np.int8)  # fmt: skip
    stats = Simulator(ENV.spec, ENV.timing).run(program, {"inp": data, "wgt": kern, "out": out})
    if planes == 1:
        return out[0], stats
    u = out.view(np.uint8).astype(np.uint32)
    return (u[0] | (u[1] << 8) | (u[2] << 16) | (u[3] << 24)).view(np.int32), stats


def _reference(wkl, data, kern):
    stride, pad = (wkl.stride_h, wkl.stride_w), (wkl.pad_h, wkl.pad_w)
    if wkl.requantize:
        return top.conv2d_packed_reference(data, kern, stride, pad, wkl.shift, wkl.clip_min,
                                           wkl.clip_max)  # fmt: skip
    x = top.unpack_nchw(data)
    ob, cb, kh, kw, bo, bi = kern.shape
    w = kern.transpose(0, 4, 1, 5, 2, 3).reshape(ob * bo, cb * bi, kh, kw)
    acc = top.reference.conv2d_nchw_int(x, w, stride, pad).astype(np.int32)
    return top.pack_nchw(acc, ENV.BATCH, ENV.BLOCK_OUT)


@pytest.mark.parametrize("name", list(CASES))
def test_schedule_path_is_bit_exact_in_the_fixed_nests_cycles(name):
    wkl, cfg = CASES[name]
    data, kern = _inputs(wkl)
    want = _reference(wkl, data, kern)
    assert len(np.unique(want)) > 16  # not all clipped: the comparison can fail
    out, stats = _run(packed_program(wkl, cfg, ENV.spec), wkl, data, kern)
    np.testing.assert_array_equal(out, want)
    _, oracle = _run(conv2d_program(wkl, cfg, ENV.spec), wkl, data, kern)
    # The same GEMM / ALU work and the same bytes in and out ...
    for counter in ("gemm_counter", "alu_counter", "inp_load_nbytes", "wgt_load_nbytes",
                    "out_store_nbytes"):  # fmt: skip
        assert getattr(stats, counter) == getattr(oracle, counter), counter
    # ... in the fixed nest's cycles, or fewer where the lowering merges contiguous DMA rows
    # into one instruction (dense: the whole weight chunk in one LOAD): never more, within 25%.
    assert 0.75 * oracle.cycles <= stats.cycles <= oracle.cycles, (stats.cycles, oracle.cycles)


SWEEP = [
    Conv2dWorkload(2, 2, 6, 6, 4, 3, 3, 1, 1, 1, 1),
    Conv2dWorkload(1, 4, 9, 9, 2, 3, 3, 2, 2, 1, 1),
    Conv2dWorkload(1, 4, 6, 6, 4, 1, 1, 1, 1, 0, 0),
]


@pytest.mark.parametrize("wkl", SWEEP, ids=["3x3 s1 batch 2", "3x3 s2 odd", "1x1 s1"])
def test_random_configs_agree_with_the_fixed_nest(wkl):
    from codegen.vta import check_config

    rng = np.random.default_rng(wkl.out_blocks)

    def divisor(n):
        return int(rng.choice([d for d in range(1, n + 1) if n % d == 0]))

    data, kern = _inputs(wkl)
    want = _reference(wkl, data, kern)
    checked = 0
    while checked < 6:
        cfg = TileConfig(
            divisor(wkl.batch_blocks), divisor(wkl.out_height), divisor(wkl.out_width),
            divisor(wkl.in_blocks), divisor(wkl.out_blocks), int(rng.integers(1, 3)),
            int(rng.integers(1, 3)),
        )  # fmt: skip
        if check_config(wkl, cfg, ENV.spec):
            continue
        out, stats = _run(packed_program(wkl, cfg, ENV.spec), wkl, data, kern)
        np.testing.assert_array_equal(out, want, err_msg=str(cfg))
        _, oracle = _run(conv2d_program(wkl, cfg, ENV.spec), wkl, data, kern)
        assert stats.gemm_counter == oracle.gemm_counter
        assert stats.cycles <= oracle.cycles, cfg  # merged DMAs: up to 45% fewer seen
        checked += 1


def test_conv2d_cycles_equal_the_fixed_nest_where_no_dma_merges():
    wkl, cfg = CASES["3x3 s1 threads 2x2"]
    data, kern = _inputs(wkl)
    _, stats = _run(packed_program(wkl, cfg, ENV.spec), wkl, data, kern)
    _, oracle = _run(conv2d_program(wkl, cfg, ENV.spec), wkl, data, kern)
    assert stats.cycles == oracle.cycles


@pytest.mark.parametrize(
    "name, args, cfg",
    [
        ("conv2d_packed.vta", (("TENSOR", (1, 2, 8, 8, 1, 16), "int8"),
                               ("TENSOR", (2, 2, 3, 3, 16, 16), "int8"),
                               (1, 1), (1, 1), (1, 1), "NCHW1n16c", "int32"),
         {"tile_h": [-1, 4], "tile_w": [-1, 8], "tile_co": [-1, 2], "h_threading": 2,
          "oc_threading": 2}),
        ("dense_packed.vta", (("TENSOR", (1, 8, 1, 16), "int8"),
                              ("TENSOR", (6, 8, 16, 16), "int8"), "int32"),
         {"tile_ci": [-1, 4], "tile_co": [-1, 6], "oc_threading": 2}),
    ],
)  # fmt: skip
def test_template_state_is_the_vta_schedule(name, args, cfg):
    task = autotvm.task.create(name, args, target=ENV.target)
    space = task.config_space
    want = {k: v for k, v in cfg.items()}
    entity = next(
        space.get(i) for i in range(len(space))
        if all((space.get(i)[k].size if isinstance(v, list) else space.get(i)[k].val)
               in (v, [1, v[1]] if isinstance(v, list) else v) for k, v in want.items())
    )  # fmt: skip
    with ENV.target:
        state, _ = task.instantiate(entity)
    kinds = {type(s).__name__ for s in state.steps}
    assert {"CacheReadStep", "CacheWriteStep", "ComputeAtStep", "PragmaStep"} <= kinds
    assert "vthread" in str(state) and "pragma(dma_copy)" in str(state)
    # JSON round trip of the schedule, pragmas and tagged scopes included.
    again = type(state).from_json(state.dag, state.to_json())
    assert str(again) == str(state)
    raw = lower_to_vta(lower(state), ENV.spec)
    wkl = dataclasses.replace(top.task_workload(task), requantize=False)
    ref = packed_program(wkl, top.tile_config(entity), ENV.spec)
    assert raw["insns"] == ref["insns"]
    np.testing.assert_array_equal(raw["uops"], ref["uops"])


# ----------------------------------------------------------------------------- bad schedules


def _without(state, keep):
    """``state``'s DAG replayed with the steps ``keep`` accepts (a schedule with a hole)."""
    return replay(state.dag, [s for s in state.steps if keep(s)])


WKL, CFG = CASES["3x3 s1"]


@pytest.mark.parametrize(
    "pragma, buffer",
    [("alu", "out_local_acc_buffer"), ("gemm", "res_local_acc_buffer"),
     ("dma_copy", "T_pad_local_inp_buffer")],
)  # fmt: skip
def test_missing_pragma_is_a_one_line_error_naming_the_stage(pragma, buffer):
    state = packed_state(WKL, CFG, ENV.spec)
    first = next(s for s in state.steps if isinstance(s, st.PragmaStep) and s.pragma_type == pragma)
    bad = _without(state, lambda s: s is not first)
    with pytest.raises(VTALowerError) as info:
        lower_to_vta(lower(bad), ENV.spec)
    msg = str(info.value)
    assert "\n" not in msg
    assert f"stage of buffer {buffer!r}" in msg and "without a VTA pragma" in msg
    assert f"'{pragma}'" in msg


def test_a_buffer_in_a_scope_vta_lacks_is_a_one_line_error():
    state = packed_state(WKL, CFG, ENV.spec)
    steps = [
        st.CacheReadStep(s.stage_id, "local", s.reader_stage_ids)
        if isinstance(s, st.CacheReadStep) and s.scope_name == "local.wgt_buffer" else s
        for s in state.steps
    ]  # fmt: skip
    with pytest.raises(VTALowerError, match=r"^stage of buffer 'kernel_local': scope 'local' is "
                       r"not a VTA buffer; cache it into \['local.inp_buffer'"):  # fmt: skip
        lower_to_vta(lower(replay(state.dag, steps)), ENV.spec)


def test_an_invalid_config_is_refused_not_miscompiled():
    from codegen.vta import VTAConfigError

    with pytest.raises(VTAConfigError, match="h_threading=2 does not divide its tile of 7"):
        packed_program(WKL, dataclasses.replace(CFG, h_threading=2), ENV.spec)
