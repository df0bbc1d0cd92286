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
from typing import Any, Dict, List, Optional

import yaml
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue

TASKS = ("causal_lm", "sequence_classification")
LOOPS = ("hf_trainer", "accelerate")
# The training.* keys the Accelerate loop reads, and those it may ignore (the Trainer's cadence
# and logging settings, which the validation below also needs).
ACCELERATE_LOOP_KEYS = {
    "learning_rate", "weight_decay", "lr_scheduler_type", "warmup_steps", "max_steps", "seed",
    "per_device_train_batch_size", "per_device_eval_batch_size", "save_steps",
    "bf16", "fp16", "activation_checkpointing",
    "eval_strategy", "eval_steps", "save_strategy", "logging_steps", "disable_tqdm", "average_tokens_across_devices",
}
DATA_SOURCES = ("pydoc", "hub", "local")
TOKENIZER_KINDS = ("byte_level_bpe", "wordpiece")
REPORTED_METRICS = ("eval_loss", "eval_perplexity", "loss")  # every trial's reports, plus eval_<eval_metrics>
RESOLVED_CONFIG = "resolved_config.yaml"  # a sweep's whole config, in its run directory
PLATEAU = "reduce_lr_on_plateau"  # the one LR schedule that is not a function of the step
GPU_ONLY_TRAINING_ARGS = ("fsdp", "deepspeed")  # on CPU transformers ignores fsdp (plain DDP) and DeepSpeed needs CUDA


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
    validation_split: str = "validation"
    text_column: str = "text"
    pair_column: Optional[str] = None
    label_column: str = "label"
    num_labels: Optional[int] = None
    block_size: int = 128
    max_length: int = 128
    max_train_samples: Optional[int] = None
    max_eval_samples: Optional[int] = None
    datasets_to_split: List[str] = field(default_factory=lambda: ["train"])


@dataclass
class StrategyConfig:
    name: str = "ddp"
    training_args: Dict[str, Any] = field(default_factory=dict)


@dataclass
class LoopConfig:
    name: str = "hf_trainer"


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
    loop: LoopConfig = field(default_factory=LoopConfig)
    search_space: Dict[str, Any] = field(default_factory=dict)
    scheduler: Dict[str, Any] = field(default_factory=dict)
    search_alg: Dict[str, Any] = field(default_factory=dict)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    logger: Dict[str, Any] = field(default_factory=dict)
    stopper: Dict[str, Any] = field(default_factory=dict)
    callbacks: Dict[str, Any] = field(default_factory=dict)
    trainer: Dict[str, Any] = field(default_factory=dict)
    eval_metrics: List[str] = field(default_factory=list)
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
    if cfg["model"]["tokenizer"]["kind"] not in TOKENIZER_KINDS:
        raise ConfigError(
            f"model.tokenizer.kind: cannot train '{cfg['model']['tokenizer']['kind']}'; use one of {', '.join(TOKENIZER_KINDS)}."
        )
    _validate_training(cfg["training"], cfg["strategy"]["training_args"])
    _validate_strategy(cfg["strategy"], cfg["cluster"])
    _validate_precision(cfg["training"], cfg["cluster"])
    _validate_metrics(cfg)
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
    _validate_loop(cfg)


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


def _validate_precision(training: dict, cluster: dict) -> None:
    """bf16 on a local GPU without it (before Ampere) would fail in the first trial; CPUs run
    bf16 and fp16 through autocast."""
    if training.get("bf16") and cluster["use_gpu"] and cluster["address"] is None:
        import torch

        if torch.cuda.is_available() and not torch.cuda.is_bf16_supported():
            raise ConfigError(
                f"training.bf16: this GPU ({torch.cuda.get_device_name(0)}) has no bf16; use training.fp16=true instead."
            )


def _validate_strategy(strategy: dict, cluster: dict) -> None:
    """Refuse a strategy the hardware cannot run: on CPU transformers silently trains FSDP as
    plain DDP, and DeepSpeed needs its package and CUDA."""
    import importlib.util

    args = strategy["training_args"]
    if args.get("deepspeed") and importlib.util.find_spec("deepspeed") is None:
        raise ConfigError(
            f"strategy={strategy['name']}: DeepSpeed is not installed; pip install 'hfsweep[deepspeed]' "
            f"(on a machine with CUDA GPUs), or use strategy=ddp."
        )
    if any(args.get(key) for key in GPU_ONLY_TRAINING_ARGS) and not cluster["use_gpu"]:
        raise ConfigError(
            f"strategy={strategy['name']}: needs GPUs; set cluster.use_gpu=true on a GPU machine, or use strategy=ddp on CPUs."
        )


def _validate_metrics(cfg: dict) -> None:
    """Every eval metric has a local implementation, fits the task, and the sweep metric is computed."""
    from hfsweep.metrics import CLASSIFICATION_METRICS

    for name in cfg["eval_metrics"]:
        if name not in CLASSIFICATION_METRICS:
            raise ConfigError(f"eval_metrics: '{name}' is not one of {', '.join(CLASSIFICATION_METRICS)}.")
    if cfg["eval_metrics"] and cfg["model"]["task"] != "sequence_classification":
        raise ConfigError("eval_metrics: classification metrics need model.task=sequence_classification; set eval_metrics=[].")
    metric = cfg["metric"].removeprefix("eval_")
    if metric in CLASSIFICATION_METRICS and metric not in cfg["eval_metrics"]:
        raise ConfigError(
            f"metric: {cfg['metric']} is never computed; add it, e.g. eval_metrics=[{','.join([*cfg['eval_metrics'], metric])}]."
        )
    reported = [*REPORTED_METRICS, *(f"eval_{name}" for name in cfg["eval_metrics"])]
    if cfg["metric"] not in reported:
        raise ConfigError(f"metric: no trial reports '{cfg['metric']}'; choose one of {', '.join(reported)}.")


