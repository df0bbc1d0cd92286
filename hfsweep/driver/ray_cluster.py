"""The Ray a sweep runs on: started here or reached by address, and checked to hold one trial
before anything is written."""

from __future__ import annotations

import contextlib
import logging
import math
import os
import shutil
import socket
import tempfile
from typing import Optional

import ray

from hfsweep.compat import gcs_port, quiet_ray_auth_notice
from hfsweep.config.errors import ConfigError, RayStartError
from hfsweep.config.loading import target_name
from hfsweep.config.resources import (
    DATA_CPUS,
    checkout_here,
    resource_names,
    trains_in_process,
    trial_resources,
    trial_shape,
    usable_cores,
)
from hfsweep.config.schema import ClusterConfig, StrategyConfig, SweepConfig
from hfsweep.driver.search.search_rules import is_population_training, population_size, samples_within

FORWARDED_ENV = (
    "HF_HUB_OFFLINE",
    "HF_DATASETS_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "WANDB_MODE",
    "HF_HOME",
    "HFSWEEP_CACHE",
    "DS_ACCELERATOR",
)
# A Ray started for one sweep on one machine: notice a finished worker group sooner, and skip the
# spot-preemption watcher (one more actor per trial) since nothing here is preemptible.
LOCAL_RAY_ENV = {"RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "1", "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER": "0"}
# What every Ray process of a sweep is told so that the console shows Tune's table, hfsweep's lines
# and real errors: Ray Data's per-dataset INFO lines ("Starting execution", "Execution plan",
# "Progress bars disabled") only at ERROR (they stay in Ray's session logs otherwise), and Ray
# Data's own use of its deprecated `exclude_resources` not reported in every split coordinator.
QUIET_ENV = {
    "RAY_DATA_LOG_LEVEL": "ERROR",
    "PYTHONWARNINGS": "ignore:`ExecutionOptions.exclude_resources`",
}


MIN_FREE_MB = 200
# A Ray started here declares one per core it may use (less `DATA_CPUS`), and an in-process trial
# holds one: more single-process trainings than cores only share them, so every trial would run
# slower and a scheduler's early stops free nothing until late. A resource rather than a cap on
# the searcher, because Tune's caps count paused trials as running and would shrink a PBT population.
TRIAL_SLOT = "hfsweep_trial_slot"


def quiet_deepspeed_here() -> None:
    """The driver loads the best model on its own devices (PEFT and transformers import DeepSpeed
    when it is installed): with no GPU in this process, DeepSpeed would warn that it found none."""
    import torch

    if not torch.cuda.is_available():
        os.environ.setdefault("DS_ACCELERATOR", "cpu")


def init_ray(cluster: ClusterConfig) -> None:
    """Connect to `cluster.address`, or start a local Ray with the declared logical CPUs."""
    if ray.is_initialized():
        return
    env = {**QUIET_ENV, **{k: os.environ[k] for k in FORWARDED_ENV if k in os.environ}}
    env["TOKENIZERS_PARALLELISM"] = "false"
    if not cluster.use_gpu and "DS_ACCELERATOR" not in env:
        env["DS_ACCELERATOR"] = "cpu"  # else DeepSpeed, when installed, warns on every CPU worker that it found no GPU
    quiet_deepspeed_here()
    quiet_ray_auth_notice()
    runtime_env = cluster.runtime_env or {}
    if cluster.address:
        check_reachable(cluster.address)
        try:
            ray.init(address=cluster.address, runtime_env=sweep_runtime_env(runtime_env, env))
        except (ConnectionError, TimeoutError) as err:
            raise ConfigError(
                f"cluster.address: cannot reach a Ray cluster at '{cluster.address}' ({type(err).__name__}); "
                f"check the address (ray status on the head){auth_hint()}, or drop cluster.address to start a "
                f"local Ray."
            ) from err
    else:
        start_local_ray(cluster, {**env, **checkout_on_worker_path()}, runtime_env)
    ray.data.DataContext.get_current().enable_progress_bars = False
    logging.getLogger("ray.data").setLevel(logging.WARNING)


def auth_hint() -> str:
    """Ray (2.59+) turns token authentication on for a `ray start` head by itself when
    ~/.ray/auth_token exists, but a client given an address sends the token only when told to."""
    if os.environ.get("RAY_AUTH_MODE"):
        return ""
    return (
        "; if the cluster uses token authentication, set RAY_AUTH_MODE=token "
        "(token in RAY_AUTH_TOKEN or ~/.ray/auth_token)"
    )


def sweep_runtime_env(runtime_env: dict, env: dict) -> dict:
    """The configured `cluster.runtime_env` (working_dir, py_modules: how a user's `_target_` code
    reaches the workers) with hfsweep's environment variables added to its own, and hfsweep's
    quieting of Ray's own loggers run in every Ray process unless it names a setup hook itself."""
    return {
        "worker_process_setup_hook": "hfsweep.compat.quiet_ray_process",
        **runtime_env,
        "env_vars": {**env, **runtime_env.get("env_vars", {})},
    }


def checkout_on_worker_path() -> dict:
    """PYTHONPATH for a local Ray's workers where this process runs a checkout in the current folder:
    they start elsewhere, and where another copy of hfsweep is installed (a second checkout, a
    worktree, a release) every trial would run that copy's code, not the one the driver runs."""
    folder = checkout_here()
    if folder is None:
        return {}
    return {"PYTHONPATH": os.pathsep.join(filter(None, [folder, os.environ.get("PYTHONPATH")]))}


def start_local_ray(cluster: ClusterConfig, env: dict, runtime_env: dict) -> None:
    """Start a Ray for this sweep on this machine, on a GCS port chosen here.

    Ray's own actors (Train's placement-group cleaner among them) find their cluster's State API
    by RAY_ADDRESS, or else by looking for a single running Ray on the machine; with two sweeps
    (or a sweep and a test) on one machine they would find two and never free a stopped trial's
    resources. Passing every worker RAY_ADDRESS makes the lookup exact.
    """
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**LOCAL_RAY_ENV, **env, "RAY_ADDRESS": f"127.0.0.1:{port}"}
    with gcs_port(port), raylet_startup_concurrency(cluster.num_cpus):
        try:
            # "local": a new Ray even when `ray start` left one that a bare ray.init() would join
            ray.init(
                address="local",
                num_cpus=whole_cpus(cluster.num_cpus),
                num_gpus=cluster.num_gpus,
                resources={TRIAL_SLOT: local_trial_slots(cluster)},
                runtime_env=sweep_runtime_env(runtime_env, env),
            )
        except Exception as err:
            if STARTUP_TIMEOUT not in str(err):
                raise
            raise RayStartError(
                f"Ray did not start: its raylet never registered ('{STARTUP_TIMEOUT}'); rerun with "
                f"RAY_LOG_TO_STDERR=1 to see the raylet's own output on the console (else it is in "
                f"session_latest/logs/raylet.err under Ray's temp dir, /tmp/ray by default)."
            ) from err


