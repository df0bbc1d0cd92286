"""What one trial asks of the cluster, shared by the preflight (before Ray), the driver and the
trial; and the checks that the hardware can run what the config asks (`check_hardware`)."""

from __future__ import annotations

import os
from dataclasses import fields
from typing import Optional

from hfsweep.config.errors import ConfigError
from hfsweep.config.schema import (
    AttnImplementation,
    BudgetConfig,
    ClusterConfig,
    GpuConfig,
    StrategyConfig,
    SweepConfig,
)

GPU_ONLY_TRAINING_ARGS = ("fsdp", "deepspeed")  # on CPU transformers ignores fsdp (plain DDP) and DeepSpeed needs CUDA

# CPUs the trials leave free for Ray Data's read tasks, which stream the train split's shards to
# the workers: with every CPU held by trials they could never be scheduled (Ray Data's guidance).
DATA_CPUS = 1


def usable_cores() -> int:
    """Every core this process may run on (its CPU affinity: a container's or taskset's limit)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def shards(strategy: StrategyConfig) -> bool:
    """Whether the strategy shards the model (FSDP, DeepSpeed) over a torch process group."""
    return any(strategy.training_args.get(key) for key in GPU_ONLY_TRAINING_ARGS)


def trains_in_process(cluster: ClusterConfig, strategy: StrategyConfig) -> bool:
    """A single-worker trial trains in the trial's own process (Train V2 local mode): no
    controller, placement group or worker actors to start and stop. Not one that shards: FSDP and
    DeepSpeed need the process group a Train worker group sets up, even a group of one (in local
    mode transformers refuses FSDP: "only works in distributed training", seen on an H200)."""
    return cluster.num_workers == 1 and not shards(strategy)


def resource_names(resources: dict) -> dict:
    """Ray's spelling: CPU and GPU upper-case (`cpu: 1` is accepted), custom resources as given."""
    return {k.upper() if k.lower() in ("cpu", "gpu") else k: v for k, v in resources.items()}


def trial_resources(cluster: ClusterConfig, strategy: StrategyConfig) -> dict:
    """What one trial holds: every worker's resources, plus 1 CPU for the trial process when it
    drives a worker group (an in-process trial is its one worker)."""
    per_worker = resource_names(cluster.resources_per_worker)
    per_worker.setdefault("CPU", 1)
    if cluster.use_gpu:
        per_worker.setdefault("GPU", 1)
    total = {k: v * cluster.num_workers for k, v in per_worker.items()}
    if not trains_in_process(cluster, strategy):
        total["CPU"] += 1
    return total


# What `billed_resources` reads of a trial's config: a budget in trial-hours or dollars bills at these.
BILLED_KEYS = ("cluster.num_workers", "cluster.use_gpu", "cluster.resources_per_worker")


def billed_resources(cluster: ClusterConfig, strategy: StrategyConfig) -> float:
    """What a trial-hour counts of one trial (`budget.trial_hours`, its price): the GPUs it holds on a
    GPU sweep, else its CPUs."""
    held = trial_resources(cluster, strategy)
    return held.get("GPU") or held["CPU"]


def price_key(cluster: ClusterConfig) -> str:
    """The cluster.* key pricing what `billed_resources` counts (a GPU's price holds the CPUs beside it)."""
    return "price_per_gpu_hour" if cluster.use_gpu else "price_per_cpu_hour"


def trial_shape(cluster: ClusterConfig, strategy: StrategyConfig) -> str:
    """How a trial's resources add up, for error messages."""
    if trains_in_process(cluster, strategy):
        return "1 worker in the trial's process"
    workers = cluster.num_workers
    return f"1 CPU for the trial + {workers} worker{'s' if workers > 1 else ''}"


