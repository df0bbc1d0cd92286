"""The sweep's objectives: `metric` and `mode` name one (`metric=eval_loss mode=min`) or several
(`metric=[eval_loss,time_total_s] mode=[min,min]`). Whatever acts on one metric (schedulers,
stoppers, the checkpoint budget, `best/`) takes the first."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hfsweep.config.schema import SweepConfig


def objectives(sweep: SweepConfig) -> list[tuple[str, str]]:
    """(metric, mode) of every objective of the resolved config, the first first."""
    return objectives_of(sweep.metric, sweep.mode)


def objectives_of(metric, mode) -> list[tuple[str, str]]:
    """(metric, mode) of every objective `metric` and `mode` name (a name, or a list of them)."""
    if isinstance(metric, str):
        return [(metric, mode)]
    return list(zip(metric, mode))


def first_objective(sweep: SweepConfig) -> tuple[str, str]:
    return objectives(sweep)[0]


def is_multi_objective(sweep: SweepConfig) -> bool:
    return not isinstance(sweep.metric, str)
