"""Continuing a saved sweep from its run directory: `resume` (finished trials kept, the others from
their latest checkpoints) and `extend` (more trials for a finished one, a new experiment beside
the old); `python -m hfsweep.resume` is their command."""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np
import pandas as pd
from ray import tune

from hfsweep.compat import forget_points_to_evaluate, restored_callbacks
from hfsweep.config.errors import ConfigError
from hfsweep.config.loading import import_object, iter_leaves
from hfsweep.config.objectives import is_multi_objective
from hfsweep.config.saved import changed_keys, extended_config, read_config, saved_config
from hfsweep.config.schema import SweepConfig, plain
from hfsweep.driver.finish import finish
from hfsweep.driver.over_seeds import UNFINISHED
from hfsweep.driver.preflight import preflight
from hfsweep.driver.search.budget import SweepBudget, build_budget, spent_before
from hfsweep.driver.search.defaults_trial import DEFAULTS_COLUMN
from hfsweep.driver.search.live_study import study_exists
from hfsweep.driver.search.warm_start import warm_start_dirs
from hfsweep.driver.tuner import build_tuner, plan_sweep, start_cluster, trainable_for, tune_fit
from hfsweep.run_dir import BEFORE_RESUME, RESOLVED_CONFIG, RESULTS_FILE, SELECT_DIR, experiment_names, write_config


def resume(run_dir: str, overrides: list[str] = (), force: bool = False) -> tune.ResultGrid:
    """Continue an interrupted sweep from its run directory: finished trials are kept, unfinished
    and errored ones resume from their latest checkpoint. The saved config is the config; an
    override that changes it is refused unless `force`. After `resume --extend`, the extension is
    what continues."""
    checked = preflight(saved_config(run_dir, overrides, force))
    sweep, task = checked.sweep, checked.task
    *earlier_names, latest = experiment_names(run_dir, sweep.name)  # an extension is the latest experiment
    experiment = os.path.join(run_dir, latest)
    if not tune.Tuner.can_restore(experiment):
        raise ConfigError(f"resume: '{experiment}' holds no Tune experiment state; nothing to resume.")
    plan = plan_sweep(without_warm_start(sweep), task)
    start_cluster(sweep)
    # The loggers, the checkpoint budget and the sweep's budget come back with the Tuner, their state
    # included; an extension's searcher with the points it was left to run.
    trainable = trainable_for(replace(sweep, name=latest), task, plan.data)
    tuner = tune.Tuner.restore(experiment, trainable, resume_errored=True, param_space=plan.param_space)
    if study_exists(sweep):
        forget_points_to_evaluate(tuner)
    budget = next((c for c in restored_callbacks(tuner) if isinstance(c, SweepBudget)), None)
    if budget is None and build_budget(sweep) is not None:
        raise RuntimeError(
            "resume: Tune restored the sweep without its budget (hfsweep.compat.restored_callbacks "
            "found none: Ray's private TunerInternal has moved); pin ray to the version in "
            "provenance.json to resume this sweep."
        )
    if force:
        record_forced_changes(run_dir, sweep)
    earlier = [tune.ResultGrid(tune.ExperimentAnalysis(os.path.join(run_dir, name))) for name in earlier_names]
    return finish(tune_fit(tuner), sweep, task, plan.data, budget, earlier)


def record_forced_changes(run_dir: str, sweep: SweepConfig) -> None:
    """Once Tune has restored a sweep that `--force` changed: resolved_config.yaml records the config
    its trials go on with (replay, report and a later resume read it), and the one it replaces is kept
    beside it as resolved_config.before-resume-N.yaml, the config of the trials that ended before."""
    before, now = read_config(run_dir), plain(sweep)
    changed = sorted(changed_keys(before, now))
    if not changed:
        return
    kept = [name for name in os.listdir(run_dir) if name.startswith(BEFORE_RESUME)]
    name = f"{BEFORE_RESUME}{len(kept) + 1}.yaml"
    write_config(run_dir, before, name)
    write_config(run_dir, now)
    print(f"hfsweep: resume --force: {RESOLVED_CONFIG} now records {', '.join(changed)}; the config before is {name}")


