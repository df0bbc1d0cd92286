"""Prepared data as trials read it: where it lies (`PreparedData`), the keys that decide it, and
its Ray Datasets.

Apart from `prepare`, which writes it, because a trial's process imports this: a worker-group trial
starts a fresh process, and the `datasets` library `prepare` needs costs it a second or more to
import (the trial prepares only when a searched key changes the data, and imports `prepare` then).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from hfsweep.compat import classic_parquet_reader
from hfsweep.config.schema import DataConfig, plain


@dataclass
class PreparedData:
    """Where a sweep's tokenized data lives; every trial and worker reads these paths."""

    tokenizer_path: str  # the Task's processor: a tokenizer for text
    train_path: str
    validation_path: str
    num_train_blocks: int  # training examples (packed blocks for causal LM)
    num_validation_blocks: int
    num_train_tokens: int = 0  # real (unpadded) tokens in the train split
    label_names: Optional[list] = None  # classification: the classes, in label order


# How the data is prepared and used, not what is prepared: processes, sharding, shuffling, the test split.
NOT_PREPARED = ("datasets_to_split", "num_proc", "prepare_on", "shuffle_buffer_rows", "test_split")


def what_is_prepared(data_cfg: DataConfig) -> dict:
    """The data.* keys the prepared data depends on (with the task's `identity`, its cache key)."""
    return {k: v for k, v in plain(data_cfg).items() if k not in NOT_PREPARED}


def load_ray_datasets(data: PreparedData, datasets_to_split: list, seed: int) -> dict:
    """What Ray Train hands the workers: the train split's shards, streamed from parquet by Ray
    Data's read tasks (nothing is read here), and the validation split when it is sharded too
    (`data.datasets_to_split`); otherwise workers read it from disk.

    Shuffling is seeded and needs no process to hold the split: the shards' order is shuffled
    (anew each epoch), and each worker's local shuffle buffer (`data.shuffle_buffer_rows`) mixes
    rows from the shards it is reading. BENCHMARKS.md measures how close that comes to a global
    permutation."""
    import ray.data

    context = ray.data.DataContext.get_current()  # the datasets carry it: on the driver, or in a trial re-reading them
    classic_parquet_reader(context)
    context.enable_progress_bars = False  # a trial's split coordinator would print a bar per epoch otherwise
    # Shards read in parallel still arrive in their seeded order: a seed gives one sequence of batches.
    # A worker group's DataConfig says so again; Train's local mode (a one-worker trial) reads them as they are.
    context.execution_options.preserve_order = True
    train = ray.data.read_parquet(data.train_path, shuffle=ray.data.FileShuffleConfig(seed=seed))
    ray_datasets = {"train": train}
    if "validation" in datasets_to_split:
        import datasets  # only here: a sharded validation split is the exception

        ray_datasets["validation"] = ray.data.from_arrow(datasets.load_from_disk(data.validation_path).data.table)
    return ray_datasets
