"""Sequence to sequence (summarization, translation), as transformers' run_summarization.py and
run_translation.py: `task_options.source_prefix` + the source, truncated to `data.max_length`; the
target, truncated to `task_options.max_target_length`, as labels (padding -100); a `Seq2SeqTrainer` that
generates on evaluation, scored by ROUGE or sacreBLEU on the decoded texts.

Columns: `data.text_column` and `data.target_column` (jsonl/csv/tsv as distributed); for a
translation dataset whose rows are `{translation: {ro: ..., en: ...}}`, `data.text_column:
translation` with `data.source_lang`/`data.target_lang`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hfsweep.config.errors import ConfigError
from hfsweep.config.schema import DataConfig
from hfsweep.tasks.base import IGNORED, EvalContext, Task
from hfsweep.tasks.causal_lm import token_features
from hfsweep.tasks.local_metrics import TEXTS


def sources_and_targets(batch: dict, data_cfg: DataConfig) -> tuple[list, list]:
    source, target = data_cfg.text_column, data_cfg.target_column
    if data_cfg.source_lang:  # rows of {lang: text} pairs
        pairs = batch[source]
        return [p[data_cfg.source_lang] for p in pairs], [p[data_cfg.target_lang] for p in pairs]
    return batch[source], batch[target]


@dataclass
class Seq2Seq(Task):
    source_prefix: str = ""  # put before every source (T5's "summarize: ")
    max_target_length: int = 64  # target tokens, padded and truncated

    name = "seq2seq"
    reports_perplexity = True
    columns = ("text_column", "target_column")
    text_keys = ("text_column", "target_column", "source_lang", "target_lang")
    inputs = TEXTS
    generates = True  # the loop uses Seq2SeqTrainingArguments and the `generation` settings

    def auto_model_class(self):
        from transformers import AutoModelForSeq2SeqLM

        return AutoModelForSeq2SeqLM

    def check_config(self, data_cfg: DataConfig) -> None:
        if bool(data_cfg.source_lang) != bool(data_cfg.target_lang):
            raise ConfigError(
                "data.source_lang and data.target_lang: set both (translation pairs) or neither (two columns)."
            )
        if not data_cfg.source_lang and not data_cfg.target_column:
            raise ConfigError(
                "data.target_column: seq2seq needs the target's column (e.g. summary), or data.source_lang/target_lang."
            )

    def texts(self, row: dict, data_cfg: DataConfig) -> list:
        """Both sides: one vocabulary for the source and the target, as T5's."""
        sources, targets = sources_and_targets({k: [v] for k, v in row.items()}, data_cfg)
        return [sources[0], targets[0]]

    def preprocess(self, ds, tokenizer, data_cfg: DataConfig, split: str):
        from datasets import Features

        source_length, target_length = data_cfg.max_length, self.max_target_length

        def encode(batch: dict) -> dict:
            sources, targets = sources_and_targets(batch, data_cfg)
            encoded = tokenizer(
                [self.source_prefix + s for s in sources],
                padding="max_length",
                truncation=True,
                max_length=source_length,
            )
            labels = np.array(
                tokenizer(text_target=targets, padding="max_length", truncation=True, max_length=target_length)[
                    "input_ids"
                ]
            )
            labels[labels == tokenizer.pad_token_id] = IGNORED
            return {**encoded, "labels": labels}

        features = Features(
            {**token_features(tokenizer.model_input_names, source_length), **token_features(("labels",), target_length)}
        )
        return ds.map(encode, batched=True, remove_columns=ds.column_names, features=features, desc=f"tokenize {split}")

    def predictions_and_references(self, eval_pred, context):
        """Generated ids and labels decoded to text, stripped. Not split into one sentence per line
        as run_summarization does (with nltk's punkt, a download), so `rougeLsum` here equals
        `rougeL` and is lower than run_summarization's on summaries of several sentences."""
        predictions, labels = eval_pred
        tokenizer = context.tokenizer
        predictions = np.where(predictions != IGNORED, predictions, tokenizer.pad_token_id)
        labels = np.where(labels != IGNORED, labels, tokenizer.pad_token_id)
        decoded = [text.strip() for text in tokenizer.batch_decode(predictions, skip_special_tokens=True)]
        references = [text.strip() for text in tokenizer.batch_decode(labels, skip_special_tokens=True)]
        return decoded, references, None

    def compute_metrics(self, entries: list, context=EvalContext()):
        """The metrics on the decoded texts, and `gen_len`: the mean generated length in tokens."""
        scored = super().compute_metrics(entries, context)
        pad = context.tokenizer.pad_token_id if scored else None
        if scored is None:
            return None

        def compute(eval_pred) -> dict:
            lengths = (np.where(eval_pred[0] != IGNORED, eval_pred[0], pad) != pad).sum(-1)
            return {**scored(eval_pred), "gen_len": float(np.mean(lengths))}

        return compute


TASK = Seq2Seq()
