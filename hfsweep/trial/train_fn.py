"""What a trial ships to Ray Train: the training function, and for a worker group the report forwarder.

Train's controller actor unpickles both, and a pickled function imports its module there. This
module imports nothing heavy, so the controller never loads torch, transformers or datasets (seconds
of CPU per trial on a small machine); the chosen loop is imported on the workers, which need it.
"""

from __future__ import annotations

import importlib

import ray.train
from ray.train import UserCallback
from ray.util.queue import Queue

from hfsweep.contract.metrics import combine_ranks


def train_loop(config: dict) -> None:
    """Run the trial's training loop (`loop.name`) on its `TrainJob`, on this worker.

    The data shard is requested first: that starts Ray Data's split coordinator (an actor to
    spawn) while this worker imports torch and transformers for the loop.
    """
    # imported here, on the worker: the controller unpickling this module imports nothing more
    from hfsweep.compat import quiet_bitsandbytes_cpu_notice, quiet_transformers_integrations

    ray.train.get_dataset_shard("train")
    quiet_transformers_integrations()
    quiet_bitsandbytes_cpu_notice()
    job = config["job"]  # a TrainJob (hfsweep.contract.recipe), built by the trial
    importlib.import_module(f"hfsweep.loops.{job.recipe.loop}").train_loop_per_worker(job)


class ForwardToTune(UserCallback):
    """Runs in the Train controller: queue the workers' metrics, combined (`combine_ranks`), and the
    checkpoint path for the trial."""

    def __init__(self, queue: Queue):
        self.queue = queue

    def after_report(self, run_context, metrics, checkpoint):
        self.queue.put((combine_ranks(metrics), checkpoint.path if checkpoint else None))
