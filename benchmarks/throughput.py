"""Benchmark 1: steady-state training throughput, one hfsweep trial vs a plain transformers.Trainer.

Same model, data, batch size, steps, eval/save cadence and number of processes. Throughput is tokens
per second between the first and the last checkpoint (so start-up is excluded from both); the
ratio hfsweep / plain is measured in this one invocation. Target: >= 0.97.

    python benchmarks/throughput.py --workers 1 --repeats 3
"""

from __future__ import annotations

import argparse

from _common import config, median_spread, plain_trainer_saves, run_sweep

from hfsweep.config.schema import ClusterConfig, typed
from hfsweep.driver.ray_cluster import init_ray


def tokens_per_second(steps: list[int], seconds: float, cfg: dict, workers: int) -> float:
    tokens_per_step = cfg["training"]["per_device_train_batch_size"] * workers * cfg["data"]["block_size"]
    return (steps[-1] - steps[0]) * tokens_per_step / seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    overrides = [
        "scheduler=fifo",
        f"training.max_steps={args.steps}",
        "search_space.training.learning_rate.values=[1e-3]",
        f"cluster.num_workers={args.workers}",
    ]
    cfg = config(overrides, "/tmp/unused")
    init_ray(typed(ClusterConfig, cfg["cluster"]))
    ratios, plain_tps, sweep_tps = [], [], []
    for _ in range(args.repeats):
        saves = plain_trainer_saves(cfg, args.workers)
        plain = tokens_per_second([s for s, _ in saves], saves[-1][1] - saves[0][1], cfg, args.workers)
        _, results = run_sweep(overrides)
        history = results[0].metrics_dataframe
        seconds = history["time_this_iter_s"].iloc[1:].sum()  # from the first report to the last
        ours = tokens_per_second(list(history["step"]), seconds, cfg, args.workers)
        plain_tps.append(plain)
        sweep_tps.append(ours)
        ratios.append(ours / plain)
    print(f"workers={args.workers} steps={args.steps}")
    print(f"plain Trainer tokens/s: {median_spread(plain_tps)}")
    print(f"hfsweep trial tokens/s: {median_spread(sweep_tps)}")
    print(f"ratio hfsweep/plain:    {median_spread(ratios)}  (target >= 0.97)")


if __name__ == "__main__":
    main()
