"""Hydra entry point: Hydra's app composes, the preflight checks, the driver runs the sweep.

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

from hfsweep.cli import leave_heap_to_exit
from hfsweep.cli.launch import fail, raise_hydra_errors
from hfsweep.compat import quiet_bitsandbytes_cpu_notice, quiet_transformers_integrations
from hfsweep.config import schema  # noqa: F401  (registers hfsweep_schema in the ConfigStore)
from hfsweep.config.errors import ConfigError
from hfsweep.config.loading import composition_error, hydra_errors, normalise_overrides, resolve, searched_overrides
from hfsweep.config.resources import check_hfsweep_installed
from hfsweep.driver.preflight import preflight


@hydra.main(version_base="1.3", config_path="pkg://hfsweep.conf", config_name="config")
def main(cfg: DictConfig) -> None:
    run_dir = HydraConfig.get().runtime.output_dir
    try:
        # a typo costs a second or two, not the import of Ray, torch and the data stack
        checked = preflight(resolve(cfg, run_dir, list(HydraConfig.get().overrides.task)))
        from hfsweep.driver import sweep
        from hfsweep.driver.search.defaults_trial import wanted

        for key in searched_overrides(list(HydraConfig.get().overrides.task), checked.sweep.search_space):
            print(
                f"hfsweep: warning: {key} is also set by search_space.{key}; "
                + (
                    "it runs as the defaults trial, beside the searched values."
                    if wanted(checked.sweep)
                    else "the searched values win."
                ),
                file=sys.stderr,
            )

        sweep.run(checked)
    except ConfigError as err:
        remove_hydra_output(run_dir)  # raised before the sweep wrote anything
        fail(err)


def remove_hydra_output(run_dir: str) -> None:
    """Delete what Hydra wrote for a run that never started, and the folder if that empties it."""
    shutil.rmtree(os.path.join(run_dir, ".hydra"), ignore_errors=True)
    log = os.path.join(run_dir, f"{HydraConfig.get().job.name}.log")
    if os.path.exists(log):
        os.remove(log)
    if os.path.isdir(run_dir) and not os.listdir(run_dir):
        os.rmdir(run_dir)


def cli() -> None:
    """`python -m hfsweep ARGS`: Hydra's app, whose composition errors are refused in one line
    (`hydra_errors`; a single run's before its run directory exists, a multirun's in
    `PreflightEveryJob`), and a bad config by the preflight in `main`, before Ray starts."""
    sys.argv[1:] = normalise_overrides(sys.argv[1:])  # Hydra's app reads sys.argv
    quiet_transformers_integrations()
    quiet_bitsandbytes_cpu_notice()  # the driver imports the Trainer too: the untrained baseline, the export
    raise_hydra_errors()
    try:
        check_hfsweep_installed()  # before Hydra's app, which reads hfsweep's configs from the installed package
        main()
        leave_heap_to_exit()
    except hydra_errors() as err:
        fail(composition_error(err))
    except ConfigError as err:
        fail(err)


if __name__ == "__main__":
    cli()
