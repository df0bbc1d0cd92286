"""The recipe's own values run first under every searcher (through the searchers' own suggest),
and a model-based searcher's random start-up follows the sweep's size."""

from __future__ import annotations

import pytest

from hfsweep.config.errors import ConfigError
from hfsweep.config.schema import SweepConfig, typed
from hfsweep.driver.search.search_space import compile_search_space
from tests.conftest import resolved_config, sweep_config

LOGUNIFORM = [
    "search_space=learning_rate_loguniform",
    "training.learning_rate=5e-4",
    "num_samples=5",
    "search_alg.defaults_trial=true",
]


def searcher_and_setup(tmp_path, overrides):
    from hfsweep.driver.search.schedulers import build_search_alg
    from hfsweep.driver.tuner import search_setup

    sweep = sweep_config(overrides, tmp_path, tmp_path)
    space = compile_search_space(sweep.search_space, sweep)
    setup = search_setup(sweep, space)
    searcher = build_search_alg(sweep, None, setup.searcher_arguments)
    searcher.set_search_properties(sweep.metric, sweep.mode, space)
    return sweep, space, setup, searcher


@pytest.mark.parametrize("searcher", ["optuna", "hyperopt"])
def test_a_model_based_searchers_first_suggestion_is_the_configs_own_values(tmp_path, searcher):
    cfg, _, setup, search = searcher_and_setup(tmp_path, [f"search_alg={searcher}", *LOGUNIFORM])
    assert setup.num_samples == 6, "the defaults trial comes on top of num_samples"
    first = search.suggest("trial_1")
    assert first["training"]["learning_rate"] == pytest.approx(5e-4)
    assert search.suggest("trial_2")["training"]["learning_rate"] != pytest.approx(5e-4)


def test_bohb_runs_the_point_first_and_its_model_learns_from_its_result(tmp_path):
    """TuneBOHB hands each trial's config to ConfigSpace by its "/"-joined names: a nested point
    crashed the sweep at the defaults trial's first result (Unknown hyperparameter(s) {'training'})."""
    cfg, _, _, search = searcher_and_setup(tmp_path, ["scheduler=bohb", "search_alg=bohb", *LOGUNIFORM])
    assert search.suggest("trial_1")["training"]["learning_rate"] == pytest.approx(5e-4)
    search.on_trial_result("trial_1", {cfg.metric: 1.0, "hyperband_info": {"budget": 10}})
    assert search.suggest("trial_2")["training"]["learning_rate"] != pytest.approx(5e-4)


def test_random_search_and_a_grid_without_the_point_run_it_first(tmp_path):
    from ray.tune.search import BasicVariantGenerator

    for overrides in (
        ["search_alg=random", *LOGUNIFORM],
        [
            "search_space.training.learning_rate.values=[1e-3,1e-4]",
            "training.learning_rate=5e-4",
            "search_alg.defaults_trial=true",
        ],
    ):
        _, _, setup, search = searcher_and_setup(tmp_path, overrides)
        assert isinstance(search, BasicVariantGenerator)
        assert setup.searcher_arguments["points_to_evaluate"] == [{"training": {"learning_rate": 5e-4}}]


def test_a_grid_that_holds_the_point_runs_it_once_and_off_means_off(tmp_path):
    _, _, setup, _ = searcher_and_setup(
        tmp_path, ["search_space.training.learning_rate.values=[1e-3,1e-4]", "search_alg.defaults_trial=true"]
    )
    assert "points_to_evaluate" not in setup.searcher_arguments and setup.num_samples is None
    _, _, setup, _ = searcher_and_setup(tmp_path, ["search_alg=optuna", *LOGUNIFORM, "search_alg.defaults_trial=false"])
    assert "points_to_evaluate" not in setup.searcher_arguments


def test_a_model_based_searcher_refuses_defaults_outside_its_space_in_one_line(tmp_path):
    with pytest.raises(
        ConfigError,
        match=r"^search_space\.training\.learning_rate: the defaults trial runs the config's "
        r"own training\.learning_rate=0\.5, outside \[0\.0001, 0\.01\]; widen",
    ):
        searcher_and_setup(
            tmp_path,
            [
                "search_alg=optuna",
                "search_space=learning_rate_loguniform",
                "training.learning_rate=0.5",
                "search_alg.defaults_trial=true",
            ],
        )


@pytest.mark.parametrize(
    "overrides, message",
    [
        (  # Tune never draws a randint's high
            [
                "+search_space.training.per_device_train_batch_size={sampler:randint,low:8,high:32}",
                "training.per_device_train_batch_size=32",
            ],
            r"^search_space\.training\.per_device_train_batch_size: the defaults trial runs the config's own "
            r"training\.per_device_train_batch_size=32, outside \[8, 32\); widen",
        ),
        (  # null by default: no range holds it
            ["+search_space.data.max_train_samples={sampler:randint,low:100,high:1000}"],
            r"^search_space\.data\.max_train_samples: the defaults trial runs the config's own "
            r"data\.max_train_samples, which is null, and a range holds no null; set",
        ),
    ],
)
def test_defaults_a_range_cannot_hold_are_refused_in_one_line(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message):
        searcher_and_setup(
            tmp_path,
            [
                "search_alg=optuna",
                "search_space=learning_rate_loguniform",
                "search_alg.defaults_trial=true",
                *overrides,
            ],
        )


