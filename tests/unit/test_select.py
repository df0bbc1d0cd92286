"""Picking a winner over seeds (`select.top_k`): the ranking by mean, its intervals and the paired
test, on constructed per-seed results; the end-to-end run is in test_select_e2e.py."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from hfsweep.config.errors import ConfigError
from hfsweep.config.schema import SweepConfig, typed
from hfsweep.driver.results.select import (
    Candidate,
    confidence_interval,
    rank,
    retrained,
    selection_config,
    selection_points,
)

LUCKY = {"training.learning_rate": 3e-3}  # the single best run, and the worst mean
STEADY = {"training.learning_rate": 1e-3}


def candidates(lucky: dict, steady: dict) -> list[Candidate]:
    return [Candidate(hyperparameters=LUCKY, scores=lucky), Candidate(hyperparameters=STEADY, scores=steady)]


@pytest.mark.parametrize("mode, sign", [("min", 1), ("max", -1)])
def test_the_steadier_configuration_with_the_better_mean_wins_over_the_luckiest_run(mode, sign):
    lucky = {1: sign * 1.0, 2: sign * 3.0, 3: sign * 3.2}  # best single run (1.0), mean 2.4
    steady = {1: sign * 2.0, 2: sign * 2.1, 3: sign * 2.05}  # mean 2.05
    selection = rank(candidates(lucky, steady), "eval_loss", mode, 0.95)
    assert selection.winner.hyperparameters == STEADY
    assert [c.hyperparameters for c in selection.ranked] == [STEADY, LUCKY]
    assert selection.winner.mean == pytest.approx(sign * 2.05)
    assert selection.median_seed() == 3  # steady's scores ordered best first: 2.0 (seed 1), 2.05 (seed 3), 2.1 (seed 2)


@pytest.mark.parametrize("mode, sign", [("min", 1), ("max", -1)])
@pytest.mark.parametrize("first", [0, 1, 2])
def test_a_configuration_scored_nan_on_a_seed_ranks_last_wherever_it_comes(mode, sign, first):
    """A model that predicts a constant scores a NaN Pearson; its mean is NaN, which a plain sort
    compares false both ways (a worse configuration won, or the NaN one did)."""
    leads = {1: sign * 0.80, 2: sign * 0.81}  # the best mean under either mode
    second = {1: sign * 0.90, 2: sign * 0.91}
    collapsed = {1: sign * 0.70, 2: math.nan}  # the best single run
    scores = [leads, second]
    scores.insert(first, collapsed)
    ranked = rank([Candidate({"lr": i}, s) for i, s in enumerate(scores)], "eval_pearson", mode, 0.95).ranked
    assert [c.mean for c in ranked[:2]] == pytest.approx([sign * 0.805, sign * 0.905])
    assert math.isnan(ranked[-1].mean)


@pytest.mark.parametrize(
    "values, confidence",
    [
        ([2.0, 2.1, 2.05], 0.95),
        ([1.0, 3.0], 0.95),
        ([5.0, 4.0, 4.5, 4.7, 3.9], 0.9),
    ],
)
def test_the_interval_is_scipys_student_t_interval(values, confidence):
    mean, low, high = confidence_interval(values, confidence)
    expected = stats.t.interval(confidence, len(values) - 1, loc=stats.tmean(values), scale=stats.sem(values))
    assert mean == pytest.approx(sum(values) / len(values))
    assert (low, high) == pytest.approx(expected, rel=1e-12)


def test_one_value_has_no_interval():
    mean, low, high = confidence_interval([2.0], 0.95)
    assert mean == 2.0 and math.isnan(low) and math.isnan(high)


def test_the_paired_test_pairs_the_seeds_both_finished():
    lucky = {1: 1.0, 2: 3.0, 3: 3.2, 4: 9.0}
    steady = {1: 2.0, 2: 2.1, 3: 2.05}  # seed 4 errored: left out of the pairs
    selection = rank(candidates(lucky, steady), "eval_loss", "min", 0.95)
    assert selection.paired_seeds == [1, 2, 3]
    assert selection.p_value == pytest.approx(stats.ttest_rel([2.0, 2.1, 2.05], [1.0, 3.0, 3.2]).pvalue, rel=1e-12)


def test_a_configuration_without_a_finished_run_is_not_ranked():
    selection = rank(candidates({}, {1: 2.0, 2: 2.1}), "eval_loss", "min", 0.95)
    assert [c.hyperparameters for c in selection.ranked] == [STEADY]
    assert math.isnan(selection.p_value) and selection.median_seed() == 1


def test_a_winner_with_fewer_than_two_finished_seeds_is_named_in_one_line(tmp_path):
    """No interval (NaN) for one seed: the summary and selection.md say so instead of crowning it silently."""
    from types import SimpleNamespace

    from hfsweep.driver.results.select import selection_summary, write_selection

    selection = rank(candidates({1: 1.0}, {1: 2.0, 2: 2.1, 3: 2.05}), "eval_loss", "min", 0.95)
    assert selection.winner.hyperparameters == LUCKY
    selection.winner.runs[1] = SimpleNamespace(trial_id="t1", metric="eval_loss", value=1.0, step=10, model="final")
    note = (
        "the winner finished one seed only (1): no interval, its mean is that run's score; re-run the seeds "
        "that failed (see the errors above), or add seeds (select.seeds)."
    )
    assert write_selection(selection, str(tmp_path)).splitlines().count(note) == 1
    assert [line.strip() for line in selection_summary(selection, "best").splitlines()].count(note) == 1
    steady = rank(candidates({}, {1: 2.0, 2: 2.1}), "eval_loss", "min", 0.95)
    assert "one seed only" not in write_selection(steady, str(tmp_path))


def test_best_json_is_strict_json_when_a_selection_has_no_p_value_or_interval(tmp_path):
    import json

    from hfsweep.run_dir import BEST_FILE, write_best

    selection = rank(candidates({}, {1: 2.0}), "eval_loss", "min", 0.95)
    write_best(str(tmp_path), {"selection": {"p_value": selection.p_value, "interval": [selection.winner.low, 1.0]}})

    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")

    saved = json.loads((tmp_path / BEST_FILE).read_text(), parse_constant=refuse)
    assert saved["selection"] == {"p_value": None, "interval": [None, 1.0]}


def test_the_selection_sweep_runs_each_configuration_once_per_seed(tmp_path):
    cfg = {
        "search_space": {"training": {"learning_rate": {"sampler": "loguniform", "low": 1e-4, "high": 1e-2}}},
        "select": {"top_k": 2, "seeds": [1, 2], "confidence": 0.95},
        "cluster": {"storage_path": "run"},
        "scheduler": {"_target_": "asha"},
        "num_samples": 8,
    }
    sub = selection_config(typed(SweepConfig, cfg), [STEADY, LUCKY], str(tmp_path))
    assert selection_points(typed(SweepConfig, cfg), [STEADY, LUCKY]) == [
        {"training": {"learning_rate": lr}, "seed": seed} for lr in (1e-3, 3e-3) for seed in (1, 2)
    ]
    assert sub.select.top_k == 0 and sub.cluster.storage_path == str(tmp_path)
    assert sub.search_space == {
        "training": {"learning_rate": {"sampler": "grid", "values": [1e-3, 3e-3]}},
        "seed": {"sampler": "grid", "values": [1, 2]},
    }
    assert sub.scheduler["_target_"] == "ray.tune.schedulers.FIFOScheduler"
    assert cfg["select"]["top_k"] == 2, "the sweep's own config is left as it was"


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            ["select.top_k=2", "select.seeds=[1]"],
            "select.seeds: needs at least two different seeds, got [1]; e.g. select.seeds=[1,2,3].",
        ),
        (
            ["select.top_k=2", "select.seeds=[1,1,2]"],
            "select.seeds: [1,1,2] names seed 1 more than once, which would train the same run twice; "
            "give each seed once, e.g. select.seeds=[1,2].",
        ),
        (
            ["select.top_k=2", "select.confidence=1.5"],
            "select.confidence: must lie between 0 and 1, not 1.5; e.g. select.confidence=0.95.",
        ),
        (["select.top_k=-1"], "select.top_k: must be 0 (off) or the number of configurations to re-train, not -1."),
        (
            ["select.top_k=2", "metric=[eval_loss,time_total_s]", "mode=[min,min]", "scheduler=fifo"],
            "select.top_k: picks a winner by the mean of one metric; several objectives have none (set "
            "select.top_k=0).",
        ),
    ],
)
def test_a_selection_that_cannot_run_is_refused_in_one_line(tmp_path, cache_dir, overrides, message):
    from hfsweep.driver.search.search_rules import check_search
    from tests.conftest import sweep_config

    with pytest.raises(ConfigError) as err:
        check_search(sweep_config(overrides, tmp_path, cache_dir))
    assert str(err.value) == message


def retrained_runs(tmp_path, values: dict) -> list:
    """Stand-ins for Tune's results of a selection: per (learning rate, seed) a run whose best
    checkpoint (step 10) and final model (step 20) score `values[lr] = (best, final)`, each a
    pointer checkpoint to a folder of its own."""
    import json
    from types import SimpleNamespace

    from ray import tune

    from hfsweep.contract.pointers import POINTER_FILE

    runs = []
    for lr, scores in values.items():
        for seed in (1, 2):
            reports = []
            for step, value in zip((10, 20), scores):
                folder = tmp_path / f"{lr}-{seed}" / f"checkpoint-{step}"
                (folder / "pointer").mkdir(parents=True)
                (folder / "pointer" / POINTER_FILE).write_text(json.dumps({"path": str(folder)}))
                config = {"training": {"learning_rate": lr}, "seed": seed}
                metrics = {"eval_accuracy": value, "step": step, "trial_id": f"{lr}-{seed}", "config": config}
                reports.append((tune.Checkpoint.from_directory(str(folder / "pointer")), metrics))
            runs.append(
                SimpleNamespace(best_checkpoints=reports, metrics=reports[-1][1], checkpoint=reports[-1][0], error=None)
            )
    return runs


SELECTED = {"metric": "eval_accuracy", "mode": "max"}
GRID = {"sampler": "grid", "values": []}  # what searched_paths reads: the keys
SEARCHED = {"search_space": {"training": {"learning_rate": GRID}, "seed": GRID}}


@pytest.mark.parametrize("model, winner", [("final", 1e-3), ("best", 3e-3)])
def test_select_model_names_the_model_that_ranks_and_both_models_are_in_the_table(tmp_path, model, winner):
    """3e-3 peaks early (best checkpoint 0.9) and ends at 0.6; 1e-3 ends best (0.7, peak 0.8)."""
    from hfsweep.driver.results.select import candidates_from, ranking_columns, selection_table

    configurations = [{"training.learning_rate": lr} for lr in (3e-3, 1e-3)]
    runs = retrained_runs(tmp_path, {3e-3: (0.9, 0.6), 1e-3: (0.8, 0.7)})
    found = candidates_from(runs, typed(SweepConfig, {**SELECTED, **SEARCHED}), configurations, model)
    selection = rank(found, "eval_accuracy", "max", 0.95, model=model)
    assert selection.winner.hyperparameters == {"training.learning_rate": winner}
    assert selection.winner.runs[1].model == model and selection.winner.runs[1].step == (20 if model == "final" else 10)
    table = selection_table(selection).set_index("training.learning_rate")
    assert table.loc[3e-3, ["final_seed_1", "best_seed_1"]].tolist() == [0.6, 0.9]
    assert table.loc[1e-3, ["mean_final_eval_accuracy", "mean_best_eval_accuracy"]].tolist() == [0.7, 0.8]
    seeds, mean, metric = ranking_columns(selection_table(selection))
    assert (seeds, mean, metric) == (
        [f"{model}_seed_1", f"{model}_seed_2"],
        f"mean_{model}_eval_accuracy",
        "eval_accuracy",
    )


def test_a_run_that_errored_after_a_checkpoint_is_not_ranked_by_its_score_before_the_error(tmp_path):
    """3e-3's seed 1 diverged after its step-10 checkpoint: its 0.9 there is no final model, so
    3e-3 ranks on seed 2 alone (0.6) and 1e-3 wins (0.7)."""
    from hfsweep.driver.results.select import candidates_from

    configurations = [{"training.learning_rate": lr} for lr in (3e-3, 1e-3)]
    runs = retrained_runs(tmp_path, {3e-3: (0.9, 0.6), 1e-3: (0.8, 0.7)})
    diverged = runs[0]
    diverged.best_checkpoints = diverged.best_checkpoints[:1]
    diverged.checkpoint, diverged.metrics = diverged.best_checkpoints[0]
    diverged.error = FloatingPointError("training diverged: loss is nan at step 15")
    found = candidates_from(runs, typed(SweepConfig, {**SELECTED, **SEARCHED}), configurations, "final")
    assert found[0].scores == {2: 0.6}
    assert rank(found, "eval_accuracy", "max", 0.95).winner.hyperparameters == {"training.learning_rate": 1e-3}


def test_a_nan_checkpoint_is_neither_a_trials_best_nor_ranks_its_configuration_first(tmp_path):
    """3e-3 scored NaN at its step-10 checkpoint and 0.6 at step 20: its best checkpoint is step 20,
    and the search's top configuration is 1e-3 (0.8), not the NaN one."""
    from hfsweep.driver.results.best import best_of_trial
    from hfsweep.driver.results.select import top_configurations

    sweep = typed(SweepConfig, {**SELECTED, **SEARCHED})
    runs = retrained_runs(tmp_path, {3e-3: (math.nan, 0.6), 1e-3: (0.8, 0.7)})
    best = best_of_trial(runs[0], sweep)
    assert (best.value, best.step) == (0.6, 20)
    assert top_configurations(runs, sweep, 1)[0]["training.learning_rate"] == 1e-3


