"""What every report of both loops carries besides the Task's own metrics, by name, and how a worker
group's reports become one: the trial, the loops and the driver's schedulers and tables agree here."""

from __future__ import annotations

import math

# What a trial's training costs, in every report of both loops (`hfsweep.loops.cost`, and the peak
# memory of `WhatRan`): the sweep may take any as an objective, and results.csv holds each trial's last.
TOKENS_PER_SECOND = "train_tokens_per_second"  # only for families whose inputs are tokens
SAMPLES_PER_SECOND = "train_samples_per_second"
PEAK_MEMORY = "peak_memory_mb"
TRAINABLE_PARAMS = "trainable_params"
MFU = "mfu"  # only on a GPU of a known peak: an estimate, 6 x parameters x tokens/s over the bf16 peak
COST_METRICS = (TOKENS_PER_SECOND, SAMPLES_PER_SECOND, PEAK_MEMORY, TRAINABLE_PARAMS, MFU)

# Every report also carries the trial's own step budget, how many passes over the training set it
# has made and how many training samples it has seen: with `training.max_steps=-1` each trial's steps
# follow from its epochs and batch size, a scheduler whose time is `epoch` compares trials at the same
# amount of data, and `budget.train_samples` counts what trials consumed on any machine.
MAX_STEPS = "max_steps"
EPOCH = "epoch"
TRAIN_SAMPLES = "train_samples"
# and when it was made, in seconds since the epoch: Tune's own `timestamp` is whole seconds, too coarse
# to order a trial's start against the end of one that finished a moment before (`drawn_at_random`).
REPORTED_AT = "reported_at"


def examples_per_step(training: dict, workers: int) -> int:
    """Training examples one optimizer step takes: the per-device batch on every worker, accumulated."""
    return training["per_device_train_batch_size"] * workers * training.get("gradient_accumulation_steps", 1)


def steps_for_epochs(training: dict, workers: int, train_examples: int) -> int:
    """`training.num_train_epochs` over `train_examples` in optimizer steps, rounded up (at least 1)."""
    return max(
        1, math.ceil(training.get("num_train_epochs", 3.0) * train_examples / examples_per_step(training, workers))
    )


def progress(step: int, training: dict, workers: int, train_examples: int) -> dict:
    """A report's account of the data a trial has trained on by `step`: its passes over the training
    set and its training samples. The step counts from the trial's start, a restored trial's from its
    checkpoint's, so work lost to a restore is not counted."""
    samples = step * examples_per_step(training, workers)
    return {EPOCH: samples / train_examples, TRAIN_SAMPLES: samples}


def combine_ranks(reports: list[dict]) -> dict:
    """One report of a worker group, from each worker's (the same step): rank 0's, with the
    throughputs summed over the workers (each counts what it trained on), the largest peak memory,
    and the workers' mean MFU (each against its own device's peak)."""
    combined = dict(reports[0])
    for key, combine in (
        (TOKENS_PER_SECOND, sum),
        (SAMPLES_PER_SECOND, sum),
        (PEAK_MEMORY, max),
        (MFU, lambda values: sum(values) / len(values)),
    ):
        values = [report[key] for report in reports if key in report]
        if values:
            combined[key] = combine(values)
    return combined
