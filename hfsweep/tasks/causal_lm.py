"""Causal language modelling, as transformers' run_clm.py: tokenize, then `group_texts` into
blocks of `data.block_size` whose labels are their inputs."""

from __future__ import annotations

from itertools import chain

from hfsweep.tasks.base import Task


def group_texts(examples: dict, block_size: int) -> dict:
    """Concatenate token lists and cut them into blocks of block_size (run_clm's group_texts)."""
    concatenated = {k: list(chain(*examples[k])) for k in examples}
    total = len(concatenated["input_ids"]) // block_size * block_size
    result = {k: [t[i : i + block_size] for i in range(0, total, block_size)] for k, t in concatenated.items()}
    result["labels"] = [list(block) for block in result["input_ids"]]
    return result


def token_features(names, length: int) -> dict:
    """Fixed-length token columns: Ray Data turns them into tensors without ragged arrays."""
    from datasets import List, Value

    return {name: List(Value("int64"), length=length) for name in names}


class CausalLM(Task):
    name = "causal_lm"
    columns = ("text_column",)
    length_key = "block_size"
    loss_type = "ForCausalLM"

    def auto_model_class(self):
        from transformers import AutoModelForCausalLM

        return AutoModelForCausalLM

    def preprocess(self, ds, tokenizer, data_cfg: dict, split: str):
        from datasets import Features

        block = data_cfg["block_size"]
        features = Features(token_features(("input_ids", "attention_mask", "labels"), block))
        tokenized = ds.map(
            lambda b: tokenizer(b[data_cfg["text_column"]]), batched=True, remove_columns=ds.column_names, desc=f"tokenize {split}"
        )
        return tokenized.map(group_texts, batched=True, fn_kwargs={"block_size": block}, features=features, desc=f"group {split}")


TASK = CausalLM()
