"""End to end: the bert_mrpc offline variant (sentence pairs, a small BERT, a WordPiece tokenizer
trained on the training split) on files in GLUE's own TSV format, as a real sweep whose eval
metrics come from compute_metrics."""

from __future__ import annotations

import os

from transformers import AutoModelForSequenceClassification, AutoTokenizer

from hfsweep.config.schema import SweepConfig, typed
from hfsweep.driver.results.best import best_trial
from tests.conftest import run_sweep, write_glue_pairs

MAX_STEPS = 40


def test_bert_mrpc_offline_sweep_reports_accuracy_and_f1_and_asha_acts_on_them(ray_cluster, tmp_path, cache_dir):
    overrides = [
        "+experiment=bert_mrpc_offline",
        f"data.path={write_glue_pairs(tmp_path / 'pairs')}",  # as GLUE ships MRPC: train.tsv, dev.tsv
        "data.text_column='#1 String'",
        "data.pair_column='#2 String'",
        "data.label_column=Quality",
        "+data.load_kwargs.quoting=3",  # csv.QUOTE_NONE: GLUE's fields hold bare quote characters
        "data.max_length=32",
        "metric=eval_f1",  # the preset's eval_accuracy drives ASHA through the same path
        "cluster.num_workers=1",
        # One at a time, in grid order: the learning trials reach the rung first. Side by side, two
        # trials still at chance (F1 0.0) could arrive first, and ASHA stops nothing below a tie.
        "cluster.max_concurrent_trials=1",
        f"training.max_steps={MAX_STEPS}",
        "training.eval_steps=10",
        "training.save_steps=10",
        "training.logging_steps=10",
        "training.warmup_steps=0",
        "scheduler.grace_period=20",  # the one rung: 3e-3 has learnt the pairs (F1 1.0), 1e-5 has not
        # ASHA keeps a trial at or above the rung's 75th percentile: below 3e-3's F1 1.0, even at
        # a tie of the others at 0.0 (with 2, a tie at the median goes on)
        "scheduler.reduction_factor=4",
        "search_space.training.learning_rate.values=[3e-3,1e-2,1e-3,1e-5]",
        "search_alg.defaults_trial=false",  # the rung is set over these four alone
        # 3e-3 reaches F1 1.0 at step 20 and keeps it: the budget must keep the checkpoint that
        # Tune ranks best of equal scores (the later), or best/ has nothing to export
        "checkpoints.keep_per_trial=1",
    ]
    cfg, results = run_sweep(overrides, tmp_path / "run", cache_dir)
    assert results.errors == [] and len(results) == 4

    for result in results:
        history = result.metrics_dataframe
        assert history["eval_accuracy"].between(0, 1).all() and history["eval_f1"].between(0, 1).all()
        assert "eval_perplexity" not in history, "a classifier's loss is no token loss: no perplexity"
    final_step = {result.config["training"]["learning_rate"]: result.metrics["step"] for result in results}
    assert final_step[3e-3] == MAX_STEPS and final_step[1e-5] == 20, f"ASHA on eval_f1, final steps: {final_step}"

    best = best_trial(results, typed(SweepConfig, cfg))
    every_f1 = [f1 for result in results for f1 in result.metrics_dataframe["eval_f1"]]
    assert best.metric == "eval_f1" and best.value == max(every_f1)
    assert best.step == MAX_STEPS and os.listdir(os.path.dirname(best.checkpoint_path)) == [f"checkpoint-{MAX_STEPS}"]
    exported = os.path.join(cfg["cluster"]["storage_path"], "best")
    model = AutoModelForSequenceClassification.from_pretrained(exported)
    assert model.config.id2label == {0: "0", 1: "1"}
    tokens = AutoTokenizer.from_pretrained(exported)("A sentence.", "Another.").tokens()
    assert tokens[0] == "[CLS]" and tokens.count("[SEP]") == 2
