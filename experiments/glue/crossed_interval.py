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


def crossed_interval(gains: np.ndarray) -> tuple[float, float, float, float]:
    """`gains`: searches × seeds. The mean, the 95% interval and its degrees of freedom."""
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
    half = stats.t.ppf(0.975, df) * np.sqrt(max(combined, 0.0) / (searches * seeds))
    return float(mean), float(mean - half), float(mean + half), float(df)


def main(fair_dir: str) -> None:
    tables = {}
    for task, search, run in fair_searches(fair_dir):
        tables.setdefault(task, {})[search] = fair_row(task, search, run)[1]
    for task, gains in tables.items():
        table = pd.DataFrame(gains).T  # searches × seeds
        if len(table) < 2:
            print(f"{task}: one search, no crossed interval")
            continue
        mean, low, high, df = crossed_interval(table.to_numpy(dtype=float))
        interval = f"[{low:+.1f}, {high:+.1f}]" if high - low <= 200 else "unbounded (wider than any score's range)"
        print(f"{task}: {len(table)} searches × {table.shape[1]} seeds: {mean:+.1f} {interval}, df {df:.2f}")


if __name__ == "__main__":
    main(sys.argv[1])
