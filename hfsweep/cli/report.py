"""Regenerate a sweep's table and plots: `python -m hfsweep.report RUN_DIR`.

RUN_DIR is the directory a sweep wrote (the Hydra run directory, holding resolved_config.yaml);
the sweep may be finished or still running. A random search under FIFO also gets its tuning curve
(tuning_curve.csv and .png: the median best score of k trials, with 95% bands); any other sweep a
line saying why not. `--optuna-storage URL` also writes the sweep into that
Optuna storage as the study 'NAME RUN_DIR' (replacing a study of that name), for `optuna-dashboard URL`.
`python -m hfsweep.report DIR1 DIR2 ... --compare OUT` draws the sweeps' anytime curves (best so far
against trial-hours and wall time) on one plot in OUT, with each curve's area and trial-hours to
reach its defaults trial's score in OUT/anytime.md and .csv.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys

from hfsweep.config.saved import read_sweep
from hfsweep.driver.results.anytime import plot_anytime, summary_row
from hfsweep.driver.results.insight import study_name
from hfsweep.driver.results.report import sweep_anytime, write_report
from hfsweep.driver.results.tuning_curve import why_no_curve
from hfsweep.driver.search import live_study
from hfsweep.run_dir import (
    ANYTIME_COMPARISON,
    ANYTIME_PLOT,
    CURVES_PLOT,
    HYPERPARAMETERS_PLOT,
    IMPORTANCE_PLOT,
    PARALLEL_PLOT,
    PARETO_PLOT,
    RESOLVED_CONFIG,
    TUNING_CURVE,
    TUNING_CURVE_PLOT,
    holds_sweep,
)


def storage_problem(url: str) -> str | None:
    """Why `url` is no Optuna storage to write to, in one line (None when it is one): checked before
    the report, so a mistyped URL costs nothing and leaves no traceback."""
    if importlib.util.find_spec("optuna") is None:
        return "--optuna-storage needs Optuna: pip install 'hfsweep[dashboard]'."
    problem = live_study.storage_problem(url)
    return problem and f"--optuna-storage {url}: {problem}; give a URL such as sqlite:///sweep.db."


class OneLineParser(argparse.ArgumentParser):
    """An argument error in one line, as every other refusal (argparse prints its usage first)."""

    def error(self, message: str):
        self.exit(2, f"hfsweep.report: error: {message}; see {self.prog} --help.\n")


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m hfsweep.report", description=__doc__.splitlines()[0])
    parser.add_argument(
        "run_dirs",
        nargs="+",
        metavar="run_dir",
        help="a sweep's run directory (holds resolved_config.yaml); several with --compare",
    )
    parser.add_argument("--compare", metavar="OUT", help="draw the sweeps' anytime curves on one plot in OUT")
    parser.add_argument(
        "--optuna-storage",
        metavar="URL",
        help="also write the sweep as an Optuna study into this storage (e.g. sqlite:///sweep.db)",
    )
    args = parser.parse_args(argv)
    missing = [run_dir for run_dir in args.run_dirs if not holds_sweep(run_dir)]
    if missing:
        print(f"hfsweep.report: error: {missing[0]} holds no sweep ({RESOLVED_CONFIG} is missing).", file=sys.stderr)
        return 2
    if args.compare:
        if os.path.exists(args.compare) and not os.path.isdir(args.compare):
            print(
                f"hfsweep.report: error: --compare {args.compare}: is a file; give the folder to write the "
                f"comparison in, e.g. --compare comparison.",
                file=sys.stderr,
            )
            return 2
        return compare(args.run_dirs, args.compare)
    if len(args.run_dirs) > 1:
        print("hfsweep.report: error: several run directories are compared with --compare OUT.", file=sys.stderr)
        return 2
    (run_dir,) = args.run_dirs
    problem = args.optuna_storage and storage_problem(args.optuna_storage)
    if problem:
        print(f"hfsweep.report: error: {problem}", file=sys.stderr)
        return 2
    table = write_report(run_dir, args.optuna_storage)
    print(table.to_string(index=False))
    plots = [
        CURVES_PLOT,
        HYPERPARAMETERS_PLOT,
        ANYTIME_PLOT,
        TUNING_CURVE_PLOT,
        IMPORTANCE_PLOT,
        PARALLEL_PLOT,
        PARETO_PLOT,
    ]
    written = [name for name in plots if os.path.isfile(os.path.join(run_dir, name))]
    print(f"Wrote results.csv, results.md, {', '.join(written)} in {run_dir}")
    print(why_no_curve(table, read_sweep(run_dir)) or f"The tuning curve's points are in {TUNING_CURVE}.")
    if args.optuna_storage:
        print(
            f"Wrote the Optuna study '{study_name(read_sweep(run_dir), run_dir)}' ({len(table)} trials) into "
            f"{args.optuna_storage}; see it with: optuna-dashboard {args.optuna_storage}"
        )
    return 0


def labels(run_dirs: list[str]) -> list[str]:
    """Each run directory's name on the plot: its last two parts (a method's name and its search
    seed, as experiments lay them out), more where two would be named alike."""
    parts = [os.path.normpath(run_dir).split(os.sep) for run_dir in run_dirs]
    depth = 2
    while True:
        names = [os.path.join(*p[-depth:]) for p in parts]
        if len(set(names)) == len(names) or depth >= max(map(len, parts)):  # or one directory given twice
            return names
        depth += 1


def compare(run_dirs: list[str], out: str) -> int:
    """The sweeps' anytime curves on one plot, each labelled by `labels`."""
    import pandas as pd

    from hfsweep.config.objectives import first_objective
    from hfsweep.driver.results.tables import markdown

    curves, rows, metrics = {}, [], set()
    for run_dir, label in zip(run_dirs, labels(run_dirs)):
        curve, target, sweep = sweep_anytime(run_dir)
        metric, mode = first_objective(sweep)
        metrics.add((metric, mode))
        curves[label] = curve
        rows.append(summary_row(label, curve, target, mode))
    if len(metrics) > 1:
        print(
            f"hfsweep.report: error: --compare needs one metric and mode in every sweep, got {sorted(metrics)}.",
            file=sys.stderr,
        )
        return 2
    ((metric, mode),) = metrics
    os.makedirs(out, exist_ok=True)
    plot_anytime(curves, metric, os.path.join(out, ANYTIME_PLOT))
    table = pd.DataFrame(rows)
    table.to_csv(os.path.join(out, ANYTIME_COMPARISON[0]), index=False)
    better = "lower" if mode == "min" else "higher"
    with open(os.path.join(out, ANYTIME_COMPARISON[1]), "w") as f:
        f.write(
            f"Best {metric} so far against trial-hours ({ANYTIME_PLOT}); area: the mean best so far over the "
            f"trial-hours spent ({better} is better); hours_to_best: trial-hours until the sweep's final best was "
            f"found; hours_to_defaults: trial-hours until the sweep's own "
            f"defaults trial's score was reached.\n\n{markdown(table)}"
        )
    print(table.to_string(index=False))
    print(f"Wrote {ANYTIME_PLOT}, anytime.csv and anytime.md in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
