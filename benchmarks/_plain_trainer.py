"""The hand-written baseline: a plain transformers.Trainer on hfsweep's prepared data and model.

Run with `python` (1 process) or `torchrun --nproc_per_node N` (DDP over gloo). Prints one JSON line
with the wall-clock time of every checkpoint save, on rank 0.
"""

from __future__ import annotations

import glob
import json
import os
import sys
import time

import datasets
import torch
from transformers import Trainer, TrainerCallback, TrainingArguments, default_data_collator, set_seed

from hfsweep.config.schema import ModelConfig, typed
from hfsweep.data.tokenizers import load_tokenizer
from hfsweep.models import build_model
from hfsweep.tasks import get_task


class SaveClock(TrainerCallback):
    def __init__(self):
        self.saves = []

    def on_save(self, args, state, control, **kwargs):
        self.saves.append((state.global_step, time.perf_counter()))


def main(spec_path: str) -> None:
    spec = json.load(open(spec_path))
    torch.set_num_threads(1)
    cfg, data = spec["cfg"], spec["data"]
    tokenizer = load_tokenizer(data["tokenizer_path"])
    set_seed(cfg["seed"])
    model = build_model(typed(ModelConfig, cfg["model"]), tokenizer, task=get_task(cfg["model"]["task"]))
    train = datasets.Dataset.from_parquet(sorted(glob.glob(os.path.join(data["train_path"], "*.parquet"))))
    validation = datasets.load_from_disk(data["validation_path"])
    args = TrainingArguments(
        output_dir=spec["output_dir"], use_cpu=not cfg["cluster"]["use_gpu"], report_to="none", **cfg["training"],
        **cfg["strategy"]["training_args"]
    )
    clock = SaveClock()
    callbacks = [clock]
    if spec.get("probe_out"):  # benchmarks/gpu.py: how the model was wrapped (FSDP's sharded parameters)
        from gpu_probe import ShardedParams

        callbacks.append(ShardedParams(spec["probe_out"]))
    trainer = Trainer(model=model, args=args, train_dataset=train, eval_dataset=validation,
                      processing_class=tokenizer, data_collator=default_data_collator, callbacks=callbacks)
    trainer.train()
    if trainer.is_world_process_zero():
        print("SAVES " + json.dumps(clock.saves), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
