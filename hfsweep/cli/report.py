"""Regenerate a sweep's table and plots: `python -m hfsweep.report RUN_DIR`.

RUN_DIR is the directory a sweep wrote (the Hydra run directory, holding resolved_config.yaml);
the sweep may be finished or still running. `--optuna-storage URL` also writes the sweep into that
Optuna storage as the study 'NAME RUN_DIR' (replacing a study of that name), for `optuna-dashboard URL`.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys

from hfsweep.run_dir import RESOLVED_CONFIG, holds_sweep, read_config
from hfsweep.driver.insight import IMPORTANCE_PLOT, PARALLEL_PLOT, study_name
from hfsweep.driver.report import write_report


def storage_problem(url: str) -> str | None:
    """Why `url` is no Optuna storage to write to, in one line (None when it is one): checked before
    the report, so a mistyped URL costs nothing and leaves no traceback."""
    if importlib.util.find_spec("optuna") is None:
        return "--optuna-storage needs Optuna: pip install 'hfsweep[dashboard]'."
    import optuna
    from sqlalchemy.exc import SQLAlchemyError

    try:
        optuna.storages.get_storage(url)
    except (SQLAlchemyError, ImportError, ValueError) as error:
        return f"--optuna-storage {url}: {str(error).splitlines()[0]}; give a URL such as sqlite:///sweep.db."
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hfsweep.report", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", help="a sweep's run directory (holds resolved_config.yaml)")
    parser.add_argument("--optuna-storage", metavar="URL",
                        help="also write the sweep as an Optuna study into this storage (e.g. sqlite:///sweep.db)")
    args = parser.parse_args(argv)
    run_dir = args.run_dir
    if not holds_sweep(run_dir):
        print(f"hfsweep.report: error: {run_dir} holds no sweep ({RESOLVED_CONFIG} is missing).", file=sys.stderr)
        return 2
    problem = args.optuna_storage and storage_problem(args.optuna_storage)
    if problem:
        print(f"hfsweep.report: error: {problem}", file=sys.stderr)
        return 2
    table = write_report(run_dir, args.optuna_storage)
    print(table.to_string(index=False))
    plots = ["curves.png", "hyperparameters.png", IMPORTANCE_PLOT, PARALLEL_PLOT, "pareto.png"]
    written = [name for name in plots if os.path.isfile(os.path.join(run_dir, name))]
    print(f"Wrote results.csv, results.md, {', '.join(written)} in {run_dir}")
    if args.optuna_storage:
        print(f"Wrote the Optuna study '{study_name(read_config(run_dir), run_dir)}' ({len(table)} trials) into "
              f"{args.optuna_storage}; see it with: optuna-dashboard {args.optuna_storage}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
