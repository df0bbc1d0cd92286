"""Resume: a sweep interrupted by Ctrl-C or a killed driver finishes with one command, finished
trials untouched."""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
import yaml

from tests.faults import kill_driver

SWEEP = [
    "debug=tiny",
    "search_space.training.learning_rate.values=[3e-3,1e-3,1e-4]",
    "cluster.max_concurrent_trials=1",
    # the second trial holds after reporting checkpoint-10: the sweep is interrupted there
    "+callbacks.hold._target_=tests.faults.HoldAfterStep",
    "+callbacks.hold.step=10",
    "+callbacks.hold.learning_rate=1e-3",
    "budget.trial_hours=1",  # never spent here: the summary says what was, across the interruption
]
HELD_TRIAL = "run_trial_*_00001"  # the grid's second point, 1e-3


def finished_trials(experiment: str) -> list[str]:
    done = []
    for result_file in glob.glob(os.path.join(experiment, "run_trial_*", "result.json")):
        lines = [json.loads(line) for line in open(result_file) if line.strip()]
        if lines and lines[-1].get("done"):
            done.append(os.path.dirname(result_file))
    return done


def interrupt(driver: subprocess.Popen, how: str) -> None:
    """Ctrl-C lets Tune save its state and exit; SIGKILL ends the driver and the local Ray it
    started (its child processes) with no chance to save anything."""
    if how == "ctrl-c":
        driver.send_signal(signal.SIGINT)
        driver.wait(timeout=120)
        return
    kill_driver(driver)


