"""Targets as the seed tutorials use them: ``target.kind.name`` and ``host=``."""

import pickle

import pytest

from codegen.target import Target


@pytest.mark.parametrize(
    "spec, name", [("llvm", "llvm"), ("cpu", "llvm"), ("cuda", "cuda"), ("opencl", "opencl")]
)
def test_kind_name(spec, name):
    target = Target(spec)
    assert target.kind.name == name
    # The kind still compares as the plain string the code base tests against.
    assert target.kind == name and target.kind in (name,)
    assert isinstance(target.kind.name, str) and type(target.kind.name) is str


def test_host_is_stored_as_a_target():
    target = Target("opencl -device=mali", host="llvm -mtriple=aarch64-linux-gnu")
    assert isinstance(target.host, Target)
    assert target.host.kind.name == "llvm"
    assert target.host.get("mtriple") == "aarch64-linux-gnu"
    assert target.get("device") == "mali"
    # str() is what records store and match on: a host does not change it.
    assert str(target) == str(Target("opencl -device=mali")) == "opencl -device=mali"
    # Copies keep the host; host=Target works as well as a string.
    assert Target(target).host == target.host
    assert target.with_options(device="bifrost").host == target.host
    assert Target("cuda", host=Target("llvm")).host == Target("llvm")
    assert pickle.loads(pickle.dumps(target)) == target
    assert Target("cuda").host is None


def test_host_must_be_a_cpu_target():
    with pytest.raises(ValueError, match="host='cuda' must be an llvm"):
        Target("opencl", host="cuda")
