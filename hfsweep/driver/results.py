"""What a sweep tells the user: the best trial and its checkpoint, a per-trial table, plots, and
the best model exported for `from_pretrained`.

Tables and plots are built from Tune's experiment directory alone (`ExperimentAnalysis`), so
`python -m hfsweep.report RUN_DIR` regenerates them for a finished or still-running sweep.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import matplotlib

matplotlib.use("Agg")  # files only, no display
logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)  # "building the font cache" on a fresh machine
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from ray import tune  # noqa: E402

from hfsweep.config.loading import apply_sampled, iter_leaves  # noqa: E402
from hfsweep.driver.search_space import nested  # noqa: E402
from hfsweep.config.objectives import first_objective, is_multi_objective, objectives  # noqa: E402
from hfsweep.driver.pareto import PARETO_PLOT, best_of_front, pareto_optimal, plot_pareto  # noqa: E402
from hfsweep.driver.tables import markdown  # noqa: E402
from hfsweep import run_dir as run_files  # noqa: E402
from hfsweep.run_dir import last_column  # noqa: E402
from hfsweep.contract import read_pointer  # noqa: E402


@dataclass
class BestTrial:
    trial_id: str
    hyperparameters: dict
    metric: str
    value: float
    step: int
    checkpoint_path: str
    objectives: dict = field(default_factory=dict)  # several objectives: each one's value at `step`
    checkpoint_bytes: int = 0  # the best checkpoint on disk (an adapter's: a small share of a whole model's)


def _lookup(config: dict, path: str):
    return OmegaConf.select(OmegaConf.create(config), path)


def searched_paths(cfg: dict) -> list[str]:
    return [path for path, _ in iter_leaves(cfg["search_space"])]


def best_trial(results: tune.ResultGrid, cfg: dict) -> BestTrial:
    """The trial with the best reported metric at any step, and its best checkpoint; with several
    objectives, the Pareto-optimal trial `hfsweep.driver.pareto` picks, at its last report."""
    if is_multi_objective(cfg):
        return best_of_pareto_front(results, cfg)
    metric, mode = cfg["metric"], cfg["mode"]
    result = results.get_best_result(metric=metric, mode=mode, scope="all")
    # Of equal scores the later, as Tune ranks them (and keeps them, with num_to_keep): a classifier's accuracy often repeats
    checkpoint, metrics = max(
        result.best_checkpoints, key=lambda cm: (cm[1][metric] if mode == "max" else -cm[1][metric], cm[1]["step"])
    )
    return BestTrial(
        trial_id=metrics["trial_id"],
        hyperparameters={p: _lookup(metrics["config"], p) for p in searched_paths(cfg)},
        metric=metric,
        value=metrics[metric],
        step=metrics["step"],
        checkpoint_path=(path := read_pointer(checkpoint)),
        checkpoint_bytes=directory_bytes(path),
    )


def best_of_pareto_front(results: tune.ResultGrid, cfg: dict) -> BestTrial:
    """Each trial's last report with every objective is its point; `best_of_front` picks one."""
    names = [metric for metric, _ in objectives(cfg)]
    last = {}
    for result in results:
        history = result.metrics_dataframe
        if history is not None and set(names) <= set(history.columns):
            reports = history.dropna(subset=names)
            if len(reports):
                last[reports["trial_id"].iloc[-1]] = reports.iloc[-1]
    table = pd.DataFrame([{last_column(name): report[name] for name in names} for report in last.values()], index=list(last))
    table["pareto"] = pareto_optimal(table, objectives(cfg))
    report = last[best_of_front(table, objectives(cfg))]
    return BestTrial(
        trial_id=report["trial_id"],
        hyperparameters={p: _lookup(results_config(results, report["trial_id"]), p) for p in searched_paths(cfg)},
        metric=names[0],
        value=float(report[names[0]]),
        step=int(report["step"]),
        checkpoint_path=report["checkpoint_path"],
        checkpoint_bytes=directory_bytes(report["checkpoint_path"]),
        objectives={name: float(report[name]) for name in names},
    )


def results_config(results: tune.ResultGrid, trial_id: str) -> dict:
    return next(result.config for result in results if result.metrics.get("trial_id") == trial_id)


def write_best(best: BestTrial, run_dir: str) -> None:
    """`best.json` in the run directory: what a multirun summary and a reader need first."""
    run_files.write_best(run_dir, dataclasses.asdict(best))


def export_best(best: BestTrial, cfg: dict, task, out_dir: str, label_names: Optional[list] = None) -> str:
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
    model = load_adapter_checkpoint(best.checkpoint_path, apply_sampled(cfg, nested(best.hyperparameters)), task, tokenizer, label_names)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    if cfg["peft"]["export_merged"]:
        model.merge_and_unload().save_pretrained(f"{out_dir}_merged")
        tokenizer.save_pretrained(f"{out_dir}_merged")
    return out_dir


def is_adapter(checkpoint_path: str) -> bool:
    """Whether a checkpoint holds a PEFT adapter (and not a whole model)."""
    from peft.utils import CONFIG_NAME

    return os.path.isfile(os.path.join(checkpoint_path, CONFIG_NAME))


