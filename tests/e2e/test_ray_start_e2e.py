"""Ray started by a real process: `python -m hfsweep`'s driver holds no more threads than its imports
start, a two-worker sweep's console carries no library notice a user cannot act on, and a second
copy of hfsweep run in its own folder has its code, not the installed copy's, on Ray's workers."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

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


CLONE_PROBE = """
import ray, hfsweep
from hfsweep.config.schema import ClusterConfig, typed
from hfsweep.driver.ray_cluster import init_ray
init_ray(typed(ClusterConfig, {"num_cpus": 1}))
print("DRIVER", hfsweep.__file__)
print("WORKER", ray.get(ray.remote(lambda: __import__("hfsweep").__file__).remote()))
ray.shutdown()
"""


def test_a_second_copy_run_in_its_folder_runs_its_own_code_on_ray_workers(tmp_path):
    """A copy of hfsweep beside the installed one (a clone, a worktree), run in its own folder, has
    its code imported by the driver; a local Ray's workers, started elsewhere, imported the installed
    copy instead, so every trial ran other code than the driver's."""
    import shutil

    import hfsweep

    clone = tmp_path / "clone"
    shutil.copytree(os.path.dirname(hfsweep.__file__), clone / "hfsweep", ignore=shutil.ignore_patterns("__pycache__"))
    run = subprocess.run(
        [sys.executable, "-c", CLONE_PROBE], cwd=clone, capture_output=True, text=True, timeout=300, check=True
    )
    files = dict(line.split(" ", 1) for line in run.stdout.splitlines() if line.startswith(("DRIVER", "WORKER")))
    assert files["DRIVER"].startswith(str(clone)), run.stdout
    assert files["WORKER"].startswith(str(clone)), run.stdout + run.stderr