@pytest.mark.parametrize("num_samples, startup", [(11, 4), (2, 2), (30, 11)])
def test_tpes_random_start_up_is_a_third_of_the_trials_in_optunas_own_sampler(tmp_path, num_samples, startup):
    """Optuna's default of 10 random trials left nothing to its model in an 11-trial sweep."""
    from optuna.samplers import TPESampler

    _, _, _, search = searcher_and_setup(tmp_path, ["search_alg=optuna", *LOGUNIFORM, f"num_samples={num_samples}"])
    assert isinstance(search._sampler, TPESampler) and search._sampler._n_startup_trials == startup


def test_hyperopts_start_up_follows_the_rule_and_an_explicit_count_wins(tmp_path):
    _, _, _, search = searcher_and_setup(tmp_path, ["search_alg=hyperopt", *LOGUNIFORM, "num_samples=11"])
    assert search.algo.keywords["n_startup_jobs"] == 4  # hyperopt's own tpe.suggest, as HyperOptSearch binds it
    _, _, _, search = searcher_and_setup(tmp_path, ["search_alg=optuna", *LOGUNIFORM, "search_alg.startup_trials=7"])
    assert search._sampler._n_startup_trials == 7


def test_under_a_budget_the_sweep_says_its_start_up_counts_num_samples_until_told_otherwise(tmp_path):
    """The rule cannot know what a budget buys before a trial has run; the user is told the count
    and the key that sets it, and is not told again once it is set (or without a budget)."""
    sweep = ["search_alg=optuna", *LOGUNIFORM, "num_samples=20"]
    _, _, setup, _ = searcher_and_setup(tmp_path, [*sweep, "budget.trial_hours=1.5"])
    assert (
        "start-up: 7 trials drawn at random, a third of num_samples=20 (the defaults trial counted); the budget may "
        "end the sweep before that many have run: set search_alg.startup_trials to a third of the trials it buys"
    ) in setup.notes
    for quiet in ([*sweep, "budget.trial_hours=1.5", "search_alg.startup_trials=3"], sweep):
        _, _, setup, _ = searcher_and_setup(tmp_path, quiet)
        assert not [note for note in setup.notes if note.startswith("start-up")]


# Six trials two at a time, as (start, last report): each starts just after one of the two running ends.
SPANS = [(0, 10), (0, 15), (11, 25), (16, 30), (26, 40), (31, 45)]


def test_with_two_trials_running_tpe_draws_at_random_until_its_start_up_have_finished(tmp_path):
    """Optuna's own TPE, asked as Tune asks it with two trials running: it samples at random (the
    draws of a RandomSampler with its seed) until 3 trials have finished, so 4 of 6 are random,
    not 3; the summary's count, from the trials' report times, says 4. HyperOpt counts started trials."""
    import optuna
    import pandas as pd

    from hfsweep.driver.search.schedulers import drawn_at_random

    def draws(sampler):
        study, running, values = optuna.create_study(sampler=sampler, direction="maximize"), [], []
        events = sorted(
            [(start, "ask", n) for n, (start, _) in enumerate(SPANS)]
            + [(end, "tell", n) for n, (_, end) in enumerate(SPANS)]
        )
        for _, event, n in events:
            if event == "ask":
                trial = study.ask()
                values.append(trial.suggest_float("x", 0.0, 1.0))
                running.append((n, trial))
            else:
                trial = next(t for m, t in running if m == n)
                study.tell(trial, trial.params["x"])
        return values

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    tpe, random = (
        draws(optuna.samplers.TPESampler(n_startup_trials=3, seed=0)),
        draws(optuna.samplers.RandomSampler(seed=0)),
    )
    assert tpe[:4] == random[:4] and tpe[4:] != random[4:]

    histories = [
        pd.DataFrame({"timestamp": [start + 1, end], "time_total_s": [1.0, end - start]}) for start, end in SPANS
    ]
    cfg = sweep_config(["search_alg=optuna", *LOGUNIFORM, "search_alg.startup_trials=3"], tmp_path, tmp_path)
    assert drawn_at_random(cfg, histories) == 4
    cfg = sweep_config(["search_alg=hyperopt", *LOGUNIFORM, "search_alg.startup_trials=3"], tmp_path, tmp_path)
    assert drawn_at_random(cfg, histories) == 3


