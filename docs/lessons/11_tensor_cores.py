"""Lesson 11: tensor cores: a GEMM tiled onto 16x16x16 wmma fragments.

A tensor core multiplies 16x16 tiles of fp16 (or bf16) matrices in one warp-wide instruction,
accumulating in fp32. CUDA exposes it as ``nvcuda::wmma``: a warp loads fragments
(``load_matrix_sync``), multiplies them (``mma_sync``) and stores the accumulator
(``store_matrix_sync``). Here the search does not use a template for it: one more sketch rule
(``MultiLevelTilingTensorCore``) recognizes a 16-bit GEMM whose sizes are multiples of 16 and
tiles it block -> warps -> fragments -> 16x16x16, marking the fragment loops with the
``tensor_core`` pragma. The loops stay ordinary loops (an interpreter or the OpenCL backend runs
them as scalar code, every lane of a warp doing the same tiles); the CUDA backend turns each
marked nest into the wmma calls. The tile sizes left open (warps, fragments per warp, the k
tile) are drawn and mutated by the search as usual. The k-tile loop also carries the
``double_buffer`` pragma: lowering gives each shared buffer two halves and loads k tile t + 1
into one while tile t is multiplied from the other (a prologue loads tile 0 before the loop,
one barrier ends each iteration), and on sm_80+ the CUDA backend issues those copies as
``cp.async``, so the loads overlap the tensor-core work. Deeper pipelines are searched too
(``software_pipeline_3`` / ``_4``: N copies of each shared buffer, tiles t + 1 .. t + N - 1 in
flight, ``cp.async.commit_group`` per tile and ``cp.async.wait_group N-2`` before each barrier);
``SearchParams.gpu_tensor_core_pipeline`` (default 3) bounds the stages the search draws. This
lesson needs no GPU: it prints the sketch, a sampled program, and the CUDA it generates (nvcc
compiles it when present).

Convolutions reach the same rule as an *implicit GEMM* (the last part of the lesson). A conv2d
is a GEMM over an im2col matrix ``col[p, r]`` (``p`` an output pixel, ``r`` a kernel tap) and
the kernel reshaped to ``W2[r, co]`` (an HWIO kernel; a network stores its constant kernels
OHWI, which gives ``W2[co, r]``, K-major, as Hopper's warpgroup sketch needs):
``tensorir.ops.conv2d_gemm`` writes it that way, with ``col`` and ``W2`` as compute stages and
the output read back in NHWC. The sketch copies the
GEMM's operands to shared memory as for dense, and inlines ``col`` and ``W2`` into the copies:
each copy gathers straight from the image and the kernel, and no im2col matrix ever exists in
memory. The output stage (with the bias and relu of its fused group) gets its pixel loops
fused into one, so it is an elementwise consumer of the GEMM and runs in the fragment store
nest (under a guard where the pixels do not fill whole fragments): one kernel per conv. A
network's 16-bit convs are built this way on CUDA (the network partition picks the compute;
docs/gpu.md). Where such a GEMM has few output tiles and a long K (small maps, many channels),
it is computed in slices of K that a second kernel adds (split-K, the lesson's end).
"""

import os
import random
import re
import shutil
import subprocess
import tempfile

import numpy as np

import autosched as ansor
from autosched import te
from autosched.search.annotate_gpu import gpu_context, sample_state_gpu
from autosched.search.sketch import generate_sketches
from codegen.cuda import build_cuda
from tensorir.loop_interp import run_program
from tensorir.lower import lower
from tensorir.ops.dense import dense

QUICK = os.environ.get("AUTOSCHED_LESSON_QUICK") == "1"
M, N, K = (64, 64, 32) if QUICK else (256, 256, 128)

A = te.placeholder((M, K), "float16", name="A")
B = te.placeholder((N, K), "float16", name="B")  # nn.dense's weight layout: (units, K)
C = dense(A, B, out_dtype="float32")  # fp16 x fp16 products summed in fp32
# Fixed hardware numbers, so this lesson prints the same on every machine.
hardware = ansor.HardwareParams(
    num_cores=132,
    vector_unit_bytes=16,
    cache_line_bytes=64,
    max_shared_memory_per_block=49152,
    max_local_memory_per_block=2**31 - 1,
    max_threads_per_block=1024,
    max_vthread_extent=8,
    warp_size=32,
)
task = ansor.SearchTask(ansor.ComputeDAG([A, B, C]), target="cuda", hardware_params=hardware)

