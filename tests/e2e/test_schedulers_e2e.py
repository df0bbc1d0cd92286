"""Trial-level early stopping on real sweeps (FIFO against ASHA is in test_sweep_e2e, beside the
ASHA sweep it compares with; Hydra multirun in test_glue_e2e, whose recipe is one)."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.conftest import run_sweep


def test_early_stopping_callback_ends_a_trial_as_completed(ray_cluster, tmp_path, cache_dir):
    overrides = [
        "debug=tiny",
        "callbacks=early_stopping",
        "callbacks.early_stopping.early_stopping_patience=1",
        "callbacks.early_stopping.early_stopping_threshold=0.5",
        "search_space.training.learning_rate.values=[1e-5]",
        "training.max_steps=60",
    ]
    results = run_sweep(overrides, tmp_path, cache_dir)[1]
    assert results.errors == []
    (result,) = results
    assert result.metrics["step"] < 60, "EarlyStoppingCallback did not stop the trial"
    (ended,) = pd.read_csv(tmp_path / "results.csv")["ended"]
    assert ended == "early-stopped", "the callback's stop must read as early-stopped, not as Tune's stop"


def test_under_max_steps_minus_one_each_trial_trains_its_epochs_at_its_batch_size(ray_cluster, tmp_path, cache_dir):
    """training.max_steps=-1: two batch sizes train the same epoch each, so the larger takes half
    the steps; every report carries the trial's epoch and max_steps, and ASHA counts epochs."""
    import math

    overrides = [
        "debug=tiny",
        "training.max_steps=-1",
        "training.num_train_epochs=1",
        "data.max_train_samples=48",
        "training.eval_steps=4",
        "training.save_steps=4",
        "scheduler=asha_epochs",
        "+search_space.training.per_device_train_batch_size={sampler:grid,values:[4,8]}",
    ]
    results = run_sweep(overrides, tmp_path, cache_dir)[1]
    assert results.errors == []
    table = pd.read_csv(tmp_path / "results.csv").sort_values("training.per_device_train_batch_size")
    assert set(table["ended"]) == {"completed"}
    histories = {r.config["training"]["per_device_train_batch_size"]: r.metrics_dataframe for r in results}
    small, large = histories[4], histories[8]
    assert (
        small["max_steps"].iloc[-1] == small["step"].iloc[-1] and large["max_steps"].iloc[-1] == large["step"].iloc[-1]
    )
    assert math.ceil(small["step"].iloc[-1] / 2) == large["step"].iloc[-1], "half the steps at twice the batch"
    assert small["epoch"].iloc[-1] == pytest.approx(1.0, abs=0.1) and large["epoch"].iloc[-1] == pytest.approx(
        1.0, abs=0.15
    )
    assert list(table["step"]) == [small["step"].iloc[-1], large["step"].iloc[-1]]
