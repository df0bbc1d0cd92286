"""Ray Tune's logger callbacks, with two fixes that keep every result a trial reported.

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

from ray.air.integrations.wandb import WandbLoggerCallback, _WandbLoggingActor
from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback


class _KeepLocalHistory:
    def _restore_from_remote(self, file_name: str, trial) -> None:
        if not os.path.exists(os.path.join(trial.local_path, file_name)):
            super()._restore_from_remote(file_name, trial)


class HistoryCSVLoggerCallback(_KeepLocalHistory, CSVLoggerCallback):
    """Tune's `progress.csv` logger that keeps the rows a trial restart would have dropped."""


class HistoryJsonLoggerCallback(_KeepLocalHistory, JsonLoggerCallback):
    """Tune's `result.json` logger that keeps the rows a trial restart would have dropped."""


class _FlushingWandbLoggingActor(_WandbLoggingActor):
    def run(self):
        super().run()
        import wandb

        wandb.teardown()


class FlushingWandbLoggerCallback(WandbLoggerCallback):
    _logger_actor_cls = _FlushingWandbLoggingActor
