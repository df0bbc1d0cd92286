"""GLUE as a paper table: `python -m hfsweep.glue MULTIRUN_DIR --seeds 1 2 3`; or the fair test's
table, the search's winner against the recipe's defaults: `python -m hfsweep.glue --fair FAIR_DIR`.

MULTIRUN_DIR is a finished `python -m hfsweep -m +experiment=glue glue=cola,sst2,...` (or
`+experiment=glue_tsv`): one sweep per GLUE task, each job naming its task by its eval metric
`{name: glue, config_name: TASK}`. Each job's best configuration is replayed over the seeds
(`hfsweep.replay`, in JOB/replay/; a finished replay is reused), and MULTIRUN_DIR gets:

- `glue.csv`: task, official metric, mean and sample std over the seeds of the final model's
  score (× 100), and the number of seeds;
- `glue.md`: one row per task, `mean ± std` per official metric, and the GLUE score.

With `--fair`, FAIR_DIR holds one folder per GLUE task (`experiments/glue/run_fair.sh`'s runs, or
their committed artefacts: `results.csv` and `select/selection.csv` and `select/results.csv`), or per
task one folder per search seed (TASK/sSEED, each such a run), and gets `fair.csv` and `fair.md`:
per search the winner's and the defaults' mean and std over the
selection's seeds (× 100), the winner's gain, the t-test paired by seed, and the compute of each
part in trial-hours: the search, the selection, and one defaults run (the mean of the defaults'
re-trainings), with the search's multiple of it and the multiple at which the search first reached
its best score (from the run's `anytime_curve.csv`): the budget that would have found the same winner.
Where the runs' results.csv hold `train_samples`, the same in training samples, which no machine's
speed changes (runs from before reports carried them have none: their files cannot give them).

With `--methods METHODS_DIR --defaults FAIR_DIR/TASK`, METHODS_DIR holds one search per
METHOD/sSEED folder (`experiments/glue/rte_search_methods.sh`'s runs, or their committed
artefacts: `results.csv`, `best.json`, `anytime_curve.csv`, `replay/replay.csv`), and gets
`methods.csv` and `methods.md`: per search its trials, trial-hours (and training samples, with its
multiple of one defaults run, where results.csv holds them) and best score on the search's
own training seed, when it found it, and its winner re-trained over the replay's seeds (its own
replay, or that of a search that found the same configuration; at the best checkpoint and at the
end), each against the defaults' re-trainings on the same seeds in the fair test's selection
(FAIR_DIR/TASK/select/), with the t-test paired by seed; then per method, the mean over its
searches' re-trainings.

Both then pool their searches, per task (`fair_pooled.csv`) or per method and model
(`methods_pooled.csv`), below their table: the mean over searches of each winner's mean gain over
the defaults on the same seeds, a 95% t interval over the searches (given the training seeds,
which every search shares here), and the share of searches whose winner beat the defaults
(`hfsweep.driver.results.pooled` says why a t interval over searches).

A task's score is the mean of its official metrics (MRPC and QQP: F1 and accuracy; STS-B: Pearson
and Spearman; MNLI: accuracy on the matched and on the mismatched validation set); the GLUE score
is the mean of the task scores, as the GLUE paper defines it, over the tasks the table holds.

The --fair and --methods tables are built in `hfsweep.cli.glue_fair`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import pandas as pd

from hfsweep.cli.glue_fair import write_fair_tables, write_methods_tables
from hfsweep.cli.glue_tasks import NAMES, OFFICIAL
from hfsweep.config.errors import ConfigError
from hfsweep.config.saved import read_config
from hfsweep.driver.results.tables import markdown
from hfsweep.run_dir import BEST_FILE, GLUE_TABLE, REPLAY_DIR, REPLAY_FILE


def glue_jobs(multirun_dir: str) -> dict[str, str]:
    """GLUE task → its job directory, for every finished sweep in the multirun."""
    jobs = {}
    for best in sorted(Path(multirun_dir).glob(f"*/{BEST_FILE}")):
        job = best.parent
        cfg = read_config(str(job))
        tasks = [e.get("config_name") for e in cfg["eval_metrics"] if isinstance(e, dict) and e.get("name") == "glue"]
        if not tasks or tasks[0] not in OFFICIAL:
            raise ConfigError(
                f"glue: job '{job}' scores no GLUE task; its eval_metrics need "
                f"{{name: glue, config_name: TASK}} (+experiment=glue)."
            )
        if tasks[0] in jobs:
            raise ConfigError(
                f"glue: '{jobs[tasks[0]]}' and '{job}' both sweep {tasks[0]}; give one multirun per table."
            )
        if tasks[0] == "mnli" and "mismatched" not in cfg["extra_validation"]:
            raise ConfigError(
                f"glue: job '{job}' (mnli) has no extra_validation.mismatched set; compose it with glue=mnli."
            )
        jobs[tasks[0]] = str(job)
    if not jobs:
        raise ConfigError(
            f"glue: '{multirun_dir}' holds no finished sweep (*/{BEST_FILE}); "
            f"pass the directory of a finished multirun."
        )
    return {task: jobs[task] for task in OFFICIAL if task in jobs}


def replayed(job: str, seeds: list[int]) -> pd.DataFrame:
    """The job's replay table over `seeds`: read when that replay finished before, run otherwise."""
    from hfsweep.cli.replay import replay

    table_path = os.path.join(job, REPLAY_DIR, REPLAY_FILE)
    if os.path.isfile(table_path):
        table = pd.read_csv(table_path, dtype={"seed": str}).set_index("seed")
        found = sorted(int(s) for s in table.index if s not in ("mean", "std"))
        if found != sorted(seeds):
            raise ConfigError(
                f"glue: '{table_path}' replayed seeds {found}, not {sorted(seeds)}; "
                f"move it away or ask for those seeds."
            )
        print(f"glue: reusing the replay in {os.path.dirname(table_path)}")
        return table
    print(f"glue: replaying {job} over seeds {seeds}")
    replay(job, seeds)
    return pd.read_csv(table_path, dtype={"seed": str}).set_index("seed")


