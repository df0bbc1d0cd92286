"""The Tune scheduler, search algorithm and stoppers a sweep's config names, built with Hydra's
`instantiate`; PBT and PB2 mutate the sweep's own search space."""

from __future__ import annotations

import bisect
import math
import re
import sys
from dataclasses import astuple
from typing import Optional

from hydra.utils import get_class, instantiate
from ray import tune
from ray.tune.search import BasicVariantGenerator, ConcurrencyLimiter
from ray.tune.stopper import CombinedStopper

from hfsweep.config.errors import ConfigError
from hfsweep.config.loading import target_name
from hfsweep.config.objectives import is_multi_objective
from hfsweep.config.schema import SweepConfig
from hfsweep.contract.metrics import EPOCH, MAX_STEPS, REPORTED_AT
from hfsweep.driver.search.defaults_trial import added_trials
from hfsweep.driver.search.search_rules import is_population_training, longest_epochs
from hfsweep.driver.search.search_space import WithinSpace, pb2_bounds, pbt_mutations, unperturbed


def instantiate_at(key: str, node: dict, **objects):
    """Hydra-instantiate the config at `key`, passing `objects` (Tune domains, ints) straight to the
    constructor; a constructor's complaint about its arguments becomes one line naming the key.
    A null setting is left out (the class's default applies), so `null` unsets what a preset set
    for another class: `debug=tiny` runs under FIFO a preset that set ASHA's grace period."""
    node = {k: v for k, v in node.items() if v is not None}
    try:
        return instantiate(node, _partial_=True)(**objects)
    except (AssertionError, ValueError, TypeError) as err:
        name = target_name(node)
        unexpected = re.search(r"unexpected keyword argument '(\w+)'", str(err))
        if unexpected:  # e.g. a preset's ASHA grace_period left over after scheduler=fifo
            arg = unexpected.group(1)
            raise ConfigError(
                f"{key}.{arg}: {name} takes no '{arg}'; drop it with ~{key}.{arg} (or {key}.{arg}=null)"
            ) from err
        raise ConfigError(f"{key}: {name} rejects these settings: {err}") from err


def target_class(node: dict):
    return get_class(node["_target_"])


def build_scheduler(sweep: SweepConfig, param_space: dict):
    """Instantiate the configured Tune scheduler; PBT and PB2 mutate the sweep's own search space.

    Metric and mode come from the TuneConfig, so every scheduler optimises the same thing.
    """
    node = sweep.scheduler
    if node.get("time_attr") == EPOCH and "max_t" in node:  # the longest trial's epochs, searched or not
        node = {**node, "max_t": max(node["max_t"], longest_epochs(sweep))}
    cls = target_class(node)
    # PB2's module imports a GP stack (scikit-learn: ~2 s); a class can only be a PB2 if loading
    # the target already imported it.
    pb2 = sys.modules.get("ray.tune.schedulers.pb2")
    if pb2 is not None and issubclass(cls, pb2.PB2):
        return instantiate_at("scheduler", node, hyperparam_bounds=pb2_bounds(sweep.search_space))
    if is_population_training(sweep):
        mutations = pbt_mutations(param_space, unperturbed(sweep.search_space))
        return instantiate_at(
            "scheduler", node, hyperparam_mutations=mutations, custom_explore_fn=WithinSpace(mutations)
        )
    return instantiate_at("scheduler", node)


def build_search_alg(sweep: SweepConfig, max_concurrent: Optional[int], extra: Optional[dict] = None):
    """Instantiate the configured Tune search algorithm, capped at max_concurrent running trials
    (None: no cap), with the constructor arguments of a warm start (`hfsweep.driver.search.warm_start`).

    Tune ignores TuneConfig.max_concurrent_trials for a variant generator, so the cap is set here.
    Several objectives go to the searcher itself: Tune's TuneConfig takes one metric.
    """
    node = {key: value for key, value in sweep.search_alg.items() if key not in HFSWEEP_SEARCH_KEYS}
    extra = {**searcher_objects(sweep), **(extra or {})}  # a warm start's sampler and storage replace these
    try:
        cls = target_class(node)
    except ImportError as err:
        raise ConfigError(
            f"search_alg: {node['_target_']} cannot be imported ({err}); pip install 'hfsweep[search]'."
        ) from err
    if cls is BasicVariantGenerator:
        return instantiate_at("search_alg", node, max_concurrent=max_concurrent or 0, **extra)  # 0: no cap
    if is_multi_objective(sweep):
        extra.update(metric=sweep.metric, mode=sweep.mode)
    searcher = instantiate_at("search_alg", node, **extra)
    return ConcurrencyLimiter(searcher, max_concurrent=max_concurrent) if max_concurrent else searcher


# hfsweep's keys of `search_alg`, not the searcher's: earlier sweeps to start from, whether the
# config's own values run first, and how many trials a model-based searcher draws at random first.
HFSWEEP_SEARCH_KEYS = ("warm_start", "defaults_trial", "startup_trials")
# Where each model-based searcher takes its random start-up, and its own default (a 12-trial sweep
# under Optuna's 10 would leave two trials to the model).
STARTUP_ARGUMENT = {"OptunaSearch": "n_startup_trials", "HyperOptSearch": "n_initial_points"}


