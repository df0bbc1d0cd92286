"""A saved model scored on another split (MNLI's mismatched split, `extra_validation`; the held-out
`data.test_split`): the split tokenized as the sweep's validation split was, with the checkpoint's
own tokenizer, and scored by the sweep's eval metrics through the Trainer class the trials used."""

from __future__ import annotations

import os
import tempfile
from dataclasses import replace

from hfsweep.config.schema import DataConfig, SweepConfig, merged
from hfsweep.contract.recipe import TrainingRecipe
from hfsweep.data.prepare import raw_splits, write_validation
from hfsweep.driver.preflight import task_of
from hfsweep.driver.results.export import is_adapter, load_adapter_checkpoint

SCORE_ONCE = {"every_k_evals": 1, "max_eval_samples": None}  # GenerationEvalTrainer's: generate, on every example

# the Trainer's timings, not scores
SPEED_METRICS = ("runtime", "samples_per_second", "steps_per_second", "model_preparation_time")


def scores(metrics: dict, prefix: str = "eval") -> dict:
    """The PREFIX_* scores of a report (eval_*, test_*), without the Trainer's timings."""
    return {k: v for k, v in metrics.items() if k.startswith(f"{prefix}_") and not k.endswith(SPEED_METRICS)}


def extra_validation_sets(sweep: SweepConfig) -> dict:
    """NAME -> (its data config, its raw splits) for every `extra_validation` set: the sweep's data
    config with the set's keys merged in (nested ones such as `data_files.validation` change only
    what they name), read once for all the checkpoints scored on it."""
    task = task_of(sweep)
    sets = {}
    for name, changes in sweep.extra_validation.items():
        data_cfg = merged(sweep.data, changes)
        sets[name] = data_cfg, raw_splits(data_cfg, os.path.expanduser(sweep.cache_dir), task)
    return sets


def evaluate_checkpoint(
    sweep: SweepConfig, checkpoint_path: str, data_cfg: DataConfig, raw, split: str = "validation"
) -> dict:
    """The scores of the model in `checkpoint_path` on `split` of `raw` (the raw splits of
    `data_cfg`), in this process (on a GPU when it has one): eval_* on the validation split,
    test_* on the test split."""
    import datasets
    import torch
    from transformers import PrinterCallback

    from hfsweep.loops.hf_trainer import build_trainer, training_arguments

    task = task_of(sweep)
    tokenizer = task.load_processor(checkpoint_path)
    label_names = task.label_names(raw["train"], data_cfg)
    if is_adapter(checkpoint_path):  # an adapter over the base the trial built, its head as the task's classes
        model = load_adapter_checkpoint(checkpoint_path, sweep, task, tokenizer, label_names)
    else:
        model = task.auto_model_class().from_pretrained(checkpoint_path)
    # One process, no distributed strategy: the strategy's arguments (DeepSpeed, FSDP) stay out. Scored
    # once, on the whole split, with every eval metric: a generating Trainer's cadence and subset stay out.
    once = {**sweep.trainer, **{k: v for k, v in SCORE_ONCE.items() if k in sweep.trainer}}
    recipe = replace(
        TrainingRecipe.of(sweep),
        data=data_cfg,
        use_gpu=torch.cuda.is_available(),
        strategy_training_args={},
        trainer=once,
    )
    with tempfile.TemporaryDirectory() as folder:
        validation_path = write_validation(raw[split], task, tokenizer, data_cfg, folder)
        trainer = build_trainer(
            recipe,
            task,
            model=model,
            tokenizer=tokenizer,
            args=training_arguments(recipe, folder, task),
            train_dataset=None,
            eval_dataset=datasets.load_from_disk(validation_path),
            callbacks=[],
            label_names=label_names,
            validation_path=validation_path,
        )
        trainer.remove_callback(PrinterCallback)  # the caller tabulates the scores
        prefix = "eval" if split == "validation" else split
        return scores(trainer.evaluate(metric_key_prefix=prefix), prefix)


def evaluate_model(model, tokenizer, validation_path: str, batch_size: int = 16, data_collator=None) -> float:
    """Eval loss of `model` on the prepared validation split, in this process, on the CPU; with
    `data_collator` (a task that pads each batch), batched by it."""
    import datasets
    from transformers import PrinterCallback, Trainer, TrainingArguments, default_data_collator

    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(
            output_dir=out, use_cpu=True, per_device_eval_batch_size=batch_size, report_to="none", disable_tqdm=True
        )
        trainer = Trainer(
            model=model, args=args, data_collator=data_collator or default_data_collator, processing_class=tokenizer
        )
        trainer.remove_callback(PrinterCallback)  # it prints the metrics dict; the summary says what matters
        return trainer.evaluate(datasets.load_from_disk(validation_path))["eval_loss"]
