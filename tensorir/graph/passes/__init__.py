"""Graph passes (Function -> Function) and operator fusion, as Relay's opt_level 3 pipeline.

``optimize`` runs them in Relay's order; ``fuse_ops`` partitions the result into the fused
groups that become tuning tasks.
"""

from .fold import fold_constant
from .fold_scale import fold_scale_axis
from .fuse import (
    MAX_FUSED_OPS,
    FusedGroup,
    count_by_signature,
    fuse_ops,
    group_ops,
    group_signature,
    op_pattern,
    print_groups,
)
from .implicit_gemm_layout import alter_op_layout_implicit_gemm
from .layout import convert_layout
from .mixed_precision import to_mixed_precision
from .pipeline import optimize
from .simplify import canonicalize_ops, simplify_inference
from .transformer import (
    combine_parallel_dense,
    fuse_layout_producers,
    fuse_normalization_epilogues,
    fuse_normalization_prologues,
    split_k_dense,
)
from .winograd import alter_op_layout_winograd

__all__ = [
    "MAX_FUSED_OPS", "FusedGroup", "alter_op_layout_implicit_gemm", "alter_op_layout_winograd",
    "canonicalize_ops",
    "combine_parallel_dense", "convert_layout", "count_by_signature", "fold_constant",
    "fold_scale_axis", "fuse_layout_producers", "fuse_normalization_epilogues",
    "fuse_normalization_prologues", "fuse_ops",
    "group_ops", "group_signature", "op_pattern", "optimize", "print_groups", "simplify_inference",
    "split_k_dense", "to_mixed_precision",
]  # fmt: skip
