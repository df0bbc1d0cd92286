"""The Tune trainable: one trial builds and fits one Ray Train `TorchTrainer`.

Train V2 runs user callbacks in its controller actor while the trial function blocks in `fit()`.
`ForwardToTune` sends every report (metrics plus the path of the checkpoint the workers wrote)
through a Ray queue back to the trial process, whose main thread re-reports it to Tune with a tiny
pointer checkpoint holding only that path. Tune therefore sees every checkpoint, so schedulers can
restore trials and PBT can exploit, without a second copy of the weights.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
import time
from typing import Optional

import ray.exceptions
import ray.train
from ray import tune
from ray.train import UserCallback
from ray.train.torch import TorchTrainer
from ray.util.queue import Queue

from hfsweep.data import PreparedData, load_train_dataset, prepare
from hfsweep.search import apply_sampled
from hfsweep.worker import train_loop_per_worker

POINTER_FILE = "hfsweep_checkpoint.json"


class ForwardToTune(UserCallback):
    """Runs in the Train controller: queue rank 0's metrics and the checkpoint path for the trial."""

    def __init__(self, queue: Queue):
        self.queue = queue

    def after_report(self, run_context, metrics, checkpoint):
        self.queue.put((metrics[0], checkpoint.path if checkpoint else None))


def read_pointer(checkpoint: Optional[tune.Checkpoint]) -> Optional[str]:
    """The Hugging Face checkpoint directory a Tune pointer checkpoint refers to."""
    if checkpoint is None:
        return None
    with checkpoint.as_directory() as d, open(os.path.join(d, POINTER_FILE)) as f:
        return json.load(f)["path"]


def _report_to_tune(metrics: dict, checkpoint_path: Optional[str]) -> None:
    if checkpoint_path is None:
        tune.report(metrics)
        return
    metrics = {**metrics, "checkpoint_path": checkpoint_path}
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, POINTER_FILE), "w") as f:
            json.dump({"path": checkpoint_path, "step": metrics.get("step")}, f)
        tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(d))


def train_run_name(trial_id: str, resume_from: Optional[str]) -> str:
    """Stable per (trial, starting checkpoint): a retried trial resumes its own run, while a
    trial restored from another checkpoint (PBT) starts a fresh run from that checkpoint."""
    if resume_from is None:
        return trial_id
    return f"{trial_id}-from-{hashlib.sha256(resume_from.encode()).hexdigest()[:8]}"


def data_changed(cfg: dict, trial_cfg: dict) -> bool:
    return trial_cfg["data"] != cfg["data"] or trial_cfg["model"]["tokenizer"] != cfg["model"]["tokenizer"]


def run_trial(sampled: dict, *, cfg: dict, data: PreparedData, train_dataset) -> None:
    """Tune function trainable: fit a TorchTrainer in a thread, re-report its results to Tune."""
    logging.getLogger("ray.train").setLevel(logging.WARNING)  # one line per checkpoint otherwise
    started_at = time.time()
    trial_cfg = apply_sampled(cfg, sampled)
    if data_changed(cfg, trial_cfg):  # a searched data or tokenizer key: prepare (cached) for this trial
        data = prepare(trial_cfg)
        train_dataset = load_train_dataset(data)
    resume_from = read_pointer(tune.get_checkpoint())
    cluster = trial_cfg["cluster"]  # any key may be searched, cluster.* included
    reports = Queue(actor_options={"num_cpus": 0})
    trainer = TorchTrainer(
        train_loop_per_worker,
        train_loop_config={
            "cfg": trial_cfg,
            "tokenizer_path": data.tokenizer_path,
            "validation_path": data.validation_path,
            "resume_from": resume_from,
            "trial_started_at": started_at,
        },
        scaling_config=ray.train.ScalingConfig(
            num_workers=cluster["num_workers"],
            use_gpu=cluster["use_gpu"],
            resources_per_worker=dict(cluster["resources_per_worker"]),
        ),
        run_config=ray.train.RunConfig(
            name=train_run_name(tune.get_context().get_trial_id(), resume_from),
            storage_path=os.path.join(cluster["storage_path"], cfg["name"], "train_runs"),
            callbacks=[ForwardToTune(reports)],
            failure_config=ray.train.FailureConfig(max_failures=cluster["max_failures"]),
            logging_config=ray.train.LoggingConfig(log_level="WARNING"),
        ),
        datasets={"train": train_dataset},
    )

    outcome: dict = {}

    def fit() -> None:
        try:
            trainer.fit()
        except BaseException as err:  # re-raised in the trial's main thread below
            outcome["error"] = err
        finally:
            try:
                reports.put(None)
            except ray.exceptions.RayActorError:
                pass  # the queue died with this trial, which Tune is stopping: nobody is left to read it

    thread = threading.Thread(target=fit, name="hfsweep-fit", daemon=True)
    thread.start()
    while (item := reports.get()) is not None:
        _report_to_tune(*item)
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
