"""Warm starts: `search_alg.warm_start=RUN_DIR` (or a list) hands earlier sweeps' trials to this
sweep's searcher, so it does not sample again what is known.

The earlier trials are read from each run directory's `results.csv` (one row per trial: the
searched values and each objective's last value) and `resolved_config.yaml` (the metric, and the
value of a key this sweep searches but that sweep kept fixed). A trial is used when it ended
without error and reported every objective. Then:

- Optuna is told the trials as completed ones, with their values (one per objective), in the
  study it starts from; its sampler models them before it suggests anything;
- grid search (Tune's variant generator) runs only the grid points no earlier trial ran.

A directory whose metric or mode differs is refused; one that searched other keys, or ran with
other fixed settings, is used and the differences are printed.
"""

from __future__ import annotations

import itertools
import math
import os
from dataclasses import dataclass, field
from typing import Any, Optional

import pandas as pd
from omegaconf import OmegaConf

from hfsweep.config.errors import ConfigError
from hfsweep.config.loading import import_object, iter_leaves
from hfsweep.config.objectives import objectives, objectives_of
from hfsweep.config.paths import get_path, nested
from hfsweep.config.saved import changed_keys, read_config
from hfsweep.config.schema import SweepConfig, plain
from hfsweep.config.validation import as_override
from hfsweep.run_dir import RESOLVED_CONFIG, RESULTS_FILE, holds_sweep, last_column

COMPARED_SECTIONS = ("model", "data", "training", "peft")  # settings that make two trials' results comparable
_ABSENT = object()


@dataclass
class WarmStart:
    """What earlier sweeps know: points (dotted path -> value, this sweep's searched keys) and
    their objective values (a list per point, one per objective), and notes for the user."""

    points: list[dict] = field(default_factory=list)
    values: list[list[float]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)


def warm_start_dirs(sweep: SweepConfig) -> list[str]:
    dirs = sweep.search_alg.get("warm_start") or []
    return [dirs] if isinstance(dirs, str) else list(dirs)


def load_warm_start(sweep: SweepConfig, param_space: dict) -> Optional[WarmStart]:
    """The earlier trials of every `search_alg.warm_start` directory, checked against this sweep;
    None without a warm start. Raises ConfigError, before Ray starts, on a directory that cannot
    warm this sweep's searcher."""
    dirs = warm_start_dirs(sweep)
    if not dirs:
        return None
    _check_searcher(sweep)
    warm = WarmStart(sources=dirs)
    for run_dir in dirs:
        _read_run(run_dir, sweep, param_space, warm)
    if not warm.points:
        raise ConfigError(
            f"search_alg.warm_start: no trial of {as_override(dirs)} ended with every objective reported inside this "
            f"sweep's search space; nothing to start from (drop search_alg.warm_start)."
        )
    return warm


def _check_searcher(sweep: SweepConfig) -> None:
    from ray.tune.search import BasicVariantGenerator
    from ray.tune.search.optuna import OptunaSearch

    target = sweep.search_alg["_target_"]
    cls = import_object(target)
    if issubclass(cls, BasicVariantGenerator):
        if not any(spec["sampler"] == "grid" for _, spec in iter_leaves(sweep.search_space)):
            raise ConfigError(
                "search_alg.warm_start: random search learns nothing from earlier trials; use search_alg=optuna, "
                "or a grid (sampler: grid), whose points already run are skipped."
            )
    elif not issubclass(cls, OptunaSearch):
        raise ConfigError(
            f"search_alg.warm_start: {target.rsplit('.', 1)[-1]} cannot be told earlier results; "
            f"use search_alg=optuna or a grid, or drop search_alg.warm_start."
        )


