"""One test per misuse of the scheduling language: the message names the stage, the iterator
and the fix, and the state is left unchanged."""

import re

import pytest

from tensorir import ComputeDAG, te
from tensorir.schedule import ScheduleError, State


@pytest.fixture
def st():
    """softmax-like DAG: A -> mx (reduce) -> ex -> sm (reduce) -> out."""
    A = te.placeholder((4, 16), name="A")
    k1 = te.reduce_axis((0, 16), name="k1")
    mx = te.compute((4,), lambda i: te.max(A[i, k1], axis=k1), name="mx")
    ex = te.compute((4, 16), lambda i, j: te.exp(A[i, j] - mx[i]), name="ex")
    k2 = te.reduce_axis((0, 16), name="k2")
    sm = te.compute((4,), lambda i: te.sum(ex[i, k2], axis=k2), name="sm")
    out = te.compute((4, 16), lambda i, j: ex[i, j] / sm[i], name="out")
    return State(ComputeDAG([A, out]))


def fails(state, method, *args, match):
    before, steps = str(state), state.steps
    with pytest.raises(ScheduleError, match=match):
        getattr(state, method)(*args)
    assert str(state) == before and state.steps == steps


def test_schedule_error_is_a_value_error():
    assert issubclass(ScheduleError, ValueError)


def test_unknown_stage(st):
    fails(
        st,
        "split",
        "nope",
        "i",
        [2],
        match=re.escape("unknown stage 'nope'; stages are ['A', 'mx', 'ex', 'sm', 'out']"),
    )


def test_unknown_iterator_lists_the_valid_ones(st):
    fails(
        st,
        "split",
        "ex",
        "k",
        [2],
        match=re.escape("stage 'ex' has no iterator 'k'; valid iterators are ['i', 'j']"),
    )


@pytest.mark.parametrize("lengths", [[0], [-2], [2.5], [True], ["4"]])
def test_split_lengths_must_be_positive_ints(st, lengths):
    fails(
        st,
        "split",
        "ex",
        "j",
        lengths,
        match=r"split of ex\.j: every length must be a positive int",
    )


def test_reorder_must_be_a_permutation(st):
    fails(st, "reorder", "ex", ["j"], match=r"reorder of stage 'ex'.*not a permutation of all 2")
    fails(st, "reorder", "ex", ["j", "j"], match=r"list every iterator exactly once")


def test_fuse_of_non_adjacent_iterators(st):
    st.split("ex", "j", [4])
    fails(
        st,
        "fuse",
        "ex",
        ["i", "j.1"],
        match=r"fuse of stage 'ex': iterators \['i', 'j.1'\] are not adjacent.*reorder them",
    )


def test_annotate_an_annotated_iterator(st):
    st.parallel("ex", "i")
    fails(
        st,
        "unroll",
        "ex",
        "i",
        match=r"unroll of ex\.i: the iterator is already annotated 'parallel'",
    )


def test_vectorize_a_reduce_iterator(st):
    fails(
        st,
        "vectorize",
        "mx",
        "k1",
        match=r"vectorize of mx\.k1: cannot vectorize a reduce iterator",
    )


def test_parallel_a_reduce_iterator(st):
    fails(
        st, "parallel", "sm", "k2", match=r"parallel of sm\.k2: cannot parallel a reduce iterator"
    )


def test_bind_a_reduce_iterator_to_a_block(st):
    fails(st, "bind", "sm", "k2", "blockIdx.x", match=r"can only be bound to threadIdx")


def test_bind_to_an_unknown_thread_name(st):
    fails(
        st,
        "bind",
        "ex",
        "i",
        "threadIdx.w",
        match=r"bind of ex\.i: unknown thread name 'threadIdx.w'; use one of",
    )


def test_compute_at_into_a_stage_that_does_not_consume_it(st):
    fails(
        st,
        "compute_at",
        "mx",
        "sm",
        "i",
        match=r"compute_at of 'mx' at sm\.i: 'sm' does not consume 'mx'; attach it to one of "
        r"its consumers \['ex'\]",
    )


def test_compute_at_of_a_placeholder(st):
    fails(st, "compute_at", "A", "ex", "i", match=r"compute_at: stage 'A' is a placeholder")


