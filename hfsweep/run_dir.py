"""What a sweep's run directory holds, named in one place: the resolved config it ran (read back
by `hfsweep.config.saved.read_config` for resume, replay, warm start, reports and the GLUE
table), `best.json`, and the results table whose `last_{metric}` columns hold each trial's final
scores. File names and layout only, no knowledge of the config's contents; kept light (no pandas,
no Ray): the multirun summary, a Hydra callback, reads it too."""

from __future__ import annotations

import json
import math
import os

import yaml

RESOLVED_CONFIG = "resolved_config.yaml"  # the sweep's whole config
BEFORE_RESUME = "resolved_config.before-resume-"  # + N.yaml: the config a forced resume replaced
BEST_FILE = "best.json"  # the best trial, its checkpoint and hyperparameters
RESULTS_FILE = "results.csv"  # one row per trial
RESULTS_TABLE = "results.md"  # the same rows in Markdown
SELECT_DIR = "select"  # with select.top_k: the re-training of the best configurations over seeds, a sweep of its own
SELECTION_FILE = "selection.csv"  # in SELECT_DIR: per configuration its score per seed, mean and interval
SELECTION_TABLE = "selection.md"  # the same in Markdown with the paired test; appended to the run's results.md
CHECKPOINTS_FILE = "checkpoints.json"  # what the checkpoint budget (checkpoints.keep_per_trial) freed
PROVENANCE_FILE = "provenance.json"  # the versions, commit and data digests the sweep ran with
CURVES_PLOT = "curves.png"  # each trial's metric against its steps
HYPERPARAMETERS_PLOT = "hyperparameters.png"  # the metric against each searched value
ANYTIME_PLOT = "anytime.png"  # the best score so far against trial-hours and wall time
ANYTIME_CURVE = "anytime_curve.csv"  # its points: per report the wall seconds, trial-hours and best so far
TUNING_CURVE = "tuning_curve.csv"  # random search under FIFO: the median best score of k trials and its 95% band
TUNING_CURVE_PLOT = "tuning_curve.png"  # the same against k
IMPORTANCE_PLOT = "importance.png"  # which searched values mattered (fANOVA)
PARALLEL_PLOT = "parallel.png"  # every trial's values and score on parallel axes
PARETO_PLOT = "pareto.png"  # with several objectives: the trials and their Pareto front
REPLAY_DIR = "replay"  # `python -m hfsweep.replay`: the best configuration re-trained over seeds, a sweep of its own
REPLAY_FILE = "replay.csv"  # in REPLAY_DIR: each seed's scores, then their mean and std
REPLAY_TABLE = "replay.md"  # the same in Markdown
# What the commands that read several run directories write, each as CSV and Markdown:
MULTIRUN_SUMMARY = ("multirun_summary.csv", "multirun_summary.md")  # in a multirun's folder: one row per sweep
COMPARISON = ("comparison.csv", "comparison.md")  # `hfsweep.simulate --out`: the schedulers side by side
ANYTIME_COMPARISON = ("anytime.csv", "anytime.md")  # `hfsweep.report --compare OUT`: several sweeps' curves
GLUE_TABLE = ("glue.csv", "glue.md")  # `hfsweep.glue`: the paper table, in the multirun's folder
FAIR_TABLE = ("fair.csv", "fair.md")  # `hfsweep.glue --fair`: winner against defaults, in run_fair.sh's OUT
METHODS_TABLE = ("methods.csv", "methods.md")  # `hfsweep.glue --methods`: each search's winner against defaults
FAIR_POOLED = "fair_pooled.csv"  # `hfsweep.glue --fair`: per task, the searches' pooled gain over the defaults
METHODS_POOLED = "methods_pooled.csv"  # `hfsweep.glue --methods`: the same per method and model


def last_column(metric: str) -> str:
    """The results column of a trial's final value of `metric`."""
    return f"last_{metric}"


def experiment_names(run_dir: str, name: str) -> list[str]:
    """The sweep's Tune experiment folders: its own, then those `resume --extend` added (NAME-extend-N)."""
    prefix = f"{name}-extend-"
    added = [d for d in os.listdir(run_dir) if d.startswith(prefix) and d[len(prefix) :].isdigit()]
    return [name, *sorted(added, key=lambda d: int(d[len(prefix) :]))]


def trial_dirname(trial) -> str:
    """A trial's folder: its trainable and id. Tune's default adds the sampled values rounded to
    four digits (a learning rate of 5e-5 named 0.0001); params.json and results.csv hold them."""
    return f"{trial.trainable_name}_{trial.trial_id}"


def holds_sweep(run_dir: str) -> bool:
    return os.path.isfile(os.path.join(run_dir, RESOLVED_CONFIG))


def write_config(run_dir: str, cfg: dict, name: str = RESOLVED_CONFIG) -> None:
    with open(os.path.join(run_dir, name), "w") as f:
        yaml.safe_dump(cfg, f, sort_keys=False)


def write_best(run_dir: str, best: dict) -> None:
    """best.json as strict JSON: a number that is not one (no p-value under two seeds) is null."""
    with open(os.path.join(run_dir, BEST_FILE), "w") as f:
        json.dump(_json_numbers(best), f, indent=2, allow_nan=False)


def _json_numbers(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _json_numbers(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_numbers(item) for item in value]
    return value


def read_best(run_dir: str) -> dict:
    with open(os.path.join(run_dir, BEST_FILE)) as f:
        return json.load(f)
