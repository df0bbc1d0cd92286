"""`loop=accelerate`: a plain Hugging Face Accelerate training loop instead of `transformers.Trainer`.

This is the pattern of Ray's "Distributed Training with Hugging Face Accelerate" example: an
`Accelerator` in every worker (it joins the process group Ray Train set up), `prepare` for model,
optimizer, scheduler and the evaluation loader, `backward`, and `gather_for_metrics` for
evaluation, with the training data streamed from the worker's Ray Data shard. It evaluates, saves
and reports every `training.save_steps` (and at the last step), as the Trainer loop reports, through the same `report`, and resumes the
same way, so every scheduler (PBT included) treats both loops alike.
"""

from __future__ import annotations

import math
import os
import time

import datasets
import ray.train
import torch
import transformers
from accelerate import Accelerator
from torch.utils.data import DataLoader
from transformers import default_data_collator, get_scheduler

from hfsweep.data import label_names
from hfsweep.metrics import compute_metrics_for
from hfsweep.models import build_model, load_tokenizer, weights_digest
from hfsweep.worker import apply_hyperparameters, quiet_logs, report, resume_checkpoint, validation_shard


def _optimizer(model, training: dict) -> torch.optim.Optimizer:
    """AdamW with the Trainer's grouping: no weight decay on biases and LayerNorm weights."""
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": training.get("weight_decay", 0.0)}, {"params": no_decay, "weight_decay": 0.0}],
        lr=training["learning_rate"],
    )


def _evaluate(accelerator: Accelerator, model, loader, metric_names: list[str]) -> dict:
    """Mean eval loss over the whole validation set (or every worker's shard of it), each example
    counted once, their number, and the configured `eval_metrics` on the gathered logits, as the
    Trainer computes them."""
    model.eval()
    losses, logits, labels = [], [], []
    with torch.no_grad():
        for batch in loader:
            outputs = model(**batch)
            losses.append(accelerator.gather_for_metrics(outputs.loss.repeat(batch["input_ids"].shape[0])))
            if metric_names:
                logits.append(accelerator.gather_for_metrics(outputs.logits).float().cpu())
                labels.append(accelerator.gather_for_metrics(batch["labels"]).cpu())
    model.train()
    losses = torch.cat(losses)
    eval_loss = losses.mean().item()
    metrics = {"eval_loss": eval_loss, "eval_perplexity": math.exp(min(eval_loss, 50.0)), "eval_samples": len(losses)}
    if metric_names:
        computed = compute_metrics_for(metric_names)((torch.cat(logits).numpy(), torch.cat(labels).numpy()))
        metrics.update({f"eval_{name}": value for name, value in computed.items()})
    return metrics


def _save(accelerator: Accelerator, model, tokenizer, path: str) -> None:
    """Accelerate's full training state, plus config and tokenizer so the folder also loads with
    `from_pretrained` (the weights are Accelerate's `model.safetensors`)."""
    accelerator.save_state(path, safe_serialization=True)
    if accelerator.is_main_process:
        accelerator.unwrap_model(model).config.save_pretrained(path)
        tokenizer.save_pretrained(path)
    accelerator.wait_for_everyone()


def accelerate_loop_per_worker(config: dict) -> None:
    """Train with Accelerate for training.max_steps; evaluate, save and report every save_steps."""
    cfg, training = config["cfg"], config["cfg"]["training"]
    in_process = config["in_process"]
    precision = "bf16" if training.get("bf16") else "fp16" if training.get("fp16") else "no"
    # One scheduler step per optimizer step: by default Accelerate steps it once per process, for a
    # schedule written for one process, and the LR would decay num_workers times too fast.
    accelerator = Accelerator(cpu=not cfg["cluster"]["use_gpu"], mixed_precision=precision, step_scheduler_with_optimizer=False)
    world_size = 1 if in_process else ray.train.get_context().get_world_size()
    if accelerator.num_processes != world_size:  # each worker would train alone, silently
        raise RuntimeError(f"Accelerate sees {accelerator.num_processes} processes, Ray Train started {world_size}")
    quiet_logs(accelerator.process_index)
    tokenizer = load_tokenizer(config["tokenizer_path"])
    validation = datasets.load_from_disk(config["validation_path"])
    transformers.set_seed(cfg["seed"])  # every trial starts from the same initial weights
    model = build_model(cfg["model"], tokenizer, label_names(validation))
    if training.get("activation_checkpointing"):
        model.gradient_checkpointing_enable()
    optimizer = _optimizer(model, training)
    lr_scheduler = get_scheduler(
        training.get("lr_scheduler_type", "linear"), optimizer,
        num_warmup_steps=training.get("warmup_steps", 0), num_training_steps=training["max_steps"],
    )
    model, optimizer, lr_scheduler = accelerator.prepare(model, optimizer, lr_scheduler)
    eval_loader = validation_shard(cfg, accelerator.device)
    if eval_loader is None:  # the whole split on every worker: Accelerate's prepared loader splits it
        eval_loader = accelerator.prepare(
            DataLoader(validation.with_format("torch"), batch_size=training["per_device_eval_batch_size"], collate_fn=default_data_collator)
        )

    step, extra = 0, {}
    resume_from = resume_checkpoint(config)
    if resume_from:
        accelerator.load_state(resume_from)
        step = int(os.path.basename(resume_from).rsplit("-", 1)[1])
        apply_hyperparameters(optimizer.optimizer, lr_scheduler.scheduler, training)  # Accelerate's wrappers hold them
        extra.update(resumed_from=resume_from, resumed_weights_digest=weights_digest(accelerator.unwrap_model(model)))

    batch_size = training["per_device_train_batch_size"]
    shard = ray.train.get_dataset_shard("train")
    extra["startup_s"] = time.time() - config["trial_started_at"]
    model.train()
    while step < training["max_steps"]:
        epoch_seed = cfg["seed"] + step  # a fresh shuffle each pass over the shard
        for batch in shard.iter_torch_batches(batch_size=batch_size, local_shuffle_buffer_size=4 * batch_size,
                                              local_shuffle_seed=epoch_seed, device=accelerator.device):
            loss = model(**batch).loss
            accelerator.backward(loss)
            optimizer.step()
            lr_scheduler.step()
            optimizer.zero_grad()
            step += 1
            if step % training["save_steps"] == 0 or step == training["max_steps"]:
                if not math.isfinite(loss.item()):
                    raise FloatingPointError(f"training diverged: loss is {loss.item()} at step {step}")
                metrics = {**extra, **_evaluate(accelerator, model, eval_loader, cfg["eval_metrics"]), "loss": loss.item(),
                           "learning_rate": lr_scheduler.get_last_lr()[0], "step": step,
                           "trainer_finished": step >= training["max_steps"]}
                extra = {}
                path = os.path.join(config["output_dir"], f"checkpoint-{step}")
                _save(accelerator, model, tokenizer, path)
                report(metrics, path if accelerator.is_main_process else None, in_process)
            if step >= training["max_steps"]:
                break
