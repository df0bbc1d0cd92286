"""Load (pydoc prose, hub name, or local files) → tokenizer → tokenize (and pack, for causal LM) → disk.

Runs once per sweep on the driver and is cached by content: trials only read the result. The
train split goes to the workers through Ray Data (sharded); validation is read whole by every
worker, and the Trainer's own distributed evaluation splits it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from itertools import chain
from typing import Optional

import datasets
import pyarrow.parquet
from datasets import ClassLabel, Dataset, DatasetDict, Features, List, Value

from hfsweep.config import ConfigError, HubUnreachableError
from hfsweep.models import load_tokenizer, tokenizer_cache_key, train_tokenizer

LOCAL_BUILDERS = {".txt": "text", ".raw": "text", ".csv": "csv", ".tsv": "csv", ".json": "json", ".jsonl": "json", ".parquet": "parquet"}
SPLIT_NAMES = {"train": ("train",), "validation": ("validation", "valid", "val", "dev")}


@dataclass
class PreparedData:
    """Where a sweep's tokenized data lives; every trial and worker reads these paths."""

    tokenizer_path: str
    train_path: str
    validation_path: str
    num_train_blocks: int  # training examples (packed blocks for causal LM)
    num_validation_blocks: int
    label_names: Optional[list] = None  # classification: the classes, in label order


def _atomic_dir(final: str, write) -> str:
    """Run write(tmp_dir), then move it to `final` in one rename, so a crash never leaves half a cache."""
    if os.path.isdir(final):
        return final
    os.makedirs(os.path.dirname(final), exist_ok=True)
    tmp = tempfile.mkdtemp(dir=os.path.dirname(final))
    write(tmp)
    try:
        os.replace(tmp, final)
    except OSError:  # another process finished first
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def write_pydoc_topics(folder: str, file_names: tuple = ("train.txt", "validation.txt")) -> None:
    """Write CPython's pydoc topics into `folder` as a train and a validation file (every tenth
    topic validates, so the split is fixed)."""
    from pydoc_data.topics import topics

    names = sorted(topics)
    for file_name, validates in zip(file_names, (False, True)):
        with open(os.path.join(folder, file_name), "w", encoding="utf-8") as f:
            f.write("\n".join(topics[n] for i, n in enumerate(names) if (i % 10 == 5) == validates))


def _pydoc_files(cache_dir: str) -> str:
    from pydoc_data.topics import topics

    key = hashlib.sha256("".join(topics[n] for n in sorted(topics)).encode()).hexdigest()[:16]
    return _atomic_dir(os.path.join(cache_dir, "pydoc_topics", key), write_pydoc_topics)


def _local_data_files(path: str) -> tuple[str, dict]:
    """Find train/validation files in a folder; return the `datasets` builder and data_files."""
    files = {}
    for entry in sorted(os.listdir(path)):
        stem, ext = os.path.splitext(entry)
        for split, names in SPLIT_NAMES.items():
            if ext in LOCAL_BUILDERS and (stem in names or stem.split(".")[-1] in names):
                files.setdefault(split, os.path.join(path, entry))
    missing = [s for s in SPLIT_NAMES if s not in files]
    if missing:
        raise ConfigError(
            f"data.path: '{path}' has no {' or '.join(missing)} file; name them train.txt and "
            f"validation.txt (or .csv/.tsv/.json/.jsonl/.parquet)."
        )
    builders = {LOCAL_BUILDERS[os.path.splitext(f)[1]] for f in files.values()}
    if len(builders) > 1:
        raise ConfigError(f"data.path: '{path}' mixes file types {sorted(builders)}; use one type.")
    return builders.pop(), files


