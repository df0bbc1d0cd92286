"""Search-space YAML to `ray.tune` samplers, and the scheduler and search-algorithm factories.

A search space mirrors the config: a leaf `{sampler: NAME, ...}` at `training.learning_rate`
searches `training.learning_rate`. Tune samples a nested dict of the same shape, which
`apply_sampled` merges into the resolved config of each trial.
"""

from __future__ import annotations

import copy
import re
import sys
from typing import Any, Callable, Dict, Iterator, Tuple

from hydra.utils import get_class, instantiate
from ray import tune
from ray.tune.schedulers import PopulationBasedTraining
from ray.tune.search import BasicVariantGenerator, ConcurrencyLimiter
from ray.tune.stopper import CombinedStopper

from hfsweep.config import PLATEAU, ConfigError, lr_scheduler_types
from hfsweep.loggers import HistoryCSVLoggerCallback, HistoryJsonLoggerCallback


def _bounds(path: str, spec: dict, positive: bool = False) -> tuple:
    low, high = spec.get("low"), spec.get("high")
    if low is None or high is None:
        raise ConfigError(f"search_space.{path}: sampler '{spec['sampler']}' needs low and high.")
    if low >= high:
        raise ConfigError(f"search_space.{path}: low ({low}) must be below high ({high}).")
    if positive and low <= 0:
        raise ConfigError(f"search_space.{path}: sampler '{spec['sampler']}' needs low > 0, got {low}.")
    return low, high


def _values(path: str, spec: dict) -> list:
    values = spec.get("values")
    if not values:
        raise ConfigError(f"search_space.{path}: sampler '{spec['sampler']}' needs a non-empty list of values.")
    return list(values)


SAMPLERS: Dict[str, Callable[[str, dict], Any]] = {
    "choice": lambda p, s: tune.choice(_values(p, s)),
    "grid": lambda p, s: tune.grid_search(_values(p, s)),
    "uniform": lambda p, s: tune.uniform(*_bounds(p, s)),
    "quniform": lambda p, s: tune.quniform(*_bounds(p, s), s.get("q", 1)),
    "loguniform": lambda p, s: tune.loguniform(*_bounds(p, s, positive=True)),
    "qloguniform": lambda p, s: tune.qloguniform(*_bounds(p, s, positive=True), s.get("q", 1)),
    "randint": lambda p, s: tune.randint(*_bounds(p, s)),
    "qrandint": lambda p, s: tune.qrandint(*_bounds(p, s), s.get("q", 1)),
    "lograndint": lambda p, s: tune.lograndint(*_bounds(p, s, positive=True)),
}


def iter_leaves(space: dict, prefix: str = "") -> Iterator[Tuple[str, dict]]:
    """Yield (dotted config path, sampler spec) for every leaf of a search space."""
    for key, node in space.items():
        path = f"{prefix}{key}"
        if isinstance(node, dict) and "sampler" in node:
            yield path, node
        elif isinstance(node, dict):
            yield from iter_leaves(node, f"{path}.")
        else:
            raise ConfigError(f"search_space.{path}: expected {{sampler: NAME, ...}}, got {node!r}.")


def _has_path(cfg: dict, path: str) -> bool:
    node = cfg
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def nested(dotted: dict) -> dict:
    """{"training.learning_rate": v} as {"training": {"learning_rate": v}}: the shape of the config."""
    tree: dict = {}
    for path, value in dotted.items():
        *parents, leaf = path.split(".")
        node = tree
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return tree


def compile_search_space(space: dict, cfg: dict) -> dict:
    """Turn the `search_space` config into Tune's nested param space, checking every leaf."""
    samplers = {}
    for path, spec in iter_leaves(space):
        if not _has_path(cfg, path):
            raise ConfigError(
                f"search_space.{path}: '{path}' is not a key of the composed config; "
                f"search an existing key or add it first (+{path}=VALUE)."
            )
        if spec["sampler"] not in SAMPLERS:
            raise ConfigError(
                f"search_space.{path}: unknown sampler '{spec['sampler']}'; use one of {', '.join(SAMPLERS)}."
            )
        samplers[path] = SAMPLERS[spec["sampler"]](path, spec)
    return nested(samplers)


def apply_sampled(cfg: dict, sampled: dict) -> dict:
    """Return a copy of the resolved config with a trial's sampled values merged in."""
    merged = copy.deepcopy(cfg)

    def merge(into: dict, values: dict) -> None:
        for key, value in values.items():
            if isinstance(value, dict) and isinstance(into.get(key), dict):
                merge(into[key], value)
            else:
                into[key] = value

    merge(merged, sampled)
    return merged


def _instantiate(key: str, node: dict, **objects):
    """Hydra-instantiate the config at `key`, passing `objects` (Tune domains, ints) straight to the
    constructor; a constructor's complaint about its arguments becomes one line naming the key."""
    try:
        return instantiate(node, _partial_=True)(**objects)
    except (AssertionError, ValueError, TypeError) as err:
        name = node["_target_"].rsplit(".", 1)[-1]
        unexpected = re.search(r"unexpected keyword argument '(\w+)'", str(err))
        if unexpected:  # e.g. a preset's ASHA grace_period left over after scheduler=fifo
            arg = unexpected.group(1)
            raise ConfigError(f"{key}.{arg}: {name} takes no '{arg}'; drop it with ~{key}.{arg}") from err
        raise ConfigError(f"{key}: {name} rejects these settings: {err}") from err


