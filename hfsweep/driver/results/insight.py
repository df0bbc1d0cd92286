"""What a sweep's trials say about its search space, whatever searcher ran them (but not PBT or PB2,
whose trials change their values as they train), and the sweep as an Optuna study:

- `importance_section`: each searched key's fANOVA importance for each objective (Optuna's
  `FanovaImportanceEvaluator` on an in-memory study of the trials), for `results.md`;
- `plot_importance` (`importance.png`) and `plot_parallel` (`parallel.png`: one line per trial
  across the searched keys to the objectives);
- `export_study`: the trials, their reports and how they ended, written into an Optuna storage that
  `optuna-dashboard` shows (`python -m hfsweep.report RUN_DIR --optuna-storage URL`).

Each trial's value for importance and the plots is its best value of the objective (the
`best_METRIC` column, as hyperparameters.png plots), so a trial the scheduler stopped early counts
too; the exported study holds each trial's last values, as Optuna's trials end. Optuna is imported
inside the functions: it is an optional extra, and config validation must stay fast.
"""

from __future__ import annotations

import contextlib
import math
import os
import warnings
from typing import Optional

import matplotlib.pyplot as plt
import pandas as pd

from hfsweep.config.loading import iter_leaves
from hfsweep.config.objectives import first_objective, objectives
from hfsweep.config.schema import SweepConfig
from hfsweep.driver.results.tables import markdown
from hfsweep.driver.search.search_rules import is_population_training
from hfsweep.run_dir import IMPORTANCE_PLOT, PARALLEL_PLOT, last_column

CATEGORICAL_SAMPLERS = {"grid", "choice"}
LOG_SAMPLERS = {"loguniform", "qloguniform", "lograndint"}
INT_SAMPLERS = {"randint", "qrandint", "lograndint"}
DIRECTIONS = {"min": "minimize", "max": "maximize"}
# How a trial ended (the `ended` column) as an Optuna state; a live trial is RUNNING, a pending one WAITING.
# A trial still paused when the sweep ends (BOHB's HyperBand pauses at each rung) was never resumed:
# the scheduler stopped it there, as Optuna's pruned.
STATES = {
    "completed": "COMPLETE",
    "early-stopped": "COMPLETE",
    "stopped by scheduler/stopper": "PRUNED",
    "paused": "PRUNED",
    "errored": "FAIL",
    "never started": "WAITING",
    "pending": "WAITING",
}


def best_column(metric: str) -> str:
    return f"best_{metric}"


def _category(value):
    """A grid or choice value as Optuna can store it: a list (adapter target modules) becomes its text."""
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)


