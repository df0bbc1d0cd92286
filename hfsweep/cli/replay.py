"""Re-train a finished sweep's best configuration over seeds: `python -m hfsweep.replay RUN_DIR --seeds 1 2 3`.

Each seed trains the best trial's hyperparameters (`best.json`) under the sweep's saved config at
its full budget (`training.max_steps`): no scheduler, stopper or early stopping ends it sooner.
The seeds run as one sweep, a grid over `seed`, in RUN_DIR/replay/, which also holds
`replay.csv` and `replay.md`: per seed the final scores (`last_eval_*`, every eval metric of its
last evaluation), the best value of the sweep metric, and each `extra_validation` set's scores of
its final model (`NAME_eval_*`); then their mean ± std. An interrupted replay (no `replay.md` yet)
is finished by the same command: its finished seeds are kept, the others resume from their latest
checkpoint (`python -m hfsweep.resume` on RUN_DIR/replay/).
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
from pathlib import Path
from typing import Optional

import pandas as pd

from hfsweep.config.errors import ConfigError
from hfsweep.config.objectives import first_objective
from hfsweep.config.saved import best_config, read_sweep, saved_config
from hfsweep.config.schema import SweepConfig
from hfsweep.contract.pointers import read_pointer
from hfsweep.driver.results.rerun import RUN_TO_THE_END
from hfsweep.driver.results.tables import markdown
from hfsweep.run_dir import (
    BEST_FILE,
    REPLAY_DIR,
    REPLAY_FILE,
    REPLAY_TABLE,
    RESOLVED_CONFIG,
    RESULTS_FILE,
    last_column,
)


def replay_config(run_dir: str, seeds: list[int]) -> dict:
    """The sweep's saved config with its best hyperparameters, searched over `seeds` only."""
    for name in (RESOLVED_CONFIG, BEST_FILE):
        if not os.path.isfile(os.path.join(run_dir, name)):
            raise ConfigError(f"replay: '{run_dir}' holds no {name}; pass the run directory of a finished sweep.")
    out = os.path.join(os.path.abspath(run_dir), REPLAY_DIR)
    if os.path.exists(out):
        raise ConfigError(f"replay: '{out}' already exists; move or delete it to replay again.")
    cfg = {**best_config(run_dir), **RUN_TO_THE_END}
    cfg["search_space"] = {"seed": {"sampler": "grid", "values": list(seeds)}}
    cfg["cluster"]["storage_path"] = out
    cfg["select"] = {**cfg.get("select", {}), "top_k": 0}  # a sweep's selection is over: a replay is no search
    cfg.setdefault("checkpoints", {})["keep_final"] = True  # each seed's final model is scored (extra_validation)
    return cfg


def final_scores(results, sweep: SweepConfig) -> pd.DataFrame:
    """Per seed: every eval score of its last evaluation, and its final model's scores on each
    `extra_validation` set."""
    from hfsweep.driver.results.evaluation import evaluate_checkpoint, extra_validation_sets, scores

    extra_sets = extra_validation_sets(sweep)
    rows = []
    for result in results:
        history = result.metrics_dataframe
        row = {"seed": str(result.config["seed"])}
        evaluated = scores(dict.fromkeys(history.columns))
        row.update({last_column(name): history[name].dropna().iloc[-1] for name in evaluated})
        checkpoint = read_pointer(result.checkpoint)
        for name, (data_cfg, raw) in extra_sets.items():
            print(f"replay: seed {row['seed']}: scoring {checkpoint} on extra_validation.{name}")
            row.update({f"{name}_{k}": v for k, v in evaluate_checkpoint(sweep, checkpoint, data_cfg, raw).items()})
        rows.append(row)
    return pd.DataFrame(rows)


def replay_table(out: str, metric: str, final: pd.DataFrame) -> pd.DataFrame:
    """replay.csv and replay.md: per seed its status, last step, final scores (`final_scores`) and
    best metric; then their mean and sample std (rows `mean`, `std`; `mean ± std` in Markdown)."""
    results = pd.read_csv(os.path.join(out, RESULTS_FILE)).astype({"seed": str})
    per_seed = (
        results[["seed", "status", "step", f"best_{metric}"]]
        .merge(final, on="seed")
        .sort_values("seed", key=lambda s: s.astype(int))
    )
    columns = [c for c in per_seed.columns if c not in ("seed", "status", "step")]
    mean, std = per_seed[columns].mean(), per_seed[columns].std()
    table = pd.concat([per_seed, pd.DataFrame([{"seed": "mean", **mean}, {"seed": "std", **std}])], ignore_index=True)
    table["step"] = table["step"].astype("Int64")  # stays an integer beside the empty stats rows
    table.to_csv(os.path.join(out, REPLAY_FILE), index=False)
    shown = per_seed.assign(**{c: per_seed[c].map("{:.4f}".format) for c in columns})
    spread = {c: f"{mean[c]:.4f} ± {std[c]:.4f}" for c in columns}
    shown.loc[len(shown)] = {"seed": "mean ± std", "status": "", "step": "", **spread}
    Path(out, REPLAY_TABLE).write_text(markdown(shown))
    return table


def interrupted_replay(run_dir: str, seeds: list[int]) -> Optional[str]:
    """RUN_DIR/replay/ when it holds a replay of `seeds` that did not finish (its config saved, no
    replay.md); None when there is none. Other seeds than the interrupted replay's are refused."""
    out = os.path.join(os.path.abspath(run_dir), REPLAY_DIR)
    if os.path.exists(os.path.join(out, REPLAY_TABLE)) or not os.path.isfile(os.path.join(out, RESOLVED_CONFIG)):
        return None
    saved = saved_config(out)
    started = saved["search_space"]["seed"]["values"]
    if sorted(seeds) != sorted(started):
        listed = " ".join(map(str, started))
        raise ConfigError(
            f"replay: '{out}' holds an unfinished replay of seeds {listed}; "
            f"pass --seeds {listed} to finish it, or move it aside to replay other seeds."
        )
    if not glob.glob(os.path.join(out, saved["name"], "experiment_state-*.json")):
        raise ConfigError(
            f"replay: '{out}' was stopped before its first trial started; move or delete it to replay again."
        )
    return out


def replay(run_dir: str, seeds: list[int]) -> str:
    """Run the replay, or finish an interrupted one, and write its table; returns the replay directory."""
    from hfsweep.driver import resume, sweep
    from hfsweep.driver.preflight import preflight

    out = interrupted_replay(run_dir, seeds)
    if out:
        print(f"replay: finishing the interrupted replay in {out}; its finished seeds are kept")
        results = resume.resume(out)
    else:
        cfg = replay_config(run_dir, seeds)
        results = sweep.run(preflight(cfg))
        out = cfg["cluster"]["storage_path"]
    replayed = read_sweep(out)
    replay_table(out, first_objective(replayed)[0], final_scores(results, replayed))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hfsweep.replay", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", help="a finished sweep's run directory (holds resolved_config.yaml and best.json)")
    parser.add_argument("--seeds", type=int, nargs="+", required=True, help="one training run per seed")
    args = parser.parse_args(argv)
    try:
        out = replay(args.run_dir, args.seeds)
    except ConfigError as err:
        print(f"hfsweep: error: {err}", file=sys.stderr)
        return 2
    print(Path(out, REPLAY_TABLE).read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
