"""What `python -m hfsweep` adds to Hydra's app, which alone composes the config: one line for a
refused config, and a multirun's every job checked before the first one starts."""

from __future__ import annotations

import os
import sys

from hydra.core.global_hydra import GlobalHydra
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from hfsweep.compat import basic_sweep_jobs
from hfsweep.config.errors import ConfigError
from hfsweep.config.loading import composition_error, hydra_errors, resolvable_here
from hfsweep.driver.preflight import preflight
from hfsweep.driver.search.live_study import check_new_studies


def fail(err: ConfigError) -> None:
    print(f"hfsweep: error: {err}", file=sys.stderr)
    sys.exit(2)


class PreflightEveryJob(Callback):
    """Hydra composes every job of a multirun batch before launching it, but checks only that
    each composes: a bad value of job 3 (`num_samples=1,0`) would surface after jobs 1 and 2 had
    run. This callback (hydra.callbacks in conf/config.yaml) composes each job as the launcher will
    and preflights it, before the sweep directory exists, and refuses two jobs writing one Optuna
    study. Hydra turns a callback's exception into a warning, so a refusal exits here."""

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        jobs = basic_sweep_jobs(config)
        loader = GlobalHydra.instance().config_loader()
        try:  # every composition first: it is cheap, where a preflight may import the model's stack
            composed = [loader.load_sweep_config(master_config=config, sweep_overrides=list(job)) for job in jobs or []]
            checked = []
            for job, cfg in zip(jobs or [], composed):
                cfg = OmegaConf.masked_copy(cfg, [key for key in cfg if key != "hydra"])
                resolved = resolvable_here(cfg, list(job))
                if resolved is not None:  # else it needs the job's own Hydra runtime: checked as it starts
                    checked.append(preflight(resolved).sweep)
            check_new_studies(checked)  # one study per job, none an earlier sweep's
        except hydra_errors() as err:
            fail(composition_error(err))
        except ConfigError as err:
            fail(err)


def raise_hydra_errors() -> None:
    """Hydra's app prints what it cannot compose over several lines, then exits 1; with
    HYDRA_FULL_ERROR it raises instead (and a failed sweep shows its whole traceback)."""
    os.environ["HYDRA_FULL_ERROR"] = "1"
