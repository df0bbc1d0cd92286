"""End to end: the bert_conll2003 offline variant (a small BERT and a WordPiece tokenizer trained
from scratch) on CoNLL column files, under debug=tiny.
(Whether the preset learns: tests/e2e/test_families_learn_e2e.py.)"""

from __future__ import annotations

import os

from transformers import AutoModelForTokenClassification

from hfsweep.data.offline import write as write_offline_data
from tests.conftest import run_sweep


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