def test_compute_inline_of_a_placeholder(st):
    fails(st, "compute_inline", "A", match=r"compute_inline: stage 'A' is a placeholder")


def test_compute_inline_of_a_reduction(st):
    fails(
        st,
        "compute_inline",
        "sm",
        match=r"compute_inline of 'sm': cannot inline, it is a reduction",
    )


def test_compute_inline_of_an_output(st):
    fails(st, "compute_inline", "out", match=r"compute_inline of 'out'.*output of the DAG")


def test_compute_inline_of_a_stage_with_attached_stages(st):
    st.compute_at("mx", "ex", "i")
    fails(st, "compute_inline", "ex", match=r"stages \['mx'\] are attached to it \(compute_root")


def test_cache_read_with_a_reader_that_does_not_read(st):
    fails(
        st,
        "cache_read",
        "mx",
        "shared",
        ["sm"],
        match=r"cache_read of 'mx': stage 'sm' does not read it; its readers are \['ex'\]",
    )


def test_cache_read_with_an_unknown_scope(st):
    fails(st, "cache_read", "A", "texture", ["ex"], match=r"unknown scope 'texture'")


def test_rfactor_of_a_spatial_iterator(st):
    fails(
        st,
        "rfactor",
        "sm",
        "i",
        0,
        match=r"rfactor of sm\.i: the iterator is spatial; rfactor needs a reduce iterator",
    )


def test_rfactor_of_a_mixed_iterator(st):
    st.fuse("sm", ["i", "k2"])
    fails(st, "rfactor", "sm", "i@k2@", 0, match=r"the iterator is mixed")


def test_unknown_pragma(st):
    fails(
        st,
        "pragma",
        "ex",
        "i",
        "unroll_everything",
        match=r"pragma of ex\.i: unknown pragma 'unroll_everything'",
    )


def test_storage_align_on_an_unknown_iterator(st):
    fails(st, "storage_align", "ex", "q", 16, 1, match=r"stage 'ex' has no iterator 'q'")


def test_storage_align_on_a_split_iterator(st):
    st.split("ex", "j", [4])
    fails(st, "storage_align", "ex", "j.0", 16, 1, match=r"not an axis of the op's output")


@pytest.mark.parametrize(
    "method,args",
    [
        ("split", ("i", [2])),
        ("reorder", (["j", "i"],)),
        ("parallel", ("i",)),
        ("pragma", ("i", "auto_unroll_max_step$16")),
        ("compute_at", ("out", "i")),
        ("compute_inline", ()),
        ("cache_write", ("local",)),
    ],
)
def test_steps_on_an_inlined_stage(st, method, args):
    st.compute_inline("ex")
    fails(st, method, "ex", *args, match=r"stage 'ex' is inlined.*compute_root")


def test_compute_root_of_an_inlined_stage_is_allowed(st):
    st.compute_inline("ex")
    st.compute_root("ex")
    assert st["ex"].compute_at == "root"


def test_attachment_broken_by_a_later_step(st):
    st.compute_at("mx", "ex", "i")
    st.compute_at("ex", "out", "i")
    st.compute_root("mx")
    st.compute_at("ex", "out", "j")
    st.compute_at("mx", "ex", "j")
    fails(st, "compute_inline", "ex", match=r"attached to it")


def test_cache_write_of_a_placeholder(st):
    fails(st, "cache_write", "A", "local", match=r"placeholder and is never written")


def test_split_of_an_annotated_iterator(st):
    st.vectorize("ex", "j")
    fails(st, "split", "ex", "j", [4], match=r"already annotated 'vectorize'; split before")


def test_follow_split_of_a_non_split_step(st):
    st.fuse("ex", ["i", "j"])
    fails(st, "follow_split", "out", "j", 0, 1, match=r"source step 0 is a FuseStep")


def test_cache_write_that_would_strand_an_attached_producer(st):
    st.compute_at("mx", "ex", "i")
    fails(st, "cache_write", "ex", "local", match=r"'ex' no longer consumes 'mx'; compute_root")


def test_un_inlining_that_would_strand_an_attached_producer(st):
    st.compute_inline("ex")
    st.compute_at("mx", "out", "i")  # out reads mx through the inlined ex
    fails(st, "compute_root", "ex", match=r"'out' no longer consumes 'mx'")
