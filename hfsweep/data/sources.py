"""Raw train/validation splits: CPython's pydoc prose, a hub dataset, or local files, all through
`datasets`' own builders."""

from __future__ import annotations

import hashlib
import os

import datasets
from datasets import DatasetDict

from hfsweep.config.errors import ConfigError, HubUnreachableError
from hfsweep.data.cache import atomic_dir

LOCAL_BUILDERS = {".txt": "text", ".raw": "text", ".csv": "csv", ".tsv": "csv", ".json": "json", ".jsonl": "json", ".parquet": "parquet"}
SPLIT_NAMES = {"train": ("train",), "validation": ("validation", "valid", "val", "dev")}


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
    return atomic_dir(os.path.join(cache_dir, "pydoc_topics", key), write_pydoc_topics)


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
    if not os.path.isdir(path):
        raise ConfigError(f"data.path: '{path}' must be a folder holding train.* and validation.* files.")
    builder, files = _local_data_files(path)
    kwargs = {"delimiter": "\t"} if builder == "csv" and files["train"].endswith(".tsv") else {}
    return datasets.load_dataset(builder, data_files=files, **kwargs)
