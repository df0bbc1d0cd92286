"""Load → tokenizer → the task's preprocessing → disk, once per sweep on the driver.

Cached by content under `cache_dir`: a second sweep on the same data prepares nothing, and trials
only read the result. The train split is written as parquet shards (`hfsweep.data.shards`) that
the workers stream through Ray Data; validation is read whole by every worker (the Trainer's
distributed evaluation splits it), or sharded too.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import traceback

import datasets
from datasets import Dataset, DatasetDict

from hfsweep.compat import dataset_fingerprint
from hfsweep.config.errors import ConfigError
from hfsweep.config.schema import DataConfig, ModelConfig
from hfsweep.contract.protocols import DataTask
from hfsweep.data.cache import atomic_dir
from hfsweep.data.prepared import PreparedData, what_is_prepared
from hfsweep.data.shards import write_shards
from hfsweep.data.sources import load_raw, source_identity

PREPARED_LAYOUT = 3  # what a prepared folder holds; a change makes earlier caches miss instead of misread


def _check_columns(raw: DatasetDict, data_cfg: DataConfig, keys) -> None:
    for key in keys:
        column = getattr(data_cfg, key)
        for split in raw:
            names = raw[split].column_names  # None for a stream whose builder does not know its columns
            if column is not None and names is not None and column not in names:
                raise ConfigError(
                    f"data.{key}: '{column}' is not a column of the {split} split "
                    f"(columns: {', '.join(raw[split].column_names)}); set data.{key}."
                )


def raw_splits(data_cfg: DataConfig, cache_dir: str, task: DataTask) -> DatasetDict:
    """The train, validation (and test) splits as the task reads them: columns checked, labels
    encoded (`task.prepare_raw`), the validation set carved from train where asked, then the
    sample limits applied (the test split is scored whole)."""
    raw = load_raw(data_cfg, cache_dir, task)
    _check_columns(raw, data_cfg, task.columns)
    if data_cfg.streaming:
        raw = _from_stream(raw, data_cfg)
    raw = task.prepare_raw(raw, data_cfg)
    if data_cfg.validation_split_percentage is not None:
        raw = carve_validation(raw, data_cfg, task)
    for split, limit in (("train", data_cfg.max_train_samples), ("validation", data_cfg.max_eval_samples)):
        if limit and isinstance(raw[split], Dataset):
            raw[split] = raw[split].select(range(min(limit, len(raw[split]))))
    return raw


def carve_validation(raw: DatasetDict, data_cfg: DataConfig, task: DataTask) -> DatasetDict:
    """`data.validation_split_percentage` of the train split as the validation set, the rest as
    train, by `datasets`' own `train_test_split`: seeded by `data.split_seed` (not `seed`, so
    every search holds out the same examples), stratified when the task's `class_column` holds
    classes (a ClassLabel, as `prepare_raw` makes them), so a small validation set keeps the
    classes' shares."""
    from datasets import ClassLabel

    train, label = raw["train"], task.class_column(data_cfg)
    stratify = label if isinstance(train.features.get(label), ClassLabel) else None
    try:
        parts = train.train_test_split(
            test_size=data_cfg.validation_split_percentage / 100, seed=data_cfg.split_seed, stratify_by_column=stratify
        )
    except ValueError as err:  # too few examples (of a class) for the share asked
        raise ConfigError(
            f"data.validation_split_percentage: cannot carve {data_cfg.validation_split_percentage}% of the "
            f"{train.num_rows} training examples ({err}); raise it, or name a validation split instead."
        ) from err
    return DatasetDict({**raw, "train": parts["train"], "validation": parts["test"]})


def write_validation(raw_validation, task: DataTask, tokenizer, data_cfg: DataConfig, folder: str) -> str:
    """The validation split tokenized into `folder`/validation, with the examples the task's
    metrics map predictions back to; returns its path."""
    path = os.path.join(folder, "validation")
    task.preprocess(raw_validation, tokenizer, data_cfg, "validation").save_to_disk(path)
    task.save_validation_examples(raw_validation, data_cfg, folder)
    return path


PROCESSOR_FILES = (".json", ".txt", ".model")  # a tokenizer's or image processor's files; not a model's weights


def processor_identity(path: str) -> list:
    """The tokenizer (or image processor) in the cache key: its hub name, or a local folder's path
    and what its processor files hold, so one retrained into the same folder prepares anew."""
    if not os.path.isdir(path):
        return [path]
    digest = hashlib.sha256()
    for name in sorted(os.listdir(path)):
        if name.endswith(PROCESSOR_FILES) and os.path.isfile(os.path.join(path, name)):
            with open(os.path.join(path, name), "rb") as f:
                digest.update(name.encode() + b"\0" + f.read())
    return [path, digest.hexdigest()]


