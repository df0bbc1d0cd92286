"""The held-out test split without a selection: the search's winning trial and its defaults trial
are scored at their final models, and no other trial; what the summary says of each score."""

from __future__ import annotations

import pytest

from hfsweep.config.schema import SweepConfig, typed
from hfsweep.driver.results.best import BestTrial
from hfsweep.driver.results.held_out import held_out_lines, search_test
from tests.unit.test_select import SELECTED, retrained_runs

SEARCH = typed(
    SweepConfig,
    {
        **SELECTED,
        "search_space": {"training": {"learning_rate": {"sampler": "grid", "values": [3e-3, 1e-3, 1e-4]}}},
        "training": {"learning_rate": 1e-4},  # the defaults trial's value
        "search_alg": {"defaults_trial": True},
        "data": {"test_split": "test"},
    },
)


def test_the_searchs_winner_and_defaults_trials_alone_are_scored_at_their_final_models(tmp_path):
    trials = retrained_runs(tmp_path, {3e-3: (0.9, 0.6), 1e-3: (0.8, 0.7), 1e-4: (0.5, 0.5)})[::2]  # seed 1 each
    for trial in trials:
        trial.config = trial.metrics["config"]
    best = BestTrial("0.003-1", {"training.learning_rate": 3e-3}, "eval_accuracy", 0.9, 10, "unused")
    scored = []

    def score(checkpoint: str) -> dict:
        scored.append(checkpoint)
        return {"test_accuracy": 0.75, "test_loss": 0.5}

    record = search_test(trials, best, SEARCH, score)
    assert scored == [str(tmp_path / f"{lr}-1" / "checkpoint-20") for lr in (3e-3, 1e-4)], "final, not best"
    assert record["winner"]["trial_id"] == "0.003-1" and record["defaults"]["trial_id"] == "0.0001-1"
    assert (record["split"], record["model"], record["winner"]["step"]) == ("test", "final", 20)
    lines = held_out_lines(record, "eval_accuracy")
    assert lines == [
        "held-out test split 'test', scored once at the final models (no trial saw it):",
        "  winner: test_accuracy = 0.7500 (trial 0.003-1; test_loss = 0.5000)",
        "  defaults: test_accuracy = 0.7500 (trial 0.0001-1; test_loss = 0.5000)",
    ]


@pytest.mark.parametrize("model, words", [("best", "its best checkpoint by validation"), ("final", "its final model")])
def test_the_summary_says_which_model_the_best_trials_score_comes_from(model, words):
    from hfsweep.driver.results.summary import summary

    best = BestTrial("t1", {}, "eval_accuracy", 0.9, 10, "/nowhere", model=model)
    assert f"  eval_accuracy = 0.9000 ({words})" in summary(best, "run").splitlines()
