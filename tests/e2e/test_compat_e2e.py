"""The private Ray APIs hfsweep/compat.py relies on, checked on a running local Ray, end to end."""

from __future__ import annotations

import logging

from hfsweep import compat


def test_a_local_ray_listens_on_the_gcs_port_compat_sets(ray_cluster):
    import ray

    context = ray.get_runtime_context()
    chosen = context.runtime_env["env_vars"][
        "RAY_ADDRESS"
    ]  # the port start_local_ray chose and set through compat.gcs_port
    assert context.gcs_address.rsplit(":", 1)[1] == chosen.rsplit(":", 1)[1], (
        f"{compat.GCS_PORT_ENV} no longer sets the GCS port"
    )


def test_every_ray_process_of_a_sweep_quiets_trains_placement_group_cleaner(ray_cluster):
    import ray
    from ray.train.v2._internal.execution.controller import placement_group_cleaner

    assert placement_group_cleaner.logger.name == compat.PLACEMENT_GROUP_CLEANER_LOGGER, "the cleaner's logger moved"

    @ray.remote(num_cpus=0)
    def cleaner_log_level() -> int:
        return logging.getLogger(compat.PLACEMENT_GROUP_CLEANER_LOGGER).getEffectiveLevel()

    assert ray.get(cleaner_log_level.remote()) == logging.ERROR, "init_ray's setup hook did not run in a Ray worker"


def test_classic_parquet_reader_makes_read_parquet_use_the_v1_datasource(ray_cluster, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    import ray
    from ray.data._internal.datasource.parquet_datasource import ParquetDatasource

    pq.write_table(pa.table({"a": [1, 2, 3]}), tmp_path / "shard.parquet")
    context = ray.data.DataContext.get_current()
    assert hasattr(context, "use_datasource_v2"), "DataContext.use_datasource_v2 is gone"
    previous = context.use_datasource_v2
    try:
        compat.classic_parquet_reader(context)
        read = ray.data.read_parquet(str(tmp_path / "shard.parquet"))._logical_plan.dag
    finally:
        context.use_datasource_v2 = previous
    assert isinstance(getattr(read, "datasource", None), ParquetDatasource), (
        f"read_parquet planned {read.name}, not the V1 ParquetDatasource"
    )


def test_restored_callbacks_finds_a_restored_tuners_callbacks_with_their_state(ray_cluster, tmp_path):
    from ray import tune

    class Counting(tune.Callback):
        def __init__(self):
            self.results = 0

        def on_trial_result(self, iteration, trials, trial, result, **info):
            self.results += 1

        def get_state(self):
            return {"results": self.results}

        def set_state(self, state):
            self.results = state["results"]

    def trainable(config):
        for step in range(3):
            tune.report({"step": step})

    tune.Tuner(
        trainable,
        run_config=tune.RunConfig(name="restore", storage_path=str(tmp_path), callbacks=[Counting()], verbose=0),
    ).fit()
    restored = compat.restored_callbacks(tune.Tuner.restore(str(tmp_path / "restore"), trainable))
    counting = [c for c in restored if type(c).__name__ == "Counting"]
    assert counting, "Tune's TunerInternal.get_run_config is gone: a resumed sweep would lose its budget"
