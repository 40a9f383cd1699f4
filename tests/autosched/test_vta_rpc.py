"""VTA tasks measured on simulator servers (seed 004's ``autotvm.RPCRunner(env.TARGET, ...)``):
a tracker and two ``rpc_server --key sim`` processes on 127.0.0.1, tuning through RPCRunner
with the same costs as the in-process SimulatorRunner, malformed programs refused, a server
killed mid-tune."""

import io
import threading
import time
import zlib

import numpy as np
import pytest
from test_vta_templates import CONV_ARGS, ENV

from autosched import autotvm, vta
from autosched.measure import MeasureErrorNo
from autosched.rpc import vta_job
from autosched.vta.measure import packed_shapes
from autosched.vta.top import build, task_workload, tile_config
from runtime.vta import to_dict

pack = vta_job.insns_to_bytes

pytest.importorskip("distributed")
from test_rpc import Processes, _connect, _free_port, _server_args, _wait_for_servers  # noqa: E402

from autosched.exec import query_rpc_tracker  # noqa: E402


@pytest.fixture(scope="module")
def task():
    return autotvm.task.create("conv2d_packed.vta", CONV_ARGS, target=ENV.target)


def _job(task, index: int, seed: int = 0) -> dict:
    wkl = task_workload(task)
    kernel = build(wkl, tile_config(task.config_space.get(index)), ENV)
    return vta_job.encode_job(kernel.program, packed_shapes(wkl, ENV), ENV.config, ENV.timing,
                              seed)  # fmt: skip


# ----------------------------------------------------------------------------- no cluster


def test_rpc_runner_takes_vtas_module_loader_and_claims_only_vta_tasks(task):
    runner = autotvm.RPCRunner(ENV.TARGET, host="127.0.0.1", port=9190, number=5, timeout=60,
                               module_loader=vta.module_loader())  # fmt: skip
    assert runner.module_loader.env is ENV and runner.n_parallel is None
    assert runner.measures_configs_of(task)
    cpu_task = autotvm.task.create(
        "dense.x86", (("TENSOR", (4, 16), "float32"), ("TENSOR", (8, 16), "float32"), "float32"),
        target="llvm",
    )  # fmt: skip
    assert not runner.measures_configs_of(cpu_task)


def test_decode_job_refuses_what_is_not_an_instruction_stream(task, monkeypatch):
    monkeypatch.setattr(vta_job, "MAX_INSNS_JSON_BYTES", 1 << 20)  # a small limit, for the bomb
    good = _job(task, 575)
    insns = vta_job.insns_from_bytes(good["insns"])
    bad_insn = [dict(insns[0], sram_base="0")] + insns[1:]
    no_finish = insns[:-1]
    gemm = next(i for i in insns if i["opcode"] == "GEMM")
    huge = [dict(gemm, uop_bgn=0, uop_end=8000, iter_out=9000, iter_in=9000), insns[-1]]
    pickled = np.empty(2, dtype=object)
    buf = io.BytesIO()
    np.save(buf, pickled, allow_pickle=True)
    cases = {
        "not zlib": (dict(good, insns=b"[{"), "not zlib-compressed"),
        "not JSON": (dict(good, insns=zlib.compress(b"[{")), "not valid JSON"),
        "bomb": (dict(good, insns=zlib.compress(b" " * (2 << 20))), "inflates to more than"),
        "bad opcode": (
            dict(good, insns=pack([{"opcode": "JUMP"}])),
            "opcode must be one of",
        ),
        "str field": (
            dict(good, insns=pack(bad_insn)),
            "sram_base must be an int",
        ),
        "no FINISH": (dict(good, insns=pack(no_finish)), "exactly one FINISH"),
        "huge loop": (
            dict(good, insns=pack(huge)),
            "micro-op iterations, over the",
        ),
        "pickled uops": (dict(good, uops=buf.getvalue()), "uops is not a .npy array"),
        "huge buffer": (dict(good, vta_config=dict(ENV.config, LOG_ACC_BUFF_SIZE=40)), "LOG_"),
        "format": (dict(good, format="pickle"), "job format 'pickle'"),
    }
    for what, (job, message) in cases.items():
        with pytest.raises(ValueError, match=message) as info:
            vta_job.decode_job(job)
        assert "\n" not in str(info.value), what
    assert vta_job.run_job(vta_job.decode_job(good))["cycles"] > 0
    program = build(task_workload(task), tile_config(task.config_space.get(575)), ENV).program
    assert insns == [to_dict(i) for i in program.insns]  # the ISA's own plain-dict form


