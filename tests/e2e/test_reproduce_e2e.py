"""Keeping and reproducing a sweep, end to end: the loggers, the checkpoint budget, replay over
seeds, and the same results from the same seed."""

from __future__ import annotations

import glob
import json
import os
import struct

import mlflow
import pandas as pd
import pytest
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from transformers import AutoModelForCausalLM

from hfsweep.cli import replay
from hfsweep.config.schema import SweepConfig, typed
from hfsweep.driver.results.best import best_trial
from tests.conftest import run_sweep

MAX_STEPS = 20
LEARNING_RATES = [1e-2, 5e-3, 3e-3, 2e-3, 1e-3, 1e-4, 1e-5, 1e-6]  # the 8-trial sweep
BUDGET_SWEEP = [
    f"training.max_steps={MAX_STEPS}",
    "training.eval_steps=5",
    "training.save_steps=5",
    "training.logging_steps=5",
    "scheduler.grace_period=5",
    f"search_space.training.learning_rate.values=[{','.join(map(str, LEARNING_RATES))}]",
    "cluster.num_workers=1",
    "checkpoints.keep_per_trial=1",
    "logger=[tensorboard,wandb,mlflow]",
]


@pytest.fixture(scope="module")
def budget_sweep(ray_cluster, tmp_path_factory, cache_dir):
    return run_sweep(BUDGET_SWEEP, tmp_path_factory.mktemp("budget"), cache_dir)


def checkpoints_on_disk(cfg: dict) -> list[str]:
    return glob.glob(os.path.join(cfg["cluster"]["storage_path"], cfg["name"], "train_runs", "*", "*", "checkpoint-*"))


def test_budget_keeps_one_checkpoint_per_completed_trial_and_the_best(budget_sweep):
    cfg, results = budget_sweep
    assert len(results) == len(LEARNING_RATES) and results.errors == []
    completed = [r for r in results if r.metrics["trainer_finished"]]
    assert completed and len(completed) < len(LEARNING_RATES), "ASHA should stop some trials and complete others"
    best = best_trial(results, typed(SweepConfig, cfg))
    kept = sorted(checkpoints_on_disk(cfg))
    assert best.checkpoint_path in kept
    assert len(kept) <= len(completed) + 1
    for result in completed:
        history = result.metrics_dataframe
        trial_best = history.loc[history["eval_loss"].idxmin(), "checkpoint_path"]
        assert [p for p in kept if p in set(history["checkpoint_path"])] == [trial_best]
    exported = os.path.join(cfg["cluster"]["storage_path"], "best")
    assert AutoModelForCausalLM.from_pretrained(exported).num_parameters() > 0


def trial_dirs(cfg: dict) -> list[str]:
    return sorted(glob.glob(os.path.join(cfg["cluster"]["storage_path"], cfg["name"], "run_trial_*")))


def test_tensorboard_writes_event_files_per_trial(budget_sweep):
    cfg, results = budget_sweep
    for trial_dir in trial_dirs(cfg):
        (events,) = glob.glob(os.path.join(trial_dir, "events.out.tfevents.*"))
        accumulator = EventAccumulator(events).Reload()
        assert "ray/tune/eval_loss" in accumulator.Tags()["scalars"]


def wandb_records(path: str):
    """The records of an offline W&B run file (`run-ID.wandb`): W&B's LevelDB-style log of
    `wandb_internal_pb2.Record` protos, which `wandb sync` uploads."""
    from wandb.proto.wandb_internal_pb2 import Record

    block, header = 32768, 7
    data = open(path, "rb").read()
    assert data[:4] == b":W&B"
    pos, record = header, b""
    while pos + header <= len(data):
        if block - pos % block < header:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + header])
        record += data[pos + header : pos + header + length]
        pos += header + length
        if kind in (1, 4):  # a full record, or the last chunk of one
            yield Record.FromString(record)
            record = b""