def prepare(data_cfg: DataConfig, model_cfg: ModelConfig, cache_dir: str, task: DataTask) -> PreparedData:
    """Tokenize the configured data once, as the sweep's Task needs it (with the tokenizer
    `model_cfg` names or trains); return where trials find it."""
    cache_dir = os.path.expanduser(cache_dir)
    raw = raw_splits(data_cfg, cache_dir, task)
    tokenizer_path = task.prepare_processor(model_cfg, raw["train"], data_cfg, cache_dir)
    tokenized_by = what_is_prepared(data_cfg)
    train_identity = source_identity(data_cfg, cache_dir) if data_cfg.streaming else dataset_fingerprint(raw["train"])
    key = hashlib.sha256(
        json.dumps(
            [
                PREPARED_LAYOUT,
                train_identity,
                dataset_fingerprint(raw["validation"]),
                processor_identity(tokenizer_path),
                tokenized_by,
                task.identity(),
            ],
            sort_keys=True,
        ).encode()
    ).hexdigest()[:16]
    out = os.path.join(cache_dir, "tokenized", key)

    def write(tmp: str) -> None:
        written = write_shards(raw["train"], task, tokenizer_path, data_cfg, os.path.join(tmp, "train"))
        if written.num_rows == 0:
            raise ConfigError(
                f"data: the train split gives no training examples after tokenization (for causal LM: fewer than "
                f"data.block_size={data_cfg.block_size} tokens per chunk); add data or lower data.block_size."
            )
        write_validation(raw["validation"], task, task.load_processor(tokenizer_path), data_cfg, tmp)
        with open(os.path.join(tmp, "train_summary.json"), "w") as f:
            json.dump(
                {
                    "shards": written.num_shards,
                    "rows": written.num_rows,
                    "tokens": written.num_tokens,
                    "label_names": task.label_names(raw["train"], data_cfg),
                },
                f,
            )

    atomic_dir(out, write)
    validation = datasets.load_from_disk(os.path.join(out, "validation"))
    with open(os.path.join(out, "train_summary.json")) as f:
        train = json.load(f)
    return PreparedData(
        tokenizer_path=tokenizer_path,
        train_path=os.path.join(out, "train"),
        validation_path=os.path.join(out, "validation"),
        num_train_blocks=train["rows"],
        num_validation_blocks=validation.num_rows,
        label_names=train["label_names"],
        num_train_tokens=train["tokens"],
    )


def prepare_apart(data_cfg: DataConfig, model_cfg: ModelConfig, cache_dir: str, task: DataTask) -> PreparedData:
    """`prepare` in a spawned process, so the driver holds none of the threads tokenizing starts
    (the `tokenizers` pool, torch's, tqdm's monitor) when it starts Ray: Ray launches its daemons by
    fork with a Python `preexec_fn`, which Python documents as unsafe beside other threads. (The
    start-up time-out on a 16-core node once blamed on this was a float num_cpus:
    `ray_cluster.whole_cpus`.) The result comes back through a pipe and the driver goes on while the
    process exits: a process pool would keep a manager thread here and wait for its interpreter's
    teardown (2.3 s of a loaded sweep's 11.5 s in it). A refusal comes back as the same ConfigError."""
    spawn = multiprocessing.get_context("spawn")
    results, sender = spawn.Pipe(duplex=False)
    process = spawn.Process(target=_prepare_and_send, args=(sender, data_cfg, model_cfg, cache_dir, task))
    process.start()
    sender.close()  # else the driver's copy would keep the pipe open past the process's end
    try:
        outcome = results.recv()
    except EOFError:
        process.join()
        raise RuntimeError(
            f"preparing the data: its process ended without a result (exit code {process.exitcode}); see above"
        ) from None
    finally:
        results.close()
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def _prepare_and_send(sender, *arguments) -> None:
    """The spawned process's work. It stands in for the driver: transformers' seeded collators
    (masked LM's fixed validation masks) take any process not named MainProcess for a DataLoader
    worker. An unexpected error's traceback is printed here, where it happened."""
    multiprocessing.current_process().name = "MainProcess"
    try:
        outcome = prepare(*arguments)
    except ConfigError as err:
        outcome = err
    except Exception as err:
        traceback.print_exc()
        outcome = err
    sender.send(outcome)


def _from_stream(raw, data_cfg: DataConfig) -> DatasetDict:
    """A streamed dataset made ready for preparation: the train split stays a stream (read chunk
    by chunk, up to `max_train_samples` examples), the validation split is read whole (or its
    first `max_eval_samples`), and the test split whole."""
    train, validation = raw["train"], raw["validation"]
    if data_cfg.max_train_samples:
        train = train.take(data_cfg.max_train_samples)
    if data_cfg.max_eval_samples:
        validation = validation.take(data_cfg.max_eval_samples)
    rest = {split: Dataset.from_list(list(raw[split])) for split in raw if split not in ("train", "validation")}
    return DatasetDict(train=train, validation=Dataset.from_list(list(validation)), **rest)
