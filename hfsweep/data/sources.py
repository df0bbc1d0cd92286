"""Raw train/validation (and test) splits: CPython's pydoc prose, a hub dataset, or local files,
all through `datasets`' own builders."""

from __future__ import annotations

import hashlib
import os
from typing import Optional

import datasets
from datasets import DatasetDict

from hfsweep.config.errors import ConfigError, HubUnreachableError
from hfsweep.config.schema import DataConfig, DataSource
from hfsweep.contract.protocols import DataTask
from hfsweep.data.cache import atomic_dir

LOCAL_BUILDERS = {
    ".txt": "text",
    ".raw": "text",
    ".conll": "text",
    ".csv": "csv",
    ".tsv": "csv",
    ".json": "json",
    ".jsonl": "json",
    ".parquet": "parquet",
}
# datasets' patterns map valid, val and dev to validation, and name test files test
# What usually fixes a file its builder cannot parse.
PARSE_FIXES = {
    "csv": "quote characters inside unquoted fields (as in GLUE's TSVs): +data.load_kwargs.quoting=3; "
    "other pandas.read_csv options (delimiter, column_names, skiprows, encoding) go in data.load_kwargs too",
    "json": "json files must hold one object per line (jsonl) or a list of records; data.load_kwargs.field names a "
    "nested list",
    "text": "check data.load_kwargs.encoding",
    "parquet": "check that the file is parquet",
}


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


def split_roles(data_cfg: DataConfig) -> dict:
    """Which split each role reads: train; validation, unless `data.validation_split_percentage`
    carves it from train; test, when `data.test_split` names one."""
    roles = {"train": "train"}
    if data_cfg.validation_split_percentage is None:
        roles["validation"] = data_cfg.validation_split
    if data_cfg.test_split:
        roles["test"] = data_cfg.test_split
    return roles


def _missing_split(data_cfg: DataConfig, role: str, found) -> ConfigError:
    """A split the config names and the data lacks, refused by the key that names it."""
    key = {"test": "test_split", "validation": "validation_split"}.get(role, "name")
    where = f"'{data_cfg.name}'" if data_cfg.source is DataSource.hub else "the files of data.path"
    split = split_roles(data_cfg)[role]
    splits = ", ".join(map(str, found))
    return ConfigError(f"data.{key}: '{split}' is not a split of {where} (splits: {splits}); set data.{key}.")


def _named_data_files(path: str, named: dict, splits) -> tuple[str, dict]:
    """`data.data_files`: each split's file(s) named outright, relative to `data.path`, for files
    whose names no pattern finds (CoNLL-2003's eng.train and eng.testa). A suffix no builder
    knows is read as text."""
    missing = [split for split in splits if not named.get(split)]
    if missing:
        raise ConfigError(
            f"data.data_files: names no {' or '.join(missing)} file; e.g. data.data_files.{missing[0]}=dev.txt."
        )
    files = {
        split: [os.path.join(path, f) for f in ([named[split]] if isinstance(named[split], str) else named[split])]
        for split in splits
    }
    absent = [f for split_files in files.values() for f in split_files if not os.path.isfile(f)]
    if absent:
        raise ConfigError(f"data.data_files: '{absent[0]}' is not a file; names are relative to data.path.")
    builders = {
        LOCAL_BUILDERS.get(os.path.splitext(f)[1], "text") for split_files in files.values() for f in split_files
    }
    if len(builders) > 1:
        raise ConfigError(f"data.data_files: mixes file types {sorted(builders)}; use one type.")
    return builders.pop(), files


def _local_data_files(path: str, named: Optional[dict], data_cfg: DataConfig) -> tuple[str, dict]:
    """The files of each split `split_roles` reads from a folder, by `datasets`' own split-name
    patterns (train, validation/valid/val/dev, test, with `-`, `_` or `.` around them) or as
    `data.data_files` names them, and their builder."""
    from datasets.data_files import DataFilesDict, get_data_patterns

    splits = list(split_roles(data_cfg).values())
    if named:
        return _named_data_files(path, named, splits)

    try:
        found = DataFilesDict.from_patterns(get_data_patterns(path), base_path=path)
    except FileNotFoundError:
        found = {}
    files = {split: [f for f in found.get(split, ()) if os.path.splitext(f)[1] in LOCAL_BUILDERS] for split in splits}
    if data_cfg.test_split and not files[data_cfg.test_split]:
        raise _missing_split(data_cfg, "test", [split for split in found if found[split]])
    missing = [split for split in splits if not files[split]]
    if missing:
        raise ConfigError(
            f"data.path: '{path}' has no {' or '.join(missing)} file; name them train.txt and "
            f"validation.txt (or dev, valid; .csv/.tsv/.json/.jsonl/.parquet/.raw/.conll)."
        )
    suffixes = {os.path.splitext(f)[1] for split_files in files.values() for f in split_files}
    builders = {LOCAL_BUILDERS[suffix] for suffix in suffixes}
    if len(builders) > 1 or {".csv", ".tsv"} <= suffixes:  # one reader, one delimiter, for every file
        raise ConfigError(f"data.path: '{path}' mixes file types {sorted(suffixes)}; use one type.")
    return builders.pop(), files


def _reader_options(builder: str, files: dict, load_kwargs: dict) -> dict:
    """The builder's options: a TSV is tab-separated and a byte-order mark never reaches a column
    name, unless `data.load_kwargs` says otherwise."""
    options = {}
    if builder == "csv":
        options["encoding"] = "utf-8-sig"
        if files["train"][0].endswith(".tsv"):
            options["delimiter"] = "\t"
    return {**options, **load_kwargs}


