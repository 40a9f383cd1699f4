"""A ComputeDAG as plain data (what a remote server builds from): the round trip keeps the
workload key, and the decoder refuses what is not a known expression node."""

import json

import pytest

import autosched as ansor
from autosched import workloads
from tensorir.dag_data import dag_from_data, dag_to_data


def test_dag_travels_as_checked_plain_data():
    for dag in (
        workloads.matmul(8, 8, 8),
        workloads.softmax(4, 8),
        workloads.conv2d_nhwc_bias_relu(1, 8, 8, 4, 8),
        workloads.winograd_conv2d_nhwc_3x3(1, 8, 8, 4, 8),
    ):
        dag = ansor.ComputeDAG(dag)
        data = json.loads(json.dumps(dag_to_data(dag)))
        assert dag_from_data(data).workload_key == dag.workload_key
    data = dag_to_data(ansor.ComputeDAG(workloads.matmul(8, 8, 8)))
    body = data["ops"][-1][3]
    hostile = {
        "call": ["call", "system", [], "int32"],
        "operator": ["binary", "__import__", body, body, "float32"],
        "dtype": ["cast", "object", body],
        "later op": ["read", 5, [], "float32"],
    }
    for what, node in hostile.items():
        ops = [*data["ops"][:-1], [*data["ops"][-1][:3], node, *data["ops"][-1][4:]]]
        with pytest.raises(ValueError, match="DAG description") as info:
            dag_from_data(dict(data, ops=ops))
        assert "\n" not in str(info.value), what
