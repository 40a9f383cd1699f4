"""GPU sketches of transformer tasks (issue 26): cross-thread reductions for layer norm and
softmax, the gelu epilogue fused into the dense, and the attention groups of the GPU partition
(q/k/v in one dense, head split/merge inside the matmuls) lowered and run GPU-style (simt)
against the numpy reference. No GPU needed: lowering, CUDA source and the simt interpreter."""

import random
import re

import numpy as np
import pytest

from autosched.kernel import emit_source, lower_for
from autosched.network.partition import extract_tasks
from autosched.search.annotate import sample_init_population
from autosched.search.sketch import generate_sketches
from autosched.search.sketch_rules_gpu import has_cross_thread_reduction
from autosched.search.state_utils import elementwise_fan_in_consumer
from autosched.task import SearchTask
from codegen.cuda import build_cuda
from tensorir.dag import ComputeDAG
from tensorir.dtype import to_numpy
from tensorir.graph.ir import Module, bind_params
from tensorir.interp import eval_dag
from tensorir.loop_interp import run_program
from tensorir.ops import NameScope, compute_op
from tests.autosched.tensor_core_helpers import NVCC, needs_nvcc, nvcc_ptx


def _task(tensors):
    return SearchTask(ComputeDAG(tensors), target="cuda")


def _op_task(op, shapes, attrs=None):
    scope = NameScope()
    ins = [scope.placeholder(s, "float32") for s in shapes]
    return _task([*ins, compute_op(op, ins, attrs or {}, name_scope=scope)])


def _run_simt(state, dag, seed=0):
    """Lower ``state`` for cuda, run it GPU-style on random inputs, compare with eval_dag."""
    rng = np.random.default_rng(seed)
    ins = [rng.standard_normal(t.shape).astype(to_numpy(t.dtype)) for t in dag.input_tensors]
    prog = lower_for(state, "cuda", "k")
    outs = [np.zeros(t.shape, to_numpy(t.dtype)) for t in dag.output_tensors]
    run_program(prog, [*ins, *outs], simt=True)
    for got, want in zip(outs, eval_dag(dag, ins), strict=True):
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4)
    return prog


def _check_16_bit_kernel(prog, dag, rng) -> None:
    """Run a lowered 16-bit kernel GPU-style on random inputs; compare with eval_dag at a
    16-bit tolerance."""
    ins = [rng.standard_normal(t.shape).astype(to_numpy(t.dtype)) for t in dag.input_tensors]
    outs = [np.zeros(t.shape, to_numpy(t.dtype)) for t in dag.output_tensors]
    run_program(prog, [*ins, *outs], simt=True)
    (want,) = eval_dag(dag, ins)
    np.testing.assert_allclose(outs[0], want, rtol=1e-2, atol=1e-2)


def _cross_thread_sketch(task):
    sketches = generate_sketches(task)
    for s in sketches:
        reduce = [x.name for x in s.stages if any(it.kind == "reduce" for it in x.iters)]
        if reduce and all(has_cross_thread_reduction(s, s.stage_id(n)) for n in reduce):
            return s, reduce
    raise AssertionError("no sketch reduces every reduction across threads")


@pytest.mark.parametrize(
    "op,shapes,attrs",
    [
        ("nn.layer_norm", [(2, 768), (768,), (768,)], {"axis": -1, "epsilon": 1e-12}),
        ("nn.softmax", [(2, 4, 128)], {"axis": -1}),
    ],
)
def test_last_axis_reductions_reduce_across_threads(op, shapes, attrs):
    task = _op_task(op, shapes, attrs)
    sketch, reduce = _cross_thread_sketch(task)
    assert len(reduce) == 2  # layer norm: sum and square sum; softmax: max and exp sum
    (state,) = sample_init_population(task, [sketch], 1, random.Random(0))
    code = emit_source(lower_for(state, "cuda", "k"), "cuda").as_dict()["code"]
    for name in reduce:
        # each thread's partial goes to shared memory; the block combines them after a barrier
        assert f"__shared__ float {name}_red[" in code
        assert re.search(rf"{name}_red\[\w+\] = {name}_acc\[0\];", code)
    assert "__syncthreads();" in code
    # both reductions join the row loop of the output: one kernel, a block per row
    assert code.count("__global__") == 1
    for name in reduce:
        assert sketch[name].attach[0] == sketch.stages[-1].name
    _run_simt(state, task.compute_dag)