def test_the_count_times_trials_by_hfsweeps_reports_not_tunes_whole_seconds(tmp_path):
    """Tune starts the next trial a moment after one finishes: the first trial's last report at
    10.7 s, the second trial's start at 10.9 s. Tune's timestamps (10, then 11 less 1.05 s of
    running) put that start before the finish; hfsweep's `reported_at` does not."""
    import pandas as pd

    from hfsweep.driver.search.schedulers import drawn_at_random

    first = {"timestamp": [5, 10], "reported_at": [5.5, 10.7], "time_total_s": [1.0, 6.2]}
    second = {"timestamp": [11, 14], "reported_at": [11.95, 14.2], "time_total_s": [1.05, 3.3]}
    cfg = sweep_config(["search_alg=optuna", *LOGUNIFORM, "search_alg.startup_trials=1"], tmp_path, tmp_path)
    assert drawn_at_random(cfg, [pd.DataFrame(first), pd.DataFrame(second)]) == 1
    tune_only = [pd.DataFrame(first).drop(columns="reported_at"), pd.DataFrame(second).drop(columns="reported_at")]
    assert drawn_at_random(cfg, tune_only) == 2, "a sweep from before reported_at is timed by Tune's seconds"


def test_a_range_sampler_beside_a_presets_grid_values_is_judged_by_its_range(tmp_path, monkeypatch):
    """+experiment=glue_minilm_search merges finetune's log-uniform learning rate over the GLUE
    recipe's grid (whose `values` stay in the node): the range is sampled, so the defaults trial's
    5e-5 and the epochs ASHA counts to are read from the range and the choice, not the stale grid."""
    from hfsweep.driver.search.defaults_trial import check_searchable
    from hfsweep.driver.search.search_rules import longest_epochs

    monkeypatch.setenv("GLUE_DIR", str(tmp_path))  # composed only, never read
    cfg = resolved_config(["+experiment=glue_minilm_search", "glue=stsb"], tmp_path, tmp_path)
    lr = cfg["search_space"]["training"]["learning_rate"]
    assert lr["sampler"] == "loguniform" and "values" in lr  # the grid's values are still there
    cfg["training"]["learning_rate"] = 9e-5  # inside [1e-5, 1e-4], not in the grid [2e-5, 3e-5, 5e-5]
    values = {"training." + k: cfg["training"][k] for k in cfg["search_space"]["training"]}
    check_searchable(typed(SweepConfig, cfg), values, True)
    cfg["search_space"]["training"]["num_train_epochs"] = {"sampler": "uniform", "low": 1, "high": 7, "values": [2]}
    assert longest_epochs(typed(SweepConfig, cfg)) == 7


@pytest.mark.parametrize(
    ("mode", "best", "verdict"),
    [
        ("min", 3.5, "the best is +0.5 better (+12.5%)"),
        ("max", 4.5, "the best is +0.5 better (+12.5%)"),
        ("min", 4.0, "no searched trial beat it"),  # the defaults trial itself is the best
    ],
)
def test_the_summary_states_the_winners_gain_over_the_defaults_trial(tmp_path, mode, best, verdict):
    import pandas as pd

    from hfsweep.driver.results.best import BestTrial
    from hfsweep.driver.results.summary import search_lines
    from hfsweep.driver.search.defaults_trial import DEFAULTS_COLUMN

    cfg = sweep_config([f"mode={mode}", "metric=eval_loss"], tmp_path, tmp_path)
    table = pd.DataFrame({DEFAULTS_COLUMN: [False, True], "best_eval_loss": [best, 4.0]})
    winner = BestTrial("t1", {}, "eval_loss", best, step=10, checkpoint_path="unused")
    (line,) = search_lines(table, cfg, winner, startup=None, drawn_at_random=None)
    assert line == (
        f"  defaults trial:  eval_loss = 4.0000 (its best checkpoint by validation; the config's own values); {verdict}"
    )


def test_pbts_population_counts_the_defaults_trial(tmp_path):
    """Two draws and the defaults trial are three trials PBT keeps alive: a cap of 2 holds one draw."""
    from hfsweep.driver.search.search_rules import population_size, samples_within

    pbt = ["scheduler=pbt", "search_alg=random", "search_space=learning_rate_loguniform", "num_samples=2"]
    cfg = sweep_config(pbt, tmp_path, tmp_path)
    assert (population_size(cfg), samples_within(cfg, 2)) == (3, 1)
    cfg = sweep_config([*pbt, "search_alg.defaults_trial=false"], tmp_path, tmp_path)
    assert (population_size(cfg), samples_within(cfg, 2)) == (2, 2)
    cfg = sweep_config(["scheduler=pbt", "num_samples=1"], tmp_path, tmp_path)  # a grid of 4 holding 1e-3
    assert (population_size(cfg), samples_within(cfg, 2)) == (4, 0)


@pytest.mark.parametrize("value", ["maybe", "no"])
def test_a_defaults_trial_that_is_not_a_bool_is_refused_by_the_preflight(tmp_path, value):
    """Hydra reads `=no` and `=maybe` as strings, which were taken as true: `=maybe` ran a sweep."""
    from hfsweep.driver.preflight import preflight

    with pytest.raises(ConfigError, match=rf"^search_alg\.defaults_trial: must be true or false, not '{value}'; "):
        preflight(resolved_config([f"search_alg.defaults_trial={value}"], tmp_path, tmp_path))
