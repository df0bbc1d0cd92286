"""Benchmark 10: padding each batch to its longest example against padding every example to
`data.max_length`, on MRPC's real sentence pairs with the pretrained MiniLM (`model=minilm_l6`),
in one invocation.

One-trial sweeps of `+experiment=glue_tsv glue=mrpc model=minilm_l6` (one worker, the same
learning rate, seed and steps): with `data.pad_to_max_length=true` (every example padded to 128
tokens at preparation, as Ray's BERT examples do); without it (each batch padded by the collator on
the worker to its longest example); and without it with `training.train_sampling_strategy=
group_by_length` (examples of similar length batched together). The Trainer counts the real
tokens it trained on (`include_num_input_tokens_seen=non_padding`); tokens/s is that count's
growth between the trial's first and last report over the training time between them: the
trial's running time less the evaluations' (`eval_runtime`), so checkpoint saves are included.
Each run's eval accuracy is printed too.

    GLUE_DIR=/data/glue python benchmarks/padding.py [--steps 60 --repeats 2]

GLUE_DIR holds GLUE's MRPC folder (train.tsv, dev.tsv) as its download script writes it.
"""

from __future__ import annotations

import argparse
import os
import statistics

from _common import run_sweep

from hfsweep.driver.ray_cluster import init_ray

WAYS = {
    "padded to max_length (128)": ["data.pad_to_max_length=true"],
    "padded per batch": ["data.pad_to_max_length=false"],
    "padded per batch, grouped by length": ["data.pad_to_max_length=false", "+training.train_sampling_strategy=group_by_length"],
}


def measure(way: list[str], steps: int) -> dict:
    every = steps // 3
    _, results = run_sweep([
        "+experiment=glue_tsv", "glue=mrpc", "model=minilm_l6", "cluster.num_workers=1", *way,
        f"training.max_steps={steps}", f"training.eval_steps={every}", f"training.save_steps={every}", f"training.logging_steps={every}",
        f"scheduler.grace_period={every}", "search_space.training.learning_rate.values=[3e-5]", "checkpoints.keep_per_trial=1",
        "+training.include_num_input_tokens_seen=non_padding",
    ])
    history = results[0].metrics_dataframe
    tokens = history["num_input_tokens_seen"].iloc[-1] - history["num_input_tokens_seen"].iloc[0]
    seconds = history["time_total_s"].iloc[-1] - history["time_total_s"].iloc[0] - history["eval_runtime"].iloc[1:].sum()
    return {"tokens_per_s": tokens / seconds, "accuracy": history["eval_accuracy"].iloc[-1], "tokens": tokens}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    if not os.path.isdir(os.path.join(os.environ.get("GLUE_DIR", ""), "MRPC")):
        raise SystemExit("set GLUE_DIR to the folder holding GLUE's MRPC/train.tsv and MRPC/dev.tsv")
    init_ray({"address": None, "num_cpus": 8, "num_gpus": None})
    runs = {name: [] for name in WAYS}
    for _ in range(args.repeats):  # alternated, so a change in the machine's load hits both
        for name, way in WAYS.items():
            runs[name].append(measure(way, args.steps))
    base = statistics.median(r["tokens_per_s"] for r in runs["padded to max_length (128)"])
    print(f"\nMRPC (real files), all-MiniLM-L6-v2, batch 16, {args.steps} steps, 1 worker; median of {args.repeats} alternated runs")
    print("| padding | real tokens/s | ratio | eval accuracy at the last step |")
    print("| --- | --- | --- | --- |")
    for name, measured in runs.items():
        speed = statistics.median(r["tokens_per_s"] for r in measured)
        accuracies = ", ".join(f"{r['accuracy']:.4f}" for r in measured)
        each = ", ".join(f"{r['tokens_per_s']:.0f}" for r in measured)
        print(f"| {name} | {speed:.0f} ({each}) | {speed / base:.2f} | {accuracies} |")


if __name__ == "__main__":
    main()
