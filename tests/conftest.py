"""Shared fixtures: offline environment, composed configs, one Ray instance per module."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

os.environ.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1", WANDB_MODE="offline")

from hydra import compose, initialize_config_dir  # noqa: E402

CONF_DIR = str(Path(__file__).resolve().parents[1] / "conf")


def compose_config(overrides: list[str] = ()):
    """Compose conf/config.yaml with overrides, as `python -m hfsweep` would."""
    from hfsweep.config import schema  # noqa: F401  (registers hfsweep_schema)

    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


def resolved_config(overrides: list[str], storage: Path, cache: Path) -> dict:
    from hfsweep.config.loading import resolve

    cfg = compose_config([*overrides, f"cache_dir={cache}"])
    return resolve(cfg, str(storage))


def pytest_collection_modifyitems(config, items):
    """`gpu` tests are skipped on a machine without CUDA."""
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("hfsweep_cache")


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray with 8 logical CPUs, so two 2-worker trials fit on two cores.

    The modules share one (a start costs ~7 s on two cores); it is restarted when an earlier module
    left any of it held, so every module starts on a whole, idle cluster.
    """
    import ray

    from hfsweep.driver.ray_cluster import init_ray

    if ray.is_initialized() and not all_resources_free():
        ray.shutdown()
    init_ray({"address": None, "num_cpus": 8, "num_gpus": None})
    yield


def all_resources_free(wait_s: float = 10.0) -> bool:
    """Whether every logical CPU of the connected Ray is free, allowing ended actors to release theirs."""
    import ray

    deadline = time.time() + wait_s
    while ray.available_resources().get("CPU", 0) < ray.cluster_resources().get("CPU", 0):
        if time.time() > deadline:
            return False
        time.sleep(0.2)
    return True


@pytest.fixture
def no_ray_connection():
    """For tests that start their own Ray cluster: leave the modules' shared one first."""
    import ray

    ray.shutdown()
