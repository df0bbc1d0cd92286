"""Faults injected into real trials by config (`+callbacks.NAME._target_=tests.faults.X`)."""

from __future__ import annotations

import os

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