(sketch,) = generate_sketches(task)
print("== the tensor-core sketch (None: tile sizes the search decides)")
print(sketch)

# A float32 GEMM, or one with a size that is not a multiple of 16, keeps the scalar sketch.
A32 = te.placeholder((M, K), "float32", name="A")
B32 = te.placeholder((N, K), "float32", name="B")
t32 = ansor.SearchTask(ansor.ComputeDAG([A32, B32, dense(A32, B32)]), target="cuda",
                       hardware_params=hardware)  # fmt: skip
pragmas = [p for s in generate_sketches(t32) for stage in s.stages for _, p in stage.pragmas]
marked = "tensor_core" in pragmas
print(f"== float32 dense gets the tensor-core sketch: {marked}")

# Annotation: sizes drawn, checked by the GPU validity check (which knows the fragment rules).
# Keep drawing until the k tile is smaller than K, so that there is a pipeline to show (two
# stages here: gpu_tensor_core_pipeline=2; the deeper pipelines come after the CUDA).
ctx, rng = gpu_context(task, ansor.SearchParams(gpu_tensor_core_pipeline=2)), random.Random(1)
state = None
while state is None or "pragma=double_buffer" not in str(lower(state)):
    state = sample_state_gpu(ctx, sketch, rng, task)
program = lower(state)
print("== the lowered loops of one sampled program (the marked nests are the fragment ones;")
print("== A_shared and B_shared hold two k tiles; tile k_0_0 is multiplied from half k_0_0 % 2)")
print(program)

# Read as loops, the program is plain scalar code: check it against numpy here.
data = np.random.default_rng(0)
a = data.uniform(-1, 1, (M, K)).astype("float16")
b = data.uniform(-1, 1, (N, K)).astype("float16")
out = np.zeros((M, N), "float32")
run_program(program, [a, b, out], simt=True)
want = a.astype("float32") @ b.astype("float32").T
print(f"== as scalar loops it equals numpy: {np.allclose(out, want, rtol=1e-3, atol=1e-3)}")

# The CUDA backend emits wmma calls for the marked nests.
code = build_cuda(program, arch="sm_80").code
print("== the wmma calls in the generated CUDA (sm_80)")
for line in code.splitlines():
    if "wmma::" in line and "fragment<" not in line:
        print(re.sub(r"\s+", " ", line.strip()))
copies, waits = code.count("cp_async16(&"), code.count("cp_async_wait_all();")
print(f"== cp.async copies in the CUDA: {copies}; waits, one before each barrier: {waits}")
nvcc = shutil.which("nvcc") or shutil.which("nvcc", path="/usr/local/cuda/bin")
if nvcc:
    with tempfile.TemporaryDirectory() as tmp:
        src, ptx = os.path.join(tmp, "k.cu"), os.path.join(tmp, "k.ptx")
        with open(src, "w") as f:
            f.write(code)
        subprocess.run([nvcc, "-ptx", "-arch=sm_80", src, "-o", ptx], check=True)
        with open(ptx) as f:
            text = f.read()
        n, a = text.count("wmma.mma.sync"), text.count("cp.async.cg.shared.global")
        print(f"~ nvcc: the PTX holds {n} wmma.mma.sync and {a} cp.async instructions")

# A 3-stage pipeline (the default search draws 2 or 3 stages, as many as fit in shared memory
# and no more than the k tiles): K = 96 in k tiles of 16 or 32, so that the loop has 3 or more.
A3 = te.placeholder((32, 96), "float16", name="A")
B3 = te.placeholder((32, 96), "float16", name="B")
task3 = ansor.SearchTask(ansor.ComputeDAG([A3, B3, dense(A3, B3, out_dtype="float32")]),
                         target="cuda", hardware_params=hardware)  # fmt: skip
(sketch3,) = generate_sketches(task3)
ctx3, rng = gpu_context(task3, ansor.SearchParams()), random.Random(0)
state3 = None
while state3 is None or "pragma=software_pipeline_3" not in str(lower(state3)):
    state3 = sample_state_gpu(ctx3, sketch3, rng, task3)
