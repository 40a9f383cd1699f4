"""Which constant weights a network build stores rounded to TF32.

On a ``-allow_tf32=1`` target, float32 GEMMs and convs run on TF32 tensor cores. wmma kernels
round each operand fragment to TF32 (``__float_to_tf32``), but Hopper's ``wgmma`` reads its
operands from shared memory as ``cp.async`` left them and drops the low 13 mantissa bits:
truncation errs up to a whole TF32 step and always toward zero, where rounding errs half a
step either way (resnet-18's error, simulated: benchmarks/tf32_rounding_error.py). Weights are
constants, so the build rounds them once on the host: the kernel's truncation of a value
already on TF32's grid changes nothing, and a wmma kernel's rounding of it is the identity.
The activations stay truncated by warpgroups (they are computed on the device).

Only weights that reach nothing but tensor-core stages are rounded (directly, or through the
conv's injective reshape of its weight into a GEMM operand, which moves and pads values): a
scalar kernel on the same target computes in exact float32 and keeps exact weights.
"""

from __future__ import annotations

from tensorir.graph import ir as gir

from ..search.state_utils import has_tensor_core_pragma

# On by default; off reproduces the truncated weights of the builds before session 27 (A/B).
TF32_ROUND_WEIGHTS = True


def tf32_rounded_weights(dag, inputs, state, target) -> frozenset[str]:
    """Names of ``dag``'s placeholders whose constant values the build stores rounded to TF32.

    Parameters
    ----------
    dag : ComputeDAG
        A fused group's DAG; its ``input_tensors`` are in the order of ``inputs``.
    inputs : sequence
        The group's inputs: ``tensorir.graph.ir.Constant`` for weights, calls otherwise.
    state : State
        The schedule the kernel is built from.
    target : Target
        The build's target; nothing is rounded without ``allow_tf32``.

    Returns
    -------
    frozenset of str
        Float32 constant placeholders that only tensor-core stages of ``state`` read.
    """
    if not (TF32_ROUND_WEIGHTS and target.allow_tf32):
        return frozenset()
    # The GEMM stages: the pragma also marks a fused epilogue stored from the fragments.
    tensor_core_ops = {stage.op.name for stage in state.stages
                       if has_tensor_core_pragma(stage) and stage.op.reduce_axes}  # fmt: skip
    if not tensor_core_ops:
        return frozenset()
    outputs = {t.op.name for t in dag.output_tensors}

    def feeds_only_tensor_cores(op) -> bool:
        if op.name in tensor_core_ops:
            return True
        if op.reduce_axes or op.name in outputs:
            return False
        readers = dag.consumers(op)
        return bool(readers) and all(feeds_only_tensor_cores(r) for r in readers)

    names = []
    for tensor, inp in zip(dag.input_tensors, inputs, strict=True):
        if not isinstance(inp, gir.Constant) or tensor.dtype != "float32":
            continue
        readers = dag.consumers(tensor)
        if readers and all(feeds_only_tensor_cores(op) for op in readers):
            names.append(tensor.name)
    return frozenset(names)
