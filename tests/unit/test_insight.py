"""Importance, the parallel-coordinates plot and the Optuna export (`hfsweep.driver.results.insight`): on
constructed trial tables. (On a real random-search sweep under ASHA, reloaded from the storage
`python -m hfsweep.report --optuna-storage` wrote, and served by optuna-dashboard:
tests/e2e/test_insight_e2e.py.)"""

from __future__ import annotations

import math
import random
import subprocess
import sys

import optuna
import pandas as pd
import pytest
import yaml
from PIL import Image

from hfsweep.cli.report import main as report_main
from hfsweep.config.schema import SweepConfig, plain, typed
from hfsweep.driver.results.insight import (
    _axis,
    export_study,
    importance_section,
    param_importances,
    plot_importance,
    plot_parallel,
    study_name,
    why_not,
)

SPACE = {
    "training": {
        "learning_rate": {"sampler": "loguniform", "low": 1e-5, "high": 1e-2},
        "weight_decay": {"sampler": "uniform", "low": 0.0, "high": 0.1},
        "warmup_steps": {"sampler": "choice", "values": [0, 10]},
    }
}
KEYS = ["training.learning_rate", "training.weight_decay", "training.warmup_steps"]


def config(**changes) -> SweepConfig:
    return typed(
        SweepConfig,
        {
            "name": "toy",
            "seed": 0,
            "metric": "eval_loss",
            "mode": "min",
            "search_space": SPACE,
            "scheduler": {"_target_": "ray.tune.schedulers.ASHAScheduler"},
            **changes,
        },
    )


def toy_table(n: int = 24, seed: int = 0) -> pd.DataFrame:
    """Trials whose eval_loss depends on the learning rate alone (weight decay and warm-up have no
    effect), and whose time_total_s depends on the weight decay alone."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        lr, wd, warmup = 10 ** rng.uniform(-5, -2), rng.uniform(0, 0.1), rng.choice([0, 10])
        loss = (math.log10(lr) + 3.5) ** 2 + 0.01 * rng.random()
        seconds = 100 * wd + 0.01 * rng.random()
        rows.append(
            {
                "trial_id": f"toy_{i:05d}",
                "training.learning_rate": lr,
                "training.weight_decay": wd,
                "training.warmup_steps": warmup,
                "status": "TERMINATED",
                "iterations": 2,
                "step": 20,
                "best_eval_loss": loss,
                "last_eval_loss": loss,
                "best_time_total_s": seconds,
                "last_time_total_s": seconds,
                "ended": "completed",
                "error": "",
            }
        )
    return pd.DataFrame(rows)


def reports(last: float) -> pd.DataFrame:
    """A trial's Tune history: eval_loss at steps 10 and 20."""
    return pd.DataFrame({"step": [10, 20], "eval_loss": [last + 1, last]})


def assert_png(path) -> None:
    with Image.open(path) as image:
        image.verify()
    with Image.open(path) as image:
        assert image.format == "PNG" and min(image.size) > 200


def test_importance_sums_to_one_and_the_key_without_effect_ranks_below():
    importances = param_importances(toy_table(), config())["eval_loss"]
    assert set(importances) == set(KEYS)
    assert sum(importances.values()) == pytest.approx(1.0)
    assert importances["training.learning_rate"] > 0.8
    assert importances["training.weight_decay"] < importances["training.learning_rate"]
    assert importances["training.warmup_steps"] < importances["training.learning_rate"]


def test_several_objectives_get_one_importance_each():
    cfg = config(metric=["eval_loss", "time_total_s"], mode=["min", "min"])
    importances = param_importances(toy_table(), cfg)
    assert list(importances) == ["eval_loss", "time_total_s"]
    for shares in importances.values():
        assert sum(shares.values()) == pytest.approx(1.0)
    assert max(importances["eval_loss"], key=importances["eval_loss"].get) == "training.learning_rate"
    assert max(importances["time_total_s"], key=importances["time_total_s"].get) == "training.weight_decay"
    text, _ = importance_section(toy_table(), cfg)
    header = next(line for line in text.splitlines() if line.startswith("| searched key"))
    assert "eval_loss" in header and "time_total_s" in header


def test_parallel_axes_place_categories_in_the_spaces_order_and_log_keys_on_a_log_scale():
    heights, ticks = _axis(pd.Series([10, 0, 10]), {"sampler": "grid", "values": [0, 10]})
    assert list(heights) == [1.0, 0.0, 1.0] and ticks == [(0.0, "0"), (1.0, "10")]
    heights, ticks = _axis(pd.Series([1e-5, 1e-3, 1e-1]), {"sampler": "loguniform", "low": 1e-6, "high": 1.0})
    assert list(heights) == pytest.approx([0.0, 0.5, 1.0])
    assert [label for _, label in ticks] == ["1e-05", "0.001", "0.1"]
    heights, _ = _axis(pd.Series([0.0, 0.01, 0.1]), {"sampler": "uniform", "low": 0.0, "high": 0.1})
    assert list(heights) == pytest.approx([0.0, 0.1, 1.0])


@pytest.mark.process
def test_importance_prints_nothing():
    """In a fresh process: Optuna's log handler holds the stderr of the moment it was imported, which
    pytest's capture fixtures may not be."""
    code = "from tests.unit.test_insight import *; importance_section(toy_table(), config())"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


def test_plots_are_valid_images(tmp_path):
    table, cfg = toy_table(), config(metric=["eval_loss", "time_total_s"], mode=["min", "max"])
    plot_importance(param_importances(table, cfg), str(tmp_path / "importance.png"))
    plot_parallel(table, cfg, str(tmp_path / "parallel.png"))
    assert_png(tmp_path / "importance.png")
    assert_png(tmp_path / "parallel.png")


