"""Beyond one objective, without Ray: Pareto flags, warm-start points, the sweep budget, and the
refusals of what acts on one metric. (`pytest -k pareto`, `-k warm_start`, `-k budget`.)"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import optuna
import pandas as pd
import pytest
import yaml

from hfsweep.config.errors import ConfigError
from hfsweep.config.schema import SweepConfig, plain
from hfsweep.driver.preflight import preflight
from hfsweep.driver.results.pareto import best_of_front, pareto_optimal, plot_pareto
from hfsweep.driver.search import budget as budget_module
from hfsweep.driver.search.budget import SweepBudget, build_budget
from hfsweep.driver.search.checkpoint_budget import CheckpointBudget, build_checkpoint_budget
from hfsweep.driver.search.schedulers import build_search_alg, build_stopper
from hfsweep.driver.search.search_space import compile_search_space
from hfsweep.driver.search.warm_start import load_warm_start, searcher_arguments
from hfsweep.run_dir import RESOLVED_CONFIG
from tests.conftest import sweep_config

TWO = ["metric=[eval_loss,time_total_s]", "mode=[min,min]", "scheduler=fifo"]


def config(tmp_path, *overrides):
    return sweep_config(list(overrides), tmp_path, tmp_path)


# --- several objectives ---------------------------------------------------------------------


def brute_force_front(rows: list[dict], objectives: list[tuple[str, str]]) -> list[bool]:
    """Pareto-optimal by the definition, pair by pair: no other complete row at least as good in
    every objective and strictly better in one."""

    def better_or_equal(a, b, metric, mode):
        return a[metric] <= b[metric] if mode == "min" else a[metric] >= b[metric]

    def strictly_better(a, b, metric, mode):
        return a[metric] < b[metric] if mode == "min" else a[metric] > b[metric]

    complete = [all(not math.isnan(row[f"last_{m}"]) for m, _ in objectives) for row in rows]
    flags = []
    for i, row in enumerate(rows):
        dominated = any(
            complete[j]
            and j != i
            and all(better_or_equal(other, row, f"last_{m}", mode) for m, mode in objectives)
            and any(strictly_better(other, row, f"last_{m}", mode) for m, mode in objectives)
            for j, other in enumerate(rows)
        )
        flags.append(complete[i] and not dominated)
    return flags


@pytest.mark.parametrize("seed", range(5))
def test_pareto_flags_match_a_brute_force_check(seed):
    rng = np.random.default_rng(seed)
    objectives = [("eval_loss", "min"), ("eval_accuracy", "max"), ("time_total_s", "min")][: 2 + seed % 2]
    n = 40
    table = pd.DataFrame({f"last_{m}": rng.integers(0, 6, n).astype(float) for m, _ in objectives})  # ties on purpose
    table.loc[3, "last_eval_loss"] = np.nan  # a trial that never reported it
    flags = pareto_optimal(table, objectives)
    assert flags.any() and not flags.all()
    assert list(flags) == brute_force_front(table.to_dict("records"), objectives)


def test_pareto_best_is_the_front_trial_with_the_best_first_objective():
    objectives = [("eval_loss", "min"), ("eval_accuracy", "max")]
    table = pd.DataFrame(
        {"last_eval_loss": [2.0, 1.0, 1.0, 3.0], "last_eval_accuracy": [0.9, 0.5, 0.6, 0.95]}, index=list("abcd")
    )
    table["pareto"] = pareto_optimal(table, objectives)
    assert list(table["pareto"]) == [True, False, True, True]  # b is dominated by c (same loss, less accurate)
    assert best_of_front(table, objectives) == "c"
    assert best_of_front(table, objectives[::-1]) == "d"  # the first objective picks


def test_the_pareto_best_is_its_last_report_and_set_beside_the_defaults_last_report(tmp_path):
    """A trial's point on the front is its last report (eval_loss 2.5 at step 20, not its best, 2.0
    at step 10): the summary calls it the final model, and the defaults trial's gain line uses the
    defaults' last report too, not its best."""
    from hfsweep.driver.results.best import best_of_pareto_front
    from hfsweep.driver.results.summary import search_lines, summary
    from hfsweep.driver.search.defaults_trial import DEFAULTS_COLUMN

    sweep = sweep_config(TWO, tmp_path, tmp_path)
    history = pd.DataFrame(
        {
            "trial_id": ["a", "a"],
            "step": [10, 20],
            "eval_loss": [2.0, 2.5],
            "time_total_s": [5.0, 10.0],
            "checkpoint_path": [str(tmp_path / "c10"), str(tmp_path / "c20")],
        }
    )
    trial = SimpleNamespace(metrics_dataframe=history, metrics={"trial_id": "a"}, config={"seed": 42})
    best = best_of_pareto_front([trial], sweep)
    assert (best.step, best.value, best.model) == (20, 2.5, "final")
    shown = summary(best, "run")
    assert "  eval_loss = 2.5000 (its final model)" in shown.splitlines() and "best checkpoint" not in shown
    table = pd.DataFrame({DEFAULTS_COLUMN: [False, True], "best_eval_loss": [2.0, 1.0], "last_eval_loss": [2.5, 3.0]})
    (line,) = search_lines(table, sweep, best, startup=None, drawn_at_random=None)
    assert line.startswith("  defaults trial:  eval_loss = 3.0000 (its final model;") and "+0.5 better" in line


