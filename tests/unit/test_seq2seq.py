"""Seq2seq's data and evaluation: the prefix and padded labels as run_summarization makes them,
translation pairs by language, and a Trainer that generates only at every K-th evaluation."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import transformers
from datasets import Dataset

from hfsweep.config.errors import ConfigError
from hfsweep.config.schema import DataConfig, typed
from hfsweep.data.tokenizers import TOKENIZER_TRAINERS
from hfsweep.tasks import with_options
from hfsweep.tasks.base import EvalContext
from hfsweep.tasks.seq2seq import IGNORED, TASK

TEXTS = [f"the river number {i} runs past the old mill and into the sea" for i in range(60)]
DATA_CFG = typed(DataConfig, {"text_column": "document", "target_column": "summary", "max_length": 24})
T5_XSUM = with_options(TASK, {"source_prefix": "summarize: ", "max_target_length": 16})


@pytest.fixture(scope="module")
def tokenizer():
    return TOKENIZER_TRAINERS["unigram"]([f"summarize: {t}" for t in TEXTS], 200)


def test_sources_get_the_prefix_and_targets_become_labels_padded_with_minus_100(tokenizer):
    ds = Dataset.from_dict({"document": TEXTS[:2], "summary": ["the river", "the old mill"]})
    row = T5_XSUM.preprocess(ds, tokenizer, DATA_CFG, "train")[0]
    assert tokenizer.decode(row["input_ids"], skip_special_tokens=True).startswith("summarize: the river")
    labels = [t for t in row["labels"] if t != IGNORED]
    assert tokenizer.decode(labels, skip_special_tokens=True) == "the river" and labels[-1] == tokenizer.eos_token_id
    assert row["labels"][len(labels) :] == [IGNORED] * (16 - len(labels))


def test_translation_rows_are_read_by_language(tokenizer):
    cfg = replace(DATA_CFG, text_column="translation", target_column=None, source_lang="ro", target_lang="en")
    ds = Dataset.from_dict({"translation": [{"ro": "mill old the", "en": "the old mill"}]})
    row = with_options(TASK, {"max_target_length": 16}).preprocess(ds, tokenizer, cfg, "train")[0]
    assert tokenizer.decode(row["input_ids"], skip_special_tokens=True) == "mill old the"
    assert tokenizer.decode([t for t in row["labels"] if t != IGNORED], skip_special_tokens=True) == "the old mill"
    with pytest.raises(ConfigError, match=r"^data\.source_lang and data\.target_lang: set both"):
        TASK.check_config(replace(cfg, target_lang=None))


def test_generated_ids_are_decoded_and_scored_with_their_length(tokenizer):
    compute = TASK.compute_metrics(["sacrebleu", "rouge"], EvalContext(tokenizer=tokenizer))
    text = "the old mill runs into the sea"  # BLEU needs 4-grams
    target = tokenizer(text_target=[text], padding="max_length", max_length=64)["input_ids"]
    labels = np.where(np.array(target) == tokenizer.pad_token_id, IGNORED, target)
    generated = np.array([[tokenizer.pad_token_id, *tokenizer(text)["input_ids"]]])  # decoder start, tokens, </s>
    scores = compute((generated, labels))
    assert scores["sacrebleu"] == pytest.approx(100.0) and scores["rouge1"] == pytest.approx(1.0)
    assert scores["gen_len"] == len(tokenizer(text)["input_ids"])  # the decoder's start token is padding


def test_generation_runs_only_at_every_kth_evaluation_and_eval_loss_at_each(tokenizer, tmp_path):
    from transformers import AutoConfig, AutoModelForSeq2SeqLM, Seq2SeqTrainingArguments

    from hfsweep.loops.trainers import GenerationEvalTrainer

    transformers.set_seed(0)
    config = AutoConfig.for_model(
        "t5",
        vocab_size=len(tokenizer),
        d_model=32,
        d_ff=64,
        d_kv=16,
        num_layers=1,
        num_heads=2,
        decoder_start_token_id=0,
        pad_token_id=0,
        eos_token_id=1,
    )
    ds = T5_XSUM.preprocess(
        Dataset.from_dict({"document": TEXTS[:12], "summary": [t[:10] for t in TEXTS[:12]]}),
        tokenizer,
        DATA_CFG,
        "validation",
    )
    args = Seq2SeqTrainingArguments(
        output_dir=str(tmp_path), use_cpu=True, report_to="none", per_device_eval_batch_size=4
    )
    trainer = GenerationEvalTrainer(
        model=AutoModelForSeq2SeqLM.from_config(config),
        args=args,
        eval_dataset=ds,
        processing_class=tokenizer,
        compute_metrics=TASK.compute_metrics(["rouge"], EvalContext(tokenizer=tokenizer)),
        every_k_evals=2,
        max_eval_samples=5,
        max_new_tokens=4,
    )
    first, second = trainer.evaluate(), trainer.evaluate()
    assert "eval_loss" in first and "eval_rouge1" not in first
    assert first["eval_loss"] == pytest.approx(second["eval_loss"])  # teacher-forced, on the whole split
    assert {"eval_rouge1", "eval_rougeL", "eval_gen_len"} <= set(second) and second["eval_gen_len"] <= 4
    assert any("eval_rouge1" in entry for entry in trainer.state.log_history)  # what the next report reads


def test_a_test_split_is_scored_once_with_every_metric_whatever_the_evaluation_cadence(tokenizer, tmp_path):
    """The sweep generates at every second evaluation (trainer.every_k_evals=2): the test split's
    one scoring generates all the same, so it has ROUGE beside its loss."""
    from datasets import DatasetDict
    from transformers import AutoConfig, AutoModelForSeq2SeqLM

    from hfsweep.driver.results.evaluation import evaluate_checkpoint
    from tests.conftest import sweep_config

    sweep = sweep_config(
        [
            "+experiment=t5_xsum_offline",
            "trainer.every_k_evals=2",
            "trainer.max_eval_samples=5",
            "trainer.max_new_tokens=4",
            "data.max_length=24",
        ],
        tmp_path / "run",
        tmp_path,
    )
    transformers.set_seed(0)
    config = AutoConfig.for_model(
        "t5", vocab_size=len(tokenizer), d_model=32, d_ff=64, d_kv=16, num_layers=1, num_heads=2,
        decoder_start_token_id=0, pad_token_id=0, eos_token_id=1,
    )  # fmt: skip
    checkpoint = tmp_path / "checkpoint"
    AutoModelForSeq2SeqLM.from_config(config).save_pretrained(checkpoint)
    tokenizer.save_pretrained(checkpoint)
    rows = {"document": TEXTS[:12], "summary": [t[:10] for t in TEXTS[:12]]}
    raw = DatasetDict(train=Dataset.from_dict(rows), test=Dataset.from_dict(rows))
    scores = evaluate_checkpoint(sweep, str(checkpoint), sweep.data, raw, split="test")
    assert {"test_loss", "test_rouge1", "test_rougeLsum", "test_gen_len"} <= set(scores), sorted(scores)