def _load_local(
    builder: str, files: dict, options: dict, streaming: bool = False, task: Optional[DataTask] = None
) -> DatasetDict:
    """The task's own reader for a format `datasets` has no builder for (CoNLL columns, SQuAD's
    nested json), else `datasets.load_dataset` on local files; a file it cannot parse is refused
    in one line that names the file, the reader's complaint and the usual fix."""
    from datasets.exceptions import DatasetGenerationError

    _refuse_empty(builder, files, options)
    level = datasets.logging.get_verbosity()
    # its "Failed to read file" error log would repeat the refusal
    datasets.logging.set_verbosity(datasets.logging.CRITICAL)
    datasets.disable_progress_bars()
    try:
        read_by_task = task.read_local(builder, files) if task is not None and not streaming else None
        if read_by_task is not None:
            return read_by_task
        return datasets.load_dataset(builder, data_files=files, streaming=streaming, **options)
    except ConfigError:  # a task's reader refused the file in its own words
        raise
    except (DatasetGenerationError, ValueError, TypeError) as err:
        raise _parse_error(builder, files, options, err) from err
    finally:
        datasets.logging.set_verbosity(level)
        datasets.enable_progress_bars()


def _refuse_empty(builder: str, files: dict, options: dict) -> None:
    """A split file with no examples (empty, blank, or a csv header only) is refused by name:
    its reader would fail with a message about something else, or train on nothing."""
    header = int(builder == "csv" and options.get("header", "infer") is not None and not options.get("column_names"))
    for split, split_files in files.items():
        for path in split_files:
            if builder == "parquet":
                import pyarrow.parquet as pq

                lines = min(pq.ParquetFile(path).metadata.num_rows, 1)
                header_only = False
            else:
                with open(path, encoding="utf-8", errors="replace") as f:
                    lines = sum(1 for _, _ in zip((line for line in f if line.strip()), range(header + 1)))
                header_only = header and lines == 1
            if lines <= header:
                what = "holds a header and no rows" if header_only else "is empty"
                raise ConfigError(
                    f"data.path: '{path}' ({split}) {what}; put the {split} split's examples in it, "
                    f"or point data.path at the right folder."
                )


def _parse_error(builder: str, files: dict, options: dict, err: Exception) -> ConfigError:
    """Which file failed (each is tried alone), and why, in one line."""
    culprit, reason = None, err
    for path in (f for split_files in files.values() for f in split_files):
        try:
            datasets.load_dataset(builder, data_files={"check": path}, **options)
        except Exception as file_err:  # noqa: BLE001  (any reader error names this file)
            culprit, reason = path, file_err
            break
    while reason.__cause__ is not None:
        reason = reason.__cause__
    what = " ".join(str(reason).split()) or type(reason).__name__
    where = f"'{culprit}'" if culprit else f"the files of {sorted(files)}"
    return ConfigError(
        f"data.path: cannot parse {where} as {builder} ({type(reason).__name__}: {what}); {PARSE_FIXES[builder]}."
    )


def source_identity(data_cfg: DataConfig, cache_dir: str) -> list:
    """What names a streamed source's content without reading it: the hub dataset's name (its
    `data.load_kwargs`, a pinned revision among them, are in the key beside it), or the local files
    with their sizes and times."""
    if data_cfg.source is DataSource.hub:
        return [data_cfg.name, data_cfg.config_name]
    _, files = _local_data_files(local_path(data_cfg, cache_dir), data_cfg.data_files, data_cfg)
    return [[f, os.path.getsize(f), os.path.getmtime(f)] for split_files in files.values() for f in split_files]


def load_raw(data_cfg: DataConfig, cache_dir: str, task: Optional[DataTask] = None) -> DatasetDict:
    """The raw splits by role (`split_roles`: train, validation, test), through `datasets`' own
    builders (or the task's reader of a format it knows); streamed (`IterableDataset`s, nothing
    downloaded or converted up front) with `data.streaming`."""
    roles = split_roles(data_cfg)
    streaming = data_cfg.streaming
    if data_cfg.source is DataSource.hub:
        try:
            raw = datasets.load_dataset(
                data_cfg.name, data_cfg.config_name, streaming=streaming, **data_cfg.load_kwargs
            )
        except (ConnectionError, OSError) as err:
            raise HubUnreachableError(
                f"data: cannot load '{data_cfg.name}' from the Hugging Face hub ({type(err).__name__}); "
                f"run offline with data.source=local data.path=DIR (DIR holding train.txt and validation.txt)."
            ) from err
        for role, split in roles.items():
            if split not in raw:
                raise _missing_split(data_cfg, role, raw)
    else:
        path = local_path(data_cfg, cache_dir)
        builder, files = _local_data_files(path, data_cfg.data_files, data_cfg)
        raw = _load_local(builder, files, _reader_options(builder, files, data_cfg.load_kwargs), streaming, task)
    return DatasetDict({role: raw[split] for role, split in roles.items()})


def local_path(data_cfg: DataConfig, cache_dir: str) -> str:
    """The folder of a local source (the pydoc prose is written once into the cache)."""
    path = _pydoc_files(cache_dir) if data_cfg.source is DataSource.pydoc else data_cfg.path
    if not os.path.isdir(path):
        raise ConfigError(f"data.path: '{path}' must be a folder holding train.* and validation.* files.")
    return path
