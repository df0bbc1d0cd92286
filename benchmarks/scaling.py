"""Benchmark 6: how hfsweep's cost grows with the corpus and with the number of trials.

1. data: preparing a causal-LM train split of 10 MB, 100 MB and 1 GB of text (CPython's pydoc
   prose, repeated, with each line numbered so no two lines are equal): wall time, tokens/s and the
   driver's peak RSS, each size in a fresh process. Baseline in the same invocation: the
   `tokenizers` library's own `encode_batch_fast` on all cores over the smallest corpus (the ceiling).
2. trials: 8, 64 and 256 in-process trials of a trivial trainable (three reports with pointer
   checkpoints each) through hfsweep's own Tuner (search space, ASHA, checkpoint budget), then
   `write_report`: non-training seconds per trial and the report's time. Baseline in the same
   invocation: the same trainable through a plain Ray Tune script (`bare_tune_fit`), run before
   and after hfsweep's fit (their mean is the baseline). Both reuse their trial actors.
3. ingest: one in-process hfsweep trial (tiny GPT-2, 1 worker) streaming its shards from parquet,
   against the same trial on the split read whole into memory and permuted (the path before
   streaming), in the same invocation: tokens/s of the training loop.
Also the streamed order's shuffle quality against a global permutation (`bench_shuffle`).

    python benchmarks/scaling.py --smoke                 # 10 MB, 8 trials, ingest: about a minute or two
    python benchmarks/scaling.py --sizes 10 100 1000 --trials 8 64 256
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import config

from hfsweep.driver.preflight import preflight

HERE = Path(__file__).resolve().parent


def write_corpus(folder: Path, megabytes: int) -> Path:
    """train.txt of about `megabytes` MB of numbered pydoc prose, and a small validation.txt."""
    from pydoc_data.topics import topics

    folder.mkdir(parents=True, exist_ok=True)
    lines = [line for name in sorted(topics) for line in topics[name].splitlines() if line.strip()]
    target, written, i = megabytes * 2**20, 0, 0
    with open(folder / "train.txt", "w", encoding="utf-8") as f:
        while written < target:
            line = f"{i} {lines[i % len(lines)]}\n"
            f.write(line)
            written += len(line.encode())
            i += 1
    (folder / "validation.txt").write_text("\n".join(lines[:200]))
    return folder


def tokenizer_dir(root: Path) -> str:
    """A byte-level BPE tokenizer trained once on the pydoc prose (as the embedded default trains it)."""
    from _common import prepare_data

    prepared = prepare_data({**config([], str(root / "run")), "cache_dir": str(root / "tok-cache")})
    return prepared.tokenizer_path


def ceiling_tokens_per_s(corpus: Path, tokenizer_path: str, repeats: int = 3) -> float:
    """`tokenizers`' fastest batch encoding, `encode_batch_fast` (Rust, every core, no offsets),
    over the corpus in batches of 10,000 lines: what hfsweep's causal-LM preparation calls."""
    from tokenizers import Tokenizer

    os.environ["TOKENIZERS_PARALLELISM"] = "true"
    tokenizer = Tokenizer.from_file(os.path.join(tokenizer_path, "tokenizer.json"))
    lines = (corpus / "train.txt").read_text(encoding="utf-8").splitlines()
    rates = []
    for _ in range(repeats):
        start, tokens = time.perf_counter(), 0
        for i in range(0, len(lines), 10000):
            tokens += sum(len(e.ids) for e in tokenizer.encode_batch_fast(lines[i : i + 10000]))
        rates.append(tokens / (time.perf_counter() - start))
    return statistics.median(rates)