def load_raw(data_cfg: dict, cache_dir: str) -> DatasetDict:
    """The raw train/validation splits, through `datasets`' own builders."""
    if data_cfg["source"] == "hub":
        try:
            raw = datasets.load_dataset(data_cfg["name"], data_cfg["config_name"])
        except (ConnectionError, OSError) as err:
            raise HubUnreachableError(
                f"data: cannot load '{data_cfg['name']}' from the Hugging Face hub ({type(err).__name__}); "
                f"run offline with data.source=local data.path=DIR (DIR holding train.txt and validation.txt)."
            ) from err
        if data_cfg["validation_split"] not in raw:
            raise ConfigError(
                f"data.validation_split: '{data_cfg['validation_split']}' is not a split of '{data_cfg['name']}' "
                f"(splits: {', '.join(raw)}); set data.validation_split."
            )
        return DatasetDict(train=raw["train"], validation=raw[data_cfg["validation_split"]])
    path = _pydoc_files(cache_dir) if data_cfg["source"] == "pydoc" else data_cfg["path"]
    if os.path.isdir(path):
        builder, files = _local_data_files(path)
    else:
        raise ConfigError(f"data.path: '{path}' must be a folder holding train.* and validation.* files.")
    kwargs = {"delimiter": "\t"} if builder == "csv" and files["train"].endswith(".tsv") else {}
    return datasets.load_dataset(builder, data_files=files, **kwargs)


def _tokenizer_for(model_cfg: dict, raw: DatasetDict, text_columns: list[str], cache_dir: str) -> str:
    """A pretrained tokenizer's name, or the path of one trained on the training split (cached)."""
    tok_cfg = model_cfg["tokenizer"]
    if tok_cfg["pretrained"]:
        return tok_cfg["pretrained"]
    key = tokenizer_cache_key(tok_cfg, raw["train"]._fingerprint)
    texts = (row[column] for row in raw["train"] for column in text_columns)
    return train_tokenizer(tok_cfg, texts, os.path.join(cache_dir, "tokenizers", key))


def group_texts(examples: dict, block_size: int) -> dict:
    """Concatenate token lists and cut them into blocks of block_size (run_clm's group_texts)."""
    concatenated = {k: list(chain(*examples[k])) for k in examples}
    total = len(concatenated["input_ids"]) // block_size * block_size
    result = {k: [t[i : i + block_size] for i in range(0, total, block_size)] for k, t in concatenated.items()}
    result["labels"] = [list(block) for block in result["input_ids"]]
    return result


def _token_features(names, length: int) -> dict:
    """Fixed-length token columns: Ray Data turns them into tensors without ragged arrays."""
    return {name: List(Value("int64"), length=length) for name in names}


def pack_for_causal_lm(ds: Dataset, tokenizer, data_cfg: dict, split: str) -> Dataset:
    """Tokenize, then pack into blocks of data.block_size whose labels are their inputs."""
    block = data_cfg["block_size"]
    features = Features(_token_features(("input_ids", "attention_mask", "labels"), block))
    tokenized = ds.map(
        lambda b: tokenizer(b[data_cfg["text_column"]]), batched=True, remove_columns=ds.column_names, desc=f"tokenize {split}"
    )
    return tokenized.map(group_texts, batched=True, fn_kwargs={"block_size": block}, features=features, desc=f"group {split}")


def encode_for_classification(ds: Dataset, tokenizer, data_cfg: dict, split: str) -> Dataset:
    """Tokenize the text (and the pair) padded and truncated to data.max_length, as Ray's BERT
    examples do; `labels` keeps its ClassLabel, so the prepared data names its classes."""
    text, pair, length = data_cfg["text_column"], data_cfg["pair_column"], data_cfg["max_length"]

    def encode(batch: dict) -> dict:
        encoded = tokenizer(batch[text], batch[pair] if pair else None, padding="max_length", truncation=True, max_length=length)
        return {**encoded, "labels": batch[data_cfg["label_column"]]}

    features = Features({**_token_features(tokenizer.model_input_names, length), "labels": ds.features[data_cfg["label_column"]]})
    return ds.map(encode, batched=True, remove_columns=ds.column_names, features=features, desc=f"tokenize {split}")


