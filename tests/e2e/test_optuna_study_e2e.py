"""search_alg.storage: the Optuna study is written while the sweep runs, so Optuna Dashboard can
watch it live (read here the way the dashboard reads it: optuna.load_study on the same URL)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest


def test_the_study_holds_finished_trials_while_the_sweep_still_runs(tmp_path, cache_dir):
    import optuna

    url = f"sqlite:///{tmp_path / 'sweep.db'}"
    command = [
        sys.executable,
        "-m",
        "hfsweep",
        "debug=tiny",
        "search_alg=optuna",
        "search_space=learning_rate_loguniform",
        "num_samples=3",
        "search_alg.defaults_trial=true",
        "cluster.max_concurrent_trials=1",
        f"search_alg.storage={url}",
        f"cache_dir={cache_dir}",
        f"hydra.run.dir={tmp_path / 'run'}",
    ]
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
