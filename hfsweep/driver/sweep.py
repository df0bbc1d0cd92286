"""The sweep driver: data once, Ray, the Tuner, results.

`run` takes the resolved config as a plain dict (workers never see Hydra) and returns Tune's
ResultGrid. Everything a sweep writes lives under `cluster.storage_path` (the Hydra run
directory by default): the resolved config, Tune's experiment directory, and the Train runs.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import pandas as pd
from ray import tune

from hfsweep.compat import forget_points_to_evaluate, hide_from_result_tables, restored_callbacks
from hfsweep.config.errors import ConfigError
from hfsweep.config.loading import TASK_OPTIONS, import_object, iter_leaves
from hfsweep.config.objectives import first_objective, is_multi_objective
from hfsweep.config.resources import trains_in_process
from hfsweep.config.saved import extended_config, saved_config
from hfsweep.config.schema import ClusterConfig, DataConfig, ModelConfig, PeftConfig, PrepareOn, StrategyConfig, typed
from hfsweep.contract.metrics import SAMPLES_PER_SECOND, TRAINABLE_PARAMS
from hfsweep.contract.recipe import TrainingRecipe
from hfsweep.data.prepare import PreparedData, load_ray_datasets, prepare, prepare_apart
from hfsweep.driver.loggers import build_loggers
from hfsweep.driver.preflight import CheckedConfig, preflight
from hfsweep.driver.provenance import write_provenance
from hfsweep.driver.ray_cluster import (
    check_storage_writable,
    check_trial_fits,
    init_ray,
    reserved_by_tune,
    searcher_cap,
)
from hfsweep.driver.results.best import BestTrial, best_trial, write_best
from hfsweep.driver.results.evaluation import evaluate_model
from hfsweep.driver.results.export import export_best
from hfsweep.driver.results.held_out import held_out_lines, held_out_scorer, search_test
from hfsweep.driver.results.report import write_report
from hfsweep.driver.results.select import (
    candidates_from,
    rank,
    retrained,
    score_on_test,
    selection_config,
    selection_points,
    selection_summary,
    top_configurations,
    winner_checkpoint,
    write_selection,
)
from hfsweep.driver.results.summary import selection_spend_lines, sweep_summary
from hfsweep.driver.search.budget import SweepBudget, build_budget, spent_before
from hfsweep.driver.search.checkpoint_budget import build_checkpoint_budget, checkpoint_disk_use
from hfsweep.driver.search.defaults_trial import defaults_point, defaults_values, is_defaults
from hfsweep.driver.search.defaults_trial import wanted as defaults_trial_wanted
from hfsweep.driver.search.live_study import check_new_studies, close_lost_trials, study_exists
from hfsweep.driver.search.scheduler_records import build_scheduler_records
from hfsweep.driver.search.schedulers import (
    build_scheduler,
    build_search_alg,
    build_stopper,
    drawn_at_random,
    startup_note,
    startup_trials,
)
from hfsweep.driver.search.search_space import compile_search_space
from hfsweep.driver.search.warm_start import load_warm_start, searcher_arguments, warm_start_dirs
from hfsweep.models import (
    build_model,
    check_model_fits_task,
    check_peft_targets,
    check_pretrained_reachable,
    check_weights_digest,
)
from hfsweep.run_dir import RESULTS_FILE, SELECT_DIR, SELECTION_FILE, experiment_names, write_config
from hfsweep.tasks.data_hooks import examples_collator
from hfsweep.trial.trainable import run_trial

NO_AUTO_LOGGERS = "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"
# Left out of the table Tune prints as each trial ends, which stays as long as before the cost metrics:
# Tune's name of its pointer checkpoint (`checkpoint_path` is the real one), and what results.csv holds.
NOT_PRINTED = ("checkpoint_dir_name", SAMPLES_PER_SECOND, TRAINABLE_PARAMS)


def trainable_for(cfg: dict, task, data: PreparedData):
    """The Tune trainable: `run_trial` bound to the config, its training recipe and its Task (each
    built here, once; the Task is handed to every trial's workers) and the shared Ray Datasets,
    with what Tune reserves for each trial (`reserved_by_tune`). The trials get the task options in
    the Task alone: the config's `task_options` node, which resolved_config.yaml records and
    searches address, stays here."""
    ray_datasets = load_ray_datasets(data, cfg["data"]["datasets_to_split"], cfg["seed"])  # once, shared by every trial
    trial_cfg = {key: value for key, value in cfg.items() if key != TASK_OPTIONS}
    return tune.with_resources(
        tune.with_parameters(
            run_trial,
            cfg=trial_cfg,
            recipe=TrainingRecipe.of(trial_cfg),
            task=task,
            data=data,
            ray_datasets=ray_datasets,
        ),
        reserved_by_tune(typed(ClusterConfig, cfg["cluster"]), typed(StrategyConfig, cfg["strategy"])),
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
    elif note := startup_note(cfg):  # a warm start's earlier trials are its start-up
        setup.notes.append(note)
    point = defaults_point(cfg)
    if point is not None:
        setup.searcher_arguments["points_to_evaluate"] = [point]
        setup.num_samples = cfg["num_samples"] + 1  # Tune counts the point as one of the samples
        values = ", ".join(f"{path}={value}" for path, value in defaults_values(cfg).items())
        setup.notes.append(f"defaults trial: the config's own {values} runs first (search_alg.defaults_trial)")
    return setup


@dataclass
class SweepPlan:
    """What a sweep runs, built from a checked config before Ray starts (`plan_sweep`): Tune's
    param space, scheduler, stopper and callbacks, the prepared data, and what the searcher adds."""

    cfg: dict
    task: object
    param_space: dict
    scheduler: object
    stopper: object
    callbacks: list
    data: Optional[PreparedData]
    setup: SearchSetup = field(default_factory=SearchSetup)


def plan_sweep(cfg: dict, task) -> SweepPlan:
    """Everything else that can fail on bad input (the search space, a warm start, a model the
    hub cannot reach, data files), before Ray starts."""
    param_space = compile_search_space(cfg["search_space"], cfg)
    setup = search_setup(cfg, param_space)
    scheduler, stopper = build_scheduler(cfg, param_space), build_stopper(cfg, *filter(None, [setup.budget]))
    records = build_scheduler_records(scheduler)
    callbacks = [*build_loggers(cfg), *filter(None, [build_checkpoint_budget(cfg), setup.budget, records])]
    model_cfg = typed(ModelConfig, cfg["model"])
    check_pretrained_reachable(model_cfg)
    check_model_fits_task(model_cfg, task)
    check_weights_digest(model_cfg, cfg["cache_dir"])
    check_peft_targets(model_cfg, typed(PeftConfig, cfg["peft"]), cfg["search_space"], task)
    data_cfg = typed(DataConfig, cfg["data"])
    if data_cfg.prepare_on == PrepareOn.cluster:  # the one preparation that needs Ray: tasks on the cluster's nodes
        init_ray(typed(ClusterConfig, cfg["cluster"]))
        data = prepare(data_cfg, model_cfg, cfg["cache_dir"], task)
    else:  # the driver starts Ray after it, holding no tokenizer threads
        data = prepare_apart(data_cfg, model_cfg, cfg["cache_dir"], task)
    return SweepPlan(cfg, task, param_space, scheduler, stopper, callbacks, data, setup)


def start_cluster(cfg: dict) -> Optional[int]:
    """Start (or join) Ray and check that a trial fits on it; the searcher's cap on live trials,
    which refuses a PBT population that could not be alive at once."""
    cluster = typed(ClusterConfig, cfg["cluster"])
    init_ray(cluster)
    check_trial_fits(cluster, typed(StrategyConfig, cfg["strategy"]))
    return searcher_cap(cfg)


def build_tuner(plan: SweepPlan, cap: Optional[int]) -> tune.Tuner:
    """In-process trials reuse their actors (imports paid once per actor) and are retried by Tune
    from their latest checkpoint; a worker group is restarted by Train instead. Several objectives
    are the searcher's alone (TuneConfig takes one metric); a trial's checkpoints are ranked by
    the first. `cap`: `start_cluster`'s."""
    cfg, setup = plan.cfg, plan.setup
    cluster = typed(ClusterConfig, cfg["cluster"])
    in_process = trains_in_process(cluster, typed(StrategyConfig, cfg["strategy"]))
    single = not is_multi_objective(cfg)
    return tune.Tuner(
        trainable_for(cfg, plan.task, plan.data),
        param_space=plan.param_space,
        tune_config=tune.TuneConfig(
            metric=cfg["metric"] if single else None,
            mode=cfg["mode"] if single else None,
            scheduler=plan.scheduler,
            search_alg=build_search_alg(cfg, cap, setup.searcher_arguments),
            num_samples=setup.num_samples or cfg["num_samples"],  # the concurrency cap is on the search algorithm
            reuse_actors=in_process,
            trial_dirname_creator=trial_dirname,
        ),
        run_config=tune.RunConfig(
            name=cfg["name"],
            storage_path=cluster.storage_path,
            checkpoint_config=tune.CheckpointConfig(
                # Tune keeps every pointer (a few bytes each; PBT may exploit any of them later), and the
                # checkpoint budget frees the weights they point to: pruning them here would make Tune
                # snapshot its state at every checkpoint, and warn about it
                num_to_keep=None,
                checkpoint_score_attribute=first_objective(cfg)[0],
                checkpoint_score_order=first_objective(cfg)[1],
            ),
            stop=plan.stopper,
            failure_config=tune.FailureConfig(max_failures=cluster.max_failures if in_process else 0),
            callbacks=plan.callbacks,
            verbose=1,  # Tune's status table; per-trial detail is in the experiment directory
        ),
    )


def trial_dirname(trial) -> str:
    """A trial's folder: its trainable and id. Tune's default adds the sampled values rounded to
    four digits (a learning rate of 5e-5 named 0.0001); params.json and results.csv hold them."""
    return f"{trial.trainable_name}_{trial.trial_id}"


def run(checked: CheckedConfig) -> tune.ResultGrid:
    """Prepare data and run the sweep of a config that passed the preflight; return Tune's
    ResultGrid. Its Task is handed to every layer below."""
    if not isinstance(checked, CheckedConfig):
        raise TypeError(
            "sweep.run takes the CheckedConfig of hfsweep.driver.preflight.preflight(cfg), not "
            f"{type(checked).__name__}"
        )
    cfg, task = checked.cfg, checked.task
    check_new_studies([cfg])  # before the data is prepared: a refusal is one line
    plan = plan_sweep(cfg, task)
    storage = cfg["cluster"]["storage_path"]
    check_storage_writable(storage)
    cap = start_cluster(cfg)
    # Everything is checked: only now does the run directory get the sweep's files.
    write_config(storage, cfg)
    write_provenance(storage, cfg)
    for note in plan.setup.notes:
        print(f"hfsweep: {note}")
    return finish(tune_fit(build_tuner(plan, cap)), cfg, task, plan.data, plan.setup.budget)


def resume(run_dir: str, overrides: list[str] = (), force: bool = False) -> tune.ResultGrid:
    """Continue an interrupted sweep from its run directory: finished trials are kept, unfinished
    and errored ones resume from their latest checkpoint. The saved config is the config; an
    override that changes it is refused unless `force`. After `resume --extend`, the extension is
    what continues."""
    checked = preflight(saved_config(run_dir, overrides, force))
    cfg, task = checked.cfg, checked.task
    *earlier_names, latest = experiment_names(run_dir, cfg["name"])  # an extension is the latest experiment
    experiment = os.path.join(run_dir, latest)
    if not tune.Tuner.can_restore(experiment):
        raise ConfigError(f"resume: '{experiment}' holds no Tune experiment state; nothing to resume.")
    plan = plan_sweep(cfg, task)
    start_cluster(cfg)
    # The loggers, the checkpoint budget and the sweep's budget come back with the Tuner, their state
    # included; an extension's searcher with the points it was left to run.
    trainable = trainable_for({**cfg, "name": latest}, task, plan.data)
    tuner = tune.Tuner.restore(experiment, trainable, resume_errored=True, param_space=plan.param_space)
    if study_exists(cfg):
        forget_points_to_evaluate(tuner)
    budget = next((c for c in restored_callbacks(tuner) if isinstance(c, SweepBudget)), None)
    if budget is None and build_budget(cfg) is not None:
        raise RuntimeError(
            "resume: Tune restored the sweep without its budget (hfsweep.compat.restored_callbacks "
            "found none: Ray's private TunerInternal has moved); pin ray to the version in "
            "provenance.json to resume this sweep."
        )
    earlier = [tune.ResultGrid(tune.ExperimentAnalysis(os.path.join(run_dir, name))) for name in earlier_names]
    return finish(tune_fit(tuner), cfg, task, plan.data, budget, earlier)


def extend(run_dir: str, extends: list[str]) -> tune.ResultGrid:
    """Add trials to a finished sweep (`resume --extend`). Tune restores an experiment with its
    own sample count and searcher (`Tuner.restore` takes only the same param_space), so the new
    trials are a new experiment in the run directory, NAME-extend-N, whose searcher is warm-started
    with every trial run so far: a grid runs only the points not run, Optuna's sampler models the
    old trials first, random search draws the samples still missing. results.csv and best/ then
    cover every experiment; `resume` continues an interrupted extension."""
    cfg = extended_config(run_dir, extends)
    check_extendable(cfg, run_dir)
    names = experiment_names(run_dir, cfg["name"])
    done = len(pd.read_csv(os.path.join(run_dir, RESULTS_FILE)))
    grid = searches_grid(cfg)
    if not grid and cfg["num_samples"] <= done:
        raise ConfigError(
            f"resume --extend: num_samples={cfg['num_samples']}, and {run_dir} ran {done} trials "
            f"already; give a larger num_samples."
        )
    added = {
        **cfg,
        "name": f"{cfg['name']}-extend-{len(names)}",
        "num_samples": cfg["num_samples"] if grid else cfg["num_samples"] - done,  # a grid's: per new point
        "search_alg": extension_searcher(cfg, run_dir, grid, len(names)),
    }
    checked = preflight(added)
    # the warm start reads the saved config, so it is replaced only after
    plan = plan_sweep(added, checked.task)
    budget = plan.setup.budget
    analyses = [tune.ExperimentAnalysis(os.path.join(run_dir, name)) for name in names]
    if budget is not None:  # one budget for the whole sweep: the extension spends what is left
        budget.set_state(spent_before(analyses))
        if budget.stop_all():
            raise ConfigError(
                f"resume --extend: {run_dir} has spent {budget.reason} already; raise that budget to add trials."
            )
    cap = start_cluster(added)
    write_config(run_dir, cfg)  # the sweep's config is the extended one from now on
    for note in plan.setup.notes:
        print(f"hfsweep: extend: {note}")
    earlier = [tune.ResultGrid(analysis) for analysis in analyses]
    return finish(tune_fit(build_tuner(plan, cap)), cfg, checked.task, plan.data, budget, earlier)


def check_extendable(cfg: dict, run_dir: str) -> None:
    """Only searchers that can be told the old trials extend a sweep (a grid, and Optuna), and
    random search, which needs told nothing."""
    from ray.tune.search.optuna import OptunaSearch

    searcher = import_object(cfg["search_alg"]["_target_"])
    if not issubclass(searcher, (tune.search.BasicVariantGenerator, OptunaSearch)):
        raise ConfigError(
            f"resume --extend: {run_dir} searched with {searcher.__name__}, which cannot be told the "
            f"trials run so far; only a grid, random search or search_alg=optuna can be extended."
        )
    if is_multi_objective(cfg):
        raise ConfigError("resume --extend: a sweep of several objectives cannot be extended yet.")


def extension_searcher(cfg: dict, run_dir: str, grid: bool, number: int) -> dict:
    """The search_alg of extension `number`: a grid or Optuna warm-started with every trial run so
    far; random search drawing new points from its own seed, derived from the sweep's
    `random_state` and the extension's number (the sweep's seed would draw its first points again)."""
    node = dict(cfg["search_alg"])
    if grid or not issubclass(import_object(node["_target_"]), tune.search.BasicVariantGenerator):
        # what the sweep started from, too; its study is in memory (the live one is the sweep's own)
        return {**node, "warm_start": [*warm_start_dirs(cfg), run_dir], "storage": None}
    if node.get("random_state") is not None:
        node["random_state"] = int(np.random.SeedSequence([node["random_state"], number]).generate_state(1)[0])
    return node


def searches_grid(cfg: dict) -> bool:
    return any(spec["sampler"] == "grid" for _, spec in iter_leaves(cfg["search_space"]))


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


def finish(
    results: tune.ResultGrid,
    cfg: dict,
    task,
    data: PreparedData,
    budget: Optional[SweepBudget] = None,
    earlier: list[tune.ResultGrid] = (),
) -> tune.ResultGrid:
    """Best trial (over the `earlier` experiments' trials too, for an extended sweep), exported
    model, tables and plots, and the one-screen summary (which says whether the sweep ended on its budget)."""
    if results.num_terminated == 0:
        raise RuntimeError(f"no trial finished ({results.num_errors} errored); see the errors above.")
    storage = cfg["cluster"]["storage_path"]
    best = best_of([*earlier, results], cfg)
    if not cfg["select"]["top_k"] and (score := held_out_scorer(cfg, task)):  # a selection scores its own runs
        trials = [result for grid in (*earlier, results) for result in grid]
        best = dataclasses.replace(best, test=search_test(trials, best, cfg, score))
    write_best(best, storage)
    export_best(best, cfg, task, os.path.join(storage, "best"), data.label_names)
    table = write_report(storage)
    print(
        sweep_summary(
            best,
            table,
            cfg,
            untrained_loss=untrained_eval_loss(cfg, task, data),
            perplexity=task.reports_perplexity,
            startup=startup_trials(cfg),
            drawn_at_random=drawn_at_random(
                cfg, [result.metrics_dataframe for grid in (*earlier, results) for result in grid]
            ),
            budget=budget,
            checkpoints=checkpoint_disk_use(result.metrics_dataframe for result in results),
        )
    )
    for line in held_out_lines(best.test, best.metric):
        print(f"  {line}")
    unfinished = int(table["ended"].isin(UNFINISHED).sum())
    if not unfinished and (lost := close_lost_trials(cfg)):
        print(f"hfsweep: study: {lost} lost trial(s) marked FAIL: asked for by a killed run, then asked again")
    if cfg["select"]["top_k"] and unfinished:
        print(
            f"hfsweep: select: not run: the search was interrupted with {unfinished} trials unfinished; "
            f"python -m hfsweep.resume {storage} finishes it, then selects"
        )
    elif cfg["select"]["top_k"]:
        select_over_seeds(results, cfg, task, data, budget, search_cost=table.get("cost_usd"))
    return results


UNFINISHED = ("running", "pending")  # what results.csv says of trials a Ctrl-C left (Tune's fit returns after it)
CUT_SHORT = ("stopped by scheduler/stopper", "never started")  # a selection's runs, by the budget (no scheduler)


def select_over_seeds(
    results: tune.ResultGrid,
    cfg: dict,
    task,
    data: PreparedData,
    budget: Optional[SweepBudget] = None,
    search_cost: Optional[pd.Series] = None,
) -> None:
    """Re-train the search's `select.top_k` best configurations once per seed, as one sweep in
    RUN_DIR/select/ on the same data; best/ and best.json become the winner's (best mean) median seed.
    A budget bounds the selection too: it draws on what the search left (the same ledger), and is
    skipped when the search spent it all."""
    storage = cfg["cluster"]["storage_path"]
    out = os.path.join(storage, SELECT_DIR)
    if os.path.exists(os.path.join(out, SELECTION_FILE)):  # a resumed sweep whose selection ran already
        print(f"hfsweep: {out} holds a finished selection: it is not run again (move it away to select anew)")
        return
    if budget is not None and budget.reason:
        print(
            f"hfsweep: select: skipped: the search spent the sweep's budget ({budget.reason}); raise it to "
            f"re-train the top {cfg['select']['top_k']} over seeds"
        )
        return
    top = top_configurations(results, cfg, cfg["select"]["top_k"])
    defaults = defaults_values(cfg) if defaults_trial_wanted(cfg) else None
    beside = defaults is not None and not any(is_defaults(c, defaults) for c in top)
    configurations = [*top, *([defaults] if beside else [])]  # the defaults re-trained beside the top K
    sub = selection_config(cfg, configurations, out)
    param_space = compile_search_space(sub["search_space"], sub)
    seeds = sub["select"]["seeds"]
    experiment = os.path.join(out, sub["name"])
    if tune.Tuner.can_restore(experiment):  # a selection cut short (a session's end): Tune continues it
        print(f"hfsweep: select: continuing the selection in {out}: finished runs are kept")
        trainable = trainable_for(sub, task, data)
        tuner = tune.Tuner.restore(experiment, trainable, resume_errored=True, param_space=param_space)
    else:
        os.makedirs(out, exist_ok=True)
        write_config(out, sub)
        print(f"hfsweep: select: re-training {retrained(len(top), beside)} over seeds {seeds} in {out}")
        points = selection_points(cfg, configurations)
        setup = SearchSetup(searcher_arguments={"points_to_evaluate": points}, num_samples=len(points))
        stopper = build_stopper(sub, *filter(None, [budget]))
        callbacks = [*build_loggers(sub), *filter(None, [budget])]
        plan = SweepPlan(sub, task, param_space, build_scheduler(sub, param_space), stopper, callbacks, data, setup)
        tuner = build_tuner(plan, searcher_cap(sub))
    reruns = tune_fit(tuner)
    rerun_table = write_report(out)
    for line in selection_spend_lines(rerun_table, search_cost, budget):
        print(line)
    cut = int(rerun_table["ended"].isin((*UNFINISHED, *CUT_SHORT)).sum())
    if cut:  # a mean over seeds cut short at different steps ranks no configuration
        why = f"the sweep's budget ({budget.reason})" if budget is not None and budget.reason else "an interruption"
        print(
            f"hfsweep: select: {cut} of {len(rerun_table)} runs were cut short by {why}: no winner is picked, and "
            f"best/ stays the search's best trial"
        )
        return
    model = cfg["select"]["model"]
    candidates = candidates_from(reruns, sub, configurations, model)
    defaults = next((c for c in configurations if defaults is not None and is_defaults(c, defaults)), None)
    selection = rank(candidates, cfg["metric"], cfg["mode"], cfg["select"]["confidence"], defaults, model)
    best = winner_checkpoint(selection)
    if score := held_out_scorer(cfg, task):
        best = dataclasses.replace(best, test=score_on_test(selection, cfg["data"]["test_split"], score))
    write_best(best, storage)
    export_best(best, cfg, task, os.path.join(storage, "best"), data.label_names)
    write_selection(selection, out)
    write_report(storage)  # results.md now ends with the selection
    print(selection_summary(selection, os.path.join(storage, "best")))
    for line in held_out_lines(best.test, best.metric):
        print(f"  {line}")


def best_of(grids: list[tune.ResultGrid], cfg: dict) -> BestTrial:
    """The best trial over several experiments; of equal values the later experiment's, as Tune ranks equal scores."""
    bests = [best_trial(grid, cfg) for grid in grids if grid.num_terminated]
    sign = 1 if cfg["mode"] == "max" else -1
    return max(reversed(bests), key=lambda best: sign * best.value)


def untrained_eval_loss(cfg: dict, task, data: PreparedData) -> float:
    """The validation loss of the model every trial starts from (same seed), as a baseline."""
    from transformers import set_seed

    tokenizer = task.load_processor(data.tokenizer_path)
    set_seed(cfg["seed"])
    model = build_model(typed(ModelConfig, cfg["model"]), tokenizer, data.label_names, task=task)
    return evaluate_model(
        model, tokenizer, data.validation_path, data_collator=examples_collator(task, cfg["data_collator"], tokenizer)
    )
