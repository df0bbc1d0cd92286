"""Regenerate a sweep's table and plots: `python -m hfsweep.report RUN_DIR`.

RUN_DIR is the directory a sweep wrote (the Hydra run directory, holding resolved_config.yaml);
the sweep may be finished or still running.
"""

from __future__ import annotations

import argparse
import sys

from hfsweep.run_dir import RESOLVED_CONFIG, holds_sweep
from hfsweep.driver.report import write_report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hfsweep.report", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", help="a sweep's run directory (holds resolved_config.yaml)")
    run_dir = parser.parse_args(argv).run_dir
    if not holds_sweep(run_dir):
        print(f"hfsweep.report: error: {run_dir} holds no sweep ({RESOLVED_CONFIG} is missing).", file=sys.stderr)
        return 2
    table = write_report(run_dir)
    print(table.to_string(index=False))
    print(f"Wrote results.csv, results.md, curves.png and hyperparameters.png{' and pareto.png' if 'pareto' in table else ''} in {run_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
