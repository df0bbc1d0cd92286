"""The training split, tokenized in fixed-size chunks on all the driver's cores, as parquet shards.

Each chunk of `data.chunk_rows` raw examples goes through the task's own `preprocess` and becomes
one shard, `part-NNNNN.parquet`. Chunks are the unit of work and of output, so the shards are the
same whatever `data.num_proc` is, the driver holds only the chunks in flight (its memory does not
grow with the corpus), a stream (`data.streaming`) is prepared like a file, and a token budget
(`data.max_train_tokens`) stops reading once the shards hold that many tokens. Grouping (causal
LM's blocks) happens within a chunk, as run_clm groups within each batch of 1000 texts.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from hfsweep.config.resources import usable_cores
from hfsweep.config.schema import DataConfig, PrepareOn
from hfsweep.contract.protocols import DataTask

SHARD_PATTERN = "part-{:05d}.parquet"


@dataclass
class ShardsWritten:
    num_shards: int
    num_rows: int
    num_tokens: int


# One chunk's work, in a pool process or in this one: what `_start` loads once per process.
_worker: dict = {}


def _start(task: DataTask, tokenizer_path: str, data_cfg: DataConfig, in_pool: bool = False) -> None:
    """Keep the task (unpickled here in a pool process) and load the tokenizer once per process, quietly (one bar for
    the whole split). A pool process tokenizes on one thread: the pool already uses every core."""
    if in_pool:
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
    import datasets

    if in_pool:
        datasets.disable_progress_bars()
        datasets.logging.set_verbosity_error()
    _worker.update(
        task=task,
        tokenizer=task.load_processor(tokenizer_path),
        data_cfg=data_cfg,
        setup=(task, tokenizer_path, data_cfg),
    )


def _process_on_node(setup: tuple, index: int, chunk, out_dir: str) -> tuple[str, np.ndarray]:
    """`_process` as a Ray task on any node of the cluster. Ray reuses its worker processes, so
    the task and tokenizer are loaded once per process, not once per chunk."""
    if _worker.get("setup") != setup:
        _start(*setup, in_pool=True)
    return _process(index, chunk, out_dir)


def _process(index: int, chunk, out_dir: str) -> tuple[str, np.ndarray]:
    """Preprocess one chunk (a `Dataset` slice or an Arrow table) with the task and write it as
    shard `index`; return its path and the cumulative token count of its rows."""
    chunk = _in_memory(chunk)
    processed = _worker["task"].preprocess(chunk, _worker["tokenizer"], _worker["data_cfg"], "train")
    path = os.path.join(out_dir, SHARD_PATTERN.format(index))
    table = processed.data.table
    pq.write_table(table, path)
    return path, np.cumsum(_worker["task"].tokens_per_row(table)) if table.num_rows else np.zeros(0, dtype=np.int64)


def _in_memory(chunk):
    """A chunk as an in-memory `Dataset`, its features kept. A chunk of a file-backed split would
    have the task's `map` write its output to an Arrow cache file first (for causal LM, 18 GB
    beside the parquet shards per GB of text), and could not travel to another node."""
    from datasets import Dataset

    return Dataset(chunk.with_format("arrow")[:], info=chunk.info) if isinstance(chunk, Dataset) else Dataset(chunk)


def _chunks(split, chunk_rows: int):
    """The split in chunks of `chunk_rows` examples. A `Dataset`'s chunks are slices of its
    memory-mapped files, which a pool process receives as a file reference and reads itself, so
    the driver never reads the data; a streamed `IterableDataset`'s are Arrow tables."""
    from datasets import Dataset

    if isinstance(split, Dataset):
        for start in range(0, len(split), chunk_rows):
            yield split.select(range(start, min(start + chunk_rows, len(split))))
        return
    for batch in split.iter(batch_size=chunk_rows):
        yield pa.Table.from_pydict(batch)


