"""Benchmark 10: padding each batch to its longest example against padding every example to
`data.max_length`, on MRPC's real sentence pairs with the pretrained MiniLM (`model=minilm_l6`),
in one invocation, over whole epochs.

One-trial sweeps of `+experiment=glue_tsv glue=mrpc model=minilm_l6` (one worker, batch 16, the
same learning rate, seed and examples): with `data.pad_to_max_length=true` (every example padded
to 128 tokens at preparation, as Ray's BERT examples do); without it (each batch padded by the
collator on the worker to its longest example); and without it with
`training.train_sampling_strategy=group_by_length` (each run of 50 batches' examples sorted by
length, the longest batch first, as the Trainer's LengthGroupedSampler does). A few steps inside
one epoch would see the examples of one part of the length order only (the first group holds the
longest examples), so each trial trains one warm-up epoch and then `--epochs` whole epochs, and
reports at every epoch's end: the measured window is the whole epochs after the first report.

The Trainer counts the real tokens it trained on (`include_num_input_tokens_seen=non_padding`);
tokens/s is that count's growth over the window divided by the window's training time: the
trial's running time less the evaluations' (`eval_runtime`), so checkpoint saves are included.
The same examples are seen in every way, so the window's token count is the same in every run
(printed beside `epochs x` the split's real tokens, as a check). Each run's eval accuracy too.

    GLUE_DIR=/data/glue python benchmarks/padding.py [--train-samples 800 --epochs 1 --repeats 2]

GLUE_DIR holds GLUE's MRPC folder (train.tsv, dev.tsv) as its download script writes it.
`--train-samples` takes the first N training pairs (`data.max_train_samples`; 0: all 3,668, 230
steps an epoch); the default 800 is one whole group of 50 batches of 16, so an epoch is a
whole pass over the length groups.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics

from _common import config, prepare_data, run_sweep

from hfsweep.config.schema import ClusterConfig, typed
from hfsweep.driver.ray_cluster import init_ray

BATCH = 16
WAYS = {
    "padded to max_length (128)": ["data.pad_to_max_length=true"],
    "padded per batch": ["data.pad_to_max_length=false"],
    "padded per batch, grouped by length": ["data.pad_to_max_length=false",
                                            "+training.train_sampling_strategy=group_by_length"],
}


def data_overrides(train_samples: int) -> list[str]:
    return ["+experiment=glue_tsv", "glue=mrpc", "model=minilm_l6", "cluster.num_workers=1",
            f"training.per_device_train_batch_size={BATCH}",
            *([f"data.max_train_samples={train_samples}"] if train_samples else [])]


def epoch_of(way: list[str], train_samples: int) -> tuple[int, int]:
    """Steps in one epoch of this way's prepared train split (one worker, batches of BATCH; the last
    batch of a pass, or of a length group, may be short), and the split's real tokens."""
    data = prepare_data(config([*data_overrides(train_samples), *way], "/tmp/unused"))
    return math.ceil(data.num_train_blocks / BATCH), data.num_train_tokens


def measure(way: list[str], train_samples: int, epochs: int) -> dict:
    every, split_tokens = epoch_of(way, train_samples)
    _, results = run_sweep([
        *data_overrides(train_samples), *way,
        f"training.max_steps={(epochs + 1) * every}", f"training.eval_steps={every}", f"training.save_steps={every}",
        f"training.logging_steps={every}", "scheduler=fifo", "scheduler.grace_period=null",
        "search_space.training.learning_rate.values=[3e-5]", "search_alg.defaults_trial=false",
        "checkpoints.keep_per_trial=1",
        "+training.include_num_input_tokens_seen=non_padding",
    ])
    history = results[0].metrics_dataframe
    assert list(history["step"]) == [every * (i + 1) for i in range(epochs + 1)], list(history["step"])
    tokens = history["num_input_tokens_seen"].iloc[-1] - history["num_input_tokens_seen"].iloc[0]
    seconds = (history["time_total_s"].iloc[-1] - history["time_total_s"].iloc[0]
               - history["eval_runtime"].iloc[1:].sum())
    return {"tokens_per_s": tokens / seconds, "accuracy": history["eval_accuracy"].iloc[-1], "tokens": tokens,
            "split_tokens": epochs * split_tokens, "steps": every}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train-samples", type=int, default=800, help="the first N training pairs; 0: all")
    parser.add_argument("--epochs", type=int, default=1, help="whole epochs measured, after one warm-up epoch")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    if not os.path.isdir(os.path.join(os.environ.get("GLUE_DIR", ""), "MRPC")):
        raise SystemExit("set GLUE_DIR to the folder holding GLUE's MRPC/train.tsv and MRPC/dev.tsv")
    init_ray(typed(ClusterConfig, {"num_cpus": 8}))
    runs = {name: [] for name in WAYS}
    names = list(WAYS)
    for repeat in range(args.repeats):  # the order rotated, so a change in the machine's load hits every way
        for name in names[repeat % len(names):] + names[:repeat % len(names)]:
            run = measure(WAYS[name], args.train_samples, args.epochs)
            runs[name].append(run)
            print(f"repeat {repeat + 1}, {name}: {run['tokens_per_s']:.0f} real tokens/s over {args.epochs} epoch(s) "
                  f"of {run['steps']} steps ({run['tokens']} tokens; the split holds {run['split_tokens']}), "
                  f"accuracy {run['accuracy']:.4f}", flush=True)
    base = [r["tokens_per_s"] for r in runs["padded to max_length (128)"]]
    pairs = f"first {args.train_samples} training pairs" if args.train_samples else "all training pairs"
    print(f"\nMRPC (real files, {pairs}), all-MiniLM-L6-v2, batch {BATCH}, 1 worker; {args.epochs} whole epoch(s) "
          f"after one warm-up epoch; order rotated over {args.repeats} repeats; median (min–max, n)")
    print("| padding | real tokens/s | ratio to padded to 128 (same repeat) | eval accuracy at the last epoch |")
    print("| --- | --- | --- | --- |")
    for name, measured in runs.items():
        speeds = [r["tokens_per_s"] for r in measured]
        ratios = [s / b for s, b in zip(speeds, base)]
        accuracies = ", ".join(f"{r['accuracy']:.4f}" for r in measured)
        print(f"| {name} | {statistics.median(speeds):.0f} ({min(speeds):.0f}–{max(speeds):.0f}, n={len(speeds)}) | "
              f"{statistics.median(ratios):.2f} ({min(ratios):.2f}–{max(ratios):.2f}) | {accuracies} |")


if __name__ == "__main__":
    main()
