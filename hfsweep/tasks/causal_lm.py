"""Causal language modelling, as transformers' run_clm.py: tokenize, then `group_texts` into
blocks of `data.block_size` whose labels are their inputs."""

from __future__ import annotations

from itertools import chain

import numpy as np

from hfsweep.config.schema import DataConfig
from hfsweep.data.tokenizers import token_ids
from hfsweep.tasks.base import Task


def group_texts(token_lists: list, block_size: int) -> dict:
    """Concatenate token lists and cut them into blocks of block_size, dropping the remainder
    (run_clm's group_texts), as arrays: Arrow takes them without a Python loop per token."""
    flat = np.fromiter(chain.from_iterable(token_lists), dtype=np.int64)
    blocks = flat[: len(flat) // block_size * block_size].reshape(-1, block_size)
    return {"input_ids": blocks, "attention_mask": np.ones_like(blocks), "labels": blocks}


def token_features(names, length: int | None) -> dict:
    """Token columns of `length` tokens each (Ray Data turns them into tensors without ragged
    arrays), or of each example's own length (None), padded per batch by the task's collator."""
    from datasets import List, Value

    return {name: List(Value("int64"), length=-1 if length is None else length) for name in names}


class CausalLM(Task):
    name = "causal_lm"
    reports_perplexity = True
    columns = ("text_column",)
    length_key = "block_size"
    loss_type = "ForCausalLM"

    def auto_model_class(self):
        from transformers import AutoModelForCausalLM

        return AutoModelForCausalLM

    def preprocess(self, ds, tokenizer, data_cfg: DataConfig, split: str):
        from datasets import Features

        block = data_cfg.block_size
        features = Features(token_features(("input_ids", "attention_mask", "labels"), block))

        def tokenize_and_group(batch: dict) -> dict:  # per 1000 texts, as run_clm groups
            return group_texts(token_ids(tokenizer, batch[data_cfg.text_column]), block)

        return ds.map(
            tokenize_and_group,
            batched=True,
            remove_columns=ds.column_names,
            features=features,
            desc=f"tokenize {split}",
        )


TASK = CausalLM()
