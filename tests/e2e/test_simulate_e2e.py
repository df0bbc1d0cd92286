"""`python -m hfsweep.simulate` playing back real Tune recordings through real Tune schedulers, end to end."""

from __future__ import annotations

import time

import pandas as pd
import pytest

from hfsweep.cli.simulate import main
from hfsweep.driver.search.simulate import build_simulated_scheduler, read_recording, simulate
from hfsweep.run_dir import write_config
from tests.conftest import resolved_config

# The recordings are real Tune runs of a function that reports a fixed curve per config (no model
# trains), so a playback can be checked against a real sweep over the same curves: FIFO gives back the
# sweep itself, and ASHA stops the trials a real ASHA run stops, at the same steps.
# score = START[x] + SLOPE[x] * k at step 10 k: early leaders that flatten or fall, late bloomers.
START = [0.50, 0.60, 0.30, 0.55, 0.20, 0.65]
SLOPE = [0.020, 0.001, 0.080, 0.010, 0.100, -0.030]
STEPS = 6
MAX_STEP = 10 * STEPS
BARE = {"training": {"max_steps": MAX_STEP}}  # what the CLI gives a bare Tune experiment


def curve(config):
    from ray import tune

    x = config["x"]
    for k in range(1, STEPS + 1):
        tune.report({"step": 10 * k, "score": START[x % 6] + SLOPE[x % 6] * k + x / 1000})


def record(storage, name: str, configs: int, scheduler=None, concurrency: int = 1, first: int = 0):
    """A real Tune run of `curve` over a grid of `configs` values of x from `first`, `concurrency` trials at a time."""
    from ray import tune

    tuner = tune.Tuner(
        curve,
        param_space={"x": tune.grid_search(list(range(first, first + configs)))},
        tune_config=tune.TuneConfig(metric="score", mode="max", scheduler=scheduler, max_concurrent_trials=concurrency),
        run_config=tune.RunConfig(name=name, storage_path=str(storage), verbose=0),
    )
    return tuner.fit()


def last_steps(results) -> dict:
    return {r.config["x"]: r.metrics["step"] for r in results}


@pytest.fixture(scope="module")
def fifo_grid(ray_cluster, tmp_path_factory):
    storage = tmp_path_factory.mktemp("simulate")
    return storage / "fifo", record(storage, "fifo", len(START))


def test_fifo_playback_is_the_sweep_itself(fifo_grid):
    path, results = fifo_grid
    best = results.get_best_result(metric="score", mode="max", scope="all")
    sim = simulate(
        read_recording([str(path)]),
        build_simulated_scheduler(["scheduler=fifo"], BARE, "score", "max"),
        "score",
        "max",
        name="fifo",
    )
    assert sim.compute_share == 1.0
    assert sim.regret == 0
    assert sim.best.trial_id == best.metrics["trial_id"] and sim.best.config == best.config
    assert sim.best_value == max(best.metrics_dataframe["score"])
    assert [o.ended for o in sim.trials] == ["completed"] * len(START)


