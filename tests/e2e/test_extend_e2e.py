"""Extending a finished sweep (`resume --extend`): a grid widened from two learning rates to three
runs only the new one, in a new experiment of the same run directory, and best/ is chosen anew
over all three trials; an extension that changes anything else is refused."""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
import time

import pandas as pd
import pytest


def test_a_widened_grid_runs_only_its_new_point_and_best_is_chosen_over_all_trials(tmp_path, cache_dir):
    run_dir = tmp_path / "run"
    sweep = [
        sys.executable,
        "-m",
        "hfsweep",
        "debug=tiny",
        "search_space.training.learning_rate.values=[1e-5,1e-4]",
        "budget.trial_hours=1",
        f"cache_dir={cache_dir}",
        f"hydra.run.dir={run_dir}",
    ]
    first = subprocess.run(sweep, capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stderr[-3000:]
    before = {path: open(path).read() for path in glob.glob(str(run_dir / "sweep" / "run_trial_*" / "result.json"))}
    assert len(before) == 2
    exported = os.path.getmtime(run_dir / "best" / "config.json")

    resume = [sys.executable, "-m", "hfsweep.resume", str(run_dir), "--extend"]
    refused = subprocess.run([*resume, "training.max_steps=40"], capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        f"hfsweep: error: resume --extend: training.max_steps differ from the config saved in {run_dir}; "
        "an extension changes num_samples and search_space.* only."
    ]

    extended = subprocess.run(
        [*resume, "search_space.training.learning_rate.values=[1e-5,1e-4,3e-3]"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert extended.returncode == 0, extended.stderr[-3000:]
    assert "1 grid points left to run" in extended.stdout
    spent = [float(re.search(r"\(([0-9.]+) trial-seconds", run.stdout).group(1)) for run in (first, extended)]
    assert spent[1] > spent[0], f"the extension's budget counts the sweep's first two trials too: {spent}"
    added = glob.glob(str(run_dir / "sweep-extend-1" / "run_trial_*" / "result.json"))
    assert len(added) == 1, "only the new grid point ran"
    assert json.loads(open(added[0]).readlines()[-1])["config"]["training"]["learning_rate"] == 3e-3
    assert {path: open(path).read() for path in before} == before, "an old trial ran again"

    table = pd.read_csv(run_dir / "results.csv")
    assert sorted(table["training.learning_rate"]) == [1e-5, 1e-4, 3e-3] and set(table["ended"]) == {"completed"}
    best = json.loads((run_dir / "best.json").read_text())
    winner = table.loc[table["best_eval_loss"].idxmin()]
    assert best["trial_id"] == winner["trial_id"] and best["value"] == pytest.approx(winner["best_eval_loss"])
    assert best["hyperparameters"] == {"training.learning_rate": 3e-3}, "the new, largest rate learns most in 20 steps"
    assert os.path.getmtime(run_dir / "best" / "config.json") > exported, "best/ was exported again"
    saved = (run_dir / "resolved_config.yaml").read_text()
    assert "0.003" in saved, "the run directory's config is the extended one"


def test_a_random_search_extension_draws_new_points_and_an_interrupted_one_is_finished_by_resume(tmp_path, cache_dir):
    """Random search extended from 2 trials to 4 draws 2 new learning rates (not the sweep's first
    two again); the extension, interrupted by Ctrl-C mid-trial, is finished by a plain resume,
    its held trial continuing from its checkpoint."""
    from tests.e2e.test_resume_e2e import interrupt
    from tests.faults import HOLD_AFTER_STEP_10

    run_dir = tmp_path / "run"
    (run_dir / "sweep" / "train_runs").mkdir(parents=True)
    (run_dir / "sweep" / "train_runs" / "released").touch()  # the first sweep's trials do not hold
    sweep = [
        sys.executable,
        "-m",
        "hfsweep",
        "debug=tiny",
        "search_alg=random",
        "search_space=learning_rate_loguniform",
        "scheduler=fifo",
        "num_samples=2",
        "cluster.max_concurrent_trials=1",
        *HOLD_AFTER_STEP_10,
        f"cache_dir={cache_dir}",
        f"hydra.run.dir={run_dir}",
    ]
    first = subprocess.run(sweep, capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stderr[-3000:]
    drawn = sorted(pd.read_csv(run_dir / "results.csv")["training.learning_rate"])

    env = {**os.environ, "TUNE_GLOBAL_CHECKPOINT_S": "1"}
    extension = subprocess.Popen(
        [sys.executable, "-m", "hfsweep.resume", str(run_dir), "--extend", "num_samples=4"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    train_runs = run_dir / "sweep-extend-1" / "train_runs"
    deadline = time.time() + 300
    while not (train_runs / "holding").exists() and time.time() < deadline and extension.poll() is None:
        time.sleep(0.2)
    assert extension.poll() is None and (train_runs / "holding").exists(), "the extension's first trial never held"
    time.sleep(3)  # Tune saves its experiment state every second (TUNE_GLOBAL_CHECKPOINT_S)
    interrupt(extension, "ctrl-c")
    (train_runs / "released").touch()

    resumed = subprocess.run(
        [sys.executable, "-m", "hfsweep.resume", str(run_dir)], capture_output=True, text=True, timeout=900
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    table = pd.read_csv(run_dir / "results.csv")
    assert len(table) == 4 and set(table["ended"]) == {"completed"}
    rates = list(table["training.learning_rate"])
    assert sorted(rates[:2]) == drawn and len(set(rates)) == 4, f"the extension drew the sweep's points again: {rates}"
    assert all(1e-4 <= lr <= 1e-2 for lr in rates)
    added = glob.glob(str(run_dir / "sweep-extend-1" / "run_trial_*" / "result.json"))
    histories = [[json.loads(line) for line in open(path) if line.strip()] for path in added]
    assert len(histories) == 2
    held = [h for h in histories if any("resumed_from" in row for row in h)]
    assert len(held) == 1 and [row["step"] for row in held[0]] == [10, 20], "the held trial did not continue"
    best = json.loads((run_dir / "best.json").read_text())
    assert best["trial_id"] == table.loc[table["best_eval_loss"].idxmin(), "trial_id"]
