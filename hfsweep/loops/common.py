"""What both training loops share, written once: the training.* and attention they train with (the
sweep's fast GPU defaults applied), reporting a result and its checkpoint, what the worker really
trains with, the checkpoint to resume from, the trial's own hyperparameters over a restored
optimizer, the validation shard, quiet logs and the divergence check."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import itertools
import logging
import math
import re
import resource
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass

import ray.train
from ray.train import Checkpoint, CheckpointUploadMode

from hfsweep.compat import lr_factors, quiet_train_report_log, ray_data_iterable, set_last_lr
from hfsweep.config.schema import DataConfig
from hfsweep.contract.metrics import REPORTED_AT
from hfsweep.contract.pointers import checkpoint_dir_name, checkpoint_step, report_to_tune
from hfsweep.contract.recipe import TrainingRecipe, TrainJob

ADAMW_FUSED, ADAMW = "adamw_torch_fused", "adamw_torch"  # TrainingArguments' optim names


@dataclass(frozen=True)
class GpuFeatures:
    """What this process's GPU runs natively: bf16 and TF32 from Ampere on, neither without CUDA.
    The GPU defaults ask only for these, so a sweep's defaults also run on an older GPU (in fp32);
    emulated bf16 is slow, and TrainingArguments refuses TF32 there."""

    bf16: bool
    tf32: bool

    @classmethod
    def here(cls) -> GpuFeatures:
        import torch
        from transformers.utils import is_torch_tf32_available

        cuda = torch.cuda.is_available()
        return cls(
            bf16=cuda and torch.cuda.is_bf16_supported(including_emulation=False), tf32=is_torch_tf32_available()
        )


def hardware_defaults(recipe: TrainingRecipe, gpu: GpuFeatures) -> dict:
    """The TrainingArguments fields the loops add to `recipe.training` (both train with
    `{**recipe.training, **hardware_defaults(...)}`): on a GPU sweep its `gpu.*` defaults that `gpu`
    runs, each only where the config leaves the field unset (`training.bf16` is null unless set, and
    `training.fp16=true` keeps bf16 off). The one place they are applied; a CPU sweep adds bf16 off
    where unset."""
    training, chosen = recipe.training, recipe.gpu
    added = {}
    if training.get("bf16") is None:
        added["bf16"] = bool(chosen and chosen.bf16 and gpu.bf16 and not training.get("fp16"))
    if chosen is None:
        return added
    # spelt out both ways: transformers 5 on torch 2.8+ already defaults to the fused kernel
    fast = {"optim": ADAMW_FUSED if chosen.fused_adamw else ADAMW}
    if chosen.tf32 and gpu.tf32:
        fast["tf32"] = True
    if chosen.torch_compile:
        fast["torch_compile"] = True
    return {**added, **{key: value for key, value in fast.items() if key not in training}}


def attention(recipe: TrainingRecipe) -> str | None:
    """The attention kernel to ask of the model: `gpu.attn_implementation` on a GPU sweep; None
    (transformers' choice) on CPUs."""
    chosen = recipe.gpu and recipe.gpu.attn_implementation
    return chosen.value if chosen else None


def report_to_sweep(metrics: dict, checkpoint_dir: str | None, in_process: bool) -> None:
    """Hand one result and the checkpoint the loop just wrote (rank 0 only) to the sweep.

    In a trial's own process it goes straight to Tune. On a worker group it goes to Ray Train in
    place (`NO_UPLOAD`): every rank reports, since Train's report is a barrier.
    """
    metrics = {**metrics, REPORTED_AT: time.time()}
    if in_process:
        report_to_tune(metrics, checkpoint_dir)
        return
    ray.train.report(
        metrics,
        checkpoint=Checkpoint.from_directory(checkpoint_dir) if checkpoint_dir else None,
        checkpoint_dir_name=checkpoint_dir_name(metrics["step"]),
        checkpoint_upload_mode=CheckpointUploadMode.NO_UPLOAD,
    )


class WhatRan:
    """What the worker really trains with, added to every report so a test (or a user) can check
    the config took effect: `device` type, the parameters' `param_dtype`, the dtype autocast
    computes in (`autocast_dtype`, "none" without), Accelerate's `distributed` type (FSDP,
    DEEPSPEED, MULTI_GPU, NO...), `linear4bit_modules` where the base is 4-bit (QLoRA), and
    `peak_memory_mb` (CUDA's peak allocation, on CPU the process's peak resident set, both since
    the trial started: `start_peak_memory`).

    Measured at the first forward pass of the model's first leaf module with parameters: inside
    the model's forward, where Accelerate's autocast is on (it wraps the model's forward)."""

    def __init__(self, model):
        leaf = next(
            m
            for m in model.modules()
            if next(m.children(), None) is None and next(m.parameters(recurse=False), None) is not None
        )
        self.ran: dict = {}
        start_peak_memory()
        linear4bit = sum(
            type(m).__name__ == "Linear4bit" and type(m).__module__.startswith("bitsandbytes") for m in model.modules()
        )
        if linear4bit:
            self.ran["linear4bit_modules"] = linear4bit
        self._hook = leaf.register_forward_pre_hook(self._measure)

    def _measure(self, module, args) -> None:
        import torch
        from accelerate.state import AcceleratorState

        parameter = next(module.parameters(recurse=False))
        device = parameter.device.type
        autocast = (
            str(torch.get_autocast_dtype(device)).removeprefix("torch.")
            if torch.is_autocast_enabled(device)
            else "none"
        )
        self.ran.update(
            device=device,
            param_dtype=str(parameter.dtype).removeprefix("torch."),
            autocast_dtype=autocast,
            distributed=AcceleratorState().distributed_type.value,
        )
        self._hook.remove()

    def metrics(self) -> dict:
        import torch

        peak = torch.cuda.max_memory_allocated() / 2**20 if self.ran.get("device") == "cuda" else peak_resident_mb()
        return {**self.ran, "peak_memory_mb": peak}


def start_peak_memory() -> None:
    """Make the peak memory a trial reports its own, in a process that ran trials before it (Tune
    reuses an in-process trial's actor): reset CUDA's peak allocation and the host's peak resident
    set (Linux's VmHWM, through /proc/self/clear_refs), after handing back to the system the heap
    the earlier trials freed. glibc keeps freed memory in per-thread arenas and Tune runs each trial
    on a new thread, so without `malloc_trim` a reused actor grew by about 1 GB per MiniLM trial."""
    import torch

    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    if hasattr(libc, "malloc_trim"):  # glibc; musl and macOS have none
        libc.malloc_trim(0)
    with contextlib.suppress(OSError):  # not Linux, or a kernel that refuses: the process's lifetime peak
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
    if torch.cuda.is_initialized():
        torch.cuda.reset_peak_memory_stats()


def peak_resident_mb() -> float:
    """The process's peak resident set in MiB since `start_peak_memory` (where Linux can reset it)."""
    with contextlib.suppress(OSError):
        with open("/proc/self/status") as status:
            return int(re.search(r"^VmHWM:\s+(\d+) kB", status.read(), re.MULTILINE).group(1)) / 2**10
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (2**20 if sys.platform == "darwin" else 2**10)


def worker_seed(seed: int, in_process: bool) -> int:
    """The trial's seed made distinct per worker, for what each worker draws on its own (masked
    LM's masks): reproducible, and not the same masks on every worker."""
    return seed + (0 if in_process else ray.train.get_context().get_world_rank())


def with_perplexity(metrics: dict, task) -> dict:
    """`eval_perplexity` beside `eval_loss` where the task's loss is a token loss (capped: exp(50)
    is already meaningless)."""
    if task.reports_perplexity and "eval_loss" in metrics:
        metrics["eval_perplexity"] = math.exp(min(metrics["eval_loss"], 50.0))
    return metrics


def check_finite(key: str, value: float, step: int) -> None:
    """A non-finite loss ends the trial as errored, with the step and the value, instead of
    training on (and checkpointing) garbage until max_steps."""
    if value is not None and not math.isfinite(value):
        raise FloatingPointError(f"training diverged: {key} is {value} at step {step}")


def resume_checkpoint(job: TrainJob) -> str | None:
    """The checkpoint to continue from: this run's own latest (a restarted worker group), else the
    one Tune handed the trial (a restored, retried or PBT-exploited trial), else none."""
    own = None if job.in_process else ray.train.get_checkpoint()
    if own is not None:
        return own.path
    return job.resume_from


def trained_to_the_end(resume_from: str | None, training: Mapping) -> bool:
    """A run restored from the checkpoint of its last step (retried after its final report): there is
    nothing left to train. Handed it, the Trainer, which cannot size a stream, trains one more step."""
    return bool(resume_from) and checkpoint_step(resume_from) >= training["max_steps"]


def batches_drawn(resume_from: str | None, training: Mapping) -> int:
    """The train batches drawn before the checkpoint a run resumes from: its steps times the
    gradient accumulation (0 for a fresh run)."""
    if not resume_from:
        return 0
    return checkpoint_step(resume_from) * training.get("gradient_accumulation_steps", 1)


def apply_hyperparameters(optimizer, lr_scheduler, training: dict) -> None:
    """Put the trial's learning rate and weight decay over a restored optimizer and LR scheduler.

    Restoring a checkpoint restores the donor's values too; a PBT-exploited trial must continue
    from the donor's weights with its own perturbed ones. The schedule's progress is kept. The
    weight decay goes to the decayed group, the first in the Trainer's grouping (and the Accelerate
    loop's), whatever the donor's was (0 included), and to any other group that decays.
    """
    factors = lr_factors(lr_scheduler)
    if factors is None:
        # reduce_lr_on_plateau: PBT is refused with it, so only the trial's own checkpoint, saved with
        # these very hyperparameters, resumes it, and its restored reductions are kept as they are.
        return
    learning_rate, weight_decay = training["learning_rate"], training.get("weight_decay", 0.0)
    lr_scheduler.base_lrs = [learning_rate] * len(optimizer.param_groups)
    for index, (group, factor) in enumerate(zip(optimizer.param_groups, factors)):
        group["initial_lr"] = learning_rate
        group["lr"] = learning_rate * factor
        if index == 0 or group.get("weight_decay"):
            group["weight_decay"] = weight_decay
    set_last_lr(lr_scheduler, [group["lr"] for group in optimizer.param_groups])


def hyperparameters_in_effect(optimizer) -> dict:
    """The learning rate and weight decay the optimizer's param groups hold, read at an optimizer
    step: what a restored trial really trains with, reported so a PBT exploit can be checked."""
    groups = optimizer.param_groups
    return {"lr_in_effect": groups[0]["lr"], "weight_decay_in_effect": max(g.get("weight_decay", 0.0) for g in groups)}


MEGA_BATCHES = (
    50  # examples of this many batches are sorted by length together, as the Trainer's LengthGroupedSampler does
)


def train_batches(shard, training: Mapping, data_cfg: DataConfig, collate, seed: int, device="auto"):
    """This worker's training batches from its Ray Data `shard`, made model inputs by `collate`
    (None: the columns as tensors), in the order `training.train_sampling_strategy` names (the
    Trainer's key, whose samplers a streamed train set cannot use): `random` (the default) through
    the local shuffle buffer, seeded (`seeded_passes` seeds each pass anew, so the same seed repeats
    the same passes); `sequential` in the shard's order; `group_by_length` with
    examples of similar length in one batch, as the Trainer's LengthGroupedSampler groups them:
    each run of 50 batches' shuffled examples sorted by length (transformers'
    `get_length_grouped_indices`), so a batch padded to its longest example pads little; grouped
    anew every epoch."""
    strategy = training.get("train_sampling_strategy", "random")
    batch_size = training["per_device_train_batch_size"]
    shuffle = (
        {}
        if strategy == "sequential"
        else {"local_shuffle_buffer_size": data_cfg.shuffle_buffer_rows, "local_shuffle_seed": seed}
    )
    if strategy != "group_by_length":
        return shard.iter_torch_batches(batch_size=batch_size, device=device, collate_fn=collate, **shuffle)
    epochs = itertools.count()
    return ray_data_iterable(lambda: length_grouped(shard, batch_size, collate, seed + next(epochs), shuffle))


def seeded_passes(shard, training: Mapping, data_cfg: DataConfig, collate, seed: int, device="auto"):
    """This worker's shard as an iterable of passes: each iteration reads one pass, shuffled with
    `seed` plus the optimizer steps drawn before it. So every pass is a new order (the file shuffle
    alone changes nothing in a split of one file), both loops draw the same batches, and a run
    restored at a step, which draws from the first pass again, replays the stream it was saved in."""
    accumulation = training.get("gradient_accumulation_steps", 1)
    drawn = 0

    def one_pass():
        nonlocal drawn
        for batch in train_batches(shard, training, data_cfg, collate, seed + drawn // accumulation, device):
            drawn += 1
            yield batch

    return ray_data_iterable(one_pass)


def train_stream(passes):
    """`seeded_passes` one after another, for a loop that counts its own steps (a restored run draws
    `batches_drawn` batches first). Ends if a pass is empty."""
    while True:
        empty = True
        for batch in passes:
            empty = False
            yield batch
        if empty:
            return


def resumable(passes, drawn_before: int):
    """The train batches for `Trainer.train(resume_from_checkpoint=...)`, so that a restored run
    sees the batches the uninterrupted run saw, step for step.

    `passes` (`seeded_passes`) yields one pass over the shard per iteration, each in its own order.
    The Trainer cannot size a stream, so on resume it fast-forwards by drawing and dropping
    `drawn_before` batches (the steps trained, times gradient accumulation) in its first epoch,
    counted from the start of training. That first epoch therefore runs through every pass until
    that many batches were drawn, and ends at a pass's end, as the uninterrupted run's epochs did (a
    new epoch draws from torch's RNG, which the Trainer restores after its fast-forward). Every
    later epoch is one pass. Exact when gradient accumulation divides a pass."""
    first = [True]

    def epoch():
        if not first[0]:
            yield from passes
            return
        first[0] = False
        drawn = 0
        while True:
            before = drawn
            for batch in passes:
                drawn += 1
                yield batch
            if drawn >= drawn_before or drawn == before:  # caught up, or the shard is empty
                return

    return ray_data_iterable(epoch)


def length_grouped(shard, batch_size: int, collate, seed: int, shuffle: dict):
    import torch
    from transformers.trainer_pt_utils import get_length_grouped_indices

    generator = torch.Generator().manual_seed(seed)
    for examples in shard.iter_batches(batch_size=batch_size * MEGA_BATCHES, batch_format="numpy", **shuffle):
        lengths = [len(ids) for ids in examples["input_ids"]]
        order = get_length_grouped_indices(lengths, batch_size, mega_batch_mult=MEGA_BATCHES, generator=generator)
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            yield collate({column: values[rows] for column, values in examples.items()})


def validation_shard(data_cfg: DataConfig, batch_size: int, collate, device="auto"):
    """This worker's Ray Data shard of the validation split, as torch batches made model inputs by
    `collate`, when `data.datasets_to_split` holds it; None when every worker evaluates the whole
    split (from disk). Ray splits it into equal shards, so up to num_workers - 1 examples go
    unevaluated."""
    if "validation" not in data_cfg.datasets_to_split:
        return None
    return ray.train.get_dataset_shard("validation").iter_torch_batches(
        batch_size=batch_size, device=device, collate_fn=collate
    )


def quiet_logs(world_rank: int) -> None:
    """Leave progress to Tune's table: no per-report Ray lines, no save progress bars, and only
    errors from replicas other than rank 0."""
    import datasets
    import transformers

    logging.getLogger("ray.train").setLevel(logging.WARNING)
    quiet_train_report_log()
    transformers.utils.logging.disable_progress_bar()
    if world_rank != 0:
        transformers.logging.set_verbosity_error()
        datasets.logging.set_verbosity_error()
