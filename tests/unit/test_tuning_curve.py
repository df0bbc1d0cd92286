"""Tuning curves with confidence bands (`hfsweep.driver.results.tuning_curve`): on constructed trial
tables, checked against opda's own functions called here."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf
from opda.nonparametric import EmpiricalDistribution

from hfsweep import run_dir as run_files
from hfsweep.config.schema import SweepConfig, typed
from hfsweep.driver.results.tuning_curve import tuning_curve_section
from tests.conftest import compose_config

RANDOM_FIFO = ["search_alg=random", "scheduler=fifo", "search_space=learning_rate_loguniform"]


def config(*overrides: str) -> SweepConfig:
    return typed(SweepConfig, OmegaConf.to_container(compose_config([*RANDOM_FIFO, *overrides]), resolve=True))


def trials(metric: str, n: int = 8, seed: int = 0) -> pd.DataFrame:
    """n random trials that ran to the end, then the defaults trial, better than any of them (it must
    not count: it is no draw)."""
    rng = random.Random(seed)
    scores = [rng.uniform(0.5, 0.9) for _ in range(n)]
    rows = [
        {"trial_id": f"t_{i:05d}", f"best_{metric}": s, "ended": "completed", "defaults": False}
        for i, s in enumerate(scores)
    ]
    defaults = {
        "trial_id": f"t_{n:05d}",
        f"best_{metric}": -1.0 if metric == "eval_loss" else 2.0,
        "ended": "completed",
    }
    return pd.DataFrame([*rows, {**defaults, "defaults": True}])


@pytest.mark.parametrize("metric, mode", [("eval_loss", "min"), ("eval_accuracy", "max")])
def test_the_curve_is_opdas_median_and_simultaneous_95_bands_over_the_random_trials(tmp_path, metric, mode):
    cfg = config(f"metric={metric}", f"mode={mode}")
    table = trials(metric)
    text = tuning_curve_section(table, cfg, str(tmp_path))

    curve = pd.read_csv(tmp_path / run_files.TUNING_CURVE)
    scores = table.loc[~table["defaults"], f"best_{metric}"].to_numpy()
    cdf_low, cdf, cdf_high = EmpiricalDistribution.confidence_bands(
        scores, 0.95, generator=np.random.default_rng(cfg.seed), method="ld_equal_tailed", n_jobs=1
    )
    ks, minimize = np.arange(1, 9), mode == "min"
    assert curve["trials"].tolist() == ks.tolist()
    assert curve["median"].to_numpy() == pytest.approx(cdf.quantile_tuning_curve(ks, minimize=minimize))
    # the upper CDF band puts more mass on low scores: the lower band of the curve, in either mode
    assert curve["lower"].to_numpy() == pytest.approx(cdf_high.quantile_tuning_curve(ks, minimize=minimize))
    assert curve["upper"].to_numpy() == pytest.approx(cdf_low.quantile_tuning_curve(ks, minimize=minimize))
    steps = np.diff(curve["median"]) * (-1 if minimize else 1)
    assert (steps >= 0).all() and (steps > 0).any()  # more trials, a better median
    assert (curve["lower"] <= curve["median"]).all() and (curve["median"] <= curve["upper"]).all()
    assert (tmp_path / run_files.TUNING_CURVE_PLOT).stat().st_size > 0
    assert "8 random trials (the defaults trial left out" in text and "95% confidence bands" in text


@pytest.mark.parametrize(
    "overrides, why",
    [
        (["search_alg=optuna"], "OptunaSearch chooses each trial from the earlier ones' scores"),
        (["scheduler=asha"], "ASHAScheduler stops or perturbs trials by comparing them"),
        (["scheduler=pbt"], "PopulationBasedTraining stops or perturbs trials"),
        (["search_space=learning_rate"], "search_space.training.learning_rate is a grid"),
    ],
)
def test_a_search_whose_trials_are_not_draws_gets_one_line_instead_of_a_curve(tmp_path, overrides, why):
    (tmp_path / run_files.TUNING_CURVE).write_text("an earlier report's")
    text = tuning_curve_section(trials("eval_loss"), config(*overrides), str(tmp_path))
    assert text.strip().splitlines()[-1].startswith(f"No tuning curve: {why}")
    assert len(text.strip().splitlines()) == 3  # the heading, a blank line, the reason
    assert not (tmp_path / run_files.TUNING_CURVE).exists() and not (tmp_path / run_files.TUNING_CURVE_PLOT).exists()


def test_a_random_trial_cut_short_leaves_no_curve_and_one_never_started_is_not_a_draw(tmp_path):
    table = trials("eval_loss")
    table.loc[0, "ended"] = "never started"
    assert "7 random trials" in tuning_curve_section(table, config(), str(tmp_path))
    table.loc[1, "ended"] = "stopped by scheduler/stopper"
    text = tuning_curve_section(table, config(), str(tmp_path))
    assert "No tuning curve: 1 of the 7 random trials did not run to the end (1 stopped by scheduler/stopper)" in text
    assert not (tmp_path / run_files.TUNING_CURVE).exists()
