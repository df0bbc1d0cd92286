"""What a sweep tells the user: the per-trial table (`results.csv`, `results.md` with each searched
key's importance), the curves, the hyperparameter, importance and parallel-coordinates plots (and the
Pareto front's); on request, the sweep as an Optuna study. The one-screen summary is `summary`'s.

Tables and plots are built from Tune's experiment directory alone (`ExperimentAnalysis`), so
`python -m hfsweep.report RUN_DIR` regenerates them for a finished or still-running sweep.
"""

from __future__ import annotations

import json
import logging
import math
import os
from pathlib import Path
from typing import Optional

import matplotlib

matplotlib.use("Agg")  # files only, no display
logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)  # "building the font cache" on a fresh machine
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from ray import tune  # noqa: E402
from ray.tune.result import EXPR_RESULT_FILE  # noqa: E402

from hfsweep import run_dir as run_files  # noqa: E402
from hfsweep.compat import in_creation_order  # noqa: E402
from hfsweep.config.objectives import first_objective, is_multi_objective, objectives  # noqa: E402
from hfsweep.config.resources import billed_resources, price_key  # noqa: E402
from hfsweep.config.saved import read_sweep  # noqa: E402
from hfsweep.config.schema import SweepConfig  # noqa: E402
from hfsweep.contract.metrics import COST_METRICS, MAX_STEPS, TRAIN_SAMPLES  # noqa: E402
from hfsweep.driver.results.anytime import anytime_curve, plot_anytime, summary_row  # noqa: E402
from hfsweep.driver.results.best import lookup, searched_paths  # noqa: E402
from hfsweep.driver.results.held_out import held_out_lines  # noqa: E402
from hfsweep.driver.results.insight import (  # noqa: E402
    export_study,
    importance_section,
    plot_importance,
    plot_parallel,
    why_not,
)
from hfsweep.driver.results.pareto import pareto_optimal, plot_pareto  # noqa: E402
from hfsweep.driver.results.tables import markdown  # noqa: E402
from hfsweep.driver.results.tuning_curve import tuning_curve_section  # noqa: E402
from hfsweep.driver.search import defaults_trial  # noqa: E402
from hfsweep.driver.search.budget import trial_cost_usd  # noqa: E402
from hfsweep.driver.search.checkpoint_budget import checkpoint_disk_use, checkpoints_line  # noqa: E402
from hfsweep.run_dir import last_column  # noqa: E402


def why_it_ended(trial, max_steps: int) -> str:
    """Errored, completed (its step budget, its own where each trial has one), early-stopped by a
    Trainer callback, or stopped by Tune (the scheduler or a stopper); anything else is the trial's
    live status."""
    if trial.status == "ERROR":
        return "errored"
    if trial.status != "TERMINATED":
        return trial.status.lower()
    last = trial.last_result
    if "step" not in last:
        return "never started"  # pending when the sweep's budget ran out
    if not last.get("trainer_finished"):
        return "stopped by scheduler/stopper"
    return "completed" if last.get("step", 0) >= (last.get(MAX_STEPS) or max_steps) else "early-stopped"


def error_line(trial) -> str:
    """The last line of a trial's error (e.g. 'FloatingPointError: training diverged: ...'), if any."""
    name = trial.run_metadata.error_filename
    path = os.path.join(trial.path, name) if name else None
    if not path or not os.path.isfile(path):
        return ""
    lines = [line.strip() for line in open(path) if line.strip()]
    return lines[-1] if lines else ""


def started_with(trial, paths: list[str]) -> tuple[dict, Optional[int]]:
    """The searched values a trial started with (its first report's config; Tune's `trial.config`
    holds those it ended with), and how many of its reports came before PBT first exploited it,
    copying another trial's weights and perturbed values into it (None when it never did). Both
    come from `result.json`, the file Tune's `trial_dataframes` are read from, so that count slices
    a trial's history."""
    path = os.path.join(trial.path, EXPR_RESULT_FILE)
    configs = []
    if os.path.isfile(path):
        with open(path) as results:
            configs = [json.loads(line)["config"] for line in results if line.strip()]
    values = [{p: lookup(config, p) for p in paths} for config in configs] or [
        {p: lookup(trial.config, p) for p in paths}
    ]
    exploited = next((i for i, v in enumerate(values) if v != values[0]), None)
    return values[0], exploited