def distributions(sweep: SweepConfig, table: pd.DataFrame) -> dict:
    """Each searched key's Optuna distribution: categories for grid and choice, log scale for the log
    samplers. Numeric bounds take in every value the trials ran: PBT perturbs past the space's
    bounds, and Tune's q-samplers round past `high`."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    found = {}
    for path, spec in iter_leaves(sweep.search_space):
        ran = table[path].dropna().tolist()
        if spec["sampler"] in CATEGORICAL_SAMPLERS:
            found[path] = CategoricalDistribution(list(dict.fromkeys(map(_category, [*spec["values"], *ran]))))
        else:
            kind = IntDistribution if spec["sampler"] in INT_SAMPLERS else FloatDistribution
            found[path] = kind(min([spec["low"], *ran]), max([spec["high"], *ran]), log=spec["sampler"] in LOG_SAMPLERS)
    return found


def _params(row: dict, sweep: SweepConfig) -> dict:
    return {
        path: _category(row[path]) if spec["sampler"] in CATEGORICAL_SAMPLERS else row[path]
        for path, spec in iter_leaves(sweep.search_space)
    }


@contextlib.contextmanager
def _quiet_optuna():
    """Optuna logs every study it creates at INFO, and calls `set_metric_names` experimental."""
    import optuna

    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            yield
    finally:
        optuna.logging.set_verbosity(verbosity)


def scored(table: pd.DataFrame, sweep: SweepConfig) -> pd.DataFrame:
    """The trials that reported every objective: the ones importance and the parallel plot can place."""
    return table.dropna(subset=[best_column(metric) for metric, _ in objectives(sweep)]) if len(table) else table


def why_not(table: pd.DataFrame, sweep: SweepConfig) -> Optional[str]:
    """Why there is nothing to plot or rank, in one line; None when there is."""
    if is_population_training(sweep):
        return (
            "PBT changes a trial's searched values as it trains: no importance or parallel plot, which "
            "would credit each trial's best value to its last values."
        )
    trials = scored(table, sweep)
    if len(trials) < 2:
        return f"{len(trials)} trial(s) reported {first_objective(sweep)[0]}: importance and the parallel plot need 2."
    if all(trials[path].map(_category).nunique() < 2 for path, _ in iter_leaves(sweep.search_space)):
        return "every trial ran the same searched values: no importance or parallel plot."
    for metric, _ in objectives(sweep):
        if trials[best_column(metric)].nunique() < 2:  # fANOVA has no variance to share out
            return f"every trial reached the same best {metric}: no importance or parallel plot."
    return None


def param_importances(table: pd.DataFrame, sweep: SweepConfig) -> dict[str, dict[str, float]]:
    """Per objective, each searched key's fANOVA importance for the trials' best values (summing to 1;
    a key that took one value has none), from an in-memory Optuna study of the trials."""
    import optuna
    from optuna.importance import FanovaImportanceEvaluator
    from optuna.trial import create_trial

    trials = scored(table, sweep)
    dists = distributions(sweep, trials)
    importances = {}
    for metric, _ in objectives(sweep):
        with _quiet_optuna():
            study = optuna.create_study()  # in memory
        study.add_trials(
            [
                create_trial(params=_params(row, sweep), distributions=dists, value=row[best_column(metric)])
                for row in trials.to_dict("records")
            ]
        )
        found = optuna.importance.get_param_importances(study, evaluator=FanovaImportanceEvaluator(seed=sweep.seed))
        importances[metric] = {path: float(found.get(path, 0.0)) for path in dists}
    return importances


def importance_section(table: pd.DataFrame, sweep: SweepConfig) -> tuple[str, Optional[dict]]:
    """The Markdown section results.md ends with, and the importances (None where there are none)."""
    reason = why_not(table, sweep)
    if reason is None:
        try:
            importances = param_importances(table, sweep)
        except ImportError:
            reason = "importance needs Optuna: pip install 'hfsweep[search]'."
    if reason:
        return f"\n## Importance\n\n{reason}\n", None
    frame = pd.DataFrame(importances).rename_axis("searched key").reset_index()
    frame = frame.sort_values(frame.columns[1], ascending=False)
    text = (
        f"\n## Importance\n\nfANOVA importance of each searched key for each trial's best value (Optuna's "
        f"FanovaImportanceEvaluator, seed {sweep.seed}, {len(scored(table, sweep))} trials); each column sums to 1. "
        f"See {IMPORTANCE_PLOT} and {PARALLEL_PLOT}.\n\n"
    )
    return text + markdown(frame.round(4)), importances


def plot_importance(importances: dict[str, dict[str, float]], path: str) -> None:
    """One bar chart per objective, most important key on top."""
    keys = len(next(iter(importances.values())))
    fig, axes = plt.subplots(1, len(importances), figsize=(5 * len(importances), 1.2 + 0.45 * keys), squeeze=False)
    for ax, (metric, shares) in zip(axes[0], importances.items()):
        keys = sorted(shares, key=shares.get)
        ax.barh(keys, [shares[key] for key in keys], color="tab:blue")
        ax.set_xlim(0, 1)
        ax.set_xlabel(f"fANOVA importance for {metric}")
        ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_parallel(table: pd.DataFrame, sweep: SweepConfig, path: str) -> None:
    """One line per trial across the searched keys to each objective's best value, coloured by the
    first objective: grid and choice keys as categories in the space's order, log samplers on a log axis."""
    trials = scored(table, sweep)
    axes = [(key, spec) for key, spec in iter_leaves(sweep.search_space)]
    axes += [(best_column(metric), {"sampler": "uniform"}) for metric, _ in objectives(sweep)]
    fig, ax = plt.subplots(figsize=(2.2 * len(axes) + 1.5, 4.5))
    positions = []
    for x, (column, spec) in enumerate(axes):
        heights, ticks = _axis(trials[column], spec)
        positions.append(heights)
        ax.axvline(x, color="black", linewidth=0.8)
        for height, label in ticks:
            ax.text(
                x - 0.03,
                height,
                label,
                ha="right",
                va="center",
                fontsize="small",
                zorder=3,
                bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.7, "pad": 1},
            )
    metric, mode = first_objective(sweep)
    colours = plt.get_cmap("viridis" if mode == "max" else "viridis_r")  # the best trials in yellow
    values = trials[best_column(metric)]
    span = (values.max() - values.min()) or 1.0
    for i, value in enumerate(values):
        ax.plot(
            range(len(axes)),
            [heights.iloc[i] for heights in positions],
            color=colours((value - values.min()) / span),
            alpha=0.8,
            linewidth=1.5,
        )
    mappable = plt.cm.ScalarMappable(cmap=colours, norm=plt.Normalize(values.min(), values.max()))
    fig.colorbar(mappable, ax=ax, label=metric, pad=0.02)
    ax.set_xticks(range(len(axes)), [column for column, _ in axes], rotation=15)
    ax.set_xlim(-0.6, len(axes) - 0.8)
    ax.set_ylim(-0.05, 1.05)
    ax.set_yticks([])
    ax.set_frame_on(False)
    ax.set_title(f"{len(trials)} trials, coloured by {metric} ({mode})")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _axis(values: pd.Series, spec: dict) -> tuple[pd.Series, list[tuple[float, str]]]:
    """Heights in [0, 1] of one column's values, and the (height, label) ticks of its axis."""
    if spec["sampler"] in CATEGORICAL_SAMPLERS:
        names = list(dict.fromkeys(map(str, [*map(_category, spec["values"]), *values.map(_category)])))
        place = {name: i / max(1, len(names) - 1) for i, name in enumerate(names)}
        return values.map(lambda v: place[str(_category(v))]), [(h, name) for name, h in place.items()]
    scale = math.log10 if spec["sampler"] in LOG_SAMPLERS else float
    low, high = scale(values.min()), scale(values.max())
    heights = values.map(lambda v: (scale(v) - low) / (high - low) if high > low else 0.5)
    unscale = (lambda h: 10**h) if spec["sampler"] in LOG_SAMPLERS else float
    return heights, [(h, f"{unscale(low + h * (high - low)):.3g}") for h in ((0.0, 0.5, 1.0) if high > low else (0.5,))]


