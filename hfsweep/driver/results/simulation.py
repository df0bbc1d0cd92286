"""What a simulation of schedulers hands back (`python -m hfsweep.simulate`): each scheduler's
trials and a comparison, as tables in the run directory; the playback itself is search's."""

from __future__ import annotations

import os

import pandas as pd
from ray.tune.utils import flatten_dict

from hfsweep.driver.results.tables import markdown
from hfsweep.driver.search.simulate import Simulation
from hfsweep.run_dir import COMPARISON

SIMULATE_DIR = "simulate"  # in the run directory: one NAME.md/.csv per scheduler, and the comparison


def trial_table(sim: Simulation, progress: str) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "trial_id": o.trial_id,
                **flatten_dict(o.config, delimiter="."),
                "ended": o.ended,
                progress: o.progress,
                "seconds": round(o.seconds, 3),
            }
            for o in sim.trials
        ]
    )


def config_text(config: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in flatten_dict(config, delimiter=".").items())


def comparison_table(sims: list[Simulation], metric: str) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "scheduler": s.name,
                "stopped": sum(o.ended == "stopped" for o in s.trials),
                "trials": len(s.trials),
                "best_trial": s.best.trial_id if s.best else "",
                "best_config": config_text(s.best.config) if s.best else "",
                f"best_{metric}": s.best_value,
                "regret": s.regret,
                "compute_share": round(s.compute_share, 4),
                "wall_s": round(s.wall_s, 1),
            }
            for s in sims
        ]
    )


def describe(sim: Simulation, metric: str, progress: str) -> str:
    """One scheduler's simulation in a few lines: what it stopped and when, what it would pick."""
    stopped = [f"{o.trial_id} at {progress} {o.progress}" for o in sim.trials if o.ended == "stopped"]
    paused = [o.trial_id for o in sim.trials if o.ended == "paused at the end"]
    lines = [
        f"{sim.name} ({sim.scheduler}): stopped {len(stopped)} of {len(sim.trials)} trials"
        + (f": {', '.join(stopped)}" if stopped else "")
    ]
    if paused:
        lines.append(f"  still paused when no trial could run: {', '.join(paused)}")
    if sim.best:
        lines.append(
            f"  best: trial {sim.best.trial_id} ({config_text(sim.best.config)}), "
            f"{metric} = {sim.best_value:.4f} at {progress} {sim.best_progress}"
        )
    lines.append(
        f"  compute: {sim.compute_share:.1%} of the full sweep; regret {sim.regret:.4f}; "
        f"simulated wall-clock {sim.wall_s:.1f} s"
    )
    return "\n".join(lines)


def write_simulations(sims: list[Simulation], out_dir: str, metric: str, progress: str) -> pd.DataFrame:
    """NAME.md and NAME.csv per scheduler, and comparison.md/.csv, in `out_dir`."""
    os.makedirs(out_dir, exist_ok=True)
    for sim in sims:
        stem = os.path.join(out_dir, sim.name.replace(" ", "-"))
        table = trial_table(sim, progress)
        table.to_csv(stem + ".csv", index=False)
        with open(stem + ".md", "w") as f:
            f.write(describe(sim, metric, progress).replace("\n  ", "\n\n") + "\n\n" + markdown(table))
    comparison = comparison_table(sims, metric)
    comparison.to_csv(os.path.join(out_dir, COMPARISON[0]), index=False)
    with open(os.path.join(out_dir, COMPARISON[1]), "w") as f:
        f.write(markdown(comparison))
    return comparison
