"""What the layers below the driver use of a Task, written once, one protocol per concern: its data
(`DataTask`, which `data/` annotates), its model (`ModelTask`, `models.py`) and its metrics
(`MetricTask`, which the loops and the metric checks read; the loops hand it an `EvalContext`).
tests/unit/test_layout.py holds every family and every use to them. A family subclasses
`hfsweep.tasks.base.Task`, which has a default for each member but the Auto class, the preprocessing
and the predictions, and overrides only what differs (docs/tasks.md writes one from scratch)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Optional, Protocol, runtime_checkable

from hfsweep.config.schema import DataConfig, ModelConfig

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


@runtime_checkable
class DataTask(Protocol):
    """What `hfsweep.data` needs of a Task (`hfsweep.tasks.data_hooks.DataHooks` has it): the
    columns it reads, what names its prepared data, its tokenizer or processor, its raw data and
    labels, and its preprocessing."""

    columns: tuple[str, ...]

    def identity(self) -> list: ...

    def read_local(self, builder: str, files: dict): ...

    def class_column(self, data_cfg: DataConfig) -> Optional[str]: ...

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


@runtime_checkable
class MetricTask(Protocol):
    """What the loops and the metric checks need of a Task (`hfsweep.tasks.metric_hooks.MetricHooks`
    has it): what its predictions are for `evaluate`'s metrics (`inputs`) or the metrics it names
    itself, whether it generates text or reports a perplexity, its options' fit with the sweep's
    metrics, and its predictions and references."""

    inputs: Optional[str]
    metrics: tuple[str, ...]
    generates: bool
    reports_perplexity: bool

    def check_metrics(self, sweep) -> None: ...

    def predictions_and_references(self, eval_pred, context: EvalContext) -> tuple: ...

    def metrics_for(
        self, compute_metrics: Optional[Mapping], eval_metrics: list, context: EvalContext
    ) -> Optional[Callable]: ...
