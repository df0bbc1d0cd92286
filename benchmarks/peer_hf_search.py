"""Benchmark 4: hfsweep against Hugging Face's own `Trainer.hyperparameter_search(backend="ray")`.

Same tiny GPT-2, prepared data, 4-point learning-rate grid, ASHA settings (hfsweep's: rungs at
steps 20 and 40 of 60, reduction factor 2; HF's search counts reports, one every 10 steps) and
trial concurrency (2 at a time), and the same resources per trial: 1 logical CPU and one
torch thread (OMP_NUM_THREADS=1 for every Ray process, `torch.set_num_threads(1)` where each
trial trains, and each trial's thread count recorded and printed). hfsweep runs each trial in
one process (`cluster.num_workers=1`), as HF's search does.

Arms, in an order rotated across repeats (each arm first once every three repeats):
  - `HF`: `hyperparameter_search` as HF users get it (Tune's default: a fresh actor per trial);
  - `HF reuse`: the same with `reuse_actors=True` passed through to Tune, as hfsweep's
    in-process trials reuse their actors;
  - `hfsweep`: `python -m hfsweep`'s sweep (`sweep.run`).
HF's arms time `hyperparameter_search` alone; hfsweep's times its whole `sweep.run` (its data
cache lookup, Tune, results and report writing): the data is prepared once before any arm.

Both arms' best eval loss as the same two statistics: `best` is the lowest eval loss of any
report of any trial; `final` is the lowest of the trials' last reports (what HF's `BestRun`
returns with its default RAY_SCOPE=last; an ASHA-stopped trial's last report is at step 20).
Printed per repeat, then median (min–max, n) of the wall, the wall ratio to `HF` and both metrics.
Target: hfsweep's wall ratio <= 1.0 with an equal or better best metric.

    python benchmarks/peer_hf_search.py --repeats 3
"""

from __future__ import annotations

import os

THREADS = 1  # per trial, for every arm; set before torch or Ray is imported anywhere
os.environ["OMP_NUM_THREADS"] = str(THREADS)

import argparse  # noqa: E402
import glob  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import datasets  # noqa: E402
from _common import config, prepare_data, run_sweep  # noqa: E402
from ray import tune  # noqa: E402
from ray.tune.schedulers import ASHAScheduler  # noqa: E402
from transformers import Trainer, TrainingArguments, default_data_collator, set_seed  # noqa: E402

from hfsweep.config.schema import ClusterConfig, ModelConfig, typed  # noqa: E402
from hfsweep.data.tokenizers import load_tokenizer  # noqa: E402
from hfsweep.driver import tuner  # noqa: E402
from hfsweep.driver.ray_cluster import init_ray  # noqa: E402
from hfsweep.models import build_model  # noqa: E402
from hfsweep.tasks import get_task  # noqa: E402

GRID = [3e-3, 1e-3, 1e-4, 1e-5]
STEPS, EVAL_STEPS, GRACE = 60, 10, 20
CONCURRENT = 2
BASE = [f"training.max_steps={STEPS}", f"scheduler.grace_period={GRACE}",
        f"search_space.training.learning_rate.values=[{','.join(str(v) for v in GRID)}]",
        f"cluster.max_concurrent_trials={CONCURRENT}", "cluster.num_workers=1", "cluster.resources_per_worker.CPU=1"]


def record_threads(folder: str) -> None:
    """Pin this trial process to THREADS torch threads and note what it runs with in `folder`."""
    import torch

    torch.set_num_threads(THREADS)
    Path(folder, f"{os.getpid()}-{time.monotonic_ns()}").write_text(
        f"{torch.get_num_threads()} {os.environ.get('OMP_NUM_THREADS')}")


def threads_seen(folder: str) -> str:
    seen = sorted({p.read_text() for p in Path(folder).iterdir()})
    return "; ".join(f"torch threads {s.split()[0]} (OMP_NUM_THREADS={s.split()[1]})" for s in seen) or "none recorded"


def outcome(trials: dict) -> tuple[float, float, str]:
    """From {learning rate: the trial's reports}: the lowest eval loss of any report, the lowest of
    the trials' last reports, and each trial's steps trained and last eval loss."""
    assert trials, "no trial reported"
    losses = {lr: history["eval_loss"].dropna() for lr, history in sorted(trials.items(), reverse=True)}
    assert all(len(l) for l in losses.values()), "a trial without an eval_loss report"  # noqa: E741
    each = " / ".join(f"{lr:g}: {len(l) * EVAL_STEPS} steps, {l.iloc[-1]:.4f}"
                      for lr, l in losses.items())  # noqa: E741
    return min(l.min() for l in losses.values()), min(l.iloc[-1] for l in losses.values()), each  # noqa: E741


