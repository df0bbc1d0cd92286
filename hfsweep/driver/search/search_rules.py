"""What schedulers, searchers, stoppers and the search space need of each other, in one place:
several objectives (only FIFO and the searchers that take a list), BOHB's scheduler and searcher
together, and PBT's limits (no plateau schedule, no adapter shape it would perturb). Checked by
the preflight before Ray starts. (A warm start's rules need its earlier run directories:
`hfsweep.driver.search.warm_start`.)"""

from __future__ import annotations

import math
import sys
from typing import Optional

from hfsweep.config.errors import ConfigError
from hfsweep.config.loading import import_object, iter_leaves, target_name
from hfsweep.config.objectives import is_multi_objective
from hfsweep.config.resources import BILLED_KEYS
from hfsweep.config.schema import PeftMethod, SweepConfig
from hfsweep.config.validation import PLATEAU, as_override, lr_scheduler_types
from hfsweep.driver.search import defaults_trial
from hfsweep.driver.search.search_space import VALUE_SAMPLERS

# peft.* keys that change which tensors the adapter has: a PBT exploit could not load the donor's.
PEFT_SHAPE_KEYS = (
    "method",
    "r",
    "target_modules",
    "feedforward_modules",
    "modules_to_save",
    "bias",
    "use_dora",
    "load_in_4bit",
    "load_in_8bit",
)


def check_search(sweep: SweepConfig) -> None:
    defaults_trial.check(sweep)
    _validate_time_attr(sweep)
    _validate_one_metric_users(sweep)
    _validate_bohb(sweep)
    _validate_population_training(sweep)
    _validate_select(sweep)
    _validate_warm_started_study(sweep)
    _validate_last_rung(sweep)
    _validate_searcher(sweep)
    _validate_billed_resources(sweep)


# Searched, these make a step a different amount of data in each trial (or a trial a different number of steps).
DATA_PER_STEP_KEYS = (
    "training.per_device_train_batch_size",
    "training.gradient_accumulation_steps",
    "training.num_train_epochs",
    "cluster.num_workers",
)


def longest_epochs(sweep: SweepConfig) -> float:
    """The most epochs any trial trains: the largest searched `num_train_epochs`, else the config's."""
    spec = sweep.search_space.get("training", {}).get("num_train_epochs")
    if spec is None:
        return sweep.training.get("num_train_epochs", 3.0)
    return max(spec["values"]) if spec["sampler"] in VALUE_SAMPLERS else spec["high"]


def _validate_time_attr(sweep: SweepConfig) -> None:
    """A scheduler whose time is the step compares trials at the same step, which is the same amount
    of data only when every trial takes the same batch; searched epochs need each trial's own steps."""
    searched = {path for path, _ in iter_leaves(sweep.search_space)}
    if "training.num_train_epochs" in searched and sweep.training["max_steps"] != -1:
        raise ConfigError(
            f"search_space.training.num_train_epochs: training.max_steps={sweep.training['max_steps']} gives every "
            f"trial that many steps, whatever its epochs; set training.max_steps=-1 (each trial's steps follow "
            f"from its epochs and batch size)."
        )
    varying = [key for key in DATA_PER_STEP_KEYS if key in searched]
    if varying and sweep.scheduler.get("time_attr") == "step":
        name = target_name(sweep.scheduler)
        raise ConfigError(
            f"scheduler.time_attr: {name} compares trials at the same step, and search_space.{varying[0]} makes a "
            f"step a different amount of data in each trial; use scheduler=asha_epochs (time in epochs), or "
            f"scheduler=fifo."
        )


