"""A scheduler's records across a resume. Tune saves a sweep's searcher and callbacks with its
experiment, but not its scheduler: restored, ASHA would forget the results at every rung and PBT
its population's scores and checkpoints, so the resumed sweep would judge its trials against
only what it saw after the interruption. `SchedulerRecords` saves them as a callback's state."""

from __future__ import annotations

from typing import Optional

from ray import tune
from ray.tune.schedulers import FIFOScheduler

from hfsweep.compat import restore_scheduler_records, scheduler_records


class SchedulerRecords(tune.Callback):
    """Saved with every experiment checkpoint; on resume, put back at the first step, once Tune
    has added the restored trials (which it does after restoring callbacks)."""

    def __init__(self, scheduler):
        self.scheduler, self.saved, self.unsaved = scheduler, None, False

    def get_state(self) -> Optional[dict]:
        """None (once said) for records that do not pickle, as a scheduler of the user's own may
        hold: the sweep goes on, and its resume starts them afresh, as Tune does."""
        try:
            return {"records": scheduler_records(self.scheduler)}
        except Exception as err:
            if not self.unsaved:
                self.unsaved = True
                name = type(self.scheduler).__name__
                print(f"hfsweep: {name}'s records cannot be saved ({err!r}); a resume would start them afresh")
            return None

    def set_state(self, state: dict) -> None:
        self.saved = state["records"]

    def on_step_begin(self, iteration, trials, **info):
        if self.saved is None:
            return
        records, self.saved = self.saved, None
        name = type(self.scheduler).__name__
        try:
            restore_scheduler_records(self.scheduler, records, trials)
        except Exception as err:  # a run saved by another Ray: the scheduler starts afresh, as in Tune
            print(f"hfsweep: resume: {name}'s records could not be restored ({err!r}); it starts them afresh")
            return
        print(f"hfsweep: resume: {name} goes on with its records of the sweep's {len(trials)} trials")


def build_scheduler_records(scheduler) -> Optional[SchedulerRecords]:
    """None for FIFO, which keeps no records."""
    return None if type(scheduler) is FIFOScheduler else SchedulerRecords(scheduler)