def _target_class(node: dict):
    return get_class(node["_target_"])


def pbt_mutations(param_space: dict) -> dict:
    """PBT resamples from the same space the searcher samples: grid values become a list."""
    mutations = {}
    for key, value in param_space.items():
        if isinstance(value, dict) and set(value) == {"grid_search"}:
            mutations[key] = list(value["grid_search"])
        elif isinstance(value, dict):
            mutations[key] = pbt_mutations(value)
        else:
            mutations[key] = value
    return mutations


def pb2_bounds(space: dict) -> dict:
    """PB2's GP models continuous hyperparameters: every leaf needs low and high."""
    bounds = {}
    for path, spec in iter_leaves(space):
        if "low" not in spec or "high" not in spec:
            raise ConfigError(
                f"search_space.{path}: scheduler=pb2 needs a sampler with low and high "
                f"(uniform, loguniform, randint...), not '{spec['sampler']}'."
            )
        bounds[path] = [spec["low"], spec["high"]]
    return nested(bounds)


def build_scheduler(cfg: dict, param_space: dict):
    """Instantiate the configured Tune scheduler; PBT and PB2 mutate the sweep's own search space.

    Metric and mode come from the TuneConfig, so every scheduler optimises the same thing.
    """
    node = cfg["scheduler"]
    cls = _target_class(node)
    if issubclass(cls, PopulationBasedTraining) and PLATEAU in lr_scheduler_types(cfg):
        raise ConfigError(
            f"training.lr_scheduler_type: under {cls.__name__}, {PLATEAU} cannot carry an exploited trial's own "
            f"learning rate over the donor's reductions; use another type (e.g. linear), or scheduler=asha."
        )
    # PB2's module imports a GP stack (scikit-learn: ~2 s); a class can only be a PB2 if loading
    # the target already imported it.
    pb2 = sys.modules.get("ray.tune.schedulers.pb2")
    if pb2 is not None and issubclass(cls, pb2.PB2):
        return _instantiate("scheduler", node, hyperparam_bounds=pb2_bounds(cfg["search_space"]))
    if issubclass(cls, PopulationBasedTraining):
        return _instantiate("scheduler", node, hyperparam_mutations=pbt_mutations(param_space))
    return _instantiate("scheduler", node)


def build_search_alg(cfg: dict, max_concurrent: int):
    """Instantiate the configured Tune search algorithm, capped at max_concurrent running trials.

    Tune ignores TuneConfig.max_concurrent_trials for a variant generator, so the cap is set here.
    """
    node = cfg["search_alg"]
    try:
        cls = _target_class(node)
    except ImportError as err:
        raise ConfigError(f"search_alg: {node['_target_']} cannot be imported ({err}); pip install 'hfsweep[search]'.") from err
    if cls is BasicVariantGenerator:
        return _instantiate("search_alg", node, max_concurrent=max_concurrent)
    grids = [path for path, spec in iter_leaves(cfg["search_space"]) if spec["sampler"] == "grid"]
    if grids:
        raise ConfigError(
            f"search_space.{grids[0]}: search_alg {cls.__name__} cannot take sampler 'grid'; use 'choice'."
        )
    return ConcurrencyLimiter(_instantiate("search_alg", node), max_concurrent=max_concurrent)


class ThresholdStopper(tune.Stopper):
    """Stop a trial once `metric` reaches `threshold`: at or above it for mode=max (a step budget,
    a target accuracy), at or below it for mode=min (a target loss)."""

    def __init__(self, metric: str, threshold: float, mode: str = "max"):
        self.metric, self.threshold, self.mode = metric, threshold, mode

    def __call__(self, trial_id: str, result: dict) -> bool:
        value = result.get(self.metric)
        if value is None:
            return False
        return value >= self.threshold if self.mode == "max" else value <= self.threshold

    def stop_all(self) -> bool:
        return False


def build_stopper(cfg: dict):
    """The configured stoppers combined (any one stops) with the step budget.

    Tune applies stoppers before the scheduler sees a result, so a trial at training.max_steps
    ends there: PBT never exploits into a trial that has no steps left to train.
    """
    budget = ThresholdStopper("step", cfg["training"]["max_steps"], mode="max")
    return CombinedStopper(budget, *(_instantiate(f"stopper.{k}", node) for k, node in cfg["stopper"].items()))


def build_loggers(cfg: dict) -> list:
    """Tune's CSV and JSON loggers (the report and resume read them) plus every `logger/` option.

    Each logger is a Tune callback on the driver, one run per trial; the workers' Trainer keeps
    `report_to="none"`, so nothing is logged twice.
    """
    loggers = [HistoryCSVLoggerCallback(), HistoryJsonLoggerCallback()]
    for key, node in cfg["logger"].items():
        try:
            loggers.append(_instantiate(f"logger.{key}", node))
        except (ImportError, RuntimeError) as err:  # Ray's W&B callback raises RuntimeError without wandb
            raise ConfigError(f"logger.{key}: {node['_target_']} cannot start ({err}); pip install 'hfsweep[loggers]'.") from err
    return loggers


def scheduler_may_exploit(cfg: dict) -> bool:
    """PBT and PB2 restore trials from other trials' checkpoints, any of which may be chosen."""
    return issubclass(_target_class(cfg["scheduler"]), PopulationBasedTraining)
