"""Row 4a's 0.016 (#61 item 2): hfsweep's lr-1e-3 trial against the plain `Trainer` at the same seed.

Both arms train peer_hf_search.py's lr-1e-3 configuration (the default sweep's tiny GPT-2 and
prepared data, 60 steps, batch 8, an eval every 10 steps) once per seed, one torch thread each:
  - `hfsweep`: a one-trial sweep (`cluster.num_workers=1`, FIFO, `search_alg.defaults_trial=false`,
    `seed=S`) through `sweep.run`;
  - `HF`: the plain `Trainer` as peer_hf_search.py's `hf_search` builds it (`model_init` seeding
    with the config's seed, the train split from its parquet files, `default_data_collator`), run
    in this process with `train()`, but with `TrainingArguments(seed=S)` (that benchmark leaves
    transformers' default 42).
The two arms run alternately (hfsweep first for the 1st and 3rd seed, HF first for the 2nd).

Modes (`--modes`):
  - `default`: each arm's own data order: hfsweep's Ray Data shard through its seeded local
    shuffle buffer (`training.train_sampling_strategy=random`), the Trainer's RandomSampler;
  - `sequential`: both arms read the training rows in one order: hfsweep with
    `training.train_sampling_strategy=sequential` (its parquet files in the seeded file-shuffle
    order, each file's rows in order), the Trainer with its `train_sampling_strategy="sequential"`
    over the rows Ray Data reads in that same order (`load_ray_datasets`, taken whole). Dropout
    as both arms have it (GPT-2's 0.1; each arm's torch RNG stream is its own);
  - `nodropout`: `sequential` with GPT-2's three dropouts at 0 (`+model.config.*pdrop=0.0`, both
    arms), so nothing random is left after the initial weights.

Each run records, besides its eval_loss at steps 10..60: a digest of the initial weights, a digest
of the `input_ids` of every training forward pass in order (a forward pre-hook on the model: what
the 60 steps trained on, drawing no random numbers) and where in the split those rows lie (the
count in each tenth of the split, in the HF arm's file order, and its chi-square against a uniform
sample), and its resolved TrainingArguments; the first seed's arguments are compared key by key
(paths left out).

Printed per mode: each run's losses and digests, the between-arm difference at step 60 per seed,
and each arm's spread over the seeds at step 60.

    python benchmarks/loss_agreement.py [--seeds 1 2 3] [--modes default sequential nodropout]

(benchmarks/results/loss_agreement.txt: `--seeds 1 2 3 4 5 6 42 --modes default`, then
`--modes sequential nodropout`; seed 42 is row 4a's.)
"""

from __future__ import annotations

import os

os.environ["OMP_NUM_THREADS"] = "1"  # set before torch or Ray is imported anywhere

import argparse  # noqa: E402
import glob  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import datasets  # noqa: E402
import numpy as np  # noqa: E402
from _common import config, prepare_data, run_sweep  # noqa: E402
from transformers import Trainer, TrainingArguments, default_data_collator, set_seed  # noqa: E402

from hfsweep.config.schema import ClusterConfig, ModelConfig, typed  # noqa: E402
from hfsweep.data.tokenizers import load_tokenizer  # noqa: E402
from hfsweep.driver import tuner  # noqa: E402
from hfsweep.driver.ray_cluster import init_ray  # noqa: E402
from hfsweep.models import build_model, weights_digest  # noqa: E402
from hfsweep.tasks import get_task  # noqa: E402

STEPS, EVAL_STEPS = 60, 10
BASE = [
    f"training.max_steps={STEPS}",
    "scheduler=fifo",
    "search_alg.defaults_trial=false",
    "search_space.training.learning_rate.values=[0.001]",
    "cluster.num_workers=1",
    "cluster.resources_per_worker.CPU=1",
]
SEQUENTIAL = ["+training.train_sampling_strategy=sequential"]
MODES = {
    "default": [],
    "sequential": SEQUENTIAL,
    "nodropout": [*SEQUENTIAL, *(f"+model.config.{k}=0.0" for k in ("resid_pdrop", "embd_pdrop", "attn_pdrop"))],
}
NOT_COMPARED = {"output_dir", "logging_dir"}


