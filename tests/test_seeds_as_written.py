"""The seed tutorials' code as published, with only the import lines changed, runs here.

tests/seeds/ holds the seeds' code (``seed_001_mali_rpc.py``: seed 001, Mali over RPC, whole;
``seed_000_cuda_network.py`` / ``seed_003_cuda_network.py``: seeds 000 and 003, resnet-18 for
CUDA, whole; ``seed_004_vta_evaluate.py``:
seed 004's settings and evaluation on the VTA simulator). Where the published
text is at hand (``$AUTOSCHED_SEEDS_DIR``, default ``shared/seeds`` beside the checkout),
the first test checks that every line but the imports is the published one, in order. The
others run the seeds' lines as the seeds write them:

- seed 001 as published (its ``tune_and_evaluate()`` commented out): the network, its tasks,
  ``request_remote`` to an RPC server of key ``rk3399`` (an OpenCL server on this machine, PoCL)
  at the seed's tracker 127.0.0.1:9190, the device's limits read there, tasks with them;
- seed 001's ``tune_and_evaluate()`` uncommented as the seed says, with its own knob
  ``num_measure_trials`` made small: ``LocalBuilder(build_func="ndk")``, ``RPCRunner`` on the
  server, compile, ``export_library("deploy_lib.so", ndk.create_shared)`` (an AArch64 library:
  zig's linker of the ``cross`` extra), upload, ``remote.load_module`` and the benchmark on
  the remote OpenCL device (``pytest -m long``: minutes);
- seed 001's deploy lines on a small network, the same lines (``test_seed_001_deploy_lines``);
- seeds 000 and 003 whole, one trial per task, on llvm without an NVIDIA GPU (``pytest -m
  long``; 002 is 000's code, and its published text lost its indentation);
- seed 004's evaluation (``rpc.LocalSession()``, ``vta.build_config`` + ``relay.build``,
  ``graphlib.tar``, ``remote.ext_dev(0)``, ``time_evaluator``) on a small packed int8 network
  and, with ``pytest -m long``, on the seed's resnet-18 pipeline; and TVM's VTA tutorials'
  ``simulator.clear_stats()`` / ``stats()`` printout.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SEEDS = REPO / "tests" / "seeds"
PUBLISHED = Path(
    os.environ.get("AUTOSCHED_SEEDS_DIR")
    or next(
        (p for p in (Path(__file__).parents[2] / "shared" / "seeds",) if p.is_dir()),
        Path("/work/shared/seeds"),
    )
)
sys.path.insert(0, str(REPO / "tests" / "autosched"))

# What the published texts' HTML did to the code: seed 001 lost a ">" ("if int(dev.warp_size /
# 4) 1 else" is TVM's "> 1"), seed 000 indents with no-break spaces. Seed 002 lost its
# indentation altogether: it is not Python as published, and seed 000 is the same tutorial.
REPAIRS = {"int(dev.warp_size / 4) 1 else": "int(dev.warp_size / 4) > 1 else", "\u00a0": " "}
COPIES = {
    "seed_000_cuda_network.py": "000_598b0ef3424eb554.txt",
    "seed_001_mali_rpc.py": "001_48c181b5b6699d61.txt",
    "seed_003_cuda_network.py": "003_43836124ab8bf3db.txt",
    "seed_004_vta_evaluate.py": "004_4d6354c69e11e952.txt",
}
TRACKER_PORT = 9190  # the seeds' own
HEADER_END = "# ruff: noqa\n"  # the last line of the note at the top of each copy


@pytest.fixture(autouse=True)
def _long_on_request(request):
    """``long`` tests (minutes each) run when the -m expression names them (as
    tests/test_tutorial_vta.py's): the default run leaves them out."""
    if request.node.get_closest_marker("long") and "long" not in (
        request.config.getoption("markexpr") or ""
    ):
        pytest.skip("a run of minutes: pytest -m long runs it")


def _is_import(line: str) -> bool:
    s = line.strip()
    return s.startswith("import ") or (s.startswith("from ") and " import " in s)


def _code_lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines() if line.strip() and not _is_import(line)]