def test_only_the_winners_and_the_defaults_final_models_are_scored_on_the_test_split(tmp_path):
    from hfsweep.driver.results.select import candidates_from, score_on_test, selection_table

    configurations = [{"training.learning_rate": lr} for lr in (1e-3, 3e-3, 1e-4)]
    runs = retrained_runs(tmp_path, {1e-3: (0.8, 0.8), 3e-3: (0.7, 0.7), 1e-4: (0.6, 0.6)})
    found = candidates_from(runs, typed(SweepConfig, {**SELECTED, **SEARCHED}), configurations)
    selection = rank(found, "eval_accuracy", "max", 0.95, defaults={"training.learning_rate": 1e-4})
    scored = []

    def score(checkpoint: str) -> dict:
        scored.append(checkpoint)
        return {"test_accuracy": 0.5 + 0.1 * len(scored)}

    record = score_on_test(selection, "validation", score)
    assert sorted(scored) == sorted(
        str(tmp_path / f"{lr}-{seed}" / "checkpoint-20") for lr in (1e-3, 1e-4) for seed in (1, 2)
    ), "the final models of the winner and the defaults, each seed's, once, and no other run's"
    assert record["split"] == "validation" and record["model"] == "final"
    assert record["winner"]["seeds"] == [1, 2] and record["winner"]["mean"] == {"test_accuracy": pytest.approx(0.65)}
    assert record["defaults"]["mean"] == {"test_accuracy": pytest.approx(0.85)}
    table = selection_table(selection).set_index("training.learning_rate")
    assert table["mean_test_accuracy"].notna().tolist() == [True, False, True]
    assert table.loc[1e-4, ["test_seed_1", "test_seed_2"]].tolist() == pytest.approx([0.8, 0.9])


