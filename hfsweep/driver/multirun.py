"""Hydra callback for `python -m hfsweep -m ...`: one summary table over the multirun's jobs.

Hydra instantiates its callbacks before composing any job, so this module stays light: a
one-line config error must not wait for pandas, matplotlib and Ray to import.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from hydra.experimental.callback import Callback

from hfsweep.driver.results.tables import markdown
from hfsweep.run_dir import BEST_FILE, MULTIRUN_SUMMARY, read_best


class MultirunSummary(Callback):
    """Hydra callback: after a multirun, one table row per job (overrides, best metric, best trial)."""

    def on_multirun_end(self, config, **kwargs) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        rows = []
        job_dirs = sorted((p.parent for p in sweep_dir.glob(f"*/{BEST_FILE}")), key=lambda d: (len(d.name), d.name))
        for job_dir in job_dirs:
            best = read_best(str(job_dir))
            overrides = yaml.safe_load((job_dir / ".hydra" / "overrides.yaml").read_text()) or []
            rows.append(
                {
                    "job": job_dir.name,
                    "overrides": " ".join(overrides),
                    best["metric"]: best["value"],
                    "best_trial": best["trial_id"],
                    "step": best["step"],
                    "hyperparameters": json.dumps(best["hyperparameters"]),
                }
            )
        if not rows:
            return
        import pandas as pd

        table = pd.DataFrame(rows)
        table.to_csv(sweep_dir / MULTIRUN_SUMMARY[0], index=False)
        (sweep_dir / MULTIRUN_SUMMARY[1]).write_text(markdown(table))
        print(f"Multirun summary ({len(rows)} jobs): {sweep_dir / 'multirun_summary.md'}")
        print(table.to_string(index=False))