program3 = lower(state3)
print("== a 3-stage pipeline: 3 copies of each shared tile, tiles 0 and 1 loaded by the prologue")
print("== loop, tile k_0_0 + 2 issued into copy (k_0_0 + 2) % 3 while tile k_0_0 is multiplied")
for line in str(program3).splitlines():
    if re.search(r"allocate \w+_shared|_pre in range|software_pipeline|if \(\(k_0_0", line):
        print(line)
a3 = data.uniform(-1, 1, (32, 96)).astype("float16")
b3 = data.uniform(-1, 1, (32, 96)).astype("float16")
out3 = np.zeros((32, 32), "float32")
run_program(program3, [a3, b3, out3], simt=True)
want3 = a3.astype("float32") @ b3.astype("float32").T
print(f"== as scalar loops it equals numpy: {np.allclose(out3, want3, rtol=1e-3, atol=1e-3)}")
code3 = build_cuda(program3, arch="sm_80").code
commits, waits = code3.count("cp_async_commit();"), code3.count("cp_async_wait_group1();")
print(f"== cp.async group commits in the CUDA: {commits} (prologue, loop); wait_group 1: {waits}")

# Convolution as an implicit GEMM: 16 input channels, 8x8 image, 3x3 kernel, bias + relu.
from tensorir.ops import NameScope, compute_op  # noqa: E402
from tensorir.ops.conv2d_gemm import conv2d_implicit_gemm  # noqa: E402

scope = NameScope()
X = scope.placeholder((1, 8, 8, 16), "float16", name="data")
W = scope.placeholder((3, 3, 16, 32), "float16", name="kernel")
bias = scope.placeholder((32,), "float16", name="bias")
with scope:
    conv = conv2d_implicit_gemm(X, W, strides=1, padding=1, data_layout="NHWC", out_dtype="float32")
y = compute_op("cast", [conv], {"dtype": "float16"}, name_scope=scope)
y = compute_op("nn.relu", [compute_op("nn.bias_add", [y, bias], {"axis": 3}, name_scope=scope)],
               name_scope=scope)  # fmt: skip
conv_task = ansor.SearchTask(ansor.ComputeDAG([X, W, bias, y]), target="cuda",
                             hardware_params=hardware)  # fmt: skip
print("== conv2d as an implicit GEMM: the compute (im2col and the reshaped kernel are stages)")
print(conv_task.compute_dag)
(conv_sketch,) = generate_sketches(conv_task)
print("== its tensor-core sketch: the copies to shared gather from data and kernel, and the")
print("   bias + relu run in the fragment store nest of T_relu (its pixel loops fused)")
print(conv_sketch)

# Split-K: a 7x7 map (49 pixels, one 64-row GEMM) with 256 input channels and 16 output
# channels has K = 2304 but a single 64x16 output block: one SM would walk all of K while the
# others idle. split_k_slices picks how many slices of K to compute apart (from the shape
# alone); the GEMM gains a leading slice axis (a batch_matmul), and the output stage adds the
# slices, so the bias and relu now run in a second kernel after the partial sums are stored.
from tensorir.kernels import kernel_stmts  # noqa: E402
from tensorir.ops.conv2d_gemm import conv2d_gemm_shape, split_k_slices  # noqa: E402

slices = split_k_slices(conv2d_gemm_shape((1, 7, 7, 256), (3, 3, 256, 16), 1, 1, 1, "NHWC"))
scope = NameScope()
X7 = scope.placeholder((1, 7, 7, 256), "float16", name="data")
W7 = scope.placeholder((3, 3, 256, 16), "float16", name="kernel")
with scope:
    split = conv2d_implicit_gemm(X7, W7, padding=1, out_dtype="float32", split_k=slices)
split_task = ansor.SearchTask(ansor.ComputeDAG([X7, W7, split]), target="cuda",
                              hardware_params=hardware)  # fmt: skip
print(f"== split-K: {slices} slices of K = 2304; the GEMM and the output that adds them")
for line in str(split_task.compute_dag).splitlines():
    if line.startswith(("conv2d_gemm(", "conv2d_gemm_nhwc(")):
        print(line)
(split_sketch,) = generate_sketches(split_task)
split_ctx, split_rng = gpu_context(split_task, ansor.SearchParams()), random.Random(0)
split_state = None
while split_state is None:  # a draw over the device's limits is None: draw again
    split_state = sample_state_gpu(split_ctx, split_sketch, split_rng, split_task)
print(f"== kernels of a sampled state: {len(kernel_stmts(lower(split_state)))} (the GEMM, the sum)")