def _validate_data(data: dict, model: dict) -> None:
    if sorted(data["datasets_to_split"]) not in (["train"], ["train", "validation"]):
        raise ConfigError(
            f"data.datasets_to_split: {list(data['datasets_to_split'])} is neither [train] (every worker evaluates the "
            "whole validation split) nor [train,validation] (each evaluates its Ray Data shard); use one of them."
        )
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
    length_key = "block_size" if model["task"] == "causal_lm" else "max_length"
    if positions and data[length_key] > positions:
        raise ConfigError(
            f"data.{length_key} ({data[length_key]}): larger than the model's {positions} positions; "
            f"lower it (data.{length_key}={positions}) or raise the model's positions."
        )


def _validate_loop(cfg: dict) -> None:
    loop = cfg["loop"]["name"]
    if loop not in LOOPS:
        raise ConfigError(f"loop.name: '{loop}' is not one of {', '.join(LOOPS)}; e.g. loop=accelerate.")
    if loop != "accelerate":
        return
    if cfg["callbacks"]:
        raise ConfigError("callbacks: TrainerCallbacks need loop=hf_trainer; use callbacks=none with loop=accelerate.")
    for key in cfg["training"]:
        if key not in ACCELERATE_LOOP_KEYS:
            raise ConfigError(f"training.{key}: loop=accelerate does not use it; remove it, or use loop=hf_trainer.")
    if PLATEAU in lr_scheduler_types(cfg):
        raise ConfigError(
            f"training.lr_scheduler_type: loop=accelerate steps its schedule every optimizer step, and {PLATEAU} "
            f"needs the eval metric; use another type, or loop=hf_trainer."
        )


def lr_scheduler_types(cfg: dict) -> set[str]:
    """Every LR schedule the sweep's trials may use: the configured one and any searched ones."""
    searched = cfg["search_space"].get("training", {}).get("lr_scheduler_type", {})
    return {cfg["training"].get("lr_scheduler_type", "linear"), *searched.get("values", ())}


def _validate_cluster(cluster: dict) -> None:
    if cluster["num_workers"] < 1:
        raise ConfigError("cluster.num_workers: must be at least 1.")
    if cluster["use_gpu"] and cluster["address"] is None:
        import torch

        if not torch.cuda.is_available():
            raise ConfigError("cluster.use_gpu: this machine has no CUDA GPU; set cluster.use_gpu=false.")
    if cluster["address"] is None and cluster["num_cpus"] is not None:
        per_trial = trial_resources(cluster)["CPU"]
        if per_trial > cluster["num_cpus"]:
            raise ConfigError(
                f"cluster.num_workers: one trial needs {per_trial:g} CPUs ({trial_shape(cluster)}) "
                f"but cluster.num_cpus is {cluster['num_cpus']:g}; raise cluster.num_cpus or lower cluster.num_workers."
            )


def trains_in_process(cluster: dict) -> bool:
    """A single-worker trial trains in the trial's own process (Train V2 local mode): no
    controller, placement group or worker actors to start and stop."""
    return cluster["num_workers"] == 1


def trial_resources(cluster: dict) -> dict:
    """What one trial holds: every worker's resources, plus 1 CPU for the trial process when it
    drives a worker group (an in-process trial is its one worker)."""
    per_worker = resource_names(cluster["resources_per_worker"])
    per_worker.setdefault("CPU", 1)
    if cluster["use_gpu"]:
        per_worker.setdefault("GPU", 1)
    total = {k: v * cluster["num_workers"] for k, v in per_worker.items()}
    if not trains_in_process(cluster):
        total["CPU"] += 1
    return total


def resource_names(resources: dict) -> dict:
    """Ray's spelling: CPU and GPU upper-case (`cpu: 1` is accepted), custom resources as given."""
    return {k.upper() if k.lower() in ("cpu", "gpu") else k: v for k, v in resources.items()}


def trial_shape(cluster: dict) -> str:
    """How a trial's resources add up, for error messages."""
    if trains_in_process(cluster):
        return "1 worker in the trial's process"
    return f"1 CPU for the trial + {cluster['num_workers']} workers"


def saved_config(run_dir: str, overrides: list[str] = (), force: bool = False) -> dict:
    """The config saved in a sweep's run directory, for resuming it. An override that changes it
    is refused unless `force`; keys added to hfsweep since the run was saved take their defaults."""
    saved_path = os.path.join(run_dir, RESOLVED_CONFIG)
    if not os.path.isfile(saved_path):
        raise ConfigError(f"resume: '{run_dir}' holds no sweep ({RESOLVED_CONFIG} is missing); pass a sweep's run directory.")
    with open(saved_path) as f:
        saved = OmegaConf.to_container(OmegaConf.merge(OmegaConf.structured(SweepConfig), yaml.safe_load(f)), resolve=True)
    cfg = OmegaConf.to_container(OmegaConf.merge(saved, OmegaConf.from_dotlist(list(overrides))), resolve=True)
    changed = sorted(_changed_keys(saved, cfg))
    if changed and not force:
        raise ConfigError(
            f"resume: {', '.join(changed)} differ from the config saved in {run_dir}; "
            f"drop those overrides, or pass --force to resume with them."
        )
    return cfg


def _changed_keys(old: dict, new: dict, prefix: str = "") -> list[str]:
    keys = []
    for key in old.keys() | new.keys():
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            keys += _changed_keys(a, b, f"{prefix}{key}.")
        elif a != b:
            keys.append(f"{prefix}{key}")
    return keys
