"""Per-store features: layout, known values on small programs, caching, invalid states."""

import numpy as np
import pytest

from autosched import manual, workloads
from autosched.cost_model.feature_pool import FeatureCache, states_features
from autosched.cost_model.features import (
    FEATURE_NAMES,
    program_features,
    slog,
    state_features,
)
from autosched.task import SearchTask
from tensorir import ComputeDAG
from tensorir.expr import Var
from tensorir.loops import Buffer, For, Load, Program, Store
from tensorir.lower import lower

COL = {n: i for i, n in enumerate(FEATURE_NAMES)}


def f(row, name):
    return float(row[COL[name]])


def groups(row):
    """The 5 buffer-access groups of a row as dicts (name without the B%d. prefix)."""
    out = []
    for b in range(5):
        g = {
            n.split(".", 1)[1]: float(row[COL[n]]) for n in FEATURE_NAMES if n.startswith(f"B{b}.")
        }
        out.append(g)
    return out


def matmul_state(n=16):
    dag = ComputeDAG(workloads.matmul(n, n, n))
    return dag, dag.get_init_state()


def test_layout_has_164_unique_names_plus_4_for_tensor_cores_and_2_for_pipelines():
    assert len(FEATURE_NAMES) == 170
    assert len(set(FEATURE_NAMES)) == 170
    assert FEATURE_NAMES[164:168] == ("tensor_core", "tc_fragment_mnk", "tc_accumulators",
                                      "tc_warps")  # fmt: skip
    assert FEATURE_NAMES[168:] == ("pipeline_stages", "pipeline_shared_bytes")
    assert FEATURE_NAMES[0] == "float_mad" and FEATURE_NAMES[163] == "auto_unroll_max_step"
    assert FEATURE_NAMES[57] == "B0.acc_type.kRead" and FEATURE_NAMES[57 + 90] == (
        "arith_intensity_curve_0"
    )


def test_unscheduled_matmul_counts_and_strides():
    _, s = matmul_state(16)
    x = program_features(lower(s))
    assert x.shape == (1, 170) and x.dtype == np.float32  # init and update of C: one row
    row = x[0]
    assert f(row, "float_addsub") == pytest.approx(slog(16**3))
    assert f(row, "float_mul") == pytest.approx(slog(16**3))
    assert f(row, "float_divmod") == 0.0
    assert f(row, "outer_prod") == pytest.approx(slog(16**3))
    assert f(row, "num_loops") == pytest.approx(slog(3))
    assert f(row, "vec_type.kPosNone") == 1.0 and f(row, "vec_len") == 0.0
    assert f(row, "parallel_type.kPosNone") == 1.0 and f(row, "is_gpu") == 0.0
    gs = groups(row)
    assert sum(g["acc_type.kReadWrite"] for g in gs) == 1.0  # C
    assert sum(g["acc_type.kRead"] for g in gs) == 2.0  # A and B
    assert all(g["bytes"] == 0.0 for g in gs[3:])  # zero padding
    # innermost loop k: A[i*16 + k] stride 1, B[k*16 + j] stride 16, C[i*16 + j] does not move
    strides = sorted(g["stride"] for g in gs[:3])
    assert strides == pytest.approx([0.0, slog(1), slog(16)])
    # B is read with stride 16 floats = one cache line per iteration: the most lines, first
    assert gs[0]["stride"] == pytest.approx(slog(16))
    assert gs[0]["lines"] == pytest.approx(slog(16**3))
    # C: k does not touch it -> reuse over k, 16 times
    c = next(g for g in gs if g["acc_type.kReadWrite"])
    assert c["reuse_type.kLoopMultipleRead"] == 1.0
    assert c["reuse_ct"] == pytest.approx(slog(16))
    assert c["unique_bytes"] == pytest.approx(slog(16 * 16 * 4))


