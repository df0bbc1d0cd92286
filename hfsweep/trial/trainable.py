"""The Tune trainable: one trial trains one model, in its own process or on a Ray Train worker group.

A single-worker trial runs Train V2's local mode (`num_workers=0`): the training function runs in
the trial's own process and reports straight to Tune, with no controller, placement group or
worker actors to start. A multi-worker trial fits a `TorchTrainer`; Train V2 runs user callbacks in
its controller actor while the trial blocks in `fit()`, so `ForwardToTune` sends every report
(metrics plus the path of the checkpoint the workers wrote) through a Ray queue back to the trial
process, whose main thread re-reports it to Tune. Either way Tune sees every checkpoint as a
pointer (`hfsweep.contract.pointers`), so schedulers can restore trials and PBT can exploit.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from dataclasses import replace
from typing import Optional

import ray.data
import ray.exceptions
import ray.train
from ray import tune
from ray.train.torch import TorchTrainer
from ray.util.queue import Queue

from hfsweep.config.loading import TASK_OPTIONS
from hfsweep.config.resources import resource_names, trains_in_process
from hfsweep.config.schema import SweepConfig, merged
from hfsweep.contract.metrics import steps_for_epochs
from hfsweep.contract.pointers import HF_CHECKPOINTS, read_pointer, report_to_tune
from hfsweep.contract.recipe import TrainingRecipe, TrainJob
from hfsweep.data.prepared import PreparedData, load_ray_datasets, what_is_prepared
from hfsweep.tasks import with_options
from hfsweep.trial.train_fn import ForwardToTune, train_loop


def train_run_name(trial_id: str, resume_from: Optional[str]) -> str:
    """Stable per (trial, starting checkpoint): a retried trial resumes its own run, while a
    trial restored from another checkpoint (PBT) starts a fresh run from that checkpoint."""
    if resume_from is None:
        return trial_id
    return f"{trial_id}-from-{hashlib.sha256(resume_from.encode()).hexdigest()[:8]}"


def data_changed(recipe: TrainingRecipe, trial_recipe: TrainingRecipe, task, trial_task) -> bool:
    """A searched key the prepared data depends on: a data or tokenizer key, or a task option
    (not the task's `worker_options`, such as masked LM's mlm_probability, applied on the workers)."""
    return (
        what_is_prepared(trial_recipe.data) != what_is_prepared(recipe.data)
        or trial_task.identity() != task.identity()
        or trial_recipe.model.tokenizer != recipe.model.tokenizer
    )


def run_trial(sampled: dict, *, sweep: SweepConfig, task, data: PreparedData, ray_datasets: dict) -> None:
    """Tune function trainable: train the sampled config, report every checkpoint to Tune.

    Any key may be searched, so the trial merges the sampled values into the sweep's typed config
    (`merged`), then hands the loop on each worker a `TrainJob` of the typed parts it reads.
    `sweep`, `task`, `data` and `ray_datasets` are the sweep's, built once by the driver; a trial
    whose sampled values change what they depend on builds its own."""
    logging.getLogger("ray.train").setLevel(logging.WARNING)  # one line per checkpoint otherwise
    started_at = time.time()
    # searched task options go to the Task, their one home below the driver (the config has none)
    options = sampled.get(TASK_OPTIONS)
    trial_task = with_options(task, options) if options else task
    trial = merged(sweep, {key: value for key, value in sampled.items() if key != TASK_OPTIONS})
    sweep_recipe, recipe = TrainingRecipe.of(sweep), TrainingRecipe.of(trial)
    changed = data_changed(sweep_recipe, recipe, task, trial_task)
    task = trial_task
    if changed:  # a searched data, tokenizer or task key: prepare (cached) for this trial
        from hfsweep.data.prepare import prepare  # the `datasets` library: only a trial that prepares imports it

        data = prepare(recipe.data, recipe.model, sweep.cache_dir, task)
    cluster = trial.cluster  # cluster.* may be searched too
    if recipe.training["max_steps"] == -1:
        # the trial's (maybe searched) epochs in steps at its (maybe searched) batch size, over the data it
        # trains on, so trials of different batch sizes see the same data; a fraction `warmup_steps`
        # (below 1: a share of the steps) stays the Trainer's to apply
        steps = steps_for_epochs(recipe.training, max(1, cluster.num_workers), data.num_train_blocks)
        recipe = replace(recipe, training={**recipe.training, "max_steps": steps})
    if changed or recipe.seed != sweep_recipe.seed:  # a searched seed (replay) reshuffles too
        ray_datasets = load_ray_datasets(data, recipe.data.datasets_to_split, recipe.seed)
    resume_from = read_pointer(tune.get_checkpoint())
    run_name = train_run_name(tune.get_context().get_trial_id(), resume_from)
    train_runs = os.path.join(cluster.storage_path, sweep.name, "train_runs")
    job = TrainJob(
        recipe=recipe,
        task=task,
        tokenizer_path=data.tokenizer_path,
        validation_path=data.validation_path,
        train_examples=data.num_train_blocks,
        label_names=data.label_names,
        output_dir=os.path.join(train_runs, run_name, HF_CHECKPOINTS),
        resume_from=resume_from,
        trial_started_at=started_at,
        in_process=trains_in_process(cluster, trial.strategy),
    )
    data_config = ray.train.DataConfig(
        datasets_to_split=recipe.data.datasets_to_split,
        # shards read in parallel still arrive in their seeded order: a seed gives one sequence of batches
        execution_options=ray.data.ExecutionOptions(preserve_order=True),
    )
    if job.in_process:
        TorchTrainer(
            train_loop,
            train_loop_config={"job": job},
            scaling_config=ray.train.ScalingConfig(num_workers=0),  # Train V2 local mode
            datasets=ray_datasets,
            dataset_config=data_config,
        ).fit()
        return
    reports = Queue(actor_options={"num_cpus": 0})
    trainer = TorchTrainer(
        train_loop,
        train_loop_config={"job": job},
        scaling_config=ray.train.ScalingConfig(
            num_workers=cluster.num_workers,
            use_gpu=cluster.use_gpu,
            resources_per_worker=resource_names(cluster.resources_per_worker),
        ),
        run_config=ray.train.RunConfig(
            name=run_name,
            storage_path=train_runs,
            callbacks=[ForwardToTune(reports)],
            failure_config=ray.train.FailureConfig(max_failures=cluster.max_failures),
            logging_config=ray.train.LoggingConfig(log_level="WARNING"),
        ),
        datasets=ray_datasets,
        dataset_config=data_config,
    )
    _fit_and_forward(trainer, reports)


def _fit_and_forward(trainer: TorchTrainer, reports: Queue) -> None:
    """Fit in a thread; re-report each queued result to Tune from this (the trial's) thread."""
    outcome: dict = {}

    def fit() -> None:
        try:
            trainer.fit()
        except BaseException as err:  # re-raised in the trial's main thread below
            outcome["error"] = err
        finally:
            try:
                reports.put(None)
            except ray.exceptions.RayActorError:
                pass  # the queue died with this trial, which Tune is stopping: nobody is left to read it

    thread = threading.Thread(target=fit, name="hfsweep-fit", daemon=True)
    thread.start()
    while (item := reports.get()) is not None:
        report_to_tune(*item)
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
