"""End to end, one row per task family: a short sweep of the family's offline preset (a small model
and a tokenizer or processor built from the data, on files in the field's own format) learns what
the family is for, ASHA acts on the family's metric, and best/ loads with the family's Auto class.

A row says how far its sweep must get: beyond the untrained model's score by a margin (the same
seed, no step taken), or above a floor where chance is known (a classifier of N classes)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pytest
from transformers import (
    AutoImageProcessor,
    AutoModelForImageClassification,
    AutoModelForMaskedLM,
    AutoModelForMultipleChoice,
    AutoModelForQuestionAnswering,
    AutoModelForSeq2SeqLM,
    AutoModelForTokenClassification,
    AutoTokenizer,
)

from hfsweep.config.schema import SweepConfig, typed
from hfsweep.data.offline import write as write_offline_data
from hfsweep.data.offline import write_digits
from hfsweep.driver import sweep
from hfsweep.driver.preflight import preflight
from hfsweep.driver.results.best import best_trial
from tests.conftest import resolved_config, sequential_sweep, untrained_metrics, write_swag

CONLL_LABELS = ["B-LOC", "B-MISC", "B-ORG", "B-PER", "I-LOC", "I-MISC", "I-ORG", "I-PER", "O"]


def offline_proxy(name: str) -> Callable[[Path], str]:
    return lambda folder: write_offline_data(str(folder))[name]


def entity_scores_are_shares(cfg, results, best):
    for result in results:
        scores = ["eval_overall_precision", "eval_overall_recall", "eval_overall_f1", "eval_overall_accuracy"]
        assert result.metrics_dataframe[scores].stack().between(0, 1).all()
    model = AutoModelForTokenClassification.from_pretrained(best)
    assert sorted(model.config.id2label.values()) == CONLL_LABELS


def is_roberta(cfg, results, best):
    assert AutoModelForMaskedLM.from_pretrained(best).config.model_type == "roberta"


def summaries_are_short_and_generated(cfg, results, best):
    learnt = max(results, key=lambda r: r.config["training"]["learning_rate"]).metrics_dataframe
    assert (learnt["eval_gen_len"] <= 16).all(), "trainer.max_new_tokens"
    assert learnt["eval_gen_len"].iloc[-1] > 1, "more than </s>"
    model, tokenizer = AutoModelForSeq2SeqLM.from_pretrained(best), AutoTokenizer.from_pretrained(best)
    inputs = tokenizer(["summarize: The simple form is equivalent to this."], return_tensors="pt")
    generated = model.generate(**inputs, max_new_tokens=8)
    assert tokenizer.decode(generated[0], skip_special_tokens=True).strip()


def answers_are_scored_in_percent(cfg, results, best):
    history = max(results, key=lambda r: r.config["training"]["learning_rate"]).metrics_dataframe
    assert history["eval_exact_match"].between(0, 100).all() and history["eval_loss"].notna().all()
    assert AutoModelForQuestionAnswering.from_pretrained(best).config.model_type == "bert"


def digits_load_with_their_processor(cfg, results, best):
    model, processor = AutoModelForImageClassification.from_pretrained(best), AutoImageProcessor.from_pretrained(best)
    assert model.config.id2label[3] == "3" and processor.size == {"height": 8, "width": 8}


def picks_one_of_the_endings(cfg, results, best):
    assert type(AutoModelForMultipleChoice.from_pretrained(best)).__name__ == "BertForMultipleChoice"


ONE_LEARNING_RATE = [
    "scheduler=fifo",
    "scheduler.grace_period=null",
    "search_space.training.learning_rate.values=[3e-3]",
]


@dataclass(frozen=True)
class Learns:
    experiment: str
    write_data: Callable[[Path], str]  # writes the preset's data into a folder: its data.path
    overrides: tuple
    score: str  # the metric that shows learning, read at the best trial's last report
    margin: Optional[float] = None  # beyond the untrained model's score (below it for a loss)
    floor: Optional[float] = None  # or above this (chance is known)
    final_steps: Optional[dict] = None  # learning rate: the steps at which ASHA may let it end
    check_more: Callable = lambda cfg, results, best: None  # the family's own: (cfg, results, best/ path)


FAMILIES = {
    "token_classification": Learns(
        "bert_conll2003_offline",
        offline_proxy("conll_proxy"),
        (
            "data.max_length=48",
            "data.max_train_samples=600",
            *sequential_sweep(120, every=40, learning_rates=[3e-3, 1e-3, 1e-5]),
        ),
        score="eval_overall_f1",
        margin=0.3,
        final_steps={3e-3: {120}, 1e-5: {40, 80}},  # 1e-5 stops at a rung before the end
        check_more=entity_scores_are_shares,
    ),
    "masked_lm": Learns(
        "roberta_wikitext_mlm_offline",
        offline_proxy("wikitext_proxy"),
        (
            "data.block_size=64",
            "model.config.max_position_embeddings=66",
            "~search_space.task_options",  # the masking rate is searched in the preset; here only the learning rate
            *sequential_sweep(90, every=30, learning_rates=[3e-3, 1e-5]),
        ),
        score="eval_loss",
        margin=0.75,  # nats (ln 1000 = 6.9, the vocabulary; 90 steps reach ~5.9)
        final_steps={3e-3: {90}, 1e-5: {30}},
        check_more=is_roberta,
    ),
    "seq2seq": Learns(
        "t5_xsum_offline",
        offline_proxy("summary_proxy"),
        (
            "trainer.max_eval_samples=64",
            *sequential_sweep(150, every=50, learning_rates=[3e-3, 1e-5], warmup_steps=20),
        ),
        score="eval_rouge1",  # ASHA acts on eval_loss; generated summaries are scored at every evaluation
        margin=0.1,  # the untrained model generates nothing: 0
        final_steps={3e-3: {150}, 1e-5: {50}},
        check_more=summaries_are_short_and_generated,
    ),
    "question_answering": Learns(
        "bert_squad_offline",
        offline_proxy("squad_proxy"),
        tuple(sequential_sweep(200, every=50, learning_rates=[3e-3, 1e-5])),
        score="eval_f1",
        margin=20.0,  # F1 points of 100
        final_steps={3e-3: {200}, 1e-5: {50}},
        check_more=answers_are_scored_in_percent,
    ),
    "image_classification": Learns(
        "vit_digits_offline",
        lambda folder: write_digits(str(folder)),
        (*ONE_LEARNING_RATE, "training.max_steps=100"),
        score="eval_accuracy",
        floor=0.5,  # chance: 0.10
        check_more=digits_load_with_their_processor,
    ),
    "multiple_choice": Learns(
        "bert_swag_offline",
        write_swag,
        (
            *ONE_LEARNING_RATE,
            "training.max_steps=80",
            "training.eval_steps=40",
            "training.save_steps=40",
            "training.logging_steps=40",
            "cluster.num_workers=1",
        ),
        score="eval_accuracy",
        floor=0.6,  # chance: 0.25
        check_more=picks_one_of_the_endings,
    ),
}


@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_learns_and_asha_acts_on_its_metric(family, ray_cluster, tmp_path, cache_dir):
    row = FAMILIES[family]
    overrides = [f"+experiment={row.experiment}", f"data.path={row.write_data(tmp_path / 'data')}", *row.overrides]
    overrides.append("search_alg.defaults_trial=false")  # the grid's rates alone: each is a trial ASHA judges
    cfg = resolved_config(overrides, tmp_path / "run", cache_dir)
    if row.margin is not None:
        before = untrained_metrics(cfg, str(tmp_path / "untrained"))[row.score]
    results = sweep.run(preflight(cfg))
    assert results.errors == [] and len(results) == len(cfg["search_space"]["training"]["learning_rate"]["values"])

    if row.final_steps is not None:
        final_step = {r.config["training"]["learning_rate"]: r.metrics["step"] for r in results}
        assert all(final_step[lr] in steps for lr, steps in row.final_steps.items()), (
            f"ASHA on {cfg['metric']}, final steps: {final_step}"
        )
    best = best_trial(results, typed(SweepConfig, cfg))
    assert best.metric == cfg["metric"]
    [trial] = [r for r in results if r.metrics["trial_id"] == best.trial_id]
    learnt = trial.metrics[row.score]
    untrained = f"untrained {before:.3f}, " if row.margin is not None else ""
    said = f"{row.score}: {untrained}the best trial ends at {learnt:.3f}"
    if row.margin is None:
        assert learnt > row.floor, f"{said}; the floor is {row.floor}"
    elif row.score.endswith("loss"):
        assert learnt <= before - row.margin, said
    else:
        assert learnt >= before + row.margin, said
    row.check_more(cfg, results, os.path.join(cfg["cluster"]["storage_path"], "best"))
