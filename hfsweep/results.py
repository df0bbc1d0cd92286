"""What a sweep tells the user: the best trial and its checkpoint, a per-trial table, plots, the
best model exported for `from_pretrained`, and the summary of a Hydra multirun.

Tables and plots are built from Tune's experiment directory alone (`ExperimentAnalysis`), so
`python -m hfsweep.report RUN_DIR` regenerates them for a finished or still-running sweep.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import yaml  # noqa: E402
from ray import tune  # noqa: E402
from tabulate import tabulate  # noqa: E402

from hfsweep.config import RESOLVED_CONFIG  # noqa: E402
from hfsweep.multirun import BEST_FILE  # noqa: E402
from hfsweep.search import iter_leaves  # noqa: E402
from hfsweep.tune_bridge import read_pointer  # noqa: E402

PROVENANCE_FILE = "provenance.json"


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


def searched_paths(cfg: dict) -> list[str]:
    return [path for path, _ in iter_leaves(cfg["search_space"])]


def best_trial(results: tune.ResultGrid, cfg: dict) -> BestTrial:
    """The trial with the best reported metric at any step, and its best checkpoint."""
    metric, mode = cfg["metric"], cfg["mode"]
    result = results.get_best_result(metric=metric, mode=mode, scope="all")
    checkpoint, metrics = max(
        result.best_checkpoints, key=lambda cm: cm[1][metric] if mode == "max" else -cm[1][metric]
    )
    return BestTrial(
        trial_id=metrics["trial_id"],
        hyperparameters={p: _lookup(metrics["config"], p) for p in searched_paths(cfg)},
        metric=metric,
        value=metrics[metric],
        step=metrics["step"],
        checkpoint_path=read_pointer(checkpoint),
    )


PROVENANCE_PACKAGES = ("torch", "transformers", "ray", "hydra-core", "omegaconf", "datasets", "accelerate", "tokenizers", "numpy")


def _git(*args: str) -> str:
    repo = Path(__file__).resolve().parents[1]
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def code_version() -> dict:
    """The hfsweep commit that ran, and whether uncommitted changes were in the tree."""
    try:
        diff = _git("diff", "HEAD")
        return {
            "commit": _git("rev-parse", "HEAD").strip(),
            "dirty": bool(diff or _git("status", "--porcelain").strip()),
            "diff_sha256": hashlib.sha256(diff.encode()).hexdigest() if diff else None,
        }
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "dirty": None, "diff_sha256": None}  # installed without its git tree


def hardware() -> dict:
    import torch

    cpu = platform.processor()
    if os.path.exists("/proc/cpuinfo"):
        names = [line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")]
        cpu = names[0] if names else cpu
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    return {"cpu": cpu, "cpu_count": os.cpu_count(), "gpus": gpus, "gpu_count": len(gpus), "platform": platform.platform()}


def write_provenance(run_dir: str, cfg: dict) -> None:
    """provenance.json: what it takes to reproduce this run (code, packages, hardware, seeds)."""
    manifest = {
        "command": sys.argv,
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "code": code_version(),
        "python": sys.version.split()[0],
        "packages": {name: _version(name) for name in PROVENANCE_PACKAGES},
        "hardware": hardware(),
        "seeds": {"seed": cfg["seed"], "search_alg": cfg["search_alg"].get("seed", cfg["search_alg"].get("random_state"))},
    }
    with open(os.path.join(run_dir, PROVENANCE_FILE), "w") as f:
        json.dump(manifest, f, indent=2)


def _version(name: str) -> Optional[str]:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def write_best(best: BestTrial, run_dir: str) -> None:
    """`best.json` in the run directory: what a multirun summary and a reader need first."""
    with open(os.path.join(run_dir, BEST_FILE), "w") as f:
        json.dump(dataclasses.asdict(best), f, indent=2)


def export_best(best: BestTrial, cfg: dict, out_dir: str) -> str:
    """The best checkpoint as a plain Hugging Face model directory: weights, config, tokenizer;
    no optimizer, scheduler or RNG state."""
    from hfsweep.models import auto_model_class, load_tokenizer

    auto_model_class(cfg["model"]["task"]).from_pretrained(best.checkpoint_path).save_pretrained(out_dir)
    load_tokenizer(best.checkpoint_path).save_pretrained(out_dir)
    return out_dir


def why_it_ended(trial, max_steps: int) -> str:
    """Errored, completed (its step budget), early-stopped by a Trainer callback, or stopped by
    Tune (the scheduler or a stopper); anything else is the trial's live status."""
    if trial.status == "ERROR":
        return "errored"
    if trial.status != "TERMINATED":
        return trial.status.lower()
    last = trial.last_result
    if not last.get("trainer_finished"):
        return "stopped by scheduler/stopper"
    return "completed" if last.get("step", 0) >= max_steps else "early-stopped"


def error_line(trial) -> str:
    """The last line of a trial's error (e.g. 'FloatingPointError: training diverged: ...'), if any."""
    name = trial.run_metadata.error_filename
    path = os.path.join(trial.path, name) if name else None
    if not path or not os.path.isfile(path):
        return ""
    lines = [line.strip() for line in open(path) if line.strip()]
    return lines[-1] if lines else ""


