"""Ray starts in a driver that runs no threads of its own work, with whole logical CPUs, and a Ray
that does not start says where to look (the trust issue's item 6: on a 16-core machine `ray.init`
timed out; the cause, found on an H200 node, was the float num_cpus)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hfsweep.config.errors import ConfigError, RayStartError
from hfsweep.driver import ray_cluster

PROBE = """
import os, runpy, sys
import hfsweep.driver.ray_cluster as rc
def probe(*args, **kwargs):
    print("THREADS", len(os.listdir("/proc/self/task")), flush=True)
    os._exit(0)
rc.start_local_ray = probe
sys.argv = ["hfsweep", *sys.argv[1:]]
runpy.run_module("hfsweep", run_name="__main__")
"""
# The threads the libraries a driver imports start by themselves (Arrow's jemalloc and its pool),
# measured in a fresh process that imports the driver and does nothing.
IMPORTS_ONLY = "import os, hfsweep.driver.sweep; print(len(os.listdir('/proc/self/task')))"


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc")
def test_the_cli_starts_ray_holding_no_more_threads_than_its_imports_start(tmp_path):
    """A fresh cache makes the CLI train a tokenizer and tokenize (a `tokenizers` pool, torch's
    threads, tqdm's monitor) before Ray starts: all of it must happen outside the driver."""
    env = {
        **os.environ,
        "HFSWEEP_CACHE": str(tmp_path / "cache"),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "WANDB_MODE": "offline",
    }
    baseline = int(
        subprocess.run(
            [sys.executable, "-c", IMPORTS_ONLY], env=env, capture_output=True, text=True, check=True
        ).stdout.split()[-1]
    )
    run = subprocess.run(
        [sys.executable, "-c", PROBE, "debug=tiny", f"hydra.run.dir={tmp_path / 'run'}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [line for line in run.stdout.splitlines() if line.startswith("THREADS")]
    assert lines, run.stdout + run.stderr
    assert int(lines[-1].split()[1]) <= baseline


def test_a_ray_that_never_registers_its_raylet_is_refused_in_one_line_naming_its_output(monkeypatch):
    def timed_out():
        raise Exception(
            "The current node timed out during startup. This could happen because some of the "
            "raylet failed to startup or the GCS has become overloaded."
        )

    monkeypatch.setattr(ray_cluster.ray, "init", lambda **kwargs: timed_out())
    cluster = {"num_cpus": 8, "num_gpus": None}
    with pytest.raises(RayStartError) as refused:
        ray_cluster.start_local_ray(cluster, {}, {})
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("Ray did not start") and "RAY_LOG_TO_STDERR=1" in message and "raylet.err" in message


def test_a_local_ray_is_given_whole_logical_cpus_and_a_fraction_is_refused(monkeypatch):
    """OmegaConf gives cluster.num_cpus as 8.0; Ray hands its raylet min(cores, num_cpus) as an int
    flag, and on a 16-core GPU node the raylet refused '8.0' and never registered."""
    given = []
    monkeypatch.setattr(ray_cluster.ray, "init", lambda **kwargs: given.append(kwargs))
    ray_cluster.start_local_ray({"num_cpus": 8.0, "num_gpus": None}, {}, {})
    assert given[0]["num_cpus"] == 8 and isinstance(given[0]["num_cpus"], int)
    with pytest.raises(ConfigError, match=r"^cluster.num_cpus: 2.5 logical CPUs .* whole number"):
        ray_cluster.start_local_ray({"num_cpus": 2.5, "num_gpus": None}, {}, {})


@pytest.mark.slow
def test_a_two_worker_sweeps_console_carries_no_library_notice_a_user_cannot_act_on(tmp_path):
    """Every Ray Train worker printed transformers' "[INFO] Running in WANDB offline mode" (11
    lines in the default run); DeepSpeed, when installed, warns on each CPU worker that it found no
    GPU (hfsweep tells the workers DS_ACCELERATOR=cpu on a CPU sweep)."""
    env = {
        **os.environ,
        "HFSWEEP_CACHE": str(tmp_path / "cache"),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "WANDB_MODE": "offline",
    }
    run = subprocess.run(
        [sys.executable, "-m", "hfsweep", "debug=tiny", "cluster.num_workers=2", f"hydra.run.dir={tmp_path / 'run'}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    console = run.stdout + run.stderr
    assert "Best trial " in run.stdout
    assert "Running in WANDB offline mode" not in console
    assert "[WARNING]" not in console and "Setting accelerator to CPU" not in console
