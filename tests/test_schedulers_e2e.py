"""Trial-level early stopping and Hydra multirun on real sweeps (FIFO against ASHA is in
test_sweep_e2e, beside the ASHA sweep it compares with)."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest

from hfsweep.driver import sweep
from tests.conftest import resolved_config

pytestmark = pytest.mark.slow


def test_early_stopping_callback_ends_a_trial_as_completed(ray_cluster, tmp_path, cache_dir):
    overrides = [
        "debug=tiny",
        "callbacks=early_stopping",
        "callbacks.early_stopping.early_stopping_patience=1",
        "callbacks.early_stopping.early_stopping_threshold=0.5",
        "search_space.training.learning_rate.values=[1e-5]",
        "training.max_steps=60",
    ]
    results = sweep.run(resolved_config(overrides, tmp_path, cache_dir))
    assert results.errors == []
    (result,) = results
    assert result.metrics["step"] < 60, "EarlyStoppingCallback did not stop the trial"
    (ended,) = pd.read_csv(tmp_path / "results.csv")["ended"]
    assert ended == "early-stopped", "the callback's stop must read as early-stopped, not as Tune's stop"


def test_multirun_runs_one_sweep_per_job_and_writes_a_summary(tmp_path, cache_dir):
    sweep_dir = tmp_path / "multirun"
    proc = subprocess.run(
        [
            sys.executable, "-m", "hfsweep", "-m",
            "seed=1,2",
            "debug=tiny",
            "training.max_steps=10",
            f"cache_dir={cache_dir}",
            f"hydra.sweep.dir={sweep_dir}",
        ],
        capture_output=True, text=True, timeout=400,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for job in ("0", "1"):
        assert (sweep_dir / job / "resolved_config.yaml").is_file()
        assert (sweep_dir / job / "sweep").is_dir()
    summary = pd.read_csv(sweep_dir / "multirun_summary.csv")
    assert list(summary["overrides"].str.extract(r"(seed=\d)")[0]) == ["seed=1", "seed=2"]
    assert (summary["step"] == 10).all() and summary["eval_loss"].notna().all()
    assert (sweep_dir / "multirun_summary.md").read_text().count("seed=") == 2