def trial_table(analysis: tune.ExperimentAnalysis, cfg: dict) -> pd.DataFrame:
    """One row per trial: hyperparameters, status, iterations, best and last metric, why it ended."""
    metric, mode = cfg["metric"], cfg["mode"]
    rows = []
    for trial in analysis.trials:
        history = analysis.trial_dataframes.get(trial.trial_id, pd.DataFrame())
        values = history[metric].dropna() if metric in history else pd.Series(dtype=float)
        rows.append(
            {
                "trial_id": trial.trial_id,
                **{path: _lookup(trial.config, path) for path in searched_paths(cfg)},
                "status": trial.status,
                "iterations": trial.last_result.get("training_iteration", 0),
                "step": trial.last_result.get("step", 0),
                f"best_{metric}": (values.max() if mode == "max" else values.min()) if len(values) else None,
                f"last_{metric}": values.iloc[-1] if len(values) else None,
                "ended": why_it_ended(trial, cfg["training"]["max_steps"]),
                "error": error_line(trial),
            }
        )
    return pd.DataFrame(rows)


def plot_curves(analysis: tune.ExperimentAnalysis, cfg: dict, path: str) -> None:
    """The sweep metric against training step, every trial on one figure."""
    metric = cfg["metric"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for trial_id, history in sorted(analysis.trial_dataframes.items()):
        if metric in history and len(history):
            ax.plot(history["step"], history[metric], marker="o", markersize=3, label=trial_id)
    ax.set_xlabel("step")
    ax.set_ylabel(metric)
    ax.set_title(f"{metric} per trial")
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_hyperparameters(table: pd.DataFrame, cfg: dict, path: str) -> None:
    """Each trial's best metric against each searched hyperparameter."""
    params = searched_paths(cfg)
    metric = f"best_{cfg['metric']}"
    fig, axes = plt.subplots(1, max(1, len(params)), figsize=(4.5 * max(1, len(params)), 4), squeeze=False)
    for ax, param in zip(axes[0], params):
        ax.scatter(table[param], table[metric])
        numeric = pd.to_numeric(table[param], errors="coerce")
        if numeric.notna().all() and (numeric > 0).all() and numeric.max() / numeric.min() > 20:
            ax.set_xscale("log")
        ax.set_xlabel(param)
        ax.set_ylabel(metric)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def markdown(table: pd.DataFrame) -> str:
    """The table in Markdown, text columns kept as text: tabulate reads a trial id made of digits
    ('12345_00000': Python's float() takes underscores) as a number. (pandas' `to_markdown` shifts
    `disable_numparse`'s column indices by one, hence tabulate itself.)"""
    text_columns = [i for i, column in enumerate(table.columns) if not pd.api.types.is_numeric_dtype(table[column])]
    return tabulate(table, headers="keys", tablefmt="pipe", showindex=False, disable_numparse=text_columns) + "\n"


def write_report(run_dir: str) -> pd.DataFrame:
    """Write results.csv, results.md, curves.png and hyperparameters.png into the run directory."""
    with open(os.path.join(run_dir, RESOLVED_CONFIG)) as f:
        cfg = yaml.safe_load(f)
    analysis = tune.ExperimentAnalysis(
        os.path.join(run_dir, cfg["name"]), default_metric=cfg["metric"], default_mode=cfg["mode"]
    )
    table = trial_table(analysis, cfg)
    table.to_csv(os.path.join(run_dir, "results.csv"), index=False)
    Path(run_dir, "results.md").write_text(markdown(table))
    plot_curves(analysis, cfg, os.path.join(run_dir, "curves.png"))
    plot_hyperparameters(table, cfg, os.path.join(run_dir, "hyperparameters.png"))
    return table


def evaluate_model(model, tokenizer, validation_path: str, batch_size: int = 16) -> float:
    """Eval loss of `model` on the prepared validation split, in this process, on the CPU."""
    import datasets
    from transformers import Trainer, TrainingArguments, default_data_collator

    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(output_dir=out, use_cpu=True, per_device_eval_batch_size=batch_size, report_to="none")
        trainer = Trainer(model=model, args=args, data_collator=default_data_collator, processing_class=tokenizer)
        return trainer.evaluate(datasets.load_from_disk(validation_path))["eval_loss"]


def summary(best: BestTrial, run_dir: str, untrained_loss: Optional[float] = None) -> str:
    lines = [f"Best trial {best.trial_id} at step {best.step}:"]
    lines += [f"  {path} = {value}" for path, value in best.hyperparameters.items()]
    lines.append(f"  {best.metric} = {best.value:.4f}")
    if best.metric == "eval_loss":
        lines.append(f"  perplexity = {math.exp(best.value):.2f}")
        if untrained_loss:
            drop = 1 - best.value / untrained_loss
            lines.append(f"  untrained eval_loss = {untrained_loss:.4f} ({drop:.0%} lower after training)")
    lines.append(f"  best checkpoint: {best.checkpoint_path}")
    lines.append(f"  exported model:  {os.path.join(run_dir, 'best')}")
    lines.append(f"  results:         {os.path.join(run_dir, 'results.md')} (and .csv, curves.png, hyperparameters.png)")
    return "\n".join(lines)
