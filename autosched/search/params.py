"""The sketch policy's knobs in one place (TVM ``SketchPolicy.DEFAULT_PARAMS``, notes 5.1)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from .budget import search_effort

__all__ = ["SearchParams"]


@dataclass(frozen=True)
class SearchParams:
    """Parameters of sketch generation, random annotation, mutation and the search loop.

    Defaults are TVM v0.15's (``python/tvm/auto_scheduler/search_policy.py``) unless noted
    (the population and generations are automatic unless set).

    Parameters
    ----------
    eps_greedy : float
        Fraction of each measurement batch taken from random (not best-predicted) states.
    evolutionary_search_population : int, optional
        States per generation of the evolutionary search (and per init-population batch).
        None (the default): chosen per round from the number of candidates it measures
        (:func:`~autosched.search.budget.search_effort`: 128 for 8, 64 for 8 where the
        search shares the cores with the measurement, as on the local CPU); TVM's value is 2048.
    evolutionary_search_num_iters : int, optional
        Generations of the evolutionary search. None (the default): chosen with the population
        (1 up to a population of 512); TVM's value is 4.
    evolutionary_search_mutation_prob : float
        Probability that a child is a mutation of its parent (else a copy).
    num_measures_per_round : int
        States measured per search round (TVM ``TuningOptions.num_measures_per_round``).
    sample_init_min_population : int
        Sampling stops once this many valid distinct states exist.
    sample_init_use_measured_ratio : float
        Fraction of the population seeded with the best measured states.
    cpu_multi_level_tiling_structure, gpu_multi_level_tiling_structure : str
        Tiling structure strings ('S' spatial level, 'R' reduction level).
    max_innermost_split_factor : int
        Largest innermost tile length sampled or mutated.
    max_vectorize_size : int
        Largest (fused) extent that InitVectorization vectorizes.
    auto_unroll_configs_cpu, auto_unroll_configs_gpu : tuple of int
        Candidates for the ``auto_unroll_max_step`` pragma.
    disable_change_compute_location : bool
        Skip InitChangeComputeLocation and MutateComputeLocation.
    mutate_tile_size_weight, mutate_auto_unroll_weight, mutate_compute_location_weight,
    mutate_parallel_weight : float
        CPU mutation-rule weights (selection probability = weight / sum of weights).
    mutate_auto_unroll_weight_gpu : float
        GPU weight of the auto-unroll mutation (GPU uses it and ``mutate_tile_size_weight``).
    mutate_pipeline_depth_weight_gpu : float
        GPU weight of the pipeline-depth mutation (tensor-core states with a software pipeline,
        when ``gpu_tensor_core_pipeline`` is 3 or 4). Not in TVM.
    cpu_int8_dot_product_tiling : bool
        On a CPU with VNNI, tile uint8 x int8 -> int32 reductions (quantized conv2d / dense)
        so that their two innermost loops are the output channels split by the vector's
        lanes (vectorized) and the reduction split by 4, which the code generator runs on
        ``vpdpbusd`` (:mod:`autosched.search.dot_product`). Not in TVM's auto_scheduler.
    gpu_tensor_core_pipeline : int
        Most stages of the tensor-core sketch's shared-memory staging, 1 to 4: 1 stages one
        tile at a time; 2 double buffers it (the ``double_buffer`` pragma on the k-tile loop:
        the next k tile is loaded, with ``cp.async`` on sm_80+, while this one is multiplied);
        3 (the default) and 4 let the search draw and mutate 2 up to that many stages per state
        (``software_pipeline_<N>``: N - 1 tiles in flight), as many as fit in shared memory.
        Targets whose ``-arch`` is older than sm_80 always get 1. Not in TVM.
    gpu_simt_double_buffer : bool
        Off by default (TVM's sketch). On: the scalar (SIMT) GPU sketch marks the k-tile loop
        that its ``.shared`` copies are attached at with ``double_buffer``, as the tensor-core
        sketch does (one barrier a k tile instead of two; the next tile's loads issued before
        this one is multiplied, as plain loads: ``cp.async`` is for tensor-core kernels only);
        sampling and mutation then treat its depth as ``gpu_tensor_core_pipeline`` says. An
        experiment for float32 GEMMs, not yet measured on a GPU. Not in TVM's auto_scheduler.
    gpu_shared_padding : bool
        On by default: the scalar (SIMT) GPU sketch pads each row of its ``.shared`` copies to an
        odd number of 4-byte banks (``storage_align``), so the threads of a warp reading one
        column of a copy read 32 different banks (TVM's tensor-core schedules pad for this reason;
        its auto_scheduler's scalar sketch does not). False gives TVM's sketch.
    scale_population_to_batch : bool
        With an explicit population: in a round that measures fewer states than
        ``num_measures_per_round`` (the last round of a budget that is not a multiple of it),
        shrink the evolution's population in proportion (to at least
        ``sample_init_min_population``). Not in TVM, which runs the full population
        to pick e.g. 8 states; that search costs as much as a full round.
    """

    eps_greedy: float = 0.05
    retry_search_one_round_on_empty: int = 1
    evolutionary_search_population: int | None = None
    evolutionary_search_num_iters: int | None = None
    evolutionary_search_mutation_prob: float = 0.85
    num_measures_per_round: int = 64
    sample_init_min_population: int = 50
    sample_init_use_measured_ratio: float = 0.2
    cpu_multi_level_tiling_structure: str = "SSRSRS"
    gpu_multi_level_tiling_structure: str = "SSSRRSRS"
    max_innermost_split_factor: int = 64
    max_vectorize_size: int = 16
    auto_unroll_configs_cpu: tuple[int, ...] = (0, 16, 64, 512)
    auto_unroll_configs_gpu: tuple[int, ...] = (0, 16, 64, 512, 1024)
    disable_change_compute_location: bool = False
    mutate_tile_size_weight: float = 0.90
    mutate_auto_unroll_weight: float = 0.04
    mutate_compute_location_weight: float = 0.05
    mutate_parallel_weight: float = 0.01
    mutate_auto_unroll_weight_gpu: float = 0.10
    mutate_pipeline_depth_weight_gpu: float = 0.05
    scale_population_to_batch: bool = True
    gpu_tensor_core_pipeline: int = 3
    gpu_simt_double_buffer: bool = False
    gpu_shared_padding: bool = True
    cpu_int8_dot_product_tiling: bool = True

    def for_round(self, num_measure: int, shares_cores: bool = False) -> SearchParams:
        """These parameters with the automatic population / generations (those left None)
        filled in for a round that measures ``num_measure`` candidates; ``shares_cores``:
        the search takes the cores the candidates are measured on (the local CPU), so it
        spends less per candidate (:func:`~autosched.search.budget.search_effort`)."""
        if (
            self.evolutionary_search_population is not None
            and self.evolutionary_search_num_iters is not None
        ):
            return self
        population, generations = search_effort(num_measure, shares_cores)
        if self.evolutionary_search_population is not None:
            population = self.evolutionary_search_population
        if self.evolutionary_search_num_iters is not None:
            generations = self.evolutionary_search_num_iters
        return replace(
            self,
            evolutionary_search_population=population,
            evolutionary_search_num_iters=generations,
        )
