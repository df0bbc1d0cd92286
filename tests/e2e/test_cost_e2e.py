"""Cost in real sweeps: throughput, peak memory, USD and `budget.usd`, TensorBoard HParams, end to end."""

from __future__ import annotations

import contextlib
import glob
import io
import json
import math
import os
import time

import pandas as pd
import pytest

from tests.conftest import run_sweep
from tests.unit.test_cost import COST_OBJECTIVES, hparams_session

# 40 steps, a report every 20: seconds of training per report, so that Tune's lag in taking a report
# on a loaded machine (in its time_total_s, not in the loop's clock) stays well inside 10%
LONGER = ["training.max_steps=40", "training.eval_steps=20", "training.save_steps=20", "training.logging_steps=20"]
# Two workers' start-ups end seconds apart on a loaded machine, and each clock starts at its own: a
# longer run keeps that skew a small share of the training time the throughput is checked over.
TWO_WORKERS_LONGER = [
    "training.max_steps=80",
    "training.eval_steps=40",
    "training.save_steps=40",
    "training.logging_steps=40",
]
BATCH, BLOCK = 8, 128  # conf/training/default.yaml's per_device_train_batch_size, conf/data's block_size


def reports(storage) -> dict:
    """Every trial's reports, by trial id, from Tune's result.json files."""
    found = {}
    for path in glob.glob(os.path.join(storage, "sweep", "run_trial_*", "result.json")):
        rows = [json.loads(line) for line in open(path)]
        found[rows[0]["trial_id"]] = rows
    return found


def assert_throughput_matches_tokens_over_time(rows: list[dict], workers: int = 1) -> None:
    """The trial's final throughput (results.csv's) against the tokens it trained, counted
    independently (steps x batch x block x workers: causal LM's blocks are all real tokens), over
    its training time (Tune's `time_total_s` less the start-up the loop reported), within 10%.
    Only the last report: each worker's clock starts where its own start-up ends, and on a loaded
    machine rank 0's reported start-up differs from the other's by seconds, which the first
    report's short window cannot absorb (18% off once, at step 20 of 40, on two workers)."""
    last = rows[-1]
    counted = last["step"] * BATCH * BLOCK * workers / (last["time_total_s"] - rows[0]["startup_s"])
    assert last["train_tokens_per_second"] == pytest.approx(counted, rel=0.1), last
    for row in rows:
        assert row["train_tokens_per_second"] == pytest.approx(BLOCK * row["train_samples_per_second"])


@pytest.fixture(scope="module")
def cost_sweep(ray_cluster, tmp_path_factory, cache_dir):
    """Two trials on two objectives, the loss and the throughput, with a price per CPU-hour and
    TensorBoard; and what the sweep printed."""

    storage = tmp_path_factory.mktemp("cost")
    overrides = [
        "debug=tiny",
        *LONGER,
        *COST_OBJECTIVES,
        "search_space.training.learning_rate.values=[3e-3,1e-3]",
        "cluster.max_concurrent_trials=1",
        "cluster.price_per_cpu_hour=0.5",
        "logger=tensorboard",
    ]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        run_sweep(overrides, storage, cache_dir)
    return storage, printed.getvalue()


def test_sweep_on_a_cost_objective_reports_cost_in_results_and_summary(cost_sweep):
    storage, out = cost_sweep
    table = pd.read_csv(storage / "results.csv")
    assert len(table) == 2 and (table["status"] == "TERMINATED").all()
    assert "mfu" not in table, "no MFU on a CPU"
    by_trial = reports(storage)
    from transformers import AutoModelForCausalLM

    parameters = AutoModelForCausalLM.from_pretrained(storage / "best").num_parameters()
    for row in table.to_dict("records"):
        rows = by_trial[row["trial_id"]]
        assert (
            row["train_tokens_per_second"] == rows[-1]["train_tokens_per_second"] == row["last_train_tokens_per_second"]
        )
        assert row["trainable_params"] == parameters
        assert rows[-1]["eval_perplexity"] == pytest.approx(math.exp(rows[-1]["eval_loss"])), (
            "a language model's perplexity"
        )
        assert 100 < row["peak_memory_mb"] < 20_000
        assert row["cost_usd"] == pytest.approx(rows[-1]["time_total_s"] / 3600 * 1 * 0.5)  # 1 CPU a trial
        assert_throughput_matches_tokens_over_time(rows)
    total = table["cost_usd"].sum()
    assert f"Total cost: ${total:.4g} over 2 trials" in (storage / "results.md").read_text()
    assert f"  cost:            ${total:.4g} for 2 trials (cost_usd in results.csv)" in out
    assert "checkpoint_dir_name" not in out and "trainable_params" not in out, "left out of Tune's trial tables"