def test_the_selection_says_what_it_retrains_counting_the_defaults_apart():
    """The defaults trial's configuration, re-trained beside the top K, is not one of the best."""
    assert retrained(2, with_defaults=False) == "the 2 best configurations"
    assert retrained(1, with_defaults=True) == "the best configuration and the defaults trial's"


@pytest.mark.parametrize("ended", ["stopped by scheduler/stopper", "never started", "running"])
def test_a_selection_cut_short_picks_no_winner_and_keeps_the_search_best(tmp_path, monkeypatch, capsys, ended):
    """A budget that runs out during the selection (or a Ctrl-C) leaves runs at different steps: their
    means rank no configuration, so best/ is not replaced. Tune's fit is replaced by a table of
    how the re-training's runs ended."""
    from types import SimpleNamespace

    import pandas as pd

    from hfsweep.driver import over_seeds
    from tests.conftest import sweep_config

    sweep = sweep_config(["select.top_k=2", "search_alg.defaults_trial=false"], tmp_path / "run", tmp_path)
    budget = SimpleNamespace(reason=None, summary=lambda: "$1.02 of $1 used")
    spent = "its USD budget (budget.usd=1: $1.02 spent)"
    monkeypatch.setattr(over_seeds, "top_configurations", lambda results, sweep, k: [STEADY, LUCKY])
    monkeypatch.setattr(over_seeds, "build_stopper", lambda *args: None)
    monkeypatch.setattr(over_seeds, "searcher_cap", lambda sweep: None)
    monkeypatch.setattr(over_seeds, "trainable_for", lambda sweep, task, data: None)
    monkeypatch.setattr(over_seeds, "build_tuner", lambda plan, trainable, cap: None)
    monkeypatch.setattr(over_seeds, "tune_fit", lambda tuner: setattr(budget, "reason", spent))  # spent selecting
    monkeypatch.setattr(over_seeds, "write_report", lambda out: pd.DataFrame({"ended": ["completed"] * 3 + [ended]}))
    monkeypatch.setattr(over_seeds, "candidates_from", lambda *args: pytest.fail("ranked runs cut short"))
    over_seeds.select_over_seeds(None, sweep, None, None, budget if ended != "running" else None)
    why = f"the sweep's budget ({spent})" if ended != "running" else "an interruption"
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"hfsweep: select: 1 of 4 runs were cut short by {why}: no winner is picked, and best/ stays the search's "
        f"best trial"
    )