def hf_search(cfg: dict, reuse_actors: bool, threads_dir: str) -> tuple[float, float, float, str]:
    data = prepare_data(cfg)
    tokenizer = load_tokenizer(data.tokenizer_path)

    def model_init(trial=None):
        record_threads(threads_dir)
        set_seed(cfg["seed"])
        return build_model(typed(ModelConfig, cfg["model"]), tokenizer, task=get_task(cfg["model"]["task"]))

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
            scheduler=ASHAScheduler(metric="objective", mode="min", max_t=STEPS // EVAL_STEPS,
                                    grace_period=GRACE // EVAL_STEPS,
                                    # hfsweep's (conf/scheduler/asha.yaml)
                                    reduction_factor=cfg["scheduler"]["reduction_factor"]),
            resources_per_trial={"cpu": THREADS},
            max_concurrent_trials=CONCURRENT,
            reuse_actors=reuse_actors,
        )
        wall = time.perf_counter() - start
    analysis = best.run_summary
    return (wall, *outcome({t.config["learning_rate"]: analysis.trial_dataframes[t.trial_id] for t in analysis.trials}))


def hfsweep_search(threads_dir: str) -> tuple[float, float, float, str]:
    real_run_trial = tuner.run_trial  # what `trainable_for` binds (hfsweep.driver.tuner)

    def run_trial(config, **kwargs):  # the trial's own process: it trains there (num_workers=1)
        record_threads(threads_dir)
        return real_run_trial(config, **kwargs)

    tuner.run_trial = run_trial
    try:
        wall, results = run_sweep(BASE)
    finally:
        tuner.run_trial = real_run_trial
    assert len(results) == len(GRID) and not results.errors, results.errors
    return (wall, *outcome({r.config["training"]["learning_rate"]: r.metrics_dataframe for r in results}))


def spread(values: list[float], digits: int) -> str:
    """median (min–max, n)"""
    return (f"{statistics.median(values):.{digits}f} "
            f"({min(values):.{digits}f}–{max(values):.{digits}f}, n={len(values)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    cfg = config(BASE, "/tmp/unused")
    init_ray(typed(ClusterConfig, cfg["cluster"]))
    prepare_data(cfg)  # once, before any arm is timed
    arms = {
        "HF": lambda d: hf_search(cfg, reuse_actors=False, threads_dir=d),
        "HF reuse": lambda d: hf_search(cfg, reuse_actors=True, threads_dir=d),
        "hfsweep": hfsweep_search,
    }
    names = list(arms)
    runs = {name: [] for name in names}
    for repeat in range(args.repeats):
        order = names[repeat % len(names):] + names[:repeat % len(names)]
        for name in order:
            threads_dir = tempfile.mkdtemp(prefix="hfsweep-bench-threads-")
            wall, best, final, each = arms[name](threads_dir)
            runs[name].append({"wall": wall, "best": best, "final": final})
            print(f"repeat {repeat + 1}, {name}: {wall:.1f} s, best eval_loss {best:.4f}, final {final:.4f}; "
                  f"trials ran with {threads_seen(threads_dir)}; per lr: {each}", flush=True)
    print(f"\n{len(GRID)}-point lr grid, ASHA (grace {GRACE} of {STEPS} steps, "
          f"reduction factor {cfg['scheduler']['reduction_factor']}), {CONCURRENT} trials at a time, "
          f"1 CPU and {THREADS} torch thread per trial; order rotated over {args.repeats} repeats")
    print("| arm | wall s | wall / HF (same repeat) | best eval_loss (any report) | final eval_loss (last reports) |")
    print("| --- | --- | --- | --- | --- |")
    for name in names:
        walls = [r["wall"] for r in runs[name]]
        ratios = [r["wall"] / h["wall"] for r, h in zip(runs[name], runs["HF"])]
        print(f"| {name} | {spread(walls, 1)} | {spread(ratios, 2)} | {spread([r['best'] for r in runs[name]], 4)} | "
              f"{spread([r['final'] for r in runs[name]], 4)} |")


if __name__ == "__main__":
    main()