def _read_run(run_dir: str, sweep: SweepConfig, param_space: dict, warm: WarmStart) -> None:
    results_path = os.path.join(run_dir, RESULTS_FILE)
    if not holds_sweep(run_dir):
        raise ConfigError(
            f"search_alg.warm_start: '{run_dir}' holds no sweep ({RESOLVED_CONFIG} is missing); pass an earlier "
            "sweep's run directory."
        )
    if not os.path.isfile(results_path):
        raise ConfigError(
            f"search_alg.warm_start: '{run_dir}' holds no {RESULTS_FILE}; write it with python -m hfsweep.report "
            f"{run_dir}."
        )
    earlier = read_config(run_dir)
    if objectives_of(earlier["metric"], earlier["mode"]) != objectives(sweep):
        raise ConfigError(
            f"search_alg.warm_start: '{run_dir}' swept metric={as_override(earlier['metric'])} "
            f"mode={as_override(earlier['mode'])}, this sweep metric={as_override(sweep.metric)} "
            f"mode={as_override(sweep.mode)}; warm-start from a sweep of the same objectives."
        )
    searched_then = {path for path, _ in iter_leaves(earlier["search_space"])}
    searched_now = [path for path, _ in iter_leaves(sweep.search_space)]
    fixed_then = OmegaConf.create(earlier)
    for path in searched_now:
        if path not in searched_then and OmegaConf.select(fixed_then, path, default=_ABSENT) is _ABSENT:
            raise ConfigError(
                f"search_alg.warm_start: '{run_dir}' has no value of {path}, which this sweep searches; warm-start "
                "from a sweep that had it."
            )
    ignored = sorted(searched_then - set(searched_now))
    if ignored:
        warm.notes.append(
            f"{run_dir}: searched {', '.join(ignored)}, which this sweep does not; the trials are used as if at this "
            "sweep's values"
        )
    now = plain(sweep)  # compared with the saved config as it is saved
    changed = sorted(
        k
        for section in COMPARED_SECTIONS
        for k in changed_keys(earlier.get(section) or {}, now[section], f"{section}.")
        if k not in searched_then | set(searched_now)
    )
    if changed:
        warm.notes.append(f"{run_dir}: ran with other settings of {', '.join(changed)}")

    table = pd.read_csv(results_path)
    columns = [last_column(metric) for metric, _ in objectives(sweep)]
    searcher_takes = _searcher_takes(sweep, param_space)
    used = outside = 0
    for _, row in table.iterrows():
        values = [row.get(column) for column in columns]
        if row.get("status") == "ERROR" or any(v is None or not math.isfinite(v) for v in values):
            continue
        point = {
            path: _plain(row[path]) if path in searched_then else OmegaConf.select(fixed_then, path)
            for path in searched_now
        }
        if not all(_inside(param_space, path, value) for path, value in point.items()) or not searcher_takes(point):
            outside += 1
            continue
        warm.points.append(point)
        warm.values.append([float(v) for v in values])
        used += 1
    warm.notes.append(
        f"{run_dir}: {used} earlier trials used"
        + (f", {outside} outside this sweep's search space left out" if outside else "")
    )


def _plain(value: Any) -> Any:
    """A value read from the CSV as the config holds it (numpy scalars as Python's)."""
    return value.item() if hasattr(value, "item") else value


def _inside(param_space: dict, path: str, value: Any) -> bool:
    domain = get_path(param_space, path)
    if isinstance(domain, dict) and set(domain) == {"grid_search"}:
        return any(same_value(value, v) for v in domain["grid_search"])
    return domain.is_valid(value)


def _searcher_takes(sweep: SweepConfig, param_space: dict):
    """Whether this sweep's searcher takes a point Tune's `is_valid` let through: Optuna's
    distributions refuse a randint's upper bound and a value between a quantized range's steps, and
    the study refused the whole warm start with a ValueError. Asked of Optuna's own trial check."""
    from ray.tune.search.optuna import OptunaSearch  # imports without optuna, an optional extra

    if not issubclass(import_object(sweep.search_alg["_target_"]), OptunaSearch):
        return lambda point: True
    import optuna

    distributions = OptunaSearch.convert_search_space(param_space)

    def takes(point: dict) -> bool:
        params = {path.replace(".", "/"): value for path, value in point.items()}
        try:
            optuna.trial.create_trial(params=params, distributions=distributions, values=[0.0])
        except ValueError:
            return False
        return True

    return takes


