"""Task families: one module per family, each defining `TASK`, a `hfsweep.tasks.base.Task`.

`model.task: NAME` picks `hfsweep/tasks/NAME.py`; adding a family is adding its module (and its
configs), nothing else. A user's own task is the same kind of object, named by `_target_`:
`model.task: {_target_: mypackage.MyTask, ...its arguments}`. Task modules import transformers
and datasets only where they use them, so validating a config stays fast.
"""

from __future__ import annotations

import importlib
import pkgutil

from hfsweep.config.errors import ConfigError

_NOT_TASKS = {"base", "metrics"}  # the shared pieces beside the task modules


def task_names() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name not in _NOT_TASKS)


def get_task(spec):
    """The task `model.task` names: a built-in family's name, or a `{_target_: ...}` node that
    Hydra instantiates into a Task. An unknown name or a target that does not import is refused
    in one line."""
    if isinstance(spec, dict):
        from hfsweep.config.loading import import_object

        try:
            task_class = import_object(spec["_target_"])
        except ImportError as err:
            raise ConfigError(
                f"model.task._target_: cannot import '{spec['_target_']}' ({err}); fix the name, or make its module importable "
                f"(an installed package, or run from its folder; workers get it with cluster.runtime_env.working_dir)."
            ) from err
        return task_class(**{k: v for k, v in spec.items() if k != "_target_"})
    names = task_names()
    if spec not in names:
        raise ConfigError(f"model.task: '{spec}' is not one of {', '.join(names)}; or give a task class as model.task._target_.")
    return importlib.import_module(f"{__name__}.{spec}").TASK
