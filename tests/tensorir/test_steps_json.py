"""Steps as JSON records: encoding, round trips and deterministic replay."""

import json

import pytest

from tensorir import ComputeDAG, te
from tensorir.schedule import ScheduleError, State, replay
from tensorir.steps import AnnotationStep, SplitStep, step_from_json, steps_from_json, steps_to_json


def matmul(n=64):
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return ComputeDAG([A, B, C]), C


def roundtrip(dag, state):
    data = json.loads(json.dumps(steps_to_json(state.steps)))
    again = replay(dag, steps_from_json(data))
    assert str(again) == str(state)
    assert again.steps == state.steps
    return data


def test_records_use_tvm_encoding():
    dag, C = matmul()
    s = State(dag)
    s.split(C, "i", [8, 2])
    s.fuse(C, ["i.0", "i.1"])
    s.reorder(C, ["j", "i.0@i.1@", "i.2", "k"])
    s.parallel(C, "j")
    s.bind(C, "i.2", "threadIdx.x")
    s.pragma(C, "j", "auto_unroll_max_step$512")
    data = roundtrip(dag, s)
    assert data == [
        ["SP", 2, 0, 64, [8, 2], 1],
        ["FU", 2, [0, 1]],
        ["RE", 2, [2, 0, 1, 3]],
        ["AN", 2, 0, 3],
        ["AN", 2, 2, 6],
        ["PR", 2, 0, "auto_unroll_max_step$512"],
    ]


def test_undefined_lengths_round_trip_as_null():
    dag, C = matmul()
    s = State(dag)
    s.split(C, "i", [None, 4])
    data = roundtrip(dag, s)
    assert data == [["SP", 2, 0, 64, [None, 4], 1]]
    assert not replay(dag, steps_from_json(data)).concrete


def test_state_to_json_and_from_json():
    dag, C = matmul()
    s = State(dag)
    s.split(C, "j", [16])
    s.vectorize(C, "j.1")
    data = s.to_json()
    assert data[0] == [] and data[1][0] == ["SP", 2, 1, 64, [16], 1]
    assert str(State.from_json(dag, data)) == str(s)
    assert str(State.from_json(dag, data[1])) == str(s)


def test_step_records_parse_to_steps():
    assert step_from_json(["SP", 2, 0, 0, [None], 1]) == SplitStep(2, 0, None, (None,), True)
    assert step_from_json(["AN", 1, 3, 2]) == AnnotationStep(1, 3, "vectorize")


def test_unknown_record_code_is_rejected():
    with pytest.raises(ScheduleError, match="unknown step code 'XX'"):
        step_from_json(["XX", 1])


def test_replay_of_an_invalid_step_names_the_problem():
    dag, C = matmul()
    with pytest.raises(ScheduleError, match="iterator id 7 is out of range"):
        replay(dag, steps_from_json([["SP", 2, 7, 64, [8], 1]]))


# ----------------------------------------------------------------------------- dataflow steps


def softmax(m=4, n=16):
    A = te.placeholder((m, n), name="A")
    k1 = te.reduce_axis((0, n), name="k1")
    mx = te.compute((m,), lambda i: te.max(A[i, k1], axis=k1), name="mx")
    ex = te.compute((m, n), lambda i, j: te.exp(A[i, j] - mx[i]), name="ex")
    k2 = te.reduce_axis((0, n), name="k2")
    sm = te.compute((m,), lambda i: te.sum(ex[i, k2], axis=k2), name="sm")
    out = te.compute((m, n), lambda i, j: ex[i, j] / sm[i], name="out")
    return ComputeDAG([A, out])


def test_dataflow_and_placement_records():
    dag = softmax()
    s = State(dag)
    s.cache_read("A", "shared", ["ex"])
    s.cache_write("out", "local")
    s.split("sm", "k2", [4])
    s.rfactor("sm", "k2.1", 1)
    s.compute_at("mx", "ex", "i")
    s.compute_inline("out.local")
    s.compute_root("out.local")
    s.storage_align("A.shared", "ax0", 8, 2)
    s.split("ex", "j", [4])
    s.follow_split("out", "j", 8, 1)
    s.follow_fused_split("out.local", "j.c", [2, 8], 0, True)
    data = roundtrip(dag, s)
    assert data == [
        ["CHR", 0, "shared", [2]],
        ["CHW", 5, "local"],
        ["SP", 4, 1, 16, [4], 1],
        ["RF", 4, 2, 1],
        ["CA", 2, 3, 0],
        ["CI", 6],
        ["CR", 6],
        ["SA", 1, 0, 8, 2],
        ["SP", 3, 1, 16, [4], 1],
        ["FSP", 7, 1, 8, 1],
        ["FFSP", 6, 1, [2, 8], 0, 1],
    ]


# ----------------------------------------------------------------------------- property


