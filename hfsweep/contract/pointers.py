"""How a checkpoint reaches Tune. The Trainer writes each checkpoint once, in the trial's Train run
directory; Tune receives a pointer checkpoint that holds only that directory's path, so schedulers
can restore trials and PBT can exploit them without a second copy of the weights."""

from __future__ import annotations

import json
import os
import re
import tempfile
from typing import Optional

from ray import tune

POINTER_FILE = "hfsweep_checkpoint.json"
HF_CHECKPOINTS = "hf_checkpoints"  # in a trial's Train run directory: where the loops write checkpoints


def read_pointer(checkpoint: Optional[tune.Checkpoint]) -> Optional[str]:
    """The Hugging Face checkpoint directory a Tune pointer checkpoint refers to."""
    if checkpoint is None:
        return None
    with checkpoint.as_directory() as d, open(os.path.join(d, POINTER_FILE)) as f:
        return json.load(f)["path"]


def report_to_tune(metrics: dict, checkpoint_path: Optional[str]) -> None:
    """`tune.report` the metrics, with a pointer to `checkpoint_path` when there is one."""
    if checkpoint_path is None:
        tune.report(metrics)
        return
    metrics = {**metrics, "checkpoint_path": checkpoint_path}
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, POINTER_FILE), "w") as f:
            json.dump({"path": checkpoint_path, "step": metrics.get("step")}, f)
        tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(d))


def checkpoint_dir_name(step: int) -> str:
    """The Trainer's name for the checkpoint of `step` (both loops write it)."""
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

    return f"{PREFIX_CHECKPOINT_DIR}-{step}"


def checkpoint_step(name_or_path: str) -> int | None:
    """The step of a checkpoint folder by its name, or None for any other folder."""
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

    match = re.fullmatch(rf"{re.escape(PREFIX_CHECKPOINT_DIR)}-(\d+)", os.path.basename(name_or_path.rstrip("/")))
    return int(match.group(1)) if match else None
