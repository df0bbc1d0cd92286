"""The tables of `python -m hfsweep.glue --fair` and `--methods` (a search's winner against the
recipe's defaults, on the same seeds), apart from the paper table: see `hfsweep.cli.glue`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
from scipy import stats

from hfsweep.cli.glue_tasks import NAMES, OFFICIAL
from hfsweep.config.errors import ConfigError
from hfsweep.contract.metrics import TRAIN_SAMPLES
from hfsweep.driver.results.pooled import pooled_table
from hfsweep.driver.results.tables import markdown
from hfsweep.run_dir import (
    ANYTIME_CURVE,
    BEST_FILE,
    FAIR_POOLED,
    FAIR_TABLE,
    METHODS_POOLED,
    METHODS_TABLE,
    REPLAY_DIR,
    REPLAY_FILE,
    RESULTS_FILE,
    SELECT_DIR,
    SELECTION_FILE,
    last_column,
)

TEST_SEED = "test_seed_"  # a selection.csv's held-out scores, per training seed


def trial_hours(results_csv: Path) -> float:
    """The trials' run time in hours (results.csv's `time_total_s`)."""
    table = pd.read_csv(results_csv)
    if "time_total_s" not in table:
        raise ConfigError(
            f"glue: '{results_csv}' has no time_total_s column; rebuild it with python -m hfsweep.report."
        )
    return float(table["time_total_s"].sum()) / 3600


def train_samples(runs: pd.DataFrame) -> pd.Series:
    """Each run's training samples (a results table's `train_samples`); nan from before reports had them."""
    return runs.get(TRAIN_SAMPLES, pd.Series(float("nan"), index=runs.index))


def samples_seen(results_csv: Path) -> float:
    """The trials' training samples, summed; nan where results.csv has none."""
    return train_samples(pd.read_csv(results_csv)).sum(min_count=1)


