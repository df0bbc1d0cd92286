"""The best checkpoint exported as a plain Hugging Face model directory (`best/`), through the
sweep's Task: weights and config, or a PEFT adapter (and, asked, the adapter merged into its base),
with the Task's processor."""

from __future__ import annotations

import os
from typing import Optional

from hfsweep.config.paths import nested
from hfsweep.config.schema import SweepConfig, merged
from hfsweep.driver.results.best import BestTrial


def export_best(best: BestTrial, sweep: SweepConfig, task, out_dir: str, label_names: Optional[list] = None) -> str:
    """The best checkpoint as a plain Hugging Face model directory: weights, config, tokenizer;
    no optimizer, scheduler or RNG state. A PEFT checkpoint is exported as its adapter, for
    `PeftModel.from_pretrained(base, out_dir)`, and with `peft.export_merged` also merged into
    its base in `OUT_DIR_merged`, for the plain Auto class."""
    import transformers

    transformers.utils.logging.disable_progress_bar()  # "Loading weights", "Writing model shards"
    tokenizer = task.load_processor(best.checkpoint_path)
    if not is_adapter(best.checkpoint_path):
        task.auto_model_class().from_pretrained(best.checkpoint_path).save_pretrained(out_dir)
        tokenizer.save_pretrained(out_dir)
        return out_dir
    model = load_adapter_checkpoint(
        best.checkpoint_path, merged(sweep, nested(best.hyperparameters)), task, tokenizer, label_names
    )
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    if sweep.peft.export_merged:
        model.merge_and_unload().save_pretrained(f"{out_dir}_merged")
        tokenizer.save_pretrained(f"{out_dir}_merged")
    return out_dir


def is_adapter(checkpoint_path: str) -> bool:
    """Whether a checkpoint holds a PEFT adapter (and not a whole model)."""
    from peft.utils import CONFIG_NAME

    return os.path.isfile(os.path.join(checkpoint_path, CONFIG_NAME))


def load_adapter_checkpoint(
    checkpoint_path: str, trial: SweepConfig, task, tokenizer, label_names: Optional[list] = None
):
    """A trial's adapter checkpoint over its base, rebuilt as the trial built it (same seed, so a
    base built from `model.config` is the same too), in full precision."""
    from peft import PeftModel
    from transformers import set_seed

    from hfsweep.models import build_model

    set_seed(trial.seed)
    return PeftModel.from_pretrained(build_model(trial.model, tokenizer, label_names, task=task), checkpoint_path)