def study_name(sweep: SweepConfig, run_dir: str) -> str:
    """The exported study's name: the sweep's name and its run directory, e.g. 'glue_mrpc /runs/mrpc/0'."""
    return f"{sweep.name} {os.path.abspath(run_dir)}"


def export_study(
    table: pd.DataFrame, histories: dict[str, pd.DataFrame], sweep: SweepConfig, run_dir: str, storage: str
) -> int:
    """Write the sweep into `storage` as the Optuna study `study_name` names, replacing a study of that
    name (so a re-run, or a still-running sweep reported again, updates it); other studies are kept.
    Each trial holds its searched values, the first objective's reports by step as intermediate
    values, its state (COMPLETE, PRUNED when the scheduler or a stopper ended it, FAIL when it
    errored) and its last value of each objective. Returns the number of trials written."""
    import optuna
    from optuna.trial import TrialState, create_trial

    name, metrics = study_name(sweep, run_dir), [metric for metric, _ in objectives(sweep)]
    with _quiet_optuna():
        if name in optuna.get_all_study_names(storage):
            optuna.delete_study(study_name=name, storage=storage)
        directions = [DIRECTIONS[mode] for _, mode in objectives(sweep)]
        study = optuna.create_study(storage=storage, study_name=name, directions=directions)
        study.set_metric_names(metrics)
    dists = distributions(sweep, table)
    for row in table.to_dict("records"):
        state = TrialState[STATES.get(row["ended"], "RUNNING")]
        values = [row[last_column(metric)] for metric in metrics]
        study.add_trial(
            create_trial(
                state=state,
                params=_params(row, sweep),
                distributions=dists,
                values=values
                if state in (TrialState.COMPLETE, TrialState.PRUNED) and not any(pd.isna(values))
                else None,
                intermediate_values=_reports(histories.get(row["trial_id"]), metrics[0]),
                user_attrs={
                    "tune_trial_id": row["trial_id"],
                    "ended": row["ended"],
                    "step": int(row["step"]),
                    "error": row["error"],
                },
            )
        )
    return len(table)


def _reports(history: Optional[pd.DataFrame], metric: str) -> dict[int, float]:
    """A trial's reports of `metric` by step: its intermediate values."""
    if history is None or metric not in history:
        return {}
    reports = history.dropna(subset=[metric])
    return {int(step): float(value) for step, value in zip(reports["step"], reports[metric])}