def whole_cpus(num_cpus: float | None) -> int | None:
    """`cluster.num_cpus` as the int Ray's raylet takes: Ray passes it min(cores, num_cpus) as an
    int32 flag, so the schema's float (8.0) stopped every raylet on a machine of more than 8 cores
    from starting ("illegal value '8.0' ... maximum_startup_concurrency", seen on a 16-core GPU node)."""
    if num_cpus is None:
        return None
    if num_cpus != int(num_cpus) or num_cpus < 1:
        raise ConfigError(
            f"cluster.num_cpus: {num_cpus} logical CPUs for a local Ray; give a whole number (at least 1)."
        )
    return int(num_cpus)


STARTUP_TIMEOUT = "The current node timed out during startup"  # what ray.init raises when its raylet never registers


@contextlib.contextmanager
def raylet_startup_concurrency(num_cpus):
    """Let the raylet start as many worker processes at once as the logical CPUs declared: it
    counts physical cores, and warns at every trial that two DDP workers, a controller and a data
    coordinator are "Nx the maximum expected startup concurrency"."""
    previous = os.environ.get(STARTUP_CONCURRENCY_ENV)
    if num_cpus:
        os.environ[STARTUP_CONCURRENCY_ENV] = str(int(num_cpus))
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(STARTUP_CONCURRENCY_ENV, None)
        else:
            os.environ[STARTUP_CONCURRENCY_ENV] = previous


STARTUP_CONCURRENCY_ENV = "RAY_worker_maximum_startup_concurrency"  # a RayConfig entry the raylet reads


def check_reachable(address: str, timeout_s: float = 3.0) -> None:
    """A TCP connect to the head first: ray.init waits a minute or more on a dead address."""
    if address == "auto":
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except (OSError, ValueError) as err:
        raise ConfigError(
            f"cluster.address: cannot reach a Ray head at '{address}' ({type(err).__name__}); check the "
            f"address (HOST:PORT, e.g. 10.0.0.5:6379, as `ray start --head` prints), or drop cluster.address."
        ) from err


