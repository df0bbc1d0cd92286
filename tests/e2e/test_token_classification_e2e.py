"""End to end: the bert_conll2003 offline variant (a small BERT and a WordPiece tokenizer trained
from scratch) on CoNLL column files, swept under ASHA on seqeval's entity-level F1."""

from __future__ import annotations

import os

from transformers import AutoModelForTokenClassification

from hfsweep.data.offline import write as write_offline_data
from hfsweep.driver import sweep
from hfsweep.driver.preflight import preflight
from hfsweep.driver.results.best import best_trial
from tests.conftest import resolved_config, run_sweep, sequential_sweep, untrained_metrics

MAX_STEPS = 120
MARGIN = 0.3  # entity F1 above the untrained model's that the best trial must reach


def test_bert_conll2003_offline_learns_entities_and_asha_acts_on_entity_f1(ray_cluster, tmp_path, cache_dir):
    folder = write_offline_data(str(tmp_path / "data"))["conll_proxy"]
    overrides = [
        "+experiment=bert_conll2003_offline",
        f"data.path={folder}",
        "data.max_length=48",
        "data.max_train_samples=600",
        *sequential_sweep(MAX_STEPS, every=40, learning_rates=[3e-3, 1e-3, 1e-5]),
    ]
    cfg = resolved_config(overrides, tmp_path / "run", cache_dir)
    before = untrained_metrics(cfg, str(tmp_path / "untrained"))["eval_overall_f1"]
    results = sweep.run(preflight(cfg))
    assert results.errors == [] and len(results) == 3

    final_step = {r.config["training"]["learning_rate"]: r.metrics["step"] for r in results}
    assert final_step[3e-3] == MAX_STEPS and final_step[1e-5] < MAX_STEPS, (
        f"ASHA on eval_overall_f1, final steps: {final_step}"
    )
    best = best_trial(results, cfg)
    assert best.metric == "eval_overall_f1" and best.value >= before + MARGIN, (
        f"untrained F1 {before:.3f}, best {best.value:.3f}"
    )
    for result in results:
        history = result.metrics_dataframe
        assert (
            history[["eval_overall_precision", "eval_overall_recall", "eval_overall_f1", "eval_overall_accuracy"]]
            .stack()
            .between(0, 1)
            .all()
        )

    model = AutoModelForTokenClassification.from_pretrained(os.path.join(cfg["cluster"]["storage_path"], "best"))
    assert sorted(model.config.id2label.values()) == [
        "B-LOC",
        "B-MISC",
        "B-ORG",
        "B-PER",
        "I-LOC",
        "I-MISC",
        "I-ORG",
        "I-PER",
        "O",
    ]


def test_the_offline_preset_under_debug_tiny_runs_one_short_trial(ray_cluster, tmp_path, cache_dir):
    """`debug=tiny` shrinks a preset (the preset's ASHA grace period of 100 would refuse 20 steps)."""
    folder = write_offline_data(str(tmp_path / "data"))["conll_proxy"]
    overrides = [
        "+experiment=bert_conll2003_offline",
        "debug=tiny",
        f"data.path={folder}",
        "data.max_train_samples=200",
    ]
    cfg, results = run_sweep(overrides, tmp_path / "run", cache_dir)
    assert results.errors == [] and len(results) == 1
    result = results[0]
    assert result.metrics["step"] == 20 and list(result.metrics_dataframe["step"]) == [10, 20]
    assert result.config["training"]["learning_rate"] == 1e-3 and 0 <= result.metrics["eval_overall_f1"] <= 1
    model = AutoModelForTokenClassification.from_pretrained(os.path.join(cfg["cluster"]["storage_path"], "best"))
    assert model.config.num_labels == 9
