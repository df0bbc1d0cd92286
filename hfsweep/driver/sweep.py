"""The sweep driver's entry: `run` a config that passed the preflight. Data once, Ray, the Tuner
(`tuner`), results (`finish`). Everything a sweep writes lives under `cluster.storage_path` (the
Hydra run directory by default): the resolved config, Tune's experiment directory, and the Train
runs. `resume` continues or extends a saved sweep.
"""

from __future__ import annotations

from ray import tune

from hfsweep.config.schema import plain
from hfsweep.driver.finish import finish
from hfsweep.driver.preflight import CheckedConfig
from hfsweep.driver.provenance import write_provenance
from hfsweep.driver.ray_cluster import check_storage_writable
from hfsweep.driver.search.live_study import check_new_studies
from hfsweep.driver.tuner import build_tuner, plan_sweep, start_cluster, trainable_for, tune_fit

# trial_dirname: a saved sweep's tuner.pkl names it here, so resume finds it
from hfsweep.run_dir import trial_dirname, write_config  # noqa: F401


def run(checked: CheckedConfig) -> tune.ResultGrid:
    """Prepare data and run the sweep of a config that passed the preflight; return Tune's
    ResultGrid. Its Task is handed to every layer below."""
    if not isinstance(checked, CheckedConfig):
        raise TypeError(
            "sweep.run takes the CheckedConfig of hfsweep.driver.preflight.preflight(cfg), not "
            f"{type(checked).__name__}"
        )
    sweep, task = checked.sweep, checked.task
    check_new_studies([sweep])  # before the data is prepared: a refusal is one line
    plan = plan_sweep(sweep, task)
    storage = sweep.cluster.storage_path
    check_storage_writable(storage)
    cap = start_cluster(sweep)
    # Everything is checked: only now does the run directory get the sweep's files.
    write_config(storage, plain(sweep))
    write_provenance(storage, sweep)
    for note in plan.setup.notes:
        print(f"hfsweep: {note}")
    tuner = build_tuner(plan, trainable_for(sweep, task, plan.data), cap)
    return finish(tune_fit(tuner), sweep, task, plan.data, plan.setup.budget)
