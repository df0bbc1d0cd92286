"""The sweep driver: data once, Ray, the Tuner, results.

`run` takes the resolved config as a plain dict (workers never see Hydra) and returns Tune's
ResultGrid. Everything a sweep writes lives under `cluster.storage_path` (the Hydra run
directory by default): the resolved config, Tune's experiment directory, and the Train runs.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import socket
import tempfile

import ray
import yaml
from ray import tune

from hfsweep.checkpoints import build_checkpoint_budget, checkpoint_disk_use
from hfsweep.config import RESOLVED_CONFIG, ConfigError, resource_names, saved_config, trial_resources, trial_shape, trains_in_process, validate
from hfsweep.data import PreparedData, load_ray_datasets, prepare
from hfsweep.models import build_model, check_pretrained_reachable, load_tokenizer
from hfsweep.results import best_trial, evaluate_model, export_best, summary, write_best, write_provenance, write_report
from hfsweep.search import build_loggers, build_scheduler, build_search_alg, build_stopper, compile_search_space
from hfsweep.trial import run_trial

FORWARDED_ENV = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE", "WANDB_MODE", "HF_HOME", "HFSWEEP_CACHE")
# A Ray started for one sweep on one machine: notice a finished worker group sooner, and skip the
# spot-preemption watcher (one more actor per trial) since nothing here is preemptible.
LOCAL_RAY_ENV = {"RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "1", "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER": "0"}


MIN_FREE_MB = 200


def init_ray(cluster: dict) -> None:
    """Connect to `cluster.address`, or start a local Ray with the declared logical CPUs."""
    if ray.is_initialized():
        return
    env = {k: os.environ[k] for k in FORWARDED_ENV if k in os.environ}
    env["TOKENIZERS_PARALLELISM"] = "false"
    if cluster["address"]:
        check_reachable(cluster["address"])
        try:
            ray.init(address=cluster["address"], runtime_env={"env_vars": env})
        except (ConnectionError, TimeoutError) as err:
            raise ConfigError(
                f"cluster.address: cannot reach a Ray cluster at '{cluster['address']}' ({type(err).__name__}); "
                f"check the address (ray status on the head), or drop cluster.address to start a local Ray."
            ) from err
    else:
        start_local_ray(cluster, env)
    ray.data.DataContext.get_current().enable_progress_bars = False
    logging.getLogger("ray.data").setLevel(logging.WARNING)


def start_local_ray(cluster: dict, env: dict) -> None:
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
    previous = os.environ.get("RAY_GCS_SERVER_PORT")
    os.environ["RAY_GCS_SERVER_PORT"] = str(port)
    try:
        # "local": a new Ray even when `ray start` left one that a bare ray.init() would join
        ray.init(address="local", num_cpus=cluster["num_cpus"], num_gpus=cluster["num_gpus"], runtime_env={"env_vars": env})
    finally:
        if previous is None:
            del os.environ["RAY_GCS_SERVER_PORT"]
        else:
            os.environ["RAY_GCS_SERVER_PORT"] = previous


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


def check_trial_fits(cluster: dict) -> None:
    """Refuse at once a trial shape that no cluster node can hold, instead of Ray retrying the
    worker group start forever."""
    need = trial_resources(cluster)
    total = ray.cluster_resources()
    for key, amount in need.items():
        if total.get(key, 0) < amount:
            raise ConfigError(
                f"cluster.resources_per_worker: one trial needs {amount:g} {key} ({trial_shape(cluster)}) "
                f"but the cluster has {total.get(key, 0):g}; lower "
                f"cluster.num_workers or cluster.resources_per_worker, or add nodes."
            )
    bundle = resource_names(cluster["resources_per_worker"])
    nodes = [node["Resources"] for node in ray.nodes() if node["Alive"]]
    if not any(all(node.get(k, 0) >= v for k, v in bundle.items()) for node in nodes):
        raise ConfigError(
            f"cluster.resources_per_worker: no node has {bundle} for one worker; lower it."
        )


def max_concurrent_trials(cluster: dict) -> int:
    """As many trials as the cluster's resources hold at once, unless configured.

    On a Ray started here, single-process trials are also capped at this machine's cores: its
    logical CPUs are declared so that a worker group's processes fit, and more single-process
    trainings than cores only share them, so every trial runs slower and a scheduler's early
    stops free nothing until late.
    """
    if cluster["max_concurrent_trials"]:
        return cluster["max_concurrent_trials"]
    available = ray.cluster_resources()
    fits = max(1, min(math.floor(available.get(k, 0) / v) for k, v in trial_resources(cluster).items() if v))
    if not cluster["address"] and trains_in_process(cluster):
        return min(fits, os.cpu_count() or 1)
    return fits


def trainable_for(cfg: dict, data: PreparedData):
    """The Tune trainable: `run_trial` bound to the config and the shared Ray Datasets. An
    in-process trial holds its worker's resources; one that drives a worker group holds 1 CPU,
    and Train reserves the workers'."""
    ray_datasets = load_ray_datasets(data, cfg["data"]["datasets_to_split"], cfg["seed"])  # once, shared by every trial
    cluster = cfg["cluster"]
    return tune.with_resources(
        tune.with_parameters(run_trial, cfg=cfg, data=data, ray_datasets=ray_datasets),
        trial_resources(cluster) if trains_in_process(cluster) else {"CPU": 1},
    )