def test_vectorize_parallel_unroll_triples():
    _, s = matmul_state(64)
    i, j, k = s["C"].iters
    i0, i1 = s.split("C", i, [8])
    j0, j1 = s.split("C", j, [8])
    k0, k1 = s.split("C", k, [4])
    s.reorder("C", [i0, j0, k0, i1, k1, j1])
    s.parallel("C", i0)
    s.unroll("C", k1)
    s.vectorize("C", j1)
    s.pragma("C", i0, "auto_unroll_max_step$16")
    row = program_features(lower(s))[0]
    assert f(row, "vec_num") == pytest.approx(slog(1))
    assert f(row, "vec_len") == pytest.approx(slog(8))
    assert f(row, "vec_prod") == pytest.approx(slog(8))
    assert f(row, "vec_type.kPosMixed") == 1.0 and f(row, "vec_type.kPosNone") == 0.0
    assert f(row, "parallel_len") == pytest.approx(slog(8))
    assert f(row, "parallel_type.kPosMixed") == 1.0
    assert f(row, "unroll_len") == pytest.approx(slog(4))
    assert f(row, "auto_unroll_max_step") == pytest.approx(slog(16))
    # ops are counted per lane: the same dynamic count as the unscheduled program
    assert f(row, "float_mul") == pytest.approx(slog(64**3))
    gs = groups(row)
    # the innermost (vectorized) loop j.1 moves B and C with stride 1 and leaves A alone
    assert sorted(g["stride"] for g in gs[:3]) == pytest.approx([0.0, 1.0, 1.0])


def test_gpu_thread_lengths_and_allocation_on_a_hand_built_program():
    bx, tx, k = Var("bx"), Var("tx"), Var("k")
    a = Buffer("A", (64, 32), "float32")
    out = Buffer("O", (64, 32), "float32")
    loc = Buffer("L", (4,), "float32", "local")
    body = Store(out, bx * 32 + tx, Load(a, bx * 32 + tx, "float32") * 2.0)
    inner = For(k, 4, Store(loc, k, Load(a, tx * 64 + k, "float32")), kind="serial")
    from tensorir.loops import Allocate, seq

    prog = Program(
        "g",
        (a, out),
        (),
        For(
            bx,
            64,
            For(tx, 32, seq(Allocate(loc, inner), body), "thread", "threadIdx.x"),
            "thread",
            "blockIdx.x",
        ),  # fmt: skip
    )
    x = program_features(prog)
    assert x.shape == (2, 170)  # L then O, in order of first store
    loc_row, out_row = x
    for row in x:
        assert f(row, "is_gpu") == 1.0
        assert f(row, "blockIdx_x_len") == pytest.approx(slog(64))
        assert f(row, "threadIdx_x_len") == pytest.approx(slog(32))
        assert f(row, "threadIdx_y_len") == pytest.approx(slog(1))
        assert f(row, "parallel_num") == 0.0  # thread loops are not parallel loops
    assert f(loc_row, "alloc_size") == pytest.approx(slog(16))
    assert f(loc_row, "alloc_outer_prod") == pytest.approx(slog(64 * 32))
    assert f(loc_row, "alloc_inner_prod") == pytest.approx(slog(4))
    assert f(out_row, "alloc_size") == 0.0  # a param: not allocated by the program
    assert f(out_row, "float_mul") == pytest.approx(slog(64 * 32))
    # A read as A[tx*64 + k]: stride 1 along k; over the whole nest 64*32 float reads
    ga = [g for g in groups(loc_row) if g["acc_type.kRead"]][0]
    assert ga["stride"] == pytest.approx(slog(1))
    assert ga["bytes"] == pytest.approx(slog(64 * 32 * 4 * 4))


def test_region_merges_equal_strides_and_nonlinear_index():
    # conv-like A[(y + r) * 10 + c]: y in 8, r in 3 -> 10 rows, c in 10 -> 100 elements
    y, r, c = Var("y"), Var("r"), Var("c")
    a = Buffer("A", (10, 10), "float32")
    o = Buffer("O", (8, 10), "float32")
    st = Store(o, y * 10 + c, Load(a, y * 10 + r * 10 + c, "float32"))
    prog = Program("p", (a, o), (), For(y, 8, For(r, 3, For(c, 10, st))))
    row = program_features(prog)[0]
    ga = [g for g in groups(row) if g["acc_type.kRead"]][0]
    assert ga["unique_bytes"] == pytest.approx(slog(100 * 4))
    # floormod index: stride unknown -> the term's multiplier, region bounded by intervals
    i = Var("i")
    st2 = Store(o, i, Load(a, (i % 10) * 10, "float32"))
    row2 = program_features(Program("q", (a, o), (), For(i, 80, st2)))[0]
    ga2 = [g for g in groups(row2) if g["acc_type.kRead"]][0]
    assert ga2["stride"] == pytest.approx(slog(10))
    assert ga2["unique_bytes"] == pytest.approx(slog(10 * 4))


