"""Playing back a finished sweep's recorded curves through any Tune scheduler, in simulated time
(issue #27; the model is Syne Tune's simulator backend): what would ASHA, HyperBand or the median
rule have stopped, which configuration would it have picked, at what share of the compute?

Only Tune's own records are read (`ExperimentAnalysis`: each trial's config and start time, and
its `result.json`), so any Tune experiment directory can be simulated. The scheduler deciding is the real
one, built from the `scheduler` config group as a sweep builds it; `PlaybackController` stands in
for the part of Tune's `TuneController` a scheduler calls back into, and acts on the decisions as
Tune does: a stopped trial ends, a paused one frees its slot until the scheduler picks it again.
The tables a simulation writes are `hfsweep.driver.results.simulation`'s.
"""

from __future__ import annotations

import heapq
import itertools
import json
import math
import os
import random
from dataclasses import dataclass, field
from functools import cached_property
from typing import Optional

from omegaconf import OmegaConf
from ray import tune
from ray.tune.experiment import Trial
from ray.tune.schedulers import HyperBandForBOHB, PopulationBasedTraining, TrialScheduler
from ray.tune.stopper import NoopStopper
from ray.tune.utils import flatten_dict

from hfsweep.config.errors import ConfigError
from hfsweep.config.loading import compose
from hfsweep.driver.search.schedulers import instantiate_at, target_class


@dataclass
class RecordedTrial:
    trial_id: str
    config: dict
    reports: list[dict]  # the flat results Tune handed the scheduler, in order (without `done`)
    started: float  # wall-clock times, to count how many trials ran at once
    ended: float

    @property
    def seconds(self) -> float:
        return self.reports[-1]["time_total_s"]


@dataclass
class Recording:
    trials: list[RecordedTrial]  # in the order Tune created them

    @cached_property
    def progress(self) -> str:
        """The key a trial's progress is read in: hfsweep's `step`, else Tune's iteration count."""
        return "step" if all("step" in r for t in self.trials for r in t.reports) else "training_iteration"

    def last(self, trial: RecordedTrial):
        return trial.reports[-1][self.progress]

    def max_progress(self):
        return max(self.last(t) for t in self.trials)

    def stopped_early(self) -> list[RecordedTrial]:
        """Trials that ended before the furthest one: their curves lack what a simulation would show."""
        furthest = self.max_progress()
        return [t for t in self.trials if self.last(t) < furthest]

    def concurrency(self) -> int:
        """How many trials ran at once, at most (a trial's time from its start to its last result)."""
        return max(sum(u.started <= t.started < u.ended for u in self.trials) for t in self.trials)


def read_recording(experiment_dirs: list[str]) -> Recording:
    """Each trial that reported, from Tune's records, experiment by experiment (a sweep's own, then
    those `resume --extend` added): result.json keeps every key of every report (progress.csv drops
    a key first reported after the first row)."""
    trials = []
    for experiment_dir in experiment_dirs:
        analysis = tune.ExperimentAnalysis(os.path.abspath(experiment_dir))  # a relative path reads as a URI
        for trial in sorted(analysis.trials, key=lambda t: t.trial_id):  # Tune numbers trials as it creates them
            path = os.path.join(trial.path, "result.json")
            reports = [flat_report(line) for line in open(path) if line.strip()] if os.path.isfile(path) else []
            if reports:
                meta = trial.run_metadata
                trials.append(
                    RecordedTrial(trial.trial_id, trial.config, reports, meta.start_time, meta.last_result_time)
                )
    return Recording(trials)


def flat_report(line: str) -> dict:
    """A recorded result as the scheduler received it: flattened, without the `done` Tune added
    once the trial was over (the simulation decides when it is over)."""
    result = flatten_dict(json.loads(line))
    result.pop("done", None)
    return result


def scheduler_jobs(overrides: list[str]) -> list[list[str]]:
    """The scheduler overrides of one command line, one list per simulated scheduler: as in Hydra's
    multirun, `scheduler=asha,median scheduler.grace_period=10,50` is every combination."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except OverrideParseException as err:
        raise ConfigError(" ".join(str(err).split())) from err
    for override in parsed:
        key = override.get_key_element().lstrip("+~")
        if key == "search_alg" or key.startswith("search_alg."):
            raise ConfigError(
                f"{key}: a simulation runs the recorded configs only; change their order with --shuffle SEED."
            )
        if key != "scheduler" and not key.startswith("scheduler."):
            raise ConfigError(
                f"{key}: a simulation takes scheduler overrides only (scheduler=NAME, scheduler.KEY=VALUE)."
            )
    if not any(o.get_key_element() == "scheduler" for o in parsed):
        raise ConfigError(
            "scheduler: name the scheduler to simulate, e.g. scheduler=asha (several: scheduler=asha,median)."
        )
    choices = [
        [
            f"{o.get_key_element()}={v}"
            for v in (o.sweep_string_iterator() if o.is_sweep_override() else [o.get_value_element_as_str()])
        ]
        for o in parsed
    ]
    jobs = [list(job) for job in itertools.product(*choices)]
    for job in jobs:
        compose(job)  # an unknown scheduler or key, in one line, before any record is read
    return jobs


def job_name(job: list[str]) -> str:
    """`asha`, or `asha grace_period=10` with the scheduler's own overrides."""
    name = next(o.split("=", 1)[1] for o in job if o.startswith("scheduler="))
    return " ".join([name, *(o.replace("scheduler.", "", 1) for o in job if not o.startswith("scheduler="))])