def _dense_gelu_task(m=8, n=24, k=16):
    """BERT's FFN input: dense + bias + exact gelu, one task of the GPU partition."""
    from tensorir.graph import nn, op
    from tensorir.graph.ir import Constant, Function
    from tensorir.graph.zoo.transformer import gelu

    rng = np.random.default_rng(3)
    x = op.var("x", (m, k), "float32")
    w = Constant(rng.standard_normal((n, k)).astype(np.float32))
    b = Constant(rng.standard_normal(n).astype(np.float32))
    out = gelu(op.add(nn.dense(x, w), b))
    (task,), _ = extract_tasks(Module.from_function(Function((x,), out)), {}, "cuda")
    return task


def test_gelu_epilogue_reading_the_dense_twice_fuses_into_one_kernel():
    task = _dense_gelu_task()
    sketches = generate_sketches(task)
    fused = [s for s in sketches if "T_dense.local" not in [x.name for x in s.stages]]
    assert fused, "every sketch computes the dense apart from its gelu epilogue"
    sketch = fused[0]
    dense = sketch.stage_id("T_dense")
    assert sketch.stages[dense].compute_at == "iter"  # in the epilogue's thread tile
    (state,) = sample_init_population(task, [sketch], 1, random.Random(1))
    code = emit_source(lower_for(state, "cuda", "k"), "cuda").as_dict()["code"]
    assert code.count("__global__") == 1 and "erff(" in code
    _run_simt(state, task.compute_dag)


def test_float16_gelu_epilogue_runs_in_the_tensor_core_kernel(tmp_path):
    """Mixed precision's dense + bias + gelu: the fragments' store nest writes the gelu (one
    kernel, not a second one re-reading the dense's float32 output)."""
    import autosched
    from tensorir.graph import nn, op
    from tensorir.graph.ir import Constant, Function
    from tensorir.graph.zoo.transformer import gelu

    rng = np.random.default_rng(4)
    x = op.var("x", (32, 32), "float32")
    w = Constant(rng.standard_normal((48, 32)).astype(np.float32))
    b = Constant(rng.standard_normal(48).astype(np.float32))
    func = Function((x,), gelu(op.add(nn.dense(x, w), b)))
    mod = autosched.to_mixed_precision(Module.from_function(func), "float16")
    (task,), _ = extract_tasks(mod, {}, "cuda -arch=sm_80")
    (sketch,) = generate_sketches(task)
    names = [x.name for x in sketch.stages if x.compute_at != "inline"]
    assert "T_dense.local" not in names  # no cache_write: the epilogue is the store stage
    (state,) = sample_init_population(task, [sketch], 1, random.Random(2))
    prog = lower_for(state, "cuda -arch=sm_80", "k")
    code = emit_source(prog, "cuda -arch=sm_80").as_dict()["code"]
    assert code.count("__global__") == 1 and "wmma::mma_sync" in code and "erff(" in code
    _check_16_bit_kernel(prog, task.compute_dag, rng)
    if NVCC:  # CI has nvcc; the PTX has the fragments' MMA
        assert "wmma.mma.sync" in nvcc_ptx(code, "sm_80", tmp_path)


def _classifier_task():
    """A batch-1 classifier: 1 x 128 times 128 x 300, bias, relu (one task of the partition)."""
    from tensorir.graph import nn, op
    from tensorir.graph.ir import Constant, Function

    rng = np.random.default_rng(5)
    x = op.var("x", (1, 128), "float32")
    w = Constant(rng.standard_normal((300, 128)).astype(np.float32))
    b = Constant(rng.standard_normal(300).astype(np.float32))
    out = nn.relu(op.add(nn.dense(x, w), b))
    (task,), _ = extract_tasks(Module.from_function(Function((x,), out)), {}, "cuda")
    return task


def test_a_batch_1_classifier_gets_a_one_kernel_gemv_sketch():
    """1 x 128 times 128 x 300 with bias and relu: more outputs than reduced values, so TVM's
    rule would only tile it (at most 300 threads on the whole GPU). A second sketch reduces
    each output across a warp inside the epilogue's loop: a block per output, one kernel."""
    task = _classifier_task()
    sketches = generate_sketches(task)
    assert len(sketches) == 2
    (gemv,) = [s for s in sketches if has_cross_thread_reduction(s, s.stage_id("T_dense"))]
    dense = gemv.stages[gemv.stage_id("T_dense")]
    assert dense.compute_at == "iter" and dense.attach[0] == gemv.stages[-1].name
    assert dense.iters[-1].annotation == "threadIdx.x"
    for seed in range(2):
        (state,) = sample_init_population(task, [gemv], 1, random.Random(seed))
        code = emit_source(lower_for(state, "cuda", "k"), "cuda").as_dict()["code"]
        assert code.count("__global__") == 1 and "__shared__ float T_dense_red[32]" in code
        _run_simt(state, task.compute_dag, seed)


