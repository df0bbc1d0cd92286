"""Task families: one module per family, each defining `TASK`, a `hfsweep.tasks.base.Task`.

`model.task: NAME` picks `hfsweep/tasks/NAME.py`; adding a family is adding its module (and its
configs), nothing else. Task modules import transformers and datasets only where they use them,
so validating a config stays fast.
"""

from __future__ import annotations

import importlib
import pkgutil

from hfsweep.config.errors import ConfigError

_NOT_TASKS = {"base", "metrics"}  # the shared pieces beside the task modules


def task_names() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name not in _NOT_TASKS)


def get_task(name: str):
    """The task family `model.task` names; an unknown name is refused in one line."""
    names = task_names()
    if name not in names:
        raise ConfigError(f"model.task: '{name}' is not one of {', '.join(names)}.")
    return importlib.import_module(f"{__name__}.{name}").TASK
