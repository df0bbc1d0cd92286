"""A sweep's saved config read back (resume, `--extend`, replay, reports, warm start): what a run
directory holds, and what may change over it, apart from composing a new one (`loading`)."""

from __future__ import annotations

import os

import yaml
from omegaconf import OmegaConf

from hfsweep.config.errors import ConfigError
from hfsweep.config.resources import BILLED_KEYS
from hfsweep.run_dir import RESOLVED_CONFIG, holds_sweep, read_best

# Task family options that sweeps saved before `task_options` existed kept under data.*, with the
# defaults they had there.
MOVED_TO_TASK_OPTIONS = {
    "label_all_tokens": False,
    "mlm_probability": 0.15,
    "eval_mlm_probability": 0.15,
    "whole_word_mask": False,
    "source_prefix": "",
    "max_target_length": 64,
    "doc_stride": 128,
    "max_answer_length": 30,
    "n_best_size": 20,
    "version_2_with_negative": False,
    "null_score_diff_threshold": 0.0,
    "chat_template": None,
    "completion_only_loss": True,
    "assistant_only_loss": False,
    "packing": False,
}


def read_config(run_dir: str) -> dict:
    """The saved config; one saved before task_options existed has its family options moved there
    (those it set away from their old defaults: the others are the family's defaults still)."""
    with open(os.path.join(run_dir, RESOLVED_CONFIG)) as f:
        cfg = yaml.safe_load(f)
    options = cfg.setdefault("task_options", {})
    for key, old_default in MOVED_TO_TASK_OPTIONS.items():
        if key in cfg.get("data", {}) and (value := cfg["data"].pop(key)) != old_default:
            options[key] = value
    return cfg


def read_sweep(run_dir: str):
    """The saved config, typed (`SweepConfig`; keys added to hfsweep since it was saved take their defaults)."""
    from hfsweep.config.schema import SweepConfig, typed

    return typed(SweepConfig, read_config(run_dir))


def best_config(run_dir: str) -> dict:
    """The sweep's config with its best trial's hyperparameters set: what replay re-trains."""
    cfg = OmegaConf.create(read_config(run_dir))
    for path, value in read_best(run_dir)["hyperparameters"].items():
        OmegaConf.update(cfg, path, value)
    return OmegaConf.to_container(cfg)


def saved_config(run_dir: str, overrides: list[str] = (), force: bool = False) -> dict:
    """The config saved in a sweep's run directory, for resuming it. An override that changes it
    is refused unless `force`; keys added to hfsweep since the run was saved take their defaults."""
    saved = _saved(run_dir)
    cfg = OmegaConf.to_container(OmegaConf.merge(saved, OmegaConf.from_dotlist(list(overrides))), resolve=True)
    changed = sorted(changed_keys(saved, cfg))
    priced = cfg["budget"].get("usd") is not None  # a USD budget is pickled with its price
    billed = priced or cfg["budget"].get("trial_hours") is not None  # ... and with what a trial holds
    restored = [
        key
        for key in changed
        if key in RESTORED_BY_TUNE
        or key.startswith(tuple(f"{group}." for group in RESTORED_BY_TUNE))
        or (priced and key in BUDGET_PRICES)
        or (billed and key.startswith(BILLED_KEYS))
    ]
    if restored:
        raise ConfigError(
            f"resume: {', '.join(restored)} cannot change on resume, --force or not: Tune restores the sweep's "
            f"scheduler, searcher and its concurrency, stoppers, budget and what it bills, loggers, search space and "
            f"retries as saved in {run_dir}; drop those overrides, or start a new sweep (resume --extend adds trials)."
        )
    if changed and not force:
        raise ConfigError(
            f"resume: {', '.join(changed)} differ from the config saved in {run_dir}; "
            f"drop those overrides, or pass --force to resume with them."
        )
    return cfg


# What `Tuner.restore` brings back from the experiment as it was saved (its TuneConfig and RunConfig,
# pickled): an override of these on resume would be thrown away.
RESTORED_BY_TUNE = (
    "scheduler",
    "search_alg",
    "stopper",
    "budget",
    "callbacks",
    "logger",
    "checkpoints",
    "search_space",
    "num_samples",
    "metric",
    "mode",
    "name",
    "cluster.max_concurrent_trials",  # the searcher's concurrency limit
    "cluster.max_failures",  # Tune's FailureConfig (a worker group's retries are Train's: refused alike, one rule)
)
BUDGET_PRICES = ("cluster.price_per_cpu_hour", "cluster.price_per_gpu_hour")
EXTENDABLE = ("num_samples", "search_space.")  # what an extension of a finished sweep may change


def extended_config(run_dir: str, extends: list[str]) -> dict:
    """The saved config with `extends` applied, for adding trials to a finished sweep: only the
    sample count and the search space may change, or the new trials would not compare with the old."""
    saved = _saved(run_dir)
    cfg = OmegaConf.to_container(OmegaConf.merge(saved, OmegaConf.from_dotlist(list(extends))), resolve=True)
    changed = sorted(changed_keys(saved, cfg))
    fixed = [key for key in changed if not key.startswith(EXTENDABLE)]
    if fixed:
        raise ConfigError(
            f"resume --extend: {', '.join(fixed)} differ from the config saved in {run_dir}; "
            f"an extension changes num_samples and search_space.* only."
        )
    if not changed:
        raise ConfigError(
            f"resume --extend: {' '.join(extends)} changes nothing in {run_dir}; "
            f"give a larger num_samples=N or more search_space values."
        )
    return cfg


def _saved(run_dir: str) -> dict:
    from hfsweep.config.schema import SweepConfig

    if not holds_sweep(run_dir):
        raise ConfigError(
            f"resume: '{run_dir}' holds no sweep ({RESOLVED_CONFIG} is missing); pass a sweep's run directory."
        )
    saved = OmegaConf.merge(OmegaConf.structured(SweepConfig), read_config(run_dir))
    return OmegaConf.to_container(saved, resolve=True, enum_to_str=True)


def changed_keys(old: dict, new: dict, prefix: str = "") -> list[str]:
    """The dotted paths whose values differ between two resolved configs."""
    keys = []
    for key in old.keys() | new.keys():
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            keys += changed_keys(a, b, f"{prefix}{key}.")
        elif a != b:
            keys.append(f"{prefix}{key}")
    return keys
