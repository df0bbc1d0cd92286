"""The typed config schema, registered in Hydra's ConfigStore as `hfsweep_schema`.

`conf/config.yaml` puts it first in its defaults, so a misspelt key in a typed group, or a value of
the wrong type, fails at composition (and `hfsweep.config.loading` turns that into one line).

The preflight builds the typed `SweepConfig` once (`typed`), and every layer below takes it or the
typed sub-config it needs (`sweep.data`), so it reads `data_cfg.max_length`, not a string key of a
dict; a trial's sampled values make its own by one merge (`merged`). Where a dict is the
format (resolved_config.yaml, Tune's param_space paths), `plain` gives it back. Every layer imports
this module, and it imports no other part of hfsweep.
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError, dataclass, field
from enum import Enum
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf


# The closed sets: OmegaConf refuses any other value at composition, naming the ones it takes. The
# config every layer below reads is plain (`to_plain_dict`), so they arrive there as their names.
class TokenizerKind(Enum):
    """What `hfsweep.data.tokenizers` trains on the data when no pretrained tokenizer is given."""

    byte_level_bpe = "byte_level_bpe"
    roberta_bpe = "roberta_bpe"
    unigram = "unigram"
    wordpiece = "wordpiece"


class DataSource(Enum):
    pydoc = "pydoc"  # CPython's documentation topics: real prose on every machine
    hub = "hub"
    local = "local"


class PrepareOn(Enum):
    driver = "driver"  # data.num_proc processes on the driver
    cluster = "cluster"  # Ray tasks on every node (cache_dir must be shared)


class PeftMethod(Enum):
    none = "none"
    lora = "lora"
    ia3 = "ia3"


class LoopName(Enum):
    hf_trainer = "hf_trainer"  # a prepared transformers.Trainer on each worker
    accelerate = "accelerate"  # a plain Accelerate loop


class AttnImplementation(Enum):
    """The attention kernel `gpu.attn_implementation` asks of a model whose class has it."""

    sdpa = "sdpa"  # torch's scaled_dot_product_attention, with its flash and memory-efficient kernels on GPUs
    flash_attention_2 = "flash_attention_2"  # the flash_attn package's kernels: pip install flash-attn
    eager = "eager"  # transformers' plain matmul-and-softmax attention


class SelectModel(Enum):
    """Which model of each re-trained run `select` ranks by and headlines."""

    final = "final"  # the model at the run's last step, as run_glue.py reports it
    best = "best"  # the run's best checkpoint by the validation metric


class ReadOnly:
    """A typed config or sub-config refuses assignment once built, as a frozen dataclass does (change a copy:
    `dataclasses.replace`). Not `frozen=True`: OmegaConf makes a frozen dataclass a read-only node,
    and Hydra merges the command line into this schema."""

    def __post_init__(self):
        object.__setattr__(self, "_built", True)

    def __setattr__(self, name, value):
        if "_built" in self.__dict__:
            raise FrozenInstanceError(f"cannot assign to field '{name}' of a {type(self).__name__}: it is read only")
        object.__setattr__(self, name, value)


@dataclass
class TokenizerConfig(ReadOnly):
    pretrained: Optional[str] = None
    kind: TokenizerKind = TokenizerKind.byte_level_bpe
    vocab_size: int = 300


@dataclass
class ModelConfig(ReadOnly):
    task: Any = "causal_lm"  # a built-in task family's name, or {_target_: a Task class, ...}
    pretrained: Optional[str] = None  # a hub name, a local folder, or pkg://PACKAGE/FOLDER inside an installed package
    weights_sha256: Optional[str] = None  # the expected digest of model.pretrained's model.safetensors, checked once
    config: Dict[str, Any] = field(default_factory=dict)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    # {_target_: a callable(model_cfg, tokenizer, label_names) -> model}, model_cfg this ModelConfig
    factory: Dict[str, Any] = field(default_factory=dict)


@dataclass
class DataConfig(ReadOnly):
    source: DataSource = DataSource.pydoc
    name: Optional[str] = None
    config_name: Optional[str] = None
    path: Optional[str] = None
    # local: an offline preset's stand-in data (hfsweep.data.offline), written into cache_dir when
    # data.path is unset
    proxy: Optional[str] = None
    validation_split: str = "validation"
    # A share (0-100) of the train split carved out as the validation set that trials, schedulers and
    # checkpoint choice see, seeded and stratified by class labels (run_clm.py's key); the rest trains.
    validation_split_percentage: Optional[float] = None
    split_seed: int = 42  # the carve's seed, apart from `seed`: searches of other seeds hold out the same examples
    # A split nothing in the search sees: the final models of the winner and the defaults are scored
    # on it once, as test_* (GLUE's dev set, with validation_split_percentage: test_split=validation)
    test_split: Optional[str] = None
    # local: {train: FILE(S), validation: FILE(S), test: ...} under data.path, when no pattern finds them
    data_files: Dict[str, Any] = field(default_factory=dict)
    text_column: str = "text"
    pair_column: Optional[str] = None
    label_column: str = "label"
    num_labels: Optional[int] = None  # classification: null reads the classes from the data; 1: a regression (STS-B)
    block_size: int = 128
    max_length: int = 128
    # classification, NER, QA: pad every example to max_length at preparation (run_glue's flag), not
    # each batch to its longest
    pad_to_max_length: bool = False
    target_column: Optional[str] = None  # seq2seq: the target text's column (summary, target)
    source_lang: Optional[str] = None  # seq2seq translation: rows of {lang: text} in data.text_column
    target_lang: Optional[str] = None
    max_train_samples: Optional[int] = None
    max_eval_samples: Optional[int] = None
    datasets_to_split: List[str] = field(default_factory=lambda: ["train"])
    load_kwargs: Dict[str, Any] = field(default_factory=dict)  # passed to datasets.load_dataset (quoting, delimiter...)
    streaming: bool = False  # read the train split as a stream (hub or local), chunk by chunk
    max_train_tokens: Optional[int] = None  # stop preparing the train split once it holds this many tokens
    chunk_rows: int = 10000  # raw examples per chunk: the unit of parallel tokenization and one parquet shard
    num_proc: Optional[int] = None  # processes tokenizing the train split; null: every core of the driver
    prepare_on: PrepareOn = PrepareOn.driver
    shuffle_buffer_rows: int = 8192  # each worker's local shuffle buffer over the streamed shards (BENCHMARKS.md row 6)


@dataclass
class PeftConfig(ReadOnly):
    """`peft=lora` (conf/peft/): a LoRA adapter over the base model, built from these keys by
    `peft.LoraConfig` (`peft=ia3`: `peft.IA3Config`, from the keys it has); `method: none` trains
    the whole model."""

    method: PeftMethod = PeftMethod.none
    r: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.0
    target_modules: Any = None  # null: PEFT's default for the architecture; "all-linear"; or module names
    feedforward_modules: Any = None  # ia3: those of target_modules scaled at their input; null: PEFT's default
    # trained in full beside the adapter (a classifier's head is added by its task)
    modules_to_save: Optional[List[str]] = None
    bias: str = "none"
    use_rslora: bool = False  # rsLoRA: scale by lora_alpha / sqrt(r)
    use_dora: bool = False  # DoRA: weight-decomposed LoRA
    load_in_4bit: bool = False  # QLoRA: the base quantized by bitsandbytes (CUDA only)
    load_in_8bit: bool = False
    export_merged: bool = False  # best/merged: the adapter merged into the base, a plain model directory


@dataclass
class StrategyConfig(ReadOnly):
    name: str = "ddp"
    training_args: Dict[str, Any] = field(default_factory=dict)


@dataclass
class LoopConfig(ReadOnly):
    name: LoopName = LoopName.hf_trainer


@dataclass
class ClusterConfig(ReadOnly):
    address: Optional[str] = None
    num_cpus: Optional[float] = None
    num_gpus: Optional[float] = None
    num_workers: int = 2
    use_gpu: bool = False
    resources_per_worker: Dict[str, float] = field(default_factory=lambda: {"CPU": 1})
    max_concurrent_trials: Optional[int] = None
    storage_path: Optional[str] = None
    max_failures: int = 1
    runtime_env: Dict[str, Any] = field(default_factory=dict)  # Ray's runtime_env: working_dir, py_modules, pip...
    price_per_gpu_hour: Optional[float] = None  # USD per GPU-hour, the CPUs beside it included: trial costs, budget.usd
    price_per_cpu_hour: Optional[float] = None  # USD per CPU-hour, for a sweep on CPUs


@dataclass
class GpuConfig(ReadOnly):
    """The fast defaults of a trial on GPUs (`cluster.use_gpu=true`; on CPUs none applies). Each is a
    default: a training.* key the config sets wins, and `gpu.KEY=false` turns one off
    (docs/operations.md, "Fast GPU defaults"). Not yet measured on a GPU."""

    # bf16 mixed precision where the GPU has it natively (Ampere on), unless training.bf16 or training.fp16 is set
    bf16: bool = True
    tf32: bool = True  # TF32 matmuls and convolutions where the GPU has them (Ampere on)
    fused_adamw: bool = True  # AdamW's fused kernel (training.optim=adamw_torch_fused); false: adamw_torch
    # asked of models whose class supports it; null: transformers' own choice (sdpa where supported, else eager)
    attn_implementation: Optional[AttnImplementation] = AttnImplementation.sdpa
    torch_compile: bool = False  # torch.compile the model: off until measured to pay back its compile time


@dataclass
class CheckpointsConfig(ReadOnly):
    keep_per_trial: Optional[int] = 1  # best K per trial (and a running trial's latest); null keeps all
    keep_final: bool = False  # each trial's last checkpoint too, its final model (a re-run's: select, replay)


@dataclass
class BudgetConfig(ReadOnly):
    """When the whole sweep stops: no trial starts after, running ones are stopped (docs/searching.md, Budgets)."""

    wall_clock_s: Optional[float] = None  # seconds since the first trial was scheduled
    trial_hours: Optional[float] = None  # sum over trials of run time x the GPUs (CPUs on a CPU sweep) each holds
    usd: Optional[float] = None  # trial_hours x the price of a GPU-hour (a CPU-hour on a CPU sweep)
    # the sum over trials of the training samples each has seen (its steps x examples per step): the
    # same on any machine, so a budget of N defaults runs is N x one defaults run's samples
    train_samples: Optional[int] = None


@dataclass
class SelectConfig(ReadOnly):
    """After the search, re-train its `top_k` best configurations once per seed and pick the one
    with the best mean (docs/searching.md, "Picking a winner over seeds"): one lucky seed does not win."""

    top_k: int = 0  # 0: off
    seeds: List[int] = field(default_factory=lambda: [1, 2, 3])
    confidence: float = 0.95  # of the Student t interval around each configuration's mean
    model: SelectModel = SelectModel.final  # both are scored; this one ranks, is exported and headlines
    within_budget: bool = True  # false: the sweep's budget prices the search alone; the selection runs after it


@dataclass
class SweepConfig(ReadOnly):
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    # The options of model.task's family: the fields of its Task dataclass (hfsweep/tasks/NAME.py),
    # typed and checked by the family at preflight (task_options.doc_stride=64).
    task_options: Dict[str, Any] = field(default_factory=dict)
    training: Dict[str, Any] = field(default_factory=dict)
    strategy: StrategyConfig = field(default_factory=StrategyConfig)
    loop: LoopConfig = field(default_factory=LoopConfig)
    peft: PeftConfig = field(default_factory=PeftConfig)
    search_space: Dict[str, Any] = field(default_factory=dict)
    scheduler: Dict[str, Any] = field(default_factory=dict)
    search_alg: Dict[str, Any] = field(default_factory=dict)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    gpu: GpuConfig = field(default_factory=GpuConfig)
    logger: Dict[str, Any] = field(default_factory=dict)
    stopper: Dict[str, Any] = field(default_factory=dict)
    callbacks: Dict[str, Any] = field(default_factory=dict)
    trainer: Dict[str, Any] = field(default_factory=dict)
    eval_metrics: List[Any] = field(default_factory=list)  # names, {name, config_name, ...}, module paths or {_target_}
    # {_target_: a function (eval_pred) -> {name: value}}; else the task's
    compute_metrics: Dict[str, Any] = field(default_factory=dict)
    # {_target_: a collator built with tokenizer=}; else the task's
    data_collator: Dict[str, Any] = field(default_factory=dict)
    checkpoints: CheckpointsConfig = field(default_factory=CheckpointsConfig)
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    select: SelectConfig = field(default_factory=SelectConfig)
    # More validation sets, each NAME: {data.* keys that differ} (MNLI's mismatched split); a replay
    # scores every seed's final model on them too, as NAME_eval_METRIC.
    extra_validation: Dict[str, Any] = field(default_factory=dict)
    name: str = "sweep"
    seed: int = 42
    metric: Any = "eval_loss"  # a name, or a list of names: several objectives (hfsweep.config.objectives)
    mode: Any = "min"  # min or max, or a list of them beside a list of metrics
    num_samples: int = 1
    # debug=tiny: every grid and choice of search_space keeps its first value (one trial per num_samples)
    search_one_value: bool = False
    cache_dir: str = "~/.cache/hfsweep"


ConfigStore.instance().store(name="hfsweep_schema", node=SweepConfig)


def typed(schema, values: dict):
    """`values` (a plain sub-config, as the composed and resolved config holds it) as an instance of
    its `schema` dataclass, checked and converted by OmegaConf (enum fields become their members)."""
    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(schema), values))


def plain(node) -> dict:
    """A typed sub-config as the plain dict the resolved config holds: enums by name."""
    return OmegaConf.to_container(OmegaConf.structured(node), enum_to_str=True)


def merged(node, values: dict):
    """A typed config (or sub-config) with `values` (a nested dict: a trial's sampled values as Tune
    hands them, `extra_validation`'s changes) merged in by OmegaConf, which checks each against its field."""
    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(node), primitive(values)))


def primitive(value):
    """`value` with numpy scalars (what some searchers sample) as Python's own, which OmegaConf takes."""
    if isinstance(value, dict):
        return {key: primitive(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [primitive(item) for item in value]
    return value.item() if hasattr(value, "item") and hasattr(value, "dtype") else value
