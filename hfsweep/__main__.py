"""Hydra entry point: compose the config, resolve it once, hand it to the sweep.

    python -m hfsweep                               # the embedded default (offline, CPU)
    python -m hfsweep +experiment=gpt2_wikitext     # a preset
    python -m hfsweep -m seed=1,2,3                 # Hydra multirun: one sweep per job
"""

from __future__ import annotations

import os
import shutil
import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from hfsweep import config as _schema  # noqa: F401  (registers hfsweep_schema in the ConfigStore)
from hfsweep.config import ConfigError, to_plain_dict


def resolve(cfg: DictConfig, run_dir: str) -> dict:
    """The composed config as a plain dict, with the storage path made absolute first, so that
    `${cluster.storage_path}` (a logger's store, its group) resolves to this run's directory."""
    storage = cfg.cluster.storage_path or run_dir
    cfg.cluster.storage_path = os.path.abspath(os.path.expanduser(storage))
    return to_plain_dict(cfg)


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> None:
    from hfsweep import sweep

    run_dir = HydraConfig.get().runtime.output_dir
    try:
        sweep.run(resolve(cfg, run_dir))
    except ConfigError as err:
        remove_hydra_output(run_dir)  # raised before the sweep wrote anything
        print(f"hfsweep: error: {err}", file=sys.stderr)
        sys.exit(2)


def remove_hydra_output(run_dir: str) -> None:
    """Delete what Hydra wrote for a run that never started, and the folder if that empties it."""
    shutil.rmtree(os.path.join(run_dir, ".hydra"), ignore_errors=True)
    log = os.path.join(run_dir, f"{HydraConfig.get().job.name}.log")
    if os.path.exists(log):
        os.remove(log)
    if os.path.isdir(run_dir) and not os.listdir(run_dir):
        os.rmdir(run_dir)


if __name__ == "__main__":
    main()
