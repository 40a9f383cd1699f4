"""AutoTVM records whose knob values are not points of their task's config space (tampered,
or written by another version of the template) are skipped with a warning naming the file and
line, and apply_history_best falls back to the next best valid record."""

import json
import warnings

import pytest
from test_autotvm_tuners import ARGS, OPTION, _task, model_cost, tuner_matmul

import autosched as ansor
from autosched import autotvm
from autosched.autotvm.tuner import RandomTuner
from autosched.measure import MAX_COST
from autosched.measure.records import RecordWarning, distill


def _tamper(entity, knob, value):
    for e in entity:
        if e[0] == knob:
            e[2] = value
    return entity


HOSTILE = {
    "split outer part positive": lambda c: _tamper(c["entity"], "tile_y", [1000, 1]),
    "split larger than the axis": lambda c: _tamper(c["entity"], "tile_y", [-1, 1000]),
    "split 2**70": lambda c: _tamper(c["entity"], "tile_x", [-1, 2**70]),
    "split 2.5": lambda c: _tamper(c["entity"], "tile_x", [-1, 2.5]),
    "split of 3 parts": lambda c: _tamper(c["entity"], "tile_x", [-1, 2, 2]),
    "knob value 2": lambda c: _tamper(c["entity"], "vec", 2),
    "knob value 1 for True": lambda c: _tamper(c["entity"], "vec", 1),
    "unknown knob": lambda c: c["entity"].append(["tile_z", "sp", [-1, 4]]),
    "missing knob": lambda c: c["entity"].pop(),
    "knob of another kind": lambda c: c["entity"].__setitem__(2, ["vec", "an", ["unroll"]]),
    "index of another point": lambda c: c.__setitem__("index", (c["index"] + 1) % 162),
}


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    log = tmp_path_factory.mktemp("autotvm") / "t.log"
    tuner = RandomTuner(_task(), seed=1)
    tuner.tune(12, measure_option=OPTION, callbacks=[autotvm.callback.log_to_file(log)])
    return log, tuner.best_config, log.read_text().splitlines()


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_record_outside_the_space_is_skipped_and_the_next_best_applies(tuned, tmp_path, case):
    log, best_config, lines = tuned
    rec = json.loads(min(lines, key=lambda x: json.loads(x)["r"][0][0]))
    HOSTILE[case](rec["config"])
    rec["r"][0] = [1e-9]  # the "fastest" record of the log
    hostile = tmp_path / "hostile.log"
    hostile.write_text("\n".join([*lines[:5], json.dumps(rec), *lines[5:]]) + "\n")

    with pytest.warns(RecordWarning, match=rf"{hostile}: skipped 1 .*line 6\b") as caught:
        loaded = list(autotvm.record.load_from_file(hostile))
    assert len(loaded) == len(lines) and all(r.mean_cost > 1e-6 for _, r in loaded)
    assert "config space" in str(caught[0].message) or "config" in str(caught[0].message)

    with (
        pytest.warns(RecordWarning, match=rf"{hostile}: skipped 1 .*line 6\b"),
        autotvm.apply_history_best(hostile) as ctx,
        ansor.Target("llvm"),
    ):
        s, _ = tuner_matmul(*ARGS)
    assert ctx.hits == 1
    assert s.to_json() == _task().instantiate(best_config)[0].to_json()


def test_pairs_given_directly_are_checked_at_dispatch(tuned):
    log, best_config, _ = tuned
    pairs = list(autotvm.record.load_from_file(log))
    inp, res = min(pairs, key=lambda p: p[1].mean_cost)
    bad_config = autotvm.ConfigEntity.from_json_dict(
        {
            "index": 0,
            "entity": [
                ["tile_y", "sp", [-1, 1000]],
                ["tile_x", "sp", [-1, 16]],
                ["vec", "ot", True],
            ],
        }  # fmt: skip
    )
    fast = autotvm.measure.MeasureResult((1e-9,), 0, "", 0.0, 1.0)
    bad = (autotvm.MeasureInput(inp.target, inp.task, bad_config), fast)
    with (
        pytest.warns(RecordWarning, match=r"tile_y.*\[-1, 1000\] is not one of"),
        autotvm.apply_history_best([*pairs, bad]) as ctx,
        ansor.Target("llvm"),
    ):
        s, _ = tuner_matmul(*ARGS)
    assert ctx.hits == 1
    assert model_cost(s) == pytest.approx(res.mean_cost)
    assert s.to_json() == _task().instantiate(best_config)[0].to_json()


def test_valid_records_load_without_warnings(tuned):
    log, best_config, lines = tuned
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = list(autotvm.record.load_from_file(log))
    assert len(loaded) == len(lines)
    assert [inp.config.index for inp, _ in loaded] == [
        json.loads(x)["config"]["index"] for x in lines
    ]


def test_autotvm_readers_apply_the_records_one_rule(tuned, tmp_path):
    # A slow record (5e9 s, below MAX_COST: AutoTVM once cut at 1e9) is usable to pick_best,
    # apply_history_best and the auto-scheduler's distill alike; a failure's cost to none.
    log, _, lines = tuned
    slow, fail = json.loads(lines[0]), json.loads(lines[1])
    slow["r"][0], fail["r"][0] = [5e9], [MAX_COST]
    one = tmp_path / "slow.log"
    one.write_text(json.dumps(slow) + "\n" + json.dumps(fail) + "\n")
    assert autotvm.record.pick_best(one, tmp_path / "best.log") == 1
    assert distill(one, tmp_path / "best2.log") == 1
    with autotvm.apply_history_best(one) as ctx, ansor.Target("llvm"):
        tuner_matmul(*ARGS)
    assert ctx.hits == 1
