"""End to end: the bert_squad offline variant (a small BERT and a WordPiece tokenizer trained from
scratch) on SQuAD-format json, under the Accelerate loop.
(Whether the preset learns: tests/e2e/test_families_learn_e2e.py.)"""

from __future__ import annotations

import os

import pytest

from hfsweep.config.schema import SweepConfig
from hfsweep.data.offline import write as write_offline_data
from hfsweep.driver import sweep
from hfsweep.driver.preflight import preflight
from hfsweep.driver.results.best import best_trial
from tests.conftest import resolved_config


def test_the_accelerate_loop_scores_answers_as_the_trainer_does(ray_cluster, tmp_path, cache_dir):
    """loop=accelerate evaluates question answering with the Trainer's shapes (start and end logits
    against start and end positions): the F1 it reports for the best checkpoint is the one a
    transformers.Trainer computes for that checkpoint."""
    from hfsweep.config.schema import DataConfig, typed
    from hfsweep.data.prepare import raw_splits
    from hfsweep.driver.results.evaluation import evaluate_checkpoint

    folder = write_offline_data(str(tmp_path / "data"))["squad_proxy"]
    cfg = resolved_config(
        [
            "+experiment=bert_squad_offline",
            f"data.path={folder}",
            "debug=tiny",
            "loop=accelerate",
            "training.learning_rate=3e-3",
        ],
        tmp_path / "run",
        cache_dir,
    )
    checked = preflight(cfg)
    results = sweep.run(checked)
    assert results.errors == [] and results[0].metrics["step"] == cfg["training"]["max_steps"]
    best = best_trial(results, typed(SweepConfig, cfg))
    data_cfg = typed(DataConfig, cfg["data"])
    raw = raw_splits(data_cfg, cfg["cache_dir"], checked.task)
    by_trainer = evaluate_checkpoint(
        typed(SweepConfig, cfg), os.path.join(cfg["cluster"]["storage_path"], "best"), data_cfg, raw
    )
    assert by_trainer["eval_f1"] == pytest.approx(best.value, abs=1e-6)