# model.task -> (the data.* keys naming the columns it reads, how a split becomes model inputs)
PREPROCESSORS = {
    "causal_lm": (("text_column",), pack_for_causal_lm),
    "sequence_classification": (("text_column", "pair_column", "label_column"), encode_for_classification),
}


def _check_columns(raw: DatasetDict, data_cfg: dict, keys) -> None:
    for key in keys:
        column = data_cfg[key]
        for split in raw:
            if column is not None and column not in raw[split].column_names:
                raise ConfigError(
                    f"data.{key}: '{column}' is not a column of the {split} split "
                    f"(columns: {', '.join(raw[split].column_names)}); set data.{key}."
                )


def encode_labels(raw: DatasetDict, column: str, num_labels: int | None) -> DatasetDict:
    """Make the label column a ClassLabel taken from the train split (integer labels count
    0..N-1, string labels are named classes), so both splits and the model share the classes."""
    feature = raw["train"].features[column]
    if not isinstance(feature, ClassLabel):
        values = sorted(set(raw["train"][column]))
        if values and isinstance(values[0], str):
            feature = ClassLabel(names=values)
        else:
            feature = ClassLabel(num_classes=num_labels or int(max(values)) + 1)
        try:
            raw = raw.cast_column(column, feature)
        except ValueError as err:
            raise ConfigError(f"data.label_column: '{column}' has labels outside the {feature.num_classes} classes of the train split ({err}); check the data or data.num_labels.") from err
    if num_labels and feature.num_classes != num_labels:
        raise ConfigError(f"data.num_labels: {num_labels}, but '{column}' holds {feature.num_classes} classes; set data.num_labels={feature.num_classes} or null.")
    return raw


def label_names(dataset: Dataset) -> list[str] | None:
    """The class names a prepared classification split carries in its `labels` column."""
    feature = dataset.features.get("labels")
    return feature.names if isinstance(feature, ClassLabel) else None


def prepare(cfg: dict) -> PreparedData:
    """Tokenize the configured data once, as `model.task` needs it; return where trials find it."""
    data_cfg, cache_dir, task = cfg["data"], os.path.expanduser(cfg["cache_dir"]), cfg["model"]["task"]
    column_keys, preprocess = PREPROCESSORS[task]
    raw = load_raw(data_cfg, cache_dir)
    _check_columns(raw, data_cfg, column_keys)
    for split, limit in (("train", data_cfg["max_train_samples"]), ("validation", data_cfg["max_eval_samples"])):
        if limit:
            raw[split] = raw[split].select(range(min(limit, len(raw[split]))))
    if "label_column" in column_keys:
        raw = encode_labels(raw, data_cfg["label_column"], data_cfg["num_labels"])
    text_columns = [data_cfg[k] for k in ("text_column", "pair_column") if k in column_keys and data_cfg[k]]
    tokenizer_path = _tokenizer_for(cfg["model"], raw, text_columns, cache_dir)
    tokenized_by = {k: v for k, v in data_cfg.items() if k != "datasets_to_split"}  # how workers get it is not the data
    key = hashlib.sha256(
        json.dumps(
            [raw["train"]._fingerprint, raw["validation"]._fingerprint, tokenizer_path, tokenized_by, task], sort_keys=True
        ).encode()
    ).hexdigest()[:16]
    out = os.path.join(cache_dir, "tokenized", key)

    def write(tmp: str) -> None:
        tokenizer = load_tokenizer(tokenizer_path)
        for split, ds in raw.items():
            processed = preprocess(ds, tokenizer, data_cfg, split)
            if split == "train":
                processed.to_parquet(os.path.join(tmp, "train", "data.parquet"))
            else:
                processed.save_to_disk(os.path.join(tmp, "validation"))

    _atomic_dir(out, write)
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
