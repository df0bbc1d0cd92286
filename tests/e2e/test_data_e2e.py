"""Data prepared as Ray tasks on the cluster, and streamed to workers by Ray Data, end to end."""

from __future__ import annotations

import time

import pytest

from hfsweep.contract.metrics import EPOCH, MAX_STEPS
from tests.conftest import prepare_data, run_sweep
from tests.unit.test_data import data_config, shard_tables, write_prose_folder


def test_prepared_on_the_cluster_as_ray_tasks_into_the_same_shards_as_on_the_driver(ray_cluster, tmp_path):
    import ray
    from ray.util.state import list_tasks

    folder = write_prose_folder(tmp_path / "prose")
    # two chunks: each task that runs at once starts a Ray worker, which imports transformers (seconds on two cores)
    driver = prepare_data(
        data_config(tmp_path / "driver", source="local", path=str(folder), chunk_rows=200, num_proc=1)
    )
    cluster = prepare_data(
        data_config(tmp_path / "cluster", source="local", path=str(folder), chunk_rows=200, prepare_on="cluster")
    )
    assert [t.to_pydict() for t in shard_tables(cluster)] == [t.to_pydict() for t in shard_tables(driver)]
    assert cluster.num_train_tokens == driver.num_train_tokens

    def finished_chunk_tasks() -> int:  # task events reach the State API a second or so late
        return len(
            list_tasks(
                address=ray.get_runtime_context().gcs_address,
                limit=1000,
                filters=[("func_or_class_name", "=", "_process_on_node"), ("state", "=", "FINISHED")],
            )
        )

    deadline = time.time() + 30
    while finished_chunk_tasks() < 2 and time.time() < deadline:
        time.sleep(1)
    assert finished_chunk_tasks() == 2, "one Ray task per chunk (400 lines / 200)"


def passes(prepared, seed: int) -> list:
    """Two passes over a worker's training batches, as the loops draw them (`seeded_passes`: the
    Trainer makes an epoch of each)."""
    from hfsweep.config.schema import DataConfig, typed
    from hfsweep.data.prepared import load_ray_datasets
    from hfsweep.loops.common import seeded_passes

    train = load_ray_datasets(prepared, ["train"], seed)["train"]
    train.context.execution_options.preserve_order = True
    batches = seeded_passes(
        train.iterator(),
        {"per_device_train_batch_size": 8},
        typed(DataConfig, {"shuffle_buffer_rows": 64}),
        lambda batch: [tuple(row) for row in batch["input_ids"].tolist()],
        seed,
    )
    return [[row for batch in batches for row in batch] for _ in range(2)]


@pytest.mark.parametrize("chunk_rows", [50, 10000], ids=["several files", "one file"])
def test_workers_stream_every_shard_in_a_new_order_each_epoch_set_by_the_seed(ray_cluster, tmp_path, chunk_rows):
    """Each pass is every block in a new order, the files' (Ray Data's file shuffle, reseeded per
    pass) and the rows' (the local shuffle, seeded per pass): a split of one file too, such as
    GLUE's small tasks under data.chunk_rows=10000."""
    from hfsweep.data.prepared import load_ray_datasets

    folder = write_prose_folder(tmp_path / "prose")
    prepared = prepare_data(
        data_config(tmp_path / "cache", source="local", path=str(folder), chunk_rows=chunk_rows, num_proc=1)
    )
    tables = shard_tables(prepared)
    assert (len(tables) == 1) == (chunk_rows == 10000), f"{len(tables)} files"
    expected = sorted(map(tuple, (row for t in tables for row in t.column("input_ids").to_pylist())))

    def order(seed: int) -> list:
        train = load_ray_datasets(prepared, ["train"], seed)["train"]
        return [tuple(row["input_ids"]) for row in train.iter_rows()]

    first = order(1)
    assert sorted(first) == expected, "every block of every shard, once"
    assert order(1) == first
    assert (order(2) != first) == (len(tables) > 1), "the seed sets the files' order"
    one, two = passes(prepared, 1)
    assert sorted(one) == sorted(two) == expected and one != two, "every epoch is every block, in a new order"
    assert passes(prepared, 1) == [one, two], "the same seed repeats the same epochs"
    assert passes(prepared, 2)[0] != one


def test_each_trial_counts_its_epochs_over_the_data_it_trains_on(ray_cluster, tmp_path, cache_dir):
    """With training.max_steps=-1 a trial's steps follow from its epochs; a searched data key
    (block_size) changes how many examples an epoch holds, so each trial counts its own."""
    overrides = [
        "debug=tiny",
        "training.max_steps=-1",
        "training.num_train_epochs=1",
        "training.per_device_train_batch_size=64",
        "training.eval_steps=8",
        "training.save_steps=8",
        "training.logging_steps=8",
        "+search_space.data.block_size={sampler:grid,values:[64,128]}",
    ]
    results = run_sweep(overrides, tmp_path, cache_dir)[1]
    last = {result.config["data"]["block_size"]: result.metrics_dataframe.iloc[-1] for result in results}
    assert sorted(last) == [64, 128]
    assert [last[block][EPOCH] for block in (64, 128)] == [pytest.approx(1.0, abs=0.05)] * 2
    assert last[64][MAX_STEPS] > 1.8 * last[128][MAX_STEPS]  # twice the blocks of half the length
