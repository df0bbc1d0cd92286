"""`loop=hf_trainer`: data shard, model, a prepared `transformers.Trainer`, on every worker.

`train_loop_per_worker` runs in every Ray Train worker, or in the trial's own process for a
single-worker trial. The Trainer writes its checkpoints straight into the trial's Train run
directory, and `ReportCheckpointCallback` reports each one where it lies, so a checkpoint is
written once and never copied.
"""

from __future__ import annotations

import os
import time

import datasets
import ray.train
import transformers
from hydra.utils import instantiate  # only to build `_target_` callbacks; Hydra's app stays on the driver
from ray.train.huggingface.transformers import prepare_trainer
from transformers import PrinterCallback, Seq2SeqTrainingArguments, Trainer, TrainerCallback, TrainingArguments

from hfsweep.config.loading import import_object
from hfsweep.contract.metrics import MAX_STEPS, progress
from hfsweep.contract.pointers import checkpoint_dir_name
from hfsweep.contract.protocols import EvalContext
from hfsweep.contract.recipe import TrainingRecipe, TrainJob
from hfsweep.loops.common import (
    GpuFeatures,
    WhatRan,
    apply_hyperparameters,
    attention,
    batches_drawn,
    check_finite,
    hardware_defaults,
    hyperparameters_in_effect,
    quiet_logs,
    report_to_sweep,
    resumable,
    resume_checkpoint,
    seeded_passes,
    trained_to_the_end,
    validation_shard,
    with_perplexity,
    worker_seed,
)
from hfsweep.loops.cost import Cost
from hfsweep.models import build_model, weights_digest
from hfsweep.tasks.data_hooks import batches_collator, examples_collator


class ReportCheckpointCallback(TrainerCallback):
    """After every save, report the latest metrics, what the worker trains with (`ran`), what its
    training costs (`cost`: hfsweep's throughput wins over the Trainer's own) and the checkpoint the
    Trainer just wrote.

    `extra` holds what other callbacks add to the next report; `progress_of(step)` is the data
    `step` steps have trained on (`hfsweep.contract.metrics.progress`).
    """

    def __init__(self, extra: dict, trial_started_at: float, in_process: bool, ran: WhatRan, cost: Cost, progress_of):
        self.extra, self.ran, self.cost, self.progress_of = extra, ran, cost, progress_of
        self.trial_started_at = trial_started_at
        self.in_process = in_process

    def on_step_begin(self, args, state, control, **kwargs):
        if self.trial_started_at is not None:  # the first step of this run: the trial's fixed overhead
            self.extra["startup_s"] = time.time() - self.trial_started_at
            self.trial_started_at = None
            self.cost.start()

    def on_save(self, args, state, control, **kwargs):
        metrics = {}
        for entry in state.log_history:
            metrics.update(entry)
        metrics.update(self.extra)
        self.extra.clear()
        metrics.update(self.ran.metrics())
        metrics.update(self.cost.metrics())
        metrics["step"], metrics[MAX_STEPS] = state.global_step, state.max_steps
        # ours, not the Trainer's epoch: it counts passes of an iterable it cannot size
        metrics.update(self.progress_of(state.global_step))
        # The Trainer ends itself at max_steps or when a callback (early stopping) says so.
        metrics["trainer_finished"] = bool(control.should_training_stop or state.global_step >= state.max_steps)
        checkpoint_dir = None
        if state.is_world_process_zero:
            checkpoint_dir = os.path.join(args.output_dir, checkpoint_dir_name(state.global_step))
        report_to_sweep(with_perplexity(metrics, self.cost.task), checkpoint_dir, self.in_process)