def test_tensorboard_hparams_hold_each_trials_searched_values_and_final_metrics(cost_sweep):
    storage, _ = cost_sweep
    table = pd.read_csv(storage / "results.csv").set_index("trial_id")
    by_trial = reports(storage)
    trial_dirs = glob.glob(os.path.join(storage, "sweep", "run_trial_*"))
    assert sorted(os.path.basename(d) for d in trial_dirs) == sorted(f"run_trial_{t}" for t in table.index), (
        "named by id, not rounded values"
    )
    for trial_dir in trial_dirs:
        trial_id = next(t for t in by_trial if t in trial_dir)
        hparams, metrics = hparams_session(trial_dir)
        assert hparams == {"training.learning_rate": pytest.approx(table.loc[trial_id, "training.learning_rate"])}
        final = by_trial[trial_id][-1]
        assert list(metrics)[:2] == ["final/eval_loss", "final/train_tokens_per_second"], "the objectives first"
        for name in ("eval_loss", "train_tokens_per_second", "peak_memory_mb", "loss"):
            assert metrics[f"final/{name}"] == pytest.approx(final[name], rel=1e-6)
        assert not {"final/done", "final/should_checkpoint", "final/eval_runtime"} & set(metrics)


def test_accelerate_loop_on_two_workers_reports_their_summed_throughput(ray_cluster, tmp_path, cache_dir):
    overrides = ["debug=tiny", *TWO_WORKERS_LONGER, "loop=accelerate", "cluster.num_workers=2"]
    run_sweep(overrides, tmp_path, cache_dir)
    (rows,) = reports(tmp_path).values()
    assert rows[-1]["distributed"] == "MULTI_CPU"
    assert_throughput_matches_tokens_over_time(rows, workers=2)
    table = pd.read_csv(tmp_path / "results.csv")
    assert {"train_tokens_per_second", "train_samples_per_second", "peak_memory_mb", "trainable_params"} <= set(table)
    assert "cost_usd" not in table, "no price, no cost"


def test_usd_budget_stops_the_sweep(ray_cluster, tmp_path, cache_dir, capfd):
    # 3 trials of 40 steps one at a time at $1 per CPU-hour: the first report (several seconds in) spends $0.0003
    overrides = [
        "debug=tiny",
        "training.max_steps=40",
        "cluster.max_concurrent_trials=1",
        "cluster.price_per_cpu_hour=1",
        "budget.usd=0.0003",
        "search_space.training.learning_rate.values=[3e-3,1e-3,1e-4]",
    ]
    results = run_sweep(overrides, tmp_path, cache_dir)[1]
    assert results.errors == []
    table = pd.read_csv(tmp_path / "results.csv")
    assert (table["step"] < 40).all(), "the budget stops the running trial before its end"
    assert len(table) < 3 or (table["ended"] == "never started").any(), "no trial starts after the budget is spent"
    out = capfd.readouterr().out
    assert "  budget:          the sweep ended on its USD budget (budget.usd=0.0003: $" in out
    assert table["cost_usd"].sum() >= 0.0003


