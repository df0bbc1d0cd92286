"""Several searches, one verdict: the mean gain of the searches' winners over the defaults, with a
95% interval over both sources of chance, by a two-level (hierarchical) bootstrap.

Why two levels: which search you run (its search seed) decides most of the gain. On RTE six
searches' winners re-train to +1.8 … +6.0 points over the defaults, while each winner's
re-trainings over training seeds vary by a point or two. An interval over training seeds alone
answers "is this one winner better?", not "does running a search hand back a better model?". So
each resample draws searches with replacement, then, within each drawn search, training seeds with
replacement; the winner's and the defaults' scores on one seed stay paired (a seed's gain is drawn
whole). The statistic is the mean over searches of each search's mean paired gain: every search
counts once, however many seeds re-trained its winner.

Why a bootstrap and not a mixed model: with 1–6 searches of 3 seeds each, a random-effects fit's
between-search variance is often estimated at zero (a singular fit) and its interval then ignores
the search seed, the very thing it is for; the bootstrap needs no normality and no variance
estimate, and it is honest about small samples by being as wide as the searches disagree. Its
known cost: with few searches or seeds the percentile interval is too narrow (2 searches give 3
distinct search-level draws, 3 seeds 10 distinct seed draws), so a user reads the number of
searches, and the paired t-test, beside it. With one search
the search level draws that search every time: the interval covers training seeds only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

RESAMPLES = 10_000
SEED = 0  # a fixed generator: the same files give the same interval


@dataclass(frozen=True)
class Pooled:
    searches: int
    gain: float  # mean over searches of the mean paired gain
    low: float  # 95% percentile interval of the two-level bootstrap
    high: float
    beat_share: float  # share of searches whose mean paired gain is above zero


def pooled_gain(gains: pd.Series, resamples: int = RESAMPLES, seed: int = SEED) -> Pooled:
    """`gains`: the winner's score minus the defaults' on the same training seed, indexed by
    (search, training seed)."""
    if gains.empty or gains.isna().any():
        raise ValueError("pooled_gain needs at least one paired gain and no missing ones")
    per_search = [group.to_numpy(dtype=float) for _, group in gains.groupby(level=0, sort=False)]
    means = np.array([g.mean() for g in per_search])
    sizes = np.array([len(g) for g in per_search])
    padded = np.zeros((len(per_search), sizes.max()))
    for i, g in enumerate(per_search):
        padded[i, : len(g)] = g

    rng = np.random.default_rng(seed)
    drawn = rng.integers(len(per_search), size=(resamples, len(per_search)))  # searches, with replacement
    n = sizes[drawn][..., None]
    positions = (rng.random((*drawn.shape, sizes.max())) * n).astype(int)  # seeds within each drawn search
    used = np.arange(sizes.max()) < n  # a search of fewer seeds draws only as many
    within = np.where(used, padded[drawn[..., None], positions], 0.0).sum(axis=-1) / n[..., 0]
    low, high = np.percentile(within.mean(axis=1), [2.5, 97.5])
    return Pooled(len(per_search), float(means.mean()), float(low), float(high), float((means > 0).mean()))


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