def _validate_last_rung(sweep: SweepConfig) -> None:
    """A scheduler that stops trials at `max_t` (ASHA, HyperBand) counts in the unit the trials'
    length is set in: epochs only when each trial's steps follow from its epochs, steps only when
    training.max_steps gives them (ASHA's own "Max (time_attr) not valid!" names no fix)."""
    node, steps = sweep.scheduler, sweep.training["max_steps"]
    if "max_t" not in node:
        return
    name = target_name(node)
    if node.get("time_attr") == "epoch" and steps != -1:
        raise ConfigError(
            f"scheduler.time_attr: {name} places its rungs in epochs, and training.max_steps={steps} ends every "
            f"trial at that step whatever its epochs; set training.max_steps=-1 (each trial trains "
            f"training.num_train_epochs), or use scheduler=asha (rungs in steps)."
        )
    max_t = node["max_t"]
    if isinstance(max_t, bool) or not isinstance(max_t, (int, float)) or max_t <= 0:
        if steps == -1:
            raise ConfigError(
                f"training.max_steps: -1 leaves {name} no last rung (its scheduler.max_t is "
                f"training.max_steps); set training.max_steps, e.g. training.max_steps=100, or use "
                f"scheduler=asha_epochs (rungs in epochs) or scheduler=fifo."
            )
        raise ConfigError(f"scheduler.max_t: must be above 0, not {max_t}; e.g. scheduler.max_t={steps}.")


def _validate_searcher(sweep: SweepConfig) -> None:
    """A model-based searcher draws each value from a range or a list, never a grid (only Tune's
    variant generator walks one), and its random start-up is a count of trials."""
    node = sweep.search_alg
    if _is_a(node["_target_"], "ray.tune.search.BasicVariantGenerator"):
        return
    name = target_name(node)
    grids = [path for path, spec in iter_leaves(sweep.search_space) if spec["sampler"] == "grid"]
    if grids:
        raise ConfigError(
            f"search_space.{grids[0]}: {name} cannot walk a grid; set search_space.{grids[0]}.sampler=choice "
            f"(its values drawn by {name}), or use search_alg=grid."
        )
    startup = node.get("startup_trials")
    if startup is not None and (isinstance(startup, bool) or not isinstance(startup, int) or startup < 0):
        raise ConfigError(
            f"search_alg.startup_trials: must be a whole number of trials, at least 0, not {startup!r}; e.g. "
            f"search_alg.startup_trials=4, or null (a third of the trials)."
        )


def is_population_training(sweep: SweepConfig) -> bool:
    """Whether the scheduler exploits and perturbs trials (PBT, PB2 and their subclasses)."""
    from ray.tune.schedulers import PopulationBasedTraining

    scheduler = import_object(sweep.scheduler["_target_"])
    return isinstance(scheduler, type) and issubclass(scheduler, PopulationBasedTraining)


def population_size(sweep: SweepConfig, num_samples: Optional[int] = None) -> int:
    """How many trials a sweep starts (PBT's population): `num_samples` (the config's unless given)
    times the grid's points, and the defaults trial."""
    grid = [len(spec["values"]) for _, spec in iter_leaves(sweep.search_space) if spec["sampler"] == "grid"]
    samples = sweep.num_samples if num_samples is None else num_samples
    return samples * math.prod(grid) + defaults_trial.added_trials(sweep)


def samples_within(sweep: SweepConfig, trials: int) -> int:
    """The largest num_samples whose population is at most `trials` (0 when even one is more)."""
    return max((n for n in range(1, trials + 1) if population_size(sweep, n) <= trials), default=0)


# Searched, these give trials different lengths.
TRIAL_LENGTH_KEYS = ("training.num_train_epochs", "training.max_steps")


