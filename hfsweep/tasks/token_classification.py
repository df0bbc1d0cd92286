"""Token classification (NER, POS), as transformers' run_ner.py: words split into sub-tokens, each
word's tag on its first sub-token (or on all of them: `task_options.label_all_tokens`, where a B- tag
becomes I- after the first), -100 elsewhere; scored with seqeval on the tag sequences.

Data: a hub dataset with `tokens` and `ner_tags` columns (`data.text_column`, `data.label_column`),
json/jsonl with the same, or CoNLL column files (train.txt, validation.txt) read by
`read_conll` below. The tags are the training split's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hfsweep.config.errors import ConfigError
from hfsweep.config.schema import DataConfig
from hfsweep.data.formats import read_with
from hfsweep.tasks.base import IGNORED, Task
from hfsweep.tasks.causal_lm import token_features
from hfsweep.tasks.local_metrics import TAGS


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


def read_conll(files: dict):
    """Each split's CoNLL files as `tokens` and `ner_tags` (tag strings) columns."""
    from datasets import Features, List, Value

    features = Features({"tokens": List(Value("string")), "ner_tags": List(Value("string"))})
    return read_with(conll_sentences, features, files, "CoNLL sentences")


def encode_tags(raw, column: str):
    """Make the tag column a sequence of ClassLabel named by the training split's tags (sorted, as
    run_ner does for string tags), so both splits and the model share them."""
    from datasets import ClassLabel, List

    feature = raw["train"].features[column]
    if isinstance(getattr(feature, "feature", None), ClassLabel):
        return raw
    names = sorted({tag for tags in raw["train"][column] for tag in tags})
    if names and not isinstance(names[0], str):
        raise ConfigError(
            f"data.label_column: '{column}' holds tag ids without names; give tag strings, or a ClassLabel sequence."
        )
    for split in [split for split in raw if split != "train"]:  # validation (unless carved from train later), test
        unknown = sorted({tag for tags in raw[split][column] for tag in tags} - set(names))
        if unknown:
            raise ConfigError(
                f"data.label_column: the {split} split has tags the train split lacks "
                f"({', '.join(unknown[:5])}); add them to train."
            )
    return raw.cast_column(column, List(ClassLabel(names=names)))


@dataclass
class TokenClassification(Task):
    label_all_tokens: bool = False  # a word's tag on every sub-token (B- becoming I-), not just its first

    name = "token_classification"
    columns = ("text_column", "label_column")
    inputs = TAGS
    pads_batches = True

    def auto_model_class(self):
        from transformers import AutoModelForTokenClassification

        return AutoModelForTokenClassification

    def read_local(self, builder: str, files: dict):
        return read_conll(files) if builder == "text" else None

    def prepare_raw(self, raw, data_cfg: DataConfig):
        return encode_tags(raw, data_cfg.label_column)

    def preprocess(self, ds, tokenizer, data_cfg: DataConfig, split: str):
        """Sub-tokens truncated to `data.max_length`, with the word-aligned labels (padded by the
        collator, labels with -100)."""
        from datasets import Features

        words, tags, length = data_cfg.text_column, data_cfg.label_column, data_cfg.max_length
        names = ds.features[tags].feature.names
        padding, padded_length = self.padding(data_cfg)
        inside = [
            names.index("I-" + n[2:]) if n.startswith("B-") and "I-" + n[2:] in names else i
            for i, n in enumerate(names)
        ]

        def encode(batch: dict) -> dict:
            encoded = tokenizer(
                batch[words], is_split_into_words=True, padding=padding, truncation=True, max_length=length
            )
            labels = []
            for row, word_tags in enumerate(batch[tags]):
                previous, row_labels = None, []
                for word in encoded.word_ids(row):
                    if word is None:
                        row_labels.append(IGNORED)
                    elif word != previous:
                        row_labels.append(word_tags[word])
                    else:
                        row_labels.append(inside[word_tags[word]] if self.label_all_tokens else IGNORED)
                    previous = word
                labels.append(row_labels)
            return {**encoded, "labels": labels}

        features = Features(
            {**token_features(tokenizer.model_input_names, padded_length), **token_features(["labels"], padded_length)}
        )
        return ds.map(encode, batched=True, remove_columns=ds.column_names, features=features, desc=f"tokenize {split}")

    def collator(self, tokenizer, split: str, seed: int = 0):
        from transformers import DataCollatorForTokenClassification

        return DataCollatorForTokenClassification(tokenizer)

    def predictions_and_references(self, eval_pred, context):
        """Tag sequences over the labelled positions (what run_ner scores)."""
        logits, labels = eval_pred
        predicted = np.argmax(logits, axis=-1)
        keep = labels != IGNORED
        names = context.label_names
        predictions = [[names[p] for p in row[mask]] for row, mask in zip(predicted, keep)]
        references = [[names[t] for t in row[mask]] for row, mask in zip(labels, keep)]
        return predictions, references, None


TASK = TokenClassification()
