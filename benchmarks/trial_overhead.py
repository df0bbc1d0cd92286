"""Benchmark 2: fixed overhead per trial, trials run one at a time.

For each trial: `startup_s`, the time from the trial function's first line to the first optimizer
step (reported by the worker); and the whole trial's share of the sweep's wall time minus its
training time (first step to last report). Tiny GPT-2, 40 steps, eval and checkpoint every 10.

The baseline, in the same invocation and on the same Ray: Ray Train's own floor, a plain
`TorchTrainer` with the same number of workers whose training function is empty (controller,
placement group, worker actors and process group, and nothing else); and, alternated with it, the
same fit whose function only imports `transformers.Trainer`, which any trial that trains with the
Trainer on Ray Train pays (on this 2-core machine about 4.5 CPU seconds per worker).

    python benchmarks/trial_overhead.py --workers 2 --trials 3
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from _common import config, median_spread, run_sweep

from hfsweep.config.schema import ClusterConfig, typed
from hfsweep.driver.ray_cluster import init_ray


def import_trainer() -> None:
    from transformers import Trainer  # noqa: F401


def empty_fit_seconds(workers: int, function=lambda: None) -> float:
    """Wall time of a plain Train V2 `fit()` whose training function does nothing (or `function`)."""
    import ray.train
    from ray.train.torch import TorchTrainer

    start = time.perf_counter()
    TorchTrainer(
        function,
        scaling_config=ray.train.ScalingConfig(num_workers=workers if workers > 1 else 0),  # 0: local mode, as hfsweep
        run_config=ray.train.RunConfig(storage_path=tempfile.mkdtemp(prefix="train-floor-")),
    ).fit()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args()
    values = ",".join(["1e-3"] * args.trials)
    overrides = [
        "scheduler=fifo",
        "training.max_steps=40",
        f"search_space.training.learning_rate.values=[{values}]",
        f"cluster.num_workers={args.workers}",
        "cluster.max_concurrent_trials=1",
    ]
    init_ray(typed(ClusterConfig, config(overrides, "/tmp/unused")["cluster"]))
    run_sweep(overrides[:2] + ["search_space.training.learning_rate.values=[1e-3]"] + overrides[3:])  # warm-up
    wall, results = run_sweep(overrides)
    startups, trainings = [], []
    for result in results:
        history = result.metrics_dataframe
        startups.append(float(history["startup_s"].dropna().iloc[0]))
        trainings.append(float(history["time_total_s"].iloc[-1]) - startups[-1])
    per_trial_overhead = (wall - sum(trainings)) / len(trainings)
    print(f"workers={args.workers} trials={args.trials} sweep wall {wall:.1f} s")
    print(f"trial start -> first step (s): {median_spread(startups)}")
    print(f"training, first step -> last report (s): {median_spread(trainings)}")
    print(f"non-training time per trial (s): {per_trial_overhead:.1f}  (targets: <= 10 at 2 workers, <= 4 at 1)")
    floors, trainer_floors = [], []
    for _ in range(args.trials):  # alternated
        floors.append(empty_fit_seconds(args.workers))
        trainer_floors.append(empty_fit_seconds(args.workers, import_trainer))
    print(f"baseline: plain TorchTrainer.fit() of an empty function (s): {median_spread(floors)}")
    print(f"non-training time per trial / empty fit: {per_trial_overhead / statistics.median(floors):.2f}")
    print(f"second baseline: a fit that only imports transformers.Trainer (s): {median_spread(trainer_floors)}")
    print(f"non-training time per trial / that fit: {per_trial_overhead / statistics.median(trainer_floors):.2f}")


if __name__ == "__main__":
    main()
