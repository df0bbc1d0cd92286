"""The per-worker training function: data shard, model, a prepared `transformers.Trainer`.

`train_loop_per_worker` runs in every Ray Train worker, or in the trial's own process for a
single-worker trial. The Trainer writes its checkpoints straight into the trial's Train run
directory, and `ReportCheckpointCallback` reports each one where it lies, so a checkpoint is
written once and never copied.
"""

from __future__ import annotations

import logging
import math
import os
import time

import datasets
import ray.train
import transformers
from hydra.utils import instantiate  # only to build `_target_` callbacks; Hydra's app stays on the driver
from ray.train import Checkpoint, CheckpointUploadMode
from ray.train.huggingface.transformers import prepare_trainer
from ray.train.v2._internal.execution import context as train_context  # only to quiet its per-report log line
from transformers import PrinterCallback, Trainer, TrainerCallback, TrainingArguments, default_data_collator

from hfsweep.data import label_names
from hfsweep.metrics import compute_metrics_for
from hfsweep.models import build_model, load_tokenizer, weights_digest
from hfsweep.tune_bridge import report_to_tune


def report(metrics: dict, checkpoint_dir: str | None, in_process: bool) -> None:
    """Hand one result and the checkpoint the loop just wrote (rank 0 only) to the sweep.

    In a trial's own process it goes straight to Tune. On a worker group it goes to Ray Train in
    place (`NO_UPLOAD`): every rank reports, since Train's report is a barrier.
    """
    if in_process:
        report_to_tune(metrics, checkpoint_dir)
        return
    ray.train.report(
        metrics,
        checkpoint=Checkpoint.from_directory(checkpoint_dir) if checkpoint_dir else None,
        checkpoint_dir_name=f"checkpoint-{metrics['step']}",
        checkpoint_upload_mode=CheckpointUploadMode.NO_UPLOAD,
    )


def validation_shard(cfg: dict, device="auto"):
    """This worker's Ray Data shard of the validation split, as torch batches, when
    `data.datasets_to_split` holds it; None when every worker evaluates the whole split (from
    disk). Ray splits it into equal shards, so up to num_workers - 1 examples go unevaluated."""
    if "validation" not in cfg["data"]["datasets_to_split"]:
        return None
    return ray.train.get_dataset_shard("validation").iter_torch_batches(
        batch_size=cfg["training"]["per_device_eval_batch_size"], device=device
    )


class ReportCheckpointCallback(TrainerCallback):
    """After every save, report the latest metrics and the checkpoint the Trainer just wrote.

    `extra` holds what other callbacks add to the next report.
    """

    def __init__(self, extra: dict, trial_started_at: float, in_process: bool):
        self.extra = extra
        self.trial_started_at = trial_started_at
        self.in_process = in_process

    def on_step_begin(self, args, state, control, **kwargs):
        if self.trial_started_at is not None:  # the first step of this run: the trial's fixed overhead
            self.extra["startup_s"] = time.time() - self.trial_started_at
            self.trial_started_at = None

    def on_save(self, args, state, control, **kwargs):
        metrics = {}
        for entry in state.log_history:
            metrics.update(entry)
        metrics.update(self.extra)
        self.extra.clear()
        metrics["step"] = state.global_step
        # The Trainer ends itself at max_steps or when a callback (early stopping) says so.
        metrics["trainer_finished"] = bool(control.should_training_stop or state.global_step >= state.max_steps)
        if "eval_loss" in metrics:
            metrics["eval_perplexity"] = math.exp(min(metrics["eval_loss"], 50.0))
        checkpoint_dir = None
        if state.is_world_process_zero:
            checkpoint_dir = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
        report(metrics, checkpoint_dir, self.in_process)


def quiet_logs(world_rank: int) -> None:
    """Leave progress to Tune's table: no per-report Ray lines, no save progress bars, and only
    errors from replicas other than rank 0."""
    logging.getLogger("ray.train").setLevel(logging.WARNING)
    # Train V2 logs every report ("Reporting training result ...") under its module's file path.
    logging.getLogger(train_context.__file__).setLevel(logging.WARNING)
    transformers.utils.logging.disable_progress_bar()
    if world_rank != 0:
        transformers.logging.set_verbosity_error()
        datasets.logging.set_verbosity_error()


