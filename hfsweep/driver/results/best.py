"""Choosing the sweep's best trial and checkpoint (by its metric, or on the Pareto front of several
objectives, ranking equal scores as Tune does), and `best.json`."""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from typing import Optional

import pandas as pd
from omegaconf import OmegaConf
from ray import tune

from hfsweep import run_dir as run_files
from hfsweep.config.loading import iter_leaves
from hfsweep.config.objectives import is_multi_objective, objectives
from hfsweep.config.schema import SweepConfig
from hfsweep.contract.pointers import read_pointer
from hfsweep.driver.results.pareto import best_of_front, pareto_optimal
from hfsweep.run_dir import last_column


@dataclass
class BestTrial:
    trial_id: str
    hyperparameters: dict
    metric: str
    value: float
    step: int
    checkpoint_path: str
    objectives: dict = field(default_factory=dict)  # several objectives: each one's value at `step`
    checkpoint_bytes: int = 0  # the best checkpoint on disk (an adapter's: a small share of a whole model's)
    seed: Optional[int] = None  # with select.top_k: the winner's median seed, whose checkpoint this is
    selection: dict = field(default_factory=dict)  # with select.top_k: the winner's mean, interval and paired test
    # which model of its trial: the best checkpoint by the validation metric, or the final one (run_glue.py's)
    model: str = "best"
    test: dict = field(default_factory=dict)  # with data.test_split: the final models' scores on it (held_out)


def lookup(config: dict, path: str):
    return OmegaConf.select(OmegaConf.create(config), path)


def searched_paths(sweep: SweepConfig) -> list[str]:
    return [path for path, _ in iter_leaves(sweep.search_space)]


def best_trial(results: tune.ResultGrid, sweep: SweepConfig) -> BestTrial:
    """The trial with the best reported metric at any step, and its best checkpoint; with several
    objectives, the Pareto-optimal trial `hfsweep.driver.results.pareto` picks, at its last report."""
    if is_multi_objective(sweep):
        return best_of_pareto_front(results, sweep)
    return best_of_trial(results.get_best_result(metric=sweep.metric, mode=sweep.mode, scope="all"), sweep)


def score_key(value: float, mode: str) -> float:
    """A score as a key that sorts the best highest under `mode`. A NaN or infinite score (the
    Pearson of a model that predicts a constant) sorts below every real one, as Tune's choice of the
    best trial leaves them out; unkeyed, NaN compares false both ways and scrambles a sort."""
    if not math.isfinite(value):
        return -math.inf
    return value if mode == "max" else -value


def best_of_trial(result: tune.Result, sweep: SweepConfig) -> BestTrial:
    """One trial's best checkpoint by the sweep metric."""
    metric, mode = sweep.metric, sweep.mode
    # Of equal scores the later, as Tune ranks them (and keeps them, with num_to_keep): a classifier's
    # accuracy often repeats
    checkpoint, metrics = max(result.best_checkpoints, key=lambda cm: (score_key(cm[1][metric], mode), cm[1]["step"]))
    return BestTrial(
        trial_id=metrics["trial_id"],
        hyperparameters={p: lookup(metrics["config"], p) for p in searched_paths(sweep)},
        metric=metric,
        value=metrics[metric],
        step=metrics["step"],
        checkpoint_path=(path := read_pointer(checkpoint)),
        checkpoint_bytes=directory_bytes(path),
    )


def final_of_trial(result: tune.Result, sweep: SweepConfig) -> BestTrial:
    """One trial's final model: the checkpoint of its last report (the Trainer saves and evaluates
    at its last step), and that report's value of the sweep metric."""
    metrics = result.metrics
    return BestTrial(
        trial_id=metrics["trial_id"],
        hyperparameters={p: lookup(metrics["config"], p) for p in searched_paths(sweep)},
        metric=sweep.metric,
        value=metrics[sweep.metric],
        step=metrics["step"],
        checkpoint_path=(path := read_pointer(result.checkpoint)),
        checkpoint_bytes=directory_bytes(path),
        model="final",
    )


def best_of_pareto_front(results: tune.ResultGrid, sweep: SweepConfig) -> BestTrial:
    """Each trial's last report with every objective is its point; `best_of_front` picks one."""
    names = [metric for metric, _ in objectives(sweep)]
    last = {}
    for result in results:
        history = result.metrics_dataframe
        if history is not None and set(names) <= set(history.columns):
            reports = history.dropna(subset=names)
            if len(reports):
                last[reports["trial_id"].iloc[-1]] = reports.iloc[-1]
    table = pd.DataFrame(
        [{last_column(name): report[name] for name in names} for report in last.values()], index=list(last)
    )
    table["pareto"] = pareto_optimal(table, objectives(sweep))
    report = last[best_of_front(table, objectives(sweep))]
    return BestTrial(
        trial_id=report["trial_id"],
        hyperparameters={p: lookup(results_config(results, report["trial_id"]), p) for p in searched_paths(sweep)},
        metric=names[0],
        value=float(report[names[0]]),
        step=int(report["step"]),
        checkpoint_path=report["checkpoint_path"],
        checkpoint_bytes=directory_bytes(report["checkpoint_path"]),
        objectives={name: float(report[name]) for name in names},
        model="final",  # each trial's last report is its point on the front
    )


def results_config(results: tune.ResultGrid, trial_id: str) -> dict:
    return next(result.config for result in results if result.metrics.get("trial_id") == trial_id)


def write_best(best: BestTrial, run_dir: str) -> None:
    """`best.json` in the run directory: what a multirun summary and a reader need first."""
    run_files.write_best(run_dir, dataclasses.asdict(best))


def directory_bytes(path: str) -> int:
    """The bytes of every file under `path`: what one checkpoint costs on disk."""
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)
