"""Custom `transformers.Trainer` subclasses, chosen by config (`trainer._target_`, conf/trainer/).

Any Trainer subclass importable on the workers works the same way; this one is the Trainer
guide's example of overriding `compute_loss`.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import Trainer


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
