"""Random annotation and mutation: properties of sampled states, and a correctness sweep in
which every sampled or mutated state lowers and computes the reference result (loop-IR
interpreter for all, LLVM for a subset)."""

import random

import numpy as np
import pytest

import runtime
from autosched import workloads as W
from autosched.hardware import HardwareParams
from autosched.search.annotate import sample_init_population
from autosched.search.mutation import (
    mutate,
    mutate_auto_unroll,
    mutate_compute_location,
    mutate_parallel,
    mutate_tile_size,
)
from autosched.search.params import SearchParams
from autosched.search.sketch import generate_sketches
from autosched.search.tiling import AnnotateContext, divisors, factorization_schemes
from autosched.task import SearchTask
from codegen.llvm import build_llvm
from tensorir import steps as st
from tensorir.dag import ComputeDAG
from tensorir.dtype import to_numpy
from tensorir.interp import eval_dag
from tensorir.loop_interp import run_program
from tensorir.lower import lower

PARAMS = SearchParams()


def make_task(tensors, cores=4):
    hw = HardwareParams(num_cores=cores)
    return SearchTask(ComputeDAG(tensors), target="llvm", hardware_params=hw)


# small shapes: the loop-IR interpreter runs every state of the sweep
SWEEP = {
    "matmul": lambda: W.matmul(16, 24, 32),
    "matmul_relu": lambda: W.matmul_relu(12, 16, 20),
    "matmul_rfactor": lambda: W.matmul(4, 4, 96),
    "dense_bias": lambda: W.dense_bias(1, 64, 100),
    "softmax": lambda: W.softmax(4, 100),
    "conv2d_bias_relu": lambda: W.conv2d_nhwc_bias_relu(1, 6, 6, 8, 8, 3, 3, 1, 1),
    "conv2d_stride2": lambda: W.conv2d_nhwc_bias_relu(1, 7, 7, 8, 8, 3, 3, 2, 1),
    "depthwise": lambda: W.depthwise_conv2d_nhwc(1, 8, 8, 16),
    "max_pool_bias_relu": lambda: W.max_pool_bias_relu(1, 8, 8, 16),
    "winograd": lambda: W.winograd_conv2d_nhwc_3x3(1, 4, 4, 4, 4),
}


def sweep_states(name, n_sampled, n_mutated, seed):
    """``n_sampled`` init-population states plus ``n_mutated`` mutations of them."""
    task = make_task(SWEEP[name]())
    rng = random.Random(seed)
    pop = sample_init_population(task, generate_sketches(task), n_sampled, rng)
    assert len(pop) >= min(n_sampled, 4), f"{name}: only {len(pop)} valid samples"
    muts = []
    for _ in range(20 * n_mutated):
        if len(muts) >= n_mutated:
            break
        m = mutate(task, pop[rng.randrange(len(pop))], rng)
        if m is not None:
            muts.append(m)
    return task, pop + muts


def reference(dag, seed):
    rng = np.random.default_rng(seed)
    # uniform [-1, 1]: never all zeros or ones, so wrong indexing shows
    ins = [rng.uniform(-1, 1, size=t.shape).astype(to_numpy(t.dtype)) for t in dag.input_tensors]
    return ins, [np.asarray(o) for o in eval_dag(dag, ins)]


def fresh_outputs(dag):
    return [np.full(t.shape, np.nan, to_numpy(t.dtype)) for t in dag.output_tensors]


def check_interp(state, ins, ref):
    outs = fresh_outputs(state.dag)
    run_program(lower(state), [*ins, *outs])
    for o, r in zip(outs, ref):
        np.testing.assert_allclose(o, r, rtol=1e-4, atol=1e-4, err_msg=str(state))


def check_llvm(state, ins, ref):
    mod = runtime.load_module(**build_llvm(lower(state)).as_dict(), device=runtime.device("cpu"))
    outs = fresh_outputs(state.dag)
    mod(*ins, *outs)
    for o, r in zip(outs, ref):
        np.testing.assert_allclose(o, r, rtol=1e-4, atol=1e-4, err_msg=str(state))