def same_value(a: Any, b: Any) -> bool:
    """Equal as written to a CSV and read back (floats to 12 significant digits)."""
    if isinstance(a, float) or isinstance(b, float):
        try:
            return math.isclose(float(a), float(b), rel_tol=1e-12)
        except (TypeError, ValueError):
            return False
    return a == b


def searcher_arguments(sweep: SweepConfig, param_space: dict, warm: WarmStart) -> tuple[dict, Optional[int]]:
    """The search algorithm's extra constructor arguments, and the sweep's num_samples where the
    warm start changes it: the grid points left to run (each `num_samples` times), or an Optuna
    study that already holds the earlier trials."""
    from ray.tune.search import BasicVariantGenerator

    if issubclass(import_object(sweep.search_alg["_target_"]), BasicVariantGenerator):
        points = grid_points_left(sweep, warm)
        if not points:
            raise ConfigError(
                f"search_alg.warm_start: every grid point of this sweep was run in {as_override(warm.sources)}; "
                f"nothing is left to run (add grid values, or drop search_alg.warm_start)."
            )
        repeated = [point for point in points for _ in range(sweep.num_samples)]
        warm.notes.append(f"{len(points)} grid points left to run")
        return {"points_to_evaluate": repeated}, len(repeated)
    return {
        "storage": optuna_study(sweep, param_space, warm),
        "study_name": OPTUNA_STUDY,
        "sampler": warm_tpe_sampler(sweep, warm),
        "seed": None,
    }, None


def warm_tpe_sampler(sweep: SweepConfig, warm: WarmStart):
    """OptunaSearch's own sampler (TPE, seeded by `seed`) with the earlier trials as its random
    start-up: TPE samples at random until `n_startup_trials` trials are complete (the sweep's
    start-up rule, `schedulers.startup_trials`), and the same seed draws the same random points
    whatever the study holds, so earlier trials fewer than that would change none of the first
    suggestions. With them as the start-up, TPE models them from the first suggestion."""
    from optuna.samplers import TPESampler

    from hfsweep.driver.search.schedulers import startup_trials

    return TPESampler(seed=sweep.search_alg.get("seed"), n_startup_trials=min(startup_trials(sweep), len(warm.points)))


def grid_points_left(sweep: SweepConfig, warm: WarmStart) -> list[dict]:
    """This sweep's grid points (nested, as Tune's points_to_evaluate) that no earlier trial ran."""
    grid = [(path, spec["values"]) for path, spec in iter_leaves(sweep.search_space) if spec["sampler"] == "grid"]
    paths = [path for path, _ in grid]
    done = [[point[path] for path in paths] for point in warm.points]
    return [
        nested(dict(zip(paths, combo)))
        for combo in itertools.product(*(values for _, values in grid))
        if not any(all(same_value(a, b) for a, b in zip(combo, ran)) for ran in done)
    ]


OPTUNA_STUDY = "optuna"  # OptunaSearch's own default name for its in-memory study


def optuna_study(sweep: SweepConfig, param_space: dict, warm: WarmStart):
    """An in-memory Optuna storage whose study holds the earlier trials as completed, with one
    value per objective. OptunaSearch loads the study by name from it (Tune's `evaluated_rewards`
    takes one value per point: single-objective only)."""
    import optuna
    from ray.tune.search.optuna import OptunaSearch

    distributions = OptunaSearch.convert_search_space(param_space)  # keyed "training/learning_rate"
    storage = optuna.storages.InMemoryStorage()
    directions = ["minimize" if mode == "min" else "maximize" for _, mode in objectives(sweep)]
    study = optuna.create_study(storage=storage, study_name=OPTUNA_STUDY, directions=directions)
    study.add_trials(
        [
            optuna.trial.create_trial(
                params={path.replace(".", "/"): value for path, value in point.items()},
                distributions=distributions,
                values=values,
            )
            for point, values in zip(warm.points, warm.values)
        ]
    )
    return storage
