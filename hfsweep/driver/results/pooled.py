"""Several searches, one verdict: the mean gain of the searches' winners over the defaults, with a
95% interval over which search ran (its search seed) and, where each search re-trained on seeds of
its own, which training seeds re-trained its winner (the limit below).

Why the search is the unit: which search you run decides most of the gain. On RTE six searches'
winners re-train to +1.8 … +6.0 points over the defaults, while each winner's re-trainings over
training seeds vary by a point or two. An interval over training seeds alone answers "is this one
winner better?", not "does running a search hand back a better model?".

The interval: each search's mean paired gain over its training seeds is one observation, and the
interval is Student's t over those observations, mean ± t(0.975, k − 1) · s / √k for k searches.
Each search's mean already carries both variances (the search's own, and its seeds' divided by
their number), so this is the random-effects (mixed) model's exact interval for the grand mean when
every search re-trained the same number of seeds, without estimating the two variances apart: with
2–6 searches a mixed-model fit often puts the between-search variance at zero (a singular fit),
and a bootstrap's percentile interval is too narrow (2 searches give 3 distinct search-level
draws; this module used one until the fair test's RTE showed +5.1 [+2.9, +9.0] beside a paired
p of 0.13). With few searches the t interval is wide, as it should be. With one search there is
no search-level spread to measure: the interval is the paired t over that search's training seeds,
and says so (`searches` = 1).

One limit: when every search re-trains on the same training seeds (the fair tests' 1–3), a seed's
effect that every search's gain shares is not in the spread over searches, so the interval is over
searches given those seeds. The crossed design's own interval (searches × seeds, two-way random
effects, Satterthwaite's degrees of freedom) would add it, but with two or three searches its
degrees of freedom fall below 2 and it is unbounded or nearly so (the held-out MRPC's first two
searches: df 0.02; experiments/glue/crossed_interval.py). Re-training each search's winner and the
defaults on seeds of its own makes the t over searches exact, at one more set of defaults runs per
search.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

CONFIDENCE = 0.95


@dataclass(frozen=True)
class Pooled:
    searches: int
    gain: float  # mean over searches of the mean paired gain
    low: float  # the 95% Student t interval (over searches; over training seeds for one search)
    high: float
    beat_share: float  # share of searches whose mean paired gain is above zero


def t_interval(values: np.ndarray) -> tuple[float, float]:
    """mean ± t((1 + CONFIDENCE) / 2, n − 1) · s / √n; none (nan) for one value."""
    if len(values) < 2:
        return float("nan"), float("nan")
    half = stats.t.ppf((1 + CONFIDENCE) / 2, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
    return float(values.mean() - half), float(values.mean() + half)


def pooled_gain(gains: pd.Series) -> Pooled:
    """`gains`: the winner's score minus the defaults' on the same training seed, indexed by
    (search, training seed)."""
    if gains.empty or gains.isna().any():
        raise ValueError("pooled_gain needs at least one paired gain and no missing ones")
    means = gains.groupby(level=0, sort=False).mean().to_numpy(dtype=float)
    low, high = t_interval(means if len(means) > 1 else gains.to_numpy(dtype=float))
    return Pooled(len(means), float(means.mean()), low, high, float((means > 0).mean()))


def pooled_table(gains: pd.Series) -> pd.DataFrame:
    """`pooled_gain` per group: `gains` indexed by (group levels…, search, training seed), one row
    per group (a task, or a method and the model it scores), in the order the groups come."""
    keys = gains.index.names[:-2]
    return pd.DataFrame(
        [
            {**dict(zip(keys, key if isinstance(key, tuple) else (key,))), **vars(pooled_gain(group.droplevel(keys)))}
            for key, group in gains.groupby(level=keys, sort=False)
        ]
    )