def before_exploit_column(metric: str) -> str:
    """The results column of a trial's best `metric` from its own values and weights, before PBT
    first exploited it (only in a sweep where PBT exploited a trial)."""
    return f"best_{metric}_before_exploit"


def trial_tables(analyses: list[tune.ExperimentAnalysis], sweep: SweepConfig) -> pd.DataFrame:
    """Every experiment's trials, in the order Tune created them. The defaults trial is the first
    to start from the config's own values: a later trial that drew them (a choice, a grid repeated
    by num_samples, an extension's) is a draw like any other."""
    table = pd.concat([trial_table(analysis, sweep) for analysis in analyses], ignore_index=True)
    if defaults_trial.DEFAULTS_COLUMN in table:
        ran = table[defaults_trial.DEFAULTS_COLUMN].astype(bool)
        table[defaults_trial.DEFAULTS_COLUMN] = ran & (ran.cumsum() == 1)
    return table


def trial_table(analysis: tune.ExperimentAnalysis, sweep: SweepConfig) -> pd.DataFrame:
    """One row per trial: hyperparameters (PBT's: those it ended with), status, iterations, best
    and last value of each objective (and its best before PBT first exploited it), what its
    training cost (its last report's: its step budget and training samples seen, throughput, and
    `cost_usd` when the cluster has a price), why it ended;
    with several objectives, whether it is Pareto-optimal; whether it started from the config's
    own values."""
    rows, cluster, strategy = [], sweep.cluster, sweep.strategy
    defaults = defaults_trial.defaults_values(sweep) if defaults_trial.wanted(sweep) else None
    any_exploited = False
    for trial in in_creation_order(analysis.trials):
        history = analysis.trial_dataframes.get(trial.trial_id, pd.DataFrame())
        first, exploited = started_with(trial, searched_paths(sweep))
        any_exploited |= exploited is not None
        scores = {}
        for metric, mode in objectives(sweep):
            values = history[metric].dropna() if metric in history else pd.Series(dtype=float)
            own = history[metric].iloc[:exploited].dropna() if metric in history else values
            scores[f"best_{metric}"] = (values.max() if mode == "max" else values.min()) if len(values) else None
            scores[before_exploit_column(metric)] = (own.max() if mode == "max" else own.min()) if len(own) else None
            scores[last_column(metric)] = values.iloc[-1] if len(values) else None
        row = {
            "trial_id": trial.trial_id,
            **{path: lookup(trial.config, path) for path in searched_paths(sweep)},
            "status": trial.status,
            "iterations": trial.last_result.get("training_iteration", 0),
            "step": trial.last_result.get("step", 0),
            MAX_STEPS: trial.last_result.get(MAX_STEPS),
            TRAIN_SAMPLES: trial.last_result.get(TRAIN_SAMPLES),
            "time_total_s": trial.last_result.get("time_total_s"),
            **scores,
            **{name: trial.last_result.get(name) for name in COST_METRICS},
            "cost_usd": trial_cost_usd(cluster, strategy, trial.last_result.get("time_total_s", 0.0)),
            "ended": why_it_ended(trial, sweep.training["max_steps"]),
            "error": error_line(trial),
        }
        if defaults is not None:
            row[defaults_trial.DEFAULTS_COLUMN] = defaults_trial.is_defaults(first, defaults)
        rows.append(row)
    table = pd.DataFrame(rows)
    # mfu on CPU; the step budget and samples in a run directory from before reports carried them
    unreported = [
        c for c in (*COST_METRICS, "cost_usd", MAX_STEPS, TRAIN_SAMPLES) if c in table and table[c].isna().all()
    ]
    never_exploited = [] if any_exploited else [before_exploit_column(metric) for metric, _ in objectives(sweep)]
    table = table.drop(columns=[c for c in unreported + never_exploited if c in table])
    if is_multi_objective(sweep) and len(table):
        table["pareto"] = pareto_optimal(table, objectives(sweep))
    return table


def cost_line(table: pd.DataFrame, sweep: SweepConfig) -> str:
    """results.md's total cost, when the cluster has a price (each trial's is its `cost_usd`)."""
    if "cost_usd" not in table:
        return ""
    cluster = sweep.cluster
    key = price_key(cluster)
    return (
        f"\nTotal cost: ${table['cost_usd'].sum():.4g} over {len(table)} trials (each trial's hours x the "
        f"{'GPUs' if cluster.use_gpu else 'CPUs'} it holds x cluster.{key}={getattr(cluster, key):g}).\n"
    )