def test_in_process_trials_on_a_reused_actor_each_report_their_own_peak_memory(ray_cluster, tmp_path, cache_dir):
    """Tune reuses an in-process trial's actor: a trial of small batches after one of large batches
    reports its own peak resident set, not the process's lifetime peak."""

    overrides = [
        "debug=tiny",
        "cluster.max_concurrent_trials=1",
        "scheduler=fifo",  # a step is a different amount of data at each batch size
        "search_space.training.learning_rate.values=[1e-3]",
        "+search_space.training.per_device_train_batch_size={sampler:grid,values:[256,2]}",
    ]
    results = run_sweep(overrides, tmp_path, cache_dir)[1]
    assert results.errors == []
    assert len({result.metrics["pid"] for result in results}) == 1, "both trials ran in one reused actor"
    table = pd.read_csv(tmp_path / "results.csv").set_index("training.per_device_train_batch_size")
    large, small = table.loc[256, "peak_memory_mb"], table.loc[2, "peak_memory_mb"]
    assert small < large - 100, (
        f"the second trial (batch 2) reported {small:.0f} MB, the first (batch 256) {large:.0f} MB"
    )


def two_reports(config):
    from ray import tune

    for step in (1, 2):
        time.sleep(0.05)
        tune.report({"step": step})


def test_an_extension_counts_what_the_sweeps_earlier_experiments_spent(ray_cluster, tmp_path):
    """`resume --extend` seeds its budget with the earlier experiments' spend, read from Tune's
    records: a trial-hours budget those trials spent stops the extension before it starts."""
    from ray import tune

    from hfsweep.driver.search.budget import SweepBudget, spent_before

    tune.Tuner(
        two_reports,
        param_space={"x": tune.grid_search([0, 1])},
        run_config=tune.RunConfig(name="sweep", storage_path=str(tmp_path), verbose=0),
    ).fit()
    analysis = tune.ExperimentAnalysis(str(tmp_path / "sweep"))
    state = spent_before([analysis])
    assert state["trial_s"] == {t.trial_id: t.last_result["time_total_s"] for t in analysis.trials}
    assert all(seconds >= 0.1 for seconds in state["trial_s"].values()) and 0.1 <= state["spent_s"] < 120
    hours = sum(state["trial_s"].values()) / 3600
    budget = SweepBudget(None, 0.9 * hours, resources_per_trial=1)
    assert not budget.stop_all(), "a fresh budget has spent nothing"
    budget.set_state(state)
    assert budget.stop_all() and budget.reason.startswith("its trial-hours budget")
    roomy = SweepBudget(None, 2 * hours, resources_per_trial=1)
    roomy.set_state(state)
    assert not roomy.stop_all() and roomy.trial_hours_used() == pytest.approx(hours)


@pytest.mark.parametrize("within_budget", [True, False])
def test_an_extension_counts_what_a_selection_drew_from_the_budget(ray_cluster, tmp_path, within_budget):
    """A selection over seeds that drew on the sweep's budget (`select.within_budget`, the default)
    spent part of it: `resume --extend` counts its runs beside the search's; with
    `select.within_budget=false` the budget priced the search alone."""
    from ray import tune

    from hfsweep.driver.resume import selection_spend
    from hfsweep.driver.search.budget import spent_before
    from tests.conftest import sweep_config

    sweep = sweep_config(["select.top_k=1", f"select.within_budget={within_budget}"], tmp_path, tmp_path)
    for folder in (tmp_path, tmp_path / "select"):
        tune.Tuner(
            two_reports,
            param_space={"x": tune.grid_search([0, 1])},
            run_config=tune.RunConfig(name=sweep.name, storage_path=str(folder), verbose=0),
        ).fit()
    search = tune.ExperimentAnalysis(str(tmp_path / sweep.name))
    selection = tune.ExperimentAnalysis(str(tmp_path / "select" / sweep.name))
    counted = spent_before([search, *selection_spend(sweep, str(tmp_path))])["trial_s"]
    expected = [*search.trials, *(selection.trials if within_budget else [])]
    assert sorted(counted) == sorted(trial.trial_id for trial in expected)
