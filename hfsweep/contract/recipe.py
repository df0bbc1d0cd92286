"""What a trial hands its training loop on every worker: the recipe picked out of the config once,
so no loop reads the whole config, and what the trial prepared."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

from hfsweep.config.schema import DataConfig, GpuConfig, ModelConfig, PeftConfig, SweepConfig


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
    gpu: Optional[GpuConfig]  # the sweep's fast GPU defaults; None on a CPU sweep, which trains as configured
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
            gpu=sweep.gpu if sweep.cluster.use_gpu else None,
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
