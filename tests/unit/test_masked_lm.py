"""Masked LM's data: blocks as run_mlm groups them, a validation split masked once and the same
every time, training batches masked afresh per worker seed, and whole-word masking."""

from __future__ import annotations

import numpy as np
import pytest
from datasets import Dataset

from hfsweep.config.schema import DataConfig, typed
from hfsweep.data.tokenizers import TOKENIZER_TRAINERS
from hfsweep.tasks import with_options
from hfsweep.tasks.base import IGNORED
from hfsweep.tasks.data_hooks import batches_collator
from hfsweep.tasks.masked_lm import TASK

TEXTS = [f"the quick brown fox number {i} jumps over the lazy dog near the riverbank" for i in range(200)]
DATA_CFG = typed(DataConfig, {"text_column": "text", "block_size": 32})


@pytest.fixture(scope="module")
def tokenizer():
    return TOKENIZER_TRAINERS["roberta_bpe"](TEXTS, 300)


def test_texts_are_grouped_into_whole_blocks_of_block_size(tokenizer):
    blocks = TASK.preprocess(Dataset.from_dict({"text": TEXTS}), tokenizer, DATA_CFG, "train")
    tokens = sum(len(ids) for ids in tokenizer(TEXTS)["input_ids"])
    assert blocks.num_rows == tokens // 32 and len(blocks[0]["input_ids"]) == 32
    assert set(blocks.column_names) == {
        "input_ids",
        "attention_mask",
        "special_tokens_mask",
    }  # labels come with the masks


def test_a_tokenizer_without_a_mask_token_is_refused_in_one_line():
    from hfsweep.config.errors import ConfigError

    gpt2_like = TOKENIZER_TRAINERS["byte_level_bpe"](TEXTS, 300)
    with pytest.raises(ConfigError, match=r"^model.task=masked_lm: the tokenizer .* has no mask token"):
        TASK.preprocess(Dataset.from_dict({"text": TEXTS}), gpt2_like, DATA_CFG, "train")


def test_the_validation_split_is_masked_once_and_the_same_every_time(tokenizer):
    ds = Dataset.from_dict({"text": TEXTS})
    first, again = (TASK.preprocess(ds, tokenizer, DATA_CFG, "validation") for _ in range(2))
    labels = np.array(first["labels"])
    assert labels.tolist() == np.array(again["labels"]).tolist()
    masked = labels != IGNORED
    assert 0.10 < masked.mean() < 0.20  # task_options.eval_mlm_probability = 0.15
    inputs = np.array(first["input_ids"])
    assert (inputs[masked] == tokenizer.mask_token_id).mean() > 0.6  # 80% become <mask>, the rest random or kept
    assert (inputs[~masked] != tokenizer.mask_token_id).all()


def test_training_batches_are_masked_by_a_generator_of_the_workers_seed(tokenizer):
    blocks = TASK.preprocess(Dataset.from_dict({"text": TEXTS}), tokenizer, DATA_CFG, "train")
    batch = {name: np.array(blocks[:16][name]) for name in blocks.column_names}
    masks = {seed: batches_collator(TASK, None, tokenizer, "train", seed)(batch)["labels"] for seed in (1, 1, 2)}
    same = batches_collator(TASK, None, tokenizer, "train", 1)(batch)["labels"]
    assert (same == masks[1]).all() and not (masks[2] == masks[1]).all()
    collate = batches_collator(with_options(TASK, {"mlm_probability": 0.5}), None, tokenizer, "train", 1)
    assert 0.4 < (collate(batch)["labels"] != IGNORED).float().mean() < 0.6  # task_options.mlm_probability applies
    assert not (collate(batch)["labels"] == collate(batch)["labels"]).all()  # afresh for every batch


def test_whole_word_masking_masks_every_sub_token_of_a_word(tokenizer):
    task = with_options(TASK, {"whole_word_mask": True, "mlm_probability": 0.3})
    blocks = task.preprocess(Dataset.from_dict({"text": TEXTS}), tokenizer, DATA_CFG, "train")
    batch = {name: np.array(blocks[:16][name]) for name in blocks.column_names}
    labels = batches_collator(task, None, tokenizer, "train", 0)(batch)["labels"].numpy()
    starts = batch["offset_mapping"][..., 0]
    ends = batch["offset_mapping"][..., 1]
    continues = np.zeros_like(starts, dtype=bool)
    continues[:, 1:] = (
        (starts[:, 1:] == ends[:, :-1])
        & (batch["special_tokens_mask"][:, :-1] == 0)
        & (batch["special_tokens_mask"][:, 1:] == 0)
    )
    assert continues.any(), "the test needs words of several sub-tokens"
    masked = labels != IGNORED
    assert (
        masked[:, 1:][continues[:, 1:]] == masked[:, :-1][continues[:, 1:]]
    ).all()  # a piece is masked with the one before it


def test_searching_the_masking_probability_prepares_nothing_again():
    """The prepared data's cache key holds the task's identity: the training masking share is
    applied on the workers, the validation split's is prepared."""
    assert with_options(TASK, {"mlm_probability": 0.3}).identity() == TASK.identity()
    assert with_options(TASK, {"eval_mlm_probability": 0.3}).identity() != TASK.identity()
