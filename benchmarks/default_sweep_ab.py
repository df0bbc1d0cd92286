"""The embedded default sweep (`python -m hfsweep`, as a new user runs it) timed in two checkouts,
A/B/B/A in one invocation, and the two arms' eval losses compared at every (trial, step) both reach.

Each run is a fresh `python -m hfsweep` process started in its checkout (PYTHONPATH set to it, so
the checkout's own code runs, as `python -m hfsweep` in a clone does), with a run directory of its
own and one shared data cache that a first, untimed run of B fills. The wall is the process's,
from start to exit: imports, Hydra, the preflight, Ray's start, the trials, the results.
A trial is named by its searched values, so the same trial of the two arms is compared.

    python benchmarks/default_sweep_ab.py /work/wt/before /work/main --pairs 1
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "offline"}


def run(checkout: str, run_dir: str, cache: str) -> float:
    """One default sweep in `checkout`; its wall in seconds."""
    env = {**os.environ, **OFFLINE, "PYTHONPATH": checkout}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "hfsweep", f"hydra.run.dir={run_dir}", f"cache_dir={cache}"],
        cwd=checkout, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    wall = time.perf_counter() - start
    if done.returncode:
        sys.exit(f"{checkout}: exit {done.returncode}\n{done.stdout[-3000:]}")
    return wall


def eval_losses(run_dir: str) -> dict:
    """{(the trial's searched values, step): eval_loss} over every report of every trial."""
    losses = {}
    for result in glob.glob(os.path.join(run_dir, "*", "*", "result.json")):
        for line in open(result):
            report = json.loads(line)
            if "eval_loss" in report:
                searched = json.dumps(report["config"], sort_keys=True)
                losses[(searched, report["step"])] = report["eval_loss"]
    return losses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", help="checkout A (the commit before)")
    parser.add_argument("b", help="checkout B")
    parser.add_argument("--pairs", type=int, default=1, help="A/B/B/A blocks")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="hfsweep-ab-")
    cache = os.path.join(root, "cache")
    run(args.b, os.path.join(root, "warm"), cache)  # fills the data cache; not timed
    walls, losses = {"A": [], "B": []}, {"A": [], "B": []}
    for block in range(args.pairs):
        for arm in "ABBA":
            run_dir = os.path.join(root, f"{block}-{arm}-{len(walls[arm])}")
            walls[arm].append(run(args.a if arm == "A" else args.b, run_dir, cache))
            losses[arm].append(eval_losses(run_dir))
            print(f"block {block + 1}, {arm}: {walls[arm][-1]:.1f} s, {len(losses[arm][-1])} eval reports", flush=True)
    for arm in "AB":
        print(f"{arm} ({getattr(args, arm.lower())}): median {statistics.median(walls[arm]):.1f} s "
              f"({min(walls[arm]):.1f}-{max(walls[arm]):.1f}, n={len(walls[arm])})")
    print(f"B / A: {statistics.median(walls['B']) / statistics.median(walls['A']):.3f}")
    runs = losses["A"] + losses["B"]
    shared = set.intersection(*(set(each) for each in runs))
    differ = [key for key in shared if len({each[key] for each in runs}) > 1]
    print(f"eval losses at the {len(shared)} (trial, step) every run reached: "
          f"{'identical in all' if not differ else f'{len(differ)} differ'}")
    for key in sorted(differ)[:10]:
        print("  ", key, [each[key] for each in runs])


if __name__ == "__main__":
    main()
