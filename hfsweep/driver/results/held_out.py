"""The held-out test split (`data.test_split`), scored once: select on one split, report on another.

No trial reads the test split: trials train on train, and the schedulers, searchers and checkpoint
choice see the validation split. Once the winner is known, the driver scores the final models (the
checkpoint each run saved at its last step) of the winner and of the defaults, each seed's when
selecting, on it, and nothing else. Scoring in the driver, after the fact, keeps the decision of
which runs are scored in this one place, and the trials' code free of a split they must not see.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from typing import Optional

import numpy as np

from hfsweep.config.objectives import first_objective
from hfsweep.config.schema import SweepConfig
from hfsweep.data.prepare import raw_splits
from hfsweep.driver.results.best import BestTrial, final_of_trial, lookup
from hfsweep.driver.results.evaluation import evaluate_checkpoint
from hfsweep.driver.search.defaults_trial import defaults_values, is_defaults, wanted
from hfsweep.tasks.data_hooks import quiet_progress

TEST_PREFIX = "test"  # the scores' prefix: test_accuracy, test_loss


def held_out_name(metric: str) -> str:
    """The test split's name of a validation metric: eval_accuracy -> test_accuracy."""
    return f"{TEST_PREFIX}_{metric.removeprefix('eval_')}"


def held_out_scorer(sweep: SweepConfig, task) -> Optional[Callable[[str], dict]]:
    """checkpoint path -> its test_* scores on `data.test_split` (read once); None without a test split."""
    if not sweep.data.test_split:
        return None
    data_cfg = sweep.data
    raw = raw_splits(data_cfg, os.path.expanduser(sweep.cache_dir), task)
    print(f"hfsweep: test split: scoring final models on data.test_split={data_cfg.test_split} ({len(raw['test'])})")

    def score(checkpoint: str) -> dict:
        with quiet_progress():  # the summary states the scores
            return evaluate_checkpoint(sweep, checkpoint, data_cfg, raw, split=TEST_PREFIX)

    return score


def scored(run: BestTrial, score: Callable[[str], dict]) -> dict:
    """One final model's test scores, with where they come from."""
    return {"trial_id": run.trial_id, "step": run.step, "checkpoint": run.checkpoint_path, **score(run.checkpoint_path)}


def held_out_record(split: str, winner: dict, defaults: Optional[dict]) -> dict:
    """best.json's `test`: the split, the model scored (final), and the winner's and the defaults'
    scores (`over_seeds`'s, when selecting)."""
    return {"split": split, "model": "final", "winner": winner, "defaults": defaults}


def over_seeds(runs: dict) -> dict:
    """Each seed's scored final model (seed -> `scored`), and the mean of each test score."""
    return {"seeds": sorted(runs), "runs": {str(s): runs[s] for s in sorted(runs)}, "mean": mean_scores(runs)}


def mean_scores(runs: dict) -> dict:
    """The mean over seeds of every test_* score of `runs` (seed -> scored)."""
    names = [k for k in next(iter(runs.values())) if k.startswith(f"{TEST_PREFIX}_")]
    return {name: float(np.mean([run[name] for run in runs.values()])) for name in names}


def search_test(results: list, best: BestTrial, sweep: SweepConfig, score: Callable[[str], dict]) -> dict:
    """Without a selection: the final models of the search's winning trial and of its defaults trial."""
    metric = first_objective(sweep)[0]
    sub = replace(sweep, metric=metric)
    finished = [r for r in results if r.checkpoint is not None]
    winner = scored(final_of_trial(next(r for r in finished if r.metrics["trial_id"] == best.trial_id), sub), score)
    values = defaults_values(sweep) if wanted(sweep) else {}
    ran = [r for r in finished if values and is_defaults({p: lookup(r.config, p) for p in values}, values)]
    defaults = None
    if ran:
        defaults = winner if ran[0].metrics["trial_id"] == best.trial_id else scored(final_of_trial(ran[0], sub), score)
    return held_out_record(sweep.data.test_split, winner, defaults)


def held_out_lines(test: dict, metric: str) -> list[str]:
    """The summary's and results.md's lines on the test split: which split, which model, whose."""
    if not test:
        return []
    name = held_out_name(metric)
    lines = [f"held-out test split '{test['split']}', scored once at the final models (no trial saw it):"]
    for who in ("winner", "defaults"):
        record = test.get(who)
        if not record:
            continue
        seeds = record.get("seeds")
        scores = record["mean"] if seeds else record
        others = ", ".join(f"{k} = {v:.4f}" for k, v in scores.items() if k.startswith(f"{TEST_PREFIX}_") and k != name)
        over = f"mean over seeds {', '.join(map(str, seeds))}" if seeds else f"trial {record['trial_id']}"
        lines.append(f"  {who}: {name} = {scores.get(name, float('nan')):.4f} ({over}; {others})")
    return lines
