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
