"""PBT over real trials: an exploited trial continues from the donor's checkpoint, with the
donor's weights and its own perturbed learning rate and weight decay in effect, in both training
loops; results.csv scores the defaults trial by its own values, before PBT exploited it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pytest
from transformers import AutoModelForCausalLM

from hfsweep.models import weights_digest
from tests.conftest import run_sweep

EVAL_STEPS = 10
BOUNDS = {"learning_rate": (1e-5, 1e-2), "weight_decay": (0.001, 0.1)}  # the ranges pbt_sweep searches
DEFAULTS_LR = 1e-5  # the defaults trial's, at the range's low end: the worst trial, which PBT exploits


@pytest.fixture(scope="module", params=["hf_trainer", "accelerate"])
def pbt_sweep(request, ray_cluster, tmp_path_factory, cache_dir):
    overrides = [
        f"loop={request.param}",
        "scheduler=pbt",
        "scheduler.quantile_fraction=0.5",
        "scheduler.resample_probability=0.0",  # always perturb: x0.8 or x1.2 of the donor's value
        # every trial reaches each perturbation point before PBT ranks them: the worse one is always exploited
        "+scheduler.synch=true",
        "search_space=learning_rate_loguniform",
        "search_space.training.learning_rate.low=1e-5",
        "+search_space.training.weight_decay={sampler:loguniform,low:0.001,high:0.1}",
        "num_samples=2",  # and the defaults trial: a population of 3, the worst exploited at each point
        "search_alg.defaults_trial=true",
        f"training.learning_rate={DEFAULTS_LR}",
        "training.max_steps=30",
        "training.lr_scheduler_type=constant",
        "cluster.num_workers=1",
        # off: the donors' checkpoints are read after the sweep, and the default budget frees them at its
        # end (PBT under the default budget: tests/e2e/test_restore_e2e.py)
        "checkpoints.keep_per_trial=null",
    ]
    cfg, results = run_sweep(overrides, tmp_path_factory.mktemp("pbt"), cache_dir)
    rows = [row for result in results for _, row in result.metrics_dataframe.iterrows()]
    return results, rows, Path(cfg["cluster"]["storage_path"])


def checkpoint_row(rows, path):
    (row,) = [r for r in rows if r["checkpoint_path"] == path]
    return row


def resumed_rows(rows, exploited: bool):
    """First reports after a restore: from another trial's checkpoint (a PBT exploit), or from the
    trial's own (PBT pauses the top trial while the exploited one restarts)."""
    resumed = [row for row in rows if isinstance(row.get("resumed_from"), str)]
    return [r for r in resumed if (checkpoint_row(rows, r["resumed_from"])["trial_id"] != r["trial_id"]) == exploited]


def exploited_rows(rows):
    return resumed_rows(rows, exploited=True)


def test_pbt_sweep_finishes_with_at_least_one_exploit(pbt_sweep):
    results, rows, _ = pbt_sweep
    assert results.errors == []
    assert exploited_rows(rows), "PBT never exploited: no report came from a restored trial"


def test_restored_trials_continue_from_the_checkpoint_step(pbt_sweep):
    _, rows, _ = pbt_sweep
    restored = resumed_rows(rows, exploited=True) + resumed_rows(rows, exploited=False)
    assert restored
    for row in restored:
        donor_step = int(row["resumed_from"].rsplit("checkpoint-", 1)[1])
        assert donor_step > 0
        assert row["step"] == donor_step + EVAL_STEPS


def test_restored_weights_equal_the_donor_checkpoint(pbt_sweep):
    _, rows, _ = pbt_sweep
    assert exploited_rows(rows)
    for row in exploited_rows(rows):
        donor = AutoModelForCausalLM.from_pretrained(row["resumed_from"])
        assert row["resumed_weights_digest"] == weights_digest(donor)


@pytest.mark.parametrize(
    "key, in_effect", [("learning_rate", "lr_in_effect"), ("weight_decay", "weight_decay_in_effect")]
)
def test_the_perturbed_hyperparameters_are_the_ones_the_optimizer_steps_with(pbt_sweep, key, in_effect):
    """Read from the optimizer's param groups at the first optimizer step after the exploit: the
    restored optimizer state holds the donor's values, which must not be the ones in effect."""
    _, rows, _ = pbt_sweep
    assert exploited_rows(rows)
    for row in exploited_rows(rows):
        donor_row = checkpoint_row(rows, row["resumed_from"])
        donor_value, perturbed = donor_row[f"config/training/{key}"], row[f"config/training/{key}"]
        low, high = BOUNDS[key]  # a perturbation past a bound is put back at it
        expected = [pytest.approx(min(max(donor_value * factor, low), high)) for factor in (0.8, 1.2)]
        assert perturbed in expected
        assert row[in_effect] == pytest.approx(perturbed), f"the restored optimizer's {key} is still in effect"


