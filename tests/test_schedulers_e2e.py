"""Trial-level early stopping on real sweeps (FIFO against ASHA is in test_sweep_e2e, beside the
ASHA sweep it compares with; Hydra multirun in test_glue_e2e, whose recipe is one)."""

from __future__ import annotations

import pandas as pd
import pytest

from hfsweep.driver import sweep
from hfsweep.driver.preflight import preflight
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
    results = sweep.run(preflight(resolved_config(overrides, tmp_path, cache_dir)))
    assert results.errors == []
    (result,) = results
    assert result.metrics["step"] < 60, "EarlyStoppingCallback did not stop the trial"
    (ended,) = pd.read_csv(tmp_path / "results.csv")["ended"]
    assert ended == "early-stopped", "the callback's stop must read as early-stopped, not as Tune's stop"
