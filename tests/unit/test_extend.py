"""What `resume --extend` may change in a finished sweep's saved config, and where its added
experiments are found; the end-to-end extension is in test_extend_e2e.py."""

from __future__ import annotations

import dataclasses
import os

import pandas as pd
import pytest
import yaml

from hfsweep.config.errors import ConfigError
from hfsweep.config.saved import extended_config, read_config
from hfsweep.config.schema import SweepConfig, typed
from hfsweep.run_dir import experiment_names, write_config


@pytest.fixture
def run_dir(tmp_path, cache_dir):
    from tests.conftest import resolved_config

    write_config(str(tmp_path), resolved_config(["debug=tiny"], tmp_path, cache_dir))
    return str(tmp_path)


def test_the_sample_count_and_the_search_space_may_change(run_dir):
    cfg = extended_config(run_dir, ["num_samples=3", "search_space.training.learning_rate.values=[1e-3,3e-3]"])
    assert cfg["num_samples"] == 3 and cfg["search_space"]["training"]["learning_rate"]["values"] == [1e-3, 3e-3]


def test_anything_else_is_refused_in_one_line(run_dir):
    with pytest.raises(ConfigError) as err:
        extended_config(run_dir, ["num_samples=3", "training.max_steps=40", "seed=1"])
    assert str(err.value) == (
        f"resume --extend: seed, training.max_steps differ from the config saved in {run_dir}; "
        "an extension changes num_samples and search_space.* only."
    )


def test_an_extension_that_changes_nothing_is_refused(run_dir):
    with pytest.raises(ConfigError, match=r"resume --extend: num_samples=1 changes nothing in .*; give a larger"):
        extended_config(run_dir, ["num_samples=1"])


def test_the_added_experiments_follow_the_sweeps_own_in_order(tmp_path):
    for name in ("sweep", "sweep-extend-10", "sweep-extend-2", "sweep-extend-1", "sweep-extend-x", "select"):
        (tmp_path / name).mkdir()
    assert experiment_names(str(tmp_path), "sweep") == ["sweep", "sweep-extend-1", "sweep-extend-2", "sweep-extend-10"]


def test_searchers_that_cannot_be_told_the_trials_run_are_refused_in_one_line(run_dir, cache_dir, tmp_path):
    from hfsweep.driver.resume import check_extendable
    from tests.conftest import sweep_config

    overrides = ["debug=tiny", "search_alg=hyperopt", "search_space=learning_rate_loguniform"]
    with pytest.raises(ConfigError) as err:
        check_extendable(sweep_config(overrides, tmp_path, cache_dir), run_dir)
    assert str(err.value) == (
        f"resume --extend: {run_dir} searched with HyperOptSearch, which cannot be told the "
        f"trials run so far; only a grid, random search or search_alg=optuna can be extended."
    )


def test_each_random_search_extension_draws_from_its_own_seed_and_a_grid_is_warm_started(run_dir, cache_dir, tmp_path):
    from hfsweep.driver.resume import extension_searcher
    from tests.conftest import resolved_config, sweep_config

    random = sweep_config(
        ["debug=tiny", "search_alg=random", "search_space=learning_rate_loguniform", "seed=7"], tmp_path, cache_dir
    )
    states = [extension_searcher(random, run_dir, grid=False, number=n)["random_state"] for n in (1, 2, 1)]
    assert states[0] == states[2] and len({7, *states}) == 3, "reproducible, and neither the sweep's nor the other's"
    unwarmed = extension_searcher(random, run_dir, grid=False, number=1)
    assert not unwarmed["warm_start"], "random search is told nothing"
    grid = resolved_config(["debug=tiny"], tmp_path, cache_dir)
    assert extension_searcher(typed(SweepConfig, grid), run_dir, grid=True, number=1)["warm_start"] == [run_dir]
    grid["search_alg"]["warm_start"] = ["/runs/pilot"]  # the sweep itself started from an earlier one
    warmed = extension_searcher(typed(SweepConfig, grid), run_dir, grid=True, number=1)
    assert warmed["warm_start"] == ["/runs/pilot", run_dir]