def test_wandb_offline_runs_hold_every_trials_metrics(budget_sweep):
    cfg, results = budget_sweep
    storage = cfg["cluster"]["storage_path"]
    for result in results:
        trial_id = result.metrics["trial_id"]
        (run_file,) = glob.glob(os.path.join(storage, "wandb", f"offline-run-*-{trial_id}", f"run-{trial_id}.wandb"))
        records = list(wandb_records(run_file))
        (run,) = [r.run for r in records if r.HasField("run")]
        assert (run.run_group, run.display_name) == (storage, f"run_trial_{trial_id}")
        history = [
            {item.key or ".".join(item.nested_key): json.loads(item.value_json) for item in r.history.item}
            for r in records
            if r.HasField("history")
        ]
        assert [h["step"] for h in history] == list(result.metrics_dataframe["step"])
        assert [h["eval_loss"] for h in history] == pytest.approx(list(result.metrics_dataframe["eval_loss"]))


def test_mlflow_store_holds_one_run_per_trial_in_the_sweeps_experiment(budget_sweep):
    cfg, results = budget_sweep
    storage = cfg["cluster"]["storage_path"]
    client = mlflow.MlflowClient(f"sqlite:///{storage}/mlflow.db")
    experiment = client.get_experiment_by_name(storage)
    by_trial = {run.data.tags["trial_name"]: run for run in client.search_runs([experiment.experiment_id])}
    for result in results:
        run = by_trial[f"run_trial_{result.metrics['trial_id']}"]
        assert run.info.status == "FINISHED"
        assert float(run.data.params["training/learning_rate"]) == result.config["training"]["learning_rate"]
        history = client.get_metric_history(run.info.run_id, "eval_loss")
        assert [m.value for m in history] == pytest.approx(list(result.metrics_dataframe["eval_loss"]))


def test_replay_retrains_the_best_configuration_per_seed_at_full_budget(budget_sweep):
    cfg, _ = budget_sweep
    run_dir = cfg["cluster"]["storage_path"]
    best = json.loads(open(os.path.join(run_dir, "best.json")).read())
    assert replay.main([run_dir, "--seeds", "1", "2"]) == 0

    out = os.path.join(run_dir, "replay")
    replayed = yaml.safe_load(open(os.path.join(out, "resolved_config.yaml")))
    assert replayed["training"]["learning_rate"] == best["hyperparameters"]["training.learning_rate"]
    assert set(pd.read_csv(os.path.join(out, "results.csv"))["ended"]) == {"completed"}
    table = pd.read_csv(os.path.join(out, "replay.csv"), dtype={"seed": str}).set_index("seed")
    assert list(table.index) == ["1", "2", "mean", "std"]
    assert list(table.loc[["1", "2"], "step"]) == [MAX_STEPS, MAX_STEPS]
    losses = table.loc[["1", "2"], "last_eval_loss"]
    assert losses["1"] != losses["2"], "the seed did not reach the training run"
    assert table.loc["mean", "last_eval_loss"] == pytest.approx(losses.mean())
    assert table.loc["std", "last_eval_loss"] == pytest.approx(losses.std())
    assert f"{losses.mean():.4f} ± {losses.std():.4f}" in open(os.path.join(out, "replay.md")).read()


REPRODUCIBLE = [
    "search_alg=random",
    "search_space=learning_rate_loguniform",
    "num_samples=2",
    "search_alg.defaults_trial=false",  # two draws show the seed fixes them
    "scheduler=fifo",
    "training.max_steps=10",
    "training.eval_steps=5",
    "training.save_steps=5",
    "cluster.num_workers=1",
]


def test_same_seed_and_config_give_the_same_trials_and_metrics(ray_cluster, tmp_path, cache_dir):
    runs = []
    for name in ("first", "second"):
        results = run_sweep(REPRODUCIBLE, tmp_path / name, cache_dir)[1]
        assert results.errors == []
        runs.append({r.config["training"]["learning_rate"]: list(r.metrics_dataframe["eval_loss"]) for r in results})
    first, second = runs
    assert len(first) == 2 and sorted(first) == sorted(second)
    for learning_rate, losses in first.items():
        assert second[learning_rate] == pytest.approx(losses, rel=1e-4)
    assert not glob.glob(str(tmp_path / "first" / "sweep" / "*" / "events.out.tfevents.*")), (
        "logger=none wrote TensorBoard files"
    )
