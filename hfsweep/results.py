"""What a finished sweep tells the user: the best trial, its metrics and its checkpoint."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pandas as pd
import yaml
from hydra.experimental.callback import Callback
from ray import tune

from hfsweep.search import iter_leaves
from hfsweep.trial import read_pointer


BEST_FILE = "best.json"


@dataclass
class BestTrial:
    trial_id: str
    hyperparameters: dict
    metric: str
    value: float
    step: int
    checkpoint_path: str


def _lookup(config: dict, path: str):
    for part in path.split("."):
        config = config[part]
    return config


def best_trial(results: tune.ResultGrid, cfg: dict) -> BestTrial:
    """The trial with the best reported metric at any step, and its best checkpoint."""
    metric, mode = cfg["metric"], cfg["mode"]
    result = results.get_best_result(metric=metric, mode=mode, scope="all")
    checkpoint, metrics = max(
        result.best_checkpoints, key=lambda cm: cm[1][metric] if mode == "max" else -cm[1][metric]
    )
    return BestTrial(
        trial_id=metrics["trial_id"],
        hyperparameters={p: _lookup(result.config, p) for p, _ in iter_leaves(cfg["search_space"])},
        metric=metric,
        value=metrics[metric],
        step=metrics["step"],
        checkpoint_path=read_pointer(checkpoint),
    )


def write_best(best: BestTrial, run_dir: str) -> None:
    """`best.json` in the run directory: what a multirun summary and a reader need first."""
    with open(os.path.join(run_dir, BEST_FILE), "w") as f:
        json.dump(dataclasses.asdict(best), f, indent=2)


class MultirunSummary(Callback):
    """Hydra callback: after a multirun, one table row per job (overrides, best metric, best trial)."""

    def on_multirun_end(self, config, **kwargs) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        rows = []
        for best_file in sorted(sweep_dir.glob(f"*/{BEST_FILE}"), key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else p.parent.name):
            job_dir = best_file.parent
            best = json.loads(best_file.read_text())
            overrides = yaml.safe_load((job_dir / ".hydra" / "overrides.yaml").read_text()) or []
            rows.append(
                {
                    "job": job_dir.name,
                    "overrides": " ".join(overrides),
                    best["metric"]: best["value"],
                    "best_trial": best["trial_id"],
                    "step": best["step"],
                    "hyperparameters": json.dumps(best["hyperparameters"]),
                }
            )
        if not rows:
            return
        table = pd.DataFrame(rows)
        table.to_csv(sweep_dir / "multirun_summary.csv", index=False)
        (sweep_dir / "multirun_summary.md").write_text(table.to_markdown(index=False) + "\n")
        print(f"Multirun summary ({len(rows)} jobs): {sweep_dir / 'multirun_summary.md'}")
        print(table.to_string(index=False))


def evaluate_model(model, tokenizer, validation_path: str, batch_size: int = 16) -> float:
    """Eval loss of `model` on the prepared validation split, in this process, on the CPU."""
    import datasets
    import tempfile
    from transformers import Trainer, TrainingArguments, default_data_collator

    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(output_dir=out, use_cpu=True, per_device_eval_batch_size=batch_size, report_to="none")
        trainer = Trainer(model=model, args=args, data_collator=default_data_collator, processing_class=tokenizer)
        return trainer.evaluate(datasets.load_from_disk(validation_path))["eval_loss"]


def summary(best: BestTrial, untrained_loss: Optional[float] = None) -> str:
    lines = [f"Best trial {best.trial_id} at step {best.step}:"]
    lines += [f"  {path} = {value}" for path, value in best.hyperparameters.items()]
    lines.append(f"  {best.metric} = {best.value:.4f}")
    if best.metric == "eval_loss":
        lines.append(f"  perplexity = {math.exp(best.value):.2f}")
        if untrained_loss:
            drop = 1 - best.value / untrained_loss
            lines.append(f"  untrained eval_loss = {untrained_loss:.4f} ({drop:.0%} lower after training)")
    lines.append(f"  best checkpoint: {best.checkpoint_path}")
    return "\n".join(lines)
