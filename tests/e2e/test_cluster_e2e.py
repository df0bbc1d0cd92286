"""Sweeps on a real multi-node Ray cluster: a `ray start --head` started here, and a node lost mid-trial."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pandas as pd
import pytest

from tests.conftest import resolved_config
from tests.faults import HOLD_AFTER_STEP_10, SweepInBackground, assert_one_restart_from_a_checkpoint


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def token_auth():
    """Ray's token authentication as a real cluster runs it: the head and every client share
    `RAY_AUTH_MODE=token` and the token. (Ray 2.60's `ray start` turns it on by itself when
    ~/.ray/auth_token exists, which any earlier local `ray.init()` writes, while a client given an
    explicit address does not: the test must not depend on which ran first.)"""
    return {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}


@pytest.fixture
def ray_head(no_ray_connection, token_auth):
    """`ray start --head --block` on loopback, with the dashboard that serves Ray's State API,
    stopped by its PID (never `ray stop`). Its own
    short temp dir: Ray's socket paths must fit in 107 bytes, and other Rays here keep theirs."""
    temp_dir = tempfile.mkdtemp(prefix="ray-head-", dir="/tmp")
    port = free_port()
    head = subprocess.Popen(
        [
            "ray",
            "start",
            "--head",
            "--block",
            "--node-ip-address=127.0.0.1",
            f"--port={port}",
            "--num-cpus=4",
            f"--ray-client-server-port={free_port()}",
            f"--dashboard-port={free_port()}",
            f"--dashboard-agent-listen-port={free_port()}",  # the State API's server
            f"--temp-dir={temp_dir}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=token_auth,
        start_new_session=True,  # its raylet and GCS form one process group, ended together below
    )
    deadline = time.time() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert time.time() < deadline and head.poll() is None, "ray start --head did not come up"
            time.sleep(0.5)
    yield f"127.0.0.1:{port}"
    os.killpg(head.pid, signal.SIGTERM)
    try:
        head.wait(timeout=5)
    except subprocess.TimeoutExpired:
        os.killpg(head.pid, signal.SIGKILL)
    shutil.rmtree(temp_dir, ignore_errors=True)


CHUNK_TASKS = """import json, sys
from ray.util.state import list_nodes, list_tasks
tasks = list_tasks(address=sys.argv[1], limit=1000, \
filters=[("func_or_class_name", "=", "_process_on_node"), ("state", "=", "FINISHED")])
print(json.dumps({"nodes": [n.node_id for n in list_nodes(address=sys.argv[1])], \
"tasks": [[t.node_id, t.worker_pid] for t in tasks]}))"""


def test_a_sweep_runs_on_an_existing_cluster_by_address(ray_head, token_auth, tmp_path):
    run_dir = tmp_path / "run"
    command = [
        sys.executable,
        "-m",
        "hfsweep",
        f"cluster.address={ray_head}",
        "cluster.num_workers=2",
        "debug=tiny",
        "training.max_steps=10",
        "data.prepare_on=cluster",  # tokenized by Ray tasks on the cluster
        f"cache_dir={tmp_path / 'cache'}",
        f"hydra.run.dir={run_dir}",
    ]
    sweep = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=token_auth)
    _, stderr = sweep.communicate(timeout=400)
    assert sweep.returncode == 0, stderr[-3000:]
    table = pd.read_csv(run_dir / "results.csv")
    assert list(table["ended"]) == ["completed"] and list(table["step"]) == [10]
    assert (run_dir / "best" / "config.json").is_file()
    # Every shard was made by a Ray task on the cluster's node, in a Ray worker, not in the sweep's process.
    shards = list((tmp_path / "cache" / "tokenized").glob("*/train/part-*.parquet"))
    asked = subprocess.run(
        [sys.executable, "-c", CHUNK_TASKS, ray_head], capture_output=True, text=True, timeout=60, env=token_auth
    )
    assert asked.returncode == 0, asked.stderr[-2000:]
    state = json.loads(asked.stdout)
    assert len(state["tasks"]) == len(shards) >= 1, (state, shards)
    assert all(node in state["nodes"] and pid != sweep.pid for node, pid in state["tasks"]), state


def test_a_trial_survives_losing_the_node_that_runs_its_workers(no_ray_connection, tmp_path, cache_dir):
    """Head: 1 CPU for the trial process, 1 for Ray Data's read tasks. Two worker nodes with 2
    `train_slot`s each and no CPU, so the workers (and only they) land there; the node running them
    is removed mid-trial."""
    import ray
    from ray.cluster_utils import Cluster

    # A dashboard port of its own: the State API below needs the dashboard, which Ray's test cluster
    # does not start when another Ray on the machine holds the default port (8265).
    cluster = Cluster(initialize_head=True, connect=True, head_node_args={"num_cpus": 2, "dashboard_port": free_port()})
    try:
        nodes = [cluster.add_node(num_cpus=0, resources={"train_slot": 2}) for _ in range(2)]
        cluster.wait_for_nodes()
        overrides = [
            f"cluster.address={cluster.address}",
            "cluster.num_workers=2",
            "+cluster.resources_per_worker.train_slot=1",
            "cluster.resources_per_worker.CPU=0",
            "cluster.max_failures=1",
            "debug=tiny",
            *HOLD_AFTER_STEP_10,
        ]
        background = SweepInBackground(resolved_config(overrides, tmp_path, cache_dir))
        background.wait_until_held()
        from ray.util.state import list_actors

        busy = {
            a.node_id for a in list_actors(filters=[("state", "=", "ALIVE"), ("class_name", "=", "RayTrainWorker")])
        }
        doomed = [node for node in nodes if node.node_id in busy]
        assert len(doomed) == 1, "both workers should be packed on one worker node"
        cluster.remove_node(doomed[0])
        background.release()
        assert_one_restart_from_a_checkpoint(background.results(), max_steps=20)
    finally:
        ray.shutdown()
        cluster.shutdown()