def load_adapter_checkpoint(checkpoint_path: str, trial_cfg: dict, task, tokenizer, label_names: Optional[list] = None):
    """A trial's adapter checkpoint over its base, rebuilt as the trial built it (same seed, so a
    base built from `model.config` is the same too), in full precision."""
    from peft import PeftModel
    from transformers import set_seed

    from hfsweep.models import build_model

    set_seed(trial_cfg["seed"])
    return PeftModel.from_pretrained(build_model(trial_cfg["model"], tokenizer, label_names, task=task), checkpoint_path)


def directory_bytes(path: str) -> int:
    """The bytes of every file under `path`: what one checkpoint costs on disk."""
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def why_it_ended(trial, max_steps: int) -> str:
    """Errored, completed (its step budget), early-stopped by a Trainer callback, or stopped by
    Tune (the scheduler or a stopper); anything else is the trial's live status."""
    if trial.status == "ERROR":
        return "errored"
    if trial.status != "TERMINATED":
        return trial.status.lower()
    last = trial.last_result
    if "step" not in last:
        return "never started"  # pending when the sweep's budget ran out
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
    """One row per trial: hyperparameters, status, iterations, best and last value of each
    objective, why it ended; with several objectives, whether it is Pareto-optimal."""
    rows = []
    for trial in analysis.trials:
        history = analysis.trial_dataframes.get(trial.trial_id, pd.DataFrame())
        scores = {}
        for metric, mode in objectives(cfg):
            values = history[metric].dropna() if metric in history else pd.Series(dtype=float)
            scores[f"best_{metric}"] = (values.max() if mode == "max" else values.min()) if len(values) else None
            scores[last_column(metric)] = values.iloc[-1] if len(values) else None
        rows.append(
            {
                "trial_id": trial.trial_id,
                **{path: _lookup(trial.config, path) for path in searched_paths(cfg)},
                "status": trial.status,
                "iterations": trial.last_result.get("training_iteration", 0),
                "step": trial.last_result.get("step", 0),
                **scores,
                "ended": why_it_ended(trial, cfg["training"]["max_steps"]),
                "error": error_line(trial),
            }
        )
    table = pd.DataFrame(rows)
    if is_multi_objective(cfg) and len(table):
        table["pareto"] = pareto_optimal(table, objectives(cfg))
    return table


LEGEND_MAX_TRIALS = 20  # curves.png names its trials up to this many


def plot_curves(analysis: tune.ExperimentAnalysis, cfg: dict, path: str) -> None:
    """The sweep metric (the first objective) against training step, every trial on one figure."""
    metric = first_objective(cfg)[0]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for trial_id, history in sorted(analysis.trial_dataframes.items()):
        if metric in history and len(history):
            ax.plot(history["step"], history[metric], marker="o", markersize=3, label=trial_id)
    ax.set_xlabel("step")
    ax.set_ylabel(metric)
    ax.set_title(f"{metric} per trial")
    if len(analysis.trial_dataframes) <= LEGEND_MAX_TRIALS:  # beyond, a legend would crowd out the plot; results.md names them
        ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_hyperparameters(table: pd.DataFrame, cfg: dict, path: str) -> None:
    """Each trial's best metric against each searched hyperparameter."""
    params = searched_paths(cfg)
    metric = f"best_{first_objective(cfg)[0]}"
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


def write_report(run_dir: str) -> pd.DataFrame:
    """Write results.csv, results.md, curves.png and hyperparameters.png into the run directory,
    and pareto.png with several objectives."""
    cfg = run_files.read_config(run_dir)
    metric, mode = first_objective(cfg)
    analysis = tune.ExperimentAnalysis(os.path.join(run_dir, cfg["name"]), default_metric=metric, default_mode=mode)
    table = trial_table(analysis, cfg)
    table.to_csv(os.path.join(run_dir, run_files.RESULTS_FILE), index=False)
    Path(run_dir, run_files.RESULTS_TABLE).write_text(markdown(table))
    plot_curves(analysis, cfg, os.path.join(run_dir, "curves.png"))
    plot_hyperparameters(table, cfg, os.path.join(run_dir, "hyperparameters.png"))
    if is_multi_objective(cfg) and len(table):
        plot_pareto(table, objectives(cfg), os.path.join(run_dir, PARETO_PLOT))
    return table


def evaluate_model(model, tokenizer, validation_path: str, batch_size: int = 16, data_collator=None) -> float:
    """Eval loss of `model` on the prepared validation split, in this process, on the CPU; with
    `data_collator` (a task that pads each batch), batched by it."""
    import datasets
    from transformers import PrinterCallback, Trainer, TrainingArguments, default_data_collator

    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(output_dir=out, use_cpu=True, per_device_eval_batch_size=batch_size, report_to="none", disable_tqdm=True)
        trainer = Trainer(model=model, args=args, data_collator=data_collator or default_data_collator, processing_class=tokenizer)
        trainer.remove_callback(PrinterCallback)  # it prints the metrics dict; the summary says what matters
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
    lines.append(f"  best checkpoint: {best.checkpoint_path} ({best.checkpoint_bytes / 2**20:.2f} MiB)")
    lines.append(f"  exported model:  {os.path.join(run_dir, 'best')}")
    lines.append(f"  results:         {os.path.join(run_dir, 'results.md')} (and .csv, curves.png, hyperparameters.png)")
    return "\n".join(lines)