def run_sweep(n_sampled, n_mutated, n_llvm, seed):
    total = 0
    for k, name in enumerate(SWEEP):
        task, states = sweep_states(name, n_sampled, n_mutated, seed + k)
        ins, ref = reference(task.compute_dag, seed + k)
        for j, s in enumerate(states):
            assert s.concrete
            check_interp(s, ins, ref)
            if j < n_llvm:
                check_llvm(s, ins, ref)
        total += len(states)
    return total


def test_correctness_sweep():
    # 10 workloads x (32 sampled + 20 mutated) states; 6 per workload also through LLVM
    assert run_sweep(32, 20, 6, seed=0) >= 500


@pytest.mark.slow
def test_correctness_sweep_large():
    assert run_sweep(150, 100, 40, seed=100) >= 2000


# ----------------------------------------------------------------------------- factorizations


def test_divisors_and_factorizations():
    assert divisors(12) == (1, 2, 3, 4, 6, 12)
    assert divisors(45) == (1, 3, 5, 9, 15, 45)
    assert divisors(49) == (1, 7, 49)
    schemes = factorization_schemes(64, 3, 64)
    # ordered triples whose product divides 64: C(6+3, 3) = 84 (exponents summing to <= 6)
    assert len(schemes) == 84
    assert all(64 % (a * b * c) == 0 for a, b, c in schemes)
    assert max(s[-1] for s in factorization_schemes(512, 3, 64)) == 64
    assert all(s[-1] <= 16 for s in factorization_schemes(512, 3, 16))
    assert factorization_schemes(7, 1, 64) == ((1,), (7,))


# ----------------------------------------------------------------------------- population


@pytest.fixture(scope="module")
def mm512():
    task = make_task(W.matmul(512, 512, 512))
    sketches = generate_sketches(task)
    return task, sketches, sample_init_population(task, sketches, 200, random.Random(0))


def split_steps(state):
    return [s for s in state.steps if isinstance(s, st.SplitStep)]


def test_population_concrete_distinct_and_divisible(mm512):
    task, sketches, pop = mm512
    assert len(pop) == 200
    assert all(s.concrete for s in pop)
    assert len({s.steps for s in pop}) == 200
    assert len({str(s) for s in pop}) > 150  # mostly distinct loop nests too
    for s in pop:
        for sp in split_steps(s):
            prod = int(np.prod(sp.lengths))
            assert sp.extent % prod == 0, sp
            assert sp.lengths[-1] <= PARAMS.max_innermost_split_factor
    # every sketch is used
    n_cache = sum(any(isinstance(x, st.CacheWriteStep) for x in s.steps) for s in pop)
    assert 0 < n_cache < 200


def test_population_parallel_unroll_vectorize(mm512):
    task, _, pop = mm512
    cores = task.hardware_params.num_cores
    n_par = 0
    for s in pop:
        root = s["C"]
        # the outer (fused) loop of the root stage is parallel, unless the outer tile loops
        # all have extent 1 (then InitParallel looks inside, or there is nothing to split)
        if root.iters[0].annotation == "parallel":
            n_par += 1
            assert root.iters[0].kind == "spatial"
        else:
            assert root.iters[0].extent == 1
        # the stage with the reduction gets an unroll pragma from the candidate set
        red = s["C.local"] if "C.local" in [x.name for x in s.stages] else root
        assert red.auto_unroll_max_step in PARAMS.auto_unroll_configs_cpu
        pragmas = [x for x in s.steps if isinstance(x, st.PragmaStep)]
        assert len(pragmas) == 1
        assert int(pragmas[0].pragma_type.split("$")[1]) in PARAMS.auto_unroll_configs_cpu
    # parallel degree: the fused outer loop stops once it exceeds 16 * cores, so a sample
    # fuses at least two loops unless the first already has enough iterations
    par = [s["C"].iters[0] for s in pop]
    assert any("@" in it.name for it in par)
    assert all(it.extent > 16 * cores or "@" in it.name or it.name.endswith(".0") for it in par)
    assert n_par > 0.9 * len(pop)
    values = {
        s["C"].auto_unroll_max_step for s in pop if "C.local" not in [x.name for x in s.stages]
    }
    assert len(values) > 1


