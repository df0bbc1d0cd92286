"""End to end: the bert_squad offline variant (a small BERT and a WordPiece tokenizer trained from
scratch) on SQuAD-format json, swept under ASHA on the squad metric's F1."""

from __future__ import annotations

import os

import pytest
from transformers import AutoModelForQuestionAnswering

from hfsweep.data.offline import write as write_offline_data
from hfsweep.driver import sweep
from hfsweep.driver.preflight import preflight
from hfsweep.driver.results.best import best_trial
from tests.conftest import resolved_config, sequential_sweep, untrained_metrics

MAX_STEPS = 200
MARGIN = 20.0  # F1 points (of 100) above the untrained model's that the best trial must reach


def test_bert_squad_offline_learns_answers_and_asha_acts_on_f1(ray_cluster, tmp_path, cache_dir):
    folder = write_offline_data(str(tmp_path / "data"))["squad_proxy"]
    cfg = resolved_config(
        [
            "+experiment=bert_squad_offline",
            f"data.path={folder}",
            *sequential_sweep(MAX_STEPS, every=50, learning_rates=[3e-3, 1e-5]),
        ],
        tmp_path / "run",
        cache_dir,
    )
    before = untrained_metrics(cfg, str(tmp_path / "untrained"))
    results = sweep.run(preflight(cfg))
    assert results.errors == [] and len(results) == 2

    final_step = {r.config["training"]["learning_rate"]: r.metrics["step"] for r in results}
    assert final_step == {3e-3: MAX_STEPS, 1e-5: 50}, f"ASHA on eval_f1, final steps: {final_step}"
    best = best_trial(results, cfg)
    assert best.metric == "eval_f1" and best.value >= before["eval_f1"] + MARGIN, (
        f"untrained F1 {before['eval_f1']:.1f}, best {best.value:.1f}"
    )
    history = max(results, key=lambda r: r.config["training"]["learning_rate"]).metrics_dataframe
    assert history["eval_exact_match"].between(0, 100).all() and history["eval_loss"].notna().all()
    assert (
        AutoModelForQuestionAnswering.from_pretrained(
            os.path.join(cfg["cluster"]["storage_path"], "best")
        ).config.model_type
        == "bert"
    )


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
    best = best_trial(results, cfg)
    data_cfg = typed(DataConfig, cfg["data"])
    raw = raw_splits(data_cfg, cfg["cache_dir"], checked.task)
    by_trainer = evaluate_checkpoint(cfg, os.path.join(cfg["cluster"]["storage_path"], "best"), data_cfg, raw)
    assert by_trainer["eval_f1"] == pytest.approx(best.value, abs=1e-6)