def build_simulated_scheduler(job: list[str], sweep_cfg: dict, metric: str, mode: str) -> TrialScheduler:
    """The scheduler `python -m hfsweep JOB` would build, its `${training.max_steps}` and the like
    read from the recorded sweep's config (keys it lacks, from the defaults), optimising the sweep's
    metric as TuneConfig makes it."""
    composed = OmegaConf.to_container(compose(job), resolve=False)
    context = {**composed, **sweep_cfg, "training": {**composed["training"], **sweep_cfg.get("training", {})}}
    context = OmegaConf.create({**context, "scheduler": composed["scheduler"]})
    node = OmegaConf.to_container(context.scheduler, resolve=True)
    cls = target_class(node)
    if issubclass(cls, (PopulationBasedTraining, HyperBandForBOHB)):  # PB2 is a PopulationBasedTraining
        raise ConfigError(
            f"scheduler={job_name(job).split()[0]}: {cls.__name__} needs what a simulation of recorded "
            f"curves cannot give (new configs, or BOHB's searcher); "
            f"choose fifo, asha, hyperband or median."
        )
    scheduler = instantiate_at("scheduler", node)
    scheduler.set_search_properties(metric, mode)
    return scheduler


@dataclass
class TrialOutcome:
    trial_id: str
    config: dict
    ended: str  # completed, stopped, or paused at the end
    progress: float  # the step (or iteration) of its last report
    seconds: float  # the compute it used: its recorded time up to that report
    reports: list[dict] = field(repr=False, default_factory=list)


class PlaybackController:
    """What a scheduler sees of Tune's TuneController (trials, stop, pause), over recorded trials
    started at `concurrency` at a time in `order`, each report arriving at its recorded time."""

    def __init__(
        self,
        recording: Recording,
        scheduler: TrialScheduler,
        order: list[RecordedTrial],
        concurrency: int,
        stopper=None,
    ):
        self.recording, self.scheduler, self.concurrency = recording, scheduler, concurrency
        self.stopper = stopper or NoopStopper()
        self.to_add = list(order)
        self.records: dict[Trial, RecordedTrial] = {}
        self.delivered: dict[Trial, int] = {}  # reports the scheduler has seen
        self.running: dict[Trial, int] = {}  # a running trial's pending event
        self.stopped: set[Trial] = set()  # by the scheduler (not by a stopper, nor at the end of its records)
        self.events: list = []  # (time, event id, trial)
        self.now = 0.0
        self.ids = itertools.count()

    # What schedulers call, as on Tune's controller.
    def get_trials(self) -> list[Trial]:
        return list(self.records)

    def get_live_trials(self) -> set[Trial]:
        return {t for t in self.records if t.status != Trial.TERMINATED}

    def stop_trial(self, trial: Trial) -> None:
        """As TuneController.stop_trial: a waiting trial (only a scheduler stops one) is removed, a
        running one completes."""
        if trial.status in (Trial.PENDING, Trial.PAUSED):
            self.stopped.add(trial)
            self.scheduler.on_trial_remove(self, trial)
        elif trial.status == Trial.RUNNING:
            self.scheduler.on_trial_complete(self, trial, trial.last_result)
        else:
            return
        self.running.pop(trial, None)
        trial.set_status(Trial.TERMINATED)

    def pause_trial(self, trial: Trial, should_checkpoint: bool = True) -> None:
        self.running.pop(trial, None)
        trial.set_status(Trial.PAUSED)

    # The simulation.
    def run(self) -> None:
        self.fill()
        while self.events:
            self.now, event, trial = heapq.heappop(self.events)
            if self.running.get(trial) == event:
                self.deliver(trial)
                self.fill()

    def fill(self) -> None:
        """Add trials while fewer than `concurrency` are live (hfsweep's searcher counts paused
        ones too), then start what the scheduler chooses while a slot is free."""
        while self.to_add and len(self.get_live_trials()) < self.concurrency:
            record = self.to_add.pop(0)
            trial = Trial("simulated", config=record.config, trial_id=record.trial_id, stub=True)
            self.records[trial], self.delivered[trial] = record, 0
            self.scheduler.on_trial_add(self, trial)
        while len(self.running) < self.concurrency:
            trial = self.scheduler.choose_trial_to_run(self)
            if trial is None:
                return
            trial.set_status(Trial.RUNNING)
            self.schedule_next(trial)

    def schedule_next(self, trial: Trial) -> None:
        reports, done = self.records[trial].reports, self.delivered[trial]
        since = reports[done - 1]["time_total_s"] if done else 0.0
        self.running[trial] = event = next(self.ids)
        heapq.heappush(self.events, (self.now + reports[done]["time_total_s"] - since, event, trial))

    def deliver(self, trial: Trial) -> None:
        """One report, as TuneController._process_trial_result takes it: stoppers first, then the
        scheduler; a trial with no report left has returned, and Tune stops it."""
        reports = self.records[trial].reports
        result = dict(reports[self.delivered[trial]])
        if self.stopper(trial.trial_id, result) or trial.should_stop(result):
            decision = TrialScheduler.STOP
        else:
            decision = self.scheduler.on_trial_result(self, trial, result)
            if decision == TrialScheduler.STOP:
                self.stopped.add(trial)
        if decision == TrialScheduler.STOP:
            result["done"] = True
        trial.update_last_result(result)
        self.delivered[trial] += 1
        if decision == TrialScheduler.PAUSE:
            self.pause_trial(trial)
        elif decision == TrialScheduler.STOP or self.delivered[trial] == len(reports):
            self.stop_trial(trial)
        else:
            self.schedule_next(trial)

    def outcomes(self) -> list[TrialOutcome]:
        """Each trial's end: `stopped` by the scheduler short of the sweep's furthest step (ASHA's
        STOP at max_t is a completion), else completed, or still paused or pending."""
        found, progress, furthest = [], self.recording.progress, self.recording.max_progress()
        for trial, record in self.records.items():
            seen = record.reports[: self.delivered[trial]]
            last = seen[-1] if seen else {}
            ended = {Trial.PAUSED: "paused at the end", Trial.PENDING: "never started"}.get(trial.status, "completed")
            if trial in self.stopped and last.get(progress, 0) < furthest:
                ended = "stopped"
            found.append(
                TrialOutcome(
                    record.trial_id, record.config, ended, last.get(progress, 0), last.get("time_total_s", 0.0), seen
                )
            )
        return found


