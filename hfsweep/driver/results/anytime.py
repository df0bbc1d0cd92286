"""Anytime curves: the best metric found so far against the compute spent, the way HPO methods are
compared (Syne Tune's experiment plots, the HPO benchmarks): a searcher that finds a good model
sooner has the better curve even when two searches end at the same best.

The x-axis counts trial-hours as `budget.trial_hours` does (each trial's running time x the GPUs, or
on CPUs the CPUs, it holds), summed over trials at every report, in the order the reports arrived;
the wall clock is kept beside it, counting only the time some trial was running, so that a sweep
interrupted overnight and resumed is not charged for the night. Three numbers summarise a curve: its area
(the mean best-so-far over the trial-hours spent: lower is better for mode=min), the trial-hours
it took to reach the defaults trial's score, and those it took to find its final best (what a
budget needed to hand back the same winner).
"""

from __future__ import annotations

import math
from typing import Optional

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402


def running(histories: dict) -> list[list[float]]:
    """The wall-clock spans in which some trial was running, merged: each report covers the time its
    trial ran since its previous report, up to the report's timestamp. That is Tune's
    `time_this_iter_s`, which a restore counts from the restore (where `time_total_s` falls back to
    the checkpoint's total); a history without it gives the growth of `time_total_s`."""
    spans = sorted(
        (timestamp - ran, timestamp)
        for history in histories.values()
        for timestamp, ran in zip(history["timestamp"], since_previous_report(history))
    )
    merged: list[list[float]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


def since_previous_report(history: pd.DataFrame) -> pd.Series:
    if "time_this_iter_s" in history:
        return history["time_this_iter_s"]
    return history["time_total_s"].diff().fillna(history["time_total_s"])


def anytime_curve(histories: dict, metric: str, mode: str, resources: float) -> pd.DataFrame:
    """One row per report, in arrival order: wall seconds some trial had been running by then,
    trial-hours spent by then (every trial's latest `time_total_s`, summed), and the best `metric`
    so far."""
    histories = {trial_id: history for trial_id, history in histories.items() if metric in history}
    reports = [
        (row["timestamp"], trial_id, row["time_total_s"], row[metric])
        for trial_id, history in histories.items()
        for _, row in history.iterrows()
    ]
    reports.sort(key=lambda r: (r[0], r[2]))
    spans = running(histories)
    spent, best, rows = {}, math.nan, []
    sign = 1 if mode == "max" else -1
    for timestamp, trial_id, elapsed, value in reports:
        spent[trial_id] = elapsed
        if not pd.isna(value) and (math.isnan(best) or sign * value > sign * best):
            best = value
        wall_s = sum(min(end, timestamp) - start for start, end in spans if start < timestamp)
        rows.append({"wall_s": wall_s, "trial_hours": sum(spent.values()) * resources / 3600, "best": best})
    return pd.DataFrame(rows, columns=["wall_s", "trial_hours", "best"])


def area(curve: pd.DataFrame) -> float:
    """The mean best-so-far over the trial-hours spent (a step function, each value held until the
    next report); nan for an empty curve."""
    curve = curve.dropna(subset=["best"])
    if len(curve) < 2 or curve["trial_hours"].iloc[-1] <= curve["trial_hours"].iloc[0]:
        return float(curve["best"].iloc[-1]) if len(curve) else math.nan
    widths = np.diff(curve["trial_hours"].to_numpy())
    return float((curve["best"].to_numpy()[:-1] * widths).sum() / widths.sum())


def hours_to_reach(curve: pd.DataFrame, target: Optional[float], mode: str) -> float:
    """The trial-hours spent when the best so far first reached `target` (nan if never, or no target)."""
    if target is None or pd.isna(target):
        return math.nan
    reached = curve[curve["best"] >= target] if mode == "max" else curve[curve["best"] <= target]
    return float(reached["trial_hours"].iloc[0]) if len(reached) else math.nan


def summary_row(label: str, curve: pd.DataFrame, target: Optional[float], mode: str) -> dict:
    return {
        "sweep": label,
        "final_best": curve["best"].iloc[-1] if len(curve) else math.nan,
        "trial_hours": curve["trial_hours"].iloc[-1] if len(curve) else 0.0,
        "area": area(curve),
        "hours_to_best": hours_to_reach(curve, curve["best"].iloc[-1] if len(curve) else None, mode),
        "hours_to_defaults": hours_to_reach(curve, target, mode),
    }


def plot_anytime(curves: dict, metric: str, path: str) -> None:
    """Each curve's best so far against trial-hours (left) and wall time (right), as steps."""
    fig, (by_hours, by_wall) = plt.subplots(1, 2, figsize=(11, 4))
    for label, curve in curves.items():
        by_hours.step(curve["trial_hours"], curve["best"], where="post", label=label)
        by_wall.step(curve["wall_s"] / 60, curve["best"], where="post", label=label)
    by_hours.set_xlabel("trial-hours spent")
    by_wall.set_xlabel("wall clock while trials ran (minutes)")
    for axes in (by_hours, by_wall):
        axes.set_ylabel(f"best {metric} so far")
        axes.grid(alpha=0.3)
    if len(curves) > 1:
        by_hours.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
