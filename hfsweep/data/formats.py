"""File formats the field ships that `datasets` has no builder for (CoNLL columns, SQuAD's nested
json), read into `datasets` through `Dataset.from_generator`: written to Arrow as it reads, and
cached by the file's path, size and time."""

from __future__ import annotations

import os

from datasets import Dataset, DatasetDict, concatenate_datasets

from hfsweep.config.errors import ConfigError


def conll_sentences(path: str, size: int, mtime: float):
    """Sentences of a CoNLL column file: one token per line, its tag in the last column (any
    number of columns between, split on whitespace or tabs), a blank line between sentences,
    `-DOCSTART-` lines skipped. `size` and `mtime` name the file's version for the cache."""
    tokens, tags = [], []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            columns = line.split()
            if not columns or columns[0] == "-DOCSTART-":
                if tokens:
                    yield {"tokens": tokens, "ner_tags": tags}
                    tokens, tags = [], []
                continue
            if len(columns) < 2:
                raise ConfigError(
                    f"data.path: '{path}' line {number} is not CoNLL: {line.strip()!r} has no tag column; each line "
                    f"holds a token, optional columns and its tag, with a blank line between sentences."
                )
            tokens.append(columns[0])
            tags.append(columns[-1])
    if tokens:
        yield {"tokens": tokens, "ner_tags": tags}


def read_conll(files: dict) -> DatasetDict:
    """Each split's CoNLL files as `tokens` and `ner_tags` (tag strings) columns."""
    from datasets import Features, List, Value

    features = Features({"tokens": List(Value("string")), "ner_tags": List(Value("string"))})
    splits = {}
    for split, paths in files.items():
        parts = [_from_generator(conll_sentences, features, path=p, size=os.path.getsize(p), mtime=os.path.getmtime(p))
                 for p in paths]
        if not any(len(part) for part in parts):
            raise ConfigError(f"data.path: the {split} files {paths} hold no CoNLL sentences; check the files.")
        splits[split] = concatenate_datasets(parts)
    return DatasetDict(splits)


def _from_generator(generator, features, **gen_kwargs) -> Dataset:
    """`Dataset.from_generator`, with a reader's own one-line refusal passed through unwrapped."""
    from datasets.exceptions import DatasetGenerationError

    try:
        return Dataset.from_generator(generator, features=features, gen_kwargs=gen_kwargs)
    except DatasetGenerationError as err:
        cause = err.__cause__
        raise (cause if isinstance(cause, ConfigError) else err) from None


def is_squad_json(path: str) -> bool:
    """SQuAD's nested layout (`{"version": ..., "data": [{"paragraphs": [...]}]}`), told from
    json/jsonl records by its opening: one object whose first kilobytes name paragraphs."""
    with open(path, encoding="utf-8") as f:
        head = f.read(65536)
    return head.lstrip().startswith("{") and '"paragraphs"' in head and '"qas"' in head


def squad_examples(path: str, size: int, mtime: float):
    """SQuAD v1.1 or v2.0 json as the hub dataset's flat rows: id, title, context, question and
    answers {text, answer_start} (empty for v2's unanswerable questions)."""
    import json

    with open(path, encoding="utf-8") as f:
        articles = json.load(f)["data"]
    for article in articles:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                answers = [] if qa.get("is_impossible") else qa["answers"]
                yield {
                    "id": qa["id"], "title": article.get("title", ""), "context": paragraph["context"],
                    "question": qa["question"],
                    "answers": {"text": [a["text"] for a in answers],
                                "answer_start": [a["answer_start"] for a in answers]},
                }


def read_squad(files: dict) -> DatasetDict:
    """Each split's SQuAD json files as flat rows."""
    from datasets import Features, List, Value

    features = Features({
        "id": Value("string"), "title": Value("string"), "context": Value("string"), "question": Value("string"),
        "answers": {"text": List(Value("string")), "answer_start": List(Value("int32"))},
    })
    splits = {}
    for split, paths in files.items():
        parts = [_from_generator(squad_examples, features, path=p, size=os.path.getsize(p), mtime=os.path.getmtime(p))
                 for p in paths]
        splits[split] = concatenate_datasets(parts)
    return DatasetDict(splits)
