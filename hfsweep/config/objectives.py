"""The sweep's objectives: `metric` and `mode` name one (`metric=eval_loss mode=min`) or several
(`metric=[eval_loss,time_total_s] mode=[min,min]`). Whatever acts on one metric (schedulers,
stoppers, the checkpoint budget, `best/`) takes the first."""

from __future__ import annotations


def objectives(cfg: dict) -> list[tuple[str, str]]:
    """(metric, mode) of every objective of the resolved config, the first first."""
    return objectives_of(cfg["metric"], cfg["mode"])


def objectives_of(metric, mode) -> list[tuple[str, str]]:
    """(metric, mode) of every objective `metric` and `mode` name (a name, or a list of them)."""
    if isinstance(metric, str):
        return [(metric, mode)]
    return list(zip(metric, mode))


def first_objective(cfg: dict) -> tuple[str, str]:
    return objectives(cfg)[0]


def is_multi_objective(cfg: dict) -> bool:
    return not isinstance(cfg["metric"], str)
