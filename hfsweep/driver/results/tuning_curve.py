"""Tuning curves: the median best score a random search of k trials finds, k = 1 … n, with exact
simultaneous 95% confidence bands (Lourie, Cho and He 2024, "Show Your Work with Confidence",
through their `opda` package). Where the curve flattens, more trials bought little: it tells a user
how many trials the budget needed, and how sure that is from n trials.

The bands hold for trials that are independent draws from the search space, each trained to its
end: random search under FIFO. A searcher that learns from earlier trials, a grid, or a scheduler
that stops or perturbs trials by comparing them breaks that, and results.md says so in one line.
The defaults trial (the config's own values) is no draw and is left out.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Optional

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402
from opda.nonparametric import EmpiricalDistribution  # noqa: E402

from hfsweep import run_dir as run_files  # noqa: E402
from hfsweep.config.loading import import_object, iter_leaves, target_name  # noqa: E402
from hfsweep.config.objectives import first_objective  # noqa: E402
from hfsweep.config.schema import SweepConfig
from hfsweep.driver.search.defaults_trial import DEFAULTS_COLUMN  # noqa: E402

CONFIDENCE = 0.95
# Learned-Miller-DeStefano bands (exact, like opda's default "ld_highest_density", and almost as
# tight) at a fifth of the time: the report runs at every sweep's end, on a shared machine.
BAND_METHOD = "ld_equal_tailed"
RAN_TO_THE_END = ("completed", "early-stopped")  # trials.ended: its step budget, or its own Trainer callback


def is_draw(table: pd.DataFrame) -> pd.Series:
    """The rows that are random draws: neither the defaults trial nor one a budget left unstarted."""
    defaults = table[DEFAULTS_COLUMN].astype(bool) if DEFAULTS_COLUMN in table else False
    return ~defaults & (table["ended"] != "never started")


def why_no_curve(table: pd.DataFrame, sweep: SweepConfig) -> Optional[str]:
    """Why the sweep's trials are no independent draws each run to its end, in one line; None when they are."""
    from ray.tune.schedulers import FIFOScheduler
    from ray.tune.search import BasicVariantGenerator

    metric = first_objective(sweep)[0]
    fix = "a tuning curve needs search_alg=random scheduler=fifo"
    if import_object(sweep.search_alg["_target_"]) is not BasicVariantGenerator:
        return (
            f"No tuning curve: {target_name(sweep.search_alg)} chooses each trial from the earlier ones' scores, "
            f"so its trials are not independent draws ({fix})."
        )
    grids = [path for path, spec in iter_leaves(sweep.search_space) if spec["sampler"] == "grid"]
    if grids:
        return f"No tuning curve: search_space.{grids[0]} is a grid, whose points are enumerated, not drawn ({fix})."
    if import_object(sweep.scheduler["_target_"]) is not FIFOScheduler:
        return (
            f"No tuning curve: {target_name(sweep.scheduler)} stops or perturbs trials by comparing them, so their "
            f"best scores are not those of independent draws run to the end ({fix})."
        )
    draws = table[is_draw(table)] if len(table) else table
    if not len(draws):
        return "No tuning curve: no random trial ran."
    cut = draws[~draws["ended"].isin(RAN_TO_THE_END)]
    if len(cut):
        why = ", ".join(f"{n} {ended}" for ended, n in cut["ended"].value_counts().items())
        return f"No tuning curve: {len(cut)} of the {len(draws)} random trials did not run to the end ({why})."
    if draws[f"best_{metric}"].isna().any():
        return f"No tuning curve: not every random trial reported {metric}."
    return None


