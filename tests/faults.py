"""Faults injected into real trials by config (`+callbacks.NAME._target_=tests.faults.X`)."""

from __future__ import annotations

import glob
import os
import threading
import time

from transformers import TrainerCallback


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


class SweepInBackground:
    """`sweep.run(cfg)` in a thread, so a test can inject a fault into the running sweep."""

    def __init__(self, cfg: dict):
        from hfsweep import sweep

        self.storage, self.outcome = cfg["cluster"]["storage_path"], {}
        self.thread = threading.Thread(target=lambda: self.outcome.update(results=sweep.run(cfg)))
        self.thread.start()
        self.deadline = time.time() + 300

    def wait_for_first_checkpoint(self) -> None:
        """Until checkpoint-10 is on disk, and a second more: the worker reports it right after
        writing it (Tune's own result files reach the storage path later, in syncs)."""
        pattern = os.path.join(self.storage, "sweep", "train_runs", "*", "hf_checkpoints", "checkpoint-10", "trainer_state.json")
        while not glob.glob(pattern):
            assert time.time() < self.deadline and self.thread.is_alive(), "no checkpoint was written"
            time.sleep(0.1)
        time.sleep(1)

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
