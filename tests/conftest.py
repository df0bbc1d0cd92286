"""Shared fixtures: offline environment, composed configs, one Ray instance per module."""

from __future__ import annotations

import copy
import csv
import functools
import os
import random
import time
from pathlib import Path

import pytest

os.environ.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1", WANDB_MODE="offline")
if os.environ.get("PYTEST_XDIST_WORKER"):  # pytest -n N: the workers share the cores, one torch thread each
    os.environ.setdefault("OMP_NUM_THREADS", "1")

from hydra import compose, initialize_config_dir  # noqa: E402

CONF_DIR = str(Path(__file__).resolve().parents[1] / "conf")


def compose_config(overrides: list[str] = ()):
    """Compose conf/config.yaml with overrides, as `python -m hfsweep` would: the defaults trial
    is on unless the overrides turn it off, as for a user."""
    from hfsweep.config import schema  # noqa: F401  (registers hfsweep_schema)
    from hfsweep.config.loading import normalise_overrides

    return copy.deepcopy(_composed(tuple(normalise_overrides(list(overrides)))))


@functools.cache  # the same overrides compose the same config: Hydra reads conf/ once per list, not once per test
def _composed(overrides: tuple[str, ...]):
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


def resolved_config(overrides: list[str], storage: Path, cache: Path) -> dict:
    from hfsweep.config.loading import resolve

    cfg = compose_config(overrides)
    cfg.cache_dir = str(cache)  # as the override `cache_dir=CACHE` last on the command line sets it
    return resolve(cfg, str(storage), list(overrides))


def sweep_config(overrides: list[str], storage: Path, cache: Path):
    """`resolved_config` typed, as the preflight hands it to the driver (`SweepConfig`)."""
    from hfsweep.config.schema import SweepConfig, typed

    return typed(SweepConfig, resolved_config(overrides, storage, cache))


def run_sweep(overrides: list[str], storage: Path, cache: Path):
    """An end-to-end test's sweep, as `python -m hfsweep OVERRIDES` runs it after composing: the
    resolved config and Tune's results."""
    from hfsweep.driver import sweep
    from hfsweep.driver.preflight import preflight

    cfg = resolved_config(overrides, storage, cache)
    return cfg, sweep.run(preflight(cfg))


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config, items):
    """The tiers: every test in tests/e2e/, or on the shared Ray cluster, is `slow` (the end-to-end
    tier, `pytest -m slow`), but those marked `smoke`, which stay in the default tier beside
    tests/unit/. `gpu` tests are skipped on a machine without CUDA."""
    import torch

    for item in items:
        on_ray = item.path.parent.name == "e2e" or "ray_cluster" in getattr(item, "fixturenames", ())
        if on_ray and item.get_closest_marker("smoke") is None:
            item.add_marker(pytest.mark.slow)
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if item.get_closest_marker("gpu"):  # a marker, not a keyword: a checkout in a folder named gpu is one
            item.add_marker(skip)


WORDS = "apple river stone cloud maple candle harbor meadow violin pepper lantern orchard copper ribbon falcon velvet"
NUMBERS = "seven thirty ninety eleven forty sixty twelve eighty zero million dozen hundred twenty fifty nine three"
GLUE_HEADER = "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String"  # MRPC's columns, after a byte-order mark


GLUE_PAIR_COUNTS = {"train": 800, "dev": 100}


def write_glue_pairs(folder: Path, seed: int = 0, counts: dict = GLUE_PAIR_COUNTS) -> Path:
    """MRPC pairs in GLUE's own TSV format (train.tsv, dev.tsv; a byte-order mark; bare quote
    characters inside fields, which pandas' default quoting misreads) that a BERT trained from
    scratch learns in about 20 steps, so F1 separates learning rates at ASHA's first rung.
    Quality 1: #2 String is #1 String with every third word dropped; 0: unrelated number words."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for split, count in counts.items():
        lines = [GLUE_HEADER]
        for i in range(count):
            first = rng.choices(WORDS.split(), k=9)
            second = [w for j, w in enumerate(first) if j % 3 != 2] if i % 2 else rng.choices(NUMBERS.split(), k=6)
            if i % 7 == 3:
                first[0] = '"' + first[0]  # an opening quote never closed, as in MRPC's sentences
            lines.append(f"{i % 2}\t{2 * i}\t{2 * i + 1}\t{' '.join(first)}\t{' '.join(second)}")
        (folder / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


SWAG_COLUMNS = [
    "video-id",
    "fold-ind",
    "startphrase",
    "sent1",
    "sent2",
    "gold-source",
    "ending0",
    "ending1",
    "ending2",
    "ending3",
    "label",
]


SWAG_ROWS = {"train.csv": 600, "val.csv": 100}


def write_swag(folder: Path, rows: dict = SWAG_ROWS, seed: int = 0) -> str:
    """SWAG-layout files whose right ending, at a random position, holds the context's first word
    (a wrong one never does): only a model that scores each ending can beat chance (25%)."""
    rng, words = random.Random(seed), WORDS.split()
    os.makedirs(folder, exist_ok=True)
    for name, count in rows.items():
        with open(os.path.join(folder, name), "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(SWAG_COLUMNS)
            for i in range(count):
                context = [
                    words[0],
                    *rng.sample(words[1:], 3),
                ]  # one first word: a pattern a tiny model learns in tens of steps
                others = [w for w in words if w not in context]
                endings = [" ".join(rng.sample(others, 3)) for _ in range(4)]
                label = rng.randrange(4)
                endings[label] = f"{rng.choice(others)} {context[0]} {rng.choice(others)}"
                start = "then the"
                writer.writerow(
                    [f"v{i}", i, f"{' '.join(context)} {start}", " ".join(context), start, "gen", *endings, label]
                )
    return str(folder)


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("hfsweep_cache")


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray with 8 logical CPUs, so two 2-worker trials fit on two cores.

    The modules share one (a start costs ~7 s on two cores); it is restarted when an earlier module
    left any of it held, so every module starts on a whole, idle cluster.
    """
    import ray

    from hfsweep.config.schema import ClusterConfig, typed
    from hfsweep.driver.ray_cluster import init_ray

    if ray.is_initialized() and not all_resources_free():
        ray.shutdown()
    init_ray(typed(ClusterConfig, {"num_cpus": 8}))
    yield