def drop_unknown_samples(table: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """The table without the samples columns none of its runs could give: absent, not invented."""
    return table.drop(columns=[c for c in columns if table[c].isna().all()])


def hours_to_best(run: Path) -> float:
    """The search's trial-hours when it first reached its final best (nan without `anytime_curve.csv`).
    The curve counts hours times billed resources; its share spent by then, times the search's hours,
    is in these tables' unit (`trial_hours`). Every GLUE metric is higher-is-better."""
    from hfsweep.driver.results.anytime import hours_to_reach

    if not (run / ANYTIME_CURVE).is_file():
        return float("nan")
    curve = pd.read_csv(run / ANYTIME_CURVE)
    share = hours_to_reach(curve, curve["best"].iloc[-1], "max") / curve["trial_hours"].iloc[-1]
    return share * trial_hours(run / RESULTS_FILE)


def selection_defaults(run: Path) -> tuple[pd.DataFrame, list[str], pd.Series]:
    """A fair test's selection table (RUN/select/selection.csv), its searched keys, and its defaults row."""
    from hfsweep.driver.results.select import hyperparameter_columns

    selection = pd.read_csv(run / SELECT_DIR / SELECTION_FILE)
    values = hyperparameter_columns(selection)
    defaults = selection[selection["defaults"]]
    if defaults.empty:
        raise ConfigError(f"glue: '{run / SELECT_DIR / SELECTION_FILE}' has no defaults row; run with select.top_k.")
    return selection, values, defaults.iloc[0]


def defaults_runs(run: Path) -> pd.DataFrame:
    """A fair test's finished re-trainings of the defaults (RUN/select/results.csv, errored ones left out), by seed."""
    _, values, defaults = selection_defaults(run)
    runs = pd.read_csv(run / SELECT_DIR / RESULTS_FILE)
    runs = runs[runs["error"].isna()] if "error" in runs else runs
    return runs[(runs[values] == defaults[values]).all(axis=1)].astype({"seed": str}).set_index("seed")


def fair_row(task: str, search: str, run: Path) -> tuple[dict, pd.Series]:
    """One search of the fair test: winner and defaults over the selection's seeds, and the compute;
    and the winner's gains over the defaults by seed (× 100)."""
    from hfsweep.driver.results.select import ranking_columns

    selection, values, defaults = selection_defaults(run)
    seeds, _, metric = ranking_columns(selection)
    if tested := [c for c in selection if c.startswith(TEST_SEED)]:  # scored once on data the search never saw
        seeds = tested
    winner = selection.iloc[0]
    paired = [s for s in seeds if pd.notna(winner[s]) and pd.notna(defaults[s])]
    ours, theirs = winner[paired].astype(float), defaults[paired].astype(float)
    defaults_won = bool(winner["defaults"])  # one configuration: nothing to test
    p_value = stats.ttest_rel(ours, theirs).pvalue if len(paired) > 1 and not defaults_won else float("nan")
    search_h = trial_hours(run / RESULTS_FILE)
    defaults = defaults_runs(run)
    defaults_run_h = defaults["time_total_s"].mean() / 3600
    search_samples, defaults_run_samples = samples_seen(run / RESULTS_FILE), train_samples(defaults).mean()
    row = {
        "task": NAMES[task],
        "search": search,
        "metric": metric.removeprefix("eval_"),
        "scored_on": "test split, final models" if tested else f"validation, {scored_models_of(seeds)}",
        "seeds": len(paired),
        "winner": ("the defaults: " if defaults_won else "")
        + configuration({v: winner[v] for v in values if v != "seed"}),
        "winner_mean": 100 * ours.mean(),
        "winner_std": 100 * ours.std(),
        "defaults_mean": 100 * theirs.mean(),
        "defaults_std": 100 * theirs.std(),
        "p_value": p_value,
        "search_trial_hours": search_h,
        "selection_trial_hours": trial_hours(run / SELECT_DIR / RESULTS_FILE),
        "defaults_run_trial_hours": defaults_run_h,
        "search_over_defaults_run": search_h / defaults_run_h,
        "best_found_over_defaults_run": hours_to_best(run) / defaults_run_h,
        "search_samples": search_samples,
        "selection_samples": samples_seen(run / SELECT_DIR / RESULTS_FILE),
        "defaults_run_samples": defaults_run_samples,
        "search_over_defaults_run_samples": search_samples / defaults_run_samples,
    }
    return row, paired_gains(ours.rename(seed_of), theirs.rename(seed_of))


def configuration(values: dict) -> str:
    """Searched values in a table cell, `learning_rate=2e-05, lr_scheduler_type=cosine`: each by the
    last part of its path, a number in its shortest form (a choice of names stays as it is)."""
    return ", ".join(f"{p.rsplit('.', 1)[-1]}={f'{v:g}' if isinstance(v, float) else v}" for p, v in values.items())


def scored_models_of(seeds: list[str]) -> str:
    """Which model a selection.csv's per-seed validation columns score: each run's final model
    (`final_seed_N`), or its best checkpoint (`best_seed_N`; `seed_N` from before both were scored)."""
    return "final models" if seeds[0].startswith("final_") else "best checkpoints"


def seed_of(column: str) -> str:
    """A selection.csv per-seed column's seed: `final_seed_2`, `test_seed_2`, `seed_2` -> `2`."""
    return column.rsplit("_", 1)[-1]


def fair_searches(fair_dir: str) -> list[tuple[str, str, Path]]:
    """(task, search, run) for each search with a selection: OUT/TASK itself (run_fair.sh's one
    search per task), or else each of its search seeds' runs, OUT/TASK/sSEED."""
    found = []
    for task in OFFICIAL:
        if Path(fair_dir, task, SELECT_DIR, SELECTION_FILE).is_file():
            found.append((task, "", Path(fair_dir, task)))
            continue
        for selection in sorted(Path(fair_dir, task).glob(f"s*/{SELECT_DIR}/{SELECTION_FILE}")):
            found.append((task, selection.parents[1].name, selection.parents[1]))
    return found


FAIR_SAMPLES = ["search_samples", "selection_samples", "defaults_run_samples", "search_over_defaults_run_samples"]


def fair_cells(row) -> dict:
    """One task's row of fair.md; the samples cells where the runs counted them."""
    cells = {
        "task": f"{row.task} {row.search}".strip(),
        "metric": row.metric,
        "scored on": row.scored_on,
        "winner": row.winner,
        "winner (mean ± std)": f"{row.winner_mean:.1f} ± {row.winner_std:.1f}",
        "defaults": f"{row.defaults_mean:.1f} ± {row.defaults_std:.1f}",
        "gain": f"{row.winner_mean - row.defaults_mean:+.1f}",
        "paired p": "–" if pd.isna(row.p_value) else f"{row.p_value:.3g}",
        "seeds": row.seeds,
        "trial-hours: search + selection": f"{row.search_trial_hours:.1f} + {row.selection_trial_hours:.1f}",
        "search / one defaults run": f"{row.search_over_defaults_run:.1f}×",
    }
    if hasattr(row, "search_samples"):
        cells["samples: search + selection"] = f"{count(row.search_samples)} + {count(row.selection_samples)}"
        cells["search / one defaults run, in samples"] = multiple(row.search_over_defaults_run_samples)
    cells["winner found after"] = multiple(row.best_found_over_defaults_run)
    return cells


def count(value: float) -> str:
    return "–" if pd.isna(value) else f"{value:.0f}"


def multiple(value: float) -> str:
    return "–" if pd.isna(value) else f"{value:.1f}×"


def write_fair_tables(fair_dir: str) -> str:
    searches = fair_searches(fair_dir)
    if not searches:
        raise ConfigError(
            f"glue: '{fair_dir}' holds no TASK/{SELECT_DIR}/{SELECTION_FILE} or TASK/sSEED/{SELECT_DIR}/"
            f"{SELECTION_FILE}; pass run_fair.sh's OUT."
        )
    rows, gains = zip(*(fair_row(task, search, run) for task, search, run in searches))
    table = drop_unknown_samples(pd.DataFrame(rows), FAIR_SAMPLES)
    table.to_csv(os.path.join(fair_dir, FAIR_TABLE[0]), index=False)
    pooled = pooled_table(
        pd.concat(dict(zip(zip(table["task"], table["search"]), gains)), names=["task", "search", "seed"])
    )
    pooled.to_csv(os.path.join(fair_dir, FAIR_POOLED), index=False)
    shown = pd.DataFrame(fair_cells(row) for row in table.itertuples())
    samples = (
        " Samples: the training samples the trials saw (each trial's steps × examples per step), the same on any "
        "machine; in samples: the search's over the mean of the defaults' re-trainings'."
        if "search_samples" in table
        else ""
    )
    path = os.path.join(fair_dir, FAIR_TABLE[1])
    Path(path).write_text(
        f"{markdown(shown)}\nIn points (× 100), on the split each row names (a test split is held out from the "
        f"search, which selected on a validation set carved from train), over the seeds the row counts; the t-test "
        f"pairs the winner and the defaults by seed (– where the defaults won the search or its re-training over "
        f"seeds: one configuration, nothing to test). One defaults run: the mean trial-hours of the defaults' "
        f"re-trainings in the selection. Winner found after: the search's trial-hours when its best score was first "
        f"reached (its {ANYTIME_CURVE}), in defaults runs: a budget that large would have handed back the same "
        f"winner; – where the curve was not kept."
        f"{samples}\n\n{pooled_text(pooled)}"
    )
    return path


def pooled_text(pooled: pd.DataFrame) -> str:
    """The pooled verdict's table (`pooled_table`'s rows) and what its numbers mean."""
    keys = list(pooled.columns[: list(pooled.columns).index("searches")])
    shown = pd.DataFrame(
        {
            **{key: row[key] for key in keys},
            "searches": row["searches"],
            "pooled gain [95% interval]": f"{row['gain']:+.1f} [{row['low']:+.1f}, {row['high']:+.1f}]"
            + (" (training seeds only)" if row["searches"] == 1 else ""),
            "searches that beat the defaults": f"{round(row['beat_share'] * row['searches'])} of {row['searches']}",
        }
        for _, row in pooled.iterrows()
    )
    return (
        f"{markdown(shown)}\nPooled over searches (search seeds): the mean over searches of each winner's mean gain "
        f"over the defaults on the same training seeds, in points, with a 95% Student t interval over the searches' "
        f"mean gains: each carries both which search ran and which seeds re-trained its winner. Where every search "
        f"re-trains on the same training seeds, a seed's effect shared by all searches' gains is not in that spread: "
        f"the interval is over searches, given those seeds (hfsweep/driver/results/pooled.py says why no wider one "
        f"is given). With one search the interval is the paired t over its training seeds only. A search beats the "
        f"defaults when its winner's mean gain is above zero.\n"
    )


def paired_gains(ours: pd.Series, defaults: pd.Series) -> pd.Series:
    """`ours` minus `defaults` (× 100) on each seed both ran, indexed by seed."""
    seeds = ours.index.intersection(defaults.index)
    return 100 * (ours[seeds] - defaults[seeds])


def compared(ours: pd.Series, defaults: pd.Series) -> tuple[float, float, float, float]:
    """Mean and std (× 100) of `ours`, its gain over `defaults` on the seeds both ran, the paired p."""
    seeds = ours.index.intersection(defaults.index)
    p_value = stats.ttest_rel(ours[seeds], defaults[seeds]).pvalue if len(seeds) > 1 else float("nan")
    return 100 * ours.mean(), 100 * ours.std(), paired_gains(ours, defaults).mean(), p_value


def retrained_in(run: Path) -> Path | None:
    """The search, in `run`'s methods folder, whose replay re-trained `run`'s winner: `run` itself,
    or a search that found the same configuration (training here is deterministic for a
    configuration and seed, so rte_search_methods.sh re-trains each winner once); None before either."""
    if (run / REPLAY_DIR / REPLAY_FILE).is_file():
        return run
    winner = json.loads((run / BEST_FILE).read_text())["hyperparameters"]
    return next(
        (
            replay.parent.parent
            for replay in sorted(run.parent.parent.glob(f"*/s*/{REPLAY_DIR}/{REPLAY_FILE}"))
            if json.loads((replay.parent.parent / BEST_FILE).read_text())["hyperparameters"] == winner
        ),
        None,
    )


def scored_models(metric: str) -> list[tuple[str, str, str]]:
    """Each model a replay scores: its label in methods.csv, its name, its replay.csv column."""
    return [("best", "best checkpoint", f"best_{metric}"), ("final", "final model", last_column(metric))]


def methods_row(run: Path, retrained: Path, defaults: pd.DataFrame) -> tuple[dict, pd.Series]:
    """One search of the methods comparison: its own view (trials, trial-hours, best on its
    training seed, when found) and its winner's re-trainings (in `retrained`'s replay) against
    the defaults'; and the winner's gains over the defaults (× 100) by model and seed."""
    best = json.loads((run / BEST_FILE).read_text())
    metric = best["metric"]
    replay = pd.read_csv(retrained / REPLAY_DIR / REPLAY_FILE, dtype={"seed": str})
    replay = replay[~replay["seed"].isin(["mean", "std"])].set_index("seed")
    row = {
        "method": run.parent.name,
        "search": run.name,
        "trials": len(pd.read_csv(run / RESULTS_FILE)),
        "trial_hours": trial_hours(run / RESULTS_FILE),
        "samples": samples_seen(run / RESULTS_FILE),
        "samples_over_defaults_run": samples_seen(run / RESULTS_FILE) / train_samples(defaults).mean(),
        "best_own_seed": best["value"],
        "found_after_hours": hours_to_best(run),
        "winner": configuration(best["hyperparameters"]),
        "seeds": " ".join(replay.index),
        "retrained_in": f"{retrained.parent.name}/{retrained.name}",
    }
    gains = {}
    for label, model, column in scored_models(metric):
        ours, theirs = replay[column].astype(float), defaults[column].astype(float)
        mean, std, gain, p_value = compared(ours, theirs)
        row |= {f"{label}_mean": mean, f"{label}_std": std, f"{label}_gain": gain, f"{label}_p": p_value}
        gains[model] = paired_gains(ours, theirs)
    return row, pd.concat(gains, names=["model", "seed"])


def write_methods_tables(methods_dir: str, fair_run: str) -> str:
    searches = [best.parent for best in sorted(Path(methods_dir).glob(f"*/s*/{BEST_FILE}"))]
    retrained = {run: retrained_in(run) for run in searches}
    runs = [run for run in searches if retrained[run]]
    if not runs:
        raise ConfigError(
            f"glue: '{methods_dir}' holds no METHOD/sSEED/{REPLAY_DIR}/{REPLAY_FILE}; pass rte_search_methods.sh's "
            f"rte_methods folder once a winner is re-trained."
        )
    if not Path(fair_run, SELECT_DIR, SELECTION_FILE).is_file():
        raise ConfigError(
            f"glue: '{fair_run}' holds no {SELECT_DIR}/{SELECTION_FILE}; pass the fair test's task folder."
        )
    defaults = defaults_runs(Path(fair_run))
    rows, gains = zip(*(methods_row(run, retrained[run], defaults) for run in runs))
    table = drop_unknown_samples(pd.DataFrame(rows), ["samples", "samples_over_defaults_run"])
    table.to_csv(os.path.join(methods_dir, METHODS_TABLE[0]), index=False)
    by_search = pd.concat(dict(zip(zip(table["method"], table["search"]), gains)), names=["method", "search"])
    pooled = pooled_table(by_search.reorder_levels(["method", "model", "search", "seed"]))
    pooled.to_csv(os.path.join(methods_dir, METHODS_POOLED), index=False)

    def cell(row, label: str) -> str:
        p_value = "–" if pd.isna(row[f"{label}_p"]) else f"{row[f'{label}_p']:.2g}"
        return f"{row[f'{label}_mean']:.1f} ± {row[f'{label}_std']:.1f} ({row[f'{label}_gain']:+.1f}, p {p_value})"

    def retrained_note(row) -> str:  # a winner another search found first was re-trained there
        here = row["retrained_in"] == f"{row['method']}/{row['search']}"
        return "" if here else f" (re-trained in {row['retrained_in']})"

    def samples(row) -> dict:
        if "samples" not in row:
            return {}
        seen, times = count(row["samples"]), multiple(row["samples_over_defaults_run"])
        return {"samples (× one defaults run)": f"{seen} ({times})"}

    shown = pd.DataFrame(
        {
            "search": f"{row['method']} {row['search']}",
            "trials": row["trials"],
            "trial-hours": f"{row['trial_hours']:.2f}",
            **samples(row),
            "best, own seed (found after)": f"{100 * row['best_own_seed']:.1f} ({row['found_after_hours']:.2f} h)",
            "winner": row["winner"] + retrained_note(row),
            "re-trained: best checkpoint (gain, p)": cell(row, "best"),
            "re-trained: final model (gain, p)": cell(row, "final"),
        }
        for _, row in table.iterrows()
    )
    metric = json.loads((runs[0] / BEST_FILE).read_text())["metric"]
    seeds = " ".join(sorted(defaults.index))
    baseline = {
        label: f"{100 * defaults[column].mean():.1f} ± {100 * defaults[column].std():.1f}"
        for label, _, column in scored_models(metric)
    }
    per_method = table.groupby("method", sort=False)[["best_mean", "final_mean"]].mean()
    searches = table["method"].value_counts()
    method_lines = "".join(
        f"- {method}: {searches[method]} search{'es' if searches[method] > 1 else ''}, re-trained winners' mean "
        f"{row.best_mean:.1f} at the best checkpoint, {row.final_mean:.1f} at the end\n"
        for method, row in per_method.iterrows()
    )
    samples_note = (
        " Samples: the search's training samples, and their multiple of one defaults run (the mean of the "
        "defaults' re-trainings)."
        if "samples" in table
        else ""
    )
    path = os.path.join(methods_dir, METHODS_TABLE[1])
    Path(path).write_text(
        f"{markdown(shown)}\n{metric} × 100 on the validation set. Best, own seed: the search's best on its training "
        f"seed and the trial-hours it had spent when it first reached it. Re-trained: the winner over the replay's "
        f"seeds, mean ± std, with its gain over the defaults' re-trainings on the same seeds (the fair test's "
        f"selection, seeds {seeds}: {baseline['best']} at the best checkpoint, {baseline['final']} at the end) and "
        f"the t-test paired by seed.{samples_note}\n\n{method_lines}\n{pooled_text(pooled)}"
    )
    return path
