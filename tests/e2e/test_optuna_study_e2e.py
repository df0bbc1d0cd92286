"""search_alg.storage: the Optuna study is written while the sweep runs, so Optuna Dashboard can
watch it live (read here the way the dashboard reads it: optuna.load_study on the same URL), and a
resumed sweep goes on writing the same study."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pandas as pd
import pytest

from tests.e2e.test_resume_e2e import interrupt


def study_sweep(tmp_path, cache_dir, *more: str) -> list[str]:
    """A 4-trial TPE sweep (the defaults trial, 1e-3, first), one trial at a time, written to
    tmp_path/sweep.db."""
    return [
        sys.executable,
        "-m",
        "hfsweep",
        "debug=tiny",
        "search_alg=optuna",
        "search_space=learning_rate_loguniform",
        "num_samples=3",
        "search_alg.defaults_trial=true",
        "cluster.max_concurrent_trials=1",
        f"search_alg.storage=sqlite:///{tmp_path / 'sweep.db'}",
        f"cache_dir={cache_dir}",
        f"hydra.run.dir={tmp_path / 'run'}",
        *more,
    ]


def test_the_study_holds_finished_trials_while_the_sweep_still_runs(tmp_path, cache_dir):
    import optuna

    url = f"sqlite:///{tmp_path / 'sweep.db'}"
    command = study_sweep(tmp_path, cache_dir)
    sweep = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen_live = 0
    while sweep.poll() is None:
        time.sleep(2)
        if os.path.exists(tmp_path / "sweep.db"):
            try:
                trials = optuna.load_study(study_name="sweep", storage=url).get_trials(deepcopy=False)
            except (KeyError, optuna.exceptions.StorageInternalError):  # not created yet
                continue
            if sweep.poll() is None:
                seen_live = max(seen_live, sum(t.state == optuna.trial.TrialState.COMPLETE for t in trials))
    output = sweep.stdout.read()
    assert sweep.returncode == 0, output[-3000:]
    assert seen_live >= 1, "no finished trial was in the study before the sweep ended"
    # one trial at a time: the start-up rule's 2 (a third of 4) are the random draws, read from the trials' reports
    assert "searcher:        2 trials drawn at random (start-up), 2 chosen by its model" in output, output[-3000:]
    trials = optuna.load_study(study_name="sweep", storage=url).get_trials()
    assert len(trials) == 4 and all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    assert trials[0].params["training/learning_rate"] == pytest.approx(1e-3), "the defaults trial is the study's first"


@pytest.mark.parametrize("how", ["ctrl-c", "sigkill"])
def test_a_resumed_sweep_goes_on_in_the_same_study(tmp_path, cache_dir, how):
    """Interrupted mid-way through its first trial, then resumed with python -m hfsweep.resume:
    the study ends with the sweep's 4 trials, each once and complete, and the summary still counts
    the start-up's random draws. After a kill, a trial asked for but never run is marked FAIL."""
    import optuna

    url = f"sqlite:///{tmp_path / 'sweep.db'}"
    run_dir = tmp_path / "run"
    # the defaults trial (1e-3) holds after reporting checkpoint-10: the sweep is interrupted there
    hold = [
        "+callbacks.hold._target_=tests.faults.HoldAfterStep",
        "+callbacks.hold.step=10",
        "+callbacks.hold.learning_rate=1e-3",
    ]
    env = {**os.environ, "TUNE_GLOBAL_CHECKPOINT_S": "1"}  # Tune saves its state (the searcher's too) every second
    driver = subprocess.Popen(
        study_sweep(tmp_path, cache_dir, *hold), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
    holding = run_dir / "sweep" / "train_runs" / "holding"
    deadline = time.time() + 300
    while not holding.exists() and time.time() < deadline and driver.poll() is None:
        time.sleep(0.2)
    assert holding.exists() and driver.poll() is None, "the sweep ended before it could be interrupted"
    time.sleep(3)  # the held trial's report and Tune's saved state
    interrupt(driver, how)
    study = optuna.load_study(study_name="sweep", storage=url)
    (before,) = study.get_trials()
    assert before.state == optuna.trial.TrialState.RUNNING
    if how == "sigkill":  # as a kill between Optuna's ask and Tune's next save leaves: a trial Tune never saw
        study.ask()
    (holding.parent / "released").touch()

    resumed = subprocess.run(
        [sys.executable, "-m", "hfsweep.resume", str(run_dir)], capture_output=True, text=True, timeout=600
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    trials = optuna.load_study(study_name="sweep", storage=url).get_trials()
    if how == "sigkill":
        lost = trials.pop(1)
        assert lost.state == optuna.trial.TrialState.FAIL, "the trial Tune never saw is left running"
        assert "hfsweep: study: 1 lost trial(s) marked FAIL" in resumed.stdout
    assert [t.state for t in trials] == [optuna.trial.TrialState.COMPLETE] * 4, [t.state for t in trials]
    assert trials[0].number == before.number and trials[0].params == before.params, "the held trial was not continued"
    ran = pd.read_csv(run_dir / "results.csv")["training.learning_rate"]
    assert sorted(t.params["training/learning_rate"] for t in trials) == pytest.approx(sorted(ran)), (
        "the study holds other trials than the sweep ran"
    )
    # Ray's OptunaSearch enqueued the defaults point into the loaded study again on resume
    assert list(ran).count(1e-3) == 1, f"the defaults trial ran again: {list(ran)}"
    assert "searcher:        2 trials drawn at random (start-up), 2 chosen by its model" in resumed.stdout, (
        resumed.stdout[-3000:]
    )