def startup_trials(sweep: SweepConfig) -> Optional[int]:
    """How many trials a model-based searcher samples at random before its model chooses:
    `search_alg.startup_trials`, else a third of the sweep's trials (the defaults trial counted),
    at least 2. A budget may end the sweep sooner; the rule then still counts num_samples, and
    the summary says how many the model chose. None for a searcher without a model."""
    name = target_class(sweep.search_alg).__name__
    if name not in STARTUP_ARGUMENT:
        return None
    if sweep.search_alg.get("startup_trials") is not None:
        return sweep.search_alg["startup_trials"]
    trials = sweep.num_samples + added_trials(sweep)
    return max(2, math.ceil(trials / 3))


def startup_note(sweep: SweepConfig) -> Optional[str]:
    """What to tell the user when the start-up rule counts num_samples but a budget may end the
    sweep first: a trial's cost is unknown before it runs, so the rule cannot count what the budget
    buys; the user who knows sets the count."""
    if sweep.search_alg.get("startup_trials") is not None or not any(v is not None for v in astuple(sweep.budget)):
        return None
    count = startup_trials(sweep)
    if count is None:
        return None
    return (
        f"start-up: {count} trials drawn at random, a third of num_samples={sweep.num_samples} (the defaults trial "
        f"counted); the budget may end the sweep before that many have run: set search_alg.startup_trials to a third "
        f"of the trials it buys"
    )


# Searchers whose start-up counts finished trials, not started ones: Optuna's TPE samples at random
# until `n_startup_trials` trials are complete, so trials running at once add random draws.
STARTUP_COUNTS_FINISHED = ("OptunaSearch",)


def warm_started_tpe(sweep: SweepConfig) -> bool:
    """An Optuna sweep warm-started by earlier runs: their trials are its TPE's start-up."""
    return bool(sweep.search_alg.get("warm_start")) and target_class(sweep.search_alg).__name__ == "OptunaSearch"


def drawn_at_random(sweep: SweepConfig, histories: list) -> Optional[int]:
    """How many of the sweep's trials its model-based searcher drew at random (None without a
    model), from the trials' report histories: under Optuna, those that started while fewer than
    the start-up count had finished (a start-up of 3 with two trials running at a time draws about
    4). A trial starts at its first report's time less its time_total_s and finishes at its last
    report, timed by hfsweep's `reported_at` (Tune's whole-second `timestamp` in sweeps from before
    it: the next trial starts within a second of a finish); trials that never reported are left out.
    A warm-started Optuna sweep draws none: its study holds the earlier trials, complete, and they
    are its start-up (`warm_start.warm_tpe_sampler`). `histories` are the trials of the sweep's first
    experiment: an extension's Optuna is warm-started too."""
    startup = startup_trials(sweep)
    if startup is None:
        return None
    if warm_started_tpe(sweep):
        return 0
    spans = [
        (clock.iloc[0] - history["time_total_s"].iloc[0], clock.iloc[-1])
        for history in histories
        if history is not None and len(history)
        for clock in [history[REPORTED_AT] if REPORTED_AT in history else history["timestamp"]]
    ]
    if target_class(sweep.search_alg).__name__ not in STARTUP_COUNTS_FINISHED:
        return min(startup, len(spans))
    ends = sorted(end for _, end in spans)
    return sum(bisect.bisect_left(ends, start) < startup for start, _ in spans)


def searcher_objects(sweep: SweepConfig) -> dict:
    """The searcher's constructor arguments that are objects, not config values: the start-up rule's
    sampler (Optuna's TPE, seeded as OptunaSearch would seed its own) or HyperOpt's count, and
    Optuna's storage from `search_alg.storage` (a URL such as sqlite:///sweep.db), where the study is
    written while the sweep runs."""
    count = startup_trials(sweep)
    if count is None:
        return {}
    if target_class(sweep.search_alg).__name__ == "HyperOptSearch":
        return {"n_initial_points": count}
    import optuna

    objects = {
        "sampler": optuna.samplers.TPESampler(seed=sweep.search_alg.get("seed"), n_startup_trials=count),
        "seed": None,
    }
    if sweep.search_alg.get("storage"):
        objects["storage"] = optuna.storages.get_storage(sweep.search_alg["storage"])
    return objects


class ThresholdStopper(tune.Stopper):
    """Stop a trial once `metric` reaches `threshold`: at or above it for mode=max (a step budget,
    a target accuracy), at or below it for mode=min (a target loss)."""

    def __init__(self, metric: str, threshold: float, mode: str = "max"):
        self.metric, self.threshold, self.mode = metric, threshold, mode

    def __call__(self, trial_id: str, result: dict) -> bool:
        value = result.get(self.metric)
        if value is None:
            return False
        return value >= self.threshold if self.mode == "max" else value <= self.threshold

    def stop_all(self) -> bool:
        return False


class StepBudget(tune.Stopper):
    """Stop a trial at its own step budget, which every report carries (`max_steps`: the trial's
    epochs at its batch size under `training.max_steps=-1`); `max_steps` for a report without it."""

    def __init__(self, max_steps: int):
        self.max_steps = max_steps

    def __call__(self, trial_id: str, result: dict) -> bool:
        limit = result.get(MAX_STEPS) or self.max_steps
        return "step" in result and 0 < limit <= result["step"]

    def stop_all(self) -> bool:
        return False


def build_stopper(sweep: SweepConfig, *more: tune.Stopper):
    """The configured stoppers combined (any one stops) with the step budget, after `more` (the
    sweep's budget, which must see every report: CombinedStopper stops asking at the first yes).

    Tune applies stoppers before the scheduler sees a result, so a trial at its max_steps
    ends there: PBT never exploits into a trial that has no steps left to train.
    """
    budget = StepBudget(sweep.training["max_steps"])
    return CombinedStopper(*more, budget, *(instantiate_at(f"stopper.{k}", node) for k, node in sweep.stopper.items()))