def tuning_curve(scores, mode: str, seed: int) -> pd.DataFrame:
    """Per k = 1 … n (n scores): the median best score of k draws, and its simultaneous band.

    The CDF's upper band (more mass at low scores) gives the curve's lower band, whichever the
    mode; a bound n draws cannot set is infinite (the scores' support is unbounded).
    `seed` seeds opda's simulation of the band's critical value, so a report reproduces."""
    scores = np.asarray(scores, dtype=float)
    with warnings.catch_warnings():  # ties: tuning_curve_section says so
        warnings.simplefilter("ignore", RuntimeWarning)
        cdf_low, cdf, cdf_high = EmpiricalDistribution.confidence_bands(
            scores, CONFIDENCE, generator=np.random.default_rng(seed), method=BAND_METHOD, n_jobs=1
        )
    ks, minimize = np.arange(1, len(scores) + 1), mode == "min"
    return pd.DataFrame(
        {
            "trials": ks,
            "lower": cdf_high.quantile_tuning_curve(ks, minimize=minimize),
            "median": cdf.quantile_tuning_curve(ks, minimize=minimize),
            "upper": cdf_low.quantile_tuning_curve(ks, minimize=minimize),
        }
    )


def plot_tuning_curve(curve: pd.DataFrame, scores, metric: str, path: str) -> None:
    """The median and its band against k; infinite bounds run to the plot's edge (the scores' range)."""
    low, high = float(np.min(scores)), float(np.max(scores))
    pad = 0.1 * (high - low) or 0.05 * abs(high) or 0.05
    edges = (low - pad, high + pad)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.fill_between(
        curve["trials"], curve["lower"].clip(*edges), curve["upper"].clip(*edges), alpha=0.25, step="mid",
        label=f"simultaneous {CONFIDENCE:.0%} band",
    )  # fmt: skip
    ax.step(curve["trials"], curve["median"], where="mid", label="median")
    ax.set_ylim(*edges)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("trials drawn at random (k)")
    ax.set_ylabel(f"best {metric} of k trials")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def tuning_curve_section(table: pd.DataFrame, sweep: SweepConfig, run_dir: str) -> str:
    """tuning_curve.csv and .png in the run directory (an earlier report's removed when there is no
    curve now), and results.md's lines on them: the curve, or why there is none."""
    for name in (run_files.TUNING_CURVE, run_files.TUNING_CURVE_PLOT):
        Path(run_dir, name).unlink(missing_ok=True)
    reason = why_no_curve(table, sweep)
    if reason:
        return f"\n## Tuning curve\n\n{reason}\n"
    metric, mode = first_objective(sweep)
    draws = table[is_draw(table)]
    scores = draws[f"best_{metric}"].to_numpy(dtype=float)
    curve = tuning_curve(scores, mode, sweep.seed)
    curve.to_csv(Path(run_dir, run_files.TUNING_CURVE), index=False)
    plot_tuning_curve(curve, scores, metric, str(Path(run_dir, run_files.TUNING_CURVE_PLOT)))
    last = curve.iloc[-1]
    enough = int(curve["trials"][curve["median"] == last["median"]].iloc[0])  # the median is monotone in k
    defaults = DEFAULTS_COLUMN in table and table[DEFAULTS_COLUMN].astype(bool).any()
    left_out = " (the defaults trial left out: it ran the config's own values, not a draw)" if defaults else ""
    unbounded = (
        f" An infinite bound is one that {len(scores)} trials cannot set." if np.isinf(curve.values).any() else ""
    )
    distinct = len(np.unique(scores))
    tied = (
        f" The scores hold {distinct} distinct values: the bands are exact only without ties."
        if distinct < len(scores)
        else ""
    )
    return (
        f"\n## Tuning curve ({run_files.TUNING_CURVE_PLOT})\n\nThe median best {metric} of a random search of k "
        f"trials, k = 1 … {len(scores)}, estimated from this sweep's {len(scores)} random trials{left_out}, with "
        f"simultaneous {CONFIDENCE:.0%} confidence bands (Lourie et al. 2024, opda's {BAND_METHOD}; points in "
        f"{run_files.TUNING_CURVE}). After {len(scores)} trials: {last['median']:.4g} "
        f"[{last['lower']:.4g}, {last['upper']:.4g}]; the estimated median stopped improving after {enough} of "
        f"them.{unbounded}{tied}\n"
    )