def samples_line(table: pd.DataFrame) -> str:
    """The sweep's cost in training samples, which no machine's speed changes, and its multiple of
    one defaults run: the defaults trial's max_steps x its examples per step, the samples its full
    run takes even where the scheduler stopped it. Empty for a run from before reports carried them."""
    if TRAIN_SAMPLES not in table:
        return ""
    total = table[TRAIN_SAMPLES].sum()
    line = f"{total:.0f} training samples over {len(table)} trials ({TRAIN_SAMPLES} in results.csv)"
    ran = defaults_rows(table)
    ran = ran[ran["step"] > 0]
    if len(ran) and MAX_STEPS in table and pd.notna(ran[MAX_STEPS].iloc[0]):
        one_run = ran[TRAIN_SAMPLES].iloc[0] / ran["step"].iloc[0] * ran[MAX_STEPS].iloc[0]
        line += f", {total / one_run:.2f}x one defaults run ({one_run:.0f} samples)"
    return line


LEGEND_MAX_TRIALS = 20  # curves.png names its trials up to this many


def plot_curves(trial_dataframes: dict, sweep: SweepConfig, path: str) -> None:
    """The sweep metric (the first objective) against training step, every trial on one figure."""
    metric = first_objective(sweep)[0]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for trial_id, history in sorted(trial_dataframes.items()):
        if metric in history and len(history):
            ax.plot(history["step"], history[metric], marker="o", markersize=3, label=trial_id)
    ax.set_xlabel("step")
    ax.set_ylabel(metric)
    ax.set_title(f"{metric} per trial")
    if len(trial_dataframes) <= LEGEND_MAX_TRIALS:  # beyond, a legend would crowd out the plot; results.md names them
        ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_hyperparameters(table: pd.DataFrame, sweep: SweepConfig, path: str) -> None:
    """Each trial's best metric against each searched hyperparameter."""
    params = searched_paths(sweep)
    metric = f"best_{first_objective(sweep)[0]}"
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


def write_report(run_dir: str, optuna_storage: Optional[str] = None) -> pd.DataFrame:
    """Write results.csv, results.md, curves.png and hyperparameters.png into the run directory,
    tuning_curve.csv and .png for a random search under FIFO, importance.png and parallel.png when
    trials differ (results.md says why not otherwise, for each),
    pareto.png with several objectives; with `optuna_storage`, the sweep as an Optuna study there.
    An extended sweep's trials are all in them."""
    sweep = read_sweep(run_dir)
    run_dir = os.path.abspath(run_dir)  # Tune reads a relative path as a URI
    analyses = experiment_analyses(run_dir, sweep)
    table = trial_tables(analyses, sweep)
    table.to_csv(os.path.join(run_dir, run_files.RESULTS_FILE), index=False)
    section, importances = importance_section(table, sweep)
    selection = Path(run_dir, run_files.SELECT_DIR, run_files.SELECTION_TABLE)
    heading = f"\n## Selection over seeds ({run_files.SELECT_DIR}/)\n\n"
    tail = heading + selection.read_text() if selection.is_file() else ""
    tail += test_section(run_dir, sweep)
    curves = {trial_id: history for analysis in analyses for trial_id, history in analysis.trial_dataframes.items()}
    progress = anytime_section(curves, table, sweep, os.path.join(run_dir, run_files.ANYTIME_PLOT))
    tuning = tuning_curve_section(table, sweep, run_dir)
    kept = f"\nCheckpoints: {checkpoints_line(run_dir, checkpoint_disk_use(curves.values()))}.\n"
    samples = samples_line(table)
    samples = f"\nSamples: {samples}.\n" if samples else ""
    Path(run_dir, run_files.RESULTS_TABLE).write_text(
        markdown(table) + cost_line(table, sweep) + samples + kept + progress + tuning + section + tail
    )
    plot_curves(curves, sweep, os.path.join(run_dir, run_files.CURVES_PLOT))
    plot_hyperparameters(table, sweep, os.path.join(run_dir, run_files.HYPERPARAMETERS_PLOT))
    for name in (
        run_files.IMPORTANCE_PLOT,
        run_files.PARALLEL_PLOT,
    ):  # an earlier report's, which this one may not replace
        Path(run_dir, name).unlink(missing_ok=True)
    if importances:
        plot_importance(importances, os.path.join(run_dir, run_files.IMPORTANCE_PLOT))
    if why_not(table, sweep) is None:
        plot_parallel(table, sweep, os.path.join(run_dir, run_files.PARALLEL_PLOT))
    if is_multi_objective(sweep) and len(table):
        plot_pareto(table, objectives(sweep), os.path.join(run_dir, run_files.PARETO_PLOT))
    if optuna_storage:
        export_study(table, curves, sweep, run_dir, optuna_storage)
    return table


