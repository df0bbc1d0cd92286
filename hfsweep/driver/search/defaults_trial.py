"""The recipe's own values as the sweep's first trial (`search_alg.defaults_trial`, on by default).

A sweep is worth running only if it beats the run its user would have made without it: the composed
config's own value of every searched key (`training.learning_rate=5e-5` while the search space
samples the learning rate) is handed to the searcher as Tune's `points_to_evaluate`, so it runs
first under every searcher, is marked in results.csv, and the summary states the winner's gain
over it. A grid that already holds that point runs it once, as its own trial.
"""

from __future__ import annotations

from typing import Optional

from omegaconf import OmegaConf

from hfsweep.config.errors import ConfigError
from hfsweep.config.loading import import_object, iter_leaves
from hfsweep.config.paths import nested
from hfsweep.config.schema import SweepConfig, plain
from hfsweep.driver.search.search_space import EXCLUSIVE_HIGH, SAMPLERS, VALUE_SAMPLERS

DEFAULTS_COLUMN = "defaults"  # results.csv: True on the trial that ran the config's own values
# Searchers that name their parameters by "/"-joined paths and take a point under those names
# (Optuna enqueues it into its study, BOHB hands it to ConfigSpace); the others take it nested.
FLAT_POINT_SEARCHERS = ("OptunaSearch", "TuneBOHB")


def check(sweep: SweepConfig) -> None:
    """The preflight's check: `search_alg.defaults_trial` is a bool (Hydra reads `=no` or `=maybe`
    as a string, which `wanted` would take as true), and the point fits the searcher."""
    value = sweep.search_alg.get("defaults_trial")
    if value is not None and not isinstance(value, bool):
        raise ConfigError(
            f"search_alg.defaults_trial: must be true or false, not {value!r}; e.g. search_alg.defaults_trial=false."
        )
    defaults_point(sweep)


def wanted(sweep: SweepConfig) -> bool:
    """Whether this sweep runs the defaults trial: asked for, and no warm start (whose earlier
    sweeps ran theirs; an extension is one)."""
    search_alg = sweep.search_alg
    return bool(search_alg.get("defaults_trial")) and not search_alg.get("warm_start")


def defaults_values(sweep: SweepConfig) -> dict:
    """Dotted path -> the composed config's own value, for every searched key."""
    composed = OmegaConf.create(plain(sweep))  # values as the resolved config holds them: enums by name
    return {path: OmegaConf.select(composed, path) for path, _ in iter_leaves(sweep.search_space)}


def grid_runs_it(sweep: SweepConfig, values: dict) -> bool:
    """A search space of grids alone, each holding the config's own value, runs the defaults point already."""
    specs = dict(iter_leaves(sweep.search_space))
    return all(spec["sampler"] == "grid" and values[path] in spec["values"] for path, spec in specs.items())


def check_searchable(sweep: SweepConfig, values: dict, model_based: bool) -> None:
    """A model-based searcher maps the point into its space (a choice's index, a range's bounds):
    the config's own value must lie in it."""
    if not model_based:
        return
    for path, spec in iter_leaves(sweep.search_space):
        value = values[path]
        chosen = spec["sampler"] in VALUE_SAMPLERS  # a range sampler beside a preset's `values` samples its range
        if spec["sampler"] not in SAMPLERS or not chosen and None in (spec.get("low"), spec.get("high")):
            continue  # compile_search_space refuses the leaf itself, in its own line
        if value is None and not chosen:
            raise ConfigError(
                f"search_space.{path}: the defaults trial runs the config's own {path}, which is null, and a range "
                f"holds no null; set {path} inside [{spec['low']}, {spec['high']}], or search_alg.defaults_trial=false."
            )
        exclusive = spec["sampler"] in EXCLUSIVE_HIGH
        inside = (
            (value in spec["values"])
            if chosen
            else spec["low"] <= value and (value < spec["high"] if exclusive else value <= spec["high"])
        )
        if not inside:
            space = spec["values"] if chosen else f"[{spec['low']}, {spec['high']}{')' if exclusive else ']'}"
            raise ConfigError(
                f"search_space.{path}: the defaults trial runs the config's own {path}={value}, outside {space}; "
                f"widen the space to hold it, set {path} inside it, or search_alg.defaults_trial=false."
            )


def defaults_point(sweep: SweepConfig) -> Optional[dict]:
    """The point to run first, in the form the configured searcher takes it, or None when there is
    none to add (off, warm-started, or a grid that runs it anyway)."""
    if not wanted(sweep):
        return None
    from ray.tune.search import BasicVariantGenerator

    searcher = import_object(sweep.search_alg["_target_"])
    model_based = not issubclass(searcher, BasicVariantGenerator)
    values = defaults_values(sweep)
    if not model_based and grid_runs_it(sweep, values):
        return None
    check_searchable(sweep, values, model_based)
    if any(cls.__name__ in FLAT_POINT_SEARCHERS for cls in searcher.__mro__):
        return {path.replace(".", "/"): value for path, value in values.items()}
    return nested(values)


def added_trials(sweep: SweepConfig) -> int:
    """How many trials the defaults point adds to the sweep's num_samples (times its grid): Tune
    counts it as one of the samples."""
    return int(defaults_point(sweep) is not None)


def is_defaults(row: dict, values: dict) -> bool:
    """Whether a results row ran the config's own values (floats compared as written)."""
    return all(_same(row.get(path), value) for path, value in values.items())


def _same(a, b) -> bool:
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return a == b
