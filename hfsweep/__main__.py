"""Hydra entry point: compose the config, resolve it once, hand it to the sweep.

    python -m hfsweep                               # the embedded default (offline, CPU)
    python -m hfsweep +experiment=gpt2_wikitext     # a preset
    python -m hfsweep -m seed=1,2,3                 # Hydra multirun: one sweep per job
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import OverrideParseException
from omegaconf import DictConfig

from hfsweep import config as _schema  # noqa: F401  (registers hfsweep_schema in the ConfigStore)
from hfsweep.config import ConfigError, to_plain_dict, validate


def resolve(cfg: DictConfig, run_dir: str) -> dict:
    """The composed config as a plain dict, with the storage path made absolute first, so that
    `${cluster.storage_path}` (a logger's store, its group) resolves to this run's directory."""
    storage = cfg.cluster.storage_path or run_dir
    cfg.cluster.storage_path = os.path.abspath(os.path.expanduser(storage))
    return to_plain_dict(cfg)


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> None:
    run_dir = HydraConfig.get().runtime.output_dir
    try:
        resolved = resolve(cfg, run_dir)
        validate(resolved)  # a typo costs a second or two, not the import of Ray, torch and the data stack
        from hfsweep import sweep

        sweep.run(resolved)
    except ConfigError as err:
        remove_hydra_output(run_dir)  # raised before the sweep wrote anything
        print(f"hfsweep: error: {err}", file=sys.stderr)
        sys.exit(2)


CONF_DIR = Path(__file__).resolve().parents[1] / "conf"


def check_group_options(argv: list[str]) -> None:
    """Refuse `group=option` overrides naming an option that conf/GROUP/ lacks, in one line.

    Hydra's own message for this spans a dozen lines; this check runs first and says the same in
    one, with the options there are.
    """
    try:
        overrides = OverridesParser.create().parse_overrides([a for a in argv if "=" in a and not a.startswith("-")])
    except OverrideParseException:
        return  # Hydra reports syntax errors itself
    for override in overrides:
        group = CONF_DIR / override.key_or_group
        if override.is_delete() or override.key_or_group.startswith("hydra") or not group.is_dir():
            continue
        if override.is_sweep_override():
            chosen = list(override.sweep_string_iterator())
        else:
            value = override.value()
            chosen = value if isinstance(value, list) else [value]
        options = sorted(p.stem for p in group.glob("*.yaml"))
        for option in chosen:
            if str(option) not in options:
                raise ConfigError(
                    f"{override.get_key_element()}={option}: no such option in conf/{override.key_or_group}/; "
                    f"choose one of {', '.join(options)}."
                )


def remove_hydra_output(run_dir: str) -> None:
    """Delete what Hydra wrote for a run that never started, and the folder if that empties it."""
    shutil.rmtree(os.path.join(run_dir, ".hydra"), ignore_errors=True)
    log = os.path.join(run_dir, f"{HydraConfig.get().job.name}.log")
    if os.path.exists(log):
        os.remove(log)
    if os.path.isdir(run_dir) and not os.listdir(run_dir):
        os.rmdir(run_dir)


if __name__ == "__main__":
    try:
        check_group_options(sys.argv[1:])
    except ConfigError as err:
        print(f"hfsweep: error: {err}", file=sys.stderr)
        sys.exit(2)
    main()