@pytest.mark.parametrize(
    "rows, says",
    [
        (1, "1 trial(s) reported eval_loss: importance and the parallel plot need 2."),
        (0, "0 trial(s) reported eval_loss"),
    ],
)
def test_too_few_trials_is_one_line_instead_of_a_plot(rows, says):
    text, importances = importance_section(toy_table().head(rows), config())
    assert importances is None and says in text
    assert len([line for line in text.splitlines() if line.strip()]) == 2  # the heading and the line


def test_under_pbt_importance_is_one_line_not_a_ranking_of_each_trials_last_values():
    """PBT's exploits change a trial's values mid-run: its row holds the last ones, not those that
    reached its best value."""
    pbt = config(scheduler={"_target_": "ray.tune.schedulers.PopulationBasedTraining"})
    text, importances = importance_section(toy_table(), pbt)
    assert importances is None and "PBT changes a trial's searched values as it trains" in text
    assert why_not(toy_table(), config()) is None  # the same trials under ASHA are ranked


def test_one_searched_key_with_one_value_is_one_line_instead_of_a_plot():
    space = {"training": {"learning_rate": {"sampler": "grid", "values": [1e-3]}}}
    table = toy_table(3)[["trial_id", "best_eval_loss", "last_eval_loss", "ended", "error", "step"]]
    table["training.learning_rate"] = 1e-3
    text, importances = importance_section(table, config(search_space=space))
    assert importances is None and "every trial ran the same searched values" in text


def test_trials_that_all_reached_the_same_value_are_one_line_instead_of_a_plot():
    table = toy_table(6)
    table["best_eval_loss"] = 1.0  # say, a classifier's accuracy, tied: fANOVA refuses zero variance
    text, importances = importance_section(table, config())
    assert importances is None
    assert "every trial reached the same best eval_loss: no importance or parallel plot." in text


def test_without_optuna_importance_says_so_and_the_storage_flag_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "optuna", None)
    text, importances = importance_section(toy_table(), config())
    assert importances is None and "importance needs Optuna: pip install 'hfsweep[search]'." in text
    (tmp_path / "resolved_config.yaml").write_text(yaml.safe_dump(plain(config())))
    assert report_main([str(tmp_path), "--optuna-storage", f"sqlite:///{tmp_path}/s.db"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "hfsweep.report: error: --optuna-storage needs Optuna: pip install 'hfsweep[dashboard]'.\n"


def test_a_storage_url_optuna_cannot_open_is_refused_in_one_line(tmp_path, capsys):
    (tmp_path / "resolved_config.yaml").write_text(yaml.safe_dump(plain(config())))
    assert report_main([str(tmp_path), "--optuna-storage", "sweep.db"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith("hfsweep.report: error: --optuna-storage sweep.db: Could not parse SQLAlchemy URL")
    assert not (tmp_path / "results.csv").exists()


def test_export_maps_each_ending_to_a_state_and_replaces_its_own_study_only(tmp_path):
    space = {**SPACE, "peft": {"target_modules": {"sampler": "grid", "values": [["q", "v"], ["q", "k", "v"]]}}}
    cfg = config(search_space=space)
    table = toy_table(6)
    table["best_eval_loss"] = table["last_eval_loss"] - 0.5  # the study holds the last values, as Optuna's trials end
    table["peft.target_modules"] = [["q", "v"], ["q", "k", "v"]] * 3
    table["ended"] = ["completed", "early-stopped", "stopped by scheduler/stopper", "errored", "running", "paused"]
    table.loc[3, "error"] = "FloatingPointError: training diverged: loss is nan at step 10"
    histories = {row["trial_id"]: reports(row["last_eval_loss"]) for row in table.to_dict("records")}
    storage = f"sqlite:///{tmp_path}/sweep.db"
    optuna.create_study(storage=storage, study_name="someone else's")
    for _ in range(2):  # the second write replaces the first
        assert export_study(table, histories, cfg, str(tmp_path), storage) == 6
    assert sorted(optuna.get_all_study_names(storage)) == sorted(["someone else's", study_name(cfg, str(tmp_path))])
    study = optuna.load_study(study_name=study_name(cfg, str(tmp_path)), storage=storage)
    trials = study.trials
    assert [t.state.name for t in trials] == ["COMPLETE", "COMPLETE", "PRUNED", "FAIL", "RUNNING", "PRUNED"]
    assert [t.values for t in trials[3:5]] == [None, None]
    assert trials[5].values == [table.loc[5, "last_eval_loss"]]  # paused at a rung the sweep never resumed
    assert trials[3].user_attrs["error"].startswith("FloatingPointError")
    for trial, row in zip(trials, table.to_dict("records")):
        assert trial.user_attrs["tune_trial_id"] == row["trial_id"]
        assert trial.params["training.learning_rate"] == row["training.learning_rate"]
        assert trial.params["peft.target_modules"] == str(row["peft.target_modules"])
        assert trial.intermediate_values == {10: row["last_eval_loss"] + 1, 20: row["last_eval_loss"]}
    assert trials[2].values == [table.loc[2, "last_eval_loss"]]
    assert trials[0].distributions["training.learning_rate"].log
    assert not trials[0].distributions["training.weight_decay"].log
    assert trials[0].distributions["training.warmup_steps"].choices == (0, 10)
    assert study.directions == [optuna.study.StudyDirection.MINIMIZE] and study.metric_names == ["eval_loss"]