def _validate_population_training(sweep: SweepConfig) -> None:
    """An exploited trial carries on from the donor's checkpoint with perturbed values: a plateau
    schedule's reductions and an adapter's shape cannot be carried over. Synchronous PBT needs
    trials of one length (item 7's pbt s1 hung when a 2-epoch trial ended before the next point)."""
    if not is_population_training(sweep):
        return
    name = target_name(sweep.scheduler)
    if PLATEAU in lr_scheduler_types(sweep.training, sweep.search_space):
        raise ConfigError(
            f"training.lr_scheduler_type: under {name}, {PLATEAU} cannot carry an exploited trial's own "
            f"learning rate over the donor's reductions; use another type (e.g. linear), or scheduler=asha."
        )
    lengths = [key for key in TRIAL_LENGTH_KEYS if key in {path for path, _ in iter_leaves(sweep.search_space)}]
    if sweep.scheduler.get("synch") and lengths:
        raise ConfigError(
            f"scheduler.synch: synchronous {name} pauses each trial at a perturbation until every running trial "
            f"has reached it, and search_space.{lengths[0]} ends some trials in between, after which Ray's {name} "
            f"can leave the paused ones waiting forever; drop it (~scheduler.synch), or stop searching {lengths[0]}."
        )
    searched = sweep.search_space.get("peft", {}) if sweep.peft.method != PeftMethod.none else {}
    perturbed = [key for key in PEFT_SHAPE_KEYS if key in searched and searched[key].get("perturb") is not False]
    if perturbed:
        key = perturbed[0]
        raise ConfigError(
            f"search_space.peft.{key}: {name} would perturb it, and an exploited trial cannot load a donor's adapter "
            f"of another shape; add search_space.peft.{key}.perturb=false (sampled per trial, taken from the donor at "
            f"an exploit), or use scheduler=asha."
        )


# What may act on several objectives: Tune's FIFO scheduler, and searchers that take a list metric
# (Optuna's multi-objective samplers) or ignore the metric (grid and random search).
MULTI_OBJECTIVE_SCHEDULERS = ("ray.tune.schedulers.FIFOScheduler",)
MULTI_OBJECTIVE_SEARCHERS = ("ray.tune.search.optuna.OptunaSearch", "ray.tune.search.BasicVariantGenerator")


def _validate_one_metric_users(sweep: SweepConfig) -> None:
    """With several objectives, refuse what optimises one: schedulers but FIFO, single-objective
    searchers, and stoppers or the Trainer's best model following the whole list."""
    if not is_multi_objective(sweep):
        return
    metrics, modes = sweep.metric, sweep.mode
    fix = f"or sweep one metric (metric={metrics[0]} mode={modes[0]})"
    for key, allowed, what, use in (
        (
            "scheduler",
            MULTI_OBJECTIVE_SCHEDULERS,
            "stops or pauses trials by one metric",
            "scheduler=fifo (with search_alg=optuna, grid or random)",
        ),
        (
            "search_alg",
            MULTI_OBJECTIVE_SEARCHERS,
            "optimises one metric",
            "search_alg=optuna (multi-objective TPE), grid or random",
        ),
    ):
        target = getattr(sweep, key)["_target_"]
        if not any(_is_a(target, name, exactly=key == "scheduler") for name in allowed):
            raise ConfigError(
                f"{key}: {target.rsplit('.', 1)[-1]} {what}, and metric lists {len(metrics)}; use {use}, {fix}."
            )
    for name, node in sweep.stopper.items():
        if isinstance(node.get("metric"), list):
            raise ConfigError(
                f"stopper.{name}.metric: a stopper watches one metric, not {as_override(node['metric'])}; "
                f"set stopper.{name}.metric={metrics[0]} stopper.{name}.mode={modes[0]}."
            )


BOHB = ("ray.tune.schedulers.HyperBandForBOHB", "ray.tune.search.bohb.TuneBOHB")  # one works only with the other


def _validate_bohb(sweep: SweepConfig) -> None:
    import importlib.util

    scheduler, searcher = (
        _is_a(getattr(sweep, key)["_target_"], name) for key, name in zip(("scheduler", "search_alg"), BOHB)
    )
    if scheduler != searcher:
        key, other = ("scheduler", "search_alg") if scheduler else ("search_alg", "scheduler")
        raise ConfigError(
            f"{key}: {getattr(sweep, key)['_target_'].rsplit('.', 1)[-1]} works only with BOHB's {other}; "
            f"set scheduler=bohb search_alg=bohb, or use search_alg=optuna scheduler=hyperband."
        )
    if searcher and (importlib.util.find_spec("hpbandster") is None or importlib.util.find_spec("ConfigSpace") is None):
        raise ConfigError(
            "search_alg: TuneBOHB needs hpbandster and ConfigSpace; pip install 'hfsweep[bohb]', "
            "or use search_alg=optuna scheduler=hyperband."
        )