def build_tuner(cfg: dict, param_space: dict, data: PreparedData, scheduler, stopper, callbacks: list) -> tune.Tuner:
    """In-process trials reuse their actors (imports paid once per actor) and are retried by Tune
    from their latest checkpoint; a worker group is restarted by Train instead."""
    cluster = cfg["cluster"]
    in_process = trains_in_process(cluster)
    concurrency = max_concurrent_trials(cluster)
    return tune.Tuner(
        trainable_for(cfg, data),
        param_space=param_space,
        tune_config=tune.TuneConfig(
            metric=cfg["metric"],
            mode=cfg["mode"],
            scheduler=scheduler,
            search_alg=build_search_alg(cfg, concurrency),
            num_samples=cfg["num_samples"],
            max_concurrent_trials=concurrency,
            reuse_actors=in_process,
        ),
        run_config=tune.RunConfig(
            name=cfg["name"],
            storage_path=cfg["cluster"]["storage_path"],
            checkpoint_config=tune.CheckpointConfig(
                num_to_keep=cfg["checkpoints"]["keep_per_trial"],
                checkpoint_score_attribute=cfg["metric"],
                checkpoint_score_order=cfg["mode"],
            ),
            stop=stopper,
            failure_config=tune.FailureConfig(max_failures=cluster["max_failures"] if in_process else 0),
            callbacks=callbacks,
            verbose=1,  # Tune's status table; per-trial detail is in the experiment directory
        ),
    )


def _prepare_sweep(cfg: dict) -> tuple:
    """Everything that can fail on bad input, before Ray starts."""
    validate(cfg)
    param_space = compile_search_space(cfg["search_space"], cfg)
    scheduler, stopper = build_scheduler(cfg, param_space), build_stopper(cfg)
    callbacks = [*build_loggers(cfg), *filter(None, [build_checkpoint_budget(cfg)])]
    check_pretrained_reachable(cfg["model"])
    return param_space, scheduler, stopper, callbacks, prepare(cfg)


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
            f"cluster.storage_path: only {free_mb:.0f} MB free in '{storage}' (checkpoints need more); free space or choose another path."
        )


def run(cfg: dict) -> tune.ResultGrid:
    """Validate, prepare data, run the sweep; return Tune's ResultGrid."""
    param_space, scheduler, stopper, callbacks, data = _prepare_sweep(cfg)
    storage = cfg["cluster"]["storage_path"]
    check_storage_writable(storage)
    with open(os.path.join(storage, RESOLVED_CONFIG), "w") as f:
        yaml.safe_dump(cfg, f, sort_keys=False)
    write_provenance(storage, cfg)
    init_ray(cfg["cluster"])
    check_trial_fits(cfg["cluster"])
    return fit(build_tuner(cfg, param_space, data, scheduler, stopper, callbacks), cfg, data)


def resume(run_dir: str, overrides: list[str] = (), force: bool = False) -> tune.ResultGrid:
    """Continue an interrupted sweep from its run directory: finished trials are kept, unfinished
    and errored ones resume from their latest checkpoint. The saved config is the config; an
    override that changes it is refused unless `force`."""
    cfg = saved_config(run_dir, overrides, force)
    experiment = os.path.join(run_dir, cfg["name"])
    if not tune.Tuner.can_restore(experiment):
        raise ConfigError(f"resume: '{experiment}' holds no Tune experiment state; nothing to resume.")
    param_space, _, _, _, data = _prepare_sweep(cfg)
    init_ray(cfg["cluster"])
    check_trial_fits(cfg["cluster"])
    # The loggers and the checkpoint budget come back with the Tuner, their state included.
    tuner = tune.Tuner.restore(experiment, trainable_for(cfg, data), resume_errored=True, param_space=param_space)
    return fit(tuner, cfg, data)


def fit(tuner: tune.Tuner, cfg: dict, data: PreparedData) -> tune.ResultGrid:
    """Run the sweep with exactly the loggers the config names: Tune would otherwise add its
    TensorBoard logger to every sweep, `logger=none` included."""
    os.environ["TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"] = "1"
    return finish(tuner.fit(), cfg, data)


def finish(results: tune.ResultGrid, cfg: dict, data: PreparedData) -> tune.ResultGrid:
    """Best trial, exported model, tables and plots, and the one-screen summary."""
    if results.num_terminated == 0:
        raise RuntimeError(f"no trial finished ({results.num_errors} errored); see the errors above.")
    storage = cfg["cluster"]["storage_path"]
    best = best_trial(results, cfg)
    write_best(best, storage)
    export_best(best, cfg, os.path.join(storage, "best"))
    write_report(storage)
    print(summary(best, storage, untrained_eval_loss(cfg, data)))
    count, size = checkpoint_disk_use(results)
    keep = cfg["checkpoints"]["keep_per_trial"]
    budget = f"the best {keep} per trial" if keep else "all kept; set checkpoints.keep_per_trial=K to keep fewer"
    print(f"  checkpoints:     {count} on disk, {size / 2**20:.1f} MiB ({budget})")
    return results


def untrained_eval_loss(cfg: dict, data: PreparedData) -> float:
    """The validation loss of the model every trial starts from (same seed), as a baseline."""
    from transformers import set_seed

    tokenizer = load_tokenizer(data.tokenizer_path)
    set_seed(cfg["seed"])
    return evaluate_model(build_model(cfg["model"], tokenizer, data.label_names), tokenizer, data.validation_path)
