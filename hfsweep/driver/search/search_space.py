"""Search-space YAML to `ray.tune` samplers.

A search space mirrors the config: a leaf `{sampler: NAME, ...}` at `training.learning_rate`
searches `training.learning_rate`. Tune samples a nested dict of the same shape, which
`hfsweep.config.schema.merged` merges into the typed config of each trial.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from omegaconf import OmegaConf

from hfsweep.config.errors import ConfigError
from hfsweep.config.loading import iter_leaves
from hfsweep.config.paths import get_path, nested, set_path
from hfsweep.config.schema import SweepConfig, plain

_ABSENT = object()


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
    """The values to choose from, each checked against the schema's type for `path` (an enum's
    names, an int...), as a value set on the command line would be at composition. (Task options,
    a free node here, are checked by the Task: `Task.check_searched_options`, at the preflight.)"""
    from omegaconf.errors import ValidationError

    from hfsweep.config.schema import SweepConfig

    values = spec.get("values")
    if not values:
        raise ConfigError(f"search_space.{path}: sampler '{spec['sampler']}' needs a non-empty list of values.")
    typed = OmegaConf.structured(SweepConfig)
    # a typed key, not one of a free node (training.*)
    if OmegaConf.select(typed, path, default=_ABSENT) is not _ABSENT:
        for value in values:
            try:
                OmegaConf.update(typed, path, value)
            except ValidationError as err:
                raise ConfigError(
                    f"search_space.{path}: {value!r} is not a value {path} takes ({err.msg.splitlines()[0]})."
                ) from err
    return list(values)


def _tune():
    """Ray Tune, imported when a space is compiled rather than with this module: the preflight
    imports this module, and a config its first checks refuse should not wait for Ray's import."""
    from ray import tune

    return tune


SAMPLERS: dict[str, Callable[[str, dict], Any]] = {
    "choice": lambda p, s: _tune().choice(_values(p, s)),
    "grid": lambda p, s: _tune().grid_search(_values(p, s)),
    "uniform": lambda p, s: _tune().uniform(*_bounds(p, s)),
    "quniform": lambda p, s: _tune().quniform(*_bounds(p, s), _step(p, s)),
    "loguniform": lambda p, s: _tune().loguniform(*_bounds(p, s, positive=True)),
    "qloguniform": lambda p, s: _tune().qloguniform(*_bounds(p, s, positive=True), _step(p, s)),
    "randint": lambda p, s: _tune().randint(*_bounds(p, s)),
    "qrandint": lambda p, s: _tune().qrandint(*_bounds(p, s), _step(p, s)),
    "lograndint": lambda p, s: _tune().lograndint(*_bounds(p, s, positive=True)),
}
RANGE_KEYS = ("low", "high", "q")  # what the range samplers read
EXCLUSIVE_HIGH = ("randint", "lograndint")  # Tune never draws their `high` (a quantized range's is drawn)
VALUE_SAMPLERS = ("grid", "choice")  # the samplers that read `values`


def _step(path: str, spec: dict):
    """A quantized sampler's `q`: every sample is rounded to a multiple of it, so it must be given."""
    if not spec.get("q") or spec["q"] <= 0:
        raise ConfigError(
            f"search_space.{path}.q: {spec['sampler']} rounds every sample to a multiple of q; give it (above 0), "
            f"or use {spec['sampler'].removeprefix('q')} for samples unrounded."
        )
    return spec["q"]


def compile_search_space(space: dict, sweep: SweepConfig) -> dict:
    """Turn the `search_space` config into Tune's nested param space, checking every leaf."""
    samplers = {}
    composed = OmegaConf.create(plain(sweep))
    for path, spec in iter_leaves(space):
        if OmegaConf.select(composed, path, default=_ABSENT) is _ABSENT:
            raise ConfigError(
                f"search_space.{path}: '{path}' is not a key of the composed config; "
                f"search an existing key or add it first (+{path}=VALUE)."
            )
        if spec["sampler"] not in SAMPLERS:
            raise ConfigError(
                f"search_space.{path}: unknown sampler '{spec['sampler']}'; use one of {', '.join(SAMPLERS)}."
            )
        _check_range_not_ignored(path, spec)
        try:
            samplers[path] = SAMPLERS[spec["sampler"]](path, spec)
        except ConfigError:
            raise
        except ValueError as err:  # Tune's own refusal of a range: bounds that are no multiples of q
            raise ConfigError(f"search_space.{path}: Tune refuses this range ({err}); fix low, high or q.") from err
    return nested(samplers)


