"""End to end, one small sweep per feature: two objectives and their Pareto front, a grid sweep
warm-started from it, and a sweep that ends on its budget. (`-k pareto`, `-k warm_start`, `-k budget`.)"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from hfsweep.driver import sweep
from hfsweep.driver.preflight import preflight
from tests.conftest import resolved_config, run_sweep
from tests.unit.test_search_objectives import brute_force_front

OBJECTIVES = [("eval_loss", "min"), ("time_total_s", "min")]
TWO = [
    "debug=tiny",
    "metric=[eval_loss,time_total_s]",
    "mode=[min,min]",
    "training.max_steps=10",
    "cluster.max_concurrent_trials=1",
    "search_alg.defaults_trial=false",  # the grid's two points alone
]


@pytest.fixture(scope="module")
def pareto_sweep(ray_cluster, tmp_path_factory, cache_dir):
    storage = tmp_path_factory.mktemp("pareto")
    sweep.run(
        preflight(resolved_config([*TWO, "search_space.training.learning_rate.values=[3e-3,1e-5]"], storage, cache_dir))
    )
    return storage


def test_pareto_front_is_marked_plotted_and_best_is_on_it(pareto_sweep):
    table = pd.read_csv(pareto_sweep / "results.csv")
    assert len(table) == 2 and (table["status"] == "TERMINATED").all()
    assert list(table["pareto"]) == brute_force_front(table.to_dict("records"), OBJECTIVES)
    assert "| pareto |" in (pareto_sweep / "results.md").read_text().replace("  ", " ").replace("  ", " ")
    assert (pareto_sweep / "pareto.png").stat().st_size > 10_000
    best = json.loads((pareto_sweep / "best.json").read_text())
    row = table.set_index("trial_id").loc[best["trial_id"]]
    assert row["pareto"] and best["metric"] == "eval_loss"
    assert best["objectives"] == pytest.approx(
        {"eval_loss": row["last_eval_loss"], "time_total_s": row["last_time_total_s"]}
    )
    assert best["value"] == table.loc[table["pareto"], "last_eval_loss"].min()
    assert (pareto_sweep / "best" / "config.json").is_file()


def test_warm_start_grid_sweep_runs_none_of_the_earlier_configurations(pareto_sweep, tmp_path, cache_dir, capsys):
    rates = [3e-3, 1e-3, 1e-5]
    overrides = [
        *TWO,
        f"search_space.training.learning_rate.values=[{','.join(map(str, rates))}]",
        f"search_alg.warm_start={pareto_sweep}",
    ]
    run_sweep(overrides, tmp_path, cache_dir)
    table = pd.read_csv(tmp_path / "results.csv")
    assert list(table["training.learning_rate"]) == [1e-3], "only the grid point the first sweep did not run"
    assert (table["status"] == "TERMINATED").all()
    out = capsys.readouterr().out
    assert f"hfsweep: warm start: {pareto_sweep}: 2 earlier trials used" in out
    assert "hfsweep: warm start: 1 grid points left to run" in out


def test_budget_ends_the_sweep_and_every_trial_has_a_final_state(ray_cluster, tmp_path, cache_dir, capsys):
    # 3 trials of 40 steps one at a time; the first report (step 10, several seconds in) spends the budget
    overrides = [
        "debug=tiny",
        "training.max_steps=40",
        "cluster.max_concurrent_trials=1",
        "budget.trial_hours=0.0003",
        "search_space.training.learning_rate.values=[3e-3,1e-3,1e-4]",
    ]
    results = run_sweep(overrides, tmp_path, cache_dir)[1]
    assert results.errors == []
    table = pd.read_csv(tmp_path / "results.csv")
    assert len(table) >= 1 and set(table["status"]) == {"TERMINATED"}, table
    assert (table["step"] < 40).all(), "the budget stops the running trial before its end"
    assert len(table) < 3 or (table["ended"] == "never started").any(), "no trial starts after the budget is spent"
    out = capsys.readouterr().out
    assert "  budget:          the sweep ended on its trial-hours budget (budget.trial_hours=0.0003: " in out
    # the moment the budget was spent: the first report after which the trials' time, times the
    # CPUs each holds, reaches it; no trial may start after that moment
    resources = float(out.split("trial-seconds x ")[1].split(")")[0])
    reports = sorted(
        (row["timestamp"], row["trial_id"], row["time_total_s"])
        for result in results
        for _, row in result.metrics_dataframe.iterrows()
    )
    latest, spent_at = {}, None
    for timestamp, trial_id, seconds in reports:
        latest[trial_id] = seconds
        if spent_at is None and sum(latest.values()) * resources / 3600 >= 0.0003:
            spent_at = timestamp
    assert spent_at is not None, "the reports never spent the budget"
    starts = {
        result.metrics["trial_id"]: result.metrics_dataframe["timestamp"].iloc[0]
        - result.metrics_dataframe["time_total_s"].iloc[0]
        for result in results
        if result.metrics_dataframe is not None and len(result.metrics_dataframe)
    }
    assert starts and all(start < spent_at for start in starts.values()), (
        f"spent at {spent_at}, trials started at {starts}"
    )
