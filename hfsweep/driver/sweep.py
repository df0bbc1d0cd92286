"""The sweep driver: data once, Ray, the Tuner, results.

`run` takes the resolved config as a plain dict (workers never see Hydra) and returns Tune's
ResultGrid. Everything a sweep writes lives under `cluster.storage_path` (the Hydra run
directory by default): the resolved config, Tune's experiment directory, and the Train runs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional

from ray import tune

from hfsweep.compat import hide_from_result_tables, restored_callbacks
from hfsweep.config.errors import ConfigError
from hfsweep.config.loading import saved_config
from hfsweep.config.objectives import first_objective, is_multi_objective
from hfsweep.config.resources import trial_resources, trains_in_process
from hfsweep.contract import SAMPLES_PER_SECOND, TRAINABLE_PARAMS
from hfsweep.data.prepare import PreparedData, load_ray_datasets, prepare
from hfsweep.driver.budget import SweepBudget, build_budget
from hfsweep.driver.checkpoint_budget import build_checkpoint_budget, checkpoint_disk_use
from hfsweep.driver.loggers import build_loggers
from hfsweep.driver.pareto import PARETO_PLOT
from hfsweep.driver.preflight import CheckedConfig, preflight
from hfsweep.driver.provenance import write_provenance
from hfsweep.driver.ray_cluster import check_storage_writable, check_trial_fits, init_ray, max_concurrent_trials
from hfsweep.driver.best import best_trial, write_best
from hfsweep.driver.evaluation import evaluate_model
from hfsweep.driver.export import export_best
from hfsweep.driver.report import summary, write_report
from hfsweep.driver.schedulers import build_scheduler, build_search_alg, build_stopper
from hfsweep.driver.search_space import compile_search_space
from hfsweep.driver.warm_start import load_warm_start, searcher_arguments
from hfsweep.models import build_model, check_peft_targets, check_pretrained_reachable, check_weights_digest
from hfsweep.run_dir import write_config
from hfsweep.trial.trainable import run_trial

NO_AUTO_LOGGERS = "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"
# Left out of the table Tune prints as each trial ends, which stays as long as before the cost metrics:
# Tune's name of its pointer checkpoint (`checkpoint_path` is the real one), and what results.csv holds.
NOT_PRINTED = ("checkpoint_dir_name", SAMPLES_PER_SECOND, TRAINABLE_PARAMS)


def trainable_for(cfg: dict, task, data: PreparedData):
    """The Tune trainable: `run_trial` bound to the config, its Task (resolved here, once, and
    handed to every trial's workers) and the shared Ray Datasets. An
    in-process trial holds its worker's resources; one that drives a worker group holds 1 CPU,
    and Train reserves the workers'."""
    ray_datasets = load_ray_datasets(data, cfg["data"]["datasets_to_split"], cfg["seed"])  # once, shared by every trial
    cluster = cfg["cluster"]
    return tune.with_resources(
        tune.with_parameters(run_trial, cfg=cfg, task=task, data=data, ray_datasets=ray_datasets),
        trial_resources(cluster) if trains_in_process(cluster) else {"CPU": 1},
    )


@dataclass
class SearchSetup:
    """What a sweep adds to the searcher and stoppers its config names: a warm start's arguments
    and trial count, the budget, and the notes to print."""

    searcher_arguments: dict = field(default_factory=dict)
    num_samples: Optional[int] = None  # a warm-started grid's: its points left to run
    budget: Optional[SweepBudget] = None
    notes: list[str] = field(default_factory=list)


def search_setup(cfg: dict, param_space: dict) -> SearchSetup:
    warm = load_warm_start(cfg, param_space)
    setup = SearchSetup(budget=build_budget(cfg))
    if warm:
        setup.searcher_arguments, setup.num_samples = searcher_arguments(cfg, param_space, warm)
        setup.notes = [f"warm start: {note}" for note in warm.notes]
    return setup


def build_tuner(cfg: dict, param_space: dict, task, data: PreparedData, scheduler, stopper, callbacks: list,
                setup: SearchSetup = SearchSetup()) -> tune.Tuner:
    """In-process trials reuse their actors (imports paid once per actor) and are retried by Tune
    from their latest checkpoint; a worker group is restarted by Train instead. Several objectives
    are the searcher's alone (TuneConfig takes one metric); a trial's checkpoints are ranked by
    the first."""
    cluster = cfg["cluster"]
    in_process = trains_in_process(cluster)
    concurrency = max_concurrent_trials(cluster)
    single = not is_multi_objective(cfg)
    return tune.Tuner(
        trainable_for(cfg, task, data),
        param_space=param_space,
        tune_config=tune.TuneConfig(
            metric=cfg["metric"] if single else None,
            mode=cfg["mode"] if single else None,
            scheduler=scheduler,
            search_alg=build_search_alg(cfg, concurrency, setup.searcher_arguments),
            num_samples=setup.num_samples or cfg["num_samples"],  # the concurrency cap is on the search algorithm (above)
            reuse_actors=in_process,
        ),
        run_config=tune.RunConfig(
            name=cfg["name"],
            storage_path=cfg["cluster"]["storage_path"],
            checkpoint_config=tune.CheckpointConfig(
                num_to_keep=cfg["checkpoints"]["keep_per_trial"],
                checkpoint_score_attribute=first_objective(cfg)[0],
                checkpoint_score_order=first_objective(cfg)[1],
            ),
            stop=stopper,
            failure_config=tune.FailureConfig(max_failures=cluster["max_failures"] if in_process else 0),
            callbacks=callbacks,
            verbose=1,  # Tune's status table; per-trial detail is in the experiment directory
        ),
    )


def _prepare_sweep(cfg: dict, task) -> tuple:
    """Everything else that can fail on bad input (the search space, a warm start, a model the
    hub cannot reach, data files), before Ray starts."""
    param_space = compile_search_space(cfg["search_space"], cfg)
    setup = search_setup(cfg, param_space)
    scheduler, stopper = build_scheduler(cfg, param_space), build_stopper(cfg, *filter(None, [setup.budget]))
    callbacks = [*build_loggers(cfg), *filter(None, [build_checkpoint_budget(cfg), setup.budget])]
    check_pretrained_reachable(cfg["model"])
    check_weights_digest(cfg["model"], cfg["cache_dir"])
    check_peft_targets(cfg, task)
    if cfg["data"]["prepare_on"] == "cluster":  # the one preparation that needs Ray: tasks on the cluster's nodes
        init_ray(cfg["cluster"])
    return param_space, scheduler, stopper, callbacks, prepare(cfg, task), setup


def run(checked: CheckedConfig) -> tune.ResultGrid:
    """Prepare data and run the sweep of a config that passed the preflight; return Tune's
    ResultGrid. Its Task is handed to every layer below."""
    if not isinstance(checked, CheckedConfig):
        raise TypeError(f"sweep.run takes the CheckedConfig of hfsweep.driver.preflight.preflight(cfg), not {type(checked).__name__}")
    cfg, task = checked.cfg, checked.task
    param_space, scheduler, stopper, callbacks, data, setup = _prepare_sweep(cfg, task)
    storage = cfg["cluster"]["storage_path"]
    check_storage_writable(storage)
    init_ray(cfg["cluster"])
    check_trial_fits(cfg["cluster"])
    # Everything is checked: only now does the run directory get the sweep's files.
    write_config(storage, cfg)
    write_provenance(storage, cfg)
    for note in setup.notes:
        print(f"hfsweep: {note}")
    return fit(build_tuner(cfg, param_space, task, data, scheduler, stopper, callbacks, setup), cfg, task, data, setup.budget)


def resume(run_dir: str, overrides: list[str] = (), force: bool = False) -> tune.ResultGrid:
    """Continue an interrupted sweep from its run directory: finished trials are kept, unfinished
    and errored ones resume from their latest checkpoint. The saved config is the config; an
    override that changes it is refused unless `force`."""
    checked = preflight(saved_config(run_dir, overrides, force))
    cfg, task = checked.cfg, checked.task
    experiment = os.path.join(run_dir, cfg["name"])
    if not tune.Tuner.can_restore(experiment):
        raise ConfigError(f"resume: '{experiment}' holds no Tune experiment state; nothing to resume.")
    param_space, _, _, _, data, _ = _prepare_sweep(cfg, task)
    init_ray(cfg["cluster"])
    check_trial_fits(cfg["cluster"])
    # The loggers, the checkpoint budget and the sweep's budget come back with the Tuner, their state included.
    tuner = tune.Tuner.restore(experiment, trainable_for(cfg, task, data), resume_errored=True, param_space=param_space)
    budget = next((c for c in restored_callbacks(tuner) if isinstance(c, SweepBudget)), None)
    return fit(tuner, cfg, task, data, budget)


def fit(tuner: tune.Tuner, cfg: dict, task, data: PreparedData, budget: Optional[SweepBudget] = None) -> tune.ResultGrid:
    """Run the sweep with exactly the loggers the config names: Tune would otherwise add its
    TensorBoard logger to every sweep, `logger=none` included."""
    hide_from_result_tables(NOT_PRINTED)
    previous = os.environ.get(NO_AUTO_LOGGERS)
    os.environ[NO_AUTO_LOGGERS] = "1"
    try:
        results = tuner.fit()
    finally:
        if previous is None:
            del os.environ[NO_AUTO_LOGGERS]
        else:
            os.environ[NO_AUTO_LOGGERS] = previous
    return finish(results, cfg, task, data, budget)


def finish(results: tune.ResultGrid, cfg: dict, task, data: PreparedData, budget: Optional[SweepBudget] = None) -> tune.ResultGrid:
    """Best trial, exported model, tables and plots, and the one-screen summary (which says
    whether the sweep ended on its budget)."""
    if results.num_terminated == 0:
        raise RuntimeError(f"no trial finished ({results.num_errors} errored); see the errors above.")
    storage = cfg["cluster"]["storage_path"]
    best = best_trial(results, cfg)
    write_best(best, storage)
    export_best(best, cfg, task, os.path.join(storage, "best"), data.label_names)
    table = write_report(storage)
    print(summary(best, storage, untrained_eval_loss(cfg, task, data)))
    if is_multi_objective(cfg):
        print(f"  objectives:      {', '.join(f'{name} = {value:.4g}' for name, value in best.objectives.items())} (its last report)")
        print(f"  Pareto front:    {table['pareto'].sum()} of {len(table)} trials, marked in results.md and drawn in {PARETO_PLOT}; "
              f"best/ is the one with the best {best.metric}")
    if "cost_usd" in table:
        print(f"  cost:            ${table['cost_usd'].sum():.4g} for {len(table)} trials (cost_usd in results.csv)")
    if budget is not None:
        print(f"  budget:          {budget.summary()}")
    if budget is not None and budget.reason:
        ended = ", ".join(f"{n} {why}" for why, n in table["ended"].value_counts().items())
        print(f"  budget:          the sweep ended on {budget.reason}; no trial started after, running ones were stopped ({ended})")
    count, size = checkpoint_disk_use(results)
    keep = cfg["checkpoints"]["keep_per_trial"]
    budget = f"the best {keep} per trial" if keep else "all kept; set checkpoints.keep_per_trial=K to keep fewer"
    print(f"  checkpoints:     {count} on disk, {size / 2**20:.1f} MiB ({budget})")
    return results


def untrained_eval_loss(cfg: dict, task, data: PreparedData) -> float:
    """The validation loss of the model every trial starts from (same seed), as a baseline."""
    from transformers import set_seed

    tokenizer = task.load_processor(data.tokenizer_path)
    set_seed(cfg["seed"])
    model = build_model(cfg["model"], tokenizer, data.label_names, task=task)
    return evaluate_model(model, tokenizer, data.validation_path, data_collator=task.collator(cfg, tokenizer))
