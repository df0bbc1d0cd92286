"""Benchmark 3: the same 8-configuration learning-rate grid under ASHA and under FIFO.

Reports the wall-time ratio ASHA / FIFO (target <= 0.5) and whether both found the same best
configuration, measured in this one invocation.

    python benchmarks/sweep_efficiency.py --workers 1
    python benchmarks/sweep_efficiency.py --workers 1 --steps 200 --asha scheduler.reduction_factor=4
"""

from __future__ import annotations

import argparse

from _common import config, run_sweep

from hfsweep.config.schema import ClusterConfig, typed
from hfsweep.driver.ray_cluster import init_ray

GRID = "search_space.training.learning_rate.values=[1e-2,5e-3,3e-3,2e-3,1e-3,5e-4,1e-4,1e-5]"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--asha", nargs="*", default=[],
                        help="overrides for the ASHA run, e.g. scheduler.reduction_factor=4")
    args = parser.parse_args()
    common = [GRID, f"training.max_steps={args.steps}", f"cluster.num_workers={args.workers}"]
    init_ray(typed(ClusterConfig, config(common, "/tmp/unused")["cluster"]))
    walls, best = {}, {}
    for scheduler, extra in (("fifo", []), ("asha", args.asha)):
        walls[scheduler], results = run_sweep([*common, f"scheduler={scheduler}", *extra])
        result = results.get_best_result(metric="eval_loss", mode="min", scope="all")
        best[scheduler] = (result.config["training"]["learning_rate"], result.metrics_dataframe["eval_loss"].min())
        steps = sorted(r.metrics["step"] for r in results)
        print(f"{scheduler}: {walls[scheduler]:.1f} s, final steps {steps}, best lr {best[scheduler][0]} "
              f"eval_loss {best[scheduler][1]:.4f}")
    print(f"wall ratio asha/fifo: {walls['asha'] / walls['fifo']:.3f}  (target <= 0.5)")
    print(f"same best configuration: {best['asha'][0] == best['fifo'][0]}")


if __name__ == "__main__":
    main()