@needs_nvcc
def test_the_gemv_kernel_compiles_with_nvcc(tmp_path):
    task = _classifier_task()
    (gemv,) = [s for s in generate_sketches(task)
               if has_cross_thread_reduction(s, s.stage_id("T_dense"))]  # fmt: skip
    (state,) = sample_init_population(task, [gemv], 1, random.Random(0))
    code = build_cuda(lower_for(state, "cuda", "k"), arch="sm_80").code
    assert code.count("__global__") == 1
    ptx = nvcc_ptx(code, "sm_80", tmp_path)
    assert ".shared" in ptx and "bar.sync" in ptx  # the partial sums meet in shared memory


def test_no_gemv_sketch_on_a_gpu_without_warps():
    """Mali reports a warp size of 1: a "cross-thread" reduction would be one thread (200
    outputs fit its blocks of 256 threads, so only the warp size keeps the sketch out)."""
    from autosched.hardware import MALI_DEFAULTS, HardwareParams
    from tensorir import te

    x, w = te.placeholder((1, 128), name="X"), te.placeholder((200, 128), name="W")
    k = te.reduce_axis((0, 128), name="k")
    y = te.compute((1, 200), lambda i, j: te.sum(x[i, k] * w[j, k], axis=k), name="Y")
    dag = ComputeDAG([x, w, y])
    for target, hw, n in (("cuda", None, 2), ("opencl -device=mali", MALI_DEFAULTS, 1)):
        params = HardwareParams(**hw) if hw else None
        task = SearchTask(dag, target=target, hardware_params=params)
        assert len(generate_sketches(task)) == n, target


def test_a_tiled_gemm_with_many_outputs_gets_no_cross_thread_sketch():
    """64 x 64 outputs (more than a block's threads) keep TVM's single tiled sketch."""
    from tensorir import te

    a, b = te.placeholder((64, 256), name="A"), te.placeholder((64, 256), name="B")
    k = te.reduce_axis((0, 256), name="k")
    c = te.compute((64, 64), lambda i, j: te.sum(a[i, k] * b[j, k], axis=k), name="C")
    (sketch,) = generate_sketches(_task([a, b, c]))
    assert not has_cross_thread_reduction(sketch, sketch.stage_id("C"))


def test_fan_in_match_needs_elementwise_reads():
    from tensorir import te
    from tensorir.schedule import State

    def dag(transposed):
        a, b = te.placeholder((8, 16), name="A"), te.placeholder((8, 16), name="B")
        k = te.reduce_axis((0, 16), name="k")
        c = te.compute((8, 8), lambda i, j: te.sum(a[i, k] * b[j, k], axis=k), name="C")
        if transposed:
            d = te.compute((8, 8), lambda i, j: c[i, j] + c[j, i], name="D")
        else:
            d = te.compute((8, 8), lambda i, j: c[i, j] * c[i, j], name="D")
        return ComputeDAG([a, b, d])

    for transposed, fused in ((False, True), (True, False)):
        state = State(dag(transposed))
        cid, did = state.stage_id("C"), state.stage_id("D")
        assert (elementwise_fan_in_consumer(state, cid) == did) is fused


def test_attention_tasks_of_the_gpu_partition_run_correctly():
    from tests.tensorir.test_graph_transformer_passes import small_attention

    func, params, _ = small_attention(seq=8, hidden=32, heads=2)
    mod = Module.from_function(bind_params(func, params))
    tasks, _ = extract_tasks(mod, {}, "cuda")
    layout = [t for t in tasks if "strided_slice" in t.desc or "reshape" in t.desc]
    assert len(layout) == 3  # both batch_matmuls and the output dense read through layouts
    assert any("T_dense" in t.compute_dag.ops[-1].name or "dense" in t.desc for t in tasks)
    for k, task in enumerate(layout):
        sketches = generate_sketches(task)
        (state,) = sample_init_population(task, sketches, 1, random.Random(k))
        code = emit_source(lower_for(state, "cuda", "k"), "cuda").as_dict()["code"]
        assert code.count("__global__") == 1  # the layout ops live in the shared-memory copy
        _run_simt(state, task.compute_dag, seed=k)


