"""A network built by ``vta.build`` as one file: ``lib.export_library("graphlib.tar")``.

The tar holds plain data only, which loading checks: ``library.json`` (the format, the VTA
configuration it was compiled for, the graph as a list of nodes, and per packed conv2d its
workload, tile configuration and instruction stream in the ISA's field names) and
``arrays.npz`` (the graph's constants, the weights and each program's micro-op table, read
with ``allow_pickle=False``). :func:`load_library` rebuilds the module without compiling
anything: the programs are the exported ones, checked instruction by instruction
(:func:`runtime.vta.from_dict`). The seed loads it through ``remote.load_module``
(``rpc.LocalSession()``).
"""

from __future__ import annotations

import dataclasses
import io
import json
import tarfile
from pathlib import Path

import numpy as np

from codegen.vta import Conv2dWorkload, TileConfig
from runtime.vta import Program, from_dict, to_dict
from tensorir.graph.ir import Attrs, Call, Constant, Function, Var, post_order

from .env import Environment, get_env
from .top.build import VTAKernel

FORMAT = "autosched-vta-library"
FORMAT_VERSION = 1


def _graph_nodes(func: Function) -> tuple[list, dict]:
    """The nodes of ``func`` in post order (parameters first) as JSON values, the arrays they
    refer to, and each node's index by id."""
    nodes, arrays, index = [], {}, {}

    def add(node, entry):
        index[id(node)] = len(nodes)
        nodes.append(entry)

    for var in func.params:
        add(var, {"var": var.name, "shape": list(var.shape), "dtype": var.dtype})
    for node in post_order(func):
        if id(node) in index:
            continue
        if isinstance(node, Constant):
            key = f"const{len(arrays)}"
            arrays[key] = np.asarray(node.value)
            add(node, {"const": key, "name": node.name})
        elif isinstance(node, Call):
            add(node, {"op": node.op, "args": [index[id(a)] for a in node.args],
                       "attrs": dict(node.attrs), "shape": list(node.shape),
                       "dtype": node.dtype})  # fmt: skip
        else:
            raise TypeError(f"export_library: cannot save graph node {type(node).__name__}")
    return nodes, arrays, index


def save_library(module, path) -> None:  # module: VTAGraphModule (no import: no cycle)
    """Write ``module`` (a :class:`~autosched.vta.graph_module.VTAGraphModule`) to ``path``."""
    nodes, arrays, index = _graph_nodes(module.func)
    kernels = []
    for node_id, kernel in module.kernels.items():
        key = f"uops{len(kernels)}"
        arrays[key] = np.asarray(kernel.program.uops, np.int32)
        kernels.append({
            "node": index[node_id],
            "workload": dataclasses.asdict(kernel.workload),
            "config": dataclasses.asdict(kernel.config),
            "insns": [to_dict(insn) for insn in kernel.program.insns],
            "uops": key,
        })  # fmt: skip
    for name, value in module._params.items():
        arrays[f"param:{name}"] = np.asarray(value)
    body = module.func.body
    outputs = [index[id(o)] for o in module.func.outputs]
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "vta_config": module.env.config,
        "params": [index[id(v)] for v in module.func.params],
        "outputs": outputs,
        "tuple_output": isinstance(body, tuple),
        "name": module.func.name,
        "nodes": nodes,
        "kernels": kernels,
    }
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    with tarfile.open(path, "w") as tar:
        for name, data in (("library.json", json.dumps(meta).encode()),
                           ("arrays.npz", buffer.getvalue())):  # fmt: skip
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _read(path: Path) -> tuple[dict, dict]:
    try:
        with tarfile.open(path, "r") as tar:
            members = {m.name: m for m in tar.getmembers() if m.isfile()}
            if "library.json" not in members or "arrays.npz" not in members:
                raise ValueError("it holds no library.json / arrays.npz")
            meta = json.loads(tar.extractfile(members["library.json"]).read())
            data = tar.extractfile(members["arrays.npz"]).read()
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (tarfile.TarError, OSError, ValueError) as e:
        raise ValueError(f"{path}: not a VTA library written by export_library ({e})") from e
    if meta.get("format") != FORMAT or meta.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"{path}: format {meta.get('format')!r} version {meta.get('format_version')}, but "
            f"this autosched reads {FORMAT!r} version {FORMAT_VERSION}; export it again"
        )
    return meta, arrays


def read_library(path, env: Environment | None = None) -> tuple:
    """``(func, kernels, env, params)`` of the module saved at ``path``
    (:func:`autosched.vta.load_library` makes the module of them).

    Raises
    ------
    ValueError
        One line naming the file: not such a library, another VTA configuration than
        ``env``'s (default ``vta.get_env()``), or a malformed graph or program.
    """
    path = Path(path)
    meta, arrays = _read(path)
    env = env or get_env()
    if meta["vta_config"] != env.config:
        differ = sorted(k for k in env.config if meta["vta_config"].get(k) != env.config[k])
        raise ValueError(
            f"{path}: compiled for another VTA configuration (fields {differ} differ); "
            "build it again for this one"
        )
    try:
        nodes = []
        for entry in meta["nodes"]:
            if "var" in entry:
                nodes.append(Var(entry["var"], tuple(entry["shape"]), entry["dtype"]))
            elif "const" in entry:
                nodes.append(Constant(arrays[entry["const"]], entry["name"]))
            else:
                args = tuple(nodes[i] for i in entry["args"])
                nodes.append(Call(entry["op"], args, Attrs(entry["attrs"]),
                                  tuple(entry["shape"]), entry["dtype"]))  # fmt: skip
        outputs = [nodes[i] for i in meta["outputs"]]
        body = tuple(outputs) if meta["tuple_output"] else outputs[0]
        func = Function(tuple(nodes[i] for i in meta["params"]), body, meta["name"])
        kernels = {}
        for k in meta["kernels"]:
            program = Program(tuple(from_dict(d) for d in k["insns"]), arrays[k["uops"]])
            kernel = VTAKernel(Conv2dWorkload(**k["workload"]), TileConfig(**k["config"]),
                               program, env)  # fmt: skip
            kernels[id(nodes[k["node"]])] = kernel
    except (KeyError, IndexError, TypeError, ValueError) as e:
        raise ValueError(f"{path}: a malformed VTA library ({type(e).__name__}: {e})") from e
    params = {k.split(":", 1)[1]: v for k, v in arrays.items() if k.startswith("param:")}
    return func, kernels, env, params