def test_finishing_a_resumed_sweep_keeps_its_finished_selections_winner(tmp_path, monkeypatch, capsys):
    """`resume` (or `resume --extend`) of a sweep whose selection finished runs `finish` again: the
    selection is not run again, so best.json and best/ stay its winner, not the search's best trial.
    The model and report work of `finish` is replaced; the decision under test is `finish`'s own."""
    from types import SimpleNamespace

    import pandas as pd

    from hfsweep.driver import finish as finishing
    from hfsweep.driver.results.best import BestTrial
    from hfsweep.driver.results.summary import summary
    from hfsweep.run_dir import read_best, write_best
    from tests.conftest import sweep_config

    storage = tmp_path / "run"
    sweep = sweep_config(["select.top_k=2", "search_alg.defaults_trial=false"], storage, tmp_path)
    (storage / "select").mkdir(parents=True)
    (storage / "select" / "selection.csv").write_text("rank\n1\n")
    write_best(str(storage), {"trial_id": "selected-seed-2", "seed": 2, "selection": {"mean": 0.71}})
    lucky = BestTrial("lucky", {"training.learning_rate": 3e-3}, "eval_loss", 3.5, 60, "/ckpt")
    for name, stand_in in {
        "best_of": lambda grids, sweep: lucky,
        "export_best": lambda *args: pytest.fail("best/ exported over the selection's winner"),
        "untrained_eval_loss": lambda *args: None,
        "sweep_summary": lambda best, *args, **kwargs: summary(best, str(storage), exported=kwargs["exported"]),
        "write_report": lambda out: pd.DataFrame({"ended": ["completed"]}),
        "startup_trials": lambda sweep: None,
        "drawn_at_random": lambda *args: None,
        "checkpoint_disk_use": lambda *args: (0, 0),
        "close_lost_trials": lambda sweep: 0,
    }.items():
        monkeypatch.setattr(finishing, name, stand_in)

    class Grid(list):
        num_terminated, num_errors = 1, 0

    finishing.finish(Grid(), sweep, SimpleNamespace(reports_perplexity=False), SimpleNamespace(label_names=None))
    out = capsys.readouterr().out
    assert "holds a finished selection: it is not run again, and best/ stays its winner" in out
    assert read_best(str(storage))["trial_id"] == "selected-seed-2"
    exported = (
        f"  exported model:  {storage / 'best'} is the selection's winner ({storage / 'select' / 'selection.csv'})"
    )
    assert f"{exported}, not this trial" in out.splitlines(), "the summary's best trial is not what best/ holds"
