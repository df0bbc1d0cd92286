"""The crossed design's interval for the pooled gain, beside `glue --fair`'s Student t over searches.

Every search's winner and the defaults are re-trained on the same training seeds, so the paired
gains form a searches × seeds table. Two-way random effects without replication: the grand mean's
variance is (MS_searches + MS_seeds − MS_interaction) / (searches · seeds), with Satterthwaite's
degrees of freedom. It adds a seed effect that all searches share, which the t over searches
leaves out (hfsweep/driver/results/pooled.py).

    python experiments/glue/crossed_interval.py experiments/glue/minilm/heldout
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
from scipy import stats

from hfsweep.cli.glue_fair import fair_row, fair_searches


def crossed_variance(gains: np.ndarray) -> tuple[float, float, float]:
    """`gains`: searches × seeds, every cell present. The grand mean, the unbiased estimate of its
    variance (negative when the interaction's mean square exceeds the other two together) and
    Satterthwaite's degrees of freedom."""
    searches, seeds = gains.shape
    mean = gains.mean()
    by_search, by_seed = gains.mean(axis=1), gains.mean(axis=0)
    ms_search = seeds * ((by_search - mean) ** 2).sum() / (searches - 1)
    ms_seed = searches * ((by_seed - mean) ** 2).sum() / (seeds - 1)
    residual = gains - by_search[:, None] - by_seed[None, :] + mean
    ms_both = (residual**2).sum() / ((searches - 1) * (seeds - 1))
    combined = ms_search + ms_seed - ms_both
    df = combined**2 / (
        ms_search**2 / (searches - 1) + ms_seed**2 / (seeds - 1) + ms_both**2 / ((searches - 1) * (seeds - 1))
    )
    return float(mean), float(combined / (searches * seeds)), float(df)


def crossed_interval(gains: np.ndarray) -> tuple[float, float, float, float]:
    """The grand mean, its 95% interval and the degrees of freedom; the interval is nan where the
    variance estimate is not positive: no interval can be stated, not a zero-width one."""
    mean, variance, df = crossed_variance(gains)
    if variance <= 0:
        return mean, float("nan"), float("nan"), df
    half = stats.t.ppf(0.975, df) * np.sqrt(variance)
    return mean, mean - half, mean + half, df


def main(fair_dir: str) -> None:
    tables = {}
    for task, search, run in fair_searches(fair_dir):
        tables.setdefault(task, {})[search] = fair_row(task, search, run)[1]
    for task, gains in tables.items():
        table = pd.DataFrame(gains).T  # searches × seeds
        missing = [str(seed) for seed in table if table[seed].isna().any()]
        table = table.drop(columns=missing)  # a seed some search's winner or the defaults lacks
        note = f" (seeds {', '.join(missing)} left out: some search lacks them)" if missing else ""
        if len(table) < 2 or table.shape[1] < 2:
            print(f"{task}: {len(table)} searches × {table.shape[1]} seeds, no crossed interval{note}")
            continue
        mean, low, high, df = crossed_interval(table.to_numpy(dtype=float))
        if np.isnan(low):
            interval = "not estimable (the interaction's mean square exceeds the searches' and seeds')"
        elif high - low > 200:
            interval = "unbounded (wider than any score's range)"
        else:
            interval = f"[{low:+.1f}, {high:+.1f}]"
        print(f"{task}: {len(table)} searches × {table.shape[1]} seeds: {mean:+.1f} {interval}, df {df:.2f}{note}")


if __name__ == "__main__":
    main(sys.argv[1])
