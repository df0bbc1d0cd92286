"""What a task family owns: the columns it reads, how a split becomes model inputs, the Auto
class, the data collator and the metrics. Built-in tasks subclass `Task`."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from typing import Optional

from hfsweep.config.schema import DataConfig, ModelConfig, typed
from hfsweep.contract import IGNORED, EvalContext  # noqa: F401  (what task modules share with the loops)


@contextmanager
def quiet_progress():
    """No `datasets` progress bars inside (a cast that may fail: its bar would precede the refusal)."""
    import datasets

    enabled = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        if enabled:
            datasets.enable_progress_bars()


def rows(batch: dict) -> list[dict]:
    """A Ray Data batch (column -> numpy array; a ragged column is an array of arrays) as the
    list of examples transformers' collators take."""
    return [dict(zip(batch, values)) for values in zip(*batch.values())]


def batch_collator(collator: Callable) -> Callable:
    """A transformers collator (a list of examples -> tensors) as a Ray Data `collate_fn`."""
    return lambda batch: collator(rows(batch))


def examples_collator(task: Task, cfg: dict, processor, split: str = "validation") -> Callable:
    """What turns a list of `split`'s examples into model inputs (the Trainer's evaluation, an
    exported model's): `data_collator: {_target_: ...}` from config, built with the tokenizer (a
    transformers collator class, or any callable taking `tokenizer`), for every split; else the
    task's `collator`; else transformers' default, which stacks the rows as they are."""
    if cfg.get("data_collator"):
        from hydra.utils import instantiate

        return instantiate(cfg["data_collator"], tokenizer=processor)
    from transformers import default_data_collator

    return task.collator(processor, split) or default_data_collator


def batches_collator(task: Task, cfg: dict, processor, split: str, seed: int = 0) -> Optional[Callable]:
    """The same for a worker's Ray Data batches of `split` (column -> numpy array), as their
    `collate_fn`; None where the rows are the inputs as they are. `seed` differs per worker."""
    if cfg.get("data_collator"):
        return batch_collator(examples_collator(task, cfg, processor, split))
    collate = task.collator(processor, split, seed)
    return None if collate is None else batch_collator(collate)