def test_an_extension_counts_the_searched_trials_and_runs_no_second_defaults_trial(run_dir, cache_dir, tmp_path):
    """num_samples counts draws, not the defaults trial beside them: a sweep of 3 draws and its
    defaults trial extended to num_samples=5 draws 2 more, and the config's own values, run once
    already, do not run again as an extra trial counted as a random draw."""
    from hfsweep.driver.resume import draws_run, extension_searcher
    from hfsweep.driver.search.defaults_trial import wanted
    from tests.conftest import sweep_config

    pd.DataFrame({"trial_id": ["a", "b", "c", "d"], "defaults": [True, False, False, False]}).to_csv(
        f"{run_dir}/results.csv", index=False
    )
    assert draws_run(run_dir) == 3
    overrides = [
        "debug=tiny",
        "search_alg=random",
        "search_space=learning_rate_loguniform",
        "search_alg.defaults_trial=true",
    ]
    random = sweep_config(overrides, tmp_path, cache_dir)
    assert wanted(random)
    added = extension_searcher(random, run_dir, grid=False, number=1)
    assert not wanted(dataclasses.replace(random, search_alg=added))


class BuildFailed(Exception):
    pass


def test_an_extension_trains_under_its_own_name_and_saves_its_config_only_once_its_tuner_is_built(run_dir, monkeypatch):
    """The extension's trials are bound to NAME-extend-1 (their Train runs and checkpoints live under
    it); and an extension whose Tuner cannot be built leaves the saved config as it was, so the same
    command can be run again. Everything from the data to Tune is stubbed: the end-to-end extension
    is in test_extend_e2e.py."""
    from types import SimpleNamespace

    from hfsweep.driver import resume

    pd.DataFrame({"trial_id": ["a"], "defaults": [False], "ended": ["completed"]}).to_csv(
        f"{run_dir}/results.csv", index=False
    )
    saved = open(f"{run_dir}/resolved_config.yaml").read()
    bound = []
    monkeypatch.setattr(
        resume,
        "plan_sweep",
        lambda sweep, task: SimpleNamespace(setup=SimpleNamespace(budget=None, notes=[]), data=None),
    )
    monkeypatch.setattr(resume.tune, "ExperimentAnalysis", lambda path: path)
    monkeypatch.setattr(resume.tune, "ResultGrid", lambda analysis: analysis)
    monkeypatch.setattr(resume, "start_cluster", lambda sweep: None)
    monkeypatch.setattr(resume, "trainable_for", lambda sweep, task, data: bound.append(sweep.name))

    def build_tuner(plan, trainable, cap):
        raise BuildFailed

    monkeypatch.setattr(resume, "build_tuner", build_tuner)
    with pytest.raises(BuildFailed):
        resume.extend(run_dir, ["search_space.training.learning_rate.values=[1e-3,1e-4]"])
    assert bound == ["sweep-extend-1"]
    assert open(f"{run_dir}/resolved_config.yaml").read() == saved


def test_a_resume_reads_no_warm_start_source_since_tune_restores_the_searcher_it_warmed(
    tmp_path, cache_dir, monkeypatch
):
    """A warm-started sweep resumes after its source run moved: the source is not read again (it
    was, and the move made the sweep impossible to resume: changing the key is refused)."""
    from hfsweep.driver import resume, tuner
    from tests.conftest import resolved_config

    missing = tmp_path / "moved"
    write_config(
        str(tmp_path), resolved_config(["debug=tiny", f"search_alg.warm_start=[{missing}]"], tmp_path, cache_dir)
    )
    planned = []
    monkeypatch.setattr(resume.tune.Tuner, "can_restore", lambda path: True)
    monkeypatch.setattr(resume, "plan_sweep", lambda sweep, task: planned.append(tuner.plan_sweep(sweep, task)))

    def start_cluster(sweep):
        raise BuildFailed  # the plan was made: nothing below it is tested here

    monkeypatch.setattr(resume, "start_cluster", start_cluster)
    with pytest.raises(BuildFailed):
        resume.resume(str(tmp_path))
    assert len(planned) == 1


