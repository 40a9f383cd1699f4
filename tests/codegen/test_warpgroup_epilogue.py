"""Warpgroup epilogues in 16-byte words (codegen.warpgroup_epilogue, codegen.cuda_warpgroup):
the quad's shuffle plan moves every accumulator to the lane that stores its column, the
rendered kernel trades them with ``__shfl_xor_sync`` and stores words, nvcc keeps the
accumulators in registers, and the switch keeps the old store. Their values on a GPU:
tests/gpu/test_warpgroup_cuda.py."""

import re
import subprocess

import pytest

from codegen import cuda_warpgroup
from codegen.cuda import build_cuda
from codegen.warpgroup_epilogue import holder_of, quad_transpose, register_of
from tensorir.lower import lower
from tests.autosched.tensor_core_helpers import (
    NVCC,
    conv_dag,
    dense_tensors,
    first_states,
    gpu_task,
    needs_nvcc,
    sampled_states,
)

SM90 = "cuda -arch=sm_90"


def _held_by_quad_lanes() -> dict:
    """(quad lane, register) -> (row half, column), as ``wgmma`` leaves the accumulators."""
    return {(t, q): ((q >> 1) & 1, 2 * t + (q & 1) + 8 * (q >> 2))
            for t in range(4) for q in range(8)}  # fmt: skip


@pytest.mark.parametrize("run", [8, 4])
def test_the_plan_gives_every_lane_whole_runs_and_moves_each_value_once(run):
    plan = quad_transpose(run)
    held = _held_by_quad_lanes()
    for (t, q), (half, col) in held.items():
        assert holder_of(col) == t and register_of(half, col) == q
    # Simulate the shuffles: in step s lane t receives what lane t ^ k sends.
    received = {}
    for s, (k, regs) in enumerate(plan.sends):
        for t in range(4):
            for x, by_lane in enumerate(regs):
                received[(t, s, x)] = held[(t ^ k, by_lane[t ^ k])]
    covered = set()
    for t in range(4):
        got = [held[(t, src[1])] if src[0] == "own" else received[(t, src[1], src[2])]
               for src in plan.sources[t]]  # fmt: skip
        want = [(half, first + c) for half, first in plan.runs[t] for c in range(run)]
        assert got == want
        assert all(first % run == 0 for _, first in plan.runs[t])
        covered.update(want)
    assert covered == {(h, c) for h in (0, 1) for c in range(16)}  # the quad's two rows
    moved = sum(len(regs) for _, regs in plan.sends)
    owned = sum(src[0] == "own" for src in plan.sources[0])
    assert moved + owned == 8  # each of a lane's 8 values is kept or received once
    assert len(plan.sends) == {8: 3, 4: 1}[run]


def test_a_run_that_fits_no_word_is_refused():
    with pytest.raises(ValueError, match="runs of 2 columns"):
        quad_transpose(2)


def _residual_conv_code(words: bool, monkeypatch, arch="sm_90") -> str:
    monkeypatch.setattr(cuda_warpgroup, "WARPGROUP_WORDS", words)
    dag = conv_dag("NHWC:OHWI", 2, 64, 8, 128, 1, 1, 0, epilogue=True, residual=True,
                   warpgroup=True)  # fmt: skip
    task = gpu_task(dag, target=SM90)
    (state,) = first_states(sampled_states(task, _warpgroup_sketch(task), 1), 1)
    return build_cuda(lower(state), arch=arch).code


def _warpgroup_sketch(task):
    from autosched.search.sketch import generate_sketches
    from autosched.search.sketch_rules_warpgroup import is_warpgroup_state

    (sketch,) = [s for s in generate_sketches(task) if is_warpgroup_state(s)]
    return sketch


def test_a_residual_conv_trades_accumulators_and_stores_words(monkeypatch):
    code = _residual_conv_code(True, monkeypatch)
    epilogue = code[code.rindex("wgmma_wait<0>();") :]
    assert epilogue.count("__shfl_xor_sync(0xffffffffu") == 6  # a pair in each of 3 steps
    # The residual and the bias are read as words, the output written as one.
    assert len(re.findall(r"\*\(uint4\*\)&wg_in\d\[0\] = \*\(const uint4\*\)", epilogue)) == 2
    assert re.search(r"\*\(uint4\*\)&T_relu\[.*\] = \*\(const uint4\*\)wg_out;", epilogue)
    # The shuffles come before the guard of each run: the whole warp takes part.
    assert epilogue.index("__shfl_xor_sync") < epilogue.index("wg_out")


def test_the_switch_keeps_one_element_a_lane(monkeypatch):
    code = _residual_conv_code(False, monkeypatch)
    assert "__shfl_xor_sync" not in code and "uint4*)&T_relu" not in code
    assert "wg_q < 8" in code


def test_a_float32_output_trades_two_pairs_for_runs_of_four(monkeypatch):
    monkeypatch.setattr(cuda_warpgroup, "WARPGROUP_WORDS", True)
    task = gpu_task(dense_tensors(128, 64, 128), target=SM90)  # float16 in, float32 out
    (state,) = first_states(sampled_states(task, _warpgroup_sketch(task), 2), 1)
    code = build_cuda(lower(state), arch="sm_90").code
    epilogue = code[code.rindex("wgmma_wait<0>();") :]
    assert epilogue.count("__shfl_xor_sync(0xffffffffu") == 4
    stores = re.findall(r"\*\(const uint4\*\)wg_out(?:_\d+)?;", epilogue)
    assert len(stores) == 2  # two runs of 4 floats a lane


@needs_nvcc
def test_nvcc_keeps_the_traded_accumulators_in_registers(monkeypatch, tmp_path):
    """Selects by the lane's place in the quad, not an index computed at run time: no local
    memory (a stack frame would mean the accumulator array was spilled to be indexed)."""
    src = tmp_path / "k.cu"
    src.write_text(_residual_conv_code(True, monkeypatch))
    done = subprocess.run([NVCC, "-cubin", "-arch=sm_90a", "-Xptxas", "-v", str(src), "-o",
                           str(tmp_path / "k.cubin")], capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "0 bytes stack frame" in done.stderr and "0 bytes spill" in done.stderr