def test_pareto_plot_is_written(tmp_path):
    objectives = [("eval_loss", "min"), ("time_total_s", "min")]
    table = pd.DataFrame(
        {
            "trial_id": ["x_00000", "x_00001", "x_00002"],
            "last_eval_loss": [2.0, 1.0, 3.0],
            "last_time_total_s": [5.0, 9.0, 9.5],
        }
    )
    table["pareto"] = pareto_optimal(table, objectives)
    plot_pareto(table, objectives, str(tmp_path / "pareto.png"))
    assert (tmp_path / "pareto.png").stat().st_size > 10_000


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            ["metric=[eval_loss,time_total_s]", "mode=[min,min]"],
            r"^scheduler: ASHAScheduler stops or pauses trials by one metric, and metric lists 2; use scheduler=fifo",
        ),
        (
            [*TWO, "search_alg=hyperopt"],
            r"^search_alg: HyperOptSearch optimises one metric, and metric lists 2; use search_alg=optuna",
        ),
        (
            [*TWO, "stopper=plateau"],
            r"^stopper\.plateau\.metric: a stopper watches one metric, not \[eval_loss,time_total_s\]; set "
            r"stopper\.plateau\.metric=eval_loss",
        ),
        (
            [*TWO, "callbacks=early_stopping"],
            r"^training\.metric_for_best_model: the Trainer keeps its best model by one metric",
        ),
        (
            ["metric=[eval_loss,time_total_s]", "mode=min", "scheduler=fifo"],
            r"^mode: min does not pair with metric=\[eval_loss,time_total_s\]; give one mode per metric, e.g\. "
            r"mode=\[min,min\]\.$",
        ),
        (
            ["metric=[eval_loss,eval_loss]", "mode=[min,min]", "scheduler=fifo"],
            r"^metric: a list names two or more different metrics",
        ),
    ],
)
def test_pareto_sweeps_refuse_what_acts_on_one_metric(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message):
        preflight(plain(config(tmp_path, *overrides)))


@pytest.mark.parametrize("search_alg", ["optuna", "grid", "random"])
def test_pareto_sweeps_take_fifo_with_optuna_grid_or_random(tmp_path, search_alg):
    space = ["search_space=learning_rate_loguniform"] if search_alg == "optuna" else []
    cfg = config(tmp_path, *TWO, f"search_alg={search_alg}", *space)
    preflight(plain(cfg))
    searcher = build_search_alg(cfg, max_concurrent=2)
    if search_alg == "optuna":  # the metric list goes to Optuna (Tune's TuneConfig takes one)
        assert (searcher.searcher.metric, searcher.searcher.mode) == (["eval_loss", "time_total_s"], ["min", "min"])
        assert searcher.set_search_properties(None, None, compile_search_space(cfg.search_space, cfg))
        assert 1e-4 <= searcher.suggest("t0")["training"]["learning_rate"] <= 1e-2


def test_pareto_checkpoint_budget_keeps_every_trials_latest(tmp_path):
    """A trial's last report is its Pareto point, and best/ may be exported from any trial's."""
    cfg = config(tmp_path, *TWO, "checkpoints.keep_per_trial=1")
    budget = build_checkpoint_budget(cfg)
    assert budget.keep_latest and budget.metric == "eval_loss"
    paths = []
    for step, loss in ((10, 2.0), (20, 3.0)):
        path = tmp_path / "a" / f"checkpoint-{step}"
        path.mkdir(parents=True)
        paths.append(str(path))
        budget.on_trial_result(0, [], SimpleNamespace(trial_id="a"), {"checkpoint_path": str(path), "eval_loss": loss})
    budget.on_trial_complete(0, [], SimpleNamespace(trial_id="a", last_result={"trainer_finished": False}))  # stopped
    budget.get_state()  # Tune's snapshot: what the budget freed is deleted then
    assert {str(p) for p in tmp_path.glob("a/checkpoint-*")} == set(paths)  # the best and the latest
    single = CheckpointBudget("eval_loss", "min", 1, defer=False)
    assert not single.keep_latest