def test_a_trial_restored_from_its_own_checkpoint_keeps_its_hyperparameters(pbt_sweep):
    _, rows, _ = pbt_sweep
    own_restores = resumed_rows(rows, exploited=False)
    if not own_restores:
        pytest.skip("PBT restored no trial from its own checkpoint in this sweep")
    for row in own_restores:
        own = checkpoint_row(rows, row["resumed_from"])
        assert row["config/training/learning_rate"] == own["config/training/learning_rate"]
        assert row["lr_in_effect"] == pytest.approx(own["config/training/learning_rate"])


def test_results_csv_scores_the_defaults_trial_by_its_own_values_before_pbt_exploited_it(pbt_sweep):
    """PBT changes an exploited trial's values and weights: `defaults` marks the trial whose first
    report ran the config's own values, and each trial's `best_eval_loss_before_exploit` is its
    best over the reports before its values first changed (the defaults trial's is the score the
    summary and the anytime curve compare the search with)."""
    _, rows, storage = pbt_sweep
    table = pd.read_csv(storage / "results.csv").set_index("trial_id")
    reports = defaultdict(list)
    for row in rows:
        reports[row["trial_id"]].append(row)
    (defaults,) = table.index[table["defaults"]]
    assert reports[defaults][0]["config/training/learning_rate"] == DEFAULTS_LR
    assert reports[defaults][-1]["config/training/learning_rate"] != DEFAULTS_LR, "PBT never exploited it"
    for trial_id, trial_reports in reports.items():
        values = [r["config/training/learning_rate"] for r in trial_reports]
        own = next((i for i, v in enumerate(values) if v != values[0]), len(values))
        best_own = min(r["eval_loss"] for r in trial_reports[:own] if pd.notna(r["eval_loss"]))
        assert table.loc[trial_id, "best_eval_loss_before_exploit"] == pytest.approx(best_own)


def test_a_population_larger_than_the_cores_is_alive_at_once_and_runs_one_trial_per_core(tmp_path, cache_dir):
    """`python -m hfsweep` pinned to (at most) 2 cores, a population of twice that: every trial
    trains its first step before any trial trains its last (all alive at once, the others paused),
    and no more trials than cores train at any moment (each step's interval, `RecordSteps`)."""
    cores = sorted(os.sched_getaffinity(0))[:2]
    population = 2 * len(cores)
    run_dir = tmp_path / "run"
    command = [
        sys.executable,
        "-m",
        "hfsweep",
        "debug=tiny",
        "scheduler=pbt",
        "search_space=learning_rate_loguniform",
        f"num_samples={population}",
        "training.max_steps=30",
        "+callbacks.steps._target_=tests.faults.RecordSteps",
        f"cache_dir={cache_dir}",
        f"hydra.run.dir={run_dir}",
    ]
    proc = subprocess.run(
        command, capture_output=True, text=True, timeout=900, preexec_fn=lambda: os.sched_setaffinity(0, cores)
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert set(pd.read_csv(run_dir / "results.csv")["ended"]) == {"completed"}
    steps = defaultdict(list)
    for line in open(run_dir / "sweep" / "train_runs" / "steps.log"):
        trial, began, ended = line.split()
        steps[trial].append((float(began), float(ended)))
    assert len(steps) == population
    first_begins = [min(b for b, _ in intervals) for intervals in steps.values()]
    last_ends = [max(e for _, e in intervals) for intervals in steps.values()]
    assert max(first_begins) < min(last_ends), "a trial of the population started only after another had ended"
    training_at = [
        sum(any(b <= moment <= e for b, e in intervals) for intervals in steps.values())
        for moment in sorted(b for intervals in steps.values() for b, _ in intervals)
    ]
    assert max(training_at) <= len(cores), f"{max(training_at)} trials trained at once on {len(cores)} cores"
