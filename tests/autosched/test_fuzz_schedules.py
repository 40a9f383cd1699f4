"""Fuzz the schedule language: random search states and hostile hand schedules vs numpy.

Three sources of states, over the operators of ``fuzz_cases.WORKLOADS`` (small shapes with
awkward extents): states sampled the way the search samples them (sketch + random
annotation), mutations of those (the search's mutation rules), and "perturbed" states whose
split lengths are redrawn so that they do not divide. Each is lowered, built on LLVM, run on
uniform(-1, 1) inputs and compared with the reference interpreter. The hand schedules of
``fuzz_hand_schedules.CASES`` must each build and match, or be refused with a one-line error.

The default run does a short seeded sweep. ``pytest -m fuzz`` runs the long one:
``AUTOSCHED_FUZZ_STATES`` states in all (default 300), on other seeds. A failure prints the
operator, the seed and the steps, which ``State.from_json`` replays.
"""

from __future__ import annotations

import json
import os
import re

import pytest
from fuzz_cases import (
    WORKLOADS,
    check_state,
    fuzz_states,
    random_inputs,
    reference,
    replay_hint,
    task_of,
)
from fuzz_hand_schedules import CASES, LOWER, STEP

import autosched as ansor
from tensorir.bounds import LowerError
from tensorir.schedule import State
from tensorir.steps import ScheduleError

DEFAULT_SEED = 14
DEFAULT_COUNTS = (2, 1, 1)  # per operator: sampled, mutated, perturbed
# Winograd's constant-matrix selects make each LLVM build take about 2 s: fewer states.
HEAVY = {"winograd_conv2d": 4}  # operator -> share divisor in the sweeps


def _sweep(name: str, seed: int, counts) -> tuple[list, list[str]]:
    """Build and check the fuzz states of one operator and seed; returns (states, failures)."""
    dag = task_of(name).compute_dag
    states = fuzz_states(name, seed, *counts)
    args = random_inputs(dag, seed)
    refs = reference(dag, args)
    failures = []
    for kind, state in states:
        try:
            check_state(dag, state, args, refs, replay_hint(name, seed, state, kind))
        except AssertionError as err:
            failures.append(str(err))
    return states, failures


def _report(failures: list[str], total: int) -> str:
    shown = "\n\n".join(f[:3000] for f in failures[:3])
    return f"{len(failures)} of {total} fuzz states failed; the first ones:\n{shown}"


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_seeded_sweep(name):
    counts = (1, 0, 0) if name in HEAVY else DEFAULT_COUNTS
    states, failures = _sweep(name, DEFAULT_SEED, counts)
    assert states, f"{name}: sampling gave no state"
    assert not failures, _report(failures, len(states))


def test_sweep_states_include_non_dividing_splits():
    """The perturbed states do what they are for: tails that the sampler never makes."""
    dag = task_of("matmul").compute_dag
    kinds = {}
    for kind, state in fuzz_states("matmul", DEFAULT_SEED, 4, 2, 4):
        splits = [s for s in state.steps if type(s).__name__ == "SplitStep"]
        tails = [s for s in splits if s.extent % _prod(s.lengths)]
        kinds.setdefault(kind, []).append(bool(tails))
        if kind == "sampled":  # every sampled state replays from its steps
            assert State.from_json(dag, state.to_json()).steps == state.steps
    assert set(kinds) == {"sampled", "mutated", "perturbed"}
    assert any(kinds["perturbed"])


def _prod(xs) -> int:
    out = 1
    for x in xs:
        out *= x
    return out


def test_a_wrong_result_fails_with_the_replay_hint():
    """The harness can fail: a reference off by a little in one element is reported, with
    the operator, seed and steps."""
    name = "matmul"
    dag = task_of(name).compute_dag
    kind, state = fuzz_states(name, DEFAULT_SEED, 1, 0, 0)[0]
    args = random_inputs(dag, 3)
    refs = reference(dag, args)
    refs[0][4, 7] += 1e-3
    hint = replay_hint(name, DEFAULT_SEED, state, kind)
    expected = r"(?s)operator=matmul seed=14 .*STEPS=.*Mismatched elements: 1 "
    with pytest.raises(AssertionError, match=expected):
        check_state(dag, state, args, refs, hint)


