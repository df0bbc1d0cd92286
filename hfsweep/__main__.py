"""Hydra entry point: check the command line, compose, resolve once, hand off to the driver.

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

from hfsweep.compat import quiet_transformers_integrations
from hfsweep.config import schema  # noqa: F401  (registers hfsweep_schema in the ConfigStore)
from hfsweep.config.errors import ConfigError
from hfsweep.config.loading import check_composition, normalise_overrides, resolvable_here, resolve, searched_overrides
from hfsweep.driver.preflight import preflight


@hydra.main(version_base="1.3", config_path="pkg://hfsweep.conf", config_name="config")
def main(cfg: DictConfig) -> None:
    run_dir = HydraConfig.get().runtime.output_dir
    try:
        # a typo costs a second or two, not the import of Ray, torch and the data stack
        checked = preflight(resolve(cfg, run_dir, list(HydraConfig.get().overrides.task)))
        from hfsweep.driver import sweep
        from hfsweep.driver.defaults_trial import wanted

        for key in searched_overrides(list(HydraConfig.get().overrides.task), checked.cfg["search_space"]):
            print(
                f"hfsweep: warning: {key} is also set by search_space.{key}; "
                + (
                    "it runs as the defaults trial, beside the searched values."
                    if wanted(checked.cfg)
                    else "the searched values win."
                ),
                file=sys.stderr,
            )

        sweep.run(checked)
    except ConfigError as err:
        remove_hydra_output(run_dir)  # raised before the sweep wrote anything
        fail(err)


def fail(err: ConfigError) -> None:
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


PRINT_ONLY_FLAGS = {"--cfg", "-c"}  # Hydra prints the config and exits: nothing to validate


def cli() -> None:
    """Refuse a bad command line in one line before Hydra's app starts: what Hydra cannot compose
    (its own messages span several, printed after its run directory is made), and a config that
    fails validation (without the app's second composition, so a refusal takes about a second)."""
    argv = sys.argv[1:] = normalise_overrides(sys.argv[1:])  # Hydra's app reads sys.argv
    quiet_transformers_integrations()
    try:
        for cfg in check_composition(argv):
            resolved = None if PRINT_ONLY_FLAGS & set(argv) else resolvable_here(cfg, argv)
            if resolved is not None:
                preflight(resolved)
    except ConfigError as err:
        fail(err)
    main()


if __name__ == "__main__":
    cli()
