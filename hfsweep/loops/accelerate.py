"""`loop=accelerate`: a plain Hugging Face Accelerate training loop instead of `transformers.Trainer`.

This is the pattern of Ray's "Distributed Training with Hugging Face Accelerate" example: an
`Accelerator` in every worker (it joins the process group Ray Train set up), `prepare` for model,
optimizer, scheduler and the evaluation loader, `accumulate` and `backward`, and
`gather_for_metrics` for evaluation, with the training data streamed from the worker's Ray Data
shard. It trains as the Trainer does, key for key: the seed, gradient accumulation, gradient
clipping at `max_grad_norm`, the training loss averaged over `logging_steps`, evaluation every
`eval_steps` (and at the last step), and a checkpoint and report every `save_steps` (and at the last step), through the
same `report`; it resumes the same way, so every scheduler (PBT included) treats both loops alike.
Both loops give the same losses, with one worker or several (`tests/e2e/test_loops_e2e.py`), up to
dropout: the Trainer's DataLoader takes a seed from torch's RNG each epoch, so its dropout masks
come from other draws.
On GPUs it takes the same fast defaults (`gpu.*`) from the same function (`hardware_defaults`).
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from inspect import signature

import datasets
import ray.train
import torch
import transformers
from accelerate import Accelerator
from torch.utils.data import DataLoader
from transformers import get_scheduler
from transformers.trainer_pt_utils import nested_concat, nested_numpify
from transformers.utils import enable_tf32, find_labels

from hfsweep.compat import decay_parameter_names
from hfsweep.contract.metrics import MAX_STEPS, progress
from hfsweep.contract.pointers import checkpoint_dir_name, checkpoint_step
from hfsweep.contract.protocols import IGNORED, EvalContext
from hfsweep.contract.recipe import TrainJob
from hfsweep.loops.common import (
    ADAMW_FUSED,
    GpuFeatures,
    WhatRan,
    apply_hyperparameters,
    attention,
    batches_drawn,
    check_finite,
    hardware_defaults,
    hyperparameters_in_effect,
    quiet_logs,
    report_to_sweep,
    resume_checkpoint,
    seeded_passes,
    train_stream,
    trained_to_the_end,
    validation_shard,
    with_perplexity,
    worker_seed,
)
from hfsweep.loops.cost import Cost
from hfsweep.models import build_model, weights_digest
from hfsweep.tasks.data_hooks import batches_collator, examples_collator

# The keys this loop reads that a config may leave unset: they take TrainingArguments' own defaults.
DEFAULTED_BY_THE_TRAINER = (
    "gradient_accumulation_steps",
    "max_grad_norm",
    "weight_decay",
    "warmup_steps",
    "logging_steps",
    "lr_scheduler_type",
)


def trainer_defaults() -> dict:
    fields = {f.name: f.default for f in dataclasses.fields(transformers.TrainingArguments)}
    return {key: fields[key] for key in DEFAULTED_BY_THE_TRAINER}


def accelerator_settings(training: dict, use_gpu: bool) -> dict:
    """The Accelerator's arguments, read from training.* as TrainingArguments reads the Trainer's:
    mixed precision, and torch.compile with the Trainer's default backend. TF32 is process-wide, so it
    is set here, by the function TrainingArguments(tf32=True) calls. One scheduler step per
    optimizer step: by default Accelerate steps it once per process, for a schedule written for one
    process, and the LR would decay num_workers times too fast."""
    if training.get("tf32"):
        enable_tf32(True)
    compiled = {"dynamo_backend": "inductor"} if training.get("torch_compile") else {}
    return dict(
        cpu=not use_gpu,
        mixed_precision="bf16" if training.get("bf16") else "fp16" if training.get("fp16") else "no",
        step_scheduler_with_optimizer=False,
        gradient_accumulation_steps=training["gradient_accumulation_steps"],
        **compiled,
    )


def _optimizer(model, training: dict) -> torch.optim.Optimizer:
    """AdamW with the Trainer's grouping (its own rule: no weight decay on biases and norms); its
    fused kernel where training.optim names it (the GPU default)."""
    decayed = set(decay_parameter_names(model))
    decay = [p for n, p in model.named_parameters() if n in decayed]
    no_decay = [p for n, p in model.named_parameters() if n not in decayed]
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": training["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}],
        lr=training["learning_rate"],
        fused=training.get("optim") == ADAMW_FUSED,
    )


def step_optimizer(accelerator: Accelerator, model, optimizer, lr_scheduler, max_grad_norm: float) -> None:
    """One micro-batch's optimizer call, as the Trainer makes it: on a step that syncs, clip the
    gradients, and step the schedule only when the optimizer stepped (fp16's loss scaler skips a
    step whose gradients overflowed; the schedule waits for it)."""
    if accelerator.sync_gradients and max_grad_norm > 0:
        accelerator.clip_grad_norm_(model.parameters(), max_grad_norm)
    optimizer.step()
    if accelerator.sync_gradients and not accelerator.optimizer_step_was_skipped:
        lr_scheduler.step()
    optimizer.zero_grad()


def _evaluate(accelerator: Accelerator, model, loader, compute_metrics) -> dict:
    """Mean eval loss over the whole validation set (or every worker's shard of it), each example
    counted once, their number, and `compute_metrics` on the gathered predictions, as the Trainer
    computes them: every output but the loss (question answering's start and end logits), against
    the batch's label inputs of the model's `forward` (`find_labels`: start and end positions)."""
    label_keys = find_labels(type(accelerator.unwrap_model(model)))
    model.eval()
    losses, logits, labels = [], None, None
    with torch.no_grad():
        for batch in loader:
            outputs = model(**batch)
            losses.append(accelerator.gather_for_metrics(outputs.loss.repeat(len(next(iter(batch.values()))))))
            if (
                compute_metrics
            ):  # per-token outputs of batches padded to their own longest: padded to one length, as the Trainer does
                batch_logits = _one_or_tuple(
                    [gathered(accelerator, v).float().cpu() for k, v in outputs.items() if k != "loss"]
                )
                batch_labels = _one_or_tuple([gathered(accelerator, batch[k]).cpu() for k in label_keys])
                logits = batch_logits if logits is None else nested_concat(logits, batch_logits, padding_index=IGNORED)
                labels = batch_labels if labels is None else nested_concat(labels, batch_labels, padding_index=IGNORED)
    model.train()
    losses = torch.cat(losses)
    metrics = {"eval_loss": losses.mean().item(), "eval_samples": len(losses)}
    if compute_metrics:
        computed = compute_metrics((nested_numpify(logits), nested_numpify(labels)))
        metrics.update({f"eval_{name}": value for name, value in computed.items()})
    return metrics


def _one_or_tuple(tensors: list):
    """The Trainer's shape of predictions and labels: one tensor, or a tuple of several."""
    return tensors[0] if len(tensors) == 1 else tuple(tensors)


def gathered(accelerator: Accelerator, tensor):
    """`tensor` from every process, padded to the longest's length first when it has a token axis."""
    if tensor.ndim > 1:
        tensor = accelerator.pad_across_processes(tensor, dim=1, pad_index=IGNORED)
    return accelerator.gather_for_metrics(tensor)


def _save(accelerator: Accelerator, model, tokenizer, path: str) -> None:
    """Accelerate's full training state, plus config and tokenizer so the folder also loads with
    `from_pretrained` (the weights are Accelerate's `model.safetensors`)."""
    accelerator.save_state(path, safe_serialization=True)
    if accelerator.is_main_process:
        accelerator.unwrap_model(model).config.save_pretrained(path)
        tokenizer.save_pretrained(path)
    accelerator.wait_for_everyone()


STEP_KEYS = ("warmup_steps", "logging_steps", "eval_steps", "save_steps")


def in_steps(training: dict) -> dict:
    """`training` with each of `STEP_KEYS` in steps: a value below 1 is a share of max_steps,
    rounded up, as the Trainer reads it (`TrainerState.compute_steps`, its warm-up)."""
    share = {key: training[key] for key in STEP_KEYS if isinstance(training.get(key), float) and 0 < training[key] < 1}
    return {**training, **{key: math.ceil(value * training["max_steps"]) for key, value in share.items()}}


def train_loop_per_worker(job: TrainJob) -> None:
    """Train with Accelerate for training.max_steps optimizer steps."""
    recipe, task, in_process = job.recipe, job.task, job.in_process
    resume_from = resume_checkpoint(job)
    if trained_to_the_end(resume_from, recipe.training):
        return
    training = in_steps({**trainer_defaults(), **recipe.training, **hardware_defaults(recipe, GpuFeatures.here())})
    accelerator = Accelerator(**accelerator_settings(training, recipe.use_gpu))
    world_size = 1 if in_process else ray.train.get_context().get_world_size()
    if accelerator.num_processes != world_size:  # each worker would train alone, silently
        raise RuntimeError(f"Accelerate sees {accelerator.num_processes} processes, Ray Train started {world_size}")
    quiet_logs(accelerator.process_index)
    tokenizer = task.load_processor(job.tokenizer_path)
    task.prepare_tokenizer(tokenizer, recipe.data)  # saved with every checkpoint's tokenizer (sft: its chat template)
    validation = datasets.load_from_disk(job.validation_path)
    transformers.set_seed(recipe.seed)  # every trial starts from the same initial weights
    model = build_model(recipe.model, tokenizer, job.label_names, task=task, attention=attention(recipe))
    transformers.set_seed(training.get("seed", recipe.seed))  # as the Trainer seeds itself, after the model
    if training.get("activation_checkpointing"):
        model.gradient_checkpointing_enable()
    optimizer = _optimizer(model, training)
    lr_scheduler = get_scheduler(
        training["lr_scheduler_type"],
        optimizer,
        num_warmup_steps=int(training["warmup_steps"]),
        num_training_steps=training["max_steps"],
    )
    ran, cost = WhatRan(model), Cost(model, task)
    # Only the columns the model takes, as the Trainer's remove_unused_columns keeps (question
    # answering's validation features also hold the example ids and offsets its metrics read).
    taken = signature(model.forward).parameters
    validation = validation.select_columns([c for c in validation.column_names if c in taken])
    model, optimizer, lr_scheduler = accelerator.prepare(model, optimizer, lr_scheduler)
    validation_collate = batches_collator(task, recipe.data_collator, tokenizer, "validation")
    eval_loader = validation_shard(
        recipe.data, training["per_device_eval_batch_size"], validation_collate, accelerator.device
    )
    if eval_loader is None:  # the whole split on every worker: Accelerate's prepared loader splits it
        eval_loader = accelerator.prepare(
            DataLoader(
                validation.with_format("torch"),
                batch_size=training["per_device_eval_batch_size"],
                collate_fn=examples_collator(task, recipe.data_collator, tokenizer),
            )
        )

    compute_metrics = task.metrics_for(
        recipe.compute_metrics,
        recipe.eval_metrics,
        EvalContext(job.label_names, tokenizer, job.validation_path, recipe.data),
    )
    step, extra, logged, reported_once = 0, {}, {}, {}
    if resume_from:
        accelerator.load_state(resume_from)
        step = checkpoint_step(resume_from)
        apply_hyperparameters(optimizer.optimizer, lr_scheduler.scheduler, training)  # Accelerate's wrappers hold them
        extra.update(resumed_from=resume_from, resumed_weights_digest=weights_digest(accelerator.unwrap_model(model)))

    train_collate = batches_collator(
        task, recipe.data_collator, tokenizer, "train", worker_seed(recipe.seed, in_process)
    )
    extra["startup_s"] = time.time() - job.trial_started_at
    cost.start()
    step_losses: list[float] = []  # one per optimizer step since the last log
    micro_losses: list[torch.Tensor] = []  # one per micro-batch of the current optimizer step
    model.train()
    shard = ray.train.get_dataset_shard("train")
    batches = train_stream(seeded_passes(shard, training, recipe.data, train_collate, recipe.seed, accelerator.device))
    for _ in range(batches_drawn(resume_from, training)):  # a restored run goes on where its checkpoint was saved
        next(batches)
    for batch in batches:
        with accelerator.accumulate(model):
            loss = model(**batch).loss
            micro_losses.append(loss.detach())
            accelerator.backward(loss)
            if accelerator.sync_gradients and resume_from and "lr_in_effect" not in reported_once:
                reported_once.update(hyperparameters_in_effect(optimizer))
                extra.update(reported_once)
            learning_rate = lr_scheduler.get_last_lr()[0]  # the rate this step trains at: the Trainer logs it
            step_optimizer(accelerator, model, optimizer, lr_scheduler, training["max_grad_norm"])
        if not accelerator.sync_gradients:
            continue
        step += 1
        step_losses.append(torch.stack(micro_losses).mean().item())
        micro_losses = []
        if step % training["logging_steps"] == 0:  # the mean over the workers, as the Trainer logs it
            mean = torch.tensor(sum(step_losses) / len(step_losses), device=accelerator.device)
            logged["loss"] = accelerator.reduce(mean, reduction="mean").item()
            logged["learning_rate"] = learning_rate
            check_finite("loss", logged["loss"], step)
            step_losses = []
        if step % training["eval_steps"] == 0 or step == training["max_steps"]:  # the Trainer evaluates at the end too
            logged.update(_evaluate(accelerator, model, eval_loader, compute_metrics))
            check_finite("eval_loss", logged["eval_loss"], step)
        if step % training["save_steps"] == 0 or step == training["max_steps"]:
            metrics = with_perplexity(
                {
                    **extra,
                    **logged,
                    **ran.metrics(),
                    **cost.metrics(),
                    "step": step,
                    MAX_STEPS: training["max_steps"],
                    **progress(step, training, world_size, job.train_examples),
                    "trainer_finished": step >= training["max_steps"],
                },
                task,
            )
            extra = {}
            path = os.path.join(job.output_dir, checkpoint_dir_name(step))
            _save(accelerator, model, tokenizer, path)
            report_to_sweep(metrics, path if accelerator.is_main_process else None, in_process)
        if step >= training["max_steps"]:
            break