def test_split_k_task_of_the_gpu_partition_runs_correctly(monkeypatch):
    from tests.tensorir.test_graph_transformer_passes import small_ffn_output

    func, _ = small_ffn_output(m=8, n=16, k=512)  # two slices of 256
    monkeypatch.setenv("AUTOSCHED_SPLIT_K_DENSE", "0")  # the way to turn it off
    (plain,), _ = extract_tasks(Module.from_function(func), {}, "cuda")
    assert "batch_matmul" not in plain.desc
    monkeypatch.delenv("AUTOSCHED_SPLIT_K_DENSE")  # on by default for GPU targets
    (task,), _ = extract_tasks(Module.from_function(func), {}, "cuda")
    (cpu,), _ = extract_tasks(Module.from_function(func), {}, "llvm")
    assert "batch_matmul" not in cpu.desc  # the CPU keeps the dense
    assert "batch_matmul" in task.desc and "transpose" in task.desc
    sketches = generate_sketches(task)
    (state,) = sample_init_population(task, sketches, 1, random.Random(5))
    code = emit_source(lower_for(state, "cuda", "k"), "cuda").as_dict()["code"]
    assert code.count("__global__") == 1
    _run_simt(state, task.compute_dag, seed=5)


def _mixed_attention_tasks(target):
    """The tasks of a float16 attention block on ``target`` (mixed precision: the softmax in
    float32, cast to float16 for the batch_matmul that reads it); rows of 64, more than a
    warp, so that the softmax reduces across threads."""
    import autosched
    from tests.tensorir.test_graph_transformer_passes import small_attention

    func, params, _ = small_attention(seq=64, hidden=32, heads=2)
    mod = autosched.to_mixed_precision(Module.from_function(bind_params(func, params)), "float16")
    return extract_tasks(mod, {}, target)[0]


def test_mixed_precision_cast_after_softmax_runs_in_the_softmax_kernel():
    """On a GPU the cast joins the softmax's group (one kernel writes the float16 rows);
    the CPU keeps Relay's groups."""
    tasks = _mixed_attention_tasks("cuda")
    (softmax,) = [t for t in tasks if "softmax" in t.desc]
    assert softmax.desc == "fused_softmax_cast"
    assert not any(t.desc == "fused_cast" for t in tasks)
    assert softmax.compute_dag.output_tensors[0].dtype == "float16"
    sketch, reduce = _cross_thread_sketch(softmax)
    assert len(reduce) == 2
    (state,) = sample_init_population(softmax, [sketch], 1, random.Random(3))
    code = emit_source(lower_for(state, "cuda", "k"), "cuda").as_dict()["code"]
    assert code.count("__global__") == 1
    assert "half" in code  # the kernel stores the 16-bit rows itself
    _run_simt(state, softmax.compute_dag, seed=3)
    cpu = _mixed_attention_tasks("llvm")
    assert any(t.desc == "fused_softmax" for t in cpu)
    assert not any("softmax_cast" in t.desc for t in cpu)


def test_mixed_precision_query_key_value_are_one_dense_task_on_gpus():
    """The three projections of a float16 attention block are one (seq, 3 hidden) tensor-core
    dense on a GPU, as in float32; three on the CPU."""
    # (the input's cast to float16 runs in the dense's kernel: fused_cast_dense_cast_add)
    qkv = [t for t in _mixed_attention_tasks("cuda") if t.desc.endswith("dense_cast_add")]
    assert [t.compute_dag.output_tensors[0].shape for t in qkv] == [(64, 96)]
    cpu = [t for t in _mixed_attention_tasks("llvm") if "dense" in t.desc]
    assert all(t.compute_dag.output_tensors[0].shape[-1] == 32 for t in cpu)