def write_shards(split, task: DataTask, tokenizer_path: str, data_cfg: DataConfig, out_dir: str) -> ShardsWritten:
    """Tokenize `split` chunk by chunk into `out_dir`, with `data.num_proc` processes when there
    is more than one chunk, in chunk order, stopping at `data.max_train_tokens`."""
    from tqdm.auto import tqdm

    chunk_rows, budget = data_cfg.chunk_rows, data_cfg.max_train_tokens
    num_proc = data_cfg.num_proc or usable_cores()
    total = -(-len(split) // chunk_rows) if hasattr(split, "__len__") else None
    on_cluster = data_cfg.prepare_on is PrepareOn.cluster
    if total is not None and total < 2 * num_proc and not on_cluster:
        # a pool's start-up (each process imports transformers: seconds) pays off only past a few chunks each
        num_proc = 1
    os.makedirs(out_dir, exist_ok=True)
    rows = tokens = shards = 0
    bar = tqdm(total=total, desc="tokenize train", unit="chunk", disable=total is not None and total <= 1)
    with (_on_cluster if on_cluster else _runner)(num_proc, task, tokenizer_path, data_cfg) as run:
        for path, cumulative in run(((i, chunk, out_dir) for i, chunk in enumerate(_chunks(split, chunk_rows)))):
            shards += 1
            chunk_tokens = int(cumulative[-1]) if len(cumulative) else 0
            if budget and tokens + chunk_tokens >= budget:
                keep = int(np.searchsorted(cumulative, budget - tokens)) + 1  # the row that reaches the budget
                pq.write_table(pq.read_table(path).slice(0, keep), path)
                rows, tokens = rows + keep, tokens + int(cumulative[keep - 1])
                break
            rows, tokens = rows + len(cumulative), tokens + chunk_tokens
            bar.update()
            bar.set_postfix(tokens=f"{tokens:,}")
    bar.close()
    for name in os.listdir(out_dir):  # shards that workers finished past the budget
        if name.startswith("part-") and int(name[5:10]) >= shards:
            os.remove(os.path.join(out_dir, name))
    return ShardsWritten(num_shards=shards, num_rows=rows, num_tokens=tokens)


@contextlib.contextmanager
def _runner(num_proc: int, task: DataTask, tokenizer_path: str, data_cfg: DataConfig):
    """Yield `run(jobs)`, which yields `_process`'s results in job order: in this process, or on
    a pool of `num_proc` spawned processes with at most two jobs per process in flight (so a
    stream is read only as fast as it is tokenized)."""
    if num_proc == 1:
        import datasets

        _start(task, tokenizer_path, data_cfg)
        bars = datasets.is_progress_bar_enabled()
        datasets.disable_progress_bars()
        try:
            yield lambda jobs: (_process(*job) for job in jobs)
        finally:
            if bars:
                datasets.enable_progress_bars()
        return
    pool = ProcessPoolExecutor(
        num_proc,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_start,
        initargs=(task, tokenizer_path, data_cfg, True),
    )

    try:
        yield lambda jobs: _in_order(jobs, partial(pool.submit, _process), Future.result, 2 * num_proc)
    finally:
        pool.shutdown(cancel_futures=True)


@contextlib.contextmanager
def _on_cluster(num_proc: int, task: DataTask, tokenizer_path: str, data_cfg: DataConfig):
    """`_runner` on the connected Ray cluster (`data.prepare_on=cluster`): every chunk is a Ray
    task of one CPU, on whichever node has one free, with at most two tasks per cluster CPU in
    flight. A chunk travels in memory through Ray's object store (a node cannot open the
    driver's memory-mapped files); the shards are written where every node sees them, the
    `cache_dir` that clusters need anyway. `num_proc` does not apply."""
    import ray

    if not ray.is_initialized():
        raise RuntimeError(
            "data.prepare_on=cluster: Ray is not initialized; hfsweep.driver.sweep connects to the "
            "cluster before preparing."
        )
    process = ray.remote(num_cpus=1)(_process_on_node)
    in_flight = 2 * max(1, int(ray.cluster_resources().get("CPU", 1)))
    setup = (task, tokenizer_path, data_cfg)
    yield lambda jobs: _in_order(
        ((setup, i, _in_memory(chunk), out) for i, chunk, out in jobs), process.remote, ray.get, in_flight
    )


def _in_order(jobs, submit, result, in_flight: int):
    """Each job's result, in job order, with at most `in_flight` jobs submitted and not yet
    yielded (so a stream is read only as fast as it is tokenized)."""
    pending: deque = deque()
    for job in jobs:
        pending.append(submit(*job))
        if len(pending) >= in_flight:
            yield result(pending.popleft())
    while pending:
        yield result(pending.popleft())
