"""Resume: a sweep interrupted with Ctrl-C finishes with one command, finished trials untouched."""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

pytestmark = pytest.mark.slow

SWEEP = [
    "scheduler=fifo",
    "training.max_steps=10",
    "search_space.training.learning_rate.values=[3e-3,1e-3]",
    "cluster.num_workers=1",
    "cluster.max_concurrent_trials=1",
]


def finished_trials(experiment: str) -> list[str]:
    done = []
    for result_file in glob.glob(os.path.join(experiment, "run_trial_*", "result.json")):
        lines = [json.loads(line) for line in open(result_file) if line.strip()]
        if lines and lines[-1].get("done"):
            done.append(os.path.dirname(result_file))
    return done


def test_ctrl_c_then_resume_finishes_the_sweep_without_rerunning(tmp_path, cache_dir):
    run_dir = tmp_path / "run"
    experiment = str(run_dir / "sweep")
    command = [sys.executable, "-m", "hfsweep", *SWEEP, f"cache_dir={cache_dir}", f"hydra.run.dir={run_dir}"]
    driver = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while not finished_trials(experiment) and time.time() < deadline and driver.poll() is None:
        time.sleep(1)
    assert driver.poll() is None, "the sweep ended before it could be interrupted"
    driver.send_signal(signal.SIGINT)  # Ctrl-C: Tune saves its state and exits
    driver.wait(timeout=120)
    interrupted = {path: open(os.path.join(path, "result.json")).read() for path in finished_trials(experiment)}
    assert len(interrupted) == 1

    refused = subprocess.run(
        [sys.executable, "-m", "hfsweep.resume", str(run_dir), "training.max_steps=20"], capture_output=True, text=True, timeout=120
    )
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines()[-1] == (
        f"hfsweep: error: resume: training.max_steps differ from the config saved in {run_dir}; "
        "drop those overrides, or pass --force to resume with them."
    )

    resumed = subprocess.run([sys.executable, "-m", "hfsweep.resume", str(run_dir)], capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    table = pd.read_csv(run_dir / "results.csv")
    assert len(table) == 2 and set(table["ended"]) == {"completed"}
    for path, before in interrupted.items():
        assert open(os.path.join(path, "result.json")).read() == before, "a finished trial was run again"
    assert (run_dir / "best" / "config.json").is_file()


def test_resume_of_a_directory_without_a_sweep_is_refused(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "hfsweep.resume", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        f"hfsweep: error: resume: '{tmp_path}' holds no sweep (resolved_config.yaml is missing); pass a sweep's run directory."
    )
