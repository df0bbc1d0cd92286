"""Masked language modelling, as transformers' run_mlm.py: texts tokenized and grouped into blocks
of `data.block_size`, masked by `DataCollatorForLanguageModeling`.

Training batches are masked afresh as the worker reads them (`task_options.mlm_probability`,
searchable; `task_options.whole_word_mask` masks all sub-tokens of a word together), from a generator seeded by the
trial's seed and the worker's rank. The validation split is masked once, at preparation, with its
own seeded generator and `task_options.eval_mlm_probability`: every evaluation of every trial scores the
same masked tokens, so eval_loss (and eval_perplexity) compare across steps and trials, even when
`mlm_probability` is searched.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hfsweep.config.schema import DataConfig, SweepConfig
from hfsweep.tasks.base import Task, rows
from hfsweep.tasks.causal_lm import token_features

EVAL_MASK_SEED = 0


def masking_collator(tokenizer, whole_word_mask: bool, probability: float, seed: int):
    from transformers import DataCollatorForLanguageModeling

    # transformers replaces whole words by <mask> only (no random or kept tokens), and warns at
    # every batch unless told so
    replace = {"mask_replace_prob": 1.0, "random_replace_prob": 0.0} if whole_word_mask else {}
    return DataCollatorForLanguageModeling(
        tokenizer, mlm_probability=probability, whole_word_mask=whole_word_mask, seed=seed, **replace
    )


def group_columns(encoded: dict, names: list[str], block_size: int) -> dict:
    """run_mlm's group_texts over several columns: each concatenated and cut into whole blocks;
    an offset pair column keeps its pairs."""
    from itertools import chain

    out = {}
    for name in names:
        width = 2 if name == "offset_mapping" else 1
        flat = np.fromiter(
            chain.from_iterable(chain.from_iterable(encoded[name]) if width == 2 else encoded[name]), dtype=np.int64
        )
        blocks = flat[: len(flat) // (block_size * width) * block_size * width].reshape(-1, block_size, width)
        out[name] = blocks if width == 2 else blocks[..., 0]
    return out


@dataclass
class MaskedLM(Task):
    mlm_probability: float = 0.15  # the share of tokens masked in each training batch (searchable)
    eval_mlm_probability: float = 0.15  # the share masked, once and seeded, in the validation split
    whole_word_mask: bool = False  # mask every sub-token of a chosen word together

    name = "masked_lm"
    reports_perplexity = True
    columns = ("text_column",)
    length_key = "block_size"
    worker_options = ("mlm_probability",)  # each training batch is masked on the worker

    def check_config(self, data_cfg: DataConfig) -> None:
        from hfsweep.config.errors import ConfigError

        for key in ("mlm_probability", "eval_mlm_probability"):
            share = getattr(self, key)
            if not 0 < share <= 1:  # none masked: no labels, a NaN loss; above 1: the collator's ValueError
                raise ConfigError(
                    f"task_options.{key}: must be above 0 and at most 1 (the share of tokens masked), "
                    f"not {share}; e.g. task_options.{key}=0.15."
                )

    def check(self, sweep: SweepConfig) -> None:
        """A tokenizer trained here of a kind without a mask token is refused now, not after Ray
        starts and the data is tokenized (`preprocess` still checks a pretrained one)."""
        from hfsweep.config.errors import ConfigError
        from hfsweep.data.tokenizers import TRAINED_WITH_MASK_TOKEN

        super().check(sweep)
        tokenizer = sweep.model.tokenizer
        kind = tokenizer.kind.value
        if tokenizer.pretrained is None and kind not in TRAINED_WITH_MASK_TOKEN:
            raise ConfigError(
                f"model.task=masked_lm: a {kind} tokenizer trained here has no mask token to mask with; "
                f"use a masked LM's model and tokenizer, e.g. model=roberta_tiny (or model.tokenizer.kind="
                f"{' or '.join(TRAINED_WITH_MASK_TOKEN)})."
            )

    def auto_model_class(self):
        from transformers import AutoModelForMaskedLM

        return AutoModelForMaskedLM

    def preprocess(self, ds, tokenizer, data_cfg: DataConfig, split: str):
        from datasets import Features, List, Value

        from hfsweep.config.errors import ConfigError

        if tokenizer.mask_token is None:  # the collator's own ValueError would come from every trial
            raise ConfigError(
                f"model.task=masked_lm: the tokenizer ({tokenizer.name_or_path or 'trained here'}) has "
                f"no mask token to mask with; use a masked LM's, e.g. model=roberta_tiny."
            )

        block, whole_words = data_cfg.block_size, self.whole_word_mask
        names = ["input_ids", "attention_mask", "special_tokens_mask"] + (["offset_mapping"] if whole_words else [])

        def tokenize_and_group(batch: dict) -> dict:
            encoded = tokenizer(
                batch[data_cfg.text_column], return_special_tokens_mask=True, return_offsets_mapping=whole_words
            )
            return group_columns(encoded, names, block)

        features = token_features(names[:3], block)
        if whole_words:
            features["offset_mapping"] = List(List(Value("int64"), length=2), length=block)
        blocks = ds.map(
            tokenize_and_group,
            batched=True,
            remove_columns=ds.column_names,
            features=Features(features),
            desc=f"tokenize {split}",
        )
        if split != "validation":
            return blocks
        collator = masking_collator(tokenizer, self.whole_word_mask, self.eval_mlm_probability, EVAL_MASK_SEED)

        def mask(batch: dict) -> dict:
            masked = collator(rows(batch))
            return {
                "input_ids": masked["input_ids"].numpy(),
                "attention_mask": masked["attention_mask"].numpy(),
                "labels": masked["labels"].numpy(),
            }

        masked_features = Features(token_features(("input_ids", "attention_mask", "labels"), block))
        return blocks.map(
            mask, batched=True, remove_columns=blocks.column_names, features=masked_features, desc="mask validation"
        )

    def collator(self, tokenizer, split: str, seed: int = 0):
        """Training batches masked afresh (the validation split was masked once, when prepared)."""
        if split == "train":
            return masking_collator(tokenizer, self.whole_word_mask, self.mlm_probability, seed)
        return None


TASK = MaskedLM()