class StopOnDivergence(TrainerCallback):
    """A non-finite training or eval loss ends the trial as errored, with the step and the value,
    instead of training on (and checkpointing) garbage until max_steps."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        for key in ("loss", "eval_loss"):
            value = (logs or {}).get(key)
            if value is not None and not math.isfinite(value):
                raise FloatingPointError(f"training diverged: {key} is {value} at step {state.global_step}")


def apply_hyperparameters(optimizer, lr_scheduler, training: dict) -> None:
    """Put the trial's learning rate and weight decay over a restored optimizer and LR scheduler.

    Restoring a checkpoint restores the donor's values too; a PBT-exploited trial must continue
    from the donor's weights with its own perturbed ones. The schedule's progress is kept.
    """
    if not hasattr(lr_scheduler, "lr_lambdas"):
        # reduce_lr_on_plateau: PBT is refused with it, so only the trial's own checkpoint, saved with
        # these very hyperparameters, resumes it, and its restored reductions are kept as they are.
        return
    learning_rate, weight_decay = training["learning_rate"], training.get("weight_decay", 0.0)
    lr_scheduler.base_lrs = [learning_rate] * len(optimizer.param_groups)
    factors = [fn(lr_scheduler.last_epoch) for fn in lr_scheduler.lr_lambdas]
    for group, factor in zip(optimizer.param_groups, factors):
        group["initial_lr"] = learning_rate
        group["lr"] = learning_rate * factor
        if group.get("weight_decay"):
            group["weight_decay"] = weight_decay
    lr_scheduler._last_lr = [group["lr"] for group in optimizer.param_groups]


class ApplyHyperparametersOnResume(TrainerCallback):
    """Make a resumed trial train with its own hyperparameters, not the checkpoint's.

    `Trainer.train(resume_from_checkpoint=...)` restores the optimizer and LR scheduler state after
    `on_train_begin`, so they are applied before the first step. The digest of the restored
    weights goes into the next report, so the copy can be checked.
    """

    def __init__(self, training: dict, resumed_from: str, report: dict):
        self.training = training
        self.resumed_from, self.report, self.applied = resumed_from, report, False

    def on_step_begin(self, args, state, control, model=None, optimizer=None, lr_scheduler=None, **kwargs):
        if self.applied:
            return
        self.applied = True
        apply_hyperparameters(optimizer, lr_scheduler, self.training)
        self.report.update(resumed_from=self.resumed_from, resumed_weights_digest=weights_digest(model))


def resume_checkpoint(config: dict) -> str | None:
    """The checkpoint to continue from: this run's own latest (a restarted worker group), else the
    one Tune handed the trial (a restored, retried or PBT-exploited trial), else none."""
    own = None if config["in_process"] else ray.train.get_checkpoint()
    if own is not None:
        return own.path
    return config.get("resume_from")


def training_arguments(cfg: dict, output_dir: str) -> TrainingArguments:
    """TrainingArguments from config, plus what hfsweep owns: paths, device, logging."""
    args = {**cfg["training"], **cfg["strategy"]["training_args"]}
    args.setdefault("seed", cfg["seed"])
    return TrainingArguments(
        output_dir=output_dir,
        use_cpu=not cfg["cluster"]["use_gpu"],
        report_to="none",  # Tune records the metrics; nothing is logged twice
        log_level_replica="error",
        save_only_model=False,
        **args,
    )


def build_trainer(cfg: dict, *, model, tokenizer, args: TrainingArguments, train_dataset, eval_dataset, callbacks) -> Trainer:
    """The configured Trainer class (`trainer._target_`: transformers.Trainer or a subclass, with
    its own arguments from config), computing the configured `eval_metrics` at each evaluation."""
    trainer_class = instantiate(cfg["trainer"], _partial_=True)
    return trainer_class(
        model=model,
        args=args,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        processing_class=tokenizer,
        data_collator=default_data_collator,
        callbacks=callbacks,
        compute_metrics=compute_metrics_for(cfg["eval_metrics"]),
    )


def train_loop_per_worker(config: dict) -> None:
    """Build tokenizer, model, data shard and Trainer from the trial's config, then train."""
    cfg = config["cfg"]
    in_process = config["in_process"]  # Ray Train's context and checkpoint APIs are off in a Tune trial's process
    quiet_logs(0 if in_process else ray.train.get_context().get_world_rank())

    tokenizer = load_tokenizer(config["tokenizer_path"])
    validation = datasets.load_from_disk(config["validation_path"])
    transformers.set_seed(cfg["seed"])  # every trial starts from the same initial weights
    model = build_model(cfg["model"], tokenizer, label_names(validation))

    batch_size = cfg["training"]["per_device_train_batch_size"]
    train_shard = ray.train.get_dataset_shard("train").iter_torch_batches(
        batch_size=batch_size, local_shuffle_buffer_size=4 * batch_size, local_shuffle_seed=cfg["seed"]
    )

    extra_metrics: dict = {}
    callbacks = [StopOnDivergence(), ReportCheckpointCallback(extra_metrics, config["trial_started_at"], in_process)]
    callbacks += [instantiate(node) for node in cfg["callbacks"].values()]
    resume_from = resume_checkpoint(config)
    if resume_from:
        callbacks.append(ApplyHyperparametersOnResume(cfg["training"], resume_from, extra_metrics))

    trainer = build_trainer(
        cfg,
        model=model,
        tokenizer=tokenizer,
        args=training_arguments(cfg, config["output_dir"]),
        train_dataset=train_shard,
        eval_dataset=validation if (shard := validation_shard(cfg)) is None else shard,
        callbacks=callbacks,
    )
    trainer.remove_callback(PrinterCallback)  # Tune's table reports progress
    trainer = prepare_trainer(trainer)
    trainer.train(resume_from_checkpoint=resume_from)