def check_hardware(sweep: SweepConfig) -> None:
    """Refuse what this machine or the trial's share of the cluster cannot run, or a budget it
    cannot price, before Ray starts."""
    cluster, strategy = sweep.cluster, sweep.strategy
    _validate_packed_gpus(strategy, cluster)
    _validate_strategy(strategy, cluster)
    _validate_precision(sweep.training, cluster)
    _validate_attention(sweep.gpu, cluster)
    _validate_cluster(cluster, strategy)
    _validate_budget(sweep.budget, cluster)
    if cluster.address is None:
        check_hfsweep_installed()


def _validate_budget(budget: BudgetConfig, cluster: ClusterConfig) -> None:
    """Budgets are positive, prices not negative, and a USD budget has its price."""
    for key, example in (("wall_clock_s", 3600), ("trial_hours", 8), ("usd", 100), ("train_samples", 100000)):
        if getattr(budget, key) is not None and getattr(budget, key) <= 0:
            raise ConfigError(
                f"budget.{key}: must be positive, not {getattr(budget, key)}; e.g. budget.{key}={example}, "
                "or null for none."
            )
    for key in ("price_per_gpu_hour", "price_per_cpu_hour"):
        price = getattr(cluster, key)
        if price is not None and price < 0:
            raise ConfigError(f"cluster.{key}: must be at least 0, not {price}; e.g. cluster.{key}=2.5.")
    budgets = [field.name for field in fields(budget) if getattr(budget, field.name) is not None]
    if budgets and str(cluster.address or "").startswith("ray://"):
        raise ConfigError(
            f"budget.{budgets[0]}: a budget is counted by Tune's loop, which runs on the cluster under "
            f"Ray Client (cluster.address=ray://...) where the driver cannot read it; run the sweep on "
            f"the head node (cluster.address=auto), or drop budget.{budgets[0]}."
        )
    price = price_key(cluster)
    if budget.usd is not None and getattr(cluster, price) is None:
        raise ConfigError(
            f"budget.usd: needs the price of what the trials hold; set cluster.{price}, e.g. cluster.{price}=2.5."
        )


def checkout_here() -> Optional[str]:
    """The current folder, where this process imports hfsweep from it (`python -m hfsweep` in a
    checkout); else None."""
    import hfsweep

    folder = os.path.dirname(os.path.abspath(hfsweep.__path__[0]))
    return folder if folder == os.getcwd() else None


def check_hfsweep_installed() -> None:
    """`python -m hfsweep` in a checkout imports hfsweep from the current folder even where it is
    not installed; Hydra then cannot find its configs (pkg://hfsweep.conf), and Ray's workers,
    which start elsewhere, would fail every trial on `import hfsweep`."""
    import importlib.machinery
    import sys

    folder = checkout_here()
    if folder is None:
        return  # not found through the current folder: installed, or on PYTHONPATH
    elsewhere = [p for p in sys.path if p not in ("", ".") and os.path.abspath(p) != folder]
    for finder in sys.meta_path:
        if finder is importlib.machinery.PathFinder:
            found = finder.find_spec("hfsweep", elsewhere)
        else:  # an editable install's finder, or a hook that looks on the whole sys.path (no refusal then)
            found = getattr(finder, "find_spec", lambda *_: None)("hfsweep", None)
        if found is not None:
            return
    raise ConfigError(
        f"hfsweep is imported from the current folder ({folder}) but is not installed for {sys.executable}, so "
        f"Ray's workers cannot import it; pip install -e {folder}, or run the python it is installed for."
    )


def _validate_precision(training: dict, cluster: ClusterConfig) -> None:
    """bf16 on a local GPU without it (before Ampere) would fail in the first trial; CPUs run
    bf16 and fp16 through autocast."""
    if training.get("bf16") and cluster.use_gpu and cluster.address is None:
        import torch

        if torch.cuda.is_available() and not torch.cuda.is_bf16_supported():
            raise ConfigError(
                f"training.bf16: this GPU ({torch.cuda.get_device_name(0)}) has no bf16; "
                f"use training.fp16=true instead."
            )


