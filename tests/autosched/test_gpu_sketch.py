"""GPU search space: sketches (goldens + structure), random annotation, the validity filter,
mutations and features. Runs without a GPU (nvcc compile-only and PoCL tests are in
test_gpu_sweep.py)."""

import os
import random
from pathlib import Path

import numpy as np
import pytest

from autosched import manual
from autosched import workloads as W
from autosched.cost_model.features import FEATURE_NAMES, state_features
from autosched.hardware import HardwareParams
from autosched.search.annotate import sample_init_population
from autosched.search.annotate_gpu import gpu_state_errors
from autosched.search.mutation import mutate
from autosched.search.params import SearchParams
from autosched.search.sketch import generate_sketches
from autosched.search.sketch_rules_gpu import has_cross_thread_reduction
from autosched.task import SearchTask
from tensorir import steps as st
from tensorir.dag import ComputeDAG

GOLDEN = Path(__file__).parent / "golden" / "sketch"


def check_golden(name: str, text: str) -> None:
    """Compare with golden/sketch/<name>.txt (written when missing or with
    AUTOSCHED_UPDATE_GOLDEN=1, for review)."""
    path = GOLDEN / f"{name}.txt"
    if not path.exists() or os.environ.get("AUTOSCHED_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f"{name}: printout differs from {path}"


def names(stage):
    return [it.name for it in stage.iters]


def gpu_task(tensors, target="cuda", **hw):
    return SearchTask(ComputeDAG(tensors), target=target, hardware_params=HardwareParams(**hw))


@pytest.mark.parametrize(
    "name,tensors",
    [
        ("gpu_matmul_512", lambda: W.matmul(512, 512, 512)),
        (
            "gpu_conv2d_nhwc_bias_relu",
            lambda: W.conv2d_nhwc_bias_relu(1, 56, 56, 64, 64, 3, 3, 1, 1),
        ),
    ],
)
def test_golden_gpu_sketch_printouts(name, tensors):
    sk = generate_sketches(gpu_task(tensors()))
    text = "".join(f"# sketch {k}\n{s}\n" for k, s in enumerate(sk))
    check_golden(name, text)


def test_matmul_gpu_sketch_structure():
    (s,) = generate_sketches(gpu_task(W.matmul(512, 512, 512)))
    assert [x.name for x in s.stages] == ["A", "A.shared", "B", "B.shared", "C.local", "C"]
    # SSSRRSRS on the register tile, the output follows block / vthread / thread levels
    assert names(s["C.local"]) == ["i.c.0", "j.c.0", "i.c.1", "j.c.1", "i.c.2", "j.c.2", "k.0",
                                   "k.1", "i.c.3", "j.c.3", "k.2", "i.c.4", "j.c.4"]  # fmt: skip
    assert names(s["C"]) == ["i.0", "j.0", "i.1", "j.1", "i.2", "j.2", "i.3", "j.3"]
    assert s["C.local"].attach == ("C", "j.2")
    assert s["A.shared"].attach == ("C.local", "k.0")
    assert s["B.shared"].attach == ("C.local", "k.0")
    assert s["A.shared"].scope == "shared"


def test_conv_gpu_sketch_inlines_and_fuses():
    (s,) = generate_sketches(gpu_task(W.conv2d_nhwc_bias_relu(1, 14, 14, 32, 32, 3, 3, 1, 1)))
    by_name = {x.name: x for x in s.stages}
    assert by_name["PaddedInput"].compute_at == "inline"
    assert by_name["T_add"].compute_at == "inline"
    assert by_name["Conv2dOutput"].attach[0] == "T_relu"  # no cache_write: fused consumer
    # the shared copies sit at the last iterator of the outermost reduce tile
    assert by_name["PaddedInput.shared"].attach == ("Conv2dOutput", "rc.0")
    assert by_name["kernel.shared"].attach == ("Conv2dOutput", "rc.0")


def test_cross_thread_reduction_sketches():
    # TVM (notes 3.4): CUDA matmul (8, 8, 1024) -> 2 sketches, softmax -> 4
    small = generate_sketches(gpu_task(W.matmul(8, 8, 1024)))
    assert len(small) == 2
    xt = [s for s in small if has_cross_thread_reduction(s, s.stage_id("C"))]
    assert len(xt) == 1
    assert [it.annotation for it in xt[0]["C"].iters][-1] == "threadIdx.x"
    soft = generate_sketches(gpu_task(W.softmax(4, 1000)))
    assert len(soft) == 4
    # the fused variant computes expsum inside norm with the same thread split
    fused = soft[0]
    assert fused["T_softmax_expsum"].attach == ("T_softmax_norm", "i0")
    assert fused["T_softmax_norm"].iters[-1].annotation == "threadIdx.x"
    assert any(isinstance(x, st.FollowSplitStep) for x in fused.steps)


def test_validity_checker_names_the_limit():
    dag = ComputeDAG(W.matmul(256, 256, 256))
    task = SearchTask(dag, target="cuda", hardware_params=HardwareParams(
        max_threads_per_block=1024, max_shared_memory_per_block=16384))  # fmt: skip
    ok = manual.matmul_gpu(dag, block=64, thread=4, tile_k=8)  # 256 threads, 4 KB shared
    assert gpu_state_errors(task, ok) == []
    too_many = manual.matmul_gpu(dag, block=128, thread=2, tile_k=8)  # 4096 threads
    errs = gpu_state_errors(task, too_many)
    assert any("max_threads_per_block=1024" in e and "4096 threads" in e for e in errs), errs
    big_shared = manual.matmul_gpu(dag, block=64, thread=4, tile_k=64)  # 2 x 64 x 64 floats
    errs = gpu_state_errors(task, big_shared)
    assert any("max_shared_memory_per_block=16384" in e and "32768 bytes" in e for e in errs)


def test_sampling_respects_tight_limits():
    task = gpu_task(W.matmul(256, 256, 256), max_shared_memory_per_block=4096,
                    max_threads_per_block=256, max_vthread_extent=4)  # fmt: skip
    sk = generate_sketches(task)
    states = sample_init_population(task, sk, 20, 3)
    assert len(states) >= 10
    for s in states:
        assert gpu_state_errors(task, s) == []
        c = s["C"]
        tags = [it.annotation for it in c.iters[:3]]
        assert tags == ["blockIdx.x", "vthread", "threadIdx.x"]
        assert c.iters[1].extent <= 4
        assert 32 <= c.iters[2].extent <= 256
        for name in ("A.shared", "B.shared"):
            ann = [it.annotation for it in s[name].iters]
            assert ann[-2:] == ["threadIdx.x", "vectorize"]
        assert any(x.pragma_type.startswith("auto_unroll_max_step$") for x in s.steps
                   if isinstance(x, st.PragmaStep))  # fmt: skip


def test_unroll_candidates_are_gpu_ones():
    task = gpu_task(W.matmul(128, 128, 128))
    states = sample_init_population(task, generate_sketches(task), 40, 5)
    values = {int(x.pragma_type.split("$")[1]) for s in states for x in s.steps
              if isinstance(x, st.PragmaStep)}  # fmt: skip
    assert values <= set(SearchParams().auto_unroll_configs_gpu)
    assert len(values) >= 3


def test_gpu_mutations_stay_valid_and_change_only_splits_or_pragmas():
    task = gpu_task(W.conv2d_nhwc_bias_relu(1, 14, 14, 32, 32, 3, 3, 1, 1))
    states = sample_init_population(task, generate_sketches(task), 8, 11)
    rng = random.Random(2)
    got = 0
    for k in range(60):
        parent = states[k % len(states)]
        child = mutate(task, parent, rng)
        if child is None:
            continue
        got += 1
        assert gpu_state_errors(task, child) == []
        diff = [(a, b) for a, b in zip(parent.steps, child.steps) if a != b]
        assert len(diff) == 1 and len(parent.steps) == len(child.steps)
        assert isinstance(diff[0][1], st.SplitStep | st.PragmaStep)
    assert got >= 20


def test_gpu_features_fill_thread_slots():
    task = gpu_task(W.matmul(128, 128, 128))
    (s,) = sample_init_population(task, generate_sketches(task), 1, 4)
    c = s["C"]
    bx, vt, tx = (c.iters[k].extent for k in range(3))
    feats = state_features(task, s)
    rows = feats[1:].reshape(-1, len(FEATURE_NAMES))
    col = {n: k for k, n in enumerate(FEATURE_NAMES)}

    def slog(x):
        return np.log2(1 + x)

    assert np.all(rows[:, col["is_gpu"]] == 1.0)
    # the output store runs under every binding of the root
    assert np.isclose(rows[:, col["threadIdx_x_len"]], slog(tx)).all()
    assert np.isclose(rows[:, col["blockIdx_x_len"]], slog(bx)).all()
    assert np.isclose(rows[:, col["vthread_len"]], slog(vt)).any()


def test_gpu_states_round_trip_through_json():
    from tensorir.lower import lower
    from tensorir.schedule import replay
    from tensorir.steps import steps_from_json, steps_to_json

    task = gpu_task(W.softmax(4, 1000))
    states = sample_init_population(task, generate_sketches(task), 6, 9)
    task2 = gpu_task(W.conv2d_nhwc_bias_relu(1, 7, 7, 16, 16, 3, 3, 1, 1))
    states += sample_init_population(task2, generate_sketches(task2), 3, 9)
    assert len(states) == 9
    for s in states:
        again = replay(s.dag, steps_from_json(steps_to_json(s.steps)))
        assert again.steps == s.steps
        assert str(lower(again)) == str(lower(s))
