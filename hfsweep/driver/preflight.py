"""Every check a config gets before Ray starts, each by the owner of what it checks, called once:
the config's own (`hfsweep.config.validation`), the hardware's (`hfsweep.config.resources`), the
Task's, the loop's, the adapter's (`hfsweep.models`) and the search's
(`hfsweep.driver.search.search_rules`). Each refuses in one line that names the key and the fix.

What passes is a `CheckedConfig`: the typed config (`SweepConfig`, built here once: the driver and
every layer below read it by attribute) with the sweep's Task, resolved here once and handed to
every layer below. `sweep.run` takes nothing else. Kept light: no torch, and Ray only once the
search rules compile the search space, so a config the first checks refuse is refused without it.
An offline preset's stand-in data (`data.proxy`) is written into `cache_dir` here, first, so that
`data.path` names it before the data checks.
"""

from __future__ import annotations

from dataclasses import dataclass

from hfsweep.config.errors import ConfigError
from hfsweep.config.resources import check_hardware
from hfsweep.config.schema import SweepConfig, typed
from hfsweep.config.validation import check_config
from hfsweep.driver.search.search_rules import check_search
from hfsweep.loops.base import get_loop
from hfsweep.models import check_peft
from hfsweep.tasks import get_task
from hfsweep.tasks.base import Task


@dataclass(frozen=True)
class CheckedConfig:
    """A config that passed every check, typed, and the Task its `model.task` names, with its `task_options`."""

    sweep: SweepConfig
    task: Task


def preflight(cfg: dict) -> CheckedConfig:
    """Check the resolved config `cfg` by owner; raise ConfigError naming the first bad key."""
    task = get_task(cfg["model"]["task"], cfg.get("task_options"))  # refuses an unknown task or option
    cfg = {
        **cfg,
        "data": with_proxy_path(cfg["data"], cfg["cache_dir"]),
        "task_options": task.options(),  # every option the family uses, as resolved_config.yaml records it
    }
    check_config(cfg, generates=task.generates)
    sweep = typed(SweepConfig, cfg)  # from here on, every check and layer reads it typed
    check_hardware(sweep)
    task.check(sweep)
    get_loop(sweep.loop.name.value).check(sweep, task)
    check_peft(sweep)
    check_search(sweep)
    return CheckedConfig(sweep, task)


def task_of(sweep: SweepConfig) -> Task:
    """The Task a config trains: `model.task` with its `task_options`."""
    return get_task(sweep.model.task, sweep.task_options)


def with_proxy_path(data: dict, cache_dir: str) -> dict:
    """The `data` section with its `path` at its `proxy` folder (written into `cache_dir` on first use)
    where a local source has no path of its own; a path given on the command line wins."""
    if not data["proxy"] or data["path"] or data["source"] != "local":
        return data
    from hfsweep.data.offline import DIGITS, PROXIES, proxy_folder  # imports datasets: only where needed

    if data["proxy"] not in (*PROXIES, DIGITS):
        raise ConfigError(
            f"data.proxy: no stand-in data named '{data['proxy']}'; "
            f"choose one of {', '.join((*PROXIES, DIGITS))}, or set data.path."
        )
    return {**data, "path": proxy_folder(data["proxy"], cache_dir)}