def _matmul_relu():
    A = te.placeholder((12, 10), name="A")
    B = te.placeholder((10, 8), name="B")
    k = te.reduce_axis((0, 10), name="k")
    C = te.compute((12, 8), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = te.compute((12, 8), lambda i, j: te.max(C[i, j], 0.0), name="D")
    return ComputeDAG([A, B, D])


DAGS = [_matmul_relu(), softmax(6, 10)]
ANNS = ["parallel", "vectorize", "unroll", "vthread", "blockIdx.x", "threadIdx.x"]


def _random_step(state, draw):
    """Try one random step; invalid picks raise ScheduleError and change nothing."""
    from hypothesis import strategies as hs

    stages = [s for s in state.stages if not s.is_placeholder]
    stage = draw(hs.sampled_from(stages))
    its = list(stage.iters)
    kind = draw(hs.sampled_from(["SP", "SP", "RE", "FU", "AN", "PR", "CA", "CI", "CR", "CHR",
                                 "CHW", "RF", "FSP", "SA"]))  # fmt: skip
    pick = lambda: draw(hs.sampled_from(its))  # noqa: E731
    if kind == "SP" and its:
        n = draw(hs.integers(1, 3))
        lengths = draw(hs.lists(hs.integers(1, 5) | hs.none(), min_size=n, max_size=n))
        state.split(stage, pick(), lengths)
    elif kind == "RE" and its:
        state.reorder(stage, draw(hs.permutations(its)))
    elif kind == "FU" and len(its) > 1:
        k = draw(hs.integers(0, len(its) - 2))
        state.fuse(stage, its[k : k + 2])
    elif kind == "AN" and its:
        state.bind(stage, pick(), a) if (a := draw(hs.sampled_from(ANNS))) in (
            "vthread", "blockIdx.x", "threadIdx.x"
        ) else state._annotate(stage, pick(), a)  # fmt: skip
    elif kind == "PR" and its:
        state.pragma(stage, pick(), f"auto_unroll_max_step${draw(hs.sampled_from([0, 16]))}")
    elif kind == "CA":
        target = draw(hs.sampled_from(stages))
        if target.iters:
            state.compute_at(stage, target, draw(hs.sampled_from(target.iters)))
    elif kind == "CI":
        state.compute_inline(stage)
    elif kind == "CR":
        state.compute_root(stage)
    elif kind == "CHR":
        readers = [s for s in stages if stage.name in [t.name for t in s.op.input_tensors]]
        if readers:
            state.cache_read(stage, draw(hs.sampled_from(["shared", "local"])), readers[:1])
    elif kind == "CHW":
        state.cache_write(stage, "local")
    elif kind == "RF" and its:
        state.rfactor(stage, pick(), draw(hs.integers(0, len(stage.op.axes))))
    elif kind == "FSP" and its:
        sps = [k for k, s in enumerate(state.steps) if isinstance(s, SplitStep)]
        if sps:
            src = draw(hs.sampled_from(sps))
            n = draw(hs.integers(1, len(state.steps[src].lengths)))
            state.follow_split(stage, pick(), src, n)
    elif kind == "SA" and its:
        state.storage_align(stage, pick(), draw(hs.integers(1, 8)), draw(hs.integers(0, 3)))


def test_random_step_sequences_round_trip():
    from hypothesis import given, settings
    from hypothesis import strategies as hs

    from tensorir.state_printer import print_python_code

    @settings(max_examples=200, deadline=None)
    @given(hs.data())
    def check(data):
        dag = data.draw(hs.sampled_from(DAGS))
        state = State(dag)
        for _ in range(data.draw(hs.integers(1, 12))):
            before = (str(state), state.steps)
            try:
                _random_step(state, data.draw)
            except ScheduleError:
                assert (str(state), state.steps) == before  # failed steps change nothing
        again = roundtrip(dag, state)
        assert again == steps_to_json(state.steps)
        assert State.from_json(dag, state.to_json()).steps == state.steps
        assert print_python_code(state).count("\n") >= len(state.steps)
        for s in state.stages:  # attachments always point at existing loops
            if s.compute_at == "iter":
                target = state[s.attach[0]]
                assert s.attach[1] in [it.name for it in target.iters]

    check()


def test_deferred_replay_is_the_replayed_state_once_looked_into():
    import pickle

    from tensorir.schedule import replay_deferred

    dag, C = matmul()
    s = State(dag)
    s.split(C, "i", [8, 2])
    s.reorder(C, ["j", "i.0", "i.1", "i.2", "k"])
    s.parallel(C, "j")
    lazy = replay_deferred(dag, s.steps)
    assert lazy._stage_data is None  # nothing replayed to hand out the steps
    assert lazy.steps == s.steps and lazy.to_json() == s.to_json()
    copied = pickle.loads(pickle.dumps(lazy))  # pickled before replay: replays after
    assert str(lazy) == str(s) and lazy._stage_data is not None
    assert str(copied) == str(s)
    lazy.split(C, "k", [4])  # a deferred state can be scheduled on as any other
    s.split(C, "k", [4])
    assert str(lazy) == str(s) and lazy.steps == s.steps
    bad = replay_deferred(dag, (*s.steps[:1], SplitStep(9, 0, 64, (8,), True)))
    with pytest.raises(ScheduleError):
        str(bad)  # the first look replays, and the bad step fails there