def test_vectorized_extent_at_most_16():
    from autosched.search.state_utils import bound_extents

    for name in ("matmul", "conv2d_bias_relu", "softmax", "max_pool_bias_relu"):
        task, states = sweep_states(name, 40, 0, seed=3)
        n_vec = 0
        for s in states:
            ext = bound_extents(s)
            for sid, stage in enumerate(s.stages):
                for it in stage.iters:
                    if it.annotation == "vectorize":
                        n_vec += 1
                        e = it.extent if it.extent is not None else ext[sid][it.name]
                        assert e <= PARAMS.max_vectorize_size
                        assert it is stage.iters[-1]
        assert n_vec > 0, name


def test_sampling_is_reproducible():
    task = make_task(W.conv2d_nhwc_bias_relu(1, 14, 14, 16, 16, 3, 3, 1, 1))
    sk = generate_sketches(task)
    a = sample_init_population(task, sk, 30, random.Random(7))
    b = sample_init_population(task, sk, 30, random.Random(7))
    c = sample_init_population(task, sk, 30, random.Random(8))
    assert [s.steps for s in a] == [s.steps for s in b]
    assert [s.steps for s in a] != [s.steps for s in c]
    assert [s.steps for s in sample_init_population(task, sk, 30, 7)] == [s.steps for s in a]


def test_compute_location_is_sampled():
    task = make_task(W.conv2d_nhwc_bias_relu(1, 14, 14, 16, 16, 3, 3, 1, 1))
    pop = sample_init_population(task, generate_sketches(task), 100, random.Random(0))
    where = {s["PaddedInput"].compute_at for s in pop}
    assert where == {"root", "iter"}  # padding is never inlined (it is root in the sketch)
    off = SearchParams(disable_change_compute_location=True)
    pop = sample_init_population(task, generate_sketches(task), 30, random.Random(0), off)
    assert {s["PaddedInput"].compute_at for s in pop} == {"root"}


# ----------------------------------------------------------------------------- mutation


def test_mutation_rules_change_one_thing(mm512):
    task, _, pop = mm512
    ctx = AnnotateContext(task.compute_dag, task.hardware_params.num_cores, PARAMS)
    rng = random.Random(0)
    for s in pop[:50]:
        m = mutate_tile_size(ctx, s, rng)
        assert m is not None and m.concrete
        diff = [k for k, (a, b) in enumerate(zip(s.steps, m.steps)) if a != b]
        assert len(diff) == 1 and isinstance(m.steps[diff[0]], st.SplitStep)
        a, b = s.steps[diff[0]], m.steps[diff[0]]
        assert a.extent == b.extent and b.extent % int(np.prod(b.lengths)) == 0
        assert b.lengths[-1] <= PARAMS.max_innermost_split_factor
        u = mutate_auto_unroll(ctx, s, rng)
        assert u is not None and u.steps != s.steps
        vals = [x.auto_unroll_max_step for x in u.stages]
        assert vals != [x.auto_unroll_max_step for x in s.stages]
    # matmul 512 has no movable (non-tiled) stage
    assert all(mutate_compute_location(ctx, s, rng) is None for s in pop[:20])
    par = [mutate_parallel(ctx, s, rng) for s in pop[:50]]
    par = [(s, p) for s, p in zip(pop[:50], par) if p is not None]
    assert par
    for s, p in par:
        assert p["C"].iters[0].annotation == "parallel"
        assert p["C"].iters[0].name != s["C"].iters[0].name


def test_mutate_compute_location_moves_padding():
    task = make_task(W.conv2d_nhwc_bias_relu(1, 14, 14, 16, 16, 3, 3, 1, 1))
    pop = sample_init_population(task, generate_sketches(task), 60, random.Random(0))
    ctx = AnnotateContext(task.compute_dag, 4, PARAMS)
    rng = random.Random(1)
    moved = [m for m in (mutate_compute_location(ctx, s, rng) for s in pop) if m is not None]
    assert moved
    for m in moved:
        assert m["PaddedInput"].compute_at == "iter"


def test_mutate_is_reproducible_and_mostly_valid(mm512):
    task, _, pop = mm512
    a = [mutate(task, s, random.Random(k)) for k, s in enumerate(pop[:40])]
    b = [mutate(task, s, random.Random(k)) for k, s in enumerate(pop[:40])]
    assert [x and x.steps for x in a] == [x and x.steps for x in b]
    ok = [x for x in a if x is not None]
    assert len(ok) >= 30
    assert all(x.steps != s.steps for x, s in zip(a, pop) if x is not None)