def test_asha_playback_stops_what_a_real_asha_sweep_stops(fifo_grid, capsys):
    from ray.tune.schedulers import ASHAScheduler

    path, _ = fifo_grid
    asha = ASHAScheduler(time_attr="step", max_t=MAX_STEP, grace_period=20, reduction_factor=2)
    real = record(path.parent, "asha", len(START), asha)
    real_steps = last_steps(real)
    assert sorted(set(real_steps.values())) == [20, 40, 60], "the curves must make ASHA stop at both rungs"

    job = ["scheduler=asha", "scheduler.grace_period=20"]  # reduction_factor 2 and max_t: conf/scheduler/asha.yaml's
    scheduler = build_simulated_scheduler(job, BARE, "score", "max")
    sim = simulate(read_recording([str(path)]), scheduler, "score", "max", name="asha")
    assert {o.config["x"]: o.progress for o in sim.trials} == real_steps
    stopped = {x for x, step in real_steps.items() if step < MAX_STEP}
    assert {o.config["x"] for o in sim.trials if o.ended == "stopped"} == stopped
    assert sim.compute_share < 1

    # The ASHA run's own records are refused as a recording, in one line naming the fix...
    capsys.readouterr()  # Tune's own output, from the run
    bare = ["--metric", "score", "--mode", "max"]
    assert main([str(path.parent / "asha"), *job, *bare]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and "--treat-stopped-as-final" in err
    # ...and taken with it: playing back the same ASHA stops the same trials again.
    assert main([str(path.parent / "asha"), *job, *bare, "--treat-stopped-as-final"]) == 0
    table = pd.read_csv(path.parent / "asha" / "simulate" / "asha-grace_period=20.csv")
    assert dict(zip(table["x"], table["step"])) == real_steps


def test_a_sweep_run_directory_plays_back_with_its_metric_and_stoppers(fifo_grid, cache_dir):
    """The FIFO grid as an hfsweep run directory: the metric, mode and max_steps come from its
    resolved_config.yaml, and the step budget's stopper ends each trial at max_steps before ASHA."""
    path, _ = fifo_grid
    overrides = ["debug=tiny", "name=fifo", "metric=score", "mode=max", f"training.max_steps={MAX_STEP}"]
    write_config(str(path.parent), resolved_config(overrides, path.parent, cache_dir))
    assert main([str(path.parent), "scheduler=asha", "scheduler.grace_period=20"]) == 0
    table = pd.read_csv(path.parent / "simulate" / "asha-grace_period=20.csv")
    assert dict(zip(table["x"], table["step"])) == {0: 60, 1: 60, 2: 20, 3: 60, 4: 20, 5: 40}  # as the real ASHA run


def test_a_sweep_plays_back_the_trials_resume_extend_added(ray_cluster, tmp_path, cache_dir):
    """`resume --extend` adds its trials as the experiment NAME-extend-1 beside the sweep's own."""
    record(tmp_path, "grid", 2)
    record(tmp_path, "grid-extend-1", 2, first=2)
    overrides = ["debug=tiny", "name=grid", "metric=score", "mode=max", f"training.max_steps={MAX_STEP}"]
    write_config(str(tmp_path), resolved_config(overrides, tmp_path, cache_dir))
    assert main([str(tmp_path), "scheduler=fifo"]) == 0
    table = pd.read_csv(tmp_path / "simulate" / "fifo.csv")
    assert sorted(table["x"]) == [0, 1, 2, 3] and (table["step"] == MAX_STEP).all()


def test_several_schedulers_compare_in_one_table(fifo_grid, capsys):
    path, _ = fifo_grid
    argv = [str(path), "scheduler=fifo,asha,hyperband,median", "--metric", "score", "--mode", "max", "--shuffle", "3"]
    assert main(argv) == 0
    table = pd.read_csv(path / "simulate" / "comparison.csv")
    assert list(table["scheduler"]) == ["fifo", "asha", "hyperband", "median"]
    assert table.loc[0, "compute_share"] == 1.0 and table.loc[0, "regret"] == 0
    assert (table["compute_share"] <= 1).all() and (table["regret"] >= 0).all()
    assert "hyperband (HyperBandScheduler)" in capsys.readouterr().out


def test_a_64_trial_sweep_simulates_in_under_10_seconds(ray_cluster, tmp_path, capsys):
    record(tmp_path, "grid64", 64, concurrency=4)
    recording = read_recording([str(tmp_path / "grid64")])
    assert len(recording.trials) == 64 and recording.concurrency() <= 4
    started = time.perf_counter()
    assert main([str(tmp_path / "grid64"), "scheduler=asha", "--metric", "score", "--mode", "max"]) == 0
    seconds = time.perf_counter() - started
    assert seconds < 10, f"simulating ASHA over 64 recorded trials took {seconds:.1f} s"
    assert "asha (AsyncHyperBandScheduler): stopped" in capsys.readouterr().out