class StopOnDivergence(TrainerCallback):
    """A non-finite training or eval loss ends the trial as errored, with the step and the value,
    instead of training on (and checkpointing) garbage until max_steps."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        for key in ("loss", "eval_loss"):
            check_finite(key, (logs or {}).get(key), state.global_step)


class SaveWhenStopped(TrainerCallback):
    """A callback that ends training (early stopping, at an evaluation that is not a save step)
    makes the Trainer save that step too: otherwise the trial's last report is an older save that
    says it has not finished, and the checkpoint budget frees its checkpoints as a stopped trial's.
    Runs after the callbacks that stop."""

    def on_step_end(self, args, state, control, **kwargs):
        control.should_save |= control.should_training_stop

    def on_evaluate(self, args, state, control, **kwargs):
        control.should_save |= control.should_training_stop


class ApplyHyperparametersOnResume(TrainerCallback):
    """Make a resumed trial train with its own hyperparameters, not the checkpoint's.

    `Trainer.train(resume_from_checkpoint=...)` restores the optimizer and LR scheduler state before
    the first step begins, so they are applied at its `on_step_begin`. The digest of the restored
    weights, and the hyperparameters the optimizer holds at its first step, go into the next
    report, so the copy can be checked.
    """

    def __init__(self, training: dict, resumed_from: str, report: dict):
        self.training = training
        self.resumed_from, self.report, self.applied, self.recorded = resumed_from, report, False, False

    def on_step_begin(self, args, state, control, model=None, optimizer=None, lr_scheduler=None, **kwargs):
        if self.applied:
            return
        self.applied = True
        apply_hyperparameters(optimizer, lr_scheduler, self.training)
        self.report.update(resumed_from=self.resumed_from, resumed_weights_digest=weights_digest(model))

    def on_pre_optimizer_step(self, args, state, control, optimizer=None, **kwargs):
        if not self.recorded:
            self.recorded = True
            self.report.update(hyperparameters_in_effect(optimizer))


def training_arguments(recipe: TrainingRecipe, output_dir: str, task) -> TrainingArguments:
    """The Trainer's arguments from the recipe (with the GPU defaults this GPU runs), plus what
    hfsweep owns: paths, device, logging. Their class is the one the Trainer class names as its
    `arguments_class` (trainer=sft: TRL's SFTConfig), else Seq2SeqTrainingArguments for a task that
    generates, else TrainingArguments."""
    args = {**recipe.training, **hardware_defaults(recipe, GpuFeatures.here()), **recipe.strategy_training_args}
    args.setdefault("seed", recipe.seed)
    default_class = Seq2SeqTrainingArguments if task.generates else TrainingArguments
    arguments_class = getattr(import_object(recipe.trainer["_target_"]), "arguments_class", default_class)
    return arguments_class(
        output_dir=output_dir,
        use_cpu=not recipe.use_gpu,
        report_to="none",  # Tune records the metrics; nothing is logged twice
        log_level_replica="error",
        save_only_model=False,
        **args,
    )


def build_trainer(
    recipe: TrainingRecipe,
    task,
    *,
    model,
    tokenizer,
    args: TrainingArguments,
    train_dataset,
    eval_dataset,
    callbacks,
    label_names=None,
    validation_path=None,
) -> Trainer:
    """The configured Trainer class (`trainer._target_`: transformers.Trainer or a subclass, with
    its own arguments from config), with the task's collator and the configured `eval_metrics`."""
    trainer_class = instantiate(recipe.trainer, _partial_=True)
    return trainer_class(
        model=model,
        args=args,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        processing_class=tokenizer,
        data_collator=examples_collator(task, recipe.data_collator, tokenizer),
        callbacks=callbacks,
        compute_metrics=task.metrics_for(
            recipe.compute_metrics,
            recipe.eval_metrics,
            EvalContext(label_names, tokenizer, validation_path, recipe.data),
        ),
    )


def train_loop_per_worker(job: TrainJob) -> None:
    """Build tokenizer, model, data shard and Trainer from the trial's job, then train."""
    recipe, task, in_process = job.recipe, job.task, job.in_process
    resume_from = resume_checkpoint(job)
    if trained_to_the_end(resume_from, recipe.training):
        return
    quiet_logs(0 if in_process else ray.train.get_context().get_world_rank())

    tokenizer = task.load_processor(job.tokenizer_path)  # a tokenizer, or the Task's other processor
    task.prepare_tokenizer(tokenizer, recipe.data)  # saved with every checkpoint's tokenizer
    validation = datasets.load_from_disk(job.validation_path)
    transformers.set_seed(recipe.seed)  # every trial starts from the same initial weights
    # peft: an adapter over it
    model = build_model(recipe.model, tokenizer, job.label_names, recipe.peft, task=task, attention=attention(recipe))

    collate = batches_collator(task, recipe.data_collator, tokenizer, "train", worker_seed(recipe.seed, in_process))
    shard = ray.train.get_dataset_shard("train")
    train_shard = resumable(
        seeded_passes(shard, recipe.training, recipe.data, collate, recipe.seed),
        drawn_before=batches_drawn(resume_from, recipe.training),
    )
    validation_collate = batches_collator(task, recipe.data_collator, tokenizer, "validation")
    eval_shard = validation_shard(recipe.data, recipe.training["per_device_eval_batch_size"], validation_collate)

    extra_metrics: dict = {}
    workers = 1 if in_process else ray.train.get_context().get_world_size()
    reporter = ReportCheckpointCallback(
        extra_metrics,
        job.trial_started_at,
        in_process,
        WhatRan(model),
        Cost(model, task),
        progress_of=lambda step: progress(step, recipe.training, workers, job.train_examples),
    )
    callbacks = [StopOnDivergence(), reporter]
    callbacks += [instantiate(node) for node in recipe.callbacks.values()] + [SaveWhenStopped()]
    if resume_from:
        callbacks.append(ApplyHyperparametersOnResume(recipe.training, resume_from, extra_metrics))

    trainer = build_trainer(
        recipe,
        task,
        model=model,
        tokenizer=tokenizer,
        args=training_arguments(recipe, job.output_dir, task),
        train_dataset=train_shard,
        eval_dataset=validation if eval_shard is None else eval_shard,
        callbacks=callbacks,
        label_names=job.label_names,
        validation_path=job.validation_path,
    )
    trainer.remove_callback(PrinterCallback)  # Tune's table reports progress
    trainer = prepare_trainer(trainer)
    trainer.train(resume_from_checkpoint=resume_from)