def probe(model, folder: str) -> None:
    """Record `model`'s initial weights' digest, and hash the input_ids of every training forward."""
    import numpy as np
    import torch

    torch.set_num_threads(1)
    Path(folder, "init").write_text(weights_digest(model))
    seen = {"hash": hashlib.sha256(), "forwards": 0, "dtypes": set(), "rows": []}

    def hook(module, args, kwargs):
        if module.training:
            ids = kwargs.get("input_ids", args[0] if args else None)
            rows = ids.detach().cpu().to(torch.int64).numpy()
            seen["hash"].update(rows.tobytes())
            seen["rows"].append(rows)
            np.save(Path(folder, "train_ids.npy"), np.concatenate(seen["rows"]))
            seen["forwards"] += 1
            seen["dtypes"].add(str(ids.dtype).removeprefix("torch."))
            dtypes = ",".join(sorted(seen["dtypes"]))
            Path(folder, "train_ids").write_text(f"{seen['forwards']} {seen['hash'].hexdigest()[:12]} ({dtypes})")

    model.register_forward_pre_hook(hook, with_kwargs=True)


def hfsweep_run(overrides: list[str], folder: str) -> dict:
    real_run_trial = tuner.run_trial

    def run_trial(sampled, **kwargs):  # the trial's own process, where it trains (num_workers=1)
        from hfsweep.loops import hf_trainer

        real_build, real_args = hf_trainer.build_model, hf_trainer.training_arguments

        def build(*args, **kw):
            model = real_build(*args, **kw)
            probe(model, folder)
            return model

        def training_arguments(*args, **kw):
            resolved = real_args(*args, **kw)
            Path(folder, "args.json").write_text(json.dumps(resolved.to_dict(), default=str))
            return resolved

        hf_trainer.build_model, hf_trainer.training_arguments = build, training_arguments
        try:
            return real_run_trial(sampled, **kwargs)
        finally:
            hf_trainer.build_model, hf_trainer.training_arguments = real_build, real_args

    tuner.run_trial = run_trial
    try:
        wall, results = run_sweep(overrides)
    finally:
        tuner.run_trial = real_run_trial
    assert len(results) == 1 and not results.errors, results.errors
    history = results[0].metrics_dataframe.dropna(subset=["eval_loss"])
    return {"wall": wall, "losses": dict(zip(history["step"].astype(int), history["eval_loss"]))}


def ray_order(cfg: dict, data) -> datasets.Dataset:
    """The train split's rows in the order hfsweep's sequential stream reads them for this seed."""
    import pyarrow as pa
    import ray

    from hfsweep.data.prepared import load_ray_datasets

    train = load_ray_datasets(data, ["train"], cfg["seed"])["train"]
    return datasets.Dataset(pa.concat_tables(ray.get(train.to_arrow_refs())))


def hf_run(cfg: dict, aligned: bool, folder: str) -> dict:
    import torch

    torch.set_num_threads(1)
    data = prepare_data(cfg)
    tokenizer = load_tokenizer(data.tokenizer_path)

    def model_init(trial=None):
        set_seed(cfg["seed"])
        model = build_model(typed(ModelConfig, cfg["model"]), tokenizer, task=get_task(cfg["model"]["task"]))
        probe(model, folder)
        return model

    if aligned:
        train = ray_order(cfg, data)
    else:
        train = datasets.Dataset.from_parquet(sorted(glob.glob(os.path.join(data.train_path, "*.parquet"))))
    validation = datasets.load_from_disk(data.validation_path)
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(output_dir=out, use_cpu=True, report_to="none", seed=cfg["seed"], **cfg["training"])
        Path(folder, "args.json").write_text(json.dumps(args.to_dict(), default=str))
        trainer = Trainer(
            model_init=model_init,
            args=args,
            train_dataset=train,
            eval_dataset=validation,
            processing_class=tokenizer,
            data_collator=default_data_collator,
        )
        start = time.perf_counter()
        trainer.train()
        wall = time.perf_counter() - start
    losses = {e["step"]: e["eval_loss"] for e in trainer.state.log_history if "eval_loss" in e}
    return {"wall": wall, "losses": losses}


def canonical_index(cfg: dict) -> dict:
    """Each training row's position in the split as the HF arm's default mode reads it (its parquet
    files in name order), by its input_ids."""
    import pyarrow.parquet as pq

    files = sorted(glob.glob(os.path.join(prepare_data(cfg).train_path, "*.parquet")))
    rows = [
        np.asarray(r, dtype=np.int64) for f in files for r in pq.read_table(f, columns=["input_ids"])[0].to_pylist()
    ]
    index: dict = {}
    for i, row in enumerate(rows):
        index.setdefault(row.tobytes(), []).append(i)
    return {"index": index, "rows": len(rows)}


