"""Failing trials, killed workers and trial shapes a real Ray cannot hold, end to end."""

from __future__ import annotations

import glob
import os
import re
import signal
import time

import pandas as pd
import psutil
import pytest

from hfsweep.config.errors import ConfigError
from hfsweep.config.resources import DATA_CPUS, usable_cores
from hfsweep.config.schema import ClusterConfig, StrategyConfig, typed
from hfsweep.driver import sweep
from hfsweep.driver.preflight import preflight
from hfsweep.driver.ray_cluster import max_concurrent_trials
from tests.conftest import resolved_config, run_sweep
from tests.faults import HOLD_AFTER_STEP_10, SweepInBackground, assert_one_restart_from_a_checkpoint


def test_a_diverging_trial_errors_with_its_reason_and_the_sweep_goes_on(ray_cluster, tmp_path, cache_dir):
    overrides = [
        "debug=tiny",
        "search_space.training.learning_rate.values=[1e-3,1e30]",
        "cluster.max_failures=0",
    ]
    results = run_sweep(overrides, tmp_path, cache_dir)[1]
    assert len(results.errors) == 1
    table = pd.read_csv(tmp_path / "results.csv").set_index("training.learning_rate")
    assert table.loc[1e-3, "ended"] == "completed"
    assert table.loc[1e30, "ended"] == "errored"
    assert re.search(
        r"FloatingPointError: training diverged: (eval_)?loss is (nan|inf) at step 10", table.loc[1e30, "error"]
    )


def process_title(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline())
    except psutil.Error:  # it ended meanwhile
        return ""


def test_a_killed_worker_restarts_from_the_latest_checkpoint(ray_cluster, tmp_path, cache_dir):
    overrides = [
        "debug=tiny",
        "cluster.num_workers=2",
        "cluster.max_failures=1",
        *HOLD_AFTER_STEP_10,
    ]
    background = SweepInBackground(resolved_config(overrides, tmp_path, cache_dir))
    background.wait_until_held()
    # This test's training workers: processes of the Ray this test process started (its children).
    live = []
    while not live:
        assert time.time() < background.deadline and background.thread.is_alive(), "no live training worker to kill"
        live = [p.pid for p in psutil.Process().children(recursive=True) if "RayTrainWorker" in process_title(p)]
        time.sleep(0.2)
    os.kill(live[0], signal.SIGKILL)
    background.release()
    assert_one_restart_from_a_checkpoint(background.results(), max_steps=20)


def test_a_crash_in_the_middle_of_a_save_resumes_from_the_last_complete_checkpoint(ray_cluster, tmp_path, cache_dir):
    overrides = [
        "debug=tiny",  # one worker, in the trial's process: Tune retries the trial
        "training.max_steps=30",
        "cluster.max_failures=1",
        "+callbacks.crash._target_=tests.faults.CrashMidSave",
        "+callbacks.crash.step=20",
    ]
    results = run_sweep(overrides, tmp_path, cache_dir)[1]
    assert results.errors == []
    history = results[0].metrics_dataframe
    assert list(history["step"]) == [10, 20, 30]
    restarted = history[history["resumed_from"].notna()]
    assert len(restarted) == 1 and restarted.iloc[0]["resumed_from"].endswith("/checkpoint-10")
    weights = glob.glob(
        str(tmp_path / "sweep" / "train_runs" / "*" / "hf_checkpoints" / "checkpoint-20" / "model.safetensors")
    )
    sizes = sorted(os.path.getsize(path) for path in weights)
    assert len(sizes) == 2 and sizes[0] == 64 < sizes[1], (
        "the retry wrote its own checkpoint-20; the half one was never used"
    )


def test_a_trial_shape_the_cluster_cannot_hold_fails_at_once_and_writes_nothing(ray_cluster, tmp_path, cache_dir):
    """A reachable cluster (the test's Ray, 8 logical CPUs) too small for one trial."""
    cfg = resolved_config(["cluster.address=auto", "cluster.resources_per_worker.CPU=8"], tmp_path, cache_dir)
    with pytest.raises(
        ConfigError,
        match=(
            r"^cluster\.resources_per_worker: one trial needs 18 CPU \(1 CPU for the trial \+ 2 workers and 1 to read "
            r"its data\) but the cluster has 8;"
        ),
    ):
        sweep.run(preflight(cfg))
    assert not (tmp_path / "resolved_config.yaml").exists() and not (tmp_path / "provenance.json").exists()


def test_a_pbt_population_of_worker_group_trials_larger_than_what_fits_is_refused_before_anything_is_written(
    ray_cluster, tmp_path, cache_dir
):
    """2-worker trials: Tune reserves only each trial's own CPU, so the searcher's cap (2 fit in the
    test's 8 CPUs) is what bounds them, and Tune counts PBT's paused trials against it."""
    cfg = resolved_config(["scheduler=pbt", "num_samples=1"], tmp_path, cache_dir)  # the default grid: 4 learning rates
    with pytest.raises(ConfigError) as refused:
        sweep.run(preflight(cfg))
    assert str(refused.value) == (
        "num_samples: under PopulationBasedTraining the population of 4 trials must be alive at once, but this sweep "
        "runs at most 2 trials at a time (its trial shape, or cluster.max_concurrent_trials) and Tune counts paused "
        "trials against that; search fewer grid points, or train each trial in its own process (cluster.num_workers=1) "
        "on a Ray hfsweep starts, where the rest of the population waits paused."
    )
    assert not (tmp_path / "resolved_config.yaml").exists() and not (tmp_path / "provenance.json").exists()


def test_a_local_ray_runs_single_process_trials_at_most_one_per_core(ray_cluster, tmp_path, cache_dir):
    """8 logical CPUs, 1 left for Ray Data: two 2-worker trials fit (3 CPUs each), one 3-worker
    trial (4 CPUs; two would take all 8), single-process ones one per core."""

    def cap(*overrides: str, **cluster) -> int:
        cfg = resolved_config(list(overrides), tmp_path, cache_dir)
        strategy = typed(StrategyConfig, cfg["strategy"])
        return max_concurrent_trials(typed(ClusterConfig, {**cfg["cluster"], **cluster}), strategy)

    assert cap("cluster.num_workers=1") == min(8 - DATA_CPUS, usable_cores())
    assert cap("cluster.num_workers=1", max_concurrent_trials=5) == 5
    assert cap() == 2
    assert cap("cluster.num_workers=3") == 1
