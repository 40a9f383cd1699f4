"""vta.get_env(): TVM's vta_config.json fields, the derived shapes and the targets."""

import json

import pytest

from autosched import vta


def test_default_env_is_tvms_pynq_config():
    env = vta.get_env()
    assert (env.TARGET, env.BATCH, env.BLOCK_IN, env.BLOCK_OUT) == ("sim", 1, 16, 16)
    assert (env.INP_WIDTH, env.WGT_WIDTH, env.ACC_WIDTH) == (8, 8, 32)
    # entries: 32 KiB of 16-byte input rows, 256 KiB of 256-byte weight blocks, 128 KiB of
    # 64-byte accumulator rows, 32 KiB of 4-byte uops
    assert (env.spec.inp_depth, env.spec.wgt_depth) == (2048, 1024)
    assert (env.spec.acc_depth, env.spec.uop_depth) == (2048, 8192)
    assert str(env.target) == "ext_dev -device=vta" and env.target.kind == "ext_dev"
    assert env.target.device_name == "vta" and str(env.target.host) == "llvm"
    assert env.target_host.kind == "llvm"


def test_env_from_a_json_file(tmp_path):
    path = tmp_path / "vta_config.json"
    path.write_text(json.dumps({"TARGET": "sim", "LOG_BATCH": 1, "LOG_BLOCK": 5}))
    env = vta.get_env(path)
    assert (env.BATCH, env.BLOCK_IN, env.BLOCK_OUT, env.LOG_ACC_BUFF_SIZE) == (2, 32, 32, 17)
    assert env.spec.acc_depth == (1 << 17) // (2 * 32 * 4)


def test_bad_config_errors_name_the_field(tmp_path):
    with pytest.raises(ValueError, match=r"unknown fields \['LOG_BLOK'\]"):
        vta.get_env({"LOG_BLOK": 4})
    with pytest.raises(ValueError, match="TARGET='pynq' is not available"):
        vta.get_env({"TARGET": "pynq"})
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="bad.json.*cannot read it as JSON"):
        vta.get_env(bad)
