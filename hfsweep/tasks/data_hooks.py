"""A task family's data concern: the columns it reads, the processor (tokenizer) it trains or
loads, how a raw split becomes model inputs, and how lists or Ray Data batches of them are collated.
`hfsweep.data` calls these hooks (`hfsweep.contract.protocols.DataTask`); the loops call the collators."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import contextmanager
from typing import Optional

from hfsweep.config.schema import DataConfig, ModelConfig


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


def examples_collator(
    task: DataHooks, data_collator: Optional[Mapping], processor, split: str = "validation"
) -> Callable:
    """What turns a list of `split`'s examples into model inputs (the Trainer's evaluation, an
    exported model's): the config's `data_collator: {_target_: ...}`, built with the tokenizer (a
    transformers collator class, or any callable taking `tokenizer`), for every split; else the
    task's `collator`; else transformers' default, which stacks the rows as they are."""
    if data_collator:
        from hydra.utils import instantiate

        return instantiate(data_collator, tokenizer=processor)
    from transformers import default_data_collator

    collate = task.collator(processor, split)
    return default_data_collator if collate is None else collate


def batches_collator(
    task: DataHooks, data_collator: Optional[Mapping], processor, split: str, seed: int = 0
) -> Optional[Callable]:
    """The same for a worker's Ray Data batches of `split` (column -> numpy array), as their
    `collate_fn`; None where the rows are the inputs as they are. `seed` differs per worker."""
    if data_collator:
        return batch_collator(examples_collator(task, data_collator, processor, split))
    collate = task.collator(processor, split, seed)
    return None if collate is None else batch_collator(collate)


class DataHooks:
    """What a family reads and how its examples become model inputs (the defaults: text columns,
    a tokenizer, rows that need no collating)."""

    columns: tuple[str, ...] = ()  # the data.* keys naming the columns it reads
    # the data.* keys choosing the texts a tokenizer trained on the data learns
    text_keys: tuple[str, ...] = ("text_column", "pair_column")
    length_key: str = "max_length"  # the data.* key bounding an example's tokens
    # Its examples keep their own lengths unless `data.pad_to_max_length`, and its `collator`
    # pads each batch to the batch's longest example (classification, NER, QA), on the workers.
    pads_batches = False
    counts_tokens = True  # False: its inputs are not tokens (images), so its throughput is in samples only

    def check_config(self, data_cfg: DataConfig) -> None:
        """Refuse, with a ConfigError naming the key, data.* values this family cannot work with;
        called before Ray starts."""

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

    def class_column(self, data_cfg: DataConfig) -> Optional[str]:
        """The column that holds the labels (a class, or a sequence of them, where they are
        classes), if the task reads one: what `label_names` lists and a carved validation set
        keeps the shares of."""
        return data_cfg.label_column if "label_column" in self.columns else None

    def label_names(self, train, data_cfg: DataConfig) -> Optional[list]:
        """The classes, in label order, that the model's config names: those of the (prepared raw)
        train split's `class_column` when it is a ClassLabel or a sequence of them."""
        from datasets import ClassLabel

        column = self.class_column(data_cfg)
        if column is None:
            return None
        feature = train.features.get(column)
        feature = getattr(feature, "feature", feature)  # a sequence's items
        return feature.names if isinstance(feature, ClassLabel) else None

    def prepare_raw(self, raw, data_cfg: DataConfig):
        """The raw splits made ready for tokenization (e.g. labels encoded); by default as they are."""
        return raw

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

    def prepare_tokenizer(self, tokenizer, data_cfg: DataConfig) -> None:
        """Set on a worker's tokenizer what the data was prepared with and every checkpoint's
        tokenizer must keep (SFT: the chat template); by default nothing."""

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