def test_rows_are_stored_buffers_and_output_is_deterministic():
    dag = ComputeDAG(workloads.conv2d_nhwc_bias_relu(1, 14, 14, 8, 8, 3, 3, 1, 1))
    task = SearchTask(dag, target="llvm")
    s = dag.get_init_state()
    x = state_features(task, s)
    stored = {st.buffer.name for st in _stores(lower(s).body)}
    assert x.shape == (len(stored), 170) and len(stored) == 4
    assert np.array_equal(x, state_features(task, s))
    assert np.isfinite(x).all()
    st = manual.conv2d_nhwc_cpu(dag)
    y = state_features(task, st)
    assert y.shape[1] == 170 and np.isfinite(y).all() and y.shape[0] >= 2


def _stores(stmt):
    from tensorir.loops import walk_stmts

    return [s for s in walk_stmts(stmt) if isinstance(s, Store)]


def test_invalid_states_give_empty_features():
    dag, s = matmul_state(16)
    gpu = SearchTask(dag, target="cuda")  # unbound loops fail the GPU verifier
    assert state_features(gpu, s).shape == (0, 170)
    cpu = SearchTask(dag, target="llvm")
    assert state_features(cpu, object()).shape == (0, 170)  # cannot lower at all
    assert state_features(cpu, s).shape == (1, 170)


def test_states_features_caches_by_steps():
    dag, s = matmul_state(16)
    task = SearchTask(dag, target="llvm")
    s2 = s.copy()
    s2.split("C", s2["C"].iters[0], [4])
    cache = FeatureCache(max_entries=8)
    a = states_features(task, [s, s2, s], cache=cache)
    assert (cache.misses, cache.hits, len(cache)) == (2, 1, 2)
    assert a[0] is a[2] and not a[0].flags.writeable
    assert not np.array_equal(a[0], a[1])
    b = states_features(task, [s2], cache=cache)
    assert b[0] is a[1] and cache.hits == 2


def test_parallel_extraction_equals_in_process(monkeypatch):
    # The worker pool replays each state from its steps; its rows must be the in-process rows.
    from autosched.cost_model import feature_pool
    from autosched.search.annotate import sample_init_population
    from autosched.search.params import SearchParams
    from autosched.search.sketch import generate_sketches

    dag = ComputeDAG(workloads.matmul(64, 48, 32))
    task = SearchTask(dag, target="llvm")
    params = SearchParams()
    rng = np.random.default_rng(5)
    states = sample_init_population(task, generate_sketches(task, None, params), 40, rng, params)
    states = states + states[:5]  # duplicates within a batch
    monkeypatch.setattr(feature_pool, "MIN_STATES_PER_WORKER", 4)
    monkeypatch.setenv("AUTOSCHED_FEATURE_WORKERS", "2")
    try:
        par = states_features(task, states, cache=FeatureCache())
    finally:
        feature_pool.shutdown()
    monkeypatch.setenv("AUTOSCHED_FEATURE_WORKERS", "0")
    seq = states_features(task, states, cache=FeatureCache())
    assert len(par) == len(seq) == len(states)
    assert sum(len(f) for f in seq) > 0
    for a, b in zip(par, seq, strict=True):
        np.testing.assert_array_equal(a, b)


def test_feature_workers_env_is_checked(monkeypatch):
    from autosched.cost_model import feature_pool

    monkeypatch.setenv("AUTOSCHED_FEATURE_WORKERS", "many")
    with pytest.raises(ValueError, match="AUTOSCHED_FEATURE_WORKERS"):
        feature_pool.num_workers()
    monkeypatch.setenv("AUTOSCHED_FEATURE_WORKERS", "0")
    assert feature_pool.num_workers() == 0


def test_pool_failure_is_logged_on_the_autosched_logger(monkeypatch, caplog):
    # The fallback to in-process extraction is a diagnostic for logging.getLogger("autosched"),
    # not a RuntimeWarning addressed to the user.
    import logging
    import warnings

    from autosched.cost_model import feature_pool

    def broken(*args):
        raise OSError("no processes today")

    dag, s = matmul_state(16)
    task = SearchTask(dag, target="llvm")
    s2 = s.copy()
    s2.split("C", s2["C"].iters[0], [4])
    monkeypatch.setattr(feature_pool, "MIN_STATES_PER_WORKER", 1)
    monkeypatch.setattr(feature_pool, "num_workers", lambda: 2)
    monkeypatch.setattr(feature_pool, "extract_many", broken)
    with warnings.catch_warnings(), caplog.at_level(logging.WARNING, logger="autosched"):
        warnings.simplefilter("error")
        rows = states_features(task, [s, s2], cache=FeatureCache())
    assert not np.array_equal(rows[0], rows[1])
    (rec,) = [r for r in caplog.records if "no processes today" in r.getMessage()]
    assert rec.name == "autosched.cost_model.feature_pool" and rec.levelno == logging.WARNING