def check_trial_fits(cluster: ClusterConfig, strategy: StrategyConfig) -> None:
    """Refuse at once a trial shape that no cluster node can hold, instead of Ray retrying the
    worker group start forever."""
    need = trial_resources(cluster, strategy)
    need["CPU"] = need.get("CPU", 0) + DATA_CPUS
    total = ray.cluster_resources()
    for key, amount in need.items():
        if total.get(key, 0) < amount:
            data = f" and {DATA_CPUS} to read its data" if key == "CPU" else ""
            shape = trial_shape(cluster, strategy)
            raise ConfigError(
                f"cluster.resources_per_worker: one trial needs {amount:g} {key} ({shape}{data}) "
                f"but the cluster has {total.get(key, 0):g}; lower "
                f"cluster.num_workers or cluster.resources_per_worker, or add nodes."
            )
    bundle = resource_names(cluster.resources_per_worker)
    nodes = [node["Resources"] for node in ray.nodes() if node["Alive"]]
    if not any(all(node.get(k, 0) >= v for k, v in bundle.items()) for node in nodes):
        raise ConfigError(f"cluster.resources_per_worker: no node has {bundle} for one worker; lower it.")


def local_trial_slots(cluster: ClusterConfig) -> int:
    """The trial slots a Ray started here declares: one per usable core, at most its logical CPUs
    less `DATA_CPUS` (without cluster.num_cpus, Ray declares about one CPU per core)."""
    return max(1, min(usable_cores(), (cluster.num_cpus or usable_cores()) - DATA_CPUS))


def held_per_trial(cluster: ClusterConfig, strategy: StrategyConfig) -> dict:
    """What one trial holds of the connected Ray: every worker's resources (`trial_resources`),
    and an in-process trial one trial slot where the Ray declares them (`TRIAL_SLOT`)."""
    held = trial_resources(cluster, strategy)
    if trains_in_process(cluster, strategy) and ray.cluster_resources().get(TRIAL_SLOT):
        held[TRIAL_SLOT] = 1
    return held


def reserved_by_tune(cluster: ClusterConfig, strategy: StrategyConfig) -> dict:
    """What Tune reserves for a trial: an in-process trial holds all it uses; one that drives a
    worker group holds 1 CPU, and Train reserves the workers' when it starts them."""
    return held_per_trial(cluster, strategy) if trains_in_process(cluster, strategy) else {"CPU": 1}


def fits_at_once(reserved: dict, keep_cpus: float = 0) -> int:
    """How many trials reserving `reserved` the connected Ray holds at once, `keep_cpus` left free."""
    total = ray.cluster_resources()
    total["CPU"] = total.get("CPU", 0) - keep_cpus
    return max(1, min(math.floor(total.get(k, 0) / v) for k, v in reserved.items() if v))


def max_concurrent_trials(cluster: ClusterConfig, strategy: StrategyConfig) -> int:
    """As many trials as the cluster's resources hold at once (`held_per_trial`: on a Ray started
    here, at most one in-process trial per core), unless configured. `DATA_CPUS` stay free for
    reading the data."""
    return cluster.max_concurrent_trials or fits_at_once(held_per_trial(cluster, strategy), keep_cpus=DATA_CPUS)


def searcher_cap(sweep: SweepConfig) -> Optional[int]:
    """How many trials the searcher keeps alive: `max_concurrent_trials`. Under PBT and PB2 none
    where Tune's reservations alone keep what runs within it (in-process trials on a Ray started
    here), since Tune counts paused trials against a cap and the population would shrink; a
    population larger than the cap is refused otherwise."""
    cluster, strategy = sweep.cluster, sweep.strategy
    cap = max_concurrent_trials(cluster, strategy)
    if not is_population_training(sweep):
        return cap
    if fits_at_once(reserved_by_tune(cluster, strategy)) <= cap:
        return None
    population = population_size(sweep)
    if population > cap:
        name = target_name(sweep.scheduler)
        fits = samples_within(sweep, cap)
        fewer = f"lower num_samples to {fits}" if fits else "search fewer grid points"
        raise ConfigError(
            f"num_samples: under {name} the population of {population} trials must be alive at once, but this sweep "
            f"runs at most {cap} trials at a time (its trial shape, or cluster.max_concurrent_trials) and Tune counts "
            f"paused trials against that; {fewer}, or train each trial in its own process "
            f"(cluster.num_workers=1) on a Ray hfsweep starts, where the rest of the population waits paused."
        )
    return cap


def check_storage_writable(storage: str) -> None:
    """Fail at start, not at the first checkpoint, if the storage path cannot be written."""
    try:
        os.makedirs(storage, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=storage):
            pass
    except OSError as err:
        raise ConfigError(
            f"cluster.storage_path: cannot write to '{storage}' ({type(err).__name__}: {err.strerror}); "
            f"choose a writable directory shared by all nodes."
        ) from err
    free_mb = shutil.disk_usage(storage).free / 2**20
    if free_mb < MIN_FREE_MB:
        raise ConfigError(
            f"cluster.storage_path: only {free_mb:.0f} MB free in '{storage}' (checkpoints need more); "
            f"free space or choose another path."
        )
