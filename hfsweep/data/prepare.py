"""Load → tokenizer → the task's preprocessing → disk, once per sweep on the driver.

Cached by content under `cache_dir`: a second sweep on the same data prepares nothing, and trials
only read the result. The train split goes to the workers through Ray Data (sharded); validation
is read whole by every worker (the Trainer's distributed evaluation splits it), or sharded too.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from typing import Optional

import datasets
import pyarrow.parquet
from datasets import ClassLabel, Dataset, DatasetDict

from hfsweep.compat import dataset_fingerprint
from hfsweep.config.errors import ConfigError
from hfsweep.data.cache import atomic_dir
from hfsweep.data.sources import load_raw
from hfsweep.data.tokenizers import load_tokenizer, tokenizer_for
from hfsweep.tasks import get_task


@dataclass
class PreparedData:
    """Where a sweep's tokenized data lives; every trial and worker reads these paths."""

    tokenizer_path: str
    train_path: str
    validation_path: str
    num_train_blocks: int  # training examples (packed blocks for causal LM)
    num_validation_blocks: int
    label_names: Optional[list] = None  # classification: the classes, in label order


def _check_columns(raw: DatasetDict, data_cfg: dict, keys) -> None:
    for key in keys:
        column = data_cfg[key]
        for split in raw:
            if column is not None and column not in raw[split].column_names:
                raise ConfigError(
                    f"data.{key}: '{column}' is not a column of the {split} split "
                    f"(columns: {', '.join(raw[split].column_names)}); set data.{key}."
                )


def label_names(dataset: Dataset) -> list[str] | None:
    """The class names a prepared classification split carries in its `labels` column."""
    feature = dataset.features.get("labels")
    return feature.names if isinstance(feature, ClassLabel) else None


def prepare(cfg: dict) -> PreparedData:
    """Tokenize the configured data once, as `model.task` needs it; return where trials find it."""
    data_cfg, cache_dir = cfg["data"], os.path.expanduser(cfg["cache_dir"])
    task = get_task(cfg["model"]["task"])
    raw = load_raw(data_cfg, cache_dir)
    _check_columns(raw, data_cfg, task.columns)
    for split, limit in (("train", data_cfg["max_train_samples"]), ("validation", data_cfg["max_eval_samples"])):
        if limit:
            raw[split] = raw[split].select(range(min(limit, len(raw[split]))))
    raw = task.prepare_raw(raw, data_cfg)
    text_columns = [data_cfg[k] for k in ("text_column", "pair_column") if k in task.columns and data_cfg[k]]
    tokenizer_path = tokenizer_for(cfg["model"]["tokenizer"], raw["train"], text_columns, cache_dir)
    tokenized_by = {k: v for k, v in data_cfg.items() if k != "datasets_to_split"}  # how workers get it is not the data
    key = hashlib.sha256(
        json.dumps(
            [dataset_fingerprint(raw["train"]), dataset_fingerprint(raw["validation"]), tokenizer_path, tokenized_by, task.name],
            sort_keys=True,
        ).encode()
    ).hexdigest()[:16]
    out = os.path.join(cache_dir, "tokenized", key)

    def write(tmp: str) -> None:
        tokenizer = load_tokenizer(tokenizer_path)
        for split, ds in raw.items():
            processed = task.preprocess(ds, tokenizer, data_cfg, split)
            if split == "train":
                processed.to_parquet(os.path.join(tmp, "train", "data.parquet"))
            else:
                processed.save_to_disk(os.path.join(tmp, "validation"))

    atomic_dir(out, write)
    validation = datasets.load_from_disk(os.path.join(out, "validation"))
    num_train = pyarrow.parquet.read_metadata(os.path.join(out, "train", "data.parquet")).num_rows
    return PreparedData(
        tokenizer_path=tokenizer_path,
        train_path=os.path.join(out, "train"),
        validation_path=os.path.join(out, "validation"),
        num_train_blocks=num_train,
        num_validation_blocks=validation.num_rows,
        label_names=label_names(validation),
    )


def load_ray_datasets(data: PreparedData, datasets_to_split: list, seed: int) -> dict:
    """What Ray Train hands the workers, read into the object store by this process (no read
    tasks to schedule) so trials share it: the packed train split, and the validation split
    when it is sharded too (`data.datasets_to_split`); otherwise workers read it from disk.

    The train split is shuffled here once, seeded, as the Trainer's sampler shuffles: packed
    blocks are in document order, and a worker's local shuffle buffer alone would fill each batch
    from one or two documents."""
    import numpy as np
    import ray.data

    train = pyarrow.parquet.read_table(data.train_path)
    ray_datasets = {"train": ray.data.from_arrow(train.take(np.random.default_rng(seed).permutation(train.num_rows)))}
    if "validation" in datasets_to_split:
        ray_datasets["validation"] = ray.data.from_arrow(datasets.load_from_disk(data.validation_path).data.table)
    return ray_datasets
