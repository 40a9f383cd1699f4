"""The timing protocol's growth of ``number`` (runtime/timer.py), on a simulated device clock."""

import numpy as np
import pytest

from runtime.timer import measure, next_number


def device(per_call_s: float, latency_s: float):
    """A fake ``time_launches``: ``number`` back-to-back calls plus one launch latency, as CUDA
    events see them; records each attempt's (number, wall seconds)."""
    attempts = []

    def time_launches(fn, number):
        wall = per_call_s * number + latency_s
        attempts.append((number, wall))
        return wall / number

    return time_launches, attempts


@pytest.mark.parametrize("per_call_us", [3.0, 7.0, 48.0, 230.0, 2100.0, 41000.0])
@pytest.mark.parametrize("latency_us", [0.0, 4.0, 25.0])
def test_timing_reaches_the_minimum_without_overshooting_twice(per_call_us, latency_us):
    # Before: a GPU kernel of tens of microseconds took two growths (about 0.26 s, then 1.618x
    # that: 0.43 s) under min_repeat_ms=300. Now the attempts add up to well under 2x.
    time_launches, attempts = device(per_call_us * 1e-6, latency_us * 1e-6)
    result = measure(time_launches, lambda: None, number=3, repeat=1, min_repeat_ms=300)
    timed = attempts[1:]  # after the warm-up
    assert timed[-1][1] * 1e3 >= 300  # the reported repeat lasted the minimum
    assert all(w * 1e3 < 300 for _, w in timed[:-1])  # and is the first that did
    assert result.results == (timed[-1][1] / timed[-1][0],)
    total_ms = sum(w for _, w in timed) * 1e3
    # Whole calls: the first attempt's 3 calls may already be a large part of the minimum.
    assert total_ms <= 1.45 * 300 + 3 * per_call_us * 1e-3


def test_a_gpu_kernel_of_tens_of_microseconds_is_timed_for_little_over_the_minimum():
    time_launches, attempts = device(48e-6, 25e-6)  # launch latency inflates 3 calls by 17%
    measure(time_launches, lambda: None, number=3, repeat=1, min_repeat_ms=300)
    total_ms = sum(w for _, w in attempts[1:]) * 1e3
    assert len(attempts[1:]) == 3  # 3 calls, a calibrating attempt, the timed one
    assert 300 <= total_ms <= 1.2 * 300  # TVM's rule: 256 + 414 ms here


def test_next_number_grows_at_least_by_the_golden_ratio():
    rng = np.random.default_rng(0)
    for _ in range(200):
        number = int(rng.integers(1, 10**6))
        per_call = float(rng.uniform(1e-7, 1e-2))
        nxt = next_number(number, per_call, float(rng.uniform(1, 1000)))
        assert nxt >= number * 1.618


def test_repeats_after_the_first_keep_the_grown_number():
    time_launches, attempts = device(20e-6, 10e-6)
    result = measure(time_launches, lambda: None, number=3, repeat=4, min_repeat_ms=50)
    assert len(result.results) == 4
    final = attempts[-1][0]
    assert [n for n, _ in attempts[-4:]] == [final] * 4


def test_no_minimum_times_number_calls_once_per_repeat():
    time_launches, attempts = device(1e-3, 0.0)
    measure(time_launches, lambda: None, number=5, repeat=3, min_repeat_ms=0)
    assert [n for n, _ in attempts] == [1, 5, 5, 5]


def host_bound_gpu(kernel_s: float, issue_s: float = 5e-6, graph_gap_s: float = 1e-6):
    """A fake GPU whose runs take ``kernel_s`` but, launched from Python, start at most every
    ``issue_s``; a replayed graph of ``runs`` runs takes ``runs * (kernel_s + graph_gap_s)``.
    Returns ``(time_launches, run, replay_of, calls)``; ``calls`` records what was timed."""
    calls = {"graphs": [], "timed": []}

    def run():
        pass

    def replay_of(runs):
        calls["graphs"].append(runs)

        def replay():
            pass

        replay.runs = runs
        return replay

    def time_launches(fn, number):
        runs = getattr(fn, "runs", None)
        if runs is None:  # back to back from Python: the host's issue rate is the floor
            wall = number * max(kernel_s, issue_s) + issue_s
        else:
            wall = number * runs * (kernel_s + graph_gap_s) + issue_s
        calls["timed"].append(wall)
        return wall / number

    return time_launches, run, replay_of, calls


@pytest.mark.parametrize("kernel_us", [1.0, 2.5, 4.0])
def test_short_gpu_runs_are_timed_as_graph_replays_and_keep_their_order(kernel_us):
    from runtime.timer import RUNS_PER_GRAPH, measure_short_runs

    time_launches, run, replay_of, calls = host_bound_gpu(kernel_us * 1e-6)
    plain = measure(time_launches, run, number=3, repeat=3, min_repeat_ms=1)
    # launched one by one, every kernel under the 5 us issue rate reads about the same
    assert plain.median > 5e-6
    got = measure_short_runs(time_launches, run, replay_of, number=3, repeat=3, min_repeat_ms=1)
    assert calls["graphs"] == [RUNS_PER_GRAPH]
    # the kernel's own time plus the graph's 1 us gap, the launch of the graph spread thin
    assert kernel_us * 1e-6 < got.median < (kernel_us + 1.2) * 1e-6
    assert len(got.results) == 3


def test_graph_timing_keeps_min_repeat_ms_and_long_runs_stay_plain():
    from runtime.timer import measure_short_runs

    time_launches, run, replay_of, calls = host_bound_gpu(2e-6)
    measure_short_runs(time_launches, run, replay_of, number=3, repeat=1, min_repeat_ms=100)
    # the timed repeat lasted the minimum, and the attempts in all well under twice it
    assert calls["timed"][-1] * 1e3 >= 100
    assert sum(calls["timed"]) * 1e3 < 2 * 100
    time_launches, run, replay_of, calls = host_bound_gpu(80e-6)
    long = measure_short_runs(time_launches, run, replay_of, number=3, repeat=2)
    assert calls["graphs"] == []  # 80 us runs outpace the host: no graph needed
    assert len(calls["timed"]) == 1 + 2  # the first run is the only warm-up, then 2 repeats
    assert long.results == measure(time_launches, run, number=3, repeat=2).results


def test_without_graphs_short_runs_are_timed_one_by_one():
    from runtime.timer import measure_short_runs

    time_launches, run, _, calls = host_bound_gpu(2e-6)
    got = measure_short_runs(time_launches, run, lambda runs: None, number=4, repeat=2)
    assert got.results == measure(time_launches, run, number=4, repeat=2).results