def _validate_attention(gpu: GpuConfig, cluster: ClusterConfig) -> None:
    """flash_attention_2 without its package would fail in every trial of a model that has it."""
    import importlib.util

    wanted = gpu.attn_implementation
    if (
        cluster.use_gpu
        and wanted is AttnImplementation.flash_attention_2
        and importlib.util.find_spec("flash_attn") is None
    ):
        raise ConfigError(
            "gpu.attn_implementation: flash_attention_2 needs the flash_attn package, which is not installed; "
            "pip install flash-attn, or gpu.attn_implementation=sdpa."
        )


def _validate_strategy(strategy: StrategyConfig, cluster: ClusterConfig) -> None:
    """Refuse a strategy the hardware cannot run: on CPU transformers silently trains FSDP as
    plain DDP, and DeepSpeed needs its package and CUDA."""
    import importlib.util

    args = strategy.training_args
    if args.get("deepspeed") and importlib.util.find_spec("deepspeed") is None:
        raise ConfigError(
            f"strategy={strategy.name}: DeepSpeed is not installed; pip install 'hfsweep[deepspeed]' "
            f"(on a machine with CUDA GPUs), or use strategy=ddp."
        )
    if shards(strategy) and not cluster.use_gpu:
        raise ConfigError(
            f"strategy={strategy.name}: needs GPUs; set cluster.use_gpu=true on a GPU machine, "
            f"or use strategy=ddp on CPUs."
        )


def _validate_packed_gpus(strategy: StrategyConfig, cluster: ClusterConfig) -> None:
    """Trials packed onto shared GPUs (`cluster.resources_per_worker.GPU` below 1) each train in
    one process: NCCL refuses two ranks of one group on one GPU, and FSDP and DeepSpeed shard a
    model across whole GPUs."""
    gpus = resource_names(cluster.resources_per_worker).get("GPU", 1 if cluster.use_gpu else 0)
    if not 0 < gpus < 1:
        return
    if shards(strategy):
        raise ConfigError(
            f"strategy={strategy.name}: shards a model across whole GPUs, not a share of one "
            f"(cluster.resources_per_worker.GPU={gpus:g}); use strategy=ddp, or GPU=1."
        )
    if cluster.num_workers > 1:
        raise ConfigError(
            f"cluster.num_workers: trials packed onto shared GPUs (cluster.resources_per_worker.GPU={gpus:g}) train in "
            f"one process each, as NCCL needs a GPU per worker; set cluster.num_workers=1, or GPU=1."
        )


def _validate_cluster(cluster: ClusterConfig, strategy: StrategyConfig) -> None:
    if cluster.num_workers < 1:
        raise ConfigError("cluster.num_workers: must be at least 1.")
    # A local Ray finds this machine's GPUs (unless cluster.num_gpus declares logical ones).
    gpus_per_worker = resource_names(cluster.resources_per_worker).get("GPU", 0)
    if (cluster.use_gpu or gpus_per_worker) and cluster.address is None and cluster.num_gpus is None:
        import torch

        if not torch.cuda.is_available():
            key = "cluster.use_gpu" if cluster.use_gpu else "cluster.resources_per_worker.GPU"
            fix = "set cluster.use_gpu=false" if cluster.use_gpu else "remove it (~cluster.resources_per_worker.GPU)"
            raise ConfigError(f"{key}: this machine has no CUDA GPU; {fix}.")
    if cluster.address is None and cluster.num_cpus is not None:
        per_trial, shape = trial_resources(cluster, strategy)["CPU"], trial_shape(cluster, strategy)
        if per_trial + DATA_CPUS > cluster.num_cpus:
            raise ConfigError(
                f"cluster.num_workers: one trial needs {per_trial:g} CPUs ({shape}) and reading its "
                f"data {DATA_CPUS} more, but cluster.num_cpus is {cluster.num_cpus:g}; raise cluster.num_cpus or "
                f"lower cluster.num_workers."
            )
