"""Play back a finished sweep's curves through other schedulers: `python -m hfsweep.simulate RUN_DIR scheduler=asha`.

Several at once compare in one table: `scheduler=asha,hyperband,median` (every combination of
comma-separated values, as Hydra's multirun would run them, with or without `-m`;
`scheduler.KEY=VALUE` overrides as in a sweep). RUN_DIR is a sweep's run directory, or any Tune
experiment directory (then give --metric and --mode). The trials must have run to the end (FIFO);
a sweep an early-stopping scheduler cut short is refused unless --treat-stopped-as-final. Writes
RUN_DIR/simulate/.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys

from hfsweep.config.errors import ConfigError
from hfsweep.config.saved import read_config, read_sweep
from hfsweep.run_dir import experiment_names, holds_sweep


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hfsweep.simulate", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", help="a finished sweep's run directory, or a Tune experiment directory")
    parser.add_argument("overrides", nargs="*", help="scheduler=NAME[,NAME...] and scheduler.KEY=VALUE overrides")
    parser.add_argument(
        "-m",
        "--multirun",
        action="store_true",
        help="Hydra's spelling, accepted: comma-separated values always simulate every combination",
    )
    parser.add_argument(
        "--shuffle", type=int, metavar="SEED", help="start the trials in this seed's shuffle of the recorded order"
    )
    parser.add_argument("--concurrency", type=int, metavar="N", help="trials at once (default: as recorded)")
    parser.add_argument(
        "--treat-stopped-as-final",
        action="store_true",
        help="simulate a sweep whose trials were stopped early, taking their last report as their end",
    )
    parser.add_argument("--metric", help="the metric to optimise (default: the sweep's)")
    parser.add_argument("--mode", choices=["min", "max"], help="(default: the sweep's)")
    args = parser.parse_intermixed_args(argv)  # flags anywhere among the overrides
    try:
        run(args)
    except ConfigError as err:
        print(f"hfsweep.simulate: error: {err}", file=sys.stderr)
        return 2
    return 0


def run(args) -> None:
    from hfsweep.driver.results import simulation
    from hfsweep.driver.search import simulate
    from hfsweep.driver.search.schedulers import build_stopper

    jobs = simulate.scheduler_jobs(args.overrides)  # refuse a bad command line before reading anything
    sweep_cfg, experiment_dirs = sweep_records(args.run_dir)
    metric, mode = args.metric or sweep_cfg.get("metric"), args.mode or sweep_cfg.get("mode")
    if not isinstance(metric, str) or mode not in ("min", "max"):
        raise ConfigError(
            f"{args.run_dir}: give the one metric to optimise and its mode, e.g. --metric eval_loss --mode min."
        )
    recording = simulate.read_recording(experiment_dirs)
    if not recording.trials:
        raise ConfigError(f"{args.run_dir}: no trial reported a result; simulate a sweep that ran.")
    stopped = recording.stopped_early()
    if stopped and not args.treat_stopped_as_final:
        names = ", ".join(f"{t.trial_id} ({recording.progress} {recording.last(t)})" for t in stopped)
        raise ConfigError(
            f"{args.run_dir}: {len(stopped)} trials ended before {recording.progress} "
            f"{recording.max_progress()}: {names}; simulate a sweep run with scheduler=fifo, "
            f"or pass --treat-stopped-as-final to take their last report as their end."
        )
    if "metric" not in sweep_cfg:  # a bare Tune experiment: its furthest trial's progress is the budget
        sweep_cfg = {"training": {"max_steps": recording.max_progress()}}
    schedulers = [
        simulate.build_simulated_scheduler(job, sweep_cfg, metric, mode) for job in jobs
    ]  # all refused or none
    sims = []
    for job, scheduler in zip(jobs, schedulers):
        # they see a report first, as in Tune
        stopper = build_stopper(read_sweep(args.run_dir)) if "stopper" in sweep_cfg else None
        sims.append(
            simulate.simulate(
                recording,
                scheduler,
                metric,
                mode,
                name=simulate.job_name(job),
                concurrency=args.concurrency,
                shuffle=args.shuffle,
                stopper=stopper,
            )
        )
        print(simulation.describe(sims[-1], metric, recording.progress))
    out_dir = os.path.join(args.run_dir, simulation.SIMULATE_DIR)
    comparison = simulation.write_simulations(sims, out_dir, metric, recording.progress)
    print(comparison.to_string(index=False))
    print(f"Wrote {', '.join(s.name.replace(' ', '-') for s in sims)} (.md, .csv) and comparison.md in {out_dir}")


def sweep_records(run_dir: str) -> tuple[dict, list[str]]:
    """(the sweep's config, its Tune experiment directories: its own, then those `resume --extend`
    added); an empty config and the one directory for a bare Tune experiment."""
    if not os.path.isdir(run_dir):
        raise ConfigError(f"{run_dir}: no such directory; pass a finished sweep's run directory.")
    cfg, experiment_dirs = {}, [run_dir]
    if holds_sweep(run_dir):
        cfg = read_config(run_dir)
        experiment_dirs = [os.path.join(run_dir, name) for name in experiment_names(run_dir, cfg["name"])]
    elif not glob.glob(os.path.join(run_dir, "experiment_state-*.json")):
        raise ConfigError(
            f"{run_dir}: neither a sweep's run directory (resolved_config.yaml) nor a Tune experiment "
            f"directory (experiment_state-*.json); pass one of those."
        )
    if not glob.glob(os.path.join(experiment_dirs[0], "experiment_state-*.json")):
        raise ConfigError(
            f"{run_dir}: no results (no Tune experiment in {experiment_dirs[0]}); simulate a sweep that ran."
        )
    return cfg, experiment_dirs


if __name__ == "__main__":
    sys.exit(main())
