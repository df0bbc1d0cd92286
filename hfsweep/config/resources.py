"""What one trial asks of the cluster: shared by validation (before Ray), the driver and the trial."""

from __future__ import annotations

# CPUs the trials leave free for Ray Data's read tasks, which stream the train split's shards to
# the workers: with every CPU held by trials they could never be scheduled (Ray Data's guidance).
DATA_CPUS = 1


def trains_in_process(cluster: dict) -> bool:
    """A single-worker trial trains in the trial's own process (Train V2 local mode): no
    controller, placement group or worker actors to start and stop."""
    return cluster["num_workers"] == 1


def resource_names(resources: dict) -> dict:
    """Ray's spelling: CPU and GPU upper-case (`cpu: 1` is accepted), custom resources as given."""
    return {k.upper() if k.lower() in ("cpu", "gpu") else k: v for k, v in resources.items()}


def trial_resources(cluster: dict) -> dict:
    """What one trial holds: every worker's resources, plus 1 CPU for the trial process when it
    drives a worker group (an in-process trial is its one worker)."""
    per_worker = resource_names(cluster["resources_per_worker"])
    per_worker.setdefault("CPU", 1)
    if cluster["use_gpu"]:
        per_worker.setdefault("GPU", 1)
    total = {k: v * cluster["num_workers"] for k, v in per_worker.items()}
    if not trains_in_process(cluster):
        total["CPU"] += 1
    return total


def trial_shape(cluster: dict) -> str:
    """How a trial's resources add up, for error messages."""
    if trains_in_process(cluster):
        return "1 worker in the trial's process"
    return f"1 CPU for the trial + {cluster['num_workers']} workers"
