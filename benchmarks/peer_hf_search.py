"""Benchmark 4: hfsweep against Hugging Face's own `Trainer.hyperparameter_search(backend="ray")`.

Same tiny GPT-2, data, 4-point learning-rate grid, ASHA settings and trial concurrency (2 at a
time); wall time end to end and the best eval loss of each, measured in this one invocation.
Target: hfsweep at 1 worker per trial no slower (ratio <= 1.0) with an equal or better best metric.

    python benchmarks/peer_hf_search.py
"""

from __future__ import annotations

import argparse
import glob
import os
import tempfile
import time

import datasets
from _common import config, run_sweep
from ray import tune
from ray.tune.schedulers import ASHAScheduler
from transformers import Trainer, TrainingArguments, default_data_collator, set_seed

from _common import prepare_data
from hfsweep.data.tokenizers import load_tokenizer
from hfsweep.models import build_model
from hfsweep.driver.ray_cluster import init_ray
from hfsweep.tasks import get_task

GRID = [3e-3, 1e-3, 1e-4, 1e-5]
STEPS, EVAL_STEPS, GRACE = 60, 10, 20


def hf_search(cfg: dict) -> tuple[float, float]:
    data = prepare_data(cfg)
    tokenizer = load_tokenizer(data.tokenizer_path)

    def model_init(trial=None):
        set_seed(cfg["seed"])
        return build_model(cfg["model"], tokenizer, task=get_task(cfg["model"]["task"]))

    train = datasets.Dataset.from_parquet(sorted(glob.glob(os.path.join(data.train_path, "*.parquet"))))
    validation = datasets.load_from_disk(data.validation_path)
    training = {k: v for k, v in cfg["training"].items() if k != "learning_rate"}
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(output_dir=out, use_cpu=True, report_to="none", **training)
        trainer = Trainer(model_init=model_init, args=args, train_dataset=train, eval_dataset=validation,
                          processing_class=tokenizer, data_collator=default_data_collator)
        start = time.perf_counter()
        best = trainer.hyperparameter_search(
            hp_space=lambda _: {"learning_rate": tune.grid_search(GRID)},
            backend="ray",
            n_trials=1,
            direction="minimize",
            scheduler=ASHAScheduler(metric="objective", mode="min", max_t=STEPS // EVAL_STEPS, grace_period=GRACE // EVAL_STEPS),
            resources_per_trial={"cpu": 2},  # 2 trials at a time on the 8 logical CPUs hfsweep's trials use
            max_concurrent_trials=2,
        )
        return time.perf_counter() - start, best.objective


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    grid = ",".join(str(v) for v in GRID)
    base = [f"training.max_steps={STEPS}", f"scheduler.grace_period={GRACE}", f"search_space.training.learning_rate.values=[{grid}]",
            "cluster.max_concurrent_trials=2"]
    cfg = config(base, "/tmp/unused")
    init_ray(cfg["cluster"])
    hf_wall, hf_best = hf_search(cfg)
    print(f"HF hyperparameter_search: {hf_wall:.1f} s, best eval_loss {hf_best:.4f}")
    for workers in args.workers:
        wall, results = run_sweep([*base, f"cluster.num_workers={workers}"])
        best = results.get_best_result(metric="eval_loss", mode="min", scope="all").metrics_dataframe["eval_loss"].min()
        print(f"hfsweep, {workers} worker(s)/trial: {wall:.1f} s, best eval_loss {best:.4f}, wall ratio hfsweep/HF {wall / hf_wall:.2f}")


if __name__ == "__main__":
    main()