@dataclass
class Simulation:
    name: str
    scheduler: str  # its class
    trials: list[TrialOutcome]
    best: Optional[TrialOutcome]
    best_value: float
    best_progress: float
    compute_share: float  # simulated trial time / the whole sweep's
    regret: float  # how much worse the best it saw is than the whole sweep's best
    wall_s: float  # the simulated sweep's wall-clock


def best_report(outcomes: list[TrialOutcome], metric: str, mode: str):
    """(outcome, value, progress) of the best report seen, of equal ones the later step (as
    `hfsweep.driver.results.best` ranks them) in the earlier trial, or (None, nan, 0) when none has `metric`."""
    sign = 1 if mode == "max" else -1
    scored = [
        (sign * r[metric], r.get("step", 0), -i, o, r)
        for i, o in enumerate(outcomes)
        for r in o.reports
        if isinstance(r.get(metric), (int, float)) and math.isfinite(r[metric])
    ]
    if not scored:
        return None, math.nan, 0
    *_, outcome, report = max(scored, key=lambda s: s[:3])
    return outcome, report[metric], report.get("step", report.get("training_iteration", 0))


def simulate(
    recording: Recording,
    scheduler: TrialScheduler,
    metric: str,
    mode: str,
    *,
    name: str,
    concurrency: Optional[int] = None,
    shuffle: Optional[int] = None,
    stopper=None,
) -> Simulation:
    """Play `recording` back through `scheduler`: in the recorded order (or shuffled by `shuffle`),
    at the recorded concurrency (or `concurrency`), each trial's reports at their recorded times."""
    order = list(recording.trials)
    if shuffle is not None:
        random.Random(shuffle).shuffle(order)
    controller = PlaybackController(recording, scheduler, order, concurrency or recording.concurrency(), stopper)
    controller.run()
    outcomes = controller.outcomes()
    full = [
        TrialOutcome(t.trial_id, t.config, "completed", recording.last(t), t.seconds, t.reports)
        for t in recording.trials
    ]
    _, full_value, _ = best_report(full, metric, mode)
    best, value, progress = best_report(outcomes, metric, mode)
    return Simulation(
        name=name,
        scheduler=type(scheduler).__name__,
        trials=outcomes,
        best=best,
        best_value=value,
        best_progress=progress,
        compute_share=sum(o.seconds for o in outcomes) / sum(t.seconds for t in recording.trials),
        regret=(full_value - value) if mode == "max" else (value - full_value),
        wall_s=controller.now,
    )
