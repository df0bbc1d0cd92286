"""The sweep's loggers: Ray Tune's own logger callbacks on the driver, one run per trial, with two
fixes that keep every result a trial reported.

History: when a trial restarts from a checkpoint (a PBT exploit or pause, a retry after a crash),
Tune's CSV and JSON loggers copy the trial's file from the storage path over the driver's local
copy. The storage copy is only as new as the last experiment sync, which Tune throttles, so the
rows reported since then were lost (seen as a PBT donor's report missing from its history).
The local copy is never older, so it is kept; the storage copy is restored only when there is
no local one (a driver resuming the sweep in a new Ray session). Appending to the file after a
restart, Tune's CSV logger took its columns from the restarted trial's first result, which held
five more keys in another order, and wrote them under the file's old header: every later row of
`progress.csv` was shifted (seen in a resumed PBT sweep; pandas refused the file). Those rows now
follow the file's own header; `result.json` keeps every key.

W&B: Ray's logging actor calls `wandb.finish()` and is killed as soon as that returns; W&B's
service process may not have written the run's last records yet, and an ASHA-stopped trial's
offline run file was seen with no metrics at all. `wandb.teardown()` waits for the service.

TensorBoard: Tune's HParams session of a trial names the searched keys by path with slashes, holds
their first sampled values (not the ones PBT mutated them to), lists every scalar Tune logs as a
metric (`done`, `should_checkpoint`...) and leaves out `time_total_s`, which Tune logs as no scalar.
`HParamsTBXLoggerCallback` writes a session to compare trials by instead.
"""

from __future__ import annotations

import csv
import os
from typing import Union

from ray.air.integrations.wandb import WandbLoggerCallback
from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback, TBXLoggerCallback
from ray.tune.result import EXPR_PROGRESS_FILE
from ray.tune.utils import flatten_dict

from hfsweep.compat import RESTORE_FROM_REMOTE, wandb_logging_actor_class, write_rows_under
from hfsweep.config.errors import ConfigError
from hfsweep.config.schema import SweepConfig
from hfsweep.contract.metrics import COST_METRICS
from hfsweep.driver.search.schedulers import instantiate_at


class _KeepLocalHistory:
    def _restore_from_remote(self, file_name: str, trial) -> None:  # compat.RESTORE_FROM_REMOTE
        if not os.path.exists(os.path.join(trial.local_path, file_name)):
            getattr(super(), RESTORE_FROM_REMOTE)(file_name, trial)


class HistoryCSVLoggerCallback(_KeepLocalHistory, CSVLoggerCallback):
    """Tune's `progress.csv` logger that keeps the rows a trial restart would have dropped and
    writes the rows it appends under the file's own header."""

    def _setup_trial(self, trial) -> None:  # compat.CSV_SETUP_TRIAL
        super()._setup_trial(trial)
        path = os.path.join(trial.local_path, EXPR_PROGRESS_FILE)
        if os.path.isfile(path) and os.path.getsize(path):
            with open(path, newline="") as rows:
                write_rows_under(self, trial, next(csv.reader(rows)))


class HistoryJsonLoggerCallback(_KeepLocalHistory, JsonLoggerCallback):
    """Tune's `result.json` logger that keeps the rows a trial restart would have dropped."""


HPARAMS_RUN = "hparams"  # in a trial's folder: the TensorBoard run that holds its HParams session
EVAL_SPEED = ("eval_runtime", "eval_samples_per_second", "eval_steps_per_second")  # the Trainer's, not a score


class HParamsTBXLoggerCallback(TBXLoggerCallback):
    """Tune's TensorBoard logger, with each trial's HParams session written to compare trials in
    TensorBoard's HParams tab: the searched keys as results.csv names them (`training.learning_rate`),
    with the values the trial ended with, and as metrics the trial's last report of the sweep's
    objectives (`metrics`), its eval metrics, loss and cost, each also a scalar `final/NAME`. The
    session is its own run, `TRIAL_DIR/hparams`, beside Tune's event file of every report."""

    def __init__(self, metrics: Union[str, list] = ()):
        super().__init__()
        self.objectives = [metrics] if isinstance(metrics, str) else list(metrics)

    def compared(self, last: dict) -> list[str]:
        """The metrics of the session: the objectives first, then the eval metrics, loss and cost."""
        others = [
            name
            for name in last
            if name not in self.objectives
            and (name in COST_METRICS or name == "loss" or (name.startswith("eval_") and name not in EVAL_SPEED))
        ]
        return [
            name
            for name in [*self.objectives, *others]
            if isinstance(last.get(name), (int, float)) and not isinstance(last[name], bool)
        ]

    def _try_log_hparams(self, trial, result: dict) -> None:  # compat.TBX_LOG_HPARAMS: Tune calls it as a trial ends
        from tensorboardX import SummaryWriter
        from tensorboardX.summary import hparams

        last = trial.last_result
        final = {f"final/{name}": last[name] for name in self.compared(last)}
        searched = {
            path: value if isinstance(value, (bool, int, float, str)) else str(value)
            for path, value in flatten_dict(trial.config, delimiter=".").items()
        }
        with SummaryWriter(os.path.join(trial.local_path, HPARAMS_RUN)) as writer:
            for summary in hparams(searched, final):
                writer.file_writer.add_summary(summary)
            for tag, value in final.items():
                writer.add_scalar(tag, value, global_step=last.get("step", 0))


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


def build_loggers(sweep: SweepConfig) -> list:
    """Tune's CSV and JSON loggers (the report and resume read them) plus every `logger/` option.

    Each logger is a Tune callback on the driver, one run per trial; the workers' Trainer keeps
    `report_to="none"`, so nothing is logged twice.
    """
    loggers = [HistoryCSVLoggerCallback(), HistoryJsonLoggerCallback()]
    for key, node in sweep.logger.items():
        try:
            loggers.append(instantiate_at(f"logger.{key}", node))
        except (ImportError, RuntimeError) as err:  # Ray's W&B callback raises RuntimeError without wandb
            raise ConfigError(
                f"logger.{key}: {node['_target_']} cannot start ({err}); pip install 'hfsweep[loggers]'."
            ) from err
    return loggers
