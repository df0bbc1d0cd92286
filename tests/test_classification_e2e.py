"""End to end: the bert_mrpc offline variant (sentence pairs, a small BERT, a WordPiece tokenizer
trained on the proxy data) as a real sweep whose eval metrics come from compute_metrics."""

from __future__ import annotations

import os

import pytest
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from hfsweep import datasets_offline, sweep
from hfsweep.results import best_trial
from tests.conftest import resolved_config

pytestmark = pytest.mark.slow

MAX_STEPS = 20


def test_bert_mrpc_offline_sweep_reports_accuracy_and_f1_and_asha_acts_on_them(ray_cluster, tmp_path, cache_dir):
    data = datasets_offline.write(str(tmp_path / "data"))
    overrides = [
        "+experiment=bert_mrpc_offline",
        f"data.path={data['mrpc_proxy']}",
        "data.max_length=64",
        "data.max_eval_samples=100",
        "metric=eval_f1",  # the preset's accuracy drives ASHA the same way; F1 spreads more in 20 steps
        "cluster.num_workers=1",
        "cluster.max_concurrent_trials=4",  # all at once: two at a time, ASHA once kept all four on eval_f1
        f"training.max_steps={MAX_STEPS}",
        "training.eval_steps=5",
        "training.save_steps=5",
        "training.logging_steps=5",
        "training.warmup_steps=0",
        "scheduler.grace_period=5",
        "search_space.training.learning_rate.values=[3e-3,1e-3,1e-5,1e-6]",
    ]
    cfg = resolved_config(overrides, tmp_path / "run", cache_dir)
    results = sweep.run(cfg)
    assert results.errors == [] and len(results) == 4

    for result in results:
        history = result.metrics_dataframe
        assert history["eval_accuracy"].between(0, 1).all() and history["eval_f1"].between(0, 1).all()
    steps = sorted(result.metrics["step"] for result in results)
    assert steps[0] < MAX_STEPS <= steps[-1], f"ASHA stopped no trial on eval_f1: final steps {steps}"

    best = best_trial(results, cfg)
    every_f1 = [f1 for result in results for f1 in result.metrics_dataframe["eval_f1"]]
    assert best.metric == "eval_f1" and best.value == max(every_f1)
    exported = os.path.join(cfg["cluster"]["storage_path"], "best")
    model = AutoModelForSequenceClassification.from_pretrained(exported)
    assert model.config.id2label == {0: "0", 1: "1"}
    tokens = AutoTokenizer.from_pretrained(exported)("A sentence.", "Another.").tokens()
    assert tokens[0] == "[CLS]" and tokens.count("[SEP]") == 2