# --- warm starts ----------------------------------------------------------------------------


def earlier_sweep(run_dir: Path, cfg: SweepConfig, rows: list[dict]) -> Path:
    """A finished sweep's run directory as a warm start reads it: its config and results.csv."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / RESOLVED_CONFIG).write_text(yaml.safe_dump(plain(cfg)))
    pd.DataFrame(rows).to_csv(run_dir / "results.csv", index=False)
    return run_dir


def grid_rows(rates, losses, status="TERMINATED"):
    return [
        {
            "trial_id": f"e_{i:05d}",
            "training.learning_rate": lr,
            "status": status,
            "best_eval_loss": loss,
            "last_eval_loss": loss,
        }
        for i, (lr, loss) in enumerate(zip(rates, losses))
    ]


def test_warm_start_grid_runs_only_the_points_not_run_before(tmp_path, monkeypatch):
    """Without optuna, an optional extra (hidden here), as a grid sweep needs none."""
    monkeypatch.setitem(sys.modules, "optuna", None)
    first = config(tmp_path, "search_space.training.learning_rate.values=[1e-3,1e-4]")
    rows = grid_rows([1e-3, 1e-4], [3.0, 4.0])
    earlier = earlier_sweep(tmp_path / "first", first, rows)
    cfg = config(
        tmp_path,
        "search_space.training.learning_rate.values=[3e-3,1e-3,1e-4,1e-5]",
        f"search_alg.warm_start={earlier}",
        "num_samples=2",
    )
    param_space = compile_search_space(cfg.search_space, cfg)
    warm = load_warm_start(cfg, param_space)
    assert warm.points == [{"training.learning_rate": 1e-3}, {"training.learning_rate": 1e-4}]
    arguments, num_samples = searcher_arguments(cfg, param_space, warm)
    left = [p["training"]["learning_rate"] for p in arguments["points_to_evaluate"]]
    assert left == [3e-3, 3e-3, 1e-5, 1e-5] and num_samples == 4  # each point left, num_samples times
    searcher = build_search_alg(cfg, max_concurrent=1, extra=arguments)
    assert searcher._points_to_evaluate == arguments["points_to_evaluate"]


def test_warm_start_grid_with_nothing_left_is_refused(tmp_path):
    first = config(tmp_path, "search_space.training.learning_rate.values=[1e-3,1e-4]")
    earlier = earlier_sweep(tmp_path / "first", first, grid_rows([1e-3, 1e-4], [3.0, 4.0]))
    cfg = config(tmp_path, "search_space.training.learning_rate.values=[1e-3]", f"search_alg.warm_start={earlier}")
    param_space = compile_search_space(cfg.search_space, cfg)
    with pytest.raises(
        ConfigError,
        match=r"^search_alg\.warm_start: every grid point of this sweep was run in \[.*first\]; nothing is left to run",
    ):
        searcher_arguments(cfg, param_space, load_warm_start(cfg, param_space))


def optuna_config(tmp_path, *overrides):
    return config(
        tmp_path,
        "search_alg=optuna",
        "search_space=learning_rate_loguniform",
        "+search_space.training.warmup_steps={sampler:choice,values:[0,5]}",
        *overrides,
    )


def test_warm_start_uses_this_search_spaces_keys_and_leaves_out_what_cannot_be_told(tmp_path):
    """Only this sweep's keys, a key the earlier sweep kept fixed taken from its config, errored
    and unreported trials and points outside this space left out, other settings reported."""
    first = config(
        tmp_path,
        "search_space.training.learning_rate.values=[1e-3,1e-5]",
        "+search_space.training.weight_decay={sampler:grid,values:[0.0,0.1]}",
        "training.max_steps=40",
    )
    rows = grid_rows([1e-3, 1e-3, 2e-3, 1e-5, 5e-3], [3.0, 2.5, float("nan"), 2.0, 1.0])
    for row, decay in zip(rows, [0.0, 0.1, 0.0, 0.0, 0.1]):
        row["training.weight_decay"] = decay
    rows[4]["status"] = "ERROR"
    earlier = earlier_sweep(tmp_path / "first", first, rows)
    cfg = optuna_config(tmp_path, f"search_alg.warm_start=[{earlier}]")
    warm = load_warm_start(cfg, compile_search_space(cfg.search_space, cfg))
    assert (
        warm.points == [{"training.learning_rate": 1e-3, "training.warmup_steps": 0}] * 2
    )  # 1e-5: below this space's 1e-4
    assert warm.values == [[3.0], [2.5]]
    notes = " | ".join(warm.notes)
    assert "searched training.weight_decay, which this sweep does not" in notes
    assert "other settings of training.max_steps" in notes
    assert "2 earlier trials used, 1 outside this sweep's search space left out" in notes


def test_an_optuna_warm_start_leaves_out_a_point_its_distributions_refuse(tmp_path):
    """Tune's `is_valid` takes a randint's upper bound (exclusive in Tune's sampling and in the
    Optuna distribution it becomes); the point is left out as outside, not a ValueError."""
    first = config(
        tmp_path,
        "search_space.training.learning_rate.values=[1e-3,3e-3]",
        "+search_space.training.warmup_steps={sampler:grid,values:[5,10]}",
    )
    rows = grid_rows([1e-3, 3e-3], [3.0, 2.0])
    for row, steps in zip(rows, [5, 10]):
        row["training.warmup_steps"] = steps
    earlier = earlier_sweep(tmp_path / "first", first, rows)
    cfg = config(
        tmp_path,
        "search_alg=optuna",
        "search_space=learning_rate_loguniform",
        "+search_space.training.warmup_steps={sampler:randint,low:0,high:10}",
        f"search_alg.warm_start={earlier}",
    )
    param_space = compile_search_space(cfg.search_space, cfg)
    warm = load_warm_start(cfg, param_space)
    assert warm.points == [{"training.learning_rate": 1e-3, "training.warmup_steps": 5}]
    assert "1 earlier trials used, 1 outside this sweep's search space left out" in " | ".join(warm.notes)
    searcher_arguments(cfg, param_space, warm)  # the study takes what is left


@pytest.mark.parametrize("objectives", [["metric=eval_loss"], TWO])
def test_warm_start_optuna_is_told_the_earlier_results(tmp_path, objectives):
    first = config(tmp_path, *objectives)
    rows = grid_rows([1e-3, 3e-3], [3.0, 2.0])
    for row, seconds in zip(rows, [10.0, 30.0]):
        row["last_time_total_s"] = seconds
    earlier = earlier_sweep(tmp_path / "first", first, rows)
    cfg = optuna_config(tmp_path, *objectives, f"search_alg.warm_start={earlier}")
    param_space = compile_search_space(cfg.search_space, cfg)
    arguments, num_samples = searcher_arguments(cfg, param_space, load_warm_start(cfg, param_space))
    assert num_samples is None
    searcher = build_search_alg(cfg, max_concurrent=2, extra=arguments)
    assert searcher.set_search_properties(
        None if len(objectives) > 1 else "eval_loss", None if len(objectives) > 1 else "min", param_space
    )
    searcher.suggest("t0")
    study = optuna.load_study(study_name=arguments["study_name"], storage=arguments["storage"])
    told = [(t.params, t.values) for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    expected_values = [[3.0, 10.0], [2.0, 30.0]] if len(objectives) > 1 else [[3.0], [2.0]]
    assert told == [
        ({"training/learning_rate": lr, "training/warmup_steps": 0}, v) for lr, v in zip([1e-3, 3e-3], expected_values)
    ]
    assert len(study.trials) == 3  # and the searcher's own first suggestion, in the same study


def test_an_optuna_warm_start_of_three_trials_steers_the_first_suggestions(tmp_path):
    """With a start-up of 10 random trials (Optuna's default), TPE samples the same points for the
    same seed: a warm start's earlier trials stand in for its start-up, so its first suggestions
    already move toward their best."""
    import numpy as np

    best = 7e-3  # the loss is lowest there, near the top of the space, as the earlier sweep's three trials show

    def loss(rate: float) -> float:
        return 1.0 + abs(np.log10(rate / best))

    def first_rates(seed: int, *overrides) -> list[float]:
        cfg = optuna_config(tmp_path, f"seed={seed}", "search_alg.startup_trials=10", *overrides)
        param_space = compile_search_space(cfg.search_space, cfg)
        arguments = (
            searcher_arguments(cfg, param_space, load_warm_start(cfg, param_space))[0]
            if cfg.search_alg["warm_start"]
            else {}
        )
        searcher = build_search_alg(cfg, max_concurrent=1, extra=arguments)
        assert searcher.set_search_properties("eval_loss", "min", param_space)
        rates = []
        for i in range(6):
            rates.append(searcher.suggest(f"t{i}")["training"]["learning_rate"])
            searcher.on_trial_complete(f"t{i}", {"eval_loss": loss(rates[-1]), "training_iteration": 1})
        return rates

    earlier = earlier_sweep(
        tmp_path / "first", config(tmp_path), grid_rows([best, 1e-4, 1e-3], [loss(r) for r in (best, 1e-4, 1e-3)])
    )
    distance = {"cold": [], "warm": []}  # from the best, in decades
    for seed in range(5):
        cold, warm = first_rates(seed), first_rates(seed, f"search_alg.warm_start={earlier}")
        assert cold == first_rates(seed), "the same seed suggests the same points"
        assert warm != cold
        for name, rates in (("cold", cold), ("warm", warm)):
            distance[name] += [abs(np.log10(rate / best)) for rate in rates]
    assert np.mean(distance["warm"]) < 0.85 * np.mean(distance["cold"]), (
        distance
    )  # 0.66 against 0.89 decades with Optuna 5.0


def test_a_warm_started_optuna_sweeps_summary_counts_no_random_draws(tmp_path):
    """Its study holds the earlier trials, complete, as TPE's start-up (`warm_tpe_sampler`): the
    first suggestion is the model's already (the test above), so the summary counts none drawn at
    random, where it counted the configured start-up."""
    from hfsweep.driver.results.summary import search_lines
    from hfsweep.driver.search.schedulers import drawn_at_random

    earlier = earlier_sweep(tmp_path / "first", config(tmp_path), grid_rows([1e-3, 3e-3], [3.0, 2.0]))
    cfg = optuna_config(tmp_path, "search_alg.startup_trials=4", f"search_alg.warm_start={earlier}")
    param_space = compile_search_space(cfg.search_space, cfg)
    sampler = searcher_arguments(cfg, param_space, load_warm_start(cfg, param_space))[0]["sampler"]
    assert sampler._n_startup_trials == 2, "the two earlier trials are its whole start-up"
    histories = [pd.DataFrame({"timestamp": [2.0 * n + 1], "time_total_s": [1.0]}) for n in range(6)]  # one at a time
    assert drawn_at_random(cfg, histories) == 0
    cold = optuna_config(tmp_path, "search_alg.startup_trials=4")
    assert drawn_at_random(cold, histories) == 4
    table = pd.DataFrame({"trial_id": [f"t{n}" for n in range(6)]})
    best = SimpleNamespace(metric="eval_loss", model="best", value=1.0)
    (line,) = search_lines(table, cfg, best, startup=4, drawn_at_random=0)
    assert line.endswith(
        "0 trials drawn at random (start-up), 6 chosen by its model "
        "(warm-started: the earlier trials were its start-up)"
    )


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            ["metric=eval_perplexity"],
            r"^search_alg\.warm_start: '.*first' swept metric=eval_loss mode=min, this sweep metric=eval_perplexity "
            r"mode=min; warm-start from a sweep of the same objectives\.$",
        ),
        (
            ["search_alg=hyperopt"],
            r"^search_alg\.warm_start: HyperOptSearch cannot be told earlier results; use search_alg=optuna or a grid",
        ),
        (
            ["search_alg=random", "search_space=learning_rate_loguniform"],
            r"^search_alg\.warm_start: random search learns nothing from earlier trials",
        ),
    ],
)
def test_warm_start_refuses_a_sweep_it_cannot_use(tmp_path, overrides, message):
    earlier = earlier_sweep(tmp_path / "first", config(tmp_path), grid_rows([1e-3], [3.0]))
    cfg = optuna_config(tmp_path, f"search_alg.warm_start={earlier}", *overrides)
    with pytest.raises(ConfigError, match=message):
        load_warm_start(cfg, compile_search_space(cfg.search_space, cfg))


# --- budgets --------------------------------------------------------------------------------


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_budget_of_trial_hours_ends_the_sweep_at_the_report_that_spends_it(tmp_path, monkeypatch):
    cfg = config(tmp_path, "budget.trial_hours=0.01", "cluster.num_workers=2")  # 36 s of a 3-CPU trial: 12 s
    budget = build_budget(cfg)
    assert budget.resources == 3
    stopper = build_stopper(cfg, budget)
    stopper("a", {"time_total_s": 5.0, "step": 10})
    stopper("b", {"time_total_s": 6.0, "step": 10})
    assert not stopper.stop_all() and budget.reason is None
    stopper("b", {"time_total_s": 7.0, "step": 60})  # the step budget stops b; the budget still counts it
    assert stopper.stop_all()
    assert budget.reason == "its trial-hours budget (budget.trial_hours=0.01: 0.01 used)"


def test_budget_of_wall_clock_counts_from_the_first_check_and_across_a_resume(monkeypatch):
    import pickle

    clock = Clock()
    monkeypatch.setattr(budget_module.time, "time", clock)
    budget = SweepBudget(wall_clock_s=60, trial_hours=None, resources_per_trial=1)
    pickled = pickle.dumps(budget)  # tuner.pkl holds the budget as it was built
    assert not budget.stop_all()
    clock.now += 50
    assert not budget.stop_all()
    saved = budget.get_state()  # what Tune saves with the callbacks' state
    monkeypatch.setattr(budget_module, "_SPENDS", {})  # a new process resumes the sweep
    callback, stopper = (
        pickle.loads(pickled),
        pickle.loads(pickled),
    )  # Tune restores the state into one, stops with a copy
    callback.set_state(saved)
    clock.now += 3600  # the time the sweep lay stopped does not count
    assert not stopper.stop_all()
    clock.now += 10
    assert stopper.stop_all() and stopper.reason.startswith("its wall-clock budget (budget.wall_clock_s=60: 60 s)")
    assert callback.get_state()["spent_s"] == 60, "the state Tune saves next follows what the stopper counted"


def test_budget_waits_for_the_checkpoint_of_the_report_that_spent_it(tmp_path):
    """Tune saves a report's checkpoint after the report: stopping the trial in between loses it."""
    budget = build_budget(config(tmp_path, "budget.trial_hours=0.001"))
    trial = SimpleNamespace(trial_id="a")
    result = {"time_total_s": 4.0, "should_checkpoint": True}
    budget("a", result)
    budget.on_trial_result(0, [], trial, result)
    assert not budget.stop_all() and budget.reason.startswith("its trial-hours budget")
    budget.on_checkpoint(0, [], trial, checkpoint=None)
    assert budget.stop_all()


def test_budget_is_none_unless_set_and_must_be_positive(tmp_path):
    assert build_budget(config(tmp_path)) is None
    with pytest.raises(
        ConfigError,
        match=(
            r"^budget\.wall_clock_s: must be positive, not -1\.0; e\.g\. budget\.wall_clock_s=3600, or null for none\.$"
        ),
    ):
        preflight(plain(config(tmp_path, "budget.wall_clock_s=-1")))


@pytest.mark.parametrize("budget", ["budget.trial_hours=1", "budget.usd=10"])
def test_a_resource_budget_with_a_searched_worker_count_is_refused_in_one_line(tmp_path, budget):
    """The budget bills each trial at the config's resources: a trial of 2 workers would count as 1."""
    searched = "+search_space.cluster.num_workers={sampler:choice,values:[1,2]}"
    key = budget.split("=")[0]
    with pytest.raises(ConfigError, match=rf"^{key}: bills every trial at the config's resources, and "):
        preflight(plain(config(tmp_path, "scheduler=fifo", budget, "cluster.price_per_cpu_hour=0.1", searched)))
    preflight(plain(config(tmp_path, "scheduler=fifo", "budget.train_samples=1000", searched)))  # no resources


def test_bohb_pairs_its_scheduler_and_searcher(tmp_path):
    from ray.tune.search.bohb import TuneBOHB

    with pytest.raises(
        ConfigError,
        match=r"^scheduler: HyperBandForBOHB works only with BOHB's search_alg; set scheduler=bohb search_alg=bohb",
    ):
        preflight(plain(config(tmp_path, "scheduler=bohb", "search_space=learning_rate_loguniform")))
    cfg = config(tmp_path, "scheduler=bohb", "search_alg=bohb", "search_space=learning_rate_loguniform")
    preflight(plain(cfg))
    searcher = build_search_alg(cfg, max_concurrent=2)
    assert isinstance(searcher.searcher, TuneBOHB)
    assert searcher.set_search_properties("eval_loss", "min", compile_search_space(cfg.search_space, cfg))
    assert 1e-4 <= searcher.suggest("t0")["training"]["learning_rate"] <= 1e-2
