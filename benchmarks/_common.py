"""Shared by the benchmarks: compose hfsweep's config, run sweeps and the plain baseline, time them."""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")

from hydra import compose, initialize_config_dir  # noqa: E402

from hfsweep.config import schema  # noqa: E402,F401
from hfsweep.config.loading import normalise_overrides, resolve  # noqa: E402
from hfsweep.driver.preflight import preflight

ROOT = Path(__file__).resolve().parents[1]


def config(overrides: list[str], storage: str) -> dict:
    """The resolved config `python -m hfsweep OVERRIDES` runs, stored in `storage` (`+experiment=`
    read as the CLI reads it: `normalise_overrides`)."""
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        composed = compose(config_name="config",
                           overrides=normalise_overrides([*overrides, f"cluster.storage_path={storage}"]))
    return resolve(composed, storage, overrides)


def run_sweep(overrides: list[str]) -> tuple[float, object]:
    """Wall time of one sweep (data already cached, Ray already started) and its ResultGrid."""
    from hfsweep.driver import sweep

    storage = tempfile.mkdtemp(prefix="hfsweep-bench-")
    cfg = config(overrides, storage)
    start = time.perf_counter()
    results = sweep.run(preflight(cfg))
    return time.perf_counter() - start, results


def plain_trainer_saves(cfg: dict, workers: int) -> list[tuple[int, float]]:
    """Run the plain Trainer baseline on the same prepared data; return (step, time) of each save."""

    data = prepare_data(cfg)
    with tempfile.TemporaryDirectory() as out:
        spec = Path(out, "spec.json")
        spec.write_text(json.dumps({"cfg": cfg, "data": dataclasses.asdict(data), "output_dir": out}))
        script = str(ROOT / "benchmarks" / "_plain_trainer.py")
        launcher = [sys.executable, script] if workers == 1 else [
            sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={workers}", script]
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
        proc = subprocess.run([*launcher, str(spec)], capture_output=True, text=True, env=env, check=True)
    line = next(l for l in proc.stdout.splitlines() if l.startswith("SAVES "))  # noqa: E741
    return [tuple(s) for s in json.loads(line[len("SAVES "):])]


def median_spread(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{statistics.median(values):.3f} (min {min(values):.3f}, max {max(values):.3f}, n={len(values)})"


def prepare_data(cfg: dict):
    """The sweep's data prepared as `sweep.run` prepares it: for the Task its config names."""
    from hfsweep.config.schema import DataConfig, ModelConfig, typed
    from hfsweep.data.prepare import prepare
    from hfsweep.tasks import get_task

    task = get_task(cfg["model"]["task"])
    return prepare(typed(DataConfig, cfg["data"]), typed(ModelConfig, cfg["model"]), cfg["cache_dir"], task)
