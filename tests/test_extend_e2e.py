"""Extending a finished sweep (`resume --extend`): a grid widened from two learning rates to three
runs only the new one, in a new experiment of the same run directory, and best/ is chosen anew
over all three trials; an extension that changes anything else is refused."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import pandas as pd
import pytest

pytestmark = pytest.mark.slow


def test_a_widened_grid_runs_only_its_new_point_and_best_is_chosen_over_all_trials(tmp_path, cache_dir):
    run_dir = tmp_path / "run"
    sweep = [sys.executable, "-m", "hfsweep", "debug=tiny", "search_space.training.learning_rate.values=[1e-5,1e-4]",
             f"cache_dir={cache_dir}", f"hydra.run.dir={run_dir}"]
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

    extended = subprocess.run([*resume, "search_space.training.learning_rate.values=[1e-5,1e-4,3e-3]"],
                              capture_output=True, text=True, timeout=900)
    assert extended.returncode == 0, extended.stderr[-3000:]
    assert "1 grid points left to run" in extended.stdout
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