def test_section(run_dir: str, sweep: SweepConfig) -> str:
    """results.md's account of the held-out test split, from best.json (written before the report)."""
    test = run_files.read_best(run_dir).get("test") if Path(run_dir, run_files.BEST_FILE).is_file() else None
    if not test:
        return ""
    lines = held_out_lines(test, first_objective(sweep)[0])
    return f"\n## Held-out test split\n\n{lines[0]}\n\n" + "\n".join(f"- {line.strip()}" for line in lines[1:]) + "\n"


def experiment_analyses(run_dir: str, sweep: SweepConfig) -> list:
    """Tune's analysis of each experiment of a run directory (the sweep, and its extensions)."""
    metric, mode = first_objective(sweep)
    return [
        tune.ExperimentAnalysis(os.path.join(run_dir, name), default_metric=metric, default_mode=mode)
        for name in run_files.experiment_names(run_dir, sweep.name)
    ]


def defaults_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The defaults trial's row (none when the sweep ran none)."""
    column = defaults_trial.DEFAULTS_COLUMN
    return table[table[column].astype(bool)] if column in table else table.iloc[:0]


def defaults_score(table: pd.DataFrame, metric: str, model: str = "best") -> Optional[float]:
    """The defaults trial's value of `metric` from the config's own values, when the sweep ran one
    and it reported: at its best checkpoint (before PBT first exploited it), or with `model="final"`
    at its last report, to compare with a best trial chosen by its last report."""
    ran = defaults_rows(table)
    if model == "final":
        column = last_column(metric)
    else:
        column = before_exploit_column(metric) if before_exploit_column(metric) in table else f"best_{metric}"
    return float(ran[column].iloc[0]) if len(ran) and pd.notna(ran[column].iloc[0]) else None


def billed_per_trial(sweep: SweepConfig) -> float:
    """The resources a trial is billed for (the anytime curve's trial-hours count them)."""
    return billed_resources(sweep.cluster, sweep.strategy)


def sweep_anytime(run_dir: str) -> tuple[pd.DataFrame, Optional[float], dict]:
    """A finished or running sweep's anytime curve, its defaults trial's score, and its config."""
    sweep = read_sweep(run_dir)
    analyses = experiment_analyses(os.path.abspath(run_dir), sweep)
    histories = {t: h for analysis in analyses for t, h in analysis.trial_dataframes.items()}
    metric, mode = first_objective(sweep)
    table = trial_tables(analyses, sweep)
    curve = anytime_curve(histories, metric, mode, billed_per_trial(sweep))
    return curve, defaults_score(table, metric), sweep


def anytime_section(histories: dict, table: pd.DataFrame, sweep: SweepConfig, path: str) -> str:
    """anytime.png and its points (anytime_curve.csv), and results.md's lines on them."""
    metric, mode = first_objective(sweep)
    curve = anytime_curve(histories, metric, mode, billed_per_trial(sweep))
    if curve.empty:
        return ""
    plot_anytime({sweep.name: curve}, metric, path)
    curve.to_csv(os.path.join(os.path.dirname(path), run_files.ANYTIME_CURVE), index=False)
    row = summary_row(sweep.name, curve, defaults_score(table, metric), mode)
    reached = (
        f"; the defaults trial's score was first reached after {row['hours_to_defaults']:.4g} trial-hours"
        if not math.isnan(row["hours_to_defaults"])
        else ""
    )
    return (
        f"\n## Best so far against compute ({run_files.ANYTIME_PLOT})\n\nBest {metric} {row['final_best']:.4g}, first "
        f"reached after {row['hours_to_best']:.4g} of the sweep's {row['trial_hours']:.4g} trial-hours; area under "
        f"the curve (the mean best so far over the trial-hours) "
        f"{row['area']:.4g}{reached}.\n"
    )