@pytest.mark.parametrize("ended", [None, "running", "pending"])
def test_an_unfinished_sweep_is_refused_in_one_line_that_names_resume(run_dir, ended):
    """An interrupted sweep (trials left running or pending, or killed before results.csv) is
    finished by `resume` first: an extension would leave those trials behind for good."""
    from hfsweep.driver.resume import extend

    if ended:
        pd.DataFrame({"trial_id": ["a", "b"], "defaults": [False, False], "ended": ["completed", ended]}).to_csv(
            f"{run_dir}/results.csv", index=False
        )
    with pytest.raises(
        ConfigError, match=rf"^resume --extend: .*; python -m hfsweep.resume {run_dir} finishes it first\.$"
    ):
        extend(run_dir, ["search_space.training.learning_rate.values=[1e-3,1e-4]"])


def test_raising_a_grids_num_samples_is_refused_in_a_line_about_num_samples(run_dir):
    """Not in the warm start's words: the user set no search_alg.warm_start."""
    from hfsweep.driver.resume import extend

    pd.DataFrame({"trial_id": ["a"], "defaults": [False], "ended": ["completed"]}).to_csv(
        f"{run_dir}/results.csv", index=False
    )
    with pytest.raises(ConfigError, match=r"^resume --extend: a grid's num_samples cannot change \(each point of "):
        extend(run_dir, ["num_samples=2"])


def test_a_forced_resume_records_the_config_it_goes_on_with_once_tune_has_restored_the_sweep(
    run_dir, monkeypatch, capsys
):
    """`resume RUN training.max_steps=... --force`: the unfinished trials train with the new value,
    so resolved_config.yaml says so (replay, report and a plain later resume read it), and the config
    it replaces is kept beside it. A restore that fails leaves both as they were. Tune is stubbed
    from the restore on: the resume itself is test_resume_e2e.py's."""
    from types import SimpleNamespace

    from hfsweep.driver import resume

    saved = open(f"{run_dir}/resolved_config.yaml").read()
    restorable = []

    def restore(path, trainable, **kwargs):
        if not restorable:
            raise BuildFailed
        return SimpleNamespace()

    def killed(tuner):
        raise BuildFailed  # the driver dies while the trials run: they ran with the forced value

    monkeypatch.setattr(resume.tune.Tuner, "can_restore", lambda path: True)
    monkeypatch.setattr(resume.tune.Tuner, "restore", restore)
    monkeypatch.setattr(resume, "plan_sweep", lambda sweep, task: SimpleNamespace(data=None, param_space={}))
    monkeypatch.setattr(resume, "start_cluster", lambda sweep: None)
    monkeypatch.setattr(resume, "trainable_for", lambda sweep, task, data: None)
    monkeypatch.setattr(resume, "study_exists", lambda sweep: False)
    monkeypatch.setattr(resume, "restored_callbacks", lambda tuner: [])
    monkeypatch.setattr(resume, "tune_fit", killed)
    with pytest.raises(BuildFailed):
        resume.resume(run_dir, ["training.max_steps=50"], force=True)
    assert open(f"{run_dir}/resolved_config.yaml").read() == saved
    assert not [name for name in os.listdir(run_dir) if "before-resume" in name]

    restorable.append(True)
    for max_steps in (50, 60):
        with pytest.raises(BuildFailed):
            resume.resume(run_dir, [f"training.max_steps={max_steps}"], force=True)
    assert read_config(run_dir)["training"]["max_steps"] == 60
    before = yaml.safe_load(open(f"{run_dir}/resolved_config.before-resume-1.yaml"))
    assert before == yaml.safe_load(saved)
    assert yaml.safe_load(open(f"{run_dir}/resolved_config.before-resume-2.yaml"))["training"]["max_steps"] == 50
    assert "resolved_config.yaml now records training.max_steps; the config before is" in capsys.readouterr().out


def test_extend_values_may_come_before_the_run_directory(run_dir, capsys):
    """`python -m hfsweep.resume --extend KEY=VALUE RUN_DIR` is the same command as with the
    directory first (argparse's `--extend` took the directory as one more value, and the command
    failed on a missing run_dir)."""
    from hfsweep.cli.resume import main

    for argv in ([run_dir, "--extend", "training.max_steps=5"], ["--extend", "training.max_steps=5", run_dir]):
        assert main(argv) == 2
        assert "resume --extend: training.max_steps differ from the config saved in" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--extend", "num_samples=3"])
    assert "required: run_dir" in capsys.readouterr().err
