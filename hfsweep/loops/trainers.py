"""Custom `transformers.Trainer` subclasses, chosen by config (`trainer._target_`, conf/trainer/).

Any Trainer subclass importable on the workers works the same way. `ClassWeightedTrainer` is the
Trainer guide's example of overriding `compute_loss`; `GenerationEvalTrainer` is the seq2seq
presets' Trainer.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import nn
from transformers import Seq2SeqTrainer, Trainer


class ClassWeightedTrainer(Trainer):
    """Cross-entropy with one weight per class, for imbalanced classification data."""

    loss_is_scaled_for_ga = False  # a per-batch mean: the Trainer divides it for gradient accumulation

    def __init__(self, *args, class_weights: list[float], **kwargs):
        super().__init__(*args, **kwargs)
        self.class_weights = torch.tensor(class_weights, dtype=torch.float32)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        labels = inputs.pop("labels")
        outputs = model(**inputs)
        logits = outputs.logits
        loss_fct = nn.CrossEntropyLoss(weight=self.class_weights.to(logits.device, logits.dtype))
        loss = loss_fct(logits.view(-1, logits.size(-1)), labels.view(-1))
        return (loss, outputs) if return_outputs else loss


class GenerationEvalTrainer(Seq2SeqTrainer):
    """A `Seq2SeqTrainer` whose evaluations always measure eval_loss on the whole validation split
    (teacher-forced, cheap) and generate only every `every_k_evals`-th time, on the first
    `max_eval_samples` examples (None: all), with `num_beams` and `max_new_tokens`.

    What a scheduler sees: eval_loss in every report; ROUGE, BLEU and gen_len in every K-th (the
    others carry the last values in the report's history, so sweep on eval_loss, or set K to 1
    to sweep on a generation metric; validation refuses the mix).
    """

    def __init__(
        self,
        *args,
        every_k_evals: int = 1,
        max_eval_samples: Optional[int] = None,
        num_beams: int = 1,
        max_new_tokens: int = 64,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        self.every_k_evals, self.max_eval_samples = every_k_evals, max_eval_samples
        self.generate_kwargs = {"num_beams": num_beams, "max_new_tokens": max_new_tokens}
        self.evaluations = 0

    def evaluate(self, eval_dataset=None, ignore_keys=None, metric_key_prefix: str = "eval", **gen_kwargs):
        self.evaluations += 1
        scoring, self.compute_metrics = self.compute_metrics, None
        generating, self.args.predict_with_generate = self.args.predict_with_generate, False
        try:
            metrics = super().evaluate(eval_dataset, ignore_keys, metric_key_prefix)
        finally:
            self.compute_metrics, self.args.predict_with_generate = scoring, generating
        if scoring is None or self.evaluations % self.every_k_evals:
            return metrics
        dataset = self.eval_dataset if eval_dataset is None else eval_dataset
        if self.max_eval_samples:
            dataset = dataset.select(range(min(self.max_eval_samples, len(dataset))))
        self.args.predict_with_generate = True
        try:
            output = self.predict(dataset, ignore_keys, metric_key_prefix, **{**self.generate_kwargs, **gen_kwargs})
        finally:
            self.args.predict_with_generate = generating
        skipped = {
            f"{metric_key_prefix}_{name}" for name in ("loss", "runtime", "samples_per_second", "steps_per_second")
        }
        generated = {k: v for k, v in output.metrics.items() if k not in skipped}
        self.log(generated)  # into the log history every report is read from
        return {**metrics, **generated}