@pytest.mark.parametrize("copy", sorted(COPIES))
def test_seed_copies_are_the_published_code_but_for_imports(copy):
    published = PUBLISHED / COPIES[copy]
    if not published.is_file():
        pytest.skip(f"the published seed {published} is not here (set AUTOSCHED_SEEDS_DIR)")
    text = published.read_text()
    for bad, good in REPAIRS.items():
        text = text.replace(bad, good)
    source = [line.rstrip() for line in text.splitlines()]
    copy_text = (SEEDS / copy).read_text()
    lines = _code_lines(copy_text.split(HEADER_END, 1)[1])  # after our note at the top
    at = 0
    for line in lines:  # in order, each one a line of the published text
        assert line in source[at:], f"{copy}: not in {published.name} after line {at}: {line!r}"
        at = source.index(line, at) + 1
    imports = [ln.strip() for ln in copy_text.splitlines() if _is_import(ln)]
    assert imports and not [ln for ln in imports if re.search(r"\btvm\b(?! *$)", ln)
                            and not ln.endswith(" as tvm")], imports  # fmt: skip


# ----------------------------------------------------------------------------- the RPC server


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a closed one's TIME_WAIT is free
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _opencl_missing() -> str | None:
    try:
        import pyopencl  # noqa: F401
    except ImportError:
        return "pyopencl is not installed"
    import autosched

    return None if autosched.device("opencl", 0).exists else "no OpenCL device"


@pytest.fixture(scope="module")
def rk3399(tmp_path_factory):
    """The seed's tracker at 127.0.0.1:9190 and an OpenCL server of key "rk3399"."""
    pytest.importorskip("distributed")
    why = _opencl_missing()
    if why:
        pytest.skip(why)
    if not _port_free(TRACKER_PORT):
        pytest.skip(f"port {TRACKER_PORT} (the seed's tracker) is taken on this machine")
    logdir = tmp_path_factory.mktemp("rk3399")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    procs = []

    def start(name, *args):
        log = open(logdir / f"{name}.log", "w")  # noqa: SIM115 - closed at the end
        procs.append((subprocess.Popen([sys.executable, "-m", *args], stdout=log,
                                       stderr=subprocess.STDOUT, env=env, cwd=logdir,
                                       start_new_session=True), log))  # fmt: skip

    try:
        start("tracker", "autosched.exec.rpc_tracker", "--port", str(TRACKER_PORT))
        start("server", "autosched.exec.rpc_server", "--tracker", f"127.0.0.1:{TRACKER_PORT}",
              "--key", "rk3399", "--device", "opencl")  # fmt: skip
        from autosched import rpc

        deadline = time.monotonic() + 90
        while True:
            try:
                with rpc.connect_tracker("127.0.0.1", TRACKER_PORT, timeout=2) as tracker:
                    tracker.wait_for_key("rk3399", 2)
                break
            except (ConnectionError, LookupError):
                dead = [p.args for p, _ in procs if p.poll() is not None]
                if dead or time.monotonic() > deadline:
                    logs = "\n".join(f.read_text()[-1500:] for f in logdir.glob("*.log"))
                    raise RuntimeError(f"tracker/server did not start ({dead}):\n{logs}") from None
                time.sleep(0.5)
        yield logdir
    finally:
        for proc, log in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
            log.close()