def _check_range_not_ignored(path: str, spec: dict) -> None:
    """A grid or choice beside `low`/`high` is a range the user asked for (search_space=... on the
    command line) merged under a preset's grid, which would sweep the grid silently. (A range
    sampler beside `values`, such as `debug=tiny`'s one-value grid, samples its range.)"""
    ignored = [key for key in RANGE_KEYS if key in spec]
    if spec["sampler"] in VALUE_SAMPLERS and ignored:
        raise ConfigError(
            f"search_space.{path}: sampler '{spec['sampler']}' reads values, not {', '.join(ignored)}; set "
            f"search_space.{path}.sampler=loguniform (or uniform) to sample the range, or remove "
            f"{' '.join(f'~search_space.{path}.{key}' for key in ignored)} to keep the values."
        )


def unperturbed(space: dict) -> set[str]:
    """The leaves marked `perturb: false`: sampled once per trial, never perturbed by PBT or PB2;
    an exploited trial takes the donor's value with the donor's checkpoint (an adapter's rank)."""
    return {path for path, spec in iter_leaves(space) if spec.get("perturb") is False}


def pbt_mutations(param_space: dict, fixed: set[str] = frozenset(), prefix: str = "") -> dict:
    """PBT resamples from the same space the searcher samples, all of it but the `fixed` paths.
    Grid and choice values become a list, which Tune's explore shifts to a neighbour or resamples:
    any other Domain it multiplies by 0.8 or 1.2 (a batch size of 16 would become 13 or 19, and a
    string choice raise a TypeError that ends the sweep)."""
    from ray.tune.search.sample import Categorical

    mutations = {}
    for key, value in param_space.items():
        path = f"{prefix}{key}"
        if path in fixed:
            continue
        if isinstance(value, dict) and set(value) == {"grid_search"}:
            mutations[key] = list(value["grid_search"])
        elif isinstance(value, Categorical):
            mutations[key] = list(value.categories)
        elif isinstance(value, dict):
            mutations[key] = pbt_mutations(value, fixed, f"{path}.")
        else:
            mutations[key] = value
    return mutations


class WithinSpace:
    """PBT's `custom_explore_fn`: Tune's explore multiplies a range's value by 0.8 or 1.2 and keeps
    the product, so a perturbed trial can leave the declared space (an RTE winner ended at weight
    decay 0.334 of a 0-0.3 range). Each perturbed range's value goes back to its nearest bound.
    A class, not a closure: Tune pickles the scheduler with the sweep's state."""

    def __init__(self, mutations: dict):
        self.bounds = dict(_range_bounds(mutations))

    def __call__(self, config: dict) -> dict:
        for path, (low, high) in self.bounds.items():
            set_path(config, path, min(max(get_path(config, path), low), high))
        return config


def _range_bounds(mutations: dict, prefix: str = ""):
    """(path, (lowest, highest)) of every range among PBT's mutations; a plain randint's upper bound
    is exclusive, a quantized one's inclusive (Tune's own sampling)."""
    from ray.tune.search.sample import Float, Integer, Quantized

    for key, value in mutations.items():
        if isinstance(value, dict):
            yield from _range_bounds(value, f"{prefix}{key}.")
        elif isinstance(value, Float):
            yield f"{prefix}{key}", (value.lower, value.upper)
        elif isinstance(value, Integer):
            inclusive = isinstance(value.get_sampler(), Quantized)
            yield f"{prefix}{key}", (value.lower, value.upper if inclusive else value.upper - 1)


def pb2_bounds(space: dict) -> dict:
    """PB2's GP models continuous hyperparameters: every leaf it perturbs needs low and high."""
    bounds = {}
    fixed = unperturbed(space)
    for path, spec in iter_leaves(space):
        if path in fixed:
            continue
        if "low" not in spec or "high" not in spec:
            raise ConfigError(
                f"search_space.{path}: scheduler=pb2 needs a sampler with low and high "
                f"(uniform, loguniform, randint...), not '{spec['sampler']}'."
            )
        bounds[path] = [spec["low"], spec["high"]]
    return nested(bounds)
