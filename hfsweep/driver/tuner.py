"""What a sweep runs, built from its checked config before Ray starts (`plan_sweep`), and the Tune
`Tuner` that runs it (`build_tuner`): the trainable, param space, searcher, scheduler, stoppers and
callbacks. `sweep.run`, `resume.extend` and the selection over seeds (`over_seeds`) each build one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Optional

import ray
from ray import tune

from hfsweep.compat import hide_from_result_tables
from hfsweep.config.objectives import first_objective, is_multi_objective
from hfsweep.config.resources import trains_in_process
from hfsweep.config.schema import PrepareOn, SweepConfig
from hfsweep.contract.metrics import SAMPLES_PER_SECOND, TRAINABLE_PARAMS
from hfsweep.data.prepare import prepare, prepare_apart
from hfsweep.data.prepared import PreparedData, load_ray_datasets
from hfsweep.driver.loggers import build_loggers
from hfsweep.driver.ray_cluster import check_trial_fits, init_ray, reserved_by_tune, searcher_cap
from hfsweep.driver.search.budget import SweepBudget, build_budget
from hfsweep.driver.search.checkpoint_budget import build_checkpoint_budget
from hfsweep.driver.search.defaults_trial import defaults_point, defaults_values
from hfsweep.driver.search.scheduler_records import build_scheduler_records
from hfsweep.driver.search.schedulers import build_scheduler, build_search_alg, build_stopper, startup_note
from hfsweep.driver.search.search_space import compile_search_space
from hfsweep.driver.search.warm_start import load_warm_start, searcher_arguments
from hfsweep.models import check_model_fits_task, check_peft_targets, check_pretrained_reachable, check_weights_digest
from hfsweep.run_dir import trial_dirname
from hfsweep.trial.trainable import run_trial

NO_AUTO_LOGGERS = "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"
# Left out of the table Tune prints as each trial ends, which stays as long as before the cost metrics:
# Tune's name of its pointer checkpoint (`checkpoint_path` is the real one), and what results.csv holds.
NOT_PRINTED = ("checkpoint_dir_name", SAMPLES_PER_SECOND, TRAINABLE_PARAMS)


def trainable_for(sweep: SweepConfig, task, data: PreparedData):
    """The Tune trainable: `run_trial` bound to the config and its Task (the Task is handed to every
    trial's workers) and the shared Ray Datasets, with what Tune reserves for each trial
    (`reserved_by_tune`). The trials get the task options in the Task alone: the config's
    `task_options`, which resolved_config.yaml records and searches address, stays here."""
    ray_datasets = load_ray_datasets(data, sweep.data.datasets_to_split, sweep.seed)  # once, shared by every trial
    return tune.with_resources(
        tune.with_parameters(
            run_trial,
            sweep=replace(sweep, task_options={}),
            task=task,
            data=data,
            ray_datasets=ray_datasets,
        ),
        reserved_by_tune(sweep.cluster, sweep.strategy),
    )


@dataclass
class SearchSetup:
    """What a sweep adds to the searcher and stoppers its config names: a warm start's arguments
    and trial count, the budget, and the notes to print."""

    searcher_arguments: dict = field(default_factory=dict)
    num_samples: Optional[int] = None  # a warm-started grid's: its points left to run
    budget: Optional[SweepBudget] = None
    notes: list[str] = field(default_factory=list)


def search_setup(sweep: SweepConfig, param_space: dict) -> SearchSetup:
    warm = load_warm_start(sweep, param_space)
    setup = SearchSetup(budget=build_budget(sweep))
    if warm:
        setup.searcher_arguments, setup.num_samples = searcher_arguments(sweep, param_space, warm)
        setup.notes = [f"warm start: {note}" for note in warm.notes]
    elif note := startup_note(sweep):  # a warm start's earlier trials are its start-up
        setup.notes.append(note)
    point = defaults_point(sweep)
    if point is not None:
        setup.searcher_arguments["points_to_evaluate"] = [point]
        setup.num_samples = sweep.num_samples + 1  # Tune counts the point as one of the samples
        values = ", ".join(f"{path}={value}" for path, value in defaults_values(sweep).items())
        setup.notes.append(f"defaults trial: the config's own {values} runs first (search_alg.defaults_trial)")
    return setup


@dataclass
class SweepPlan:
    """What a sweep runs, built from a checked config before Ray starts (`plan_sweep`): Tune's
    param space, scheduler, stopper and callbacks, the prepared data, and what the searcher adds."""

    sweep: SweepConfig
    task: object
    param_space: dict
    scheduler: object
    stopper: object
    callbacks: list
    data: Optional[PreparedData]
    setup: SearchSetup = field(default_factory=SearchSetup)


def plan_sweep(sweep: SweepConfig, task) -> SweepPlan:
    """Everything else that can fail on bad input (the search space, a warm start, a model the
    hub cannot reach, data files), before Ray starts."""
    param_space = compile_search_space(sweep.search_space, sweep)
    setup = search_setup(sweep, param_space)
    scheduler, stopper = build_scheduler(sweep, param_space), build_stopper(sweep, *filter(None, [setup.budget]))
    records = build_scheduler_records(scheduler)
    callbacks = [*build_loggers(sweep), *filter(None, [build_checkpoint_budget(sweep), setup.budget, records])]
    check_pretrained_reachable(sweep.model)
    check_model_fits_task(sweep.model, task)
    check_weights_digest(sweep.model, sweep.cache_dir)
    check_peft_targets(sweep.model, sweep.peft, sweep.search_space, task)
    if sweep.data.prepare_on == PrepareOn.cluster:  # the one preparation that needs Ray: tasks on the cluster's nodes
        init_ray(sweep.cluster)
        data = prepare(sweep.data, sweep.model, sweep.cache_dir, task)
    elif ray.is_initialized():  # no Ray left to start here, so no fork to keep tokenizer threads from
        data = prepare(sweep.data, sweep.model, sweep.cache_dir, task)
    else:  # the driver starts Ray after it, holding no tokenizer threads
        data = prepare_apart(sweep.data, sweep.model, sweep.cache_dir, task)
    return SweepPlan(sweep, task, param_space, scheduler, stopper, callbacks, data, setup)


def start_cluster(sweep: SweepConfig) -> Optional[int]:
    """Start (or join) Ray and check that a trial fits on it; the searcher's cap on live trials,
    which refuses a PBT population that could not be alive at once."""
    init_ray(sweep.cluster)
    check_trial_fits(sweep.cluster, sweep.strategy)
    return searcher_cap(sweep)


def build_tuner(plan: SweepPlan, trainable, cap: Optional[int]) -> tune.Tuner:
    """A new Tuner of `trainable` (`trainable_for`'s, as `Tuner.restore` takes it). In-process trials
    reuse their actors (imports paid once per actor) and are retried by Tune from their latest
    checkpoint; a worker group is restarted by Train instead. Several objectives are the searcher's
    alone (TuneConfig takes one metric); a trial's checkpoints are ranked by the first. `cap`:
    `start_cluster`'s."""
    sweep, setup = plan.sweep, plan.setup
    in_process = trains_in_process(sweep.cluster, sweep.strategy)
    single = not is_multi_objective(sweep)
    metric, mode = first_objective(sweep)
    return tune.Tuner(
        trainable,
        param_space=plan.param_space,
        tune_config=tune.TuneConfig(
            metric=sweep.metric if single else None,
            mode=sweep.mode if single else None,
            scheduler=plan.scheduler,
            search_alg=build_search_alg(sweep, cap, setup.searcher_arguments),
            num_samples=setup.num_samples or sweep.num_samples,  # the concurrency cap is on the search algorithm
            reuse_actors=in_process,
            trial_dirname_creator=trial_dirname,
        ),
        run_config=tune.RunConfig(
            name=sweep.name,
            storage_path=sweep.cluster.storage_path,
            checkpoint_config=tune.CheckpointConfig(
                # Tune keeps every pointer (a few bytes each; PBT may exploit any of them later), and the
                # checkpoint budget frees the weights they point to: pruning them here would make Tune
                # snapshot its state at every checkpoint, and warn about it
                num_to_keep=None,
                checkpoint_score_attribute=metric,
                checkpoint_score_order=mode,
            ),
            stop=plan.stopper,
            failure_config=tune.FailureConfig(max_failures=sweep.cluster.max_failures if in_process else 0),
            callbacks=plan.callbacks,
            verbose=1,  # Tune's status table; per-trial detail is in the experiment directory
        ),
    )


def tune_fit(tuner: tune.Tuner) -> tune.ResultGrid:
    """Run the sweep with exactly the loggers the config names: Tune would otherwise add its
    TensorBoard logger to every sweep, `logger=none` included."""
    hide_from_result_tables(NOT_PRINTED)
    previous = os.environ.get(NO_AUTO_LOGGERS)
    os.environ[NO_AUTO_LOGGERS] = "1"
    try:
        return tuner.fit()
    finally:
        if previous is None:
            del os.environ[NO_AUTO_LOGGERS]
        else:
            os.environ[NO_AUTO_LOGGERS] = previous