@pytest.mark.parametrize(
    "how", [pytest.param("ctrl-c", marks=pytest.mark.smoke), "sigkill"]
)  # smoke: the default tier resumes one
def test_interrupt_then_resume_finishes_the_sweep_without_rerunning(tmp_path, cache_dir, how):
    run_dir = tmp_path / "run"
    experiment = str(run_dir / "sweep")
    command = [sys.executable, "-m", "hfsweep", *SWEEP, f"cache_dir={cache_dir}", f"hydra.run.dir={run_dir}"]
    # Tune saves its experiment state (result files included) every second, so a finished trial
    # shows in the run directory at once and the sweep is interrupted after its first trial.
    env = {**os.environ, "TUNE_GLOBAL_CHECKPOINT_S": "1"}
    driver = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    held_pointer = os.path.join(experiment, HELD_TRIAL, "checkpoint_000000", "hfsweep_checkpoint.json")
    holding = run_dir / "sweep" / "train_runs" / "holding"
    deadline = time.time() + 600  # under load (a test tier beside other work) a trial's start takes minutes
    while not (holding.exists() and glob.glob(held_pointer)) and time.time() < deadline and driver.poll() is None:
        time.sleep(0.2)
    assert driver.poll() is None, "the sweep ended before it could be interrupted"
    assert glob.glob(held_pointer), "the second trial never reported checkpoint-10"
    time.sleep(3)  # Tune saves its experiment state every second (TUNE_GLOBAL_CHECKPOINT_S)
    interrupt(driver, how)
    interrupted = {path: open(os.path.join(path, "result.json")).read() for path in finished_trials(experiment)}
    assert len(interrupted) == 1, "the first trial finished, the second was held mid-way"
    (holding.parent / "released").touch()
    saved = yaml.safe_load((run_dir / "resolved_config.yaml").read_text())
    del saved["data"]["datasets_to_split"]  # as a run saved before hfsweep had the key: it resumes with the default
    (run_dir / "resolved_config.yaml").write_text(yaml.safe_dump(saved))

    refused = subprocess.run(
        [sys.executable, "-m", "hfsweep.resume", str(run_dir), "training.max_steps=50"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines()[-1] == (
        f"hfsweep: error: resume: training.max_steps differ from the config saved in {run_dir}; "
        "drop those overrides, or pass --force to resume with them."
    )

    resumed = subprocess.run(
        [sys.executable, "-m", "hfsweep.resume", str(run_dir)], capture_output=True, text=True, timeout=600
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    table = pd.read_csv(run_dir / "results.csv")
    assert len(table) == 3 and set(table["ended"]) == {"completed"}
    # the grid's trials as its generator created them (ids count up), however Tune lists them restored
    assert list(table["trial_id"]) == sorted(table["trial_id"])
    for path, before in interrupted.items():
        assert open(os.path.join(path, "result.json")).read() == before, "a finished trial was run again"
    (held,) = glob.glob(os.path.join(experiment, HELD_TRIAL, "result.json"))
    history = [json.loads(line) for line in open(held) if line.strip()]
    assert [row["step"] for row in history] == [10, 20], "the unfinished trial did not continue from its checkpoint"
    assert "resumed_from" not in history[0] and history[1]["resumed_from"].endswith("/checkpoint-10")
    # the resumed report holds keys the first did not (`resumed_from`...): progress.csv keeps its own header
    progress = pd.read_csv(os.path.join(os.path.dirname(held), "progress.csv"))
    assert progress["step"].tolist() == [10, 20]
    assert progress["time_total_s"].tolist() == pytest.approx([row["time_total_s"] for row in history])
    assert (run_dir / "best" / "config.json").is_file()
    # the budget counts on from what was spent before the interruption (Tune restores its saved state)
    trial_seconds = sum(
        [json.loads(line) for line in open(path) if line.strip()][-1]["time_total_s"]
        for path in glob.glob(os.path.join(experiment, "run_trial_*", "result.json"))
    )
    (line,) = [line for line in resumed.stdout.splitlines() if line.startswith("  budget:")]
    spent = float(line.split("trial-hours (")[1].split(" trial-seconds")[0])
    assert spent == pytest.approx(trial_seconds, abs=0.1), f"{line}: the three trials ran {trial_seconds:.1f} s"


ASHA_SWEEP = [
    "debug=tiny",
    "scheduler=asha",
    "training.max_steps=30",
    "scheduler.grace_period=20",
    # one at a time: 3e-3 sets the step-20 rung, then 1e-6 holds at step 10 and the sweep is interrupted
    "search_space.training.learning_rate.values=[3e-3,1e-6]",
    "cluster.max_concurrent_trials=1",
    "+callbacks.hold._target_=tests.faults.HoldAfterStep",
    "+callbacks.hold.step=10",
    "+callbacks.hold.learning_rate=1e-6",
]


def interrupt_once_held(overrides: list[str], run_dir, cache_dir, never_held: str) -> None:
    """Run a sweep until a trial holds (`tests.faults.HoldAfterStep`), Ctrl-C it once Tune has saved
    its experiment state, and release the hold; `never_held`: the failure if none holds."""
    command = [sys.executable, "-m", "hfsweep", *overrides, f"cache_dir={cache_dir}", f"hydra.run.dir={run_dir}"]
    env = {**os.environ, "TUNE_GLOBAL_CHECKPOINT_S": "1"}
    driver = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    holding = run_dir / "sweep" / "train_runs" / "holding"
    deadline = time.time() + 300
    while not holding.exists() and time.time() < deadline and driver.poll() is None:
        time.sleep(0.2)
    assert holding.exists(), never_held
    time.sleep(3)  # Tune saves its experiment state, callbacks included, every second
    interrupt(driver, "ctrl-c")
    (holding.parent / "released").touch()


def resume_sweep(run_dir) -> subprocess.CompletedProcess:
    resumed = subprocess.run(
        [sys.executable, "-m", "hfsweep.resume", str(run_dir)], capture_output=True, text=True, timeout=600
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    return resumed


def test_a_resumed_asha_sweep_judges_its_trials_against_the_rungs_set_before_the_interruption(tmp_path, cache_dir):
    """Tune saves no scheduler with its experiment: restored, ASHA's step-20 rung would be empty and
    1e-6, the first to reach it after the resume, would run on to step 30."""
    run_dir = tmp_path / "run"
    interrupt_once_held(ASHA_SWEEP, run_dir, cache_dir, never_held="1e-6 never reached step 10")
    assert len(finished_trials(str(run_dir / "sweep"))) == 1, "3e-3 finished, 1e-6 was held at step 10"
    resumed = resume_sweep(run_dir)
    assert "hfsweep: resume: AsyncHyperBandScheduler goes on with its records of the sweep's 2 trials" in (
        resumed.stdout
    )
    table = pd.read_csv(run_dir / "results.csv").set_index("training.learning_rate")
    assert table.loc[3e-3, "step"] == 30
    stopped = (table.loc[1e-6, "step"], table.loc[1e-6, "ended"])
    assert stopped == (20, "stopped by scheduler/stopper"), "ASHA forgot 3e-3's result at the rung"


PBT_SWEEP = [
    "debug=tiny",
    "scheduler=pbt",
    "scheduler.quantile_fraction=0.5",
    "scheduler.resample_probability=0.0",
    "+scheduler.synch=true",  # both trials reach each perturbation point, so the worse is exploited at each
    "search_space=learning_rate_loguniform",
    "search_space.training.learning_rate.low=1e-5",
    "num_samples=2",
    "training.max_steps=40",
    # both trials hold as they go on from the step-20 perturbation: the sweep is interrupted there
    "+callbacks.hold._target_=tests.faults.HoldAfterStep",
    "+callbacks.hold.step=20",
]


def test_a_resumed_pbt_sweep_goes_on_exploiting_with_its_population_restored(tmp_path, cache_dir):
    """PBT's records (scores, checkpoints, perturbation times) come back into Tune's restored
    scheduler, and the resumed sweep perturbs at step 30 and finishes. Without them (Tune's own
    restore) this resumed synchronous PBT did not finish: the resume timed out after 600 s."""
    run_dir = tmp_path / "run"
    interrupt_once_held(PBT_SWEEP, run_dir, cache_dir, never_held="no trial went on from the step-20 perturbation")
    resumed = resume_sweep(run_dir)
    assert "hfsweep: resume: PopulationBasedTraining goes on with its records of the sweep's 2 trials" in (
        resumed.stdout
    )
    table = pd.read_csv(run_dir / "results.csv")
    assert list(table["step"]) == [40, 40] and set(table["ended"]) == {"completed"}
    rows = [
        json.loads(line)
        for path in glob.glob(str(run_dir / "sweep" / "run_trial_*" / "result.json"))
        for line in open(path)
        if line.strip()
    ]
    owner = {row["checkpoint_path"]: row["trial_id"] for row in rows if row.get("checkpoint_path")}
    exploited = [row for row in rows if row.get("resumed_from") and owner[row["resumed_from"]] != row["trial_id"]]
    assert any(row["step"] == 40 for row in exploited), "no exploit at the step-30 perturbation, after the resume"


def test_resume_of_a_directory_without_a_sweep_is_refused(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "hfsweep.resume", str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        f"hfsweep: error: resume: '{tmp_path}' holds no sweep (resolved_config.yaml is missing); pass a sweep's run "
        "directory."
    )


# Replay drops the sweep's callbacks (nothing ends a seed early); its first run here keeps the hold.
REPLAY_KEEPING_CALLBACKS = (
    "import sys; from hfsweep.cli import replay; "
    "replay.RUN_TO_THE_END = {k: v for k, v in replay.RUN_TO_THE_END.items() if k != 'callbacks'}; "
    "sys.exit(replay.main(sys.argv[1:]))"
)


def test_an_interrupted_replay_is_finished_by_the_same_command(tmp_path, cache_dir):
    """Replay's seeds are a sweep too: killed mid-way, the same `python -m hfsweep.replay` command
    keeps the finished seed and continues the other from its checkpoint, then writes the table."""
    run_dir = tmp_path / "run"
    swept = subprocess.run(
        [
            sys.executable,
            "-m",
            "hfsweep",
            "debug=tiny",
            "cluster.max_concurrent_trials=1",
            f"cache_dir={cache_dir}",
            f"hydra.run.dir={run_dir}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert swept.returncode == 0, swept.stderr[-3000:]
    saved = yaml.safe_load((run_dir / "resolved_config.yaml").read_text())
    saved["callbacks"] = {
        "hold": {"_target_": "tests.faults.HoldAfterStep", "step": 10, "seed": 2}
    }  # the second seed holds
    (run_dir / "resolved_config.yaml").write_text(yaml.safe_dump(saved))
    experiment = run_dir / "replay" / "sweep"
    command = [sys.executable, "-m", "hfsweep.replay", str(run_dir), "--seeds", "1", "2"]
    driver = subprocess.Popen(
        [sys.executable, "-c", REPLAY_KEEPING_CALLBACKS, *command[3:]],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "TUNE_GLOBAL_CHECKPOINT_S": "1"},
    )
    held_pointer = os.path.join(experiment, "run_trial_*_00001", "checkpoint_000000", "hfsweep_checkpoint.json")
    holding = experiment / "train_runs" / "holding"
    deadline = time.time() + 600  # under load (a test tier beside other work) a trial's start takes minutes
    while not (holding.exists() and glob.glob(held_pointer)) and time.time() < deadline and driver.poll() is None:
        time.sleep(0.2)
    assert driver.poll() is None and glob.glob(held_pointer), "the second seed never held at its checkpoint-10"
    time.sleep(3)  # Tune saves its experiment state every second (TUNE_GLOBAL_CHECKPOINT_S)
    interrupt(driver, "sigkill")
    (first,) = finished_trials(str(experiment))
    before = open(os.path.join(first, "result.json")).read()
    assert not (run_dir / "replay" / "replay.md").exists()
    (holding.parent / "released").touch()

    other_seeds = subprocess.run([*command[:-2], "1", "3"], capture_output=True, text=True, timeout=120)
    assert other_seeds.returncode == 2
    assert other_seeds.stderr.strip().splitlines()[-1] == (
        f"hfsweep: error: replay: '{run_dir / 'replay'}' holds an unfinished replay of seeds 1 2; "
        "pass --seeds 1 2 to finish it, or move it aside to replay other seeds."
    )

    finished = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert open(os.path.join(first, "result.json")).read() == before, "the finished seed was trained again"
    (held,) = glob.glob(os.path.join(experiment, "run_trial_*_00001", "result.json"))
    assert [json.loads(line)["step"] for line in open(held) if line.strip()] == [10, 20], (
        "seed 2 did not continue from its checkpoint"
    )
    table = pd.read_csv(run_dir / "replay" / "replay.csv", dtype={"seed": str}).set_index("seed")
    assert list(table.index) == ["1", "2", "mean", "std"] and list(table.loc[["1", "2"], "step"]) == [20, 20]
    again = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert again.returncode == 2 and "already exists; move or delete it to replay again." in again.stderr


def test_a_replay_stopped_before_its_first_trial_or_asked_for_other_seeds_is_refused_in_one_line(
    tmp_path, cache_dir, capsys
):
    """What `python -m hfsweep.replay` says of a replay/ that holds a saved config but no Tune state."""
    from hfsweep.cli import replay
    from hfsweep.run_dir import write_config
    from tests.conftest import resolved_config

    out = tmp_path / "replay"
    cfg = resolved_config(["debug=tiny"], out, cache_dir)
    cfg["search_space"] = {"seed": {"sampler": "grid", "values": [1, 2]}}  # as replay saves it
    out.mkdir()
    write_config(str(out), cfg)
    assert replay.main([str(tmp_path), "--seeds", "1", "3"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"hfsweep: error: replay: '{out}' holds an unfinished replay of seeds 1 2; "
        "pass --seeds 1 2 to finish it, or move it aside to replay other seeds."
    )
    assert replay.main([str(tmp_path), "--seeds", "2", "1"]) == 2  # the same seeds, in another order
    assert capsys.readouterr().err.strip() == (
        f"hfsweep: error: replay: '{out}' was stopped before its first trial started; move or delete it to replay "
        "again."
    )