def anonymous_rss_mb() -> float:
    """This process's resident memory that is not a file's pages (RSS also counts the pages of
    memory-mapped files it has read, which the kernel may drop at any time)."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("RssAnon:")) / 1024


def prepare_once(corpus: str, tokenizer_path: str, cache: str, streaming: str) -> dict:
    """(In a fresh process.) hfsweep's preparation of the corpus: wall, tokens, peak RSS and
    peak anonymous RSS (sampled every 0.2 s). The imports are paid before the clock starts."""
    import threading

    import transformers  # noqa: F401
    from _common import prepare_data

    overrides = ["data.source=local", f"data.path={corpus}", f"model.tokenizer.pretrained={tokenizer_path}",
                 f"data.streaming={streaming}"]
    cfg = config(overrides, tempfile.mkdtemp())
    cfg["cache_dir"] = cache
    peak_anon, done = [anonymous_rss_mb()], threading.Event()

    def sample() -> None:
        while not done.wait(0.2):
            peak_anon[0] = max(peak_anon[0], anonymous_rss_mb())

    threading.Thread(target=sample, daemon=True).start()
    start = time.perf_counter()
    prepared = prepare_data(cfg)
    wall = time.perf_counter() - start
    done.set()
    return {
        "wall_s": wall,
        "tokens": prepared.num_train_tokens,
        "driver_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "driver_peak_anon_mb": peak_anon[0],
        "pool_peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    }


def bench_data(sizes: list[int], root: Path, streaming: bool) -> None:
    tokenizer_path = tokenizer_dir(root)
    corpora = {size: write_corpus(root / f"corpus-{size}mb", size) for size in sizes}
    ceiling = ceiling_tokens_per_s(corpora[min(sizes)], tokenizer_path)
    print(f"ceiling: tokenizers encode_batch_fast on {os.cpu_count()} cores: {ceiling:,.0f} tokens/s")
    first = None
    for size in sizes:
        # nothing prepared before, by hfsweep or by datasets
        cache = Path(tempfile.mkdtemp(prefix=f"cache-{size}-", dir=root))
        out = subprocess.run(
            [sys.executable, __file__, "_prepare", str(corpora[size]), tokenizer_path, str(cache),
             str(streaming).lower()],
            check=True, capture_output=True, text=True,
            env={**os.environ, "HF_DATASETS_CACHE": str(cache / "datasets")},
        )
        result = json.loads(out.stdout.strip().splitlines()[-1])
        first = first or result
        rate = result["tokens"] / result["wall_s"]
        print(
            f"data {size} MB{' streamed' if streaming else ''}: {result['wall_s']:.1f} s, {result['tokens']:,} tokens, "
            f"{rate:,.0f} tokens/s ({rate / ceiling:.2f}x the ceiling), "
            f"driver peak RSS {result['driver_peak_rss_mb']:.0f} MB "
            f"({result['driver_peak_rss_mb'] / first['driver_peak_rss_mb']:.2f}x the {min(sizes)} MB figure), "
            f"anonymous {result['driver_peak_anon_mb']:.0f} MB "
            f"({result['driver_peak_anon_mb'] / first['driver_peak_anon_mb']:.2f}x), "
            f"tokenizing processes' peak RSS {result['pool_peak_rss_mb']:.0f} MB"
        )


def tiny_trial(config: dict) -> None:
    """Three reports, each with a pointer checkpoint, and no training."""
    from hfsweep.contract.pointers import report_to_tune

    for step in (10, 20, 30):
        report_to_tune({"eval_loss": 1.0 / (config["training"]["learning_rate"] * step), "step": step},
                       f"/nonexistent/checkpoint-{step}")


def bench_trials(counts: list[int], root: Path) -> None:
    from hfsweep.config.schema import ClusterConfig, typed
    from hfsweep.driver import tuner
    from hfsweep.driver.ray_cluster import init_ray

    init_ray(typed(ClusterConfig, {"num_cpus": 8}))
    # As `tuner.tune_fit` runs every sweep: without Tune's automatic JSON, CSV and TensorBoard loggers
    # (the baseline too, so that it measures Tune's own bookkeeping, not its loggers').
    os.environ[tuner.NO_AUTO_LOGGERS] = "1"
    try:
        _run_trial_counts(counts, root)
    finally:
        del os.environ[tuner.NO_AUTO_LOGGERS]


def _run_trial_counts(counts: list[int], root: Path) -> None:
    from ray import tune

    from hfsweep.config.schema import plain
    from hfsweep.driver.preflight import preflight
    from hfsweep.driver.ray_cluster import searcher_cap
    from hfsweep.driver.results.report import write_report
    from hfsweep.driver.search.checkpoint_budget import build_checkpoint_budget
    from hfsweep.driver.search.schedulers import build_scheduler, build_stopper
    from hfsweep.driver.search.search_space import compile_search_space
    from hfsweep.driver.tuner import SweepPlan, build_tuner
    from hfsweep.run_dir import write_config

    for count in counts:
        storage = str(root / f"trials-{count}")
        sweep = preflight(config(
            ["cluster.num_workers=1", f"num_samples={count}", "search_space=learning_rate_loguniform",
             "checkpoints.keep_per_trial=1"],
            storage,
        )).sweep
        os.makedirs(storage, exist_ok=True)
        write_config(storage, plain(sweep))  # what write_report reads
        param_space = compile_search_space(sweep.search_space, sweep)
        # the baseline on both sides: a later fit may run slower
        bare_before = bare_tune_fit(sweep, count, root / "before")
        callbacks = [build_checkpoint_budget(sweep)]
        plan = SweepPlan(sweep, None, param_space, build_scheduler(sweep, param_space), build_stopper(sweep),
                         callbacks, None)
        trainable = tune.with_resources(tiny_trial, {"CPU": 1})  # in place of the real trial: no training
        tuner = build_tuner(plan, trainable, searcher_cap(sweep))
        start = time.perf_counter()
        results = tuner.fit()
        fit_s = time.perf_counter() - start
        assert results.num_terminated == count, (results.num_terminated, count)
        start = time.perf_counter()
        write_report(storage)
        report_s = time.perf_counter() - start
        bare_after = bare_tune_fit(sweep, count, root / "after")
        bare_s = (bare_before + bare_after) / 2
        print(f"trials {count}: {fit_s / count:.3f} s per trial (Tune fit {fit_s:.1f} s), report {report_s:.1f} s; "
              f"bare Tune {bare_s / count:.3f} s per trial "
              f"(fit {bare_before:.1f} s before hfsweep's, {bare_after:.1f} s after): "
              f"hfsweep / bare = {(fit_s + report_s) / bare_s:.2f}")


def bare_tune_fit(sweep, count: int, root: Path) -> float:
    """The baseline: the same trivial trainable and concurrency through a plain Ray Tune script
    (Tuner, ASHA, Tune's own checkpoint retention; no hfsweep config, search space, callbacks or
    report; each trial's config is its one searched value). Actors are reused, as hfsweep's
    in-process trials reuse theirs (`build_tuner`), so neither side pays an actor start per trial.
    Returns the fit's wall seconds."""
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler

    from hfsweep.driver.ray_cluster import max_concurrent_trials

    tuner = tune.Tuner(
        tune.with_resources(tiny_trial, {"CPU": 1}),
        param_space={"training": {"learning_rate": tune.loguniform(1e-5, 1e-2)}},
        tune_config=tune.TuneConfig(metric="eval_loss", mode="min", num_samples=count,
                                    scheduler=ASHAScheduler(max_t=3, grace_period=1),
                                    max_concurrent_trials=max_concurrent_trials(sweep.cluster, sweep.strategy),
                                    reuse_actors=True),
        run_config=tune.RunConfig(name="bare", storage_path=str(root / f"bare-{count}"), verbose=1,
                                  checkpoint_config=tune.CheckpointConfig(num_to_keep=1)),
    )
    start = time.perf_counter()
    results = tuner.fit()
    assert results.num_terminated == count, (results.num_terminated, count)
    return time.perf_counter() - start


def bench_ingest(root: Path, steps: int) -> None:
    """The same 1-worker trial on the streamed shards and on the split held in memory."""
    import numpy as np
    import pyarrow.parquet as pq
    import ray.data
    from throughput import tokens_per_second

    from hfsweep.data import prepared as prepared_module
    from hfsweep.driver import sweep, tuner

    streamed = prepared_module.load_ray_datasets

    def in_memory(data, datasets_to_split, seed):
        train = pq.read_table(data.train_path)
        return {"train": ray.data.from_arrow(train.take(np.random.default_rng(seed).permutation(train.num_rows)))}

    rates = {}
    for name, loader in (("in-memory", in_memory), ("streamed", streamed), ("in-memory again", in_memory),
                         ("streamed again", streamed)):
        tuner.load_ray_datasets = loader  # what trainable_for loads the sweep's datasets with
        storage = str(root / f"ingest-{name.replace(' ', '-')}")
        cfg = config(["cluster.num_workers=1", "search_space.training.learning_rate.values=[1e-3]",
                      "scheduler=fifo", f"training.max_steps={steps}", f"cache_dir={root / 'ingest-cache'}"], storage)
        history = sweep.run(preflight(cfg))[0].metrics_dataframe
        seconds = history["time_this_iter_s"].iloc[1:].sum()  # from the first report to the last, as throughput.py
        rates[name] = tokens_per_second(list(history["step"]), seconds, cfg, 1)
        print(f"ingest {name}: {rates[name]:,.0f} tokens/s")
    ratio = statistics.median([rates["streamed"] / rates["in-memory"],
                               rates["streamed again"] / rates["in-memory again"]])
    print(f"ingest: streamed / in-memory = {ratio:.3f}")


def bench_shuffle(root: Path, size: int, batches: int = 500, batch_size: int = 8) -> None:
    """How well the streamed order mixes the split, against a global permutation: the mean
    distance between the original positions of two examples in one batch, as a fraction of the
    split (a global permutation gives 1/3), and the share of batches whose examples all come from
    one shard."""
    import glob

    import numpy as np
    import pyarrow.parquet as pq

    from hfsweep.config.schema import ClusterConfig, typed
    from hfsweep.data.prepared import PreparedData, load_ray_datasets
    from hfsweep.driver.ray_cluster import init_ray

    init_ray(typed(ClusterConfig, {"num_cpus": 8}))
    train_path = sorted(glob.glob(str(root / f"cache-{size}-*" / "tokenized" / "*" / "train")))[-1]
    shards = [pq.read_table(p, columns=["input_ids"]).column("input_ids").to_pylist()
              for p in sorted(glob.glob(f"{train_path}/*.parquet"))]
    position = {tuple(row): (k, i) for k, shard in enumerate(shards) for i, row in enumerate(shard)}
    offsets = np.cumsum([0] + [len(shard) for shard in shards])
    total = offsets[-1]

    def measure(order_batches) -> tuple[float, float]:
        spread, single = [], 0
        for batch in order_batches:
            where = [position[tuple(row)] for row in batch]
            flat = np.array([offsets[k] + i for k, i in where])
            spread.append(np.abs(flat[:, None] - flat[None, :]).sum() / (len(flat) * (len(flat) - 1)) / total)
            single += len({k for k, _ in where}) == 1
        return float(np.mean(spread)), single / len(spread)

    rng = np.random.default_rng(0)
    everything = [row for shard in shards for row in shard]
    permuted = [everything[i] for i in rng.permutation(total)]
    print(f"shuffle ({total:,} blocks in {len(shards)} shards): global permutation: spread %.3f, "
          "single-shard batches %.0f%%"
          % (lambda m: (m[0], 100 * m[1]))(measure(permuted[i : i + batch_size]
                                                   for i in range(0, batches * batch_size, batch_size))))
    prepared = PreparedData("", train_path, "", total, 0)
    for buffer in (1024, 8192):
        train = load_ray_datasets(prepared, ["train"], seed=0)["train"]
        train.context.execution_options.preserve_order = True
        order = (b["input_ids"].tolist() for _, b in zip(range(batches), train.iter_batches(
            batch_size=batch_size, batch_format="numpy", local_shuffle_buffer_size=buffer, local_shuffle_seed=0)))
        spread, single = measure(order)
        print(f"shuffle: streamed, shard order seeded, local buffer {buffer} rows: spread {spread:.3f}, "
              f"single-shard batches {100 * single:.0f}%")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_prepare":
        print(json.dumps(prepare_once(*sys.argv[2:6])))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="10 MB, 8 trials and a short ingest run")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000], help="corpus sizes in MB")
    parser.add_argument("--trials", type=int, nargs="+", default=[8, 64, 256])
    parser.add_argument("--ingest-steps", type=int, default=200)
    parser.add_argument("--only", choices=("data", "shuffle", "trials", "ingest"), nargs="+",
                        default=["data", "shuffle", "trials", "ingest"])
    parser.add_argument("--streaming", action="store_true",
                        help="prepare with data.streaming=true (no Arrow copy, no memory map)")
    parser.add_argument("--root", default=None, help="working folder (default: a new temporary one)")
    args = parser.parse_args()
    if args.smoke:
        args.sizes, args.trials, args.ingest_steps = [10], [8], 60
    root = Path(args.root or tempfile.mkdtemp(prefix="hfsweep-scaling-"))
    print(f"working in {root}")
    if "data" in args.only:
        bench_data(args.sizes, root, args.streaming)
    if "shuffle" in args.only:
        bench_shuffle(root, min(args.sizes))
    if "trials" in args.only:
        bench_trials(args.trials, root)
    if "ingest" in args.only:
        bench_ingest(root, args.ingest_steps)


if __name__ == "__main__":
    main()