def test_a_normalization_with_two_readers_keeps_its_own_group():
    """Layer norm read by a cast (for the next dense) and by the residual add stays a group
    of its own: joining the cast would need a second output."""
    from tensorir.graph import nn, op
    from tensorir.graph.ir import Function
    from tensorir.graph.passes import fuse_normalization_epilogues, fuse_ops

    x = op.var("x", (4, 16), "float32")
    gamma = op.var("g", (16,), "float32")
    beta = op.var("b", (16,), "float32")
    ln = nn.layer_norm(x, gamma, beta, axis=-1, epsilon=1e-5)
    one = op.cast(ln, "float16")
    two = op.add(op.cast(one, "float32"), ln)
    func = Function((x, gamma, beta), two)
    groups = fuse_ops(func)
    assert fuse_normalization_epilogues(func, groups) == groups
    lone = Function((x, gamma, beta), op.cast(nn.layer_norm(x, gamma, beta), "float16"))
    # the only reader is the function's output cast: it joins
    joined = fuse_normalization_epilogues(lone, fuse_ops(lone))
    assert [[c.op for c in g.calls] for g in joined] == [["nn.layer_norm", "cast"]]


def test_a_layer_norm_read_by_a_dense_writes_float16_in_its_own_kernel(tmp_path):
    """Mixed precision stores a layer norm's result in float16 once when a dense reads it, and
    the residual add takes that copy too: the cast runs in the norm's kernel (no ``fused_cast``
    task, which bert-base float16 launched 24 times) and the dense reads float16 rows. The cast
    stays out of the dense: converting float32 rows in the tensor-core kernel's shared-memory
    copy lost the 16-byte ``cp.async`` copies and made bert-base's q/k/v and FFN denses 3.7 us
    slower each on an H200 (benchmarks/RESULTS.md, session 16)."""
    import autosched
    from tensorir.graph import nn, op
    from tensorir.graph.ir import Constant, Function

    rng = np.random.default_rng(6)
    x = op.var("x", (32, 64), "float32")  # rows of 64: more than a warp
    gamma = Constant(rng.standard_normal(64).astype(np.float32))
    beta = Constant(rng.standard_normal(64).astype(np.float32))
    w = Constant(rng.standard_normal((64, 64)).astype(np.float32))
    b = Constant(rng.standard_normal(64).astype(np.float32))
    ln = nn.layer_norm(x, gamma, beta, axis=-1, epsilon=1e-5)
    func = Function((x,), op.add(op.add(nn.dense(ln, w), b), ln))
    mod = autosched.to_mixed_precision(Module.from_function(func), "float16")
    tasks, _ = extract_tasks(mod, {}, "cuda -arch=sm_80", include_simple_tasks=True)
    descs = [t.desc for t in tasks]
    assert "fused_cast" not in descs and "fused_layer_norm_cast" in descs, descs
    (norm,) = [t for t in tasks if t.desc == "fused_layer_norm_cast"]
    assert norm.compute_dag.output_tensors[0].dtype == "float16"
    (dense,) = [t for t in tasks if "dense" in t.desc]
    assert dense.desc.startswith("fused_dense")
    # the dense and its residual add read only the float16 copy of the norm
    floats = {t.dtype for t in dense.compute_dag.input_tensors if t.dtype.startswith("float")}
    assert floats == {"float16"}, floats
    # both kernels compute their task on random inputs, GPU-style
    rng = np.random.default_rng(7)
    sketches = {norm: [_cross_thread_sketch(norm)[0]], dense: generate_sketches(dense)}
    for k, task in enumerate((norm, dense)):
        (state,) = sample_init_population(task, sketches[task], 1, random.Random(k))
        prog = lower_for(state, "cuda", "k")
        code = emit_source(prog, "cuda").as_dict()["code"]
        assert code.count("__global__") == 1
        _check_16_bit_kernel(prog, task.compute_dag, rng)
        if NVCC:
            assert ".entry" in nvcc_ptx(code, "sm_80", tmp_path, name=f"k{k}")