def _run_seed(code: str, cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    script = cwd / "seed.py"
    script.write_text(code)
    return subprocess.run([sys.executable, str(script)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip


def _check_ok(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, (
        f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-4000:]}"
    )
    assert "Traceback" not in proc.stderr, proc.stderr[-4000:]


# ----------------------------------------------------------------------------- seed 001


def test_seed_001_as_published_reads_the_remote_device(rk3399, tmp_path):
    """The file as published: tasks, then the remote OpenCL device's limits as hardware params
    (its ``tune_and_evaluate()`` stays commented out)."""
    code = (SEEDS / "seed_001_mali_rpc.py").read_text()
    code += "\nprint('hardware_params:', hardware_params)\nprint('tasks:', len(tasks))\n"
    proc = _run_seed(code, tmp_path, timeout=600)
    _check_ok(proc)
    out = proc.stdout
    assert out.startswith("Extract tasks...\n========== Task 0  (workload key: ")
    n_tasks = len(re.findall(r"^========== Task \d+ ", out, re.M))
    assert n_tasks >= 20 and f"tasks: {n_tasks}" in out  # the same tasks with the limits

    import autosched

    local = autosched.device("opencl", 0)  # the server is this machine's OpenCL device
    line = next(ln for ln in out.splitlines() if ln.startswith("hardware_params:"))
    assert f"max_threads_per_block={local.max_threads_per_block}" in line, line
    assert f"warp_size={local.warp_size}" in line, line
    assert "max_local_memory_per_block=2147483647" in line, line


@pytest.mark.long
def test_seed_001_tune_and_evaluate_over_rpc(rk3399, tmp_path):
    """``tune_and_evaluate()`` uncommented, as the seed says, with a small
    ``num_measure_trials`` (its own knob): one trial per task, measured on the server."""
    pytest.importorskip("ziglang")
    code = (SEEDS / "seed_001_mali_rpc.py").read_text()
    assert code.count("num_measure_trials=200,") == 1 and code.count("# tune_and_evaluate()") == 1
    code = code.replace("num_measure_trials=200,", "num_measure_trials=len(tasks),")
    code = code.replace("# tune_and_evaluate()", "tune_and_evaluate()")
    proc = _run_seed(code, tmp_path, timeout=1800)
    _check_ok(proc)
    out = proc.stdout
    order = ["Begin tuning...", "[ Task Scheduler ]", "Compile...",
             "=============== Request Remote ===============", "Evaluate inference time cost...",
             "Execution time summary:"]  # fmt: skip
    positions = [out.find(marker) for marker in order]
    assert -1 not in positions and positions == sorted(positions), out[-3000:]
    assert (tmp_path / "mobilenet-NHWC-B1-opencl.json").stat().st_size > 0


SMALL_DEPLOY = """
import numpy as np
import autosched as tvm
from autosched import relay
from autosched.contrib import graph_executor
from test_network import small_net

rng = np.random.default_rng(7)
func, params = small_net(rng, n_blocks=1)
mod = tvm.IRModule.from_expr(func)
input_shape, dtype = (1, 8, 8, 3), "float32"
target = tvm.target.Target("opencl -device=mali", host="llvm -mtriple=aarch64-linux-gnu")
device_key = "rk3399"
with tvm.transform.PassContext(opt_level=3, config={"relay.backend.use_auto_scheduler": True}):
    lib = relay.build(mod, target, params=params)
"""


def _seed_lines(copy: str, first: str, last: str) -> str:
    """The lines of tests/seeds/``copy`` from the one starting (stripped) with ``first`` to the
    one starting with ``last``, dedented: the seed's own code."""
    import textwrap

    lines = (SEEDS / copy).read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.strip().startswith(first))
    end = next(i for i in range(start, len(lines)) if lines[i].strip().startswith(last))
    return textwrap.dedent("\n".join(lines[start : end + 1])) + "\n"


def test_seed_001_deploy_lines(rk3399, tmp_path):
    """Seed 001's lines from ``request_remote`` to ``module.benchmark`` on a small network
    compiled for ``opencl -device=mali`` with an AArch64 host: the library is linked for
    aarch64-linux-gnu (zig), uploaded, loaded on the server's OpenCL device and run there; its
    output is the network's on random data."""
    pytest.importorskip("ziglang")
    deploy = _seed_lines("seed_001_mali_rpc.py", 'print("=============== Request Remote',
                         "print(module.benchmark(")  # fmt: skip
    check = """
module.run()
from tensorir.graph import evaluate
expected = evaluate(func, {"data": data}, params)
np.testing.assert_allclose(module.get_output(0).numpy(), expected, rtol=1e-4, atol=1e-5)
from runtime.shared_library import elf_machine
print("library machine:", elf_machine(open(path_lib, "rb").read(64)))
print("remote module:", type(module).__name__)
try:
    loaded_lib["default"](tvm.device("opencl", 0))
except TypeError as e:
    print("local device:", e)
"""
    env_cc = 'import os\nos.environ["TVM_NDK_CC"] = "/usr/bin/aarch64-linux-gnu-g++"\n'
    path = f"import sys\nsys.path.insert(0, {str(REPO / 'tests' / 'autosched')!r})\n"
    code = path + env_cc + SMALL_DEPLOY + deploy + check
    proc = _run_seed(code, tmp_path, timeout=600)
    _check_ok(proc)
    out = proc.stdout
    assert out.startswith("=============== Request Remote ===============\n")
    assert "Evaluate inference time cost...\nExecution time summary:" in out
    assert "library machine: 183" in out  # EM_AARCH64
    assert "remote module: RemoteGraphModule" in out
    assert "is a device of this machine; pass one of the session that loaded" in out


# ----------------------------------------------------------------------------- seed 003


def _has_cuda() -> bool:
    import autosched

    try:
        return autosched.device("cuda", 0).exists
    except Exception:
        return False


@pytest.mark.long
@pytest.mark.parametrize("copy", ["seed_000_cuda_network.py", "seed_003_cuda_network.py"])
def test_seed_000_003_tune_compile_and_time_resnet18(copy, tmp_path):
    """Seeds 000 and 003 (resnet-18, NHWC) with their ``num_measure_trials`` (their own knob)
    at one trial per task (seed 000's ``run_tuning()`` uncommented, as it says); on llvm where
    there is no NVIDIA GPU, the one line changed besides the imports."""
    code = (SEEDS / copy).read_text()
    assert code.count("num_measure_trials=200,") == 1
    code = code.replace("num_measure_trials=200,", "num_measure_trials=len(tasks),")
    code = code.replace("\n# run_tuning()\n", "\nrun_tuning()\n")
    kind = "cuda" if _has_cuda() else "llvm"
    if kind == "llvm":
        assert code.count('tvm.target.Target("cuda")') == 1
        code = code.replace('tvm.target.Target("cuda")', 'tvm.target.Target("llvm")')
    proc = _run_seed(code, tmp_path, timeout=1800)
    _check_ok(proc)
    out = proc.stdout
    timing = "Mean inference time (std dev): " if "000" in copy else "Execution time summary:"
    order = ["Extract tasks...", "========== Task 0  (workload key: ", "[ Task Scheduler ]",
             "Compile...", "Evaluate inference time cost...", timing]  # fmt: skip
    positions = [out.find(marker) for marker in order]
    assert -1 not in positions and positions == sorted(positions), out[-3000:]
    assert (tmp_path / f"resnet-18-NHWC-B1-{kind}.json").stat().st_size > 0


# ----------------------------------------------------------------------------- seed 004

# Before seed 004's evaluation: what its compile_network and tuning produce, on a network small
# enough for a unit test that reads the seed's (1, 3, 224, 224) image: a float first conv (the
# seed keeps conv 0 float), a max pool, two int8 convs packed for VTA, a global average pool
# and a dense, quantized with the seed's qconfig and packed with graph_pack, then its packed
# conv2d tasks tuned for one trial each on the simulator into the seed's log file.
SMALL_VTA_NETWORK = """
import numpy as np
import autosched as tvm
from autosched import autotvm, relay, vta
from autosched.autotvm.tuner import RandomTuner
from autosched.vta.top import graph_pack
from tensorir.graph import nn, op

env = vta.get_env()
rng = np.random.default_rng(11)
data = op.var("data", (1, 3, 224, 224))
w0, w1, w2 = (op.var(n, s) for n, s in (("w0", (16, 3, 3, 3)), ("w1", (16, 16, 3, 3)),
                                        ("w2", (32, 16, 1, 1))))
wd = op.var("wd", (10, 32))
y = nn.relu(nn.conv2d(data, w0, strides=4, padding=1))
y = nn.max_pool2d(y, pool_size=2, strides=2)
y = nn.relu(nn.conv2d(y, w1, padding=1))
y = nn.relu(nn.conv2d(y, w2, strides=2))
y = nn.dense(nn.batch_flatten(nn.global_avg_pool2d(y)), wd)
func = relay.Function((data, w0, w1, w2, wd), y)
params = {p.name: rng.normal(0, 0.3, p.shape).astype("float32") for p in func.params[1:]}
with relay.quantize.qconfig(global_scale=8.0, skip_conv_layers=[0]):
    mod = relay.quantize.quantize(tvm.IRModule.from_expr(func), params)
relay_prog = graph_pack(mod["main"], env.BATCH, env.BLOCK_OUT, env.WGT_WIDTH,
                        start_name="nn.max_pool2d", stop_name="nn.global_avg_pool2d")
tasks = autotvm.task.extract_from_program(
    tvm.IRModule.from_expr(relay_prog), params=params, ops=(relay.op.get("nn.conv2d"),),
    target=env.target, target_host=env.target_host)
tasks = list(filter(lambda t: len(t.args[0][1]) > 4 and "conv" in t.name, tasks))
assert len(tasks) == 2, tasks
for tsk in tasks:
    RandomTuner(tsk).tune(n_trial=1, measure_option=autotvm.measure_option(
        builder=autotvm.LocalBuilder(), runner=vta.SimulatorRunner()),
        callbacks=[autotvm.callback.log_to_file("vta.resnet18_v1.log")])
"""

# After it: the same network in numpy (the reference interpreter) on the image the seed set,
# and TVM's VTA tutorials' printout of the simulator's counters around a timer of 4 x 3 runs.
CHECK_VTA = """
out = m.get_output(0)
from tensorir.graph import evaluate
np.testing.assert_array_equal(np.asarray(out), evaluate(relay_prog, {"data": image.numpy()}))
num, rep = 4, 3
timer = m.module.time_evaluator("run", ctx, number=num, repeat=rep)
simulator.clear_stats()
timer()
sim_stats = simulator.stats()
print("\\nExecution statistics:")
for k, v in sim_stats.items():
    # Since we execute the workload many times, we need to normalize stats
    # Note that there is always one warm up run
    # Therefore we divide the overall stats by (num * rep + 1)
    print("\\t{:<16}: {:>16}".format(k, v // (num * rep + 1)))
print("one run:", {k: m.stats[k] for k in sim_stats})
"""


def test_seed_004_evaluation_on_the_simulator(tmp_path):
    """Seed 004's evaluation lines as published, then TVM's stats printout: compile under
    ``vta.build_config`` with ``relay.build``, export ``graphlib.tar``, upload it to an
    ``rpc.LocalSession()``, load it, run it on ``remote.ext_dev(0)`` through ``GraphModule``
    and time it; the output is the network's (numpy reference), and the counters printed per
    run are one run's."""
    seed = (SEEDS / "seed_004_vta_evaluate.py").read_text()
    # the seed's function leaves m and ctx local: keep them for the check below
    head = "def tune_and_evaluate(tuning_opt):\n"
    seed = seed.replace(head, head + "    global m, ctx, image\n", 1)
    proc = _run_seed(SMALL_VTA_NETWORK + seed + CHECK_VTA, tmp_path, timeout=600)
    _check_ok(proc)
    out = proc.stdout
    order = ["Compile...", "Upload...", "Evaluate inference time cost...",
             "Mean inference time (std dev): ", "Execution statistics:"]  # fmt: skip
    positions = [out.find(marker) for marker in order]
    assert -1 not in positions and positions == sorted(positions), out[-3000:]
    assert re.search(r"Mean inference time \(std dev\): \d+\.\d\d ms \(\d+\.\d\d ms\)", out)
    printed = dict(re.findall(r"^\t(\w+) *: +(\d+)$", out, re.M))
    assert list(printed) == ["inp_load_nbytes", "wgt_load_nbytes", "acc_load_nbytes",
                             "uop_load_nbytes", "out_store_nbytes", "gemm_counter",
                             "alu_counter"]  # fmt: skip
    one_run = eval(out.split("one run: ", 1)[1].splitlines()[0])  # a dict of ints
    assert {k: int(v) for k, v in printed.items()} == one_run
    assert one_run["gemm_counter"] > 0 and one_run["wgt_load_nbytes"] > 0


# The seed's compile_network with autosched's model zoo (the seed's gluon resnet18_v1 with its
# pretrained weights needs mxnet and a download): resnet-18 quantized with the seed's qconfig,
# packed from the first max pool to the global average pool, its packed conv2d tasks tuned for
# one trial each on the simulator into the seed's log.
RESNET18_VTA = """
import numpy as np
import autosched as tvm
from autosched import autotvm, networks, relay, vta
from autosched.autotvm.tuner import RandomTuner
from autosched.vta.top import graph_pack

env = vta.get_env()
mod, params, _, _ = networks.get_network("resnet-18", batch_size=env.BATCH, layout="NCHW")
with relay.quantize.qconfig(global_scale=8.0, skip_conv_layers=[0]):
    mod = relay.quantize.quantize(mod, params=params)
relay_prog = graph_pack(mod["main"], env.BATCH, env.BLOCK_OUT, env.WGT_WIDTH,
                        start_name="nn.max_pool2d", stop_name="nn.global_avg_pool2d")
tasks = autotvm.task.extract_from_program(
    tvm.IRModule.from_expr(relay_prog), params=params, ops=(relay.op.get("nn.conv2d"),),
    target=env.target, target_host=env.target_host)
tasks = list(filter(lambda t: len(t.args[0][1]) > 4 and "conv" in t.name, tasks))
for tsk in tasks:
    RandomTuner(tsk).tune(n_trial=1, measure_option=autotvm.measure_option(
        builder=autotvm.LocalBuilder(), runner=vta.SimulatorRunner()),
        callbacks=[autotvm.callback.log_to_file("vta.resnet18_v1.log")])
"""


@pytest.mark.long
def test_seed_004_evaluation_of_resnet18_on_the_simulator(tmp_path):
    """Seed 004's evaluation lines on the seed's network pipeline (resnet-18 of the zoo):
    11 runs of the whole network, its packed convolutions on the simulator."""
    seed = (SEEDS / "seed_004_vta_evaluate.py").read_text()
    proc = _run_seed(RESNET18_VTA + seed, tmp_path, timeout=3000)
    _check_ok(proc)
    assert re.search(r"Mean inference time \(std dev\): \d+\.\d\d ms \(\d+\.\d\d ms\)",
                     proc.stdout), proc.stdout[-2000:]  # fmt: skip