def extend(run_dir: str, extends: list[str]) -> tune.ResultGrid:
    """Add trials to a finished sweep (`resume --extend`). Tune restores an experiment with its
    own sample count and searcher (`Tuner.restore` takes only the same param_space), so the new
    trials are a new experiment in the run directory, NAME-extend-N, whose searcher is warm-started
    with every trial run so far: a grid runs only the points not run, Optuna's sampler models the
    old trials first, random search draws the samples still missing. results.csv and best/ then
    cover every experiment; `resume` continues an interrupted extension."""
    sweep = preflight(extended_config(run_dir, extends)).sweep
    check_extendable(sweep, run_dir)
    check_finished(run_dir)
    names = experiment_names(run_dir, sweep.name)
    done = draws_run(run_dir)
    grid = searches_grid(sweep)
    ran = read_config(run_dir)["num_samples"]
    if grid and sweep.num_samples != ran:
        raise ConfigError(
            f"resume --extend: a grid's num_samples cannot change (each point of {run_dir} ran {ran} times); "
            f"widen search_space.* instead, or start a new sweep."
        )
    if not grid and sweep.num_samples <= done:
        raise ConfigError(
            f"resume --extend: num_samples={sweep.num_samples}, and {run_dir} ran {done} searched trials "
            f"already; give a larger num_samples."
        )
    added = replace(
        sweep,
        name=f"{sweep.name}-extend-{len(names)}",
        num_samples=sweep.num_samples if grid else sweep.num_samples - done,  # a grid's: per new point
        search_alg=extension_searcher(sweep, run_dir, grid, len(names)),
    )
    checked = preflight(plain(added))  # the extension's own checks: its warm-started searcher
    # the warm start reads the saved config, so it is replaced only after
    plan = plan_sweep(checked.sweep, checked.task)
    budget = plan.setup.budget
    analyses = [tune.ExperimentAnalysis(os.path.join(run_dir, name)) for name in names]
    if budget is not None:  # one budget for the whole sweep: the extension spends what is left
        budget.set_state(spent_before([*analyses, *selection_spend(sweep, run_dir)]))
        if budget.stop_all():
            raise ConfigError(
                f"resume --extend: {run_dir} has spent {budget.reason} already, and an extension keeps its budget; "
                f"to search on with a larger one, start a new sweep with search_alg.warm_start={run_dir}."
            )
    cap = start_cluster(checked.sweep)
    for note in plan.setup.notes:
        print(f"hfsweep: extend: {note}")
    earlier = [tune.ResultGrid(analysis) for analysis in analyses]
    # the extension's trials: its name, so their Train runs and checkpoints are under NAME-extend-N
    tuner = build_tuner(plan, trainable_for(checked.sweep, checked.task, plan.data), cap)
    write_config(run_dir, plain(sweep))  # the sweep's config is the extended one from now on, not before
    return finish(tune_fit(tuner), sweep, checked.task, plan.data, budget, earlier)


def without_warm_start(sweep: SweepConfig) -> SweepConfig:
    """A resumed sweep's config without its warm start: Tune restores the searcher it warmed, so its
    source runs are not read again (they may have moved, or grown, since)."""
    return replace(sweep, search_alg={**sweep.search_alg, "warm_start": None})


def draws_run(run_dir: str) -> int:
    """The trials the searcher drew so far (results.csv's rows but the defaults trial, which
    `num_samples` does not count)."""
    table = pd.read_csv(os.path.join(run_dir, RESULTS_FILE))
    return int((~table[DEFAULTS_COLUMN].astype(bool)).sum()) if DEFAULTS_COLUMN in table else len(table)


def selection_spend(sweep: SweepConfig, run_dir: str) -> list:
    """The selection's experiment, where it drew on the sweep's budget (`select.within_budget`)."""
    selection = os.path.join(run_dir, SELECT_DIR, sweep.name)
    drew = sweep.select.top_k and sweep.select.within_budget and os.path.isdir(selection)
    return [tune.ExperimentAnalysis(selection)] if drew else []


def check_finished(run_dir: str) -> None:
    """An extension adds to a finished sweep: `resume` continues only the newest experiment, so
    the trials an interruption left would never run again, and results.csv counts them as drawn."""
    path = os.path.join(run_dir, RESULTS_FILE)
    first = f"python -m hfsweep.resume {run_dir} finishes it first"
    if not os.path.isfile(path):
        raise ConfigError(f"resume --extend: {run_dir} has no {RESULTS_FILE}: the sweep did not finish; {first}.")
    ended = pd.read_csv(path)["ended"]
    left = ended[ended.isin(UNFINISHED)]
    if len(left):
        how = ", ".join(sorted(set(left)))
        raise ConfigError(f"resume --extend: {len(left)} trials of {run_dir} did not finish ({how}); {first}.")


def check_extendable(sweep: SweepConfig, run_dir: str) -> None:
    """Only searchers that can be told the old trials extend a sweep (a grid, and Optuna), and
    random search, which needs told nothing."""
    from ray.tune.search.optuna import OptunaSearch

    searcher = import_object(sweep.search_alg["_target_"])
    if not issubclass(searcher, (tune.search.BasicVariantGenerator, OptunaSearch)):
        raise ConfigError(
            f"resume --extend: {run_dir} searched with {searcher.__name__}, which cannot be told the "
            f"trials run so far; only a grid, random search or search_alg=optuna can be extended."
        )
    if is_multi_objective(sweep):
        raise ConfigError("resume --extend: a sweep of several objectives cannot be extended yet.")


def extension_searcher(sweep: SweepConfig, run_dir: str, grid: bool, number: int) -> dict:
    """The search_alg of extension `number`: a grid or Optuna warm-started with every trial run so
    far; random search drawing new points from its own seed, derived from the sweep's
    `random_state` and the extension's number (the sweep's seed would draw its first points again)."""
    node = {**sweep.search_alg, "defaults_trial": False}  # the sweep ran it
    if grid or not issubclass(import_object(node["_target_"]), tune.search.BasicVariantGenerator):
        # what the sweep started from, too; its study is in memory (the live one is the sweep's own)
        return {**node, "warm_start": [*warm_start_dirs(sweep), run_dir], "storage": None}
    if node.get("random_state") is not None:
        node["random_state"] = int(np.random.SeedSequence([node["random_state"], number]).generate_state(1)[0])
    return node


def searches_grid(sweep: SweepConfig) -> bool:
    return any(spec["sampler"] == "grid" for _, spec in iter_leaves(sweep.search_space))
