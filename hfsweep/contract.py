"""The contract between the trial and the training loops: how a result reaches Tune (metrics plus
a tiny pointer checkpoint) and how checkpoints are named. The trial and both loops import it; no
loop imports the trial.

The Trainer writes each checkpoint once, in the trial's Train run directory. Tune receives a
pointer checkpoint that holds only that directory's path, so schedulers can restore trials and
PBT can exploit them without a second copy of the weights.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional, Protocol, runtime_checkable

from ray import tune

from hfsweep.config.schema import DataConfig, ModelConfig, PeftConfig, SweepConfig

IGNORED = -100  # the label the loss and the metrics skip: padding, special tokens, later sub-tokens


@dataclass(frozen=True)
class EvalContext:
    """What a task's metrics may need besides the predictions, handed to them by either loop: the
    classes' names, the tokenizer (to decode generated text), and the prepared validation split
    (QA maps its features' answer spans back to the examples' contexts)."""

    label_names: Optional[list] = None
    tokenizer: Any = None
    validation_path: Optional[str] = None
    data_cfg: Optional[DataConfig] = None


@dataclass(frozen=True)
class TrainingRecipe:
    """The parts of a trial's config that train a model, each as its reader takes it: typed
    sub-configs, `training` a mapping (it becomes `TrainingArguments`), and the `_target_` nodes
    Hydra instantiates on the worker. `of` is the one place that picks them out of a whole config,
    so no training loop reads one."""

    loop: str  # loop.name
    seed: int
    training: Mapping[str, Any]
    strategy_training_args: Mapping[str, Any]  # the distributed strategy's TrainingArguments (FSDP, DeepSpeed)
    use_gpu: bool
    model: ModelConfig
    data: DataConfig
    peft: PeftConfig
    trainer: Mapping[str, Any]  # {_target_: a Trainer class, its own arguments}
    data_collator: Mapping[str, Any]
    callbacks: Mapping[str, Any]  # name -> {_target_: a TrainerCallback}
    compute_metrics: Mapping[str, Any]
    eval_metrics: list

    @classmethod
    def of(cls, sweep: SweepConfig) -> TrainingRecipe:
        return cls(
            loop=sweep.loop.name.value,
            seed=sweep.seed,
            training=sweep.training,
            strategy_training_args=sweep.strategy.training_args,
            use_gpu=sweep.cluster.use_gpu,
            model=sweep.model,
            data=sweep.data,
            peft=sweep.peft,
            trainer=sweep.trainer,
            data_collator=sweep.data_collator,
            callbacks=sweep.callbacks,
            compute_metrics=sweep.compute_metrics,
            eval_metrics=list(sweep.eval_metrics),
        )


@dataclass(frozen=True)
class TrainJob:
    """What a trial hands its training loop on every worker: the recipe, the sweep's Task, and
    what the trial prepared and decided (the data's paths, where checkpoints go, the checkpoint to
    resume from, whether it trains in the trial's own process)."""

    recipe: TrainingRecipe
    task: Any
    tokenizer_path: str
    validation_path: str
    train_examples: int
    label_names: Optional[list]
    output_dir: str
    resume_from: Optional[str]
    trial_started_at: float
    in_process: bool  # Ray Train's context and checkpoint APIs are off in a Tune trial's own process


@runtime_checkable
class DataTask(Protocol):
    """What `hfsweep.data` needs of a Task (`hfsweep.tasks.data_hooks.DataHooks` has it): the
    columns it reads, what names its prepared data, its tokenizer or processor, its raw data and
    labels, and its preprocessing."""

    columns: tuple[str, ...]

    def identity(self) -> list: ...

    def read_local(self, builder: str, files: dict): ...

    def label_names(self, train, data_cfg: DataConfig) -> Optional[list]: ...

    def prepare_raw(self, raw, data_cfg: DataConfig): ...

    def prepare_processor(self, model_cfg: ModelConfig, train, data_cfg: DataConfig, cache_dir: str) -> str: ...

    def load_processor(self, path: str): ...

    def preprocess(self, ds, tokenizer, data_cfg: DataConfig, split: str): ...

    def save_validation_examples(self, raw_validation, data_cfg: DataConfig, folder: str) -> None: ...


@runtime_checkable
class ModelTask(Protocol):
    """What `hfsweep.models` needs of a Task (`hfsweep.tasks.model_hooks.ModelHooks`, and its name):
    the Auto class, what the model's config takes from the processor and the data, and the loss."""

    name: str
    loss_type: Optional[str]

    def config_from_processor(self, processor) -> dict: ...

    def model_config_kwargs(self, label_names: Optional[list]) -> dict: ...

    def auto_model_class(self): ...


# What a trial's training costs, in every report of both loops (`hfsweep.loops.cost`, and the peak
# memory of `WhatRan`): the sweep may take any as an objective, and results.csv holds each trial's last.
TOKENS_PER_SECOND = "train_tokens_per_second"  # only for families whose inputs are tokens
SAMPLES_PER_SECOND = "train_samples_per_second"
PEAK_MEMORY = "peak_memory_mb"
TRAINABLE_PARAMS = "trainable_params"
MFU = "mfu"  # only on a GPU of a known peak: an estimate, 6 x parameters x tokens/s over the bf16 peak
COST_METRICS = (TOKENS_PER_SECOND, SAMPLES_PER_SECOND, PEAK_MEMORY, TRAINABLE_PARAMS, MFU)

# Every report also carries the trial's own step budget, how many passes over the training set it
# has made and how many training samples it has seen: with `training.max_steps=-1` each trial's steps
# follow from its epochs and batch size, a scheduler whose time is `epoch` compares trials at the same
# amount of data, and `budget.train_samples` counts what trials consumed on any machine.
MAX_STEPS = "max_steps"
EPOCH = "epoch"
TRAIN_SAMPLES = "train_samples"
# and when it was made, in seconds since the epoch: Tune's own `timestamp` is whole seconds, too coarse
# to order a trial's start against the end of one that finished a moment before (`drawn_at_random`).
REPORTED_AT = "reported_at"


def examples_per_step(training: dict, workers: int) -> int:
    """Training examples one optimizer step takes: the per-device batch on every worker, accumulated."""
    return training["per_device_train_batch_size"] * workers * training.get("gradient_accumulation_steps", 1)


def steps_for_epochs(training: dict, workers: int, train_examples: int) -> int:
    """`training.num_train_epochs` over `train_examples` in optimizer steps, rounded up (at least 1)."""
    return max(
        1, math.ceil(training.get("num_train_epochs", 3.0) * train_examples / examples_per_step(training, workers))
    )


def progress(step: int, training: dict, workers: int, train_examples: int) -> dict:
    """A report's account of the data a trial has trained on by `step`: its passes over the training
    set and its training samples. The step counts from the trial's start, a restored trial's from its
    checkpoint's, so work lost to a restore is not counted."""
    samples = step * examples_per_step(training, workers)
    return {EPOCH: samples / train_examples, TRAIN_SAMPLES: samples}


def combine_ranks(reports: list[dict]) -> dict:
    """One report of a worker group, from each worker's (the same step): rank 0's, with the
    throughputs summed over the workers (each counts what it trained on), the largest peak memory,
    and the workers' mean MFU (each against its own device's peak)."""
    combined = dict(reports[0])
    for key, combine in (
        (TOKENS_PER_SECOND, sum),
        (SAMPLES_PER_SECOND, sum),
        (PEAK_MEMORY, max),
        (MFU, lambda values: sum(values) / len(values)),
    ):
        values = [report[key] for report in reports if key in report]
        if values:
            combined[key] = combine(values)
    return combined


POINTER_FILE = "hfsweep_checkpoint.json"
HF_CHECKPOINTS = "hf_checkpoints"  # in a trial's Train run directory: where the loops write checkpoints


def read_pointer(checkpoint: Optional[tune.Checkpoint]) -> Optional[str]:
    """The Hugging Face checkpoint directory a Tune pointer checkpoint refers to."""
    if checkpoint is None:
        return None
    with checkpoint.as_directory() as d, open(os.path.join(d, POINTER_FILE)) as f:
        return json.load(f)["path"]


def report_to_tune(metrics: dict, checkpoint_path: Optional[str]) -> None:
    """`tune.report` the metrics, with a pointer to `checkpoint_path` when there is one."""
    if checkpoint_path is None:
        tune.report(metrics)
        return
    metrics = {**metrics, "checkpoint_path": checkpoint_path}
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, POINTER_FILE), "w") as f:
            json.dump({"path": checkpoint_path, "step": metrics.get("step")}, f)
        tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(d))


def checkpoint_dir_name(step: int) -> str:
    """The Trainer's name for the checkpoint of `step` (both loops write it)."""
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

    return f"{PREFIX_CHECKPOINT_DIR}-{step}"


def checkpoint_step(name_or_path: str) -> int | None:
    """The step of a checkpoint folder by its name, or None for any other folder."""
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

    match = re.fullmatch(rf"{re.escape(PREFIX_CHECKPOINT_DIR)}-(\d+)", os.path.basename(name_or_path.rstrip("/")))
    return int(match.group(1)) if match else None