def glue_table(tables: dict[str, pd.DataFrame]) -> tuple[pd.DataFrame, float]:
    """Long table (task, metric, mean, std, seeds) in points (× 100), and the GLUE score."""
    rows = []
    for task, table in tables.items():
        per_seed = table.drop(index=["mean", "std"])
        for label, column in OFFICIAL[task]:
            values = per_seed[column].astype(float) * 100
            rows.append(
                {"task": NAMES[task], "metric": label, "mean": values.mean(), "std": values.std(), "seeds": len(values)}
            )
    long = pd.DataFrame(rows)
    return long, long.groupby("task", sort=False)["mean"].mean().mean()


def write_tables(multirun_dir: str, long: pd.DataFrame, score: float) -> str:
    long.to_csv(os.path.join(multirun_dir, GLUE_TABLE[0]), index=False)
    shown = pd.DataFrame(
        {
            "task": task,
            "metric": " / ".join(group["metric"]),
            "score (mean ± std)": " / ".join(f"{m:.1f} ± {s:.1f}" for m, s in zip(group["mean"], group["std"])),
            "task score": f"{group['mean'].mean():.1f}",
        }
        for task, group in long.groupby("task", sort=False)
    )
    tasks = list(shown["task"])
    seeds = sorted(set(long["seeds"]))
    text = (
        f"{markdown(shown)}\n"
        f"GLUE score (mean of the {len(tasks)} task scores: {', '.join(tasks)}): **{score:.1f}**\n\n"
        f"Final models on the validation sets, {' or '.join(map(str, seeds))} seeds per task, in points (× 100).\n"
    )
    path = os.path.join(multirun_dir, GLUE_TABLE[1])
    Path(path).write_text(text)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hfsweep.glue", description=__doc__.splitlines()[0])
    parser.add_argument(
        "multirun_dir", help="a finished `python -m hfsweep -m +experiment=glue glue=...` directory (with --fair: OUT)"
    )
    parser.add_argument("--seeds", type=int, nargs="+", help="the replay's seeds, the same for every task")
    parser.add_argument("--fair", action="store_true", help="the fair test's table from run_fair.sh's OUT folder")
    parser.add_argument("--methods", action="store_true", help="the search methods' table from their searches' folder")
    parser.add_argument(
        "--defaults", help="with --methods: the fair test's task folder, whose selection re-trained the defaults"
    )
    args = parser.parse_args(argv)
    if [bool(args.seeds), args.fair, args.methods].count(True) != 1:
        parser.error("give --seeds for a multirun's table, --fair for the fair test's, or --methods for the methods'")
    if args.methods != bool(args.defaults):
        parser.error("--methods needs --defaults FAIR_DIR/TASK, and --defaults needs --methods")
    try:
        if args.fair:
            print(Path(write_fair_tables(args.multirun_dir)).read_text())
            return 0
        if args.methods:
            print(Path(write_methods_tables(args.multirun_dir, args.defaults)).read_text())
            return 0
        jobs = glue_jobs(args.multirun_dir)
        long, score = glue_table({task: replayed(job, args.seeds) for task, job in jobs.items()})
    except ConfigError as err:
        print(f"hfsweep: error: {err}", file=sys.stderr)
        return 2
    print(Path(write_tables(args.multirun_dir, long, score)).read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
