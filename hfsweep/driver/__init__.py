"""The driver room, in the sweep's process: the preflight (every check, by owner, once), Ray, the
Tuner and its loggers (`sweep`, `preflight`, `ray_cluster`, `loggers`, `provenance`, `multirun`);
`search/`, what chooses and stops trials; `results/`, what a sweep hands back. Kept light at
import: Hydra loads `driver.multirun` before any job."""

import importlib
import importlib.abc
import importlib.util
import sys

# Saved sweeps name these modules at the paths they had before search/ existed: the classes pickled
# in Tune's experiment state (budgets, stoppers, PBT's explore function) and the `_target_`s of a
# saved resolved_config.yaml. Each old path imports the module where it is now.
MOVED = {
    f"hfsweep.driver.{name}": f"hfsweep.driver.search.{name}"
    for name in ("search_space", "search_rules", "schedulers", "warm_start", "defaults_trial", "budget")
} | {"hfsweep.driver.checkpoint_budget": "hfsweep.driver.search.checkpoint_budget"}


class MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports a MOVED module's old name as the module at its new one (consulted only once the
    import system's own finders have found nothing by that name)."""

    def find_spec(self, name, path=None, target=None):
        return importlib.util.spec_from_loader(name, self) if name in MOVED else None

    def create_module(self, spec):
        return importlib.import_module(MOVED[spec.name])

    def exec_module(self, module):
        pass  # imported already, under its new name


if not any(type(finder).__name__ == MovedModules.__name__ for finder in sys.meta_path):
    sys.meta_path.append(MovedModules())