def test_the_split_k_sum_runs_in_the_layer_norm_kernel(tmp_path):
    """BERT's FFN output on a GPU: split-K slices, then their sum with the bias and the
    residual, then the layer norm. The sum is recomputed as the norm reads its rows: one
    task, one kernel, the same values; the CPU keeps the sum's own group."""
    from tensorir.graph import nn
    from tensorir.graph.ir import Constant, Function
    from tests.tensorir.test_graph_transformer_passes import small_ffn_output

    rng = np.random.default_rng(8)
    func, _ = small_ffn_output(m=8, n=64, k=512)  # two slices of 256; rows of 64 > a warp
    gamma = Constant(rng.standard_normal(64).astype(np.float32))
    beta = Constant(rng.standard_normal(64).astype(np.float32))
    normed = Function(func.params, nn.layer_norm(func.body, gamma, beta, epsilon=1e-12))
    tasks, _ = extract_tasks(Module.from_function(normed), {}, "cuda", include_simple_tasks=True)
    assert [t.desc.split("_")[-1] for t in tasks] == ["matmul", "norm"]
    (norm,) = [t for t in tasks if "layer_norm" in t.desc]
    assert "strided_slice" in norm.desc and "add" in norm.desc
    sketch, reduce = _cross_thread_sketch(norm)
    (state,) = sample_init_population(norm, [sketch], 1, random.Random(2))
    code = emit_source(lower_for(state, "cuda", "k"), "cuda").as_dict()["code"]
    assert code.count("__global__") == 1
    _run_simt(state, norm.compute_dag, seed=2)
    if NVCC:
        assert ".entry" in nvcc_ptx(code, "sm_80", tmp_path)
    cpu, _ = extract_tasks(Module.from_function(normed), {}, "llvm", include_simple_tasks=True)
    assert any(t.desc == "fused_layer_norm" for t in cpu)


def test_mutation_gives_a_row_reduction_more_threads_than_a_tile_split():
    """The thread split of a cross-thread reduction is a thread count, not a register tile:
    mutation may take a 768-wide layer norm row past max_innermost_split_factor (64) up to
    the block's limit, and the kernel still computes the norm."""
    from autosched.search.annotate_gpu import gpu_context
    from autosched.search.mutation import mutate_tile_size
    from autosched.search.params import SearchParams

    task = _op_task("nn.layer_norm", [(2, 768), (768,), (768,)], {"axis": -1, "epsilon": 1e-5})
    sketch, reduce = _cross_thread_sketch(task)
    (state,) = sample_init_population(task, [sketch], 1, random.Random(0))
    params = SearchParams()
    ctx = gpu_context(task, params)
    rng = random.Random(4)

    def threads(s):  # the row's threads: the output stage's, which the reductions follow
        return max(it.extent for it in s.stages[-1].iters if it.annotation == "threadIdx.x")

    assert threads(state) <= params.max_innermost_split_factor
    seen, wide = set(), None
    for _ in range(200):
        out = mutate_tile_size(ctx, state, rng)
        if out is None:
            continue
        seen.add(threads(out))
        if threads(out) > params.max_innermost_split_factor and wide is None:
            wide = out
        state = out
    assert max(seen) > params.max_innermost_split_factor
    assert max(seen) <= ctx.max_threads
    _run_simt(wide, task.compute_dag, seed=4)


def test_a_classifier_split_along_k_runs_on_tensor_cores(tmp_path):
    """A float16 classifier of 16 rows (resnet-50 at batch 16: 2048 -> 1000) is split along K
    on GPUs; its N is padded with zero weights to whole fragments (split_k_dense), so the
    slices take the tensor-core sketch (session 19's tune ran them scalar, 24.7 us on an
    H200), the sampled kernel computes the padded batch_matmul, and the network's output is
    the dense's."""
    import autosched
    from tensorir.graph import nn, op
    from tensorir.graph.ir import Constant, Function
    from tests.autosched.tensor_core_helpers import has_tc, sampled_states

    rng = np.random.default_rng(9)
    x = op.var("x", (16, 512), "float32")
    w = Constant(rng.standard_normal((200, 512)).astype(np.float32))  # N = 200 -> 208
    b = Constant(rng.standard_normal(200).astype(np.float32))
    func = Function((x,), op.add(nn.dense(x, w), b))
    mod = autosched.to_mixed_precision(Module.from_function(func), "float16")
    tasks, _ = extract_tasks(mod, {}, "cuda -arch=sm_90", include_simple_tasks=True)
    (bmm,) = [t for t in tasks if "batch_matmul" in t.desc]
    (gemm,) = [o for o in bmm.compute_dag.ops if o.name.endswith("batch_matmul")]
    assert tuple(gemm.shape) == (2, 16, 208)  # two slices of 256, N padded
    tc = [s for s in generate_sketches(bmm) if has_tc(s)]
    assert tc, [t.desc for t in tasks]
    state = next(iter(sampled_states(bmm, tc[0], seed=1, tries=100)))
    prog = lower_for(state, "cuda", "k")
    _check_16_bit_kernel(prog, bmm.compute_dag, np.random.default_rng(3))
    code = emit_source(prog, "cuda").as_dict()["code"]
    if NVCC:
        assert "wmma.mma.sync" in nvcc_ptx(code, "sm_90", tmp_path)