def test_cache_over_evolved_states_equals_cold_extraction_and_stays_bounded(monkeypatch):
    # Issue 29: evolution re-scores the same states round after round; the cache must give
    # exactly the rows a cold extraction gives, and hold at most max_entries states.
    from autosched.cost_model import feature_pool
    from autosched.search.annotate import sample_init_population
    from autosched.search.mutation import mutate
    from autosched.search.params import SearchParams
    from autosched.search.sketch import generate_sketches

    monkeypatch.setenv("AUTOSCHED_FEATURE_WORKERS", "0")  # in-process: the cache alone
    dag = ComputeDAG(workloads.conv2d_nhwc_bias_relu(1, 14, 14, 8, 8, 3, 3, 1, 1))
    task = SearchTask(dag, target="llvm")
    params = SearchParams()
    rng = np.random.default_rng(11)
    states = sample_init_population(task, generate_sketches(task, None, params), 12, rng, params)
    pool = list(states)
    while len(pool) < 30:  # evolved: mutations of mutations
        child = mutate(task, pool[int(rng.integers(len(pool)))], rng, params)
        if child is not None:
            pool.append(child)
    cache = FeatureCache(max_entries=10)
    order = [pool[i] for i in rng.integers(0, len(pool), size=60)]  # many repeats
    got = []
    for lo in range(0, len(order), 15):  # rounds of 15
        got += feature_pool.states_features(task, order[lo : lo + 15], cache=cache)
        assert len(cache) <= 10
    assert cache.hits > 0 and cache.misses > 10  # reused, and evicted then recomputed
    for state, rows in zip(order, got, strict=True):
        cold = state_features(task, state)
        assert rows.dtype == cold.dtype and rows.shape == cold.shape
        assert rows.tobytes() == cold.tobytes()  # bit for bit
    assert sum(len(r) for r in got) > 0


def test_batch_freezes_older_objects_only_for_its_duration():
    import gc

    from autosched.cost_model.feature_pool import _older_objects_frozen

    assert gc.get_freeze_count() == 0
    with _older_objects_frozen():
        assert gc.get_freeze_count() > 0  # what was alive is out of the collector's passes
    assert gc.get_freeze_count() == 0
    with pytest.raises(ValueError), _older_objects_frozen():
        raise ValueError("a failing batch")
    assert gc.get_freeze_count() == 0  # undone on errors too
    gc.freeze()  # someone else's freeze is left alone
    try:
        before = gc.get_freeze_count()
        # Frozen objects can still be freed by reference counting, so the count may only
        # shrink meanwhile; a second freeze would add these newer objects, an unfreeze zero it.
        newer = [[] for _ in range(1000)]  # containers: tracked by the collector
        with _older_objects_frozen():
            assert 0 < gc.get_freeze_count() <= before
        assert 0 < gc.get_freeze_count() <= before
        del newer
    finally:
        gc.unfreeze()


def test_small_batches_go_to_as_many_workers_as_they_fill(monkeypatch):
    # Evolution's batches of 50-70 new states must reach the pool on a 2-core host: the
    # threshold is per worker, not a fixed batch size.
    from autosched.cost_model import feature_pool

    dag, s = matmul_state(16)
    task = SearchTask(dag, target="llvm")
    states = []
    for factor in (1, 2, 4, 8, 16):
        for axis in (0, 1):
            st = s.copy()
            st.split("C", st["C"].iters[axis], [factor])
            states.append(st)
    calls = []

    def fake_extract(task, steps_json, workers, chunks=None):
        calls.append((len(steps_json), workers, chunks))
        return [feature_pool.state_features(task, st) for st in states[: len(steps_json)]]

    monkeypatch.setattr(feature_pool, "num_workers", lambda: 2)
    monkeypatch.setattr(feature_pool, "extract_many", fake_extract)
    monkeypatch.setattr(feature_pool, "MIN_STATES_PER_WORKER", 5)
    states_features(task, states[:9], cache=FeatureCache())
    assert calls == []  # 9 states fill one chunk of 5: in-process
    states_features(task, states, cache=FeatureCache())
    assert calls == [(10, 2, 2)]  # two chunks of 5
    monkeypatch.setattr(feature_pool, "num_workers", lambda: 16)
    monkeypatch.setattr(feature_pool, "MIN_STATES_PER_WORKER", 2)
    states_features(task, states, cache=FeatureCache())
    assert calls[-1] == (10, 16, 5)  # a small batch on a large host: 5 chunks, not in-process