def all_resources_free(wait_s: float = 10.0) -> bool:
    """Whether every logical CPU of the connected Ray is free, allowing ended actors to release theirs."""
    import ray

    deadline = time.time() + wait_s
    while ray.available_resources().get("CPU", 0) < ray.cluster_resources().get("CPU", 0):
        if time.time() > deadline:
            return False
        time.sleep(0.2)
    return True


@pytest.fixture
def no_ray_connection():
    """For tests that start their own Ray cluster: leave the modules' shared one first."""
    import ray

    ray.shutdown()


def untrained_metrics(cfg: dict, out_dir: str) -> dict:
    """The eval metrics of the model every trial of `cfg` starts from (same seed, no step taken),
    on the prepared validation split: what an end-to-end test says a sweep has learnt beyond."""
    import datasets
    import transformers
    from transformers import Seq2SeqTrainingArguments, TrainingArguments

    from hfsweep.config.schema import SweepConfig, typed
    from hfsweep.contract.recipe import TrainingRecipe
    from hfsweep.data.tokenizers import load_tokenizer
    from hfsweep.driver.preflight import task_of
    from hfsweep.loops.hf_trainer import build_trainer
    from hfsweep.models import build_model

    sweep = typed(SweepConfig, cfg)
    task = task_of(sweep)
    data = prepare_data(cfg)
    tokenizer = load_tokenizer(data.tokenizer_path)
    transformers.set_seed(sweep.seed)
    model = build_model(sweep.model, tokenizer, data.label_names, task=task)
    arguments_class = Seq2SeqTrainingArguments if task.generates else TrainingArguments
    args = arguments_class(output_dir=out_dir, use_cpu=True, report_to="none", per_device_eval_batch_size=64)
    trainer = build_trainer(
        TrainingRecipe.of(sweep),
        task,
        model=model,
        tokenizer=tokenizer,
        args=args,
        train_dataset=None,
        eval_dataset=datasets.load_from_disk(data.validation_path),
        callbacks=[],
        label_names=data.label_names,
        validation_path=data.validation_path,
    )
    return trainer.evaluate()


def sequential_sweep(max_steps: int, every: int, learning_rates: list, warmup_steps: int = 0) -> list[str]:
    """Overrides for a short learning-rate sweep an end-to-end test can reason about: one worker
    per trial, trials one at a time in grid order (the learning trials reach ASHA's first rung
    first), evaluated and saved every `every` steps, ASHA's first rung at `every`."""
    return [
        "cluster.num_workers=1",
        "cluster.max_concurrent_trials=1",
        f"training.max_steps={max_steps}",
        f"training.eval_steps={every}",
        f"training.save_steps={every}",
        f"training.logging_steps={every}",
        f"training.warmup_steps={warmup_steps}",
        f"scheduler.grace_period={every}",
        f"search_space.training.learning_rate.values=[{','.join(map(str, learning_rates))}]",
    ]


def save_tiny_base(folder: Path, cache: Path, overrides: list[str] = ()) -> str:
    """A tiny model and its tokenizer saved with `save_pretrained`, as the base a PEFT sweep loads
    by directory (`model.pretrained`): the `debug=tiny` model (GPT-2 by default) with the
    tokenizer it trains on its data, at its initial weights."""
    import transformers

    from hfsweep.config.schema import plain
    from hfsweep.data.tokenizers import load_tokenizer
    from hfsweep.driver.preflight import task_of
    from hfsweep.models import build_model

    sweep = sweep_config(["debug=tiny", *overrides], folder / "unused", cache)
    tokenizer = load_tokenizer(prepare_data(plain(sweep)).tokenizer_path)
    transformers.set_seed(0)
    build_model(sweep.model, tokenizer, task=task_of(sweep)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def prepare_data(cfg: dict):
    """The sweep's data prepared as `sweep.run` prepares it: for the Task its config names."""
    from hfsweep.config.schema import SweepConfig, typed
    from hfsweep.data.prepare import prepare
    from hfsweep.driver.preflight import task_of

    sweep = typed(SweepConfig, cfg)
    return prepare(sweep.data, sweep.model, sweep.cache_dir, task_of(sweep))
