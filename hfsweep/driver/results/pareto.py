"""Several objectives: which trials are Pareto-optimal, the front's plot, and the rule for `best/`.

A trial's point is its last report (each objective's last value): what Tune hands the searcher
when the trial completes, and so what Optuna's multi-objective samplers model. A trial is
Pareto-optimal when no other trial is as good in every objective and better in one. `best/` is
the Pareto-optimal trial with the best first objective (the next objectives break a tie), so the
order of `metric` says which objective picks the exported model.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hfsweep.run_dir import last_column


def minimised(table: pd.DataFrame, objectives: list[tuple[str, str]]) -> np.ndarray:
    """Each row's last objective values, signed so that lower is better in every column."""
    signs = np.array([1.0 if mode == "min" else -1.0 for _, mode in objectives])
    return table[[last_column(metric) for metric, _ in objectives]].to_numpy(dtype=float) * signs


def pareto_optimal(table: pd.DataFrame, objectives: list[tuple[str, str]]) -> pd.Series:
    """Whether each trial (row) is Pareto-optimal; a trial missing an objective is not, nor does
    it dominate another."""
    values = minimised(table, objectives)
    complete = np.isfinite(values).all(axis=1)
    rivals = values[complete]
    flags = [
        bool(ok) and not ((rivals <= point).all(axis=1) & (rivals < point).any(axis=1)).any()
        for point, ok in zip(values, complete)
    ]
    return pd.Series(flags, index=table.index, name="pareto")


def best_of_front(table: pd.DataFrame, objectives: list[tuple[str, str]]):
    """The index of the Pareto-optimal row with the best first objective (then the next ones)."""
    front = table[table["pareto"]]
    values = minimised(front, objectives)
    return front.index[np.lexsort(values.T[::-1])[0]]


def plot_pareto(table: pd.DataFrame, objectives: list[tuple[str, str]], path: str) -> None:
    """The first two objectives' last values, every trial, the Pareto-optimal ones joined."""
    import matplotlib.pyplot as plt

    (x, x_mode), (y, y_mode) = objectives[:2]
    fig, ax = plt.subplots(figsize=(6, 4.5))
    others = table[~table["pareto"]]
    ax.scatter(others[last_column(x)], others[last_column(y)], color="0.6", label="dominated")
    front = table[table["pareto"]].sort_values(last_column(x))
    ax.plot(front[last_column(x)], front[last_column(y)], "o-", color="C3", label="Pareto-optimal")
    for _, row in front.iterrows():
        ax.annotate(
            row["trial_id"].rsplit("_", 1)[-1],
            (row[last_column(x)], row[last_column(y)]),
            fontsize="x-small",
            xytext=(3, 3),
            textcoords="offset points",
        )
    ax.set_xlabel(f"{x} ({x_mode})")
    ax.set_ylabel(f"{y} ({y_mode})")
    title = "Pareto front" + (f" of the first two of {len(objectives)} objectives" if len(objectives) > 2 else "")
    ax.set_title(title)
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
