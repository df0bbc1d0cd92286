"""Ray Tune's W&B logger callback, made to finish writing every trial's run.

Ray's logging actor calls `wandb.finish()` and is killed as soon as that returns; W&B's service
process may not have written the run's last records yet, and an ASHA-stopped trial's offline run
file was seen with no metrics at all. `wandb.teardown()` waits for the service to shut down.
"""

from __future__ import annotations

from ray.air.integrations.wandb import WandbLoggerCallback, _WandbLoggingActor


class _FlushingWandbLoggingActor(_WandbLoggingActor):
    def run(self):
        super().run()
        import wandb

        wandb.teardown()


class FlushingWandbLoggerCallback(WandbLoggerCallback):
    _logger_actor_cls = _FlushingWandbLoggingActor
