"""GPU mutations in seeded chunks over the worker processes (issue 29): the same children in
this process and in the workers, every child verified, and evolution the same either way.
Runs without a GPU."""

import logging

import numpy as np
import pytest

from autosched import testing as W
from autosched.cost_model.model import RandomModel
from autosched.search import annotate_gpu as ag
from autosched.search.evolution import evolutionary_search
from autosched.search.mutation import mutate
from autosched.search.mutation_pool import MIN_CHUNK, mutate_gpu_states
from autosched.search.params import SearchParams
from autosched.search.sample_pool import sample_gpu_states
from autosched.search.sketch import generate_sketches
from autosched.task import SearchTask
from tensorir.dag import ComputeDAG


@pytest.fixture(scope="module")
def task_and_parents():
    task = SearchTask(ComputeDAG(W.matmul(128, 128, 64)), target="cuda")
    states = sample_gpu_states(
        task, generate_sketches(task), 12, np.random.default_rng(3), SearchParams(), 0
    )
    assert len(states) >= 6
    # Several chunks, with repeated parents (roulette selection draws the good ones often).
    parents = [states[i % 6] for i in range(8 * MIN_CHUNK + 3)]
    return task, parents


def test_chunked_mutation_is_the_same_in_process_and_in_workers(task_and_parents, caplog):
    task, parents = task_and_parents
    seeds = list(range(100, 100 + len(parents)))
    here = mutate_gpu_states(task, parents, seeds, SearchParams(), workers=0)
    with caplog.at_level(logging.DEBUG, logger="autosched.search.pool_chunks"):
        pool = mutate_gpu_states(task, parents, seeds, SearchParams(), workers=2)
    assert "worker pool failed" not in caplog.text  # the workers mutated, not the fallback
    assert [c and c.steps for c in here] == [c and c.steps for c in pool]
    # In process, each child is what mutate() gives its parent and seed.
    direct = [mutate(task, p, s, SearchParams()) for p, s in zip(parents, seeds, strict=True)]
    assert [c and c.steps for c in here] == [c and c.steps for c in direct]
    children = [c for c in pool if c is not None]
    assert len(children) > len(parents) // 2
    assert any(c.steps != p.steps for c, p in zip(pool, parents, strict=True) if c is not None)
    assert all(not ag.gpu_state_errors(task, c) for c in children)
    other = mutate_gpu_states(task, parents, [s + 1 for s in seeds], SearchParams(), workers=2)
    assert [c and c.steps for c in other] != [c and c.steps for c in pool]


def test_mutate_gpu_states_wants_a_seed_per_parent(task_and_parents):
    task, parents = task_and_parents
    with pytest.raises(ValueError, match="3 parents but 2 seeds"):
        mutate_gpu_states(task, parents[:3], [1, 2], SearchParams(), workers=0)


def test_evolution_gives_the_same_states_with_the_pool_and_one_by_one(task_and_parents):
    task, parents = task_and_parents
    init = list({p.steps: p for p in parents}.values())

    def run(mutate_many):
        return evolutionary_search(
            task, init, RandomModel(0), lambda t, s, x: mutate(t, s, x, SearchParams()),
            np.random.default_rng(7), out_size=8, num_iters=2, population_size=40,
            mutation_prob=0.85, mutate_many=mutate_many,
        )  # fmt: skip

    pooled = run(lambda t, states, seeds: mutate_gpu_states(t, states, seeds, SearchParams(), 2))
    one_by_one = run(None)
    assert len(pooled) == 8
    assert [s.steps for s in pooled] == [s.steps for s in one_by_one]
