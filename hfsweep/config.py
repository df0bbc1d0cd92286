"""The typed config schema and every user-facing validation error.

The schema is registered in Hydra's ConfigStore as `hfsweep_schema`, so a misspelt key in a typed
group fails at composition. `validate` then checks what types cannot: that values make sense
together. Both run before Ray starts; errors are one line that names the key and the fix.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue

TASKS = ("causal_lm",)
DATA_SOURCES = ("pydoc", "hub", "local")


class ConfigError(ValueError):
    """A config the sweep cannot run; the message names the key and how to fix it."""


class HubUnreachableError(ConfigError):
    """The config needs the Hugging Face hub, which cannot be reached; names the offline override."""


@dataclass
class TokenizerConfig:
    pretrained: Optional[str] = None
    kind: str = "byte_level_bpe"
    vocab_size: int = 300


@dataclass
class ModelConfig:
    task: str = "causal_lm"
    pretrained: Optional[str] = None
    config: Dict[str, Any] = field(default_factory=dict)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)


@dataclass
class DataConfig:
    source: str = "pydoc"
    name: Optional[str] = None
    config_name: Optional[str] = None
    path: Optional[str] = None
    text_column: str = "text"
    block_size: int = 128
    max_train_samples: Optional[int] = None


@dataclass
class StrategyConfig:
    name: str = "ddp"
    training_args: Dict[str, Any] = field(default_factory=dict)


@dataclass
class ClusterConfig:
    address: Optional[str] = None
    num_cpus: Optional[float] = None
    num_gpus: Optional[float] = None
    num_workers: int = 2
    use_gpu: bool = False
    resources_per_worker: Dict[str, float] = field(default_factory=lambda: {"CPU": 1})
    max_concurrent_trials: Optional[int] = None
    storage_path: Optional[str] = None
    max_failures: int = 1


@dataclass
class CheckpointsConfig:
    keep_per_trial: Optional[int] = None


@dataclass
class SweepConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    training: Dict[str, Any] = field(default_factory=dict)
    strategy: StrategyConfig = field(default_factory=StrategyConfig)
    search_space: Dict[str, Any] = field(default_factory=dict)
    scheduler: Dict[str, Any] = field(default_factory=dict)
    search_alg: Dict[str, Any] = field(default_factory=dict)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    logger: Dict[str, Any] = field(default_factory=dict)
    stopper: Dict[str, Any] = field(default_factory=dict)
    callbacks: Dict[str, Any] = field(default_factory=dict)
    checkpoints: CheckpointsConfig = field(default_factory=CheckpointsConfig)
    name: str = "sweep"
    seed: int = 42
    metric: str = "eval_loss"
    mode: str = "min"
    num_samples: int = 1
    cache_dir: str = "~/.cache/hfsweep"


ConfigStore.instance().store(name="hfsweep_schema", node=SweepConfig)


def to_plain_dict(cfg: DictConfig) -> dict:
    """Resolve the composed config once into the plain dict every layer below works on."""
    try:
        return OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    except MissingMandatoryValue as err:
        raise ConfigError(f"{err.full_key}: has no value (???); set it, e.g. {err.full_key}=VALUE.") from err


def _training_argument_names() -> set[str]:
    from transformers import TrainingArguments

    return {f.name for f in dataclasses.fields(TrainingArguments) if f.init}


def _unknown_key_error(key: str, known: set[str], what: str) -> ConfigError:
    close = difflib.get_close_matches(key.rsplit(".", 1)[-1], known, n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return ConfigError(f"{key}: not a {what}{hint}; remove it or fix the spelling.")


def validate(cfg: dict) -> None:
    """Check a resolved config; raise ConfigError naming the first bad key."""
    if cfg["mode"] not in ("min", "max"):
        raise ConfigError(f"mode: must be 'min' or 'max', not '{cfg['mode']}'.")
    if cfg["model"]["task"] not in TASKS:
        raise ConfigError(f"model.task: '{cfg['model']['task']}' is not one of {', '.join(TASKS)}.")
    _validate_training(cfg["training"], cfg["strategy"]["training_args"])
    if cfg["training"].get("load_best_model_at_end"):
        if cfg["training"].get("greater_is_better", cfg["mode"] == "max") != (cfg["mode"] == "max"):
            raise ConfigError(
                f"training.greater_is_better: must be {str(cfg['mode'] == 'max').lower()} when mode={cfg['mode']}, "
                f"so the Trainer's best checkpoint is the sweep's best."
            )
    _validate_data(cfg["data"], cfg["model"])
    _validate_cluster(cfg["cluster"])
    keep = cfg["checkpoints"]["keep_per_trial"]
    if keep is not None and keep < 1:
        raise ConfigError(
            f"checkpoints.keep_per_trial: must be at least 1 (the best checkpoint), not {keep}; "
            f"or null to keep every checkpoint."
        )


def _validate_training(training: dict, strategy_args: dict) -> None:
    names = _training_argument_names()
    for section, args in (("training", training), ("strategy.training_args", strategy_args)):
        for key in args:
            if key not in names:
                raise _unknown_key_error(f"{section}.{key}", names, "transformers.TrainingArguments field")
    for key in ("output_dir", "use_cpu", "report_to"):
        if key in training:
            raise ConfigError(f"training.{key}: hfsweep sets this itself; remove it from the config.")
    if not isinstance(training.get("max_steps"), int) or training["max_steps"] <= 0:
        raise ConfigError(
            "training.max_steps: must be a positive integer (a Ray Data training set is an "
            "iterable, so the Trainer needs max_steps), e.g. training.max_steps=100."
        )
    if training.get("eval_strategy", "no") != "steps" or training.get("save_strategy") != "steps":
        raise ConfigError(
            "training.eval_strategy and training.save_strategy: both must be 'steps', so every "
            "checkpoint reaches Tune with a fresh eval metric."
        )
    eval_steps, save_steps = training.get("eval_steps"), training.get("save_steps")
    if not eval_steps or not save_steps or save_steps % eval_steps:
        raise ConfigError(
            f"training.save_steps ({save_steps}): must be a multiple of training.eval_steps "
            f"({eval_steps}), or schedulers act on stale metrics; e.g. training.save_steps={eval_steps}."
        )


def _validate_data(data: dict, model: dict) -> None:
    if data["source"] not in DATA_SOURCES:
        raise ConfigError(f"data.source: '{data['source']}' is not one of {', '.join(DATA_SOURCES)}.")
    if data["source"] == "hub" and not data["name"]:
        raise ConfigError("data.name: data.source=hub needs a dataset name, e.g. data.name=wikitext.")
    if data["source"] == "local":
        if not data["path"]:
            raise ConfigError("data.path: data.source=local needs a folder or file, e.g. data.path=/data/wikitext.")
        if not os.path.exists(data["path"]):
            raise ConfigError(f"data.path: '{data['path']}' does not exist; point it at a folder of train.*/validation.* files.")
    positions = model["config"].get("n_positions") or model["config"].get("max_position_embeddings")
    if positions and data["block_size"] > positions:
        raise ConfigError(
            f"data.block_size ({data['block_size']}): larger than the model's {positions} positions; "
            f"lower it (data.block_size={positions}) or raise the model's positions."
        )


def _validate_cluster(cluster: dict) -> None:
    if cluster["num_workers"] < 1:
        raise ConfigError("cluster.num_workers: must be at least 1.")
    if cluster["use_gpu"] and cluster["address"] is None:
        import torch

        if not torch.cuda.is_available():
            raise ConfigError("cluster.use_gpu: this machine has no CUDA GPU; set cluster.use_gpu=false.")
    if cluster["address"] is None and cluster["num_cpus"] is not None:
        per_trial = 1 + cluster["num_workers"] * cluster["resources_per_worker"].get("CPU", 1)
        if per_trial > cluster["num_cpus"]:
            raise ConfigError(
                f"cluster.num_workers: one trial needs {per_trial:g} CPUs (1 for the trial + workers x "
                f"resources_per_worker.CPU) but cluster.num_cpus is {cluster['num_cpus']:g}; "
                f"raise cluster.num_cpus or lower cluster.num_workers."
            )