def _npy_claiming(shape, dtype="<i4") -> bytes:
    """A .npy header claiming ``shape``, followed by a few bytes only."""
    header = repr({"descr": dtype, "fortran_order": False, "shape": tuple(shape)}).encode()
    header += b" " * (-(len(header) + 11) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + b"\0" * 12


def test_malformed_jobs_are_refused_with_one_line_not_a_raw_error(task):
    good = _job(task, 575)
    cases = {
        "deep JSON": (dict(good, insns=zlib.compress(b"[" * 200_000)), "nests JSON deeper"),
        "npy of 2**40 rows": (
            dict(good, uops=_npy_claiming((2**40, 3))),
            r"header claims shape \(1099511627776, 3\) of int32 \(13194139533312 bytes\) but 12",
        ),
        "npy expected of 2**40": (
            dict(good, expected=_npy_claiming((2**40,), "|i1")),
            "expected: its .npy header claims",
        ),
        "timing 1e308": (
            dict(good, timing=dict(good["timing"], gemm_ii=1e308)),
            r"timing gemm_ii must be an int in \[1, 1048576\], got 1e\+308",
        ),
        "clock 1e308": (
            dict(good, timing=dict(good["timing"], clock_mhz=1e308)),
            r"timing clock_mhz must lie in \(0, 100000\]",
        ),
        "shape 2**100": (
            dict(good, shapes=dict(good["shapes"], inp=[2**100, 1])),
            "the DRAM tensors need",
        ),
    }
    for what, (job, message) in cases.items():
        with pytest.raises(ValueError, match=message) as info:
            vta_job.decode_job(job)
        assert "\n" not in str(info.value), what


def test_a_job_over_the_servers_memory_limit_is_refused_before_it_runs(task, monkeypatch):
    good = _job(task, 575)
    insns = vta_job.insns_from_bytes(good["insns"])
    gemm = next(i for i in insns if i["opcode"] == "GEMM" and not i["reset"])
    # 2**24 micro-op iterations (the cap): ~22 GB when simulated all at once, ~1.7 GB now.
    at_cap = [dict(gemm, uop_bgn=0, uop_end=16, iter_out=1024, iter_in=1024), insns[-1]]
    job = dict(good, insns=pack(at_cap))
    message = r"the job needs about \d+ MiB to simulate, over this server's limit of 1024 MiB "
    with pytest.raises(ValueError, match=message + r"\(AUTOSCHED_VTA_MAX_MEMORY\)") as info:
        vta_job.decode_job(job, max_memory=1 << 30)
    assert "\n" not in str(info.value)
    need = vta_job.job_memory(*[getattr(vta_job.decode_job(job, max_memory=1 << 40), k)
                                for k in ("program", "spec", "timing", "shapes")])  # fmt: skip
    assert (1 << 30) < need < (4 << 30)  # bounded by what the instructions declare
    monkeypatch.setenv("AUTOSCHED_VTA_MAX_MEMORY", "64M")
    assert vta_job.memory_limit() == 64 << 20
    with pytest.raises(ValueError, match="over this server's limit of 64 MiB"):
        vta_job.decode_job(job)
    monkeypatch.setenv("AUTOSCHED_VTA_MAX_MEMORY", "2G")
    small = vta_job.decode_job(good)  # an ordinary job stays far below any sensible limit
    assert vta_job.job_memory(small.program, small.spec, small.timing, small.shapes) < 64 << 20


# ----------------------------------------------------------------------------- the cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A tracker and two servers of key "sim" (the VTA simulator by default)."""
    logdir = tmp_path_factory.mktemp("vta-rpc")
    procs = Processes(logdir)
    port = _free_port()
    try:
        procs.start("tracker", "autosched.exec.rpc_tracker", "--port", str(port))
        servers = [procs.start(f"sim-{c}", *_server_args(port, "sim")) for c in "ab"]
        tracker = _connect(port, procs.procs[0])
        _wait_for_servers(tracker, {"sim": 2}, servers)
        yield {"port": port, "tracker": tracker, "procs": procs, "servers": servers}
        tracker.close()
    finally:
        procs.close()


def test_query_rpc_tracker_lists_the_sim_servers(cluster, capsys):
    assert query_rpc_tracker.main(["--port", str(cluster["port"])]) == 0
    text = capsys.readouterr().out
    assert text.count("server:sim\n") == 2
    rows = [line.split() for line in text.splitlines() if line.startswith("sim ")]
    assert rows == [["sim", "2", "2", "0"]], text


def test_tune_through_rpc_runner_equals_simulator_runner(cluster, task, tmp_path):
    log = tmp_path / "vta-rpc.log"
    runner = autotvm.RPCRunner(ENV.TARGET, host="127.0.0.1", port=cluster["port"], number=5,
                               timeout=60, module_loader=vta.module_loader())  # fmt: skip
    option = autotvm.measure_option(builder=autotvm.LocalBuilder(n_parallel=4), runner=runner)
    tuner = autotvm.tuner.RandomTuner(task, seed=3)
    with runner:
        tuner.tune(8, measure_option=option, callbacks=[autotvm.callback.log_to_file(log)])
    records = list(autotvm.record.load_from_file(log))
    assert len(records) == 8
    ok = [(inp, res) for inp, res in records if res.error_no == MeasureErrorNo.NO_ERROR]
    assert len(ok) >= 4, [res.error_msg for _, res in records]
    assert len(runner.server_counts) == 2, runner.server_counts  # both servers measured
    local = vta.SimulatorRunner()
    for inp, res in records:
        want = local.measure(task, task.config_space.get(inp.config.index))
        assert res.error_no == want.error_no, (res.error_msg, want.error_msg)
        if res.error_no == MeasureErrorNo.NO_ERROR:
            assert res.costs == want.costs  # the same cycles at the same clock, to the bit


def test_server_refuses_malformed_programs_and_reports_deadlocks(cluster, task):
    tracker = cluster["tracker"]
    good = _job(task, 575)
    insns = vta_job.insns_from_bytes(good["insns"])
    deadlock = [dict(insns[0], pop_next=True)] + insns[1:]  # waits for a token never pushed

    def measure(job):
        return tracker.reply(tracker.submit("sim", "vta_measure", job, timeout=30), None, 90)

    for bad in (
        dict(good, insns=pack([{"opcode": "JUMP"}])),
        dict(good, uops=b"not npy"),
    ):
        reply = measure(bad)
        assert reply["error_no"] == MeasureErrorNo.COMPILE_DEVICE, reply
        assert "server 'sim' (vta" in reply["error_msg"] and "refuses" in reply["error_msg"]
        assert "\n" not in reply["error_msg"]
    reply = measure(dict(good, insns=pack(deadlock)))
    assert reply["error_no"] == MeasureErrorNo.RUNTIME_DEVICE and "deadlock" in reply["error_msg"]
    reply = measure(good)
    assert reply["error_no"] == MeasureErrorNo.NO_ERROR and reply["cycles"] > 0, reply
    assert reply["seconds"] == ENV.timing.seconds(reply["cycles"])


def test_killing_a_sim_server_mid_tune_does_not_end_the_tune(cluster, task):
    # Runs last: it kills one of the module's two servers, the one measuring a candidate.
    tracker, procs = cluster["tracker"], cluster["procs"]
    by_pid = {p.pid: p for p in cluster["servers"]}
    process_of = {
        addr: by_pid[tracker.reply(tracker.submit("sim", "info", {}, worker=addr), addr, 60)["pid"]]
        for addr in tracker.servers()
    }
    runner = autotvm.RPCRunner(ENV.TARGET, host="127.0.0.1", port=cluster["port"], timeout=30)
    victim = []

    def kill_when_busy():
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not victim:
            busy = [a for a, tasks in tracker.client.processing(list(process_of)).items() if tasks]
            if busy:
                victim.append(process_of[busy[0]])
                procs.kill(victim[0])
            time.sleep(0.02)

    killer = threading.Thread(target=kill_when_busy, daemon=True)
    configs = [task.config_space.get(0)] * 4  # the largest program of the space
    killer.start()
    try:
        with runner:
            _, results = runner.measure_configs(task, configs)
    finally:
        killer.join(35)
    assert victim and victim[0].poll() is not None
    errors = [r for r in results if r.error_no != MeasureErrorNo.NO_ERROR]
    assert len(results) == 4 and len(errors) <= 1, [r.error_msg for r in errors]
    costs = {r.costs for r in results if r.error_no == MeasureErrorNo.NO_ERROR}
    assert costs == {vta.SimulatorRunner().measure(task, configs[0]).costs}
    survivor = next(a for a, p in process_of.items() if p is not victim[0])
    # the survivor measured its own candidates and the one the victim lost
    assert runner.server_counts[survivor] >= 2, runner.server_counts
