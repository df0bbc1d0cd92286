"""The sweep's budget (`budget.wall_clock_s`, `budget.trial_hours`, `budget.usd`,
`budget.train_samples`): a Tune stopper that ends the whole sweep once any is spent, and what trials
cost.

Tune acts on a stopper's `stop_all` as on its own `time_budget_s`: the searcher is finished, so
no trial starts after, and every trial still running or pending is stopped at once, ending
TERMINATED with its last report (and checkpoint) as its result. A trial's time is Tune's
`time_total_s`, known at each of its reports, so the trial-hours (and their price) are counted at
reports, as are its training samples (`train_samples`, which a restored trial counts from its
checkpoint's step, as Tune counts its time from the checkpoint's); the wall clock is checked at
every step of Tune's loop. The budget is also a Tune callback, to follow the reports' checkpoints:
Tune saves a report's checkpoint after the report, and a trial stopped in between would lose it,
so `stop_all` waits until no report's checkpoint is being saved.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import astuple, dataclass, field
from typing import Optional

from ray import tune
from ray.tune.result import SHOULD_CHECKPOINT

from hfsweep.compat import saved_callback_states
from hfsweep.config.resources import billed_resources, price_key
from hfsweep.config.schema import ClusterConfig, StrategyConfig, SweepConfig
from hfsweep.contract.metrics import TRAIN_SAMPLES


@dataclass
class Spend:
    """What a budget has spent, and what it waits for."""

    spent_s: float = 0.0  # wall clock, as Tune's TimeoutStopper counts it: from the first check, across a resume
    last_check: Optional[float] = None
    trial_s: dict = field(default_factory=dict)  # trial id -> its time_total_s at its latest report
    trial_samples: dict = field(default_factory=dict)  # trial id -> its train_samples at its latest report
    reason: Optional[str] = None  # what was spent, once it was
    saving: set = field(default_factory=set)  # trials whose latest report's checkpoint Tune has not saved yet


# One ledger per budget in this process, shared by every copy of it: Tune uses a pickled copy of
# the stopper beside the callback it restores state into, and both must see one spend.
_SPENDS: dict[str, Spend] = {}
LEDGER = {"spent_s", "trial_s", "reason"}  # what `SweepBudget.get_state` saves, told from other callbacks' states


def spent_before(analyses: list) -> dict:
    """What a sweep's earlier experiments spent, in `SweepBudget.get_state`'s form, so that
    `resume --extend` counts it against the same budget: each trial's time_total_s at its last
    report (and its training samples), and the wall clock the budget counted. That is the newest
    ledger Tune saved with the experiments (one ledger runs on through a selection, a resume and an
    extension, not counting the time a sweep lay stopped); where an experiment has none, each
    experiment's span from its first trial's start to its last report."""
    trial_s, trial_samples, spans, ledgers = {}, {}, 0.0, []
    for analysis in analyses:
        reported = [trial for trial in analysis.trials if trial.last_result]
        trial_s.update({trial.trial_id: trial.last_result.get("time_total_s", 0.0) for trial in reported})
        trial_samples.update({trial.trial_id: trial.last_result.get(TRAIN_SAMPLES, 0) for trial in reported})
        if reported:
            spans += max(trial.run_metadata.last_result_time for trial in reported) - min(
                trial.run_metadata.start_time for trial in reported
            )
        ledgers.append(next((s for s in saved_callback_states(analysis.experiment_path) if LEDGER <= set(s)), None))
    spent_s = spans if None in ledgers else max((ledger["spent_s"] for ledger in ledgers), default=0.0)
    return {"spent_s": spent_s, "trial_s": trial_s, "trial_samples": trial_samples, "reason": None}


def trial_cost_usd(cluster: ClusterConfig, strategy: StrategyConfig, time_total_s: float) -> Optional[float]:
    """What a trial that ran `time_total_s` cost, counted as the budget counts it; None without a price
    (or in a run directory saved before prices existed, which `python -m hfsweep.report` still reads)."""
    price = getattr(cluster, price_key(cluster))
    return None if price is None else time_total_s * billed_resources(cluster, strategy) / 3600 * price


class SweepBudget(tune.Stopper, tune.Callback):
    # what a budget pickled before budget.usd or budget.train_samples existed (a sweep to resume) reads
    usd = price = train_samples = None

    def __init__(
        self,
        wall_clock_s: Optional[float],
        trial_hours: Optional[float],
        resources_per_trial: float,
        usd: Optional[float] = None,
        price_per_resource_hour: Optional[float] = None,
        train_samples: Optional[int] = None,
    ):
        self.wall_clock_s, self.trial_hours, self.resources = wall_clock_s, trial_hours, resources_per_trial
        self.usd, self.price, self.train_samples = usd, price_per_resource_hour, train_samples
        self.key = uuid.uuid4().hex

    def __setstate__(self, state: dict) -> None:
        """Unpickle, migrating a budget pickled before the shared ledger (a run directory to resume):
        it held its spend in its own fields and had no key. Its copies (the stopper and the callback
        Tune restores) get one key from their settings, so they share one ledger again."""
        state = dict(state)
        own = {
            name: state.pop(name) for name in ("spent_s", "trial_s", "reason", "last_check", "saving") if name in state
        }
        self.__dict__.update(state)
        if "key" not in state:
            self.key = "pre-ledger:" + repr((self.wall_clock_s, self.trial_hours, self.resources))
            earlier = _SPENDS.get(self.key)
            if earlier is None or own.get("spent_s", 0.0) > earlier.spent_s:
                _SPENDS[self.key] = Spend(
                    spent_s=own.get("spent_s", 0.0), trial_s=dict(own.get("trial_s", {})), reason=own.get("reason")
                )

    @property
    def spend(self) -> Spend:
        return _SPENDS.setdefault(self.key, Spend())

    @property
    def reason(self) -> Optional[str]:
        return self.spend.reason

    def __call__(self, trial_id: str, result: dict) -> bool:
        self.spend.trial_s[trial_id] = result.get("time_total_s", 0.0)
        if TRAIN_SAMPLES in result:
            self.spend.trial_samples[trial_id] = result[TRAIN_SAMPLES]
        return False

    def on_trial_result(self, iteration, trials, trial, result, **info):
        if result.get(SHOULD_CHECKPOINT):
            self.spend.saving.add(trial.trial_id)

    def on_checkpoint(self, iteration, trials, trial, checkpoint, **info):
        self.spend.saving.discard(trial.trial_id)

    def on_trial_complete(self, iteration, trials, trial, **info):
        self.spend.saving.discard(trial.trial_id)

    on_trial_error = on_trial_complete

    def trial_hours_used(self) -> float:
        return sum(self.spend.trial_s.values()) * self.resources / 3600

    def usd_used(self) -> float:
        return self.trial_hours_used() * self.price

    def samples_used(self) -> int:
        return sum(self.spend.trial_samples.values())

    def stop_all(self) -> bool:
        spend, now = self.spend, time.time()
        if spend.last_check is not None:
            spend.spent_s += now - spend.last_check
        spend.last_check = now
        if spend.reason is None and self.wall_clock_s is not None and spend.spent_s >= self.wall_clock_s:
            spend.reason = f"its wall-clock budget (budget.wall_clock_s={self.wall_clock_s:g}: {spend.spent_s:.0f} s)"
        if spend.reason is None and self.trial_hours is not None and self.trial_hours_used() >= self.trial_hours:
            spend.reason = (
                f"its trial-hours budget (budget.trial_hours={self.trial_hours:g}: {self.trial_hours_used():.3g} used)"
            )
        if spend.reason is None and self.usd is not None and self.usd_used() >= self.usd:
            spend.reason = f"its USD budget (budget.usd={self.usd:g}: ${self.usd_used():.3g} spent)"
        if spend.reason is None and self.train_samples is not None and self.samples_used() >= self.train_samples:
            spend.reason = (
                f"its training-samples budget (budget.train_samples={self.train_samples}: {self.samples_used()} seen)"
            )
        return spend.reason is not None and not spend.saving

    def get_state(self) -> dict:
        """What was spent, saved by Tune with the experiment's callbacks at every experiment
        checkpoint (the stopper itself is pickled once, when the Tuner is built)."""
        spend = self.spend
        return {
            "spent_s": spend.spent_s,
            "trial_s": dict(spend.trial_s),
            "trial_samples": dict(spend.trial_samples),
            "reason": spend.reason,
        }

    def set_state(self, state: dict) -> None:
        """A resumed sweep counts on from what was spent, not the time it lay stopped (a state saved
        before samples were counted has none)."""
        _SPENDS[self.key] = Spend(
            spent_s=state["spent_s"],
            trial_s=dict(state["trial_s"]),
            trial_samples=dict(state.get("trial_samples", {})),
            reason=state["reason"],
        )

    def summary(self) -> str:
        """The summary's line: what was spent of each budget."""
        spent = []
        if self.wall_clock_s is not None:
            spent.append(f"{self.spend.spent_s:.0f} of {self.wall_clock_s:g} s of wall clock")
        if self.trial_hours is not None:
            spent.append(
                f"{self.trial_hours_used():.4g} of {self.trial_hours:g} trial-hours "
                f"({sum(self.spend.trial_s.values()):.1f} trial-seconds x {self.resources:g})"
            )
        if self.usd is not None:
            spent.append(f"${self.usd_used():.4g} of ${self.usd:g}")
        if self.train_samples is not None:
            spent.append(f"{self.samples_used()} of {self.train_samples} training samples")
        return "; ".join(spent) + " used"


def build_budget(sweep: SweepConfig) -> Optional[SweepBudget]:
    """The budget stopper, or None when the config sets no budget. A trial's resources are its
    GPUs on a GPU sweep, else its CPUs."""
    budget, cluster = sweep.budget, sweep.cluster
    if all(value is None for value in astuple(budget)):
        return None
    return SweepBudget(
        budget.wall_clock_s,
        budget.trial_hours,
        billed_resources(cluster, sweep.strategy),
        budget.usd,
        getattr(cluster, price_key(cluster)),
        budget.train_samples,
    )