def test_replay_hint_replays_the_state():
    name = "conv2d_nhwc_bias_relu"
    dag = task_of(name).compute_dag
    _, state = fuzz_states(name, DEFAULT_SEED, 1, 0, 0)[0]
    hint = replay_hint(name, DEFAULT_SEED, state, "sampled")
    assert f"operator={name} seed={DEFAULT_SEED}" in hint
    steps = re.search(r"^STEPS=(.*)$", hint, re.M).group(1)
    assert State.from_json(dag, json.loads(steps)).steps == state.steps


def _opencl_available() -> bool:
    try:
        import pyopencl as cl

        return bool(cl.get_platforms())
    except Exception:  # noqa: BLE001 - no ICD loader / no platform
        return False


GPU_WORKLOADS = ["conv2d_nchw_stride", "max_pool", "sum_axis", "batch_matmul"]


@pytest.mark.skipif(not _opencl_available(), reason="no OpenCL platform")
@pytest.mark.filterwarnings("ignore:no cuda device to read hardware parameters")
@pytest.mark.parametrize("name", GPU_WORKLOADS)
def test_seeded_gpu_sweep_on_opencl(name):
    """GPU sketches (thread binding, shared-memory caches, cross-thread reductions) of the
    awkward shapes, built for OpenCL (PoCL on the CPU here), against the interpreter."""
    dag = task_of(name, "cuda").compute_dag
    args = random_inputs(dag, DEFAULT_SEED)
    refs = reference(dag, args)
    states = fuzz_states(name, DEFAULT_SEED, 1, 1, 0, target="cuda")
    assert states, f"{name}: GPU sampling gave no state"
    failures = []
    for kind, state in states:
        hint = replay_hint(name, DEFAULT_SEED, state, f"{kind} (GPU task, OpenCL)")
        try:
            check_state(dag, state, args, refs, hint, target="opencl")
        except AssertionError as err:
            failures.append(str(err))
    assert not failures, _report(failures, len(states))


# ----------------------------------------------------------------------------- hand schedules


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_hand_schedule(case):
    case_id, name, schedule, refusal = case
    dag = task_of(name).compute_dag
    args = random_inputs(dag, 1)
    refs = reference(dag, args)
    state = dag.get_init_state()
    hint = f"hand schedule {case_id!r} on operator={name}"
    if refusal is None:
        schedule(state)
        check_state(dag, state, args, refs, f"{hint}\n{replay_hint(name, None, state)}")
        return
    where, pattern = refusal
    if where == STEP:
        with pytest.raises(ScheduleError) as info:
            schedule(state)
    else:
        assert where == LOWER
        schedule(state)
        with pytest.raises(LowerError) as info:
            ansor.build(state, "llvm")
    message = str(info.value)
    assert "\n" not in message, f"{hint}: the error is not one line: {message!r}"
    assert re.search(pattern, message), f"{hint}: {message!r} does not match {pattern!r}"
    if where == STEP:  # the refused step left no trace: the steps before it still work
        check_state(dag, state, args, refs, f"{hint} (before the refused step)")


# ----------------------------------------------------------------------------- long sweep


def _fuzz_states_total() -> int:
    raw = os.environ.get("AUTOSCHED_FUZZ_STATES", "300")
    try:
        total = int(raw)
    except ValueError:
        total = 0
    if total <= 0:
        raise ValueError(f"AUTOSCHED_FUZZ_STATES={raw!r}: give a positive number of states")
    return total


@pytest.mark.slow
@pytest.mark.fuzz
@pytest.mark.parametrize("name", list(WORKLOADS))
def test_long_sweep(request, name):
    # The default run selects every marker but must not take this long: run only when the
    # -m expression asks for fuzz (``pytest -m fuzz``).
    if "fuzz" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("the long fuzz sweep runs with `pytest -m fuzz` (AUTOSCHED_FUZZ_STATES=N)")
    share = max(4, _fuzz_states_total() // len(WORKLOADS) // HEAVY.get(name, 1))
    checked, failures, seed = 0, [], 1000
    while checked < share and seed < 1000 + share:  # a few states per seed, distinct seeds
        states, bad = _sweep(name, seed, (4, 2, 2))
        checked += len(states)
        failures += bad
        seed += 1
    print(f"fuzz {name}: {checked} states on seeds 1000..{seed - 1}, {len(failures)} failed")
    assert checked >= min(share, 4), f"{name}: only {checked} fuzz states"
    assert not failures, _report(failures, checked)
