"""Faults injected into real trials by config (`+callbacks.NAME._target_=tests.faults.X`)."""

from __future__ import annotations

import glob
import os
import threading
import time

from transformers import TrainerCallback

from hfsweep.contract.pointers import POINTER_FILE
from hfsweep.driver.preflight import preflight


def kill_driver(driver) -> None:
    """End a `python -m hfsweep` driver (a subprocess.Popen) and the local Ray it started, its child
    processes, with no chance to save anything: as a session's end or a killed job does."""
    import psutil

    started_by_driver = psutil.Process(driver.pid).children(recursive=True)
    driver.kill()
    driver.wait(timeout=30)
    for child in started_by_driver:
        try:
            child.kill()
        except psutil.NoSuchProcess:
            pass


class CrashMidSave(TrainerCallback):
    """At `step`, leave half of checkpoint-STEP on disk, as a crash inside the save would, and end
    the process at once. Crashes once per sweep: a marker in the sweep's train_runs folder."""

    def __init__(self, step: int):
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        marker = os.path.join(os.path.dirname(os.path.dirname(args.output_dir)), "crashed-mid-save")
        if state.global_step != self.step or os.path.exists(marker):
            return
        open(marker, "w").close()
        partial = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
        os.makedirs(partial)
        with open(os.path.join(partial, "model.safetensors"), "wb") as f:
            f.write(b"\0" * 64)  # a truncated weights file
        os._exit(1)


class CrashAfterSave(TrainerCallback):
    """Once `step` is saved and reported, end the process at once, as a lost node would: Tune
    (or Train, for a worker group) then restores the trial from that checkpoint. Crashes once per
    sweep: a marker in the sweep's train_runs folder."""

    def __init__(self, step: int):
        self.step = step

    def on_step_begin(self, args, state, control, **kwargs):
        marker = os.path.join(os.path.dirname(os.path.dirname(args.output_dir)), "crashed-after-save")
        if state.global_step == self.step and not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(1)


class HoldAfterStep(TrainerCallback):
    """After `step` is saved and reported, hold training until the test has injected its fault, so
    the fault always lands mid-trial however slow the machine. The hold is signalled by a `holding`
    file in the sweep's train_runs folder; the test releases it with a `released` file (restarted
    workers then go straight on). With `learning_rate` or `seed`, only the trial training with it
    holds. A hold not released within `timeout_s` errors the trial, which fails the test."""

    def __init__(self, step: int, timeout_s: float = 120, learning_rate: float | None = None, seed: int | None = None):
        self.step, self.timeout_s, self.learning_rate, self.seed = step, timeout_s, learning_rate, seed

    def on_step_begin(self, args, state, control, **kwargs):
        train_runs = os.path.dirname(os.path.dirname(args.output_dir))
        released = os.path.join(train_runs, "released")
        if state.global_step != self.step or os.path.exists(released):
            return
        if self.learning_rate is not None and args.learning_rate != self.learning_rate:
            return
        if self.seed is not None and args.seed != self.seed:
            return
        open(os.path.join(train_runs, "holding"), "w").close()
        deadline = time.time() + self.timeout_s
        while not os.path.exists(released):
            if time.time() > deadline:
                raise TimeoutError(
                    f"HoldAfterStep: the test did not release step {self.step} within {self.timeout_s} s"
                )
            time.sleep(0.1)


class RecordSteps(TrainerCallback):
    """Not a fault: appends each training step's wall-clock interval to the sweep's
    train_runs/steps.log (`TRIAL BEGIN END`), so a test can count the trials training at one moment."""

    def on_step_begin(self, args, state, control, **kwargs):
        self.began = time.time()

    def on_step_end(self, args, state, control, **kwargs):
        trial_dir = os.path.dirname(args.output_dir)  # train_runs/TRIAL_ID[-from-DONOR]/hf_checkpoints
        with open(os.path.join(os.path.dirname(trial_dir), "steps.log"), "a") as f:
            f.write(f"{os.path.basename(trial_dir).split('-from-')[0]} {self.began} {time.time()}\n")


HOLD_AFTER_STEP_10 = ["+callbacks.hold._target_=tests.faults.HoldAfterStep", "+callbacks.hold.step=10"]


class SweepInBackground:
    """`sweep.run(preflight(cfg))` in a thread, so a test can inject a fault into the running sweep."""

    def __init__(self, cfg: dict):
        from hfsweep.driver import sweep

        self.sweep_dir = os.path.join(cfg["cluster"]["storage_path"], cfg["name"])
        self.train_runs, self.outcome = os.path.join(self.sweep_dir, "train_runs"), {}
        self.thread = threading.Thread(target=lambda: self.outcome.update(results=sweep.run(preflight(cfg))))
        self.thread.start()
        self.deadline = time.time() + 300

    def wait_until_held(self) -> None:
        """Until the workers hold after checkpoint-10 (`HoldAfterStep`) and its report reached
        Tune: the trial has persisted its first pointer checkpoint. (Train's controller collects
        the workers' reports by polling; a fault before that would lose the report itself.)"""
        reported = os.path.join(self.sweep_dir, "*", "checkpoint_000000", POINTER_FILE)
        while not (os.path.exists(os.path.join(self.train_runs, "holding")) and glob.glob(reported)):
            assert time.time() < self.deadline and self.thread.is_alive(), "training never reached the hold"
            time.sleep(0.1)

    def release(self) -> None:
        open(os.path.join(self.train_runs, "released"), "w").close()

    def results(self):
        self.thread.join(timeout=600)
        return self.outcome["results"]


def assert_one_restart_from_a_checkpoint(results, max_steps: int) -> None:
    """The single trial finished at max_steps after exactly one restart, whose first report is
    the restored checkpoint's step + 10 (it did not start over)."""
    assert results.errors == []
    history = results[0].metrics_dataframe
    assert history["step"].iloc[-1] == max_steps
    restarts = history[history["resumed_from"].notna()] if "resumed_from" in history else history.iloc[0:0]
    assert len(restarts) == 1, "the worker group did not restart"
    resumed_step = int(restarts.iloc[0]["resumed_from"].rsplit("checkpoint-", 1)[1])
    assert resumed_step >= 10 and restarts.iloc[0]["step"] == resumed_step + 10
