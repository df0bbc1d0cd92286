"""Reading file formats that `datasets` has no builder for (the task families bring their parsers:
CoNLL columns, SQuAD's nested json) into `datasets` through `Dataset.from_generator`: written to
Arrow as it reads, and cached by the file's path, size and time."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from hfsweep.config.errors import ConfigError

if TYPE_CHECKING:  # the task modules import this, and a trial's process imports them: `datasets` waits for a read
    from datasets import Dataset, DatasetDict


def read_with(parser, features, files: dict, what: str) -> DatasetDict:
    """Each split's files as rows of `features`, parsed by `parser(path, size, mtime)` (a generator;
    size and time name the file's version for the cache). A split whose files hold no rows is
    refused, naming `what` they should hold."""
    from datasets import DatasetDict, concatenate_datasets

    splits = {}
    for split, paths in files.items():
        parts = [
            _from_generator(parser, features, path=p, size=os.path.getsize(p), mtime=os.path.getmtime(p)) for p in paths
        ]
        if not any(len(part) for part in parts):
            raise ConfigError(f"data.path: the {split} files {paths} hold no {what}; check the files.")
        splits[split] = concatenate_datasets(parts)
    return DatasetDict(splits)


def _from_generator(generator, features, **gen_kwargs) -> Dataset:
    """`Dataset.from_generator`, with a reader's own one-line refusal passed through unwrapped."""
    from datasets import Dataset
    from datasets.exceptions import DatasetGenerationError

    try:
        return Dataset.from_generator(generator, features=features, gen_kwargs=gen_kwargs)
    except DatasetGenerationError as err:
        cause = err.__cause__
        raise (cause if isinstance(cause, ConfigError) else err) from None