class Task:
    name: str = ""  # also part of the prepared data's cache key: give a user task a name of its own
    columns: tuple[str, ...] = ()  # the data.* keys naming the columns it reads
    # the data.* keys choosing the texts a tokenizer trained on the data learns
    text_keys: tuple[str, ...] = ("text_column", "pair_column")
    # Its options (dataclass fields, `task_options.*`) applied on the workers, not in the prepared
    # data: searching them prepares nothing anew (masked LM's masking share).
    worker_options: tuple[str, ...] = ()
    length_key: str = "max_length"  # the data.* key bounding an example's tokens
    # What its predictions are for `evaluate`-named metrics (`hfsweep.tasks.metrics.LABELS`, TAGS,
    # ANSWERS or TEXTS); None: it predicts nothing they score (language modelling: perplexity only).
    inputs: Optional[str] = None
    metrics: tuple[str, ...] = ()  # names the task computes itself (a user task's own), instead of evaluate's
    generates = False  # evaluated on generated text: Seq2SeqTrainingArguments, and a generating Trainer for metrics
    needs_whole_validation = False  # metrics that match predictions to the validation split's rows in order
    # transformers' name for the loss (`LOSS_MAPPING`), set on models whose class name does not
    # give it away (GPT2LMHeadModel): without it the Trainer counts a causal LM's tokens before the
    # shift and reports every loss (1 - 1/block_size) too low.
    loss_type: Optional[str] = None
    # Its examples keep their own lengths unless `data.pad_to_max_length`, and its `collator`
    # pads each batch to the batch's longest example (classification, NER, QA), on the workers.
    pads_batches = False
    counts_tokens = True  # False: its inputs are not tokens (images), so its throughput is in samples only
    # Its eval_loss is a mean cross-entropy over tokens (a language model's), so exp(eval_loss) is a
    # perplexity: reported as eval_perplexity, and `perplexity` may be one of its eval_metrics.
    reports_perplexity = False

    def identity(self) -> list:
        """What names this task in the prepared data's cache key: its name, and the options the
        prepared data depends on (the attributes a task keeps: its dataclass fields, `task_options`,
        or a user task's arguments; not `worker_options`, nor methods set on the instance)."""
        return [
            self.name,
            {
                key: value
                for key, value in sorted(vars(self).items())
                if not callable(value) and key not in self.worker_options
            },
        ]

    def options(self) -> dict:
        """Its options and their values: the fields of a Task dataclass (`task_options`)."""
        from dataclasses import fields, is_dataclass

        return {f.name: getattr(self, f.name) for f in fields(self)} if is_dataclass(self) else {}

    def prepare_processor(self, model_cfg: ModelConfig, train, data_cfg: DataConfig, cache_dir: str) -> str:
        """The folder of what turns this family's raw examples into model inputs, made once per
        sweep: for text, the pretrained tokenizer `model.tokenizer` names, or one trained on the
        train split's texts (`texts`), cached by content."""
        from functools import partial

        from hfsweep.data.tokenizers import tokenizer_for

        # which texts of the split a tokenizer learns
        read_from = [self.identity(), {k: getattr(data_cfg, k) for k in self.text_keys}]
        return tokenizer_for(model_cfg.tokenizer, train, partial(self.texts, data_cfg=data_cfg), read_from, cache_dir)

    def load_processor(self, path: str):
        """The processor `prepare_processor` made (or a checkpoint saved): here a tokenizer."""
        from hfsweep.data.tokenizers import load_tokenizer

        return load_tokenizer(path)

    def config_from_processor(self, processor) -> dict:
        """What a model built from `model.config` takes from the processor: a text model's
        vocabulary size and special tokens."""
        return {
            "vocab_size": len(processor),
            "bos_token_id": processor.bos_token_id,
            "eos_token_id": processor.eos_token_id,
            "pad_token_id": processor.pad_token_id,
        }

    def model_config_kwargs(self, label_names: Optional[list]) -> dict:
        """What the model's config needs from the data: by default the classes' names, if any."""
        if not label_names:
            return {}
        return {"id2label": dict(enumerate(label_names)), "label2id": {name: i for i, name in enumerate(label_names)}}

    def auto_model_class(self):
        """The transformers Auto class that builds and loads this family's models."""
        raise NotImplementedError

    def check(self, cfg: dict) -> None:
        """Everything this family decides about a config, before Ray starts (the preflight calls it
        once): its data settings (`check_config`), the validation split kept whole where its
        metrics match rows in order, no stream where it reads the whole split first, examples that
        fit the model's positions, and sweep metrics its evaluation reports."""
        from hfsweep.config.errors import ConfigError
        from hfsweep.tasks.metrics import check_objective_metric

        data = typed(DataConfig, cfg["data"])
        self.check_config(data)
        self.check_searched_options(cfg, data)
        if self.needs_whole_validation and "validation" in data.datasets_to_split:
            raise ConfigError(
                f"data.datasets_to_split: model.task={self.name} matches its predictions to the validation split's "
                f"rows in order, which sharding the split would lose; use data.datasets_to_split=[train]."
            )
        if data.streaming and type(self).prepare_raw is not Task.prepare_raw:
            raise ConfigError(
                f"data.streaming: the {self.name or type(self).__name__} task reads the whole train split before "
                f"tokenizing (e.g. to list its labels); set data.streaming=false (data.max_train_samples bounds "
                f"what is read)."
            )
        model_config = cfg["model"]["config"]
        positions = model_config.get("n_positions") or model_config.get("max_position_embeddings")
        length = getattr(data, self.length_key)
        if positions and length > positions:
            raise ConfigError(
                f"data.{self.length_key} ({length}): larger than the model's {positions} positions; "
                f"lower it (data.{self.length_key}={positions}) or raise the model's positions."
            )
        from hfsweep.config.objectives import objectives

        for metric, _ in objectives(cfg):
            check_objective_metric(cfg, self, metric)

    def check_config(self, data_cfg: DataConfig) -> None:
        """Refuse, with a ConfigError naming the key, data.* values this family cannot work with;
        called before Ray starts."""

    def check_searched_options(self, cfg: dict, data_cfg: DataConfig) -> None:
        """Every value a search may give an option (`search_space.task_options.*`: a grid's or
        choice's values, a range's bounds) checked as the same value set on the command line is:
        its type by the dataclass field's annotation (`with_options`), its range by `check_config`."""
        from hfsweep.config.errors import ConfigError
        from hfsweep.config.loading import iter_leaves
        from hfsweep.tasks import with_options

        for key, spec in iter_leaves(cfg["search_space"].get("task_options") or {}):
            chosen = spec.get("sampler") in ("grid", "choice")
            values = (spec.get("values") or ()) if chosen else [spec[b] for b in ("low", "high") if b in spec]
            for value in values:
                try:
                    with_options(self, {key: value}).check_config(data_cfg)
                except ConfigError as err:
                    reason = str(err).removeprefix(f"task_options.{key}: ").split("; ")[0]
                    raise ConfigError(
                        f"search_space.task_options.{key}: {value!r} is not a value "
                        f"task_options.{key} takes ({reason})."
                    ) from err

    def read_local(self, builder: str, files: dict):
        """Local files in a format `datasets` has no builder for, as a DatasetDict of the splits'
        `files`; None: `datasets`' `builder` (text, csv, json, parquet) reads them."""
        return None

    def texts(self, row: dict, data_cfg: DataConfig) -> list:
        """The texts of one raw row a tokenizer trained on the data learns from: by default those
        of `data.text_column` and `data.pair_column` (a list of words counts as texts)."""
        keys = [k for k in ("text_column", "pair_column") if k in self.columns and getattr(data_cfg, k)]
        values = [row[getattr(data_cfg, k)] for k in keys]
        return [text for value in values for text in (value if isinstance(value, list) else [value])]

    def label_names(self, train, data_cfg: DataConfig) -> Optional[list]:
        """The classes, in label order, that the model's config names: those of the (prepared raw)
        train split's label column when it is a ClassLabel or a sequence of them."""
        from datasets import ClassLabel

        if "label_column" not in self.columns:
            return None
        feature = train.features.get(data_cfg.label_column)
        feature = getattr(feature, "feature", feature)  # a sequence's items
        return feature.names if isinstance(feature, ClassLabel) else None

    def prepare_raw(self, raw, data_cfg: DataConfig):
        """The raw splits made ready for tokenization (e.g. labels encoded); by default as they are."""
        return raw

    def preprocess(self, ds, tokenizer, data_cfg: DataConfig, split: str):
        """One raw split as model inputs (a `datasets.Dataset` of fixed-length token columns)."""
        raise NotImplementedError

    def padding(self, data_cfg: DataConfig):
        """The tokenizer's `padding` and the token columns' length at preparation: to
        `data.max_length` with `data.pad_to_max_length`, else none (the collator pads each batch)."""
        if data_cfg.pad_to_max_length or not self.pads_batches:
            return "max_length", getattr(data_cfg, self.length_key)
        return False, None

    def tokens_per_row(self, table):
        """Real (unpadded) tokens in each row of a prepared Arrow table (what `data.max_train_tokens`
        and the throughput count): the attention mask's ones, else the input ids' length."""
        import numpy as np
        import pyarrow as pa

        column = table.column(
            "attention_mask" if "attention_mask" in table.column_names else "input_ids"
        ).combine_chunks()
        values = column.flatten().to_numpy(zero_copy_only=False)
        if "attention_mask" not in table.column_names:
            values = np.ones_like(values)
        if pa.types.is_fixed_size_list(column.type):
            return values.reshape(len(column), column.type.list_size).sum(axis=1)
        offsets = column.offsets.to_numpy()
        return np.add.reduceat(values, offsets[:-1]) if len(values) else np.zeros(len(column), dtype=np.int64)

    def tokens_in_batch(self, inputs: dict):
        """Real tokens in one training batch as the model gets it (a tensor), counted as
        `tokens_per_row` counts them: the attention mask's ones, else the input ids."""
        mask = inputs.get("attention_mask")
        return mask.sum() if mask is not None else inputs["input_ids"].numel()

    def save_validation_examples(self, raw_validation, data_cfg: DataConfig, folder: str) -> None:
        """Write beside the prepared validation split what the metrics need besides its rows (QA:
        the raw examples its answer spans are mapped back to); by default nothing."""

    def collator(self, processor, split: str, seed: int = 0) -> Optional[Callable]:
        """The family's collator for `split` ("train" or "validation"): a list of its prepared
        examples as model inputs, where they need work (padding each batch to its longest, masked
        LM's masking of training batches afresh, from `seed`); None: the rows are the inputs. The
        config's `data_collator` replaces it (`examples_collator`, `batches_collator`)."""
        return None

    def prepare_tokenizer(self, tokenizer, data_cfg: DataConfig) -> None:
        """Set on a worker's tokenizer what the data was prepared with and every checkpoint's
        tokenizer must keep (SFT: the chat template); by default nothing."""

    def predictions_and_references(self, eval_pred, context: EvalContext) -> tuple:
        """The evaluation output (`EvalPrediction`: logits or generated ids, and labels) as the
        predictions and references `evaluate`'s metrics take, and the number of classes (or None)."""
        raise NotImplementedError

    def metrics_for(self, cfg: dict, context: EvalContext) -> Optional[Callable]:
        """The loops' `compute_metrics`: `compute_metrics: {_target_: a function (eval_pred) ->
        {name: value}}` from config; else the task's metrics for `eval_metrics` (None for none)."""
        if cfg.get("compute_metrics"):
            from hydra.utils import instantiate

            return instantiate(cfg["compute_metrics"], _partial_=True)
        return self.compute_metrics(cfg["eval_metrics"], context)

    def compute_metrics(self, entries: list, context: EvalContext = EvalContext()) -> Optional[Callable]:
        """The Trainer's `compute_metrics` for the configured `eval_metrics`, or None for none."""
        from functools import partial

        from hfsweep.tasks.metrics import metrics_function

        if not entries:
            return None
        return metrics_function(entries, partial(self.predictions_and_references, context=context))