def _is_a(target: str, class_name: str, exactly: bool = False) -> bool:
    """Whether `_target_` names the class `class_name` (or, unless `exactly`, a subclass): every
    Tune scheduler subclasses FIFOScheduler. Once the target is imported, a class whose module is
    not loaded cannot be it or its base, so that module is not imported to tell (TuneBOHB's pulls
    in hpbandster, ConfigSpace and scipy.stats: seconds on every sweep that does not use it)."""
    cls = import_object(target)
    if class_name.rpartition(".")[0] not in sys.modules:
        return False
    of = import_object(class_name)
    return cls is of or not exactly and isinstance(cls, type) and issubclass(cls, of)


def _validate_warm_started_study(sweep: SweepConfig) -> None:
    """A warm start tells Optuna's sampler the earlier trials through a study in memory
    (`warm_start.optuna_study`), so a storage would never be written."""
    node = sweep.search_alg
    if node.get("warm_start") and node.get("storage"):
        raise ConfigError(
            "search_alg.storage: a warm-started sweep keeps its study, which holds the earlier sweeps' trials, "
            "in memory, so the storage would not be written; drop search_alg.storage or search_alg.warm_start."
        )


def _validate_select(sweep: SweepConfig) -> None:
    """Selection ranks configurations by the mean of one metric over at least two seeds (a t
    interval needs two); PBT's trials change their hyperparameters, so none is one configuration."""
    select = sweep.select
    if select.top_k < 0:
        raise ConfigError(
            f"select.top_k: must be 0 (off) or the number of configurations to re-train, not {select.top_k}."
        )
    if not select.top_k:
        return
    seeds = list(select.seeds)
    if len(set(seeds)) < 2:
        raise ConfigError(
            f"select.seeds: needs at least two different seeds, got {as_override(seeds)}; e.g. select.seeds=[1,2,3]."
        )
    twice = next((seed for seed in seeds if seeds.count(seed) > 1), None)
    if twice is not None:
        once = as_override(list(dict.fromkeys(seeds)))
        raise ConfigError(
            f"select.seeds: {as_override(seeds)} names seed {twice} more than once, which would train "
            f"the same run twice; give each seed once, e.g. select.seeds={once}."
        )
    if not 0 < select.confidence < 1:
        raise ConfigError(
            f"select.confidence: must lie between 0 and 1, not {select.confidence}; e.g. select.confidence=0.95."
        )
    if is_multi_objective(sweep):
        raise ConfigError(
            "select.top_k: picks a winner by the mean of one metric; several objectives have none (set select.top_k=0)."
        )
    if is_population_training(sweep):
        raise ConfigError(
            "select.top_k: PBT and PB2 change a trial's hyperparameters as it trains, so no trial is "
            "one configuration to re-train; set select.top_k=0."
        )


def _validate_billed_resources(sweep: SweepConfig) -> None:
    """A budget in trial-hours or dollars bills every trial at the resources the config gives one
    (`billed_resources`, once per sweep): a searched key that changes what a trial holds would be
    billed at the config's value, and a 4-worker trial counted as one."""
    budget = sweep.budget
    key = "trial_hours" if budget.trial_hours is not None else "usd" if budget.usd is not None else None
    searched = [path for path, _ in iter_leaves(sweep.search_space) if path.startswith(BILLED_KEYS)]
    if key and searched:
        raise ConfigError(
            f"budget.{key}: bills every trial at the config's resources, and search_space.{searched[0]} changes what "
            f"a trial holds; set {searched[0]} in the config, or budget by budget.train_samples or budget.wall_clock_s."
        )