def where_trained(folder: str, canonical: dict, bins: int = 10) -> str:
    """Where in the split the rows a run trained on lie: the count in each tenth of it (a uniform
    sample of n rows puts n/10 in each), and Pearson's chi-square of those counts against uniform
    (9 degrees of freedom: 16.9 is its 95th percentile)."""
    trained = np.load(Path(folder, "train_ids.npy"))
    positions = [canonical["index"][row.tobytes()][0] for row in trained]
    counts = np.bincount(np.array(positions) * bins // canonical["rows"], minlength=bins)
    expected = len(positions) / bins
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    return (
        f"{len(set(positions))} distinct rows of {len(positions)}; per tenth of the split "
        f"{' '.join(str(c) for c in counts)}; chi-square vs uniform {chi2:.1f}"
    )


def args_differences(a: dict, b: dict) -> list[str]:
    keys = sorted((set(a) | set(b)) - NOT_COMPARED)
    return [f"{k}: hfsweep {a.get(k, '<absent>')!r}, HF {b.get(k, '<absent>')!r}" for k in keys if a.get(k) != b.get(k)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    cli = parser.parse_args()
    init_ray(typed(ClusterConfig, config(BASE, "/tmp/unused")["cluster"]))
    prepare_data(config(BASE, "/tmp/unused"))
    for mode in cli.modes:
        final = {"hfsweep": {}, "HF": {}}
        args_seen = {}
        print(f"\n== mode {mode}: overrides {' '.join(MODES[mode]) or '(none)'}", flush=True)
        for i, seed in enumerate(cli.seeds):
            overrides = [*BASE, *MODES[mode], f"seed={seed}"]
            cfg = config(overrides, "/tmp/unused")
            canonical = canonical_index(cfg)
            order = ["hfsweep", "HF"] if i % 2 == 0 else ["HF", "hfsweep"]
            curves = {}
            for arm in order:
                folder = tempfile.mkdtemp(prefix="hfsweep-loss-")
                if arm == "hfsweep":
                    run = hfsweep_run(overrides, folder)
                else:
                    run = hf_run(cfg, aligned=mode != "default", folder=folder)
                losses = run["losses"]
                final[arm][seed] = losses.get(STEPS, float("nan"))
                curves[arm] = losses
                args_seen.setdefault(arm, json.loads(Path(folder, "args.json").read_text()))
                print(
                    f"seed {seed}, {arm}: {run['wall']:.1f} s; eval_loss "
                    + " ".join(f"{s}:{losses[s]:.5f}" for s in sorted(losses))
                    + f"; init weights {Path(folder, 'init').read_text()[:12]}"
                    + f"; trained on (forwards, input_ids digest) {Path(folder, 'train_ids').read_text()}"
                    + f"; {where_trained(folder, canonical)}",
                    flush=True,
                )
            gap = max(abs(curves["hfsweep"][s] - curves["HF"][s]) for s in curves["HF"])
            print(
                f"seed {seed}: hfsweep - HF at step {STEPS}: {final['hfsweep'][seed] - final['HF'][seed]:+.5f}; "
                f"largest |hfsweep - HF| over steps {min(curves['HF'])}..{max(curves['HF'])}: {gap:.1e}",
                flush=True,
            )
        if len(args_seen) == 2:
            print(f"TrainingArguments that differ (seed {cli.seeds[0]}; paths left out):")
            for line in args_differences(args_seen["hfsweep"], args_seen["HF"]) or ["none"]:
                print(f"  {line}")
        print(f"mode {mode}, eval_loss at step {STEPS}:")
        for arm, by_seed in final.items():
            values = list(by_seed.values())
            sd = statistics.stdev(values) if len(values) > 1 else float("nan")
            print(
                f"  {arm}: "
                + " ".join(f"seed {s} {v:.5f}" for s, v in by_seed.items())
                + f"; spread (max-min) {max(values) - min(values):.5f}, sd {sd:.5f}"
            )
        diffs = [final["hfsweep"][s] - final["HF"][s] for s in cli.seeds]
        print(
            "  hfsweep - HF per seed: "
            + " ".join(f"{d:+.5f}" for d in diffs)
            + f"; mean {statistics.mean(diffs):+.5f}, max |d| {max(abs(d) for d in diffs):.5f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
