"""Task families: one module per family, each defining `TASK`, a `hfsweep.tasks.base.Task`.

`model.task: NAME` picks `hfsweep/tasks/NAME.py`; adding a family is adding its module (and its
configs), nothing else. A family's options are the fields of its Task dataclass, set in the
config's own node `task_options` (`task_options.doc_stride=64`), typed and checked by the family.
A user's own task is the same kind of object, named by `_target_`:
`model.task: {_target_: mypackage.MyTask, ...its arguments}`. Task modules import transformers
and datasets only where they use them, so validating a config stays fast.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from typing import Optional

from hfsweep.config.errors import ConfigError

# the shared pieces beside the task modules
_NOT_TASKS = {"base", "data_hooks", "model_hooks", "metric_hooks", "metrics", "local_metrics"}


def task_names() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name not in _NOT_TASKS)


def get_task(spec, options: Optional[dict] = None):
    """The task `model.task` names, with its `task_options`: a built-in family's name, or a
    `{_target_: ...}` node whose other keys are the Task's arguments too. An unknown name, a
    target that does not import, or an option the family does not have is refused in one line."""
    if options:
        return with_options(get_task(spec), options)
    if isinstance(spec, dict):
        from hfsweep.config.loading import import_object

        try:
            task_class = import_object(spec["_target_"])
        except ImportError as err:
            raise ConfigError(
                f"model.task._target_: cannot import '{spec['_target_']}' ({err}); fix the name, or make its module "
                f"importable (an installed package, or run from its folder; workers get it with "
                f"cluster.runtime_env.working_dir)."
            ) from err
        return task_class(**{k: v for k, v in spec.items() if k != "_target_"})
    names = task_names()
    if spec not in names:
        raise ConfigError(
            f"model.task: '{spec}' is not one of {', '.join(names)}; or give a task class as model.task._target_."
        )
    return importlib.import_module(f"{__name__}.{spec}").TASK


def with_options(task, options: dict):
    """A copy of `task` with `options` (its dataclass fields) set, each checked against the field's
    type by OmegaConf, as the config schema's keys are."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from hfsweep.config.loading import unknown_key_error

    name = task.name or type(task).__name__
    known = task.options()
    for key in options:
        if key not in known:
            raise unknown_key_error(
                f"task_options.{key}",
                known,
                f"an option of the {name} task (its options: {', '.join(known) or 'none'})",
            )
    try:
        typed = OmegaConf.merge(OmegaConf.structured(type(task)), options)
    except OmegaConfBaseException as err:
        raise ConfigError(
            f"task_options.{err.key}: {err.msg.splitlines()[0]}; give a value of the type the {name} "
            f"task declares ({type(task).__module__})."
        ) from err
    typed = OmegaConf.to_container(typed)
    return dataclasses.replace(task, **{key: typed[key] for key in options})
