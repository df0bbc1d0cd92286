"""The sweep's loggers: Ray Tune's own logger callbacks on the driver, one run per trial, with two
fixes that keep every result a trial reported.

History: when a trial restarts from a checkpoint (a PBT exploit or pause, a retry after a crash),
Tune's CSV and JSON loggers copy the trial's file from the storage path over the driver's local
copy. The storage copy is only as new as the last experiment sync, which Tune throttles, so the
rows reported since then were lost (seen as a PBT donor's report missing from its history).
The local copy is never older, so it is kept; the storage copy is restored only when there is
no local one (a driver resuming the sweep in a new Ray session).

W&B: Ray's logging actor calls `wandb.finish()` and is killed as soon as that returns; W&B's
service process may not have written the run's last records yet, and an ASHA-stopped trial's
offline run file was seen with no metrics at all. `wandb.teardown()` waits for the service.
"""

from __future__ import annotations

import os

from ray.air.integrations.wandb import WandbLoggerCallback
from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback

from hfsweep.compat import RESTORE_FROM_REMOTE, wandb_logging_actor_class
from hfsweep.config.errors import ConfigError
from hfsweep.driver.schedulers import instantiate_at


class _KeepLocalHistory:
    def _restore_from_remote(self, file_name: str, trial) -> None:  # compat.RESTORE_FROM_REMOTE
        if not os.path.exists(os.path.join(trial.local_path, file_name)):
            getattr(super(), RESTORE_FROM_REMOTE)(file_name, trial)


class HistoryCSVLoggerCallback(_KeepLocalHistory, CSVLoggerCallback):
    """Tune's `progress.csv` logger that keeps the rows a trial restart would have dropped."""


class HistoryJsonLoggerCallback(_KeepLocalHistory, JsonLoggerCallback):
    """Tune's `result.json` logger that keeps the rows a trial restart would have dropped."""


_WandbLoggingActor = wandb_logging_actor_class()


class FlushingWandbLoggerCallback(WandbLoggerCallback):
    """Ray's W&B logger, waiting for W&B's service to write each run (when Ray's actor class exists)."""

    if _WandbLoggingActor is not None:

        class _FlushingActor(_WandbLoggingActor):
            def run(self):
                super().run()
                import wandb

                wandb.teardown()

        _logger_actor_cls = _FlushingActor


def build_loggers(cfg: dict) -> list:
    """Tune's CSV and JSON loggers (the report and resume read them) plus every `logger/` option.

    Each logger is a Tune callback on the driver, one run per trial; the workers' Trainer keeps
    `report_to="none"`, so nothing is logged twice.
    """
    loggers = [HistoryCSVLoggerCallback(), HistoryJsonLoggerCallback()]
    for key, node in cfg["logger"].items():
        try:
            loggers.append(instantiate_at(f"logger.{key}", node))
        except (ImportError, RuntimeError) as err:  # Ray's W&B callback raises RuntimeError without wandb
            raise ConfigError(f"logger.{key}: {node['_target_']} cannot start ({err}); pip install 'hfsweep[loggers]'.") from err
    return loggers
